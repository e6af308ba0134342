// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* illinois.bpf.c - TCP Illinois as a BPF struct_ops tcp_congestion_ops,
 * registered as "bpf_illinois".
 *
 * TCP Illinois: Liu, Başar, Srikant, "TCP-Illinois: a loss- and delay-based
 * congestion control algorithm for high-speed networks", Performance Evaluation
 * 65(6-7), 2008; discussed in [P2] (Introduction, §III). Spec:
 * shared/spec/algorithms.md §13.
 *
 *   once per RTT   d_a = mean RTT of the last RTT - base RTT,  d_m = max RTT - base RTT
 *                  α(d_a) = α_max for d_a <= d1 (after θ low-delay RTTs once it has left),
 *                           κ1 / (κ2 + d_a) through (d1, α_max) and (d_m, α_min) above d1
 *                  β(d_a) = β_min up to d2, linear to β_max at d3, β_max above
 *                  with d1, d2, d3 = 1 %, 10 %, 80 % of d_m;  α = 1, β = 1/2 while w < 15
 *   per ACK        w += α / w per acked packet (slow start below ssthresh)
 *   loss           w <- max(w - β w, 2)
 *   timeout        α = 1, β = 1/2, θ bookkeeping and the current RTT's samples reset
 *
 * The arithmetic lives in illinois_math.h (α << 7, β << 6 as in Linux) so that
 * host tests can check it against a floating-point model of the equations.
 *
 * Differences from the Linux module (net/ipv4/tcp_illinois.c):
 *   - congestion avoidance uses tcp_cong_avoid_ai with w/α acked packets per
 *     segment, counting cong_avoid's newly delivered packets and keeping the
 *     remainder; Linux counts into snd_cwnd_cnt the packets pkts_acked saw (on
 *     the ACK ending a recovery all it acknowledges cumulatively, SACKed before
 *     or not), adds cnt·α/128/w segments once that reaches w and drops the
 *     remainder, and drops slow start's leftover: after a recovery the module
 *     is then up to 2 segments ahead (cctl conform). linux_ai=1, the `linux`
 *     profile, does what Linux does;
 *   - RTT sums are 64-bit and α is computed in 64 bits, so no 3.3 s clamp of
 *     the RTT samples is needed;
 *   - every constant is a tunable (per-mille or packets; all but linux_ai and
 *     ack_counting live, spec §18.5); the defaults give Linux's fixed-point
 *     values exactly (0.3 -> 38/128, 1/8 -> 8/64, ...);
 *   - ack_counting=events adds one packet per ACK instead of the packets it
 *     acknowledged (spec §18.2; Linux counts packets).
 *   - conform tolerance: 1 segments: α and β come from usec RTT samples, which
 *     differ by microseconds between two senders of one lockstep run: the module
 *     against itself first diverges by one segment at steps 52-104 of the 10 ms
 *     scripts, and the linux profile's first difference from it (one segment, at
 *     step 95 of `avoidance`) falls in that range. Over the whole run the module
 *     against itself drifts by a mean |Δcwnd| of 1.0 and a cwnd ratio of 1 ± 0.032
 *     (6.12 guest, 10 ms scripts); without the tolerance the port's first runs came
 *     0.01-0.06 segments beyond that in 3 of 3 scripts, because it is the first
 *     sender of a step and so shifts the module's RTT samples by its own per-ACK time.
 */
#include "cc_common.bpf.h"
#include "illinois_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_illinois_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_illinois_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_illinois_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_illinois_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load): modes that per-flow state is
 * built for (with linux_ai the increase counter counts packets to be multiplied by α
 * as tcp_illinois.c does, without it units of tcp_cong_avoid_ai's divisor; it counts
 * packets or ACK events). */
const volatile __u32 ack_counting = 0;     /* 0 = packets (ABC), 1 = ACK events */
const volatile __u32 linux_ai = 0;         /* bool: count the increase as tcp_illinois.c */

/* Live tunables (spec §18.5: the bounds of α and β, the delay thresholds, the Reno
 * threshold and θ; `cctl set`; defaults are spec §13 = Linux's), read once per
 * callback from the slot in force. α and β follow a change at the next RTT's end. */
