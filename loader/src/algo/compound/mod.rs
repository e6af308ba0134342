//! Compound TCP (spec §12; Tan, Song, Zhang, Sridharan, Infocom 2006; \[P3\] §II, §V):
//! bpf/algo/compound.bpf.c.

use crate::catalogue::{p, ACK_COUNTING};

pub mod model;
pub mod replay;

crate::algo::declare_algorithm! {
    key: compound,
    id: 11,
    summary: "Compound TCP: Reno window plus a delay window that grows binomially until γ packets queue",
    paper: "Tan, Song, Zhang, Sridharan 2006; [P3] §II, §V; [P2] Fig. 7",
    spec: "§12",
    native: None,
    clocked: true,
    params: [
        p(
            "alpha_pm",
            125,
            1,
            10_000,
            "per-mille",
            "α: scale of the delay window's binomial growth α·win^k − 1 per RTT",
        )
        .sym("α").live(),
        p(
            "beta_pm",
            500,
            0,
            1000,
            "per-mille",
            "β: the total window drops to (1 − β)·win on loss",
        )
        .sym("β").live(),
        p(
            "k_pm",
            750,
            0,
            1000,
            "per-mille",
            "k: exponent of the delay window's growth α·win^k",
        )
        .sym("k").live(),
        p(
            "zeta_pm",
            1000,
            0,
            10_000,
            "per-mille",
            "ζ: the delay window shrinks by ζ·diff per RTT once diff >= γ",
        )
        .sym("ζ").live(),
        p(
            "gamma_pkts",
            30,
            1,
            100_000,
            "packets",
            "γ: queued packets (diff) at which the delay window stops growing",
        )
        .sym("γ").live(),
        p(
            "round_rtt_min",
            0,
            0,
            1,
            "bool",
            "RTT of a round for diff: 0 = mean of its samples, 1 = their minimum (Vegas)",
        )
        .sym("RTT of a round for diff").live(),
        ACK_COUNTING,
    ],
    profiles: [],
    replay: replay::rules,
    vars(c: cctl_compound_ca) {
        cwnd_reno ("segments: cwnd, the loss-based (Reno) part of the window") = c.cwnd_reno,
        dwnd ("segments: dwnd, the delay-based part of the window") = f64::from(c.dwnd_fp) / 1024.0,
        diff ("segments: diff, the packets queued at the bottleneck (last RTT)") = f64::from(c.diff_fp) / 1024.0,
    }
}
