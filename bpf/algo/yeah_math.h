/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* yeah_math.h - YeAH-TCP's per-RTT estimators, mode switch, precautionary
 * decongestion, Reno detection and loss rule (spec §10) in integer arithmetic,
 * free of kernel types, so that yeah.bpf.c and the host-side unit tests
 * (loader/src/algo/yeah/model.rs) run the very same code.
 *
 * With linux_rules = 0 the thresholds are the paper's real-valued tests, done
 * exactly on integer products (Fast iff Q < Q_max and L < 1/φ); with
 * linux_rules = 1 they are Linux's tests on truncated integers.
 * Include after cctl.h and something that defines __u32/__u64.
 */
#ifndef YEAH_MATH_H
#define YEAH_MATH_H

/* YeAH's private state (spec §10 "Per-flow state"). 92 bytes. */
struct cctl_yeah_ca {
	struct cctl_meas m;
	__u32 base_rtt_us;    /* RTT_base: minimum RTT sample (+1 us) since init/idle, usec (0 = none) */
	__u32 min_rtt_us;     /* RTT_min of the current RTT, usec (0xffffffff = no sample yet) */
	__u32 cnt_rtt;        /* RTT samples taken in the current RTT */
	__u32 beg_snd_nxt;    /* snd_nxt when the current RTT began */
	__u32 last_q;         /* Q of the last completed RTT (lastQ), packets, rounded down */
	__u32 l_fp;           /* L = RTT_queue / RTT_base of the last RTT, << 10 */
	__u32 reno_count;     /* count_reno: estimated cwnd of competing Reno flows, segments */
	__u32 fast_count;     /* count_fast: RTTs in Fast mode since the last reset */
	__u32 doing_reno_now; /* consecutive RTTs in Slow mode */
	__u32 decongestions;  /* precautionary decongestions so far */
	__u8 slow_mode;       /* mode of the last RTT: 0 = Fast (STCP), 1 = Slow (Reno) */
	__u8 doing_vegas_now; /* RTT sampling on (Open state) */
	__u8 _pad[2];
};

/* The tunables of yeah.bpf.c (spec §10 "Parameters"). */
struct yeah_params {
	__u32 q_max_pkts;    /* Q_max, packets */
	__u32 phy;           /* φ: Slow once RTT_queue reaches RTT_base / φ */
	__u32 gamma;         /* decongestion removes Q / γ */
	__u32 epsilon_shift; /* decongestion removes at most cwnd >> ε */
	__u32 delta_shift;   /* a loss removes at least cwnd >> δ */
	__u32 rho_rtts;      /* ρ: this many consecutive Slow RTTs mean Reno competition */
	__u32 zeta_rtts;     /* ζ: count_fast above this resets count_reno */
	__u32 linux_rules;   /* bool: Linux's integer tests and count_reno sentinel */
};

/* The RTTs yeah_per_rtt judges an RTT by. */
struct yeah_rtt {
	__u32 rtt_us;  /* smallest RTT sample of the RTT, usec */
	__u32 base_us; /* RTT_base, usec */
};

#define YEAH_SENTINEL 2u           /* count_reno's floor (and Linux's "unset" value), segments */
#define YEAH_DOING_RENO_MAX 0xffffffu

CCTL_MATH __u32 yeah_max(__u32 a, __u32 b)
{
	return a > b ? a : b;
}

CCTL_MATH __u32 yeah_min(__u32 a, __u32 b)
{
	return a < b ? a : b;
}

/* count_reno at start-up: [P3] cwnd/2; Linux the sentinel (set at the first Slow RTT). */
CCTL_MATH __u32 yeah_initial_reno_count(__u32 cwnd, const struct yeah_params *p)
{
	return p->linux_rules ? YEAH_SENTINEL : yeah_max(cwnd >> 1, YEAH_SENTINEL);
}

/* Q = cwnd · (RTT_min − RTT_base) / RTT_min: packets this flow keeps queued, rounded down. */
CCTL_MATH __u32 yeah_queue(__u32 cwnd, __u32 rtt_us, __u32 base_us)
{
	__u64 q;

	if (!rtt_us || rtt_us <= base_us)
		return 0;
	q = (__u64)cwnd * (rtt_us - base_us) / rtt_us;
	return q > 0xffffffffull ? 0xffffffffu : (__u32)q;
}

/* L = (RTT_min − RTT_base) / RTT_base, << 10, rounded down and saturated. */
CCTL_MATH __u32 yeah_level_fp(__u32 rtt_us, __u32 base_us)
{
	__u64 l;

	if (!base_us || rtt_us <= base_us)
		return 0;
	l = ((__u64)(rtt_us - base_us) << 10) / base_us;
	return l > 0xffffffffull ? 0xffffffffu : (__u32)l;
}

