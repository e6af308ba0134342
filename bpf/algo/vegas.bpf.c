// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* vegas.bpf.c - TCP Vegas as a BPF struct_ops tcp_congestion_ops, registered as "bpf_vegas".
 *
 * TCP Vegas: Brakmo & Peterson, "TCP Vegas: end to end congestion avoidance on a
 * global internet", IEEE JSAC 13(8), 1995; the update law of [P1] Jin, Wei, Low,
 * Infocom 2004, footnote 6 (w <- w + sgn(α − x q) once per RTT). Spec:
 * shared/spec/algorithms.md §9.
 *
 *   once per RTT, with >= 3 RTT samples in it (rtt = the smallest):
 *     diff   = w (rtt − baseRTT) / baseRTT        packets queued by this flow
 *     target = w baseRTT / rtt
 *     slow start: diff > γ -> w = min(w, target + 1), ssthresh = min(ssthresh, w)
 *     CA:         diff > β -> w − 1;  diff < α -> w + 1;  else hold;  w >= 2
 *   fewer samples, or outside Open state: Reno for that ACK; loss: Reno.
 *
 * The decisions are in vegas_math.h (exact integer comparisons).
 *
 * Differences from the Linux module (net/ipv4/tcp_vegas.c):
 *   - defaults are the original Vegas's α = 1, β = 3 (packets); the `linux`
 *     profile sets Linux's α = 2, β = 4;
 *   - diff is compared as a real number (diff > β), where Linux first truncates
 *     it to whole packets (so Linux decreases only at diff >= β + 1); the
 *     `linux` profile sets integer_diff = 1 to do the same;
 *   - ack_counting = 1 makes slow start and the Reno fallback count ACK events;
 *   - like Linux (and unlike the original Vegas) diff divides by baseRTT, not by
 *     rtt, and slow start doubles every RTT, not every other one (spec §9);
 *   - otherwise the same: RTT samples + 1 us, baseRTT forgotten on idle restart,
 *     sampling restarted on entering Open, tcp_current_ssthresh after an update.
 *   - conform tolerance: 1 segments: diff is measured from usec RTT samples. In a
 *     lockstep run the second sender's ACK is written after the first sender has
 *     processed its own, so its samples lag by the first sender's per-ACK time,
 *     which differs by microseconds between port and module; with diff within
 *     ~2 us of α or β (CI: diff 1.97 against α = 2 at cwnd 144, step 4,072 of
 *     `avoidance`) one once-per-RTT decision flips by one segment.
 */
#include "cc_common.bpf.h"
#include "vegas_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_vegas_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_vegas_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_vegas_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_vegas_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load): Linux's integer comparison of
 * diff, the arithmetic of the `linux` profile (a rule set, not a bound); the increase
 * counter counts packets or ACK events. */
const volatile __u32 integer_diff = 0;  /* bool: compare ⌊diff⌋ as Linux does */
const volatile __u32 ack_counting = 0;  /* 0 = packets (ABC), 1 = ACK events */

/* Live tunables (spec §18.5: the queue targets; `cctl set`; defaults: original
 * Vegas, spec §9), read once per callback from the slot in force. */
struct vegas_live {
	__u32 alpha_pkts;  /* α: grow while fewer packets are queued */
	__u32 beta_pkts;   /* β: shrink while more packets are queued */
	__u32 gamma_pkts;  /* γ: leave slow start above this many queued */
};
CCTL_LIVE_PARAMS(struct vegas_live, {
	.alpha_pkts = 1,
	.beta_pkts = 3,
	.gamma_pkts = 1,
})

#define VEGAS_NO_RTT 0xffffffffu
#define VEGAS_BETA_FP (CCTL_FP_ONE / 2) /* Reno's backoff, for the shared layer */

static __always_inline struct cctl_vegas_ca *vegas_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

static __always_inline bool vegas_after(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq2 - seq1) < 0;
}

/* Start a fresh RTT of sampling and let the per-RTT adjustment run. */
static __always_inline void vegas_enable(struct cctl_vegas_ca *ca, const struct tcp_sock *tp)
{
	ca->doing_vegas_now = 1;
	ca->beg_snd_nxt = tp->snd_nxt;
	ca->cnt_rtt = 0;
	ca->min_rtt_us = VEGAS_NO_RTT;
}

static __always_inline void vegas_restart(struct cctl_vegas_ca *ca, const struct tcp_sock *tp)
{
	ca->base_rtt_us = 0;
	vegas_enable(ca, tp);
}

