// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* trace.bpf.c - the collector: per-flow samples of any TCP flow's congestion
 * state, from the tcp_probe tracepoint (tp_btf), into a BPF ring buffer.
 *
 * tcp_probe fires for every segment an established socket receives, so the
 * program rate-limits per flow (socket cookie): at most one sample per
 * interval_ns, plus one whenever the CA state changes (so every congestion
 * event is seen). It works for every congestion control, native ones
 * included; for cctl's own algorithms the raw icsk_ca_priv carries the shared
 * measurement layer and the algorithm's variables (see cctl.h), which user
 * space decodes. A full ring buffer is counted in `drops`, never silent.
 *
 * Two more programs, on the tcp_cong_state_set tracepoint (every tcp_set_ca_state()),
 * count each flow's entries into CWR, Recovery and Loss in the same per-socket storage
 * (count_entry: why two); every sample carries the counts. They are exact where samples are not:
 * a state entered and left between two segments received is never sampled.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "cctl.h"
#include "ca_ops.bpf.h"

char _license[] SEC("license") = "Dual BSD/GPL";

#define AF_INET 2
#define AF_INET6 10

/* Set by the loader before load. */
const volatile __u64 interval_ns = 100000000; /* minimum gap between samples of a flow, ns */
const volatile __u16 filter_port = 0;         /* keep flows with this local or remote port; 0 = all */
const volatile __u64 filter_netns = 0;        /* keep flows of this netns cookie; 0 = all */
const volatile char filter_cc[16] = {};       /* keep flows with this CC name; "" = all */
const volatile __u64 wakeup_bytes = 0;        /* wake the reader only above this many pending bytes; 0 = every sample */

/* Counters read by user space (.bss is memory-mapped). */
__u64 samples_emitted = 0;
__u64 samples_dropped = 0; /* ring buffer full */

/* Dummy instances so that libbpf-cargo emits these types into the skeleton. */
struct cctl_sample _cctl_sample_type = {};
struct cctl_reno_ca _cctl_reno_type = {};

struct flow_state {
	__u64 last_ns;    /* ts of the last emitted sample */
	__u32 entries[3]; /* entries into CWR, Recovery, Loss since attach, count */
	__u8 last_state;  /* CA state of the last emitted sample */
	__u8 sampled;     /* a sample was emitted (else only the counters are set) */
	__u8 counted;     /* the first counter counted the socket's latest state change */
};

/* Per-socket state in socket-local storage: reaching it is a pointer walk from the
 * socket (not a hash of the cookie), it is updated in place, and it goes away with the
 * socket. It used to be an LRU hash keyed by cookie: the lookup on every call and the
 * element replacement on every sample were most of the program's time. */
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct flow_state);
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	/* 16 MiB: on a busy machine the reader is scheduled late, and the ring has to hold
	 * what arrives meanwhile (4 MiB dropped samples at 200,000 samples/s on 2 cores). */
	__uint(max_entries, 16 << 20); /* bytes */
} samples SEC(".maps");

