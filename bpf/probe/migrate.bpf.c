// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* migrate.bpf.c - move established TCP flows to another congestion control,
 * and the census of which congestion control (and which loaded version of it)
 * every TCP socket runs.
 *
 * An iter/tcp program: it walks the TCP sockets of the network namespace of
 * the process that creates the iterator (bpf_iter_tcp, Linux >= 5.15, which
 * holds the socket lock around each call, so bpf_setsockopt is allowed). For
 * each full socket that passes the filters (from-CC name, port, address,
 * cgroup, socket cookie) it writes one record into a ring buffer; in migrate mode it first
 * calls bpf_setsockopt(TCP_CONGESTION, to) on established sockets (unless
 * dry_run). The kernel keeps cwnd/ssthresh; the new algorithm's init runs and
 * its private state starts afresh (tcp_reinit_congestion_control).
 *
 * Records go to a ring buffer rather than the iterator's seq output: a full
 * seq buffer makes bpf_iter show the same socket again, which would run the
 * action twice and lose the first record.
 *
 * Only ESTABLISHED sockets are moved. Sockets in other states that run the
 * from-CC (FIN_WAIT, CLOSE_WAIT, SYN_SENT, LISTEN, ...) are reported with
 * action MIG_SKIPPED_STATE; time-wait and request sockets have no CC and are
 * never reported.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "ca_ops.bpf.h"

char _license[] SEC("license") = "Dual BSD/GPL";

#define AF_INET 2
#define AF_INET6 10
#define SOL_TCP 6
#define TCP_CONGESTION 13
#define ENOENT 2
#define EUCLEAN 117 /* setsockopt said yes but the socket kept its CC */
#define CC_NAME_MAX 16 /* TCP_CA_NAME_MAX, bytes with the NUL */

/* What happened to a reported socket (mig_rec.action). */
enum mig_action {
	MIG_CENSUS = 0,        /* census mode: reported only */
	MIG_DRY_RUN = 1,       /* matched, would be moved */
	MIG_MOVED = 2,         /* bpf_setsockopt succeeded and the socket runs `to` */
	MIG_FAILED = 3,        /* bpf_setsockopt failed: errno in mig_rec.err */
	MIG_SKIPPED_STATE = 4, /* matched, but not ESTABLISHED */
};

/* One reported socket; read by loader/src/migrate.rs through the skeleton's types. */
struct mig_rec {
	__u64 cookie;
	__u8 saddr[16]; /* local address; IPv4 in the first 4 bytes */
	__u8 daddr[16]; /* remote address */
	__u16 family;   /* AF_INET or AF_INET6 */
	__u16 sport;    /* local port, host order */
	__u16 dport;    /* remote port, host order */
	__u8 state;     /* TCP_ESTABLISHED = 1, ... (include/net/tcp_states.h) */
	__u8 action;    /* enum mig_action */
	__s32 err;      /* errno of a failed bpf_setsockopt (positive), else 0 */
	__u32 ca_map_id;     /* struct_ops map id of the CC before the action; 0 = native */
	__u32 new_ca_map_id; /* ... and after it */
	char cc[CC_NAME_MAX];     /* CC before the action */
	char new_cc[CC_NAME_MAX]; /* CC after it */
};

/* Set by the loader before each walk. Writable globals (.bss) rather than
 * const volatile (.rodata, frozen at load): a process loads the iterator once
 * and reuses it for every census and migration it runs, because loading (CO-RE
 * relocation against the kernel's BTF, verification) costs more than walking
 * 10,000 sockets. */
volatile bool census = false;            /* report matching sockets, act on none */
volatile bool dry_run = false;           /* match and report, do not move */
volatile char from_cc[CC_NAME_MAX] = {}; /* "" = any CC (census) */
volatile char to_cc[CC_NAME_MAX] = {};
volatile __u16 filter_port = 0;      /* local or remote port; 0 = any */
volatile __u16 filter_family = 0;    /* AF_INET/AF_INET6 of filter_addr; 0 = any address */
volatile __u8 filter_addr[16] = {};  /* local or remote address */
volatile __u64 filter_cgroup_id = 0; /* cgroup v2 id; 0 = any */
volatile __s32 filter_cgroup_level = 0; /* its depth below the root (root = 0) */
volatile __u64 filter_cookie = 0;    /* socket cookie (the collector's); 0 = any */

/* Counters read by user space (.bss). */
__u64 seen = 0;            /* full TCP sockets walked */
__u64 records_dropped = 0; /* ring buffer full */

/* Dummy instance so that libbpf-cargo emits the type into the skeleton. */
struct mig_rec _mig_rec_type = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20); /* bytes; the loader resizes it to the socket count */
} records SEC(".maps");

