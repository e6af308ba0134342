//! The summary of a results directory: per-run metrics (M1–M16 of benchmarks.md §1), their
//! mean ± standard error over repetitions, and the markdown and terminal tables of them.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::record::{Metadata, RunRecord};
use cctl_metrics::{self as metrics, FlowSeries, MetricParams};

/// Named scalar metrics of one run, e.g. `"M3 R_minmax"` → 0.93. Units are in the names.
pub type MetricMap = BTreeMap<String, f64>;

/// Metric values of one run, plus what could not be computed (`"M5 A (s)"` not converged).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunMetrics {
    /// Scenario point.
    pub point: usize,
    /// Algorithm under test.
    pub algo: String,
    /// Repetition.
    pub rep: u32,
    /// Values.
    pub values: MetricMap,
    /// Metrics that were computed but had no value (M5 "not converged").
    pub nc: Vec<String>,
    /// The run's seed (`None`: not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The run's result digest (`run.json`'s, [`crate::digest`]; `None`: not recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Summary values of a run's bottleneck discipline, named with their units:
/// `bottleneck drops (pkts)` and `bottleneck ECN marks (pkts)` (the qdisc's counters at the
/// end of the run), and, where the qdisc reports a delay, `M13 qdisc-reported delay (ms)`
/// (mean of the samples: PIE's `delay`, cake's `avg_delay_us`) and `M13 qdisc-reported peak
/// delay (ms)` (cake's `peak_delay_us`, largest sample). Also `M13 mean qdelay all flows (ms)`,
/// the mean of the per-flow srtt − min RTT means.
fn bottleneck_metrics(r: &RunRecord) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    if let Some(last) = r.aqm.last() {
        out.push(("bottleneck drops (pkts)".into(), last.stats.drops as f64));
        out.push((
            "bottleneck ECN marks (pkts)".into(),
            last.stats.ecn_marks as f64,
        ));
    }
    let delays: Vec<f64> = r.aqm.iter().filter_map(|a| a.stats.delay_us).collect();
    if !delays.is_empty() {
        let mean = delays.iter().sum::<f64>() / delays.len() as f64;
        out.push(("M13 qdisc-reported delay (ms)".into(), mean / 1e3));
    }
    if let Some(peak) = r
        .aqm
        .iter()
        .filter_map(|a| a.stats.peak_delay_us)
        .reduce(f64::max)
    {
        out.push(("M13 qdisc-reported peak delay (ms)".into(), peak / 1e3));
    }
    let end = r.spec.duration_s;
    let per_flow: Vec<f64> = r
        .series
        .iter()
        .filter_map(|f| metrics::queueing_delay(f, 0.0, end))
        .map(|q| q.mean_s * 1e3)
        .collect();
    if !per_flow.is_empty() {
        out.push((
            "M13 mean qdelay all flows (ms)".into(),
            per_flow.iter().sum::<f64>() / per_flow.len() as f64,
        ));
    }
    out
}

/// Computes the per-run metrics of one record with the spec's [CHOICE] parameters.
pub fn run_metrics(r: &RunRecord, p: &MetricParams) -> RunMetrics {
    let mut v = MetricMap::new();
    let mut nc = Vec::new();
    let end = r.spec.duration_s;
    per_flow(&mut v, &r.series, end, p);
    between_flows(&mut v, &mut nc, &r.series, end, p);
    composition(&mut v, &r.series, p);
    bottleneck(&mut v, r, end);
    traffic(&mut v, r);
    host_and_hops(&mut v, r, end);
    RunMetrics {
        point: r.point,
        algo: r.algo.clone(),
        rep: r.rep,
        values: v,
        nc,
        seed: r.seed,
        digest: r.digest.clone(),
    }
}