SEC("struct_ops/vegas_init")
void BPF_PROG(vegas_init, struct sock *sk)
{
	struct cctl_vegas_ca *ca = vegas_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	vegas_restart(ca, tp);
}

SEC("struct_ops/vegas_pkts_acked")
void BPF_PROG(vegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_vegas_ca *ca = vegas_ca(sk);
	__u32 vrtt;

	if (sample->rtt_us < 0)
		return;
	cc_meas_rtt(&ca->m, sample->rtt_us, cc_ca_state(sk), 0);
	/* + 1 us so that neither minRTT nor baseRTT is ever 0 (as Linux) */
	vrtt = (__u32)sample->rtt_us + 1;
	if (!ca->base_rtt_us || vrtt < ca->base_rtt_us)
		ca->base_rtt_us = vrtt;
	if (vrtt < ca->min_rtt_us)
		ca->min_rtt_us = vrtt;
	ca->cnt_rtt++;
}

SEC("struct_ops/vegas_cong_avoid")
void BPF_PROG(vegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_vegas_ca *ca = vegas_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (ack_counting)
		acked = 1;

	if (!ca->doing_vegas_now) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}

	if (vegas_after(ack, ca->beg_snd_nxt)) {
		/* an RTT is over: at most one Vegas adjustment per RTT */
		ca->beg_snd_nxt = tp->snd_nxt;

		if (ca->cnt_rtt <= 2) {
			/* one or two samples are probably delayed ACKs: behave like Reno */
			tcp_reno_cong_avoid(sk, ack, acked);
		} else {
			__u32 rtt = ca->min_rtt_us, base = ca->base_rtt_us, what, cwnd;
			bool ss = cc_in_slow_start(tp);
			const struct vegas_live *l = cctl_live_get();
			struct vegas_params p;
			struct vegas_rtt r;

			p.alpha = l->alpha_pkts;
			p.beta = l->beta_pkts;
			p.gamma = l->gamma_pkts;
			p.integer_diff = integer_diff;
			r.rtt_us = rtt;
			r.base_us = base;
			ca->diff_fp = vegas_diff_fp(tp->snd_cwnd, rtt, base);
			ca->target_cwnd = vegas_target_cwnd(tp->snd_cwnd, rtt, base);
			cwnd = vegas_update(tp->snd_cwnd, &r, ss, &p, &what);
			if (cwnd > tp->snd_cwnd_clamp)
				cwnd = tp->snd_cwnd_clamp;
			tp->snd_cwnd = cwnd;
			if (what & (VEGAS_LEFT_SS | VEGAS_DECREASE)) {
				if (tp->snd_ssthresh > cwnd)
					tp->snd_ssthresh = cwnd;
			} else if (ss) {
				tcp_slow_start(tp, acked);
			}
			/* tcp_current_ssthresh in Open state: remember 3/4 of the window */
			cwnd = tp->snd_cwnd;
			if (tp->snd_ssthresh < (cwnd >> 1) + (cwnd >> 2))
				tp->snd_ssthresh = (cwnd >> 1) + (cwnd >> 2);
		}
		ca->cnt_rtt = 0;
		ca->min_rtt_us = VEGAS_NO_RTT;
	} else if (cc_in_slow_start(tp)) {
		tcp_slow_start(tp, acked);
	}
}

SEC("struct_ops/vegas_ssthresh")
__u32 BPF_PROG(vegas_ssthresh, struct sock *sk)
{
	cc_meas_backoff(&vegas_ca(sk)->m, VEGAS_BETA_FP);
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/vegas_set_state")
void BPF_PROG(vegas_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_vegas_ca *ca = vegas_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (new_state == TCP_CA_Open) {
		vegas_enable(ca, tp);
		return;
	}
	ca->doing_vegas_now = 0;
	if (new_state == TCP_CA_CWR || new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss)
		cc_meas_cong_event(&ca->m, tp);
}

SEC("struct_ops/vegas_cwnd_event")
void BPF_PROG(vegas_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	/* after idle the path may have changed: forget baseRTT */
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START)
		vegas_restart(vegas_ca(sk), cc_tcp_sk(sk));
}

SEC("struct_ops/vegas_undo_cwnd")
__u32 BPF_PROG(vegas_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops vegas = {
	.init = (void *)vegas_init,
	.ssthresh = (void *)vegas_ssthresh,
	.cong_avoid = (void *)vegas_cong_avoid,
	.set_state = (void *)vegas_set_state,
	.cwnd_event = (void *)vegas_cwnd_event,
	.undo_cwnd = (void *)vegas_undo_cwnd,
	.pkts_acked = (void *)vegas_pkts_acked,
	.name = "bpf_vegas",
};
