// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* westwood.bpf.c - TCP Westwood+ as a BPF struct_ops tcp_congestion_ops,
 * registered as "bpf_westwood".
 *
 * Westwood+: Mascolo, Casetti, Gerla, Sanadidi, Wang, "TCP Westwood: bandwidth
 * estimation for enhanced transport over wireless links", Mobicom 2001; Grieco &
 * Mascolo, "Performance evaluation and comparison of Westwood+, New Reno and
 * Vegas TCP congestion control", CCR 2004 (the per-RTT sampling of "+").
 * Referred to by [P3] §III (YeAH's loss rule) and [P1]. Spec:
 * shared/spec/algorithms.md §14.
 *
 *   bandwidth sample   bytes acked over an interval longer than max(RTT, 50 ms)
 *   filter             bw_ns = (7 bw_ns + sample)/8,  BWE = (7 BWE + bw_ns)/8
 *   ACK                Reno
 *   loss               ssthresh = max(BWE · RTT_min / MSS, 2); cwnd = ssthresh when
 *                      the CWR/Recovery phase completes
 *   timeout            ssthresh = max(BWE · RTT_min / MSS, 2), cwnd = 1
 *
 * The estimator lives in westwood_math.h so that host tests can drive it like
 * the kernel does and check it against a floating-point model.
 *
 * Differences from the Linux module (net/ipv4/tcp_westwood.c):
 *   - time in usec (tcp_mstamp) and the estimate in bytes/s, not jiffies and
 *     bytes/jiffy (Linux's RTT and RTT_min are rounded to a jiffy);
 *   - by default ssthresh() itself returns BWE · RTT_min / MSS, as the spec's
 *     loss rule says, so PRR steers towards it; Linux returns Reno's cwnd/2 and
 *     only at the end of recovery sets cwnd = ssthresh = BWE · RTT_min / MSS.
 *     ssthresh_at_loss=0 (the `linux` profile) does what Linux does;
 *   - the 50 ms floor and the filter gain are load-time tunables;
 *   - ack_counting=events grows the Reno window by one packet per ACK.
 *   - linux_exact=1 (in the `linux` profile) takes tcp_westwood.c's clock and
 *     arithmetic instead (westwood_linux_* in westwood_math.h): RTT samples,
 *     RTT_min and the sample interval in jiffies, the estimate in bytes per
 *     jiffy with 32-bit arithmetic; win_min_ms and filter_shift keep their
 *     defaults (Linux's HZ/20 and 7/8) there.
 * As Linux: the first sample fills both filter stages, dupACKs are credited one
 * MSS each, and after a timeout RTT_min restarts from the next RTT sample.
 */
#include "cc_common.bpf.h"
#include "westwood_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_westwood_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_westwood_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_westwood_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_westwood_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load; defaults are spec §14 = Linux's
 * constants): the rule set of a reduction (spec: ssthresh from the estimate at the
 * loss; Linux: Reno's at the loss, re-evaluated when CWR completes), which spans two
 * callbacks, so a change between them would apply neither rule; the increase counter
 * counts packets or ACK events. */
const volatile __u32 ssthresh_at_loss = 1;  /* 1: ssthresh() = BWE·RTT_min/MSS (spec); 0: Linux */
const volatile __u32 ack_counting = 0;      /* 0 = packets (ABC), 1 = ACK events */
const volatile __u32 linux_exact = 0;       /* bool: tcp_westwood.c's jiffies and arithmetic */

extern unsigned long CONFIG_HZ __kconfig;

/* Live tunables (spec §18.5: the sample interval's bound and the filter's gain;
 * `cctl set`), read once per callback from the slot in force. */
struct westwood_live {
	__u32 win_min_ms;    /* shortest bandwidth sample interval, ms */
	__u32 filter_shift;  /* filter gain 2^-shift (3: 7/8 old + 1/8 new) */
};
CCTL_LIVE_PARAMS(struct westwood_live, {
	.win_min_ms = 50,
	.filter_shift = 3,
})

static __always_inline struct cctl_westwood_ca *westwood_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

static __always_inline __u32 westwood_limit(const struct cctl_westwood_ca *ca,
					    const struct tcp_sock *tp)
{
	if (linux_exact)
		return westwood_linux_limit(ca, tp->mss_cache, (__u32)CONFIG_HZ);
	return westwood_bw_rttmin(ca->bw_Bps, ca->rtt_min_us, tp->mss_cache);
}

SEC("struct_ops/westwood_init")
void BPF_PROG(westwood_init, struct sock *sk)
{
	struct cctl_westwood_ca *ca = westwood_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	if (linux_exact) {
		westwood_linux_init(ca, (__u32)bpf_jiffies64(), tp->snd_una);
		return;
	}
	ca->win_start_us = (__u32)tp->tcp_mstamp;
	ca->snd_una = tp->snd_una;
	ca->first_ack = 1;
	ca->reset_rtt_min = 1;
}

SEC("struct_ops/westwood_pkts_acked")
void BPF_PROG(westwood_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cctl_westwood_ca *ca = westwood_ca(sk);

	if (sample->rtt_us > 0) {
		ca->rtt_us = linux_exact ? westwood_linux_rtt_us(sample->rtt_us, (__u32)CONFIG_HZ)
					 : (__u32)sample->rtt_us;
		cc_meas_rtt(&ca->m, sample->rtt_us, cc_ca_state(sk), 0);
	}
}

SEC("struct_ops/westwood_in_ack_event")
void BPF_PROG(westwood_in_ack_event, struct sock *sk, __u32 flags)
{
	struct cctl_westwood_ca *ca = westwood_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	const struct westwood_live *l;
	struct westwood_ack_info a;
	struct westwood_params p;

	if (linux_exact) {
		westwood_linux_ack(ca, (__u32)bpf_jiffies64(), tp->snd_una, tp->mss_cache,
				   flags & CA_ACK_SLOWPATH, (__u32)CONFIG_HZ);
		return;
	}
	a.now_us = (__u32)tp->tcp_mstamp;
	a.snd_una = tp->snd_una;
	a.mss = tp->mss_cache;
	a.slowpath = flags & CA_ACK_SLOWPATH;
	l = cctl_live_get();
	p.win_min_us = l->win_min_ms * 1000;
	p.shift = l->filter_shift;
	westwood_ack(ca, &a, &p);
}

SEC("struct_ops/westwood_cong_avoid")
void BPF_PROG(westwood_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, ack_counting ? 1 : acked);
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/westwood_ssthresh")
__u32 BPF_PROG(westwood_ssthresh, struct sock *sk)
{
	struct cctl_westwood_ca *ca = westwood_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	__u32 s = ssthresh_at_loss ? westwood_limit(ca, tp) : tcp_reno_ssthresh(sk);
	__u64 beta = tp->snd_cwnd ? ((__u64)s << CCTL_FP_SHIFT) / tp->snd_cwnd : CCTL_FP_ONE;

	/* the shared layer records the multiplier s / cwnd, << 10 (may exceed 1) */
	cc_meas_backoff(&ca->m, beta > 0xffff ? 0xffff : (__u32)beta);
	return s;
}

SEC("struct_ops/westwood_cwnd_event")
void BPF_PROG(westwood_cwnd_event, struct sock *sk, enum tcp_ca_event ev)
{
	struct cctl_westwood_ca *ca = westwood_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	switch (ev) {
	case CA_EVENT_COMPLETE_CWR:
		/* end of CWR/Recovery: cwnd = ssthresh (Linux re-evaluates it here) */
		if (!ssthresh_at_loss)
			tp->snd_ssthresh = westwood_limit(ca, tp);
		if (tp->snd_ssthresh < CCTL_INFINITE_SSTHRESH)
			tp->snd_cwnd = tp->snd_ssthresh;
		break;
	case CA_EVENT_LOSS:
		/* timeout: ssthresh from the estimate; RTT_min restarts */
		tp->snd_ssthresh = westwood_limit(ca, tp);
		ca->reset_rtt_min = 1;
		break;
	default:
		break;
	}
}

SEC("struct_ops/westwood_set_state")
void BPF_PROG(westwood_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_westwood_ca *ca = westwood_ca(sk);

	switch (new_state) {
	case TCP_CA_CWR:
	case TCP_CA_Recovery:
	case TCP_CA_Loss:
		cc_meas_cong_event(&ca->m, cc_tcp_sk(sk));
		break;
	}
}

SEC("struct_ops/westwood_undo_cwnd")
__u32 BPF_PROG(westwood_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops westwood = {
	.init = (void *)westwood_init,
	.ssthresh = (void *)westwood_ssthresh,
	.cong_avoid = (void *)westwood_cong_avoid,
	.set_state = (void *)westwood_set_state,
	.cwnd_event = (void *)westwood_cwnd_event,
	.in_ack_event = (void *)westwood_in_ack_event,
	.undo_cwnd = (void *)westwood_undo_cwnd,
	.pkts_acked = (void *)westwood_pkts_acked,
	.name = "bpf_westwood",
};
