//! Declarative benchmark scenarios: one TOML file per test of `benchmarks.md`, parsed,
//! validated and expanded into the concrete runs `cctl bench` executes.
//!
//! A scenario file describes one test (T0.1, T3.4, ...) twice: a `paper` profile with the
//! papers' grid exactly as `benchmarks.md` gives it (including its \[CHOICE\]s), for real hosts,
//! and a `ci` profile (`benchmarks.md` §7.4) scaled down for the CI VM: capacities at most
//! [`CI_MAX_RATE_MBIT`], fewer sweep points, short runs. CI-scale results exercise different
//! regimes of the high-speed algorithms and must never be compared with the papers' numbers.
//!
//! The shipped files live in `bench/scenarios/` and are compiled into the binary
//! ([`builtin`]), so `cctl` works outside the repository; [`find`] also accepts a path to a
//! file of one's own. Everything is validated when a file is loaded, before any namespace,
//! qdisc or socket exists, and every error names the file, the field (`flows[1].start_s`,
//! `profiles.ci.sweep.rtt_ms[2]`) and what is allowed.
//!
//! # Schema
//!
//! ```toml
//! id = "T0.2"                      # test id of benchmarks.md: "T<suite>.<n>"
//! name = "rtt-unfairness"          # CLI name, [a-z0-9-]: `cctl bench run rtt-unfairness` (or `t0.2`)
//! title = "Fairness, different RTTs (RTT unfairness)"
//! source = "[P0] §III-C(ii), §V-B, Fig. 10"
//! metrics = ["M3", "M17"]          # metrics of benchmarks.md §1 reported (M1..M17)
//! plots = ["ratio_vs_rtt"]         # see PLOTS
//! x = "rtt2_ms"                    # optional: the variable reports plot against
//! choices = ["flow 2 starts at 30 s [CHOICE]"]   # optional: recorded with every result
//!
//! [defaults]                       # shared by both profiles; a profile overrides any key
//! rate_mbit = 10                   # bottleneck capacity, Mbit/s (> 0)
//! reverse_rate_mbit = 0.256        # optional: capacity of the ACK (reverse) path, Mbit/s
//! rtt_ms = 162                     # base RTT (two-way propagation), ms (> 0); flows default to it
//! buffer_bdp = 0.2                 # drop-tail buffer: ONE of buffer_bdp (fraction of BDP),
//!                                  #   buffer_pkts (packets) or buffer_ms (ms worth of rate)
//! buffer_floor_pkts = 2            # [CHOICE] the buffer is never below this (default 2); flagged
//! bdp_rtt = "flow1"                # "flow1" (default) | "min": the RTT that defines the BDP
//! loss = 0.0                       # loss probability on the forward path, [0, 1)
//! loss_model = "random"            # "random" (netem, default) | "periodic": every round(1/loss)-th
//!                                  #   packet (tc gact determ), the same packets in every run
//! init_ssthresh_bdp = 0.5          # optional: initial ssthresh as a fraction of BDP ([P3])
//! web_sessions = 0                 # web cross-traffic sessions (default 0)
//! web_model = "p0"                 # "p0" (T0.0, bidirectional) | "surge" (T3.6); default "p0"
//! web_cc = "reno"                  # CC of the web flows (default "reno")
//! duration_s = 600                 # run length, s; a deadline for fixed-size transfers
//! repeat = 5                       # repetitions of every point (default 1)
//! seed = 1                         # base seed of random draws (default 1)
//! vars = { rtt2_ms = 162 }         # user variables for "{var}" references in [[flows]]
//!
//! [[flows]]                        # at least one; each flow gets its own sender namespace
//! cc = "{algo}"                    # "{algo}" (default) = the algorithm under test, or a fixed name
//! rtt_ms = "{rtt2_ms}"             # default "{rtt_ms}"
//! start_s = 30                     # default 0
//! stop_s = "{duration_s}"          # default: the end of the run
//! count = 1                        # identical copies (default 1), e.g. "{n}"
//! start_step_s = 0                 # copy k starts k·start_step_s later (default 0)
//! size_mb = 200                    # optional fixed-size transfer, MB = 10^6 bytes
//! on_s = { exponential = 1800 }    # optional on/off source: on periods ...
//! off_s = { exponential = 1800 }   # ... separated by off periods, each a new connection
//!
//! [profiles.paper]                 # both profiles are required
//! sweep = { rate_mbit = [10, 250], rtt2_ms = [22, 42, 82, 162, 324] }
//! duration_s = 600
//! repeat = 5
//!
//! [profiles.ci]
//! # CI scale: a smoke/regression test, never to be compared with the papers' numbers.
//! note = "CI scale: never compare with the papers' numbers"
//! sweep = { rate_mbit = [10, 50], rtt2_ms = [22, 82] }
//! duration_s = 40
//! repeat = 1
//! ```
//!
//! **Values in `[[flows]]`** are a number; a string that is a product of numbers and
//! `{var}` references (`"{rtt_ms}"`, `"{interval_s}*4"`, `"{rtt_ms}*{rtt_ratio}"`); or a
//! random draw made with the run's seed: `{ uniform = [a, b] }` or `{ choice = [a, b, ...] }`
//! (any numeric field but `count`, `start_step_s` and `size_mb`), `{ exponential = mean }`
//! (only `on_s`/`off_s`). The operands may be expressions too. Variables are the numeric
//! parameters above (`rate_mbit`, `rtt_ms`, `duration_s`, ...), the `vars` and the sweep
//! keys. Every user variable must be used by a flow or by `x` (this catches typos).
//!
//! **Sweeps** are a table of lists (their cartesian product, keys in alphabetical order, the
//! last varying fastest) or an array of such tables (the union of their products, e.g. T2.7's
//! two paths). A sweep key is a numeric parameter or a user variable. Precedence, most
//! specific first: sweep, profile, defaults, built-in default; the most specific layer that
//! sets any `buffer_*` key decides the buffer, so `sweep.buffer_bdp` replaces a profile's
//! `buffer_pkts`. A profile without `sweep` inherits the one of `[defaults]`, if any.
//!
//! **Arithmetic** (`benchmarks.md` §0): `BDP_pkts = C·RTT / (1500·8)`, with RTT the first
//! flow's (`bdp_rtt = "flow1"`, \[P0\] \[CHOICE\]) or the smallest (`"min"`, \[P3\]). The buffer is
//! rounded to the nearest packet and raised to `buffer_floor_pkts` if below it, in which case
//! [`RunPoint::buffer_floored`] is set (1 Mbit/s × 22 ms × 20 % → 2 packets).
//!
//! **Seeds.** [`Scenario::expand`] draws every random value from its `seed` argument and the
//! point's index, so one seed always gives the same runs. A runner passes
//! [`Scenario::seed`] plus the repetition index, so every repetition draws afresh (T0.7's
//! start times, T1.4's schedules).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Highest bottleneck (and reverse-path) capacity a `ci` profile may use, in Mbit/s: the CI
/// VM reaches about 50 Mbit/s under emulation (`benchmarks.md` §7.4, C_ci = min(C, 50)).
pub const CI_MAX_RATE_MBIT: f64 = 50.0;

/// Packet size the BDP is counted in, in bytes (1500-byte IP packets, `benchmarks.md` §0).
pub const PACKET_BYTES: f64 = 1500.0;

/// Default \[CHOICE\] floor of the buffer, in packets (`benchmarks.md` T0.0).
pub const DEFAULT_BUFFER_FLOOR_PKTS: u32 = 2;

/// Most flow plans one run point may expand into (guards against runaway on/off sources).
pub const MAX_FLOWS_PER_POINT: usize = 10_000;

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
/// over time; `cdf`: CDFs of per-interval metrics across runs (T1.4).
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
];

/// Parameters that only take whole numbers.
const INTEGER_PARAMS: &[&str] = &["buffer_pkts", "buffer_floor_pkts", "web_sessions"];

/// The three ways to give the buffer; exactly one applies to a run.
const BUFFER_KEYS: &[&str] = &["buffer_bdp", "buffer_pkts", "buffer_ms"];

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

/// How the forward-path loss of a point is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LossModel {
    /// Independent per-packet loss with probability `loss` (netem `loss random`).
    #[default]
    Random,
    /// Every `round(1/loss)`-th packet of the sender (tc `gact ... random determ drop N`):
    /// the same packets are lost in every run, so two algorithms (a BPF port and its
    /// module) face identical losses — the periodic-loss model of Mathis et al. (1997).
    Periodic,
}

/// An error in a scenario file, or a scenario that cannot be found.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Line, column and what the TOML parser said.
        message: String,
    },
    /// A field is missing, unknown, of the wrong type or out of range.
    #[error("{}: {field}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Dotted path of the field, e.g. `flows[1].start_s` or `profiles.ci.sweep.rtt_ms[2]`.
        field: String,
        /// What is wrong and what is allowed.
        message: String,
    },
    /// No built-in scenario has that name or id, and it is not a readable file.
    #[error("no scenario `{name}`: give a name ({known}), a test id such as T0.1, or a path to a .toml file")]
    NotFound {
        /// What was asked for.
        name: String,
        /// The built-in names, comma-separated.
        known: String,
    },
}

