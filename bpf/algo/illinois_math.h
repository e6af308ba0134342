/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* illinois_math.h - TCP Illinois' fixed-point rules (spec §13), free of kernel
 * types, so that the same code runs in illinois.bpf.c and in the host-side unit
 * tests that check it against the f64 model (loader/src/algo/illinois/model.rs).
 *
 * Fixed point as in the Linux module: α << 7 (1.0 == 128), β << 6 (1.0 == 64).
 * β is the *decrease fraction* here (w <- (1 - β) w), as in spec §13.
 * Delays are in usec.
 * Include after cctl.h and something that defines __u8/__u32/__u64.
 */
#ifndef ILLINOIS_MATH_H
#define ILLINOIS_MATH_H

#define ILLINOIS_ALPHA_SHIFT 7
#define ILLINOIS_ALPHA_ONE (1u << ILLINOIS_ALPHA_SHIFT) /* α = 1.0, Reno */
#define ILLINOIS_BETA_SHIFT 6
#define ILLINOIS_BETA_HALF (1u << (ILLINOIS_BETA_SHIFT - 1)) /* β = 1/2, Reno */

/*
 * Illinois' private state (spec §13 "Per-flow state"). 88 bytes; illinois.bpf.c
 * checks at compile time that it fits icsk_ca_priv.
 */
struct cctl_illinois_ca {
	struct cctl_meas m;
	__u64 sum_rtt_us;   /* sum of the RTT samples of the current RTT, usec */
	__u32 cnt_rtt;      /* number of RTT samples in the current RTT */
	__u32 base_rtt_us;  /* minimum RTT ever seen, usec (0x7fffffff = none yet) */
	__u32 max_rtt_us;   /* maximum RTT ever seen, usec */
	__u32 end_seq;      /* snd_nxt when the current RTT began: its right edge */
	__u32 alpha;        /* α: increase per RTT, packets << 7 */
	__u32 da_us;        /* d_a: average queueing delay of the last RTT, usec */
	__u32 dm_us;        /* d_m: maximum queueing delay, usec */
	__u32 pkts_acked;   /* packets the last pkts_acked saw (linux_ai), then 1 */
	__u16 beta;         /* β: decrease fraction, << 6 */
	__u8 rtt_above;     /* 1 once d_a has been above d1 (α left α_max) */
	__u8 rtt_low;       /* consecutive RTTs with d_a <= d1 since then */
};

/* The tunables illinois_alpha_fp and illinois_beta_fp need, as illinois.bpf.c passes them. */
struct illinois_params {
	__u32 theta; /* θ, low-delay RTTs before α_max again */
	__u32 d1_pm; /* d1, per-mille of d_m */
	__u32 d2_pm; /* d2, per-mille of d_m */
	__u32 d3_pm; /* d3, per-mille of d_m */
	__u32 amin;  /* α_min, packets per RTT << 7 (> 0) */
	__u32 amax;  /* α_max, packets per RTT << 7 (>= amin) */
	__u32 bmin;  /* β_min, decrease fraction << 6 */
	__u32 bmax;  /* β_max, decrease fraction << 6 */
};

/* α's θ bookkeeping, as illinois_alpha_fp updates it (cctl_illinois_ca's two bytes). */
struct illinois_theta_state {
	__u8 rtt_above; /* 1 once d_a has been above d1 (α left α_max) */
	__u8 rtt_low;   /* consecutive RTTs with d_a <= d1 since then */
};

/* d1, d2, d3 are per-mille fractions of d_m (spec §13 table), rounded down to a usec. */
CCTL_MATH __u32 illinois_frac(__u32 dm, __u32 pm)
{
	return (__u32)(((__u64)dm * pm) / 1000);
}

