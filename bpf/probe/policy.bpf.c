// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* policy.bpf.c - congestion control for new TCP connections, chosen by port or
 * by cgroup, without the application changing (`cctl policy`).
 *
 * A sockops program that calls bpf_setsockopt(TCP_CONGESTION) at the two
 * callbacks where a new connection gets its congestion control:
 *   - BPF_SOCK_OPS_TCP_CONNECT_CB (active side, matched on the REMOTE port):
 *     tcp_connect() runs it in SYN_SENT, before the SYN is built, so a CC that
 *     needs ECN still gets it negotiated;
 *   - BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB (accepted side, matched on the LOCAL
 *     port): tcp_init_transfer() runs it just before tcp_init_congestion_control().
 * Both run with the socket locked, where net/core/filter.c allows TCP_CONGESTION;
 * in BPF context the kernel neither autoloads modules nor applies
 * tcp_allowed_congestion_control (sockopt_ns_capable()). Setting the CC here
 * does not re-enter this program: tcp_reinit_congestion_control() only calls
 * the new CC's init (a CC whose init itself calls bpf_setsockopt(TCP_CONGESTION)
 * gets EBUSY from the bpf_chg_cc_inprogress guard). "cdg" is refused by the
 * kernel (ENOTSUPP) and therefore by the loader.
 *
 * One program instance is loaded per attachment; `rule_cgroup_id` (rodata) says
 * which: 0 = the port-rule instance, attached to the cgroup v2 root (every
 * socket of the host, every network namespace), which looks the port up in
 * `port_rules`; otherwise the instance of one cgroup rule, attached to that
 * cgroup (its whole subtree), which reads its rule from `cgroup_rules`. The two
 * maps are pinned and shared by all instances; they are the source of truth.
 *
 * Precedence: the first program to choose wins. A socket whose CC was already
 * chosen explicitly - by the application (setsockopt(TCP_CONGESTION), inherited
 * by accepted sockets from their listener) or by a policy program that ran
 * earlier - has icsk_ca_setsockopt set and is left alone (counted in `kept`).
 * The kernel runs a socket's cgroup programs from its own cgroup up to the root,
 * so: the application's choice > the deepest cgroup rule > its ancestors' rules
 * > port rules (at the root). Unmatched sockets cost one hash lookup.
 *
 * A rule whose CC is not registered any more (unloaded) makes bpf_setsockopt
 * fail with ENOENT: the connection keeps the namespace default, and the rule
 * counts it in `failed`/`last_err`, which `cctl policy list` shows.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

char _license[] SEC("license") = "Dual BSD/GPL";

#define SOL_TCP 6
#define TCP_CONGESTION 13
#define POLICY_CC_LEN 16 /* TCP_CA_NAME_MAX, with the NUL */
#define POLICY_MAX_RULES 1024

/* One rule: what to set, and what happened. Written by user space (cc, counters
 * zeroed), counters updated here. Shared with Rust through the skeleton. */
struct policy_rule {
	char cc[POLICY_CC_LEN]; /* congestion control to set, NUL-padded */
	__u64 applied;		/* connections given cc */
	__u64 kept;		/* matched, but the CC was already chosen (app or deeper rule) */
	__u64 failed;		/* bpf_setsockopt failed: the connection kept its CC */
	__s64 last_err;		/* errno of the last failure (negative), 0 if none */
};

/* Set by the loader before load: 0 = port rules, else the rule's cgroup id
 * (the cgroup directory's inode number). */
const volatile __u64 rule_cgroup_id = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POLICY_MAX_RULES);
	__type(key, __u32); /* port, host byte order */
	__type(value, struct policy_rule);
} port_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POLICY_MAX_RULES);
	__type(key, __u64); /* cgroup id */
	__type(value, struct policy_rule);
} cgroup_rules SEC(".maps");

/* Whether the socket's CC was already chosen explicitly (see the header). */
static __always_inline bool policy_cc_chosen(struct bpf_sock_ops *skops)
{
	struct bpf_sock *sk = skops->sk;
	struct tcp_sock *tp;

	if (!sk)
		return false;
	tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return false;
	return BPF_CORE_READ_BITFIELD(&tp->inet_conn, icsk_ca_setsockopt);
}

SEC("sockops")
int cctl_policy(struct bpf_sock_ops *skops)
{
	char cc[POLICY_CC_LEN];
	struct policy_rule *rule;
	__u32 op = skops->op;
	long err;

	if (op != BPF_SOCK_OPS_TCP_CONNECT_CB && op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB)
		return 1;

	if (rule_cgroup_id) {
		__u64 id = rule_cgroup_id;

		rule = bpf_map_lookup_elem(&cgroup_rules, &id);
	} else {
		/* remote_port is network order in the upper half, local_port host order */
		__u32 port = op == BPF_SOCK_OPS_TCP_CONNECT_CB ? bpf_ntohl(skops->remote_port)
							       : skops->local_port;

		rule = bpf_map_lookup_elem(&port_rules, &port);
	}
	if (!rule)
		return 1;

	if (policy_cc_chosen(skops)) {
		__sync_fetch_and_add(&rule->kept, 1);
		return 1;
	}
	/* a stack copy: user space may rewrite the rule meanwhile */
	__builtin_memcpy(cc, rule->cc, sizeof(cc));
	cc[POLICY_CC_LEN - 1] = 0;
	err = bpf_setsockopt(skops, SOL_TCP, TCP_CONGESTION, cc, sizeof(cc));
	if (err) {
		__sync_fetch_and_add(&rule->failed, 1);
		rule->last_err = err;
	} else {
		__sync_fetch_and_add(&rule->applied, 1);
	}
	return 1;
}
