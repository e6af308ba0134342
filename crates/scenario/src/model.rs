//! The scenario language's vocabulary, which every other part of this crate builds on: the
//! profiles, the parameter and metric names, the run point a scenario expands into
//! ([`RunPoint`], [`FlowPlan`], [`CcRef`]) and the BDP and buffer arithmetic of
//! `benchmarks.md` §0.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use cctl_netem::chain::HopPlan;
pub use cctl_netem::testbed::LossModel;

use crate::schedule::{Step, TraceUse};
use cctl_netem::aqm::Aqm;

/// Highest bottleneck (and reverse-path) capacity a `ci` profile may use, in Mbit/s: the CI
/// VM reaches about 50 Mbit/s under emulation (`benchmarks.md` §7.4, C_ci = min(C, 50)).
pub const CI_MAX_RATE_MBIT: f64 = 50.0;

/// Highest capacity any profile may use, in Mbit/s (10 Gbit/s): well above what the testbed
/// reaches (`cctl bench perf`'s host ceiling is a few Gbit/s of veth and tbf), so a larger
/// value is a slip of units (kbit/s for Mbit/s) rather than a test.
pub const MAX_RATE_MBIT: f64 = 10_000.0;

/// Default \[CHOICE\] floor of the buffer, in packets (`benchmarks.md` T0.0).
pub const DEFAULT_BUFFER_FLOOR_PKTS: u32 = 2;

/// Metric names a scenario may report: the families M1 to M17
/// ([`cctl_metrics::names::FAMILIES`]).
pub const METRICS: &[&str] = &cctl_metrics::names::FAMILY_IDS;

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
/// and 1-σ ellipse per algorithm; `delay`: per run, each flow's one-way delay and each
/// bottleneck's sojourn time over time and as CDFs (the per-packet delay taps).
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
    "delay",
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
pub(crate) const INTEGER_PARAMS: &[&str] = &["buffer_pkts", "buffer_floor_pkts", "web_sessions"];

/// The three ways to give the buffer; exactly one applies to a run.
pub(crate) const BUFFER_KEYS: &[&str] = &["buffer_bdp", "buffer_pkts", "buffer_ms"];

/// Which set of values of a scenario to run (`benchmarks.md` §7.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
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

/// Keys of a layer that are not numeric parameters.
pub(crate) fn is_setting(key: &str) -> bool {
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
/// Packet size the BDP is counted in, in bytes (1500-byte IP packets, `benchmarks.md` §0).
pub const PACKET_BYTES: f64 = 1500.0;

/// Most flow plans one run point may expand into (guards against runaway on/off sources).
pub const MAX_FLOWS_PER_POINT: usize = 10_000;

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
    /// TCP (default; also in files written before flows had a kind) or constant-bit-rate UDP.
    /// Left out of JSON when TCP, so older results read and write back unchanged.
    #[serde(default, skip_serializing_if = "crate::traffic::FlowKind::is_tcp")]
    pub kind: crate::traffic::FlowKind,
    /// Which way its data goes (TCP only; forward in files written before, and left out
    /// of JSON when forward).
    #[serde(default, skip_serializing_if = "crate::traffic::Direction::is_forward")]
    pub direction: crate::traffic::Direction,
    /// Rate of a `udp-cbr` flow, in Mbit/s of IPv4 packets; `None` for TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_mbit: Option<f64>,
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
    /// The chain of bottlenecks of a scenario with `[topology]` (each flow's RTT is then
    /// the sum over its path); `None`: the dumbbell of `rate_mbit` and `buffer_pkts`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<super::TopologyPlan>,
    /// Changes of the bottleneck rate (Mbit/s) during the run, as steps: from
    /// `rate_schedule` (ramps as steps) or the binned `rate_trace`; empty: constant.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_schedule: Vec<Step>,
    /// Changes of the RTT added on every access link (ms) during the run, as steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delay_schedule: Vec<Step>,
    /// The trace `rate_schedule` was binned from, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_trace: Option<TraceUse>,
    /// tbf bucket at the bottleneck (`tbf_burst_ms`), in ms of the rate; `None`: the
    /// testbed's default (1 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tbf_burst_ms: Option<f64>,
    /// The bottleneck's queue discipline and ECN (drop-tail pfifo without ECN if the
    /// scenario says nothing; results written before it existed read as that).
    #[serde(default)]
    pub aqm: Aqm,
    /// Swept string settings of this point (e.g. `qdisc`), by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    /// Latency probes during the run, in `[[probes]]` order (none in files written before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<crate::traffic::ProbePlan>,
}

/// Whether the congestion-control name `name` is the kernel's dctcp (also `native:dctcp`).
pub fn is_dctcp(name: &str) -> bool {
    name.strip_prefix("native:").unwrap_or(name) == "dctcp"
}

/// Reads a number that JSON wrote as `null` because it was infinite (serde_json writes
/// non-finite numbers as `null`).
fn null_as_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

impl RunPoint {
    /// A short label of the swept values, e.g. `rate_mbit=10,rtt_ms=42` (`base` if none).
    pub fn label(&self) -> String {
        if self.vars.is_empty() && self.settings.is_empty() {
            return "base".to_string();
        }
        self.vars
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .chain(self.settings.iter().map(|(k, v)| format!("{k}={v}")))
            .collect::<Vec<_>>()
            .join(",")
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

/// Where one flow runs on the chain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowPath {
    /// The first bottleneck it crosses (1-based): its sender is attached before it.
    pub first: usize,
    /// The last bottleneck it crosses (1-based): its receiver is attached after it.
    pub last: usize,
    /// Its base RTT, the sum of the `rtt_ms` of hops `first..=last`, in ms.
    pub rtt_ms: f64,
}

/// A point's chain: its hops, and the path of each of its flows (same order as
/// [`super::RunPoint::flows`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TopologyPlan {
    /// The bottlenecks, hop 1 first.
    pub hops: Vec<HopPlan>,
    /// One per flow of the point.
    pub paths: Vec<FlowPath>,
}

impl TopologyPlan {
    /// The flows (indices into the point's flows) that cross hop `k` (1-based).
    pub fn flows_across(&self, k: usize) -> Vec<usize> {
        (0..self.paths.len())
            .filter(|&i| self.paths[i].first <= k && k <= self.paths[i].last)
            .collect()
    }
}
