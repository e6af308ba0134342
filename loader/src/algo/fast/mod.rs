//! FAST TCP (spec §8; [P1] Jin, Wei, Low 2004, §IV; [P0] §IV-E adaptive α): bpf/fast.bpf.c.
//! There is no Linux module: the model in [`model`] is the reference.

use crate::algos::{p, ParamSpec, Params, Profile, ACK_COUNTING};
use crate::skel::fast::types::cctl_fast_ca;
use crate::Result;

use super::{ca_from_bytes, impl_plain, load_struct_ops, var, Var};

pub mod model;

impl_plain!(cctl_fast_ca);

/// Tunables of bpf/fast.bpf.c: [P0] Table II (γ, adaptive α levels and thresholds),
/// [P1] (η, cadence, 16-packet loss floor) and the spec's \[CHOICE\]s (§8).
pub const PARAMS: &[ParamSpec] = &[
    p(
        "gamma_pct",
        50,
        1,
        100,
        "%",
        "γ: weight of the new window estimate in eq. (5) ([P0]: 1/2)",
    ),
    p(
        "alpha_mode",
        1,
        0,
        1,
        "0=fixed,1=adaptive",
        "α: fixed alpha_pkts, or [P0]'s levels by achieved throughput",
    ),
    p(
        "alpha_pkts",
        20,
        1,
        100_000,
        "packets",
        "α with alpha_mode=0: packets each flow keeps queued",
    ),
    p(
        "alpha_l0_pkts",
        8,
        1,
        100_000,
        "packets",
        "m0a: α at level 0 ([P0])",
    ),
    p(
        "alpha_l1_pkts",
        20,
        1,
        100_000,
        "packets",
        "m1a: α at level 1 ([P0])",
    ),
    p(
        "alpha_l2_pkts",
        200,
        1,
        100_000,
        "packets",
        "m2a: α at level 2 ([P0])",
    ),
    p(
        "m0u_kBps",
        1500,
        0,
        100_000_000,
        "kB/s",
        "m0u: level 0 -> 1 above this throughput",
    ),
    p(
        "m1l_kBps",
        1250,
        0,
        100_000_000,
        "kB/s",
        "m1l: level 1 -> 0 below this throughput",
    ),
    p(
        "m1u_kBps",
        15000,
        0,
        100_000_000,
        "kB/s",
        "m1u: level 1 -> 2 above this throughput",
    ),
    p(
        "m2l_kBps",
        12500,
        0,
        100_000_000,
        "kB/s",
        "m2l: level 2 -> 1 below this throughput",
    ),
    p(
        "eta_num",
        3,
        1,
        1000,
        "packets",
        "η = min(eta_num·r/w, eta_max): the RTT average's weight ([P1]: 3)",
    ),
    p("eta_max_pct", 25, 1, 100, "%", "cap of η ([P1]: 1/4)"),
    p(
        "eta_ack_ratio",
        1,
        0,
        1,
        "bool",
        "scale η by the measured packets per ACK (spec [CHOICE] for delayed ACKs)",
    ),
    p(
        "update_interval_ms",
        0,
        0,
        60_000,
        "ms",
        "0 = update every other RTT ([P1]); else every this many ms",
    ),
    p(
        "min_loss_window_pkts",
        16,
        2,
        100_000,
        "packets",
        "a larger window keeps at least this many packets on loss ([P1] fn. 5)",
    ),
    p(
        "ss_exit_mode",
        0,
        0,
        1,
        "0=qdelay,1=diff",
        "leave slow start when q̂ > ss_exit_qdelay_pct·baseRTT, or when w·q̂/T̄ > α/2",
    ),
    p(
        "ss_exit_qdelay_pct",
        10,
        0,
        1000,
        "%",
        "queueing delay, % of baseRTT, that ends slow start (ss_exit_mode=0)",
    ),
    p(
        "pacing",
        1,
        0,
        1,
        "bool",
        "ask for the kernel's internal pacing (~1.2·cwnd/srtt), spec §8 burstiness",
    ),
    ACK_COUNTING,
];

/// No Linux module, so no `linux` profile.
pub const PROFILES: &[Profile] = &[];

/// Forbidden combinations: the adaptive α's hysteresis must not cross itself
/// (m1l ≤ m0u < m1u, m2l ≤ m1u, m1l < m2l).
pub fn check(v: &Params) -> std::result::Result<(), String> {
    let (m0u, m1l, m1u, m2l) = (v["m0u_kBps"], v["m1l_kBps"], v["m1u_kBps"], v["m2l_kBps"]);
    let range = "each in [0, 100000000] kB/s";
    if m1l > m0u {
        return Err(format!(
            "m1l_kBps ({m1l} kB/s) must not exceed m0u_kBps ({m0u} kB/s); {range}"
        ));
    }
    if m0u >= m1u {
        return Err(format!(
            "m0u_kBps ({m0u} kB/s) must be below m1u_kBps ({m1u} kB/s); {range}"
        ));
    }
    if m2l > m1u {
        return Err(format!(
            "m2l_kBps ({m2l} kB/s) must not exceed m1u_kBps ({m1u} kB/s); {range}"
        ));
    }
    if m1l >= m2l {
        return Err(format!(
            "m1l_kBps ({m1l} kB/s) must be below m2l_kBps ({m2l} kB/s); {range}"
        ));
    }
    Ok(())
}

