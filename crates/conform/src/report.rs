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
    /// The layout's version, [`cctl_loader::JSON_FORMAT`].
    pub format: u32,
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
    /// Largest cwnd either sender reached, segments.
    pub max_cwnd: u32,
    /// The whole run: mean |Δcwnd|, mean and largest |Δssthresh|, mean cwnd ratio
    /// port/reference, share of steps in the same CA state (absent for model checks).
    #[serde(flatten)]
    pub drift: Option<&'a super::verdict::Drift>,
    /// First divergence, or null.
    pub first_divergence: Option<&'a super::verdict::Divergence>,
    /// The module against itself over the case's baseline runs (the worst of each figure),
    /// or null when none ran (the port was identical to its module, or a model check).
    pub module_spread: Option<super::verdict::Spread>,
    /// `match`, `diverges` or `invalid`.
    pub verdict: &'a str,
    /// Why it does not match or the run is invalid (or how a clocked port's re-run
    /// matched), or null.
    pub why: Option<&'a str>,
}

impl Outcome {
    /// This outcome as a `--json` line.
    pub fn json_line(&self) -> JsonLine<'_> {
        JsonLine {
            format: cctl_loader::JSON_FORMAT,
            algo: &self.algo,
            reference: self.reference,
            script: &self.script,
            rtt_ms: self.rtt_ms,
            steps: self.comparison.steps,
            identical_pct: self.comparison.identical_pct,
            max_abs_cwnd_diff: self.comparison.max_abs_cwnd_diff,
            max_cwnd: self.comparison.max_cwnd,
            drift: self.comparison.drift.as_ref(),
            first_divergence: self.comparison.first_divergence.as_ref(),
            module_spread: self.spread(),
            verdict: &self.verdict,
            why: self.why.as_deref(),
        }
    }

    /// The module against itself over the baseline runs, if any ran.
    pub fn spread(&self) -> Option<super::verdict::Spread> {
        (!self.baseline.is_empty()).then(|| super::verdict::Spread::of(&self.baseline))
    }

    fn stem(&self) -> String {
        stem(&self.algo, &self.script, self.rtt_ms)
    }
}

/// A case's file stem: `<algo>_<script>_<rtt>ms`, the label's `@`, brackets and the
/// like made `-`.
fn stem(algo: &str, script: &str, rtt_ms: f64) -> String {
    let algo: String = algo
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '=' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{}_{script}_{rtt_ms}ms", algo.trim_end_matches('-'))
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
        "| algorithm | ref | script | RTT ms | max cwnd | steps | identical % | first divergence (step: port / ref cwnd,ssthresh,state) | abs Δcwnd mean/max | abs Δssthresh mean/max | cwnd ratio | same CA state % | module vs itself: first div.; abs Δcwnd mean/max; abs Δssthresh mean/max; ratio; same CA % | ACK lateness p99/max us | verdict |"
    );
    let _ = writeln!(
        md,
        "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---|---|"
    );
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
        let base = match o.spread() {
            None => "-".to_string(),
            Some(b) => format!(
                "{}; {:.2}/{}; {:.2}/{}; 1 ± {:.4}; {:.2} ({} run{})",
                b.first_divergence
                    .map_or("none".to_string(), |s| s.to_string()),
                b.mean_abs_cwnd_diff,
                b.max_abs_cwnd_diff,
                b.mean_abs_ssthresh_diff,
                b.max_abs_ssthresh_diff,
                b.cwnd_ratio_dev,
                b.same_ca_state_pct,
                b.runs,
                if b.runs == 1 { "" } else { "s" }
            ),
        };
        let (dcwnd, dss, ratio, same_ca) = match &c.drift {
            Some(d) => (
                format!("{:.2}/{}", d.mean_abs_cwnd_diff, c.max_abs_cwnd_diff),
                format!(
                    "{:.2}/{}",
                    d.mean_abs_ssthresh_diff, d.max_abs_ssthresh_diff
                ),
                format!("{:.4}", d.mean_cwnd_ratio),
                format!("{:.2}", d.same_ca_state_pct),
            ),
            None => (
                format!("-/{}", c.max_abs_cwnd_diff),
                "-".to_string(),
                "-".to_string(),
                "-".to_string(),
            ),
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
            v.push_str(" (kernel ssthresh fault seen: docs/explanation/known-problems.md)");
        }
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {:.2} | {} | {} | {} | {} | {} | {} | {} | {} |",
            o.algo,
            match o.reference {
                Reference::Module => o.module_cc.as_deref().unwrap_or("module"),
                Reference::Model => "model",
            },
            o.script,
            o.rtt_ms,
            c.max_cwnd,
            c.steps,
            c.identical_pct,
            fd,
            dcwnd,
            dss,
            ratio,
            same_ca,
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
        "cctl_version": cctl_loader::version(),
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

