//! The scenario file's schema: its TOML tables as serde structs, the settings and parameters
//! they hold, their validation, and the precedence of `[defaults]` and the profiles.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use cctl_netem::testbed::LossModel;

use super::error::{FieldError, ScenarioError};
use super::expr::{expr_from, is_ident, numspec_from, Draws, Env, Expr, Factor, NumSpec, Sourced};
use super::point::CcRef;
use super::sweep::{parse_sweep, SweepCase};
use crate::schedule::LayerSchedules;

/// Highest bottleneck (and reverse-path) capacity a `ci` profile may use, in Mbit/s: the CI
/// VM reaches about 50 Mbit/s under emulation (`benchmarks.md` §7.4, C_ci = min(C, 50)).
pub const CI_MAX_RATE_MBIT: f64 = 50.0;

/// Default \[CHOICE\] floor of the buffer, in packets (`benchmarks.md` T0.0).
pub const DEFAULT_BUFFER_FLOOR_PKTS: u32 = 2;

/// Metric names a scenario may report: `benchmarks.md` §1, M1 to M17.
pub const METRICS: &[&str] = &[
    "M1", "M2", "M3", "M4", "M5", "M6", "M7", "M8", "M9", "M10", "M11", "M12", "M13", "M14", "M15",
    "M16", "M17",
];

/// Plot names a scenario may ask for.
///
/// `cwnd`: cwnd time series per flow; `ratio_vs_rtt`: throughput ratio (M3) against the RTT;
/// `convergence`: convergence time (M5); `response`: throughput against loss on log–log axes
/// (M10); `buffer`: aggregate throughput and loss against the buffer (M8, M9); `goodput`:
/// goodput against `x`; `completion`: completion times (M15); `queue`: normalised queue
/// (M12) against `x`; `fairness`: Jain's index (M4) against `x`; `friendliness`: the
/// fair-to-Reno factor (M11) against `x`; `timeline`: per-flow throughput, queue and losses
/// over time; `cdf`: CDFs of per-interval metrics across runs (T1.4); `delay_throughput`:
/// Pantheon-style scatter of each flow's throughput against its queueing delay, with a mean
/// and 1-σ ellipse per algorithm.
pub const PLOTS: &[&str] = &[
    "cwnd",
    "ratio_vs_rtt",
    "convergence",
    "response",
    "buffer",
    "goodput",
    "completion",
    "queue",
    "fairness",
    "friendliness",
    "timeline",
    "cdf",
    "delay_throughput",
];

/// Numeric parameters of `[defaults]` and the profiles: the keys a sweep may vary and that
/// `{var}` references may name.
pub const PARAMS: &[&str] = &[
    "rate_mbit",
    "reverse_rate_mbit",
    "rtt_ms",
    "buffer_bdp",
    "buffer_pkts",
    "buffer_ms",
    "buffer_floor_pkts",
    "loss",
    "init_ssthresh_bdp",
    "web_sessions",
    "duration_s",
    "codel_target_ms",
    "codel_interval_ms",
    "ce_threshold_ms",
    "pie_target_ms",
    "red_min_pkts",
    "red_max_pkts",
    "red_probability",
];

/// Settings a sweep may vary through a list of strings (`sweep = { qdisc = ["pfifo",
/// "fq_codel"] }`); the point records them in [`super::RunPoint::settings`].
pub const STRING_SWEEPS: &[&str] = &["qdisc"];

/// Parameters that only take whole numbers.
pub(super) const INTEGER_PARAMS: &[&str] = &["buffer_pkts", "buffer_floor_pkts", "web_sessions"];

/// The three ways to give the buffer; exactly one applies to a run.
pub(super) const BUFFER_KEYS: &[&str] = &["buffer_bdp", "buffer_pkts", "buffer_ms"];

/// The placeholder for the algorithm under test in `cc`.
const ALGO: &str = "{algo}";

/// Which set of values of a scenario to run (`benchmarks.md` §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Scaled down for the CI VM (≤ 50 Mbit/s, short runs): smoke and regression only.
    Ci,
    /// The papers' grid, for real hosts.
    Paper,
}