/// Each flow's own: M1 (whole run, steady state), M13 queueing delay, M16 congestion
/// epoch, backoffs, min RTT over the base RTT, M15 completion.
fn per_flow(v: &mut MetricMap, flows: &[FlowSeries], end: f64, p: &MetricParams) {
    for f in flows {
        let tp = metrics::flow_throughput(f, end, &p.steady_state);
        if let Some(x) = tp.whole_run_bps {
            v.insert(format!("M1 flow{} (Mbit/s)", f.id), x / 1e6);
        }
        if let Some(x) = tp.steady_state_bps {
            v.insert(format!("M1 flow{} steady (Mbit/s)", f.id), x / 1e6);
        }
        if let Some(q) = metrics::queueing_delay(f, 0.0, end) {
            v.insert(format!("M13 flow{} mean qdelay (ms)", f.id), q.mean_s * 1e3);
        }
        if let Some(e) = metrics::mean_congestion_epoch_s(f) {
            v.insert(format!("M16 flow{} mean epoch (s)", f.id), e);
        }
        v.insert(format!("backoffs flow{}", f.id), f.backoffs.len() as f64);
        // The path as built: the smallest RTT the flow's sender measured over its
        // configured base RTT (≥ 1; above by a packet's serialisation at the bottleneck).
        let min_rtt_us = f
            .points
            .iter()
            .map(|p| p.min_rtt_us)
            .filter(|&m| m > 0)
            .min();
        if let (Some(m), true) = (min_rtt_us, f.base_rtt_s > 0.0) {
            v.insert(
                format!("flow{} min RTT / base RTT", f.id),
                f64::from(m) / (f.base_rtt_s * 1e6),
            );
        }
        if let Some(c) = f.completion_s {
            v.insert(format!("M15 flow{} completion (s)", f.id), c);
        }
    }
}

/// Between flows 1 and 2: M3 ratios over the window both are active in (the headline;
/// [`metrics::shared_window_s`]), over each flow's whole life (`whole run`, the old
/// reading, in which flow 1's time alone counts) and over the last 50 % of the run; M4
/// Jain over every flow, shared window and whole run; M5 convergence times (a metric that
/// never converged is named in `nc`).
fn between_flows(
    v: &mut MetricMap,
    nc: &mut Vec<String>,
    flows: &[FlowSeries],
    end: f64,
    p: &MetricParams,
) {
    if flows.len() >= 2 {
        let whole =
            |f: &FlowSeries| metrics::flow_throughput(f, end, &p.steady_state).whole_run_bps;
        if let Some([u1, u2]) = metrics::shared_window_throughputs_bps(&[&flows[0], &flows[1]])
            .and_then(|u| <[f64; 2]>::try_from(u).ok())
        {
            ratios(v, "", u1, u2, &flows[..2]);
        }
        if let (Some(u1), Some(u2)) = (whole(&flows[0]), whole(&flows[1])) {
            ratios(v, " whole run", u1, u2, &flows[..2]);
        }
        // [P0] T0.1: the ratio also over the last 50 % of the run.
        let half = |f: &FlowSeries| metrics::avg_throughput_bps(f, end / 2.0, end);
        if let (Some(u1), Some(u2)) = (half(&flows[0]), half(&flows[1])) {
            if let Some(x) = metrics::throughput_ratio(u1, u2).minmax {
                v.insert("M3 R_minmax last 50 %".into(), x);
            }
        }
        let all: Vec<&FlowSeries> = flows.iter().collect();
        if let Some(j) = metrics::shared_window_throughputs_bps(&all)
            .and_then(|shares| metrics::jain_index(&shares))
        {
            v.insert("M4 Jain".into(), j);
        }
        let shares: Vec<f64> = flows.iter().filter_map(whole).collect();
        if let Some(j) = metrics::jain_index(&shares) {
            v.insert("M4 Jain whole run".into(), j);
        }
        if flows[1].start_s > flows[0].start_s + 1.0 {
            let c =
                metrics::convergence_time(&flows[1], &flows[0], end, &p.convergence, &p.short_term);
            for (name, x) in [
                ("M5 A (s)", c.a_s),
                ("M5 B (s)", c.b_s),
                ("M5 C (s)", c.c_s),
            ] {
                match x {
                    Some(x) => {
                        v.insert(name.into(), x);
                    }
                    None => nc.push(name.into()),
                }
            }
        }
    }
}

