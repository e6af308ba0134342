/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* westwood_shim.c - exports bpf/westwood_math.h (the exact fixed-point code that
 * westwood.bpf.c runs in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "westwood_math.h"

void cctl_westwood_filter(struct cctl_westwood_ca *ca, __u32 bk, __u32 delta_us, __u32 shift)
{
	westwood_filter(ca, bk, delta_us, shift);
}

__u32 cctl_westwood_acked_count(__u32 cumul, __u32 mss, __u32 *accounted)
{
	return westwood_acked_count(cumul, mss, accounted);
}

void cctl_westwood_ack(struct cctl_westwood_ca *ca, __u32 now_us, __u32 snd_una, __u32 mss,
		       __u32 slowpath, __u32 win_min_us, __u32 shift)
{
	westwood_ack(ca, now_us, snd_una, mss, slowpath, win_min_us, shift);
}

__u32 cctl_westwood_bw_rttmin(__u64 bw_Bps, __u32 rtt_min_us, __u32 mss)
{
	return westwood_bw_rttmin(bw_Bps, rtt_min_us, mss);
}

__u32 cctl_sizeof_westwood_ca(void)
{
	return sizeof(struct cctl_westwood_ca);
}
