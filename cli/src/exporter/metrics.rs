//! The metric families the exporter fills from collector samples, their names, units,
//! buckets and help texts, and the registry that serves them (with the scrape-time
//! collectors of [`super::scrape`] and [`super::flows`] added by the caller).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// Bucket bounds of the cwnd histogram, segments: powers of two from 1 to 65,536.
pub fn cwnd_buckets() -> Vec<f64> {
    (0..=16).map(|i| f64::from(1u32 << i)).collect()
}

/// Bucket bounds of the RTT histograms (srtt, min RTT), seconds: 25 µs doubling up to
/// about 6.6 s (loopback RTTs are tens of µs, WAN paths hundreds of ms).
pub fn rtt_buckets() -> Vec<f64> {
    (0..19).map(|i| 25e-6 * f64::from(1u32 << i)).collect()
}

/// Bucket bounds of the β histogram (the fraction of cwnd kept at a backoff): 0.5 to 1.0
/// in steps of 0.05 (H-TCP's β lies in [0.5, 0.8], Reno's is 0.5, Cubic's 0.7).
pub fn beta_buckets() -> Vec<f64> {
    (10..=20).map(|i| f64::from(i) * 0.05).collect()
}

fn cwnd_histogram() -> Histogram {
    Histogram::new(cwnd_buckets())
}

fn rtt_histogram() -> Histogram {
    Histogram::new(rtt_buckets())
}

fn beta_histogram() -> Histogram {
    Histogram::new(beta_buckets())
}

/// Every label name the exporter's families use, with what it means: one name per concept
/// across all families. Tests check that the exposition uses no other and that
/// docs/operations/exporter.md has a row for each.
#[cfg(test)]
pub const LABELS: &[(&str, &str)] = &[
    (
        "cc",
        "congestion-control name as the kernel knows it (bpf_htcp, cubic)",
    ),
    (
        "algo",
        "cctl algorithm key of a cctl-registered congestion control (htcp)",
    ),
    (
        "cc_version",
        "loaded version of a cctl-registered congestion control (1, 2, ...; cctl list)",
    ),
    (
        "profile",
        "parameter profile of a loaded version (empty: none)",
    ),
    (
        "map_id",
        "struct_ops map id of a loaded version (the samples' ca_map_id)",
    ),
    (
        "active",
        "whether new connections get this loaded version (true, false)",
    ),
    ("param", "parameter name, unit in the name (delta_l_ms)"),
    ("state", "CA state entered: cwr, recovery, loss"),
    (
        "callback",
        "struct_ops callback (cong_avoid, ssthresh, ...)",
    ),
    ("prog_id", "BPF program id of a collector program"),
    (
        "source",
        "scrape-time source that failed: census, registry, bpf_stats",
    ),
    (
        "cctl_version",
        "version of the cctl binary serving the metrics",
    ),
    ("cookie", "socket cookie of a flow (per-flow series only)"),
    (
        "netns_cookie",
        "cookie of a flow's network namespace, as in the samples (per-flow series only)",
    ),
    ("local", "a flow's local ADDR:PORT (per-flow series only)"),
    ("remote", "a flow's remote ADDR:PORT (per-flow series only)"),
    ("le", "histogram bucket bound (Prometheus's own)"),
];

/// Label of the aggregates: the congestion control a socket runs (its kernel name,
/// `bpf_htcp`, `cubic`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct CcLabels {
    /// Congestion-control name (interned, as samples carry it: a lookup allocates nothing).
    pub cc: &'static str,
}

/// Labels of the CA-state entry counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    /// Congestion-control name (interned).
    pub cc: &'static str,
    /// The state entered: `cwr`, `recovery` or `loss`.
    pub state: &'static str,
}

/// Labels of the exporter's own error counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    /// What failed: `census`, `registry`, `bpf_stats`.
    pub source: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The families filled sample by sample ([`super::flows::FlowTable::observe`]).
