/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* compound_math.h - Compound TCP's fixed-point rules (spec §12), free of kernel
 * types, so that the same code runs in compound.bpf.c and in the host-side unit
 * tests that check it against the f64 model (loader/src/algo/compound/model.rs).
 *
 * Fixed point: windows and diff in packets << CCTL_FP_SHIFT (1.0 == 1024);
 * α, β, k, ζ in per-mille; times in usec. win^k is exp2(k · log2 win) with
 * 16 fractional bits in the exponent (bounded loops, a 16-entry table).
 * Include after cctl.h and something that defines __u32/__u64.
 */
#ifndef COMPOUND_MATH_H
#define COMPOUND_MATH_H

/*
 * Compound's private state (spec §12 "Per-flow state"). 96 bytes; compound.bpf.c
 * checks at compile time that it fits icsk_ca_priv. The kernel's snd_cwnd is
 * cwnd_reno + ⌊dwnd⌋.
 */
struct cctl_compound_ca {
	struct cctl_meas m;
	__u64 rtt_sum_us;      /* sum of the RTT samples of the current round, usec */
	__u32 cwnd_reno;       /* cwnd: the loss-based (Reno) window, packets */
	__u32 reno_cnt;        /* acked packets towards cwnd_reno's next increment */
	__u32 dwnd_fp;         /* dwnd: the delay-based window, packets << 10 */
	__u32 diff_fp;         /* diff of the last round: packets queued, << 10 */
	__u32 base_rtt_us;     /* baseRTT: minimum RTT seen, usec (0 = none yet) */
	__u32 rtt_min_us;      /* minimum RTT sample of the current round, usec (0 = none) */
	__u32 rtt_cnt;         /* RTT samples in the current round */
	__u32 end_seq;         /* snd_nxt when the round began: its right edge */
	__u32 undo_cwnd_reno;  /* cwnd_reno before the current reduction */
	__u32 undo_dwnd_fp;    /* dwnd before the current reduction, << 10 */
};

/* The tunables compound_dwnd_update needs, as compound.bpf.c passes them. */
struct compound_params {
	__u32 alpha_pm;   /* α, per-mille */
	__u32 k_pm;       /* k, exponent of the binomial growth, per-mille */
	__u32 zeta_pm;    /* ζ, dwnd retreat per packet of diff, per-mille */
	__u32 gamma_pkts; /* γ, queue target of the delay window, packets */
};

#define COMPOUND_FP_MAX 0xffffffffull

/* 2^(2^-j) << 30, j = 1..16, rounded to nearest. */
static const __u32 compound_exp2_tab[16] = {
	1518500250, 1276901417, 1170923762, 1121280436, 1097253708, 1085434106,
	1079572136, 1076653033, 1075196443, 1074468888, 1074105294, 1073923544,
	1073832680, 1073787251, 1073764537, 1073753181,
};

/* log2(x) << 16 for x >= 1 (0 for x <= 1), fractional bits by repeated squaring. */
CCTL_MATH __u32 compound_log2_q16(__u64 x)
{
	__u32 n = 0, frac = 0, i;
	__u64 t = x, m;

	if (x <= 1)
		return 0;
	if (t >> 32) {
		t >>= 32;
		n += 32;
	}
	if (t >> 16) {
		t >>= 16;
		n += 16;
	}
	if (t >> 8) {
		t >>= 8;
		n += 8;
	}
	if (t >> 4) {
		t >>= 4;
		n += 4;
	}
	if (t >> 2) {
		t >>= 2;
		n += 2;
	}
	if (t >> 1)
		n += 1;
	/* mantissa in [1, 2) as Q30 */
	m = n >= 30 ? x >> (n - 30) : x << (30 - n);
	/* branch-free, so the verifier walks one path through the loop */
	for (i = 0; i < 16; i++) {
		__u64 b;

		m = (m * m) >> 30; /* m < 2^31, so m² < 2^62; now m < 2^32 */
		b = m >> 31;       /* 1 iff m >= 2 */
		m >>= b;
		frac = (frac << 1) | (__u32)b;
	}
	return (n << 16) | frac;
}

/* 2^(y / 2^16) << 10, saturating at 2^64 - 1. */
CCTL_MATH __u64 compound_exp2_fp(__u64 y)
{
	__u64 e = y >> 16, r = 1ull << 30;
	__u32 f = (__u32)(y & 0xffff), j;

	/* branch-free: multiply by 2^(2^-j) or by 1 */
	for (j = 0; j < 16; j++) {
		__u64 mask = 0 - (__u64)((f >> (15 - j)) & 1);
		__u64 factor = (1ull << 30) + (((__u64)compound_exp2_tab[j] - (1ull << 30)) & mask);

		r = (r * factor) >> 30; /* r, factor < 2^31 */
	}
	if (e >= 20) {
		if (e - 20 > 32)
			return 0xffffffffffffffffull;
		return r << (e - 20);
	}
	return r >> (20 - e);
}

