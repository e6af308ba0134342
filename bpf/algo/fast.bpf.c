// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* fast.bpf.c - FAST TCP as a BPF struct_ops tcp_congestion_ops, registered as "bpf_fast".
 *
 * FAST TCP: [P1] Jin, Wei, Low, "FAST TCP: Motivation, Architecture, Algorithms,
 * Performance", IEEE Infocom 2004, §IV (estimation §IV-A, window control eq. 5-7);
 * adaptive α of [P0] Li, Leith, Shorten, IEEE/ACM ToN 2007, §IV-E, Table II.
 * Spec: shared/spec/algorithms.md §8. There is no Linux module to compare with.
 *
 *   estimation   η = min(3 r / w, 1/4) (r = packets per ACK), T̄ ← (1 − η) T̄ + η T
 *                per RTT sample in Open state; baseRTT = min RTT ever; q̂ = T̄ − baseRTT
 *   window       every other RTT (update RTT, then freeze RTT), or every
 *                update_interval_ms:  w ← min{2w, (1 − γ) w + γ (baseRTT/T̄ · w + α)};
 *                a decrease applies at once, an increase is spread over the ACKs
 *                of the update RTT (+ (target − w)/w per acked packet)
 *   α            fixed, or [P0]'s levels 8 / 20 / 200 packets with hysteresis on the
 *                throughput of the last RTT (m0u / m1l / m1u / m2l kB/s)
 *   slow start   standard, until q̂ > ss_exit_qdelay_pct % of baseRTT (or diff > α/2)
 *                or the first loss; then the window update at once. After a
 *                timeout, the kernel's slow start up to ssthresh, then updates
 *   loss / ECN   halve, but keep 16 packets if the window was larger ([P1] fn. 5);
 *                no delay-based adjustment until recovery ends (samples unreliable)
 *   timeout      the kernel's: w = 1, slow start up to the same ssthresh
 *   pacing       optional: the kernel's internal pacing (sk_pacing_status =
 *                SK_PACING_NEEDED), at tcp_pacing_ca_ratio (120 %) of cwnd/srtt,
 *                which is the spec's "w/T̄ × 1.2" with the kernel's smoothed RTT
 * The arithmetic is in fast_math.h.
 *
 * Deliberate deviations (spec [GAP]s and alternatives):
 *   - the multiplicative-increase alternative α(w, q) = a·w while q = 0 is not
 *     implemented: [P1] describes it but uses constant α in all its experiments
 *     and gives no value for a;
 *   - the window is whole segments: an update rounds to the nearest one, so at a
 *     fixed point the queue is α ± 1/(2γ) packets rather than exactly α;
 *   - the increase is spread per ACK (cwnd), not by a per-packet rate (pacing
 *     is the kernel's, when enabled).
 */
#include "cc_common.bpf.h"
#include "fast_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_fast_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_fast_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_fast_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_fast_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load; defaults: [P0] Table II, [P1],
 * spec §8): modes that per-flow state is built for (the adaptive α level is tracked
 * only with alpha_mode=1; update_interval_ms 0 or not selects the phase machine,
 * update/freeze RTTs or a fixed interval; pacing is asked for at init; the increase
 * counter counts packets or ACK events). */
const volatile __u32 alpha_mode = 1;            /* 0 = fixed α, 1 = [P0]'s adaptive levels */
const volatile __u32 update_interval_ms = 0;    /* 0 = every other RTT, else a fixed interval, ms */
const volatile __u32 pacing = 1;                /* bool: ask for the kernel's internal pacing */
const volatile __u32 ack_counting = 0;          /* 0 = packets (ABC), 1 = ACK events */

/* Live tunables (spec §18.5: γ, the α targets and the level thresholds, η's gain,
 * the loss bound and the slow-start exit test; `cctl set`), read once per callback
 * from the slot in force. The α in use follows a change at the next RTT boundary. */
struct fast_live {
	__u32 gamma_pct;            /* γ, % ([P0]: 1/2) */
	__u32 alpha_pkts;           /* fixed α, packets */
	__u32 alpha_l0_pkts;        /* m0a, packets */
	__u32 alpha_l1_pkts;        /* m1a, packets */
	__u32 alpha_l2_pkts;        /* m2a, packets */
	__u32 m0u_kBps;             /* level 0 -> 1 above, kB/s */
	__u32 m1l_kBps;             /* level 1 -> 0 below, kB/s */
	__u32 m1u_kBps;             /* level 1 -> 2 above, kB/s */
	__u32 m2l_kBps;             /* level 2 -> 1 below, kB/s */
	__u32 eta_num;              /* η = min(eta_num r / w, eta_max) */
	__u32 eta_max_pct;          /* η's cap, % */
	__u32 eta_ack_ratio;        /* bool: r = measured packets per ACK (always measured) */
	__u32 min_loss_window_pkts; /* window kept by large flows on loss, packets */
	__u32 ss_exit_mode;         /* 0 = q̂ > pct % baseRTT, 1 = diff > α/2 */
	__u32 ss_exit_qdelay_pct;   /* %, of baseRTT */
};
CCTL_LIVE_PARAMS(struct fast_live, {
	.gamma_pct = 50,
	.alpha_pkts = 20,
	.alpha_l0_pkts = 8,
	.alpha_l1_pkts = 20,
	.alpha_l2_pkts = 200,
	.m0u_kBps = 1500,
	.m1l_kBps = 1250,
	.m1u_kBps = 15000,
	.m2l_kBps = 12500,
	.eta_num = 3,
	.eta_max_pct = 25,
	.eta_ack_ratio = 1,
	.min_loss_window_pkts = 16,
	.ss_exit_mode = 0,
	.ss_exit_qdelay_pct = 10,
})

