//! A calibration's figures, from the results directories of its `cctl bench run`s: pure over
//! the run records and summaries they hold.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use cctl_report::record::{read_records, RunRecord};
use cctl_report::summary::Summary;
use cctl_scenario::PACKET_BYTES;

use super::plan::{Planned, SCHEDULE};
use super::{mathis_bps, reno_utilisation, spread, CEILING_TOLERANCE, TBF_UTILISATION};

/// Payload of a full segment with TCP timestamps, in bytes (the MSS of Mathis et al.).
pub const MSS_BYTES: f64 = 1448.0;

/// One rate of the ceiling part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CeilingRow {
    /// Bottleneck rate, Mbit/s.
    pub rate_mbit: f64,
    /// Configured RTT, ms.
    pub rtt_ms: f64,
    /// Goodput over the rate in the steady window ([`steady_window`]), 0..1.
    pub utilisation: f64,
    /// Share of the guest's CPU time that was busy during the run (its own time on the
    /// virtual clock), 0..1.
    pub cpu_busy: f64,
    /// Host wall time per second of traffic, s/s ([`host_wall_s`]; NaN where unknown).
    pub wall_per_traffic_s: f64,
    /// The run's seconds of traffic (0 in reports written before it was recorded).
    #[serde(default)]
    pub traffic_s: f64,
    /// Utilisation within [`CEILING_TOLERANCE`] of [`TBF_UTILISATION`].
    pub passes: bool,
}

/// The path part: what the path did against what was asked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PathRows {
    /// `(configured RTT ms, configured loss, smallest min RTT the flow saw ms)`.
    pub rtt: Vec<(f64, f64, f64)>,
    /// `(configured rate Mbit/s, RTT ms, L2 rate tbf sent on in the steady window Mbit/s)`.
    pub rate: Vec<(f64, f64, f64)>,
    /// `(configured loss, achieved loss = netem drops / data segments sent, drops, segments)`.
    pub loss: Vec<(f64, f64, u64, u64)>,
    /// `(scheduled s, rate Mbit/s, completed − scheduled ms, rate tc read back Mbit/s)`.
    pub schedule: Vec<(f64, f64, f64, Option<f64>)>,
}

/// One loss rate of the Mathis part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MathisRow {
    /// Configured random loss probability.
    pub p: f64,
    /// Achieved loss probability (netem drops / data segments sent).
    pub p_achieved: f64,
    /// Mean smoothed RTT over the steady window, ms.
    pub rtt_ms: f64,
    /// Data segments per ACK the receiver sent (`b`).
    pub b: f64,
    /// Goodput in the steady window, Mbit/s.
    pub measured_mbit: f64,
    /// `MSS/RTT · sqrt(3/(2b))/sqrt(p)` with the achieved p, Mbit/s.
    pub model_mbit: f64,
    /// measured / model.
    pub ratio: f64,
    /// The model with b = 1, Mbit/s: Linux's Reno grows cwnd by the segments each ACK
    /// covers (`tcp_cong_avoid_ai` counts acked segments, RFC 3465's byte counting), so
    /// delayed ACKs do not slow its growth and the effective b is 1.
    #[serde(default)]
    pub model_b1_mbit: f64,
    /// measured / model with b = 1.
    #[serde(default)]
    pub ratio_b1: f64,
}

/// One buffer of the Reno-vs-buffer part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferRow {
    /// Buffer, in BDPs as configured.
    pub buffer_bdp: f64,
    /// Buffer, packets.
    pub buffer_pkts: u32,
    /// Goodput over the most the link carries as goodput (rate × 1448/1514), 0..1.
    pub utilisation: f64,
    /// [`reno_utilisation`] of the buffer.
    pub model: f64,
}

/// One metric over the repetitions of a point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpreadRow {
    /// Rate of the point, Mbit/s.
    pub rate_mbit: f64,
    /// The metric's summary name.
    pub metric: String,
    /// Per-repetition values.
    pub values: Vec<f64>,
    /// Mean.
    pub mean: f64,
    /// [`spread`]: (max − min) / |mean|.
    pub spread: f64,
}

