// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* livecheck.bpf.c - the BPF side of the live-tunable storm test: reads a loaded
 * version's live tunables the way every port does (cctl_live_get(): the slot index once,
 * then every value from that slot) on every segment an established socket receives
 * (tcp_probe), and counts the reads whose pair of watched values was never written
 * together by one `cctl set` — a torn read.
 *
 * The `.data` map it reads is the version's own (the loader puts it into `data`, a
 * map of maps whose template it also is); where the slot index and the two watched
 * members are comes from the version's BTF, set here before load. The writer sets the
 * two values to pairs with `a + b == pair_sum`, so a torn read shows as another sum.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "Dual BSD/GPL";

#define LIVECHECK_MAX_VALUE 4096

/* Set by the loader before load (bytes; from the version's BTF). */
const volatile __u32 slot_index_off = 0; /* cctl_live_slot */
const volatile __u32 slot0_off = 0;      /* cctl_live[0] */
const volatile __u32 slot_size = 0;      /* sizeof(cctl_live[0]) */
const volatile __u32 a_off = 0;          /* the first watched member, in a slot */
const volatile __u32 b_off = 0;          /* the second */
const volatile __u32 pair_sum = 0;       /* a + b of every pair the writer sets */

/* Counters read by user space (.bss is memory-mapped). */
__u64 reads = 0;
__u64 torn = 0;
__u32 last_a = 0;
__u32 last_b = 0;

/* The version's .data map, put here by the loader after load (the map itself is the
 * inner map's template, so the program knows its value size). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} data SEC(".maps");

static __always_inline __u32 read_u32(const __u8 *v, __u32 off)
{
	if (off > LIVECHECK_MAX_VALUE - sizeof(__u32))
		return 0;
	return *(volatile const __u32 *)(v + off);
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(livecheck_probe, struct sock *sk, struct sk_buff *skb)
{
	__u32 zero = 0, idx, base, a, b;
	const __u8 *v;
	void *inner = bpf_map_lookup_elem(&data, &zero);

	if (!inner)
		return 0;
	v = bpf_map_lookup_elem(inner, &zero);
	if (!v)
		return 0;
	idx = read_u32(v, slot_index_off) & 1;
	base = slot0_off + idx * slot_size;
	a = read_u32(v, base + a_off);
	b = read_u32(v, base + b_off);
	__sync_fetch_and_add(&reads, 1);
	if (a + b != pair_sum)
		__sync_fetch_and_add(&torn, 1);
	last_a = a;
	last_b = b;
	return 0;
}