/* Whether the RTT is a Slow-mode one (spec §10 "Mode"). */
CCTL_MATH int yeah_is_slow(__u32 cwnd, __u32 rtt_us, __u32 base_us, const struct yeah_params *p)
{
	__u64 rq = rtt_us > base_us ? rtt_us - base_us : 0;

	if (p->linux_rules)
		return yeah_queue(cwnd, rtt_us, base_us) > p->q_max_pkts ||
		       rq > base_us / (p->phy ? p->phy : 1);
	/* Fast iff Q < Q_max and L < 1/φ, i.e. cwnd·rq < Q_max·rtt and rq·φ < base */
	return (__u64)cwnd * rq >= (__u64)p->q_max_pkts * rtt_us || rq * p->phy >= base_us;
}

/* Whether Q > Q_max (decongestion is due). */
CCTL_MATH int yeah_queue_over(__u32 cwnd, __u32 rtt_us, __u32 base_us,
				const struct yeah_params *p)
{
	__u64 rq = rtt_us > base_us ? rtt_us - base_us : 0;

	if (p->linux_rules)
		return yeah_queue(cwnd, rtt_us, base_us) > p->q_max_pkts;
	return (__u64)cwnd * rq > (__u64)p->q_max_pkts * rtt_us;
}

/*
 * The once-per-RTT YeAH step (spec §10 "Estimators", "Rules"), for an RTT whose
 * smallest RTT sample is r->rtt_us, given RTT_base r->base_us. Updates the mode and
 * the counters in *ca, may lower *ssthresh, and returns the new cwnd:
 *   Slow mode: if Q > Q_max and cwnd > count_reno, cwnd -= min(Q/γ, cwnd >> ε),
 *              floored at count_reno, and ssthresh = cwnd;
 *              count_reno + 1 (Linux: from the sentinel, max(cwnd/2, 2));
 *              one more consecutive Slow RTT.
 *   Fast mode: count_fast + 1; above ζ: count_reno reset ([P3] cwnd/2, Linux the
 *              sentinel) and count_fast = 0; consecutive Slow RTTs = 0.
 */
CCTL_MATH __u32 yeah_per_rtt(struct cctl_yeah_ca *ca, __u32 cwnd, __u32 *ssthresh,
			       const struct yeah_rtt *r, const struct yeah_params *p)
{
	__u32 rtt_us = r->rtt_us, base_us = r->base_us;
	__u32 q = yeah_queue(cwnd, rtt_us, base_us);

	ca->l_fp = yeah_level_fp(rtt_us, base_us);
	if (yeah_is_slow(cwnd, rtt_us, base_us, p)) {
		ca->slow_mode = 1;
		if (yeah_queue_over(cwnd, rtt_us, base_us, p) && cwnd > ca->reno_count) {
			__u32 red = yeah_min(q / (p->gamma ? p->gamma : 1), cwnd >> p->epsilon_shift);

			cwnd = yeah_max(cwnd - red, ca->reno_count);
			*ssthresh = cwnd;
			ca->decongestions++;
		}
		if (p->linux_rules && ca->reno_count <= YEAH_SENTINEL)
			ca->reno_count = yeah_max(cwnd >> 1, YEAH_SENTINEL);
		else if (ca->reno_count < 0xffffffffu)
			ca->reno_count++;
		ca->doing_reno_now = yeah_min(ca->doing_reno_now + 1, YEAH_DOING_RENO_MAX);
	} else {
		ca->slow_mode = 0;
		ca->fast_count++;
		if (ca->fast_count > p->zeta_rtts) {
			ca->reno_count = p->linux_rules ? YEAH_SENTINEL
							: yeah_max(cwnd >> 1, YEAH_SENTINEL);
			ca->fast_count = 0;
		}
		ca->doing_reno_now = 0;
	}
	ca->last_q = q;
	return cwnd;
}

/*
 * ssthresh at a loss (spec §10 "Loss"): without Reno competition (fewer than ρ
 * consecutive Slow RTTs) remove lastQ, at least cwnd >> δ and at most cwnd/2;
 * with it, halve. Never below 2. count_fast = 0, count_reno halved (>= 2).
 */
CCTL_MATH __u32 yeah_loss_ssthresh(struct cctl_yeah_ca *ca, __u32 cwnd, const struct yeah_params *p)
{
	__u32 half = yeah_max(cwnd >> 1, 2), red;

	if (ca->doing_reno_now < p->rho_rtts)
		red = yeah_max(yeah_min(ca->last_q, half), cwnd >> p->delta_shift);
	else
		red = half;
	ca->fast_count = 0;
	ca->reno_count = yeah_max(ca->reno_count >> 1, YEAH_SENTINEL);
	return cwnd > red + 2 ? cwnd - red : 2;
}

#endif /* YEAH_MATH_H */
