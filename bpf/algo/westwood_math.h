/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* westwood_math.h - TCP Westwood+'s bandwidth estimator and loss rule (spec §14),
 * free of kernel types, so that the same code runs in westwood.bpf.c and in the
 * host-side unit tests that check it against the f64 model
 * (loader/src/algo/westwood/model.rs).
 *
 * Units: bytes, bytes/s, usec. Include after cctl.h and something that defines
 * __u8/__u16/__u32/__u64.
 */
#ifndef WESTWOOD_MATH_H
#define WESTWOOD_MATH_H

/*
 * Westwood+'s private state (spec §14). 96 bytes; westwood.bpf.c checks at
 * compile time that it fits icsk_ca_priv.
 */
struct cctl_westwood_ca {
	struct cctl_meas m;
	__u64 bw_ns_Bps;     /* first (less smoothed) filter stage, bytes/s */
	__u64 bw_Bps;        /* BWE: the bandwidth estimate (second stage), bytes/s */
	__u32 win_start_us;  /* low 32 bits of tcp_mstamp when the sample interval began */
	__u32 bk;            /* bytes acked in the current sample interval */
	__u32 snd_una;       /* snd_una at the previous ACK */
	__u32 accounted;     /* bytes credited to dupACKs, not yet covered by a cumulative ACK */
	__u32 rtt_us;        /* last RTT sample, usec (0 = none yet) */
	__u32 rtt_min_us;    /* RTT_min, usec (0 = none yet) */
	__u8 first_ack;      /* 1 until the first ACK has set snd_una */
	__u8 reset_rtt_min;  /* 1: the next ACK restarts RTT_min from the last sample */
	__u16 _pad;
	__u32 _pad2;
};

#define WESTWOOD_USEC_PER_SEC 1000000ull

/* The tunables westwood_ack needs, as westwood.bpf.c passes them. */
struct westwood_params {
	__u32 win_min_us; /* shortest bandwidth sample interval, usec */
	__u32 shift;      /* filter gain 2^-shift (3: 7/8 old + 1/8 new; at most 8) */
};

/* What westwood_ack learns from one ACK. */
struct westwood_ack_info {
	__u32 now_us;   /* low 32 bits of tcp_mstamp, usec */
	__u32 snd_una;  /* snd_una after the ACK (sequence number) */
	__u32 mss;      /* bytes (mss_cache) */
	__u32 slowpath; /* 0 for the kernel's fast-path ACKs (CA_ACK_SLOWPATH clear) */
};

/*
 * One bandwidth sample, bk bytes acked over delta_us, fed through the two
 * cascaded low-pass filters of spec §14 with gain 2^-shift (7/8 and 1/8 for
 * shift = 3): bw_ns = ((2^s - 1) bw_ns + sample) / 2^s, bw = ((2^s - 1) bw + bw_ns) / 2^s.
 * An empty filter (both stages 0) is filled with the first sample (as Linux).
 */
CCTL_MATH void westwood_filter(struct cctl_westwood_ca *ca, __u32 bk, __u32 delta_us,
				     __u32 shift)
{
	__u64 sample = delta_us ? (__u64)bk * WESTWOOD_USEC_PER_SEC / delta_us : 0;
	__u64 keep;

	if (shift > 8)
		shift = 8;
	keep = (1ull << shift) - 1;
	if (!ca->bw_ns_Bps && !ca->bw_Bps) {
		ca->bw_ns_Bps = sample;
		ca->bw_Bps = sample;
		return;
	}
	/* samples are below 2^32 * 10^6 < 2^52 and keep < 2^8: no overflow */
	ca->bw_ns_Bps = (keep * ca->bw_ns_Bps + sample) >> shift;
	ca->bw_Bps = (keep * ca->bw_Bps + ca->bw_ns_Bps) >> shift;
}

