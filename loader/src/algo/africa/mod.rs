//! TCP Africa (spec §11; King, Baraniuk, Riedi 2005; [P3] §II, §V): bpf/algo/africa.bpf.c.
//! No Linux module: its fast mode reuses HighSpeed TCP's a(w) (bpf/algo/highspeed_math.h).

use super::highspeed::{check_response, MODE_TABLE, RESPONSE_PARAMS};
use crate::catalogue::{p, Params, ACK_COUNTING};

pub mod model;
pub mod replay;

crate::algo::declare_algorithm! {
    key: africa,
    id: 10,
    summary: "TCP Africa: HSTCP increase while fewer than α packets queue (delay), Reno after",
    paper: "King, Baraniuk, Riedi, Infocom 2005; [P3] §II, §V",
    spec: "§11",
    native: None,
    clocked: true,
    params: [
        p(
            "alpha_cpkt",
            200,
            1,
            100_000,
            "1/100 packet",
            "α_africa: fast (HSTCP) mode while Δ̂ = w (RTT - baseRTT) / RTT is below this",
        )
        .sym("α_africa").live(),
        p(
            "hstcp_mode",
            MODE_TABLE,
            0,
            1,
            "0=table,1=interpolate",
            "fast mode's a(w): RFC 3649 Appendix B's rows or RFC 3649's formulas",
        )
        .sym("fast mode's a(w)"),
        p(
            "low_window_pkts",
            38,
            1,
            100_000,
            "segments",
            "HSTCP W_L: a(w) = 1 at and below it (RFC 3649: 38)",
        )
        .sym("HSTCP W_L").live(),
        RESPONSE_PARAMS[2],
        RESPONSE_PARAMS[3],
        RESPONSE_PARAMS[4],
        ACK_COUNTING,
    ],
    profiles: [],
    check: check,
    replay: replay::rules,
    vars(s: cctl_africa_ca) {
        mode ("1 = fast (HSTCP increase, Δ̂ < α), 0 = slow (Reno increase)") = s.mode,
        delta_hat ("packets: Δ̂ = w (RTT - baseRTT) / RTT at the last round end") = f64::from(s.delta_q10) / 1024.0,
        a ("segments per RTT: the increase used at the last CA ACK") = f64::from(s.a_q16) / 65536.0,
        mode_switches ("count: fast <-> slow changes so far") = s.switches,
    }
}

/// Forbidden combinations of the HSTCP response-function tunables (as for highspeed).
pub fn check(v: &Params) -> std::result::Result<(), String> {
    check_response(v)
}
