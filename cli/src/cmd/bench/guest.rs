//! `cctl bench run` in the 6.12 guest: the host picks the results directory, boots the
//! guest (or, on the virtual clock with `--jobs N`, N guests, one per slot) and has it run
//! the sweep into that directory with `--vm never`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cctl_report::record::timestamp;
use cctl_scenario::{self as scenario, Profile};
use cctl_vm as vm;

use super::RunArgs;
use crate::exit::{self, usage};
use crate::out::{out, outln};

/// Directory, under a results directory, of the slots of a one-guest-per-slot run: guest J
/// writes `slots/<J>/`.
pub const SLOTS_DIR: &str = "slots";

/// On the virtual clock a second of traffic takes up to 8 s of the host's (measured: 462 s
/// for 60 s at 250 Mbit/s); on the real clock a TCG guest runs it in real time but the
/// rest slowly. Host seconds allowed per second of traffic.
fn wall_per_traffic_s(clock: vm::Clock) -> f64 {
    match clock {
        vm::Clock::Virtual => 10.0,
        vm::Clock::Real => 2.0,
    }
}

/// Runs the scenario in the VM; returns the exit code and the results directory.
///
/// On the virtual clock with `--jobs N > 1`, N guests run side by side, one slot each
/// (icount runs all of a guest's vCPUs on one host thread, so one guest cannot use more
/// than one host CPU), and their slot directories are combined into the results directory.
pub(super) fn run_in_vm(
    a: &RunArgs,
    sc: &scenario::Scenario,
    needs_netem: bool,
) -> Result<(i32, PathBuf)> {
    if needs_netem {
        eprintln!(
            "cctl bench: the running kernel ({}) has no sch_netem; running {} in a VM",
            cctl_loader::kernel::release(),
            sc.name
        );
    }
    // The host picks the results directory, so that it can record the VM's process group
    // there (`--resume` ends a VM a killed cctl left behind); the guest resumes into it.
    let dir = match &a.resume {
        Some(d) => d.clone(),
        None => a.out.join(&sc.name).join(timestamp()),
    };
    let clock = a.clock.unwrap_or(vm::Clock::Real);
    let per_slot = clock == vm::Clock::Virtual && a.jobs > 1;
    check_layout(&dir, per_slot, a.jobs)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let out = dir.canonicalize()?;
    let profile: Profile = a.profile.parse().map_err(anyhow::Error::msg)?;
    let reps =
        f64::from(a.repeat.unwrap_or_else(|| sc.repeat(profile)) / sc.repeat(profile).max(1))
            .max(1.0);
    let traffic_s = sc.total_duration_s(profile).unwrap_or(600.0) * a.algo.len() as f64 * reps;
    // Ctrl-C kills the VMs (their namespaces and algorithms go with them); finished runs
    // stay on disk.
    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, cancel.clone()).context("installing signal handlers")?;
    }
    let timeout =
        Duration::from_secs_f64(traffic_s * wall_per_traffic_s(clock) / f64::from(a.jobs) + 600.0);
    if !per_slot {
        let cmd = guest_command(a, sc, &out, a.jobs, None)?;
        let mut spec = vm::VmSpec::detect()?;
        spec.rwdirs.push(out.clone());
        spec.pgid_file = Some(out.join(vm::PGID_FILE));
        // A vCPU per slot besides the base two (a TCG vCPU is a host thread: more than the
        // host's CPUs cannot help), and 256 MiB per slot beyond the first.
        let host_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        spec.cpus = spec.cpus.max((a.jobs + 1).min(host_cpus.max(spec.cpus)));
        spec.memory_mb += 256 * (a.jobs - 1);
        // On the virtual clock (here one slot) every vCPU runs on one host thread:
        // set_clock gives the guest vm::VIRTUAL_VCPUS.
        spec.set_clock(clock)?;
        spec.timeout = timeout;
        spec.echo = true;
        spec.cancel = Some(cancel);
        announce(&spec, None);
        return match vm::run_in_vm(&spec, &cmd) {
            Ok(res) => Ok((
                if res.success() {
                    exit::OK
                } else {
                    exit::FAILURE
                },
                out,
            )),
            Err(vm::VmError::Cancelled { .. }) => {
                eprintln!(
                    "cctl bench: interrupted; the VM was stopped, runs finished so far are in {}",
                    out.display()
                );
                Ok((exit::INTERRUPTED, out))
            }
            Err(e) => Err(e.into()),
        };
    }

    // One guest per slot: each has the base vCPUs and memory and runs one run at a time.
    let slots: Vec<PathBuf> = (1..=a.jobs)
        .map(|j| out.join(SLOTS_DIR).join(j.to_string()))
        .collect();
    let mut runs: Vec<(vm::VmSpec, String)> = Vec::new();
    for (j, slot_dir) in (1..=a.jobs).zip(&slots) {
        std::fs::create_dir_all(slot_dir)
            .with_context(|| format!("creating {}", slot_dir.display()))?;
        if let Some(ended) = vm::end_recorded_vm(slot_dir)? {
            eprintln!("cctl bench: slot {j}: {ended}");
        }
        let cmd = guest_command(a, sc, slot_dir, 1, Some((j, a.jobs)))?;
        let mut spec = vm::VmSpec::detect()?;
        spec.rwdirs.push(slot_dir.clone());
        spec.pgid_file = Some(slot_dir.join(vm::PGID_FILE));
        spec.set_clock(clock)?;
        spec.timeout = timeout;
        // The guests' lines would interleave: each goes to its slot's log instead.
        spec.echo = false;
        spec.cancel = Some(cancel.clone());
        announce(&spec, Some((j, a.jobs)));
        runs.push((spec, cmd));
    }
    let results = (1..=a.jobs).zip(vm::run_in_vms(&runs));
    let mut code = exit::OK;
    for ((j, res), slot_dir) in results.into_iter().zip(&slots) {
        let log = slot_dir.join("guest.log");
        match res {
            Ok(o) => {
                let _ = std::fs::write(&log, format!("{}{}", o.stdout, o.stderr));
                if !o.success() {
                    eprintln!(
                        "cctl bench: slot {j}/{}: the guest failed ({}); its output is in {}",
                        a.jobs,
                        o.status,
                        log.display()
                    );
                    code = exit::FAILURE;
                }
            }
            Err(vm::VmError::Cancelled { .. }) => code = exit::INTERRUPTED,
            Err(e) => {
                eprintln!("cctl bench: slot {j}/{}: {e}", a.jobs);
                code = exit::FAILURE;
            }
        }
    }
    let written: Vec<PathBuf> = slots
        .iter()
        .filter(|d| d.join("metadata.json").exists())
        .cloned()
        .collect();
    if written.is_empty() {
        anyhow::bail!(
            "no guest wrote results into {}",
            out.join(SLOTS_DIR).display()
        );
    }
    let m = cctl_report::merge::combine_slots(&out, &written, cctl_bench::resolve::native_of)?;
    if code == exit::INTERRUPTED {
        eprintln!(
            "cctl bench: interrupted; the VMs were stopped, runs finished so far are in {}",
            out.display()
        );
    }
    eprintln!(
        "cctl bench: {} guests: {} runs of {} done",
        a.jobs,
        m.runs,
        m.runs + m.missing.len()
    );
    if a.json {
        for r in &m.summary.rows {
            outln!("{}", serde_json::to_string(r)?)?;
        }
    } else {
        out!(
            "{}",
            cctl_report::summary::terminal_table(&m.summary, &sc.metrics)
        )?;
    }
    outln!("results: {}", out.display())?;
    Ok((code, out))
}

