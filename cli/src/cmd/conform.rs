//! `cctl conform`: a port and its Linux module driven by the same scripted ACK stream on a
//! TUN device and compared ACK by ACK; in the 6.12 guest where this kernel lacks a module.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cctl_conform::{self as conform, script, Outcome, Subject};

use crate::cmd::args::{unique_algos, whole, VmMode};
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
    /// Set a tunable of every port compared, key=value, over its profile's values;
    /// repeatable (e.g. `--param linux_exact=0`: the paper's clock against the module).
    #[arg(long = "param", value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// Only the short-RTT variant of each script (what CI runs); without --script, the
    /// large-window scripts (`large-*`, windows of thousands of segments) are left out.
    #[arg(long)]
    short: bool,
    /// Module-vs-module runs per case of a clocked port (the module's own spread), at
    /// most: none when the port was identical to its module, and they stop once the port
    /// is within the spread; a port still beyond it is re-run with one more each time (up
    /// to 3 times). Allowed 1 to 10.
    #[arg(long, default_value_t = conform::BASELINE_RUNS, value_parser = whole::<usize>(1, Some(10), ""))]
    runs: usize,
    /// Where to run: auto (in the 6.12 VM when this kernel lacks a module), always, never.
    #[arg(long, value_enum, default_value_t = VmMode::Auto)]
    vm: VmMode,
    /// Guests side by side (in the VM only; a guest on the virtual clock keeps one host
    /// CPU busy): each takes the next algorithm from a queue, heaviest first (with
    /// --short, N balanced shares). Allowed 1 to 64.
    #[arg(long, default_value_t = 1, value_parser = whole::<usize>(1, Some(64), ""))]
    jobs: usize,
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
    unique_algos("<ALGOS>", &a.algos)?;
    if a.algos.len() > 1 && a.algos.iter().any(|k| k.trim() == "all") {
        usage!(
            "<ALGOS>: `all` is every algorithm, and {} would be given twice; give `all` alone \
             or the algorithms one by one",
            a.algos
                .iter()
                .filter(|k| k.trim() != "all")
                .map(|k| k.trim())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
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
        match Subject::parse(&arg).and_then(|s| s.with_params(&a.params)) {
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
        // CI's check: the small-window scripts' short variants; large windows when named.
        return Ok(script::builtin()
            .into_iter()
            .filter(|s| !(a.short && s.is_large()))
            .collect());
    }
    let mut out = Vec::new();
    for s in &a.script {
        match script::find(s) {
            Ok(x) => out.push(x),
            // Every script error is bad input; the message of a path that is a directory
            // says so as for every command (exit::message).
            Err(e) => usage!("{}", exit::message(&e.into())),
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
    cctl_loader::kernel::require_privileges("running conformance checks")?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
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
    if a.jobs > 1 && !in_vm && a.dir.is_none() {
        usage!(
            "--jobs {}: the cases run side by side in guests, and this run is on the host \
             ({}); use --vm always, or --jobs 1",
            a.jobs,
            if a.vm == VmMode::Never {
                "--vm never".to_string()
            } else {
                format!("{} has every module", cctl_loader::kernel::release())
            }
        );
    }
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => a.out.join(cctl_report::record::timestamp()),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    if in_vm {
        run_in_vm(&a, &subjects, &dir, stop.clone())?;
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
            let drift = o.comparison.drift.as_ref().map_or(String::new(), |d| {
                format!(
                    "  mean |Δcwnd| {:.2}  ratio {:.4}  same CA {:.1} %",
                    d.mean_abs_cwnd_diff, d.mean_cwnd_ratio, d.same_ca_state_pct
                )
            });
            eprintln!(
                "  {:<14} {:<14} {:>5} ms  {:>7} steps  cwnd <= {:>5}  {:>7.2} % identical  max |Δcwnd| {:>4}{drift}  latest ACK +{late} us  {secs:.1} s  {}{}",
                o.algo,
                o.script,
                o.rtt_ms,
                o.comparison.steps,
                o.comparison.max_cwnd,
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

/// Boots the 6.12 guest on the virtual clock and runs the same command there, writing
/// into `dir`. With `--jobs N` (N > 1), N guests side by side take shares of the
/// algorithms from a queue ([`conform::shares`]): one algorithm per guest run, or with
/// `--short` (cases of seconds, a boot of ~25 s) N balanced shares; each guest run writes
/// into `dir/guests/<NN>-<algorithms>/` (its output in `guest.log` there). A guest that
/// finishes early takes the next share, and an interrupted or failed guest loses only its
/// own share. The finished parts are combined into `dir`.
fn run_in_vm(a: &Args, subjects: &[Subject], dir: &Path, stop: Arc<AtomicBool>) -> Result<()> {
    use cctl_vm as vm;
    let spec_for = |out: &Path, echo: bool| -> Result<vm::VmSpec> {
        let mut spec = vm::VmSpec::detect()?;
        spec.rwdirs.push(out.to_path_buf());
        spec.timeout = Duration::from_secs(4 * 3600);
        spec.echo = echo;
        spec.cancel = Some(stop.clone());
        spec.set_clock(vm::Clock::Virtual)?;
        Ok(spec)
    };
    let describe = |spec: &vm::VmSpec| {
        format!(
            "{} ({:?}{}), {} CPU(s)",
            spec.kernel.display(),
            spec.accel,
            if spec.accel == vm::Accel::Tcg {
                ", virtual clock"
            } else {
                ""
            },
            spec.cpus
        )
    };
    if a.jobs == 1 || subjects.len() == 1 {
        let spec = spec_for(dir, true)?;
        eprintln!("cctl conform: in {}", describe(&spec));
        let res = vm::run_in_vm(&spec, &guest_command(a, &a.algos.join(","), dir)?)?;
        if !dir.join("lines.jsonl").exists() {
            anyhow::bail!(
                "the guest wrote no results (exit status {}); its output is above",
                res.status
            );
        }
        return Ok(());
    }
    // With --short every case takes seconds and a guest's boot ~25 s: `jobs` guests with
    // a balanced share each. Otherwise one guest per algorithm, so that a guest that
    // finishes early takes the next one.
    let order = conform::shares(subjects, if a.short { a.jobs } else { subjects.len() });
    let labels: Vec<String> = subjects.iter().map(Subject::label).collect();
    let share_label = |share: &[usize]| -> String {
        share
            .iter()
            .map(|&i| labels[i].as_str())
            .collect::<Vec<_>>()
            .join(",")
    };
    let parts: Vec<PathBuf> = order
        .iter()
        .enumerate()
        .map(|(k, share)| {
            let name: String = share_label(share)
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            dir.join("guests").join(format!("{:02}-{name}", k + 1))
        })
        .collect();
    for part in &parts {
        std::fs::create_dir_all(part).with_context(|| format!("creating {}", part.display()))?;
    }
    let first = spec_for(&parts[0], false)?;
    eprintln!(
        "cctl conform: {} algorithm(s) in {} guest run(s), {} side by side in {}; each \
         guest's output in {}/guests/<NN>-<algorithms>/guest.log",
        subjects.len(),
        order.len(),
        a.jobs.min(order.len()),
        describe(&first),
        dir.display()
    );
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::Mutex::new(Vec::<String>::new());
    let started = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..a.jobs.min(order.len()) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::SeqCst);
                if k >= order.len() || stop.load(Ordering::SeqCst) {
                    break;
                }
                let (share, part) = (&order[k], &parts[k]);
                let label = &share_label(share);
                let specs: Vec<String> = share.iter().map(|&i| subjects[i].spec()).collect();
                let outcome = (|| -> Result<String> {
                    let spec = spec_for(part, false)?;
                    let run = vm::run_in_vm(&spec, &guest_command(a, &specs.join(","), part)?);
                    // The guest's output goes to its log however the run ended (finished,
                    // failed, timed out, interrupted), before any error is returned.
                    let log = part.join("guest.log");
                    let text = match &run {
                        Ok(res) => format!("{}{}", res.stdout, res.stderr),
                        Err(e) => format!(
                            "{}cctl conform: this guest run ended: {e}\n",
                            e.output().unwrap_or_default()
                        ),
                    };
                    std::fs::write(&log, text)
                        .with_context(|| format!("writing {}", log.display()))?;
                    let res = run?;
                    if !part.join("lines.jsonl").exists() {
                        anyhow::bail!(
                            "wrote no results (exit status {}): see {}",
                            res.status,
                            log.display()
                        );
                    }
                    Ok(format!("{:.0} s", res.elapsed.as_secs_f64()))
                })();
                match outcome {
                    Ok(took) => eprintln!(
                        "cctl conform: {label} done in {took} ({} of {}, {:.0} min in)",
                        k + 1,
                        order.len(),
                        started.elapsed().as_secs_f64() / 60.0
                    ),
                    Err(e) if stop.load(Ordering::SeqCst) => {
                        eprintln!("cctl conform: {label} interrupted: {e:#}")
                    }
                    Err(e) => {
                        eprintln!("cctl conform: {label} failed: {e:#}");
                        failed
                            .lock()
                            .expect("no panic holds the lock")
                            .push(format!("{label}: {e:#}"));
                    }
                }
            });
        }
    });
    let done: Vec<PathBuf> = parts
        .iter()
        .filter(|p| p.join("lines.jsonl").exists())
        .cloned()
        .collect();
    conform::report::combine(dir, &done, &labels)?;
    for part in &done {
        for f in ["conform.json", "conform.md", "lines.jsonl"] {
            let _ = std::fs::remove_file(part.join(f));
        }
    }
    let failed = failed.into_inner().expect("no panic holds the lock");
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} guest(s) failed (the others' cases are in {}): {}",
            failed.len(),
            order.len(),
            dir.join("conform.md").display(),
            failed.join("; ")
        );
    }
    Ok(())
}

/// The `cctl conform` command a guest runs: `algos` into `out`, with the caller's scripts,
/// profile, `--short` and `--runs`.
fn guest_command(a: &Args, algos: &str, out: &Path) -> Result<String> {
    let exe = std::env::current_exe()?;
    let mut cmd = format!(
        "modprobe tun; '{}' conform {algos} --vm never --dir '{}' --runs {}",
        exe.display(),
        out.display(),
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
    for p in &a.params {
        cmd.push_str(&format!(" --param '{p}'"));
    }
    if a.short {
        cmd.push_str(" --short");
    }
    cmd.push_str(" > /dev/null");
    Ok(cmd)
}