impl Profile {
    /// Both profiles, `ci` first.
    pub const ALL: [Profile; 2] = [Profile::Ci, Profile::Paper];

    /// The profile's name in files and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Ci => "ci",
            Profile::Paper => "paper",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Profile, String> {
        match s {
            "ci" => Ok(Profile::Ci),
            "paper" => Ok(Profile::Paper),
            _ => Err(format!("unknown profile `{s}`: expected `ci` or `paper`")),
        }
    }
}

/// Which RTT defines the BDP when flows have different RTTs (`benchmarks.md` §0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum BdpRtt {
    /// The first flow's RTT (\[P0\] \[CHOICE\]: keeps the queue constant along a sweep of flow 2).
    #[default]
    Flow1,
    /// The smallest RTT of all flows (\[P3\]: `BDP = C·min(RTT1, RTT2)`).
    Min,
}

/// Which web cross-traffic model the sessions follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WebModel {
    /// \[P0\] T0.0: sessions in both directions, exponential inter-request times (mean 1 s),
    /// Pareto(1.2) page sizes (minimum ≈ 1.6 kB, \[CHOICE\]).
    #[default]
    P0,
    /// \[P3\] T3.6: SURGE-model clients each loading about 500 kbit/s, server to client.
    Surge,
}

/// A parsed and validated scenario file.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Test id of `benchmarks.md`, e.g. `T0.1`.
    pub id: String,
    /// CLI name, e.g. `fairness-same-rtt`.
    pub name: String,
    /// Human title.
    pub title: String,
    /// Where the test comes from, e.g. `\[P0\] §III-C(i), §V-A, Figs. 3-9`.
    pub source: String,
    /// Metrics of `benchmarks.md` §1 the test reports (`M1`..`M17`).
    pub metrics: Vec<String>,
    /// Plots the test asks for (see [`PLOTS`]).
    pub plots: Vec<String>,
    /// The variable reports plot against, if any.
    pub x: Option<String>,
    /// \[CHOICE\]/\[GAP\] decisions to record with every result.
    pub choices: Vec<String>,
    /// Where it was loaded from; `<builtin>/<file>.toml` for the shipped files.
    pub path: PathBuf,
    /// The `[defaults]` table.
    pub(super) defaults: Layer,
    /// The `[profiles.paper]` table.
    pub(super) paper: Layer,
    /// The `[profiles.ci]` table.
    pub(super) ci: Layer,
    /// The `[[flows]]` tables, in order.
    pub(super) flows: Vec<FlowSpec>,
    /// The `[topology]` chain, if any (without: the dumbbell).
    pub(super) topology: Option<super::topology::Topology>,
}

// ---------------------------------------------------------------------------------------
// Raw (serde) forms.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTop {
    id: String,
    name: String,
    title: String,
    source: String,
    #[serde(default)]
    metrics: Vec<String>,
    #[serde(default)]
    plots: Vec<String>,
    x: Option<String>,
    #[serde(default)]
    choices: Vec<String>,
    defaults: Option<toml::Value>,
    flows: Vec<toml::Value>,
    profiles: toml::Value,
    topology: Option<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfiles {
    paper: toml::Value,
    ci: toml::Value,
}

