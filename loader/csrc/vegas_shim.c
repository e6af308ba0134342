/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* vegas_shim.c - exports bpf/vegas_math.h (the exact integer code that
 * vegas.bpf.c runs in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "vegas_math.h"

__u32 cctl_vegas_diff_fp(__u32 cwnd, __u32 rtt_us, __u32 base_us)
{
	return vegas_diff_fp(cwnd, rtt_us, base_us);
}

__u32 cctl_vegas_target_cwnd(__u32 cwnd, __u32 rtt_us, __u32 base_us)
{
	return vegas_target_cwnd(cwnd, rtt_us, base_us);
}

__u32 cctl_vegas_update(__u32 cwnd, __u32 rtt_us, __u32 base_us, __u32 in_slow_start, __u32 alpha,
			__u32 beta, __u32 gamma, __u32 integer_diff, __u32 *what)
{
	return vegas_update(cwnd, rtt_us, base_us, in_slow_start, alpha, beta, gamma, integer_diff,
			    what);
}

__u32 cctl_sizeof_vegas_ca(void)
{
	return sizeof(struct cctl_vegas_ca);
}
