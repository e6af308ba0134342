// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* close.bpf.c - close records: one record per TCP socket when it is destroyed, in the
 * spirit of RFC 4898's tcpEStats (what Web100 gave the papers), for any TCP flow.
 *
 * tcp_probe (every segment an established socket receives) keeps per-socket
 * accumulators in socket-local storage: min/max cwnd, min/mean/max srtt, and the time
 * spent in each CA state. tcp_destroy_sock (a full socket going away: after close,
 * on a reset, when its last reference drops) adds what the socket itself counts
 * (bytes, segments, retransmissions, the busy/rwnd-limited/sndbuf-limited chronographs
 * of tcp_info, CE-marked deliveries) and writes one struct cctl_close_record into a
 * ring buffer. A socket tcp_probe never saw (no segment received once established)
 * gets a record without the accumulated fields (CCTL_CLOSE_SEEN unset). A full ring
 * buffer is counted in `records_dropped`, never silent.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "cctl.h"
#include "ca_ops.bpf.h"

char _license[] SEC("license") = "Dual BSD/GPL";

#define AF_INET6 10
#define USEC_PER_SEC 1000000ULL

extern int CONFIG_HZ __kconfig;

/* Set by the loader before load. */
const volatile __u16 filter_port = 0;  /* keep flows with this local or remote port; 0 = all */
const volatile __u64 filter_netns = 0; /* keep flows of this netns cookie; 0 = all */

/* Counters read by user space (.bss is memory-mapped). */
__u64 records_emitted = 0;
__u64 records_dropped = 0; /* ring buffer full */

/* So that libbpf-cargo emits the type into the skeleton. */
struct cctl_close_record _cctl_close_record_type = {};

struct close_acc {
	__u64 first_ns;      /* first tcp_probe, CLOCK_MONOTONIC ns */
	__u64 state_since_ns; /* when the current CA state began */
	__u64 srtt_sum_us;
	__u64 srtt_n;
	__u64 ca_ns[5];      /* time in Open, Disorder, CWR, Recovery, Loss */
	__u32 min_cwnd, max_cwnd;
	__u32 min_srtt_us, max_srtt_us;
	__u8 state;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct close_acc);
} acc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* bytes: ~20,000 records */
} records SEC(".maps");

/* The local port. Not skc_num: inet_put_port() zeroes that when the socket moves to
 * TCP_CLOSE, before tcp_destroy_sock; inet_sport stays. */
static __always_inline __u16 local_port(struct sock *sk)
{
	return bpf_ntohs(BPF_CORE_READ((struct inet_sock *)sk, inet_sport));
}

static __always_inline bool keep(struct sock *sk)
{
	__u16 sport = local_port(sk);
	__u16 dport = bpf_ntohs(sk->__sk_common.skc_dport);

	if (filter_port && sport != filter_port && dport != filter_port)
		return false;
	if (filter_netns && BPF_CORE_READ(sk, __sk_common.skc_net.net, net_cookie) != filter_netns)
		return false;
	return true;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(cctl_close_probe, struct sock *sk, const struct sk_buff *skb)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	struct close_acc *a;
	__u32 cwnd, srtt;
	__u64 now;
	__u8 state;

	if (!tp || !keep(sk))
		return 0;
	a = bpf_sk_storage_get(&acc, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!a)
		return 0;
	now = bpf_ktime_get_ns();
	cwnd = tp->snd_cwnd;
	srtt = tp->srtt_us >> 3;
	state = BPF_CORE_READ_BITFIELD(&tp->inet_conn, icsk_ca_state) & 7;
	if (!a->first_ns) {
		a->first_ns = now;
		a->state_since_ns = now;
		a->state = state;
		a->min_cwnd = cwnd;
		a->max_cwnd = cwnd;
		a->min_srtt_us = srtt;
		a->max_srtt_us = srtt;
	}
	if (state != a->state) {
		if (a->state < 5)
			a->ca_ns[a->state] += now - a->state_since_ns;
		a->state = state;
		a->state_since_ns = now;
	}
	if (cwnd < a->min_cwnd)
		a->min_cwnd = cwnd;
	if (cwnd > a->max_cwnd)
		a->max_cwnd = cwnd;
	if (srtt) {
		if (srtt < a->min_srtt_us || !a->min_srtt_us)
			a->min_srtt_us = srtt;
		if (srtt > a->max_srtt_us)
			a->max_srtt_us = srtt;
		a->srtt_sum_us += srtt;
		a->srtt_n++;
	}
	return 0;
}