/// Refuses to resume `dir` with a layout other than the one it was started with: one guest
/// per slot (`slots/1..N/`) needs the same N; one guest needs no slots.
fn check_layout(dir: &Path, per_slot: bool, jobs: u32) -> Result<()> {
    let slots = dir.join(SLOTS_DIR);
    let had_slots = std::fs::read_dir(&slots).map_or(0, |d| d.flatten().count()) as u32;
    let had_runs = dir.join("metadata.json").exists();
    if per_slot && had_slots == 0 && had_runs {
        usage!(
            "--resume {}: this sweep ran in one guest; resume it with --jobs 1 or the real \
             clock (one guest per slot is for --clock virtual with --jobs 2 or more)",
            dir.display()
        );
    }
    if had_slots > 0 && (!per_slot || had_slots != jobs) {
        usage!(
            "--resume {}: this sweep ran one guest per slot in {had_slots} guests ({}); resume \
             it with --clock virtual --jobs {had_slots}",
            dir.display(),
            slots.display()
        );
    }
    Ok(())
}

/// The `cctl bench run` command a guest runs: into `dir`, `jobs` runs at once, slot `J/N`
/// of the run list if given.
fn guest_command(
    a: &RunArgs,
    sc: &scenario::Scenario,
    dir: &Path,
    jobs: u32,
    slot: Option<(u32, u32)>,
) -> Result<String> {
    let exe = std::env::current_exe()?;
    // Built-in scenarios go by name; a file by its absolute path (the guest sees the
    // host's file system read-only at the same paths).
    let scenario_arg = if sc.path.starts_with("<builtin>") {
        sc.name.clone()
    } else {
        sc.path.canonicalize()?.display().to_string()
    };
    let mut cmd = format!(
        "{} bench run {} --algo {} --profile {} --resume {} --interval-ms {} --queue-interval-ms {} --delay-sample {} --vm never --jobs {}",
        shell_quote(&exe.display().to_string()),
        shell_quote(&scenario_arg),
        shell_quote(&a.algo.join(",")),
        shell_quote(&a.profile),
        shell_quote(&dir.display().to_string()),
        a.interval_ms,
        a.queue_interval_ms,
        a.delay_sample,
        jobs,
    );
    if let Some(s) = &a.shard {
        cmd += &format!(" --shard {}", shell_quote(s));
    }
    if let Some(d) = a.duration_s {
        cmd += &format!(" --duration-s {d}");
    }
    if let Some((j, n)) = slot {
        cmd += &format!(" --slot {j}/{n}");
    }
    if let Some(r) = a.repeat {
        cmd += &format!(" --repeat {r}");
    }
    if let Some(s) = a.seed {
        cmd += &format!(" --seed {s}");
    }
    if let Some(p) = &a.points {
        let list: Vec<String> = p.iter().map(usize::to_string).collect();
        cmd += &format!(" --points {}", list.join(","));
    }
    if a.json && slot.is_none() {
        cmd += " --json";
    }
    Ok(cmd)
}

fn announce(spec: &vm::VmSpec, slot: Option<(u32, u32)>) {
    let what = slot.map_or(String::new(), |(j, n)| format!(" for slot {j}/{n}"));
    eprintln!(
        "cctl bench: VM{what} {} ({:?}, {} clock), {} CPUs, {} MB",
        spec.kernel.display(),
        spec.accel,
        spec.clock,
        spec.cpus,
        spec.memory_mb
    );
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
