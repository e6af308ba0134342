// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* bic.bpf.c - BIC-TCP as a BPF struct_ops tcp_congestion_ops, registered as "bpf_bic".
 *
 * BIC-TCP: Xu, Harfoush, Rhee, "Binary Increase Congestion Control for Fast,
 * Long Distance Networks", Infocom 2004; as evaluated in [P0] Li, Leith,
 * Shorten, IEEE/ACM ToN 2007, §IV-D, Table II. Spec: shared/spec/algorithms.md §6.
 *
 *   increase per RTT   f_α(δ, w), δ = (w_1 - w)/B:                     [P0] §IV-D
 *                      B/σ near the target or just above it, δ while
 *                      1 < δ <= S_max, (w - w_1)/(B - 1) when probing above
 *                      it, S_max otherwise; Reno (1) while w <= Low_Window
 *   loss               w_1 = (1 + β)/2 · w if w < w_1 (fast convergence)
 *                      else w;  w_2 = w;  w = β w  (Reno's w/2 at or
 *                      below Low_Window)                                [P0] §IV-D
 *
 * The arithmetic lives in bic_math.h so host tests can check it against a
 * floating-point model of the equations.
 *
 * Deliberate deviations from the paper:
 *   - Low_Util / Util_Check ([P0] Table II): the detection rule is not given
 *     (spec §6 [GAP]) and Linux has none; instead, like Linux, the increase is
 *     at least w/boost_max_cnt per RTT until the first loss (5 % with 20).
 *
 * Differences from the Linux module (net/ipv4/tcp_bic.c):
 *   - δ and f_α in 1/1024 steps (Linux: integer dist = (w_1 - w)/B, so it
 *     jumps between its cases on whole segments and creeps at B/σ for 2B
 *     segments below the target instead of B); whole_delta (on in the
 *     `linux` profile) makes δ whole as Linux does;
 *   - cnt is recomputed on every ACK (Linux: at most every HZ/32 unless cwnd
 *     changed; cnt depends only on cwnd, w_1 and the ACK ratio, so only the
 *     ACK-ratio drift between updates differs); linux_exact (on in the `linux`
 *     profile) keeps Linux's jiffies gate and computes cnt in Linux's integer
 *     arithmetic (bic_linux_cnt: the fixed-point B/σ = 204/1024 made cnt 278
 *     where Linux has 277 at w = 104, one segment one ACK late);
 *   - Linux divides cnt by its packets-per-ACK estimate while also counting
 *     acked packets, which makes it grow about twice as fast under delayed
 *     ACKs; here that rescaling is the tunable delayed_ack_rescale (on in the
 *     `linux` profile, off by default: [P0] counted packets, spec §18.2);
 *   - w_min is tracked for the trace (Linux has no such variable);
 *   - undo is current Linux's max(cwnd, prior cwnd) (tcp_reno_undo_cwnd);
 *     older kernels (and spec §6's Linux note) returned max(cwnd, w_1);
 *   - every constant is a tunable (S_max, B, σ, β, Low_Window live, spec §18.5);
 *     ack_counting=events adds one packet per ACK instead of the packets it
 *     acknowledged (spec §18.2).
 */
#include "cc_common.bpf.h"
#include "bic_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_bic_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_bic_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_bic_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_bic_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load; defaults are [P0] Table II /
 * spec §6): the initial ssthresh is used at init only; Linux's arithmetic modes of
 * the `linux` profile (whole δ, cnt divided by packets per ACK) select the rule set a
 * flow is compared under, not a bound or gain; the increase counter counts packets
 * or ACK events. */
const volatile __u32 initial_ssthresh = 0;      /* segments (0 = the kernel's) */
const volatile __u32 delayed_ack_rescale = 0;   /* bool: divide cnt by packets per ACK (Linux) */
const volatile __u32 ack_counting = 0;          /* 0 = packets (ABC), 1 = ACK events */
const volatile __u32 whole_delta = 0;           /* bool: δ = ⌊(w_1 - w)/B⌋ (Linux's dist) */
const volatile __u32 linux_exact = 0;           /* bool: cnt at most every HZ/32 (jiffies) */

extern unsigned long CONFIG_HZ __kconfig;

/* Live tunables (spec §18.5: bounds, the search's divisors, the backoff and the
 * Reno threshold; `cctl set`), read once per callback from the slot in force; cnt is
 * recomputed from them on every ACK. */
struct bic_live {
	__u32 max_increment;     /* S_max, segments per RTT (Linux 16) */
	__u32 bictcp_b;          /* B, binary-search divisor */
	__u32 smooth_part;       /* σ: B/σ segments per RTT near the target */
	__u32 beta_1024;         /* β, multiplier on loss, 1/1024 */
	__u32 low_window;        /* Low_Window, segments: Reno at or below */
	__u32 fast_convergence;  /* bool */
	__u32 boost_max_cnt;     /* before the first loss cnt <= this (0 = off) */
};
CCTL_LIVE_PARAMS(struct bic_live, {
	.max_increment = 32,
	.bictcp_b = 4,
	.smooth_part = 20,
	.beta_1024 = 819,
	.low_window = 14,
	.fast_convergence = 1,
	.boost_max_cnt = 20,
})

