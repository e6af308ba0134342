// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* hybla.bpf.c - TCP Hybla as a BPF struct_ops tcp_congestion_ops, registered as "bpf_hybla".
 *
 * TCP Hybla: Caini & Firrincieli, "TCP Hybla: a TCP enhancement for heterogeneous
 * networks", International Journal of Satellite Communications and Networking
 * 22(5), 2004, §3 (the normalised window update: ρ = RTT / RTT_0; slow start
 * W += 2^ρ − 1, congestion avoidance W += ρ²/W per ACK, so that the window
 * grows per unit of time like that of a flow with RTT_0). Spec:
 * shared/spec/algorithms.md §19.1.
 *
 *   ρ = max(srtt / RTT_0, 1)       srtt: the smallest so far (ρ recomputed on
 *                                  every CA call, RTT_0 being live)
 *   slow start   w += 2^ρ − 1      per acked packet, up to ssthresh
 *   CA           w += ρ² / w       per acked packet
 *   loss / RTO   Reno: ssthresh = max(w/2, 2); undo: Reno
 *   outside Open state: Reno.  ρ = 1 (srtt <= RTT_0) is exactly Reno.
 *
 * The rules and their fixed point are in hybla_math.h (ρ in 1/1024, the slow-start
 * fraction in 1/65536 segment, the CA increase exact).
 *
 * Differences from the Linux module (net/ipv4/tcp_hybla.c):
 *   - Linux keeps ρ in 1/8 (rounded down), takes 2^frac from an 8-entry table in
 *     1/128 and adds increments rounded down to 1/128 segment, so its CA growth
 *     is ⌊128 ρ²/w⌋/128 per ACK: with ρ = 1 and w = 100 that is 0.78 of Reno's,
 *     and above w = 128 ρ² it falls back to one segment per w ACKs. Here ρ has
 *     10 fraction bits and the CA increase is exact (ρ = 1 is bit-exact Reno);
 *   - Linux adds its increase once per cong_avoid call (ACK events, ignoring
 *     `acked`); here ack_counting = 0 (default, spec §18.2) weights it by the
 *     acked packets;
 *   - Linux cuts slow start at ssthresh and drops the rest of that ACK; here the
 *     ACKs beyond ssthresh continue in congestion avoidance (as tcp_slow_start);
 *   - Linux sets cwnd = ⌊ρ⌋ at init (the initial window becomes ρ, 1 on short
 *     paths); here the kernel's initial window is kept;
 *   - Linux never resets its carried fraction; here a window reduction (CWR,
 *     Recovery, Loss) drops it, as the kernel drops Reno's snd_cwnd_cnt;
 *   - Linux sets snd_cwnd_clamp = 65535 at init; a BPF congestion control cannot
 *     write snd_cwnd_clamp, so the window is capped by the socket's own clamp
 *     (normally far above 65535);
 *   - an srtt of 0 at init (no RTT sample yet) leaves Linux's minimum at 0, so
 *     ρ is never recomputed; here 0 means "none yet" and the first srtt sets ρ;
 *   - ρ saturates at 4096 (the 2^ρ exponent's integer part at 16, as Linux);
 *     Linux's ρ² << 7 overflows u32 above ρ ≈ 5790.
 * The `linux` profile (linux_compat = 1, ack_counting = 1) reproduces the
 * module's arithmetic: ρ in 1/8, the table, 1/128 increments, the snd_cwnd_cnt
 * fallback, slow start cut at ssthresh, cwnd = ⌊ρ⌋ at init and the carried
 * fraction kept over reductions; it keeps the last three differences above
 * (clamp, srtt 0, ρ cap).
 */
#include "cc_common.bpf.h"
#include "hybla_math.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_hybla_ca) <= CCTL_CA_PRIV_BYTES &&
		       sizeof(struct cctl_hybla_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_hybla_ca does not fit icsk_ca_priv");

/* Zeroed instance so that the skeleton carries the layout (see cctl.h). */
struct cctl_hybla_ca cctl_ca_layout = {};

/* Load-time tunables (set by the loader before load; defaults: spec §19.1): modes
 * that per-flow state is built for (linux_compat: Linux's carried 1/128 fraction and
 * snd_cwnd_cnt fallback, kept over reductions, and the initial window ⌊ρ⌋ at init;
 * the increase counter counts packets or ACK events). */
const volatile __u32 linux_compat = 0;   /* bool: net/ipv4/tcp_hybla.c's arithmetic */
const volatile __u32 ack_counting = 0;   /* 0 = packets (ABC), 1 = ACK events */

/* Live tunables (spec §18.5: the reference RTT; `cctl set`), read once per callback
 * from the slot in force. ρ is recomputed from the smallest srtt on every
 * congestion-avoidance call, so a change reaches running flows at their next ACK. */
struct hybla_live {
	__u32 rtt0_ms;  /* RTT_0, ms (1..=1000) */
};
CCTL_LIVE_PARAMS(struct hybla_live, {
	.rtt0_ms = 25,
})

#define HYBLA_BETA_FP (CCTL_FP_ONE / 2) /* Reno's backoff, for the shared layer */

static __always_inline struct cctl_hybla_ca *hybla_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

static __always_inline void hybla_params_get(struct hybla_params *p, const struct hybla_live *l)
{
	p->rtt0_ms = l->rtt0_ms;
	p->linux_compat = linux_compat;
}

/* ρ from the smallest srtt of the kernel's so far (none yet: ρ stays as it is),
 * with the RTT_0 in force: recomputed on every call, not only at a new minimum, so
 * that a live change of RTT_0 applies to running flows too. */
static __always_inline void hybla_update_rho(struct cctl_hybla_ca *ca, const struct tcp_sock *tp,
					     const struct hybla_params *p)
{
	__u32 srtt = tp->srtt_us;

	if (srtt && (!ca->min_srtt_x8 || srtt < ca->min_srtt_x8))
		ca->min_srtt_x8 = srtt;
	if (ca->min_srtt_x8)
		ca->rho_fp = hybla_rho_fp(ca->min_srtt_x8, p);
}

SEC("struct_ops/hybla_init")
void BPF_PROG(hybla_init, struct sock *sk)
{
	struct cctl_hybla_ca *ca = hybla_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct hybla_params p;

	hybla_params_get(&p, cctl_live_get());
	__builtin_memset(ca, 0, sizeof(*ca));
	cc_meas_init(&ca->m, tp);
	ca->hybla_en = 1;
	ca->rho_fp = HYBLA_RHO_ONE;
	hybla_update_rho(ca, tp, &p);
	if (linux_compat)
		tp->snd_cwnd = ca->rho_fp >> HYBLA_RHO_SHIFT; /* Linux: initial window ⌊ρ⌋ */
}

SEC("struct_ops/hybla_pkts_acked")
void BPF_PROG(hybla_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	if (sample->rtt_us > 0)
		cc_meas_rtt(&hybla_ca(sk)->m, sample->rtt_us, cc_ca_state(sk), 0);
}

SEC("struct_ops/hybla_cong_avoid")
void BPF_PROG(hybla_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct cctl_hybla_ca *ca = hybla_ca(sk);
	struct tcp_sock *tp = cc_tcp_sk(sk);
	struct hybla_params p;
	struct hybla_step s;

	hybla_params_get(&p, cctl_live_get());
	hybla_update_rho(ca, tp, &p);
	if (!cc_cwnd_limited(sk))
		return;
	if (!ca->hybla_en) {
		/* outside Open, Reno with the packets acked, as tcp_hybla.c: ack_counting
		 * is Hybla's own per-ACK rule, not Reno's (found by conform delayed-acks
		 * at 100 ms: Disorder with 2-segment ACKs grew 1 instead of 2) */
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (ack_counting)
		acked = 1;

	s.credit = ca->ca_credit;
	s.cwnd = tp->snd_cwnd;
	s.ssthresh = tp->snd_ssthresh;
	s.cwnd_cnt = tp->snd_cwnd_cnt;
	s.frac_q16 = ca->frac_q16;
	s.acked = acked;
	s.carry_q16 = 0;
	hybla_step(&s, ca->rho_fp, &p);

	ca->ca_credit = s.credit;
	ca->frac_q16 = s.frac_q16;
	ca->carry_q16 = s.carry_q16;
	if (linux_compat)
		tp->snd_cwnd_cnt = s.cwnd_cnt;
	tp->snd_cwnd = s.cwnd < tp->snd_cwnd_clamp ? s.cwnd : tp->snd_cwnd_clamp;
}

SEC("struct_ops/hybla_ssthresh")
__u32 BPF_PROG(hybla_ssthresh, struct sock *sk)
{
	cc_meas_backoff(&hybla_ca(sk)->m, HYBLA_BETA_FP);
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/hybla_set_state")
void BPF_PROG(hybla_set_state, struct sock *sk, __u8 new_state)
{
	struct cctl_hybla_ca *ca = hybla_ca(sk);

	ca->hybla_en = new_state == TCP_CA_Open;
	if (new_state == TCP_CA_CWR || new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss) {
		cc_meas_cong_event(&ca->m, cc_tcp_sk(sk));
		if (!linux_compat) {
			/* the window shrinks: drop the increase carried below one segment */
			ca->ca_credit = 0;
			ca->frac_q16 = 0;
			ca->carry_q16 = 0;
		}
	}
}

SEC("struct_ops/hybla_undo_cwnd")
__u32 BPF_PROG(hybla_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops hybla = {
	.init = (void *)hybla_init,
	.ssthresh = (void *)hybla_ssthresh,
	.cong_avoid = (void *)hybla_cong_avoid,
	.set_state = (void *)hybla_set_state,
	.undo_cwnd = (void *)hybla_undo_cwnd,
	.pkts_acked = (void *)hybla_pkts_acked,
	.name = "bpf_hybla",
};
