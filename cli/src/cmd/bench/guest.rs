//! `cctl bench run` in the 6.12 guest: the host picks the results directory, boots the
//! guest and has it run the sweep into that directory: the host writes the request there
//! (`request.json`) and the guest runs `cctl bench run --request FILE --vm never`. On the
//! real clock one vng guest runs the whole sweep; on the virtual clock every run has a
//! sealed guest of its own (`cctl_vm::Sealed`), `--jobs` of them at a time, writing
//! `slots/<J>/`, which are combined into the directory at the end.

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
/// results directory. `json`: the guest prints its summary as JSON lines. `profile`: each
/// sealed guest records a perf profile into its slot (`--profile-guest`).
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
    profile: bool,
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
    let per_run = clock == vm::Clock::Virtual;
    let runs = cctl_bench::plan::Plan::of(sc, req)?.runs.len() as u32;
    check_layout(&dir, per_run, runs)?;
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
        profile,
    };
    if per_run {
        guests.per_run(req, sc, &out, runs, json)
    } else {
        guests.one(req, &out, json)
    }
}

/// What `cctl` reads to draw its plots (fontconfig's configuration and the fonts), carried
/// into a sealed guest where the host has them.
const PLOT_FILES: &[&str] = &["/etc/fonts", "/usr/share/fonts"];

/// How the guests of one sweep boot: their clock, how long they may take, the flag that
/// stops them, the sweep's seed (QEMU's `-seed` of each), and whether each sealed guest
/// records a perf profile.
struct Guests {
    clock: vm::Clock,
    timeout: Duration,
    cancel: Arc<AtomicBool>,
    seed: u64,
    profile: bool,
}

/// The guest profile's sampling period, in ns of guest time: on the virtual clock (icount
/// shift 0, one instruction per ns while the vCPU runs) a sample every this many
/// instructions.
pub const PROFILE_PERIOD_NS: u64 = 100_000;

/// `cmd` run under the guest's `perf record` (system-wide cpu-clock samples every
/// [`PROFILE_PERIOD_NS`]) into `dir/perf.data`, followed by a copy of the guest's
/// `/proc/kallsyms` (what the host needs to name kernel and BPF samples); exits with
/// `cmd`'s status.
fn profiled(cmd: &str, dir: &Path) -> String {
    let d = shell_quote(&dir.display().to_string());
    format!(
        "perf record -q -a -e cpu-clock -c {PROFILE_PERIOD_NS} -o {d}/perf.data -- {cmd}; \
         st=$?; cat /proc/kallsyms >{d}/kallsyms; exit $st"
    )
}

