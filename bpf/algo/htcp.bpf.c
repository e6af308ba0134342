// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* htcp.bpf.c - H-TCP as a BPF struct_ops tcp_congestion_ops, registered as "bpf_htcp".
 *
 * H-TCP: Leith & Shorten, "H-TCP: TCP for high-speed and long-distance networks",
 * PFLDnet 2004; as evaluated in [P0] Li, Leith, Shorten, IEEE/ACM ToN 2007, §IV-C,
 * Table II. Spec: shared/spec/algorithms.md §5.
 *
 *   increase per RTT   α = 2 (1 - β) f_α(Δ)                            [P0] §IV-C
 *   f_α(Δ)             1 + 10 (Δ - Δ_L) + 0.25 (Δ - Δ_L)² for Δ > Δ_L,
 *                      scaled by S = clamp(Tmin / T_ref, 0.1, 2)        spec §5 [CHOICE]
 *   backoff            β = clamp(Tmin / Tmax, 0.5, 0.8), or 0.5 when the epoch's
 *                      maximum throughput moved by more than Δ_B = 20 %  [P0] Table II
 *
 * The arithmetic lives in htcp_math.h so host tests can check it against a
 * floating-point model of the equations.
 *
 * Differences from the Linux module (net/ipv4/tcp_htcp.c), all undone by
 * linux_exact=1 (the `linux` profile; htcp_linux_* in htcp_math.h), which takes
 * Linux's constants (the other tunables must keep their defaults, which are them)
 * but for use_rtt_scaling and use_bandwidth_switch:
 *   - time in usec (tcp_mstamp) instead of jiffies, so Δ, Tmin and Tmax are
 *     not rounded to 1/HZ;
 *   - f_α and α in 1/1024 steps instead of Linux's integer f_α and 1/128 α;
 *   - α is recomputed on every ACK in congestion avoidance (Linux: once per
 *     cwnd increment and at each congestion event);
 *   - congestion avoidance keeps the fractional remainder (tcp_cong_avoid_ai)
 *     and counts the packets each ACK acknowledged (Linux: the packets the
 *     previous call of pkts_acked saw in Open, 1 otherwise, tested before it
 *     is added);
 *   - slow start hands leftover acked packets to congestion avoidance;
 *   - every constant is a load-time tunable; ack_counting=events adds one
 *     packet per ACK instead of the packets it acknowledged (spec §18.2).
 */
#include "cc_common.bpf.h"
#include "htcp_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_htcp_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_htcp_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_htcp_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_htcp_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load; defaults are [P0] Table II /
 * spec §5): modes that per-flow state is built for (the throughput of an epoch is
 * measured only with the bandwidth switch on; the increase counter counts packets or
 * ACK events). */
const volatile __u32 use_bandwidth_switch = 1;   /* bool */
const volatile __u32 ack_counting = 0;           /* 0 = packets (ABC), 1 = ACK events */
const volatile __u32 linux_exact = 0;            /* bool: tcp_htcp.c's jiffies and arithmetic */

extern unsigned long CONFIG_HZ __kconfig;

static __always_inline __u32 htcp_now_j(void)
{
	return (__u32)bpf_jiffies64();
}

/* Linux's minRTT: the smallest RTT sample rounded up to jiffies. */
static __always_inline __u32 htcp_min_rtt_j(const struct cctl_htcp_ca *ca)
{
	return htcp_linux_jiffies(ca->m.tmin_us, (__u32)CONFIG_HZ);
}

/* Live tunables (spec §18.5: bounds, gains and thresholds; `cctl set`), read once
 * per callback from the slot in force. */
