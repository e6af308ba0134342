//! `cctl bench calibrate`: the testbed's acceptance test on one clock. Each part's scenario
//! is written to the report directory and run by `cctl bench run` (in the guest); the
//! figures are read back from the results (`cctl_bench::calibrate`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use cctl_bench::calibrate::{self, Options, Part, Planned, Report};
use cctl_scenario::{Profile, Scenario};
use cctl_vm::Clock;

use crate::cmd::args::{check_clock, clock_parser, parse_parts, real, VmMode};
use crate::exit::{self, usage};
use crate::out::{out, outln};

/// Arguments of `cctl bench calibrate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example: cctl bench calibrate --clock virtual --quick\n\
Results go to <out>/<UTC timestamp>/calibrate.json and calibrate.md, with each part's \
scenario (scenarios/), its `cctl bench run` results (runs/) and plots (plots/).")]
pub struct CalibrateArgs {
    /// The guest's clock to calibrate: `virtual` (QEMU icount) or `real`. The agreement
    /// part also runs its points on the other one.
    #[arg(long, default_value = "virtual", value_parser = clock_parser())]
    clock: Clock,
    /// Short version: fewer rates (10, 50, 250 Mbit/s at 42 ms), shorter runs, 3 repetitions.
    #[arg(long)]
    quick: bool,
    /// Parts to run, comma-separated: ceiling, path, theory, repeat, load, agree.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "ceiling,path,theory,repeat,load,agree"
    )]
    parts: Vec<String>,
    /// Rates of the ceiling part, Mbit/s, comma-separated (default 10 to 1000; quick
    /// 10,50,250); each allowed more than 0 up to 10000 (the highest capacity a scenario may
    /// use).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = real(0.0, true, cctl_scenario::MAX_RATE_MBIT, "Mbit/s")
    )]
    rates: Option<Vec<f64>>,
    /// Where the runs go: auto (the 6.12 VM when this kernel lacks netem, and always for the
    /// virtual clock), always, never.
    #[arg(long, value_enum, default_value_t = VmMode::Auto)]
    vm: VmMode,
    /// Results root: the calibration goes to <out>/<UTC timestamp>/.
    #[arg(long, default_value = "results/calibrate")]
    out: PathBuf,
    /// Print calibrate.json instead of the Markdown report.
    #[arg(long)]
    json: bool,
    /// Rebuild the report of an earlier calibration directory from its runs (also one that
    /// was interrupted) instead of running anything.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["parts", "rates", "quick"])]
    report: Option<PathBuf>,
}

/// Two CPU-bound processes (`sh` busy loops) that keep the host busy while they live; they
/// are killed when this is dropped, and by the kernel if cctl dies first.
struct HostLoad(Vec<Child>);

