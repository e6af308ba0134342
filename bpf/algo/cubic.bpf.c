// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* cubic.bpf.c - CUBIC as a BPF struct_ops tcp_congestion_ops, registered as "bpf_cubic".
 *
 * CUBIC: Rhee & Xu, "CUBIC: A New TCP-Friendly High-Speed TCP Variant",
 * PFLDnet 2005; Ha, Rhee, Xu, ACM SIGOPS OSR 2008; RFC 9438. As tested in
 * [P2] and [P3] (Linux 2.6.16-2.6.23, β = 0.8). HyStart: Ha & Rhee, "Taming the
 * Elephants: New TCP Slow Start", 2008. Spec: shared/spec/algorithms.md §7.
 *
 *   window             W(t) = C (t - K)^3 + W_max,  K = cbrt((W_max - w_0) / C)
 *                      (w_0: the window when the epoch starts; K = 0 and the
 *                      origin is w_0 when w_0 >= W_max); target W(t + RTT_min),
 *                      cnt = w / (target - w) acked packets per +1 segment
 *   TCP-friendly       W_tcp += 3 (1 - β)/(1 + β) per window of acked packets,
 *                      from w_0; cwnd grows at least as fast as W_tcp
 *   loss               W_max = w (1 + β)/2 if w < W_max (fast convergence)
 *                      else w;  ssthresh = max(β w, 2)
 *   slow start         standard; with hystart=1, left early on an ACK train
 *                      longer than RTT_min/2 or an RTT rise of
 *                      clamp(RTT_min/8, 4 ms, 16 ms)
 *
 * The arithmetic lives in cubic_math.h (C (t-K)^3 with t in 1/1024 s as the
 * Linux module scales it, and an exact integer cube root) so host tests can
 * check it against a floating-point model.
 *
 * Differences from the Linux module (net/ipv4/tcp_cubic.c), all but the last two
 * undone by linux_exact=1 (the `linux` profile; cubic_update_jiffies):
 *   - time in usec (tcp_mstamp) instead of jiffies: the epoch start and t
 *     are not rounded to 1/HZ (t is then rounded to 1/1024 s, as in Linux);
 *   - K from an exact ⌊cbrt⌋ (Linux: table lookup + one Newton step, ~0.2 %);
 *     K's argument is (W_max - w_0)·2^40/c rather than (W_max - w_0) times the
 *     pre-truncated 2^40/c;
 *   - cnt is recomputed on every ACK (Linux: at most once per jiffy, and
 *     only every HZ/32 while cwnd is unchanged);
 *   - W_tcp grows by 1 per ⌊w (1+β) / (3 (1-β))⌋ acked packets, exactly
 *     (Linux truncates the factor first: 8(1024+β)/3/(1024-β) >> 3, e.g.
 *     1.875 w instead of 1.890 w packets at β = 717/1024);
 *   - none in HyStart: the ACK-delay cushion reads sk_gso_max_size and the
 *     round restarts in pkts_acked, as in Linux (the BPF selftest uses a
 *     fixed 64 KB and restarts rounds in cong_avoid);
 *   - every constant is a tunable (the HyStart constants too; β and the
 *     thresholds live, spec §18.5);
 *     ack_counting=events adds one packet per ACK instead of the packets it
 *     acknowledged (spec §18.2). Defaults are the [P2]/[P3] configuration
 *     (β = 0.8, HyStart off); the `linux` profile has β = 0.7, HyStart on and
 *     linux_exact on. linux_exact keeps cwnd (for its once-per-jiffy test) in 16
 *     bits, saturating, so it is exact up to 65,534 segments.
 */
