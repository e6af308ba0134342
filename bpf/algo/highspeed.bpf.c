// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* highspeed.bpf.c - HighSpeed TCP as a BPF struct_ops tcp_congestion_ops,
 * registered as "bpf_highspeed".
 *
 * HighSpeed TCP: Floyd, RFC 3649 (2003); as evaluated in [P0] Li, Leith, Shorten,
 * IEEE/ACM ToN 2007, §IV-B, Table II (W_L = 31). Spec: shared/spec/algorithms.md §4.
 *
 *   ACK (w > W_L)     w += a(w)/w per acked packet
 *   loss / ECN / RTO  w <- (1 - b(w)) w
 *   w <= W_L          Reno: a = 1, b = 0.5
 *   a(w), b(w)        hstcp_mode=table: RFC 3649 Appendix B rows, nearest-entry
 *                     lookup (a = row + 1), as Linux;
 *                     hstcp_mode=interpolate: RFC 3649's formulas
 *                       b(w) = (b_H - 0.5) log(w/W_L)/log(W_H/W_L) + 0.5
 *                       p(w) = exp(log(w/W_L)/log(W_H/W_L) · log(P_H/P_L) + log P_L)
 *                       a(w) = w² p(w) 2 b(w) / (2 - b(w)),   P_L = 1.5/W_L²
 *                     in fixed point (log2/exp2 << 16), the refinement [P0]
 *                     suggests after its Fig. 7 (granularity of the table).
 *   slow start        standard; optionally RFC 3742 limited slow start
 *                     (max_ssthresh_pkts, which RFC 3649 recommends; 0 = off).
 *
 * The table's parameters are RFC 3649's (W_L 38, W_H 83000, P_H 1e-7, b_H 0.1):
 * table mode refuses other values (loader check); [P0]'s W_L = 31 needs
 * interpolate mode, which is therefore the default.
 *
 * Differences from the Linux module (net/ipv4/tcp_highspeed.c):
 *   - a(w), b(w) from the formulas (default) besides Linux's table; W_L, W_H,
 *     P_H, b_H are tunables;
 *   - by default b(w) is that of the cwnd at the loss; Linux uses the row of
 *     the last congestion-avoidance ACK, which after slow start is still row 0
 *     (b = 0.5): linux_md_index=1 does the same;
 *   - ack_counting=packets (default) adds a(w)/w per acked packet; Linux adds
 *     per ACK event (ack_counting=events, the `linux` profile);
 *   - slow start hands leftover acked packets to congestion avoidance;
 *   - the fractional counter is in 1/1024 segments, so cwnd stops growing at
 *     2^22 - 1 segments (Linux clamps at 2^32/128);
 *   - the `linux` profile (table mode, W_L 38, event counting,
 *     linux_md_index=1) reproduces the module's arithmetic exactly.
 */
#include "cc_common.bpf.h"
#include "highspeed_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_highspeed_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_highspeed_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_highspeed_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_highspeed_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load; defaults are [P0] Table II /
 * RFC 3649): modes that per-flow state is built for (a(w), b(w) from the table or the
 * formulas, whose results are cached per flow; b at a loss from the row of the last
 * CA ACK, a Linux-compatibility rule; the increase counter counts packets or ACK
 * events). */
const volatile __u32 hstcp_mode = HSTCP_MODE_INTERPOLATE; /* 0 = table, 1 = interpolate */
const volatile __u32 linux_md_index = 0;             /* bool: b at a loss from the last CA row */
const volatile __u32 ack_counting = 0;               /* 0 = packets (ABC), 1 = ACK events */

/* Live tunables (spec §18.5: the response function's bounds and the limited slow
 * start threshold; `cctl set`), read once per callback from the slot in force. The
 * a(w), b(w) cached per flow follow a change at the flow's next cwnd change. */
struct highspeed_live {
	__u32 low_window_pkts;          /* W_L, segments ([P0]; RFC 38) */
	__u32 high_window_pkts;         /* W_H, segments */
	__u32 high_p_ppb;               /* P_H, per 10^9 (1e-7) */
	__u32 high_decrease_per_mille;  /* b_H, 1/1000 (0.1) */
	__u32 max_ssthresh_pkts;        /* RFC 3742 max_ssthresh, segments; 0 = off */
};
CCTL_LIVE_PARAMS(struct highspeed_live, {
	.low_window_pkts = 31,
	.high_window_pkts = 83000,
	.high_p_ppb = 100,
	.high_decrease_per_mille = 100,
	.max_ssthresh_pkts = 0,
})