/// M3 `R_minmax`, `flow2/flow1` and `R_rtt` of flows 1 and 2 with throughputs `u1`, `u2`
/// (bit/s), under names ending in `suffix` (`""`: the shared window; `" whole run"`).
fn ratios(v: &mut MetricMap, suffix: &str, u1: f64, u2: f64, flows: &[FlowSeries]) {
    let ratio = metrics::throughput_ratio(u1, u2);
    if let Some(x) = ratio.minmax {
        v.insert(format!("M3 R_minmax{suffix}"), x);
    }
    if let Some(x) = ratio.signed_2_over_1 {
        v.insert(format!("M3 flow2/flow1{suffix}"), x);
    }
    if let Some(x) = metrics::r_rtt(u1, flows[0].base_rtt_s, u2, flows[1].base_rtt_s) {
        v.insert(format!("M3 R_rtt{suffix}"), x);
    }
}

/// M6 R1 and M7 stability over the longest interval in which the set of flows does not
/// change.
fn composition(v: &mut MetricMap, flows: &[FlowSeries], p: &MetricParams) {
    if let Some(iv) = metrics::constant_composition_intervals(flows)
        .into_iter()
        .filter(|iv| !iv.flow_ids.is_empty())
        .max_by(|a, b| (a.t1_s - a.t0_s).total_cmp(&(b.t1_s - b.t0_s)))
    {
        let sel: Vec<&FlowSeries> = flows
            .iter()
            .filter(|f| iv.flow_ids.contains(&f.id))
            .collect();
        let s = metrics::interval_summary(&sel, iv.t0_s, iv.t1_s, p.period_s, p.r1_tolerance);
        if let Some(x) = s.r1_s {
            v.insert("M6 R1 (s)".into(), x);
        }
        if let Some(x) = s.stability {
            v.insert("M7 S".into(), x);
        }
    }
}

/// The forward bottleneck's: M8 goodput and utilisation, M9 drop and retransmission rates,
/// random and unintended drops.
fn bottleneck(v: &mut MetricMap, r: &RunRecord, end: f64) {
    let capacity = r.spec.rate_mbit * 1e6;
    let flows = &r.series;
    // M8 is the forward bottleneck's: reverse flows (`direction = "reverse"`) cross the
    // reverse path, not it.
    let forward: Vec<FlowSeries> = flows
        .iter()
        .filter(|f| {
            r.spec
                .flows
                .get(f.id.wrapping_sub(1))
                .is_none_or(|p| p.direction == cctl_scenario::Direction::Forward)
        })
        .cloned()
        .collect();
    let eff = metrics::efficiency(&forward, &r.queue, 0.0, end, capacity);
    if let Some(x) = eff.goodput_bps {
        v.insert("M8 goodput (Mbit/s)".into(), x / 1e6);
    }
    if let Some(x) = eff.goodput_utilisation {
        v.insert("M8 utilisation (goodput)".into(), x);
    }
    if let Some(x) = eff.wire_utilisation {
        v.insert("M8 utilisation (wire)".into(), x);
    }
    if let Some(d) = metrics::bottleneck_drop_rate(&r.queue, 0.0, end) {
        v.insert("M9 drop rate".into(), d.rate);
    }
    if let Some(x) = metrics::retransmission_ratio_pooled(flows.iter()) {
        v.insert("M9 retransmission ratio".into(), x);
    }
    v.insert("M9 random drops (pkts)".into(), r.random_drops as f64);
    if let Some(d) = &r.drops {
        v.insert(
            "unintended drops (pkts)".into(),
            d.unintended_total() as f64,
        );
    }
}

