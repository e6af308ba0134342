//! Compound TCP (spec §12; Tan, Song, Zhang, Sridharan, Infocom 2006; \[P3\] §II, §V):
//! bpf/compound.bpf.c.

use crate::algos::{p, ParamSpec, Params, Profile, ACK_COUNTING};
use crate::skel::compound::types::cctl_compound_ca;
use crate::Result;

use super::{ca_from_bytes, impl_plain, load_struct_ops, var, Var};

pub mod model;

impl_plain!(cctl_compound_ca);

/// Tunables of bpf/compound.bpf.c with the defaults of spec §12 (Tan et al. 2006).
pub const PARAMS: &[ParamSpec] = &[
    p(
        "alpha_pm",
        125,
        1,
        10_000,
        "per-mille",
        "α: scale of the delay window's binomial growth α·win^k − 1 per RTT",
    ),
    p(
        "beta_pm",
        500,
        0,
        1000,
        "per-mille",
        "β: the total window drops to (1 − β)·win on loss",
    ),
    p(
        "k_pm",
        750,
        0,
        1000,
        "per-mille",
        "k: exponent of the delay window's growth α·win^k",
    ),
    p(
        "zeta_pm",
        1000,
        0,
        10_000,
        "per-mille",
        "ζ: the delay window shrinks by ζ·diff per RTT once diff >= γ",
    ),
    p(
        "gamma_pkts",
        30,
        1,
        100_000,
        "packets",
        "γ: queued packets (diff) at which the delay window stops growing",
    ),
    p(
        "round_rtt_min",
        0,
        0,
        1,
        "bool",
        "RTT of a round for diff: 0 = mean of its samples, 1 = their minimum (Vegas)",
    ),
    ACK_COUNTING,
];

/// No Linux module, so no `linux` profile.
pub const PROFILES: &[Profile] = &[];

/// No forbidden combinations beyond the ranges.
pub fn check(_: &Params) -> std::result::Result<(), String> {
    Ok(())
}

/// Loads bpf/compound.bpf.c with `params` and registers it as `name`.
pub fn load(name: &str, params: &Params) -> Result<crate::algo::Registered> {
    load_struct_ops!(
        name,
        params,
        compound::CompoundSkelBuilder,
        compound / compound_mut,
        [
            alpha_pm,
            beta_pm,
            k_pm,
            zeta_pm,
            gamma_pkts,
            round_rtt_min,
            ack_counting,
        ]
    )
}

/// Variables decoded by [`vars`].
pub const VAR_DOCS: &[(&str, &str)] = &[
    (
        "cwnd_reno",
        "segments: cwnd, the loss-based (Reno) part of the window",
    ),
    ("dwnd", "segments: dwnd, the delay-based part of the window"),
    (
        "diff",
        "segments: diff, the packets queued at the bottleneck (last RTT)",
    ),
];

/// Compound's variables: `cwnd_reno`, `dwnd` and `diff`, all in segments.
pub fn vars(ca_priv: &[u8]) -> Vec<Var> {
    let Some(c) = ca_from_bytes::<cctl_compound_ca>(ca_priv) else {
        return Vec::new();
    };
    vec![
        var("cwnd_reno", c.cwnd_reno),
        var("dwnd", f64::from(c.dwnd_fp) / 1024.0),
        var("diff", f64::from(c.diff_fp) / 1024.0),
    ]
}
