/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* fast_shim.c - exports bpf/fast_math.h (the exact fixed-point code that
 * fast.bpf.c runs in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "fast_math.h"

__u32 cctl_fast_eta_fp16(__u32 cwnd, __u32 ack_ratio_fp8, __u32 eta_num, __u32 eta_max_pct,
			 __u32 use_ack_ratio)
{
	return fast_eta_fp16(cwnd, ack_ratio_fp8, eta_num, eta_max_pct, use_ack_ratio);
}

__u64 cctl_fast_avg_rtt(__u64 avg_fp, __u32 rtt_us, __u32 eta_fp16)
{
	return fast_avg_rtt(avg_fp, rtt_us, eta_fp16);
}

__u32 cctl_fast_ack_ratio(__u32 ratio_fp8, __u32 pkts_acked)
{
	return fast_ack_ratio(ratio_fp8, pkts_acked);
}

__u32 cctl_fast_window(__u32 cwnd, __u32 base_us, __u64 avg_fp, __u32 alpha, __u32 gamma_fp)
{
	return fast_window(cwnd, base_us, avg_fp, alpha, gamma_fp);
}

__u32 cctl_fast_alpha_level(__u32 level, __u32 tput_kBps, __u32 m0u, __u32 m1l, __u32 m1u,
			    __u32 m2l)
{
	return fast_alpha_level(level, tput_kBps, m0u, m1l, m1u, m2l);
}

__u32 cctl_fast_tput_kBps(__u32 segments, __u32 mss, __u32 elapsed_us)
{
	return fast_tput_kBps(segments, mss, elapsed_us);
}

int cctl_fast_ss_exit(__u32 cwnd, __u32 base_us, __u64 avg_fp, __u32 alpha, __u32 mode,
		      __u32 qdelay_pct)
{
	return fast_ss_exit(cwnd, base_us, avg_fp, alpha, mode, qdelay_pct);
}

__u32 cctl_fast_spread(__u32 cwnd, __u32 target, __u32 ref, __u32 *cnt, __u32 acked)
{
	return fast_spread(cwnd, target, ref, cnt, acked);
}

__u32 cctl_fast_loss_ssthresh(__u32 cwnd, __u32 min_win)
{
	return fast_loss_ssthresh(cwnd, min_win);
}

__u32 cctl_sizeof_fast_ca(void)
{
	return sizeof(struct cctl_fast_ca);
}
