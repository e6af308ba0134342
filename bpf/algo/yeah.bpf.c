// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* yeah.bpf.c - YeAH-TCP as a BPF struct_ops tcp_congestion_ops, registered as "bpf_yeah".
 *
 * YeAH-TCP: [P3] Baiocchi, Castellani, Vacirca, "YeAH-TCP: Yet Another Highspeed
 * TCP", PFLDnet 2007, §III. Spec: shared/spec/algorithms.md §10.
 *
 *   per RTT (>= 3 RTT samples, RTT_min their minimum):
 *     RTT_queue = RTT_min − RTT_base;  Q = RTT_queue · cwnd / RTT_min;
 *     L = RTT_queue / RTT_base
 *     Fast mode iff Q < Q_max and L < 1/φ: STCP growth (+1 per 1/a acked packets
 *       above cwnd 1/a, Reno below); otherwise Slow mode: Reno growth, and if
 *       Q > Q_max and cwnd > count_reno: cwnd −= min(Q/γ, cwnd/2^ε) (>= count_reno),
 *       ssthresh = cwnd (precautionary decongestion)
 *     count_reno + 1 per Slow RTT; count_fast + 1 per Fast RTT, reset of
 *     count_reno after ζ Fast RTTs
 *   loss: fewer than ρ consecutive Slow RTTs: cwnd −= clamp(lastQ, cwnd/2^δ, cwnd/2);
 *         else cwnd/2; count_reno halved
 * The arithmetic is in yeah_math.h.
 *
 * Differences from the Linux module (net/ipv4/tcp_yeah.c):
 *   - defaults take the paper's real-valued tests (Fast iff Q < Q_max and
 *     L < 1/φ, decongestion iff Q > Q_max, compared exactly), where Linux tests
 *     truncated integers (Q > Q_max, RTT_queue > ⌊RTT_base/φ⌋); and count_reno
 *     starts at cwnd/2 and is reset to cwnd/2 as [P3] says, where Linux uses the
 *     sentinel 2 and sets it at the first Slow RTT. The `linux` profile
 *     (linux_rules = 1) does both the Linux way;
 *   - the constants Linux hard-codes (Q_max 80, φ 8, γ 1, ε 1, δ 3, ρ 16, ζ 50,
 *     STCP 1/a = 100) are tunables with those defaults (the paper leaves them open);
 *   - RTT samples are taken only in Open state (spec §10), Linux takes them in
 *     every state;
 *   - ack_counting = 1 counts ACK events instead of acked packets (spec §18.2);
 *   - no snd_cwnd_clamp lowering: the arithmetic here is 64-bit.
 */
#include "cc_common.bpf.h"
#include "yeah_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_yeah_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_yeah_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_yeah_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_yeah_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load): modes that per-flow state is
 * built for (with linux_rules count_reno starts at the sentinel 2 and is set at the
 * first Slow RTT, without it at cwnd/2; the increase counter counts packets or ACK
 * events). */
const volatile __u32 linux_rules = 0;    /* bool: Linux's integer tests and count_reno sentinel */
const volatile __u32 ack_counting = 0;   /* 0 = packets (ABC), 1 = ACK events */

/* Live tunables (spec §18.5: the queue bound, thresholds, gains and shifts; `cctl set`;
 * defaults: spec §10, Linux's values where [P3] is silent), read once per callback
 * from the slot in force. */
struct yeah_live {
	__u32 q_max_pkts;     /* Q_max, packets (Linux TCP_YEAH_ALPHA) */
	__u32 phy;            /* φ: Slow once RTT_queue >= RTT_base/φ (TCP_YEAH_PHY) */
	__u32 gamma;          /* decongestion removes Q/γ (TCP_YEAH_GAMMA) */
	__u32 epsilon_shift;  /* at most cwnd >> ε per decongestion (TCP_YEAH_EPSILON) */
	__u32 delta_shift;    /* a loss removes at least cwnd >> δ (TCP_YEAH_DELTA) */
	__u32 rho_rtts;       /* ρ: consecutive Slow RTTs meaning Reno competition */
	__u32 zeta_rtts;      /* ζ: Fast RTTs before count_reno is reset */
	__u32 stcp_ai_cnt;    /* 1/a of the STCP increase, packets */
};
CCTL_LIVE_PARAMS(struct yeah_live, {
	.q_max_pkts = 80,
	.phy = 8,
	.gamma = 1,
	.epsilon_shift = 1,
	.delta_shift = 3,
	.rho_rtts = 16,
	.zeta_rtts = 50,
	.stcp_ai_cnt = 100,
})

#define YEAH_NO_RTT 0xffffffffu

static __always_inline struct cctl_yeah_ca *yeah_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

static __always_inline void yeah_params_get(struct yeah_params *p, const struct yeah_live *l)
{
	p->q_max_pkts = l->q_max_pkts;
	p->phy = l->phy;
	p->gamma = l->gamma;
	p->epsilon_shift = l->epsilon_shift;
	p->delta_shift = l->delta_shift;
	p->rho_rtts = l->rho_rtts;
	p->zeta_rtts = l->zeta_rtts;
	p->linux_rules = linux_rules;
}

