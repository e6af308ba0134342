/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* hybla_math.h - TCP Hybla's rules (spec §19.1) in integer arithmetic, free of
 * kernel types, so that hybla.bpf.c and the host-side unit tests
 * (loader/src/algo/hybla/model.rs) run the very same code.
 *
 * Scalings and error bounds (default, linux_compat = 0):
 *   ρ        rho_fp = ρ << 10, rounded down: 0 <= ρ − rho_fp/1024 < 2^-10;
 *            1 <= ρ <= HYBLA_RHO_MAX (4096; ρ saturates there).
 *   2^ρ      product of the 10 rounded constants 2^(2^-i) (Q30), one rounding
 *            per set bit of the fraction, then cut to 1/65536 segment:
 *            |C − 2^ρ| < 2^ρ · 2^-26 + 2^-16 segments (exact when ρ is whole).
 *            The integer part of the exponent is capped at 16 (as Linux): from
 *            ρ = 16 on, one ACK adds >= 65535 segments, more than any ssthresh.
 *   slow start  the increase carried below one segment is kept in 1/65536
 *            segment; the ACKs left over when cwnd reaches ssthresh go to
 *            congestion avoidance (as the kernel's tcp_slow_start).
 *   CA       exact: a credit of acked·rho_fp² (ρ² << 20 per acked packet) is
 *            compared with cwnd << 20, i.e. tcp_cong_avoid_ai with every acked
 *            packet weighted by ρ²; with ρ = 1 (rho_fp = 1024) it *is*
 *            tcp_cong_avoid_ai(tp, cwnd, acked), i.e. Reno.
 * linux_compat = 1 reproduces net/ipv4/tcp_hybla.c's arithmetic instead: ρ in
 * 1/8 (rounded down), 2^frac from Linux's 8-entry table in 1/128, increments in
 * 1/128 segment rounded down, one carried fraction, the snd_cwnd_cnt fallback
 * that adds a segment once the CA increment rounds to 0, and slow start cut at
 * ssthresh without carrying ACKs over.
 * Include after cctl.h and something that defines __u8/__u32/__u64.
 */
#ifndef HYBLA_MATH_H
#define HYBLA_MATH_H

/* Hybla's private state (spec §19.1). 80 bytes. */
struct cctl_hybla_ca {
	struct cctl_meas m;
	__u64 ca_credit;     /* CA: acked·ρ² since the last whole segment, (packets · ρ²) << 20 */
	__u32 rho_fp;        /* ρ = max(srtt / RTT_0, 1), << 10 */
	__u32 min_srtt_x8;   /* smallest kernel srtt when ρ was computed, usec << 3 (0 = none) */
	__u32 frac_q16;      /* increase carried below one segment (slow start; linux_compat:
			      * both phases), 1/65536 segment */
	__u32 carry_q16;     /* trace: fraction of a segment carried after the last ACK, 1/65536 */
	__u8 hybla_en;       /* 1 in Open state: the Hybla rules run (otherwise Reno) */
	__u8 _pad[7];
};

/* The tunables hybla_math.h needs, as hybla.bpf.c passes them. */
struct hybla_params {
	__u32 rtt0_ms;       /* RTT_0, ms (1..=1000) */
	__u32 linux_compat;  /* bool: net/ipv4/tcp_hybla.c's arithmetic */
};

/*
 * One congestion-avoidance call (cong_avoid in Open state), in and out.
 * The caller copies the tcp_sock fields in, calls hybla_step, writes them back.
 */
struct hybla_step {
	__u64 credit;        /* in/out: cctl_hybla_ca.ca_credit */
	__u32 cwnd;          /* in/out: snd_cwnd, segments */
	__u32 ssthresh;      /* in: snd_ssthresh, segments */
	__u32 cwnd_cnt;      /* in/out: snd_cwnd_cnt (used by linux_compat only) */
	__u32 frac_q16;      /* in/out: cctl_hybla_ca.frac_q16 */
	__u32 acked;         /* in: acked packets (or 1 per ACK event) */
	__u32 carry_q16;     /* out: cctl_hybla_ca.carry_q16 */
};

#define HYBLA_RHO_SHIFT 10
#define HYBLA_RHO_ONE (1u << HYBLA_RHO_SHIFT)
#define HYBLA_RHO_MAX 4096u                         /* ρ saturates here */
#define HYBLA_RHO_MAX_FP (HYBLA_RHO_MAX << HYBLA_RHO_SHIFT)
#define HYBLA_EXP_INT_MAX 16u                       /* 2^ρ: integer exponent cap (Linux too) */
#define HYBLA_ONE_Q16 65536ull
#define HYBLA_ACKED_MAX 65535u
#define HYBLA_U32_MAX 0xffffffffull
/* Linux's 2^(k/8) << 7, rounded down, k = 0..7, one byte each (low byte first). */
#define HYBLA_LINUX_FRACTIONS 0xead7c5b5a5988b80ull

/*
 * ρ << 10 from the kernel's smoothed RTT (tp->srtt_us, usec << 3):
 * max(srtt / RTT_0, 1), rounded down, capped at HYBLA_RHO_MAX.
 * linux_compat: ρ rounded down to 1/8 first (Linux's rho_3ls), then << 7.
 */
CCTL_MATH __u32 hybla_rho_fp(__u32 srtt_x8_us, const struct hybla_params *p)
{
	__u64 rtt0_us = (__u64)(p->rtt0_ms ? p->rtt0_ms : 1) * 1000;
	__u64 r;

	if (p->linux_compat)
		r = ((__u64)srtt_x8_us / rtt0_us) << 7;      /* (8ρ rounded down) << 7 */
	else
		r = ((__u64)srtt_x8_us << 7) / rtt0_us;      /* srtt · 1024 / RTT_0 */
	if (r < HYBLA_RHO_ONE)
		r = HYBLA_RHO_ONE;
	if (r > HYBLA_RHO_MAX_FP)
		r = HYBLA_RHO_MAX_FP;
	return (__u32)r;
}

#define HYBLA_POW2_BIT(bit, c)                                      \
	do {                                                        \
		if (frac & (1u << (bit)))                           \
			r = (r * (c) + (1ull << 29)) >> 30;          \
	} while (0)

/*
 * 2^ρ in 1/65536 segment, the integer part of the exponent capped at 16.
 * Default: ρ's 10 fraction bits, 2^(2^-i) in Q30 (error bound in the header).
 * linux_compat: 2^⌊ρ⌋ · (Linux's table entry for ⌊8ρ⌋ mod 8) / 128.
 */
CCTL_MATH __u64 hybla_pow2_q16(__u32 rho_fp, __u32 linux_compat)
{
	__u32 ip = rho_fp >> HYBLA_RHO_SHIFT, frac = rho_fp & (HYBLA_RHO_ONE - 1);
	__u64 r = 1ull << 30;

	if (ip > HYBLA_EXP_INT_MAX)
		ip = HYBLA_EXP_INT_MAX;
	if (linux_compat) {
		__u64 t = (HYBLA_LINUX_FRACTIONS >> (8 * (frac >> 7))) & 0xff;

		return (t << ip) << 9;                       /* 1/128 -> 1/65536 */
	}
	HYBLA_POW2_BIT(9, 1518500250ull);  /* 2^(1/2) */
	HYBLA_POW2_BIT(8, 1276901417ull);  /* 2^(1/4) */
	HYBLA_POW2_BIT(7, 1170923762ull);  /* 2^(1/8) */
	HYBLA_POW2_BIT(6, 1121280436ull);  /* 2^(1/16) */
	HYBLA_POW2_BIT(5, 1097253708ull);  /* 2^(1/32) */
	HYBLA_POW2_BIT(4, 1085434106ull);  /* 2^(1/64) */
	HYBLA_POW2_BIT(3, 1079572136ull);  /* 2^(1/128) */
	HYBLA_POW2_BIT(2, 1076653033ull);  /* 2^(1/256) */
	HYBLA_POW2_BIT(1, 1075196443ull);  /* 2^(1/512) */
	HYBLA_POW2_BIT(0, 1074468888ull);  /* 2^(1/1024) */
	return (r << ip) >> 14;                               /* Q30 -> Q16 */
}

#undef HYBLA_POW2_BIT

/* Slow-start increase per acked packet, 2^ρ − 1, in 1/65536 segment (>= 1 segment). */
CCTL_MATH __u64 hybla_ss_inc_q16(__u32 rho_fp, __u32 linux_compat)
{
	__u64 v = hybla_pow2_q16(rho_fp, linux_compat);

	return v > HYBLA_ONE_Q16 ? v - HYBLA_ONE_Q16 : 0;
}

/*
 * linux_compat's congestion-avoidance increase per call, 1/65536 segment:
 * ⌊(ρ² << 7) / cwnd⌋ in 1/128 segment, ρ² << 7 being 2·(8ρ)².
 */
CCTL_MATH __u64 hybla_linux_ca_inc_q16(__u32 rho_fp, __u32 cwnd)
{
	__u64 r3 = rho_fp >> 7;

	return ((2 * r3 * r3) / (cwnd ? cwnd : 1)) << 9;
}

/* cwnd + add, saturating at 2^32 − 1. */
CCTL_MATH __u32 hybla_add_sat(__u32 cwnd, __u64 add)
{
	__u64 w = (__u64)cwnd + add;

	return w > HYBLA_U32_MAX ? (__u32)HYBLA_U32_MAX : (__u32)w;
}

/* Linux's per-call rule (linux_compat = 1). */
CCTL_MATH void hybla_step_linux(struct hybla_step *s, __u32 rho_fp)
{
	__u32 ss = s->cwnd < s->ssthresh, n = s->acked, carries;
	__u64 inc, total, t;

	if (n > HYBLA_ACKED_MAX)
		n = HYBLA_ACKED_MAX;
	if (ss) {
		inc = hybla_ss_inc_q16(rho_fp, 1);
	} else {
		inc = hybla_linux_ca_inc_q16(rho_fp, s->cwnd);
		if (inc < HYBLA_ONE_Q16)
			s->cwnd_cnt += n;
	}
	total = inc * n;
	t = s->frac_q16 + (total & 0xffff);
	carries = (__u32)(t >> 16);
	s->frac_q16 = (__u32)(t & 0xffff);
	if (carries)
		s->cwnd_cnt = 0;
	s->cwnd = hybla_add_sat(s->cwnd, (total >> 16) + carries);
	/* an increase that rounds to 0: one segment per cwnd calls, as Reno */
	if (!inc && s->cwnd_cnt >= s->cwnd) {
		s->cwnd = hybla_add_sat(s->cwnd, 1);
		s->cwnd_cnt = 0;
	}
	if (ss && s->cwnd > s->ssthresh)
		s->cwnd = s->ssthresh;
	s->carry_q16 = s->frac_q16;
}

/*
 * One cong_avoid call in Open state (spec §19.1 "Rules"), for s->acked packets:
 *   slow start (cwnd < ssthresh): cwnd += 2^ρ − 1 per acked packet, up to
 *     ssthresh; the ACKs beyond it continue in congestion avoidance;
 *   congestion avoidance: cwnd += ρ² / cwnd per acked packet.
 */
CCTL_MATH void hybla_step(struct hybla_step *s, __u32 rho_fp, const struct hybla_params *p)
{
	__u64 n = s->acked, w;

	if (p->linux_compat) {
		hybla_step_linux(s, rho_fp);
		return;
	}
	if (rho_fp < HYBLA_RHO_ONE)
		rho_fp = HYBLA_RHO_ONE;
	if (rho_fp > HYBLA_RHO_MAX_FP)
		rho_fp = HYBLA_RHO_MAX_FP;
	if (n > HYBLA_ACKED_MAX)
		n = HYBLA_ACKED_MAX;

	if (s->cwnd < s->ssthresh) {
		__u64 inc = hybla_ss_inc_q16(rho_fp, 0);
		__u64 room = ((__u64)(s->ssthresh - s->cwnd) << 16) - (s->frac_q16 & 0xffff);
		__u64 need = (room + inc - 1) / inc;         /* acked packets to reach ssthresh */

		if (n < need) {
			__u64 t = (s->frac_q16 & 0xffff) + n * inc;

			s->cwnd = hybla_add_sat(s->cwnd, t >> 16);
			s->frac_q16 = (__u32)(t & 0xffff);
			s->carry_q16 = s->frac_q16;
			return;
		}
		s->cwnd = s->ssthresh;
		s->frac_q16 = 0;
		n -= need;
		s->carry_q16 = 0;
		if (!n)
			return;
	}

	/* tcp_cong_avoid_ai(tp, cwnd, n) with every packet weighted by ρ² (<< 20) */
	w = (__u64)(s->cwnd ? s->cwnd : 1) << 20;
	if (s->credit >= w) {
		/* credit left from a larger window: one segment, start afresh (as the kfunc) */
		s->credit = 0;
		s->cwnd = hybla_add_sat(s->cwnd, 1);
	}
	s->credit += n * ((__u64)rho_fp * rho_fp);
	if (s->credit >= w) {
		__u64 delta = s->credit / w;

		s->credit -= delta * w;
		s->cwnd = hybla_add_sat(s->cwnd, delta);
	}
	/* the credit as a fraction of the (new) window: credit / (cwnd << 20), << 16 */
	w = (__u64)(s->cwnd ? s->cwnd : 1) << 4;
	w = s->credit / w;
	s->carry_q16 = w > 0xffff ? 0xffff : (__u32)w;
}

#endif /* HYBLA_MATH_H */
