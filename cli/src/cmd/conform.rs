//! `cctl conform`: a port and its Linux module driven by the same scripted ACK stream on a
//! TUN device and compared ACK by ACK; in the 6.12 guest where this kernel lacks a module.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cctl_conform::{self as conform, script, Outcome, Subject};

use crate::cmd::args::VmMode;
use crate::exit::{self, usage};
use crate::out::{out, outln};

/// Arguments of `cctl conform`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: cctl conform cubic,htcp --script periodic-loss --short\n\
Every algorithm with a Linux module is compared with it in lockstep (its `linux` profile where \
it has one); FAST, Compound and Africa against their f64 models. Results go to \
<out>/<UTC timestamp>/conform.json, conform.md, and per case a CSV and a cwnd overlay plot."
)]
pub struct Args {
    /// Algorithms, comma-separated cctl keys (`cubic`, `htcp`, `cubic@linux`), or `all`.
    #[arg(value_delimiter = ',', required = true)]
    algos: Vec<String>,
    /// Scripts to run: shipped names (`periodic-loss`) or TOML files; default all shipped.
    #[arg(long, value_delimiter = ',')]
    script: Vec<String>,
    /// Profile of the ports (default: `linux` where the port has one).
    #[arg(long)]
    profile: Option<String>,
    /// Only the short-RTT variant of each script (what CI runs).
    #[arg(long)]
    short: bool,
    /// Runs per case of clocked ports (the module's own spread), 1 to 10.
    #[arg(long, default_value_t = conform::BASELINE_RUNS)]
    runs: usize,
    /// Where to run: auto (in the 6.12 VM when this kernel lacks a module), always, never.
    #[arg(long, value_enum, default_value_t = VmMode::Auto)]
    vm: VmMode,
    /// Results root: the run goes to <out>/<UTC timestamp>/.
    #[arg(long, default_value = "results/conform")]
    out: PathBuf,
    /// Print one JSON object per (algorithm, script, RTT) instead of the table.
    #[arg(long)]
    json: bool,
    /// Internal: write the results into exactly this directory (used inside the VM).
    #[arg(long, hide = true)]
    dir: Option<PathBuf>,
}

fn subjects(a: &Args) -> Result<Vec<Subject>> {
    let mut keys: Vec<String> = Vec::new();
    for k in &a.algos {
        if k == "all" {
            keys.extend(
                cctl_loader::catalogue::ALGORITHMS
                    .iter()
                    .map(|x| x.key.to_string()),
            );
        } else {
            keys.push(k.trim().to_string());
        }
    }
    let mut out = Vec::new();
    for k in keys {
        let arg = match (&a.profile, k.contains('@')) {
            (Some(p), false) => format!("{k}@{p}"),
            _ => k,
        };
        match Subject::parse(&arg) {
            Ok(s) => out.push(s),
            Err(e) => usage!("{e}"),
        }
    }
    if let Err(e) = conform::check_subjects(&out) {
        usage!("{e}");
    }
    Ok(out)
}

fn scripts(a: &Args) -> Result<Vec<script::Script>> {
    if a.script.is_empty() {
        return Ok(script::builtin());
    }
    let mut out = Vec::new();
    for s in &a.script {
        match script::find(s) {
            Ok(x) => out.push(x),
            Err(e) => usage!("{e}"),
        }
    }
    Ok(out)
}

/// Whether this kernel has `name` (built in, already registered, or a module on disk).
fn kernel_has(name: &str) -> bool {
    cctl_loader::kernel::available_ccs()
        .map(|v| v.iter().any(|c| c == name))
        .unwrap_or(false)
        || cctl_loader::kernel::native_module(name).is_some()
}

