// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* delay.bpf.c - per-packet one-way delay and queue sojourn on the testbed.
 *
 * Every namespace of a testbed runs on one kernel, so one clock (CLOCK_MONOTONIC,
 * bpf_ktime_get_ns) times a packet wherever it is: no clock synchronisation, no negative
 * one-way delays. The same two programs are attached as tcx hooks (6.6+) to the devices
 * the loader names; the `taps` map says, per (netns cookie, ifindex, direction), which
 * timestamp slot that hook writes and whether it is the packet's destination.
 *
 * A packet is known along its path by struct cctl_delay_key (addresses, ports, seq,
 * ack_seq, IP id): none of it changes hop to hop, and the IP id (a per-socket counter for
 * DF packets) tells a retransmission from the original. At its origin a packet may still
 * be a GSO packet (TCP builds them whatever the device's features; they are cut after the
 * egress hook), so each segment is stamped under the key it will have on the wire. Sampling is decided from a hash
 * of that key, so every hook decides alike without passing state: 1 packet in
 * `sample_every`. The origin tap (slot 0) makes the `stamps` entry, later taps fill their
 * slot, and the terminal tap writes one struct cctl_delay_event into the ring buffer and
 * deletes the entry. An entry whose packet was dropped stays until the LRU evicts it.
 *
 * Only IPv4 TCP is stamped (the testbed is IPv4; UDP probes time themselves). Every hook
 * returns TCX_NEXT: whatever else is attached (the periodic-loss filter) still runs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "cctl.h"

char _license[] SEC("license") = "Dual BSD/GPL";

#define TCX_NEXT -1
#define ETH_HLEN 14
#define ETH_P_IP 0x0800
#define IPPROTO_TCP_ 6
#define MAX_GSO_SEGS 64 /* 64 KB of 1448-byte segments is 45 */

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;

/* Set by the loader before load: stamp 1 packet in this many (1 = every packet). */
const volatile __u32 sample_every = 1;

/* Counters read by user space (.bss is memory-mapped). */
__u64 stamped = 0;      /* sampled packets seen at their origin */
__u64 delivered = 0;    /* sampled packets that reached their destination with an entry */
__u64 unmatched = 0;    /* sampled at a terminal tap without an entry (evicted, or no origin tap) */
__u64 events_dropped = 0; /* ring buffer full */
__u64 gso_truncated = 0;  /* GSO packets of more than MAX_GSO_SEGS segments: the rest unstamped */

/* So that libbpf-cargo emits the types into the skeleton. */
struct cctl_delay_event _cctl_delay_event_type = {};
struct cctl_delay_tap _cctl_delay_tap_type = {};
struct cctl_delay_role _cctl_delay_role_type = {};

struct stamp {
	__u64 t_ns[CCTL_DELAY_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, struct cctl_delay_tap);
	__type(value, struct cctl_delay_role);
} taps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1 << 16); /* sampled packets in flight at once */
	__type(key, struct cctl_delay_key);
	__type(value, struct stamp);
} stamps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20); /* bytes: ~90,000 events */
} events SEC(".maps");

static __always_inline __u64 mix(__u64 h, __u64 v)
{
	h ^= v;
	h *= 0x9E3779B97F4A7C15ULL;
	return h ^ (h >> 29);
}

/* Whether the packet with this key is one of the 1 in `sample_every`. */
static __always_inline bool sampled(const struct cctl_delay_key *k)
{
	__u64 h;

	if (sample_every <= 1)
		return true;
	h = mix(mix(mix(mix(0, ((__u64)k->saddr << 32) | k->daddr),
			((__u64)k->sport << 16) | k->dport),
		    ((__u64)k->seq << 32) | k->ack_seq),
		k->ip_id);
	/* 1 in N without a division: the top 32 bits of h scaled to [0, N). */
	return (((h >> 32) * sample_every) >> 32) == 0;
}

static __always_inline void stamp_origin(const struct cctl_delay_key *k, __u64 now)
{
	struct stamp fresh = {};

	if (!sampled(k))
		return;
	fresh.t_ns[0] = now;
	bpf_map_update_elem(&stamps, k, &fresh, BPF_ANY);
	__sync_fetch_and_add(&stamped, 1);
}

