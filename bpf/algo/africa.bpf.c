// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* africa.bpf.c - TCP Africa as a BPF struct_ops tcp_congestion_ops, registered as
 * "bpf_africa".
 *
 * TCP Africa: King, Baraniuk, Riedi, "TCP-Africa: an adaptive and fair rapid
 * increase rule for scalable TCP", Infocom 2005; as described and tested in
 * [P3] Baiocchi, Castellani, Vacirca, PFLDnet 2007, §II and §V.
 * Spec: shared/spec/algorithms.md §11.
 *
 *   once per RTT      Δ̂ = w (RTT - baseRTT) / RTT   (RTT: the round's minimum
 *                     sample, baseRTT: the flow's minimum; Vegas-style)
 *                     fast mode if Δ̂ < α_africa, slow mode otherwise
 *   ACK, fast mode    w += a_HSTCP(w) / w per acked packet (RFC 3649's a(w),
 *                     table or formulas, highspeed_math.h)
 *   ACK, slow mode    w += 1 / w per acked packet (Reno)
 *   loss / ECN / RTO  w <- w / 2 ([P3] §V-A: the hybrid algorithms halve)
 *   slow start        standard ([GAP]; spec §11 [CHOICE])
 *
 * A round ends at the first ACK beyond the snd_nxt recorded when it began (as
 * Vegas does); it is measured in slow start as well, so the mode is known when
 * congestion avoidance starts. The flow starts in fast mode (Δ̂ = 0 with no
 * sample yet); a round without RTT samples keeps the mode.
 *
 * There is no Linux module. α_africa is [GAP] in the papers: a tunable, default
 * 2 packets ([CHOICE], spec §11: "of the order of 1-3 packets"). The HSTCP
 * parameters default to RFC 3649's table (W_L 38), the rule as published.
 */
#include "cc_common.bpf.h"
#include "africa_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_africa_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_africa_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_africa_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_africa_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load): modes that per-flow state is
 * built for (fast mode's a(w) from RFC 3649's table or formulas, cached per flow;
 * the increase counter counts packets or ACK events). */
const volatile __u32 hstcp_mode = HSTCP_MODE_TABLE;  /* 0 = table, 1 = interpolate */
const volatile __u32 ack_counting = 0;               /* 0 = packets (ABC), 1 = ACK events */

/* Live tunables (spec §18.5: the mode threshold and the HSTCP response function's
 * bounds; `cctl set`; spec §11 [CHOICE] and RFC 3649), read once per callback from
 * the slot in force. The a(w) cached per flow follows a change at the flow's next
 * cwnd change; α_africa at the next round end. */
struct africa_live {
	__u32 alpha_cpkt;               /* α_africa, 1/100 packet */
	__u32 low_window_pkts;          /* HSTCP W_L, segments */
	__u32 high_window_pkts;         /* HSTCP W_H, segments */
	__u32 high_p_ppb;               /* HSTCP P_H, per 10^9 */
	__u32 high_decrease_per_mille;  /* HSTCP b_H, 1/1000 */
};
CCTL_LIVE_PARAMS(struct africa_live, {
	.alpha_cpkt = 200,
	.low_window_pkts = 38,
	.high_window_pkts = 83000,
	.high_p_ppb = 100,
	.high_decrease_per_mille = 100,
})

#define AFRICA_BETA_FP (CCTL_FP_ONE / 2)

static __always_inline struct cctl_africa_ca *africa_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

/* HSTCP's a(w) for this cwnd (cached per cwnd). */
static __always_inline __u32 africa_hstcp_a(struct cctl_africa_ca *ca, __u32 cwnd,
					    const struct africa_live *l)
{
	__u32 a, b;

	if (ca->a_cwnd != cwnd) {
		ca->idx = hstcp_table_index(cwnd);
		if (hstcp_mode == HSTCP_MODE_TABLE) {
			hstcp_table_ab(ca->idx, &a, &b);
		} else {
			struct highspeed_params p;

			p.low_window = l->low_window_pkts;
			p.high_window = l->high_window_pkts;
			p.high_p_ppb = l->high_p_ppb;
			p.high_decrease_per_mille = l->high_decrease_per_mille;
			hstcp_formula_ab(cwnd, &p, &a, &b);
		}
		ca->a_cwnd = cwnd;
		ca->a_q16 = a;
	}
	return ca->a_q16;
}

SEC("struct_ops/africa_init")
void BPF_PROG(africa_init, struct sock *sk)
{
	struct cctl_africa_ca *ca = africa_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	ca->mode = AFRICA_MODE_FAST;
	ca->a_q16 = HSTCP_ONE_Q16;
	ca->beg_snd_nxt = tp->snd_nxt;
}

SEC("struct_ops/africa_pkts_acked")
void BPF_PROG(africa_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_africa_ca *ca = africa_ca(sk);

	if (sample->rtt_us <= 0)
		return;
	cc_meas_rtt(&ca->m, sample->rtt_us, cc_ca_state(sk), 0);
	africa_rtt_sample(ca, sample->rtt_us);
}

SEC("struct_ops/africa_cong_avoid")
void BPF_PROG(africa_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_africa_ca *ca = africa_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	const struct africa_live *l = cctl_live_get();
	__u32 cwnd, cnt, a;

	if (africa_round_over(ack, ca->beg_snd_nxt)) {
		africa_round_end(ca, tp->snd_cwnd, ca->m.tmin_us, l->alpha_cpkt);
		ca->beg_snd_nxt = tp->snd_nxt;
	}

	acked = cc_slow_start_then(sk, acked, ack_counting);
	if (!acked)
		return;

	if (ca->mode == AFRICA_MODE_FAST) {
		a = africa_hstcp_a(ca, tp->snd_cwnd, l);
	} else {
		a = HSTCP_ONE_Q16;
		ca->a_q16 = a;
		ca->a_cwnd = 0;
	}
	cwnd = tp->snd_cwnd;
	cnt = tp->snd_cwnd_cnt;
	hstcp_ai_step(&cwnd, &cnt, acked, a, tp->snd_cwnd_clamp);
	tp->snd_cwnd = cwnd;
	tp->snd_cwnd_cnt = cnt;
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/africa_ssthresh")
__u32 BPF_PROG(africa_ssthresh, struct sock *sk)
{
	cc_meas_backoff(&africa_ca(sk)->m, AFRICA_BETA_FP);
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/africa_set_state")
void BPF_PROG(africa_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_africa_ca *ca = africa_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (new_state == TCP_CA_CWR || new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss)
		cc_meas_cong_event(&ca->m, tp);
	if (new_state == TCP_CA_Loss) {
		/* after a timeout, start measuring a fresh round */
		ca->round_cnt = 0;
		ca->round_min_us = 0;
		ca->beg_snd_nxt = tp->snd_nxt;
	}
}

SEC("struct_ops/africa_undo_cwnd")
__u32 BPF_PROG(africa_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops africa = {
	.init = (void *)africa_init,
	.ssthresh = (void *)africa_ssthresh,
	.cong_avoid = (void *)africa_cong_avoid,
	.set_state = (void *)africa_set_state,
	.undo_cwnd = (void *)africa_undo_cwnd,
	.pkts_acked = (void *)africa_pkts_acked,
	.name = "bpf_africa",
};
