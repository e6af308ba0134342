//! TCP Veno (spec §19.2; Fu & Liew, IEEE JSAC 21(2) 2003): bpf/algo/veno.bpf.c.

use crate::catalogue::{p, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: veno,
    id: 15,
    summary: "TCP Veno: a Vegas backlog N tells random from congestive loss (backoff 4/5 or 1/2)",
    paper: "Fu & Liew, IEEE JSAC 21(2) 2003",
    spec: "§19.2",
    native: Some("veno"),
    clocked: true,
    params: [
        p(
            "beta_pkts",
            3,
            1,
            100,
            "packets",
            "congested when the backlog N = w (RTT − BaseRTT) / RTT reaches this",
        )
        .sym("β").live(),
        p(
            "loss_factor_pct",
            80,
            50,
            100,
            "%",
            "ssthresh after a random loss (N < β), % of cwnd; at least Reno's 50",
        )
        .sym("4/5").live(),
        p(
            "linux_compat",
            0,
            0,
            1,
            "bool",
            "net/ipv4/tcp_veno.c's estimate: per-ACK RTT minimum, N in half packets",
        ),
        ACK_COUNTING,
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &[],
            doc: "tcp_veno: its per-ACK RTT minimum, half-packet backlog and RTT counting",
            values: &[("linux_compat", 1)],
        },
    ],
    vars(v: cctl_veno_ca) {
        base_rtt_us ("usec: BaseRTT, the minimum RTT sample (0x7fffffff = none)") = v.base_rtt_us,
        min_rtt_us ("usec: minimum RTT of the current round (0x7fffffff = none)") = v.min_rtt_us,
        rtt_us ("usec: the RTT of the last estimate (0 = none)") = v.last_rtt_us,
        backlog ("packets: N, the flow's backlog at the last estimate") =
            f64::from(v.backlog_fp) / 1024.0,
        congested ("0/1: N >= β at the last estimate") = v.congested,
        inc ("0/1: the next congested RTT adds a segment") = v.inc,
        doing_veno ("0/1: the Veno rules run (Open state)") = v.doing_veno_now,
    }
}
