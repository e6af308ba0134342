//! `cctl bench`: the papers' benchmark tests on a veth/netem dumbbell — list the
//! scenarios, run one, rebuild a report, gate on a baseline.

mod calibrate;
mod guest;
mod perf;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cctl_bench::execute::run_scenario;
use cctl_bench::network::{check_supported, path_for};
use cctl_bench::resolve::{check_algorithms, RunKernel};
use cctl_bench::run::RunOptions;
use cctl_netem::slot::MAX_JOBS;
use cctl_netem::testbed::netem_available;
use cctl_report::check::{self, SummaryFile, Tolerances};
use cctl_report::expect;
use cctl_report::record::read_records;
use cctl_report::runs::{point_indices, run_list, Shard};
use cctl_report::summary;
use cctl_scenario::{self as scenario, Profile};
use cctl_vm as vm;

use crate::cmd::args::{
    check_clock, clock_parser, real, unique_algos, whole, VmMode, MAX_DURATION_S, MAX_INTERVAL_MS,
};
use crate::exit::{self, usage};
use crate::out::{out, outln};

/// The most repetitions per point `bench run --repeat` takes (the paper profiles' most is 20).
const MAX_REPEAT: i128 = 1000;

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
    Run(Box<RunArgs>),
    /// Rebuild summary.json, summary.md and the plots of a results directory.
    Report(ReportArgs),
    /// Combine results directories of one sweep (shards, resumed parts) into one report.
    Merge(MergeArgs),
    /// Compare a summary.json with a baseline, metric by metric; exit 8 when one is outside
    /// its tolerance or missing.
    Check(CheckArgs),
    /// cctl's own costs next to their references: BPF ports vs native modules per ACK,
    /// the collector vs `ss -ti`, migration, the testbed's ceiling.
    Perf(perf::PerfArgs),
    /// The testbed's acceptance test on one clock: ceiling, path exactness, Reno against
    /// theory, repeatability, load independence, agreement with the other clock.
    Calibrate(calibrate::CalibrateArgs),
}