/// One metric of a point on two sets of runs (idle vs loaded host, or this clock vs the other).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairRow {
    /// Rate of the point, Mbit/s.
    pub rate_mbit: f64,
    /// The metric's summary name.
    pub metric: String,
    /// Mean of the reference runs (idle host; this clock).
    pub a_mean: f64,
    /// Spread of the reference runs.
    pub a_spread: f64,
    /// Mean of the other runs (loaded host; the other clock).
    pub b_mean: f64,
    /// Spread of the other runs.
    pub b_spread: f64,
    /// (b − a) / |a|.
    pub change: f64,
    /// |change| within the larger of the two spreads.
    pub within_spread: bool,
}

/// Everything measured, part by part; a part not run is empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Part 1, by RTT then rate.
    pub ceiling: Vec<CeilingRow>,
    /// Part 1: the ceiling per RTT (`None`: even the lowest rate failed).
    pub ceiling_mbit: BTreeMap<String, Option<f64>>,
    /// Part 2.
    pub path: PathRows,
    /// Part 3, Mathis.
    pub mathis: Vec<MathisRow>,
    /// Part 3, Reno against buffer size.
    pub buffer: Vec<BufferRow>,
    /// Part 4: each metric's spread over the repetitions.
    pub repeat: Vec<SpreadRow>,
    /// Part 4: whether the repetitions were identical (same bytes per flow and drops).
    pub identical: Option<bool>,
    /// Part 5: idle (part 4's runs) against loaded.
    pub load: Vec<PairRow>,
    /// Part 6: this clock against the other.
    pub agree: Vec<PairRow>,
}

/// `[from, to]` of a run, in s after t0, over which steady figures are taken: from a third
/// of the run (slow start and its overshoot left out) to half a second before its end.
pub fn steady_window(duration_s: f64) -> (f64, f64) {
    (
        duration_s / 3.0,
        (duration_s - 0.5).max(duration_s / 3.0 + 0.1),
    )
}

/// Goodput of flow series `s` in `[from, to]`, bit/s (acked bytes between the first sample
/// at or after `from` and the last at or before `to`); `None` with fewer than two samples.
fn goodput_bps(s: &cctl_metrics::FlowSeries, from: f64, to: f64) -> Option<f64> {
    let a = s.points.iter().find(|p| p.t_s >= from)?;
    let b = s.points.iter().rev().find(|p| p.t_s <= to)?;
    (b.t_s > a.t_s)
        .then(|| (b.bytes_acked.saturating_sub(a.bytes_acked)) as f64 * 8.0 / (b.t_s - a.t_s))
}

/// Goodput of every flow of `r` together in its steady window, bit/s.
fn run_goodput_bps(r: &RunRecord) -> f64 {
    let (from, to) = steady_window(r.spec.duration_s);
    r.series
        .iter()
        .filter_map(|s| goodput_bps(s, from, to))
        .sum()
}

/// L2 rate the bottleneck sent on in the steady window, bit/s (its queue samples).
fn tbf_bps(r: &RunRecord) -> Option<f64> {
    let (from, to) = steady_window(r.spec.duration_s);
    let a = r.queue.iter().find(|q| q.t_s >= from)?;
    let b = r.queue.iter().rev().find(|q| q.t_s <= to)?;
    (b.t_s > a.t_s)
        .then(|| (b.sent_bytes.saturating_sub(a.sent_bytes)) as f64 * 8.0 / (b.t_s - a.t_s))
}

