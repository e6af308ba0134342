//! `cctl bench run`: its options, the request they make ([`RunRequest`]), and where the
//! sweep runs: here, or in the 6.12 guest ([`super::guest`]); `--dry-run` prints the plan
//! ([`super::dry_run`]), `--check` gates the report ([`super::gate`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use cctl_bench::execute::run_scenario;
use cctl_bench::network::{check_supported, path_for};
use cctl_bench::request::{RunRequest, MAX_DELAY_SAMPLE, MAX_REPEAT};
use cctl_bench::resolve::{check_algorithms, RunKernel};
use cctl_netem::slot::MAX_JOBS;
use cctl_netem::testbed::netem_available;
use cctl_report::expect;
use cctl_report::record::read_records;
use cctl_report::runs::Shard;
use cctl_report::summary;
use cctl_scenario::{self as scenario, Profile, RunPoint, Scenario};
use cctl_vm as vm;

use super::gate::Baseline;
use super::{dry_run, guest};
use crate::cmd::args::{
    check_clock, clock_parser, real, unique_algos, whole, VmMode, MAX_DURATION_S, MAX_INTERVAL_MS,
};
use crate::exit::{self, usage};
use crate::out::{out, outln};

/// Arguments of `cctl bench run`.
#[derive(Debug, clap::Args)]
#[command(
    // The hidden --request makes the scenario and --algo optional to clap; users give both.
    override_usage = "cctl bench run [OPTIONS] --algo <ALGO> <SCENARIO>",
    after_help = "Example: cctl bench run fairness-same-rtt --algo reno,htcp --profile ci\n\
Results go to <out>/<scenario>/<UTC timestamp>/. The ci profile is a scaled-down smoke test: \
never compare its numbers with the papers'."
)]
pub(super) struct RunArgs {
    /// Scenario name, test id (t0.1) or path to a TOML file (`cctl bench list`).
    #[arg(required_unless_present = "request")]
    pub(super) scenario: Option<String>,
    /// Algorithms under test, comma-separated: cctl keys (htcp → bpf_htcp) or kernel names (cubic).
    #[arg(long, value_delimiter = ',', required_unless_present = "request")]
    pub(super) algo: Vec<String>,
    /// Scale profile.
    #[arg(long, default_value = "ci")]
    pub(super) profile: String,
    /// Run each plain cctl key as its default port. Without it a scenario from a paper runs
    /// the variant that paper tested (`highspeed` in a [P0] test is `highspeed@p0`; `cctl
    /// list` shows each algorithm's variants), and one with a `variant` key runs that.
    #[arg(long)]
    pub(super) port_defaults: bool,
    /// Repetitions per point (default: the profile's); allowed 1 to 1000.
    #[arg(long, value_parser = whole::<u32>(1, Some(MAX_REPEAT.into()), ""))]
    pub(super) repeat: Option<u32>,
    /// Only these points of the sweep, comma-separated indices as --dry-run lists them
    /// (default: every point), e.g. to repeat one case; allowed 0 or more, up to the
    /// sweep's last index.
    #[arg(long, value_delimiter = ',', value_parser = whole::<usize>(0, None, ""))]
    pub(super) points: Option<Vec<usize>>,
    /// Results root directory.
    #[arg(long, default_value = "results")]
    pub(super) out: PathBuf,
    /// The sweep's seed: repetition r's runs draw their random start times and web sessions
    /// from seed + r, and the guests boot with it (QEMU -seed); default: the scenario's
    /// `seed`, 1 where it gives none; allowed 0 to 18446744073709551615.
    #[arg(long, value_parser = whole::<u64>(0, Some(u64::MAX.into()), ""))]
    pub(super) seed: Option<u64>,
    /// Collector interval per flow, ms; allowed 1 to 60000.
    #[arg(long, default_value_t = 100, value_parser = whole::<u64>(1, Some(MAX_INTERVAL_MS), "ms"))]
    pub(super) interval_ms: u64,
    /// Bottleneck qdisc sampling interval, ms; allowed 1 to 60000.
    #[arg(long, default_value_t = 100, value_parser = whole::<u64>(1, Some(MAX_INTERVAL_MS), "ms"))]
    pub(super) queue_interval_ms: u64,
    /// Per-packet delay taps: time 1 TCP packet in N on its way (sender, bottleneck,
    /// receiver) for one-way delays and sojourn times; 1 = every packet, 0 = off. Default:
    /// 10 for a scenario that reports delays (metric M13 or a delay plot), else 0 (on the virtual
    /// clock they took 8 % of the wall time of two flows at 10 Mbit/s). Allowed 0 to
    /// 1000000.
    #[arg(
        long,
        value_name = "N",
        value_parser = whole::<u32>(0, Some(MAX_DELAY_SAMPLE.into()), "")
    )]
    pub(super) delay_sample: Option<u32>,
    /// Where to run: auto (VM when netem is missing, or for --clock virtual), always, never.
    #[arg(long, value_enum, default_value_t = VmMode::Auto)]
    pub(super) vm: VmMode,
    /// The guest's clock: `virtual` (QEMU icount under TCG: guest time advances with its
    /// instructions, so results do not depend on how fast or busy the host is; runs take
    /// longer), or `real`. Default: `virtual` when the run goes to a guest under TCG (where
    /// `cctl bench calibrate` measured the real clock falling behind from 20 Mbit/s), `real`
    /// under KVM and on the host. Recorded in metadata.json and run.json.
    #[arg(long, value_parser = clock_parser())]
    pub(super) clock: Option<vm::Clock>,
    /// Print the summary as JSON lines instead of a table (with --dry-run: the plan as one
    /// JSON object).
    #[arg(long)]
    pub(super) json: bool,
    /// Check the scenario and print the planned runs without running anything.
    #[arg(long)]
    pub(super) dry_run: bool,
    /// Runs at once, each on its own dumbbell (namespaces cctl-b<slot>-*, subnets
    /// 10.a.<slot>.b), sharing one collector and the loaded algorithms. On the virtual
    /// clock every run has a sealed guest of its own (run J writes <results>/slots/<J>/),
    /// and this many guests run at a time; the runs are combined at the end. Default: on
    /// the virtual clock as many guests as the host fits (one per CPU, at most one per
    /// 2.5 GiB of available memory), else 1. Allowed 1 to 64.
    #[arg(long, value_parser = whole::<u32>(1, Some(MAX_JOBS.into()), "runs at once"))]
    pub(super) jobs: Option<u32>,
    /// Run every point for S seconds instead of the profile's duration (e.g. 200 for the
    /// papers' 600-s points); recorded in metadata.json, and a resumed or merged run must
    /// give the same. Allowed more than 0 up to 86400 (a day; the longest shipped point
    /// runs 23400 s).
    #[arg(long, value_name = "S", value_parser = real(0.0, true, MAX_DURATION_S, "s"))]
    pub(super) duration_s: Option<f64>,
    /// Internal: run the sweep this request file describes (what the host hands a guest,
    /// kept as request.json in every results directory) instead of the one the other
    /// options give.
    #[arg(long, value_name = "FILE", hide = true, conflicts_with_all = [
        "scenario", "algo", "profile", "port_defaults", "repeat", "points", "out", "seed", "interval_ms",
        "queue_interval_ms", "delay_sample", "jobs", "duration_s", "shard", "resume",
    ])]
    pub(super) request: Option<PathBuf>,
    /// Only shard K of N of the run list (point x algorithm x repetition), K 1-based: N
    /// machines each run one shard with the same seed; `cctl bench merge` combines them.
    #[arg(long, value_name = "K/N")]
    pub(super) shard: Option<String>,
    /// Run into DIR, skipping the runs it holds completed and redoing any cut short (a new
    /// DIR starts the sweep there); ends a VM left running by a killed earlier run.
    #[arg(long, value_name = "DIR")]
    pub(super) resume: Option<PathBuf>,
    /// After the report, compare it with this baseline (a summary.json or a results
    /// directory) as `cctl bench check` does, and exit 8 when a metric is outside its
    /// tolerance or missing. Without it the run exits 0 whatever the numbers.
    #[arg(long, value_name = "BASELINE")]
    pub(super) check: Option<PathBuf>,
    /// Tolerances of --check (TOML, see `cctl bench check --help`).
    #[arg(long, value_name = "FILE", requires = "check")]
    pub(super) tolerance: Option<PathBuf>,
    /// Exit 8 when one of the scenario's expectations (`[[expect]]`) fails; without it
    /// they are printed PASS or FAIL and the run exits 0.
    #[arg(long)]
    pub(super) strict: bool,
    /// Do not write index.html, the report as one HTML page (summary tables with the
    /// metrics' definitions, expectations, plots) beside summary.md.
    #[arg(long)]
    pub(super) no_html: bool,
    /// Developer: profile each sealed guest (virtual clock only) with the guest's `perf` on
    /// the cpu-clock event every 100,000 ns of guest time, which on the virtual clock is
    /// every 100,000 instructions; writes `perf.data` and the guest's `kallsyms` into
    /// `slots/<J>/`. `make bench-profile` runs it and prints where the instructions go.
    #[arg(long, hide = true)]
    pub(super) profile_guest: bool,
}