#[derive(Debug, clap::Args)]
struct ListArgs {
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: cctl bench run fairness-same-rtt --algo reno,htcp --profile ci\n\
Results go to <out>/<scenario>/<UTC timestamp>/. The ci profile is a scaled-down smoke test: \
never compare its numbers with the papers'."
)]
struct RunArgs {
    /// Scenario name, test id (t0.1) or path to a TOML file (`cctl bench list`).
    scenario: String,
    /// Algorithms under test, comma-separated: cctl keys (htcp → bpf_htcp) or kernel names (cubic).
    #[arg(long, value_delimiter = ',', required = true)]
    algo: Vec<String>,
    /// Scale profile.
    #[arg(long, default_value = "ci")]
    profile: String,
    /// Repetitions per point (default: the profile's); allowed 1 to 1000.
    #[arg(long, value_parser = whole::<u32>(1, Some(MAX_REPEAT), ""))]
    repeat: Option<u32>,
    /// Only these points of the sweep, comma-separated indices as --dry-run lists them
    /// (default: every point), e.g. to repeat one case; allowed 0 or more, up to the
    /// sweep's last index.
    #[arg(long, value_delimiter = ',', value_parser = whole::<usize>(0, None, ""))]
    points: Option<Vec<usize>>,
    /// Results root directory.
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Base seed of random start times (default: the scenario's); allowed 0 to
    /// 18446744073709551615.
    #[arg(long, value_parser = whole::<u64>(0, Some(u64::MAX.into()), ""))]
    seed: Option<u64>,
    /// Collector interval per flow, ms; allowed 1 to 60000.
    #[arg(long, default_value_t = 100, value_parser = whole::<u64>(1, Some(MAX_INTERVAL_MS), "ms"))]
    interval_ms: u64,
    /// Bottleneck qdisc sampling interval, ms; allowed 1 to 60000.
    #[arg(long, default_value_t = 100, value_parser = whole::<u64>(1, Some(MAX_INTERVAL_MS), "ms"))]
    queue_interval_ms: u64,
    /// Per-packet delay taps: time 1 TCP packet in N on its way (sender, bottleneck,
    /// receiver) for one-way delays and sojourn times; 1 = every packet, 0 = off; allowed 0
    /// to 1000000.
    #[arg(
        long,
        default_value_t = cctl_bench::run::DELAY_SAMPLE_DEFAULT,
        value_name = "N",
        value_parser = whole::<u32>(0, Some(1_000_000), "")
    )]
    delay_sample: u32,
    /// Where to run: auto (VM when netem is missing, or for --clock virtual), always, never.
    #[arg(long, value_enum, default_value_t = VmMode::Auto)]
    vm: VmMode,
    /// The guest's clock: `virtual` (QEMU icount under TCG: guest time advances with its
    /// instructions, so results do not depend on how fast or busy the host is; runs take
    /// longer), or `real`. Default: `virtual` when the run goes to a guest under TCG (where
    /// `cctl bench calibrate` measured the real clock falling behind from 20 Mbit/s), `real`
    /// under KVM and on the host. Recorded in metadata.json and run.json.
    #[arg(long, value_parser = clock_parser())]
    clock: Option<vm::Clock>,
    /// Print the summary as JSON lines instead of a table (with --dry-run: the plan as one
    /// JSON object).
    #[arg(long)]
    json: bool,
    /// Check the scenario and print the planned runs without running anything.
    #[arg(long)]
    dry_run: bool,
    /// Runs at once, each on its own dumbbell (namespaces cctl-b<slot>-*, subnets
    /// 10.a.<slot>.b), sharing one collector and the loaded algorithms. On the virtual
    /// clock each run at once gets a guest of its own (QEMU's icount runs a guest's vCPUs
    /// on one host thread), writing <results>/slots/<J>/; the runs are combined at the
    /// end. Allowed 1 to 64.
    #[arg(long, default_value_t = 1, value_parser = whole::<u32>(1, Some(MAX_JOBS.into()), "runs at once"))]
    jobs: u32,
    /// Run every point for S seconds instead of the profile's duration (e.g. 200 for the
    /// papers' 600-s points); recorded in metadata.json, and a resumed or merged run must
    /// give the same. Allowed more than 0 up to 86400 (a day; the longest shipped point
    /// runs 23400 s).
    #[arg(long, value_name = "S", value_parser = real(0.0, true, MAX_DURATION_S, "s"))]
    duration_s: Option<f64>,
    /// Internal: this guest's slot J/N of the run list (one guest per slot on the virtual
    /// clock).
    #[arg(long, value_name = "J/N", hide = true)]
    slot: Option<String>,
    /// Only shard K of N of the run list (point x algorithm x repetition), K 1-based: N
    /// machines each run one shard with the same seed; `cctl bench merge` combines them.
    #[arg(long, value_name = "K/N")]
    shard: Option<String>,
    /// Run into DIR, skipping the runs it holds completed and redoing any cut short (a new
    /// DIR starts the sweep there); ends a VM left running by a killed earlier run.
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// After the report, compare it with this baseline (a summary.json or a results
    /// directory) as `cctl bench check` does, and exit 8 when a metric is outside its
    /// tolerance or missing. Without it the run exits 0 whatever the numbers.
    #[arg(long, value_name = "BASELINE")]
    check: Option<PathBuf>,
    /// Tolerances of --check (TOML, see `cctl bench check --help`).
    #[arg(long, value_name = "FILE", requires = "check")]
    tolerance: Option<PathBuf>,
    /// Exit 8 when one of the scenario's expectations (`[[expect]]`) fails; without it
    /// they are printed PASS or FAIL and the run exits 0.
    #[arg(long)]
    strict: bool,
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
Rows match by algorithm, point index and point parameters; a baseline point or metric the \
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
        Cmd::Run(a) => run_bench(*a),
        Cmd::Perf(a) => perf::run(a),
        Cmd::Calibrate(a) => calibrate::run(a),
        Cmd::Merge(a) => merge(a),
        Cmd::Check(a) => {
            let baseline = SummaryFile::load(&a.baseline)?;
            let tol = load_tolerances(a.tolerance.as_deref())?;
            gate(&a.results, &baseline, &tol, a.json)
        }
        Cmd::Report(a) => {
            results_dir(&a.dir)?;
            let s = cctl_report::write::rebuild(&a.dir, cctl_bench::resolve::native_of)?;
            if a.json {
                outln!("{}", serde_json::to_string(&s)?)?;
            } else {
                let sc = scenario::find(&s.metadata.scenario_path)
                    .or_else(|_| scenario::find(&s.metadata.scenario))?;
                out!("{}", summary::terminal_table(&s, &sc.metrics))?;
                for l in expect::lines(&s.expectations) {
                    outln!("{l}")?;
                }
                outln!("report: {}", a.dir.join("summary.md").display())?;
            }
            if a.strict && expect::any_failed(&s.expectations) {
                return Ok(exit::REGRESSION);
            }
            Ok(exit::OK)
        }
    }
}

