/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* htcp_shim.c - exports bpf/htcp_math.h (the exact fixed-point code that
 * htcp.bpf.c runs in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "htcp_math.h"

__u32 cctl_htcp_factor_fp(__u64 delta_us, __u64 delta_l_us, __u32 tmin_us, __u32 use_rtt_scaling,
			  __u32 rtt_ref_us, __u32 s_lo, __u32 s_hi)
{
	return htcp_factor_fp(delta_us, delta_l_us, tmin_us, use_rtt_scaling, rtt_ref_us, s_lo,
			      s_hi);
}

__u32 cctl_htcp_alpha_fp(__u32 factor_fp, __u32 beta_fp)
{
	return htcp_alpha_fp(factor_fp, beta_fp);
}

__u32 cctl_htcp_beta_fp(__u32 maxb, __u32 old_maxb, __u32 use_bandwidth_switch, __u32 delta_b_pct,
			__u8 *modeswitch, __u32 tmin_us, __u32 tmax_us, __u32 tmin_adaptive_us,
			__u32 beta_lo, __u32 beta_hi, __u32 fixed_beta_fp)
{
	return htcp_beta_fp(maxb, old_maxb, use_bandwidth_switch, delta_b_pct, modeswitch, tmin_us,
			    tmax_us, tmin_adaptive_us, beta_lo, beta_hi, fixed_beta_fp);
}

__u32 cctl_htcp_fade_tmax(__u32 tmin_us, __u32 tmax_us)
{
	return htcp_fade_tmax(tmin_us, tmax_us);
}

__u32 cctl_htcp_ssthresh(__u32 cwnd, __u32 beta_fp)
{
	return htcp_fp_ssthresh(cwnd, beta_fp);
}

__u32 cctl_sizeof_htcp_ca(void)
{
	return sizeof(struct cctl_htcp_ca);
}
