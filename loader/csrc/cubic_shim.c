/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* cubic_shim.c - exports bpf/cubic_math.h (the exact fixed-point code that
 * cubic.bpf.c runs in the kernel) to Rust unit tests on the host. The state
 * struct is passed as the skeleton's cctl_cubic_ca; the parameter structs are
 * built here from scalars so that Rust needs no mirror of them. */
#include <linux/types.h>
#include "cctl.h"
#include "cubic_math.h"

__u32 cctl_cubic_cbrt(__u64 x)
{
	return cubic_cbrt(x);
}

__u32 cctl_cubic_k_1024(__u32 diff, __u32 c_1024)
{
	return cubic_k_1024(diff, c_1024);
}

__u64 cctl_cubic_us_to_1024(__u64 us)
{
	return cubic_us_to_1024(us);
}

__u32 cctl_cubic_w_target(__u64 t_1024, __u32 k_1024, __u32 origin, __u32 c_1024)
{
	return cubic_w_target(t_1024, k_1024, origin, c_1024);
}

__u32 cctl_cubic_reno_acks_per_segment(__u32 cwnd, __u32 beta_fp)
{
	return cubic_reno_acks_per_segment(cwnd, beta_fp);
}

void cctl_cubic_update(struct cctl_cubic_ca *ca, __u32 beta_fp, __u32 c_1024,
		       __u32 fast_convergence, __u32 tcp_friendliness, __u32 cwnd, __u32 acked,
		       __u32 now_us)
{
	struct cubic_params p = { beta_fp, c_1024, fast_convergence, tcp_friendliness };

	cubic_update(ca, &p, cwnd, acked, now_us);
}

__u32 cctl_cubic_on_reduction(struct cctl_cubic_ca *ca, __u32 beta_fp, __u32 fast_convergence,
			      __u32 w)
{
	struct cubic_params p = { beta_fp, 410, fast_convergence, 1 };

	return cubic_on_reduction(ca, &p, w);
}

__u32 cctl_cubic_new_w_max(__u32 w, __u32 w_max, __u32 beta_fp, __u32 fast_convergence)
{
	return cubic_new_w_max(w, w_max, beta_fp, fast_convergence);
}

__u32 cctl_cubic_ssthresh(__u32 w, __u32 beta_fp)
{
	return cubic_ssthresh_of(w, beta_fp);
}

void cctl_cubic_hystart_round(struct cctl_cubic_ca *ca, __u32 now_us, __u32 snd_nxt)
{
	cubic_hystart_round(ca, now_us, snd_nxt);
}

int cctl_cubic_hystart_update(struct cctl_cubic_ca *ca, __u32 detect, __u32 low_window,
			      __u32 ack_delta_us, __u32 delay_min_us, __u32 delay_max_us,
			      __u32 min_samples, __u32 cwnd, __u32 delay_us, __u32 now_us,
			      __u32 snd_una, __u32 snd_nxt, __u32 ack_delay_us, int paced)
{
	struct cubic_hystart_params h = { detect,       low_window,   ack_delta_us,
					  delay_min_us, delay_max_us, min_samples };

	return cubic_hystart_update(ca, &h, cwnd, delay_us, now_us, snd_una, snd_nxt,
				    ack_delay_us, paced);
}

__u32 cctl_sizeof_cubic_ca(void)
{
	return sizeof(struct cctl_cubic_ca);
}