/// The clock of a run whose `--clock` was not given: virtual in a guest under TCG (where the
/// emulated CPU falls behind the real clock), real under KVM and on the host.
fn default_clock(in_vm: bool) -> vm::Clock {
    if in_vm && vm::choose_accel() == vm::Accel::Tcg {
        vm::Clock::Virtual
    } else {
        vm::Clock::Real
    }
}

fn load_tolerances(path: Option<&Path>) -> Result<Tolerances> {
    Ok(match path {
        Some(p) => Tolerances::load(p)?,
        None => Tolerances::default(),
    })
}

/// Compares the summary at `results` with `baseline` and prints the verdict; exit code 8
/// ([`exit::REGRESSION`]) when it fails.
fn gate(results: &Path, baseline: &SummaryFile, tol: &Tolerances, json: bool) -> Result<i32> {
    let results = SummaryFile::load(results)?;
    check::same_clock(&results, baseline)?;
    let v = check::check(&results, baseline, tol);
    if json {
        outln!("{}", serde_json::to_string(&v)?)?;
    } else {
        out!("{}", v.text())?;
    }
    Ok(if v.pass { exit::OK } else { exit::REGRESSION })
}

fn list(a: ListArgs) -> Result<i32> {
    let all = scenario::builtin();
    for sc in &all {
        let ci = sc.total_duration_s(Profile::Ci).unwrap_or(f64::NAN);
        let paper = sc.total_duration_s(Profile::Paper).unwrap_or(f64::NAN);
        if a.json {
            let line = serde_json::json!({
                "id": sc.id, "name": sc.name, "title": sc.title, "source": sc.source,
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

fn run_bench(a: RunArgs) -> Result<i32> {
    let profile: Profile = match a.profile.parse() {
        Ok(p) => p,
        Err(e) => usage!("--profile: {e}"),
    };
    unique_algos("--algo", &a.algo)?;
    let shard: Option<Shard> = match a.shard.as_deref().map(str::parse) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => usage!("--shard {e}"),
    };
    let slot: Option<Shard> = match a.slot.as_deref().map(str::parse) {
        None => None,
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => usage!("--slot {e}"),
    };
    if let Some(dir) = &a.resume {
        if dir.exists() && !dir.is_dir() {
            usage!("--resume {}: not a directory", dir.display());
        }
    }
    if let Some(c) = a.clock {
        check_clock(c, a.vm)?;
    }
    // The baseline and tolerances are read before anything runs: a bad one is bad input.
    let baseline = match &a.check {
        Some(b) => Some((
            SummaryFile::load(b)?,
            load_tolerances(a.tolerance.as_deref())?,
        )),
        None => None,
    };
    // A clock given is compared with the baseline's now; the default one once it is known.
    let check_baseline_clock = |clock: vm::Clock| -> Result<()> {
        if let Some((b, _)) = &baseline {
            if b.clock != clock.as_str() {
                usage!(
                    "--check {}: the baseline was timed by the {} clock (metadata.clock.clock) \
                     and this run would be timed by the {} clock; give --clock {} to compare \
                     with it",
                    b.path.display(),
                    b.clock,
                    clock,
                    b.clock
                );
            }
        }
        Ok(())
    };
    if let Some(c) = a.clock {
        check_baseline_clock(c)?;
    }
    let sc = scenario::find(&a.scenario)?;
    let sc = match a.duration_s {
        Some(d) => match sc.with_duration(profile, d) {
            Ok(sc) => sc,
            Err(e) => usage!("{e}"),
        },
        None => sc,
    };
    let seed = a.seed.unwrap_or_else(|| sc.seed(profile));
    let points = match cctl_scenario::select_points(sc.expand(profile, seed)?, a.points.as_deref())
    {
        Ok(p) => p,
        Err(e) => usage!("--points: {e}"),
    };
    for (i, e) in sc.expectations.iter().enumerate() {
        if !a.algo.iter().any(|x| e.selects_algo(x)) {
            usage!(
                "{}: expect[{i}].where.algo `{}` matches none of the algorithms of this run \
                 ({}); give `*`, one of them, or a glob",
                sc.path.display(),
                e.algo,
                a.algo.join(", ")
            );
        }
    }
    if a.dry_run {
        // Whether `--vm auto` would need the VM takes a netem probe, which creates a
        // namespace: not for a dry run. So kernel names may be modules of any installed
        // kernel (the VM's included) unless the runs are sure to stay on this one.
        let kernel = if a.vm == VmMode::Never {
            RunKernel::Running
        } else {
            RunKernel::Installed
        };
        check_algorithms(&a.algo, kernel)?;
        cctl_bench::network::check_dctcp(&a.algo, &points)?;
        let repeat = a.repeat.unwrap_or_else(|| sc.repeat(profile));
        if a.json {
            check_supported(&sc, &points)?;
            let mut runs = run_list(&point_indices(&points), &a.algo, repeat);
            if let Some(shard) = shard {
                runs = shard.select(runs);
            }
            let secs: f64 = points.iter().map(|p| p.duration_s).sum::<f64>()
                * f64::from(repeat)
                * a.algo.len() as f64;
            let plan = serde_json::json!({
                "scenario": sc.name,
                "id": sc.id,
                "profile": profile.to_string(),
                "algorithms": a.algo,
                "repeat": repeat,
                "points": points.iter().map(|p| serde_json::json!({
                    "index": p.index,
                    "label": p.label(),
                    "flows": p.flows.len(),
                    "duration_s": p.duration_s,
                })).collect::<Vec<_>>(),
                "runs": runs.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
                "traffic_s": secs,
                "expectations": sc.expectations.iter().map(|e| format!(
                    "{} {} ({})", e.metric, e.bounds(), e.selector()
                )).collect::<Vec<_>>(),
            });
            outln!("{plan}")?;
            return Ok(exit::OK);
        }
        if let Some(shard) = shard {
            let list = shard.select(run_list(&point_indices(&points), &a.algo, repeat));
            for id in &list {
                outln!("shard {shard}: {id}")?;
            }
            outln!("shard {shard}: {} runs", list.len())?;
        }
        for p in &points {
            outln!(
                "point {:>2}: {} ({} flows, {:.0} s)",
                p.index,
                p.label(),
                p.flows.len(),
                p.duration_s
            )?;
            if let Some(t) = &p.topology {
                let hops: Vec<String> = t
                    .hops
                    .iter()
                    .enumerate()
                    .map(|(i, h)| {
                        format!(
                            "hop {} {} Mbit/s {} ms {} pkts",
                            i + 1,
                            h.rate_mbit,
                            h.rtt_ms,
                            h.buffer_pkts
                        )
                    })
                    .collect();
                let paths: Vec<String> = t
                    .paths
                    .iter()
                    .enumerate()
                    .map(|(i, f)| {
                        format!("flow {} [{}, {}] {} ms", i + 1, f.first, f.last, f.rtt_ms)
                    })
                    .collect();
                outln!("          chain: {}; {}", hops.join(", "), paths.join(", "))?;
            }
        }
        let secs: f64 = points.iter().map(|p| p.duration_s).sum::<f64>()
            * f64::from(repeat)
            * a.algo.len() as f64;
        outln!(
            "{} ({}) profile {profile}: {} points x {} algorithms x {repeat} repetitions = {:.0} s of traffic",
            sc.name,
            sc.id,
            points.len(),
            a.algo.len(),
            secs
        )?;
        for e in &sc.expectations {
            outln!("expect: {} {} ({})", e.metric, e.bounds(), e.selector())?;
        }
        let refs: Vec<&scenario::RunPoint> = points.iter().collect();
        if let Some(w) = cctl_bench::cost::cpu_warning(&refs, a.jobs as usize) {
            outln!("warning (on this machine): {w}")?;
        }
        return match check_supported(&sc, &points) {
            Ok(()) => Ok(exit::OK),
            Err(e) => Err(e),
        };
    }
    check_supported(&sc, &points)?;
    let needs_netem = points
        .iter()
        .any(|p| path_for(p).needs_netem() || !p.delay_schedule.is_empty());

    let in_vm = match a.vm {
        VmMode::Always => true,
        VmMode::Never => false,
        VmMode::Auto => (needs_netem && !netem_available()) || a.clock == Some(vm::Clock::Virtual),
    };
    let mut a = a;
    if a.clock.is_none() {
        let clock = default_clock(in_vm);
        check_baseline_clock(clock)?;
        a.clock = Some(clock);
    }
    // Refused here, before a VM boots (whose kernel is one of those in /lib/modules).
    check_algorithms(
        &a.algo,
        if in_vm {
            RunKernel::Installed
        } else {
            RunKernel::Running
        },
    )?;
    if let Some(dir) = &a.resume {
        if let Some(ended) = vm::end_recorded_vm(dir)? {
            eprintln!("cctl bench: {ended}");
        }
    }
    if in_vm {
        let (code, dir) = guest::run_in_vm(&a, &sc, needs_netem)?;
        return match baseline {
            Some((b, tol)) if code == exit::OK => gate(&dir, &b, &tol, a.json),
            _ => Ok(code),
        };
    }
    if needs_netem && !netem_available() {
        anyhow::bail!(
            "scenario {} needs netem (delay or random loss) and the running kernel ({}) has no \
             sch_netem; run with --vm auto to use a netem-capable VM",
            sc.name,
            cctl_loader::kernel::release()
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let opts = RunOptions {
        algos: a.algo.clone(),
        profile,
        repeat: a.repeat,
        out: a.out.clone(),
        seed: a.seed,
        interval: Duration::from_millis(a.interval_ms),
        queue_interval: Duration::from_millis(a.queue_interval_ms),
        delay_sample: a.delay_sample,
        progress: true,
        points: a.points.clone(),
        jobs: a.jobs,
        shard,
        slot,
        duration_s: a.duration_s,
        resume: a.resume.clone(),
    };
    eprintln!(
        "cctl bench: {} ({}) profile {profile}, algorithms {}, about {:.0} s of traffic",
        sc.name,
        sc.id,
        a.algo.join(","),
        points.iter().map(|p| p.duration_s).sum::<f64>()
            * a.algo.len() as f64
            * f64::from(a.repeat.unwrap_or_else(|| sc.repeat(profile)))
    );
    let (dir, records) = run_scenario(&sc, &opts, stop.clone())?;
    let (meta, _) = read_records(&dir)?;
    let s =
        cctl_report::write::write_all(&dir, &meta, &records, &sc, cctl_bench::resolve::native_of)?;
    if a.json {
        for r in &s.rows {
            outln!("{}", serde_json::to_string(r)?)?;
        }
        for o in &s.expectations {
            outln!("{}", serde_json::json!({ "expectation": o }))?;
        }
    } else {
        out!("{}", summary::terminal_table(&s, &sc.metrics))?;
        for r in &s.invalid_runs {
            outln!("{}", r.line())?;
        }
        for l in expect::lines(&s.expectations) {
            outln!("{l}")?;
        }
    }
    outln!("results: {}", dir.display())?;
    if stop.load(Ordering::SeqCst) {
        eprintln!(
            "cctl bench: interrupted; the runs done so far are in the report, everything removed"
        );
        return Ok(exit::INTERRUPTED);
    }
    let gated = match baseline {
        Some((b, tol)) => gate(&dir, &b, &tol, a.json)?,
        None => exit::OK,
    };
    if a.strict && expect::any_failed(&s.expectations) {
        eprintln!("cctl bench: an expectation failed (--strict); see the FAIL lines above");
        return Ok(exit::REGRESSION);
    }
    Ok(gated)
}
