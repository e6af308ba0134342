//! A calibration's report: `calibrate.json` ([`Report`]), `calibrate.md` ([`markdown`]) and
//! its plots ([`plots`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use cctl_plot::{render, Chart, Series, SeriesStyle};
use cctl_report::record::ClockRecord;

use super::analyse::Figures;
use super::{Part, CEILING_TOLERANCE, TBF_UTILISATION};

/// What `cctl bench calibrate` writes to `calibrate.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// UTC timestamp of the start (the directory's name).
    pub started: String,
    /// The calibrated clock, as the guest recorded it.
    pub clock: Option<ClockRecord>,
    /// The clock of the agreement part's reference runs.
    pub other_clock: Option<ClockRecord>,
    /// `--quick`: fewer points, shorter runs.
    pub quick: bool,
    /// The parts run.
    pub parts: Vec<Part>,
    /// Each `cctl bench run`'s results directory, by planned name.
    pub runs: BTreeMap<String, String>,
    /// Host wall time of each `cctl bench run` (guest boot included), s.
    pub wall_s: BTreeMap<String, f64>,
    /// Runs that failed, with why.
    pub errors: Vec<String>,
    /// The figures.
    pub figures: Figures,
}

fn pct(x: f64) -> String {
    format!("{:.1} %", x * 100.0)
}

/// The report as Markdown: one table per part.
pub fn markdown(r: &Report) -> String {
    let f = &r.figures;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## cctl testbed calibration ({}{})\n\nClock: {}. Reference clock of the agreement part: {}.\n",
        r.started,
        if r.quick { ", --quick" } else { "" },
        r.clock.as_ref().map_or("-".into(), ClockRecord::describe),
        r.other_clock.as_ref().map_or("-".into(), ClockRecord::describe),
    );
    ceiling(&mut s, f);
    path(&mut s, f);
    theory(&mut s, f);
    repeatability(&mut s, f);
    pairs(&mut s, f);
    if !r.wall_s.is_empty() {
        s += "### Wall time\n\n| run | wall time (s) |\n|---|---|\n";
        for (k, v) in &r.wall_s {
            let _ = writeln!(s, "| {k} | {v:.0} |");
        }
        s += "\n";
    }
    for e in &r.errors {
        let _ = writeln!(s, "FAILED: {e}");
    }
    s
}

/// Part 1: the ceiling table and the ceiling per RTT.
fn ceiling(s: &mut String, f: &Figures) {
    if !f.ceiling.is_empty() {
        let _ = writeln!(
            s,
            "### 1. Ceiling (one cubic flow, 100 % BDP)\n\nPasses: goodput utilisation ≥ {} ({} of the host tbf's {}).\n\n| rate (Mbit/s) | RTT (ms) | utilisation | guest CPU busy | wall s per traffic s | passes |\n|---|---|---|---|---|---|",
            pct(TBF_UTILISATION * (1.0 - CEILING_TOLERANCE)),
            pct(1.0 - CEILING_TOLERANCE),
            pct(TBF_UTILISATION)
        );
        for c in &f.ceiling {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:.2} | {} |",
                c.rate_mbit,
                c.rtt_ms,
                pct(c.utilisation),
                pct(c.cpu_busy),
                c.wall_per_traffic_s,
                if c.passes { "yes" } else { "no" }
            );
        }
        for (rtt, c) in &f.ceiling_mbit {
            let _ = writeln!(
                s,
                "\nCeiling at {rtt}: {}",
                c.map_or("below the lowest rate tried".into(), |v| format!(
                    "{v} Mbit/s"
                ))
            );
        }
        *s += "\n";
    }
}

