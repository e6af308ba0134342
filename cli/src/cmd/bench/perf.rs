//! `cctl bench perf`: cctl's own costs measured side by side with their references
//! (native modules, no collector, `ss -ti`), in one run; the halves that need the native
//! modules or netem run in the 6.12 guest and are merged into one report.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cctl_bench::perf::{self, Part, PartOutcome, PerfReport, Site};

use crate::cmd::args::{check_clock, clock_parser, parse_parts, VmMode};
use crate::exit::{self, usage};
use crate::out::{out, outln};

/// Linux modules of the carried algorithms (from the catalogue) that the per-ACK part
/// needs besides the host's built-in reno and cubic.
fn guest_modules() -> Vec<&'static str> {
    cctl_loader::catalogue::ALGORITHMS
        .iter()
        .filter_map(|a| a.native)
        .filter(|m| !matches!(*m, "reno" | "cubic"))
        .collect()
}

/// Arguments of `cctl bench perf`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example: cctl bench perf --parts ack,collector\n\
Results go to <out>/<UTC timestamp>/perf.json and perf.md. Figures are ratios of side-by-side \
runs; --quick is a smoke run whose figures only show that the benchmark works.")]
pub struct PerfArgs {
    /// Parts to run, comma-separated: ack, live, collector, migrate, ceiling, delays
    /// (default: all of them).
    #[arg(long, value_delimiter = ',')]
    parts: Vec<String>,
    /// Short smoke version (CI): fewer and shorter rounds, fewer flows.
    #[arg(long)]
    quick: bool,
    /// Where the guest halves run (native modules other than reno/cubic, the netem
    /// ceiling): auto (in the 6.12 VM when the host kernel lacks netem or the modules),
    /// always, never (skip them).
    #[arg(long, value_enum, default_value_t = VmMode::Auto)]
    vm: VmMode,
    /// The guest's clock for the guest halves: `virtual` (QEMU icount: the guest's CPU time
    /// is its instruction count, whatever the host's load) or `real`; `virtual` always
    /// boots the guest.
    #[arg(long, default_value = "real", value_parser = clock_parser())]
    clock: cctl_vm::Clock,
    /// Results root: the run goes to <out>/<UTC timestamp>/.
    #[arg(long, default_value = "results/perf")]
    out: PathBuf,
    /// Print the rows as JSON lines instead of the table.
    #[arg(long)]
    json: bool,
    /// Internal: run the guest halves and write <dir>/guest.json (used inside the VM).
    #[arg(long, hide = true)]
    guest_dir: Option<PathBuf>,
}

/// What the guest run writes for the host to merge.
#[derive(serde::Serialize, serde::Deserialize)]
struct GuestResult {
    kernel: String,
    /// The clock the guest halves ran on.
    #[serde(default)]
    clock: Option<cctl_report::record::ClockRecord>,
    parts: Vec<PartOutcome>,
}