impl HostLoad {
    fn start() -> Result<HostLoad> {
        let mut v = Vec::new();
        for _ in 0..2 {
            let mut c = Command::new("sh");
            c.args(["-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .stdout(Stdio::null());
            // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches only the
            // child's own state.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut c, || {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            v.push(c.spawn().context("starting a CPU-bound host process")?);
        }
        Ok(HostLoad(v))
    }
}

impl Drop for HostLoad {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn other(c: Clock) -> Clock {
    match c {
        Clock::Virtual => Clock::Real,
        Clock::Real => Clock::Virtual,
    }
}

/// Runs `cctl bench calibrate`.
pub fn run(a: CalibrateArgs) -> Result<i32> {
    if let Some(dir) = &a.report {
        return rebuild(dir, a.json);
    }
    let parts: Vec<Part> = parse_parts(&a.parts)?;
    check_clock(a.clock, a.vm)?;
    if parts.contains(&Part::Agree) {
        check_clock(other(a.clock), a.vm)?;
    }
    let rates = a
        .rates
        .clone()
        .unwrap_or_else(|| Options::default_rates(a.quick));
    if rates.is_empty() {
        usage!("--rates: give one or more rates in Mbit/s");
    }
    let mut rates = rates;
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let opts = Options {
        quick: a.quick,
        rates,
    };
    let planned = calibrate::plan(&parts, &opts);
    // Every scenario is checked by the scenario language before anything runs.
    for p in &planned {
        let file = PathBuf::from(format!("{}.toml", p.name));
        let checked = Scenario::parse(&p.toml, &file)
            .map_err(anyhow::Error::from)
            .and_then(|sc| sc.expand(Profile::Paper, 1).map_err(anyhow::Error::from));
        if let Err(e) = checked {
            usage!("part {}: {e:#}", p.part);
        }
    }
    cctl_loader::kernel::require_privileges("calibrating the testbed")?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let started = cctl_report::record::timestamp();
    let dir = a.out.join(&started);
    std::fs::create_dir_all(dir.join("scenarios"))
        .with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    eprintln!(
        "cctl bench calibrate: {} clock, parts {}, {} runs, results in {}",
        a.clock,
        parts.iter().map(|p| p.name()).collect::<Vec<_>>().join(","),
        planned.len(),
        dir.display()
    );
    let mut report = Report {
        started,
        clock: None,
        other_clock: None,
        quick: a.quick,
        parts: parts.clone(),
        runs: BTreeMap::new(),
        wall_s: BTreeMap::new(),
        errors: Vec::new(),
        figures: Default::default(),
    };
    let mut done: Vec<(Planned, PathBuf)> = Vec::new();
    save(&dir, &report)?;
    for p in &planned {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let clock = if p.other_clock {
            other(a.clock)
        } else {
            a.clock
        };
        let t0 = Instant::now();
        match run_one(&a, &dir, p, clock, &stop) {
            Ok(results) => {
                let meta = cctl_report::merge::read_metadata(&results)?;
                if p.other_clock {
                    report.other_clock = meta.clock;
                } else {
                    report.clock = meta.clock;
                }
                report
                    .runs
                    .insert(p.name.clone(), results.display().to_string());
                done.push((p.clone(), results));
            }
            Err(e) => report.errors.push(format!("{}: {e:#}", p.name)),
        }
        report
            .wall_s
            .insert(p.name.clone(), t0.elapsed().as_secs_f64());
        save(&dir, &report)?;
    }
    finish(&dir, &mut report, &done, a.json)?;
    if a.clock == Clock::Virtual {
        remember_speed(&report);
    }
    if stop.load(Ordering::SeqCst) {
        eprintln!("cctl bench calibrate: interrupted; the parts finished so far are in the report");
        return Ok(exit::INTERRUPTED);
    }
    if !report.errors.is_empty() {
        return Ok(exit::FAILURE);
    }
    Ok(exit::OK)
}

/// Keeps the host time per traffic second of the ceiling part's sealed guests in
/// [`cctl_bench::speed::STORE`], where `cctl bench run --dry-run` reads it. Says where, or
/// why not.
fn remember_speed(report: &Report) {
    let runs: Vec<(f64, f64, f64)> = report
        .figures
        .ceiling
        .iter()
        .map(|r| (r.rate_mbit, r.traffic_s, r.wall_per_traffic_s * r.traffic_s))
        .collect();
    let Some(speed) = cctl_bench::speed::VirtualSpeed::from_runs(&report.started, &runs) else {
        return;
    };
    let store = Path::new(cctl_bench::speed::STORE);
    match speed.save(store) {
        Ok(()) => eprintln!(
            "cctl bench calibrate: host seconds per traffic second by rate kept in {} for \
             `cctl bench run --dry-run`",
            store.display()
        ),
        Err(e) => eprintln!(
            "cctl bench calibrate: could not write {}: {e}",
            store.display()
        ),
    }
}

/// Writes `calibrate.json` and `calibrate.md` (after every run, so that an interrupted
/// calibration can be rebuilt with `--report`).
fn save(dir: &Path, report: &Report) -> Result<()> {
    std::fs::write(
        dir.join("calibrate.json"),
        serde_json::to_string_pretty(report)? + "\n",
    )
    .with_context(|| format!("writing {}", dir.join("calibrate.json").display()))?;
    std::fs::write(dir.join("calibrate.md"), calibrate::markdown(report))
        .with_context(|| format!("writing {}", dir.join("calibrate.md").display()))?;
    Ok(())
}

/// Analyses the runs `done`, draws the plots, saves and prints the report.
fn finish(dir: &Path, report: &mut Report, done: &[(Planned, PathBuf)], json: bool) -> Result<()> {
    report.figures = calibrate::analyse(done)?;
    if let Err(e) = calibrate::plots(dir, report) {
        report.errors.push(format!("plots: {e:#}"));
    }
    save(dir, report)?;
    if json {
        outln!("{}", serde_json::to_string(report)?)?;
    } else {
        out!("{}", calibrate::markdown(report))?;
    }
    outln!("results: {}", dir.display())?;
    Ok(())
}

/// `--report DIR`: the figures of DIR's runs again, from its `calibrate.json` and `runs/`.
fn rebuild(dir: &Path, json: bool) -> Result<i32> {
    let path = dir.join("calibrate.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => usage!(
            "--report {}: no readable calibrate.json ({e}); give a directory written by \
             `cctl bench calibrate`",
            dir.display()
        ),
    };
    let mut report: Report =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let opts = Options {
        quick: report.quick,
        rates: Options::default_rates(report.quick),
    };
    let done: Vec<(Planned, PathBuf)> = calibrate::plan(&report.parts, &opts)
        .into_iter()
        .filter_map(|p| {
            let d = dir.join("runs").join(&p.name);
            d.join("metadata.json").is_file().then_some((p, d))
        })
        .collect();
    report.errors.retain(|e| !e.starts_with("plots: "));
    finish(dir, &mut report, &done, json)?;
    Ok(if report.errors.is_empty() {
        exit::OK
    } else {
        exit::FAILURE
    })
}

/// Writes `p`'s scenario and runs it with `cctl bench run` on `clock` (with the host kept
/// busy if `p.loaded`); returns its results directory.
fn run_one(
    a: &CalibrateArgs,
    dir: &Path,
    p: &Planned,
    clock: Clock,
    stop: &AtomicBool,
) -> Result<PathBuf> {
    let file = dir.join("scenarios").join(format!("{}.toml", p.name));
    std::fs::write(&file, &p.toml).with_context(|| format!("writing {}", file.display()))?;
    let results = dir.join("runs").join(&p.name);
    let log = dir.join("runs").join(format!("{}.log", p.name));
    std::fs::create_dir_all(dir.join("runs"))?;
    let vm = match a.vm {
        VmMode::Auto => "auto",
        VmMode::Always => "always",
        VmMode::Never => "never",
    };
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("bench")
        .arg("run")
        .arg(&file)
        .args([
            "--algo",
            p.algo,
            "--profile",
            "paper",
            "--clock",
            clock.as_str(),
        ])
        .args(["--vm", vm])
        // One guest at a time: each run's host wall time is its own, and the load part's
        // host load is the only one.
        .args(["--jobs", "1"])
        .arg("--resume")
        .arg(&results)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&log)?)
        .stderr(std::fs::File::create(log.with_extension("err"))?);
    eprintln!(
        "cctl bench calibrate: {} ({} clock{}) ...",
        p.name,
        clock,
        if p.loaded { ", host loaded" } else { "" }
    );
    let load = if p.loaded {
        Some(HostLoad::start()?)
    } else {
        None
    };
    let mut child = cmd.spawn().context("running cctl bench run")?;
    // An interrupt of calibrate alone (not its process group) reaches the run too, which
    // then stops its guest and keeps what it finished.
    let mut forwarded = false;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if stop.load(Ordering::SeqCst) && !forwarded {
            let pid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            forwarded = true;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    drop(load);
    if !status.success() {
        anyhow::bail!(
            "cctl bench run exited with {status}; see {} and {}",
            log.display(),
            log.with_extension("err").display()
        );
    }
    Ok(results)
}
