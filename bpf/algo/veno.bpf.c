// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* veno.bpf.c - TCP Veno as a BPF struct_ops tcp_congestion_ops, registered as "bpf_veno".
 *
 * TCP Veno: Fu & Liew, "TCP Veno: TCP enhancement for transmission over wireless
 * access networks", IEEE JSAC 21(2), 2003, §II (the Vegas backlog estimate
 * N = Actual·(RTT − BaseRTT) = cwnd·(RTT − BaseRTT)/RTT, §II-A; the refined
 * multiplicative decrease, §II-B; the refined additive increase, §II-C).
 * Spec: shared/spec/algorithms.md §19.2.
 *
 *   BaseRTT = minimum RTT sample;  RTT = minimum sample over the last round trip
 *   N = w (RTT − BaseRTT) / RTT                       (once per round trip)
 *   CA:   N < β  -> w += 1/w per acked packet (Reno, +1 per RTT)
 *         N >= β -> +1 segment every other RTT
 *   loss: N < β  -> ssthresh = max(w·4/5, 2) (random loss)
 *         N >= β -> ssthresh = max(w/2, 2)   (congestive loss)
 *   slow start, RTO, undo: Reno; outside Open state: Reno.
 *   Before the first estimate (and with <= 2 RTT samples in the first round):
 *   Reno; a loss then counts as random (N = 0), as in Linux.
 *
 * The decisions are in veno_math.h (exact integer comparisons).
 *
 * Differences from the Linux module (net/ipv4/tcp_veno.c):
 *   - Linux resets its RTT minimum after every cong_avoid call, so its "RTT" is
 *     the minimum over the samples since the previous ACK (usually that ACK's
 *     own sample), and an ACK without a sample leaves it at 0x7fffffff, which
 *     makes that ACK look congested (N ≈ w); here RTT is the minimum over the
 *     last round trip (spec §19.2, as Vegas: rounds end at an ACK beyond the
 *     snd_nxt of the round's start), and N is re-estimated once per round from
 *     a round with >= 3 samples;
 *   - Linux counts its RTT samples since init and never resets the count (the
 *     Reno fallback for <= 2 samples only covers a flow's first samples); here
 *     the count is per round, and a round with <= 2 samples keeps the previous
 *     estimate;
 *   - Linux holds N in half packets, rounded up (diff = 2w − ⌊2w BaseRTT/RTT⌋),
 *     so its N < β is N <= β − 1/2; here N < β is exact;
 *   - Linux's every-other-RTT count skips the ACKs of the call that completes
 *     an RTT and completes at most one RTT per call; here acked packets carry
 *     over and several RTTs may complete in one call;
 *   - β and the random-loss factor (Linux: 3 and 4/5, constants) are tunables;
 *     ack_counting = 1 counts ACK events (Linux counts acked packets, as the
 *     default here);
 *   - otherwise the same: RTT samples + 1 us, BaseRTT forgotten on idle restart,
 *     the toggle reset to "increase" on restart, sampling restarted on entering
 *     Open, w kept in [2, snd_cwnd_clamp].
 * The `linux` profile (linux_compat = 1) reproduces the per-ACK RTT minimum, the
 * sample count since init, the half-packet N and Linux's RTT count.
 */
#include "cc_common.bpf.h"
#include "veno_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_veno_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_veno_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_veno_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_veno_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load; defaults: the paper's, spec
 * §19.2): modes that per-flow state is built for (linux_compat: Linux's RTT count
 * since init and per-ACK estimate instead of per-round sampling; the increase counter
 * counts packets or ACK events). */
const volatile __u32 linux_compat = 0;      /* bool: net/ipv4/tcp_veno.c's estimate */
const volatile __u32 ack_counting = 0;      /* 0 = packets (ABC), 1 = ACK events */

/* Live tunables (spec §18.5: the congestion threshold and the random-loss backoff;
 * `cctl set`), read once per callback from the slot in force. */
struct veno_live {
	__u32 beta_pkts;        /* β: congested when N >= β, packets */
	__u32 loss_factor_pct;  /* random-loss backoff, % of cwnd (4/5) */
};
CCTL_LIVE_PARAMS(struct veno_live, {
	.beta_pkts = 3,
	.loss_factor_pct = 80,
})

#define VENO_NO_RTT 0x7fffffffu

static __always_inline struct cctl_veno_ca *veno_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

static __always_inline bool veno_after(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq2 - seq1) < 0;
}

static __always_inline void veno_params_get(struct veno_params *p)
{
	const struct veno_live *l = cctl_live_get();

	p->beta_pkts = l->beta_pkts;
	p->loss_factor_pct = l->loss_factor_pct;
	p->linux_compat = linux_compat;
}

/* Start a fresh round of sampling and let the Veno rules run. */
static __always_inline void veno_enable(struct cctl_veno_ca *ca, const struct tcp_sock *tp)
{
	ca->doing_veno_now = 1;
	ca->min_rtt_us = VENO_NO_RTT;
	ca->beg_snd_nxt = tp->snd_nxt;
	if (!linux_compat)
		ca->cnt_rtt = 0;
}

/* Connection start and idle restart: forget BaseRTT, next congested RTT grows. */
static __always_inline void veno_restart(struct cctl_veno_ca *ca, const struct tcp_sock *tp)
{
	ca->base_rtt_us = VENO_NO_RTT;
	ca->inc = 1;
	veno_enable(ca, tp);
}

