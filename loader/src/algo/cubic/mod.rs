//! CUBIC (spec §7; Rhee & Xu 2005, RFC 9438; HyStart: Ha & Rhee 2008): bpf/algo/cubic.bpf.c.

use crate::catalogue::{p, Params, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: cubic,
    id: 6,
    summary: "CUBIC: cwnd follows C (t - K)^3 + W_max in real time, TCP-friendly floor, HyStart",
    paper: "Rhee & Xu 2005, RFC 9438; [P2], [P3]",
    spec: "§7",
    native: Some("cubic"),
    clocked: true,
    params: [
        p(
            "beta_1024",
            819,
            1,
            1023,
            "1/1024",
            "β: window multiplier on loss (819 ≈ 0.8 as in [P2]/[P3]; Linux 717 ≈ 0.7)",
        )
        .sym("β").live(),
        p(
            "c_1024",
            410,
            1,
            16_384,
            "1/1024 segments/s³",
            "C: scale of the cubic (410/1024 ≈ 0.4, Linux's bic_scale 41 × 10)",
        )
        .sym("C"),
        p(
            "fast_convergence",
            1,
            0,
            1,
            "bool",
            "W_max = (1+β)/2·w when a loss comes below the previous W_max",
        ).live(),
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
        )
        .sym("HyStart"),
        p(
            "hystart_detect",
            3,
            0,
            3,
            "bitmask",
            "HyStart detectors: 1 = ACK train, 2 = delay increase, 3 = both",
        )
        .sym("HyStart detectors"),
        p(
            "hystart_low_window",
            16,
            0,
            1_000_000,
            "segments",
            "HyStart detects nothing below this window",
        ).live(),
        p(
            "hystart_ack_delta_us",
            2000,
            0,
            1_000_000,
            "us",
            "ACKs at most this far apart form one ACK train",
        ).live(),
        p(
            "hystart_delay_min_us",
            4000,
            0,
            10_000_000,
            "us",
            "lower clamp of the RTT-rise threshold RTT_min/8",
        ).live(),
        p(
            "hystart_delay_max_us",
            16_000,
            0,
            10_000_000,
            "us",
            "upper clamp of the RTT-rise threshold RTT_min/8",
        ).live(),
        p(
            "hystart_min_samples",
            8,
            0,
            255,
            "samples",
            "RTT samples per round before the delay test",
        ).live(),
        p(
            "initial_ssthresh",
            0,
            0,
            1_000_000,
            "segments",
            "initial slow-start threshold without HyStart (0 = the kernel's; 100 in 2.6-era kernels)",
        ),
        ACK_COUNTING,
        p(
            "linux_exact",
            0,
            0,
            1,
            "bool",
            "tcp_cubic.c's jiffies clock, once-per-jiffy cnt, table cube root and truncated W_tcp factor",
        ),
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &[],
            doc: "net/ipv4/tcp_cubic.c: β = 717/1024, HyStart on (ACK train + delay), its clock and arithmetic",
            values: &[("beta_1024", 717), ("hystart", 1), ("linux_exact", 1)],
        },
    ],
    check: check,
    vars(c: cctl_cubic_ca) {
        k ("s: K, time from the epoch start to the plateau W_max") = f64::from(c.k_1024) / 1024.0,
        w_max ("segments: W_max, the window before the last reduction (0 = none)") = c.w_max,
        origin ("segments: the plateau W(K) of the current epoch") = c.origin,
        epoch_start_us ("us: low 32 bits of tcp_mstamp at the epoch start, jiffies with linux_exact (0 = no epoch)") = c.epoch_start_us,
        w_tcp ("segments: W_tcp, the Reno-equivalent window") = c.w_tcp,
        cnt ("packets: acked packets per +1 segment") = c.cnt,
    }
}

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
    if v["linux_exact"] == 1 && v["ack_counting"] != 0 {
        return Err(
            "linux_exact=1 counts packets as tcp_cubic.c does: ack_counting must be 0 (packets)"
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