/// Loads bpf/fast.bpf.c with `params` and registers it as `name`.
pub fn load(name: &str, params: &Params) -> Result<crate::algo::Registered> {
    load_struct_ops!(
        name,
        params,
        fast::FastSkelBuilder,
        fast / fast_mut,
        [
            gamma_pct,
            alpha_mode,
            alpha_pkts,
            alpha_l0_pkts,
            alpha_l1_pkts,
            alpha_l2_pkts,
            m0u_kBps,
            m1l_kBps,
            m1u_kBps,
            m2l_kBps,
            eta_num,
            eta_max_pct,
            eta_ack_ratio,
            update_interval_ms,
            min_loss_window_pkts,
            ss_exit_mode,
            ss_exit_qdelay_pct,
            pacing,
            ack_counting,
        ]
    )
}

/// Variables decoded by [`vars`].
pub const VAR_DOCS: &[(&str, &str)] = &[
    ("base_rtt_us", "usec: baseRTT, the minimum RTT observed"),
    (
        "avg_rtt_us",
        "usec: T̄, the average RTT (EWMA with weight η)",
    ),
    (
        "qdelay_us",
        "usec: q̂ = T̄ − baseRTT, the average queueing delay",
    ),
    ("alpha", "packets: α in use"),
    ("alpha_level", "level 0/1/2 of the adaptive α ([P0])"),
    ("target_cwnd", "segments: window of the last update (eq. 5)"),
    (
        "phase",
        "0 = slow start, 1 = update RTT, 2 = freeze RTT, 3 = loss recovery",
    ),
    (
        "tput_kBps",
        "kB/s: throughput of the last RTT (drives the α level)",
    ),
    ("ack_ratio", "packets per ACK (EWMA), scales η"),
];

/// FAST's variables, in the units of [`VAR_DOCS`].
pub fn vars(ca_priv: &[u8]) -> Vec<Var> {
    let Some(f) = ca_from_bytes::<cctl_fast_ca>(ca_priv) else {
        return Vec::new();
    };
    let avg = f.avg_rtt_fp as f64 / 1024.0;
    let base = f64::from(f.base_rtt_us);
    vec![
        var("base_rtt_us", base),
        var("avg_rtt_us", avg),
        var("qdelay_us", if avg > base { avg - base } else { 0.0 }),
        var("alpha", f.alpha_pkts),
        var("alpha_level", f.alpha_level),
        var("target_cwnd", f.target_cwnd),
        var("phase", f.phase),
        var("tput_kBps", f.tput_kBps),
        var("ack_ratio", f64::from(f.ack_ratio_fp) / 256.0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn cctl_sizeof_fast_ca() -> u32;
    }

    #[test]
    fn skeleton_type_has_the_c_size_and_fits_icsk_ca_priv() {
        // SAFETY: a pure function without arguments.
        let c = unsafe { cctl_sizeof_fast_ca() };
        assert_eq!(std::mem::size_of::<cctl_fast_ca>() as u32, c);
        assert!(c <= 104, "{c}");
    }

    #[test]
    fn vars_decode_real_units() {
        let f = cctl_fast_ca {
            avg_rtt_fp: 25_000 * 1024 + 512,
            base_rtt_us: 20_000,
            alpha_pkts: 20,
            alpha_level: 1,
            target_cwnd: 120,
            phase: 2,
            tput_kBps: 2500,
            ack_ratio_fp: 512,
            ..Default::default()
        };
        // SAFETY: cctl_fast_ca is plain old data (impl_plain above).
        let v = vars(unsafe { plain::as_bytes(&f) });
        let got: Vec<(&str, f64)> = v.iter().map(|v| (v.name, v.value)).collect();
        assert_eq!(
            got,
            [
                ("base_rtt_us", 20_000.0),
                ("avg_rtt_us", 25_000.5),
                ("qdelay_us", 5_000.5),
                ("alpha", 20.0),
                ("alpha_level", 1.0),
                ("target_cwnd", 120.0),
                ("phase", 2.0),
                ("tput_kBps", 2500.0),
                ("ack_ratio", 2.0)
            ]
        );
    }

    #[test]
    fn crossed_alpha_thresholds_are_refused() {
        let mut v: Params = PARAMS.iter().map(|p| (p.key, p.default)).collect();
        assert!(check(&v).is_ok());
        v.insert("m1l_kBps", 1600);
        let e = check(&v).unwrap_err();
        assert!(
            e.contains("m1l_kBps") && e.contains("m0u_kBps") && e.contains("kB/s"),
            "{e}"
        );
        v.insert("m1l_kBps", 1250);
        v.insert("m2l_kBps", 20_000);
        assert!(check(&v).unwrap_err().contains("m2l_kBps"));
    }
}