/// Part 2: RTT, rate, loss and schedule as configured against as measured.
fn path(s: &mut String, f: &Figures) {
    let p = &f.path;
    if !p.rtt.is_empty() || !p.schedule.is_empty() {
        *s += "### 2. The path is what was asked for\n\n| configured RTT (ms) | loss | min RTT seen (ms) | ratio |\n|---|---|---|---|\n";
        for (rtt, loss, min) in &p.rtt {
            let _ = writeln!(s, "| {rtt} | {loss} | {min:.2} | {:.4} |", min / rtt);
        }
        *s += "\n| rate (Mbit/s) | RTT (ms) | tbf sent (L2, Mbit/s) | ratio |\n|---|---|---|---|\n";
        for (rate, rtt, got) in &p.rate {
            let _ = writeln!(s, "| {rate} | {rtt} | {got:.3} | {:.4} |", got / rate);
        }
        *s += "\n| configured loss | achieved loss | netem drops | data segments | ratio |\n|---|---|---|---|---|\n";
        for (want, got, drops, segs) in &p.loss {
            let _ = writeln!(
                s,
                "| {want} | {got:.5} | {drops} | {segs} | {:.3} |",
                got / want
            );
        }
        *s += "\n| scheduled (s) | rate (Mbit/s) | completed − scheduled (ms) | tc read back (Mbit/s) |\n|---|---|---|---|\n";
        for (at, rate, err, read) in &p.schedule {
            let _ = writeln!(
                s,
                "| {at} | {rate} | {err:.1} | {} |",
                read.map_or("-".into(), |v| format!("{v}"))
            );
        }
        *s += "\n";
    }
}

/// Part 3: Reno against Mathis et al. and against the buffer model.
fn theory(s: &mut String, f: &Figures) {
    if !f.mathis.is_empty() || !f.buffer.is_empty() {
        *s += "### 3. Theory\n\nOne bpf_reno flow under random loss against Mathis et al., `MSS/RTT · sqrt(3/(2b))/sqrt(p)`, MSS 1448 bytes, RTT the mean srtt, p the achieved loss, b the data segments per ACK the receiver sent. Linux's Reno grows cwnd by the segments each ACK covers (RFC 3465 counting), so its effective b is 1: the last two columns.\n\n| p | achieved p | mean srtt (ms) | b | measured (Mbit/s) | model (Mbit/s) | measured / model | model, b = 1 (Mbit/s) | measured / model, b = 1 |\n|---|---|---|---|---|---|---|---|---|\n";
        for m in &f.mathis {
            let _ = writeln!(
                s,
                "| {} | {:.5} | {:.1} | {:.2} | {:.2} | {:.2} | {:.3} | {:.2} | {:.3} |",
                m.p,
                m.p_achieved,
                m.rtt_ms,
                m.b,
                m.measured_mbit,
                m.model_mbit,
                m.ratio,
                m.model_b1_mbit,
                m.ratio_b1
            );
        }
        *s += "\nOne bpf_reno flow against buffer size (model: the fluid sawtooth).\n\n| buffer (BDP) | buffer (pkts) | utilisation | model |\n|---|---|---|---|\n";
        for b in &f.buffer {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} |",
                b.buffer_bdp,
                b.buffer_pkts,
                pct(b.utilisation),
                pct(b.model)
            );
        }
        *s += "\n";
    }
}

/// Part 4: repeatability.
fn repeatability(s: &mut String, f: &Figures) {
    if !f.repeat.is_empty() {
        let _ = writeln!(
            s,
            "### 4. Repeatability (two bpf_htcp flows, 20 % BDP)\n\nRuns identical (bytes per flow, drops): {}.\n\n| rate | metric | mean | spread (max−min)/mean | values |\n|---|---|---|---|---|",
            match f.identical {
                Some(true) => "yes",
                Some(false) => "no",
                None => "-",
            }
        );
        for r in &f.repeat {
            let vals: Vec<String> = r.values.iter().map(|v| format!("{v:.4}")).collect();
            let _ = writeln!(
                s,
                "| {} | {} | {:.4} | {} | {} |",
                r.rate_mbit,
                r.metric,
                r.mean,
                pct(r.spread),
                vals.join(", ")
            );
        }
        *s += "\n";
    }
}

