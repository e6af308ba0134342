//! The HTML report of a results directory, `index.html`: its metadata, the summary tables of
//! `summary.md` with each metric's definition ([`cctl_metrics::names`]) on hover and in a
//! legend under its table, the expectations' verdicts, and every plot of the directory. One
//! self-contained page: no scripts, and no style sheets, fonts or images from elsewhere; the
//! plots are `<img>`s of the files beside it, by relative path. Text is escaped with
//! `html-escape`.
//!
//! ```text
//! <h1>  scenario (id) — title
//! Run           <dl>: source, algorithms and their parameters, profile, clock, seed, dates, version
//! notes         ci profile, invalid runs
//! Summary       per metric: <table> (caption <abbr title=definition>), legend under it
//! Expectations  PASS / FAIL / NOT RUN per [[expect]]
//! Plots         <figure><img src="plots/….png"></figure> per file
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use cctl_metrics::names;
use cctl_scenario::Scenario;
use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};

use crate::expect;
use crate::summary::{self, Summary};

/// The report's file name in a results directory.
pub const FILE: &str = "index.html";

/// Writes `dir/index.html` for summary `s` of scenario `sc`, showing every plot in `dir`
/// ([`plot_files`]); returns the file's path. Errors: `dir` unreadable or unwritable.
pub fn write(dir: &Path, s: &Summary, sc: &Scenario) -> Result<PathBuf> {
    let plots = plot_files(dir)?;
    let path = dir.join(FILE);
    std::fs::write(&path, render(s, sc, &plots))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// Writes `dir/index.html` from the directory's `summary.json` alone, for a directory
/// without its raw runs (a committed example): reads the summary back, finds its scenario
/// by `metadata.scenario_path`, else by name, and judges the scenario's expectations again.
/// Returns the summary and the file's path. Errors: no or unreadable `summary.json`, an
/// unknown scenario.
pub fn write_from_summary(dir: &Path) -> Result<(Summary, PathBuf)> {
    let file = dir.join("summary.json");
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let mut s: Summary =
        serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", file.display()))?;
    let m = &s.metadata;
    let sc = cctl_scenario::find(&m.scenario_path)
        .or_else(|_| cctl_scenario::find(&m.scenario))
        .with_context(|| format!("finding scenario {}", m.scenario))?;
    s.expectations = expect::evaluate(&sc.expectations, &s.row_means());
    let path = write(dir, &s, &sc)?;
    Ok((s, path))
}

/// A plot of a results directory, as paths relative to it with `/` between parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plot {
    /// The image shown: a `.png`, or an `.svg` that has no PNG beside it.
    pub image: String,
    /// The SVG of the same chart beside a PNG, if there is one.
    pub svg: Option<String>,
}

/// The plots of `dir`: every `.png` and `.svg` file in it and its subdirectories except
/// `runs/`, sorted by path, an SVG beside a PNG of the same name as that PNG's
/// [`Plot::svg`]. Errors: a directory that cannot be read.
pub fn plot_files(dir: &Path) -> Result<Vec<Plot>> {
    fn walk(dir: &Path, rel: &str, out: &mut Vec<String>) -> Result<()> {
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
        for e in entries {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            let rel = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type()?.is_dir() {
                if rel != "runs" {
                    walk(&e.path(), &rel, out)?;
                }
            } else if name.ends_with(".png") || name.ends_with(".svg") {
                out.push(rel);
            }
        }
        Ok(())
    }
    let mut all = Vec::new();
    walk(dir, "", &mut all)?;
    all.sort();
    let with = |stem: &str, ext: &str| Some(format!("{stem}.{ext}")).filter(|f| all.contains(f));
    Ok(all
        .iter()
        .filter_map(|p| match (p.strip_suffix(".png"), p.strip_suffix(".svg")) {
            (Some(stem), _) => Some(Plot {
                image: p.clone(),
                svg: with(stem, "svg"),
            }),
            (_, Some(stem)) if with(stem, "png").is_none() => Some(Plot {
                image: p.clone(),
                svg: None,
            }),
            _ => None,
        })
        .collect())
}

