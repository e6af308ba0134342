//! TCP Africa (spec §11; King, Baraniuk, Riedi 2005; [P3] §II, §V): bpf/africa.bpf.c.
//! No Linux module: its fast mode reuses HighSpeed TCP's a(w) (bpf/highspeed_math.h).

use crate::algos::{p, ParamSpec, Params, Profile, ACK_COUNTING};
use crate::skel::africa::types::cctl_africa_ca;
use crate::Result;

use super::highspeed::{check_response, MODE_TABLE, RESPONSE_PARAMS};
use super::{ca_from_bytes, impl_plain, load_struct_ops, var, Var};

pub mod model;

impl_plain!(cctl_africa_ca);

/// Tunables of bpf/africa.bpf.c: α_africa ([GAP], spec §11 [CHOICE]) and HighSpeed
/// TCP's response function, here defaulting to RFC 3649's table (W_L 38).
pub const PARAMS: &[ParamSpec] = &[
    p(
        "alpha_cpkt",
        200,
        1,
        100_000,
        "1/100 packet",
        "α_africa: fast (HSTCP) mode while Δ̂ = w (RTT - baseRTT) / RTT is below this",
    ),
    p(
        "hstcp_mode",
        MODE_TABLE,
        0,
        1,
        "0=table,1=interpolate",
        "fast mode's a(w): RFC 3649 Appendix B's rows or RFC 3649's formulas",
    ),
    p(
        "low_window_pkts",
        38,
        1,
        100_000,
        "segments",
        "HSTCP W_L: a(w) = 1 at and below it (RFC 3649: 38)",
    ),
    RESPONSE_PARAMS[2],
    RESPONSE_PARAMS[3],
    RESPONSE_PARAMS[4],
    ACK_COUNTING,
];

/// No Linux module, so no `linux` profile.
pub const PROFILES: &[Profile] = &[];

/// Forbidden combinations of the HSTCP response-function tunables (as for highspeed).
pub fn check(v: &Params) -> std::result::Result<(), String> {
    check_response(v)
}

/// Loads bpf/africa.bpf.c with `params` and registers it as `name`.
pub fn load(name: &str, params: &Params) -> Result<crate::algo::Registered> {
    load_struct_ops!(
        name,
        params,
        africa::AfricaSkelBuilder,
        africa / africa_mut,
        [
            alpha_cpkt,
            hstcp_mode,
            low_window_pkts,
            high_window_pkts,
            high_p_ppb,
            high_decrease_per_mille,
            ack_counting,
        ]
    )
}

/// Variables decoded by [`vars`].
pub const VAR_DOCS: &[(&str, &str)] = &[
    (
        "mode",
        "1 = fast (HSTCP increase, Δ̂ < α), 0 = slow (Reno increase)",
    ),
    (
        "delta_hat",
        "packets: Δ̂ = w (RTT - baseRTT) / RTT at the last round end",
    ),
    (
        "a",
        "segments per RTT: the increase used at the last CA ACK",
    ),
    ("mode_switches", "count: fast <-> slow changes so far"),
];

/// TCP Africa's variables: `mode` (1 fast, 0 slow), `delta_hat` (Δ̂, packets),
/// `a` (segments per RTT) and `mode_switches` (count).
pub fn vars(ca_priv: &[u8]) -> Vec<Var> {
    let Some(s) = ca_from_bytes::<cctl_africa_ca>(ca_priv) else {
        return Vec::new();
    };
    vec![
        var("mode", s.mode),
        var("delta_hat", f64::from(s.delta_q10) / 1024.0),
        var("a", f64::from(s.a_q16) / 65536.0),
        var("mode_switches", s.switches),
    ]
}
