//! `cctl bench run --dry-run`: the scenario checked and the planned runs printed, nothing
//! run (as a table, or with `--json` as one JSON object).

use anyhow::Result;
use cctl_bench::network::check_supported;
use cctl_bench::plan::Plan;
use cctl_bench::request::RunRequest;
use cctl_bench::resolve::{check_algorithms, RunKernel};
use cctl_scenario::{RunPoint, Scenario};

use super::run::RunArgs;
use crate::cmd::args::VmMode;
use crate::exit;
use crate::out::outln;

/// Checks the sweep `req` of `sc` (its `points`) and prints its plan.
pub(super) fn print(
    a: &RunArgs,
    req: &RunRequest,
    sc: &Scenario,
    points: &[RunPoint],
) -> Result<i32> {
    // Whether `--vm auto` would need the VM takes a netem probe, which creates a
    // namespace: not for a dry run. So kernel names may be modules of any installed
    // kernel (the VM's included) unless the runs are sure to stay on this one.
    let kernel = if a.vm == VmMode::Never {
        RunKernel::Running
    } else {
        RunKernel::Installed
    };
    check_algorithms(&req.algo, kernel)?;
    cctl_bench::network::check_dctcp(&req.algo, points)?;
    let plan = Plan::of(sc, req)?;
    let traffic_s = points.iter().map(|p| p.duration_s).sum::<f64>()
        * f64::from(plan.repeat)
        * req.algo.len() as f64;
    if a.json {
        check_supported(sc, points)?;
        json(req, sc, &plan, traffic_s)?;
        return Ok(exit::OK);
    }
    if let Some(shard) = req.shard {
        for id in &plan.runs {
            outln!("shard {shard}: {id}")?;
        }
        outln!("shard {shard}: {} runs", plan.runs.len())?;
    }
    for p in points {
        outln!(
            "point {:>2}: {} ({} flows, {:.0} s)",
            p.index,
            p.label(),
            p.flows.len(),
            p.duration_s
        )?;
        if let Some(chain) = chain_line(p) {
            outln!("          chain: {chain}")?;
        }
    }
    outln!(
        "{} ({}) profile {}: {} points x {} algorithms x {} repetitions = {:.0} s of traffic",
        sc.name,
        sc.id,
        req.profile,
        points.len(),
        req.algo.len(),
        plan.repeat,
        traffic_s
    )?;
    outln!("algorithms: {}", req.algo.join(", "))?;
    for e in &sc.expectations {
        outln!("expect: {} {} ({})", e.metric, e.bounds(), e.selector())?;
    }
    if let Some(line) = estimate(a, points, &plan) {
        outln!("{line}")?;
    }
    let refs: Vec<&RunPoint> = points.iter().collect();
    if let Some(w) = cctl_bench::cost::cpu_warning(&refs, req.jobs as usize) {
        outln!("warning (on this machine): {w}")?;
    }
    check_supported(sc, points)?;
    Ok(exit::OK)
}

/// How long the sweep would take on the virtual clock (where it may run there: not with
/// `--vm never` or `--clock real`), from this host's figures (`cctl bench calibrate --clock
/// virtual`) or the default ones, with the `--jobs` it would use.
fn estimate(a: &RunArgs, points: &[RunPoint], plan: &Plan) -> Option<String> {
    if a.vm == VmMode::Never || a.clock == Some(cctl_vm::Clock::Real) {
        return None;
    }
    let store = std::path::Path::new(cctl_bench::speed::STORE);
    let speed = cctl_bench::speed::VirtualSpeed::load(store);
    let jobs = a.jobs.unwrap_or_else(cctl_vm::guests_that_fit);
    let runs_per_point = plan.runs.len() / points.len().max(1);
    let s = speed.estimate_s(points, runs_per_point, jobs);
    let source = match &speed.measured {
        Some(when) => format!("this host's figures from {} ({when})", store.display()),
        None => "the default figures; `cctl bench calibrate --clock virtual` measures this \
                 host's"
            .into(),
    };
    Some(format!(
        "estimated wall time on the virtual clock: {} ({} guests at a time; {source})",
        human(s),
        jobs.min(plan.runs.len().max(1) as u32)
    ))
}

/// `s` seconds as "1 h 02 min", "3 min 20 s" or "45 s".
fn human(s: f64) -> String {
    let s = s.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {:02} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600) / 60),
    }
}

/// The plan as one JSON object.
fn json(req: &RunRequest, sc: &Scenario, plan: &Plan, traffic_s: f64) -> Result<()> {
    let plan = serde_json::json!({
        "scenario": sc.name,
        "id": sc.id,
        "profile": req.profile.to_string(),
        "algorithms": req.algo,
        "repeat": plan.repeat,
        "points": plan.points().iter().map(|p| serde_json::json!({
            "index": p.index,
            "label": p.label(),
            "flows": p.flows.len(),
            "duration_s": p.duration_s,
        })).collect::<Vec<_>>(),
        "runs": plan.runs.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
        "traffic_s": traffic_s,
        "expectations": sc.expectations.iter().map(|e| format!(
            "{} {} ({})", e.metric, e.bounds(), e.selector()
        )).collect::<Vec<_>>(),
    });
    outln!("{plan}")?;
    Ok(())
}

/// A `[topology]` chain in one line: each hop's rate, RTT and buffer, each flow's path.
fn chain_line(p: &RunPoint) -> Option<String> {
    let t = p.topology.as_ref()?;
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
        .map(|(i, f)| format!("flow {} [{}, {}] {} ms", i + 1, f.first, f.last, f.rtt_ms))
        .collect();
    Some(format!("{}; {}", hops.join(", "), paths.join(", ")))
}