#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLayer {
    pub(super) rate_mbit: Option<f64>,
    pub(super) reverse_rate_mbit: Option<f64>,
    pub(super) rtt_ms: Option<f64>,
    pub(super) buffer_bdp: Option<f64>,
    pub(super) buffer_pkts: Option<u32>,
    pub(super) buffer_ms: Option<f64>,
    pub(super) buffer_floor_pkts: Option<u32>,
    pub(super) bdp_rtt: Option<BdpRtt>,
    pub(super) loss: Option<f64>,
    pub(super) loss_model: Option<LossModel>,
    pub(super) init_ssthresh_bdp: Option<f64>,
    pub(super) web_sessions: Option<u32>,
    pub(super) web_model: Option<WebModel>,
    pub(super) web_cc: Option<String>,
    pub(super) duration_s: Option<f64>,
    pub(super) qdisc: Option<String>,
    pub(super) ecn: Option<bool>,
    pub(super) codel_target_ms: Option<f64>,
    pub(super) codel_interval_ms: Option<f64>,
    pub(super) ce_threshold_ms: Option<f64>,
    pub(super) pie_target_ms: Option<f64>,
    pub(super) red_min_pkts: Option<f64>,
    pub(super) red_max_pkts: Option<f64>,
    pub(super) red_probability: Option<f64>,
    pub(super) repeat: Option<u32>,
    pub(super) seed: Option<u64>,
    pub(super) note: Option<String>,
    #[serde(default)]
    pub(super) vars: BTreeMap<String, f64>,
    pub(super) sweep: Option<toml::Value>,
    /// Steps and ramps of the bottleneck rate (see [`crate::schedule`]).
    pub(super) rate_schedule: Option<toml::Value>,
    /// Steps and ramps of the ACK-path delay (see [`crate::schedule`]).
    pub(super) delay_schedule: Option<toml::Value>,
    /// A mahimahi trace file replayed as the bottleneck rate.
    pub(super) rate_trace: Option<String>,
    /// Width of the bins a trace is counted in, ms.
    pub(super) trace_bin_ms: Option<u32>,
    /// tbf bucket at the bottleneck, ms of the rate.
    pub(super) tbf_burst_ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    cc: Option<String>,
    rtt_ms: Option<toml::Value>,
    start_s: Option<toml::Value>,
    stop_s: Option<toml::Value>,
    count: Option<toml::Value>,
    start_step_s: Option<toml::Value>,
    size_mb: Option<toml::Value>,
    on_s: Option<toml::Value>,
    off_s: Option<toml::Value>,
    path: Option<toml::Value>,
}

// ---------------------------------------------------------------------------------------
// Parsed forms.

/// A `[defaults]` or `[profiles.X]` table.
#[derive(Debug, Clone, Default)]
pub(super) struct Layer {
    /// `defaults` or `profiles.ci`.
    pub(super) at: String,
    pub(super) raw: RawLayer,
    pub(super) sweep: Option<Vec<SweepCase>>,
    /// `rate_schedule`, `delay_schedule` and `rate_trace`, parsed.
    pub(super) schedules: LayerSchedules,
}

#[derive(Debug, Clone)]
pub(super) struct FlowSpec {
    pub(super) cc: CcRef,
    pub(super) rtt_ms: NumSpec,
    pub(super) start_s: NumSpec,
    pub(super) stop_s: Option<NumSpec>,
    pub(super) count: Expr,
    pub(super) start_step_s: Expr,
    pub(super) size_mb: Option<Expr>,
    pub(super) on_s: Option<NumSpec>,
    pub(super) off_s: Option<NumSpec>,
    /// `path = [first, last]` as written (checked against `[topology]`).
    pub(super) path: Option<(i64, i64)>,
}

// ---------------------------------------------------------------------------------------
// Parsing.

/// Deserializes `value` as a `T`, naming the field at `at` (+ the path serde reports).
pub(super) fn de_at<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    at: &str,
) -> Result<T, FieldError> {
    T::deserialize(value).map_err(|e| {
        let shown = e.to_string();
        let mut field = at.to_string();
        if let Some(i) = shown.find("\nin `") {
            let rest = &shown[i + 5..];
            if let Some(end) = rest.find('`') {
                field = join(&field, &rest[..end]);
            }
        }
        let message = e.message().to_string();
        if let Some(rest) = message.strip_prefix("missing field `") {
            let name = rest.split('`').next().unwrap_or("");
            return FieldError::new(join(&field, name), "missing: this field is required");
        }
        if let Some(rest) = message.strip_prefix("unknown field `") {
            if let Some(end) = rest.find('`') {
                // An empty key (`"" = ...`) is named as written, quoted.
                let key = match &rest[..end] {
                    "" => "\"\"",
                    k => k,
                };
                field = join(&field, key);
            }
            let allowed = message.split_once(", expected ").map_or("", |(_, a)| a);
            let allowed = allowed
                .trim_start_matches("one of ")
                .replace("` or `", "`, `");
            return FieldError::new(field, format!("unknown field; allowed keys: {allowed}"));
        }
        FieldError::new(field, message)
    })
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}.{b}"),
    }
}

