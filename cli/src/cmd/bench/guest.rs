//! `cctl bench run` in the 6.12 guest: the host picks the results directory, boots the
//! guest (or, on the virtual clock with `--jobs N`, N guests, one per slot) and has it run
//! the sweep into that directory: the host writes the request there (`request.json`) and
//! the guest runs `cctl bench run --request FILE --vm never`.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cctl_bench::request::RunRequest;
use cctl_report::record::timestamp;
use cctl_report::runs::Shard;
use cctl_scenario as scenario;
use cctl_vm as vm;

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

/// Runs the sweep `req` of `sc` in the VM on `clock`; returns the exit code and the
/// results directory. `json`: the guest prints its summary as JSON lines.
///
/// On the virtual clock with `--jobs N > 1`, N guests run side by side, one slot each
/// (icount runs all of a guest's vCPUs on one host thread, so one guest cannot use more
/// than one host CPU), and their slot directories are combined into the results directory.
pub(super) fn run_in_vm(
    req: &RunRequest,
    sc: &scenario::Scenario,
    clock: vm::Clock,
    json: bool,
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
    let dir = match &req.resume {
        Some(d) => d.clone(),
        None => req.out.join(&sc.name).join(timestamp()),
    };
    let per_slot = clock == vm::Clock::Virtual && req.jobs > 1;
    check_layout(&dir, per_slot, req.jobs)?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let out = dir.canonicalize()?;
    let reps = f64::from(req.repeat_of(sc) / sc.repeat(req.profile).max(1)).max(1.0);
    let traffic_s =
        sc.total_duration_s(req.profile).unwrap_or(600.0) * req.algo.len() as f64 * reps;
    // Ctrl-C kills the VMs (their namespaces and algorithms go with them); finished runs
    // stay on disk.
    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, cancel.clone()).context("installing signal handlers")?;
    }
    let timeout = Duration::from_secs_f64(
        traffic_s * wall_per_traffic_s(clock) / f64::from(req.jobs) + 600.0,
    );
    let guests = Guests {
        clock,
        timeout,
        cancel,
        seed: req.seed_of(sc),
    };
    if per_slot {
        guests.per_slot(req, sc, &out, json)
    } else {
        guests.one(req, &out, json)
    }
}

/// How the guests of one sweep boot: their clock, how long they may take, the flag that
/// stops them, and the sweep's seed (QEMU's `-seed` of each).
struct Guests {
    clock: vm::Clock,
    timeout: Duration,
    cancel: Arc<AtomicBool>,
    seed: u64,
}

impl Guests {
    /// A guest for the sweep's results directory `out` (its slot's with `slot`): the VM
    /// and the command that runs `req` there, resumed into `out`.
    fn spec(
        &self,
        req: &RunRequest,
        out: &Path,
        slot: Option<Shard>,
        json: bool,
    ) -> Result<(vm::VmSpec, String)> {
        let guest_req = RunRequest {
            resume: Some(out.to_path_buf()),
            jobs: if slot.is_some() { 1 } else { req.jobs },
            slot,
            ..req.clone()
        };
        let file = guest_req
            .write(out)
            .with_context(|| format!("writing the guest's request into {}", out.display()))?;
        let exe = std::env::current_exe()?;
        let mut cmd = format!(
            "{} bench run --request {} --vm never",
            shell_quote(&exe.display().to_string()),
            shell_quote(&file.display().to_string()),
        );
        if json {
            cmd += " --json";
        }
        let mut spec = vm::VmSpec::detect()?;
        spec.rwdirs.push(out.to_path_buf());
        spec.pgid_file = Some(out.join(vm::PGID_FILE));
        spec.timeout = self.timeout;
        spec.cancel = Some(self.cancel.clone());
        // The run's seed is the guest's too: its kernel's random state comes from it.
        spec.seed = Some(self.seed);
        Ok((spec, cmd))
    }