impl RunArgs {
    /// The request these options make, and its scenario; from `--request FILE` when given.
    /// Bad input exits 2 naming the option.
    fn request(&self) -> Result<(RunRequest, Scenario)> {
        if let Some(file) = &self.request {
            let req = match RunRequest::read(file) {
                Ok(r) => r,
                Err(e) => usage!("--request: {e}"),
            };
            let sc = req.load_scenario()?;
            return Ok((req, sc));
        }
        let profile: Profile = match self.profile.parse() {
            Ok(p) => p,
            Err(e) => usage!("--profile: {e}"),
        };
        unique_algos("--algo", &self.algo)?;
        let shard: Option<Shard> = match self.shard.as_deref().map(str::parse) {
            None => None,
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => usage!("--shard {e}"),
        };
        if let Some(dir) = &self.resume {
            if dir.exists() && !dir.is_dir() {
                usage!("--resume {}: not a directory", dir.display());
            }
        }
        let name = self
            .scenario
            .as_deref()
            .expect("clap: a scenario without --request");
        let sc = scenario::find(name)?;
        let sc = match self.duration_s {
            Some(d) => match sc.with_duration(profile, d) {
                Ok(sc) => sc,
                Err(e) => usage!("{e}"),
            },
            None => sc,
        };
        let req = RunRequest {
            scenario: RunRequest::scenario_ref(&sc)
                .with_context(|| format!("finding {}", sc.path.display()))?,
            algo: cctl_bench::resolve::scenario_variants(&sc, &self.algo, self.port_defaults)?,
            profile,
            repeat: self.repeat,
            points: self.points.clone(),
            out: self.out.clone(),
            seed: self.seed,
            interval_ms: self.interval_ms,
            queue_interval_ms: self.queue_interval_ms,
            delay_sample: self.delay_sample.unwrap_or(if sc.wants_delays() {
                cctl_bench::request::DELAY_SAMPLE_DEFAULT
            } else {
                0
            }),
            jobs: self.jobs.unwrap_or(1),
            duration_s: self.duration_s,
            shard,
            slot: None,
            resume: self.resume.clone(),
        };
        Ok((req, sc))
    }
}