/*
 * Bytes an ACK newly acknowledges, for the estimate. cumul = snd_una advance.
 * A dupACK (cumul = 0) is credited one MSS (it reports a segment that left the
 * network) and remembered in *accounted; a later cumulative ACK covering more
 * than one MSS is reduced by what was already credited (Linux's slow path).
 */
CCTL_MATH __u32 westwood_acked_count(__u32 cumul, __u32 mss, __u32 *accounted)
{
	if (!cumul) {
		*accounted += mss;
		cumul = mss;
	}
	if (cumul > mss) {
		if (*accounted >= cumul) {
			*accounted -= cumul;
			cumul = mss;
		} else {
			cumul -= *accounted;
			*accounted = 0;
		}
	}
	return cumul;
}

/*
 * Per ACK (spec §14 "Bandwidth estimate"): close the sample interval once it is
 * longer than max(RTT, p->win_min_us) and filter its bytes (gain 2^-p->shift);
 * then count this ACK's bytes and update RTT_min from the last RTT sample.
 * a->now_us: low 32 bits of tcp_mstamp. a->slowpath = 0 for the kernel's
 * fast-path ACKs (pure in-order advance: no dupACK accounting needed).
 */
CCTL_MATH void westwood_ack(struct cctl_westwood_ca *ca, const struct westwood_ack_info *a,
				  const struct westwood_params *p)
{
	__u32 now_us = a->now_us, snd_una = a->snd_una, win_min_us = p->win_min_us;
	__u32 delta, win;

	if (ca->first_ack) {
		ca->snd_una = snd_una;
		ca->first_ack = 0;
	}

	delta = now_us - ca->win_start_us;
	win = ca->rtt_us > win_min_us ? ca->rtt_us : win_min_us;
	if (ca->rtt_us && delta > win) {
		westwood_filter(ca, ca->bk, delta, p->shift);
		ca->bk = 0;
		ca->win_start_us = now_us;
	}

	if (a->slowpath)
		ca->bk += westwood_acked_count(snd_una - ca->snd_una, a->mss, &ca->accounted);
	else
		ca->bk += snd_una - ca->snd_una;
	ca->snd_una = snd_una;

	if (ca->rtt_us) {
		if (ca->reset_rtt_min || !ca->rtt_min_us) {
			ca->rtt_min_us = ca->rtt_us;
			ca->reset_rtt_min = 0;
		} else if (ca->rtt_us < ca->rtt_min_us) {
			ca->rtt_min_us = ca->rtt_us;
		}
	}
}

/*
 * The loss rule: max(BWE · RTT_min / MSS, 2) segments, rounded down, saturating.
 * BWE · RTT_min / 10^6 is split as q·RTT_min + r·RTT_min / 10^6 (BWE = q·10^6 + r)
 * so that nothing overflows 64 bits below BWE = 2^32·10^6 bytes/s.
 */
CCTL_MATH __u32 westwood_bw_rttmin(__u64 bw_Bps, __u32 rtt_min_us, __u32 mss)
{
	__u64 q = bw_Bps / WESTWOOD_USEC_PER_SEC, r = bw_Bps % WESTWOOD_USEC_PER_SEC;
	__u64 bytes, pkts;

	if (!mss)
		mss = 1;
	if (q >> 32)
		return 0xffffffffu;
	bytes = q * rtt_min_us + r * rtt_min_us / WESTWOOD_USEC_PER_SEC;
	pkts = bytes / mss;
	if (pkts > 0xffffffffull)
		return 0xffffffffu;
	return pkts > 2 ? (__u32)pkts : 2;
}

/*
 * linux_exact: tcp_westwood.c's clock and arithmetic, for a port that gives the
 * module's trajectory step for step (cctl conform): RTT samples rounded up to
 * whole jiffies, the sample interval and RTT_min in jiffies (RTT_min starts at
 * 20 s), the estimate in bytes per jiffy with 32-bit division, the interval
 * closed past max(RTT, HZ/20) jiffies. The state keeps its units (usec, bytes/s)
 * as exact multiples of a jiffy's: exact where HZ divides 10^6 (100, 250, 1000).
 */
