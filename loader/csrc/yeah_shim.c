/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* yeah_shim.c - exports bpf/yeah_math.h (the exact integer code that yeah.bpf.c
 * runs in the kernel) to Rust unit tests on the host. The YeAH state crosses as
 * the skeleton's struct cctl_yeah_ca, the tunables as scalars (Rust has no
 * generated mirror of struct yeah_params, and none is written by hand). */
#include <linux/types.h>
#include "cctl.h"
#include "yeah_math.h"

#define YEAH_PARAMS_ARGS                                                                   \
	__u32 q_max_pkts, __u32 phy, __u32 gamma, __u32 epsilon_shift, __u32 delta_shift,   \
		__u32 rho_rtts, __u32 zeta_rtts, __u32 linux_rules
#define YEAH_PARAMS_INIT                                                                   \
	{ q_max_pkts, phy, gamma, epsilon_shift, delta_shift, rho_rtts, zeta_rtts, linux_rules }

__u32 cctl_yeah_queue(__u32 cwnd, __u32 rtt_us, __u32 base_us)
{
	return yeah_queue(cwnd, rtt_us, base_us);
}

__u32 cctl_yeah_level_fp(__u32 rtt_us, __u32 base_us)
{
	return yeah_level_fp(rtt_us, base_us);
}

__u32 cctl_yeah_initial_reno_count(__u32 cwnd, YEAH_PARAMS_ARGS)
{
	struct yeah_params p = YEAH_PARAMS_INIT;

	return yeah_initial_reno_count(cwnd, &p);
}

__u32 cctl_yeah_per_rtt(struct cctl_yeah_ca *ca, __u32 cwnd, __u32 *ssthresh, __u32 rtt_us,
			__u32 base_us, YEAH_PARAMS_ARGS)
{
	struct yeah_params p = YEAH_PARAMS_INIT;

	return yeah_per_rtt(ca, cwnd, ssthresh, rtt_us, base_us, &p);
}

__u32 cctl_yeah_ssthresh(struct cctl_yeah_ca *ca, __u32 cwnd, YEAH_PARAMS_ARGS)
{
	struct yeah_params p = YEAH_PARAMS_INIT;

	return yeah_loss_ssthresh(ca, cwnd, &p);
}

__u32 cctl_sizeof_yeah_ca(void)
{
	return sizeof(struct cctl_yeah_ca);
}