#[derive(Debug)]
pub struct Metrics {
    /// Congestion window of each sample, segments.
    pub cwnd: HistogramFamily<CcLabels>,
    /// Smoothed RTT of each sample, seconds.
    pub srtt: HistogramFamily<CcLabels>,
    /// Windowed minimum RTT of each sample, seconds.
    pub min_rtt: HistogramFamily<CcLabels>,
    /// Bytes acknowledged by the sampled flows, bytes.
    pub acked_bytes: Family<CcLabels, Counter>,
    /// Segments retransmitted by the sampled flows, count.
    pub retransmitted_segments: Family<CcLabels, Counter>,
    /// Entries into CWR, Recovery and Loss, count.
    pub ca_state_entries: Family<StateLabels, Counter>,
    /// Window reductions of cctl's algorithms, count.
    pub backoffs: Family<CcLabels, Counter>,
    /// β at the latest backoff, per sample that saw new backoffs, ratio.
    pub backoff_beta: HistogramFamily<CcLabels>,
    /// Flows the exporter keeps state for, count.
    pub tracked_flows: Gauge,
    /// Failed reads of the scrape-time sources, count.
    pub source_errors: Family<SourceLabels, Counter>,
}

/// One registered family as documented in docs/operations/exporter.md: name (without the `_total` a counter
/// gets), type, unit and help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Described {
    /// Full family name, `cctl_` prefix included.
    pub name: &'static str,
    /// `counter`, `gauge` or `histogram`.
    pub kind: &'static str,
    /// Help text (prometheus-client appends the final period).
    pub help: &'static str,
}

/// Help texts of the families of [`Metrics`], in registration order.
pub const SAMPLE_FAMILIES: &[Described] = &[
    Described {
        name: "cctl_cwnd_segments",
        kind: "histogram",
        help: "Congestion window of the collector's samples, by congestion control, in segments (one observation per sample: each flow every --interval-ms and at each CA-state change)",
    },
    Described {
        name: "cctl_srtt_seconds",
        kind: "histogram",
        help: "Smoothed RTT (kernel srtt) of the collector's samples, by congestion control, in seconds",
    },
    Described {
        name: "cctl_min_rtt_seconds",
        kind: "histogram",
        help: "Windowed minimum RTT (kernel min_rtt) of the collector's samples, by congestion control, in seconds",
    },
    Described {
        name: "cctl_acked_bytes",
        kind: "counter",
        help: "Bytes acknowledged by the sampled flows (tcp_sock.bytes_acked, counted from each flow's start), by the congestion control they ran",
    },
    Described {
        name: "cctl_retransmitted_segments",
        kind: "counter",
        help: "Segments retransmitted by the sampled flows (tcp_sock.total_retrans, counted from each flow's start), by congestion control",
    },
    Described {
        name: "cctl_ca_state_entries",
        kind: "counter",
        help: "Entries of flows into the CWR, Recovery and Loss CA states since the exporter started, counted by the kernel at each tcp_set_ca_state() that changes the state, by congestion control and state",
    },
    Described {
        name: "cctl_backoffs",
        kind: "counter",
        help: "Window reductions (backoffs) counted by cctl's algorithms in their flows' state, by congestion control",
    },
    Described {
        name: "cctl_backoff_beta_ratio",
        kind: "histogram",
        help: "Beta (fraction of cwnd kept) applied at the latest backoff of a cctl algorithm's flow, one observation per sample in which the flow's backoffs went up, by congestion control",
    },
    Described {
        name: "cctl_exporter_tracked_flows",
        kind: "gauge",
        help: "Flows (socket cookies) the exporter keeps per-flow state for, to turn their life-to-date counters into increments",
    },
    Described {
        name: "cctl_exporter_source_errors",
        kind: "counter",
        help: "Scrapes at which a source could not be read (census: the socket census; registry: /run/cctl; bpf_stats: BPF program statistics), by source",
    },
];

impl Metrics {
    /// New, empty families.
    pub fn new() -> Metrics {
        Metrics {
            cwnd: Family::new_with_constructor(cwnd_histogram),
            srtt: Family::new_with_constructor(rtt_histogram),
            min_rtt: Family::new_with_constructor(rtt_histogram),
            acked_bytes: Family::default(),
            retransmitted_segments: Family::default(),
            ca_state_entries: Family::default(),
            backoffs: Family::default(),
            backoff_beta: Family::new_with_constructor(beta_histogram),
            tracked_flows: Gauge::default(),
            source_errors: Family::default(),
        }
    }