/// One-way delays (the taps), latency under load (each `[[probes]]` table), the udp-cbr
/// streams and the web sessions.
fn traffic(v: &mut MetricMap, r: &RunRecord) {
    if let Some(d) = &r.delays {
        v.extend(d.metrics());
    }
    // Latency under load: each [[probes]] table's delays and loss; each udp-cbr stream.
    for (k, p) in r.probes.iter().enumerate() {
        let s = p.summary();
        let n = k + 1;
        if let Some(d) = s.rtt {
            v.insert(format!("probe{n} RTT p50 (ms)"), d.p50_us / 1e3);
            v.insert(format!("probe{n} RTT p95 (ms)"), d.p95_us / 1e3);
            v.insert(format!("probe{n} RTT p99 (ms)"), d.p99_us / 1e3);
        }
        if let Some(d) = s.fwd {
            v.insert(format!("probe{n} one-way delay p50 (ms)"), d.p50_us / 1e3);
            v.insert(format!("probe{n} one-way delay p99 (ms)"), d.p99_us / 1e3);
        }
        if let Some(d) = s.rev {
            v.insert(
                format!("probe{n} reverse one-way delay p50 (ms)"),
                d.p50_us / 1e3,
            );
        }
        v.insert(format!("probe{n} loss"), s.loss);
    }
    for u in &r.udp {
        v.insert(
            format!("udp flow{} received (Mbit/s)", u.id),
            u.receive_rate_mbit(),
        );
        let lost = u.lost_packets() as f64 / (u.sent_packets.max(1)) as f64;
        v.insert(format!("udp flow{} loss", u.id), lost);
    }
    if let Some(w) = &r.web {
        v.insert("web load forward (Mbit/s)".into(), w.forward_bps() / 1e6);
        v.insert("web pages".into(), w.pages as f64);
    }
}

/// The host's CPU, each `[topology]` hop, M12 queue length, M14 cwnd at backoff, the
/// bottleneck discipline's counters.
fn host_and_hops(v: &mut MetricMap, r: &RunRecord, end: f64) {
    let flows = &r.series;
    if r.cpu_busy.is_finite() {
        v.insert("CPU busy (%)".into(), 100.0 * r.cpu_busy);
    }
    // A `[topology]` chain: what each bottleneck's tbf sent (L2, over the run) and dropped.
    for h in &r.hops {
        let sent = h.sent_bytes as f64 * 8.0 / end / 1e6;
        v.insert(format!("hop{} sent (Mbit/s)", h.hop), sent);
        v.insert(format!("hop{} drops (pkts)", h.hop), h.drops as f64);
    }
    if let Some(q) =
        metrics::normalised_queue_length(&r.queue, 0.0, end, f64::from(r.spec.buffer_pkts))
    {
        v.insert("M12 Q_norm".into(), q);
    }
    if let Some(b) = metrics::cwnd_at_backoff(flows.iter(), 10) {
        if let Some(c) = b.cov {
            v.insert("M14 cwnd-at-backoff CoV".into(), c);
        }
        v.insert("M14 mean cwnd at backoff (pkts)".into(), b.mean_pkts);
    }
    for (name, x) in bottleneck_metrics(r) {
        v.insert(name, x);
    }
}

/// One metric over the repetitions of one (point, algorithm).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Aggregate {
    /// Arithmetic mean (NaN, `null` in JSON, when no repetition had a value).
    #[serde(deserialize_with = "nan_if_null")]
    pub mean: f64,
    /// Standard error of the mean (0 for one repetition).
    pub stderr: f64,
    /// Per-repetition values.
    pub values: Vec<f64>,
    /// Repetitions where it was "not converged" (M5).
    pub nc: usize,
}

/// One row of the summary: a point with one algorithm.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SummaryRow {
    /// Scenario point.
    pub point: usize,
    /// Swept values.
    pub vars: BTreeMap<String, f64>,
    /// Buffer, packets.
    pub buffer_pkts: u32,
    /// Capacity, Mbit/s.
    pub rate_mbit: f64,
    /// Random loss probability.
    pub loss: f64,
    /// Swept string settings of the point (e.g. `qdisc`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub settings: BTreeMap<String, String>,
    /// Algorithm.
    pub algo: String,
    /// Repetitions.
    pub n: usize,
    /// Metric → aggregate.
    pub metrics: BTreeMap<String, Aggregate>,
}

