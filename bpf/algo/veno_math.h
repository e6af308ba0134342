/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* veno_math.h - TCP Veno's rules (spec §19.2) in integer arithmetic, free of
 * kernel types, so that veno.bpf.c and the host-side unit tests
 * (loader/src/algo/veno/model.rs) run the very same code.
 *
 * The congestion test N >= β compares exact integer products
 * (w·(rtt − BaseRTT) against β·rtt), so the decision is exactly the real-valued
 * rule; only the traced N is rounded (down, to 1/1024 packet). The loss backoff
 * w·4/5 is rounded down to whole segments (as Linux).
 * linux_compat = 1 makes the test Linux's: N in half packets, rounded up
 * (⌈2N⌉ >= 2β, i.e. N > β − 1/2), and the every-other-RTT increase counts
 * RTTs with snd_cwnd_cnt exactly as net/ipv4/tcp_veno.c does.
 * Include after cctl.h and something that defines __u8/__u32/__u64.
 */
#ifndef VENO_MATH_H
#define VENO_MATH_H

/* Veno's private state (spec §19.2 "Variables to export"). 76 bytes. */
struct cctl_veno_ca {
	struct cctl_meas m;
	__u32 base_rtt_us;   /* BaseRTT: minimum RTT sample (+1 us), usec (0x7fffffff = none) */
	__u32 min_rtt_us;    /* minimum RTT sample (+1 us) of the current round, usec
			      * (linux_compat: since the last ACK) (0x7fffffff = none) */
	__u32 last_rtt_us;   /* RTT of the last estimate (the round minimum it used), usec (0 = none) */
	__u32 backlog_fp;    /* N of the last estimate, w·(rtt − BaseRTT)/rtt, packets << 10 */
	__u32 cnt_rtt;       /* RTT samples in the current round (linux_compat: since init) */
	__u32 beg_snd_nxt;   /* snd_nxt when the current round began: it ends at an ACK beyond */
	__u8 doing_veno_now; /* 1 in Open state: the Veno rules run (otherwise Reno) */
	__u8 congested;      /* N >= β at the last estimate: backoff 1/2, increase every other RTT */
	__u8 inc;            /* toggle: the next RTT completed while congested adds a segment */
	__u8 _pad;
};

/* The tunables veno_math.h needs, as veno.bpf.c passes them. */
struct veno_params {
	__u32 beta_pkts;        /* β, packets (1..=100) */
	__u32 loss_factor_pct;  /* random-loss backoff, % of cwnd (4/5 = 80) */
	__u32 linux_compat;     /* bool: net/ipv4/tcp_veno.c's arithmetic */
};

/* The every-other-RTT increase while congested, in and out. */
struct veno_ai {
	__u32 cwnd;      /* in/out: snd_cwnd, segments */
	__u32 cwnd_cnt;  /* in/out: snd_cwnd_cnt, acked packets */
	__u32 clamp;     /* in: snd_cwnd_clamp, segments */
	__u32 acked;     /* in: acked packets (or 1 per ACK event) */
	__u8 inc;        /* in/out: cctl_veno_ca.inc */
	__u8 _pad[3];
};

#define VENO_U32_MAX 0xffffffffull

/*
 * N = w (rtt − BaseRTT) / rtt: packets this flow keeps queued, << 10, rounded
 * down and saturated; 0 when rtt <= BaseRTT.
 */
CCTL_MATH __u32 veno_backlog_fp(__u32 cwnd, __u32 rtt_us, __u32 base_us)
{
	__u64 d;

	if (rtt_us <= base_us)
		return 0;
	d = ((__u64)cwnd * (rtt_us - base_us) << 10) / rtt_us;
	return d > VENO_U32_MAX ? (__u32)VENO_U32_MAX : (__u32)d;
}

/*
 * Whether the network is congested: N >= β (spec §19.2).
 * Default exact: w (rtt − BaseRTT) >= β rtt.
 * linux_compat: Linux's diff = 2w − ⌊2 w BaseRTT / rtt⌋ (u32) >= 2β.
 */
CCTL_MATH int veno_is_congested(__u32 cwnd, __u32 rtt_us, __u32 base_us,
				const struct veno_params *p)
{
	if (p->linux_compat) {
		__u64 target = ((__u64)cwnd * base_us << 1) / (rtt_us ? rtt_us : 1);
		__u32 diff = (__u32)((__u64)(__u32)(cwnd << 1) - target);

		return diff >= ((__u64)p->beta_pkts << 1);
	}
	if (rtt_us <= base_us)
		return p->beta_pkts == 0;
	return (__u64)cwnd * (rtt_us - base_us) >= (__u64)p->beta_pkts * rtt_us;
}

/*
 * ssthresh on a loss (spec §19.2): congested -> max(w/2, 2) (Reno);
 * otherwise (random loss) max(⌊w · loss_factor_pct / 100⌋, 2).
 */
CCTL_MATH __u32 veno_ssthresh_segs(__u32 cwnd, __u32 congested, const struct veno_params *p)
{
	__u32 pct = p->loss_factor_pct > 100 ? 100 : p->loss_factor_pct;
	__u32 s;

	if (congested)
		s = cwnd >> 1;
	else
		s = (__u32)((__u64)cwnd * pct / 100);
	return s > 2 ? s : 2;
}

/* The backoff multiplier of veno_ssthresh_segs, << 10 (for the shared layer). */
CCTL_MATH __u32 veno_beta_fp(__u32 congested, const struct veno_params *p)
{
	__u32 pct = p->loss_factor_pct > 100 ? 100 : p->loss_factor_pct;

	return congested ? CCTL_FP_ONE / 2 : (pct << CCTL_FP_SHIFT) / 100;
}

/*
 * Congestion avoidance while congested: one segment every other RTT, an RTT
 * being cwnd acked packets counted in snd_cwnd_cnt (spec §19.2).
 * Default: k = RTTs completed by these ACKs, (k + inc) / 2 segments, the
 * toggle flipped k times, the remainder kept in cwnd_cnt.
 * linux_compat: Linux's rule, at most one RTT per call, the ACKs of the call
 * that completes an RTT not counted.
 * cwnd never exceeds clamp.
 */
CCTL_MATH void veno_congested_ai(struct veno_ai *s, const struct veno_params *p)
{
	__u32 w = s->cwnd ? s->cwnd : 1;
	__u64 cnt, k, add;

	if (p->linux_compat) {
		if (s->cwnd_cnt >= w) {
			if (s->inc && s->cwnd < s->clamp) {
				s->cwnd++;
				s->inc = 0;
			} else {
				s->inc = 1;
			}
			s->cwnd_cnt = 0;
		} else {
			s->cwnd_cnt += s->acked;
		}
		return;
	}
	cnt = (__u64)s->cwnd_cnt + s->acked;
	k = cnt / w;
	s->cwnd_cnt = (__u32)(cnt - k * w);
	add = (k + s->inc) >> 1;
	s->inc ^= (__u8)(k & 1);
	add += s->cwnd;
	s->cwnd = add < s->clamp ? (__u32)add : s->clamp;
}

#endif /* VENO_MATH_H */