    /// Registers every family in `registry` under the names of [`SAMPLE_FAMILIES`] (the
    /// registry gets no prefix: the names carry it).
    pub fn register(&self, registry: &mut Registry) {
        let help = |name: &str| {
            SAMPLE_FAMILIES
                .iter()
                .find(|d| d.name == name)
                .map(|d| d.help)
                .expect("every family is described")
        };
        let segments = || Unit::Other("segments".into());
        registry.register_with_unit(
            "cctl_cwnd",
            help("cctl_cwnd_segments"),
            segments(),
            self.cwnd.clone(),
        );
        registry.register_with_unit(
            "cctl_srtt",
            help("cctl_srtt_seconds"),
            Unit::Seconds,
            self.srtt.clone(),
        );
        registry.register_with_unit(
            "cctl_min_rtt",
            help("cctl_min_rtt_seconds"),
            Unit::Seconds,
            self.min_rtt.clone(),
        );
        registry.register_with_unit(
            "cctl_acked",
            help("cctl_acked_bytes"),
            Unit::Bytes,
            self.acked_bytes.clone(),
        );
        registry.register_with_unit(
            "cctl_retransmitted",
            help("cctl_retransmitted_segments"),
            segments(),
            self.retransmitted_segments.clone(),
        );
        registry.register(
            "cctl_ca_state_entries",
            help("cctl_ca_state_entries"),
            self.ca_state_entries.clone(),
        );
        registry.register(
            "cctl_backoffs",
            help("cctl_backoffs"),
            self.backoffs.clone(),
        );
        registry.register_with_unit(
            "cctl_backoff_beta",
            help("cctl_backoff_beta_ratio"),
            Unit::Other("ratio".into()),
            self.backoff_beta.clone(),
        );
        registry.register(
            "cctl_exporter_tracked_flows",
            help("cctl_exporter_tracked_flows"),
            self.tracked_flows.clone(),
        );
        registry.register(
            "cctl_exporter_source_errors",
            help("cctl_exporter_source_errors"),
            self.source_errors.clone(),
        );
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Content type of what [`encode`] writes (OpenMetrics text, which Prometheus negotiates).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The registry in OpenMetrics text (ends with `# EOF`).
pub fn encode(registry: &Registry) -> String {
    let mut out = String::with_capacity(16 << 10);
    prometheus_client::encoding::text::encode(&mut out, registry)
        .expect("writing into a String cannot fail");
    out
}

#[cfg(test)]
pub(crate) mod lint {
    //! A lint of the exposition: Prometheus naming and unit conventions, checked on the
    //! encoded text of a populated registry (what Prometheus actually reads).

    use std::collections::BTreeMap;

    /// One family as read back from the text: type, unit line, help, sample names.
    #[derive(Debug, Default)]
    pub struct Family {
        pub kind: String,
        pub unit: Option<String>,
        pub help: String,
        pub samples: Vec<String>,
    }

    /// Families of an OpenMetrics text by name.
    pub fn parse(text: &str) -> BTreeMap<String, Family> {
        let mut out: BTreeMap<String, Family> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                out.entry(name.into()).or_default().help = help.into();
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
                out.entry(name.into()).or_default().kind = kind.into();
            } else if let Some(rest) = line.strip_prefix("# UNIT ") {
                let (name, unit) = rest.split_once(' ').expect("UNIT name unit");
                out.entry(name.into()).or_default().unit = Some(unit.into());
            } else if line == "# EOF" || line.is_empty() {
            } else {
                let sample = line
                    .split(['{', ' '])
                    .next()
                    .expect("a sample line starts with its name");
                let family = out
                    .keys()
                    .filter(|f| sample.starts_with(f.as_str()))
                    .max_by_key(|f| f.len())
                    .unwrap_or_else(|| panic!("sample {sample} before its TYPE"))
                    .clone();
                out.get_mut(&family).unwrap().samples.push(sample.into());
            }
        }
        out
    }

    /// The label names of one sample line (`name{a="x",b="y"} 1`), in order.
    pub fn label_names(line: &str) -> Vec<String> {
        let Some((_, rest)) = line.split_once('{') else {
            return Vec::new();
        };
        let mut names = Vec::new();
        let mut rest = rest;
        while let Some((name, after)) = rest.split_once("=\"") {
            names.push(name.trim_start_matches(',').to_string());
            // Skip the value: up to the next quote not escaped by a backslash.
            let mut escaped = false;
            let end = after
                .char_indices()
                .find(|&(_, c)| {
                    let stop = c == '"' && !escaped;
                    escaped = c == '\\' && !escaped;
                    stop
                })
                .map_or(after.len(), |(i, _)| i + 1);
            rest = &after[end..];
            if rest.starts_with('}') {
                break;
            }
        }
        names
    }