static __always_inline int tap(struct __sk_buff *skb, __u32 ingress)
{
	struct cctl_delay_key key = {};
	struct cctl_delay_tap where = {};
	struct cctl_delay_role *role;
	struct stamp *st;
	struct iphdr ip;
	__u32 th[3];
	__u32 slot;

	/* Direct packet access (headers are linear here: veth, and TCP builds its headers in
	 * the linear part); cheaper than bpf_skb_load_bytes on every packet of the run. */
	void *data = (void *)(long)skb->data, *end = (void *)(long)skb->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = data + ETH_HLEN;

	if ((void *)(iph + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    iph->protocol != IPPROTO_TCP_)
		return TCX_NEXT;
	ip = *iph;

	/* sport, dport, seq, ack_seq: the first 12 bytes of the TCP header. */
	__u32 *tcp = data + ETH_HLEN + (ip.ihl & 0xf) * 4;

	if ((void *)(tcp + 3) > end)
		return TCX_NEXT;
	th[0] = tcp[0];
	th[1] = tcp[1];
	th[2] = tcp[2];
	key.saddr = ip.saddr;
	key.daddr = ip.daddr;
	key.sport = th[0] & 0xffff;
	key.dport = th[0] >> 16;
	key.seq = th[1];
	key.ack_seq = th[2];
	key.ip_id = ip.id;
	/* Most packets are not sampled: leave before the tap lookup. A GSO packet (only at
	 * an origin) is decided per segment below. */
	if (skb->gso_segs <= 1 && !sampled(&key))
		return TCX_NEXT;

	__u64 now = bpf_ktime_get_ns();
	struct sk_buff *kskb = bpf_cast_to_kern_ctx(skb);
	where.netns_cookie = BPF_CORE_READ(kskb, dev, nd_net.net, net_cookie);
	where.ifindex = skb->ifindex;
	where.ingress = ingress;
	role = bpf_map_lookup_elem(&taps, &where);
	if (!role)
		return TCX_NEXT;

	slot = role->slot;
	if (slot >= CCTL_DELAY_SLOTS)
		return TCX_NEXT;

	if (slot == 0) {
		/* TCP hands the device GSO packets even with GSO off on it (the segments are
		 * cut after this hook): stamp each segment as it will appear, seq advancing by
		 * gso_size and the IP id by one per segment. */
		__u32 segs = skb->gso_segs, step = skb->gso_size;
		__u32 seq0 = bpf_ntohl(key.seq);
		__u16 id0 = bpf_ntohs(key.ip_id);

		if (segs <= 1 || !step) {
			stamp_origin(&key, now);
			return TCX_NEXT;
		}
		if (segs > MAX_GSO_SEGS) {
			__sync_fetch_and_add(&gso_truncated, 1);
			segs = MAX_GSO_SEGS;
		}
		for (__u32 i = 0; i < MAX_GSO_SEGS; i++) {
			if (i >= segs)
				break;
			key.seq = bpf_htonl(seq0 + i * step);
			key.ip_id = bpf_htons((__u16)(id0 + i));
			stamp_origin(&key, now);
		}
		return TCX_NEXT;
	}
	st = bpf_map_lookup_elem(&stamps, &key);
	if (!st) {
		if (role->terminal)
			__sync_fetch_and_add(&unmatched, 1);
		return TCX_NEXT;
	}
	st->t_ns[slot] = now;
	if (!role->terminal)
		return TCX_NEXT;

	struct cctl_delay_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
	if (!ev) {
		__sync_fetch_and_add(&events_dropped, 1);
	} else {
		ev->key = key;
		ev->ip_len = bpf_ntohs(ip.tot_len);
		ev->pad = 0;
		__builtin_memcpy(ev->t_ns, st->t_ns, sizeof(ev->t_ns));
		bpf_ringbuf_submit(ev, 0);
		__sync_fetch_and_add(&delivered, 1);
	}
	bpf_map_delete_elem(&stamps, &key);
	return TCX_NEXT;
}

SEC("tcx/ingress")
int delay_ingress(struct __sk_buff *skb)
{
	return tap(skb, 1);
}

SEC("tcx/egress")
int delay_egress(struct __sk_buff *skb)
{
	return tap(skb, 0);
}
