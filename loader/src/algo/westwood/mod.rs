//! TCP Westwood+ (spec §14; Mascolo et al. 2001, Grieco & Mascolo 2004): bpf/algo/westwood.bpf.c.

use crate::catalogue::{p, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: westwood,
    id: 13,
    summary: "TCP Westwood+: Reno growth, loss sets ssthresh from a bandwidth estimate × RTT_min",
    paper: "Mascolo et al. 2001; Grieco & Mascolo 2004; [P3] §III",
    spec: "§14",
    native: Some("westwood"),
    clocked: true,
    params: [
        p(
            "win_min_ms",
            50,
            1,
            10_000,
            "ms",
            "shortest bandwidth-sample interval (intervals last max(RTT, this))",
        ).live(),
        p(
            "filter_shift",
            3,
            0,
            8,
            "log2",
            "gain 2^-shift of both low-pass filter stages (3: new = (7 old + sample)/8)",
        ).live(),
        p(
            "ssthresh_at_loss",
            1,
            0,
            1,
            "bool",
            "1: ssthresh = BWE·RTT_min/MSS at the loss (spec); 0: Reno's at the loss, BWE·RTT_min/MSS when recovery ends (Linux)",
        )
        .sym("1"),
        ACK_COUNTING,
        p(
            "linux_exact",
            0,
            0,
            1,
            "bool",
            "tcp_westwood.c's jiffies clock and 32-bit bytes-per-jiffy estimate",
        ),
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &[],
            doc: "tcp_westwood: ssthresh = cwnd/2 at the loss, cwnd = ssthresh = BWE·RTT_min/MSS at the end of recovery",
            values: &[("ssthresh_at_loss", 0), ("linux_exact", 1)],
        },
    ],
    check: check,
    vars(c: cctl_westwood_ca) {
        bw_est_Bps ("bytes/s: BWE, the filtered bandwidth estimate") = c.bw_Bps as f64,
        rtt_min_us ("usec: RTT_min used by the loss rule") = c.rtt_min_us,
    }
}

/// Forbidden combinations: linux_exact=1 with win_min_ms or filter_shift off their
/// defaults (Linux's HZ/20 and 7/8 are fixed there).
pub fn check(v: &crate::catalogue::Params) -> std::result::Result<(), String> {
    crate::catalogue::linux_exact_keeps_defaults("westwood", v, &["ssthresh_at_loss"])
}