struct illinois_live {
	__u32 alpha_min_pm;  /* α_min, per-mille of a packet per RTT */
	__u32 alpha_max_pm;  /* α_max, per-mille of a packet per RTT */
	__u32 beta_min_pm;   /* β_min, decrease fraction, per-mille */
	__u32 beta_max_pm;   /* β_max, decrease fraction, per-mille */
	__u32 d1_pm;         /* d1, per-mille of d_m */
	__u32 d2_pm;         /* d2, per-mille of d_m */
	__u32 d3_pm;         /* d3, per-mille of d_m */
	__u32 win_thresh;    /* Reno (α = 1, β = 1/2) below, packets */
	__u32 theta;         /* θ, low-delay RTTs before α_max again */
};
CCTL_LIVE_PARAMS(struct illinois_live, {
	.alpha_min_pm = 300,
	.alpha_max_pm = 10000,
	.beta_min_pm = 125,
	.beta_max_pm = 500,
	.d1_pm = 10,
	.d2_pm = 100,
	.d3_pm = 800,
	.win_thresh = 15,
	.theta = 5,
})

#define PM_TO_ALPHA(p) ((__u32)(((__u64)(p) << ILLINOIS_ALPHA_SHIFT) / 1000))
#define PM_TO_BETA(p) ((__u32)(((__u64)(p) << ILLINOIS_BETA_SHIFT) / 1000))

static __always_inline struct cctl_illinois_ca *illinois_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

/* Start a new RTT: its right edge is what has been sent so far. */
static __always_inline void illinois_rtt_reset(struct cctl_illinois_ca *ca,
					       const struct tcp_sock *tp)
{
	ca->end_seq = tp->snd_nxt;
	ca->cnt_rtt = 0;
	ca->sum_rtt_us = 0;
}

SEC("struct_ops/illinois_init")
void BPF_PROG(illinois_init, struct sock *sk)
{
	struct cctl_illinois_ca *ca = illinois_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	const struct illinois_live *l = cctl_live_get();

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	ca->alpha = PM_TO_ALPHA(l->alpha_max_pm);
	ca->beta = PM_TO_BETA(l->beta_max_pm);
	ca->base_rtt_us = 0x7fffffff;
	illinois_rtt_reset(ca, tp);
}

SEC("struct_ops/illinois_pkts_acked")
void BPF_PROG(illinois_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_illinois_ca *ca = illinois_ca(sk);
	__s32 rtt = sample->rtt_us;

	/* Every packet this ACK took off the retransmission queue, SACKed before or not. */
	ca->pkts_acked = sample->pkts_acked;
	if (rtt < 0)
		return;
	cc_meas_rtt(&ca->m, rtt, cc_ca_state(sk), 0);
	if ((__u32)rtt < ca->base_rtt_us)
		ca->base_rtt_us = rtt;
	if ((__u32)rtt > ca->max_rtt_us)
		ca->max_rtt_us = rtt;
	ca->cnt_rtt++;
	ca->sum_rtt_us += (__u32)rtt;
}

static __always_inline void illinois_params_get(struct illinois_params *p,
						const struct illinois_live *l)
{
	p->theta = l->theta;
	p->d1_pm = l->d1_pm;
	p->d2_pm = l->d2_pm;
	p->d3_pm = l->d3_pm;
	p->amin = PM_TO_ALPHA(l->alpha_min_pm);
	p->amax = PM_TO_ALPHA(l->alpha_max_pm);
	p->bmin = PM_TO_BETA(l->beta_min_pm);
	p->bmax = PM_TO_BETA(l->beta_max_pm);
}

/* Once per RTT: α and β from the delays of the RTT that just ended. */
static __always_inline void illinois_update(struct cctl_illinois_ca *ca, const struct tcp_sock *tp)
{
	const struct illinois_live *l = cctl_live_get();
	__u32 win_thresh = l->win_thresh;

	if (ca->cnt_rtt) {
		struct illinois_theta_state st;
		struct illinois_params p;

		st.rtt_above = ca->rtt_above;
		st.rtt_low = ca->rtt_low;
		ca->dm_us = ca->max_rtt_us > ca->base_rtt_us ? ca->max_rtt_us - ca->base_rtt_us : 0;
		ca->da_us = illinois_avg_delay(ca->sum_rtt_us, ca->cnt_rtt, ca->base_rtt_us);
		if (tp->snd_cwnd >= win_thresh) {
			illinois_params_get(&p, l);
			ca->alpha = illinois_alpha_fp(ca->da_us, ca->dm_us, ca->alpha, &st, &p);
			ca->beta = illinois_beta_fp(ca->da_us, ca->dm_us, &p);
			ca->rtt_above = st.rtt_above;
			ca->rtt_low = st.rtt_low;
		}
	}
	if (tp->snd_cwnd < win_thresh) {
		ca->alpha = ILLINOIS_ALPHA_ONE;
		ca->beta = ILLINOIS_BETA_HALF;
	}
	illinois_rtt_reset(ca, tp);
}

