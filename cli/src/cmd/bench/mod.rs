//! `cctl bench`: the papers' benchmark tests on a veth/netem dumbbell — list the
//! scenarios, run one, rebuild a report, gate on a baseline, compare two runs.

mod calibrate;
mod diff;
mod dry_run;
mod gate;
mod guest;
mod metrics;
mod perf;
mod run;

use std::path::{Path, PathBuf};

use anyhow::Result;
use cctl_report::check::SummaryFile;
use cctl_report::expect;
use cctl_report::summary;
use cctl_scenario::{self as scenario, Profile};

use crate::exit::{self, usage};
use crate::out::{out, outln};

/// Arguments of `cctl bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, clap::Subcommand)]
enum Cmd {
    /// The shipped scenarios (one per test of benchmarks.md).
    List(ListArgs),
    /// Run a scenario for one or more algorithms.
    Run(Box<run::RunArgs>),
    /// Rebuild summary.json, summary.md and the plots of a results directory (with --html,
    /// also index.html).
    Report(ReportArgs),
    /// Combine results directories of one sweep (shards, resumed parts) into one report.
    Merge(MergeArgs),
    /// Compare a summary.json with a baseline, metric by metric; exit 8 when one is outside
    /// its tolerance or missing.
    Check(CheckArgs),
    /// Compare two results directories sample by sample; print the first place they
    /// differ (run, flow, time, field, both values) or "identical"; exit 1 when they differ.
    Diff(diff::DiffArgs),
    /// cctl's own costs next to their references: BPF ports vs native modules per ACK,
    /// the collector vs `ss -ti`, migration, the testbed's ceiling.
    Perf(perf::PerfArgs),
    /// The testbed's acceptance test on one clock: ceiling, path exactness, Reno against
    /// theory, repeatability, load independence, agreement with the other clock.
    Calibrate(calibrate::CalibrateArgs),
    /// What each metric of summary.json means: the families M1-M17 and every metric name
    /// with its unit and definition, and the scenarios that list each family.
    Metrics(metrics::MetricsArgs),
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: cctl bench check results/check-baseline/20261126T011247Z \
--baseline cli/tests/fixtures/summary.json --tolerance docs/examples/tolerance.toml\n\n\
Each metric's mean is within when |result - baseline| <= max(abs, rel * |baseline|), with \
the tolerance of its name in the TOML file, e.g.\n\
  default = { rel = 0.1 }\n\
  \"M8 utilisation (wire)\" = { rel = 0.05 }\n\
  \"M1 flow1 (Mbit/s)\" = { rel = 0.1, abs = 0.5 }\n\n\
An omitted rel or abs is 0; without a file or a `default`, metrics get rel 0.1, abs 0. \
Results and a baseline that are virtual-clock runs of the same cctl build, QEMU and guest \
kernel are exact: their runs' digests are compared first (a line `digests: K of N runs \
identical`, a DIGEST line per run that differs), and without a file every metric must be \
equal (tolerance 0). Rows match by algorithm, point index and point parameters; a baseline point or metric the \
results lack fails the check, extra ones do not. Exit codes: 0 within, 8 outside or \
missing, 2 bad input."
)]
struct CheckArgs {
    /// The results: a summary.json or a results directory holding one.
    results: PathBuf,
    /// The baseline: a summary.json or a results directory holding one.
    #[arg(long)]
    baseline: PathBuf,
    /// Tolerances (TOML): `"metric name" = { rel = 0.1, abs = 0.5 }`, `default = {...}`.
    #[arg(long, value_name = "FILE")]
    tolerance: Option<PathBuf>,
    /// Print the verdict as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: cctl bench merge results/shard-1 results/shard-2 results/shard-3 --out results/merged\n\
The inputs must be parts of one sweep (same scenario, profile, seed, repeat, points, algorithms \
with their parameters, cctl version and kernel). Runs no input completed are listed as missing."
)]
struct MergeArgs {
    /// Results directories to combine.
    #[arg(required = true)]
    dirs: Vec<PathBuf>,
    /// The merged directory (new, or empty).
    #[arg(long)]
    out: PathBuf,
    /// Print the summary as JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    /// A results directory (`results/<scenario>/<timestamp>`).
    dir: PathBuf,
    /// Exit 8 when one of the scenario's expectations (`[[expect]]`) fails.
    #[arg(long)]
    strict: bool,
    /// Print the summary (summary.json's content) as one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write DIR/index.html: the summary tables with every metric's definition, the
    /// expectations and the plots, one page. A directory with only a summary.json (no
    /// metadata.json or runs, like the examples in docs/results/) gets index.html alone.
    #[arg(long)]
    html: bool,
}

