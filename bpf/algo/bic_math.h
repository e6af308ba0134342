/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* bic_math.h - BIC-TCP's fixed-point rules, free of kernel types, so that the
 * very same code runs in bic.bpf.c and in the host-side unit tests that check
 * it against a floating-point model of spec §6 (loader/src/algo/bic/model.rs).
 *
 * Fixed point: the per-RTT increment f_α and β are << CCTL_FP_SHIFT (1.0 == 1024).
 * Include after cctl.h and something that defines __u32/__u64.
 */
#ifndef BIC_MATH_H
#define BIC_MATH_H

/*
 * BIC's private state (spec §6 "Per-flow state"). 72 bytes; must fit
 * icsk_ca_priv, which bic.bpf.c checks against the kernel's BTF at compile time.
 */
struct cctl_bic_ca {
	struct cctl_meas m;
	__u32 w_max;        /* w_1: window at the last loss, the search target, segments (0 = none) */
	__u32 w_min;        /* lower end of the binary search: β·w after a loss, then cwnd, segments */
	__u32 loss_cwnd;    /* w_2: window just before the last loss, segments (0 = no loss yet) */
	__u32 cnt;          /* acked packets (or ACKs) per +1 segment: tcp_cong_avoid_ai's divisor */
	__u32 inc_fp;       /* f_α: increase per RTT, segments << CCTL_FP_SHIFT */
	__u32 delayed_ack;  /* EWMA (gain 1/16) of packets per ACK, << BIC_ACK_RATIO_SHIFT */
	__u32 last_cwnd;    /* linux_exact: cwnd when cnt was last recomputed, segments */
	__u32 last_time;    /* linux_exact: jiffies then */
};

/* The tunables bic_inc_fp and bic_effective_inc_fp need, as bic.bpf.c passes them. */
struct bic_params {
	__u32 b;             /* B, binary-search divisor (>= 2) */
	__u32 smax;          /* S_max, max increment per RTT, segments */
	__u32 smooth;        /* σ: B/σ segments per RTT near the target (>= 1) */
	__u32 whole_delta;   /* bool: δ = ⌊(w_1 - w)/B⌋ in whole segments (Linux's dist) */
	__u32 low_window;    /* Low_Window, segments: Reno's 1 per RTT at or below */
	__u32 boost_max_cnt; /* before the first loss f >= w / this per RTT (0 = off) */
};

#define BIC_ACK_RATIO_SHIFT 4   /* delayed_ack is packets per ACK << 4 */
#define BIC_FP_MAX 0xffffffffull

/*
 * f_α(δ, w) of [P0] §IV-D (spec §6 "Rules"): the increase per RTT, segments << 10.
 * w = cwnd, w_1 = w_max (0: no loss yet, so w is always at or above it);
 * from p: b = B (binary-search divisor), smax = S_max (max increment per RTT,
 * segments), smooth = σ (B/σ per RTT near the target), whole_delta.
 * δ = (w_1 - w)/B, kept in 1/1024.
 *   f = B/σ              if (δ <= 1 and w < w_1) or w_1 <= w < w_1 + B
 *   f = δ                if 1 < δ <= S_max and w < w_1
 *   f = (w - w_1)/(B-1)  if B <= w - w_1 < S_max (B - 1)
 *   f = S_max            otherwise
 * b >= 2 and smooth >= 1 (the loader's limits); guarded anyway.
 * p->whole_delta: δ = ⌊(w_1 - w)/B⌋ in whole segments, as Linux's `dist` (so "δ <= 1"
 * covers w_1 - w < 2B, and f = δ takes whole values); else δ is kept in 1/1024.
 */
CCTL_MATH __u32 bic_inc_fp(__u32 w, __u32 w_1, const struct bic_params *p)
{
	__u32 b = p->b, smax = p->smax, smooth = p->smooth;
	__u64 smax_fp = (__u64)smax << CCTL_FP_SHIFT;
	__u64 near_fp, f;

	if (b < 2)
		b = 2;
	if (!smooth)
		smooth = 1;
	near_fp = ((__u64)b << CCTL_FP_SHIFT) / smooth;

	if (w < w_1) {
		__u64 delta_fp = p->whole_delta ? (__u64)((w_1 - w) / b) << CCTL_FP_SHIFT
					     : ((__u64)(w_1 - w) << CCTL_FP_SHIFT) / b;

		if (delta_fp <= CCTL_FP_ONE)
			f = near_fp;          /* binary search close to the target */
		else if (delta_fp <= smax_fp)
			f = delta_fp;         /* binary search: halfway-ish to the target */
		else
			f = smax_fp;          /* far below: linear, S_max per RTT */
	} else {
		__u64 above = (__u64)w - w_1;

		if (above < b)
			f = near_fp;          /* just past the old maximum: creep */
		else if (above < (__u64)smax * (b - 1))
			f = (above << CCTL_FP_SHIFT) / (b - 1); /* max probing */
		else
			f = smax_fp;          /* far above: linear, S_max per RTT */
	}
	if (f > BIC_FP_MAX)
		f = BIC_FP_MAX;
	return f ? (__u32)f : 1;
}