static __always_inline struct cctl_highspeed_ca *hstcp_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

/* Brings the table row, a(w) and b(w) up to date for this cwnd. */
static __always_inline void hstcp_update(struct cctl_highspeed_ca *ca, __u32 cwnd,
					 const struct highspeed_live *l)
{
	__u32 a, b;

	ca->idx = hstcp_table_index(cwnd);
	if (ca->a_cwnd == cwnd)
		return;
	if (hstcp_mode == HSTCP_MODE_TABLE) {
		hstcp_table_ab(ca->idx, &a, &b);
	} else {
		struct highspeed_params p;

		p.low_window = l->low_window_pkts;
		p.high_window = l->high_window_pkts;
		p.high_p_ppb = l->high_p_ppb;
		p.high_decrease_per_mille = l->high_decrease_per_mille;
		hstcp_formula_ab(cwnd, &p, &a, &b);
	}
	ca->a_q16 = a;
	ca->b_q16 = b;
	ca->a_cwnd = cwnd;
}

SEC("struct_ops/hstcp_init")
void BPF_PROG(hstcp_init, struct sock *sk)
{
	struct cctl_highspeed_ca *ca = hstcp_ca(sk);

	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, cc_tcp_sk(sk));
	ca->a_q16 = HSTCP_ONE_Q16;
	ca->b_q16 = HSTCP_HALF_Q16;
}

SEC("struct_ops/hstcp_pkts_acked")
void BPF_PROG(hstcp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	if (sample->rtt_us > 0)
		cc_meas_rtt(&hstcp_ca(sk)->m, sample->rtt_us, cc_ca_state(sk), 0);
}

/* Applies w += a/w per counted packet to the socket. */
static __always_inline void hstcp_grow(struct tcp_sock *tp, __u32 n, __u32 a_q16)
{
	__u32 cwnd = tp->snd_cwnd, cnt = tp->snd_cwnd_cnt;

	hstcp_ai_step(&cwnd, &cnt, n, a_q16, tp->snd_cwnd_clamp);
	tp->snd_cwnd = cwnd;
	tp->snd_cwnd_cnt = cnt;
}

SEC("struct_ops/hstcp_cong_avoid")
void BPF_PROG(hstcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_highspeed_ca *ca = hstcp_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	const struct highspeed_live *l;

	if (!cc_cwnd_limited(sk))
		return;

	l = cctl_live_get();
	if (cc_in_slow_start(tp)) {
		__u32 max_ssthresh = l->max_ssthresh_pkts;

		if (max_ssthresh && tp->snd_cwnd > max_ssthresh) {
			hstcp_grow(tp, ack_counting ? 1 : acked,
				   hstcp_limited_ss_a_q16(tp->snd_cwnd, max_ssthresh));
			return;
		}
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	if (ack_counting)
		acked = 1;

	hstcp_update(ca, tp->snd_cwnd, l);
	hstcp_grow(tp, acked, ca->a_q16);
}

/* Called when a reduction starts (Recovery, CWR or RTO), before set_state. */
SEC("struct_ops/hstcp_ssthresh")
__u32 BPF_PROG(hstcp_ssthresh, struct sock *sk)
{
	struct cctl_highspeed_ca *ca = hstcp_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (!linux_md_index)
		hstcp_update(ca, tp->snd_cwnd, cctl_live_get());
	cc_meas_backoff(&ca->m, (HSTCP_ONE_Q16 - ca->b_q16) >> (HSTCP_Q16 - CCTL_FP_SHIFT));
	return hstcp_ssthresh_segs(tp->snd_cwnd, ca->b_q16);
}

SEC("struct_ops/hstcp_set_state")
void BPF_PROG(hstcp_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_CWR || new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss)
		cc_meas_cong_event(&hstcp_ca(sk)->m, cc_tcp_sk(sk));
}

SEC("struct_ops/hstcp_undo_cwnd")
__u32 BPF_PROG(hstcp_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops highspeed = {
	.init = (void *)hstcp_init,
	.ssthresh = (void *)hstcp_ssthresh,
	.cong_avoid = (void *)hstcp_cong_avoid,
	.set_state = (void *)hstcp_set_state,
	.undo_cwnd = (void *)hstcp_undo_cwnd,
	.pkts_acked = (void *)hstcp_pkts_acked,
	.name = "bpf_highspeed",
};