const STYLE: &str = "body{font-family:sans-serif;max-width:72em;margin:1em auto;padding:0 1em;\
color:#222}h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;margin-top:1.5em}\
dl{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}dt{font-weight:bold}\
dd{margin:0}table{border-collapse:collapse;margin:.5em 0}caption{text-align:left;\
font-weight:bold;padding:.3em 0}th,td{border:1px solid #ccc;padding:.2em .6em;\
text-align:right}th:first-child{text-align:left}abbr{text-decoration:underline dotted;\
cursor:help}.legend{font-size:.9em;color:#555;margin:0 0 1.2em}.note{background:#fff4d6;\
padding:.4em .8em}.pass{color:#17702a}.fail{color:#b00020}.not_run{color:#777}\
figure{margin:1em 0}img{max-width:100%;border:1px solid #eee}figcaption{font-size:.9em;\
color:#555}";

/// The page for summary `s` of scenario `sc` with `plots` (paths relative to the page).
pub fn render(s: &Summary, sc: &Scenario, plots: &[Plot]) -> String {
    let m = &s.metadata;
    let mut h = String::new();
    let heading = format!("{} ({}) — {}", m.scenario, m.id, sc.title);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        text(&heading),
        text(&heading)
    );
    metadata(&mut h, s, sc);
    notes(&mut h, s);
    tables(&mut h, s, sc);
    expectations(&mut h, &s.expectations);
    figures(&mut h, plots);
    let _ = write!(
        h,
        "<footer><p class=\"legend\">Written by cctl {}. Values are mean ± standard error \
         over repetitions; NC = not converged; – = no value. Every metric is defined in \
         the legend under its table.</p></footer>\n</body>\n</html>\n",
        text(&m.cctl_version)
    );
    h
}

/// `<dt>k</dt><dd>v</dd>`, both escaped.
fn item(h: &mut String, k: &str, v: &str) {
    let _ = writeln!(h, "<dt>{}</dt><dd>{}</dd>", text(k), text(v));
}

fn metadata(h: &mut String, s: &Summary, sc: &Scenario) {
    let m = &s.metadata;
    h.push_str("<h2 id=\"run\">Run</h2>\n<dl class=\"metadata\">\n");
    item(h, "scenario", &format!("{} ({})", m.scenario, m.id));
    item(h, "source", &sc.source);
    h.push_str("<dt>algorithms</dt><dd><ul>\n");
    for a in &m.algorithms {
        let under = m.under_test.is_empty() || m.under_test.contains(&a.requested);
        let _ = write!(
            h,
            "<li><b>{}</b> (kernel name {}, {}{})",
            text(&a.requested),
            text(&a.cc_name),
            text(&a.kind),
            if under { ", under test" } else { "" }
        );
        if !a.params.is_empty() {
            let params: Vec<String> = a.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = write!(
                h,
                " <details><summary>{} parameters</summary>{}</details>",
                a.params.len(),
                text(&params.join(", "))
            );
        }
        h.push_str("</li>\n");
    }
    h.push_str("</ul></dd>\n");
    item(h, "profile", &m.profile);
    item(h, "repetitions", &m.repeat.to_string());
    item(h, "seed", &m.seed.to_string());
    if let Some(p) = &m.points {
        let p: Vec<String> = p.iter().map(usize::to_string).collect();
        item(h, "points", &p.join(", "));
    }
    if let Some(d) = m.duration_s {
        item(h, "duration per run", &format!("{d} s"));
    }
    item(
        h,
        "clock",
        &m.clock.as_ref().map_or_else(
            || "real (not recorded)".to_string(),
            crate::record::ClockRecord::describe,
        ),
    );
    item(h, "kernel", &m.kernel);
    item(h, "cctl", &m.cctl_version);
    let started = i64::try_from(m.started_unix)
        .ok()
        .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
        .map_or_else(
            || m.started_unix.to_string(),
            |t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        );
    item(h, "started", &started);
    item(
        h,
        "runs",
        &format!(
            "{} of {} done{}, {} at a time",
            m.runs_done,
            m.runs_planned,
            if m.interrupted { " (interrupted)" } else { "" },
            m.jobs
        ),
    );
    if !m.merged_from.is_empty() {
        item(h, "merged from", &m.merged_from.join(", "));
    }
    for d in &m.deviations {
        item(h, "deviation", d);
    }
    h.push_str("</dl>\n");
}

