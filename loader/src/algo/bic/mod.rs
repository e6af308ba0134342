//! BIC-TCP (spec §6; Xu, Harfoush, Rhee 2004; [P0] §IV-D, Table II): bpf/algo/bic.bpf.c.

use crate::catalogue::{p, Params, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: bic,
    id: 5,
    summary: "BIC-TCP: binary search towards the window of the last loss, then max probing",
    paper: "Xu, Harfoush, Rhee 2004; [P0] §IV-D, Table II",
    spec: "§6",
    native: Some("bic"),
    clocked: false,
    params: [
        p(
            "max_increment",
            32,
            1,
            100_000,
            "segments/RTT",
            "S_max: largest increase per RTT ([P0] 32, Linux 16)",
        )
        .sym("S_max").live(),
        p(
            "bictcp_b",
            4,
            2,
            1_000,
            "divisor",
            "B: binary-search divisor, δ = (w_1 - w)/B",
        )
        .sym("B").live(),
        p(
            "smooth_part",
            20,
            1,
            10_000,
            "divisor",
            "σ: increase B/σ segments per RTT close to the target",
        )
        .sym("σ").live(),
        p(
            "beta_1024",
            819,
            1,
            1023,
            "1/1024",
            "β: window multiplier on loss (819/1024 ≈ 0.8)",
        )
        .sym("β").live(),
        p(
            "low_window",
            14,
            0,
            1_000_000,
            "segments",
            "Low_Window: Reno increase and halving at or below this window",
        )
        .sym("Low_Window").live(),
        p(
            "fast_convergence",
            1,
            0,
            1,
            "bool",
            "w_1 = (1+β)/2·w when a loss comes below the previous target",
        ).live(),
        p(
            "boost_max_cnt",
            20,
            0,
            1_000_000,
            "packets",
            "before the first loss, at most this many acked packets per +1 segment (Linux's \
             stand-in for Low_Util; 20 = 5 %/RTT; 0 = off)",
        ).live(),
        p(
            "initial_ssthresh",
            0,
            0,
            1_000_000,
            "segments",
            "initial slow-start threshold (0 = the kernel's; 100 in 2.6-era kernels)",
        ),
        p(
            "delayed_ack_rescale",
            0,
            0,
            1,
            "bool",
            "divide cnt by the packets-per-ACK estimate, as Linux does (spec §18.2)",
        ),
        ACK_COUNTING,
        p(
            "whole_delta",
            0,
            0,
            1,
            "bool",
            "δ = ⌊(w_1 - w)/B⌋ in whole segments, as Linux's dist (slow creep for 2B segments \
             below the target instead of B)",
        ),
        p(
            "linux_exact",
            0,
            0,
            1,
            "bool",
            "tcp_bic.c's gate: cnt recomputed at most every HZ/32 while cwnd is unchanged (jiffies)",
        ),
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &[],
            doc: "net/ipv4/tcp_bic.c: S_max 16, cnt divided by the packets-per-ACK estimate, \
                  whole-segment δ",
            values: &[
                ("max_increment", 16),
                ("delayed_ack_rescale", 1),
                ("whole_delta", 1),
                ("linux_exact", 1),
            ],
        },
    ],
    check: check,
    vars(b: cctl_bic_ca) {
        w_max ("segments: w_1, the window at the last loss (search target; 0 = none)") = b.w_max,
        w_min ("segments: lower end of the search, β·w after a loss, then the window reached") = b.w_min,
        w_loss ("segments: w_2, the window just before the last loss (0 = none)") = b.loss_cwnd,
        cnt ("packets: acked packets (or ACKs) per +1 segment") = b.cnt,
        inc ("segments per RTT: f_α, the current increase") = f64::from(b.inc_fp) / 1024.0,
    }
}

/// Forbidden combinations: S_max below B/σ (the search could not reach its
/// target faster than it creeps near it).
pub fn check(v: &Params) -> std::result::Result<(), String> {
    let (smax, b, sigma) = (v["max_increment"], v["bictcp_b"], v["smooth_part"]);
    if u64::from(smax) * u64::from(sigma) < u64::from(b) {
        return Err(format!(
            "max_increment ({smax} segments/RTT) must be at least bictcp_b / smooth_part \
             ({b} / {sigma}): S_max is the largest increase per RTT, B/σ the smallest"
        ));
    }
    Ok(())
}