/* One estimate of N from the round minimum rtt. */
static __always_inline void veno_estimate(struct cctl_veno_ca *ca, const struct tcp_sock *tp,
					  __u32 rtt, const struct veno_params *p)
{
	ca->congested = veno_is_congested(tp->snd_cwnd, rtt, ca->base_rtt_us, p);
	ca->backlog_fp = veno_backlog_fp(tp->snd_cwnd, rtt, ca->base_rtt_us);
	ca->last_rtt_us = rtt;
}

/* Growth with an estimate: slow start, then Reno's AI or every other RTT. */
static __always_inline void veno_grow(struct cctl_veno_ca *ca, struct tcp_sock *tp, __u32 n,
				      const struct veno_params *p)
{
	if (cc_in_slow_start(tp))
		n = tcp_slow_start(tp, n);
	if (n) {
		if (!ca->congested) {
			tcp_cong_avoid_ai(tp, tp->snd_cwnd, n);
		} else {
			struct veno_ai s;

			s.cwnd = tp->snd_cwnd;
			s.cwnd_cnt = tp->snd_cwnd_cnt;
			s.clamp = tp->snd_cwnd_clamp;
			s.acked = n;
			s.inc = ca->inc;
			veno_congested_ai(&s, p);
			tp->snd_cwnd = s.cwnd;
			tp->snd_cwnd_cnt = s.cwnd_cnt;
			ca->inc = s.inc;
		}
	}
	if (tp->snd_cwnd < 2)
		tp->snd_cwnd = 2;
	else if (tp->snd_cwnd > tp->snd_cwnd_clamp)
		tp->snd_cwnd = tp->snd_cwnd_clamp;
}

SEC("struct_ops/veno_init")
void BPF_PROG(veno_init, struct sock *sk)
{
	struct cctl_veno_ca *ca = veno_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	veno_restart(ca, tp);
}

SEC("struct_ops/veno_pkts_acked")
void BPF_PROG(veno_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_veno_ca *ca = veno_ca(sk);
	__u32 vrtt;

	if (sample->rtt_us < 0)
		return;
	cc_meas_rtt(&ca->m, sample->rtt_us, cc_ca_state(sk), 0);
	/* + 1 us so that neither RTT is ever 0 (as Linux) */
	vrtt = (__u32)sample->rtt_us + 1;
	if (vrtt < ca->base_rtt_us)
		ca->base_rtt_us = vrtt;
	if (vrtt < ca->min_rtt_us)
		ca->min_rtt_us = vrtt;
	ca->cnt_rtt++;
}

SEC("struct_ops/veno_cong_avoid")
void BPF_PROG(veno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_veno_ca *ca = veno_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct veno_params p;

	if (ack_counting)
		acked = 1;
	if (!ca->doing_veno_now) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (!cc_cwnd_limited(sk))
		return;
	/* every live value of this ACK from one slot */
	veno_params_get(&p);

	if (linux_compat) {
		/* Linux: estimate on every ACK from the samples since the previous one */
		if (ca->cnt_rtt <= 2) {
			tcp_reno_cong_avoid(sk, ack, acked);
		} else {
			veno_estimate(ca, tp, ca->min_rtt_us, &p);
			veno_grow(ca, tp, acked, &p);
		}
		ca->min_rtt_us = VENO_NO_RTT;
		return;
	}

	if (veno_after(ack, ca->beg_snd_nxt)) {
		/* a round trip is over: estimate N from its minimum RTT */
		ca->beg_snd_nxt = tp->snd_nxt;
		if (ca->cnt_rtt > 2)
			veno_estimate(ca, tp, ca->min_rtt_us, &p);
		ca->cnt_rtt = 0;
		ca->min_rtt_us = VENO_NO_RTT;
	}
	if (!ca->last_rtt_us) {
		/* no estimate yet: Reno */
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	veno_grow(ca, tp, acked, &p);
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/veno_ssthresh")
__u32 BPF_PROG(veno_ssthresh, struct sock *sk)
{
	struct cctl_veno_ca *ca = veno_ca(sk);
	struct veno_params p;

	veno_params_get(&p);
	cc_meas_backoff(&ca->m, veno_beta_fp(ca->congested, &p));
	return veno_ssthresh_segs(cc_tcp_sk(sk)->snd_cwnd, ca->congested, &p);
}

SEC("struct_ops/veno_set_state")
void BPF_PROG(veno_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_veno_ca *ca = veno_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (new_state == TCP_CA_Open) {
		veno_enable(ca, tp);
		return;
	}
	ca->doing_veno_now = 0;
	if (new_state == TCP_CA_CWR || new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss)
		cc_meas_cong_event(&ca->m, tp);
}

SEC("struct_ops/veno_cwnd_event")
void BPF_PROG(veno_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	/* after idle the path may have changed: forget BaseRTT */
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START)
		veno_restart(veno_ca(sk), cc_tcp_sk(sk));
}

SEC("struct_ops/veno_undo_cwnd")
__u32 BPF_PROG(veno_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops veno = {
	.init = (void *)veno_init,
	.ssthresh = (void *)veno_ssthresh,
	.cong_avoid = (void *)veno_cong_avoid,
	.set_state = (void *)veno_set_state,
	.cwnd_event = (void *)veno_cwnd_event,
	.undo_cwnd = (void *)veno_undo_cwnd,
	.pkts_acked = (void *)veno_pkts_acked,
	.name = "bpf_veno",
};
