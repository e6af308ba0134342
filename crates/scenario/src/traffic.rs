//! Traffic besides forward bulk TCP (issue 28, latency under load): a `[[flows]]` table's
//! `kind` (`"tcp"` or unresponsive `"udp-cbr"`) and `direction`, and the `[[probes]]` tables
//! of irtt-style latency probes, parsed, with what they expand into ([`ProbePlan`]).
//!
//! ```toml
//! [[flows]]
//! kind = "udp-cbr"         # "tcp" (default) | "udp-cbr": constant-bit-rate UDP, no CC
//! rate_mbit = 5            # udp-cbr only (required there): rate of IPv4 packets, Mbit/s
//!
//! [[flows]]
//! direction = "reverse"    # "forward" (default) | "reverse": TCP data from the receiver
//!                          #   side to this flow's sender namespace (RRUL's upload half)
//!
//! [[probes]]               # optional, repeatable: UDP probes, sender 1 <-> receiver
//! interval_ms = 10         # 1..=1000 (default 10)
//! size_bytes = 32          # payload, 32..=1472 (default 32, the probe header)
//! dscp = 0                 # 0..=63 (default 0): IP_TOS = dscp << 2
//! start_s = 0              # default 0; a number or an expression such as "{duration_s}*0.5"
//! stop_s = "{duration_s}"  # default: the end of the run
//! ```

use serde::{Deserialize, Serialize};

use crate::de::de_at;
use crate::error::FieldError;
use crate::expr::{expr_from, Expr};

/// What a `[[flows]]` table sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum FlowKind {
    /// A bulk (or fixed-size) TCP transfer under a congestion control.
    #[default]
    Tcp,
    /// Unresponsive constant-bit-rate UDP at the flow's `rate_mbit` (`cctl_netem::udp`):
    /// no congestion control, cross traffic that does not back off.
    UdpCbr,
}

impl FlowKind {
    /// Whether it is TCP (the default).
    pub fn is_tcp(&self) -> bool {
        *self == FlowKind::Tcp
    }

    /// The name in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            FlowKind::Tcp => "tcp",
            FlowKind::UdpCbr => "udp-cbr",
        }
    }
}

/// Which way a flow's data crosses the dumbbell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// From the flow's sender namespace to the receiver, through the bottleneck.
    #[default]
    Forward,
    /// From the receiver namespace to the flow's sender namespace, through the reverse
    /// path (shaped by `reverse_rate_mbit` if set).
    Reverse,
}

impl Direction {
    /// Whether it is forward (the default).
    pub fn is_forward(&self) -> bool {
        *self == Direction::Forward
    }
}

/// One `[[probes]]` table of a run point: irtt-style isochronous UDP probes measuring the
/// round trip and both one-way delays while the flows run (`cctl_netem::probes`). A runner
/// sends them from the first flow's sender namespace (its access path) to the receiver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbePlan {
    /// Index of the `[[probes]]` table.
    pub entry: usize,
    /// Time between probes, in ms.
    pub interval_ms: f64,
    /// UDP payload of a probe, in bytes.
    pub size_bytes: u32,
    /// DiffServ code point of the probes and their echoes (0..=63).
    pub dscp: u8,
    /// First probe, in s from the start of the run.
    pub start_s: f64,
    /// No probe at or after this time, in s from the start of the run.
    pub stop_s: f64,
}

/// Default interval of `[[probes]]`, in ms.
pub const DEFAULT_PROBE_INTERVAL_MS: f64 = cctl_netem::probes::DEFAULT_INTERVAL_MS as f64;

/// Allowed `interval_ms` of `[[probes]]`, in ms.
pub const PROBE_INTERVAL_MS: std::ops::RangeInclusive<f64> = 1.0..=1000.0;