fn parse_flow(value: toml::Value, at: &str) -> Result<FlowSpec, FieldError> {
    let raw: RawFlow = de_at(value, at)?;
    let f = |k: &str| format!("{at}.{k}");
    let cc = match raw.cc.as_deref() {
        None | Some(ALGO) => CcRef::UnderTest,
        Some(name) => {
            if name.is_empty() || name.contains(['{', '}']) || name.contains(char::is_whitespace) {
                return Err(FieldError::new(
                    f("cc"),
                    format!("`{name}`: expected \"{{algo}}\" (the algorithm under test) or an algorithm name such as \"reno\""),
                ));
            }
            CcRef::Named(name.to_string())
        }
    };
    let opt = |v: &Option<toml::Value>, k: &str, d: Draws| -> Result<Option<NumSpec>, FieldError> {
        v.as_ref().map(|v| numspec_from(v, &f(k), d)).transpose()
    };
    let var = |name: &str| Expr {
        text: format!("{{{name}}}"),
        factors: vec![Factor::Var(name.into())],
    };
    let num = |x: f64| Expr {
        text: x.to_string(),
        factors: vec![Factor::Num(x)],
    };
    let on_s = opt(&raw.on_s, "on_s", Draws::All)?;
    let off_s = opt(&raw.off_s, "off_s", Draws::All)?;
    if off_s.is_some() && on_s.is_none() {
        return Err(FieldError::new(
            f("off_s"),
            "off_s needs on_s (an on/off source alternates both)",
        ));
    }
    Ok(FlowSpec {
        cc,
        rtt_ms: opt(&raw.rtt_ms, "rtt_ms", Draws::UniformChoice)?
            .unwrap_or(NumSpec::Expr(var("rtt_ms"))),
        start_s: opt(&raw.start_s, "start_s", Draws::UniformChoice)?
            .unwrap_or(NumSpec::Expr(num(0.0))),
        stop_s: opt(&raw.stop_s, "stop_s", Draws::UniformChoice)?,
        count: raw
            .count
            .as_ref()
            .map(|v| expr_from(v, &f("count")))
            .transpose()?
            .unwrap_or(num(1.0)),
        start_step_s: raw
            .start_step_s
            .as_ref()
            .map(|v| expr_from(v, &f("start_step_s")))
            .transpose()?
            .unwrap_or(num(0.0)),
        size_mb: raw
            .size_mb
            .as_ref()
            .map(|v| expr_from(v, &f("size_mb")))
            .transpose()?,
        on_s,
        off_s,
        path: raw
            .path
            .as_ref()
            .map(|v| super::topology::parse_path(v, &f("path")))
            .transpose()?,
    })
}

/// Keys of a layer that are not numeric parameters.
pub(super) fn is_setting(key: &str) -> bool {
    matches!(
        key,
        "bdp_rtt"
            | "loss_model"
            | "web_model"
            | "web_cc"
            | "qdisc"
            | "ecn"
            | "repeat"
            | "seed"
            | "note"
            | "vars"
            | "sweep"
            | "rate_schedule"
            | "delay_schedule"
            | "rate_trace"
            | "trace_bin_ms"
            | "tbf_burst_ms"
    )
}