#include "cc_common.bpf.h"
#include "cubic_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_cubic_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_cubic_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_cubic_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_cubic_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load; defaults are spec §7 / [P2],
 * [P3]):
 *   - C: K, the epoch's time to the plateau, is computed from C at the epoch start
 *     and kept per flow, while W(t) = C (t - K)^3 + W_max uses C on every ACK, so a
 *     change mid-epoch would give a curve that no longer starts at the epoch's
 *     window (the per-flow state has no room to keep the epoch's own C);
 *   - tcp_friendliness: W_tcp is advanced only while it is on (turned on mid-epoch,
 *     W_tcp would jump by every packet acked since the epoch start);
 *   - hystart, hystart_detect: the HyStart state machine and the per-round state
 *     each detector keeps (ACK train, RTT samples) only while it is selected;
 *   - initial_ssthresh: used at init only;
 *   - ack_counting: the increase counter counts packets or ACK events;
 *   - linux_exact: the epoch's clock (usec or jiffies) is fixed by it. */
const volatile __u32 c_1024 = 410;               /* C, segments/s^3, 1/1024 (Linux 41*10) */
const volatile __u32 tcp_friendliness = 1;       /* bool */
const volatile __u32 hystart = 0;                /* bool (Linux 1) */
const volatile __u32 hystart_detect = 3;         /* 1 = ACK train, 2 = delay, 3 = both */
const volatile __u32 initial_ssthresh = 0;       /* segments (0 = the kernel's) */
const volatile __u32 ack_counting = 0;           /* 0 = packets (ABC), 1 = ACK events */
const volatile __u32 linux_exact = 0;            /* bool: tcp_cubic.c's jiffies and arithmetic */

/* Live tunables (spec §18.5: the backoff and HyStart's thresholds; `cctl set`), read
 * once per callback from the slot in force. */
struct cubic_live {
	__u32 beta_1024;            /* β, multiplier on loss, 1/1024 (Linux 717) */
	__u32 fast_convergence;     /* bool: W_max = w (1 + β)/2 at a loss below W_max */
	__u32 hystart_low_window;   /* segments */
	__u32 hystart_ack_delta_us; /* usec */
	__u32 hystart_delay_min_us; /* usec */
	__u32 hystart_delay_max_us; /* usec */
	__u32 hystart_min_samples;  /* RTT samples per round */
};
CCTL_LIVE_PARAMS(struct cubic_live, {
	.beta_1024 = 819,
	.fast_convergence = 1,
	.hystart_low_window = 16,
	.hystart_ack_delta_us = 2000,
	.hystart_delay_min_us = 4000,
	.hystart_delay_max_us = 16000,
	.hystart_min_samples = 8,
})

extern unsigned long CONFIG_HZ __kconfig;

static __always_inline struct cctl_cubic_ca *cubic_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

static __always_inline void cubic_params_get(struct cubic_params *p, const struct cubic_live *l)
{
	p->beta_fp = l->beta_1024;
	p->c_1024 = c_1024;
	p->fast_convergence = l->fast_convergence;
	p->tcp_friendliness = tcp_friendliness;
}

static __always_inline __u32 cubic_now_us(const struct tcp_sock *tp)
{
	return (__u32)tp->tcp_mstamp;
}

SEC("struct_ops/cubic_init")
void BPF_PROG(cubic_init, struct sock *sk)
{
	struct cctl_cubic_ca *ca = cubic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	cubic_reset(ca);
	if (hystart)
		cubic_hystart_round(ca, cubic_now_us(tp), tp->snd_nxt);
	else if (initial_ssthresh)
		tp->snd_ssthresh = initial_ssthresh;
}

/* After an idle period, move the epoch start on so W(t) resumes where it was. */
SEC("struct_ops/cubic_cwnd_event")
void BPF_PROG(cubic_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	struct cctl_cubic_ca *ca = cubic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	__u32 now_us, start;
	__s32 idle_j;
	__u64 idle_us;

	if (event != CA_EVENT_TX_START || !ca->epoch_start_us)
		return;
	/* lsndtime is in jiffies */
	idle_j = (__s32)((__u32)bpf_jiffies64() - tp->lsndtime);
	if (linux_exact) {
		/* the epoch start is in jiffies too; it may not pass now */
		__u32 now_j = (__u32)bpf_jiffies64();

		if (idle_j > 0) {
			ca->epoch_start_us += (__u32)idle_j;
			if ((__s32)(ca->epoch_start_us - now_j) > 0)
				ca->epoch_start_us = now_j;
		}
		return;
	}
	if (idle_j <= 0 || !CONFIG_HZ)
		return;
	idle_us = (__u64)idle_j * USEC_PER_SEC / CONFIG_HZ;
	now_us = cubic_now_us(tp);
	start = ca->epoch_start_us + (__u32)idle_us;
	if (idle_us > 0x7fffffffull || (__s32)(start - now_us) > 0)
		start = now_us;
	ca->epoch_start_us = start ? start : 1;
}

SEC("struct_ops/cubic_cong_avoid")
void BPF_PROG(cubic_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_cubic_ca *ca = cubic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct cubic_params p;

	acked = cc_slow_start_then(sk, acked, ack_counting);
	if (!acked)
		return;

	cubic_params_get(&p, cctl_live_get());
	if (linux_exact)
		cubic_update_jiffies(ca, &p, tp->snd_cwnd, acked, (__u32)bpf_jiffies64(),
				     (__u32)CONFIG_HZ);
	else
		cubic_update(ca, &p, tp->snd_cwnd, acked, cubic_now_us(tp));
	tcp_cong_avoid_ai(tp, ca->cnt, acked);
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/cubic_ssthresh")
__u32 BPF_PROG(cubic_ssthresh, struct sock *sk)
{
	struct cctl_cubic_ca *ca = cubic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct cubic_params p;

	cubic_params_get(&p, cctl_live_get());
	cc_meas_backoff(&ca->m, p.beta_fp);
	return cubic_on_reduction(ca, &p, tp->snd_cwnd);
}

SEC("struct_ops/cubic_set_state")
void BPF_PROG(cubic_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_cubic_ca *ca = cubic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	switch (new_state) {
	case TCP_CA_Loss:
		/* a timeout forgets W_max and restarts HyStart (spec §7 "Timeout") */
		cubic_reset(ca);
		cubic_hystart_round(ca, cubic_now_us(tp), tp->snd_nxt);
		cc_meas_cong_event(&ca->m, tp);
		break;
	case TCP_CA_CWR:
	case TCP_CA_Recovery:
		cc_meas_cong_event(&ca->m, tp);
		break;
	}
}

/* HyStart's allowance for TSO/GRO batching when paced: 4 GSO segments' worth
 * of time at the pacing rate, at most 1 ms (as Linux). */
static __always_inline __u32 cubic_hystart_ack_delay_us(const struct sock *sk)
{
	__u64 rate = sk->sk_pacing_rate;
	__u64 d;

	if (!rate)
		return 0;
	d = (__u64)sk->sk_gso_max_size * 4 * USEC_PER_SEC / rate;
	return d < 1000 ? (__u32)d : 1000;
}

SEC("struct_ops/cubic_pkts_acked")
void BPF_PROG(cubic_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_cubic_ca *ca = cubic_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	const struct cubic_live *l;
	struct cubic_hystart_params h;
	struct cubic_hystart_ack a;
	__u32 now_us = cubic_now_us(tp);
	__u32 delay;

	if (sample->rtt_us < 0)
		return;
	cc_meas_rtt(&ca->m, sample->rtt_us, cc_ca_state(sk), 0);

	/* RTTs right after a reduction still carry the old queue: 1 s */
	if (linux_exact) {
		if (ca->epoch_start_us &&
		    (__s32)((__u32)bpf_jiffies64() - ca->epoch_start_us) < (__s32)CONFIG_HZ)
			return;
	} else if (ca->epoch_start_us &&
		   (__u32)(now_us - ca->epoch_start_us) < CUBIC_DELAY_FRESH_US) {
		return;
	}

	delay = sample->rtt_us ? sample->rtt_us : 1;
	if (!ca->delay_min_us || delay < ca->delay_min_us)
		ca->delay_min_us = delay;

	if (!hystart || ca->found || !cc_in_slow_start(tp))
		return;
	l = cctl_live_get();
	h.detect = hystart_detect;
	h.low_window = l->hystart_low_window;
	h.ack_delta_us = l->hystart_ack_delta_us;
	h.delay_min_us = l->hystart_delay_min_us;
	h.delay_max_us = l->hystart_delay_max_us;
	h.min_samples = l->hystart_min_samples;
	a.delay_us = delay;
	a.now_us = now_us;
	a.snd_una = tp->snd_una;
	a.snd_nxt = tp->snd_nxt;
	a.ack_delay_us = cubic_hystart_ack_delay_us(sk);
	a.paced = sk->sk_pacing_status != SK_PACING_NONE;
	if (cubic_hystart_update(ca, &h, tp->snd_cwnd, &a))
		tp->snd_ssthresh = tp->snd_cwnd;
}

SEC("struct_ops/cubic_undo_cwnd")
__u32 BPF_PROG(cubic_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops cubic = {
	.init = (void *)cubic_init,
	.ssthresh = (void *)cubic_ssthresh,
	.cong_avoid = (void *)cubic_cong_avoid,
	.set_state = (void *)cubic_set_state,
	.undo_cwnd = (void *)cubic_undo_cwnd,
	.cwnd_event = (void *)cubic_cwnd_event,
	.pkts_acked = (void *)cubic_pkts_acked,
	.name = "bpf_cubic",
};