impl ScenarioError {
    /// The offending field's dotted path, for [`ScenarioError::Invalid`].
    pub fn field(&self) -> Option<&str> {
        match self {
            ScenarioError::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// Which congestion control a flow runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CcRef {
    /// The algorithm under test (`--algo`), written `"{algo}"`.
    UnderTest,
    /// A fixed algorithm, e.g. the Reno flow of T0.3 or T3.4; checked by the runner.
    Named(String),
}

/// One concrete flow of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowPlan {
    /// Index of the `[[flows]]` table it comes from.
    pub entry: usize,
    /// Its congestion control.
    pub cc: CcRef,
    /// Its base RTT (two-way propagation delay of its own access path), in ms.
    pub rtt_ms: f64,
    /// When it starts, in seconds from the start of the run.
    pub start_s: f64,
    /// When it stops, in seconds from the start of the run; for a fixed-size transfer, the
    /// deadline.
    pub stop_s: f64,
    /// Size of a fixed-size transfer, in bytes (`size_mb` · 10^6); `None` for a bulk flow.
    pub size_bytes: Option<u64>,
}

/// One concrete run: a point of a profile's sweep, with every value resolved and checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPoint {
    /// Position in the expansion, from 0.
    pub index: usize,
    /// The swept values of this point, by variable name.
    pub vars: BTreeMap<String, f64>,
    /// Bottleneck capacity, in Mbit/s.
    pub rate_mbit: f64,
    /// Capacity of the reverse (ACK) path, in Mbit/s; `None`: not limited.
    pub reverse_rate_mbit: Option<f64>,
    /// Base RTT (the `rtt_ms` parameter), in ms.
    pub rtt_ms: f64,
    /// The RTT the BDP was computed from (see [`BdpRtt`]), in ms.
    pub bdp_rtt_ms: f64,
    /// Bandwidth-delay product in 1500-byte packets, unrounded.
    pub bdp_pkts: f64,
    /// Buffer as a fraction of BDP: the configured `buffer_bdp`, or the effective fraction
    /// when the buffer was given in packets or milliseconds (infinite at `rtt_ms = 0`,
    /// written `null` in JSON).
    #[serde(deserialize_with = "null_as_infinity")]
    pub buffer_bdp: f64,
    /// Drop-tail queue limit at the bottleneck, in packets (rounded, floored).
    pub buffer_pkts: u32,
    /// Whether the floor raised the buffer (flag these points in reports).
    pub buffer_floored: bool,
    /// Loss probability on the forward path.
    pub loss: f64,
    /// How that loss is drawn.
    pub loss_model: LossModel,
    /// Initial ssthresh of every long-lived flow, in packets; `None`: the kernel's.
    pub init_ssthresh_pkts: Option<u32>,
    /// Number of web cross-traffic sessions.
    pub web_sessions: u32,
    /// Their traffic model.
    pub web_model: WebModel,
    /// Their congestion control.
    pub web_cc: String,
    /// Run length, in seconds.
    pub duration_s: f64,
    /// The flows, in `[[flows]]` order (copies and on-periods in time order).
    pub flows: Vec<FlowPlan>,
}

/// Reads a number that JSON wrote as `null` because it was infinite (serde_json writes
/// non-finite numbers as `null`).
fn null_as_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

impl RunPoint {
    /// A short label of the swept values, e.g. `rate_mbit=10,rtt_ms=42` (`base` if none).
    pub fn label(&self) -> String {
        if self.vars.is_empty() {
            return "base".to_string();
        }
        self.vars
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
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
    defaults: Layer,
    paper: Layer,
    ci: Layer,
    flows: Vec<FlowSpec>,
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfiles {
    paper: toml::Value,
    ci: toml::Value,
}

#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
struct RawLayer {
    rate_mbit: Option<f64>,
    reverse_rate_mbit: Option<f64>,
    rtt_ms: Option<f64>,
    buffer_bdp: Option<f64>,
    buffer_pkts: Option<u32>,
    buffer_ms: Option<f64>,
    buffer_floor_pkts: Option<u32>,
    bdp_rtt: Option<BdpRtt>,
    loss: Option<f64>,
    loss_model: Option<LossModel>,
    init_ssthresh_bdp: Option<f64>,
    web_sessions: Option<u32>,
    web_model: Option<WebModel>,
    web_cc: Option<String>,
    duration_s: Option<f64>,
    repeat: Option<u32>,
    seed: Option<u64>,
    note: Option<String>,
    #[serde(default)]
    vars: BTreeMap<String, f64>,
    sweep: Option<toml::Value>,
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
}

// ---------------------------------------------------------------------------------------
// Parsed forms.

/// A `[defaults]` or `[profiles.X]` table.
#[derive(Debug, Clone, Default)]
struct Layer {
    /// `defaults` or `profiles.ci`.
    at: String,
    raw: RawLayer,
    sweep: Option<Vec<SweepCase>>,
}

/// One cartesian product of a sweep.
#[derive(Debug, Clone)]
struct SweepCase {
    /// `profiles.ci.sweep` or `profiles.ci.sweep[1]`.
    at: String,
    axes: Vec<(String, Vec<f64>)>,
}

#[derive(Debug, Clone, PartialEq)]
enum Factor {
    Num(f64),
    Var(String),
}

/// A product of numbers and variables.
#[derive(Debug, Clone, PartialEq)]
struct Expr {
    text: String,
    factors: Vec<Factor>,
}

#[derive(Debug, Clone, PartialEq)]
enum NumSpec {
    Expr(Expr),
    Uniform(Expr, Expr),
    Exponential(Expr),
    Choice(Vec<Expr>),
}

impl NumSpec {
    /// The expressions it is made of.
    fn exprs(&self) -> Vec<&Expr> {
        match self {
            NumSpec::Expr(e) | NumSpec::Exponential(e) => vec![e],
            NumSpec::Uniform(a, b) => vec![a, b],
            NumSpec::Choice(l) => l.iter().collect(),
        }
    }
}

#[derive(Debug, Clone)]
struct FlowSpec {
    cc: CcRef,
    rtt_ms: NumSpec,
    start_s: NumSpec,
    stop_s: Option<NumSpec>,
    count: Expr,
    start_step_s: Expr,
    size_mb: Option<Expr>,
    on_s: Option<NumSpec>,
    off_s: Option<NumSpec>,
}

/// A resolved value and the field it came from.
#[derive(Debug, Clone)]
struct Sourced {
    value: f64,
    field: String,
}

type Env = BTreeMap<String, Sourced>;

/// An error before the file name is attached: (field, message).
type Bad = (String, String);

fn bad(field: impl Into<String>, message: impl Into<String>) -> Bad {
    (field.into(), message.into())
}

// ---------------------------------------------------------------------------------------
// Parsing.

/// Deserializes `value` as a `T`, naming the field at `at` (+ the path serde reports).
fn de_at<T: serde::de::DeserializeOwned>(value: toml::Value, at: &str) -> Result<T, Bad> {
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
            return (
                join(&field, name),
                "missing: this field is required".to_string(),
            );
        }
        if let Some(rest) = message.strip_prefix("unknown field `") {
            if let Some(end) = rest.find('`') {
                field = join(&field, &rest[..end]);
            }
            let allowed = message.split_once(", expected ").map_or("", |(_, a)| a);
            let allowed = allowed
                .trim_start_matches("one of ")
                .replace("` or `", "`, `");
            return (field, format!("unknown field; allowed keys: {allowed}"));
        }
        (field, message)
    })
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}.{b}"),
    }
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn parse_expr(text: &str, at: &str) -> Result<Expr, Bad> {
    let mut factors = Vec::new();
    for term in text.split('*') {
        let term = term.trim();
        if let Some(name) = term.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            if name == "algo" {
                return Err(bad(
                    at,
                    "`{algo}` names an algorithm and is allowed only in `cc`",
                ));
            }
            if !is_ident(name) {
                return Err(bad(
                    at,
                    format!("`{{{name}}}` is not a variable name ([a-z_][a-z0-9_]*)"),
                ));
            }
            factors.push(Factor::Var(name.to_string()));
        } else if let Ok(v) = term.parse::<f64>() {
            if !v.is_finite() {
                return Err(bad(at, format!("`{term}` is not a finite number")));
            }
            factors.push(Factor::Num(v));
        } else {
            return Err(bad(
                at,
                format!(
                    "`{text}` is not a number or a product of numbers and {{var}} references \
                     (e.g. \"{{rtt_ms}}\", \"{{interval_s}}*4\")"
                ),
            ));
        }
    }
    Ok(Expr {
        text: text.to_string(),
        factors,
    })
}

fn expr_from(value: &toml::Value, at: &str) -> Result<Expr, Bad> {
    match value {
        toml::Value::Integer(i) => Ok(Expr {
            text: i.to_string(),
            factors: vec![Factor::Num(*i as f64)],
        }),
        toml::Value::Float(f) if f.is_finite() => Ok(Expr {
            text: f.to_string(),
            factors: vec![Factor::Num(*f)],
        }),
        toml::Value::String(s) => parse_expr(s, at),
        other => Err(bad(
            at,
            format!(
                "expected a number or a \"{{var}}\" expression, found {}",
                describe(other)
            ),
        )),
    }
}

