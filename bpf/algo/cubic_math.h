/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* cubic_math.h - CUBIC's fixed-point rules, free of kernel types, so that the
 * very same code runs in cubic.bpf.c and in the host-side unit tests that check
 * it against a floating-point model of spec §7 (loader/src/algo/cubic/model.rs).
 *
 * Scalings (the Linux module's, spec §0.3):
 *   time t, K      1/1024 s  ("bictcp_HZ" = 2^10)
 *   C              c_1024 / 1024 segments/s^3  (Linux: bic_scale * 10 = 410)
 *   β              beta_fp / 1024
 * so W(t) - origin = C (t - K)^3 is c_1024 * (t - K)_1024^3 / 2^40 segments, and
 * K = cbrt((W_max - cwnd) / C) s is cbrt((W_max - cwnd) * 2^40 / c_1024) in 1/1024 s.
 * Include after cctl.h and something that defines __u8/__u16/__u32/__u64.
 */
#ifndef CUBIC_MATH_H
#define CUBIC_MATH_H

/*
 * CUBIC's private state (spec §7 "Per-flow state"). 104 bytes; must fit
 * icsk_ca_priv, which cubic.bpf.c checks against the kernel's BTF at compile time.
 * With linux_exact (cubic_update_jiffies) the epoch start is in jiffies, and
 * last_cwnd/last_time gate cnt's recomputation as tcp_cubic.c does.
 */
struct cctl_cubic_ca {
	struct cctl_meas m;
	__u32 cnt;            /* acked packets per +1 segment: tcp_cong_avoid_ai's divisor */
	__u32 w_max;          /* W_max: window before the last reduction, segments (0 = none) */
	__u32 origin;         /* W(K): plateau of the cubic, segments */
	__u32 k_1024;         /* K: time from the epoch start to the plateau, 1/1024 s */
	__u32 delay_min_us;   /* minimum RTT, usec (0 = none yet) */
	__u32 epoch_start_us; /* low 32 bits of tcp_mstamp at the epoch start, usec (jiffies
			       * with linux_exact; 0 = none) */
	__u32 ack_cnt;        /* packets acked since W_tcp last grew */
	__u32 w_tcp;          /* W_tcp: the Reno-equivalent window, segments */
	__u32 round_start_us; /* HyStart: start of the current round, usec */
	__u32 end_seq;        /* HyStart: snd_nxt when the round started */
	__u32 last_ack_us;    /* HyStart: last ACK of the current ACK train, usec */
	__u32 curr_rtt_us;    /* HyStart: minimum RTT of the current round, usec */
	__u32 last_time;      /* linux_exact: jiffies when cnt was last recomputed */
	__u8 sample_cnt;      /* HyStart: RTT samples taken this round */
	__u8 found;           /* HyStart: slow start exit point found */
	__u16 last_cwnd;      /* linux_exact: cwnd then, segments (saturating at 65535) */
};

/* The tunables cubic_math.h needs, as cubic.bpf.c passes them. */
struct cubic_params {
	__u32 beta_fp;          /* β << 10 */
	__u32 c_1024;           /* C << 10 */
	__u32 fast_convergence; /* bool */
	__u32 tcp_friendliness; /* bool */
};

struct cubic_hystart_params {
	__u32 detect;           /* CUBIC_HYSTART_ACK_TRAIN | CUBIC_HYSTART_DELAY */
	__u32 low_window;       /* segments: no detection below this window */
	__u32 ack_delta_us;     /* ACKs closer than this belong to one train, usec */
	__u32 delay_min_us;     /* lower clamp of the delay threshold, usec */
	__u32 delay_max_us;     /* upper clamp of the delay threshold, usec */
	__u32 min_samples;      /* RTT samples per round before the delay test */
};

/* What cubic_hystart_update learns from one ACK. */
struct cubic_hystart_ack {
	__u32 delay_us;     /* the ACK's RTT sample, usec (> 0) */
	__u32 now_us;       /* low 32 bits of tcp_mstamp, usec */
	__u32 snd_una;      /* snd_una after the ACK (sequence number) */
	__u32 snd_nxt;      /* snd_nxt (sequence number) */
	__u32 ack_delay_us; /* allowance for delayed/stretched ACKs in the ACK-train test, usec */
	int paced;          /* bool: the socket is paced (no halving of the train threshold) */
};

#define CUBIC_TIME_SHIFT 10            /* t and K in 1/1024 s */
#define CUBIC_OFFS_MAX (1ull << 20)    /* |t - K| is capped at 1024 s */
#define CUBIC_U32_MAX 0xffffffffull
#define CUBIC_U64_MAX 0xffffffffffffffffull
#define CUBIC_LOSS_FREE_MAX_CNT 20     /* before any loss: >= 5 % per RTT ([LINUX]) */
#define CUBIC_MIN_CNT 2                /* at most +50 % per RTT ([LINUX]) */
#define CUBIC_FLAT_CNT_FACTOR 100      /* cnt = 100 w when at or above target ([LINUX]) */
#define CUBIC_DELAY_FRESH_US 1000000u  /* ignore RTTs for 1 s after an epoch start */

#ifdef __clang__
#define CUBIC_UNROLL _Pragma("unroll")
#else
#define CUBIC_UNROLL
#endif

#define CUBIC_HYSTART_ACK_TRAIN 0x1
#define CUBIC_HYSTART_DELAY 0x2

/* 1 if a >= b, else 0, without a branch: the borrow out of a - b, from the
 * top bits (a branch per bit would make the verifier walk 2^22 paths). */
CCTL_MATH __u64 cubic_ge(__u64 a, __u64 b)
{
	__u64 borrow = ((~a & b) | (~(a ^ b) & (a - b))) >> 63;

	return borrow ^ 1;
}

/*
 * ⌊cbrt(x)⌋, exact, for any 64-bit x: the binary digit-by-digit method, one
 * result bit per 3 input bits (22 fixed iterations, no division, no branch).
 * With y the root so far, appending a bit gives (2y + 1)^3 = 8 y^3 +
 * (12 y^2 + 6 y + 1), so the remainder (x minus the cube so far, at the
 * current bit position) accepts the bit when it is >= 3·(2y)(2y + 1) + 1.
 */
CCTL_MATH __u32 cubic_cbrt(__u64 x)
{
	__u64 y = 0;
	int s;

CUBIC_UNROLL
	for (s = 63; s >= 0; s -= 3) {
		__u64 b, take;

		y <<= 1;
		b = 3 * y * (y + 1) + 1;
		take = cubic_ge(x >> s, b);
		x -= (b << s) & (0 - take);
		y += take;
	}
	return (__u32)y;
}

/*
 * K in 1/1024 s for a drop of diff = W_max - cwnd segments (spec §7 "Window
 * function", [LINUX] form): K = cbrt(diff / C) s = cbrt(diff · 2^40 / c_1024).
 * The quotient saturates at 2^64 - 1 (K <= 2642245/1024 s, beyond any flow).
 */
CCTL_MATH __u32 cubic_k_1024(__u32 diff, __u32 c_1024)
{
	__u64 q;

	if (!c_1024)
		c_1024 = 1;
	if ((__u64)diff <= (CUBIC_U64_MAX >> 40)) {
		q = ((__u64)diff << 40) / c_1024;
	} else {
		/* diff << 20 < 2^52: divide first, then scale (relative error < 2^-30) */
		q = ((__u64)diff << 20) / c_1024;
		q = q > (CUBIC_U64_MAX >> 20) ? CUBIC_U64_MAX : q << 20;
	}
	return cubic_cbrt(q);
}

/* usec -> 1/1024 s, rounded down. */
CCTL_MATH __u64 cubic_us_to_1024(__u64 us)
{
	return (us << CUBIC_TIME_SHIFT) / 1000000ull;
}

/*
 * W(t) = C (t - K)^3 + origin in whole segments (rounded towards the origin),
 * t and K in 1/1024 s, saturating at 0 and 2^32 - 1. |t - K| is capped at
 * 1024 s (C·1024^3 ≈ 4.3e8 segments at C = 0.4, so the cap only saturates).
 * c_1024 <= 2^14 (the loader's limit) keeps c·(offs^3 >> 10) below 2^64.
 */
CCTL_MATH __u32 cubic_w_target(__u64 t_1024, __u32 k_1024, __u32 origin, __u32 c_1024)
{
	__u64 offs = t_1024 < k_1024 ? k_1024 - t_1024 : t_1024 - k_1024;
	__u64 delta;

	if (offs > CUBIC_OFFS_MAX)
		offs = CUBIC_OFFS_MAX;
	delta = ((offs * offs * offs) >> 10) * c_1024 >> 30;
	if (t_1024 < k_1024)
		return delta >= origin ? 0 : (__u32)(origin - delta);
	delta += origin;
	return delta > CUBIC_U32_MAX ? (__u32)CUBIC_U32_MAX : (__u32)delta;
}

/* Acked packets per W_tcp segment: W_tcp grows by 3(1-β)/(1+β) per window of
 * acked packets (spec §7 "TCP-friendly region"), i.e. +1 per
 * cwnd (1+β) / (3 (1-β)) packets; at least 1. */
CCTL_MATH __u32 cubic_reno_acks_per_segment(__u32 cwnd, __u32 beta_fp)
{
	__u64 den = 3ull * (1024 - (beta_fp < 1024 ? beta_fp : 1023));
	__u64 d = ((__u64)cwnd * (1024 + beta_fp)) / den;

	if (d > CUBIC_U32_MAX)
		d = CUBIC_U32_MAX;
	return d ? (__u32)d : 1;
}

/*
 * One ACK in congestion avoidance (spec §7 "Rules"): starts an epoch if none
 * is running, then sets ca->cnt from the cubic target W(t + delay_min), the
 * loss-free floor, the TCP-friendly window and the +50 %/RTT ceiling.
 * now_us: low 32 bits of the clock; acked: packets (or 1 per ACK event).
 */
CCTL_MATH void cubic_update(struct cctl_cubic_ca *ca, const struct cubic_params *p,
			       __u32 cwnd, __u32 acked, __u32 now_us)
{
	__u64 t, cnt;
	__u32 target;

	ca->ack_cnt += acked;
	if (!ca->epoch_start_us) {
		ca->epoch_start_us = now_us ? now_us : 1;
		ca->ack_cnt = acked;
		ca->w_tcp = cwnd;
		if (ca->w_max <= cwnd) {
			ca->k_1024 = 0;
			ca->origin = cwnd;
		} else {
			ca->k_1024 = cubic_k_1024(ca->w_max - cwnd, p->c_1024);
			ca->origin = ca->w_max;
		}
	}

	/* aim one minimum RTT ahead: the window should be W(t + RTT_min) then */
	t = cubic_us_to_1024((__u64)(__u32)(now_us - ca->epoch_start_us) + ca->delay_min_us);
	target = cubic_w_target(t, ca->k_1024, ca->origin, p->c_1024);
	if (target > cwnd)
		cnt = cwnd / (target - cwnd);
	else
		cnt = (__u64)CUBIC_FLAT_CNT_FACTOR * cwnd;
	if (!ca->w_max && cnt > CUBIC_LOSS_FREE_MAX_CNT)
		cnt = CUBIC_LOSS_FREE_MAX_CNT;

	if (p->tcp_friendliness) {
		__u32 d = cubic_reno_acks_per_segment(cwnd, p->beta_fp);

		if (ca->ack_cnt > d) {
			/* as many whole segments as fit, leaving 1..d packets counted */
			__u32 n = (ca->ack_cnt - 1) / d;

			ca->ack_cnt -= n * d;
			ca->w_tcp += n;
		}
		if (ca->w_tcp > cwnd) {
			__u64 max_cnt = cwnd / (ca->w_tcp - cwnd);

			if (cnt > max_cnt)
				cnt = max_cnt;
		}
	}
	if (cnt < CUBIC_MIN_CNT)
		cnt = CUBIC_MIN_CNT;
	ca->cnt = cnt > CUBIC_U32_MAX ? (__u32)CUBIC_U32_MAX : (__u32)cnt;
}

/* W_max after a reduction at window w (spec §7 "Loss"): w (1 + β)/2 with fast
 * convergence when w fell short of the previous W_max, else w. */
CCTL_MATH __u32 cubic_new_w_max(__u32 w, __u32 w_max, __u32 beta_fp, __u32 fast_convergence)
{
	if (fast_convergence && w < w_max)
		return (__u32)(((__u64)w * (1024 + beta_fp)) >> 11);
	return w;
}

/* ssthresh = max(β w, 2) segments. */
CCTL_MATH __u32 cubic_ssthresh_of(__u32 w, __u32 beta_fp)
{
	__u32 s = (__u32)(((__u64)w * beta_fp) >> 10);

	return s > 2 ? s : 2;
}

/* A reduction: the epoch ends, W_max is set; returns ssthresh. */
CCTL_MATH __u32 cubic_on_reduction(struct cctl_cubic_ca *ca, const struct cubic_params *p,
				      __u32 w)
{
	ca->epoch_start_us = 0;
	ca->w_max = cubic_new_w_max(w, ca->w_max, p->beta_fp, p->fast_convergence);
	return cubic_ssthresh_of(w, p->beta_fp);
}

/* Everything but the shared measurement layer back to zero (init, RTO). */
CCTL_MATH void cubic_reset(struct cctl_cubic_ca *ca)
{
	ca->cnt = 0;
	ca->w_max = 0;
	ca->origin = 0;
	ca->k_1024 = 0;
	ca->delay_min_us = 0;
	ca->epoch_start_us = 0;
	ca->ack_cnt = 0;
	ca->w_tcp = 0;
	ca->last_time = 0;
	ca->last_cwnd = 0;
	ca->found = 0;
}

/* HyStart: a new round starts (at init, RTO, and when snd_una passes end_seq). */
CCTL_MATH void cubic_hystart_round(struct cctl_cubic_ca *ca, __u32 now_us, __u32 snd_nxt)
{
	ca->round_start_us = now_us;
	ca->last_ack_us = now_us;
	ca->end_seq = snd_nxt;
	ca->curr_rtt_us = 0xffffffffu;
	ca->sample_cnt = 0;
}

/* The delay-increase threshold: clamp(RTT_min / 8, lo, hi), usec. */
CCTL_MATH __u32 cubic_hystart_delay_thresh(__u32 delay_min_us, __u32 lo, __u32 hi)
{
	__u32 t = delay_min_us >> 3;

	if (t < lo)
		t = lo;
	if (t > hi)
		t = hi;
	return t;
}

/*
 * HyStart (Ha & Rhee 2008; spec §7 "Slow start", [LINUX]) on one RTT sample in
 * slow start. Returns 1 when slow start should end now (the caller sets
 * ssthresh = cwnd), having set ca->found:
 *   - ACK train: ACKs arriving back to back (<= h->ack_delta_us apart) have
 *     spanned more than (RTT_min + a->ack_delay_us)/2 since the round started
 *     (not halved when a->paced: pacing stretches the trains);
 *   - delay: the smallest RTT (a->delay_us) of the round's first h->min_samples
 *     samples exceeds RTT_min + clamp(RTT_min/8, h->delay_min_us, h->delay_max_us).
 * a's snd_una and snd_nxt are sequence numbers; times in usec (low 32 bits).
 */
CCTL_MATH int cubic_hystart_update(struct cctl_cubic_ca *ca,
				      const struct cubic_hystart_params *h, __u32 cwnd,
				      const struct cubic_hystart_ack *a)
{
	__u32 now_us = a->now_us, delay_us = a->delay_us;

	if ((__s32)(a->snd_una - ca->end_seq) > 0)
		cubic_hystart_round(ca, now_us, a->snd_nxt);

	if (cwnd < h->low_window)
		return 0;

	if (h->detect & CUBIC_HYSTART_ACK_TRAIN) {
		if ((__s32)(now_us - ca->last_ack_us) <= (__s32)h->ack_delta_us) {
			__u32 threshold = ca->delay_min_us + a->ack_delay_us;

			ca->last_ack_us = now_us;
			if (!a->paced)
				threshold >>= 1;
			if ((__s32)(now_us - ca->round_start_us) > (__s32)threshold) {
				ca->found = 1;
				return 1;
			}
		}
	}

	if (h->detect & CUBIC_HYSTART_DELAY) {
		if (ca->curr_rtt_us > delay_us)
			ca->curr_rtt_us = delay_us;
		if (ca->sample_cnt < h->min_samples) {
			ca->sample_cnt++;
		} else if (ca->curr_rtt_us > ca->delay_min_us +
			   cubic_hystart_delay_thresh(ca->delay_min_us, h->delay_min_us,
						      h->delay_max_us)) {
			ca->found = 1;
			return 1;
		}
	}
	return 0;
}

/*
 * linux_exact: tcp_cubic.c's own clock and arithmetic, for a port that gives the
 * module's trajectory step for step (cctl conform). Where they differ from the
 * rules above:
 *   - the epoch and t are counted in jiffies (1/HZ s), RTT_min is rounded up to
 *     whole jiffies before t is converted to 1/1024 s;
 *   - cnt is recomputed at most once per jiffy, and not at all while cwnd is
 *     unchanged for up to HZ/32 jiffies (the acked packets are still counted);
 *   - K comes from a table guess of the cube root refined by one Newton step,
 *     of (W_max - cwnd) times a pre-truncated 2^40/C;
 *   - the cubic's offset is C·|t - K|^3 >> 40 in one product;
 *   - W_tcp grows by 1 per (cwnd·s) >> 3 acked packets, s = ⌊⌊8(1024+β)/3⌋/(1024-β)⌋.
 */

/* tcp_cubic.c's first guess of cbrt(i) for i in [0, 63]: (entry + 10) >> 6 is
 * the cube root of i · 2^18, hand-tuned there; the same 64 numbers give the same K. */
static const __u8 cubic_linux_cbrt_guess[64] = {
	0,   54,  54,  54,  118, 118, 118, 118, 123, 129, 134, 138, 143, 147, 151, 156,
	157, 161, 164, 168, 170, 173, 176, 179, 181, 185, 187, 190, 192, 194, 197, 199,
	200, 202, 204, 206, 209, 211, 213, 215, 217, 219, 221, 222, 224, 225, 227, 229,
	231, 232, 234, 236, 237, 239, 240, 242, 244, 245, 246, 248, 250, 251, 252, 254,
};

/* Index of the highest set bit, from 1 (0 for 0). */
CCTL_MATH __u32 cubic_fls64(__u64 x)
{
	__u32 n = 0;

	if (x >> 32) {
		n += 32;
		x >>= 32;
	}
	if (x >> 16) {
		n += 16;
		x >>= 16;
	}
	if (x >> 8) {
		n += 8;
		x >>= 8;
	}
	if (x >> 4) {
		n += 4;
		x >>= 4;
	}
	if (x >> 2) {
		n += 2;
		x >>= 2;
	}
	if (x >> 1) {
		n += 1;
		x >>= 1;
	}
	return n + (__u32)x;
}

/* The module's cube root (about 0.2 % from ⌊cbrt(a)⌋): the table guess for the top
 * 6 bits of a, scaled, then x = (2x + a / (x (x - 1))) · 341/1024. */
CCTL_MATH __u32 cubic_linux_cbrt(__u64 a)
{
	__u32 b = cubic_fls64(a), x;
	__u64 d;

	if (b < 7)
		return ((__u32)cubic_linux_cbrt_guess[a & 63] + 35) >> 6;
	b = ((b * 84) >> 8) - 1;
	x = ((__u32)cubic_linux_cbrt_guess[(a >> (b * 3)) & 63] + 10) << b;
	x >>= 6;
	d = (__u64)x * (__u64)(x - 1);
	x = 2 * x + (__u32)(d ? a / d : 0);
	return (x * 341) >> 10;
}

/* K in 1/1024 s as tcp_cubic.c has it: cbrt((W_max - cwnd) · ⌊2^40 / C⌋). */
CCTL_MATH __u32 cubic_linux_k_1024(__u32 diff, __u32 c_1024)
{
	__u64 cube_factor = (1ull << 40) / (c_1024 ? c_1024 : 1);

	return cubic_linux_cbrt(cube_factor * diff);
}

/* usec rounded up to whole jiffies (exact where HZ divides 10^6, as 100, 250,
 * 1000 do). */
CCTL_MATH __u64 cubic_us_to_jiffies(__u32 us, __u32 hz)
{
	return ((__u64)us * hz + 999999ull) / 1000000ull;
}

/* Acked packets per W_tcp segment as tcp_cubic.c: (cwnd · s) >> 3 with its
 * pre-truncated s (1.875 w at β = 717/1024, where the exact factor is 1.890 w). */
CCTL_MATH __u32 cubic_linux_reno_acks_per_segment(__u32 cwnd, __u32 beta_fp)
{
	__u32 b = beta_fp < 1024 ? beta_fp : 1023;
	__u32 scale = (8 * (1024 + b) / 3) / (1024 - b);

	return (cwnd * scale) >> 3;
}

/*
 * cubic_update with linux_exact (see above): one ACK in congestion avoidance at
 * jiffies now_j, HZ hz. ca->cnt keeps its value when it is not recomputed.
 */
CCTL_MATH void cubic_update_jiffies(struct cctl_cubic_ca *ca, const struct cubic_params *p,
				       __u32 cwnd, __u32 acked, __u32 now_j, __u32 hz)
{
	__u16 cwnd16 = cwnd < 0xffff ? (__u16)cwnd : 0xffff;
	__u32 cnt = ca->cnt;

	ca->ack_cnt += acked;
	if (ca->last_cwnd == cwnd16 && (__s32)(now_j - ca->last_time) <= (__s32)(hz / 32))
		return;

	if (!ca->epoch_start_us || now_j != ca->last_time) {
		__u64 t, offs;
		__u32 delta, target;

		ca->last_cwnd = cwnd16;
		ca->last_time = now_j;
		if (!ca->epoch_start_us) {
			ca->epoch_start_us = now_j;
			ca->ack_cnt = acked;
			ca->w_tcp = cwnd;
			if (ca->w_max <= cwnd) {
				ca->k_1024 = 0;
				ca->origin = cwnd;
			} else {
				ca->k_1024 = cubic_linux_k_1024(ca->w_max - cwnd, p->c_1024);
				ca->origin = ca->w_max;
			}
		}
		t = (__u64)(__s64)(__s32)(now_j - ca->epoch_start_us);
		t += cubic_us_to_jiffies(ca->delay_min_us, hz);
		t = (t << CUBIC_TIME_SHIFT) / (hz ? hz : 1);
		offs = t < ca->k_1024 ? ca->k_1024 - t : t - ca->k_1024;
		delta = (__u32)(((__u64)p->c_1024 * offs * offs * offs) >> 40);
		target = t < ca->k_1024 ? ca->origin - delta : ca->origin + delta;
		if (target > cwnd)
			cnt = cwnd / (target - cwnd);
		else
			cnt = CUBIC_FLAT_CNT_FACTOR * cwnd;
		if (!ca->w_max && cnt > CUBIC_LOSS_FREE_MAX_CNT)
			cnt = CUBIC_LOSS_FREE_MAX_CNT;
	}

	if (p->tcp_friendliness) {
		__u32 d = cubic_linux_reno_acks_per_segment(cwnd, p->beta_fp);

		if (!d)
			d = 1;
		if (ca->ack_cnt > d) {
			__u32 n = (ca->ack_cnt - 1) / d;

			ca->ack_cnt -= n * d;
			ca->w_tcp += n;
		}
		if (ca->w_tcp > cwnd) {
			__u32 max_cnt = cwnd / (ca->w_tcp - cwnd);

			if (cnt > max_cnt)
				cnt = max_cnt;
		}
	}
	ca->cnt = cnt < CUBIC_MIN_CNT ? CUBIC_MIN_CNT : cnt;
}

#endif /* CUBIC_MATH_H */
