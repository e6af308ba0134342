/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* bic_shim.c - exports bpf/bic_math.h (the exact fixed-point code that
 * bic.bpf.c runs in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "bic_math.h"

__u32 cctl_bic_inc_fp(__u32 w, __u32 w_1, __u32 b, __u32 smax, __u32 smooth,
		      __u32 whole_delta)
{
	return bic_inc_fp(w, w_1, b, smax, smooth, whole_delta);
}

__u32 cctl_bic_effective_inc_fp(__u32 w, __u32 w_1, __u32 low_window, __u32 b, __u32 smax,
				__u32 smooth, __u32 boost_max_cnt, __u32 whole_delta)
{
	return bic_effective_inc_fp(w, w_1, low_window, b, smax, smooth, boost_max_cnt,
				    whole_delta);
}

__u32 cctl_bic_cnt(__u32 w, __u32 inc_fp, __u32 rescale, __u32 delayed_ack)
{
	return bic_cnt(w, inc_fp, rescale, delayed_ack);
}

__u32 cctl_bic_new_w_max(__u32 w, __u32 w_1, __u32 beta_fp, __u32 fast_convergence)
{
	return bic_new_w_max(w, w_1, beta_fp, fast_convergence);
}

__u32 cctl_bic_ssthresh(__u32 w, __u32 beta_fp, __u32 low_window)
{
	return bic_ssthresh_of(w, beta_fp, low_window);
}

__u32 cctl_bic_delayed_ack(__u32 delayed_ack, __u32 pkts_acked)
{
	return bic_delayed_ack(delayed_ack, pkts_acked);
}

__u32 cctl_sizeof_bic_ca(void)
{
	return sizeof(struct cctl_bic_ca);
}
