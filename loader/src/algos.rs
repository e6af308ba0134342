//! The algorithms this binary carries: names, summaries, papers and tunables.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::{Error, Result};

/// One load-time tunable of an algorithm (a `const volatile` global of its BPF
/// program). Values are unsigned integers in `unit`.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct ParamSpec {
    /// Key used with `--param key=value`; equals the BPF global's name.
    pub key: &'static str,
    /// Default value (the paper's, see the spec section in `Algorithm::spec`).
    pub default: u32,
    /// Smallest allowed value.
    pub min: u32,
    /// Largest allowed value.
    pub max: u32,
    /// Unit of the value (`ms`, `%`, `bool`, ...).
    pub unit: &'static str,
    /// What it controls, with its symbol in the paper.
    pub doc: &'static str,
}

/// A congestion control carried by this binary as a BPF struct_ops program.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Algorithm {
    /// Short key used on the command line (`cctl load htcp`).
    pub key: &'static str,
    /// Name it registers under by default (`bpf_<key>`), as seen in
    /// /proc/sys/net/ipv4/tcp_available_congestion_control.
    pub cc_name: &'static str,
    /// One-line summary.
    pub summary: &'static str,
    /// Paper(s) and section it implements.
    pub paper: &'static str,
    /// Section of shared/spec/algorithms.md.
    pub spec: &'static str,
    /// Load-time tunables.
    pub params: &'static [ParamSpec],
}

const fn p(
    key: &'static str,
    default: u32,
    min: u32,
    max: u32,
    unit: &'static str,
    doc: &'static str,
) -> ParamSpec {
    ParamSpec {
        key,
        default,
        min,
        max,
        unit,
        doc,
    }
}

const HTCP_PARAMS: &[ParamSpec] = &[
    p(
        "delta_l_ms",
        1000,
        1,
        60_000,
        "ms",
        "Δ_L: time after a congestion event before the quadratic increase starts",
    ),
    p(
        "delta_b_pct",
        20,
        0,
        100,
        "%",
        "Δ_B: change of the epoch's max throughput that forces β = beta_min",
    ),
    p(
        "beta_min_pct",
        50,
        10,
        100,
        "%",
        "lower bound of the adaptive backoff β",
    ),
    p(
        "beta_max_pct",
        80,
        10,
        100,
        "%",
        "upper bound of the adaptive backoff β",
    ),
    p(
        "fixed_beta_pct",
        0,
        0,
        100,
        "%",
        "fixed β ([P2]'s variant); 0 = adaptive",
    ),
    p(
        "use_rtt_scaling",
        1,
        0,
        1,
        "bool",
        "scale the increase by S = Tmin / T_ref",
    ),
    p(
        "rtt_ref_ms",
        100,
        1,
        10_000,
        "ms",
        "T_ref of the RTT scaling",
    ),
    p("rtt_scale_min_pct", 10, 1, 1_000, "%", "lower clamp of S"),
    p("rtt_scale_max_pct", 200, 1, 1_000, "%", "upper clamp of S"),
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
    ),
    p(
        "tmax_spike_ms",
        20,
        0,
        10_000,
        "ms",
        "accept a new Tmax only if within this of the old one (0 = no filter)",
    ),
    p(
        "ack_counting",
        0,
        0,
        1,
        "0=packets,1=events",
        "count acked packets (ABC, [P0]) or ACK events (spec §18.2)",
    ),
];

/// Every algorithm this binary carries.
pub const ALGORITHMS: &[Algorithm] = &[
    Algorithm {
        key: "reno",
        cc_name: "bpf_reno",
        summary: "standard TCP (NewReno): +1 segment per RTT, halve on loss; the baseline",
        paper: "[P1] eq. 1-2; every paper's baseline",
        spec: "§2",
        params: &[],
    },
    Algorithm {
        key: "htcp",
        cc_name: "bpf_htcp",
        summary: "H-TCP: increase grows with Δ since the last loss, adaptive backoff Tmin/Tmax",
        paper: "Leith & Shorten 2004; [P0] §IV-C, Table II",
        spec: "§5",
        params: HTCP_PARAMS,
    },
];

