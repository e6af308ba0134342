/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* africa_shim.c - exports bpf/africa_math.h (the exact fixed-point code that
 * africa.bpf.c runs in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "africa_math.h"

__u32 cctl_africa_delta_q10(__u32 cwnd, __u32 rtt_us, __u32 base_us)
{
	return africa_delta_q10(cwnd, rtt_us, base_us);
}

__u8 cctl_africa_mode_for(__u32 delta_q10, __u32 alpha_cpkt)
{
	return africa_mode_for(delta_q10, alpha_cpkt);
}

void cctl_africa_rtt_sample(struct cctl_africa_ca *ca, __u32 rtt_us)
{
	africa_rtt_sample(ca, rtt_us);
}

int cctl_africa_round_over(__u32 ack, __u32 beg_snd_nxt)
{
	return africa_round_over(ack, beg_snd_nxt);
}

void cctl_africa_round_end(struct cctl_africa_ca *ca, __u32 cwnd, __u32 base_us,
			   __u32 alpha_cpkt)
{
	africa_round_end(ca, cwnd, base_us, alpha_cpkt);
}

__u32 cctl_sizeof_africa_ca(void)
{
	return sizeof(struct cctl_africa_ca);
}
