//! TCP Illinois (spec §13; Liu, Başar, Srikant 2008; discussed in \[P2\]): bpf/algo/illinois.bpf.c.

use crate::catalogue::{p, Params, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: illinois,
    id: 12,
    summary: "TCP Illinois: AIMD with α and β set by the average queueing delay (concave growth)",
    paper: "Liu, Başar, Srikant 2008; [P2] Introduction, §III",
    spec: "§13",
    native: Some("illinois"),
    clocked: true,
    params: [
        p(
            "alpha_min_pm",
            300,
            10,
            100_000,
            "per-mille pkt/RTT",
            "α_min: increase per RTT at the maximum queueing delay d_m",
        )
        .sym("α_min").live(),
        p(
            "alpha_max_pm",
            10_000,
            10,
            100_000,
            "per-mille pkt/RTT",
            "α_max: increase per RTT while the queueing delay is below d1",
        )
        .sym("α_max").live(),
        p(
            "beta_min_pm",
            125,
            0,
            1000,
            "per-mille",
            "β_min: decrease fraction on loss while d_a <= d2",
        )
        .sym("β_min").live(),
        p(
            "beta_max_pm",
            500,
            0,
            1000,
            "per-mille",
            "β_max: decrease fraction on loss while d_a >= d3",
        )
        .sym("β_max").live(),
        p(
            "d1_pm",
            10,
            0,
            1000,
            "per-mille of d_m",
            "d1: α = α_max at or below this average queueing delay",
        )
        .sym("d1").live(),
        p(
            "d2_pm",
            100,
            0,
            1000,
            "per-mille of d_m",
            "d2: β = β_min at or below this average queueing delay",
        )
        .sym("d2").live(),
        p(
            "d3_pm",
            800,
            0,
            1000,
            "per-mille of d_m",
            "d3: β = β_max at or above this average queueing delay",
        )
        .sym("d3").live(),
        p(
            "win_thresh",
            15,
            0,
            100_000,
            "packets",
            "win_thresh: Reno (α = 1, β = 1/2) below this window",
        )
        .sym("win_thresh").live(),
        p(
            "theta",
            5,
            0,
            255,
            "RTTs",
            "θ: low-delay RTTs needed before α returns to α_max",
        )
        .sym("θ").live(),
        ACK_COUNTING,
        p(
            "linux_ai",
            0,
            0,
            1,
            "bool",
            "count the increase as tcp_illinois.c: packets pkts_acked saw, whole segments once cnt·α/w >= 1, remainder dropped",
        ),
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &[],
            doc: "tcp_illinois: snd_cwnd_cnt counts the packets pkts_acked saw, remainder dropped",
            values: &[("linux_ai", 1)],
        },
    ],
    check: check,
    vars(c: cctl_illinois_ca) {
        alpha ("segments per RTT: α, the additive increase") = f64::from(c.alpha) / 128.0,
        beta ("fraction: β, the decrease fraction on loss (w <- (1-β) w)") = f64::from(c.beta) / 64.0,
        d_a_us ("usec: d_a, average queueing delay over the last RTT") = c.da_us,
        d_m_us ("usec: d_m, maximum queueing delay seen") = c.dm_us,
    }
}

/// Forbidden combinations: α_min > α_max, β_min > β_max, d1 > d2 or d2 >= d3, linux_ai with
/// ack_counting=1.
pub fn check(v: &Params) -> std::result::Result<(), String> {
    if v["alpha_min_pm"] > v["alpha_max_pm"] {
        return Err(format!(
            "alpha_min_pm ({} per-mille pkt/RTT) must not exceed alpha_max_pm ({} per-mille pkt/RTT)",
            v["alpha_min_pm"], v["alpha_max_pm"]
        ));
    }
    if v["beta_min_pm"] > v["beta_max_pm"] {
        return Err(format!(
            "beta_min_pm ({} per-mille) must not exceed beta_max_pm ({} per-mille)",
            v["beta_min_pm"], v["beta_max_pm"]
        ));
    }
    if v["linux_ai"] == 1 && v["ack_counting"] == 1 {
        return Err(
            "linux_ai=1 counts packets as tcp_illinois.c does; ack_counting=1 (ACK events) \
             does not apply with it (use one or the other)"
                .into(),
        );
    }
    if v["d1_pm"] > v["d2_pm"] || v["d2_pm"] >= v["d3_pm"] {
        return Err(format!(
            "need d1_pm <= d2_pm < d3_pm (each in [0, 1000] per-mille of d_m), got {}, {}, {}",
            v["d1_pm"], v["d2_pm"], v["d3_pm"]
        ));
    }
    Ok(())
}
