//! The plots a scenario asks for (`plots = [...]`, [`cctl_scenario::PLOTS`]), drawn from a
//! summary and its runs into `plots/*.png` and `plots/*.svg`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use cctl_metrics::{self as metrics, FlowSeries, ResponseFunction, RttUnfairnessModel};
use cctl_plot::{self as plot, Chart, Series, SeriesStyle};

use crate::axes::{xy_series, XAxis};
use crate::record::RunRecord;
use crate::summary::Summary;

/// Renders the scenario's plots into `dir/plots`; returns the PNG paths.
pub fn plots(
    s: &Summary,
    records: &[RunRecord],
    dir: &Path,
    kinds: &[String],
    x: Option<&str>,
) -> Result<Vec<PathBuf>> {
    let pdir = dir.join("plots");
    std::fs::create_dir_all(&pdir)?;
    let mut notes = vec![format!(
        "{} ({}), profile {}, kernel {}",
        s.metadata.scenario, s.metadata.id, s.metadata.profile, s.metadata.kernel
    )];
    if s.metadata.profile == "ci" {
        notes.push("ci profile: never compare with the papers' numbers".into());
    }
    let mut out = Vec::new();
    let axis = XAxis::of(&s.rows, x);
    for kind in kinds {
        match kind.as_str() {
            "cwnd" => {
                for r in records.iter().filter(|r| r.rep == 0) {
                    let flows: Vec<(String, Vec<(f64, f64)>)> = r
                        .series
                        .iter()
                        .map(|f| {
                            (
                                format!("flow{} {} {:.0} ms", f.id, f.cc, f.base_rtt_s * 1e3),
                                f.points
                                    .iter()
                                    .map(|p| (p.t_s, f64::from(p.cwnd)))
                                    .collect(),
                            )
                        })
                        .collect();
                    let title = format!("cwnd, {} p{} {}", r.algo, r.point, point_vars(&r.vars));
                    let chart = plot::cwnd_history(&title, &flows, &notes);
                    out.push(
                        plot::render(&chart, &pdir.join(format!("cwnd-{}-p{}", r.algo, r.point)))?
                            .0,
                    );
                }
            }
            "ratio_vs_rtt" => {
                let mut series = xy_series(&s.rows, &axis, "M3 R_rtt");
                // M17: Reno ∝ (RTT_short/RTT_long)², H-TCP's design ∝ RTT_short/RTT_long,
                // against flow 1's fixed RTT; only when x is an RTT in ms.
                let x_is_rtt = axis
                    .var
                    .as_deref()
                    .is_some_and(|v| v.starts_with("rtt") && v.ends_with("_ms"));
                if let (Some(r), true) = (records.first(), x_is_rtt) {
                    let rtt1 = r.series.first().map(|f| f.base_rtt_s).unwrap_or(0.162);
                    let xs: Vec<f64> = series
                        .iter()
                        .flat_map(|s| s.points.iter().map(|p| p.0))
                        .collect();
                    for (label, model) in [
                        ("Reno reference (M17)", RttUnfairnessModel::Reno),
                        ("H-TCP design (M17)", RttUnfairnessModel::Htcp),
                    ] {
                        let mut pts: Vec<(f64, f64)> = xs
                            .iter()
                            .filter_map(|&x| {
                                metrics::reference_rtt_ratio(model, x / 1e3, rtt1).map(|y| (x, y))
                            })
                            .collect();
                        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                        pts.dedup_by(|a, b| a.0 == b.0);
                        series.push(Series {
                            label: label.into(),
                            points: pts,
                            style: SeriesStyle::Dashed,
                        });
                    }
                }
                out.push(render_xy(
                    &pdir,
                    "ratio-vs-rtt",
                    "Throughput ratio R_rtt (long/short RTT) vs RTT (Fig. 10)",
                    &axis.label,
                    "R_rtt",
                    series,
                    &notes,
                    false,
                )?);
            }
            "convergence" => {
                let series = xy_series(&s.rows, &axis, "M5 A (s)");
                let mut n = notes.clone();
                n.push(
                    "80 % convergence time, variant A; points missing = not converged (NC)".into(),
                );
                out.push(render_xy(
                    &pdir,
                    "convergence",
                    "80 % convergence time (Fig. 14)",
                    &axis.label,
                    "t_conv (s)",
                    series,
                    &n,
                    false,
                )?);
            }
            "response" => {
                let mut series = xy_series(&s.rows, &axis, "M1 flow1 (Mbit/s)");
                // The closed forms are of the loss probability: only when x is `loss`.
                if let (Some(r), Some("loss")) = (records.first(), axis.var.as_deref()) {
                    let rtt = r.series.first().map(|f| f.base_rtt_s).unwrap_or(0.1);
                    let mut ps: Vec<f64> = s
                        .rows
                        .iter()
                        .filter_map(|r| axis.x(r))
                        .filter(|p| *p > 0.0)
                        .collect();
                    ps.sort_by(f64::total_cmp);
                    ps.dedup();
                    for (label, rf) in [
                        ("Reno 1.2/√p", ResponseFunction::Reno),
                        ("HSTCP 0.12/p^0.835", ResponseFunction::Hstcp),
                        ("STCP 0.08/p", ResponseFunction::Stcp),
                    ] {
                        let pts: Vec<(f64, f64)> = ps
                            .iter()
                            .filter_map(|&p| {
                                metrics::response_throughput_bps(rf, p, None, 1448.0, rtt)
                                    .map(|b| (p, b / 1e6))
                            })
                            .collect();
                        series.push(Series {
                            label: label.into(),
                            points: pts,
                            style: SeriesStyle::Dashed,
                        });
                    }
                }
                let chart = Chart {
                    title: "Response function: throughput vs random loss (Fig. 13)".into(),
                    x_label: axis.label.clone(),
                    y_label: "throughput (Mbit/s)".into(),
                    log_x: true,
                    log_y: true,
                    series,
                    notes: notes.clone(),
                    ..Default::default()
                };
                out.push(plot::render(&chart, &pdir.join("response"))?.0);
            }
            "buffer" => {
                let series = xy_series(&s.rows, &axis, "M8 goodput (Mbit/s)");
                out.push(render_xy(
                    &pdir,
                    "buffer-throughput",
                    "Aggregate throughput vs buffer (Fig. 12)",
                    &axis.label,
                    "goodput (Mbit/s)",
                    series,
                    &notes,
                    false,
                )?);
                let series = xy_series(&s.rows, &axis, "M9 drop rate");
                out.push(render_xy(
                    &pdir,
                    "buffer-loss",
                    "Loss rate vs buffer (Fig. 12)",
                    &axis.label,
                    "drop rate",
                    series,
                    &notes,
                    false,
                )?);
            }
            "goodput" => {
                let series = xy_series(&s.rows, &axis, "M8 goodput (Mbit/s)");
                out.push(render_xy(
                    &pdir,
                    "goodput",
                    "Aggregate goodput",
                    &axis.label,
                    "goodput (Mbit/s)",
                    series,
                    &notes,
                    false,
                )?);
            }
            "completion" => {
                let series = xy_series(&s.rows, &axis, "M15 flow2 completion (s)");
                out.push(render_xy(
                    &pdir,
                    "completion",
                    "Completion time",
                    &axis.label,
                    "completion (s)",
                    series,
                    &notes,
                    false,
                )?);
            }
            "queue" => {
                for r in records.iter().filter(|r| r.rep == 0) {
                    let pts: Vec<(f64, f64)> = r
                        .queue
                        .iter()
                        .map(|q| (q.t_s, q.backlog_pkts as f64))
                        .collect();
                    let series = vec![Series {
                        label: format!("backlog (buffer {} pkts)", r.spec.buffer_pkts),
                        points: pts,
                        style: SeriesStyle::Line,
                    }];
                    let title = format!(
                        "Bottleneck queue, {} p{} {}",
                        r.algo,
                        r.point,
                        point_vars(&r.vars)
                    );
                    out.push(render_xy(
                        &pdir,
                        &format!("queue-{}-p{}", r.algo, r.point),
                        &title,
                        "time (s)",
                        "backlog (packets)",
                        series,
                        &notes,
                        false,
                    )?);
                }
            }
            "fairness" => {
                let series = xy_series(&s.rows, &axis, "M4 Jain");
                out.push(render_xy(
                    &pdir,
                    "fairness",
                    "Jain's fairness index (M4)",
                    &axis.label,
                    "Jain index",
                    series,
                    &notes,
                    false,
                )?);
            }
            "friendliness" => {
                let series = xy_series(&s.rows, &axis, "M3 flow2/flow1");
                out.push(render_xy(
                    &pdir,
                    "friendliness",
                    "Throughput of the flow under test over the Reno flow",
                    &axis.label,
                    "flow2 / flow1",
                    series,
                    &notes,
                    false,
                )?);
            }
            "timeline" => {
                for r in records.iter().filter(|r| r.rep == 0) {
                    let series: Vec<Series> = r
                        .series
                        .iter()
                        .map(|f| {
                            let tp =
                                metrics::period_throughputs_bps(f, 0.0, r.spec.duration_s, 5.0);
                            Series {
                                label: format!("flow{} {}", f.id, f.cc),
                                points: tp
                                    .iter()
                                    .enumerate()
                                    .map(|(k, b)| (5.0 * k as f64 + 2.5, b / 1e6))
                                    .collect(),
                                style: SeriesStyle::Line,
                            }
                        })
                        .collect();
                    let title = format!(
                        "Throughput per 5 s, {} p{} {}",
                        r.algo,
                        r.point,
                        point_vars(&r.vars)
                    );
                    out.push(render_xy(
                        &pdir,
                        &format!("timeline-{}-p{}", r.algo, r.point),
                        &title,
                        "time (s)",
                        "throughput (Mbit/s)",
                        series,
                        &notes,
                        false,
                    )?);
                }
            }
            "delay" => {
                for r in records.iter().filter(|r| r.rep == 0) {
                    let Some(d) = &r.delays else { continue };
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
                    let mut over_time = Vec::new();
                    let mut cdfs = Vec::new();
                    for f in &d.flows {
                        let label = format!("flow{} one-way delay", f.id);
                        over_time.push(Series {
                            label: label.clone(),
                            points: ms(&f.forward_series),
                            style: SeriesStyle::Line,
                        });
                        cdfs.push(Series {
                            label,
                            points: cdf(&f.forward_cdf_us),
                            style: SeriesStyle::Line,
                        });
                    }
                    for h in &d.hops {
                        let label = format!("hop{} sojourn", h.hop);
                        over_time.push(Series {
                            label: label.clone(),
                            points: ms(&h.sojourn_series),
                            style: SeriesStyle::Dashed,
                        });
                        cdfs.push(Series {
                            label,
                            points: cdf(&h.sojourn_cdf_us),
                            style: SeriesStyle::Dashed,
                        });
                    }
                    let mut n = notes.clone();
                    n.push(format!(
                        "1 packet in {} timed; {} timed packets delivered",
                        d.counts.sample_every, d.counts.delivered
                    ));
                    let what = format!("{} p{} {}", r.algo, r.point, point_vars(&r.vars));
                    out.push(render_xy(
                        &pdir,
                        &format!("delay-{}-p{}", r.algo, r.point),
                        &format!("One-way delay and sojourn over time (100-ms means), {what}"),
                        "time (s)",
                        "delay (ms)",
                        over_time,
                        &n,
                        false,
                    )?);
                    out.push(render_xy(
                        &pdir,
                        &format!("delay-cdf-{}-p{}", r.algo, r.point),
                        &format!("One-way delay and sojourn, CDF, {what}"),
                        "delay (ms)",
                        "fraction",
                        cdfs,
                        &n,
                        false,
                    )?);
                }
            }
            "cdf" => {
                let mut algos: Vec<&str> = records.iter().map(|r| r.algo.as_str()).collect();
                algos.sort();
                algos.dedup();
                let series: Vec<Series> = algos
                    .iter()
                    .map(|a| {
                        let flows: Vec<&FlowSeries> = records
                            .iter()
                            .filter(|r| r.algo == *a)
                            .flat_map(|r| r.series.iter())
                            .collect();
                        let mut xs: Vec<f64> = flows
                            .iter()
                            .flat_map(|f| f.backoffs.iter().map(|b| f64::from(b.cwnd_before)))
                            .filter(|x| *x > 0.0)
                            .collect();
                        xs.sort_by(f64::total_cmp);
                        let n = xs.len() as f64;
                        Series {
                            label: a.to_string(),
                            points: xs
                                .iter()
                                .enumerate()
                                .map(|(i, x)| (*x, (i + 1) as f64 / n))
                                .collect(),
                            style: SeriesStyle::Line,
                        }
                    })
                    .collect();
                out.push(render_xy(
                    &pdir,
                    "cwnd-at-backoff-cdf",
                    "cwnd at backoff, CDF (M14)",
                    "cwnd before backoff (packets)",
                    "fraction",
                    series,
                    &notes,
                    false,
                )?);
            }
            "delay_throughput" => {
                let dots = crate::scatter::flow_dots(records, &s.params);
                out.push(crate::scatter::render(
                    &dots,
                    "Throughput vs queueing delay, one point per flow per run (mean, 1-σ ellipse)",
                    &notes,
                    &pdir.join("delay-throughput"),
                )?);
            }
            other => anyhow::bail!("unknown plot kind '{other}'"),
        }
    }
    Ok(out)
}

fn point_vars(v: &BTreeMap<String, f64>) -> String {
    v.iter()
        .map(|(k, x)| format!("{k}={x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[allow(clippy::too_many_arguments)]
fn render_xy(
    dir: &Path,
    stem: &str,
    title: &str,
    x: &str,
    y: &str,
    series: Vec<Series>,
    notes: &[String],
    log_x: bool,
) -> Result<PathBuf> {
    let chart = Chart {
        title: title.into(),
        x_label: x.into(),
        y_label: y.into(),
        log_x,
        series,
        notes: notes.to_vec(),
        ..Default::default()
    };
    Ok(plot::render(&chart, &dir.join(stem))?.0)
}