    /// Every rule violated by the families of `text`, one message each.
    pub fn problems(text: &str) -> Vec<String> {
        let mut bad = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            for l in label_names(line) {
                if !super::LABELS.iter().any(|(n, _)| *n == l) {
                    bad.push(format!("label {l:?} is not one of LABELS: {line}"));
                }
            }
        }
        assert!(
            text.ends_with("# EOF\n"),
            "OpenMetrics text ends with # EOF"
        );
        let units = ["seconds", "bytes", "segments", "ratio"];
        let wrong_units = [
            "_ms", "_msec", "_us", "_usec", "_ns", "_nsec", "_millis", "_micros", "_kb", "_mb",
            "_kib", "_mib", "_pct", "_percent", "_mbit", "_bits",
        ];
        for (name, f) in parse(text) {
            let mut say = |m: String| bad.push(format!("{name}: {m}"));
            if !name.starts_with("cctl_") {
                say("missing the cctl_ prefix".into());
            }
            if !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                say("not snake_case [a-z0-9_]".into());
            }
            if f.help.len() < 20 || !f.help.ends_with('.') || f.help.ends_with("..") {
                say(format!("help too short or not a sentence: {:?}", f.help));
            }
            for w in wrong_units {
                if name.contains(&format!("{w}_")) || name.ends_with(w) {
                    say(format!("non-base unit {w}: use seconds, bytes or a ratio"));
                }
            }
            if name.ends_with("_total") {
                say("a family name never ends in _total (the counter's sample does)".into());
            }
            for time_word in ["rtt", "time", "duration", "latency", "delay"] {
                if name.split('_').any(|w| w == time_word) && !name.ends_with("_seconds") {
                    say(format!("a {time_word} must be in seconds (_seconds)"));
                }
            }
            if name.split('_').any(|w| w == "bytes") && !name.ends_with("_bytes") {
                say("bytes must be the unit suffix".into());
            }
            if let Some(u) = &f.unit {
                if !name.ends_with(&format!("_{u}")) {
                    say(format!("UNIT {u} is not the name's suffix"));
                }
            }
            let suffix_unit = units.iter().find(|u| name.ends_with(&format!("_{u}")));
            if let (Some(u), None) = (suffix_unit, &f.unit) {
                say(format!("unit suffix _{u} without a # UNIT line"));
            }
            match f.kind.as_str() {
                "counter" => {
                    for s in &f.samples {
                        if s != &format!("{name}_total") && s != &format!("{name}_created") {
                            say(format!("counter sample {s} is not {name}_total"));
                        }
                    }
                }
                "gauge" => {
                    for s in &f.samples {
                        if s != &name {
                            say(format!("gauge sample {s} is not {name}"));
                        }
                    }
                }
                "histogram" => {
                    if suffix_unit.is_none() {
                        say("a histogram's name ends with its unit".into());
                    }
                    for s in &f.samples {
                        let ok = ["_bucket", "_sum", "_count", "_created"]
                            .iter()
                            .any(|x| s == &format!("{name}{x}"));
                        if !ok {
                            say(format!("histogram sample {s}"));
                        }
                    }
                }
                k => say(format!("type {k:?}: only counter, gauge, histogram")),
            }
        }
        bad
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_increasing_and_in_base_units() {
        for b in [cwnd_buckets(), rtt_buckets(), beta_buckets()] {
            assert!(b.windows(2).all(|w| w[0] < w[1]), "{b:?}");
        }
        assert_eq!(cwnd_buckets().last(), Some(&65536.0));
        assert!((rtt_buckets()[0] - 25e-6).abs() < 1e-12);
        assert!(
            rtt_buckets().last().unwrap() > &6.0,
            "RTT buckets reach seconds"
        );
        let beta = beta_buckets();
        assert!((beta[0] - 0.5).abs() < 1e-9 && (beta.last().unwrap() - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_lint_reads_label_names_and_refuses_one_not_in_labels() {
        assert_eq!(
            lint::label_names(r#"cctl_x{cc="a,b",local="[::1]:5",note="say \"hi\"",le="0.1"} 1"#),
            ["cc", "local", "note", "le"]
        );
        let text = "# HELP cctl_x_info Always one, labelled with what it is.\n# TYPE cctl_x_info gauge\ncctl_x_info{name=\"bpf_htcp\"} 1\n# EOF\n";
        let problems = lint::problems(text);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("label \"name\""), "{problems:?}");
    }

    #[test]
    fn every_family_is_described_once() {
        let mut names: Vec<&str> = SAMPLE_FAMILIES.iter().map(|d| d.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SAMPLE_FAMILIES.len());
        // Registering looks every help text up (and panics on a missing one).
        Metrics::new().register(&mut Registry::default());
    }
}