/// The whole summary (`summary.json`); read back, its `expectations` are left empty (judge
/// them again with [`crate::expect::evaluate`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Summary {
    /// Run metadata.
    pub metadata: Metadata,
    /// The [CHOICE] parameters the metrics used.
    pub params: MetricParams,
    /// Rows, by point then algorithm.
    pub rows: Vec<SummaryRow>,
    /// Per-run values.
    pub runs: Vec<RunMetrics>,
    /// Runs that dropped packets where the scenario did not ask for it (run.json's
    /// `invalid`); absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub invalid_runs: Vec<InvalidRun>,
    /// The scenario's expectations judged ([`crate::expect`]); absent without any.
    #[serde(skip_serializing_if = "Vec::is_empty", skip_deserializing)]
    pub expectations: Vec<crate::expect::ExpectOutcome>,
}

impl Summary {
    /// Each row's (point, algorithm) and metric means, for [`crate::expect::evaluate`].
    pub fn row_means(&self) -> Vec<crate::expect::RowMeans<'_>> {
        self.rows
            .iter()
            .map(|r| crate::expect::RowMeans {
                point: r.point,
                algo: &r.algo,
                means: r
                    .metrics
                    .iter()
                    .map(|(k, a)| (k.as_str(), a.mean))
                    .collect(),
            })
            .collect()
    }
}

/// A run marked invalid: where it dropped packets the scenario did not ask for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct InvalidRun {
    /// Algorithm.
    pub algo: String,
    /// Scenario point.
    pub point: usize,
    /// Repetition.
    pub rep: u32,
    /// Each place with its drops (`qdisc <ns>/<dev> <kind>: N`, ...).
    pub places: Vec<String>,
}

impl InvalidRun {
    /// `INVALID reno p0-r0: qdisc ...: 12; device ...: 3`.
    pub fn line(&self) -> String {
        format!(
            "INVALID {} p{}-r{}: drops the scenario did not ask for: {}",
            self.algo,
            self.point,
            self.rep,
            self.places.join("; ")
        )
    }
}

/// Goodput of the fixed (named, e.g. Reno) flows of a run, bit/s: G_R of M11.
fn named_flows_goodput(r: &RunRecord, p: &MetricParams) -> Option<f64> {
    let mut total = 0.0;
    let mut any = false;
    for f in &r.series {
        let Some(plan) = r.spec.flows.get(f.id.wrapping_sub(1)) else {
            continue;
        };
        if matches!(plan.cc, cctl_scenario::CcRef::Named(_)) {
            total +=
                metrics::flow_throughput(f, r.spec.duration_s, &p.steady_state).whole_run_bps?;
            any = true;
        }
    }
    any.then_some(total)
}

/// M11: where the runs include Reno as the algorithm under test, each other algorithm's
/// fair-to-Reno factor FtR = G_R(n Reno + 1 Reno) / G_R(n Reno + 1 X) at the same point.
fn add_fair_to_reno(rows: &mut [SummaryRow], records: &[RunRecord], p: &MetricParams) {
    let is_reno = |a: &str| a == "reno" || a == "native:reno";
    let g = |point: usize, algo: &str| -> Vec<f64> {
        records
            .iter()
            .filter(|r| r.point == point && r.algo == algo)
            .filter_map(|r| named_flows_goodput(r, p))
            .collect()
    };
    let points: Vec<usize> = rows.iter().map(|r| r.point).collect();
    for point in points {
        let Some(reno) = rows
            .iter()
            .find(|r| r.point == point && is_reno(&r.algo))
            .map(|r| r.algo.clone())
        else {
            continue;
        };
        let Some((g_reno, _)) = metrics::mean_and_stderr(&g(point, &reno)) else {
            continue;
        };
        for row in rows.iter_mut().filter(|r| r.point == point) {
            let values: Vec<f64> = g(point, &row.algo)
                .into_iter()
                .filter_map(|gx| metrics::fair_to_reno(g_reno, gx))
                .collect();
            if let Some((mean, stderr)) = metrics::mean_and_stderr(&values) {
                row.metrics.insert(
                    "M11 FtR".into(),
                    Aggregate {
                        mean,
                        stderr,
                        values,
                        nc: 0,
                    },
                );
            }
        }
    }
}