/* A chronograph of tcp_info (tcpi_busy_time, _rwnd_limited, _sndbuf_limited), usec:
 * what it accumulated, plus the running one's time so far (net/ipv4/tcp.c:
 * tcp_get_info_chrono_stats). */
static __always_inline __u64 chrono_us(struct tcp_sock *tp, int type, __u32 jiffies)
{
	__u64 j = tp->chrono_stat[type - 1];

	/* A plain u8 in 6.18, a 2-bit field in 6.12: read it through its relocated bits. */
	if (BPF_CORE_READ_BITFIELD(tp, chrono_type) == type)
		j += jiffies - tp->chrono_start;
	return j * USEC_PER_SEC / CONFIG_HZ;
}

SEC("tp_btf/tcp_destroy_sock")
int BPF_PROG(cctl_close_destroy, struct sock *sk)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	struct cctl_close_record *r;
	struct close_acc *a;
	__u32 jiffies;
	__u64 now;
	int i;

	if (!tp || !keep(sk))
		return 0;
	r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&records_dropped, 1);
		return 0;
	}
	__builtin_memset(r, 0, sizeof(*r));
	now = bpf_ktime_get_ns();
	jiffies = (__u32)bpf_jiffies64();
	r->ts_ns = now;
	r->cookie = bpf_get_socket_cookie(sk);
	r->netns_cookie = BPF_CORE_READ(sk, __sk_common.skc_net.net, net_cookie);
	r->family = sk->__sk_common.skc_family;
	if (r->family == AF_INET6) {
		bpf_probe_read_kernel(r->saddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_probe_read_kernel(r->daddr, 16, &sk->__sk_common.skc_v6_daddr);
	} else {
		bpf_probe_read_kernel(r->saddr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_probe_read_kernel(r->daddr, 4, &sk->__sk_common.skc_daddr);
	}
	r->sport = local_port(sk);
	r->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	r->bytes_acked = tp->bytes_acked;
	r->bytes_received = tp->bytes_received;
	r->bytes_retrans = tp->bytes_retrans;
	r->segs_out = tp->segs_out;
	r->segs_in = tp->segs_in;
	r->data_segs_out = tp->data_segs_out;
	r->data_segs_in = tp->data_segs_in;
	r->total_retrans = tp->total_retrans;
	r->delivered_ce = tp->delivered_ce;
	r->snd_cwnd = tp->snd_cwnd;
	r->rwnd_limited_us = chrono_us(tp, 2, jiffies);
	r->sndbuf_limited_us = chrono_us(tp, 3, jiffies);
	/* tcpi_busy_time is all three chronographs: busy, limited by rwnd or by sndbuf. */
	r->busy_us = chrono_us(tp, 1, jiffies) + r->rwnd_limited_us + r->sndbuf_limited_us;
	r->ca_map_id = cc_ops_map_id(tp->inet_conn.icsk_ca_ops);
	bpf_probe_read_kernel(r->cc_name, sizeof(r->cc_name), tp->inet_conn.icsk_ca_ops->name);

	a = bpf_sk_storage_get(&acc, sk, 0, 0);
	if (a && a->first_ns) {
		r->flags |= CCTL_CLOSE_SEEN;
		r->first_ns = a->first_ns;
		r->min_cwnd = a->min_cwnd;
		r->max_cwnd = a->max_cwnd;
		r->min_srtt_us = a->min_srtt_us;
		r->max_srtt_us = a->max_srtt_us;
		r->mean_srtt_us = a->srtt_n ? a->srtt_sum_us / a->srtt_n : 0;
#pragma unroll
		for (i = 0; i < 5; i++)
			r->ca_ns[i] = a->ca_ns[i];
		if (a->state < 5)
			r->ca_ns[a->state] += now - a->state_since_ns;
	}
	bpf_ringbuf_submit(r, 0);
	__sync_fetch_and_add(&records_emitted, 1);
	return 0;
}