/*
 * tcp_illinois.c's way of adding α/w per packet (linux_ai=1): snd_cwnd_cnt counts the
 * packets pkts_acked last reported (on the ACK that ends a recovery, every packet it
 * acknowledges cumulatively, those SACKed before included), then one per ACK; once
 * cnt·α >> 7 reaches w, cwnd grows by that over w and the remainder is dropped. Slow
 * start's leftover is dropped too.
 */
static __always_inline void illinois_linux_ai(struct sock *sk, struct cctl_illinois_ca *ca,
					      struct tcp_sock *tp, __u32 acked)
{
	__u32 delta, w;

	if (!cc_cwnd_limited(sk))
		return;
	if (cc_in_slow_start(tp)) {
		tcp_slow_start(tp, acked);
		return;
	}
	tp->snd_cwnd_cnt += ca->pkts_acked;
	ca->pkts_acked = 1;
	delta = (tp->snd_cwnd_cnt * ca->alpha) >> ILLINOIS_ALPHA_SHIFT;
	if (delta >= tp->snd_cwnd) {
		w = tp->snd_cwnd + delta / tp->snd_cwnd;
		tp->snd_cwnd = w < tp->snd_cwnd_clamp ? w : tp->snd_cwnd_clamp;
		tp->snd_cwnd_cnt = 0;
	}
}

SEC("struct_ops/illinois_cong_avoid")
void BPF_PROG(illinois_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_illinois_ca *ca = illinois_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if ((__s32)(ca->end_seq - ack) < 0)
		illinois_update(ca, tp);
	if (linux_ai) {
		illinois_linux_ai(sk, ca, tp, acked);
		return;
	}

	acked = cc_slow_start_then(sk, acked, ack_counting);
	if (!acked)
		return;
	tcp_cong_avoid_ai(tp, illinois_ai_divisor(tp->snd_cwnd, ca->alpha), acked);
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/illinois_ssthresh")
__u32 BPF_PROG(illinois_ssthresh, struct sock *sk)
{
	struct cctl_illinois_ca *ca = illinois_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	/* the shared layer records the multiplier 1 - β, << 10 */
	cc_meas_backoff(&ca->m, CCTL_FP_ONE - ((__u32)ca->beta << (CCTL_FP_SHIFT - ILLINOIS_BETA_SHIFT)));
	return illinois_fp_ssthresh(tp->snd_cwnd, ca->beta);
}

SEC("struct_ops/illinois_set_state")
void BPF_PROG(illinois_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_illinois_ca *ca = illinois_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	switch (new_state) {
	case TCP_CA_Loss:
		/* a timeout: start over as Reno */
		ca->alpha = ILLINOIS_ALPHA_ONE;
		ca->beta = ILLINOIS_BETA_HALF;
		ca->rtt_low = 0;
		ca->rtt_above = 0;
		illinois_rtt_reset(ca, tp);
		cc_meas_cong_event(&ca->m, tp);
		break;
	case TCP_CA_CWR:
	case TCP_CA_Recovery:
		cc_meas_cong_event(&ca->m, tp);
		break;
	}
}

SEC("struct_ops/illinois_undo_cwnd")
__u32 BPF_PROG(illinois_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops illinois = {
	.init = (void *)illinois_init,
	.ssthresh = (void *)illinois_ssthresh,
	.cong_avoid = (void *)illinois_cong_avoid,
	.set_state = (void *)illinois_set_state,
	.undo_cwnd = (void *)illinois_undo_cwnd,
	.pkts_acked = (void *)illinois_pkts_acked,
	.name = "bpf_illinois",
};