/*
 * α(d_a) (spec §13 "Rules"), << 7:
 *   d_a <= d1: α_max, but once d_a has been above d1 only after θ consecutive
 *              such RTTs (until then α keeps its current value cur_alpha);
 *   d_a >  d1: κ1 / (κ2 + d_a) through (d1, α_max) and (d_m, α_min), in the form
 *              α = (d_m - d1) α_max / ((d_m - d1) + (d_a - d1)(α_max - α_min) / α_min).
 * st is the θ bookkeeping (rtt_above / rtt_low, updated in place). θ (RTTs),
 * d1 (per-mille), α_min and α_max from p; p->amin must be > 0 and <= p->amax
 * (the loader checks).
 */
CCTL_MATH __u32 illinois_alpha_fp(__u32 da, __u32 dm, __u32 cur_alpha,
					struct illinois_theta_state *st,
					const struct illinois_params *p)
{
	__u32 d1 = illinois_frac(dm, p->d1_pm);
	__u32 amin = p->amin, amax = p->amax;
	__u64 num, den;

	if (da <= d1) {
		if (!st->rtt_above)
			return amax;
		/* one good RTT must not cause a sudden jump back to α_max */
		if (++st->rtt_low < p->theta)
			return cur_alpha;
		st->rtt_low = 0;
		st->rtt_above = 0;
		return amax;
	}
	st->rtt_above = 1;

	if (da > dm) /* the average cannot exceed the maximum; guard anyway */
		da = dm;
	if (!amin)
		amin = 1;
	num = (__u64)(dm - d1) * amax;
	den = (__u64)(dm - d1) + ((__u64)(da - d1) * (amax > amin ? amax - amin : 0)) / amin;
	if (!den)
		return amax;
	return (__u32)(num / den);
}

/*
 * β(d_a) (spec §13 "Rules"), << 6: β_min up to d2, β_max from d3 on, linear in
 * between (β_max also when d3 <= d2, i.e. d_m too small to tell). d2, d3,
 * β_min and β_max from p.
 */
CCTL_MATH __u32 illinois_beta_fp(__u32 da, __u32 dm, const struct illinois_params *p)
{
	__u32 d2 = illinois_frac(dm, p->d2_pm), d3;
	__u32 bmin = p->bmin, bmax = p->bmax;

	if (da <= d2)
		return bmin;
	d3 = illinois_frac(dm, p->d3_pm);
	if (da >= d3 || d3 <= d2)
		return bmax;
	return (__u32)(((__u64)bmin * (d3 - da) + (__u64)bmax * (da - d2)) / (d3 - d2));
}

/* d_a = average RTT of the last RTT - base RTT; 0 when no sample or below base. */
CCTL_MATH __u32 illinois_avg_delay(__u64 sum_us, __u32 cnt, __u32 base_us)
{
	__u64 avg;

	if (!cnt)
		return 0;
	avg = sum_us / cnt;
	return avg > base_us ? (__u32)(avg - base_us) : 0;
}

/* ssthresh = max(w - β w, 2) segments, β w rounded down (as Linux). */
CCTL_MATH __u32 illinois_fp_ssthresh(__u32 cwnd, __u32 beta_fp)
{
	__u64 dec = ((__u64)cwnd * beta_fp) >> ILLINOIS_BETA_SHIFT;
	__u32 s = dec >= cwnd ? 0 : cwnd - (__u32)dec;

	return s > 2 ? s : 2;
}

/*
 * w += α/w per acked packet, done as one segment per w/α acked packets: the "w"
 * argument of tcp_cong_avoid_ai (which keeps the remainder in snd_cwnd_cnt).
 */
CCTL_MATH __u32 illinois_ai_divisor(__u32 cwnd, __u32 alpha_fp)
{
	__u64 w = ((__u64)cwnd << ILLINOIS_ALPHA_SHIFT) / (alpha_fp ? alpha_fp : 1);

	if (w < 1)
		w = 1;
	if (w > 0xffffffffull)
		w = 0xffffffffull;
	return (__u32)w;
}

#endif /* ILLINOIS_MATH_H */