impl Guests {
    /// A guest for the sweep's results directory `out` (its slot's with `slot`): the VM
    /// and the command that runs `req` there, resumed into `out` (which a sealed guest
    /// sees at [`vm::GUEST_OUT`]).
    fn spec(
        &self,
        req: &RunRequest,
        out: &Path,
        slot: Option<Shard>,
        seed: u64,
        json: bool,
    ) -> Result<(vm::VmSpec, String)> {
        let exe = std::env::current_exe()?;
        let sealed = self.clock == vm::Clock::Virtual;
        // A sealed guest sees its inputs at fixed paths (the results at /out, cctl at
        // /usr/bin/cctl, a scenario file under /in), so that no host path reaches it: the
        // request it reads names those.
        let scenario = Path::new(&req.scenario);
        let scenario_file = scenario.is_absolute() && scenario.is_file();
        let guest_scenario = match scenario.file_name() {
            Some(name) if sealed && scenario_file => {
                Path::new(vm::GUEST_IN).join(name).display().to_string()
            }
            _ => req.scenario.clone(),
        };
        let (guest_out, guest_exe) = match sealed {
            true => (PathBuf::from(vm::GUEST_OUT), PathBuf::from(vm::GUEST_CCTL)),
            false => (out.to_path_buf(), exe.clone()),
        };
        let guest_req = RunRequest {
            scenario: guest_scenario.clone(),
            out: guest_out.clone(),
            resume: Some(guest_out.clone()),
            jobs: if slot.is_some() { 1 } else { req.jobs },
            slot,
            ..req.clone()
        };
        let file = guest_req
            .write(out)
            .with_context(|| format!("writing the guest's request into {}", out.display()))?;
        let guest_file = guest_out.join(file.file_name().expect("a request file name"));
        // The build's digest comes from the host: hashing the binary would cost the guest
        // seconds of its clock.
        let build = cctl_bench::run::current_build()
            .map(|b| format!("{}={} ", cctl_bench::run::BUILD_ENV, shell_quote(&b)))
            .unwrap_or_default();
        let mut cmd = format!(
            "{build}{} bench run --request {} --vm never",
            shell_quote(&guest_exe.display().to_string()),
            shell_quote(&guest_file.display().to_string()),
        );
        if json {
            cmd += " --json";
        }
        let mut spec = vm::VmSpec::detect()?;
        if sealed {
            // Sealed: the guest waits on the host for nothing while it runs, so that its
            // virtual time, and with it the run, depends on its inputs alone.
            let mut carry: Vec<vm::Carried> = PLOT_FILES
                .iter()
                .filter(|p| Path::new(p).exists())
                .map(|p| vm::Carried::system(*p))
                .collect();
            if scenario_file {
                carry.push(vm::Carried::at(scenario, &guest_scenario));
            }
            let mut tools = cctl_netem::tc::TOOLS.to_vec();
            if self.profile {
                tools.push(("perf", "Debian package linux-perf"));
            }
            spec.sealed = Some(vm::Sealed {
                programs: vec![vm::Carried::at(&exe, vm::GUEST_CCTL)],
                carry,
                tools,
                out: out.to_path_buf(),
            });
        } else {
            spec.rwdirs.push(out.to_path_buf());
        }
        spec.pgid_file = Some(out.join(vm::PGID_FILE));
        spec.timeout = self.timeout;
        spec.cancel = Some(self.cancel.clone());
        // The run's seed is the guest's too: its kernel's random state comes from it.
        spec.seed = Some(seed);
        Ok((spec, cmd))
    }

