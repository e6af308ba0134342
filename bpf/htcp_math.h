/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* htcp_math.h - H-TCP's fixed-point rules, free of kernel types, so that the
 * very same code runs in htcp.bpf.c and in the host-side unit tests that check
 * it against a floating-point model of spec §5 (loader/src/algo/htcp/model.rs).
 *
 * Fixed point: α, β, S and f_α are << CCTL_FP_SHIFT (1.0 == 1024).
 * Include after cctl.h and something that defines __u32/__u64.
 */
#ifndef HTCP_MATH_H
#define HTCP_MATH_H

/*
 * H-TCP's private state (spec §5). 96 bytes; must fit icsk_ca_priv, which
 * htcp.bpf.c checks against the kernel's BTF at compile time.
 */
struct cctl_htcp_ca {
	struct cctl_meas m;
	__u64 undo_cong_us;  /* cong_us before the current reduction, for undo (0 = nothing to undo) */
	__u32 alpha;         /* α: increase per RTT, packets << CCTL_FP_SHIFT */
	__u16 beta;          /* β: backoff multiplier, << CCTL_FP_SHIFT */
	__u8 modeswitch;     /* 1 once a congestion event has passed: adaptive β allowed */
	__u8 _pad;
	__u32 packetcount;   /* packets acked since the last throughput sample */
	__u32 lasttime_us;   /* low 32 bits of tcp_mstamp at the last throughput sample, usec */
	__u32 bi_pps;        /* B_i: smoothed throughput, packets/s */
	__u32 maxb_pps;      /* B_max of the current epoch, packets/s */
	__u32 old_maxb_pps;  /* B_max of the previous epoch, packets/s */
	__u32 undo_tmax_us;  /* Tmax before the current reduction, usec */
	__u32 undo_old_maxb_pps; /* old_maxb_pps before the current reduction */
	__u32 _pad2;
};

#define HTCP_DELTA_CAP_US 1000000000ull /* Δ - Δ_L is capped at 1000 s: f̄ <= 260001 */
/* With S <= 10 (the loader's limit) f_α << 10 stays below 2^32; saturate anyway. */
#define HTCP_FP_MAX 0xffffffffull

/* The tunables htcp_factor_fp and htcp_beta_fp need, as htcp.bpf.c passes them. */
struct htcp_params {
	__u64 delta_l_us;           /* Δ_L, usec */
	__u32 delta_b_pct;          /* Δ_B, % throughput change */
	__u32 beta_lo;              /* β lower bound, << 10 */
	__u32 beta_hi;              /* β upper bound, << 10 */
	__u32 fixed_beta_fp;        /* fixed β, << 10 ([P2]); 0 = adaptive */
	__u32 use_rtt_scaling;      /* bool */
	__u32 rtt_ref_us;           /* T_ref of the RTT scaling, usec */
	__u32 s_lo;                 /* lower clamp of S, << 10 */
	__u32 s_hi;                 /* upper clamp of S, << 10 */
	__u32 use_bandwidth_switch; /* bool */
	__u32 tmin_adaptive_us;     /* Tmin needed for adaptive β, usec */
};

/* What β at a congestion event is computed from (htcp_beta_fp). */
struct htcp_event {
	__u32 maxb;     /* B_max of the ending epoch, packets/s */
	__u32 old_maxb; /* B_max of the previous epoch, packets/s */
	__u32 tmin_us;  /* Tmin, usec */
	__u32 tmax_us;  /* Tmax, usec (0 = none yet) */
};

/*
 * f_α(Δ) of [P0] §IV-C with the RTT scaling of spec §5 (Linux-compatible form):
 *   f̄ = 1                                   for Δ <= Δ_L
 *   f̄ = 1 + 10 (Δ-Δ_L) + 0.25 (Δ-Δ_L)²      for Δ > Δ_L (Δ in s)
 *   f = max(f̄ · S, 1),  S = clamp(Tmin / T_ref, s_lo, s_hi) when RTT scaling is on.
 * Δ_L, the RTT scaling switch, T_ref, s_lo and s_hi from p. delta_us, tmin_us,
 * p->delta_l_us, p->rtt_ref_us in usec; p->s_lo, p->s_hi and the result << 10.
 */