/// The points of the request's sweep (its first repetition's); `--points` naming one the
/// sweep lacks exits 2.
fn points(req: &RunRequest, sc: &Scenario) -> Result<Vec<RunPoint>> {
    let seed = req.seed_of(sc);
    match scenario::select_points(sc.expand(req.profile, seed)?, req.points.as_deref()) {
        Ok(p) => Ok(p),
        Err(e) => usage!("--points: {e}"),
    }
}

/// Refuses an `[[expect]]` of the scenario that selects none of the algorithms under test.
fn check_expectations(sc: &Scenario, algos: &[String]) -> Result<()> {
    for (i, e) in sc.expectations.iter().enumerate() {
        if !algos.iter().any(|x| e.selects_algo(x)) {
            usage!(
                "{}: expect[{i}].where.algo `{}` matches none of the algorithms of this run \
                 ({}); give `*`, one of them, or a glob",
                sc.path.display(),
                e.algo,
                algos.join(", ")
            );
        }
    }
    Ok(())
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

/// Runs `cctl bench run`.
pub(super) fn run(a: RunArgs) -> Result<i32> {
    if let Some(c) = a.clock {
        check_clock(c, a.vm)?;
    }
    // The baseline and tolerances are read before anything runs: a bad one is bad input.
    let baseline = Baseline::load(a.check.as_deref(), a.tolerance.as_deref())?;
    if let (Some(b), Some(c)) = (&baseline, a.clock) {
        b.same_clock(c)?;
    }
    let (mut req, sc) = a.request()?;
    let points = points(&req, &sc)?;
    check_expectations(&sc, &req.algo)?;
    if a.dry_run {
        return dry_run::print(&a, &req, &sc, &points);
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
    let clock = match a.clock {
        Some(c) => c,
        None => {
            let c = default_clock(in_vm);
            if let Some(b) = &baseline {
                b.same_clock(c)?;
            }
            c
        }
    };
    // Refused here, before a VM boots (whose kernel is one of those in /lib/modules).
    let kernel = if in_vm {
        RunKernel::Installed
    } else {
        RunKernel::Running
    };
    check_algorithms(&req.algo, kernel)?;
    if let Some(dir) = &req.resume {
        if let Some(ended) = vm::end_recorded_vm(dir)? {
            eprintln!("cctl bench: {ended}");
        }
    }
    if a.jobs.is_none() && a.request.is_none() && in_vm && clock == vm::Clock::Virtual {
        req.jobs = vm::guests_that_fit();
    }
    if a.profile_guest && !(in_vm && clock == vm::Clock::Virtual) {
        usage!("--profile-guest profiles sealed guests, which run only on --clock virtual");
    }
    // The host writes index.html once the summary is final (a guest's own run does not).
    let html = !a.no_html && a.request.is_none();
    if in_vm {
        let (code, dir) = guest::run_in_vm(&req, &sc, clock, a.json, needs_netem, a.profile_guest)?;
        if html && dir.join("summary.json").is_file() {
            let (_, page) = cctl_report::html::write_from_summary(&dir)?;
            eprintln!("cctl bench: html report {}", page.display());
        }
        return match baseline {
            Some(b) if code == exit::OK => b.gate(&dir, a.json),
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
    run_here(&req, &sc, &points, a.json, a.strict, html, baseline)
}

/// Runs the sweep on this kernel, prints its report (with `html`, also index.html), and
/// gates it on `baseline` and, with `strict`, on the scenario's expectations.
fn run_here(
    req: &RunRequest,
    sc: &Scenario,
    points: &[RunPoint],
    json: bool,
    strict: bool,
    html: bool,
    baseline: Option<Baseline>,
) -> Result<i32> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    eprintln!(
        "cctl bench: {} ({}) profile {}, algorithms {}, about {:.0} s of traffic",
        sc.name,
        sc.id,
        req.profile,
        req.algo.join(","),
        points.iter().map(|p| p.duration_s).sum::<f64>()
            * req.algo.len() as f64
            * f64::from(req.repeat_of(sc))
    );
    let (dir, records) = run_scenario(sc, req, true, stop.clone())?;
    let (meta, _) = read_records(&dir)?;
    let s =
        cctl_report::write::write_all(&dir, &meta, &records, sc, cctl_bench::resolve::native_of)?;
    if html {
        cctl_report::html::write(&dir, &s, sc)?;
    }
    if json {
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
        Some(b) => b.gate(&dir, json)?,
        None => exit::OK,
    };
    if strict && expect::any_failed(&s.expectations) {
        eprintln!("cctl bench: an expectation failed (--strict); see the FAIL lines above");
        return Ok(exit::REGRESSION);
    }
    Ok(gated)
}
