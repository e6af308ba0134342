//! FAST TCP (spec §8; [P1] Jin, Wei, Low 2004, §IV; [P0] §IV-E adaptive α): bpf/algo/fast.bpf.c.
//! There is no Linux module: the model in [`model`] is the reference.

use crate::catalogue::{p, Params, Profile, ACK_COUNTING};

pub mod model;
pub mod replay;

crate::algo::declare_algorithm! {
    key: fast,
    id: 7,
    summary: "FAST TCP: w <- min(2w, (1-γ)w + γ(baseRTT/avgRTT·w + α)), α packets queued",
    paper: "[P1] Jin, Wei, Low 2004, §IV, eq. 5; [P0] §IV-E adaptive α",
    spec: "§8",
    native: None,
    clocked: true,
    params: [
        p(
            "gamma_pct",
            50,
            1,
            100,
            "%",
            "γ: weight of the new window estimate in eq. (5) ([P0]: 1/2)",
        )
        .sym("γ").live(),
        p(
            "alpha_mode",
            1,
            0,
            1,
            "0=fixed,1=adaptive",
            "α: fixed alpha_pkts, or [P0]'s levels by achieved throughput",
        )
        .sym("α"),
        p(
            "alpha_pkts",
            20,
            1,
            100_000,
            "packets",
            "α with alpha_mode=0: packets each flow keeps queued",
        )
        .sym("α with alpha_mode=0").live(),
        p(
            "alpha_l0_pkts",
            8,
            1,
            100_000,
            "packets",
            "m0a: α at level 0 ([P0])",
        )
        .sym("m0a").live(),
        p(
            "alpha_l1_pkts",
            20,
            1,
            100_000,
            "packets",
            "m1a: α at level 1 ([P0])",
        )
        .sym("m1a").live(),
        p(
            "alpha_l2_pkts",
            200,
            1,
            100_000,
            "packets",
            "m2a: α at level 2 ([P0])",
        )
        .sym("m2a").live(),
        p(
            "m0u_kBps",
            1500,
            0,
            100_000_000,
            "kB/s",
            "m0u: level 0 -> 1 above this throughput",
        )
        .sym("m0u").live(),
        p(
            "m1l_kBps",
            1250,
            0,
            100_000_000,
            "kB/s",
            "m1l: level 1 -> 0 below this throughput",
        )
        .sym("m1l").live(),
        p(
            "m1u_kBps",
            15000,
            0,
            100_000_000,
            "kB/s",
            "m1u: level 1 -> 2 above this throughput",
        )
        .sym("m1u").live(),
        p(
            "m2l_kBps",
            12500,
            0,
            100_000_000,
            "kB/s",
            "m2l: level 2 -> 1 below this throughput",
        )
        .sym("m2l").live(),
        p(
            "eta_num",
            3,
            1,
            1000,
            "packets",
            "η = min(eta_num·r/w, eta_max): the RTT average's weight ([P1]: 3)",
        ).live(),
        p("eta_max_pct", 25, 1, 100, "%", "cap of η ([P1]: 1/4)")
        .sym("cap of η ([P1]").live(),
        p(
            "eta_ack_ratio",
            1,
            0,
            1,
            "bool",
            "scale η by the measured packets per ACK (spec [CHOICE] for delayed ACKs)",
        ).live(),
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
        ).live(),
        p(
            "ss_exit_mode",
            0,
            0,
            1,
            "0=qdelay,1=diff",
            "leave slow start when q̂ > ss_exit_qdelay_pct·baseRTT, or when w·q̂/T̄ > α/2",
        ).live(),
        p(
            "ss_exit_qdelay_pct",
            10,
            0,
            1000,
            "%",
            "queueing delay, % of baseRTT, that ends slow start (ss_exit_mode=0)",
        ).live(),
        p(
            "pacing",
            1,
            0,
            1,
            "bool",
            "ask for the kernel's internal pacing (~1.2·cwnd/srtt), spec §8 burstiness",
        ),
        ACK_COUNTING,
    ],
    profiles: [
        Profile {
            name: "p0",
            tag: "p0",
            papers: &["P0"],
            doc: "[P0]'s patch as [P0] reports it: adaptive α whose flows keep f_α/2 packets \
                  queued each ([P0] §IV-E; [P1] and eq. 5 keep α), so the levels are halved: 4/10/100",
            values: &[("alpha_l0_pkts", 4), ("alpha_l1_pkts", 10), ("alpha_l2_pkts", 100)],
        },
        Profile {
            name: "p1",
            tag: "p1",
            papers: &["P1"],
            doc: "[P1]'s experiments: one constant α for every flow (its value is not given; \
                  200 packets, the level [P0]'s patch reaches above 100 Mbit/s)",
            values: &[("alpha_mode", 0), ("alpha_pkts", 200)],
        },
    ],
    check: check,
    replay: replay::rules,
    vars(f: cctl_fast_ca) {
        base_rtt_us ("usec: baseRTT, the minimum RTT observed") = f64::from(f.base_rtt_us),
        avg_rtt_us ("usec: T̄, the average RTT (EWMA with weight η)") = f.avg_rtt_fp as f64 / 1024.0,
        qdelay_us ("usec: q̂ = T̄ − baseRTT, the average queueing delay") = (f.avg_rtt_fp as f64 / 1024.0 - f64::from(f.base_rtt_us)).max(0.0),
        alpha ("packets: α in use") = f.alpha_pkts,
        alpha_level ("level 0/1/2 of the adaptive α ([P0])") = f.alpha_level,
        target_cwnd ("segments: window of the last update (eq. 5)") = f.target_cwnd,
        phase ("0 = slow start, 1 = update RTT, 2 = freeze RTT, 3 = loss recovery") = f.phase,
        tput_kBps ("kB/s: throughput of the last RTT (drives the α level)") = f.tput_kBps,
        ack_ratio ("packets per ACK (EWMA), scales η") = f64::from(f.ack_ratio_fp) / 256.0,
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;



    #[test]
    fn skeleton_type_has_the_c_size_and_fits_icsk_ca_priv() {
        // SAFETY: a pure function without arguments.
        let c = std::mem::size_of::<crate::math::cctl_fast_ca>() as u32;
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
