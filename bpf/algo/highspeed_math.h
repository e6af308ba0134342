/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* highspeed_math.h - HighSpeed TCP's fixed-point rules (RFC 3649), free of kernel
 * types, so that the same code runs in highspeed.bpf.c, africa.bpf.c and the host
 * unit tests that check it against a floating-point model of spec §4
 * (loader/src/algo/highspeed/model.rs).
 *
 * a(w) (segments per RTT) and b(w) (decrease fraction) are << 16 ("q16");
 * logarithms are base 2, << 16. The additive-increase counter (snd_cwnd_cnt)
 * runs in 1/1024 segments. Include after cctl.h and something that defines
 * __u32/__u64/__s64.
 */
#ifndef HIGHSPEED_MATH_H
#define HIGHSPEED_MATH_H

/* HighSpeed TCP's private state (spec §4). 64 bytes. */
struct cctl_highspeed_ca {
	struct cctl_meas m;
	__u32 a_q16;    /* a(w): increase per RTT at the last update, segments << 16 */
	__u32 b_q16;    /* b(w): decrease fraction at the last update, << 16 */
	__u32 a_cwnd;   /* cwnd (segments) a and b were computed for (0 = none yet) */
	__u16 idx;      /* row of the nearest-entry table (Linux's ai): a = idx + 1 in table mode */
	__u16 _pad;
};

/* RFC 3649's tunables hstcp_formula_ab needs, as highspeed.bpf.c and africa.bpf.c pass them. */
struct highspeed_params {
	__u32 low_window;              /* W_L, segments */
	__u32 high_window;             /* W_H, segments */
	__u32 high_p_ppb;              /* P_H, per 10^9 */
	__u32 high_decrease_per_mille; /* b_H, 1/1000 */
};

#define HSTCP_MODE_TABLE 0       /* RFC 3649 Appendix B rows, Linux's lookup */
#define HSTCP_MODE_INTERPOLATE 1 /* a(w), b(w) from RFC 3649's formulas */

#define HSTCP_Q16 16
#define HSTCP_ONE_Q16 (1u << HSTCP_Q16)
#define HSTCP_HALF_Q16 (1u << (HSTCP_Q16 - 1))
#define HSTCP_CNT_SHIFT 10                 /* snd_cwnd_cnt unit: 1/1024 segment */
#define HSTCP_MAX_CWND ((1u << 22) - 1)    /* segments: cwnd << 10 must fit 32 bits */
#define HSTCP_LOG2_1_5_Q16 38336           /* log2(1.5) << 16 */
#define HSTCP_LOG2_1E9_Q16 1959353         /* log2(10^9) << 16: P_H is given per 10^9 */
#define HSTCP_TABLE_ROWS 72

/*
 * RFC 3649 Appendix B (72 rows): upper cwnd bound of each row (segments) and its decrease
 * fraction b << 8. Row i has a(w) = i + 1. (Also what Linux's tcp_highspeed uses.)
 */
static const __u32 hstcp_rows_cwnd[] = {
	38,    118,   221,   347,   495,   663,   851,   1058,  1284,  1529,  1793,  2076,
	2378,  2699,  3039,  3399,  3778,  4177,  4596,  5036,  5497,  5979,  6483,  7009,
	7558,  8130,  8726,  9346,  9991,  10661, 11358, 12082, 12834, 13614, 14424, 15265,
	16137, 17042, 17981, 18955, 19965, 21013, 22101, 23230, 24402, 25618, 26881, 28193,
	29557, 30975, 32450, 33986, 35586, 37253, 38992, 40808, 42707, 44694, 46776, 48961,
	51258, 53677, 56230, 58932, 61799, 64851, 68113, 71617, 75401, 79517, 84035, 89053,
};
static const __u8 hstcp_rows_md[] = {
	128, 112, 104, 98, 93, 89, 86, 83, 81, 78, 76, 74, 72, 71, 69, 68, 66, 65, 64,
	62,  61,  60,  59, 58, 57, 56, 55, 54, 53, 52, 52, 51, 50, 49, 48, 48, 47, 46,
	45,  45,  44,  43, 43, 42, 41, 41, 40, 39, 39, 38, 38, 37, 36, 36, 35, 35, 34,
	33,  33,  32,  32, 31, 30, 30, 29, 28, 28, 27, 26, 26, 25, 24,
};
_Static_assert(sizeof(hstcp_rows_cwnd) == HSTCP_TABLE_ROWS * sizeof(__u32) &&
		       sizeof(hstcp_rows_md) == HSTCP_TABLE_ROWS,
	       "RFC 3649 Appendix B has 72 rows");

