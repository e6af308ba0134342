//! TCP Hybla (spec §19.1; Caini & Firrincieli 2004, §3): bpf/algo/hybla.bpf.c.

use crate::catalogue::{p, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: hybla,
    id: 14,
    summary: "TCP Hybla: growth scaled by ρ = RTT/RTT_0 so long paths grow per second like RTT_0",
    paper: "Caini & Firrincieli, IJSCN 22(5) 2004, §3",
    spec: "§19.1",
    native: Some("hybla"),
    clocked: true,
    params: [
        p(
            "rtt0_ms",
            25,
            1,
            1_000,
            "ms",
            "reference RTT: ρ = max(srtt / RTT_0, 1)",
        )
        .sym("RTT_0").live(),
        p(
            "linux_compat",
            0,
            0,
            1,
            "bool",
            "net/ipv4/tcp_hybla.c's arithmetic: ρ in 1/8, 2^ρ table, 1/128 increments, IW = ⌊ρ⌋",
        ),
        ACK_COUNTING,
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &[],
            doc: "tcp_hybla: its fixed-point arithmetic, one increase per ACK event",
            values: &[("linux_compat", 1), ("ack_counting", 1)],
        },
    ],
    vars(h: cctl_hybla_ca) {
        rho ("ratio: ρ = max(srtt / RTT_0, 1)") = f64::from(h.rho_fp) / 1024.0,
        frac ("segments: increase carried below one segment after the last ACK") =
            f64::from(h.carry_q16) / 65536.0,
        min_srtt_us ("usec: smallest srtt ρ was computed from (0 = none)") =
            f64::from(h.min_srtt_x8) / 8.0,
        hybla_en ("0/1: the Hybla rules run (Open state)") = h.hybla_en,
    }
}
