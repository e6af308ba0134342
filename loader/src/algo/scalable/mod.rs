//! Scalable TCP (spec §3; Kelly 2003; [P0] §IV-A, Table II): bpf/scalable.bpf.c.

use crate::algos::{p, ParamSpec, Params, Profile, ACK_COUNTING};
use crate::skel::scalable::types::cctl_scalable_ca;
use crate::Result;

use super::{ca_from_bytes, impl_plain, load_struct_ops, var, Var};

pub mod model;

impl_plain!(cctl_scalable_ca);

/// Tunables of bpf/scalable.bpf.c with the defaults of [P0] Table II / spec §3.
pub const PARAMS: &[ParamSpec] = &[
    p(
        "low_window_pkts",
        16,
        0,
        1_000_000,
        "segments",
        "Low_Window: Reno increase while cwnd <= this, scalable above",
    ),
    p(
        "a_per_10k",
        100,
        1,
        10_000,
        "1/10000 segment",
        "a: increase per acked packet in scalable mode (100 = 0.01)",
    ),
    p(
        "beta_per_mille",
        875,
        500,
        999,
        "1/1000",
        "β: cwnd multiplier on loss (875 = 0.875, decrease fraction b = 0.125)",
    ),
    ACK_COUNTING,
];

/// Spec §18.4: Linux's tcp_scalable has no explicit Low_Window; its
/// `min(cwnd, AI_CNT = 100)` is Low_Window = 100 with a = 1/100.
pub const PROFILES: &[Profile] = &[Profile {
    name: "linux",
    tag: "l",
    doc: "tcp_scalable: implicit Low_Window 100 (min(cwnd, AI_CNT = 100)), a = 0.01, β = 7/8",
    values: &[("low_window_pkts", 100)],
}];

/// Every combination of individually valid values is allowed.
pub fn check(_v: &Params) -> std::result::Result<(), String> {
    Ok(())
}

/// Loads bpf/scalable.bpf.c with `params` and registers it as `name`.
pub fn load(name: &str, params: &Params) -> Result<crate::algo::Registered> {
    load_struct_ops!(
        name,
        params,
        scalable::ScalableSkelBuilder,
        scalable / scalable_mut,
        [low_window_pkts, a_per_10k, beta_per_mille, ack_counting]
    )
}

/// Variables decoded by [`vars`].
pub const VAR_DOCS: &[(&str, &str)] = &[
    (
        "mode",
        "0 = legacy (Reno, cwnd <= Low_Window), 1 = scalable: rule of the last CA ACK",
    ),
    (
        "incr_per_pkt",
        "segments per acked packet: the increase of that rule (1/cwnd or a)",
    ),
    ("mode_switches", "count: legacy <-> scalable changes so far"),
];

/// Scalable TCP's variables: `mode` (0 legacy, 1 scalable), `incr_per_pkt` (segments
/// per acked packet) and `mode_switches` (count).
pub fn vars(ca_priv: &[u8]) -> Vec<Var> {
    let Some(s) = ca_from_bytes::<cctl_scalable_ca>(ca_priv) else {
        return Vec::new();
    };
    vec![
        var("mode", s.mode),
        var("incr_per_pkt", f64::from(s.incr_ppm) / 1e6),
        var("mode_switches", s.switches),
    ]
}