    /// One guest runs every slot.
    fn one(&self, req: &RunRequest, out: &Path, json: bool) -> Result<(i32, PathBuf)> {
        let (mut spec, cmd) = self.spec(req, out, None, json)?;
        // A vCPU per slot besides the base two (a TCG vCPU is a host thread: more than the
        // host's CPUs cannot help), and 256 MiB per slot beyond the first.
        let host_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        spec.cpus = spec.cpus.max((req.jobs + 1).min(host_cpus.max(spec.cpus)));
        spec.memory_mb += 256 * (req.jobs - 1);
        // On the virtual clock (here one slot) every vCPU runs on one host thread:
        // set_clock gives the guest vm::VIRTUAL_VCPUS.
        spec.set_clock(self.clock)?;
        spec.echo = true;
        announce(&spec, None);
        let out = out.to_path_buf();
        match vm::run_in_vm(&spec, &cmd) {
            Ok(res) if res.success() => Ok((exit::OK, out)),
            Ok(_) => Ok((exit::FAILURE, out)),
            Err(vm::VmError::Cancelled { .. }) => {
                eprintln!(
                    "cctl bench: interrupted; the VM was stopped, runs finished so far are in {}",
                    out.display()
                );
                Ok((exit::INTERRUPTED, out))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// One guest per slot, each with the base vCPUs and memory running one run at a time;
    /// their slot directories combined into `out` at the end.
    fn per_slot(
        &self,
        req: &RunRequest,
        sc: &scenario::Scenario,
        out: &Path,
        json: bool,
    ) -> Result<(i32, PathBuf)> {
        let n = req.jobs;
        let slots: Vec<PathBuf> = (1..=n)
            .map(|j| out.join(SLOTS_DIR).join(j.to_string()))
            .collect();
        let mut runs: Vec<(vm::VmSpec, String)> = Vec::new();
        for (j, slot_dir) in (1..=n).zip(&slots) {
            std::fs::create_dir_all(slot_dir)
                .with_context(|| format!("creating {}", slot_dir.display()))?;
            if let Some(ended) = vm::end_recorded_vm(slot_dir)? {
                eprintln!("cctl bench: slot {j}: {ended}");
            }
            let (mut spec, cmd) = self.spec(req, slot_dir, Some(Shard { k: j, n }), false)?;
            spec.set_clock(self.clock)?;
            // The guests' lines would interleave: each goes to its slot's log instead.
            spec.echo = false;
            announce(&spec, Some((j, n)));
            runs.push((spec, cmd));
        }
        let mut code = exit::OK;
        for ((j, res), slot_dir) in (1..=n).zip(vm::run_in_vms(&runs)).zip(&slots) {
            let log = slot_dir.join("guest.log");
            match res {
                Ok(o) => {
                    let _ = std::fs::write(&log, format!("{}{}", o.stdout, o.stderr));
                    if !o.success() {
                        eprintln!(
                            "cctl bench: slot {j}/{n}: the guest failed ({}); its output is in {}",
                            o.status,
                            log.display()
                        );
                        code = exit::FAILURE;
                    }
                }
                Err(vm::VmError::Cancelled { .. }) => code = exit::INTERRUPTED,
                Err(e) => {
                    eprintln!("cctl bench: slot {j}/{n}: {e}");
                    code = exit::FAILURE;
                }
            }
        }
        combine(sc, out, &slots, n, json)?;
        if code == exit::INTERRUPTED {
            eprintln!(
                "cctl bench: interrupted; the VMs were stopped, runs finished so far are in {}",
                out.display()
            );
        }
        Ok((code, out.to_path_buf()))
    }
}

/// Combines the slot directories the guests wrote into `out` and prints the summary.
fn combine(
    sc: &scenario::Scenario,
    out: &Path,
    slots: &[PathBuf],
    n: u32,
    json: bool,
) -> Result<()> {
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
    let m = cctl_report::merge::combine_slots(out, &written, cctl_bench::resolve::native_of)?;
    eprintln!(
        "cctl bench: {n} guests: {} runs of {} done",
        m.runs,
        m.runs + m.missing.len()
    );
    if json {
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
    Ok(())
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