/// Runs `cctl conform`.
pub fn run(a: Args) -> Result<i32> {
    let subjects = subjects(&a)?;
    let scripts = scripts(&a)?;
    if !(1..=10).contains(&a.runs) {
        usage!("--runs {}: allowed 1 to 10", a.runs);
    }
    cctl_loader::kernel::require_privileges("running conformance checks")?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => a.out.join(cctl_report::record::timestamp()),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    let missing: Vec<&str> = subjects
        .iter()
        .filter_map(|s| s.algo.native)
        .filter(|m| !kernel_has(m))
        .collect();
    let in_vm = a.dir.is_none()
        && match a.vm {
            VmMode::Always => true,
            VmMode::Never => false,
            VmMode::Auto => !missing.is_empty(),
        };
    if a.vm == VmMode::Never && !missing.is_empty() {
        usage!(
            "this kernel ({}) has no module for {} (try --vm auto)",
            cctl_loader::kernel::release(),
            missing.join(", ")
        );
    }
    if in_vm {
        run_in_vm(&a, &dir, stop.clone())?;
    } else {
        conform::check_tun()?;
        eprintln!(
            "cctl conform: {} algorithm(s) × {} script(s) on {}, results in {}",
            subjects.len(),
            scripts.len(),
            cctl_loader::kernel::release(),
            dir.display()
        );
        let opts = conform::Options {
            short_only: a.short,
            baseline_runs: a.runs,
        };
        let outcomes = conform::run(&subjects, &scripts, &opts, stop.clone(), |o: &Outcome| {
            let late = o
                .runs
                .iter()
                .map(|r| r.validity.late_max_us)
                .max()
                .unwrap_or(0);
            let secs: f64 = o.runs.iter().map(|r| r.seconds).sum();
            eprintln!(
                "  {:<14} {:<14} {:>5} ms  {:>6} steps  {:>7.2} % identical  max |Δcwnd| {:>4}  latest ACK +{late} us  {secs:.1} s  {}{}",
                o.algo,
                o.script,
                o.rtt_ms,
                o.comparison.steps,
                o.comparison.identical_pct,
                o.comparison.max_abs_cwnd_diff,
                o.verdict,
                o.why.as_deref().map(|w| format!(": {w}")).unwrap_or_default()
            );
        })?;
        conform::report::write_all(&dir, &outcomes, &cctl_loader::kernel::release())?;
    }
    if a.dir.is_none() {
        // Inside the VM (--dir) the host draws them: a chart costs ~1.5 s under TCG.
        conform::report::render_plots(&dir)?;
    }
    print_results(&dir, a.json)?;
    if stop.load(Ordering::SeqCst) {
        eprintln!("cctl conform: interrupted; the cases finished so far are in the report");
        return Ok(exit::INTERRUPTED);
    }
    let text = std::fs::read_to_string(dir.join("lines.jsonl"))?;
    let failed = text
        .lines()
        .filter(|l| !l.contains("\"verdict\":\"match\""))
        .count();
    if failed > 0 {
        eprintln!("cctl conform: {failed} case(s) did not match (see conform.md)");
        return Ok(exit::FAILURE);
    }
    Ok(exit::OK)
}

fn print_results(dir: &Path, json: bool) -> Result<()> {
    if json {
        out!("{}", std::fs::read_to_string(dir.join("lines.jsonl"))?)?;
    } else {
        out!("{}", std::fs::read_to_string(dir.join("conform.md"))?)?;
        outln!("results: {}", dir.display())?;
    }
    Ok(())
}

/// Boots the 6.12 guest and runs the same command there, writing into `dir`.
fn run_in_vm(a: &Args, dir: &Path, stop: Arc<AtomicBool>) -> Result<()> {
    use cctl_vm as vm;
    let exe = std::env::current_exe()?;
    let mut cmd = format!(
        "modprobe tun; '{}' conform {} --vm never --dir '{}' --runs {}",
        exe.display(),
        a.algos.join(","),
        dir.display(),
        a.runs
    );
    for s in &a.script {
        // A script file must be readable in the guest: the host's file system is.
        let p = Path::new(s);
        let arg = if p.is_file() {
            p.canonicalize()?.display().to_string()
        } else {
            s.clone()
        };
        cmd.push_str(&format!(" --script '{arg}'"));
    }
    if let Some(p) = &a.profile {
        cmd.push_str(&format!(" --profile {p}"));
    }
    if a.short {
        cmd.push_str(" --short");
    }
    cmd.push_str(" > /dev/null");
    let mut spec = vm::VmSpec::detect()?;
    spec.rwdirs.push(dir.to_path_buf());
    spec.timeout = Duration::from_secs(4 * 3600);
    spec.echo = true;
    spec.cancel = Some(stop);
    spec.set_clock(vm::Clock::Virtual)?;
    eprintln!(
        "cctl conform: in {} ({:?}{}), {} CPUs",
        spec.kernel.display(),
        spec.accel,
        if spec.accel == vm::Accel::Tcg {
            ", virtual clock"
        } else {
            ""
        },
        spec.cpus
    );
    let out = vm::run_in_vm(&spec, &cmd)?;
    if !dir.join("lines.jsonl").exists() {
        anyhow::bail!(
            "the guest wrote no results (exit status {}); its output is above",
            out.status
        );
    }
    Ok(())
}