/// Mean srtt of every flow's samples in the steady window, s.
fn mean_srtt_s(r: &RunRecord) -> f64 {
    let (from, to) = steady_window(r.spec.duration_s);
    let v: Vec<f64> = r
        .series
        .iter()
        .flat_map(|s| s.points.iter())
        .filter(|p| p.t_s >= from && p.t_s <= to && p.srtt_us > 0)
        .map(|p| f64::from(p.srtt_us) / 1e6)
        .collect();
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Data segments the run's senders sent and ACKs they received (SYN-ACKs left out).
fn segments(r: &RunRecord) -> (u64, u64) {
    r.flows
        .iter()
        .filter_map(|f| f.segments)
        .fold((0, 0), |(d, a), s| {
            (
                d + u64::from(s.data_segs_out),
                a + u64::from(s.segs_in.saturating_sub(1)),
            )
        })
}

fn rtt_of(r: &RunRecord) -> f64 {
    r.spec.flows.first().map_or(0.0, |f| f.rtt_ms)
}

fn smallest_min_rtt_ms(r: &RunRecord) -> f64 {
    r.series
        .iter()
        .flat_map(|s| s.points.iter())
        .map(|p| p.min_rtt_us)
        .filter(|&v| v > 0)
        .min()
        .map_or(0.0, |v| f64::from(v) / 1e3)
}

/// Per-repetition values of every metric of the runs at each rate: rate → metric → values.
fn metric_values(s: &Summary, records: &[RunRecord]) -> BTreeMap<u64, BTreeMap<String, Vec<f64>>> {
    let mut out: BTreeMap<u64, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for run in &s.runs {
        let Some(r) = records
            .iter()
            .find(|r| r.point == run.point && r.rep == run.rep)
        else {
            continue;
        };
        let by = out.entry(r.spec.rate_mbit.to_bits()).or_default();
        for (k, v) in &run.values {
            if v.is_finite() {
                by.entry(k.clone()).or_default().push(*v);
            }
        }
    }
    out
}

fn spreads(s: &Summary, records: &[RunRecord]) -> Vec<SpreadRow> {
    let mut rows = Vec::new();
    for (rate, metrics) in metric_values(s, records) {
        for (metric, values) in metrics {
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            rows.push(SpreadRow {
                rate_mbit: f64::from_bits(rate),
                metric,
                spread: spread(&values),
                mean,
                values,
            });
        }
    }
    rows
}

fn pairs(a: &[SpreadRow], b: &[SpreadRow]) -> Vec<PairRow> {
    a.iter()
        .filter_map(|x| {
            let y = b
                .iter()
                .find(|y| y.metric == x.metric && y.rate_mbit == x.rate_mbit)?;
            let change = if x.mean == 0.0 {
                if y.mean == 0.0 {
                    0.0
                } else {
                    f64::INFINITY
                }
            } else {
                (y.mean - x.mean) / x.mean.abs()
            };
            Some(PairRow {
                rate_mbit: x.rate_mbit,
                metric: x.metric.clone(),
                a_mean: x.mean,
                a_spread: x.spread,
                b_mean: y.mean,
                b_spread: y.spread,
                change,
                within_spread: change.abs() <= x.spread.max(y.spread),
            })
        })
        .collect()
}

/// Host wall time of run `r` of results directory `dir`, in s. A sealed guest's run (the
/// virtual clock) has it in [`crate::speed::HOST_FILE`] (`wall_s`: the whole guest, boot to power-off,
/// written by the host); otherwise it is from the run directory's birth to its `run.json`'s
/// last write, which a vng guest writes through the host's file system. `None` where
/// neither is known (no `host.json`, no birth time).
pub fn host_wall_s(dir: &Path, r: &RunRecord) -> Option<f64> {
    let id = cctl_report::runs::RunId {
        point: r.point,
        algo: r.algo.clone(),
        rep: r.rep,
    };
    let run = id.dir(dir);
    if let Ok(text) = std::fs::read_to_string(run.join(crate::speed::HOST_FILE)) {
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        return v["wall_s"].as_f64();
    }
    let born = std::fs::metadata(&run).ok()?.created().ok()?;
    let ended = std::fs::metadata(run.join("run.json"))
        .ok()?
        .modified()
        .ok()?;
    Some(ended.duration_since(born).ok()?.as_secs_f64())
}

/// A results directory's summary (as `cctl bench run` computes it) and records.
fn load(dir: &Path) -> Result<(Summary, Vec<RunRecord>)> {
    let (meta, mut records) = read_records(dir)?;
    records.sort_by_key(|r| (r.point, r.rep));
    let s =
        cctl_report::summary::summarize(&meta, &records, &cctl_metrics::MetricParams::default());
    Ok((s, records))
}

/// The figures of the runs in `dirs` (planned run → its results directory; runs that did
/// not happen are left out, and their parts stay empty).
///
/// Errors: a results directory that cannot be read.
pub fn analyse(dirs: &[(Planned, PathBuf)]) -> Result<Figures> {
    let mut f = Figures::default();
    let mut loaded: BTreeMap<String, (Summary, Vec<RunRecord>)> = BTreeMap::new();
    for (p, d) in dirs {
        loaded.insert(p.name.clone(), load(d)?);
    }
    let dir_of = |name: &str| {
        dirs.iter()
            .find(|(p, _)| p.name == name)
            .map(|(_, d)| d.clone())
    };
    if let Some((_, recs)) = loaded.get("ceiling") {
        ceiling(&mut f, recs, &dir_of("ceiling").unwrap_or_default());
    }
    if let Some((_, recs)) = loaded.get("path") {
        path(&mut f, recs);
    }
    if let Some((_, recs)) = loaded.get("path-schedule") {
        schedule(&mut f, recs);
    }
    if let Some((_, recs)) = loaded.get("theory-mathis") {
        mathis(&mut f, recs);
    }
    if let Some((_, recs)) = loaded.get("theory-buffer") {
        buffer(&mut f, recs);
    }
    let repeat = loaded.get("repeat").map(|(s, r)| {
        let same = r.windows(2).all(|w| {
            w[0].random_drops == w[1].random_drops
                && w[0].queue.last().map(|q| (q.drops, q.sent_bytes))
                    == w[1].queue.last().map(|q| (q.drops, q.sent_bytes))
                && w[0]
                    .flows
                    .iter()
                    .map(|f| f.bytes)
                    .eq(w[1].flows.iter().map(|f| f.bytes))
        });
        (spreads(s, r), same)
    });
    if let Some((rows, same)) = &repeat {
        f.repeat = rows.clone();
        f.identical = Some(*same);
    }
    if let (Some((rows, _)), Some((s, r))) = (&repeat, loaded.get("load")) {
        f.load = pairs(rows, &spreads(s, r));
    }
    if let (Some((s1, r1)), Some((s2, r2))) = (loaded.get("agree"), loaded.get("agree-other-clock"))
    {
        f.agree = pairs(&spreads(s1, r1), &spreads(s2, r2));
    }
    Ok(f)
}

/// Part 1: each run's utilisation against the ceiling's floor, the highest passing rate per
/// RTT; the tbf's sent rate for the path part.
fn ceiling(f: &mut Figures, recs: &[RunRecord], dir: &Path) {
    let floor = TBF_UTILISATION * (1.0 - CEILING_TOLERANCE);
    let mut rows: Vec<CeilingRow> = recs
        .iter()
        .map(|r| {
            let u = run_goodput_bps(r) / (r.spec.rate_mbit * 1e6);
            CeilingRow {
                rate_mbit: r.spec.rate_mbit,
                rtt_ms: rtt_of(r),
                utilisation: u,
                cpu_busy: r.cpu_busy,
                wall_per_traffic_s: host_wall_s(dir, r).unwrap_or(f64::NAN) / r.spec.duration_s,
                traffic_s: r.spec.duration_s,
                passes: u >= floor,
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (a.rtt_ms, a.rate_mbit)
            .partial_cmp(&(b.rtt_ms, b.rate_mbit))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut rtts: Vec<f64> = rows.iter().map(|r| r.rtt_ms).collect();
    rtts.dedup();
    for rtt in rtts {
        let mut ceiling = None;
        for r in rows.iter().filter(|r| r.rtt_ms == rtt) {
            if !r.passes {
                break;
            }
            ceiling = Some(r.rate_mbit);
        }
        f.ceiling_mbit.insert(format!("{rtt} ms"), ceiling);
    }
    for r in recs {
        if let Some(bps) = tbf_bps(r) {
            f.path.rate.push((r.spec.rate_mbit, rtt_of(r), bps / 1e6));
        }
    }
    f.ceiling = rows;
}

/// Part 2: the smallest RTT seen, the loss achieved, the rate sent.
fn path(f: &mut Figures, recs: &[RunRecord]) {
    for r in recs {
        f.path
            .rtt
            .push((rtt_of(r), r.spec.loss, smallest_min_rtt_ms(r)));
        let (data, _) = segments(r);
        if r.spec.loss > 0.0 {
            let achieved = if data > 0 {
                r.random_drops as f64 / data as f64
            } else {
                0.0
            };
            f.path
                .loss
                .push((r.spec.loss, achieved, r.random_drops, data));
        } else if let Some(bps) = tbf_bps(r) {
            f.path.rate.push((r.spec.rate_mbit, rtt_of(r), bps / 1e6));
        }
    }
}

/// Part 2: when each scheduled rate change took effect.
fn schedule(f: &mut Figures, recs: &[RunRecord]) {
    for r in recs {
        for (c, (at, rate)) in r
            .schedule
            .iter()
            .flat_map(|l| l.changes.iter())
            .filter(|c| c.what == "rate_mbit")
            .zip(SCHEDULE)
        {
            f.path
                .schedule
                .push((at, rate, c.completed_ms - c.scheduled_ms, c.read_rate_mbit));
        }
    }
}

/// Part 3: Reno's throughput against Mathis et al.'s model.
fn mathis(f: &mut Figures, recs: &[RunRecord]) {
    for r in recs {
        let (data, acks) = segments(r);
        let b = if acks > 0 {
            data as f64 / acks as f64
        } else {
            2.0
        };
        let p_achieved = if data > 0 {
            r.random_drops as f64 / data as f64
        } else {
            r.spec.loss
        };
        let rtt = mean_srtt_s(r);
        let measured = run_goodput_bps(r);
        let model_with = |b: f64| {
            if rtt > 0.0 && p_achieved > 0.0 {
                mathis_bps(MSS_BYTES, rtt, p_achieved, b)
            } else {
                f64::NAN
            }
        };
        let (model, model_b1) = (model_with(b), model_with(1.0));
        f.mathis.push(MathisRow {
            p: r.spec.loss,
            p_achieved,
            rtt_ms: rtt * 1e3,
            b,
            measured_mbit: measured / 1e6,
            model_mbit: model / 1e6,
            ratio: measured / model,
            model_b1_mbit: model_b1 / 1e6,
            ratio_b1: measured / model_b1,
        });
    }
}

/// Part 3: Reno's utilisation against the buffer model.
fn buffer(f: &mut Figures, recs: &[RunRecord]) {
    for r in recs {
        let bdp = cctl_scenario::bdp_pkts(r.spec.rate_mbit, rtt_of(r));
        let most = r.spec.rate_mbit * 1e6 * MSS_BYTES / PACKET_BYTES;
        f.buffer.push(BufferRow {
            buffer_bdp: r
                .vars
                .get("buffer_bdp")
                .copied()
                .unwrap_or(f64::from(r.spec.buffer_pkts) / bdp),
            buffer_pkts: r.spec.buffer_pkts,
            utilisation: run_goodput_bps(r) / most,
            model: reno_utilisation(f64::from(r.spec.buffer_pkts) / bdp),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_steady_window_leaves_out_slow_start_and_the_drain() {
        assert_eq!(steady_window(30.0), (10.0, 29.5));
        let (a, b) = steady_window(0.6);
        assert!(b > a);
    }

    #[test]
    fn pairs_compare_means_and_judge_by_the_larger_spread() {
        let row = |mean: f64, spread: f64| SpreadRow {
            rate_mbit: 20.0,
            metric: "M1".into(),
            values: vec![mean],
            mean,
            spread,
        };
        let p = pairs(&[row(10.0, 0.05)], &[row(10.4, 0.01)]);
        assert_eq!(p.len(), 1);
        assert!((p[0].change - 0.04).abs() < 1e-12);
        assert!(p[0].within_spread);
        let p = pairs(&[row(10.0, 0.01)], &[row(11.0, 0.02)]);
        assert!(!p[0].within_spread);
    }
}
