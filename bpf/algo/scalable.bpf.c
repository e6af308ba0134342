// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* scalable.bpf.c - Scalable TCP as a BPF struct_ops tcp_congestion_ops, registered
 * as "bpf_scalable".
 *
 * Scalable TCP: Kelly, "Scalable TCP: improving performance in highspeed wide area
 * networks", CCR 2003; as evaluated in [P0] Li, Leith, Shorten, IEEE/ACM ToN 2007,
 * §IV-A, Table II. Spec: shared/spec/algorithms.md §3.
 *
 *   w <= Low_Window   legacy (Reno) mode: w += 1/w per acked packet
 *   w >  Low_Window   scalable mode:      w += a per acked packet (a = 0.01)
 *   loss / ECN / RTO  w <- β w, ssthresh = max(w - ⌊w (1 - β)⌋, 2) (β = 0.875)
 *   slow start        standard (spec §3: [GAP], Linux)
 *
 * The mode is decided on every congestion-avoidance ACK from the cwnd before the
 * increase, and kept in the per-flow state with a count of switches, so the
 * collector logs which rule the flow is under ([P0]'s backward-compatibility
 * analysis, spec §3 "Mode switch").
 *
 * Differences from the Linux module (net/ipv4/tcp_scalable.c):
 *   - Low_Window is explicit and tunable (default 16, [P0] Table II); Linux has
 *     min(cwnd, 100), i.e. Low_Window = 100 and a = 1/100, which the `linux`
 *     profile (low_window_pkts=100) reproduces exactly: below and at 100 both
 *     use tcp_cong_avoid_ai(tp, cwnd), above it tcp_cong_avoid_ai(tp, 100);
 *   - a and β are tunables (Linux: AI_CNT = 100, cwnd >> 3); when 1/a is not an
 *     integer the additive-increase counter runs in 1/10000 packets and is reset
 *     (less than one segment of credit lost) when the mode, or a live change of
 *     a, changes its unit;
 *   - ack_counting=events adds one ACK's worth per call instead of the packets
 *     it acknowledged (spec §18.2).
 */
#include "cc_common.bpf.h"
#include "scalable_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_scalable_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_scalable_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_scalable_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_scalable_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load): modes that per-flow state is
 * built for (the increase counter counts packets or ACK events). */
const volatile __u32 ack_counting = 0;       /* 0 = packets (ABC), 1 = ACK events */

/* Live tunables (spec §18.5: a threshold, a gain and a backoff factor; `cctl set`),
 * read once per callback from the slot in force; defaults are [P0] Table II / spec §3.
 * The mode is recomputed from Low_Window on every ACK, and a change of a that
 * changes the unit of the increase counter resets it as a mode switch does. */
struct scalable_live {
	__u32 low_window_pkts;  /* Low_Window, segments */
	__u32 a_per_10k;        /* a, 1/10000 segment per acked packet (0.01) */
	__u32 beta_per_mille;   /* β, multiplier on loss, 1/1000 */
};
CCTL_LIVE_PARAMS(struct scalable_live, {
	.low_window_pkts = 16,
	.a_per_10k = 100,
	.beta_per_mille = 875,
})

static __always_inline struct cctl_scalable_ca *scalable_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

SEC("struct_ops/scalable_init")
void BPF_PROG(scalable_init, struct sock *sk)
{
	struct cctl_scalable_ca *ca = scalable_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	const struct scalable_live *l = cctl_live_get();

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	ca->mode = scalable_mode(tp->snd_cwnd, l->low_window_pkts);
	ca->incr_ppm = scalable_incr_ppm(ca->mode, tp->snd_cwnd, l->a_per_10k);
}

SEC("struct_ops/scalable_pkts_acked")
void BPF_PROG(scalable_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	if (sample->rtt_us > 0)
		cc_meas_rtt(&scalable_ca(sk)->m, sample->rtt_us, cc_ca_state(sk), 0);
}

SEC("struct_ops/scalable_cong_avoid")
void BPF_PROG(scalable_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_scalable_ca *ca = scalable_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	const struct scalable_live *l;
	struct scalable_params p;
	struct scalable_ai ai;
	__u8 mode;

	acked = cc_slow_start_then(sk, acked, ack_counting);
	if (!acked)
		return;

	l = cctl_live_get();
	p.a_per_10k = l->a_per_10k;
	mode = scalable_mode(tp->snd_cwnd, l->low_window_pkts);
	/* The counter runs in packets in legacy mode and when 1/a is whole, else in
	 * 1/10000 packets: reset it (less than one segment of credit) when its unit
	 * changes, with the mode or with a live change of a (the a of the last
	 * scalable-mode ACK is incr_ppm / 100). */
	if ((ca->mode == SCALABLE_MODE_LEGACY ||
	     scalable_counts_packets(ca->incr_ppm / 100)) !=
	    (mode == SCALABLE_MODE_LEGACY || scalable_counts_packets(p.a_per_10k)))
		tp->snd_cwnd_cnt = 0;
	if (mode != ca->mode) {
		ca->switches++;
		ca->mode = mode;
	}
	ca->incr_ppm = scalable_incr_ppm(mode, tp->snd_cwnd, p.a_per_10k);
	scalable_ai_args(mode, tp->snd_cwnd, acked, &p, &ai);
	tcp_cong_avoid_ai(tp, ai.w, ai.n);
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/scalable_ssthresh")
__u32 BPF_PROG(scalable_ssthresh, struct sock *sk)
{
	struct cctl_scalable_ca *ca = scalable_ca(sk);
	__u32 beta_per_mille = cctl_live_get()->beta_per_mille;

	cc_meas_backoff(&ca->m, (beta_per_mille << CCTL_FP_SHIFT) / SCALABLE_BETA_ONE);
	return scalable_ssthresh_segs(cc_tcp_sk(sk)->snd_cwnd, beta_per_mille);
}

SEC("struct_ops/scalable_set_state")
void BPF_PROG(scalable_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_CWR || new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss)
		cc_meas_cong_event(&scalable_ca(sk)->m, cc_tcp_sk(sk));
}

SEC("struct_ops/scalable_undo_cwnd")
__u32 BPF_PROG(scalable_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops scalable = {
	.init = (void *)scalable_init,
	.ssthresh = (void *)scalable_ssthresh,
	.cong_avoid = (void *)scalable_cong_avoid,
	.set_state = (void *)scalable_set_state,
	.undo_cwnd = (void *)scalable_undo_cwnd,
	.pkts_acked = (void *)scalable_pkts_acked,
	.name = "bpf_scalable",
};
