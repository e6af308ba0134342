// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* compound.bpf.c - Compound TCP (CTCP) as a BPF struct_ops tcp_congestion_ops,
 * registered as "bpf_compound".
 *
 * Compound TCP: Tan, Song, Zhang, Sridharan, "A compound TCP approach for
 * high-speed and long distance networks", IEEE Infocom 2006; described and
 * tested in [P3] §II, §V, tested in [P2] Fig. 7. Spec:
 * shared/spec/algorithms.md §12 (rules [GK] from Tan et al.).
 *
 *   window         win = cwnd + dwnd (snd_cwnd = cwnd_reno + ⌊dwnd⌋)
 *   per ACK        cwnd += 1/win per acked packet (the Reno part, paced by win)
 *   per RTT        diff = (win/baseRTT - win/RTT) · baseRTT    (packets queued)
 *                  diff <  γ: dwnd += max(α · win^k - 1, 0)
 *                  diff >= γ: dwnd  = max(dwnd - ζ · diff, 0)
 *   loss           cwnd = cwnd/2, dwnd = max(win (1 - β) - cwnd/2, 0);
 *                  ssthresh = cwnd/2 + new dwnd
 *   timeout        dwnd = 0, cwnd = 1 (the kernel's), slow start
 *   α = 1/8, β = 1/2, k = 0.75, ζ = 1, γ = 30 packets
 *
 * The arithmetic (including win^k = exp2(k log2 win) in fixed point) lives in
 * compound_math.h so that host tests can check it against a floating-point model.
 *
 * No Linux module exists (out-of-tree patches only), so there is no `linux`
 * profile. Choices where the spec is silent or the kernel decides:
 *   - RTT of a round: the mean of its samples by default, or their minimum
 *     (round_rtt_min=1, Vegas' choice); rounds end when snd_nxt at their start
 *     is acked; baseRTT is the minimum RTT ever seen;
 *   - dwnd changes only in congestion avoidance and while cwnd-limited
 *     (growth on an idle link would be unbounded); slow start grows the total
 *     window with dwnd unchanged;
 *   - min(…, awnd) is left to the kernel, which never sends beyond the
 *     receiver's window anyway;
 *   - when the kernel sets snd_cwnd itself (end of recovery, undo, restart
 *     after idle) dwnd is kept and the Reno part takes the difference; undo
 *     restores both parts as they were before the reduction;
 *   - ack_counting=events adds one packet per ACK to the Reno part instead of
 *     the packets it acknowledged (spec §18.2).
 */
#include "cc_common.bpf.h"
#include "compound_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_compound_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_compound_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_compound_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_compound_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load): the increase counter counts
 * packets or ACK events (a mode the Reno part's counter is built for). */
const volatile __u32 ack_counting = 0;   /* 0 = packets (ABC), 1 = ACK events */

/* Live tunables (spec §18.5: gains, the backoff, the queue target and the round's RTT
 * estimator, whose sum, count and minimum are all kept; `cctl set`; defaults are
 * spec §12 / Tan et al.), read once per callback from the slot in force. */
struct compound_live {
	__u32 alpha_pm;       /* α, per-mille */
	__u32 beta_pm;        /* β, decrease fraction of win on loss, per-mille */
	__u32 k_pm;           /* k, exponent of the binomial growth, per-mille */
	__u32 zeta_pm;        /* ζ, dwnd retreat per packet of diff, per-mille */
	__u32 gamma_pkts;     /* γ, queue target of the delay window, packets */
	__u32 round_rtt_min;  /* RTT of a round: 0 = mean of samples, 1 = minimum */
};
CCTL_LIVE_PARAMS(struct compound_live, {
	.alpha_pm = 125,
	.beta_pm = 500,
	.k_pm = 750,
	.zeta_pm = 1000,
	.gamma_pkts = 30,
	.round_rtt_min = 0,
})

static __always_inline struct cctl_compound_ca *compound_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

static __always_inline void compound_round_reset(struct cctl_compound_ca *ca,
						 const struct tcp_sock *tp)
{
	ca->end_seq = tp->snd_nxt;
	ca->rtt_sum_us = 0;
	ca->rtt_cnt = 0;
	ca->rtt_min_us = 0;
}

/* snd_cwnd = cwnd_reno + ⌊dwnd⌋, within the kernel's clamp. */
static __always_inline void compound_set_cwnd(struct cctl_compound_ca *ca, struct tcp_sock *tp)
{
	__u64 w = (__u64)ca->cwnd_reno + (ca->dwnd_fp >> CCTL_FP_SHIFT);

	if (w > tp->snd_cwnd_clamp)
		w = tp->snd_cwnd_clamp;
	if (w < 1)
		w = 1;
	tp->snd_cwnd = (__u32)w;
}

SEC("struct_ops/compound_init")
void BPF_PROG(compound_init, struct sock *sk)
{
	struct cctl_compound_ca *ca = compound_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	ca->cwnd_reno = tp->snd_cwnd;
	compound_round_reset(ca, tp);
}

SEC("struct_ops/compound_pkts_acked")
void BPF_PROG(compound_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_compound_ca *ca = compound_ca(sk);
	__u32 rtt;

	if (sample->rtt_us <= 0)
		return;
	rtt = sample->rtt_us;
	cc_meas_rtt(&ca->m, rtt, cc_ca_state(sk), 0);
	if (!ca->base_rtt_us || rtt < ca->base_rtt_us)
		ca->base_rtt_us = rtt;
	if (!ca->rtt_min_us || rtt < ca->rtt_min_us)
		ca->rtt_min_us = rtt;
	ca->rtt_sum_us += rtt;
	ca->rtt_cnt++;
}

/* End of a round: diff from its RTT, and the delay window's update. */
static __always_inline void compound_round_end(struct sock *sk, struct cctl_compound_ca *ca,
					       struct tcp_sock *tp)
{
	if (ca->rtt_cnt) {
		const struct compound_live *l = cctl_live_get();
		__u32 rtt = l->round_rtt_min ? ca->rtt_min_us
					     : (__u32)(ca->rtt_sum_us / ca->rtt_cnt);

		ca->diff_fp = compound_diff_fp(tp->snd_cwnd, ca->base_rtt_us, rtt);
		if (!cc_in_slow_start(tp) && cc_cwnd_limited(sk)) {
			struct compound_params p;

			p.alpha_pm = l->alpha_pm;
			p.k_pm = l->k_pm;
			p.zeta_pm = l->zeta_pm;
			p.gamma_pkts = l->gamma_pkts;
			ca->dwnd_fp = compound_dwnd_update(tp->snd_cwnd, ca->dwnd_fp, ca->diff_fp,
							   &p);
			compound_set_cwnd(ca, tp);
		}
	}
	compound_round_reset(ca, tp);
}

SEC("struct_ops/compound_cong_avoid")
void BPF_PROG(compound_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_compound_ca *ca = compound_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	__u32 cwnd_reno = ca->cwnd_reno, dwnd_fp = ca->dwnd_fp, cnt;

	/* the kernel may have set snd_cwnd itself since the last ACK */
	compound_sync(tp->snd_cwnd, &cwnd_reno, &dwnd_fp);
	ca->cwnd_reno = cwnd_reno;
	ca->dwnd_fp = dwnd_fp;

	if ((__s32)(ca->end_seq - ack) < 0)
		compound_round_end(sk, ca, tp);

	if (!cc_cwnd_limited(sk))
		return;

	if (cc_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		/* slow start grew the total; the Reno part takes it */
		cwnd_reno = ca->cwnd_reno;
		dwnd_fp = ca->dwnd_fp;
		compound_sync(tp->snd_cwnd, &cwnd_reno, &dwnd_fp);
		ca->cwnd_reno = cwnd_reno;
		ca->dwnd_fp = dwnd_fp;
		if (!acked)
			return;
	}
	if (ack_counting)
		acked = 1;

	cwnd_reno = ca->cwnd_reno;
	cnt = ca->reno_cnt;
	compound_reno_ai(&cwnd_reno, &cnt, tp->snd_cwnd, acked);
	ca->cwnd_reno = cwnd_reno;
	ca->reno_cnt = cnt;
	compound_set_cwnd(ca, tp);
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/compound_ssthresh")
__u32 BPF_PROG(compound_ssthresh, struct sock *sk)
{
	struct cctl_compound_ca *ca = compound_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	__u32 cwnd_reno = ca->cwnd_reno, dwnd_fp = ca->dwnd_fp, win = tp->snd_cwnd, s;
	__u64 beta;

	compound_sync(win, &cwnd_reno, &dwnd_fp);
	ca->undo_cwnd_reno = cwnd_reno;
	ca->undo_dwnd_fp = dwnd_fp;

	ca->dwnd_fp = compound_loss(win, &cwnd_reno, cctl_live_get()->beta_pm);
	ca->cwnd_reno = cwnd_reno;
	ca->reno_cnt = 0;

	s = cwnd_reno + (ca->dwnd_fp >> CCTL_FP_SHIFT);
	if (s < 2)
		s = 2;
	/* the shared layer records the multiplier ssthresh / win, << 10 */
	beta = win ? ((__u64)s << CCTL_FP_SHIFT) / win : CCTL_FP_ONE;
	cc_meas_backoff(&ca->m, beta > 0xffff ? 0xffff : (__u32)beta);
	return s;
}

SEC("struct_ops/compound_set_state")
void BPF_PROG(compound_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_compound_ca *ca = compound_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	switch (new_state) {
	case TCP_CA_Loss:
		/* timeout: back to plain slow start */
		ca->dwnd_fp = 0;
		ca->reno_cnt = 0;
		compound_round_reset(ca, tp);
		cc_meas_cong_event(&ca->m, tp);
		break;
	case TCP_CA_CWR:
	case TCP_CA_Recovery:
		cc_meas_cong_event(&ca->m, tp);
		break;
	}
}

SEC("struct_ops/compound_undo_cwnd")
__u32 BPF_PROG(compound_undo_cwnd, struct sock *sk)
{
	struct cctl_compound_ca *ca = compound_ca(sk);

	if (ca->undo_cwnd_reno) {
		ca->cwnd_reno = ca->undo_cwnd_reno;
		ca->dwnd_fp = ca->undo_dwnd_fp;
		ca->undo_cwnd_reno = 0;
	}
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops compound = {
	.init = (void *)compound_init,
	.ssthresh = (void *)compound_ssthresh,
	.cong_avoid = (void *)compound_cong_avoid,
	.set_state = (void *)compound_set_state,
	.undo_cwnd = (void *)compound_undo_cwnd,
	.pkts_acked = (void *)compound_pkts_acked,
	.name = "bpf_compound",
};
