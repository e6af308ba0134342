/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* illinois_shim.c - exports bpf/illinois_math.h (the exact fixed-point code that
 * illinois.bpf.c runs in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "illinois_math.h"

__u32 cctl_illinois_alpha_fp(__u32 da, __u32 dm, __u32 cur_alpha, __u8 *rtt_above, __u8 *rtt_low,
			     __u32 theta, __u32 d1_pm, __u32 amin, __u32 amax)
{
	return illinois_alpha_fp(da, dm, cur_alpha, rtt_above, rtt_low, theta, d1_pm, amin, amax);
}

__u32 cctl_illinois_beta_fp(__u32 da, __u32 dm, __u32 d2_pm, __u32 d3_pm, __u32 bmin, __u32 bmax)
{
	return illinois_beta_fp(da, dm, d2_pm, d3_pm, bmin, bmax);
}

__u32 cctl_illinois_avg_delay(__u64 sum_us, __u32 cnt, __u32 base_us)
{
	return illinois_avg_delay(sum_us, cnt, base_us);
}

__u32 cctl_illinois_ssthresh(__u32 cwnd, __u32 beta_fp)
{
	return illinois_fp_ssthresh(cwnd, beta_fp);
}

__u32 cctl_illinois_ai_divisor(__u32 cwnd, __u32 alpha_fp)
{
	return illinois_ai_divisor(cwnd, alpha_fp);
}

__u32 cctl_sizeof_illinois_ca(void)
{
	return sizeof(struct cctl_illinois_ca);
}