/// A `[[probes]]` table as parsed; its times are resolved per point.
#[derive(Debug, Clone)]
pub(crate) struct ProbeTable {
    pub(crate) interval_ms: f64,
    pub(crate) size_bytes: u32,
    pub(crate) dscp: u8,
    pub(crate) start_s: Option<Expr>,
    pub(crate) stop_s: Option<Expr>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProbe {
    interval_ms: Option<f64>,
    size_bytes: Option<i64>,
    dscp: Option<i64>,
    start_s: Option<toml::Value>,
    stop_s: Option<toml::Value>,
}

/// Parses the `[[probes]]` table `value`, found at `at` (`probes[0]`).
pub(crate) fn parse_probe(value: toml::Value, at: &str) -> Result<ProbeTable, FieldError> {
    let raw: RawProbe = de_at(value, at)?;
    let f = |k: &str| format!("{at}.{k}");
    let interval_ms = raw.interval_ms.unwrap_or(DEFAULT_PROBE_INTERVAL_MS);
    if !PROBE_INTERVAL_MS.contains(&interval_ms) {
        return Err(FieldError::new(
            f("interval_ms"),
            format!(
                "{interval_ms} ms is not allowed: probes go every {} to {} ms",
                PROBE_INTERVAL_MS.start(),
                PROBE_INTERVAL_MS.end()
            ),
        ));
    }
    let (lo, hi) = (
        cctl_netem::probes::PROBE_HEADER_BYTES,
        cctl_netem::probes::MAX_PROBE_BYTES,
    );
    let size = raw.size_bytes.unwrap_or(lo as i64);
    if !(lo as i64..=hi as i64).contains(&size) {
        return Err(FieldError::new(
            f("size_bytes"),
            format!(
                "{size} bytes is not allowed: a probe's payload is {lo} (its header) to {hi} \
                 bytes (a 1500-byte IPv4 packet)"
            ),
        ));
    }
    let dscp = raw.dscp.unwrap_or(0);
    if !(0..=63).contains(&dscp) {
        return Err(FieldError::new(
            f("dscp"),
            format!("{dscp} is not allowed: a DSCP is 0 to 63 (46 is EF, 8 is CS1)"),
        ));
    }
    Ok(ProbeTable {
        interval_ms,
        size_bytes: size as u32,
        dscp: dscp as u8,
        start_s: raw
            .start_s
            .as_ref()
            .map(|v| expr_from(v, &f("start_s")))
            .transpose()?,
        stop_s: raw
            .stop_s
            .as_ref()
            .map(|v| expr_from(v, &f("stop_s")))
            .transpose()?,
    })
}

/// A flow table's `kind`, found at `at` (`flows[0].kind`); `None` is TCP.
pub(crate) fn parse_kind(value: Option<&str>, at: &str) -> Result<FlowKind, FieldError> {
    match value {
        None | Some("tcp") => Ok(FlowKind::Tcp),
        Some("udp-cbr") => Ok(FlowKind::UdpCbr),
        Some(other) => Err(FieldError::new(
            at,
            format!("`{other}`: expected \"tcp\" (the default) or \"udp-cbr\""),
        )),
    }
}

/// A flow table's `direction`, found at `at` (`flows[0].direction`); `None` is forward.
pub(crate) fn parse_direction(value: Option<&str>, at: &str) -> Result<Direction, FieldError> {
    match value {
        None | Some("forward") => Ok(Direction::Forward),
        Some("reverse") => Ok(Direction::Reverse),
        Some(other) => Err(FieldError::new(
            at,
            format!("`{other}`: expected \"forward\" (the default) or \"reverse\""),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::test_input::{rejects, GOOD};
    use crate::{Direction, FlowKind, Profile, Scenario};

    /// `GOOD` with `extra` added after its second flow table.
    fn with(extra: &str) -> Result<Scenario, crate::ScenarioError> {
        let text = GOOD.replacen("start_s = 5\n", &format!("start_s = 5\n{extra}\n"), 1);
        Scenario::parse(&text, Path::new("/tmp/cases/traffic.toml"))
    }

    #[test]
    fn probes_and_udp_and_reverse_flows_expand_into_the_run_point() {
        let s = with(
            "[[flows]]\nkind = \"udp-cbr\"\nrate_mbit = \"{rtt_ms}*0.1\"\nstart_s = 2\n\
             [[flows]]\ndirection = \"reverse\"\ncount = 2\n\
             [[probes]]\ninterval_ms = 20\ndscp = 46\nstop_s = \"{duration_s}*0.5\"\n\
             [[probes]]",
        )
        .unwrap();
        let p = &s.expand(Profile::Ci, 1).unwrap()[1]; // rtt_ms = 42
        let kinds: Vec<(FlowKind, Direction, Option<f64>)> = p
            .flows
            .iter()
            .map(|f| (f.kind, f.direction, f.rate_mbit))
            .collect();
        let (tcp, fwd, rev) = (FlowKind::Tcp, Direction::Forward, Direction::Reverse);
        assert_eq!(
            kinds,
            [
                (tcp, fwd, None),
                (tcp, fwd, None),
                (FlowKind::UdpCbr, fwd, Some(4.2)),
                (tcp, rev, None),
                (tcp, rev, None),
            ]
        );
        assert_eq!(p.probes.len(), 2);
        let (a, b) = (&p.probes[0], &p.probes[1]);
        assert_eq!((a.interval_ms, a.size_bytes, a.dscp), (20.0, 32, 46));
        assert_eq!((a.start_s, a.stop_s), (0.0, 20.0));
        assert_eq!((b.interval_ms, b.dscp, b.stop_s), (10.0, 0, 40.0));
    }

    #[test]
    fn points_written_before_probes_and_flow_kinds_still_read() {
        let p = &Scenario::parse(GOOD, Path::new("good.toml"))
            .unwrap()
            .expand(Profile::Ci, 1)
            .unwrap()[0];
        let mut json = serde_json::to_value(p).unwrap();
        assert!(json.get("probes").is_none(), "no probes, no key");
        for f in json["flows"].as_array_mut().unwrap() {
            let f = f.as_object_mut().unwrap();
            f.remove("kind");
            f.remove("direction");
        }
        let back: crate::RunPoint = serde_json::from_value(json).unwrap();
        assert_eq!(&back, p);
        assert!(back.flows.iter().all(|f| f.kind == FlowKind::Tcp));
    }

    #[test]
    fn bad_kinds_directions_and_rates_are_refused_naming_the_field() {
        rejects(
            "start_s = 5",
            "start_s = 5\nkind = \"udp\"",
            "flows[1].kind",
            &["`udp`", "\"tcp\"", "\"udp-cbr\""],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\ndirection = \"up\"",
            "flows[1].direction",
            &["`up`", "\"forward\"", "\"reverse\""],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\nrate_mbit = 5",
            "flows[1].rate_mbit",
            &["udp-cbr"],
        );
        rejects(
            "cc = \"reno\"\nstart_s = 5",
            "kind = \"udp-cbr\"\nstart_s = 5",
            "flows[1].rate_mbit",
            &["missing", "needs rate_mbit"],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\nkind = \"udp-cbr\"\nrate_mbit = 2",
            "flows[1].cc",
            &["no congestion control"],
        );
        rejects(
            "cc = \"reno\"\nstart_s = 5",
            "kind = \"udp-cbr\"\nrate_mbit = 2\ndirection = \"reverse\"\nstart_s = 5",
            "flows[1].direction",
            &["TCP only"],
        );
        rejects(
            "cc = \"reno\"\nstart_s = 5",
            "kind = \"udp-cbr\"\nrate_mbit = 2\nsize_mb = 1\nstart_s = 5",
            "flows[1].size_mb",
            &["not allowed"],
        );
        rejects(
            "cc = \"reno\"\nstart_s = 5",
            "kind = \"udp-cbr\"\nrate_mbit = 0\nstart_s = 5",
            "flows[1].rate_mbit",
            &["0 Mbit/s is not allowed", "> 0"],
        );
        rejects(
            "cc = \"reno\"\nstart_s = 5",
            "kind = \"udp-cbr\"\nrate_mbit = 60\nstart_s = 5",
            "flows[1].rate_mbit",
            &["ci profile's cap"],
        );
    }

    #[test]
    fn bad_probes_are_refused_naming_the_field_and_what_is_allowed() {
        let cases: [(&str, &str, &[&str]); 8] = [
            (
                "interval_ms = 0",
                "probes[0].interval_ms",
                &["1 to 1000 ms"],
            ),
            ("interval_ms = 5000", "probes[0].interval_ms", &["5000 ms"]),
            ("size_bytes = 8", "probes[0].size_bytes", &["32", "1472"]),
            ("size_bytes = 9000", "probes[0].size_bytes", &["9000 bytes"]),
            ("dscp = 64", "probes[0].dscp", &["0 to 63"]),
            (
                "stop_s = 99",
                "probes[0].stop_s",
                &["after the end of the run"],
            ),
            (
                "start_s = 30\nstop_s = 20",
                "probes[0].stop_s",
                &["start_s must be < stop_s"],
            ),
            (
                "interval = 10",
                "probes[0].interval",
                &["`interval_ms`", "`dscp`"],
            ),
        ];
        for (body, field, hints) in cases {
            let e = with(&format!("[[probes]]\n{body}")).expect_err(body);
            let shown = e.to_string();
            assert_eq!(e.field(), Some(field), "{shown}");
            for h in hints {
                assert!(shown.contains(h), "`{h}` not in: {shown}");
            }
        }
    }

    #[test]
    fn probes_and_reverse_flows_are_refused_on_a_chain() {
        let chain = "[topology]\nbottlenecks = [{}]\n[[flows]]\npath = [1, 1]\n";
        let text = |extra: &str| {
            format!(
                "id = \"X1\"\nname = \"chain\"\ntitle = \"t\"\nsource = \"s\"\n\
                 [defaults]\nrate_mbit = 10\nrtt_ms = 10\nbuffer_bdp = 1\n{chain}{extra}\n\
                 [profiles.paper]\nduration_s = 30\n[profiles.ci]\nduration_s = 20\n\
                 note = \"CI scale: never compare with the papers' numbers\"\n"
            )
        };
        let parse = |t: String| Scenario::parse(&t, Path::new("chain.toml"));
        parse(text("")).unwrap();
        parse(text("kind = \"udp-cbr\"\nrate_mbit = 1")).unwrap();
        let e = parse(text("[[probes]]")).unwrap_err();
        assert_eq!(e.field(), Some("probes"), "{e}");
        assert!(e.to_string().contains("[topology]"), "{e}");
        let e = parse(text("direction = \"reverse\"")).unwrap_err();
        assert_eq!(e.field(), Some("flows[0].direction"), "{e}");
    }
}
