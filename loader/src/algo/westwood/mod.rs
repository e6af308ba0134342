//! TCP Westwood+ (spec §14; Mascolo et al. 2001, Grieco & Mascolo 2004): bpf/westwood.bpf.c.

use crate::algos::{p, ParamSpec, Params, Profile, ACK_COUNTING};
use crate::skel::westwood::types::cctl_westwood_ca;
use crate::Result;

use super::{ca_from_bytes, impl_plain, load_struct_ops, var, Var};

pub mod model;

impl_plain!(cctl_westwood_ca);

/// Tunables of bpf/westwood.bpf.c with the defaults of spec §14.
pub const PARAMS: &[ParamSpec] = &[
    p(
        "win_min_ms",
        50,
        1,
        10_000,
        "ms",
        "shortest bandwidth-sample interval (intervals last max(RTT, this))",
    ),
    p(
        "filter_shift",
        3,
        0,
        8,
        "log2",
        "gain 2^-shift of both low-pass filter stages (3: new = (7 old + sample)/8)",
    ),
    p(
        "ssthresh_at_loss",
        1,
        0,
        1,
        "bool",
        "1: ssthresh = BWE·RTT_min/MSS at the loss (spec); 0: Reno's at the loss, BWE·RTT_min/MSS when recovery ends (Linux)",
    ),
    ACK_COUNTING,
];

/// `linux`: tcp_westwood's loss handling (Reno's cwnd/2 as the recovery target, the
/// bandwidth rule applied when recovery completes).
pub const PROFILES: &[Profile] = &[Profile {
    name: "linux",
    tag: "l",
    doc: "tcp_westwood: ssthresh = cwnd/2 at the loss, cwnd = ssthresh = BWE·RTT_min/MSS at the end of recovery",
    values: &[("ssthresh_at_loss", 0)],
}];

/// No forbidden combinations beyond the ranges.
pub fn check(_: &Params) -> std::result::Result<(), String> {
    Ok(())
}

/// Loads bpf/westwood.bpf.c with `params` and registers it as `name`.
pub fn load(name: &str, params: &Params) -> Result<crate::algo::Registered> {
    load_struct_ops!(
        name,
        params,
        westwood::WestwoodSkelBuilder,
        westwood / westwood_mut,
        [win_min_ms, filter_shift, ssthresh_at_loss, ack_counting]
    )
}

/// Variables decoded by [`vars`].
pub const VAR_DOCS: &[(&str, &str)] = &[
    (
        "bw_est_Bps",
        "bytes/s: BWE, the filtered bandwidth estimate",
    ),
    ("rtt_min_us", "usec: RTT_min used by the loss rule"),
];

/// Westwood's variables: `bw_est_Bps` (BWE, bytes/s) and `rtt_min_us` (RTT_min, usec).
pub fn vars(ca_priv: &[u8]) -> Vec<Var> {
    let Some(c) = ca_from_bytes::<cctl_westwood_ca>(ca_priv) else {
        return Vec::new();
    };
    vec![
        var("bw_est_Bps", c.bw_Bps as f64),
        var("rtt_min_us", c.rtt_min_us),
    ]
}