/// Combines `parts`, results directories [`write_all`] wrote for shares of the subjects
/// (guests side by side), into `dir`: `conform.json` with every part's outcomes,
/// `lines.jsonl` and the rows of `conform.md` in the order of `labels` (the subjects'
/// [`Subject::label`](super::Subject::label)s, the order one guest runs them in), and the
/// parts' CSVs moved into `dir`. Returns the number of outcomes.
///
/// Errors: a part without its files, a part whose three files disagree on the number of
/// outcomes, an outcome of an algorithm not in `labels`, a file that cannot be written.
pub fn combine(dir: &Path, parts: &[std::path::PathBuf], labels: &[String]) -> Result<usize> {
    let read = |p: std::path::PathBuf| {
        std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))
    };
    let mut kernel = serde_json::Value::Null;
    let mut header: Vec<String> = Vec::new();
    // (position of the algorithm in `labels`, outcome, --json line, table row)
    let mut all: Vec<(usize, serde_json::Value, String, String)> = Vec::new();
    for part in parts {
        let json: serde_json::Value = serde_json::from_str(&read(part.join("conform.json"))?)
            .with_context(|| format!("parsing {}", part.join("conform.json").display()))?;
        let outcomes = json["outcomes"].as_array().cloned().unwrap_or_default();
        let lines: Vec<String> = read(part.join("lines.jsonl"))?
            .lines()
            .map(str::to_string)
            .collect();
        let md = read(part.join("conform.md"))?;
        let sep = md
            .lines()
            .position(|l| l.starts_with("|---"))
            .with_context(|| format!("{}: no table", part.join("conform.md").display()))?;
        if header.is_empty() {
            header = md.lines().take(sep + 1).map(str::to_string).collect();
            kernel = json["kernel"].clone();
        }
        let rows: Vec<String> = md.lines().skip(sep + 1).map(str::to_string).collect();
        if lines.len() != outcomes.len() || rows.len() != outcomes.len() {
            anyhow::bail!(
                "{}: {} outcomes in conform.json, {} lines in lines.jsonl, {} rows in conform.md",
                part.display(),
                outcomes.len(),
                lines.len(),
                rows.len()
            );
        }
        for ((o, l), r) in outcomes.into_iter().zip(lines).zip(rows) {
            let algo = o["algo"].as_str().unwrap_or("?");
            let at = labels.iter().position(|x| x == algo).with_context(|| {
                format!(
                    "{}: outcome of {algo}, not one of {labels:?}",
                    part.display()
                )
            })?;
            all.push((at, o, l, r));
        }
        for e in std::fs::read_dir(part).with_context(|| format!("listing {}", part.display()))? {
            let p = e?.path();
            if p.extension().is_some_and(|x| x == "csv") {
                let to = dir.join(p.file_name().expect("a file name"));
                std::fs::rename(&p, &to)
                    .with_context(|| format!("moving {} to {}", p.display(), to.display()))?;
            }
        }
    }
    // Stable: a part's outcomes of one algorithm keep their order.
    all.sort_by_key(|x| x.0);
    let json = serde_json::json!({
        "kernel": kernel,
        "cctl_version": cctl_loader::version(),
        "outcomes": all.iter().map(|x| x.1.clone()).collect::<Vec<_>>(),
    });
    let write = |name: &str, text: String| {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))
    };
    write("conform.json", serde_json::to_string_pretty(&json)? + "\n")?;
    let joined = |f: fn(&(usize, serde_json::Value, String, String)) -> &String| {
        all.iter().map(|x| f(x).clone() + "\n").collect::<String>()
    };
    write("lines.jsonl", joined(|x| &x.2))?;
    write(
        "conform.md",
        header.iter().map(|h| h.clone() + "\n").collect::<String>() + &joined(|x| &x.3),
    )?;
    Ok(all.len())
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
        let stem = stem(&algo, &script, rtt_ms);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields docs/reference/json.md lists in the table under `heading`.
    fn documented(heading: &str) -> Vec<String> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/reference/json.md");
        let text = std::fs::read_to_string(path).unwrap();
        let mut lines = text.lines().skip_while(|l| *l != heading).skip(1);
        lines
            .by_ref()
            .skip_while(|l| !l.starts_with('|'))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.split('`').nth(1).expect("| `field` | ...").to_string())
            .collect()
    }

    #[test]
    fn a_json_line_has_the_format_version_and_exactly_the_documented_fields() {
        let drift = crate::verdict::Drift {
            mean_abs_cwnd_diff: 0.5,
            max_abs_ssthresh_diff: 1,
            mean_abs_ssthresh_diff: 0.25,
            mean_cwnd_ratio: 1.0,
            ref_mean_cwnd: 20.0,
            same_ca_state_pct: 100.0,
        };
        let line = JsonLine {
            format: cctl_loader::JSON_FORMAT,
            algo: "htcp",
            reference: Reference::Module,
            script: "loss-once",
            rtt_ms: 10.0,
            steps: 100,
            identical_pct: 99.0,
            max_abs_cwnd_diff: 2,
            max_cwnd: 40,
            drift: Some(&drift),
            first_divergence: None,
            module_spread: None,
            verdict: "match",
            why: None,
        };
        let v = serde_json::to_value(&line).unwrap();
        assert_eq!(v["format"], 1);
        let mut got: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        let mut want = documented("## `cctl conform --json`");
        got.sort();
        want.sort();
        assert_eq!(got, want);
    }

    /// A part as [`write_all`] lays it out, with one outcome per algorithm in `algos`.
    fn part(dir: &Path, algos: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        let outcomes: Vec<serde_json::Value> = algos
            .iter()
            .map(|a| serde_json::json!({ "algo": a, "script": "s" }))
            .collect();
        let json = serde_json::json!({ "kernel": "6.12", "outcomes": outcomes });
        std::fs::write(dir.join("conform.json"), json.to_string()).unwrap();
        let lines: String = algos
            .iter()
            .map(|a| format!("{{\"algo\":\"{a}\"}}\n"))
            .collect();
        std::fs::write(dir.join("lines.jsonl"), lines).unwrap();
        let rows: String = algos.iter().map(|a| format!("| {a} | row |\n")).collect();
        std::fs::write(
            dir.join("conform.md"),
            format!("# t\n\n| h | h |\n|---|---|\n{rows}"),
        )
        .unwrap();
        for a in algos {
            std::fs::write(dir.join(format!("{a}_s_10ms.csv")), "step\n").unwrap();
        }
    }

    #[test]
    fn parts_combine_in_the_order_of_one_guest() {
        let dir = std::env::temp_dir().join(format!("cctl-combine-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (p1, p2) = (dir.join("guests/1"), dir.join("guests/2"));
        part(&p1, &["cubic", "cubic", "vegas"]);
        part(&p2, &["reno", "htcp"]);
        let labels: Vec<String> = ["reno", "cubic", "htcp", "vegas"].map(String::from).into();
        assert_eq!(
            combine(&dir, &[p1.clone(), p2.clone()], &labels).unwrap(),
            5
        );
        let order = |text: String| -> Vec<String> {
            text.lines()
                .filter_map(|l| l.split('"').nth(3).map(str::to_string))
                .collect()
        };
        let want = ["reno", "cubic", "cubic", "htcp", "vegas"].map(String::from);
        assert_eq!(
            order(std::fs::read_to_string(dir.join("lines.jsonl")).unwrap()),
            want
        );
        let md = std::fs::read_to_string(dir.join("conform.md")).unwrap();
        assert!(
            md.starts_with("# t\n\n| h | h |\n|---|---|\n| reno | row |\n| cubic |"),
            "{md}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("conform.json")).unwrap())
                .unwrap();
        assert_eq!(json["kernel"], "6.12");
        assert_eq!(json["outcomes"][3]["algo"], "htcp");
        for a in ["reno", "cubic", "htcp", "vegas"] {
            assert!(
                dir.join(format!("{a}_s_10ms.csv")).is_file(),
                "{a}'s CSV moved"
            );
        }
        assert!(!p1.join("vegas_s_10ms.csv").exists());

        // An outcome of an algorithm nobody asked for, and files that disagree.
        part(&p2, &["bic"]);
        let e = combine(&dir, std::slice::from_ref(&p2), &labels).unwrap_err();
        assert!(format!("{e:#}").contains("outcome of bic"), "{e:#}");
        std::fs::write(p2.join("lines.jsonl"), "").unwrap();
        let e = combine(&dir, &[p2], &labels).unwrap_err();
        assert!(format!("{e:#}").contains("0 lines in lines.jsonl"), "{e:#}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