/// Parts 5 and 6: idle against loaded, this clock against the other.
fn pairs(s: &mut String, f: &Figures) {
    for (title, rows, a, b) in [
        (
            "### 5. Load independence (idle vs two CPU-bound host processes)",
            &f.load,
            "idle",
            "loaded",
        ),
        (
            "### 6. Agreement (this clock vs the other)",
            &f.agree,
            "this clock",
            "other clock",
        ),
    ] {
        if rows.is_empty() {
            continue;
        }
        let within = rows.iter().filter(|r| r.within_spread).count();
        let _ = writeln!(
            s,
            "{title}\n\n{within} of {} metrics change by no more than the larger run-to-run spread.\n\n| rate | metric | {a} | spread | {b} | spread | change | within spread |\n|---|---|---|---|---|---|---|---|",
            rows.len()
        );
        for r in rows.iter() {
            let _ = writeln!(
                s,
                "| {} | {} | {:.4} | {} | {:.4} | {} | {} | {} |",
                r.rate_mbit,
                r.metric,
                r.a_mean,
                pct(r.a_spread),
                r.b_mean,
                pct(r.b_spread),
                pct(r.change),
                if r.within_spread { "yes" } else { "no" }
            );
        }
        *s += "\n";
    }
}

/// Draws the ceiling (utilisation against rate) and Mathis (measured and model throughput
/// against p) charts under `dir/plots/`; returns the PNG paths.
///
/// Errors: a chart cannot be written.
pub fn plots(dir: &Path, r: &Report) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let f = &r.figures;
    if !f.ceiling.is_empty() {
        let mut rtts: Vec<f64> = f.ceiling.iter().map(|c| c.rtt_ms).collect();
        rtts.dedup();
        let mut series: Vec<Series> = rtts
            .iter()
            .map(|&rtt| Series {
                label: format!("{rtt} ms"),
                points: f
                    .ceiling
                    .iter()
                    .filter(|c| c.rtt_ms == rtt)
                    .map(|c| (c.rate_mbit, c.utilisation * 100.0))
                    .collect(),
                style: SeriesStyle::Points,
            })
            .collect();
        let (lo, hi) = f
            .ceiling
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(l, h), c| {
                (l.min(c.rate_mbit), h.max(c.rate_mbit))
            });
        series.push(Series {
            label: "ceiling criterion".into(),
            points: vec![
                (lo, TBF_UTILISATION * (1.0 - CEILING_TOLERANCE) * 100.0),
                (hi, TBF_UTILISATION * (1.0 - CEILING_TOLERANCE) * 100.0),
            ],
            style: SeriesStyle::Dashed,
        });
        let chart = Chart {
            title: format!(
                "Ceiling, one cubic flow ({})",
                ClockRecord::name_of(r.clock.as_ref())
            ),
            x_label: "bottleneck rate (Mbit/s)".into(),
            y_label: "goodput utilisation (%)".into(),
            log_x: true,
            series,
            ..Default::default()
        };
        out.push(render(&chart, &dir.join("plots").join("ceiling"))?.0);
    }
    if !f.mathis.is_empty() {
        let chart = Chart {
            title: format!(
                "Reno under random loss ({})",
                ClockRecord::name_of(r.clock.as_ref())
            ),
            x_label: "loss probability p".into(),
            y_label: "throughput (Mbit/s)".into(),
            log_x: true,
            log_y: true,
            series: vec![
                Series {
                    label: "measured".into(),
                    points: f
                        .mathis
                        .iter()
                        .map(|m| (m.p_achieved, m.measured_mbit))
                        .collect(),
                    style: SeriesStyle::Points,
                },
                Series {
                    label: "Mathis et al.".into(),
                    points: f
                        .mathis
                        .iter()
                        .map(|m| (m.p_achieved, m.model_mbit))
                        .collect(),
                    style: SeriesStyle::Dashed,
                },
            ],
            ..Default::default()
        };
        out.push(render(&chart, &dir.join("plots").join("mathis"))?.0);
    }
    Ok(out)
}
