//! TCP Vegas (spec §9; Brakmo & Peterson 1995; [P1] footnote 6): bpf/algo/vegas.bpf.c.

use crate::catalogue::{p, Params, Profile, ACK_COUNTING};

pub mod model;

crate::algo::declare_algorithm! {
    key: vegas,
    id: 8,
    summary: "TCP Vegas: ±1 segment per RTT to keep α..β packets queued (delay-based)",
    paper: "Brakmo & Peterson 1995; [P1] footnote 6",
    spec: "§9",
    native: Some("vegas"),
    clocked: true,
    params: [
        p(
            "alpha_pkts",
            1,
            0,
            1000,
            "packets",
            "α: grow by one segment per RTT while diff < α",
        )
        .sym("α").live(),
        p(
            "beta_pkts",
            3,
            0,
            1000,
            "packets",
            "β: shrink by one segment per RTT while diff > β",
        )
        .sym("β").live(),
        p(
            "gamma_pkts",
            1,
            0,
            1000,
            "packets",
            "γ: leave slow start once diff > γ",
        )
        .sym("γ").live(),
        p(
            "integer_diff",
            0,
            0,
            1,
            "bool",
            "compare diff truncated to whole packets, as Linux does",
        ),
        ACK_COUNTING,
    ],
    profiles: [
        Profile {
            name: "linux",
            tag: "l",
            papers: &[],
            doc: "net/ipv4/tcp_vegas.c: alpha 2, beta 4, gamma 1, diff truncated to whole packets",
            values: &[("alpha_pkts", 2), ("beta_pkts", 4), ("integer_diff", 1)],
        },
    ],
    check: check,
    vars(v: cctl_vegas_ca) {
        diff ("packets: w·(rtt − baseRTT)/baseRTT of the last Vegas RTT") = f64::from(v.diff_fp) / 1024.0,
        base_rtt_us ("usec: baseRTT, the minimum RTT (+1 us)") = v.base_rtt_us,
        target_cwnd ("segments: w·baseRTT/rtt of the last Vegas RTT") = v.target_cwnd,
        doing_vegas ("bool: the per-RTT adjustment runs (Open state)") = v.doing_vegas_now,
    }
}

/// Forbidden combination: α > β (the window would have no band to rest in).
pub fn check(v: &Params) -> std::result::Result<(), String> {
    if v["alpha_pkts"] > v["beta_pkts"] {
        return Err(format!(
            "alpha_pkts ({} packets) must not exceed beta_pkts ({} packets); both in [0, 1000]",
            v["alpha_pkts"], v["beta_pkts"]
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
        let c = std::mem::size_of::<crate::math::cctl_vegas_ca>() as u32;
        assert_eq!(std::mem::size_of::<cctl_vegas_ca>() as u32, c);
        assert!(c <= 104, "{c}");
    }

    #[test]
    fn vars_decode_real_units() {
        let mut ca = cctl_vegas_ca {
            diff_fp: 3 * 1024 + 512,
            base_rtt_us: 10_001,
            target_cwnd: 17,
            doing_vegas_now: 1,
            ..Default::default()
        };
        ca.m.magic = 1;
        // SAFETY: cctl_vegas_ca is plain old data (impl_plain above).
        let bytes = unsafe { plain::as_bytes(&ca) };
        let v = vars(bytes);
        assert_eq!(v[0], crate::algo::var("diff", 3.5));
        assert_eq!(v[1], crate::algo::var("base_rtt_us", 10_001));
        assert_eq!(v[2], crate::algo::var("target_cwnd", 17));
        assert_eq!(v[3], crate::algo::var("doing_vegas", 1));
    }

    #[test]
    fn alpha_above_beta_is_refused() {
        let mut v: Params = PARAMS.iter().map(|p| (p.key, p.default)).collect();
        assert!(check(&v).is_ok());
        v.insert("alpha_pkts", 5);
        let e = check(&v).unwrap_err();
        assert!(e.contains("alpha_pkts") && e.contains("beta_pkts"), "{e}");
    }
}
