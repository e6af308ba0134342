/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* cctl.h - the only declaration of data shared between the BPF programs and Rust.
 *
 * Rust never mirrors these by hand: libbpf-cargo emits them into each skeleton's
 * `types` module (dummy instances in trace.bpf.c and in each algorithm's program
 * make sure of that),
 * and a test checks that the sizes agree.
 *
 * Include after vmlinux.h (BPF side) or <linux/types.h> (host-side tests).
 */
#ifndef CCTL_H
#define CCTL_H

/* Upper 16 bits of cctl_meas.magic: marks a socket's icsk_ca_priv as ours. */
#define CCTL_CA_MAGIC 0xCC7Cu
/* Bytes of icsk_ca_priv copied into every sample (13 u64 on Linux >= 4.x). */
#define CCTL_CA_PRIV_BYTES 104
/* Fixed-point scale of β and α in the shared state: 1.0 == 1 << 10. */
#define CCTL_FP_SHIFT 10
#define CCTL_FP_ONE (1u << CCTL_FP_SHIFT)

/* Linkage of the fixed-point rules of bpf/algo/<algo>_math.h: inlined into the BPF
 * programs; loader/build.rs compiles each header for the host with CCTL_MATH
 * empty, so that unit tests call the very same functions. */
#ifndef CCTL_MATH
#define CCTL_MATH static inline __attribute__((always_inline))
#endif


/*
 * Each algorithm's private state (struct cctl_<algo>_ca, starting with a
 * struct cctl_meas) is declared in bpf/algo/<algo>_math.h next to its fixed-point
 * rules; its BPF program defines one zeroed global of that type so that the
 * skeleton (and so Rust) gets the layout. It must fit CCTL_CA_PRIV_BYTES.
 */

/*
 * The shared per-flow measurement layer (spec §0.3, §5 "per-flow state", §18.3).
 * It lives at the start of every cctl algorithm's icsk_ca_priv, so the collector
 * can read it from any of our flows without knowing the algorithm.
 * 48 bytes.
 */
struct cctl_meas {
	__u32 magic;          /* CCTL_CA_MAGIC << 16 | algo id << 8 | layout version */
	__u32 tmin_us;        /* Tmin: minimum RTT sample seen, usec (0 = none yet) */
	__u32 tmax_us;        /* Tmax: maximum RTT sample since the last reset, usec */
	__u32 srtt_us;        /* EWMA (gain 1/8) of the RTT samples, usec */
	__u64 cong_us;        /* tcp_mstamp of the last congestion event, usec; Δ = now - cong_us */
	__u64 epoch_bytes0;   /* tp->bytes_acked when the current congestion epoch began, bytes */
	__u64 epoch_tput_Bps; /* throughput over the last complete epoch, bytes/s (0 = none yet) */
	__u32 backoffs;       /* number of window reductions (ssthresh calls) so far */
	__u16 last_beta;      /* β applied at the last reduction, << CCTL_FP_SHIFT */
	__u16 _pad;
};

/* Reno's private state: only the shared layer. */
struct cctl_reno_ca {
	struct cctl_meas m;
};

/* Flags of cctl_sample.flags. */
#define CCTL_SAMPLE_STATE_CHANGE 1u /* emitted because the CA state changed */
#define CCTL_SAMPLE_OURS 2u         /* icsk_ca_priv carries a cctl_meas */
#define CCTL_SAMPLE_FIRST 4u        /* the flow's first sample from this collector */

/*
 * One collector sample, sent through the ring buffer (trace.bpf.c).
 * Addresses are in network byte order; IPv4 uses the first 4 bytes.
 */
struct cctl_sample {
	__u64 ts_ns;          /* bpf_ktime_get_ns(), CLOCK_MONOTONIC, ns */
	__u64 cookie;         /* socket cookie */
	__u64 mstamp_us;      /* tp->tcp_mstamp, usec (clock of cctl_meas.cong_us) */
	__u64 bytes_acked;    /* tp->bytes_acked, bytes (RFC 4898 tcpEStatsAppHCThruOctetsAcked) */
	__u64 netns_cookie;   /* the socket's network namespace (getsockopt SO_NETNS_COOKIE) */
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;          /* host byte order */
	__u16 dport;          /* host byte order */
	__u16 family;         /* AF_INET or AF_INET6 */
	__u8 ca_state;        /* TCP_CA_Open .. TCP_CA_Loss */
	__u8 flags;           /* CCTL_SAMPLE_* */
	__u32 snd_cwnd;       /* segments */
	__u32 snd_ssthresh;   /* segments */
	__u32 srtt_us;        /* kernel srtt, usec */
	__u32 rttvar_us;      /* kernel mdev (rttvar), usec */
	__u32 min_rtt_us;     /* kernel windowed min RTT, usec */
	__u32 lost_out;       /* segments currently marked lost */
	__u32 retrans_out;    /* retransmitted segments in flight */
	__u32 total_retrans;  /* retransmitted segments over the connection's life */
	__u32 packets_out;    /* segments sent and not yet acked */
	__u32 in_flight;      /* packets_out - (sacked_out + lost_out) + retrans_out, segments */
	__u32 mss_cache;      /* current MSS, bytes */
	__u32 delivered;      /* segments delivered (tp->delivered) */
	__u32 prior_cwnd;     /* cwnd when the current/last reduction began (tp->prior_cwnd), segments */
	__u32 ca_map_id;      /* id of the struct_ops map implementing the CC (its loaded version); 0 = native */
	char cc_name[16];     /* icsk_ca_ops->name */
	/* Entries into CWR, Recovery and Loss since this collector attached, counted in the
	 * kernel at every tcp_set_ca_state() (tracepoint tcp_cong_state_set) that changes the
	 * state: exact, unlike changes between two samples. count */
	__u32 cwr_entries;
	__u32 recovery_entries;
	__u32 loss_entries;
	__u32 _pad;
	__u8 ca_priv[CCTL_CA_PRIV_BYTES]; /* raw icsk_ca_priv: a cctl_*_ca when flags has OURS */
};