static __always_inline bool name_eq(const char *a, const volatile char *b)
{
#pragma unroll
	for (int i = 0; i < CC_NAME_MAX; i++) {
		if (a[i] != b[i])
			return false;
		if (!a[i])
			return true;
	}
	return true;
}

static __always_inline bool addr_eq(const __u8 *a, int len)
{
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if (i >= len)
			break;
		if (a[i] != filter_addr[i])
			return false;
	}
	return true;
}

/* Whether the socket's cgroup v2 is filter_cgroup_id or one of its descendants. */
static __always_inline bool cgroup_matches(struct sock *sk)
{
	struct cgroup *cg, *anc = NULL;
	int level;

	if (!filter_cgroup_id)
		return true;
	cg = BPF_CORE_READ(sk, sk_cgrp_data.cgroup);
	if (!cg)
		return false;
	level = BPF_CORE_READ(cg, level);
	if (level < filter_cgroup_level || filter_cgroup_level < 0 || filter_cgroup_level > 4096)
		return false;
	bpf_probe_read_kernel(&anc, sizeof(anc), &cg->ancestors[filter_cgroup_level]);
	if (!anc)
		return false;
	return BPF_CORE_READ(anc, kn, id) == filter_cgroup_id;
}

SEC("iter/tcp")
int cctl_migrate(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	char name[CC_NAME_MAX] = {};
	char to[CC_NAME_MAX] = {};
	struct tcp_sock *tp;
	struct mig_rec *r;
	struct sock *sk;
	__u8 state, action;
	__u16 family;
	__s32 err = 0;
	__u32 map_id;

	if (!skc)
		return 0;
	tp = bpf_skc_to_tcp_sock(skc);
	if (!tp) /* time-wait and request sockets: no congestion control */
		return 0;
	sk = (struct sock *)tp;
	__sync_fetch_and_add(&seen, 1);

	bpf_probe_read_kernel(name, sizeof(name), tp->inet_conn.icsk_ca_ops->name);
	if (from_cc[0] && !name_eq(name, from_cc))
		return 0;

	r = bpf_ringbuf_reserve(&records, sizeof(*r), 0);
	if (!r) {
		__sync_fetch_and_add(&records_dropped, 1);
		return 0;
	}
	__builtin_memset(r, 0, sizeof(*r));
	family = sk->__sk_common.skc_family;
	r->family = family;
	r->sport = sk->__sk_common.skc_num;
	r->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (family == AF_INET6) {
		bpf_probe_read_kernel(r->saddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_probe_read_kernel(r->daddr, 16, &sk->__sk_common.skc_v6_daddr);
	} else {
		bpf_probe_read_kernel(r->saddr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_probe_read_kernel(r->daddr, 4, &sk->__sk_common.skc_daddr);
	}

	if (filter_port && r->sport != filter_port && r->dport != filter_port)
		goto discard;
	if (filter_family) {
		int len = filter_family == AF_INET6 ? 16 : 4;

		if (family != filter_family || (!addr_eq(r->saddr, len) && !addr_eq(r->daddr, len)))
			goto discard;
	}
	if (!cgroup_matches(sk))
		goto discard;
	r->cookie = bpf_get_socket_cookie(sk);
	if (filter_cookie && r->cookie != filter_cookie)
		goto discard;

	state = sk->__sk_common.skc_state;
	map_id = cc_ops_map_id(tp->inet_conn.icsk_ca_ops);
	r->state = state;
	r->ca_map_id = map_id;
	__builtin_memcpy(r->cc, name, sizeof(name));

	if (census)
		action = MIG_CENSUS;
	else if (state != TCP_ESTABLISHED)
		action = MIG_SKIPPED_STATE;
	else if (dry_run)
		action = MIG_DRY_RUN;
	else {
		/* Element by element: a memcpy would drop the volatile and let clang
		 * fold the zero initialiser in. */
#pragma unroll
		for (int i = 0; i < CC_NAME_MAX; i++)
			to[i] = to_cc[i];
		err = bpf_setsockopt(tp, SOL_TCP, TCP_CONGESTION, to, sizeof(to));
		action = err ? MIG_FAILED : MIG_MOVED;
	}
	if (action == MIG_MOVED) {
		__builtin_memset(name, 0, sizeof(name));
		bpf_probe_read_kernel(name, sizeof(name), tp->inet_conn.icsk_ca_ops->name);
		map_id = cc_ops_map_id(tp->inet_conn.icsk_ca_ops);
		if (!name_eq(name, to_cc)) { /* cannot happen: setsockopt returned 0 */
			action = MIG_FAILED;
			err = -EUCLEAN;
		}
	}
	r->action = action;
	r->err = -err;
	r->new_ca_map_id = map_id;
	__builtin_memcpy(r->new_cc, name, sizeof(name));
	bpf_ringbuf_submit(r, 0);
	return 0;

discard:
	bpf_ringbuf_discard(r, 0);
	return 0;
}