/// Aggregates run metrics by (point, algorithm).
pub fn summarize(meta: &Metadata, records: &[RunRecord], p: &MetricParams) -> Summary {
    let runs: Vec<RunMetrics> = records.iter().map(|r| run_metrics(r, p)).collect();
    let mut rows: Vec<SummaryRow> = Vec::new();
    let mut keys: Vec<(usize, String)> =
        records.iter().map(|r| (r.point, r.algo.clone())).collect();
    keys.sort();
    keys.dedup();
    for (point, algo) in keys {
        let recs: Vec<&RunRecord> = records
            .iter()
            .filter(|r| r.point == point && r.algo == algo)
            .collect();
        let ms: Vec<&RunMetrics> = runs
            .iter()
            .filter(|m| m.point == point && m.algo == algo)
            .collect();
        let mut names: Vec<String> = ms.iter().flat_map(|m| m.values.keys().cloned()).collect();
        names.extend(ms.iter().flat_map(|m| m.nc.iter().cloned()));
        names.sort();
        names.dedup();
        let mut metrics_out = BTreeMap::new();
        for name in names {
            let values: Vec<f64> = ms
                .iter()
                .filter_map(|m| m.values.get(&name).copied())
                .collect();
            let nc = ms.iter().filter(|m| m.nc.contains(&name)).count();
            let (mean, stderr) = metrics::mean_and_stderr(&values).unwrap_or((f64::NAN, 0.0));
            metrics_out.insert(
                name,
                Aggregate {
                    mean,
                    stderr,
                    values,
                    nc,
                },
            );
        }
        let spec = &recs[0].spec;
        rows.push(SummaryRow {
            point,
            vars: spec.vars.clone(),
            buffer_pkts: spec.buffer_pkts,
            rate_mbit: spec.rate_mbit,
            loss: spec.loss,
            settings: spec.settings.clone(),
            algo,
            n: recs.len(),
            metrics: metrics_out,
        });
    }
    add_fair_to_reno(&mut rows, records, p);
    Summary {
        metadata: meta.clone(),
        params: *p,
        rows,
        runs,
        invalid_runs: records
            .iter()
            .filter(|r| !r.invalid.is_empty())
            .map(|r| InvalidRun {
                algo: r.algo.clone(),
                point: r.point,
                rep: r.rep,
                places: r.invalid.clone(),
            })
            .collect(),
        expectations: Vec::new(),
    }
}

/// A mean that JSON holds as `null` (serde_json writes NaN so) reads back as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

pub(crate) fn fmt_agg(a: &Aggregate) -> String {
    if a.values.is_empty() {
        return if a.nc > 0 { "NC".into() } else { "–".into() };
    }
    let prec = if a.mean.abs() >= 100.0 {
        1
    } else if a.mean.abs() >= 1.0 {
        2
    } else {
        3
    };
    let mut s = if a.values.len() > 1 {
        format!("{:.*} ± {:.*}", prec, a.mean, prec, a.stderr)
    } else {
        format!("{:.*}", prec, a.mean)
    };
    if a.nc > 0 {
        s += &format!(" ({} NC)", a.nc);
    }
    s
}

pub(crate) fn point_label(row: &SummaryRow) -> String {
    let mut parts: Vec<String> = row.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.extend(row.settings.iter().map(|(k, v)| format!("{k}={v}")));
    parts.push(format!("buf={}", row.buffer_pkts));
    parts.join(" ")
}

/// Which metric names a scenario's `metrics` list (M-ids) selects for the tables, in the
/// order the scenario lists them, then the always-shown throughput, utilisation and loss.
pub(crate) fn selected(names: &[String], wanted: &[String]) -> Vec<String> {
    let always = [
        "M1 flow",
        "M8 utilisation (goodput)",
        "M9 drop rate",
        "bottleneck",
        "backoffs",
        "web load",
        "CPU busy",
    ];
    let mut out: Vec<String> = Vec::new();
    let mut push = |n: &String| {
        if !n.contains("steady") && !out.contains(n) {
            out.push(n.clone());
        }
    };
    for w in wanted {
        for n in names.iter().filter(|n| n.starts_with(&format!("{w} "))) {
            push(n);
        }
    }
    for a in always {
        for n in names.iter().filter(|n| n.starts_with(a)) {
            push(n);
        }
    }
    out
}

