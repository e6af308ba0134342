// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* reno.bpf.c - standard TCP (Reno/NewReno, the papers' baseline) as a BPF
 * struct_ops tcp_congestion_ops, registered as "bpf_reno".
 *
 * Spec: shared/spec/algorithms.md §2; [P1] eq. 1-2: w += 1/w per acked packet,
 * w <- w/2 on loss (β = 0.5), slow start below ssthresh.
 *
 * Window arithmetic is the kernel's own (kfuncs tcp_reno_cong_avoid,
 * tcp_reno_ssthresh, tcp_reno_undo_cwnd), so the cwnd trajectory matches the
 * built-in "reno" exactly; what this adds is the shared measurement layer
 * (Tmin/Tmax, Δ, epoch throughput, backoff count) that the collector reads.
 *
 * Differences from the Linux built-in: none in window behaviour.
 */
#include "cc_common.bpf.h"

char _license[] SEC("license") = "Dual BSD/GPL";

_Static_assert(sizeof(struct cctl_reno_ca) <=
		       sizeof(((struct inet_connection_sock *)0)->icsk_ca_priv),
	       "struct cctl_reno_ca does not fit icsk_ca_priv");

#define RENO_BETA_FP (CCTL_FP_ONE / 2)

static __always_inline struct cctl_reno_ca *reno_ca(const struct sock *sk)
{
	return cc_priv(sk);
}

SEC("struct_ops/reno_init")
void BPF_PROG(reno_init, struct sock *sk)
{
	cc_meas_init(&reno_ca(sk)->m, cc_tcp_sk(sk));
}

SEC("struct_ops/reno_pkts_acked")
void BPF_PROG(reno_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	if (sample->rtt_us > 0)
		cc_meas_rtt(&reno_ca(sk)->m, sample->rtt_us, cc_ca_state(sk), 0);
}

SEC("struct_ops/reno_cong_avoid")
void BPF_PROG(reno_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops/reno_ssthresh")
__u32 BPF_PROG(reno_ssthresh, struct sock *sk)
{
	cc_meas_backoff(&reno_ca(sk)->m, RENO_BETA_FP);
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops/reno_set_state")
void BPF_PROG(reno_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_CWR || new_state == TCP_CA_Recovery || new_state == TCP_CA_Loss)
		cc_meas_cong_event(&reno_ca(sk)->m, cc_tcp_sk(sk));
}

SEC("struct_ops/reno_undo_cwnd")
__u32 BPF_PROG(reno_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops reno = {
	.init = (void *)reno_init,
	.ssthresh = (void *)reno_ssthresh,
	.cong_avoid = (void *)reno_cong_avoid,
	.set_state = (void *)reno_set_state,
	.undo_cwnd = (void *)reno_undo_cwnd,
	.pkts_acked = (void *)reno_pkts_acked,
	.name = "bpf_reno",
};
