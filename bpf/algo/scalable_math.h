/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* scalable_math.h - Scalable TCP's fixed-point rules, free of kernel types, so that
 * the same code runs in scalable.bpf.c and in the host-side unit tests that check
 * it against a floating-point model of spec §3 (loader/src/algo/scalable/model.rs).
 *
 * The increase a is held in 1/10000 packet per acked packet (a = 0.01 == 100).
 * Include after cctl.h and something that defines __u32/__u64.
 */
#ifndef SCALABLE_MATH_H
#define SCALABLE_MATH_H

/* Scalable TCP's private state (spec §3). 64 bytes. */
struct cctl_scalable_ca {
	struct cctl_meas m;
	__u32 incr_ppm;      /* increase applied per acked packet at the last ACK, 1e-6 packets */
	__u32 switches;      /* number of legacy <-> scalable mode changes so far */
	__u8 mode;           /* SCALABLE_MODE_*: rule used at the last congestion-avoidance ACK */
	__u8 _pad[7];
};

#define SCALABLE_MODE_LEGACY 0   /* w <= Low_Window: Reno, w += 1/w per acked packet */
#define SCALABLE_MODE_SCALABLE 1 /* w > Low_Window: w += a per acked packet */

#define SCALABLE_A_ONE 10000u  /* a == 1.0 packet per acked packet */
#define SCALABLE_BETA_ONE 1000u /* β == 1.0 */

/* The tunable scalable_ai_args needs, as scalable.bpf.c passes it. */
struct scalable_params {
	__u32 a_per_10k; /* a, 1/10000 segment per acked packet (0.01 == 100) */
};

/* What scalable_ai_args returns: the arguments of tcp_cong_avoid_ai(tp, w, n). */
struct scalable_ai {
	__u32 w; /* counted units per +1 segment */
	__u32 n; /* units this ACK adds to the counter (snd_cwnd_cnt) */
};

/* Which rule applies at this cwnd (segments): legacy while w <= Low_Window. */
CCTL_MATH __u8 scalable_mode(__u32 cwnd, __u32 low_window)
{
	return cwnd > low_window ? SCALABLE_MODE_SCALABLE : SCALABLE_MODE_LEGACY;
}

/*
 * Whether the counter of tcp_cong_avoid_ai (snd_cwnd_cnt) counts whole acked packets
 * in scalable mode too: true when 1/a is an integer (a = 0.01 -> 100 packets per
 * segment, as Linux's AI_CNT), false when it must count in 1/10000 packets.
 */
CCTL_MATH int scalable_counts_packets(__u32 a_per_10k)
{
	return a_per_10k && SCALABLE_A_ONE % a_per_10k == 0;
}

/*
 * The arguments (ai->w, ai->n) for the kernel's additive-increase helper
 * tcp_cong_avoid_ai(tp, w, n), which adds one segment each time its counter
 * (snd_cwnd_cnt) reaches w:
 *   legacy:              (cwnd, acked)            -> w += 1/cwnd per acked packet;
 *   scalable, 1/a whole: (1/a, acked)             -> w += a per acked packet, exactly
 *                                                    Linux's min(cwnd, AI_CNT) above AI_CNT;
 *   scalable, otherwise: (10000, acked * a·10⁴)   -> the counter runs in 1/10000 packets,
 *                                                    exact for every a = k/10000.
 * a·10⁴ is p->a_per_10k (capped at SCALABLE_A_ONE). acked is capped at 65535 so
 * that acked * a·10⁴ stays below 2^30.
 */
CCTL_MATH void scalable_ai_args(__u8 mode, __u32 cwnd, __u32 acked,
				      const struct scalable_params *p, struct scalable_ai *ai)
{
	__u32 a_per_10k = p->a_per_10k;

	if (mode == SCALABLE_MODE_LEGACY) {
		ai->w = cwnd ? cwnd : 1;
		ai->n = acked;
		return;
	}
	if (a_per_10k > SCALABLE_A_ONE)
		a_per_10k = SCALABLE_A_ONE;
	if (!a_per_10k) {
		ai->w = 1;
		ai->n = 0;
		return;
	}
	if (scalable_counts_packets(a_per_10k)) {
		ai->w = SCALABLE_A_ONE / a_per_10k;
		ai->n = acked;
		return;
	}
	if (acked > 65535)
		acked = 65535;
	ai->w = SCALABLE_A_ONE;
	ai->n = acked * a_per_10k;
}

/* The increase per acked packet in this mode, 1e-6 packets (for the trace). */
CCTL_MATH __u32 scalable_incr_ppm(__u8 mode, __u32 cwnd, __u32 a_per_10k)
{
	if (mode == SCALABLE_MODE_LEGACY)
		return 1000000u / (cwnd ? cwnd : 1);
	return a_per_10k * 100u;
}

/*
 * ssthresh = max(w - ⌊w·(1 - β)⌋, 2): the decrease fraction b = 1 - β is rounded
 * down, so that β = 0.875 gives Linux's cwnd - (cwnd >> 3) exactly.
 */
CCTL_MATH __u32 scalable_ssthresh_segs(__u32 cwnd, __u32 beta_per_mille)
{
	__u32 b = beta_per_mille < SCALABLE_BETA_ONE ? SCALABLE_BETA_ONE - beta_per_mille : 0;
	__u32 s = cwnd - (__u32)(((__u64)cwnd * b) / SCALABLE_BETA_ONE);

	return s > 2 ? s : 2;
}

#endif /* SCALABLE_MATH_H */