fn parse_layer(value: toml::Value, at: &str, path: &Path) -> Result<Layer, FieldError> {
    let raw: RawLayer = de_at(value, at)?;
    let schedules = LayerSchedules::parse(
        raw.rate_schedule.as_ref(),
        raw.delay_schedule.as_ref(),
        raw.rate_trace.as_deref(),
        raw.trace_bin_ms,
        at,
        path,
    )?;
    let sweep = raw
        .sweep
        .as_ref()
        .map(|s| parse_sweep(s, &format!("{at}.sweep")))
        .transpose()?;
    let set: Vec<&str> = numeric(&raw)
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| BUFFER_KEYS.contains(k))
        .collect();
    if set.len() > 1 {
        return Err(FieldError::new(
            format!("{at}.{}", set[1]),
            format!(
                "{} is set too: give only one of {}",
                set[0],
                BUFFER_KEYS.join(", ")
            ),
        ));
    }
    for name in raw.vars.keys() {
        let v_at = format!("{at}.vars.{name}");
        if PARAMS.contains(&name.as_str()) || is_setting(name) {
            return Err(FieldError::new(
                v_at,
                format!("`{name}` is a parameter: set it directly in [{at}], not in vars"),
            ));
        }
        if !is_ident(name) || name == "algo" {
            return Err(FieldError::new(
                v_at,
                "not a variable name ([a-z_][a-z0-9_]*, not `algo`)",
            ));
        }
    }
    if let Some(0) = raw.repeat {
        return Err(FieldError::new(
            format!("{at}.repeat"),
            "must be at least 1",
        ));
    }
    if let Some(q) = &raw.qdisc {
        if cctl_netem::aqm::Qdisc::parse(q).is_none() {
            return Err(FieldError::new(
                format!("{at}.qdisc"),
                cctl_netem::aqm::Qdisc::unknown(q),
            ));
        }
    }
    if let Some(cc) = &raw.web_cc {
        if cc.is_empty() || cc.contains(['{', '}']) {
            return Err(FieldError::new(
                format!("{at}.web_cc"),
                "expected an algorithm name such as \"reno\"",
            ));
        }
    }
    Ok(Layer {
        at: at.to_string(),
        raw,
        sweep,
        schedules,
    })
}

/// The numeric parameters a layer sets, in [`PARAMS`] order.
fn numeric(raw: &RawLayer) -> Vec<(&'static str, f64)> {
    let mut out = Vec::new();
    let mut put = |k: &'static str, v: Option<f64>| {
        if let Some(v) = v {
            out.push((k, v));
        }
    };
    put("rate_mbit", raw.rate_mbit);
    put("reverse_rate_mbit", raw.reverse_rate_mbit);
    put("rtt_ms", raw.rtt_ms);
    put("buffer_bdp", raw.buffer_bdp);
    put("buffer_pkts", raw.buffer_pkts.map(f64::from));
    put("buffer_ms", raw.buffer_ms);
    put("buffer_floor_pkts", raw.buffer_floor_pkts.map(f64::from));
    put("loss", raw.loss);
    put("init_ssthresh_bdp", raw.init_ssthresh_bdp);
    put("web_sessions", raw.web_sessions.map(f64::from));
    put("duration_s", raw.duration_s);
    put("codel_target_ms", raw.codel_target_ms);
    put("codel_interval_ms", raw.codel_interval_ms);
    put("ce_threshold_ms", raw.ce_threshold_ms);
    put("pie_target_ms", raw.pie_target_ms);
    put("red_min_pkts", raw.red_min_pkts);
    put("red_max_pkts", raw.red_max_pkts);
    put("red_probability", raw.red_probability);
    out
}

fn syntax_error(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {col}: {}", e.message())
        }
        None => e.message().to_string(),
    }
}

