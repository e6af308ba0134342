/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* vegas_math.h - TCP Vegas's once-per-RTT rules (spec §9) in integer arithmetic,
 * free of kernel types, so that vegas.bpf.c and the host-side unit tests
 * (loader/src/algo/vegas/model.rs) run the very same code. yeah_math.h reuses
 * the RTT-sampling state layout idea but not this struct.
 *
 * Every threshold test compares exact integer products (w·(rtt − baseRTT)
 * against thr·baseRTT), so a decision is exactly the real-valued rule of the
 * spec; only the traced diff is rounded (down, to 1/1024 packet).
 * Include after cctl.h and something that defines __u32/__u64.
 */
#ifndef VEGAS_MATH_H
#define VEGAS_MATH_H

/* Vegas's private state (spec §9 "Per-flow state"). 76 bytes. */
struct cctl_vegas_ca {
	struct cctl_meas m;
	__u32 base_rtt_us;   /* baseRTT: minimum RTT sample (+1 us) since init/idle, usec (0 = none) */
	__u32 min_rtt_us;    /* minRTT of the current RTT, usec (0xffffffff = no sample yet) */
	__u32 cnt_rtt;       /* RTT samples taken in the current RTT */
	__u32 beg_snd_nxt;   /* snd_nxt when the current RTT began: its end is an ACK beyond this */
	__u32 diff_fp;       /* diff of the last Vegas RTT: estimated packets queued, << 10 */
	__u32 target_cwnd;   /* w · baseRTT / rtt of the last Vegas RTT, segments */
	__u8 doing_vegas_now; /* 1 in Open state: the per-RTT adjustment runs */
	__u8 _pad[3];
};

#define VEGAS_U32_MAX 0xffffffffull

/* The tunables vegas_update needs, as vegas.bpf.c passes them. */
struct vegas_params {
	__u32 alpha;        /* α: grow while fewer packets are queued */
	__u32 beta;         /* β: shrink while more packets are queued */
	__u32 gamma;        /* γ: leave slow start above this many queued */
	__u32 integer_diff; /* bool: compare ⌊diff⌋ as Linux does */
};

/* The RTTs vegas_update judges a Vegas RTT by. */
struct vegas_rtt {
	__u32 rtt_us;  /* smallest RTT sample of the RTT, usec */
	__u32 base_us; /* baseRTT, usec (0 = none) */
};

/* Actions of vegas_update (the bits of *what). */
#define VEGAS_LEFT_SS 1u  /* diff > γ in slow start: cwnd capped, slow start over */
#define VEGAS_DECREASE 2u /* diff > β: one segment less */
#define VEGAS_INCREASE 4u /* diff < α: one segment more */

/*
 * diff = w (rtt − baseRTT) / baseRTT: packets this flow keeps queued, << 10,
 * rounded down and saturated (spec §9; Linux's denominator, not the original
 * Vegas's rtt). 0 when rtt <= baseRTT or there is no baseRTT.
 */
CCTL_MATH __u32 vegas_diff_fp(__u32 cwnd, __u32 rtt_us, __u32 base_us)
{
	__u64 d;

	if (!base_us || rtt_us <= base_us)
		return 0;
	d = ((__u64)cwnd * (rtt_us - base_us) << 10) / base_us;
	return d > VEGAS_U32_MAX ? (__u32)VEGAS_U32_MAX : (__u32)d;
}

/* target_cwnd = w · baseRTT / rtt, segments, rounded down. */
CCTL_MATH __u32 vegas_target_cwnd(__u32 cwnd, __u32 rtt_us, __u32 base_us)
{
	if (!rtt_us)
		return cwnd;
	return (__u32)((__u64)cwnd * base_us / rtt_us);
}

/*
 * Whether diff > thr (integer_diff = 0: the real-valued rule) or, as Linux
 * compares a diff already truncated to whole packets, ⌊diff⌋ > thr, i.e.
 * diff >= thr + 1 (integer_diff = 1). Exact: w (rtt − base) vs thr · base.
 */
CCTL_MATH int vegas_diff_above(__u32 cwnd, __u32 rtt_us, __u32 base_us, __u32 thr,
				  __u32 integer_diff)
{
	__u64 lhs;

	if (!base_us || rtt_us <= base_us)
		return 0;
	lhs = (__u64)cwnd * (rtt_us - base_us);
	if (integer_diff)
		return lhs >= ((__u64)thr + 1) * base_us;
	return lhs > (__u64)thr * base_us;
}

/* Whether diff < thr; ⌊diff⌋ < thr is the same test for an integer thr. */
CCTL_MATH int vegas_diff_below(__u32 cwnd, __u32 rtt_us, __u32 base_us, __u32 thr)
{
	if (!base_us || rtt_us <= base_us)
		return thr > 0;
	return (__u64)cwnd * (rtt_us - base_us) < (__u64)thr * base_us;
}

/*
 * The once-per-RTT Vegas decision (spec §9 "Rules"), for an RTT with at least
 * three samples, whose smallest is r->rtt_us (r->base_us the baseRTT):
 *   slow start: diff > γ -> w = min(w, target + 1) and leave slow start;
 *               otherwise w unchanged (the caller slow-starts);
 *   CA:         diff > β -> w - 1;  diff < α -> w + 1;  otherwise hold;
 *   w >= 2 in every case.
 * α, β, γ (packets) and integer_diff (see vegas_diff_above) from p.
 * Returns the new window; *what gets VEGAS_* bits saying what happened.
 */
CCTL_MATH __u32 vegas_update(__u32 cwnd, const struct vegas_rtt *r, __u32 in_slow_start,
				const struct vegas_params *p, __u32 *what)
{
	__u32 rtt_us = r->rtt_us, base_us = r->base_us;

	*what = 0;
	if (in_slow_start) {
		if (vegas_diff_above(cwnd, rtt_us, base_us, p->gamma, p->integer_diff)) {
			__u32 t = vegas_target_cwnd(cwnd, rtt_us, base_us);

			if (t < 0xffffffffu && t + 1 < cwnd)
				cwnd = t + 1;
			*what = VEGAS_LEFT_SS;
		}
	} else if (vegas_diff_above(cwnd, rtt_us, base_us, p->beta, p->integer_diff)) {
		cwnd--;
		*what = VEGAS_DECREASE;
	} else if (vegas_diff_below(cwnd, rtt_us, base_us, p->alpha)) {
		if (cwnd < 0xffffffffu)
			cwnd++;
		*what = VEGAS_INCREASE;
	}
	return cwnd < 2 ? 2 : cwnd;
}

#endif /* VEGAS_MATH_H */
