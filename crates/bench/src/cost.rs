//! What a run costs the machine: CPU time from /proc/stat, and a model of the CPUs a run
//! needs (measured on the host and in the TCG guest) that warns when `--jobs` asks for
//! more than the machine can give.

use cctl_scenario::RunPoint;

/// Busy and total jiffies of all CPUs, from /proc/stat (busy share = Δbusy / Δtotal).
pub fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).unwrap_or(&0);
    Some((total - idle, total))
}

/// CPUs one run needs, estimated from its bottleneck rate: a fixed part (collector, queue
/// sampler, flow threads) and a part per Mbit/s that the kernel spends forwarding through
/// the dumbbell's veths and qdiscs. From `make bench-jobs` and a host sweep of one flow at
/// 10-1000 Mbit/s on this project's 2-vCPU machines (busy share of all CPUs x CPUs, one
/// slot): on the host kernel 0.05 CPUs at 10 Mbit/s, 0.25 at 100, 0.86 at 300; in the TCG
/// guest 0.36 at 10 Mbit/s (T0.1's two flows), about 8 times the host's.
pub fn cpus_per_run(point: &RunPoint) -> f64 {
    let (fixed, per_mbit) = if cctl_vm::emulated_cpu() {
        (TCG_CPUS_FIXED, TCG_CPUS_PER_MBIT)
    } else {
        (HOST_CPUS_FIXED, HOST_CPUS_PER_MBIT)
    };
    // A chain forwards every hop's traffic.
    let mbit = point.topology.as_ref().map_or(point.rate_mbit, |t| {
        t.hops.iter().map(|h| h.rate_mbit).sum()
    });
    fixed + per_mbit * mbit
}

/// Measured CPU per run on the host kernel: fixed part, CPUs.
const HOST_CPUS_FIXED: f64 = 0.03;
/// Measured CPU per run on the host kernel: per Mbit/s of bottleneck, CPUs.
const HOST_CPUS_PER_MBIT: f64 = 0.0028;
/// Measured CPU per run in the TCG guest: fixed part, CPUs.
const TCG_CPUS_FIXED: f64 = 0.05;
/// Measured CPU per run in the TCG guest: per Mbit/s of bottleneck, CPUs.
const TCG_CPUS_PER_MBIT: f64 = 0.031;

/// Share of the machine's CPUs that runs may use before they measure less than the link
/// carries. In the TCG guest the emulator's own threads share the host's cores with the
/// vCPUs: `make bench-jobs` lost 5-7 points of link utilisation with 4 slots at 72 % of
/// the guest's CPUs and none with 2 slots at 36 %. On the host, headroom for the system.
fn usable_cpu_share() -> f64 {
    if cctl_vm::emulated_cpu() {
        0.5
    } else {
        0.8
    }
}

/// A warning when `jobs` of the costliest of `points` at once would need more CPU than the
/// machine can give runs ([`cpus_per_run`], [`usable_cpu_share`]), naming the need and the
/// `--jobs` that fits.
pub fn cpu_warning(points: &[&RunPoint], jobs: usize) -> Option<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let usable = cpus * usable_cpu_share();
    let worst = points
        .iter()
        .map(|p| cpus_per_run(p))
        .fold(0.0_f64, f64::max);
    let need = worst * jobs as f64;
    (jobs > 1 && need > usable).then(|| {
        format!(
            "{jobs} runs at once need about {need:.1} CPUs (up to {worst:.2} each) and runs \
             can use {usable:.1} of this machine's {cpus:.0}{}: they would compete for CPU \
             and measure less than the link carries; --jobs {} fits",
            if cctl_vm::emulated_cpu() {
                " (an emulated guest)"
            } else {
                ""
            },
            ((usable / worst).floor() as usize).max(1)
        )
    })
}