static __always_inline bool yeah_after(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq2 - seq1) < 0;
}

/* Start a fresh RTT of sampling (Vegas's enable). */
static __always_inline void yeah_sampling_restart(struct cctl_yeah_ca *ca,
						  const struct tcp_sock *tp)
{
	ca->doing_vegas_now = 1;
	ca->beg_snd_nxt = tp->snd_nxt;
	ca->cnt_rtt = 0;
	ca->min_rtt_us = YEAH_NO_RTT;
}

SEC("struct_ops/yeah_init")
void BPF_PROG(yeah_init, struct sock *sk)
{
	struct cctl_yeah_ca *ca = yeah_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct yeah_params p;

	yeah_params_get(&p, cctl_live_get());
	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	ca->reno_count = yeah_initial_reno_count(tp->snd_cwnd, &p);
	yeah_sampling_restart(ca, tp);
}

SEC("struct_ops/yeah_pkts_acked")
void BPF_PROG(yeah_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_yeah_ca *ca = yeah_ca(sk);
	__u8 state = cc_ca_state(sk);
	__u32 vrtt;

	if (sample->rtt_us < 0)
		return;
	cc_meas_rtt(&ca->m, sample->rtt_us, state, 0);
	if (state != TCP_CA_Open)
		return;
	vrtt = (__u32)sample->rtt_us + 1; /* never 0 */
	if (!ca->base_rtt_us || vrtt < ca->base_rtt_us)
		ca->base_rtt_us = vrtt;
	if (vrtt < ca->min_rtt_us)
		ca->min_rtt_us = vrtt;
	ca->cnt_rtt++;
}

SEC("struct_ops/yeah_cong_avoid")
void BPF_PROG(yeah_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_yeah_ca *ca = yeah_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	const struct yeah_live *l;
	__u32 stcp_ai_cnt;

	if (!cc_cwnd_limited(sk))
		return;
	if (ack_counting)
		acked = 1;

	/* every live value of this ACK from one slot */
	l = cctl_live_get();
	stcp_ai_cnt = l->stcp_ai_cnt;
	if (cc_in_slow_start(tp))
		acked = tcp_slow_start(tp, acked);
	if (acked) {
		if (!ca->doing_reno_now) /* Fast mode: STCP */
			tcp_cong_avoid_ai(tp, tp->snd_cwnd < stcp_ai_cnt ? tp->snd_cwnd : stcp_ai_cnt,
					  acked);
		else /* Slow mode: Reno */
			tcp_cong_avoid_ai(tp, tp->snd_cwnd, acked);
	}

	if (yeah_after(ack, ca->beg_snd_nxt)) {
		if (ca->cnt_rtt > 2) {
			struct yeah_params p;
			struct yeah_rtt r;
			__u32 ssthresh = tp->snd_ssthresh;

			yeah_params_get(&p, l);
			r.rtt_us = ca->min_rtt_us;
			r.base_us = ca->base_rtt_us;
			tp->snd_cwnd = yeah_per_rtt(ca, tp->snd_cwnd, &ssthresh, &r, &p);
			tp->snd_ssthresh = ssthresh;
		}
		ca->beg_snd_nxt = tp->snd_nxt;
		ca->cnt_rtt = 0;
		ca->min_rtt_us = YEAH_NO_RTT;
	}
}

SEC("struct_ops/yeah_ssthresh")
__u32 BPF_PROG(yeah_ssthresh, struct sock *sk)
{
	struct cctl_yeah_ca *ca = yeah_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct yeah_params p;
	__u32 cwnd = tp->snd_cwnd, s;

	yeah_params_get(&p, cctl_live_get());
	s = yeah_loss_ssthresh(ca, cwnd, &p);
	cc_meas_backoff(&ca->m, cwnd ? (__u32)(((__u64)s << CCTL_FP_SHIFT) / cwnd) : CCTL_FP_ONE);
	return s;
}

SEC("struct_ops/yeah_set_state")
void BPF_PROG(yeah_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_yeah_ca *ca = yeah_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (new_state == TCP_CA_Open) {
		yeah_sampling_restart(ca, tp);
		return;
	}
	ca->doing_vegas_now = 0;
	if (new_state == TCP_CA_CWR || new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss)
		cc_meas_cong_event(&ca->m, tp);
}

SEC("struct_ops/yeah_cwnd_event")
void BPF_PROG(yeah_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct cctl_yeah_ca *ca = yeah_ca(sk);

	/* after idle the path may have changed: forget RTT_base (as Vegas) */
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START) {
		ca->base_rtt_us = 0;
		yeah_sampling_restart(ca, cc_tcp_sk(sk));
	}
}

SEC("struct_ops/yeah_undo_cwnd")
__u32 BPF_PROG(yeah_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops yeah = {
	.init = (void *)yeah_init,
	.ssthresh = (void *)yeah_ssthresh,
	.cong_avoid = (void *)yeah_cong_avoid,
	.set_state = (void *)yeah_set_state,
	.cwnd_event = (void *)yeah_cwnd_event,
	.undo_cwnd = (void *)yeah_undo_cwnd,
	.pkts_acked = (void *)yeah_pkts_acked,
	.name = "bpf_yeah",
};