/* Row idx of the table (idx modulo its rows): the cwnd it starts at, segments, and
 * its decrease b in 1/256 (for the host tests; the programs use hstcp_table_ab). */
CCTL_MATH __u32 hstcp_table_row(__u32 idx, __u32 *md)
{
	*md = hstcp_rows_md[idx % HSTCP_TABLE_ROWS];
	return hstcp_rows_cwnd[idx % HSTCP_TABLE_ROWS];
}

/* Hides a value's provenance from the compiler, so that the bound check after it
 * stays in the program and the BPF verifier sees it. */
#define HSTCP_OPAQUE(x) asm volatile("" : "+r"(x))

/*
 * The table row for cwnd: the first row with cwnd <= rows[idx], or the last row.
 * Linux moves its index up or down from the previous one until
 * rows[idx - 1] < cwnd <= rows[idx]; that condition has this single solution, so
 * a binary search (7 probes) gives the same row from any starting point.
 */
CCTL_MATH __u32 hstcp_table_index(__u32 cwnd)
{
	__u32 lo = 0, hi = HSTCP_TABLE_ROWS - 1, mid, k;

	for (k = 0; k < 7; k++) {
		if (lo >= hi)
			break;
		mid = (lo + hi) >> 1;
		HSTCP_OPAQUE(mid);
		if (mid >= HSTCP_TABLE_ROWS)
			break;
		if (cwnd <= hstcp_rows_cwnd[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* Table mode: a = idx + 1, b = md / 256. */
CCTL_MATH void hstcp_table_ab(__u32 idx, __u32 *a_q16, __u32 *b_q16)
{
	HSTCP_OPAQUE(idx);
	if (idx >= HSTCP_TABLE_ROWS)
		idx = HSTCP_TABLE_ROWS - 1;
	*a_q16 = (idx + 1) << HSTCP_Q16;
	*b_q16 = (__u32)hstcp_rows_md[idx] << (HSTCP_Q16 - 8);
}

/*
 * One step of the top-bit search: if x >> k (known < 2^k) is non-zero, shift x
 * right by k and add k to n. Branch-free, so that the verifier walks one path.
 */
#define HSTCP_TOPBIT_STEP(x, n, k)                                             \
	do {                                                                   \
		__u64 s_ = (((x) >> (k)) + ((1ull << (k)) - 1)) >> (k); /* 0/1 */ \
		(x) >>= s_ * (k);                                              \
		(n) += (__u32)(s_ * (k));                                      \
	} while (0)

/*
 * log2(x) << 16 for an integer x >= 1 (0 for x = 0): the integer part from the
 * position of the top bit, the fraction bit by bit by squaring the mantissa
 * (held in [1, 2) << 31). Truncates: the result is at most ~2 units below.
 * Branch-free loops: the verifier's cost does not grow with the input.
 */
CCTL_MATH __u32 hstcp_log2_q16(__u64 x)
{
	__u32 n = 0, frac = 0, i;
	__u64 m = x, bit;

	if (!x)
		return 0;
	HSTCP_TOPBIT_STEP(m, n, 32);
	HSTCP_TOPBIT_STEP(m, n, 16);
	HSTCP_TOPBIT_STEP(m, n, 8);
	HSTCP_TOPBIT_STEP(m, n, 4);
	HSTCP_TOPBIT_STEP(m, n, 2);
	HSTCP_TOPBIT_STEP(m, n, 1);

	m = n <= 31 ? x << (31 - n) : x >> (n - 31);
	for (i = 0; i < HSTCP_Q16; i++) {
		m = (m * m) >> 31; /* in [1, 4) << 31 */
		bit = m >> 32;     /* 1 when the square is >= 2 */
		frac = (frac << 1) | (__u32)bit;
		m >>= bit;
	}
	return (n << HSTCP_Q16) | frac;
}

/* 2^(2^-k) << 30 for k = 1..16. */
static const __u32 hstcp_exp2_steps[HSTCP_Q16] = {
	1518500250, 1276901417, 1170923762, 1121280436, 1097253708, 1085434106,
	1079572136, 1076653033, 1075196443, 1074468888, 1074105294, 1073923544,
	1073832680, 1073787251, 1073764537, 1073753181,
};

#define HSTCP_SAT 0xffffffffull

/*
 * 2^x for x << 16 (signed), result << 16, saturating at 2^32 - 1: 2^frac as a
 * product of the 2^(2^-k) of its set bits (<< 30), then shifted by the integer part.
 */
CCTL_MATH __u32 hstcp_exp2_q16(__s64 x_q16)
{
	__s64 n = x_q16 >> HSTCP_Q16; /* floor */
	__u32 frac = (__u32)(x_q16 & (HSTCP_ONE_Q16 - 1)); /* x - floor(x), two's complement */
	__u64 r = 1ull << 30;
	__u32 i;

	for (i = 0; i < HSTCP_Q16; i++) {
		/* multiply by the step if bit 15 - i of frac is set, by 1.0 otherwise */
		__u64 mask = 0 - (__u64)((frac >> (HSTCP_Q16 - 1 - i)) & 1);
		__u64 f = (1ull << 30) + (((__u64)hstcp_exp2_steps[i] - (1ull << 30)) & mask);

		r = (r * f) >> 30;
	}
	/* value << 16 = r << 16 >> 30 << n = r << (n - 14) */
	if (n >= 14) {
		if (n - 14 >= 32)
			return (__u32)HSTCP_SAT;
		r <<= (n - 14);
		return r > HSTCP_SAT ? (__u32)HSTCP_SAT : (__u32)r;
	}
	if (14 - n >= 63)
		return 0;
	return (__u32)(r >> (14 - n));
}

/*
 * RFC 3649's a(w) and b(w) for w > W_L (spec §4), with t = log(w/W_L) / log(W_H/W_L)
 * (w capped at W_H, so beyond it both stay at their W_H values):
 *   b(w) = 0.5 - (0.5 - b_H) t
 *   p(w) = P_L^(1-t) P_H^t,  P_L = 1.5 / W_L²
 *   a(w) = w² p(w) · 2 b(w) / (2 - b(w))
 * For w <= W_L: a = 1, b = 0.5 (Reno). W_L, W_H, P_H and b_H from p (windows in
 * segments, P_H per 10^9, b_H per mille); results << 16. Needs W_H > W_L >= 1
 * (the loader checks; W_H <= W_L or W_L = 0 gives Reno's a and b).
 */
CCTL_MATH void hstcp_formula_ab(__u32 w, const struct highspeed_params *p, __u32 *a_q16,
				   __u32 *b_q16)
{
	__u32 low_window = p->low_window, high_window = p->high_window;
	__u32 lw, ll, lh, bh, t, b;
	__s64 log2_pl, log2_ph, e;
	__u64 a;

	if (w <= low_window || high_window <= low_window || !low_window) {
		*a_q16 = HSTCP_ONE_Q16;
		*b_q16 = HSTCP_HALF_Q16;
		return;
	}
	if (w > high_window)
		w = high_window;
	lw = hstcp_log2_q16(w);
	ll = hstcp_log2_q16(low_window);
	lh = hstcp_log2_q16(high_window);
	t = lh > ll ? (__u32)(((__u64)(lw - ll) << HSTCP_Q16) / (lh - ll)) : 0;
	if (t > HSTCP_ONE_Q16)
		t = HSTCP_ONE_Q16;

	bh = (__u32)(((__u64)p->high_decrease_per_mille << HSTCP_Q16) / 1000);
	if (bh > HSTCP_HALF_Q16)
		bh = HSTCP_HALF_Q16;
	b = HSTCP_HALF_Q16 - (__u32)(((__u64)(HSTCP_HALF_Q16 - bh) * t) >> HSTCP_Q16);

	log2_pl = (__s64)HSTCP_LOG2_1_5_Q16 - 2 * (__s64)ll;
	log2_ph = (__s64)hstcp_log2_q16(p->high_p_ppb ? p->high_p_ppb : 1) - HSTCP_LOG2_1E9_Q16;
	/* log2(w² p(w)) = 2 log2 w + log2 P_L + t (log2 P_H - log2 P_L) */
	e = 2 * (__s64)lw + log2_pl + (((log2_ph - log2_pl) * (__s64)t) >> HSTCP_Q16);

	a = (__u64)hstcp_exp2_q16(e) * (2ull * b) / ((2ull << HSTCP_Q16) - b);
	*a_q16 = a > HSTCP_SAT ? (__u32)HSTCP_SAT : (a ? (__u32)a : 1);
	*b_q16 = b;
}

/*
 * One additive-increase step: w += a/w per counted packet, with a fractional
 * counter in 1/1024 segments (snd_cwnd_cnt): it gains n * a and one segment is
 * added per cwnd of it. No growth at or beyond `clamp` or HSTCP_MAX_CWND.
 * In Linux's event mode (n = 1, table a = idx + 1) this is tcp_highspeed's
 * `cnt += ai + 1; if (cnt >= cwnd) { cnt -= cwnd; cwnd++; }` scaled by 1024.
 */
CCTL_MATH void hstcp_ai_step(__u32 *cwnd, __u32 *cnt, __u32 n, __u32 a_q16, __u32 clamp)
{
	__u64 thr, c;
	__u32 d;

	if (*cwnd >= clamp || *cwnd >= HSTCP_MAX_CWND || !*cwnd)
		return;
	thr = (__u64)*cwnd << HSTCP_CNT_SHIFT;
	c = (__u64)*cnt + (__u64)n * (a_q16 >> (HSTCP_Q16 - HSTCP_CNT_SHIFT));
	if (c >= thr) {
		d = (__u32)(c / thr);
		c -= (__u64)d * thr;
		*cwnd += d;
		if (*cwnd > clamp)
			*cwnd = clamp;
		if (*cwnd > HSTCP_MAX_CWND)
			*cwnd = HSTCP_MAX_CWND;
	}
	*cnt = (__u32)c;
}

/*
 * RFC 3742 limited slow start above max_ssthresh (segments): w += 1/K per counted
 * packet with K = ⌊w / (max_ssthresh / 2)⌋, i.e. at most max_ssthresh/2 segments
 * per RTT. As an a for hstcp_ai_step (w += a/w): a = w / K, << 16.
 */
CCTL_MATH __u32 hstcp_limited_ss_a_q16(__u32 cwnd, __u32 max_ssthresh)
{
	__u32 k = max_ssthresh >= 2 ? cwnd / (max_ssthresh / 2) : cwnd;
	__u64 a;

	if (!k)
		k = 1;
	a = ((__u64)cwnd << HSTCP_Q16) / k;
	return a > HSTCP_SAT ? (__u32)HSTCP_SAT : (__u32)a;
}

/* ssthresh = max(w - ⌊w b⌋, 2) segments: Linux's cwnd - ((cwnd * md) >> 8) in table mode. */
CCTL_MATH __u32 hstcp_ssthresh_segs(__u32 cwnd, __u32 b_q16)
{
	__u32 s = cwnd - (__u32)(((__u64)cwnd * b_q16) >> HSTCP_Q16);

	return s > 2 ? s : 2;
}

#endif /* HIGHSPEED_MATH_H */
