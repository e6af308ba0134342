/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* fast_math.h - FAST TCP's estimation and window control (spec §8; [P1] §IV-A,
 * eq. 5-7; [P0] §IV-E adaptive α) in fixed point, free of kernel types, so that
 * fast.bpf.c and the host-side unit tests (loader/src/algo/fast/model.rs) run
 * the very same code.
 *
 * Fixed point: T̄ in usec << 10; η << 16; the ratio baseRTT/T̄ << 20; γ << 10;
 * packets per ACK << 8. Include after cctl.h and something that defines __u32/__u64.
 */
#ifndef FAST_MATH_H
#define FAST_MATH_H

/* FAST's private state (spec §8 "Per-flow state"). 104 bytes. */
struct cctl_fast_ca {
	struct cctl_meas m;
	__u64 avg_rtt_fp;     /* T̄: EWMA of the RTT samples, usec << 10 (0 = none yet) */
	__u32 base_rtt_us;    /* baseRTT d: minimum RTT ever observed, usec (0 = none) */
	__u32 alpha_pkts;     /* α in use, packets */
	__u32 target_cwnd;    /* window of the last update, segments (the spread goes there) */
	__u32 ref_cwnd;       /* cwnd when the last update was computed, segments */
	__u32 spread_cnt;     /* acked packets × increment, carried between ACKs (< ref_cwnd) */
	__u32 beg_snd_nxt;    /* snd_nxt when the current RTT began: its end is an ACK beyond it */
	__u32 rtt_start_us;   /* low 32 bits of tcp_mstamp when the current RTT began, usec */
	__u32 delivered0;     /* tp->delivered when the current RTT began, segments */
	__u32 tput_kBps;      /* B: throughput of the last RTT, kB/s (for the adaptive α) */
	__u32 last_update_us; /* low 32 bits of tcp_mstamp at the last window update, usec */
	__u16 ack_ratio_fp;   /* packets per ACK, EWMA (gain 1/8), << 8 */
	__u8 phase;           /* FAST_PHASE_* */
	__u8 alpha_level;     /* adaptive α level 0, 1, 2 ([P0]) */
	__u8 _pad[4];
};

/* Phases (trace variable `phase`). */
#define FAST_PHASE_SLOW_START 0 /* standard slow start, until queueing delay shows */
#define FAST_PHASE_UPDATE 1     /* update RTT: the window moves towards its target */
#define FAST_PHASE_FREEZE 2     /* freeze RTT: the window is held */
#define FAST_PHASE_RECOVERY 3   /* loss recovery: no delay-based adjustments */

#define FAST_ACK_RATIO_ONE 256u            /* 1 packet per ACK, << 8 */
#define FAST_ACK_RATIO_MAX (64u << 8)      /* packets per ACK are clamped to [1, 64] */
#define FAST_U32_MAX 0xffffffffull

/* The tunables fast_alpha_level and fast_ss_exit need, as fast.bpf.c passes them. */
struct fast_params {
	__u32 m0u_kBps;           /* α level 0 -> 1 above, kB/s */
	__u32 m1l_kBps;           /* α level 1 -> 0 below, kB/s */
	__u32 m1u_kBps;           /* α level 1 -> 2 above, kB/s */
	__u32 m2l_kBps;           /* α level 2 -> 1 below, kB/s */
	__u32 ss_exit_mode;       /* 0 = q̂ > qdelay_pct % baseRTT, 1 = diff > α/2 */
	__u32 ss_exit_qdelay_pct; /* %, of baseRTT (mode 0) */
};

/*
 * η = min(eta_num · r / w, eta_max) << 16 ([P1] §IV-A: min(3/w, 1/4); with
 * use_ack_ratio the spec's [CHOICE] r = packets per ACK, else r = 1).
 */
CCTL_MATH __u32 fast_eta_fp16(__u32 cwnd, __u32 ack_ratio_fp8, __u32 eta_num, __u32 eta_max_pct,
				__u32 use_ack_ratio)
{
	__u64 r = use_ack_ratio ? ack_ratio_fp8 : FAST_ACK_RATIO_ONE;
	__u64 cap = ((__u64)eta_max_pct << 16) / 100;
	__u64 e = ((__u64)eta_num * r << 8) / (cwnd ? cwnd : 1);

	return (__u32)(e < cap ? e : cap);
}

/* T̄ ← (1 − η) T̄ + η T: one RTT sample (usec) into the average (usec << 10). */
CCTL_MATH __u64 fast_avg_rtt(__u64 avg_fp, __u32 rtt_us, __u32 eta_fp16)
{
	__u64 t = (__u64)rtt_us << 10;

	if (!avg_fp)
		return t;
	if (t >= avg_fp)
		return avg_fp + (((t - avg_fp) * eta_fp16) >> 16);
	return avg_fp - (((avg_fp - t) * eta_fp16) >> 16);
}

/* Packets per ACK: EWMA with gain 1/8 of pkts_acked per ACK, << 8, in [1, 64]. */
CCTL_MATH __u32 fast_ack_ratio(__u32 ratio_fp8, __u32 pkts_acked)
{
	__u64 p = (__u64)(pkts_acked > 64 ? 64 : pkts_acked) << 8;
	__u64 r = ratio_fp8 ? ratio_fp8 : FAST_ACK_RATIO_ONE;

	r = r - (r >> 3) + (p >> 3);
	if (r < FAST_ACK_RATIO_ONE)
		r = FAST_ACK_RATIO_ONE;
	if (r > FAST_ACK_RATIO_MAX)
		r = FAST_ACK_RATIO_MAX;
	return (__u32)r;
}

