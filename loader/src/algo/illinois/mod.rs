//! TCP Illinois (spec §13; Liu, Başar, Srikant 2008; discussed in \[P2\]): bpf/illinois.bpf.c.

use crate::algos::{p, ParamSpec, Params, Profile, ACK_COUNTING};
use crate::skel::illinois::types::cctl_illinois_ca;
use crate::Result;

use super::{ca_from_bytes, impl_plain, load_struct_ops, var, Var};

pub mod model;

impl_plain!(cctl_illinois_ca);

/// Tunables of bpf/illinois.bpf.c with the defaults of spec §13 (the Linux module's).
pub const PARAMS: &[ParamSpec] = &[
    p(
        "alpha_min_pm",
        300,
        10,
        100_000,
        "per-mille pkt/RTT",
        "α_min: increase per RTT at the maximum queueing delay d_m",
    ),
    p(
        "alpha_max_pm",
        10_000,
        10,
        100_000,
        "per-mille pkt/RTT",
        "α_max: increase per RTT while the queueing delay is below d1",
    ),
    p(
        "beta_min_pm",
        125,
        0,
        1000,
        "per-mille",
        "β_min: decrease fraction on loss while d_a <= d2",
    ),
    p(
        "beta_max_pm",
        500,
        0,
        1000,
        "per-mille",
        "β_max: decrease fraction on loss while d_a >= d3",
    ),
    p(
        "d1_pm",
        10,
        0,
        1000,
        "per-mille of d_m",
        "d1: α = α_max at or below this average queueing delay",
    ),
    p(
        "d2_pm",
        100,
        0,
        1000,
        "per-mille of d_m",
        "d2: β = β_min at or below this average queueing delay",
    ),
    p(
        "d3_pm",
        800,
        0,
        1000,
        "per-mille of d_m",
        "d3: β = β_max at or above this average queueing delay",
    ),
    p(
        "win_thresh",
        15,
        0,
        100_000,
        "packets",
        "win_thresh: Reno (α = 1, β = 1/2) below this window",
    ),
    p(
        "theta",
        5,
        0,
        255,
        "RTTs",
        "θ: low-delay RTTs needed before α returns to α_max",
    ),
    ACK_COUNTING,
    p(
        "linux_ai",
        0,
        0,
        1,
        "bool",
        "count the increase as tcp_illinois.c: packets pkts_acked saw, whole segments once cnt·α/w >= 1, remainder dropped",
    ),
];

/// The defaults are the Linux module's constants (the fixed point, α << 7 and β << 6,
/// turns them into the very same integers); the `linux` profile also counts the
/// increase the way tcp_illinois.c does (`linux_ai`), found by `cctl conform`.
pub const PROFILES: &[Profile] = &[Profile {
    name: "linux",
    tag: "l",
    doc: "tcp_illinois: snd_cwnd_cnt counts the packets pkts_acked saw, remainder dropped",
    values: &[("linux_ai", 1)],
}];

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

/// Loads bpf/illinois.bpf.c with `params` and registers it as `name`.
pub fn load(name: &str, params: &Params) -> Result<crate::algo::Registered> {
    load_struct_ops!(
        name,
        params,
        illinois::IllinoisSkelBuilder,
        illinois / illinois_mut,
        [
            alpha_min_pm,
            alpha_max_pm,
            beta_min_pm,
            beta_max_pm,
            d1_pm,
            d2_pm,
            d3_pm,
            win_thresh,
            theta,
            ack_counting,
            linux_ai,
        ]
    )
}

/// Variables decoded by [`vars`].
pub const VAR_DOCS: &[(&str, &str)] = &[
    ("alpha", "segments per RTT: α, the additive increase"),
    (
        "beta",
        "fraction: β, the decrease fraction on loss (w <- (1-β) w)",
    ),
    (
        "d_a_us",
        "usec: d_a, average queueing delay over the last RTT",
    ),
    ("d_m_us", "usec: d_m, maximum queueing delay seen"),
];

/// Illinois' variables: `alpha` (α, segments per RTT), `beta` (β, decrease fraction),
/// `d_a_us` and `d_m_us` (average and maximum queueing delay, usec).
pub fn vars(ca_priv: &[u8]) -> Vec<Var> {
    let Some(c) = ca_from_bytes::<cctl_illinois_ca>(ca_priv) else {
        return Vec::new();
    };
    vec![
        var("alpha", f64::from(c.alpha) / 128.0),
        var("beta", f64::from(c.beta) / 64.0),
        var("d_a_us", c.da_us),
        var("d_m_us", c.dm_us),
    ]
}
