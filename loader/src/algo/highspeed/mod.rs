//! HighSpeed TCP (spec §4; RFC 3649; [P0] §IV-B, Table II): bpf/algo/highspeed.bpf.c.
//! Its a(w), b(w) (bpf/algo/highspeed_math.h) are shared with TCP Africa.

use crate::catalogue::{p, ParamSpec, Params, Profile};

pub mod model;

crate::algo::declare_algorithm! {
    key: highspeed,
    id: 4,
    summary: "HighSpeed TCP: a(w), b(w) from RFC 3649's response function, Reno below W_L",
    paper: "Floyd, RFC 3649; [P0] §IV-B, Table II",
    spec: "§4",
    native: Some("highspeed"),
    clocked: false,
    params: [
        RESPONSE_PARAMS[0],
        RESPONSE_PARAMS[1],
        RESPONSE_PARAMS[2],
        RESPONSE_PARAMS[3],
        RESPONSE_PARAMS[4],
        p(
            "max_ssthresh_pkts",
            0,
            0,
            1_000_000,
            "segments",
            "RFC 3742 limited slow start above this (RFC 3649 recommends 100); 0 = standard",
        ).live(),
        p(
            "linux_md_index",
            0,
            0,
            1,
            "bool",
            "b(w) at a loss from the row of the last CA ACK (Linux; 0.5 after slow start), not of the cwnd",
        ),
        p(
            "ack_counting",
            0,
            0,
            1,
            "0=packets,1=events",
            "count acked packets (ABC, [P0]) or ACK events (spec §18.2; Linux)",
        ),
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &["P3"],
            doc: "tcp_highspeed: RFC 3649 table, W_L 38, a(w) per ACK event, b from the last CA row",
            values: &[
                ("hstcp_mode", MODE_TABLE),
                ("low_window_pkts", 38),
                ("ack_counting", 1),
                ("linux_md_index", 1),
            ],
        },
        Profile {
            name: "p0",
            tag: "p",
            papers: &["P0"],
            doc: "[P0]'s altAIMD HighSpeed: RFC 3649's table with the nearest-entry lookup whose \
                  granularity [P0] examines (Fig. 7), so W_L 38 (its first row; Table II lists 31), \
                  a(w) per acked packet (ABC, as [P0] ran every algorithm), b(w) of the cwnd at the loss",
            values: &[("hstcp_mode", MODE_TABLE), ("low_window_pkts", 38)],
        },
    ],
    check: check,
    vars(h: cctl_highspeed_ca) {
        a ("segments per RTT: a(w), the additive increase at the last update") = f64::from(h.a_q16) / 65536.0,
        b ("fraction: b(w), the decrease fraction (w <- (1 - b) w on loss)") = f64::from(h.b_q16) / 65536.0,
        table_index ("row of RFC 3649's table for cwnd (Linux's ai; a = row + 1 in table mode)") = h.idx,
    }
}

/// `hstcp_mode` value: RFC 3649 Appendix B table with Linux's nearest-entry lookup.
pub const MODE_TABLE: u32 = 0;

/// `hstcp_mode` value: a(w), b(w) from RFC 3649's formulas.
pub const MODE_INTERPOLATE: u32 = 1;

/// The RFC 3649 parameters the table mode's rows were computed for:
/// (key, value, unit).
const TABLE_PARAMS: [(&str, u32, &str); 4] = [
    ("low_window_pkts", 38, "segments"),
    ("high_window_pkts", 83_000, "segments"),
    ("high_p_ppb", 100, "per 10^9"),
    ("high_decrease_per_mille", 100, "1/1000"),
];

/// The response-function tunables (W_L, W_H, P_H, b_H, mode), shared with TCP Africa.
pub(crate) const RESPONSE_PARAMS: [ParamSpec; 5] = [
    p(
        "hstcp_mode",
        MODE_INTERPOLATE,
        0,
        1,
        "0=table,1=interpolate",
        "a(w), b(w) from RFC 3649 Appendix B's rows (Linux) or from RFC 3649's formulas",
    ),
    p(
        "low_window_pkts",
        31,
        1,
        100_000,
        "segments",
        "W_L (Low_Window): Reno below, a(w) = 1 and b(w) = 0.5 at W_L",
    )
    .sym("W_L").live(),
    p(
        "high_window_pkts",
        83_000,
        2,
        4_000_000,
        "segments",
        "W_H (High_Window): b(w) = b_H and p(w) = P_H there; a and b stay put beyond",
    )
    .sym("W_H").live(),
    p(
        "high_p_ppb",
        100,
        1,
        1_000_000,
        "per 10^9",
        "P_H (High_P): loss rate at W_H (100 = 1e-7)",
    )
    .sym("P_H").live(),
    p(
        "high_decrease_per_mille",
        100,
        1,
        500,
        "1/1000",
        "b_H (High_Decrease): decrease fraction at W_H (100 = 0.1)",
    )
    .sym("b_H").live(),
];

/// Forbidden combinations of the response-function tunables (shared with Africa):
/// table mode only with the RFC parameters its rows were computed for; the formulas
/// need W_H > W_L and P_H < P_L = 1.5/W_L² (a decreasing response function).
pub(crate) fn check_response(v: &Params) -> std::result::Result<(), String> {
    if v["hstcp_mode"] == MODE_TABLE {
        let bad: Vec<String> = TABLE_PARAMS
            .iter()
            .filter(|(k, want, _)| v[k] != *want)
            .map(|(k, want, unit)| format!("{k} = {} {unit} (must be {want})", v[k]))
            .collect();
        if !bad.is_empty() {
            return Err(format!(
                "hstcp_mode=0 (table, allowed 0..=1) uses RFC 3649 Appendix B's rows, computed \
                 for W_L 38, W_H 83000, P_H 1e-7, b_H 0.1; got {}. Use hstcp_mode=1 \
                 (interpolate) for other values",
                bad.join(", ")
            ));
        }
    }
    let (lo, hi) = (v["low_window_pkts"], v["high_window_pkts"]);
    if hi <= lo {
        return Err(format!(
            "high_window_pkts ({hi} segments, allowed 2..=4000000) must exceed \
             low_window_pkts ({lo} segments, allowed 1..=100000)"
        ));
    }
    let p_l_ppb = 1.5e9 / (f64::from(lo) * f64::from(lo));
    if f64::from(v["high_p_ppb"]) >= p_l_ppb {
        return Err(format!(
            "high_p_ppb ({} per 10^9, allowed 1..=1000000) must be below P_L = 1.5/W_L² = \
             {p_l_ppb:.1} per 10^9 for low_window_pkts = {lo} segments",
            v["high_p_ppb"]
        ));
    }
    Ok(())
}

/// Forbidden combinations: see [`check_response`].
pub fn check(v: &Params) -> std::result::Result<(), String> {
    check_response(v)
}