/// Every metric name that occurs in the summary, sorted.
pub(crate) fn metric_names(s: &Summary) -> Vec<String> {
    let names: std::collections::BTreeSet<&String> =
        s.rows.iter().flat_map(|r| r.metrics.keys()).collect();
    names.into_iter().cloned().collect()
}

/// Renders `summary.md`: one table per metric, points as rows, algorithms as columns.
pub fn markdown(s: &Summary, title: &str, wanted: &[String]) -> String {
    let m = &s.metadata;
    let mut out = String::new();
    let _ = writeln!(out, "# {} ({}) — {}\n", m.scenario, m.id, title);
    let _ = writeln!(
        out,
        "profile `{}`, {} repetition(s), seed {}, kernel {}, clock {}, cctl {}; {} of {} runs done{}\n",
        m.profile,
        m.repeat,
        m.seed,
        m.kernel,
        m.clock.as_ref().map_or_else(
            || "real (not recorded)".to_string(),
            crate::record::ClockRecord::describe
        ),
        m.cctl_version,
        m.runs_done,
        m.runs_planned,
        if m.interrupted { " (interrupted)" } else { "" }
    );
    if m.profile == "ci" {
        let _ = writeln!(out, "> **ci profile**: scaled-down smoke test; never compare these numbers with the papers'.\n");
    }
    for r in &s.invalid_runs {
        let _ = writeln!(out, "> **{}**\n", r.line());
    }
    let algos: Vec<String> = m
        .algorithms
        .iter()
        .map(|a| {
            if a.params.is_empty() {
                format!("{} ({})", a.requested, a.cc_name)
            } else {
                format!("{} ({}, params {:?})", a.requested, a.cc_name, a.params)
            }
        })
        .collect();
    let _ = writeln!(out, "algorithms: {}\n", algos.join("; "));
    let _ = writeln!(
        out,
        "Values are mean ± standard error over repetitions; NC = not converged. Each metric's \
         formula: docs/reference/metrics.md, or `cctl bench metrics`.\n"
    );

    let mut algo_cols: Vec<String> = s.rows.iter().map(|r| r.algo.clone()).collect();
    algo_cols.sort();
    algo_cols.dedup();
    let mut points: Vec<usize> = s.rows.iter().map(|r| r.point).collect();
    points.sort();
    points.dedup();
    let names = metric_names(s);
    for name in selected(&names, wanted) {
        let _ = writeln!(out, "## {name}\n");
        if let Some(def) = metrics::names::definition(&name) {
            let _ = writeln!(out, "{} ({})\n", def.definition, def.unit);
        }
        let _ = writeln!(out, "| point | {} |", algo_cols.join(" | "));
        let _ = writeln!(
            out,
            "|---|{}|",
            algo_cols
                .iter()
                .map(|_| "---")
                .collect::<Vec<_>>()
                .join("|")
        );
        for p in &points {
            let label = s
                .rows
                .iter()
                .find(|r| r.point == *p)
                .map(point_label)
                .unwrap_or_default();
            let cells: Vec<String> = algo_cols
                .iter()
                .map(|a| {
                    s.rows
                        .iter()
                        .find(|r| r.point == *p && &r.algo == a)
                        .and_then(|r| r.metrics.get(&name))
                        .map(fmt_agg)
                        .unwrap_or_else(|| "–".into())
                })
                .collect();
            let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
        }
        let _ = writeln!(out);
    }
    runs_section(&mut out, s);
    out
}

