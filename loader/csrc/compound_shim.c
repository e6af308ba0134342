/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* compound_shim.c - exports bpf/compound_math.h (the exact fixed-point code that
 * compound.bpf.c runs in the kernel) to Rust unit tests on the host. */
#include <linux/types.h>
#include "cctl.h"
#include "compound_math.h"

__u32 cctl_compound_log2_q16(__u64 x)
{
	return compound_log2_q16(x);
}

__u64 cctl_compound_pow_fp(__u32 win, __u32 k_pm)
{
	return compound_pow_fp(win, k_pm);
}

__u32 cctl_compound_diff_fp(__u32 win, __u32 base_us, __u32 rtt_us)
{
	return compound_diff_fp(win, base_us, rtt_us);
}

__u32 cctl_compound_dwnd_update(__u32 win, __u32 dwnd_fp, __u32 diff_fp, __u32 alpha_pm,
				__u32 k_pm, __u32 zeta_pm, __u32 gamma_pkts)
{
	return compound_dwnd_update(win, dwnd_fp, diff_fp, alpha_pm, k_pm, zeta_pm, gamma_pkts);
}

__u32 cctl_compound_loss(__u32 win, __u32 *cwnd_reno, __u32 beta_pm)
{
	return compound_loss(win, cwnd_reno, beta_pm);
}

void cctl_compound_reno_ai(__u32 *cwnd_reno, __u32 *cnt, __u32 win, __u32 acked)
{
	compound_reno_ai(cwnd_reno, cnt, win, acked);
}

void cctl_compound_sync(__u32 snd_cwnd, __u32 *cwnd_reno, __u32 *dwnd_fp)
{
	compound_sync(snd_cwnd, cwnd_reno, dwnd_fp);
}

__u32 cctl_sizeof_compound_ca(void)
{
	return sizeof(struct cctl_compound_ca);
}