#define WESTWOOD_LINUX_INIT_RTT_S 20u

/* usec in one jiffy (hz dividing 10^6). */
CCTL_MATH __u32 westwood_usec_per_jiffy(__u32 hz)
{
	return hz ? (__u32)(WESTWOOD_USEC_PER_SEC / hz) : 1;
}

/* An RTT sample rounded up to whole jiffies, as usec. */
CCTL_MATH __u32 westwood_linux_rtt_us(__u32 rtt_us, __u32 hz)
{
	__u32 upj = westwood_usec_per_jiffy(hz);

	return (__u32)((((__u64)rtt_us + upj - 1) / upj) * upj);
}

/* init: RTT and RTT_min at 20 s, the interval starting at now_j. */
CCTL_MATH void westwood_linux_init(struct cctl_westwood_ca *ca, __u32 now_j, __u32 snd_una)
{
	ca->rtt_us = WESTWOOD_LINUX_INIT_RTT_S * (__u32)WESTWOOD_USEC_PER_SEC;
	ca->rtt_min_us = ca->rtt_us;
	ca->reset_rtt_min = 1;
	ca->win_start_us = now_j;
	ca->snd_una = snd_una;
	ca->first_ack = 1;
}

/* Per ACK at jiffies now_j (the interval's start is kept in jiffies). */
CCTL_MATH void westwood_linux_ack(struct cctl_westwood_ca *ca, __u32 now_j, __u32 snd_una,
				  __u32 mss, __u32 slowpath, __u32 hz)
{
	__u32 upj = westwood_usec_per_jiffy(hz);
	__u32 rtt_j = ca->rtt_us / upj, min_j = ca->rtt_min_us / upj;
	__s32 delta = (__s32)(now_j - ca->win_start_us);
	__u32 win = rtt_j > hz / 20 ? rtt_j : hz / 20;

	if (ca->first_ack) {
		ca->snd_una = snd_una;
		ca->first_ack = 0;
	}
	if (rtt_j && (__u32)delta > win) {
		__u32 sample = ca->bk / (__u32)delta;
		__u32 ns = (__u32)(ca->bw_ns_Bps / (hz ? hz : 1));
		__u32 est = (__u32)(ca->bw_Bps / (hz ? hz : 1));

		if (!ns && !est) {
			ns = sample;
			est = sample;
		} else {
			ns = (7 * ns + sample) >> 3;
			est = (7 * est + ns) >> 3;
		}
		ca->bw_ns_Bps = (__u64)ns * hz;
		ca->bw_Bps = (__u64)est * hz;
		ca->bk = 0;
		ca->win_start_us = now_j;
	}
	if (slowpath)
		ca->bk += westwood_acked_count(snd_una - ca->snd_una, mss, &ca->accounted);
	else
		ca->bk += snd_una - ca->snd_una;
	ca->snd_una = snd_una;
	if (ca->reset_rtt_min) {
		min_j = rtt_j;
		ca->reset_rtt_min = 0;
	} else if (rtt_j < min_j) {
		min_j = rtt_j;
	}
	ca->rtt_min_us = min_j * upj;
}

/* The loss rule in 32 bits: max(BWE · RTT_min / MSS, 2), BWE in bytes per jiffy. */
CCTL_MATH __u32 westwood_linux_limit(const struct cctl_westwood_ca *ca, __u32 mss, __u32 hz)
{
	__u32 upj = westwood_usec_per_jiffy(hz);
	__u32 est = (__u32)(ca->bw_Bps / (hz ? hz : 1));
	__u32 pkts = est * (ca->rtt_min_us / upj) / (mss ? mss : 1);

	return pkts > 2 ? pkts : 2;
}

#endif /* WESTWOOD_MATH_H */