fn describe(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(_) => "a table".to_string(),
        toml::Value::Array(_) => "an array".to_string(),
        other => format!("`{other}`"),
    }
}

/// Which random forms a flow field allows.
#[derive(Clone, Copy, PartialEq)]
enum Draws {
    UniformChoice,
    All,
}

fn numspec_from(value: &toml::Value, at: &str, draws: Draws) -> Result<NumSpec, Bad> {
    let toml::Value::Table(t) = value else {
        return expr_from(value, at).map(NumSpec::Expr);
    };
    let allowed = match draws {
        Draws::UniformChoice => {
            "a number, a \"{var}\" expression, { uniform = [a, b] } or { choice = [a, ...] }"
        }
        Draws::All => {
            "a number, a \"{var}\" expression, { uniform = [a, b] }, { choice = [a, ...] } or \
             { exponential = mean }"
        }
    };
    let mut keys = t.keys();
    let (Some(key), None) = (keys.next(), keys.next()) else {
        return Err(bad(at, format!("expected {allowed}")));
    };
    let inner = &t[key];
    let at_k = format!("{at}.{key}");
    let list = |v: &toml::Value| -> Result<Vec<Expr>, Bad> {
        let toml::Value::Array(a) = v else {
            return Err(bad(
                &at_k,
                format!("expected an array, found {}", describe(v)),
            ));
        };
        a.iter()
            .enumerate()
            .map(|(i, e)| expr_from(e, &format!("{at_k}[{i}]")))
            .collect()
    };
    match (key.as_str(), draws) {
        ("uniform", Draws::UniformChoice | Draws::All) => {
            let l = list(inner)?;
            if l.len() != 2 {
                return Err(bad(
                    at_k,
                    format!("expected [low, high], found {} values", l.len()),
                ));
            }
            let mut l = l.into_iter();
            Ok(NumSpec::Uniform(l.next().expect("2"), l.next().expect("2")))
        }
        ("choice", Draws::UniformChoice | Draws::All) => {
            let l = list(inner)?;
            if l.is_empty() {
                return Err(bad(at_k, "expected at least one value"));
            }
            Ok(NumSpec::Choice(l))
        }
        ("exponential", Draws::All) => Ok(NumSpec::Exponential(expr_from(inner, &at_k)?)),
        ("exponential", _) => Err(bad(
            at_k,
            format!("{{ exponential = mean }} is allowed only in on_s/off_s; here: {allowed}"),
        )),
        _ => Err(bad(
            at_k,
            format!("unknown form `{key}`; expected {allowed}"),
        )),
    }
}

fn parse_flow(value: toml::Value, at: &str) -> Result<FlowSpec, Bad> {
    let raw: RawFlow = de_at(value, at)?;
    let f = |k: &str| format!("{at}.{k}");
    let cc = match raw.cc.as_deref() {
        None | Some(ALGO) => CcRef::UnderTest,
        Some(name) => {
            if name.is_empty() || name.contains(['{', '}']) || name.contains(char::is_whitespace) {
                return Err(bad(
                    f("cc"),
                    format!("`{name}`: expected \"{{algo}}\" (the algorithm under test) or an algorithm name such as \"reno\""),
                ));
            }
            CcRef::Named(name.to_string())
        }
    };
    let opt = |v: &Option<toml::Value>, k: &str, d: Draws| -> Result<Option<NumSpec>, Bad> {
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
        return Err(bad(
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
    })
}

fn parse_sweep(value: &toml::Value, at: &str) -> Result<Vec<SweepCase>, Bad> {
    let tables: Vec<(String, &toml::Table)> = match value {
        toml::Value::Table(t) => vec![(at.to_string(), t)],
        toml::Value::Array(a) => {
            if a.is_empty() {
                return Err(bad(
                    at,
                    "an empty array of sweeps; give a table of lists or omit `sweep`",
                ));
            }
            a.iter()
                .enumerate()
                .map(|(i, v)| match v {
                    toml::Value::Table(t) => Ok((format!("{at}[{i}]"), t)),
                    other => Err(bad(
                        format!("{at}[{i}]"),
                        format!("expected a table of lists, found {}", describe(other)),
                    )),
                })
                .collect::<Result<_, _>>()?
        }
        other => {
            return Err(bad(
                at,
                format!(
                    "expected a table of lists (or an array of them), found {}",
                    describe(other)
                ),
            ))
        }
    };
    let mut cases = Vec::new();
    for (case_at, table) in tables {
        let mut axes = Vec::new();
        let mut buffers = Vec::new();
        for (key, list) in table {
            let key_at = format!("{case_at}.{key}");
            if !is_ident(key) || key == "algo" {
                return Err(bad(
                    key_at,
                    "not a parameter or variable name ([a-z_][a-z0-9_]*, not `algo`)",
                ));
            }
            if !PARAMS.contains(&key.as_str()) && is_setting(key) {
                return Err(bad(
                    key_at,
                    format!(
                        "`{key}` cannot be swept; sweepable parameters: {}",
                        PARAMS.join(", ")
                    ),
                ));
            }
            if BUFFER_KEYS.contains(&key.as_str()) {
                buffers.push(key.clone());
            }
            let toml::Value::Array(items) = list else {
                return Err(bad(
                    key_at,
                    format!("expected a list of numbers, found {}", describe(list)),
                ));
            };
            if items.is_empty() {
                return Err(bad(key_at, "an empty list; give at least one value"));
            }
            let mut values = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let item_at = format!("{key_at}[{i}]");
                let v = match item {
                    toml::Value::Integer(n) => *n as f64,
                    toml::Value::Float(x) if x.is_finite() => *x,
                    other => {
                        return Err(bad(
                            item_at,
                            format!("expected a number, found {}", describe(other)),
                        ))
                    }
                };
                if INTEGER_PARAMS.contains(&key.as_str()) && (v.fract() != 0.0 || v < 0.0) {
                    return Err(bad(
                        item_at,
                        format!("`{key}` takes whole numbers ≥ 0, found {v}"),
                    ));
                }
                values.push(v);
            }
            axes.push((key.clone(), values));
        }
        if buffers.len() > 1 {
            return Err(bad(
                case_at,
                format!(
                    "sweeps {}: give only one of {}",
                    buffers.join(" and "),
                    BUFFER_KEYS.join(", ")
                ),
            ));
        }
        cases.push(SweepCase { at: case_at, axes });
    }
    Ok(cases)
}

/// Keys of a layer that are not numeric parameters.
fn is_setting(key: &str) -> bool {
    matches!(
        key,
        "bdp_rtt"
            | "loss_model"
            | "web_model"
            | "web_cc"
            | "repeat"
            | "seed"
            | "note"
            | "vars"
            | "sweep"
    )
}