/// Looks an algorithm up by key (`htcp`) or default kernel name (`bpf_htcp`).
pub fn find(name: &str) -> Result<&'static Algorithm> {
    ALGORITHMS
        .iter()
        .find(|a| a.key == name || a.cc_name == name)
        .ok_or_else(|| Error::UnknownAlgorithm {
            name: name.to_string(),
            available: ALGORITHMS
                .iter()
                .map(|a| a.key)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

impl Algorithm {
    /// Human-readable table of the parameters: key, unit, range, default, doc.
    pub fn params_help(&self) -> String {
        if self.params.is_empty() {
            return format!("  ({} has no parameters)", self.key);
        }
        let mut s = String::new();
        for p in self.params {
            let _ = writeln!(
                s,
                "  {:<22} {:<18} [{}..={}] default {}  {}",
                p.key, p.unit, p.min, p.max, p.default, p.doc
            );
        }
        s.pop();
        s
    }

    /// Parses `key=value` strings into a full parameter map (defaults filled in),
    /// refusing unknown keys, values out of range and forbidden combinations.
    pub fn resolve_params(&self, args: &[String]) -> Result<BTreeMap<&'static str, u32>> {
        let mut values: BTreeMap<&'static str, u32> =
            self.params.iter().map(|p| (p.key, p.default)).collect();
        for arg in args {
            let (key, value) = arg.split_once('=').ok_or_else(|| Error::BadParamValue {
                algo: self.key.into(),
                key: arg.clone(),
                reason: "missing '='".into(),
                expected: "key=value".into(),
            })?;
            let spec = self
                .params
                .iter()
                .find(|p| p.key == key.trim())
                .ok_or_else(|| Error::UnknownParam {
                    algo: self.key.into(),
                    key: key.into(),
                    valid: self.params_help(),
                })?;
            let expected = format!("an integer in [{}, {}] {}", spec.min, spec.max, spec.unit);
            let v: u32 = value.trim().parse().map_err(|_| Error::BadParamValue {
                algo: self.key.into(),
                key: spec.key.into(),
                reason: format!("'{value}' is not a non-negative integer"),
                expected: expected.clone(),
            })?;
            if v < spec.min || v > spec.max {
                return Err(Error::BadParamValue {
                    algo: self.key.into(),
                    key: spec.key.into(),
                    reason: format!("{v} is out of range"),
                    expected,
                });
            }
            values.insert(spec.key, v);
        }
        self.check_combination(&values)?;
        Ok(values)
    }

    fn check_combination(&self, v: &BTreeMap<&'static str, u32>) -> Result<()> {
        let bad = |reason: String| {
            Err(Error::BadParamCombination {
                algo: self.key.into(),
                reason,
            })
        };
        if self.key == "htcp" {
            if v["beta_min_pct"] > v["beta_max_pct"] {
                return bad(format!(
                    "beta_min_pct ({}) must not exceed beta_max_pct ({})",
                    v["beta_min_pct"], v["beta_max_pct"]
                ));
            }
            if v["rtt_scale_min_pct"] > v["rtt_scale_max_pct"] {
                return bad(format!(
                    "rtt_scale_min_pct ({}) must not exceed rtt_scale_max_pct ({})",
                    v["rtt_scale_min_pct"], v["rtt_scale_max_pct"]
                ));
            }
            let fixed = v["fixed_beta_pct"];
            if fixed != 0 && !(10..100).contains(&fixed) {
                return bad(format!(
                    "fixed_beta_pct ({fixed}) must be 0 (adaptive) or in [10, 99] %"
                ));
            }
        }
        Ok(())
    }
}

/// Checks a congestion-control name the way the kernel limits it (TCP_CA_NAME_MAX
/// is 16 bytes with the NUL) and restricts it to `[A-Za-z0-9_.]`, before anything
/// touches the kernel.
pub fn validate_cc_name(name: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(Error::InvalidName {
            name: name.into(),
            reason: reason.into(),
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > 15 {
        return bad(&format!("it is {} characters long", name.len()));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '.'))
    {
        return bad(&format!("it contains '{c}'"));
    }
    if name == "." || name == ".." {
        return bad("it is a path component");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_longer_than_15_or_with_odd_characters_are_refused() {
        assert!(validate_cc_name("bpf_htcp").is_ok());
        assert!(validate_cc_name("a.b_C9").is_ok());
        assert!(validate_cc_name("123456789012345").is_ok());
        for bad in ["", "1234567890123456", "bpf-htcp", "a/b", "..", "é", "a b"] {
            let e = validate_cc_name(bad).unwrap_err().to_string();
            assert!(e.contains("[A-Za-z0-9_.]"), "{bad}: {e}");
        }
    }

    #[test]
    fn unknown_algorithm_lists_the_available_ones() {
        let e = find("vegas2").unwrap_err().to_string();
        assert!(e.contains("reno") && e.contains("htcp"), "{e}");
        assert_eq!(find("bpf_htcp").unwrap().key, "htcp");
    }

    #[test]
    fn params_default_to_the_paper_values() {
        let htcp = find("htcp").unwrap();
        let v = htcp.resolve_params(&[]).unwrap();
        assert_eq!(v["delta_l_ms"], 1000);
        assert_eq!(v["delta_b_pct"], 20);
        assert_eq!((v["beta_min_pct"], v["beta_max_pct"]), (50, 80));
        assert_eq!(v["use_rtt_scaling"], 1);
    }

    #[test]
    fn unknown_param_lists_valid_keys_with_units_and_ranges() {
        let htcp = find("htcp").unwrap();
        let e = htcp
            .resolve_params(&["delta_x=3".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("delta_l_ms") && e.contains("ms") && e.contains("[1..=60000]"),
            "{e}"
        );
    }

    #[test]
    fn out_of_range_and_malformed_values_are_refused() {
        let htcp = find("htcp").unwrap();
        for (arg, needle) in [
            ("beta_max_pct=101", "out of range"),
            ("delta_l_ms=-1", "not a non-negative integer"),
            ("delta_l_ms", "missing '='"),
            ("use_rtt_scaling=2", "[0, 1] bool"),
        ] {
            let e = htcp.resolve_params(&[arg.into()]).unwrap_err().to_string();
            assert!(e.contains(needle), "{arg}: {e}");
        }
        let e = htcp
            .resolve_params(&["beta_min_pct=90".into(), "beta_max_pct=60".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("must not exceed"), "{e}");
        let v = htcp.resolve_params(&["fixed_beta_pct=80".into()]).unwrap();
        assert_eq!(v["fixed_beta_pct"], 80);
    }

    #[test]
    fn reno_has_no_params_and_refuses_any() {
        let reno = find("reno").unwrap();
        assert!(reno.resolve_params(&[]).unwrap().is_empty());
        assert!(reno.resolve_params(&["x=1".into()]).is_err());
    }
}
