/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* ca_ops.bpf.h - which loaded version of a BPF congestion control a socket runs.
 *
 * A socket keeps the tcp_congestion_ops it was initialised with: after
 * `cctl upgrade` swaps the implementation registered under a name
 * (bpf_link_update on the struct_ops link), established sockets still run the
 * old one. For a BPF congestion control the ops a socket points at are the
 * `data` of the struct_ops map's kernel value (kernel/bpf/bpf_struct_ops.c:
 * struct bpf_struct_ops_map { ... kvalue { common; data[] } }), so the map's id
 * names the version: user space knows each version's map id.
 *
 * For tracing and iterator programs (plain kernel reads, BTF + CO-RE).
 */
#ifndef CCTL_CA_OPS_BPF_H
#define CCTL_CA_OPS_BPF_H

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

/* ops->owner of every BPF-implemented struct_ops (include/linux/bpf.h:
 * BPF_MODULE_OWNER = 0xeB9F << 2 + POISON_POINTER_DELTA, which is
 * 0xdead000000000000 on x86-64 and arm64). */
#define CCTL_BPF_MODULE_OWNER ((void *)((0xeB9FUL << 2) + 0xdead000000000000UL))

/* The id of the struct_ops map whose programs implement `ops`; 0 for a native
 * (built-in or module) congestion control. */
static __always_inline __u32 cc_ops_map_id(const struct tcp_congestion_ops *ops)
{
	struct bpf_struct_ops_map *st;
	enum bpf_map_type type = 0;
	void *owner = NULL;
	__u32 id = 0;

	bpf_probe_read_kernel(&owner, sizeof(owner), &ops->owner);
	if (owner != CCTL_BPF_MODULE_OWNER)
		return 0;
	st = (void *)ops - bpf_core_field_offset(struct bpf_struct_ops_map, kvalue) -
	     bpf_core_field_offset(struct bpf_struct_ops_value, data);
	bpf_probe_read_kernel(&type, sizeof(type), &st->map.map_type);
	if (type != BPF_MAP_TYPE_STRUCT_OPS)
		return 0;
	bpf_probe_read_kernel(&id, sizeof(id), &st->map.id);
	return id;
}

#endif /* CCTL_CA_OPS_BPF_H */
