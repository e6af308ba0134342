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
 * H-TCP's private state (spec §5). 104 bytes; must fit icsk_ca_priv, which
 * htcp.bpf.c checks against the kernel's BTF at compile time. With linux_exact
 * (htcp_linux_*) α and β keep their << 10 scale but hold Linux's << 7 values
 * (times 8), throughput times and the undo copy of the congestion time are in
 * jiffies, and maxrtt_j, last_cong_j, pkts_acked are used.
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
	__u32 pkts_acked;    /* linux_exact: packets the last ACK acknowledged in Open (1 otherwise) */
	__u32 maxrtt_j;      /* linux_exact: maxRTT, jiffies */
	__u32 last_cong_j;   /* linux_exact: jiffies at the last congestion event */
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

/*
 * linux_exact: tcp_htcp.c's own clock and arithmetic, for a port that gives the
 * module's trajectory step for step (cctl conform). Where they differ from the
 * rules above:
 *   - Δ, minRTT, maxRTT and the throughput interval are in jiffies (RTT samples
 *     rounded up to whole jiffies), with Linux's constants (Δ_L = 1 s, β in
 *     [64, 102]/128, minRTT > 10 ms for an adaptive β, a 20 ms maxRTT filter);
 *   - α and β are Linux's << 7 values (kept << 10 in the state: HTCP_LINUX_TO_FP),
 *     α = 2 f (128 - β) with Linux's integer f;
 *   - the increase counter is tp->snd_cwnd_cnt, grown by the packets the ACK
 *     acknowledged as pkts_acked saw them in Open (1 otherwise), tested against
 *     cwnd before it grows; α is recomputed after each +1 segment and at each
 *     reduction; slow start's leftover packets are dropped.
 * hz: CONFIG_HZ; now_j: jiffies (low 32 bits).
 */
#define HTCP_LINUX_ALPHA_ONE 128u
#define HTCP_LINUX_BETA_MIN 64u
#define HTCP_LINUX_BETA_MAX 102u
#define HTCP_LINUX_TO_FP 3 /* << 7 values are kept << 10 */

/* usec rounded up to whole jiffies (exact where HZ divides 10^6). */
CCTL_MATH __u32 htcp_linux_jiffies(__u32 us, __u32 hz)
{
	return (__u32)(((__u64)us * hz + 999999ull) / 1000000ull);
}

/* α from Δ = now_j - last_cong_j and β (tcp_htcp.c's alpha update). */
CCTL_MATH void htcp_linux_alpha_update(struct cctl_htcp_ca *ca, __u32 now_j, __u32 hz,
				       __u32 min_rtt_j, __u32 use_rtt_scaling)
{
	__u32 factor = 1, diff = now_j - ca->last_cong_j;

	if (!hz)
		hz = 1;
	if (diff > hz) {
		diff -= hz;
		factor = 1 + (10 * diff + ((diff / 2) * (diff / 2) / hz)) / hz;
	}
	if (use_rtt_scaling && min_rtt_j) {
		__u32 scale = (hz << 3) / (10 * min_rtt_j);

		if (scale < (1u << 2))
			scale = 1u << 2;
		if (scale > (10u << 3))
			scale = 10u << 3;
		factor = (factor << 3) / scale;
		if (!factor)
			factor = 1;
	}
	factor = 2 * factor * (HTCP_LINUX_ALPHA_ONE - (ca->beta >> HTCP_LINUX_TO_FP));
	if (!factor)
		factor = HTCP_LINUX_ALPHA_ONE;
	ca->alpha = factor << HTCP_LINUX_TO_FP;
}

/* maxRTT from an RTT sample of rtt_j jiffies, in Open only, after minRTT took it. */
CCTL_MATH void htcp_linux_rtt(struct cctl_htcp_ca *ca, __u32 rtt_j, __u32 min_rtt_j, int open,
			      __u32 hz)
{
	if (!open)
		return;
	if (ca->maxrtt_j < min_rtt_j)
		ca->maxrtt_j = min_rtt_j;
	if (ca->maxrtt_j < rtt_j && rtt_j <= ca->maxrtt_j + htcp_linux_jiffies(20000, hz))
		ca->maxrtt_j = rtt_j;
}

/* Achieved throughput for the bandwidth switch: pkts acknowledged at now_j, in Open
 * or Disorder (open_or_disorder; else the count restarts). */