fn notes(h: &mut String, s: &Summary) {
    if s.metadata.profile == "ci" {
        h.push_str(
            "<p class=\"note\"><b>ci profile</b>: a scaled-down smoke test; never compare \
             these numbers with the papers'.</p>\n",
        );
    }
    for r in &s.invalid_runs {
        let _ = writeln!(h, "<p class=\"note\"><b>{}</b></p>", text(&r.line()));
    }
}

/// One table per metric, as in summary.md: points as rows, algorithms as columns.
fn tables(h: &mut String, s: &Summary, sc: &Scenario) {
    h.push_str("<h2 id=\"summary\">Summary</h2>\n");
    let mut algos: Vec<&str> = s.rows.iter().map(|r| r.algo.as_str()).collect();
    algos.sort();
    algos.dedup();
    let mut points: Vec<usize> = s.rows.iter().map(|r| r.point).collect();
    points.sort();
    points.dedup();
    let selected = summary::selected(&summary::metric_names(s), &sc.metrics);
    if selected.is_empty() {
        h.push_str("<p>No metrics: the directory holds no completed run.</p>\n");
    }
    for name in selected {
        let (unit, definition) = names::definition(&name)
            .map_or(("–", "not defined in cctl_metrics::names"), |d| {
                (d.unit, d.definition)
            });
        let hover = format!("{definition} Unit: {unit}.");
        let _ = write!(
            h,
            "<table class=\"summary\">\n<caption><abbr title=\"{}\">{}</abbr></caption>\n\
             <thead><tr><th>point</th>",
            attr(&hover),
            text(&name)
        );
        for a in &algos {
            let _ = write!(h, "<th>{}</th>", text(a));
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for p in &points {
            let label = s
                .rows
                .iter()
                .find(|r| r.point == *p)
                .map(summary::point_label)
                .unwrap_or_default();
            let _ = write!(h, "<tr><th>{}</th>", text(&label));
            for a in &algos {
                let cell = s
                    .rows
                    .iter()
                    .find(|r| r.point == *p && r.algo == *a)
                    .and_then(|r| r.metrics.get(&name))
                    .map_or_else(|| "–".to_string(), summary::fmt_agg);
                let _ = write!(h, "<td>{}</td>", text(&cell));
            }
            h.push_str("</tr>\n");
        }
        let family = names::family_of(&name)
            .map(|f| format!(" {} {}: {}", f.id, f.title, f.measures))
            .unwrap_or_default();
        let _ = write!(
            h,
            "</tbody>\n</table>\n<p class=\"legend\"><b>{}</b> ({}): {}{}</p>\n",
            text(&name),
            text(unit),
            text(definition),
            text(&family)
        );
    }
}

fn expectations(h: &mut String, outcomes: &[expect::ExpectOutcome]) {
    if outcomes.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"expectations\">Expectations</h2>\n<ul class=\"expectations\">\n");
    for (o, line) in outcomes.iter().zip(expect::lines(outcomes)) {
        let class = match o.verdict {
            expect::Verdict::Pass => "pass",
            expect::Verdict::Fail => "fail",
            expect::Verdict::NotRun => "not_run",
        };
        let _ = writeln!(h, "<li class=\"{class}\">{}</li>", text(&line));
    }
    h.push_str("</ul>\n");
}

fn figures(h: &mut String, plots: &[Plot]) {
    h.push_str("<h2 id=\"plots\">Plots</h2>\n");
    if plots.is_empty() {
        h.push_str("<p>No plots in this directory.</p>\n");
    }
    for p in plots {
        let _ = write!(
            h,
            "<figure><img src=\"{}\" alt=\"{}\"><figcaption>{}",
            attr(&url_path(&p.image)),
            attr(&p.image),
            text(&p.image)
        );
        if let Some(svg) = &p.svg {
            let _ = write!(h, " (<a href=\"{}\">SVG</a>)", attr(&url_path(svg)));
        }
        h.push_str("</figcaption></figure>\n");
    }
}

/// `p` as a relative URL: bytes other than letters, digits and `-._~/@+` percent-encoded.
fn url_path(p: &str) -> String {
    let mut out = String::new();
    for b in p.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/@+".contains(&b) {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}