struct htcp_live {
	__u32 delta_l_ms;          /* Δ_L, ms */
	__u32 delta_b_pct;         /* Δ_B, % throughput change */
	__u32 beta_min_pct;        /* β lower bound, % */
	__u32 beta_max_pct;        /* β upper bound, % */
	__u32 fixed_beta_pct;      /* fixed β, % ([P2]); 0 = adaptive */
	__u32 use_rtt_scaling;     /* bool */
	__u32 rtt_ref_ms;          /* T_ref of the RTT scaling, ms */
	__u32 rtt_scale_min_pct;   /* lower clamp of S, % */
	__u32 rtt_scale_max_pct;   /* upper clamp of S, % */
	__u32 adaptive_min_rtt_ms; /* Tmin needed for adaptive β, ms */
	__u32 tmax_spike_ms;       /* Tmax spike filter, ms (0 = off) */
};
CCTL_LIVE_PARAMS(struct htcp_live, {
	.delta_l_ms = 1000,
	.delta_b_pct = 20,
	.beta_min_pct = 50,
	.beta_max_pct = 80,
	.fixed_beta_pct = 0,
	.use_rtt_scaling = 1,
	.rtt_ref_ms = 100,
	.rtt_scale_min_pct = 10,
	.rtt_scale_max_pct = 200,
	.adaptive_min_rtt_ms = 10,
	.tmax_spike_ms = 20,
})

#define PCT_TO_FP(p) (((__u32)(p) << CCTL_FP_SHIFT) / 100)

static __always_inline struct cctl_htcp_ca *htcp_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

static __always_inline void htcp_params_get(struct htcp_params *p)
{
	const struct htcp_live *l = cctl_live_get();

	p->delta_l_us = (__u64)l->delta_l_ms * 1000;
	p->delta_b_pct = l->delta_b_pct;
	p->beta_lo = PCT_TO_FP(l->beta_min_pct);
	p->beta_hi = PCT_TO_FP(l->beta_max_pct);
	p->fixed_beta_fp = PCT_TO_FP(l->fixed_beta_pct);
	p->use_rtt_scaling = l->use_rtt_scaling;
	p->rtt_ref_us = l->rtt_ref_ms * 1000;
	p->s_lo = PCT_TO_FP(l->rtt_scale_min_pct);
	p->s_hi = PCT_TO_FP(l->rtt_scale_max_pct);
	p->use_bandwidth_switch = use_bandwidth_switch;
	p->tmin_adaptive_us = l->adaptive_min_rtt_ms * 1000;
}

static __always_inline __u32 htcp_factor(const struct cctl_htcp_ca *ca, const struct tcp_sock *tp,
					 const struct htcp_params *p)
{
	return htcp_factor_fp(cc_meas_delta_us(&ca->m, tp), ca->m.tmin_us, p);
}

SEC("struct_ops/htcp_init")
void BPF_PROG(htcp_init, struct sock *sk)
{
	struct cctl_htcp_ca *ca = htcp_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	if (linux_exact) {
		ca->alpha = HTCP_LINUX_ALPHA_ONE << HTCP_LINUX_TO_FP;
		ca->beta = HTCP_LINUX_BETA_MIN << HTCP_LINUX_TO_FP;
		ca->pkts_acked = 1;
		ca->last_cong_j = htcp_now_j();
		return;
	}
	ca->beta = PCT_TO_FP(cctl_live_get()->beta_min_pct);
	ca->alpha = htcp_alpha_fp(CCTL_FP_ONE, ca->beta);
	ca->lasttime_us = (__u32)tp->tcp_mstamp;
}