/// Runs `cctl bench perf`.
pub fn run(a: PerfArgs) -> Result<i32> {
    let parts: Vec<Part> = if a.parts.is_empty() {
        Part::ALL.to_vec()
    } else {
        parse_parts(&a.parts)?
    };
    if parts.is_empty() {
        usage!(
            "--parts: give at least one of {}",
            Part::ALL.map(Part::name).join(", ")
        );
    }
    check_clock(a.clock, a.vm)?;
    cctl_loader::kernel::require_privileges("measuring cctl's performance")?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }

    if let Some(dir) = &a.guest_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let outcomes = perf::run_parts(&parts, a.quick, Site::Guest, dir, stop.clone())?;
        let g = GuestResult {
            kernel: cctl_loader::kernel::release(),
            clock: Some(cctl_bench::run::current_clock()),
            parts: outcomes,
        };
        std::fs::write(
            dir.join("guest.json"),
            serde_json::to_string_pretty(&g)? + "\n",
        )
        .with_context(|| format!("writing {}", dir.join("guest.json").display()))?;
        return Ok(if stop.load(Ordering::SeqCst) {
            exit::INTERRUPTED
        } else {
            exit::OK
        });
    }

    let started = cctl_report::record::timestamp();
    let dir = a.out.join(&started);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let dir = dir.canonicalize()?;
    let mut report = PerfReport {
        started,
        machine: perf::Machine::detect(),
        guest_kernel: None,
        guest_clock: None,
        quick: a.quick,
        parts: Vec::new(),
    };
    eprintln!(
        "cctl bench perf: parts {}, results in {}",
        parts.iter().map(|p| p.name()).collect::<Vec<_>>().join(","),
        dir.display()
    );
    report.parts = perf::run_parts(&parts, a.quick, Site::Host, &dir, stop.clone())?;

    let guest_parts: Vec<Part> = parts
        .iter()
        .copied()
        .filter(|p| p.has_guest_half())
        .collect();
    let want_guest = !guest_parts.is_empty()
        && !stop.load(Ordering::SeqCst)
        && match a.vm {
            VmMode::Never => false,
            VmMode::Always => true,
            VmMode::Auto => true,
        };
    if want_guest {
        let host_can = cctl_netem::testbed::netem_available()
            && guest_modules()
                .iter()
                .all(|m| cctl_loader::kernel::native_module(m).is_some());
        let res = if a.vm == VmMode::Auto && host_can && a.clock == cctl_vm::Clock::Real {
            // This kernel has netem and every module: the "guest" half runs right here.
            perf::run_parts(&guest_parts, a.quick, Site::Guest, &dir, stop.clone()).map(|parts| {
                GuestResult {
                    kernel: cctl_loader::kernel::release(),
                    clock: Some(cctl_bench::run::current_clock()),
                    parts,
                }
            })
        } else {
            run_guest(&a, &guest_parts, &dir, stop.clone())
        };
        match res {
            Ok(g) => {
                report.guest_kernel = Some(g.kernel);
                report.guest_clock = g.clock;
                report.parts.extend(g.parts);
            }
            Err(e) => {
                for &part in &guest_parts {
                    report.parts.push(PartOutcome {
                        part,
                        site: Site::Guest,
                        seconds: 0.0,
                        result: Default::default(),
                        error: Some(format!("the guest run failed: {e:#}")),
                    });
                }
            }
        }
    }
    report
        .parts
        .sort_by_key(|p| (p.part, p.site == Site::Guest));
    perf::write(&dir, &report)?;
    if a.json {
        for r in report.rows() {
            outln!("{}", serde_json::to_string(r)?)?;
        }
    } else {
        out!("{}", perf::markdown(&report))?;
    }
    outln!("results: {}", dir.display())?;
    if stop.load(Ordering::SeqCst) {
        eprintln!("cctl bench perf: interrupted; the parts finished so far are in the report");
        return Ok(exit::INTERRUPTED);
    }
    if report.failed() {
        eprintln!("cctl bench perf: some parts failed (see FAILED in the report)");
        return Ok(exit::FAILURE);
    }
    Ok(exit::OK)
}

/// Boots the 6.12 guest and runs the guest halves there; reads back their outcomes.
fn run_guest(
    a: &PerfArgs,
    parts: &[Part],
    dir: &std::path::Path,
    stop: Arc<AtomicBool>,
) -> Result<GuestResult> {
    use cctl_vm as vm;
    let gdir = dir.join("guest");
    std::fs::create_dir_all(&gdir).with_context(|| format!("creating {}", gdir.display()))?;
    let exe = std::env::current_exe()?;
    let cmd = format!(
        "'{}' bench perf --parts {} --guest-dir '{}'{}",
        exe.display(),
        parts.iter().map(|p| p.name()).collect::<Vec<_>>().join(","),
        gdir.display(),
        if a.quick { " --quick" } else { "" }
    );
    let mut spec = vm::VmSpec::detect()?;
    spec.set_clock(a.clock)?;
    spec.rwdirs.push(gdir.clone());
    spec.timeout = Duration::from_secs(if a.quick { 1200 } else { 3600 });
    spec.echo = true;
    spec.cancel = Some(stop);
    eprintln!(
        "cctl bench perf: guest half ({}) in {} ({:?}), {} CPUs",
        parts.iter().map(|p| p.name()).collect::<Vec<_>>().join(","),
        spec.kernel.display(),
        spec.accel,
        spec.cpus
    );
    let out = vm::run_in_vm(&spec, &cmd)?;
    let path = gdir.join("guest.json");
    if !path.exists() {
        anyhow::bail!(
            "the guest wrote no {} (exit status {})",
            path.display(),
            out.status
        );
    }
    let text = std::fs::read_to_string(&path)?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}