/// `summary.md`'s last section: each run with its seed and result digest, and the build
/// that ran them, so that a reader re-checks a row with `cctl bench run` and `bench diff`.
fn runs_section(out: &mut String, s: &Summary) {
    if s.runs.iter().all(|r| r.digest.is_none()) {
        return;
    }
    let _ = writeln!(
        out,
        "## Runs
"
    );
    let qemu = s.metadata.clock.as_ref().and_then(|c| c.qemu.as_deref());
    let _ = writeln!(
        out,
        "Each run's result digest (`run.json`'s `digest`): the same request and seed on the same \
         cctl build ({}), guest kernel ({}) and QEMU ({}) give the same digest on the virtual \
         clock.\n",
        s.metadata.build.as_deref().unwrap_or("not recorded"),
        s.metadata.kernel,
        qemu.unwrap_or("none")
    );
    let _ = writeln!(out, "| point | algorithm | rep | seed | digest |");
    let _ = writeln!(out, "|---|---|---|---|---|");
    for r in &s.runs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | `{}` |",
            r.point,
            r.algo,
            r.rep,
            r.seed.map_or_else(|| "–".into(), |x| x.to_string()),
            r.digest.as_deref().unwrap_or("–")
        );
    }
    let _ = writeln!(out);
}

/// A compact table for the terminal: each point × algorithm with the scenario's headline
/// metrics.
pub fn terminal_table(s: &Summary, wanted: &[String]) -> String {
    let names = metric_names(s);
    let cols: Vec<String> = selected(&names, wanted).into_iter().take(7).collect();
    let mut out = String::new();
    if let Some(c) = &s.metadata.clock {
        let _ = writeln!(out, "clock: {}", c.describe());
    }
    let _ = write!(out, "{:<28} {:<8}", "point", "algo");
    for c in &cols {
        let _ = write!(out, " {:>18}", shorten(c, 18));
    }
    out.push('\n');
    for r in &s.rows {
        let _ = write!(
            out,
            "{:<28} {:<8}",
            shorten(&point_label(r), 28),
            shorten(&r.algo, 8)
        );
        for c in &cols {
            let cell = r.metrics.get(c).map(fmt_agg).unwrap_or_else(|| "–".into());
            let _ = write!(out, " {:>18}", shorten(&cell, 18));
        }
        out.push('\n');
    }
    out
}

fn shorten(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cctl_metrics::FlowPoint;

    /// A flow of `id` from `start_s` to `stop_s` with 1-s samples, at `rate(t)` bit/s.
    fn flow(id: usize, start_s: f64, stop_s: f64, rate: impl Fn(f64) -> f64) -> FlowSeries {
        let mut bytes = 0.0;
        let points = (start_s as u32..=stop_s as u32)
            .map(|t| {
                if f64::from(t) > start_s {
                    bytes += rate(f64::from(t) - 0.5) / 8.0;
                }
                FlowPoint {
                    t_s: f64::from(t),
                    bytes_acked: bytes as u64,
                    ..Default::default()
                }
            })
            .collect();
        FlowSeries {
            id,
            base_rtt_s: 0.042,
            start_s,
            stop_s,
            points,
            ..Default::default()
        }
    }

    /// T0.1's shape: flow 1 alone at 20 Mbit/s for 30 s, then both at 10 Mbit/s to 100 s.
    /// Over the shared window [30, 100] s the ratios are 1; over each flow's own life flow 1
    /// has 13 Mbit/s against 10, which the `whole run` names keep.
    #[test]
    fn ratios_between_flows_are_headlined_over_the_shared_window() {
        let f1 = flow(1, 0.0, 100.0, |t| if t < 30.0 { 20e6 } else { 10e6 });
        let f2 = flow(2, 30.0, 100.0, |_| 10e6);
        let (mut v, mut nc) = (MetricMap::new(), Vec::new());
        between_flows(&mut v, &mut nc, &[f1, f2], 100.0, &MetricParams::default());
        let near = |k: &str, want: f64| {
            let got = v[k];
            assert!((got - want).abs() < 1e-3, "{k}: {got}, want {want}");
        };
        near("M3 R_minmax", 1.0);
        near("M3 flow2/flow1", 1.0);
        near("M4 Jain", 1.0);
        near("M3 R_minmax whole run", 10.0 / 13.0);
        near("M3 flow2/flow1 whole run", 10.0 / 13.0);
        near("M4 Jain whole run", 23.0 * 23.0 / (2.0 * (169.0 + 100.0)));
        near("M3 R_minmax last 50 %", 1.0);
    }
}