/// Refuses (exit 2) a directory that holds no results of `cctl bench run`.
fn results_dir(d: &Path) -> Result<()> {
    if !d.join("metadata.json").is_file() {
        usage!(
            "{} is not a results directory: it has no metadata.json (give directories \
             written by `cctl bench run`, e.g. results/<scenario>/<timestamp> or a \
             --resume directory)",
            d.display()
        );
    }
    Ok(())
}

/// Runs `cctl bench`.
pub fn run(args: Args) -> Result<i32> {
    match args.cmd {
        Cmd::List(a) => list(a),
        Cmd::Run(a) => run::run(*a),
        Cmd::Perf(a) => perf::run(a),
        Cmd::Calibrate(a) => calibrate::run(a),
        Cmd::Merge(a) => merge(a),
        Cmd::Diff(a) => diff::run(a),
        Cmd::Metrics(a) => metrics::run(a),
        Cmd::Check(a) => {
            let baseline = SummaryFile::load(&a.baseline)?;
            let tol = gate::load_tolerances(a.tolerance.as_deref())?;
            gate::gate(&a.results, &baseline, tol.as_ref(), a.json)
        }
        Cmd::Report(a) => {
            let (s, sc) = if a.html && !a.dir.join("metadata.json").is_file() {
                if !a.dir.join("summary.json").is_file() {
                    results_dir(&a.dir)?;
                }
                let (s, page) = cctl_report::html::write_from_summary(&a.dir)?;
                eprintln!(
                    "cctl bench report: {} has no metadata.json: {} from its summary.json \
                     alone; the summary and plots stay as they are",
                    a.dir.display(),
                    page.display()
                );
                let sc = scenario::find(&s.metadata.scenario_path)
                    .or_else(|_| scenario::find(&s.metadata.scenario))?;
                (s, sc)
            } else {
                results_dir(&a.dir)?;
                let s = cctl_report::write::rebuild(&a.dir, cctl_bench::resolve::native_of)?;
                let sc = scenario::find(&s.metadata.scenario_path)
                    .or_else(|_| scenario::find(&s.metadata.scenario))?;
                if a.html {
                    cctl_report::html::write(&a.dir, &s, &sc)?;
                }
                (s, sc)
            };
            if a.json {
                outln!("{}", serde_json::to_string(&s)?)?;
            } else {
                out!("{}", summary::terminal_table(&s, &sc.metrics))?;
                for l in expect::lines(&s.expectations) {
                    outln!("{l}")?;
                }
                outln!("report: {}", a.dir.join("summary.md").display())?;
                if a.html {
                    outln!("html: {}", a.dir.join(cctl_report::html::FILE).display())?;
                }
            }
            if a.strict && expect::any_failed(&s.expectations) {
                return Ok(exit::REGRESSION);
            }
            Ok(exit::OK)
        }
    }
}

fn list(a: ListArgs) -> Result<i32> {
    let all = scenario::builtin();
    for sc in &all {
        let ci = sc.total_duration_s(Profile::Ci).unwrap_or(f64::NAN);
        let paper = sc.total_duration_s(Profile::Paper).unwrap_or(f64::NAN);
        if a.json {
            let line = serde_json::json!({
                "format": cctl_loader::JSON_FORMAT, "id": sc.id, "name": sc.name, "title": sc.title, "source": sc.source,
                "metrics": sc.metrics, "plots": sc.plots,
                "ci_seconds_per_algo": ci, "paper_seconds_per_algo": paper,
            });
            outln!("{line}")?;
        } else {
            outln!(
                "{:<5} {:<28} {:<58} ci {:>5.0} s, paper {:>7.1} h per algorithm",
                sc.id,
                sc.name,
                sc.title,
                ci,
                paper / 3600.0
            )?;
        }
    }
    Ok(exit::OK)
}

fn merge(a: MergeArgs) -> Result<i32> {
    for d in &a.dirs {
        results_dir(d)?;
    }
    let m = cctl_report::merge::merge(&a.dirs, &a.out, cctl_bench::resolve::native_of)?;
    let sc = scenario::find(&m.summary.metadata.scenario_path)
        .or_else(|_| scenario::find(&m.summary.metadata.scenario))?;
    if a.json {
        for r in &m.summary.rows {
            outln!("{}", serde_json::to_string(r)?)?;
        }
    } else {
        out!("{}", summary::terminal_table(&m.summary, &sc.metrics))?;
    }
    for id in &m.missing {
        outln!("missing: {id}")?;
    }
    for (id, dirs) in &m.duplicates {
        let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        outln!("duplicate: {id} in {}", dirs.join(", "))?;
    }
    outln!(
        "merged {} directories: {} runs of {} planned, {} missing, {} duplicated",
        a.dirs.len(),
        m.runs,
        m.runs + m.missing.len(),
        m.missing.len(),
        m.duplicates.len()
    )?;
    outln!("results: {}", m.dir.display())?;
    Ok(exit::OK)
}