#define BIC_DELAYED_ACK_INIT (2u << BIC_ACK_RATIO_SHIFT) /* 2 packets per ACK, like Linux */

static __always_inline struct cctl_bic_ca *bic_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

/* All of BIC's own state back to "no loss yet" (init and RTO). */
static __always_inline void bic_reset(struct cctl_bic_ca *ca)
{
	ca->w_max = 0;
	ca->w_min = 0;
	ca->loss_cwnd = 0;
	ca->cnt = 0;
	ca->inc_fp = 0;
	ca->delayed_ack = BIC_DELAYED_ACK_INIT;
	ca->last_cwnd = 0;
	ca->last_time = 0;
}

SEC("struct_ops/bic_init")
void BPF_PROG(bic_init, struct sock *sk)
{
	struct cctl_bic_ca *ca = bic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	bic_reset(ca);
	if (initial_ssthresh)
		tp->snd_ssthresh = initial_ssthresh;
}

static __always_inline void bic_params_get(struct bic_params *p, const struct bic_live *l)
{
	p->b = l->bictcp_b;
	p->smax = l->max_increment;
	p->smooth = l->smooth_part;
	p->whole_delta = whole_delta;
	p->low_window = l->low_window;
	p->boost_max_cnt = l->boost_max_cnt;
}

/* Recomputes f_α and cnt for the current window (spec §6 "ACK"). */
static __always_inline void bic_update(struct cctl_bic_ca *ca, __u32 cwnd)
{
	struct bic_params p;

	/* the window reached so far is the new lower end of the search */
	if (cwnd > ca->w_min)
		ca->w_min = cwnd;
	if (linux_exact) {
		/* tcp_bic.c: cnt keeps its value while cwnd is unchanged for up to HZ/32 */
		__u32 now_j = (__u32)bpf_jiffies64();

		if (ca->last_cwnd == cwnd &&
		    (__s32)(now_j - ca->last_time) <= (__s32)(CONFIG_HZ / 32))
			return;
		ca->last_cwnd = cwnd;
		ca->last_time = now_j;
	}
	bic_params_get(&p, cctl_live_get());
	ca->inc_fp = bic_effective_inc_fp(cwnd, ca->w_max, &p);
	/* Linux leaves Reno mode (w <= Low_Window) unscaled */
	if (linux_exact)
		ca->cnt = bic_linux_cnt(cwnd, ca->w_max, &p, delayed_ack_rescale, ca->delayed_ack);
	else
		ca->cnt = bic_cnt(cwnd, ca->inc_fp, delayed_ack_rescale && cwnd > p.low_window,
				  ca->delayed_ack);
}

SEC("struct_ops/bic_cong_avoid")
void BPF_PROG(bic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_bic_ca *ca = bic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	acked = cc_slow_start_then(sk, acked, ack_counting);
	if (!acked)
		return;

	bic_update(ca, tp->snd_cwnd);
	tcp_cong_avoid_ai(tp, ca->cnt, acked);
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/bic_ssthresh")
__u32 BPF_PROG(bic_ssthresh, struct sock *sk)
{
	struct cctl_bic_ca *ca = bic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	const struct bic_live *l = cctl_live_get();
	__u32 beta_1024 = l->beta_1024, low_window = l->low_window;
	__u32 w = tp->snd_cwnd;
	__u32 s = bic_ssthresh_of(w, beta_1024, low_window);

	ca->w_max = bic_new_w_max(w, ca->w_max, beta_1024, l->fast_convergence);
	ca->loss_cwnd = w;
	ca->w_min = s;
	cc_meas_backoff(&ca->m, w <= low_window ? CCTL_FP_ONE / 2 : beta_1024);
	return s;
}

SEC("struct_ops/bic_set_state")
void BPF_PROG(bic_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_bic_ca *ca = bic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	switch (new_state) {
	case TCP_CA_Loss:
		/* a timeout forgets the search (spec §6 "Timeout", [LINUX]) */
		bic_reset(ca);
		cc_meas_cong_event(&ca->m, tp);
		break;
	case TCP_CA_CWR:
	case TCP_CA_Recovery:
		cc_meas_cong_event(&ca->m, tp);
		break;
	}
}

/* Packets-per-ACK estimate, kept only in Open state (as Linux does). */
SEC("struct_ops/bic_pkts_acked")
void BPF_PROG(bic_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_bic_ca *ca = bic_ca(sk);
	__u8 state = cc_ca_state(sk);

	if (sample->rtt_us > 0)
		cc_meas_rtt(&ca->m, sample->rtt_us, state, 0);
	if (state == TCP_CA_Open)
		ca->delayed_ack = bic_delayed_ack(ca->delayed_ack, sample->pkts_acked);
}

SEC("struct_ops/bic_undo_cwnd")
__u32 BPF_PROG(bic_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops bic = {
	.init = (void *)bic_init,
	.ssthresh = (void *)bic_ssthresh,
	.cong_avoid = (void *)bic_cong_avoid,
	.set_state = (void *)bic_set_state,
	.undo_cwnd = (void *)bic_undo_cwnd,
	.pkts_acked = (void *)bic_pkts_acked,
	.name = "bpf_bic",
};