    /// One guest runs every slot.
    fn one(&self, req: &RunRequest, out: &Path, json: bool) -> Result<(i32, PathBuf)> {
        let (mut spec, cmd) = self.spec(req, out, None, self.seed, json)?;
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

    /// One sealed guest per run of the plan's `n` (run J in `slots/<J>/`, as slot `J/n`,
    /// booted with the run's seed), `--jobs` guests at a time; runs a slot already holds
    /// are not run again. The slot directories are combined into `out` at the end, also
    /// after an interrupt or a failed guest (what finished is kept).
    ///
    /// A guest per run makes each run a function of the request and its seed alone: no
    /// earlier run in the same kernel, and no host I/O while it runs (results come back
    /// when its guest has ended).
    fn per_run(
        &self,
        req: &RunRequest,
        sc: &scenario::Scenario,
        out: &Path,
        n: u32,
        json: bool,
    ) -> Result<(i32, PathBuf)> {
        let plan = cctl_bench::plan::Plan::of(sc, req)?;
        let slots: Vec<PathBuf> = (1..=n)
            .map(|j| out.join(SLOTS_DIR).join(j.to_string()))
            .collect();
        let mut todo = Vec::new();
        for (j, (slot_dir, run)) in (1..=n).zip(slots.iter().zip(&plan.runs)) {
            std::fs::create_dir_all(slot_dir)
                .with_context(|| format!("creating {}", slot_dir.display()))?;
            if let Some(ended) = vm::end_recorded_vm(slot_dir)? {
                eprintln!("cctl bench: run {j}: {ended}");
            }
            if cctl_report::resume::completed_runs(slot_dir).is_empty() {
                todo.push((j, slot_dir.clone(), plan.seed + u64::from(run.rep)));
            }
        }
        let jobs = (req.jobs as usize).clamp(1, todo.len().max(1));
        let next = std::sync::atomic::AtomicUsize::new(0);
        let code = std::sync::atomic::AtomicI32::new(exit::OK);
        std::thread::scope(|s| -> Result<()> {
            let workers: Vec<_> = (0..jobs)
                .map(|_| {
                    s.spawn(|| -> Result<()> {
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            let Some((j, slot_dir, seed)) = todo.get(i) else {
                                return Ok(());
                            };
                            if self.cancel.load(std::sync::atomic::Ordering::SeqCst) {
                                return Ok(());
                            }
                            let c = self.run_one(req, slot_dir, Shard { k: *j, n }, *seed, jobs)?;
                            if c != exit::OK {
                                code.store(c, std::sync::atomic::Ordering::SeqCst);
                            }
                        }
                    })
                })
                .collect();
            for w in workers {
                w.join()
                    .map_err(|_| anyhow::anyhow!("a guest's thread panicked"))??;
            }
            Ok(())
        })?;
        let mut code = code.into_inner();
        if self.cancel.load(std::sync::atomic::Ordering::SeqCst) {
            code = exit::INTERRUPTED;
        }
        combine(sc, out, &slots, req.jobs, json, &req.scenario)?;
        if code == exit::INTERRUPTED {
            eprintln!(
                "cctl bench: interrupted; the VMs were stopped, runs finished so far are in {}",
                out.display()
            );
        }
        Ok((code, out.to_path_buf()))
    }

    /// Runs slot `slot` (one run) in a sealed guest writing `slot_dir`; its output is
    /// shown as it comes when it is the only guest at a time (`jobs` 1), else kept in
    /// `slot_dir/guest.log`. Returns the exit code it contributes.
    fn run_one(
        &self,
        req: &RunRequest,
        slot_dir: &Path,
        slot: Shard,
        seed: u64,
        jobs: usize,
    ) -> Result<i32> {
        let (mut spec, cmd) = self.spec(req, slot_dir, Some(slot), seed, false)?;
        // The guest's own summary of its one run is not shown: the combined one is.
        let mut cmd = format!("{cmd} >/dev/null");
        if self.profile {
            cmd = profiled(&cmd, Path::new(vm::GUEST_OUT));
        }
        spec.set_clock(self.clock)?;
        spec.echo = jobs == 1;
        announce(&spec, Some((slot.k, slot.n)));
        let log = slot_dir.join("guest.log");
        Ok(match vm::run_in_vm(&spec, &cmd) {
            Ok(o) => {
                let _ = std::fs::write(&log, format!("{}{}", o.stdout, o.stderr));
                record_host_wall(slot_dir, o.elapsed, jobs);
                if o.success() {
                    exit::OK
                } else {
                    eprintln!(
                        "cctl bench: run {slot}: the guest failed ({}); its output is in {}",
                        o.status,
                        log.display()
                    );
                    exit::FAILURE
                }
            }
            Err(vm::VmError::Cancelled { .. }) => exit::INTERRUPTED,
            Err(e) => {
                eprintln!("cctl bench: run {slot}: {e}");
                exit::FAILURE
            }
        })
    }
}

/// Writes [`cctl_bench::speed::HOST_FILE`] (`{"wall_s": host seconds from building the guest's initramfs to its
/// power-off, "guests_at_once": jobs}`) into every run directory under `slot_dir/runs`;
/// `cctl bench calibrate` reads it. Best effort: a slot without runs gets none.
fn record_host_wall(slot_dir: &Path, elapsed: Duration, jobs: usize) {
    let text = serde_json::json!({"wall_s": elapsed.as_secs_f64(), "guests_at_once": jobs});
    let Ok(algos) = std::fs::read_dir(slot_dir.join("runs")) else {
        return;
    };
    for algo in algos.flatten() {
        for run in std::fs::read_dir(algo.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if run.path().join("run.json").exists() {
                let _ = std::fs::write(
                    run.path().join(cctl_bench::speed::HOST_FILE),
                    format!("{text}\n"),
                );
            }
        }
    }
}