fn parse_layer(value: toml::Value, at: &str) -> Result<Layer, Bad> {
    let raw: RawLayer = de_at(value, at)?;
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
        return Err(bad(
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
            return Err(bad(
                v_at,
                format!("`{name}` is a parameter: set it directly in [{at}], not in vars"),
            ));
        }
        if !is_ident(name) || name == "algo" {
            return Err(bad(
                v_at,
                "not a variable name ([a-z_][a-z0-9_]*, not `algo`)",
            ));
        }
    }
    if let Some(0) = raw.repeat {
        return Err(bad(format!("{at}.repeat"), "must be at least 1"));
    }
    if let Some(cc) = &raw.web_cc {
        if cc.is_empty() || cc.contains(['{', '}']) {
            return Err(bad(
                format!("{at}.web_cc"),
                "expected an algorithm name such as \"reno\"",
            ));
        }
    }
    Ok(Layer {
        at: at.to_string(),
        raw,
        sweep,
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
        let invalid = |(field, message): Bad| ScenarioError::Invalid {
            path: path.to_path_buf(),
            field,
            message,
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

    fn from_table(table: toml::Table, path: &Path) -> Result<Scenario, Bad> {
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
            return Err(bad(
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
            return Err(bad(
                "name",
                format!(
                    "`{}`: expected lowercase words joined by `-`, e.g. \"fairness-same-rtt\"",
                    top.name
                ),
            ));
        }
        if top.title.trim().is_empty() {
            return Err(bad("title", "must not be empty"));
        }
        for (i, m) in top.metrics.iter().enumerate() {
            if !METRICS.contains(&m.as_str()) {
                return Err(bad(
                    format!("metrics[{i}]"),
                    format!("unknown metric `{m}`; allowed: {}", METRICS.join(", ")),
                ));
            }
        }
        for (i, p) in top.plots.iter().enumerate() {
            if !PLOTS.contains(&p.as_str()) {
                return Err(bad(
                    format!("plots[{i}]"),
                    format!("unknown plot `{p}`; allowed: {}", PLOTS.join(", ")),
                ));
            }
        }
        let defaults = match top.defaults {
            Some(v) => parse_layer(v, "defaults")?,
            None => Layer {
                at: "defaults".into(),
                ..Layer::default()
            },
        };
        let profiles: RawProfiles = de_at(top.profiles, "profiles")?;
        let paper = parse_layer(profiles.paper, "profiles.paper")?;
        let ci = parse_layer(profiles.ci, "profiles.ci")?;
        if top.flows.is_empty() {
            return Err(bad("flows", "at least one [[flows]] table is needed"));
        }
        let flows = top
            .flows
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse_flow(v, &format!("flows[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
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
        };
        Ok(scenario)
    }

    /// Every user variable is used, and `x` names something each profile defines.
    fn check_variables(&self) -> Result<(), Bad> {
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
                    return Err(bad(
                        format!("{}.vars.{name}", layer.at),
                        format!("`{name}` is not used by any flow or by `x` (a typo?)"),
                    ));
                }
            }
            for case in layer.sweep.iter().flatten() {
                for (name, _) in &case.axes {
                    if !PARAMS.contains(&name.as_str()) && !used.contains(name.as_str()) {
                        return Err(bad(
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
                        return Err(bad("x", format!("`{x}` is not defined in profile {profile} ({}); x must name a parameter, a var or a sweep key", case.at)));
                    }
                }
            }
        }
        Ok(())
    }

    fn layer(&self, profile: Profile) -> &Layer {
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

    /// Emulated time the whole profile takes for one algorithm: Σ duration × repeat, in s.
    pub fn total_duration_s(&self, profile: Profile) -> Result<f64, ScenarioError> {
        let points = self.expand(profile, self.seed(profile))?;
        Ok(points.iter().map(|p| p.duration_s).sum::<f64>() * f64::from(self.repeat(profile)))
    }

    fn sweep_cases(&self, profile: Profile) -> Vec<SweepCase> {
        let layer = self.layer(profile);
        match layer.sweep.as_ref().or(self.defaults.sweep.as_ref()) {
            Some(cases) => cases.clone(),
            None => vec![SweepCase {
                at: format!("{}.sweep", layer.at),
                axes: Vec::new(),
            }],
        }
    }

    /// Parameters and variables of `profile` before the sweep.
    fn base_env(&self, profile: Profile) -> Env {
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

    fn setting<T: Clone>(
        &self,
        profile: Profile,
        get: impl Fn(&RawLayer) -> &Option<T>,
    ) -> Option<T> {
        get(&self.layer(profile).raw)
            .clone()
            .or_else(|| get(&self.defaults.raw).clone())
    }

    /// Expands `profile` into its concrete, validated runs. Random draws (`uniform`,
    /// `choice`, `exponential`) come from `seed` and the point's index.
    pub fn expand(&self, profile: Profile, seed: u64) -> Result<Vec<RunPoint>, ScenarioError> {
        let invalid = |(field, message): Bad| ScenarioError::Invalid {
            path: self.path.clone(),
            field,
            message,
        };
        let base = self.base_env(profile);
        let mut points = Vec::new();
        for case in self.sweep_cases(profile) {
            let mut idx = vec![0usize; case.axes.len()];
            'points: loop {
                let mut env = base.clone();
                let mut vars = BTreeMap::new();
                if case
                    .axes
                    .iter()
                    .any(|(k, _)| BUFFER_KEYS.contains(&k.as_str()))
                {
                    env.retain(|k, _| !BUFFER_KEYS.contains(&k.as_str()));
                }
                for ((name, values), &i) in case.axes.iter().zip(&idx) {
                    env.insert(
                        name.clone(),
                        Sourced {
                            value: values[i],
                            field: format!("{}.{name}[{i}]", case.at),
                        },
                    );
                    vars.insert(name.clone(), values[i]);
                }
                let point = self
                    .point(profile, points.len(), env, vars, seed)
                    .map_err(invalid)?;
                points.push(point);
                // Odometer: the last axis varies fastest.
                let mut d = idx.len();
                loop {
                    if d == 0 {
                        break 'points;
                    }
                    d -= 1;
                    idx[d] += 1;
                    if idx[d] < case.axes[d].1.len() {
                        break;
                    }
                    idx[d] = 0;
                }
            }
        }
        Ok(points)
    }

    fn point(
        &self,
        profile: Profile,
        index: usize,
        env: Env,
        vars: BTreeMap<String, f64>,
        seed: u64,
    ) -> Result<RunPoint, Bad> {
        let at = self.layer(profile).at.clone();
        let ctx = if vars.is_empty() {
            format!("(profile {profile})")
        } else {
            let v: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("(profile {profile}, point {})", v.join(", "))
        };
        let required = |k: &str| -> Result<&Sourced, Bad> {
            env.get(k).ok_or_else(|| {
                bad(
                    format!("{at}.{k}"),
                    format!("missing: set `{k}` in [defaults] or [{at}]"),
                )
            })
        };
        let positive = |s: &Sourced, what: &str| -> Result<f64, Bad> {
            if s.value.is_finite() && s.value > 0.0 {
                Ok(s.value)
            } else {
                Err(bad(
                    &s.field,
                    format!("{} is not allowed: {what} must be > 0 {ctx}", s.value),
                ))
            }
        };
        let cap = |s: &Sourced| -> Result<(), Bad> {
            if profile == Profile::Ci && s.value > CI_MAX_RATE_MBIT {
                let inherited = if s.field.starts_with(&at) {
                    String::new()
                } else {
                    format!(" (inherited by {at})")
                };
                return Err(bad(
                    &s.field,
                    format!("{} Mbit/s{inherited} is above the ci profile's cap of {CI_MAX_RATE_MBIT} Mbit/s (C_ci = min(C, 50), benchmarks.md §7.4)", s.value),
                ));
            }
            Ok(())
        };
        let rate_s = required("rate_mbit")?;
        let rate = positive(rate_s, "the capacity (Mbit/s)")?;
        cap(rate_s)?;
        let reverse = match env.get("reverse_rate_mbit") {
            Some(s) => {
                cap(s)?;
                Some(positive(s, "the reverse-path capacity (Mbit/s)")?)
            }
            None => None,
        };
        // 0 adds no delay: the path's own RTT (tens of usec) on tbf alone, no netem.
        let rtt = {
            let s = required("rtt_ms")?;
            if s.value.is_finite() && s.value >= 0.0 {
                s.value
            } else {
                return Err(bad(
                    &s.field,
                    format!(
                        "{} is not allowed: the RTT (ms) must be ≥ 0 (0: no added delay) {ctx}",
                        s.value
                    ),
                ));
            }
        };
        let duration = positive(required("duration_s")?, "the duration (s)")?;
        let loss = match env.get("loss") {
            Some(s) if !(0.0..1.0).contains(&s.value) => {
                return Err(bad(
                    &s.field,
                    format!("{} is outside [0, 1): a loss probability {ctx}", s.value),
                ))
            }
            Some(s) => s.value,
            None => 0.0,
        };
        let floor = env
            .get("buffer_floor_pkts")
            .map_or(DEFAULT_BUFFER_FLOOR_PKTS as f64, |s| s.value);
        let web_sessions = env.get("web_sessions").map_or(0.0, |s| s.value) as u32;

        let flows = self.flows_of(&env, duration, seed, index, &ctx)?;
        let bdp_rtt = match self.setting(profile, |l| &l.bdp_rtt).unwrap_or_default() {
            BdpRtt::Flow1 => flows.first().map_or(rtt, |f| f.rtt_ms),
            BdpRtt::Min => flows
                .iter()
                .map(|f| f.rtt_ms)
                .reduce(f64::min)
                .unwrap_or(rtt),
        };
        let bdp = bdp_pkts(rate, bdp_rtt);

        let (raw_pkts, fraction, buf_s) = if let Some(s) = env.get("buffer_bdp") {
            (s.value * bdp, Some(s.value), s)
        } else if let Some(s) = env.get("buffer_pkts") {
            (s.value, None, s)
        } else if let Some(s) = env.get("buffer_ms") {
            (bdp_pkts(rate, s.value), None, s)
        } else {
            return Err(bad(
                format!("{at}.buffer_bdp"),
                format!(
                    "missing: set one of {} in [defaults] or [{at}]",
                    BUFFER_KEYS.join(", ")
                ),
            ));
        };
        if !(raw_pkts.is_finite() && raw_pkts >= 0.0) || buf_s.value < 0.0 {
            return Err(bad(
                &buf_s.field,
                format!(
                    "{} is not allowed: the buffer must be ≥ 0 {ctx}",
                    buf_s.value
                ),
            ));
        }
        let (pkts, floored) = buffer_pkts(raw_pkts, floor);
        if pkts < 1.0 {
            return Err(bad(
                &buf_s.field,
                format!("the buffer is {pkts} packets after the floor (buffer_floor_pkts = {floor}); a drop-tail queue needs at least 1 packet {ctx}"),
            ));
        }
        if pkts > f64::from(u32::MAX) {
            return Err(bad(
                &buf_s.field,
                format!("the buffer is {pkts} packets, more than a queue can hold {ctx}"),
            ));
        }
        let init_ssthresh_pkts = match env.get("init_ssthresh_bdp") {
            Some(s) => Some(
                (positive(s, "the initial ssthresh fraction")? * bdp)
                    .round()
                    .max(2.0) as u32,
            ),
            None => None,
        };
        Ok(RunPoint {
            index,
            vars,
            rate_mbit: rate,
            reverse_rate_mbit: reverse,
            rtt_ms: rtt,
            bdp_rtt_ms: bdp_rtt,
            bdp_pkts: bdp,
            buffer_bdp: fraction.unwrap_or(pkts / bdp),
            buffer_pkts: pkts as u32,
            buffer_floored: floored,
            loss,
            loss_model: self.setting(profile, |l| &l.loss_model).unwrap_or_default(),
            init_ssthresh_pkts,
            web_sessions,
            web_model: self.setting(profile, |l| &l.web_model).unwrap_or_default(),
            web_cc: self
                .setting(profile, |l| &l.web_cc)
                .unwrap_or_else(|| "reno".to_string()),
            duration_s: duration,
            flows,
        })
    }

    fn flows_of(
        &self,
        env: &Env,
        duration: f64,
        seed: u64,
        index: usize,
        ctx: &str,
    ) -> Result<Vec<FlowPlan>, Bad> {
        let mut rng =
            SplitMix64::new(seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut plans = Vec::new();
        for (e, f) in self.flows.iter().enumerate() {
            let at = |k: &str| format!("flows[{e}].{k}");
            let count = eval(&f.count, env, &at("count"))?;
            if count.fract() != 0.0 || count < 1.0 {
                return Err(bad(
                    at("count"),
                    format!(
                        "{count} is not allowed: a whole number ≥ 1{} {ctx}",
                        origins([&f.count], env)
                    ),
                ));
            }
            let step = eval(&f.start_step_s, env, &at("start_step_s"))?;
            if step < 0.0 {
                return Err(bad(
                    at("start_step_s"),
                    format!(
                        "{step} is not allowed: must be ≥ 0{} {ctx}",
                        origins([&f.start_step_s], env)
                    ),
                ));
            }
            let size_bytes = match &f.size_mb {
                Some(x) => {
                    let mb = eval(x, env, &at("size_mb"))?;
                    if mb <= 0.0 {
                        return Err(bad(
                            at("size_mb"),
                            format!(
                                "{mb} is not allowed: must be > 0 MB{} {ctx}",
                                origins([x], env)
                            ),
                        ));
                    }
                    Some((mb * 1e6).round() as u64)
                }
                None => None,
            };
            let (rtt_lo, _) = range(&f.rtt_ms, env, &at("rtt_ms"))?;
            if rtt_lo.is_nan() || rtt_lo < 0.0 {
                return Err(bad(
                    at("rtt_ms"),
                    format!(
                        "{rtt_lo} ms is not allowed: an RTT must be ≥ 0 (0: no added delay){} {ctx}",
                        origins(f.rtt_ms.exprs(), env)
                    ),
                ));
            }
            let (start_lo, start_hi) = range(&f.start_s, env, &at("start_s"))?;
            if start_lo < 0.0 {
                return Err(bad(
                    at("start_s"),
                    format!(
                        "{start_lo} s is not allowed: must be ≥ 0{} {ctx}",
                        origins(f.start_s.exprs(), env)
                    ),
                ));
            }
            let (stop_lo, stop_hi, stop_field) = match &f.stop_s {
                Some(s) => {
                    let (lo, hi) = range(s, env, &at("stop_s"))?;
                    (lo, hi, at("stop_s"))
                }
                None => (duration, duration, "duration_s".to_string()),
            };
            if stop_hi > duration + 1e-9 {
                return Err(bad(
                    at("stop_s"),
                    format!(
                        "{stop_hi} s is after the end of the run (duration_s = {duration}){} {ctx}",
                        origins(f.stop_s.iter().flat_map(NumSpec::exprs), env)
                    ),
                ));
            }
            let last_start = start_hi + (count - 1.0) * step;
            if last_start >= stop_lo {
                return Err(bad(
                    at("start_s"),
                    format!(
                        "a flow would start at {last_start} s, not before its stop at {stop_lo} s \
                         ({stop_field}); start_s must be < stop_s{} {ctx}",
                        origins(
                            f.start_s
                                .exprs()
                                .into_iter()
                                .chain(f.stop_s.iter().flat_map(NumSpec::exprs)),
                            env
                        )
                    ),
                ));
            }
            for (k, spec) in [("on_s", &f.on_s), ("off_s", &f.off_s)] {
                let Some(spec) = spec else { continue };
                let (lo, _) = range(spec, env, &at(k))?;
                if lo <= 0.0 {
                    return Err(bad(
                        at(k),
                        format!(
                            "{lo} s is not allowed: periods must be > 0{} {ctx}",
                            origins(spec.exprs(), env)
                        ),
                    ));
                }
            }
            let cc = f.cc.clone();
            for k in 0..count as usize {
                let rtt_ms = draw(&f.rtt_ms, env, &mut rng);
                let start = draw(&f.start_s, env, &mut rng) + k as f64 * step;
                let stop = f
                    .stop_s
                    .as_ref()
                    .map_or(duration, |s| draw(s, env, &mut rng));
                let mut push = |start_s: f64, stop_s: f64| -> Result<(), Bad> {
                    if plans.len() >= MAX_FLOWS_PER_POINT {
                        return Err(bad(
                            format!("flows[{e}]"),
                            format!("more than {MAX_FLOWS_PER_POINT} flows in one run {ctx}"),
                        ));
                    }
                    plans.push(FlowPlan {
                        entry: e,
                        cc: cc.clone(),
                        rtt_ms,
                        start_s,
                        stop_s,
                        size_bytes,
                    });
                    Ok(())
                };
                match &f.on_s {
                    None => push(start, stop)?,
                    Some(on) => {
                        let mut t = start;
                        while t < stop {
                            let end = (t + draw(on, env, &mut rng)).min(stop);
                            if end > t {
                                push(t, end)?;
                            }
                            match &f.off_s {
                                Some(off) => t = end + draw(off, env, &mut rng),
                                None => break,
                            }
                        }
                    }
                }
            }
        }
        Ok(plans)
    }
}

/// Bandwidth-delay product in 1500-byte packets: `C·RTT / (1500·8)` (`benchmarks.md` §0).
pub fn bdp_pkts(rate_mbit: f64, rtt_ms: f64) -> f64 {
    rate_mbit * 1e6 * (rtt_ms / 1e3) / (PACKET_BYTES * 8.0)
}

/// A buffer of `raw_pkts` packets rounded to the nearest packet and raised to `floor_pkts`;
/// returns the packets and whether the floor applied.
pub fn buffer_pkts(raw_pkts: f64, floor_pkts: f64) -> (f64, bool) {
    let rounded = raw_pkts.round();
    if rounded < floor_pkts {
        (floor_pkts, true)
    } else {
        (rounded, false)
    }
}

fn eval(e: &Expr, env: &Env, at: &str) -> Result<f64, Bad> {
    let mut v = 1.0;
    for f in &e.factors {
        v *= match f {
            Factor::Num(n) => *n,
            Factor::Var(name) => match env.get(name) {
                Some(s) => s.value,
                None => {
                    let known: Vec<&str> = env.keys().map(String::as_str).collect();
                    return Err(bad(
                        at,
                        format!(
                            "\"{}\" names `{name}`, which is not defined; defined here: {}",
                            e.text,
                            known.join(", ")
                        ),
                    ));
                }
            },
        };
    }
    if !v.is_finite() {
        return Err(bad(
            at,
            format!("\"{}\" evaluates to {v}, not a finite number", e.text),
        ));
    }
    Ok(v)
}

/// Where the variables of `exprs` got their values: "; `rtt2_ms` = -82 from
/// profiles.ci.sweep.rtt2_ms[1]", or nothing.
fn origins<'a>(exprs: impl IntoIterator<Item = &'a Expr>, env: &Env) -> String {
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    for e in exprs {
        for f in &e.factors {
            if let Factor::Var(name) = f {
                if let (Some(s), true) = (env.get(name), seen.insert(name)) {
                    out += &format!("; `{name}` = {} from {}", s.value, s.field);
                }
            }
        }
    }
    out
}

/// The smallest and largest value `spec` can take (exponential: [0, ∞)).
fn range(spec: &NumSpec, env: &Env, at: &str) -> Result<(f64, f64), Bad> {
    Ok(match spec {
        NumSpec::Expr(e) => {
            let v = eval(e, env, at)?;
            (v, v)
        }
        NumSpec::Uniform(a, b) => {
            let (lo, hi) = (
                eval(a, env, &format!("{at}.uniform[0]"))?,
                eval(b, env, &format!("{at}.uniform[1]"))?,
            );
            if lo > hi {
                return Err(bad(
                    format!("{at}.uniform"),
                    format!("[{lo}, {hi}]: the low bound is above the high bound"),
                ));
            }
            (lo, hi)
        }
        NumSpec::Exponential(m) => {
            let mean = eval(m, env, &format!("{at}.exponential"))?;
            if mean.is_nan() || mean <= 0.0 {
                return Err(bad(
                    format!("{at}.exponential"),
                    format!("{mean}: the mean must be > 0"),
                ));
            }
            (f64::MIN_POSITIVE, f64::INFINITY)
        }
        NumSpec::Choice(l) => {
            let mut lo = f64::INFINITY;
            let mut hi = f64::NEG_INFINITY;
            for (i, e) in l.iter().enumerate() {
                let v = eval(e, env, &format!("{at}.choice[{i}]"))?;
                lo = lo.min(v);
                hi = hi.max(v);
            }
            (lo, hi)
        }
    })
}

/// Draws a value of `spec`; call only after [`range`] succeeded (variables are defined).
fn draw(spec: &NumSpec, env: &Env, rng: &mut SplitMix64) -> f64 {
    let ev = |e: &Expr| eval(e, env, "").unwrap_or(f64::NAN);
    match spec {
        NumSpec::Expr(e) => ev(e),
        NumSpec::Uniform(a, b) => {
            let (lo, hi) = (ev(a), ev(b));
            lo + (hi - lo) * rng.unit()
        }
        NumSpec::Exponential(m) => -ev(m) * (1.0 - rng.unit()).ln(),
        NumSpec::Choice(l) => ev(&l[((rng.unit() * l.len() as f64) as usize).min(l.len() - 1)]),
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): small, seedable, and the same on every platform.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

// ---------------------------------------------------------------------------------------
// The shipped scenarios.

macro_rules! builtin_files {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/", $file)))),*]
    };
}

/// The shipped scenario files (`bench/scenarios/`), embedded: (file name, contents).
pub const BUILTIN_FILES: &[(&str, &str)] = builtin_files!(
    "t0_1_fairness_same_rtt.toml",
    "t0_2_rtt_unfairness.toml",
    "t0_3_backward_compatibility.toml",
    "t0_4_efficiency_vs_buffer.toml",
    "t0_5_efficiency_vs_rtt.toml",
    "t0_6_response_function.toml",
    "t0_7_convergence_time.toml",
    "t0_8_web_rtt_unfairness.toml",
    "t0_9_long_haul_single_flow.toml",
    "t1_1_static_throughput.toml",
    "t1_2_dynamic_three_flows.toml",
    "t1_3_dynamic_eight_flows.toml",
    "t1_4_overall_random.toml",
    "t2_5_convergence_with_web.toml",
    "t2_6_staggered_completion.toml",
    "t2_7_completion_vs_size.toml",
    "t3_1_effect_of_rtt.toml",
    "t3_2_effect_of_buffer.toml",
    "t3_3_effect_of_loss.toml",
    "t3_4_reno_friendliness.toml",
    "t3_5_rtt_fairness.toml",
    "t3_6_web_background.toml",
    "v1_native_comparison.toml",
);

/// The shipped scenarios, in test-id order, with `path` = `<builtin>/<file>.toml`.
///
/// # Panics
/// If a shipped file is invalid, which the crate's tests rule out.
pub fn builtin() -> Vec<Scenario> {
    BUILTIN_FILES
        .iter()
        .map(|(file, text)| {
            let path = Path::new("<builtin>").join(file);
            Scenario::parse(text, &path)
                .unwrap_or_else(|e| panic!("shipped scenario is invalid: {e}"))
        })
        .collect()
}

/// Finds a scenario by CLI name (`fairness-same-rtt`), test id (`T0.1`, any case), built-in
/// file stem (`t0_1_fairness_same_rtt`) or path to a `.toml` file.
pub fn find(name_or_path: &str) -> Result<Scenario, ScenarioError> {
    let all = builtin();
    if let Some(s) = all.iter().find(|s| {
        s.name == name_or_path
            || s.id.eq_ignore_ascii_case(name_or_path)
            || s.path.file_stem().is_some_and(|f| f == name_or_path)
    }) {
        return Ok(s.clone());
    }
    let path = Path::new(name_or_path);
    if name_or_path.ends_with(".toml") || name_or_path.contains('/') || path.is_file() {
        return Scenario::load(path);
    }
    Err(ScenarioError::NotFound {
        name: name_or_path.to_string(),
        known: all
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shipped(name: &str) -> Scenario {
        find(name).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Active flows at time `t` of `point`.
    fn active_at(point: &RunPoint, t: f64) -> usize {
        point
            .flows
            .iter()
            .filter(|f| f.start_s <= t && t < f.stop_s)
            .count()
    }

    #[test]
    fn every_shipped_scenario_parses_and_expands_in_both_profiles() {
        let all = builtin();
        assert_eq!(all.len(), 23);
        for s in &all {
            assert!(s.path.starts_with("<builtin>"), "{}", s.path.display());
            for profile in Profile::ALL {
                let points = s.expand(profile, s.seed(profile)).unwrap();
                assert!(!points.is_empty(), "{} {profile}", s.name);
                for (i, p) in points.iter().enumerate() {
                    assert_eq!(p.index, i);
                    assert!(!p.flows.is_empty(), "{} {profile} {}", s.name, p.label());
                    assert!(p.buffer_pkts >= 1);
                    for f in &p.flows {
                        assert!(
                            0.0 <= f.start_s && f.start_s < f.stop_s && f.stop_s <= p.duration_s
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_file_in_the_scenarios_directory_is_built_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".toml"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = BUILTIN_FILES.iter().map(|(f, _)| f.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
        for (file, _) in BUILTIN_FILES {
            Scenario::load(&dir.join(file)).unwrap();
        }
    }

    #[test]
    fn shipped_scenarios_cover_the_test_list_with_unique_names() {
        let all = builtin();
        let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
        let want = [
            "T0.1", "T0.2", "T0.3", "T0.4", "T0.5", "T0.6", "T0.7", "T0.8", "T0.9", "T1.1", "T1.2",
            "T1.3", "T1.4", "T2.5", "T2.6", "T2.7", "T3.1", "T3.2", "T3.3", "T3.4", "T3.5", "T3.6",
            "V1",
        ];
        assert_eq!(ids, want);
        let names: BTreeSet<&str> = all.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), all.len());
        for (s, (file, _)) in all.iter().zip(BUILTIN_FILES) {
            if !s.id.starts_with('T') {
                continue;
            }
            let prefix = s.id.to_lowercase().replace(['t', '.'], "_");
            assert!(
                file.starts_with(&format!("t{}", &prefix[1..])),
                "{file} vs {}",
                s.id
            );
        }
    }

    #[test]
    fn find_accepts_a_name_an_id_in_any_case_or_a_path() {
        assert_eq!(shipped("fairness-same-rtt").id, "T0.1");
        assert_eq!(shipped("t0.1").name, "fairness-same-rtt");
        assert_eq!(shipped("T3.4").name, "reno-friendliness");
        assert_eq!(shipped("t2_7_completion_vs_size").id, "T2.7");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/t0_2_rtt_unfairness.toml");
        let s = find(path.to_str().unwrap()).unwrap();
        assert_eq!((s.id.as_str(), s.path.as_path()), ("T0.2", path.as_path()));
        let e = find("no-such-test").unwrap_err().to_string();
        assert!(
            e.contains("no-such-test") && e.contains("fairness-same-rtt"),
            "{e}"
        );
        let e = find("/nonexistent/x.toml").unwrap_err().to_string();
        assert!(e.starts_with("/nonexistent/x.toml: "), "{e}");
    }

    #[test]
    fn ci_profiles_stay_at_or_below_50_mbit_and_100_ms_and_take_at_most_three_minutes() {
        let mut total = 0.0;
        println!(
            "{:<6} {:<26} {:>6} {:>7} {:>9}",
            "id", "name", "points", "repeat", "ci time"
        );
        for s in builtin() {
            let points = s.expand(Profile::Ci, s.seed(Profile::Ci)).unwrap();
            let secs = s.total_duration_s(Profile::Ci).unwrap();
            println!(
                "{:<6} {:<26} {:>6} {:>7} {:>8}s",
                s.id,
                s.name,
                points.len(),
                s.repeat(Profile::Ci),
                secs
            );
            total += secs;
            assert!(
                secs <= 180.0,
                "{}: ci profile takes {secs} s per algorithm",
                s.name
            );
            let r = s.repeat(Profile::Ci);
            assert!((1..=2).contains(&r), "{}: repeat {r}", s.name);
            for p in &points {
                assert!(p.rate_mbit <= CI_MAX_RATE_MBIT, "{} {}", s.name, p.label());
                assert!(p.reverse_rate_mbit.is_none_or(|r| r <= CI_MAX_RATE_MBIT));
                assert!(
                    (20.0..=156.0).contains(&p.duration_s),
                    "{} {}",
                    s.name,
                    p.duration_s
                );
                for f in &p.flows {
                    assert!(
                        f.rtt_ms <= 100.0,
                        "{} {}: flow RTT {}",
                        s.name,
                        p.label(),
                        f.rtt_ms
                    );
                }
            }
        }
        println!("all ci profiles: {total} s of emulated time per algorithm");
    }

    #[test]
    fn every_ci_profile_says_it_must_never_be_compared_with_the_papers() {
        for (file, text) in BUILTIN_FILES {
            let ci = &text[text.find("[profiles.ci]").expect("ci profile")..];
            let comment: String = ci
                .lines()
                .filter_map(|l| l.strip_prefix("# "))
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                comment.contains("never be compared with the papers' numbers"),
                "{file}: {comment}"
            );
        }
        for s in builtin() {
            assert!(
                s.note(Profile::Ci)
                    .is_some_and(|n| n.contains("never compare")),
                "{}",
                s.name
            );
            assert_eq!(s.note(Profile::Paper), None, "{}", s.name);
        }
    }

    #[test]
    fn paper_profiles_of_p0_run_600_s_at_least_5_times_and_p3_at_least_3() {
        for s in builtin() {
            let points = s.expand(Profile::Paper, 1).unwrap();
            let r = s.repeat(Profile::Paper);
            if s.id.starts_with("T0.") {
                assert!(r >= 5, "{}", s.name);
                let d = if s.id == "T0.9" { 1200.0 } else { 600.0 };
                assert!(points.iter().all(|p| p.duration_s == d), "{}", s.name);
            }
            if s.id.starts_with("T3.") {
                assert!(
                    r >= 3 && points.iter().all(|p| p.duration_s == 600.0),
                    "{}",
                    s.name
                );
                assert!(
                    points.iter().all(|p| p.init_ssthresh_pkts.is_some()),
                    "{}",
                    s.name
                );
            }
        }
    }

    #[test]
    fn t0_2_paper_profile_is_2_rates_by_5_rtts_with_flow_1_fixed_at_162_ms() {
        let s = shipped("rtt-unfairness");
        let points = s.expand(Profile::Paper, 1).unwrap();
        assert_eq!(points.len(), 10);
        let grid: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.vars["rate_mbit"], p.vars["rtt2_ms"]))
            .collect();
        let mut want = Vec::new();
        for rate in [10.0, 250.0] {
            for rtt in [22.0, 42.0, 82.0, 162.0, 324.0] {
                want.push((rate, rtt));
            }
        }
        assert_eq!(grid, want);
        for p in &points {
            assert_eq!(p.flows.len(), 2);
            assert_eq!(p.flows[0].rtt_ms, 162.0);
            assert_eq!(p.flows[1].rtt_ms, p.vars["rtt2_ms"]);
            assert_eq!((p.flows[0].start_s, p.flows[1].start_s), (0.0, 30.0));
            assert_eq!(p.bdp_rtt_ms, 162.0, "the BDP uses flow 1's RTT");
            assert_eq!(p.buffer_bdp, 0.2);
            assert!(p.flows.iter().all(|f| f.cc == CcRef::UnderTest));
        }
        // The queue stays constant along the flow-2 sweep.
        assert!(points[..5]
            .iter()
            .all(|p| p.buffer_pkts == points[0].buffer_pkts));
        assert_eq!(s.repeat(Profile::Paper), 5);
    }

    #[test]
    fn bdp_of_100_mbit_by_82_ms_is_683_packets_and_20_percent_is_137() {
        assert_eq!(bdp_pkts(100.0, 82.0).round(), 683.0);
        assert_eq!(
            buffer_pkts(0.2 * bdp_pkts(100.0, 82.0), 2.0),
            (137.0, false)
        );
        assert_eq!(bdp_pkts(250.0, 42.0), 875.0);
        assert_eq!(buffer_pkts(0.2 * 875.0, 2.0), (175.0, false));
        // The same through a scenario: T0.4's paper grid at 20 % BDP, T0.1 at 250 Mb/s × 42 ms.
        let t04 = shipped("T0.4").expand(Profile::Paper, 1).unwrap();
        let p = t04.iter().find(|p| p.vars["buffer_bdp"] == 0.2).unwrap();
        assert_eq!(
            (p.bdp_pkts.round(), p.buffer_pkts, p.buffer_floored),
            (683.0, 137, false)
        );
        let one_percent = t04.iter().find(|p| p.vars["buffer_bdp"] == 0.01).unwrap();
        assert_eq!(one_percent.buffer_pkts, 7, "1 % of 683.3 rounds to 7");
        let t01 = shipped("T0.1").expand(Profile::Paper, 1).unwrap();
        let p = t01
            .iter()
            .find(|p| p.rate_mbit == 250.0 && p.rtt_ms == 42.0)
            .unwrap();
        assert_eq!((p.bdp_pkts, p.buffer_pkts), (875.0, 175));
    }

    #[test]
    fn one_mbit_by_22_ms_at_20_percent_is_floored_to_2_packets_and_flagged() {
        assert_eq!(buffer_pkts(0.2 * bdp_pkts(1.0, 22.0), 2.0), (2.0, true));
        let text = BUILTIN_FILES[0]
            .1
            .replace("rate_mbit = [10, 250]", "rate_mbit = [1, 10, 100, 250]");
        let s = Scenario::parse(&text, Path::new("t0_1_full_grid.toml")).unwrap();
        let points = s.expand(Profile::Paper, 1).unwrap();
        assert_eq!(points.len(), 20);
        let p = points
            .iter()
            .find(|p| p.rate_mbit == 1.0 && p.rtt_ms == 22.0)
            .unwrap();
        assert!((p.bdp_pkts - 1.8333).abs() < 1e-3);
        assert_eq!(
            (p.buffer_pkts, p.buffer_floored, p.buffer_bdp),
            (2, true, 0.2)
        );
        let floored: Vec<f64> = points
            .iter()
            .filter(|p| p.buffer_floored)
            .map(|p| p.rtt_ms)
            .collect();
        // 1 Mb/s: 20 % of 1.8/3.5/6.8 packets is below 2; of 13.5 and 27 it is not.
        assert_eq!(floored, [22.0, 42.0, 82.0]);
        assert!(points
            .iter()
            .filter(|p| p.rate_mbit >= 10.0)
            .all(|p| !p.buffer_floored));
    }

    #[test]
    fn t0_7_start_times_are_drawn_per_seed_within_the_window() {
        let s = shipped("convergence-time");
        let a = s.expand(Profile::Paper, 1).unwrap();
        assert_eq!(
            a,
            s.expand(Profile::Paper, 1).unwrap(),
            "one seed, one expansion"
        );
        let b = s.expand(Profile::Paper, 2).unwrap();
        let starts = |ps: &[RunPoint]| ps.iter().map(|p| p.flows[1].start_s).collect::<Vec<_>>();
        assert_ne!(starts(&a), starts(&b));
        let mut distinct = BTreeSet::new();
        for seed in 0..25 {
            let p = &s.expand(Profile::Paper, seed).unwrap()[0];
            assert_eq!(p.flows[0].start_s, 0.0);
            assert!(
                (30.0..=200.0).contains(&p.flows[1].start_s),
                "{}",
                p.flows[1].start_s
            );
            distinct.insert(p.flows[1].start_s.to_bits());
        }
        assert!(distinct.len() >= 20);
        assert_eq!(s.repeat(Profile::Paper), 25);
    }

    #[test]
    fn t1_2_and_t1_3_schedules_follow_the_papers_tables() {
        let t12 = &shipped("T1.2").expand(Profile::Paper, 1).unwrap()[0];
        let counts: Vec<usize> = (0..5)
            .map(|k| active_at(t12, k as f64 * 1800.0 + 900.0))
            .collect();
        assert_eq!(counts, [1, 2, 3, 2, 1]);
        let rtts: Vec<f64> = t12.flows.iter().map(|f| f.rtt_ms).collect();
        assert_eq!(rtts, [100.0, 150.0, 200.0]);
        assert_eq!(
            (t12.buffer_pkts, t12.rate_mbit, t12.duration_s),
            (2000, 800.0, 9000.0)
        );

        for profile in Profile::ALL {
            let s = shipped("T1.3");
            let p = &s.expand(profile, 1).unwrap()[0];
            let interval = p.duration_s / 13.0;
            let counts: Vec<usize> = (0..13)
                .map(|k| active_at(p, (k as f64 + 0.5) * interval))
                .collect();
            assert_eq!(counts, [2, 4, 6, 8, 6, 4, 2, 4, 6, 8, 6, 4, 2], "{profile}");
        }
        let ci = &shipped("T1.3").expand(Profile::Ci, 1).unwrap()[0];
        assert_eq!(ci.buffer_pkts, 125);
        assert!(
            (ci.buffer_bdp - 125.0 / bdp_pkts(50.0, 25.0)).abs() < 1e-9,
            "effective fraction"
        );
    }

    #[test]
    fn t1_4_on_off_sources_expand_into_connections_within_the_run() {
        let s = shipped("T1.4");
        let points = s.expand(Profile::Paper, 7).unwrap();
        assert_eq!(
            points.iter().map(|p| p.vars["n"]).collect::<Vec<_>>(),
            [2.0, 4.0, 6.0, 8.0]
        );
        for p in &points {
            let n = p.vars["n"] as usize;
            assert!(p.flows.len() >= n, "at least one on period per source");
            for f in &p.flows {
                assert!([50.0, 100.0, 150.0, 200.0].contains(&f.rtt_ms));
                assert!(f.stop_s <= 9000.0 && f.start_s < f.stop_s);
            }
            // No more than n sources are on at once.
            for k in 0..90 {
                assert!(active_at(p, k as f64 * 100.0 + 1.0) <= n);
            }
        }
        assert_ne!(
            points,
            s.expand(Profile::Paper, 8).unwrap(),
            "a new seed, a new schedule"
        );
    }

    #[test]
    fn t2_7_sweeps_the_union_of_the_wan_and_dsl_paths() {
        let points = shipped("T2.7").expand(Profile::Paper, 1).unwrap();
        assert_eq!(points.len(), 8 + 6);
        let (wan, dsl) = points.split_at(8);
        for p in wan {
            assert_eq!(
                (p.rate_mbit, p.rtt_ms, p.buffer_bdp, p.web_sessions),
                (100.0, 160.0, 1.0, 25)
            );
            assert_eq!(p.reverse_rate_mbit, None);
        }
        for p in dsl {
            assert_eq!(
                (p.rate_mbit, p.reverse_rate_mbit, p.rtt_ms),
                (3.0, Some(0.256), 30.0)
            );
            assert_eq!(p.buffer_pkts, 25, "100 ms worth of 3 Mbit/s");
            assert_eq!(p.web_sessions, 0);
        }
        let sizes: Vec<Option<u64>> = dsl.iter().map(|p| p.flows[1].size_bytes).collect();
        assert_eq!(sizes[0], Some(100_000));
        assert_eq!(sizes[5], Some(5_000_000));
        assert!(points
            .iter()
            .all(|p| p.flows[0].size_bytes.is_none() && p.flows[1].start_s == 5.0));
        let t26 = &shipped("T2.6").expand(Profile::Paper, 1).unwrap()[0];
        let starts: Vec<f64> = t26.flows.iter().map(|f| f.start_s).collect();
        assert_eq!(starts, [0.0, 5.0, 10.0, 15.0]);
        assert!(t26.flows.iter().all(|f| f.size_bytes == Some(200_000_000)));
    }

    #[test]
    fn t3_4_runs_n_reno_flows_and_one_under_test() {
        for p in shipped("T3.4").expand(Profile::Paper, 1).unwrap() {
            let n = p.vars["n"] as usize;
            let reno = p
                .flows
                .iter()
                .filter(|f| f.cc == CcRef::Named("reno".into()))
                .count();
            let x = p.flows.iter().filter(|f| f.cc == CcRef::UnderTest).count();
            assert_eq!((reno, x), (n, 1));
        }
    }

    #[test]
    fn t3_5_sweeps_the_rtt_ratio_and_sizes_the_buffer_from_the_minimum_rtt() {
        let points = shipped("T3.5").expand(Profile::Paper, 1).unwrap();
        let rtt2: Vec<f64> = points.iter().map(|p| p.flows[1].rtt_ms).collect();
        assert_eq!(rtt2, [25.0, 50.0, 100.0, 200.0, 400.0]);
        for p in &points {
            assert_eq!((p.bdp_rtt_ms, p.buffer_pkts), (25.0, 1042));
            assert_eq!(p.init_ssthresh_pkts, Some(521));
            assert_eq!(p.loss, 5e-7);
        }
    }

    #[test]
    fn profile_names_parse_and_print() {
        assert_eq!("ci".parse::<Profile>(), Ok(Profile::Ci));
        assert_eq!("paper".parse::<Profile>().unwrap().to_string(), "paper");
        assert!("full"
            .parse::<Profile>()
            .unwrap_err()
            .contains("`ci` or `paper`"));
    }

    // ---- bad input ------------------------------------------------------------------

    const GOOD: &str = r#"
id = "T9.1"
name = "bad-input"
title = "A scenario for error tests"
source = "test"
metrics = ["M1"]
plots = ["cwnd"]
x = "rtt_ms"

[defaults]
rate_mbit = 10
rtt_ms = 42
buffer_bdp = 0.2

[[flows]]
cc = "{algo}"

[[flows]]
cc = "reno"
start_s = 5

[profiles.paper]
sweep = { rate_mbit = [10, 250], rtt_ms = [22, 42, 82] }
duration_s = 600
repeat = 5

[profiles.ci]
sweep = { rtt_ms = [22, 42, 82] }
duration_s = 40
"#;

    /// Parses `GOOD` with `from` replaced by `to`, expecting an error about `field` whose
    /// message contains every `hint`.
    fn rejects(from: &str, to: &str, field: &str, hints: &[&str]) {
        assert!(GOOD.contains(from), "{from}");
        let text = GOOD.replacen(from, to, 1);
        let e = Scenario::parse(&text, Path::new("/tmp/cases/bad.toml")).expect_err(to);
        let shown = e.to_string();
        assert!(shown.starts_with("/tmp/cases/bad.toml: "), "{shown}");
        assert_eq!(e.field(), Some(field), "{shown}");
        for h in hints {
            assert!(shown.contains(h), "`{h}` not in: {shown}");
        }
    }

    #[test]
    fn the_error_test_template_is_itself_valid() {
        let s = Scenario::parse(GOOD, Path::new("good.toml")).unwrap();
        assert_eq!(s.expand(Profile::Paper, 1).unwrap().len(), 6);
        assert_eq!(s.expand(Profile::Ci, 1).unwrap().len(), 3);
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
    fn a_buffer_below_one_packet_after_the_floor_is_rejected() {
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.001\nbuffer_floor_pkts = 0",
            "defaults.buffer_bdp",
            &["at least 1 packet", "buffer_floor_pkts = 0"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_pkts = 0\nbuffer_floor_pkts = 0",
            "defaults.buffer_pkts",
            &["at least 1 packet"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = -0.2",
            "defaults.buffer_bdp",
            &["≥ 0"],
        );
    }

    #[test]
    fn a_zero_rtt_adds_no_delay_and_needs_no_netem() {
        let text = GOOD.replacen(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rtt_ms = [0, 42] }",
            1,
        );
        let sc = Scenario::parse(&text, Path::new("/tmp/cases/zero.toml")).unwrap();
        let points = sc.expand(Profile::Ci, 1).unwrap();
        let zero = points
            .iter()
            .find(|p| p.rtt_ms == 0.0)
            .expect("a 0-ms point");
        assert!(zero.flows.iter().all(|f| f.rtt_ms == 0.0));
        assert!(!crate::runner::path_for(zero).needs_netem());
        let other = points
            .iter()
            .find(|p| p.rtt_ms == 42.0)
            .expect("a 42-ms point");
        assert!(crate::runner::path_for(other).needs_netem());
    }

    #[test]
    fn negative_delays_rates_and_durations_are_rejected() {
        rejects(
            "rate_mbit = 10\n",
            "rate_mbit = -10\n",
            "defaults.rate_mbit",
            &["> 0"],
        );
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rtt_ms = [22, -42, 82] }",
            "profiles.ci.sweep.rtt_ms[1]",
            &["≥ 0", "0: no added delay"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = -40",
            "profiles.ci.duration_s",
            &["> 0"],
        );
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\nrtt_ms = -5\n",
            "flows[0].rtt_ms",
            &["≥ 0", "0: no added delay"],
        );
        rejects("start_s = 5", "start_s = -5", "flows[1].start_s", &["≥ 0"]);
    }

    #[test]
    fn loss_model_is_random_unless_periodic_is_asked_for() {
        let v1 = find("native-comparison").unwrap();
        let pts = v1.expand(Profile::Ci, 1).unwrap();
        let lossy: Vec<_> = pts.iter().filter(|p| p.loss > 0.0).collect();
        assert_eq!(lossy.len(), 1);
        assert_eq!(lossy[0].loss_model, LossModel::Periodic);
        let t3 = find("t3.3").unwrap();
        assert!(t3
            .expand(Profile::Ci, 1)
            .unwrap()
            .iter()
            .all(|p| p.loss_model == LossModel::Random));
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nloss_model = \"bursty\"",
            "defaults.loss_model",
            &["random", "periodic"],
        );
    }

    #[test]
    fn loss_outside_zero_to_one_is_rejected() {
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nloss = 1.0",
            "defaults.loss",
            &["[0, 1)"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = 40\nloss = -0.01",
            "profiles.ci.loss",
            &["[0, 1)"],
        );
    }

    #[test]
    fn a_ci_profile_above_50_mbit_is_rejected() {
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rate_mbit = [10, 100] }",
            "profiles.ci.sweep.rate_mbit[1]",
            &["100 Mbit/s", "cap of 50"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = 40\nrate_mbit = 51",
            "profiles.ci.rate_mbit",
            &["cap of 50"],
        );
        rejects(
            "rate_mbit = 10\n",
            "rate_mbit = 100\n",
            "defaults.rate_mbit",
            &["inherited by profiles.ci", "cap of 50"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = 40\nreverse_rate_mbit = 60",
            "profiles.ci.reverse_rate_mbit",
            &["cap of 50"],
        );
    }

    #[test]
    fn a_flow_starting_after_its_stop_is_rejected() {
        rejects(
            "start_s = 5",
            "start_s = 50",
            "flows[1].start_s",
            &["not before its stop at 40", "profile ci"],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\nstop_s = 3",
            "flows[1].start_s",
            &["start_s must be < stop_s"],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\nstop_s = 700",
            "flows[1].stop_s",
            &["after the end of the run"],
        );
        rejects(
            "start_s = 5",
            "start_s = { uniform = [5, 45] }",
            "flows[1].start_s",
            &["45"],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\ncount = 3\nstart_step_s = 20",
            "flows[1].start_s",
            &["45"],
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

    #[test]
    fn a_count_below_one_is_rejected() {
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\ncount = 0\n",
            "flows[0].count",
            &["≥ 1"],
        );
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\ncount = 1.5\n",
            "flows[0].count",
            &["whole number"],
        );
    }

    #[test]
    fn empty_sweep_lists_are_rejected() {
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rtt_ms = [] }",
            "profiles.ci.sweep.rtt_ms",
            &["empty list"],
        );
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = []",
            "profiles.ci.sweep",
            &["empty array"],
        );
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
            "name = \"Bad Input\"",
            "name",
            &["lowercase"],
        );
    }
}