CCTL_MATH void htcp_linux_throughput(struct cctl_htcp_ca *ca, __u32 pkts, __u32 now_j,
				     __u32 hz, __u32 cwnd, __u32 min_rtt_j, int open_or_disorder)
{
	__u32 slack;

	if (!open_or_disorder) {
		ca->packetcount = 0;
		ca->lasttime_us = now_j;
		return;
	}
	ca->packetcount += pkts;
	slack = (ca->alpha >> HTCP_LINUX_TO_FP) >> 7;
	if (!slack)
		slack = 1;
	if (ca->packetcount >= cwnd - slack && now_j - ca->lasttime_us >= min_rtt_j &&
	    min_rtt_j > 0) {
		__u32 cur = ca->packetcount * hz / (now_j - ca->lasttime_us);

		if ((now_j - ca->last_cong_j) / min_rtt_j <= 3) {
			/* the first samples after a backoff */
			ca->maxb_pps = ca->bi_pps = cur;
		} else {
			ca->bi_pps = (3 * ca->bi_pps + cur) / 4;
			if (ca->bi_pps > ca->maxb_pps)
				ca->maxb_pps = ca->bi_pps;
		}
		ca->packetcount = 0;
		ca->lasttime_us = now_j;
	}
}

/* A reduction: β and α for the next epoch, maxRTT faded; returns ssthresh. */
CCTL_MATH __u32 htcp_linux_ssthresh(struct cctl_htcp_ca *ca, __u32 cwnd, __u32 now_j, __u32 hz,
				    __u32 min_rtt_j, __u32 use_bandwidth_switch,
				    __u32 use_rtt_scaling)
{
	__u32 max_rtt_j = ca->maxrtt_j, s;
	int adapt = 1;

	if (use_bandwidth_switch) {
		__u32 maxb = ca->maxb_pps, old = ca->old_maxb_pps;

		ca->old_maxb_pps = maxb;
		/* 5 B_max within [4, 6] old B_max, as the kernel's between() */
		if (!(6 * old - 4 * old >= 5 * maxb - 4 * old)) {
			ca->beta = HTCP_LINUX_BETA_MIN << HTCP_LINUX_TO_FP;
			ca->modeswitch = 0;
			adapt = 0;
		}
	}
	if (adapt) {
		if (ca->modeswitch && min_rtt_j > htcp_linux_jiffies(10000, hz) && max_rtt_j) {
			__u32 b = (__u8)((min_rtt_j << 7) / max_rtt_j);

			if (b < HTCP_LINUX_BETA_MIN)
				b = HTCP_LINUX_BETA_MIN;
			else if (b > HTCP_LINUX_BETA_MAX)
				b = HTCP_LINUX_BETA_MAX;
			ca->beta = b << HTCP_LINUX_TO_FP;
		} else {
			ca->beta = HTCP_LINUX_BETA_MIN << HTCP_LINUX_TO_FP;
			ca->modeswitch = 1;
		}
	}
	htcp_linux_alpha_update(ca, now_j, hz, min_rtt_j, use_rtt_scaling);
	if (min_rtt_j > 0 && max_rtt_j > min_rtt_j)
		ca->maxrtt_j = min_rtt_j + ((max_rtt_j - min_rtt_j) * 95) / 100;
	s = (cwnd * (ca->beta >> HTCP_LINUX_TO_FP)) >> 7;
	return s > 2 ? s : 2;
}

/* Congestion avoidance on one ACK: cwnd and cnt (tp->snd_cwnd, tp->snd_cwnd_cnt)
 * updated in place, clamp = tp->snd_cwnd_clamp. */
CCTL_MATH void htcp_linux_cong_avoid(struct cctl_htcp_ca *ca, __u32 *cwnd, __u32 *cnt,
				     __u32 clamp, __u32 now_j, __u32 hz, __u32 min_rtt_j,
				     __u32 use_rtt_scaling)
{
	if (((*cnt * (ca->alpha >> HTCP_LINUX_TO_FP)) >> 7) >= *cwnd) {
		if (*cwnd < clamp)
			*cwnd += 1;
		*cnt = 0;
		htcp_linux_alpha_update(ca, now_j, hz, min_rtt_j, use_rtt_scaling);
	} else {
		*cnt += ca->pkts_acked;
	}
	ca->pkts_acked = 1;
}

#endif /* HTCP_MATH_H */