impl Scenario {
    /// Reads, parses and validates the scenario file at `path`.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Scenario::parse(&text, path)
    }

    /// Parses and validates scenario `text`; `path` is only used to name the file in errors
    /// and in [`Scenario::path`]. Both profiles are expanded once, so a scenario that parses
    /// is known to expand.
    pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ScenarioError::Syntax {
            path: path.to_path_buf(),
            message: syntax_error(text, &e),
        })?;
        let invalid = |error: FieldError| ScenarioError::Invalid {
            path: path.to_path_buf(),
            error,
        };
        let scenario = Scenario::from_table(table, path).map_err(invalid)?;
        for profile in Profile::ALL {
            scenario.expand(profile, scenario.seed(profile))?;
        }
        // After expanding, so that a misspelt reference is reported as undefined at the flow
        // rather than as an unused variable.
        scenario.check_variables().map_err(invalid)?;
        Ok(scenario)
    }

    pub(super) fn from_table(table: toml::Table, path: &Path) -> Result<Scenario, FieldError> {
        let top: RawTop = de_at(toml::Value::Table(table), "")?;
        // A test id of benchmarks.md ("T0.1"), or a user's own: a letter, then letters,
        // digits, '.', '_' or '-' (at most 32 characters).
        let id_ok = top.id.len() <= 32
            && top
                .id
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic())
            && top
                .id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !id_ok {
            return Err(FieldError::new(
                "id",
                format!(
                    "`{}`: expected a test id of benchmarks.md such as \"T0.1\", or a user id: \
                     a letter, then letters, digits, '.', '_' or '-' (at most 32 characters)",
                    top.id
                ),
            ));
        }
        let name_ok = !top.name.is_empty()
            && top.name.split('-').all(|p| {
                !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            });
        if !name_ok {
            return Err(FieldError::new(
                "name",
                format!(
                    "`{}`: expected lowercase words joined by `-`, e.g. \"fairness-same-rtt\"",
                    top.name
                ),
            ));
        }
        if top.title.trim().is_empty() {
            return Err(FieldError::new("title", "must not be empty"));
        }
        for (i, m) in top.metrics.iter().enumerate() {
            if !METRICS.contains(&m.as_str()) {
                return Err(FieldError::new(
                    format!("metrics[{i}]"),
                    format!("unknown metric `{m}`; allowed: {}", METRICS.join(", ")),
                ));
            }
        }
        for (i, p) in top.plots.iter().enumerate() {
            if !PLOTS.contains(&p.as_str()) {
                return Err(FieldError::new(
                    format!("plots[{i}]"),
                    format!("unknown plot `{p}`; allowed: {}", PLOTS.join(", ")),
                ));
            }
        }
        let defaults = match top.defaults {
            Some(v) => parse_layer(v, "defaults", path)?,
            None => Layer {
                at: "defaults".into(),
                ..Layer::default()
            },
        };
        let profiles: RawProfiles = de_at(top.profiles, "profiles")?;
        let paper = parse_layer(profiles.paper, "profiles.paper", path)?;
        let ci = parse_layer(profiles.ci, "profiles.ci", path)?;
        if top.flows.is_empty() {
            return Err(FieldError::new(
                "flows",
                "at least one [[flows]] table is needed",
            ));
        }
        let mut topology = top
            .topology
            .map(|v| super::topology::parse_topology(v, "topology"))
            .transpose()?;
        if topology.is_some() {
            if let Some(i) = top.flows.iter().position(|v| v.get("rtt_ms").is_some()) {
                return Err(FieldError::new(
                    format!("flows[{i}].rtt_ms"),
                    "with [topology] a flow's RTT is the sum of the rtt_ms of the hops on its \
                     path: set them in topology.bottlenecks",
                ));
            }
        }
        let flows = top
            .flows
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse_flow(v, &format!("flows[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        match &mut topology {
            Some(t) => t.check_paths(&flows.iter().map(|f| f.path).collect::<Vec<_>>())?,
            None => {
                if let Some(i) = flows.iter().position(|f| f.path.is_some()) {
                    return Err(FieldError::new(
                        format!("flows[{i}].path"),
                        "a path needs a [topology] (without one, every flow crosses the \
                         dumbbell's single bottleneck)",
                    ));
                }
            }
        }
        let scenario = Scenario {
            id: top.id,
            name: top.name,
            title: top.title,
            source: top.source,
            metrics: top.metrics,
            plots: top.plots,
            x: top.x,
            choices: top.choices,
            path: path.to_path_buf(),
            defaults,
            paper,
            ci,
            flows,
            topology,
        };
        Ok(scenario)
    }

    /// Every user variable is used, and `x` names something each profile defines.
    pub(super) fn check_variables(&self) -> Result<(), FieldError> {
        let mut used: BTreeSet<&str> = BTreeSet::new();
        for f in &self.flows {
            let mut specs: Vec<&NumSpec> = vec![&f.rtt_ms, &f.start_s];
            specs.extend(f.stop_s.iter().chain(&f.on_s).chain(&f.off_s));
            let mut exprs: Vec<&Expr> = vec![&f.count, &f.start_step_s];
            exprs.extend(&f.size_mb);
            for s in specs {
                exprs.extend(s.exprs());
            }
            for e in exprs {
                for fac in &e.factors {
                    if let Factor::Var(v) = fac {
                        used.insert(v);
                    }
                }
            }
        }
        if let Some(x) = &self.x {
            used.insert(x);
        }
        for layer in [&self.defaults, &self.paper, &self.ci] {
            for name in layer.raw.vars.keys() {
                if !used.contains(name.as_str()) {
                    return Err(FieldError::new(
                        format!("{}.vars.{name}", layer.at),
                        format!("`{name}` is not used by any flow or by `x` (a typo?)"),
                    ));
                }
            }
            for case in layer.sweep.iter().flatten() {
                for (name, _) in &case.axes {
                    if !PARAMS.contains(&name.as_str())
                        && !used.contains(name.as_str())
                        && !STRING_SWEEPS.contains(&name.as_str())
                    {
                        return Err(FieldError::new(
                            format!("{}.{name}", case.at),
                            format!("`{name}` is neither a parameter ({}) nor a variable used by a flow or by `x` (a typo?)", PARAMS.join(", ")),
                        ));
                    }
                }
            }
        }
        if let Some(x) = &self.x {
            for profile in Profile::ALL {
                for case in self.sweep_cases(profile) {
                    let defined = self.base_env(profile).contains_key(x)
                        || case.axes.iter().any(|(k, _)| k == x);
                    if !defined {
                        return Err(FieldError::new("x", format!("`{x}` is not defined in profile {profile} ({}); x must name a parameter, a var or a sweep key", case.at)));
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn layer(&self, profile: Profile) -> &Layer {
        match profile {
            Profile::Ci => &self.ci,
            Profile::Paper => &self.paper,
        }
    }

    /// Number of repetitions of every point of `profile` (default 1).
    pub fn repeat(&self, profile: Profile) -> u32 {
        self.layer(profile)
            .raw
            .repeat
            .or(self.defaults.raw.repeat)
            .unwrap_or(1)
    }

    /// Base seed of `profile`'s random draws (default 1); a runner passes this plus the
    /// repetition index to [`Scenario::expand`].
    pub fn seed(&self, profile: Profile) -> u64 {
        self.layer(profile)
            .raw
            .seed
            .or(self.defaults.raw.seed)
            .unwrap_or(1)
    }

    /// The profile's `note` (for `ci`: that it must not be compared with the papers).
    pub fn note(&self, profile: Profile) -> Option<&str> {
        self.layer(profile)
            .raw
            .note
            .as_deref()
            .or(self.defaults.raw.note.as_deref())
    }

    /// Parameters and variables of `profile` before the sweep.
    pub(super) fn base_env(&self, profile: Profile) -> Env {
        let mut env = Env::new();
        for layer in [&self.defaults, self.layer(profile)] {
            let nums = numeric(&layer.raw);
            if nums.iter().any(|(k, _)| BUFFER_KEYS.contains(k)) {
                env.retain(|k, _| !BUFFER_KEYS.contains(&k.as_str()));
            }
            for (k, v) in nums {
                env.insert(
                    k.to_string(),
                    Sourced {
                        value: v,
                        field: format!("{}.{k}", layer.at),
                    },
                );
            }
            for (k, v) in &layer.raw.vars {
                env.insert(
                    k.clone(),
                    Sourced {
                        value: *v,
                        field: format!("{}.vars.{k}", layer.at),
                    },
                );
            }
        }
        env
    }

    pub(super) fn setting<T: Clone>(
        &self,
        profile: Profile,
        get: impl Fn(&RawLayer) -> &Option<T>,
    ) -> Option<T> {
        get(&self.layer(profile).raw)
            .clone()
            .or_else(|| get(&self.defaults.raw).clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_input::rejects;

    #[test]
    fn profile_names_parse_and_print() {
        assert_eq!("ci".parse::<Profile>(), Ok(Profile::Ci));
        assert_eq!("paper".parse::<Profile>().unwrap().to_string(), "paper");
        assert!("full"
            .parse::<Profile>()
            .unwrap_err()
            .contains("`ci` or `paper`"));
    }

    #[test]
    fn unknown_fields_are_named_with_the_allowed_keys() {
        rejects(
            "source = \"test\"",
            "source = \"test\"\ncolour = 1",
            "colour",
            &["allowed keys", "`metrics`"],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\nrtt = 3",
            "flows[1].rtt",
            &["allowed keys", "`rtt_ms`", "`size_mb`"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nbuffer = 3",
            "defaults.buffer",
            &["`buffer_pkts`", "`sweep`"],
        );
        rejects(
            "[profiles.ci]",
            "[profiles.full]\nduration_s = 1\n[profiles.ci]",
            "profiles.full",
            &["`paper`, `ci`"],
        );
        rejects(
            "start_s = 5",
            "start_s = { normal = [1, 2] }",
            "flows[1].start_s.normal",
            &["uniform", "choice"],
        );
    }

    #[test]
    fn wrong_types_and_missing_fields_are_named() {
        rejects(
            "rate_mbit = 10\n",
            "rate_mbit = \"ten\"\n",
            "defaults.rate_mbit",
            &["expected f64"],
        );
        rejects(
            "title = \"A scenario for error tests\"\n",
            "",
            "title",
            &["required"],
        );
        rejects(
            "\n[profiles.ci]\nsweep = { rtt_ms = [22, 42, 82] }\nduration_s = 40\n",
            "\n",
            "profiles.ci",
            &["required"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nbuffer_pkts = 30",
            "defaults.buffer_pkts",
            &["only one of"],
        );
        rejects(
            "rtt_ms = [22, 42, 82] }\nduration_s = 40",
            "rtt_ms = [22, \"x\"] }\nduration_s = 40",
            "profiles.ci.sweep.rtt_ms[1]",
            &["expected a number"],
        );
    }

    #[test]
    fn syntax_errors_give_the_line() {
        let e = Scenario::parse("id = \"T0.1\"\nname = \n", Path::new("x.toml")).unwrap_err();
        assert!(matches!(e, ScenarioError::Syntax { .. }));
        assert!(e.to_string().starts_with("x.toml: line 2, column"), "{e}");
    }

    #[test]
    fn unknown_metrics_and_plots_are_rejected() {
        rejects(
            "metrics = [\"M1\"]",
            "metrics = [\"M1\", \"M18\"]",
            "metrics[1]",
            &["M18", "M17"],
        );
        rejects(
            "plots = [\"cwnd\"]",
            "plots = [\"pie\"]",
            "plots[0]",
            &["`pie`", "ratio_vs_rtt"],
        );
        rejects("id = \"T9.1\"", "id = \"9.1\"", "id", &["T0.1"]);
        rejects(
            "name = \"bad-input\"",
            "name = \"FieldError Input\"",
            "name",
            &["lowercase"],
        );
    }

    #[test]
    fn an_undefined_variable_is_rejected() {
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\nrtt_ms = \"{rtt2_ms}\"\n",
            "flows[0].rtt_ms",
            &["`rtt2_ms`", "not defined", "rtt_ms"],
        );
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\nstart_s = \"{algo}\"\n",
            "flows[0].start_s",
            &["only in `cc`"],
        );
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{alg}\"\n",
            "flows[0].cc",
            &["\"{algo}\""],
        );
        rejects("x = \"rtt_ms\"", "x = \"rtt2_ms\"", "x", &["not defined"]);
        rejects(
            "duration_s = 40",
            "duration_s = 40\nvars = { rtt2 = 5 }",
            "profiles.ci.vars.rtt2",
            &["not used"],
        );
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rtt_msec = [22] }",
            "profiles.ci.sweep.rtt_msec",
            &["neither a parameter"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = 40\nvars = { loss = 0.1 }",
            "profiles.ci.vars.loss",
            &["is a parameter"],
        );
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { repeat = [1, 2] }",
            "profiles.ci.sweep.repeat",
            &["cannot be swept"],
        );
    }
}
