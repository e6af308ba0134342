/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* common_shim.c - sizes of the structs in bpf/cctl.h, so that a Rust test can
 * check the skeleton's generated types against the C compiler's layout. */
#include <linux/types.h>
#include "cctl.h"

/* Sizes of the shared structs, so a Rust test can check the skeleton's types. */
__u32 cctl_sizeof_sample(void)
{
	return sizeof(struct cctl_sample);
}

__u32 cctl_sizeof_meas(void)
{
	return sizeof(struct cctl_meas);
}