#define FAST_BETA_FP (CCTL_FP_ONE / 2)

static __always_inline struct cctl_fast_ca *fast_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

static __always_inline bool fast_after(__u32 seq1, __u32 seq2)
{
	return (__s32)(seq2 - seq1) < 0;
}

static __always_inline __u32 fast_level_alpha(__u32 level, const struct fast_live *l)
{
	if (!alpha_mode)
		return l->alpha_pkts;
	if (level == 0)
		return l->alpha_l0_pkts;
	return level == 1 ? l->alpha_l1_pkts : l->alpha_l2_pkts;
}

/* Begin a new RTT: its end is the first ACK beyond what is sent now. */
static __always_inline void fast_rtt_begin(struct cctl_fast_ca *ca, const struct tcp_sock *tp)
{
	ca->beg_snd_nxt = tp->snd_nxt;
	ca->rtt_start_us = (__u32)tp->tcp_mstamp;
	ca->delivered0 = tp->delivered;
}

SEC("struct_ops/fast_init")
void BPF_PROG(fast_init, struct sock *sk)
{
	struct cctl_fast_ca *ca = fast_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	ca->alpha_pkts = fast_level_alpha(0, cctl_live_get());
	ca->ack_ratio_fp = FAST_ACK_RATIO_ONE;
	ca->phase = FAST_PHASE_SLOW_START;
	ca->target_cwnd = tp->snd_cwnd;
	ca->ref_cwnd = tp->snd_cwnd;
	ca->last_update_us = (__u32)tp->tcp_mstamp;
	fast_rtt_begin(ca, tp);
	if (pacing && sk->sk_pacing_status == SK_PACING_NONE)
		sk->sk_pacing_status = SK_PACING_NEEDED;
}

SEC("struct_ops/fast_pkts_acked")
void BPF_PROG(fast_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_fast_ca *ca = fast_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	__u8 state = cc_ca_state(sk);
	const struct fast_live *l;
	__u32 rtt, eta;

	if (sample->pkts_acked)
		ca->ack_ratio_fp = fast_ack_ratio(ca->ack_ratio_fp, sample->pkts_acked);
	if (sample->rtt_us < 0)
		return;
	rtt = sample->rtt_us ? (__u32)sample->rtt_us : 1;
	cc_meas_rtt(&ca->m, rtt, state, 0);
	if (!ca->base_rtt_us || rtt < ca->base_rtt_us)
		ca->base_rtt_us = rtt;
	/* samples taken during loss recovery are unreliable ([P1] §IV) */
	if (state != TCP_CA_Open)
		return;
	l = cctl_live_get();
	eta = fast_eta_fp16(tp->snd_cwnd, ca->ack_ratio_fp, l->eta_num, l->eta_max_pct,
			    l->eta_ack_ratio);
	ca->avg_rtt_fp = fast_avg_rtt(ca->avg_rtt_fp, rtt, eta);
}

/* Compute the next window ([P1] eq. 5): decreases at once, increases spread. */
static __always_inline void fast_update(struct cctl_fast_ca *ca, struct tcp_sock *tp,
					const struct fast_live *l)
{
	__u32 cwnd = tp->snd_cwnd;
	__u32 target = fast_window(cwnd, ca->base_rtt_us, ca->avg_rtt_fp, ca->alpha_pkts,
				   (l->gamma_pct << CCTL_FP_SHIFT) / 100);

	if (target > tp->snd_cwnd_clamp)
		target = tp->snd_cwnd_clamp;
	ca->target_cwnd = target;
	ca->ref_cwnd = cwnd;
	ca->last_update_us = (__u32)tp->tcp_mstamp;
	/* the carry survives an update that keeps increasing: with a fixed interval
	 * shorter than the RTT, a +1 target would otherwise never be reached */
	if (target < cwnd) {
		tp->snd_cwnd = target;
		ca->spread_cnt = 0;
	}
	/* FAST, not the kernel's slow start, owns the window from here on */
	if (tp->snd_ssthresh > tp->snd_cwnd)
		tp->snd_ssthresh = tp->snd_cwnd;
}

static __always_inline void fast_params_get(struct fast_params *p, const struct fast_live *l)
{
	p->m0u_kBps = l->m0u_kBps;
	p->m1l_kBps = l->m1l_kBps;
	p->m1u_kBps = l->m1u_kBps;
	p->m2l_kBps = l->m2l_kBps;
	p->ss_exit_mode = l->ss_exit_mode;
	p->ss_exit_qdelay_pct = l->ss_exit_qdelay_pct;
}

