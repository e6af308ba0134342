//! Export of what the dashboard shows: a CSV of the samples of the flows in the table over
//! the chart window, and the three charts (cwnd, srtt, throughput of the chart flows) as SVG
//! (and PNG) through the benchmark reports' plotting code.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cctl_plot::{self as plot, Chart, Series, SeriesStyle};

use super::app::App;
use super::view::{series, Metric};

/// One CSV row: one sample of one flow.
#[derive(serde::Serialize)]
struct Row<'a> {
    /// Seconds relative to the end of the chart window (≤ 0).
    t_s: f64,
    ts_ns: u64,
    cookie: u64,
    local: &'a str,
    remote: &'a str,
    cc: &'a str,
    ca_state: String,
    cwnd: u32,
    ssthresh: Option<u32>,
    srtt_us: u32,
    rttvar_us: u32,
    bytes_acked: u64,
    tput_bps: f64,
    total_retrans: u32,
}

/// Files one export wrote.
#[derive(Debug, Clone)]
pub struct Exported {
    /// The samples.
    pub csv: PathBuf,
    /// One SVG per chart: cwnd, srtt, throughput.
    pub svgs: Vec<PathBuf>,
    /// Rows in the CSV.
    pub rows: usize,
}

/// Writes `<dir>/cctl-top-<unix s>.csv` and `<dir>/cctl-top-<unix s>-{cwnd,srtt,tput}.svg`
/// (plus .png) for the flows on screen and the chart window.
///
/// Errors: the directory cannot be created or a file written (the message names it).
pub fn export(app: &App, dir: &Path) -> Result<Exported> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let stem = dir.join(format!("cctl-top-{stamp}"));
    let (start, end) = app.window();
    let rows = app.rows();

    let csv_path = stem.with_extension("csv");
    let mut w = csv::Writer::from_path(&csv_path)
        .with_context(|| format!("writing {}", csv_path.display()))?;
    let mut n = 0;
    for f in rows.iter().filter_map(|c| app.flows.get(c)) {
        let (local, remote) = (f.local(), f.remote());
        let cc = f.cc_label();
        for p in f
            .history
            .iter()
            .filter(|p| p.t_ns >= start && p.t_ns <= end)
        {
            w.serialize(Row {
                t_s: -((end - p.t_ns) as f64) / 1e9,
                ts_ns: p.t_ns,
                cookie: f.last.cookie,
                local: &local,
                remote: &remote,
                cc: &cc,
                ca_state: format!("{:?}", p.ca_state),
                cwnd: p.cwnd,
                ssthresh: p.ssthresh,
                srtt_us: p.srtt_us,
                rttvar_us: p.rttvar_us,
                bytes_acked: p.bytes_acked,
                tput_bps: p.tput_bps,
                total_retrans: p.total_retrans,
            })
            .with_context(|| format!("writing {}", csv_path.display()))?;
            n += 1;
        }
    }
    w.flush()
        .with_context(|| format!("writing {}", csv_path.display()))?;

    let flows: Vec<_> = app
        .chart_flows(&rows)
        .iter()
        .filter_map(|c| app.flows.get(c))
        .collect();
    let mut svgs = Vec::new();
    for (metric, name) in [
        (Metric::Cwnd, "cwnd"),
        (Metric::Rtt, "srtt"),
        (Metric::Tput, "tput"),
    ] {
        let (data, top) = series(&flows, metric, start, end);
        let chart = Chart {
            title: format!("cctl top: {}", metric.title()),
            x_label: "time relative to the window's end (s)".into(),
            y_label: metric.title().into(),
            series: flows
                .iter()
                .zip(data)
                .map(|(f, points)| Series {
                    label: format!("{} > {} {}", f.local(), f.remote(), f.cc_label()),
                    points,
                    style: SeriesStyle::Line,
                })
                .collect(),
            x_range: Some((-app.view.window_s, 0.0)),
            y_range: Some((0.0, top)),
            ..Chart::default()
        };
        let (_png, svg) =
            plot::render(&chart, &PathBuf::from(format!("{}-{name}", stem.display())))?;
        svgs.push(svg);
    }
    Ok(Exported {
        csv: csv_path,
        svgs,
        rows: n,
    })
}
