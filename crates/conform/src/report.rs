//! What `cctl conform` writes: `conform.json` (every outcome with its comparison,
//! baseline and validity), `conform.md` (the table), and per (algorithm, script, RTT) an
//! overlay plot of the port's and the module's cwnd (PNG and SVG) and a CSV of both
//! trajectories step by step.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};

use super::{Outcome, Reference};
use cctl_plot as plot;

/// One line of `cctl conform --json`: an (algorithm, script, RTT) outcome.
#[derive(Debug, Clone, serde::Serialize)]
pub struct JsonLine<'a> {
    /// `key` or `key@profile`.
    pub algo: &'a str,
    /// `module` or `model`.
    pub reference: Reference,
    /// Script name.
    pub script: &'a str,
    /// Base RTT, ms.
    pub rtt_ms: f64,
    /// Steps compared.
    pub steps: usize,
    /// Steps with identical cwnd and ssthresh, %.
    pub identical_pct: f64,
    /// Largest |Δcwnd|, segments.
    pub max_abs_cwnd_diff: u32,
    /// First divergence, or null.
    pub first_divergence: Option<&'a super::verdict::Divergence>,
    /// `match`, `diverges` or `invalid`.
    pub verdict: &'a str,
}

impl Outcome {
    /// This outcome as a `--json` line.
    pub fn json_line(&self) -> JsonLine<'_> {
        JsonLine {
            algo: &self.algo,
            reference: self.reference,
            script: &self.script,
            rtt_ms: self.rtt_ms,
            steps: self.comparison.steps,
            identical_pct: self.comparison.identical_pct,
            max_abs_cwnd_diff: self.comparison.max_abs_cwnd_diff,
            first_divergence: self.comparison.first_divergence.as_ref(),
            verdict: &self.verdict,
        }
    }

    fn stem(&self) -> String {
        format!(
            "{}_{}_{}ms",
            self.algo.replace('@', "-"),
            self.script,
            self.rtt_ms
        )
    }
}

fn ca(s: u8) -> &'static str {
    match s {
        0 => "Open",
        1 => "Disorder",
        2 => "CWR",
        3 => "Recovery",
        4 => "Loss",
        _ => "?",
    }
}

/// The results table in Markdown.
pub fn markdown(outcomes: &[Outcome], kernel: &str) -> String {
    let mut md = String::new();
    let _ = writeln!(
        md,
        "# cctl conform\n\nkernel {kernel}; port vs reference, one ACK per step.\n"
    );
    let _ = writeln!(
        md,
        "| algorithm | ref | script | RTT ms | steps | identical % | max abs Δcwnd | first divergence (step: port / ref cwnd,ssthresh,state) | module vs itself: first div., max abs Δcwnd | ACK lateness p99/max us | verdict |"
    );
    let _ = writeln!(md, "|---|---|---|---:|---:|---:|---:|---|---|---|---|");
    for o in outcomes {
        let c = &o.comparison;
        let fd = match &c.first_divergence {
            None => "none".to_string(),
            Some(d) => {
                let st = |x: &Option<super::lockstep::StepState>| {
                    x.map_or("-".to_string(), |s| {
                        format!("{},{},{}", s.cwnd, fmt_ssthresh(s.ssthresh), ca(s.ca_state))
                    })
                };
                let mut t = format!("{} ({:.1} ms): {} / {}", d.step, d.t_ms, st(&d.a), st(&d.b));
                if let Some(v) = &d.vars {
                    let _ = write!(t, "; port: {v}");
                }
                t
            }
        };
        let base = if o.baseline.is_empty() {
            "-".into()
        } else {
            let first = o
                .baseline
                .iter()
                .filter_map(|b| b.first_divergence.as_ref().map(|d| d.step))
                .min()
                .map_or("none".to_string(), |s| s.to_string());
            let max = o
                .baseline
                .iter()
                .map(|b| b.max_abs_cwnd_diff)
                .max()
                .unwrap_or(0);
            format!("{first}, {max} ({} runs)", o.baseline.len())
        };
        let late = o
            .runs
            .iter()
            .map(|r| {
                format!(
                    "{}/{} ({:.0} us/step)",
                    r.validity.late_p99_us, r.validity.late_max_us, r.validity.busy_us_per_step
                )
            })
            .collect::<Vec<_>>()
            .join(" ");
        let mut v = o.verdict.clone();
        if let Some(w) = &o.why {
            let _ = write!(v, ": {w}");
        }
        if o.kernel_ssthresh_fault {
            v.push_str(" (kernel ssthresh fault seen: README, Known problems)");
        }
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {} | {} |",
            o.algo,
            match o.reference {
                Reference::Module => o.module_cc.as_deref().unwrap_or("module"),
                Reference::Model => "model",
            },
            o.script,
            o.rtt_ms,
            c.steps,
            c.identical_pct,
            c.max_abs_cwnd_diff,
            fd,
            base,
            late,
            v
        );
    }
    md
}

fn fmt_ssthresh(s: u32) -> String {
    if s >= 0x7fff_ffff {
        "inf".into()
    } else {
        s.to_string()
    }
}