/* win^k << 10 (k = k_pm / 1000), for win in packets. */
CCTL_MATH __u64 compound_pow_fp(__u32 win, __u32 k_pm)
{
	if (!win)
		return 0;
	return compound_exp2_fp((__u64)compound_log2_q16(win) * k_pm / 1000);
}

/*
 * diff = (expected - actual) · baseRTT = (win/baseRTT - win/RTT) · baseRTT
 *      = win · (RTT - baseRTT) / RTT: the packets this flow keeps queued (spec §12).
 * << 10; 0 when RTT <= baseRTT.
 */
CCTL_MATH __u32 compound_diff_fp(__u32 win, __u32 base_us, __u32 rtt_us)
{
	__u64 d;

	if (!rtt_us || rtt_us <= base_us)
		return 0;
	d = ((__u64)win << CCTL_FP_SHIFT) * (rtt_us - base_us) / rtt_us;
	return d > COMPOUND_FP_MAX ? (__u32)COMPOUND_FP_MAX : (__u32)d;
}

/*
 * Once per RTT (spec §12 "per RTT"), dwnd << 10:
 *   diff <  γ:  dwnd += max(α · win^k - 1, 0)    (binomial growth)
 *   diff >= γ:  dwnd  = max(dwnd - ζ · diff, 0)  (retreat as the queue builds)
 * win in packets; α, k, ζ (per-mille) and γ (packets) from p. Saturates at
 * 2^32 - 1.
 */
CCTL_MATH __u32 compound_dwnd_update(__u32 win, __u32 dwnd_fp, __u32 diff_fp,
					   const struct compound_params *p)
{
	if (diff_fp < ((__u64)p->gamma_pkts << CCTL_FP_SHIFT)) {
		__u64 pw = compound_pow_fp(win, p->k_pm), inc, d;

		if (pw > (COMPOUND_FP_MAX << 10)) /* keep α · win^k in 64 bits */
			pw = COMPOUND_FP_MAX << 10;
		inc = pw * p->alpha_pm / 1000;
		if (inc <= CCTL_FP_ONE)
			return dwnd_fp;
		d = (__u64)dwnd_fp + inc - CCTL_FP_ONE;
		return d > COMPOUND_FP_MAX ? (__u32)COMPOUND_FP_MAX : (__u32)d;
	} else {
		__u64 dec = (__u64)diff_fp * p->zeta_pm / 1000;

		return dec >= dwnd_fp ? 0 : dwnd_fp - (__u32)dec;
	}
}

/*
 * On loss (spec §12): cwnd <- cwnd/2 (rounded down, at least 1) and
 * dwnd <- max(win · (1 - β) - cwnd/2, 0), so the total is about (1 - β) · win.
 * win = cwnd + ⌊dwnd⌋ before the loss, packets; β per-mille.
 * Returns the new dwnd << 10; *cwnd_reno is halved in place.
 */
CCTL_MATH __u32 compound_loss(__u32 win, __u32 *cwnd_reno, __u32 beta_pm)
{
	__u64 keep = ((__u64)win << CCTL_FP_SHIFT) * (beta_pm < 1000 ? 1000 - beta_pm : 0) / 1000;
	__u64 half = (__u64)*cwnd_reno << (CCTL_FP_SHIFT - 1);
	__u64 d = keep > half ? keep - half : 0;

	*cwnd_reno = *cwnd_reno > 2 ? *cwnd_reno >> 1 : 1;
	return d > COMPOUND_FP_MAX ? (__u32)COMPOUND_FP_MAX : (__u32)d;
}

/*
 * Reno part, per ACK: cwnd += 1/win per acked packet, paced by the total window
 * (spec §12): one packet per win acked packets, remainder kept in *cnt.
 */
CCTL_MATH void compound_reno_ai(__u32 *cwnd_reno, __u32 *cnt, __u32 win, __u32 acked)
{
	if (!win)
		win = 1;
	*cnt += acked;
	if (*cnt >= win) {
		__u32 inc = *cnt / win;

		*cnt -= inc * win;
		*cwnd_reno += inc;
	}
}

/*
 * Bring (cwnd_reno, dwnd) in line with the kernel's snd_cwnd when the kernel
 * changed it (recovery exit, undo, idle restart, application-limited decay):
 * dwnd is kept and the Reno part takes the difference; if snd_cwnd is below
 * ⌊dwnd⌋ + 1, dwnd shrinks to leave the Reno part one packet.
 */
CCTL_MATH void compound_sync(__u32 snd_cwnd, __u32 *cwnd_reno, __u32 *dwnd_fp)
{
	__u32 dw = *dwnd_fp >> CCTL_FP_SHIFT;

	if ((__u64)*cwnd_reno + dw == snd_cwnd)
		return;
	if (snd_cwnd > dw) {
		*cwnd_reno = snd_cwnd - dw;
	} else {
		*dwnd_fp = snd_cwnd > 1 ? (snd_cwnd - 1) << CCTL_FP_SHIFT : 0;
		*cwnd_reno = snd_cwnd > 1 ? 1 : snd_cwnd;
	}
}

#endif /* COMPOUND_MATH_H */
