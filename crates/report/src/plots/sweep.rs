//! Plot kinds over the whole sweep that draw more than a summary metric: the papers'
//! models beside the measured ratio and response function, the distribution of cwnd at
//! backoff, throughput against queueing delay.

use std::path::PathBuf;

use anyhow::Result;
use cctl_metrics::{self as metrics, FlowSeries, ResponseFunction, RttUnfairnessModel};
use cctl_plot::{self as plot, Chart, Series, SeriesStyle};

use super::Ctx;
use crate::axes::xy_series;

/// `ratio_vs_rtt`: the throughput ratio R_rtt against the RTT ([P0] Fig. 10), with M17's
/// references (Reno ∝ (RTT_short/RTT_long)², H-TCP's design ∝ RTT_short/RTT_long, against
/// flow 1's fixed RTT) when x is an RTT in ms.
pub(super) fn ratio_vs_rtt(cx: &Ctx) -> Result<Vec<PathBuf>> {
    let mut series = xy_series(&cx.s.rows, &cx.axis, "M3 R_rtt");
    let x_is_rtt = cx
        .axis
        .var
        .as_deref()
        .is_some_and(|v| v.starts_with("rtt") && v.ends_with("_ms"));
    if let (Some(r), true) = (cx.records.first(), x_is_rtt) {
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
                .filter_map(|&x| metrics::reference_rtt_ratio(model, x / 1e3, rtt1).map(|y| (x, y)))
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
    Ok(vec![cx.render(
        "ratio-vs-rtt",
        "Throughput ratio R_rtt (long/short RTT) vs RTT (Fig. 10)",
        &cx.axis.label,
        "R_rtt",
        series,
        &cx.notes,
    )?])
}

/// `response`: throughput against the random loss rate ([P0] Fig. 13), log-log, with the
/// closed forms of Reno, HSTCP and STCP when x is `loss`.
pub(super) fn response(cx: &Ctx) -> Result<Vec<PathBuf>> {
    let mut series = xy_series(&cx.s.rows, &cx.axis, "M1 flow1 (Mbit/s)");
    if let (Some(r), Some("loss")) = (cx.records.first(), cx.axis.var.as_deref()) {
        let rtt = r.series.first().map(|f| f.base_rtt_s).unwrap_or(0.1);
        let mut ps: Vec<f64> =
            cx.s.rows
                .iter()
                .filter_map(|r| cx.axis.x(r))
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
                    metrics::response_throughput_bps(rf, p, None, 1448.0, rtt).map(|b| (p, b / 1e6))
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
        x_label: cx.axis.label.clone(),
        y_label: "throughput (Mbit/s)".into(),
        log_x: true,
        log_y: true,
        series,
        notes: cx.notes.clone(),
        ..Default::default()
    };
    Ok(vec![plot::render(&chart, &cx.dir.join("response"))?.0])
}

/// `cdf`: the distribution of cwnd (segments) at each backoff, per algorithm (M14).
pub(super) fn cwnd_at_backoff_cdf(cx: &Ctx) -> Result<Vec<PathBuf>> {
    let mut algos: Vec<&str> = cx.records.iter().map(|r| r.algo.as_str()).collect();
    algos.sort();
    algos.dedup();
    let series: Vec<Series> = algos
        .iter()
        .map(|a| {
            let flows: Vec<&FlowSeries> = cx
                .records
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
    Ok(vec![cx.render(
        "cwnd-at-backoff-cdf",
        "cwnd at backoff, CDF (M14)",
        "cwnd before backoff (packets)",
        "fraction",
        series,
        &cx.notes,
    )?])
}

/// `delay_throughput`: one point per flow per run, throughput against queueing delay, with
/// each algorithm's mean and 1-σ ellipse.
pub(super) fn delay_throughput(cx: &Ctx) -> Result<Vec<PathBuf>> {
    let dots = crate::scatter::flow_dots(cx.records, &cx.s.params);
    Ok(vec![crate::scatter::render(
        &dots,
        "Throughput vs queueing delay, one point per flow per run (mean, 1-σ ellipse)",
        &cx.notes,
        &cx.dir.join("delay-throughput"),
    )?])
}
