//! H-TCP (spec §5; Leith & Shorten 2004; [P0] §IV-C, Table II): bpf/algo/htcp.bpf.c.

use crate::catalogue::{p, Params, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: htcp,
    id: 2,
    summary: "H-TCP: increase grows with Δ since the last loss, adaptive backoff Tmin/Tmax",
    paper: "Leith & Shorten 2004; [P0] §IV-C, Table II",
    spec: "§5",
    native: Some("htcp"),
    clocked: true,
    params: [
        p(
            "delta_l_ms",
            1000,
            1,
            60_000,
            "ms",
            "Δ_L: time after a congestion event before the quadratic increase starts",
        )
        .sym("Δ_L").live(),
        p(
            "delta_b_pct",
            20,
            0,
            100,
            "%",
            "Δ_B: change of the epoch's max throughput that forces β = beta_min",
        )
        .sym("Δ_B").live(),
        p(
            "beta_min_pct",
            50,
            10,
            100,
            "%",
            "lower bound of the adaptive backoff β",
        ).live(),
        p(
            "beta_max_pct",
            80,
            10,
            100,
            "%",
            "upper bound of the adaptive backoff β",
        ).live(),
        p(
            "fixed_beta_pct",
            0,
            0,
            100,
            "%",
            "fixed β ([P2]'s variant); 0 = adaptive",
        ).live(),
        p(
            "use_rtt_scaling",
            1,
            0,
            1,
            "bool",
            "scale the increase by S = Tmin / T_ref",
        ).live(),
        p(
            "rtt_ref_ms",
            100,
            1,
            10_000,
            "ms",
            "T_ref of the RTT scaling",
        ).live(),
        p("rtt_scale_min_pct", 10, 1, 1_000, "%", "lower clamp of S").live(),
        p("rtt_scale_max_pct", 200, 1, 1_000, "%", "upper clamp of S").live(),
        p(
            "use_bandwidth_switch",
            1,
            0,
            1,
            "bool",
            "fall back to β = beta_min when throughput moved by more than Δ_B",
        ),
        p(
            "adaptive_min_rtt_ms",
            10,
            0,
            10_000,
            "ms",
            "Tmin must exceed this for the adaptive β = Tmin/Tmax",
        ).live(),
        p(
            "tmax_spike_ms",
            20,
            0,
            10_000,
            "ms",
            "accept a new Tmax only if within this of the old one (0 = no filter)",
        ).live(),
        ACK_COUNTING,
        p(
            "linux_exact",
            0,
            0,
            1,
            "bool",
            "tcp_htcp.c's jiffies clock, integer α and β (1/128), and its per-ACK packet counting",
        ),
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &["P3"],
            doc: "net/ipv4/tcp_htcp.c: its clock, arithmetic and packet counting (linux_exact)",
            values: &[("linux_exact", 1)],
        },
        Profile {
            name: "p2",
            tag: "p2",
            papers: &["P2"],
            doc: "[P2]'s H-TCP in its comparison with Cubic: the backoff fixed at 0.8, nothing else changed",
            values: &[("fixed_beta_pct", 80)],
        },
    ],
    check: check,
    vars(h: cctl_htcp_ca) {
        alpha ("segments per RTT: α, the additive increase") = f64::from(h.alpha) / 1024.0,
        beta ("fraction: β, the backoff multiplier") = f64::from(h.beta) / 1024.0,
        maxb_pps ("packets/s: B_max of the current epoch") = h.maxb_pps,
        old_maxb_pps ("packets/s: B_max of the previous epoch") = h.old_maxb_pps,
    }
}

/// Forbidden combinations: β_min > β_max, S_min > S_max, a fixed β outside [10, 99] %.
pub fn check(v: &Params) -> std::result::Result<(), String> {
    if v["beta_min_pct"] > v["beta_max_pct"] {
        return Err(format!(
            "beta_min_pct ({} %) must not exceed beta_max_pct ({} %)",
            v["beta_min_pct"], v["beta_max_pct"]
        ));
    }
    if v["rtt_scale_min_pct"] > v["rtt_scale_max_pct"] {
        return Err(format!(
            "rtt_scale_min_pct ({} %) must not exceed rtt_scale_max_pct ({} %)",
            v["rtt_scale_min_pct"], v["rtt_scale_max_pct"]
        ));
    }
    crate::catalogue::linux_exact_keeps_defaults(
        "htcp",
        v,
        &["use_rtt_scaling", "use_bandwidth_switch"],
    )?;
    let fixed = v["fixed_beta_pct"];
    if fixed != 0 && !(10..100).contains(&fixed) {
        return Err(format!(
            "fixed_beta_pct ({fixed} %) must be 0 (adaptive) or in [10, 99] %"
        ));
    }
    Ok(())
}
