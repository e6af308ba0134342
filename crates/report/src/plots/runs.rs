//! Plot kinds with one chart per run (of repetition 0): cwnd, the bottleneck queue,
//! throughput over time, one-way delays and sojourn times.

use std::path::PathBuf;

use anyhow::Result;
use cctl_metrics as metrics;
use cctl_plot::{self as plot, Series, SeriesStyle};

use super::{point_vars, Ctx};
use crate::record::RunRecord;

/// `algo p<point> vars` of a run, for titles.
fn what(r: &RunRecord) -> String {
    format!("{} p{} {}", r.algo, r.point, point_vars(&r.vars))
}

/// `cwnd`: each flow's cwnd (segments) over time ([P0] Figs. 5-9).
pub(super) fn cwnd(cx: &Ctx) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for r in cx.first_reps() {
        let flows: Vec<(String, Vec<(f64, f64)>)> = r
            .series
            .iter()
            .map(|f| {
                (
                    format!(
                        "flow{} {} {:.0} ms",
                        f.id,
                        r.flow_algo(f),
                        f.base_rtt_s * 1e3
                    ),
                    f.points
                        .iter()
                        .map(|p| (p.t_s, f64::from(p.cwnd)))
                        .collect(),
                )
            })
            .collect();
        let chart = plot::cwnd_history(&format!("cwnd, {}", what(r)), &flows, &cx.notes);
        out.push(
            plot::render(
                &chart,
                &cx.dir.join(format!("cwnd-{}-p{}", r.algo, r.point)),
            )?
            .0,
        );
    }
    Ok(out)
}

/// `queue`: the bottleneck's backlog (packets) over time.
pub(super) fn queue(cx: &Ctx) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for r in cx.first_reps() {
        let series = vec![Series {
            label: format!("backlog (buffer {} pkts)", r.spec.buffer_pkts),
            points: r
                .queue
                .iter()
                .map(|q| (q.t_s, q.backlog_pkts as f64))
                .collect(),
            style: SeriesStyle::Line,
        }];
        out.push(cx.render(
            &format!("queue-{}-p{}", r.algo, r.point),
            &format!("Bottleneck queue, {}", what(r)),
            "time (s)",
            "backlog (packets)",
            series,
            &cx.notes,
        )?);
    }
    Ok(out)
}

/// `timeline`: each flow's throughput per 5 s.
pub(super) fn timeline(cx: &Ctx) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for r in cx.first_reps() {
        let series: Vec<Series> = r
            .series
            .iter()
            .map(|f| {
                let tp = metrics::period_throughputs_bps(f, 0.0, r.spec.duration_s, 5.0);
                Series {
                    label: format!("flow{} {}", f.id, r.flow_algo(f)),
                    points: tp
                        .iter()
                        .enumerate()
                        .map(|(k, b)| (5.0 * k as f64 + 2.5, b / 1e6))
                        .collect(),
                    style: SeriesStyle::Line,
                }
            })
            .collect();
        out.push(cx.render(
            &format!("timeline-{}-p{}", r.algo, r.point),
            &format!("Throughput per 5 s, {}", what(r)),
            "time (s)",
            "throughput (Mbit/s)",
            series,
            &cx.notes,
        )?);
    }
    Ok(out)
}

/// `delay`: each flow's one-way delay and each bottleneck's sojourn time, over time and as
/// CDFs (runs with delay taps only).
pub(super) fn delay(cx: &Ctx) -> Result<Vec<PathBuf>> {
    let ms = |pts: &[(f64, f64)]| -> Vec<(f64, f64)> {
        pts.iter().map(|&(t, us)| (t, us / 1e3)).collect()
    };
    let cdf = |us: &[f64]| -> Vec<(f64, f64)> {
        let n = (us.len().max(2) - 1) as f64;
        us.iter()
            .enumerate()
            .map(|(i, x)| (x / 1e3, i as f64 / n))
            .collect()
    };
    let mut out = Vec::new();
    for r in cx.first_reps() {
        let Some(d) = &r.delays else { continue };
        let mut over_time = Vec::new();
        let mut cdfs = Vec::new();
        let flows = d.flows.iter().map(|f| {
            (
                format!("flow{} one-way delay", f.id),
                &f.forward_series,
                &f.forward_cdf_us,
                SeriesStyle::Line,
            )
        });
        let hops = d.hops.iter().map(|h| {
            (
                format!("hop{} sojourn", h.hop),
                &h.sojourn_series,
                &h.sojourn_cdf_us,
                SeriesStyle::Dashed,
            )
        });
        for (label, series, dist, style) in flows.chain(hops) {
            over_time.push(Series {
                label: label.clone(),
                points: ms(series),
                style: style.clone(),
            });
            cdfs.push(Series {
                label,
                points: cdf(dist),
                style,
            });
        }
        let mut n = cx.notes.clone();
        n.push(format!(
            "1 packet in {} timed; {} timed packets delivered",
            d.counts.sample_every, d.counts.delivered
        ));
        out.push(cx.render(
            &format!("delay-{}-p{}", r.algo, r.point),
            &format!(
                "One-way delay and sojourn over time (100-ms means), {}",
                what(r)
            ),
            "time (s)",
            "delay (ms)",
            over_time,
            &n,
        )?);
        out.push(cx.render(
            &format!("delay-cdf-{}-p{}", r.algo, r.point),
            &format!("One-way delay and sojourn, CDF, {}", what(r)),
            "delay (ms)",
            "fraction",
            cdfs,
            &n,
        )?);
    }
    Ok(out)
}
