/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* scalable_shim.c - exports bpf/scalable_math.h (the exact fixed-point code that
 * scalable.bpf.c runs in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "scalable_math.h"

__u8 cctl_scalable_mode(__u32 cwnd, __u32 low_window)
{
	return scalable_mode(cwnd, low_window);
}

void cctl_scalable_ai_args(__u8 mode, __u32 cwnd, __u32 acked, __u32 a_per_10k, __u32 *w,
			   __u32 *n)
{
	scalable_ai_args(mode, cwnd, acked, a_per_10k, w, n);
}

int cctl_scalable_counts_packets(__u32 a_per_10k)
{
	return scalable_counts_packets(a_per_10k);
}

__u32 cctl_scalable_incr_ppm(__u8 mode, __u32 cwnd, __u32 a_per_10k)
{
	return scalable_incr_ppm(mode, cwnd, a_per_10k);
}

__u32 cctl_scalable_ssthresh(__u32 cwnd, __u32 beta_per_mille)
{
	return scalable_ssthresh_segs(cwnd, beta_per_mille);
}

__u32 cctl_sizeof_scalable_ca(void)
{
	return sizeof(struct cctl_scalable_ca);
}