CCTL_MATH __u32 htcp_factor_fp(__u64 delta_us, __u32 tmin_us, const struct htcp_params *p)
{
	__u64 f = CCTL_FP_ONE;

	if (delta_us > p->delta_l_us) {
		__u64 d_us = delta_us - p->delta_l_us;
		__u64 d_ms;

		if (d_us > HTCP_DELTA_CAP_US)
			d_us = HTCP_DELTA_CAP_US;
		d_ms = d_us / 1000;
		/* 10 d: 10 * 1024 * d_us / 1e6;  0.25 d²: 256 * d_ms² / 1e6 */
		f += (10ull * CCTL_FP_ONE * d_us) / 1000000ull;
		f += (256ull * d_ms * d_ms) / 1000000ull;
	}

	if (p->use_rtt_scaling && tmin_us && p->rtt_ref_us) {
		__u64 s = ((__u64)tmin_us << CCTL_FP_SHIFT) / p->rtt_ref_us;

		if (s < p->s_lo)
			s = p->s_lo;
		if (s > p->s_hi)
			s = p->s_hi;
		f = (f * s) >> CCTL_FP_SHIFT;
		if (f < CCTL_FP_ONE)
			f = CCTL_FP_ONE;
	}
	return f > HTCP_FP_MAX ? (__u32)HTCP_FP_MAX : (__u32)f;
}

/* α = 2 (1 - β) f_α: the increase per RTT in packets, << 10 (never 0,
 * saturating at 2^32 - 1, i.e. ~4.2 million packets per RTT). */
CCTL_MATH __u32 htcp_alpha_fp(__u32 factor_fp, __u32 beta_fp)
{
	__u64 a = 2ull * (CCTL_FP_ONE - beta_fp) * factor_fp >> CCTL_FP_SHIFT;

	if (a > HTCP_FP_MAX)
		a = HTCP_FP_MAX;
	return a ? (__u32)a : 1;
}

/*
 * β at a congestion event (spec §5 "Backoff factor"), from the event's e
 * (B_max, the previous B_max, Tmin, Tmax) and the tunables p:
 *   - p->fixed_beta_fp != 0: that value ([P2]'s variant).
 *   - With the bandwidth switch on (p->use_bandwidth_switch), if B_max of the
 *     ending epoch differs from the previous epoch's by more than Δ_B
 *     (p->delta_b_pct %), β = beta_lo and adaptive mode is left (*modeswitch = 0).
 *   - Otherwise, in adaptive mode with Tmin > p->tmin_adaptive_us and Tmax > 0,
 *     β = clamp(Tmin / Tmax, beta_lo, beta_hi); else β = beta_lo and adaptive
 *     mode starts (*modeswitch = 1).
 * Throughputs in packets/s, times in usec, β << 10.
 */
CCTL_MATH __u32 htcp_beta_fp(const struct htcp_event *e, __u8 *modeswitch,
			       const struct htcp_params *p)
{
	__u64 b;

	if (p->fixed_beta_fp)
		return p->fixed_beta_fp;

	if (p->use_bandwidth_switch) {
		__u64 now = 100ull * e->maxb;
		__u64 lo = (__u64)(100 - p->delta_b_pct) * e->old_maxb;
		__u64 hi = (__u64)(100 + p->delta_b_pct) * e->old_maxb;

		if (now < lo || now > hi) {
			*modeswitch = 0;
			return p->beta_lo;
		}
	}

	if (!*modeswitch || e->tmin_us <= p->tmin_adaptive_us || !e->tmax_us) {
		*modeswitch = 1;
		return p->beta_lo;
	}

	b = ((__u64)e->tmin_us << CCTL_FP_SHIFT) / e->tmax_us;
	if (b < p->beta_lo)
		b = p->beta_lo;
	if (b > p->beta_hi)
		b = p->beta_hi;
	return (__u32)b;
}

/* Tmax fading at a congestion event: Tmax <- Tmin + 0.95 (Tmax - Tmin). */
CCTL_MATH __u32 htcp_fade_tmax(__u32 tmin_us, __u32 tmax_us)
{
	if (!tmin_us || tmax_us <= tmin_us)
		return tmax_us;
	return tmin_us + (__u32)(((__u64)(tmax_us - tmin_us) * 95) / 100);
}

/* ssthresh = max(β w, 2) segments. */
CCTL_MATH __u32 htcp_fp_ssthresh(__u32 cwnd, __u32 beta_fp)
{
	__u32 s = (__u32)(((__u64)cwnd * beta_fp) >> CCTL_FP_SHIFT);

	return s > 2 ? s : 2;
}

/*
 * Congestion-avoidance step: w += α/w per acked packet is done as one extra
 * segment per w/α acked packets (rounded down, at least 1): the "w" argument
 * of the kfunc tcp_cong_avoid_ai, which keeps the remainder in snd_cwnd_cnt.
 */
CCTL_MATH __u32 htcp_ai_divisor(__u32 cwnd, __u32 alpha_fp)
{
	__u64 w = ((__u64)cwnd << CCTL_FP_SHIFT) / (alpha_fp ? alpha_fp : 1);

	if (w < 1)
		w = 1;
	if (w > 0xffffffffull)
		w = 0xffffffffull;
	return (__u32)w;
}

#endif /* HTCP_MATH_H */