/* Throughput sampling for the bandwidth switch (spec §5 "Throughput measurement"). */
static __always_inline void htcp_measure_throughput(struct cctl_htcp_ca *ca, struct tcp_sock *tp,
						    __u8 state, __u32 pkts)
{
	__u32 now = (__u32)tp->tcp_mstamp;
	__u32 elapsed, slack;
	__u64 cur;

	if (state != TCP_CA_Open && state != TCP_CA_Disorder) {
		ca->packetcount = 0;
		ca->lasttime_us = now;
		return;
	}
	ca->packetcount += pkts;

	slack = ca->alpha >> CCTL_FP_SHIFT;
	if (!slack)
		slack = 1;
	elapsed = now - ca->lasttime_us;
	if (!ca->m.tmin_us || elapsed < ca->m.tmin_us || !elapsed ||
	    ca->packetcount + slack < tp->snd_cwnd)
		return;

	cur = (__u64)ca->packetcount * USEC_PER_SEC / elapsed;
	if (cur > 0xffffffffull)
		cur = 0xffffffffull;
	if (cc_meas_delta_us(&ca->m, tp) <= 3ull * ca->m.tmin_us) {
		/* first samples of an epoch: start afresh */
		ca->bi_pps = ca->maxb_pps = (__u32)cur;
	} else {
		ca->bi_pps = (__u32)((3ull * ca->bi_pps + cur) / 4);
		if (ca->bi_pps > ca->maxb_pps)
			ca->maxb_pps = ca->bi_pps;
	}
	ca->packetcount = 0;
	ca->lasttime_us = now;
}

SEC("struct_ops/htcp_pkts_acked")
void BPF_PROG(htcp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_htcp_ca *ca = htcp_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	__u8 state = cc_ca_state(sk);

	if (linux_exact) {
		__u32 hz = (__u32)CONFIG_HZ;

		if (state == TCP_CA_Open)
			ca->pkts_acked = sample->pkts_acked;
		if (sample->rtt_us > 0) {
			cc_meas_rtt(&ca->m, sample->rtt_us, state, 20000);
			htcp_linux_rtt(ca, htcp_linux_jiffies(sample->rtt_us, hz), htcp_min_rtt_j(ca),
				       state == TCP_CA_Open, hz);
		}
		if (use_bandwidth_switch)
			htcp_linux_throughput(ca, sample->pkts_acked, htcp_now_j(), hz, tp->snd_cwnd,
					      htcp_min_rtt_j(ca),
					      state == TCP_CA_Open || state == TCP_CA_Disorder);
		return;
	}
	if (sample->rtt_us > 0)
		cc_meas_rtt(&ca->m, sample->rtt_us, state, cctl_live_get()->tmax_spike_ms * 1000);
	if (use_bandwidth_switch)
		htcp_measure_throughput(ca, tp, state, sample->pkts_acked);
}

