/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* cc_common.bpf.h - the per-flow measurement layer every cctl algorithm shares,
 * plus the kfuncs and tcp_sock accessors a BPF tcp_congestion_ops needs.
 *
 * The layer (struct cctl_meas, declared in cctl.h) sits at the start of each
 * algorithm's icsk_ca_priv and tracks, per flow:
 *   - Tmin / Tmax: minimum and maximum RTT sample (usec),
 *   - a smoothed RTT (usec, EWMA with gain 1/8, like RFC 6298's SRTT),
 *   - the time of the last congestion event (usec, tcp_mstamp clock), so that
 *     Δ = now - cong_us ([P0] §IV-C, H-TCP),
 *   - the throughput of the last complete congestion epoch
 *     (bytes acked during the epoch / epoch duration, bytes/s),
 *   - a count of window reductions and the β used at the last one.
 * The collector (trace.bpf.c) reads it out of icsk_ca_priv for any of our flows.
 */
#ifndef CC_COMMON_BPF_H
#define CC_COMMON_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "cctl.h"

#define CCTL_INFINITE_SSTHRESH 0x7fffffffu /* segments, the kernel's TCP_INFINITE_SSTHRESH */
#define CCTL_MEAS_VERSION 1
#define USEC_PER_SEC 1000000ull

/* kfuncs exported to BPF congestion controls (net/ipv4/bpf_tcp_ca.c). */
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void tcp_cong_avoid_ai(struct tcp_sock *tp, __u32 w, __u32 acked) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

/* In a tcp_congestion_ops program the verifier types `sk` as a tcp_sock. */
static __always_inline struct tcp_sock *cc_tcp_sk(const struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline struct inet_connection_sock *cc_icsk(const struct sock *sk)
{
	return (struct inet_connection_sock *)sk;
}

static __always_inline void *cc_priv(const struct sock *sk)
{
	return (void *)cc_icsk(sk)->icsk_ca_priv;
}

static __always_inline __u8 cc_ca_state(const struct sock *sk)
{
	return BPF_CORE_READ_BITFIELD(cc_icsk(sk), icsk_ca_state);
}

static __always_inline bool cc_in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* Whether growth is allowed: the sender is using its window (tcp_is_cwnd_limited). */
static __always_inline bool cc_cwnd_limited(const struct sock *sk)
{
	const struct tcp_sock *tp = cc_tcp_sk(sk);

	/* As tcp_is_cwnd_limited() of the kernels compared here (6.12 guest, 6.18
	 * host): limited when the window was used up this round; in slow start also while
	 * cwnd is below twice what was in flight. Checking slow start first (older
	 * kernels' order) stops a growth of more than twice the flight within one round:
	 * Hybla's 2^ρ − 1 per ACK at ρ > 1 (cctl conform, 100 ms slow-start: the port
	 * stopped at 594 segments where tcp_hybla went on). */
	if (BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited))
		return true;
	if (cc_in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return false;
}

/*
 * The start of cong_avoid that most ports share: no growth unless the sender is
 * cwnd-limited; slow start below ssthresh. Returns the acked packets left over for
 * congestion avoidance (0 = nothing to do), counted as one per ACK when
 * count_events is set (ack_counting = events, spec §18.2).
 */
static __always_inline __u32 cc_slow_start_then(struct sock *sk, __u32 acked, __u32 count_events)
{
	struct tcp_sock *tp = cc_tcp_sk(sk);

	if (!cc_cwnd_limited(sk))
		return 0;
	if (cc_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return 0;
	}
	return count_events ? 1 : acked;
}

/* --- live tunables (spec §18.5) ---------------------------------------------
 *
 * Parameters that may change while the algorithm is registered live in a writable
 * global (.data, mmap-able) instead of .rodata. An algorithm declares them as one
 * struct and defines it with
 *
 *	struct htcp_live { __u32 beta_min_pct; ... };
 *	CCTL_LIVE_PARAMS(struct htcp_live, { .beta_min_pct = 50, ... });
 *
 * which makes two slots, cctl_live[2], and the index of the slot in force,
 * cctl_live_slot. The loader writes a value into both slots before load; `cctl set`
 * copies the slot in force into the other one, changes it there, flips
 * cctl_live_slot, then waits for an RCU grace period (every callback runs inside
 * one) before the old slot may be written again. A callback reads the index once
 * (cctl_live_get()) and takes every live value from that slot, so it sees all of a
 * change or none of it: no torn update of related keys (beta_min_pct with
 * beta_max_pct). Cost per use: one load (plus one for the index per callback), no
 * map lookup. The verifier no longer folds these values as constants. */
#ifndef CCTL_LIVE_CONST
#define CCTL_LIVE_PARAMS(type, ...)						\
	type cctl_live[2] SEC(".data") = { __VA_ARGS__, __VA_ARGS__ };		\
	__u32 cctl_live_slot SEC(".data") = 0;					\
	static __always_inline const type *cctl_live_get(void)			\
	{									\
		return &cctl_live[*(volatile __u32 *)&cctl_live_slot & 1];	\
	}
#else
/* The baseline of `cctl bench perf --parts live`: the same tunables as .rodata
 * constants, which the verifier folds (as for every load-time tunable). */
#define CCTL_LIVE_PARAMS(type, ...)						\
	const volatile type cctl_live[2] = { __VA_ARGS__, __VA_ARGS__ };	\
	const volatile __u32 cctl_live_slot = 0;				\
	static __always_inline const type *cctl_live_get(void)			\
	{									\
		return (const type *)&cctl_live[cctl_live_slot & 1];		\
	}
#endif

/* --- the measurement layer ------------------------------------------------- */

/* The algorithm's stable id (stored in every sample's cctl_meas.magic), set by the
 * loader from the algorithm's declaration (loader/src/algo/<key>/mod.rs). */
const volatile __u32 cctl_algo_id = 0;

static __always_inline void cc_meas_init(struct cctl_meas *m, const struct tcp_sock *tp)
{
	__builtin_memset(m, 0, sizeof(*m));
	m->magic = (CCTL_CA_MAGIC << 16) | ((cctl_algo_id & 0xff) << 8) | CCTL_MEAS_VERSION;
	m->cong_us = tp->tcp_mstamp;
	m->epoch_bytes0 = tp->bytes_acked;
	m->last_beta = CCTL_FP_ONE;
}

/*
 * One RTT sample (usec). Tmin is a running minimum. Tmax only grows, only in
 * Open state, and only by samples at most spike_us above it when spike_us != 0
 * (H-TCP's spike filter, spec §5); it starts at Tmin.
 */
static __always_inline void cc_meas_rtt(struct cctl_meas *m, __u32 rtt_us, __u8 ca_state,
					__u32 spike_us)
{
	if (!rtt_us)
		rtt_us = 1;
	if (!m->tmin_us || rtt_us < m->tmin_us)
		m->tmin_us = rtt_us;

	if (!m->srtt_us)
		m->srtt_us = rtt_us;
	else
		m->srtt_us = m->srtt_us - (m->srtt_us >> 3) + (rtt_us >> 3);

	if (ca_state != TCP_CA_Open)
		return;
	if (m->tmax_us < m->tmin_us)
		m->tmax_us = m->tmin_us;
	if (rtt_us > m->tmax_us && (!spike_us || rtt_us <= m->tmax_us + spike_us))
		m->tmax_us = rtt_us;
}

/* Δ: usec since the last congestion event. */
static __always_inline __u64 cc_meas_delta_us(const struct cctl_meas *m, const struct tcp_sock *tp)
{
	__u64 now = tp->tcp_mstamp;

	return now > m->cong_us ? now - m->cong_us : 0;
}

/*
 * A congestion event starts a new epoch: close the current one (its throughput
 * is bytes acked over its duration) and restart Δ.
 */
static __always_inline void cc_meas_cong_event(struct cctl_meas *m, const struct tcp_sock *tp)
{
	__u64 now = tp->tcp_mstamp;
	__u64 bytes = tp->bytes_acked;

	if (now > m->cong_us && bytes >= m->epoch_bytes0)
		m->epoch_tput_Bps = (bytes - m->epoch_bytes0) * USEC_PER_SEC / (now - m->cong_us);
	m->cong_us = now;
	m->epoch_bytes0 = bytes;
}

/* Record a window reduction with multiplier beta (<< CCTL_FP_SHIFT). */
static __always_inline void cc_meas_backoff(struct cctl_meas *m, __u32 beta)
{
	m->backoffs++;
	m->last_beta = beta;
}

#endif /* CC_COMMON_BPF_H */