/* Bytes of a sample without ca_priv: what the collector sends for a flow whose CC is not
 * one of cctl's (no CCTL_SAMPLE_OURS); user space reads the missing ca_priv as zeros. */
#define CCTL_SAMPLE_SHORT_BYTES 168
_Static_assert(__builtin_offsetof(struct cctl_sample, ca_priv) == CCTL_SAMPLE_SHORT_BYTES,
	       "CCTL_SAMPLE_SHORT_BYTES must be the offset of cctl_sample.ca_priv");

/* A close record (close.bpf.c): one per TCP socket when it is destroyed; the fields
 * after `flags` up to ca_ns are valid only with CCTL_CLOSE_SEEN (tcp_probe saw the
 * socket: it received a segment once established). */
#define CCTL_CLOSE_SEEN 1

struct cctl_close_record {
	__u64 ts_ns;          /* when it was destroyed, CLOCK_MONOTONIC ns */
	__u64 first_ns;       /* first segment received once established, CLOCK_MONOTONIC ns */
	__u64 cookie;         /* socket cookie */
	__u64 netns_cookie;   /* its network namespace */
	__u64 bytes_acked;    /* tcpi_bytes_acked, bytes */
	__u64 bytes_received; /* tcpi_bytes_received, bytes */
	__u64 bytes_retrans;  /* tcpi_bytes_retrans, bytes */
	__u64 busy_us;        /* tcpi_busy_time: data in flight, limited or not, usec */
	__u64 rwnd_limited_us;   /* tcpi_rwnd_limited, usec */
	__u64 sndbuf_limited_us; /* tcpi_sndbuf_limited, usec */
	__u64 ca_ns[5];       /* time in CA state Open, Disorder, CWR, Recovery, Loss, ns */
	__u8 saddr[16];
	__u8 daddr[16];
	__u16 sport;          /* host byte order */
	__u16 dport;          /* host byte order */
	__u16 family;         /* AF_INET or AF_INET6 */
	__u16 flags;          /* CCTL_CLOSE_* */
	__u32 segs_out;       /* tcpi_segs_out, segments */
	__u32 segs_in;        /* tcpi_segs_in, segments */
	__u32 data_segs_out;  /* tcpi_data_segs_out, segments */
	__u32 data_segs_in;   /* tcpi_data_segs_in, segments */
	__u32 total_retrans;  /* tcpi_total_retrans, segments */
	__u32 delivered_ce;   /* tcpi_delivered_ce: segments delivered with ECN CE echoed */
	__u32 snd_cwnd;       /* at destruction, segments */
	__u32 min_cwnd;       /* segments */
	__u32 max_cwnd;       /* segments */
	__u32 min_srtt_us;    /* smallest srtt seen, usec */
	__u32 mean_srtt_us;   /* mean of srtt over the segments received, usec */
	__u32 max_srtt_us;    /* largest srtt seen, usec */
	__u32 ca_map_id;      /* struct_ops map id of a BPF CC (its loaded version); 0 = native */
	char cc_name[16];     /* icsk_ca_ops->name */
};

/*
 * Per-packet delay taps (delay.bpf.c). A tap is one hook (tcx ingress or egress) of one
 * device in one network namespace; the loader tells each tap which timestamp slot it
 * writes. Slot 0 is where a packet enters the testbed (its origin); a terminal tap is
 * where it leaves (its destination), and writes the event.
 */
#define CCTL_DELAY_SLOTS 10

/* A packet's identity along its path: nothing here changes from hop to hop. All fields in
 * network byte order, as on the wire. */
struct cctl_delay_key {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u32 seq;
	__u32 ack_seq;
	__u16 ip_id;   /* per-socket counter of DF packets: tells a retransmission apart */
	__u16 pad;
};

/* Where a tap is: key of the `taps` map. */
struct cctl_delay_tap {
	__u64 netns_cookie;
	__u32 ifindex;
	__u32 ingress;        /* 1 = ingress, 0 = egress */
};

/* What a tap does: value of the `taps` map. */
struct cctl_delay_role {
	__u32 slot;           /* 0 .. CCTL_DELAY_SLOTS-1 */
	__u32 terminal;       /* 1 = the packet's destination: emit the event */
};

/* One sampled packet that reached its destination. */
struct cctl_delay_event {
	struct cctl_delay_key key;
	__u32 ip_len;         /* IP total length, bytes */
	__u32 pad;
	__u64 t_ns[CCTL_DELAY_SLOTS]; /* CLOCK_MONOTONIC ns per slot; 0 = the packet did not pass it */
};

#endif /* CCTL_H */