/// Gives a slot's `metadata.json` the host's path of the scenario file (`scenario_file`, the
/// request's) where the sealed guest recorded the one it saw (under [`vm::GUEST_IN`]), so
/// that the host's report finds the file.
fn host_scenario_path(slot_dir: &Path, scenario_file: &str) -> Result<()> {
    let path = slot_dir.join("metadata.json");
    let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut meta: serde_json::Value =
        serde_json::from_slice(&text).with_context(|| format!("parsing {}", path.display()))?;
    let in_guest = meta["scenario_path"]
        .as_str()
        .is_some_and(|p| Path::new(p).starts_with(vm::GUEST_IN));
    if in_guest {
        meta["scenario_path"] = scenario_file.into();
        std::fs::write(&path, serde_json::to_vec_pretty(&meta)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Combines the slot directories the guests (`jobs` at a time) wrote into `out` and prints
/// the summary; `scenario_file`: the request's scenario (its host path, for a file).
fn combine(
    sc: &scenario::Scenario,
    out: &Path,
    slots: &[PathBuf],
    jobs: u32,
    json: bool,
    scenario_file: &str,
) -> Result<()> {
    let written: Vec<PathBuf> = slots
        .iter()
        .filter(|d| d.join("metadata.json").exists())
        .cloned()
        .collect();
    for d in &written {
        host_scenario_path(d, scenario_file)?;
    }
    if written.is_empty() {
        anyhow::bail!(
            "no guest wrote results into {}",
            out.join(SLOTS_DIR).display()
        );
    }
    let m = cctl_report::merge::combine_slots(out, &written, jobs, cctl_bench::resolve::native_of)?;
    eprintln!(
        "cctl bench: {} guests, {jobs} at a time: {} runs of {} done",
        written.len(),
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

/// Refuses to resume `dir` with a layout other than the one it was started with: one
/// guest per run (`slots/1..N/`, the virtual clock) needs the same N runs; one guest (the
/// real clock) needs no slots.
fn check_layout(dir: &Path, per_run: bool, runs: u32) -> Result<()> {
    let slots = dir.join(SLOTS_DIR);
    let had_slots = std::fs::read_dir(&slots).map_or(0, |d| d.flatten().count()) as u32;
    let had_runs = dir.join("metadata.json").exists();
    if per_run && had_slots == 0 && had_runs {
        usage!(
            "--resume {}: this sweep ran in one guest; resume it with --clock real (one guest \
             per run is for --clock virtual)",
            dir.display()
        );
    }
    if had_slots > 0 && !per_run {
        usage!(
            "--resume {}: this sweep ran one guest per run ({}); resume it with --clock virtual",
            dir.display(),
            slots.display()
        );
    }
    if had_slots > 0 && had_slots != runs {
        usage!(
            "--resume {}: this sweep ran one guest per run for {had_slots} runs ({}), and this \
             request plans {runs}; resume it with the options it started with (its request.json)",
            dir.display(),
            slots.display()
        );
    }
    Ok(())
}

fn announce(spec: &vm::VmSpec, slot: Option<(u32, u32)>) {
    let what = slot.map_or(String::new(), |(j, n)| format!(" for slot {j}/{n}"));
    eprintln!(
        "cctl bench: VM{what} {} ({:?}, {} clock{}), {} CPUs, {} MB",
        spec.kernel.display(),
        spec.accel,
        spec.clock,
        if spec.sealed.is_some() {
            ", sealed"
        } else {
            ""
        },
        spec.cpus,
        spec.memory_mb
    );
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}
