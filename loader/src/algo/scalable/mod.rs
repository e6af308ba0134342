//! Scalable TCP (spec §3; Kelly 2003; [P0] §IV-A, Table II): bpf/algo/scalable.bpf.c.

use crate::catalogue::{p, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: scalable,
    id: 3,
    summary: "Scalable TCP: MIMD, +1 % per RTT above Low_Window, ×0.875 on loss",
    paper: "Kelly 2003; [P0] §IV-A, Table II",
    spec: "§3",
    native: Some("scalable"),
    clocked: false,
    params: [
        p(
            "low_window_pkts",
            16,
            0,
            1_000_000,
            "segments",
            "Low_Window: Reno increase while cwnd <= this, scalable above",
        )
        .sym("Low_Window").live(),
        p(
            "a_per_10k",
            100,
            1,
            10_000,
            "1/10000 segment",
            "a: increase per acked packet in scalable mode (100 = 0.01)",
        )
        .sym("a").live(),
        p(
            "beta_per_mille",
            875,
            500,
            999,
            "1/1000",
            "β: cwnd multiplier on loss (875 = 0.875, decrease fraction b = 0.125)",
        )
        .sym("β").live(),
        ACK_COUNTING,
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &[],
            doc: "tcp_scalable: implicit Low_Window 100 (min(cwnd, AI_CNT = 100)), a = 0.01, β = 7/8",
            values: &[("low_window_pkts", 100)],
        },
    ],
    vars(s: cctl_scalable_ca) {
        mode ("0 = legacy (Reno, cwnd <= Low_Window), 1 = scalable: rule of the last CA ACK") = s.mode,
        incr_per_pkt ("segments per acked packet: the increase of that rule (1/cwnd or a)") = f64::from(s.incr_ppm) / 1e6,
        mode_switches ("count: legacy <-> scalable changes so far") = s.switches,
    }
}
