/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* highspeed_shim.c - exports bpf/highspeed_math.h (the exact fixed-point code that
 * highspeed.bpf.c and africa.bpf.c run in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "highspeed_math.h"

__u32 cctl_hstcp_table_index(__u32 cwnd)
{
	return hstcp_table_index(cwnd);
}

void cctl_hstcp_table_ab(__u32 idx, __u32 *a_q16, __u32 *b_q16)
{
	hstcp_table_ab(idx, a_q16, b_q16);
}

__u32 cctl_hstcp_table_row(__u32 idx, __u32 *md)
{
	*md = hstcp_rows_md[idx % HSTCP_TABLE_ROWS];
	return hstcp_rows_cwnd[idx % HSTCP_TABLE_ROWS];
}

__u32 cctl_hstcp_log2_q16(__u64 x)
{
	return hstcp_log2_q16(x);
}

__u32 cctl_hstcp_exp2_q16(__s64 x_q16)
{
	return hstcp_exp2_q16(x_q16);
}

void cctl_hstcp_formula_ab(__u32 w, __u32 low_window, __u32 high_window, __u32 high_p_ppb,
			   __u32 high_decrease_per_mille, __u32 *a_q16, __u32 *b_q16)
{
	hstcp_formula_ab(w, low_window, high_window, high_p_ppb, high_decrease_per_mille, a_q16,
			 b_q16);
}

void cctl_hstcp_ai_step(__u32 *cwnd, __u32 *cnt, __u32 n, __u32 a_q16, __u32 clamp)
{
	hstcp_ai_step(cwnd, cnt, n, a_q16, clamp);
}

__u32 cctl_hstcp_limited_ss_a_q16(__u32 cwnd, __u32 max_ssthresh)
{
	return hstcp_limited_ss_a_q16(cwnd, max_ssthresh);
}

__u32 cctl_hstcp_ssthresh(__u32 cwnd, __u32 b_q16)
{
	return hstcp_ssthresh_segs(cwnd, b_q16);
}

__u32 cctl_sizeof_highspeed_ca(void)
{
	return sizeof(struct cctl_highspeed_ca);
}