/// Writes `conform.json`, `conform.md`, `lines.jsonl` (the `--json` lines) and each
/// outcome's CSV into `dir`; [`render_plots`] draws the plots from them.
///
/// Errors: a file that cannot be written.
pub fn write_all(dir: &Path, outcomes: &[Outcome], kernel: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::json!({
        "kernel": kernel,
        "cctl_version": env!("CARGO_PKG_VERSION"),
        "outcomes": outcomes.iter().map(|o| {
            let mut v = serde_json::to_value(o).unwrap_or_default();
            // Trajectories go to the CSVs; keep validity and receiver counters here.
            if let Some(runs) = v.get_mut("runs").and_then(|r| r.as_array_mut()) {
                for r in runs {
                    if let Some(sides) = r.get_mut("sides").and_then(|s| s.as_array_mut()) {
                        for s in sides {
                            if let Some(m) = s.as_object_mut() {
                                let n = m.remove("steps").and_then(|x| x.as_array().map(|a| a.len())).unwrap_or(0);
                                m.insert("steps".into(), n.into());
                            }
                        }
                    }
                }
            }
            v
        }).collect::<Vec<_>>(),
    });
    let p = dir.join("conform.json");
    std::fs::write(&p, serde_json::to_string_pretty(&json)? + "\n")
        .with_context(|| format!("writing {}", p.display()))?;
    let p = dir.join("conform.md");
    std::fs::write(&p, markdown(outcomes, kernel))
        .with_context(|| format!("writing {}", p.display()))?;
    for o in outcomes {
        let Some(run) = o.runs.first() else { continue };
        let port = &run.sides[0];
        let module = run.sides.get(1).unwrap_or(port);
        let mut csv = String::from(
            "step,t_ms,port_cwnd,port_ssthresh,port_ca_state,ref_cwnd,ref_ssthresh,ref_ca_state\n",
        );
        for k in 0..port.steps.len().max(module.steps.len()) {
            let (a, b) = (port.steps.get(k), module.steps.get(k));
            let t = a.or(b).map_or(0.0, |s| s.t_us as f64 / 1000.0);
            let f = |x: Option<&super::lockstep::StepState>| {
                x.map_or(",,".to_string(), |s| {
                    format!("{},{},{}", s.cwnd, s.ssthresh, s.ca_state)
                })
            };
            let _ = writeln!(csv, "{k},{t:.3},{},{}", f(a), f(b));
        }
        let p = dir.join(format!("{}.csv", o.stem()));
        std::fs::write(&p, csv).with_context(|| format!("writing {}", p.display()))?;
    }
    let mut lines = String::new();
    for o in outcomes {
        lines.push_str(&serde_json::to_string(&o.json_line())?);
        lines.push('\n');
    }
    let p = dir.join("lines.jsonl");
    std::fs::write(&p, lines).with_context(|| format!("writing {}", p.display()))?;
    Ok(())
}

/// Draws each outcome's cwnd overlay (`<stem>.png`, `<stem>.svg`) from `conform.json` and
/// the CSVs [`write_all`] wrote into `dir`. Kept apart so that a run in the TCG guest can
/// leave the drawing (~1.5 s a chart there) to the host.
///
/// Errors: a missing or unreadable file, a plot that cannot be drawn (no font).
pub fn render_plots(dir: &Path) -> Result<()> {
    let p = dir.join("conform.json");
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?,
    )
    .with_context(|| format!("parsing {}", p.display()))?;
    for o in json["outcomes"].as_array().into_iter().flatten() {
        let text = |k: &str| o[k].as_str().unwrap_or("?").to_string();
        let (algo, script) = (text("algo"), text("script"));
        let rtt_ms = o["rtt_ms"].as_f64().unwrap_or(0.0);
        let stem = format!("{}_{}_{}ms", algo.replace('@', "-"), script, rtt_ms);
        let csv = dir.join(format!("{stem}.csv"));
        let rows =
            std::fs::read_to_string(&csv).with_context(|| format!("reading {}", csv.display()))?;
        let (mut port, mut reference) = (Vec::new(), Vec::new());
        for row in rows.lines().skip(1) {
            let f: Vec<&str> = row.split(',').collect();
            let t_s = f.get(1).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0) / 1000.0;
            if let Some(c) = f.get(2).and_then(|x| x.parse::<f64>().ok()) {
                port.push((t_s, c));
            }
            if let Some(c) = f.get(5).and_then(|x| x.parse::<f64>().ok()) {
                reference.push((t_s, c));
            }
        }
        let port_cc = text("port_cc");
        let module_cc = o["module_cc"].as_str();
        let mut notes = vec![format!("verdict: {}", text("verdict"))];
        if let Some(d) = o["comparison"]["first_divergence"].as_object() {
            notes.push(format!(
                "first divergence: step {} at {:.1} ms",
                d["step"],
                d["t_ms"].as_f64().unwrap_or(0.0)
            ));
        }
        let mut series = vec![(format!("{port_cc} (port)"), port)];
        if let Some(m) = module_cc {
            series.push((format!("{m} (module)"), reference));
        }
        let chart = plot::cwnd_history(
            &format!(
                "{port_cc} vs {}: {script} at {rtt_ms} ms",
                module_cc.unwrap_or("its model")
            ),
            &series,
            &notes,
        );
        plot::render(&chart, &dir.join(&stem))?;
    }
    Ok(())
}