SEC("struct_ops/fast_cong_avoid")
void BPF_PROG(fast_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_fast_ca *ca = fast_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	bool boundary = fast_after(ack, ca->beg_snd_nxt);
	bool update = false, left_slow_start = false;
	const struct fast_live *l = cctl_live_get();
	struct fast_params p;

	if (ack_counting)
		acked = 1;
	fast_params_get(&p, l);

	if (boundary) {
		__u32 elapsed = (__u32)tp->tcp_mstamp - ca->rtt_start_us;

		/* an "RTT" much shorter than T̄ (an ACK burst after recovery) says
		 * nothing about the throughput: keep the last value */
		if ((__u64)elapsed << 11 >= ca->avg_rtt_fp)
			ca->tput_kBps = fast_tput_kBps(tp->delivered - ca->delivered0,
						       tp->mss_cache, elapsed);
		if (alpha_mode)
			ca->alpha_level = fast_alpha_level(ca->alpha_level, ca->tput_kBps, &p);
		ca->alpha_pkts = fast_level_alpha(ca->alpha_level, l);
		fast_rtt_begin(ca, tp);
	}

	if (cc_in_slow_start(tp)) {
		/* only the initial slow start ends on queueing delay; after a timeout
		 * the kernel's slow start runs up to ssthresh (spec §8 "Timeout") */
		bool initial = tp->snd_ssthresh >= CCTL_INFINITE_SSTHRESH;

		if (!(initial && boundary &&
		      fast_ss_exit(tp->snd_cwnd, ca->base_rtt_us, ca->avg_rtt_fp, ca->alpha_pkts,
				   &p))) {
			ca->phase = FAST_PHASE_SLOW_START;
			if (cc_cwnd_limited(sk))
				tcp_slow_start(tp, acked);
			return;
		}
		/* queueing delay shows: slow start is over, window control starts now */
		tp->snd_ssthresh = tp->snd_cwnd;
		left_slow_start = true;
	} else if (ca->phase == FAST_PHASE_SLOW_START || ca->phase == FAST_PHASE_RECOVERY) {
		/* slow start reached ssthresh, or recovery ended: hold, update next RTT */
		ca->phase = FAST_PHASE_FREEZE;
		ca->target_cwnd = tp->snd_cwnd;
	}

	if (update_interval_ms) {
		ca->phase = FAST_PHASE_UPDATE;
		update = left_slow_start ||
			 (__u32)tp->tcp_mstamp - ca->last_update_us >= update_interval_ms * 1000;
	} else if (left_slow_start) {
		ca->phase = FAST_PHASE_UPDATE;
		update = true;
	} else if (boundary) {
		/* update in one RTT, freeze in the next ([P1] §IV-B) */
		update = ca->phase != FAST_PHASE_UPDATE;
		ca->phase = update ? FAST_PHASE_UPDATE : FAST_PHASE_FREEZE;
	}
	if (update)
		fast_update(ca, tp, l);

	if (tp->snd_cwnd < ca->target_cwnd && cc_cwnd_limited(sk)) {
		__u32 cnt = ca->spread_cnt;

		tp->snd_cwnd = fast_spread(tp->snd_cwnd, ca->target_cwnd, ca->ref_cwnd, &cnt, acked);
		ca->spread_cnt = cnt;
	}
}

SEC("struct_ops/fast_ssthresh")
__u32 BPF_PROG(fast_ssthresh, struct sock *sk)
{
	struct cctl_fast_ca *ca = fast_ca(sk);

	cc_meas_backoff(&ca->m, FAST_BETA_FP);
	return fast_loss_ssthresh(cc_tcp_sk(sk)->snd_cwnd,
				  cctl_live_get()->min_loss_window_pkts);
}

SEC("struct_ops/fast_set_state")
void BPF_PROG(fast_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_fast_ca *ca = fast_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	switch (new_state) {
	case TCP_CA_Open:
		/* after a reduction, start a clean RTT (Disorder -> Open changes nothing) */
		if (ca->phase == FAST_PHASE_RECOVERY)
			fast_rtt_begin(ca, tp);
		break;
	case TCP_CA_CWR:
	case TCP_CA_Recovery:
	case TCP_CA_Loss:
		ca->phase = FAST_PHASE_RECOVERY;
		ca->target_cwnd = 0;
		cc_meas_cong_event(&ca->m, tp);
		break;
	}
}

SEC("struct_ops/fast_undo_cwnd")
__u32 BPF_PROG(fast_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops fast = {
	.init = (void *)fast_init,
	.ssthresh = (void *)fast_ssthresh,
	.cong_avoid = (void *)fast_cong_avoid,
	.set_state = (void *)fast_set_state,
	.undo_cwnd = (void *)fast_undo_cwnd,
	.pkts_acked = (void *)fast_pkts_acked,
	.name = "bpf_fast",
};
