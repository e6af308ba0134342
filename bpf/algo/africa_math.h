/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* africa_math.h - TCP Africa's fixed-point rules (spec §11), free of kernel types,
 * so that the same code runs in africa.bpf.c and in the host unit tests that check
 * it against a floating-point model (loader/src/algo/africa/model.rs). The fast
 * mode's increase is HighSpeed TCP's a(w), from highspeed_math.h.
 *
 * Δ̂ (queued packets) is << 10; α_africa is in 1/100 packet.
 * Include after cctl.h and something that defines __u32/__u64/__s32/__s64.
 */
#ifndef AFRICA_MATH_H
#define AFRICA_MATH_H

#include "highspeed_math.h"

/* TCP Africa's private state (spec §11). 80 bytes. */
struct cctl_africa_ca {
	struct cctl_meas m;   /* baseRTT is m.tmin_us */
	__u32 a_q16;          /* increase per RTT used at the last CA ACK, segments << 16 */
	__u32 delta_q10;      /* Δ̂ = w (RTT - baseRTT) / RTT at the last round end, packets << 10 */
	__u32 round_min_us;   /* minimum RTT sample of the current round, usec (0 = none) */
	__u32 round_cnt;      /* RTT samples in the current round */
	__u32 beg_snd_nxt;    /* snd_nxt when the current round began (sequence number) */
	__u32 a_cwnd;         /* cwnd (segments) the HSTCP a(w) was computed for (0 = none) */
	__u32 switches;       /* fast <-> slow changes so far */
	__u16 idx;            /* HSTCP table row for a_cwnd */
	__u8 mode;            /* AFRICA_MODE_* */
	__u8 _pad;
};

#define AFRICA_MODE_SLOW 0 /* Δ̂ >= α: Reno, w += 1/w per acked packet */
#define AFRICA_MODE_FAST 1 /* Δ̂ <  α: HSTCP, w += a(w)/w per acked packet */

/*
 * Δ̂ = w (RTT - baseRTT) / RTT, the Vegas-style estimate of this flow's packets in the
 * bottleneck queue (spec §11), << 10. cwnd in segments, times in usec; 0 when
 * RTT <= baseRTT. Saturates at 2^32 - 1.
 */
CCTL_MATH __u32 africa_delta_q10(__u32 cwnd, __u32 rtt_us, __u32 base_us)
{
	__u64 d;

	if (!rtt_us || rtt_us <= base_us)
		return 0;
	d = ((__u64)cwnd * (rtt_us - base_us) << 10) / rtt_us;
	return d > 0xffffffffull ? 0xffffffffu : (__u32)d;
}

/* Fast while Δ̂ < α (α in 1/100 packet). */
CCTL_MATH __u8 africa_mode_for(__u32 delta_q10, __u32 alpha_cpkt)
{
	return (__u64)delta_q10 * 100 < ((__u64)alpha_cpkt << 10) ? AFRICA_MODE_FAST
								   : AFRICA_MODE_SLOW;
}

/* One RTT sample (usec) for the current round's minimum. */
CCTL_MATH void africa_rtt_sample(struct cctl_africa_ca *ca, __u32 rtt_us)
{
	if (!rtt_us)
		rtt_us = 1;
	if (!ca->round_cnt || rtt_us < ca->round_min_us)
		ca->round_min_us = rtt_us;
	ca->round_cnt++;
}

/* Whether the ACK of sequence `ack` ends the round that began at beg_snd_nxt. */
CCTL_MATH int africa_round_over(__u32 ack, __u32 beg_snd_nxt)
{
	return (__s32)(ack - beg_snd_nxt) > 0;
}

/*
 * End of a round (once per RTT): Δ̂ from the round's minimum RTT and baseRTT
 * (base_us = the flow's minimum RTT), and the mode from Δ̂ (spec §11). A round
 * without RTT samples, or before any baseRTT, keeps Δ̂ and the mode. Starts the
 * next round.
 */
CCTL_MATH void africa_round_end(struct cctl_africa_ca *ca, __u32 cwnd, __u32 base_us,
				    __u32 alpha_cpkt)
{
	__u8 mode;

	if (ca->round_cnt && base_us) {
		ca->delta_q10 = africa_delta_q10(cwnd, ca->round_min_us, base_us);
		mode = africa_mode_for(ca->delta_q10, alpha_cpkt);
		if (mode != ca->mode) {
			ca->mode = mode;
			ca->switches++;
		}
	}
	ca->round_cnt = 0;
	ca->round_min_us = 0;
}

#endif /* AFRICA_MATH_H */
