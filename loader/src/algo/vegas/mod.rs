//! TCP Vegas (spec §9; Brakmo & Peterson 1995; [P1] footnote 6): bpf/vegas.bpf.c.

use crate::algos::{p, ParamSpec, Params, Profile, ACK_COUNTING};
use crate::skel::vegas::types::cctl_vegas_ca;
use crate::Result;

use super::{ca_from_bytes, impl_plain, load_struct_ops, var, Var};

pub mod model;

impl_plain!(cctl_vegas_ca);

/// Tunables of bpf/vegas.bpf.c; defaults are the original Vegas's (spec §9 table, [GK]).
pub const PARAMS: &[ParamSpec] = &[
    p(
        "alpha_pkts",
        1,
        0,
        1000,
        "packets",
        "α: grow by one segment per RTT while diff < α",
    ),
    p(
        "beta_pkts",
        3,
        0,
        1000,
        "packets",
        "β: shrink by one segment per RTT while diff > β",
    ),
    p(
        "gamma_pkts",
        1,
        0,
        1000,
        "packets",
        "γ: leave slow start once diff > γ",
    ),
    p(
        "integer_diff",
        0,
        0,
        1,
        "bool",
        "compare diff truncated to whole packets, as Linux does",
    ),
    ACK_COUNTING,
];

/// Linux `tcp_vegas`'s module parameters (α = 2, β = 4, γ = 1) and integer diff.
pub const PROFILES: &[Profile] = &[Profile {
    name: "linux",
    tag: "l",
    doc: "net/ipv4/tcp_vegas.c: alpha 2, beta 4, gamma 1, diff truncated to whole packets",
    values: &[("alpha_pkts", 2), ("beta_pkts", 4), ("integer_diff", 1)],
}];

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

/// Loads bpf/vegas.bpf.c with `params` and registers it as `name`.
pub fn load(name: &str, params: &Params) -> Result<crate::algo::Registered> {
    load_struct_ops!(
        name,
        params,
        vegas::VegasSkelBuilder,
        vegas / vegas_mut,
        [
            alpha_pkts,
            beta_pkts,
            gamma_pkts,
            integer_diff,
            ack_counting
        ]
    )
}

/// Variables decoded by [`vars`].
pub const VAR_DOCS: &[(&str, &str)] = &[
    (
        "diff",
        "packets: w·(rtt − baseRTT)/baseRTT of the last Vegas RTT",
    ),
    ("base_rtt_us", "usec: baseRTT, the minimum RTT (+1 us)"),
    (
        "target_cwnd",
        "segments: w·baseRTT/rtt of the last Vegas RTT",
    ),
    (
        "doing_vegas",
        "bool: the per-RTT adjustment runs (Open state)",
    ),
];

/// Vegas's variables: `diff` (packets), `base_rtt_us` (usec), `target_cwnd`
/// (segments), `doing_vegas` (0/1).
pub fn vars(ca_priv: &[u8]) -> Vec<Var> {
    let Some(v) = ca_from_bytes::<cctl_vegas_ca>(ca_priv) else {
        return Vec::new();
    };
    vec![
        var("diff", f64::from(v.diff_fp) / 1024.0),
        var("base_rtt_us", v.base_rtt_us),
        var("target_cwnd", v.target_cwnd),
        var("doing_vegas", v.doing_vegas_now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    extern "C" {
        fn cctl_sizeof_vegas_ca() -> u32;
    }

    #[test]
    fn skeleton_type_has_the_c_size_and_fits_icsk_ca_priv() {
        // SAFETY: a pure function without arguments.
        let c = unsafe { cctl_sizeof_vegas_ca() };
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
        assert_eq!(v[0], var("diff", 3.5));
        assert_eq!(v[1], var("base_rtt_us", 10_001));
        assert_eq!(v[2], var("target_cwnd", 17));
        assert_eq!(v[3], var("doing_vegas", 1));
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