static __always_inline bool trace_cc_matches(const char *name)
{
	if (!filter_cc[0])
		return true;
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if (name[i] != filter_cc[i])
			return false;
		if (!name[i])
			return true;
	}
	return true;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(cctl_tcp_probe, struct sock *sk, const struct sk_buff *skb)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	const struct inet_connection_sock *icsk;
	struct flow_state *fs;
	struct cctl_sample *e;
	__u16 sport, dport, family;
	char name[16] = {};
	__u64 now, cookie, netns;
	__u8 state;
	bool ours;

	if (!tp)
		return 0;
	icsk = &tp->inet_conn;

	sport = sk->__sk_common.skc_num;
	dport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (filter_port && sport != filter_port && dport != filter_port)
		return 0;
	/* Read only where needed: with a netns filter here, else for an emitted sample. */
	netns = filter_netns ? BPF_CORE_READ(sk, __sk_common.skc_net.net, net_cookie) : 0;
	if (filter_netns && netns != filter_netns)
		return 0;

	now = bpf_ktime_get_ns();
	state = BPF_CORE_READ_BITFIELD(icsk, icsk_ca_state);

	/* Most calls end here (per-ACK, rate-limited); only flows that were emitted
	 * before have an entry, so this never skips a flow the cc filter would drop. */
	fs = bpf_sk_storage_get(&flows, sk, 0, 0);
	if (fs && fs->sampled && now - fs->last_ns < interval_ns && state == fs->last_state)
		return 0;

	bpf_probe_read_kernel(name, sizeof(name), icsk->icsk_ca_ops->name);
	if (!trace_cc_matches(name))
		return 0;
	if (!fs) {
		fs = bpf_sk_storage_get(&flows, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
		if (!fs)
			return 0; /* out of memory: nothing to rate-limit with */
	}
	if (!fs->sampled)
		fs->last_state = state; /* a flow's first sample is no state change */
	cookie = bpf_get_socket_cookie(sk);

	/* A native CC's icsk_ca_priv means nothing to user space: leave it out, and the
	 * record shrinks from 272 to 168 bytes (CCTL_SAMPLE_SHORT_BYTES). */
	ours = ((__u32)icsk->icsk_ca_priv[0] >> 16) == CCTL_CA_MAGIC;
	if (ours) {
		/* Filled here: the verifier knows the record's size only on this branch. */
		e = bpf_ringbuf_reserve(&samples, sizeof(*e), 0);
		if (e)
			bpf_probe_read_kernel(e->ca_priv, sizeof(e->ca_priv), icsk->icsk_ca_priv);
	} else {
		e = bpf_ringbuf_reserve(&samples, CCTL_SAMPLE_SHORT_BYTES, 0);
	}
	if (!e) {
		__sync_fetch_and_add(&samples_dropped, 1);
		return 0;
	}

	e->ts_ns = now;
	e->cookie = cookie;
	e->mstamp_us = tp->tcp_mstamp;
	e->bytes_acked = tp->bytes_acked;
	e->netns_cookie = filter_netns ? netns : BPF_CORE_READ(sk, __sk_common.skc_net.net, net_cookie);
	family = sk->__sk_common.skc_family;
	e->family = family;
	__builtin_memset(e->saddr, 0, sizeof(e->saddr));
	__builtin_memset(e->daddr, 0, sizeof(e->daddr));
	if (family == AF_INET6) {
		bpf_probe_read_kernel(e->saddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_probe_read_kernel(e->daddr, 16, &sk->__sk_common.skc_v6_daddr);
	} else {
		bpf_probe_read_kernel(e->saddr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_probe_read_kernel(e->daddr, 4, &sk->__sk_common.skc_daddr);
	}
	e->sport = sport;
	e->dport = dport;
	e->ca_state = state;
	e->flags = state != fs->last_state ? CCTL_SAMPLE_STATE_CHANGE : 0;
	e->snd_cwnd = tp->snd_cwnd;
	e->snd_ssthresh = tp->snd_ssthresh;
	e->srtt_us = tp->srtt_us >> 3;
	e->rttvar_us = tp->mdev_us >> 2;
	e->min_rtt_us = tp->rtt_min.s[0].v;
	e->lost_out = tp->lost_out;
	e->retrans_out = tp->retrans_out;
	e->total_retrans = tp->total_retrans;
	e->packets_out = tp->packets_out;
	e->in_flight = tp->packets_out - (tp->sacked_out + tp->lost_out) + tp->retrans_out;
	e->mss_cache = tp->mss_cache;
	e->delivered = tp->delivered;
	e->prior_cwnd = tp->prior_cwnd;
	e->ca_map_id = cc_ops_map_id(icsk->icsk_ca_ops);
	e->cwr_entries = fs->entries[0];
	e->recovery_entries = fs->entries[1];
	e->loss_entries = fs->entries[2];
	e->_pad = 0;
	__builtin_memcpy(e->cc_name, name, sizeof(name));
	if (ours)
		e->flags |= CCTL_SAMPLE_OURS;
	if (!fs->sampled)
		e->flags |= CCTL_SAMPLE_FIRST;
	/* Waking the reader for every sample costs it more than reading them: wake it only
	 * when the ring fills up; it reads every few ms anyway. */
	bpf_ringbuf_submit(e, wakeup_bytes && bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA) < wakeup_bytes ?
				      BPF_RB_NO_WAKEUP : 0);
	__sync_fetch_and_add(&samples_emitted, 1);

	fs->last_ns = now;
	fs->last_state = state;
	fs->sampled = 1;
	return 0;
}

/* Counting entries into CWR, Recovery and Loss. tcp_set_ca_state(sk, ca_state) fires
 * tcp_cong_state_set before it stores the new state, so icsk_ca_state is still the old one;
 * only changes into CWR, Recovery or Loss are counted (TCP_CA_CWR = 2 .. TCP_CA_Loss = 4),
 * with the sampler's filters.
 *
 * The kernel skips a tracing program that fires again on a CPU where it is already running
 * (an interrupt's softirq changing another socket's state while the program runs in process
 * context, as after a socket's deferred RTO in release_sock: the program's
 * recursion_misses). So two programs count, attached in this order: the first counts every
 * event it sees and marks the socket; the second, which the tracepoint runs right after it,
 * clears the mark, or counts the event when there is none (the first was skipped). An event
 * nested in one of them is counted by the other; only two skipped events in a row on one
 * socket, each in a different program, would go uncounted. */
static __always_inline int count_entry(struct sock *sk, __u8 ca_state, bool first)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	struct flow_state *fs;
	char name[16] = {};
	__u16 sport, dport;
	__u8 old;

	if (!tp || ca_state < 2 || ca_state > 4)
		return 0;
	old = BPF_CORE_READ_BITFIELD(&tp->inet_conn, icsk_ca_state);
	if (old == ca_state)
		return 0;
	sport = sk->__sk_common.skc_num;
	dport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (filter_port && sport != filter_port && dport != filter_port)
		return 0;
	if (filter_netns && BPF_CORE_READ(sk, __sk_common.skc_net.net, net_cookie) != filter_netns)
		return 0;
	if (filter_cc[0]) {
		bpf_probe_read_kernel(name, sizeof(name), tp->inet_conn.icsk_ca_ops->name);
		if (!trace_cc_matches(name))
			return 0;
	}
	fs = bpf_sk_storage_get(&flows, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!fs)
		return 0;
	if (first) {
		fs->counted = 1;
	} else if (fs->counted) {
		fs->counted = 0;
		return 0;
	}
	/* Constant indices: the verifier cannot bound ca_state - 2 through the helper call. */
	if (ca_state == 2)
		__sync_fetch_and_add(&fs->entries[0], 1);
	else if (ca_state == 3)
		__sync_fetch_and_add(&fs->entries[1], 1);
	else
		__sync_fetch_and_add(&fs->entries[2], 1);
	return 0;
}

SEC("tp_btf/tcp_cong_state_set")
int BPF_PROG(cctl_cong_state_set, struct sock *sk, __u8 ca_state)
{
	return count_entry(sk, ca_state, true);
}

SEC("tp_btf/tcp_cong_state_set")
int BPF_PROG(cctl_cong_state_set2, struct sock *sk, __u8 ca_state)
{
	return count_entry(sk, ca_state, false);
}