SEC("struct_ops/htcp_cong_avoid")
void BPF_PROG(htcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_htcp_ca *ca = htcp_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct htcp_params p;

	if (linux_exact) {
		__u32 cwnd = tp->snd_cwnd, cnt = tp->snd_cwnd_cnt;

		if (!cc_cwnd_limited(sk))
			return;
		if (cc_in_slow_start(tp)) {
			tcp_slow_start(tp, acked);
			return;
		}
		htcp_linux_cong_avoid(ca, &cwnd, &cnt, tp->snd_cwnd_clamp, htcp_now_j(),
				      (__u32)CONFIG_HZ, htcp_min_rtt_j(ca),
				      cctl_live_get()->use_rtt_scaling);
		tp->snd_cwnd = cwnd;
		tp->snd_cwnd_cnt = cnt;
		return;
	}
	acked = cc_slow_start_then(sk, acked, ack_counting);
	if (!acked)
		return;

	htcp_params_get(&p);
	ca->alpha = htcp_alpha_fp(htcp_factor(ca, tp, &p), ca->beta);
	tcp_cong_avoid_ai(tp, htcp_ai_divisor(tp->snd_cwnd, ca->alpha), acked);
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/htcp_ssthresh")
__u32 BPF_PROG(htcp_ssthresh, struct sock *sk)
{
	struct cctl_htcp_ca *ca = htcp_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	__u8 modeswitch = ca->modeswitch;
	struct htcp_params p;
	struct htcp_event e;

	if (linux_exact) {
		__u32 ssthresh = htcp_linux_ssthresh(ca, tp->snd_cwnd, htcp_now_j(),
						     (__u32)CONFIG_HZ, htcp_min_rtt_j(ca),
						     use_bandwidth_switch,
						     cctl_live_get()->use_rtt_scaling);

		cc_meas_backoff(&ca->m, ca->beta);
		return ssthresh;
	}
	htcp_params_get(&p);
	e.maxb = ca->maxb_pps;
	e.old_maxb = ca->old_maxb_pps;
	e.tmin_us = ca->m.tmin_us;
	e.tmax_us = ca->m.tmax_us;
	if (use_bandwidth_switch)
		ca->old_maxb_pps = e.maxb;
	ca->beta = htcp_beta_fp(&e, &modeswitch, &p);
	ca->modeswitch = modeswitch;
	ca->alpha = htcp_alpha_fp(htcp_factor(ca, tp, &p), ca->beta);
	/* slowly forget Tmax so that a route change does not pin β */
	ca->m.tmax_us = htcp_fade_tmax(ca->m.tmin_us, ca->m.tmax_us);

	cc_meas_backoff(&ca->m, ca->beta);
	return htcp_fp_ssthresh(tp->snd_cwnd, ca->beta);
}

SEC("struct_ops/htcp_set_state")
void BPF_PROG(htcp_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_htcp_ca *ca = htcp_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (linux_exact) {
		switch (new_state) {
		case TCP_CA_Open:
			/* Δ counts from the end of recovery unless the reduction was undone */
			if (ca->undo_cong_us) {
				ca->last_cong_j = htcp_now_j();
				ca->undo_cong_us = 0;
				ca->m.cong_us = tp->tcp_mstamp;
				ca->m.epoch_bytes0 = tp->bytes_acked;
			}
			break;
		case TCP_CA_CWR:
		case TCP_CA_Recovery:
		case TCP_CA_Loss:
			ca->undo_cong_us = ca->last_cong_j;
			ca->undo_tmax_us = ca->maxrtt_j;
			ca->undo_old_maxb_pps = ca->old_maxb_pps;
			ca->last_cong_j = htcp_now_j();
			cc_meas_cong_event(&ca->m, tp);
			break;
		}
		return;
	}
	switch (new_state) {
	case TCP_CA_Open:
		/* Δ counts from the end of recovery unless the reduction was undone */
		if (ca->undo_cong_us) {
			ca->m.cong_us = tp->tcp_mstamp;
			ca->m.epoch_bytes0 = tp->bytes_acked;
			ca->undo_cong_us = 0;
		}
		break;
	case TCP_CA_CWR:
	case TCP_CA_Recovery:
	case TCP_CA_Loss:
		ca->undo_cong_us = ca->m.cong_us ? ca->m.cong_us : 1;
		ca->undo_tmax_us = ca->m.tmax_us;
		ca->undo_old_maxb_pps = ca->old_maxb_pps;
		cc_meas_cong_event(&ca->m, tp);
		break;
	}
}

SEC("struct_ops/htcp_undo_cwnd")
__u32 BPF_PROG(htcp_undo_cwnd, struct sock *sk)
{
	struct cctl_htcp_ca *ca = htcp_ca(sk);

	if (linux_exact) {
		if (ca->undo_cong_us) {
			ca->last_cong_j = (__u32)ca->undo_cong_us;
			ca->maxrtt_j = ca->undo_tmax_us;
			ca->old_maxb_pps = ca->undo_old_maxb_pps;
			ca->undo_cong_us = 0;
		}
		return tcp_reno_undo_cwnd(sk);
	}
	if (ca->undo_cong_us) {
		ca->m.cong_us = ca->undo_cong_us;
		ca->m.tmax_us = ca->undo_tmax_us;
		ca->old_maxb_pps = ca->undo_old_maxb_pps;
		ca->undo_cong_us = 0;
	}
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops htcp = {
	.init = (void *)htcp_init,
	.ssthresh = (void *)htcp_ssthresh,
	.cong_avoid = (void *)htcp_cong_avoid,
	.set_state = (void *)htcp_set_state,
	.undo_cwnd = (void *)htcp_undo_cwnd,
	.pkts_acked = (void *)htcp_pkts_acked,
	.name = "bpf_htcp",
};
