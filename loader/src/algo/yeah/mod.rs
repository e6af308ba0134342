//! YeAH-TCP (spec §10; [P3] Baiocchi, Castellani, Vacirca 2007, §III): bpf/algo/yeah.bpf.c.

use crate::catalogue::{p, Params, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: yeah,
    id: 9,
    summary: "YeAH-TCP: STCP growth while its own queue is small, Reno and decongestion otherwise",
    paper: "[P3] Baiocchi, Castellani, Vacirca 2007, §III",
    spec: "§10",
    native: Some("yeah"),
    clocked: true,
    params: [
        p(
            "q_max_pkts",
            80,
            1,
            100_000,
            "packets",
            "Q_max: most packets one flow may keep queued (Fast mode needs Q < Q_max)",
        )
        .sym("Q_max").live(),
        p(
            "phy",
            8,
            1,
            1000,
            "1/fraction",
            "φ: Fast mode needs L = RTT_queue/RTT_base < 1/φ",
        )
        .sym("φ").live(),
        p(
            "gamma",
            1,
            1,
            1000,
            "divisor",
            "γ: precautionary decongestion removes Q/γ packets",
        )
        .sym("γ").live(),
        p(
            "epsilon_shift",
            1,
            0,
            31,
            "log2",
            "ε: decongestion removes at most cwnd/2^ε",
        )
        .sym("ε").live(),
        p(
            "delta_shift",
            3,
            0,
            31,
            "log2",
            "δ: a loss removes at least cwnd/2^δ ([P3]: cwnd/8)",
        )
        .sym("δ").live(),
        p(
            "rho_rtts",
            16,
            1,
            1_000_000,
            "RTTs",
            "ρ: consecutive Slow RTTs that mean competing Reno flows (then halve on loss)",
        )
        .sym("ρ").live(),
        p(
            "zeta_rtts",
            50,
            0,
            1_000_000,
            "RTTs",
            "ζ: Fast RTTs after which count_reno is reset",
        )
        .sym("ζ").live(),
        p(
            "stcp_ai_cnt",
            100,
            1,
            100_000,
            "packets",
            "1/a of the Fast-mode STCP increase: +1 segment per min(cwnd, 1/a) acked packets",
        ).live(),
        p(
            "linux_rules",
            0,
            0,
            1,
            "bool",
            "Linux's integer thresholds and count_reno sentinel instead of [P3]'s rules",
        ),
        ACK_COUNTING,
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &[],
            doc: "net/ipv4/tcp_yeah.c: integer Q and L tests, count_reno sentinel 2",
            values: &[("linux_rules", 1)],
        },
    ],
    check: check,
    vars(y: cctl_yeah_ca) {
        q ("packets: Q (lastQ), this flow's queue estimate of the last RTT") = y.last_q,
        l ("fraction: L = RTT_queue/RTT_base of the last RTT") = f64::from(y.l_fp) / 1024.0,
        slow_mode ("bool: 1 = Slow (Reno) mode, 0 = Fast (STCP) mode") = y.slow_mode,
        reno_count ("segments: count_reno, the estimated competing Reno window") = y.reno_count,
        fast_count ("RTTs: count_fast, Fast RTTs since the last reset") = y.fast_count,
        slow_rtts ("RTTs: consecutive Slow RTTs (Linux doing_reno_now)") = y.doing_reno_now,
        base_rtt_us ("usec: RTT_base, the minimum RTT (+1 us)") = y.base_rtt_us,
        decongestions ("count: precautionary decongestions so far") = y.decongestions,
    }
}

/// Forbidden combinations: a loss must remove at least as little as it may at most
/// (δ ≥ 1, i.e. cwnd/2^δ ≤ cwnd/2), and decongestion at most the whole window (ε ≥ 1).
pub fn check(v: &Params) -> std::result::Result<(), String> {
    if v["delta_shift"] < 1 {
        return Err(format!(
            "delta_shift ({} log2) must be in [1, 31] log2: a loss removes at least \
             cwnd/2^delta_shift and at most cwnd/2",
            v["delta_shift"]
        ));
    }
    if v["epsilon_shift"] < 1 {
        return Err(format!(
            "epsilon_shift ({} log2) must be in [1, 31] log2: decongestion must leave \
             at least half of the window",
            v["epsilon_shift"]
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
        let c = std::mem::size_of::<crate::math::cctl_yeah_ca>() as u32;
        assert_eq!(std::mem::size_of::<cctl_yeah_ca>() as u32, c);
        assert!(c <= 104, "{c}");
    }

    #[test]
    fn vars_decode_real_units() {
        let y = cctl_yeah_ca {
            last_q: 91,
            l_fp: 256,
            slow_mode: 1,
            reno_count: 40,
            fast_count: 3,
            doing_reno_now: 17,
            base_rtt_us: 20_001,
            decongestions: 2,
            ..Default::default()
        };
        // SAFETY: cctl_yeah_ca is plain old data (impl_plain above).
        let v = vars(unsafe { plain::as_bytes(&y) });
        let got: Vec<(&str, f64)> = v.iter().map(|v| (v.name, v.value)).collect();
        assert_eq!(
            got,
            [
                ("q", 91.0),
                ("l", 0.25),
                ("slow_mode", 1.0),
                ("reno_count", 40.0),
                ("fast_count", 3.0),
                ("slow_rtts", 17.0),
                ("base_rtt_us", 20_001.0),
                ("decongestions", 2.0)
            ]
        );
    }

    #[test]
    fn shifts_that_would_empty_the_window_are_refused() {
        let mut v: Params = PARAMS.iter().map(|p| (p.key, p.default)).collect();
        assert!(check(&v).is_ok());
        v.insert("delta_shift", 0);
        assert!(check(&v).unwrap_err().contains("delta_shift"));
        v.insert("delta_shift", 3);
        v.insert("epsilon_shift", 0);
        assert!(check(&v).unwrap_err().contains("epsilon_shift"));
    }
}