/*
 * The window update [P1] eq. (5):
 *   w ← min{ 2w, (1 − γ) w + γ (baseRTT/T̄ · w + α) }
 * rounded to the nearest segment, at least 2. γ << 10, T̄ in usec << 10.
 * w · baseRTT/T̄ is cut to 2^-10 packet (to w 2^-20 + 2^-10 when w · baseRTT
 * >= 2^43 packet·usec, e.g. beyond 10^6 packets at 8.8 s).
 * Without a baseRTT or T̄ the window is kept.
 */
CCTL_MATH __u32 fast_window(__u32 cwnd, __u32 base_us, __u64 avg_fp, __u32 alpha,
			      __u32 gamma_fp)
{
	__u64 wb, ratio, inner, t;

	if (!base_us || !avg_fp)
		return cwnd;
	if (gamma_fp > CCTL_FP_ONE)
		gamma_fp = CCTL_FP_ONE;
	wb = (__u64)cwnd * base_us;
	if (wb < (1ull << 43)) {
		/* w · baseRTT / T̄ << 10 in one division (cut to 2^-10 packet) */
		inner = (wb << 20) / avg_fp;
	} else {
		/* huge w · baseRTT: through the ratio baseRTT / T̄ << 20 */
		ratio = ((__u64)base_us << 30) / avg_fp;
		inner = ((__u64)cwnd * ratio) >> 10;
	}
	if (inner > ((__u64)cwnd << 10)) /* baseRTT <= T̄ */
		inner = (__u64)cwnd << 10;
	inner += (__u64)alpha << 10; /* packets << 10 */
	t = (CCTL_FP_ONE - gamma_fp) * ((__u64)cwnd << 10) + gamma_fp * inner; /* << 20 */
	t = (t + (1ull << 19)) >> 20;
	if (t > 2ull * cwnd)
		t = 2ull * cwnd;
	if (t > FAST_U32_MAX)
		t = FAST_U32_MAX;
	return t < 2 ? 2 : (__u32)t;
}

/*
 * [P0]'s adaptive α level, read as hysteresis (spec §8): level 0 → 1 above
 * p->m0u_kBps, 1 → 0 below p->m1l_kBps, 1 → 2 above p->m1u_kBps, 2 → 1 below
 * p->m2l_kBps (throughput in kB/s).
 */
CCTL_MATH __u32 fast_alpha_level(__u32 level, __u32 tput_kBps, const struct fast_params *p)
{
	switch (level) {
	case 0:
		return tput_kBps > p->m0u_kBps ? 1 : 0;
	case 1:
		if (tput_kBps < p->m1l_kBps)
			return 0;
		return tput_kBps > p->m1u_kBps ? 2 : 1;
	default:
		return tput_kBps < p->m2l_kBps ? 1 : 2;
	}
}

/* Throughput of an RTT, kB/s: segments × mss bytes over elapsed usec (0 if no time passed). */
CCTL_MATH __u32 fast_tput_kBps(__u32 segments, __u32 mss, __u32 elapsed_us)
{
	__u64 b;

	if (!elapsed_us)
		return 0;
	b = (__u64)segments * mss * 1000 / elapsed_us;
	return b > FAST_U32_MAX ? (__u32)FAST_U32_MAX : (__u32)b;
}

/*
 * Whether slow start ends (spec §8 "Slow start" [CHOICE]), by p->ss_exit_mode:
 *   mode 0: q̂ = T̄ − baseRTT > p->ss_exit_qdelay_pct % of baseRTT;
 *   mode 1: Vegas-style diff = w q̂ / T̄ > α / 2.
 * Mode 0 compares exact integers; mode 1 compares 2 w ⌊2^20 q̂/T̄⌋ with α 2^20
 * (q̂/T̄ truncated to 2^-20, so it may decide late by less than w 2^-19 packets).
 */
CCTL_MATH int fast_ss_exit(__u32 cwnd, __u32 base_us, __u64 avg_fp, __u32 alpha,
			     const struct fast_params *p)
{
	__u64 base_fp = (__u64)base_us << 10, q_fp, ratio;

	if (!base_us || avg_fp <= base_fp)
		return 0;
	q_fp = avg_fp - base_fp;
	if (q_fp > (1ull << 42))
		q_fp = 1ull << 42; /* T̄ < 2^32 usec anyway */
	if (p->ss_exit_mode == 0)
		return q_fp * 100 > (__u64)p->ss_exit_qdelay_pct * base_fp;
	ratio = (q_fp << 20) / avg_fp; /* q̂ / T̄ << 20, at most 1 << 20 */
	return 2 * (__u64)cwnd * ratio > ((__u64)alpha << 20);
}

/*
 * Spreading an increase over the update RTT (spec §8 "Update cadence",
 * "Burstiness control"): per acked packet the window grows by
 * (target − ref) / ref, so that it reaches the target after about one window
 * of ACKs; the carry stays in *cnt. Never above target.
 */
CCTL_MATH __u32 fast_spread(__u32 cwnd, __u32 target, __u32 ref, __u32 *cnt, __u32 acked)
{
	__u64 c, inc;

	if (cwnd >= target || target <= ref || !ref)
		return cwnd;
	c = (__u64)*cnt + (__u64)acked * (target - ref);
	inc = c / ref;
	*cnt = (__u32)(c % ref);
	if (inc >= target - cwnd)
		return target;
	return cwnd + (__u32)inc;
}

/*
 * ssthresh at a loss (spec §8 "Loss"): halve ([P1], [P0]); a window above
 * min_win keeps at least min_win packets ([P1] footnote 5); never below 2.
 */
CCTL_MATH __u32 fast_loss_ssthresh(__u32 cwnd, __u32 min_win)
{
	__u32 half = cwnd >> 1;

	if (cwnd > min_win && half < min_win)
		half = min_win;
	return half < 2 ? 2 : half;
}

#endif /* FAST_MATH_H */