/*
 * Whole-window mode switch and the loss-free boost (spec §6 "Mode switch",
 * "Low-utilisation boost"): below or at p->low_window the increment is Reno's
 * 1 per RTT; while no loss has happened (w_1 == 0) it is at least
 * w / p->boost_max_cnt per RTT (boost_max_cnt = 20: 5 % per RTT; 0 = off);
 * otherwise bic_inc_fp(w, w_1, p).
 */
CCTL_MATH __u32 bic_effective_inc_fp(__u32 w, __u32 w_1, const struct bic_params *p)
{
	__u64 f;

	if (w <= p->low_window)
		return CCTL_FP_ONE;
	f = bic_inc_fp(w, w_1, p);
	if (!w_1 && p->boost_max_cnt) {
		__u64 boost = ((__u64)w << CCTL_FP_SHIFT) / p->boost_max_cnt;

		if (boost > f)
			f = boost;
	}
	if (f > BIC_FP_MAX)
		f = BIC_FP_MAX;
	return (__u32)f;
}

/*
 * The divisor handed to tcp_cong_avoid_ai: acked packets per +1 segment,
 * cnt = w / f (at least 1). With rescale (Linux's packets-per-ACK estimate,
 * delayed_ack = packets per ACK << 4, > 0) cnt is divided by that ratio.
 */
CCTL_MATH __u32 bic_cnt(__u32 w, __u32 inc_fp, __u32 rescale, __u32 delayed_ack)
{
	__u64 cnt = ((__u64)w << CCTL_FP_SHIFT) / (inc_fp ? inc_fp : 1);

	if (rescale && delayed_ack)
		cnt = (cnt << BIC_ACK_RATIO_SHIFT) / delayed_ack;
	if (cnt > BIC_FP_MAX)
		cnt = BIC_FP_MAX;
	return cnt ? (__u32)cnt : 1;
}

/* w_1 after a loss at window w (spec §6 "Loss"): (1 + β)/2 · w with fast
 * convergence when w fell short of the previous target, else w. β << 10. */
CCTL_MATH __u32 bic_new_w_max(__u32 w, __u32 w_1, __u32 beta_fp, __u32 fast_convergence)
{
	if (fast_convergence && w < w_1)
		return (__u32)(((__u64)w * (CCTL_FP_ONE + beta_fp)) >> (CCTL_FP_SHIFT + 1));
	return w;
}

/* ssthresh after a loss: Reno's max(w/2, 2) at or below low_window, else max(β w, 2). */
CCTL_MATH __u32 bic_ssthresh_of(__u32 w, __u32 beta_fp, __u32 low_window)
{
	__u32 s;

	if (w <= low_window)
		s = w >> 1;
	else
		s = (__u32)(((__u64)w * beta_fp) >> CCTL_FP_SHIFT);
	return s > 2 ? s : 2;
}

/* One step of the packets-per-ACK EWMA (gain 1/16), as Linux keeps it. */
CCTL_MATH __u32 bic_delayed_ack(__u32 delayed_ack, __u32 pkts_acked)
{
	__u32 d = delayed_ack - (delayed_ack >> BIC_ACK_RATIO_SHIFT) + pkts_acked;

	return d ? d : 1;
}

/*
 * linux_exact: tcp_bic.c's cnt in its own integer arithmetic (cnt = w / dist,
 * w·σ/B near the target, w·(B-1)/(w - w_1) when probing, w / S_max far off, w at
 * or below Low_Window; capped at boost_max_cnt before the first loss; then
 * divided by the packets-per-ACK estimate when rescale). The fixed-point rule
 * above differs by its rounding of B/σ (204/1024 for 4/20): one segment one ACK
 * later from windows of ~100 (cctl conform, 100-ms scripts).
 */
CCTL_MATH __u32 bic_linux_cnt(__u32 w, __u32 w_1, const struct bic_params *p, __u32 rescale,
			      __u32 delayed_ack)
{
	__u32 b = p->b < 2 ? 2 : p->b, smax = p->smax ? p->smax : 1, cnt;

	if (w <= p->low_window)
		return w ? w : 1;
	if (w < w_1) {
		__u32 dist = (w_1 - w) / b;

		if (dist > smax)
			cnt = w / smax;
		else if (dist <= 1)
			cnt = (w * p->smooth) / b;
		else
			cnt = w / dist;
	} else if (w < w_1 + b) {
		cnt = (w * p->smooth) / b;
	} else if (w < w_1 + smax * (b - 1)) {
		cnt = (w * (b - 1)) / (w - w_1);
	} else {
		cnt = w / smax;
	}
	if (!w_1 && p->boost_max_cnt && cnt > p->boost_max_cnt)
		cnt = p->boost_max_cnt;
	if (rescale && delayed_ack)
		cnt = (cnt << BIC_ACK_RATIO_SHIFT) / delayed_ack;
	return cnt ? cnt : 1;
}

#endif /* BIC_MATH_H */
