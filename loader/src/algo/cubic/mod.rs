//! CUBIC (spec §7; Rhee & Xu 2005, RFC 9438; HyStart: Ha & Rhee 2008): bpf/cubic.bpf.c.

use crate::algos::{p, ParamSpec, Params, Profile, ACK_COUNTING};
use crate::skel::cubic::types::cctl_cubic_ca;
use crate::Result;

use super::{ca_from_bytes, impl_plain, load_struct_ops, var, Var};

pub mod model;

impl_plain!(cctl_cubic_ca);

/// Tunables of bpf/cubic.bpf.c with the defaults of spec §7 ([P2]/[P3]: β = 0.8, no HyStart).
pub const PARAMS: &[ParamSpec] = &[
    p(
        "beta_1024",
        819,
        1,
        1023,
        "1/1024",
        "β: window multiplier on loss (819 ≈ 0.8 as in [P2]/[P3]; Linux 717 ≈ 0.7)",
    ),
    p(
        "c_1024",
        410,
        1,
        16_384,
        "1/1024 segments/s³",
        "C: scale of the cubic (410/1024 ≈ 0.4, Linux's bic_scale 41 × 10)",
    ),
    p(
        "fast_convergence",
        1,
        0,
        1,
        "bool",
        "W_max = (1+β)/2·w when a loss comes below the previous W_max",
    ),
    p(
        "tcp_friendliness",
        1,
        0,
        1,
        "bool",
        "grow at least as fast as W_tcp, the AIMD window with the same β",
    ),
    p(
        "hystart",
        0,
        0,
        1,
        "bool",
        "HyStart: leave slow start on an ACK train or an RTT rise (Linux: on)",
    ),
    p(
        "hystart_detect",
        3,
        0,
        3,
        "bitmask",
        "HyStart detectors: 1 = ACK train, 2 = delay increase, 3 = both",
    ),
    p(
        "hystart_low_window",
        16,
        0,
        1_000_000,
        "segments",
        "HyStart detects nothing below this window",
    ),
    p(
        "hystart_ack_delta_us",
        2000,
        0,
        1_000_000,
        "us",
        "ACKs at most this far apart form one ACK train",
    ),
    p(
        "hystart_delay_min_us",
        4000,
        0,
        10_000_000,
        "us",
        "lower clamp of the RTT-rise threshold RTT_min/8",
    ),
    p(
        "hystart_delay_max_us",
        16_000,
        0,
        10_000_000,
        "us",
        "upper clamp of the RTT-rise threshold RTT_min/8",
    ),
    p(
        "hystart_min_samples",
        8,
        0,
        255,
        "samples",
        "RTT samples per round before the delay test",
    ),
    p(
        "initial_ssthresh",
        0,
        0,
        1_000_000,
        "segments",
        "initial slow-start threshold without HyStart (0 = the kernel's; 100 in 2.6-era kernels)",
    ),
    ACK_COUNTING,
];

/// Named parameter sets (spec §18.4).
pub const PROFILES: &[Profile] = &[Profile {
    name: "linux",
    tag: "l",
    doc: "net/ipv4/tcp_cubic.c: β = 717/1024, HyStart on (ACK train + delay)",
    values: &[("beta_1024", 717), ("hystart", 1)],
}];

/// Forbidden combinations: inverted HyStart delay clamps, HyStart with no detector,
/// and an initial ssthresh with HyStart (Linux ignores it then; HyStart finds the exit).
pub fn check(v: &Params) -> std::result::Result<(), String> {
    let (lo, hi) = (v["hystart_delay_min_us"], v["hystart_delay_max_us"]);
    if lo > hi {
        return Err(format!(
            "hystart_delay_min_us ({lo} us) must not exceed hystart_delay_max_us ({hi} us)"
        ));
    }
    if v["hystart"] == 1 && v["hystart_detect"] == 0 {
        return Err(
            "hystart=1 (bool) needs hystart_detect in [1, 3] (1 = ACK train, 2 = delay, \
             3 = both); to turn HyStart off set hystart=0"
                .into(),
        );
    }
    if v["hystart"] == 1 && v["initial_ssthresh"] != 0 {
        return Err(format!(
            "initial_ssthresh ({} segments) must be 0 when hystart=1 (bool): HyStart picks \
             the slow-start exit itself (Linux ignores initial_ssthresh then)",
            v["initial_ssthresh"]
        ));
    }
    Ok(())
}

/// Loads bpf/cubic.bpf.c with `params` and registers it as `name`.
pub fn load(name: &str, params: &Params) -> Result<crate::algo::Registered> {
    load_struct_ops!(
        name,
        params,
        cubic::CubicSkelBuilder,
        cubic / cubic_mut,
        [
            beta_1024,
            c_1024,
            fast_convergence,
            tcp_friendliness,
            hystart,
            hystart_detect,
            hystart_low_window,
            hystart_ack_delta_us,
            hystart_delay_min_us,
            hystart_delay_max_us,
            hystart_min_samples,
            initial_ssthresh,
            ack_counting,
        ]
    )
}

/// Variables decoded by [`vars`].
pub const VAR_DOCS: &[(&str, &str)] = &[
    ("k", "s: K, time from the epoch start to the plateau W_max"),
    (
        "w_max",
        "segments: W_max, the window before the last reduction (0 = none)",
    ),
    ("origin", "segments: the plateau W(K) of the current epoch"),
    (
        "epoch_start_us",
        "us: low 32 bits of tcp_mstamp at the epoch start (0 = no epoch)",
    ),
    ("w_tcp", "segments: W_tcp, the Reno-equivalent window"),
    ("cnt", "packets: acked packets per +1 segment"),
];

/// CUBIC's variables: `k` (K, s), `w_max`, `origin`, `w_tcp` (segments),
/// `epoch_start_us` (low 32 bits of tcp_mstamp, µs; compare with a sample's
/// `mstamp_us` modulo 2³²) and `cnt` (packets per +1 segment).
pub fn vars(ca_priv: &[u8]) -> Vec<Var> {
    let Some(c) = ca_from_bytes::<cctl_cubic_ca>(ca_priv) else {
        return Vec::new();
    };
    vec![
        var("k", f64::from(c.k_1024) / 1024.0),
        var("w_max", c.w_max),
        var("origin", c.origin),
        var("epoch_start_us", c.epoch_start_us),
        var("w_tcp", c.w_tcp),
        var("cnt", c.cnt),
    ]
}
