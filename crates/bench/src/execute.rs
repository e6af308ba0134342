//! A sweep executed: every point × algorithm × repetition of a scenario (or a shard of
//! them, or what a resumed directory lacks), `--jobs` at a time on their own slots, under
//! the kernel's bench lock, with one collector for all, algorithms loaded for the sweep and
//! unloaded after their last run, and everything removed at the end or on an interrupt.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use cctl_loader::{kernel, registry};
use cctl_netem::slot::PREFIX;
use cctl_netem::testbed::remove_leftovers;
use cctl_report::record::{timestamp, Metadata, ResolvedCc, RunRecord};
use cctl_report::resume::{check_compatible, completed_runs, Mismatch};
use cctl_report::runs::RunId;
use cctl_scenario::Scenario;

use crate::cost::cpu_warning;
use crate::feed::SampleFeed;
use crate::network::{check_dctcp, check_supported, NetPlan};
use crate::plan::{Plan, Unloads};
use crate::pool::{self, Progress};
use crate::request::RunRequest;
use crate::resolve::resolve_algorithms;
use crate::run::{run_once, PORT};
use crate::validity::deviations;

/// Runs every point × algorithm × repetition of `sc` (or `req.shard`'s part of them),
/// `req.jobs` at a time; returns the results directory and the records of the completed
/// runs (with `req.resume`, also those completed before). Writes `metadata.json` and
/// [`crate::request::REQUEST_FILE`] there first. Takes the kernel's bench lock
/// ([`crate::lock`]), cleans up leftovers first and everything it made at the end, also
/// when interrupted through `stop` (then it returns what was completed). An algorithm is
/// unloaded when the last run that uses it has ended. `progress`: a bar on a terminal, a
/// line per run elsewhere.
///
/// Errors: a request out of range ([`crate::request::RequestError`]); another `cctl bench`
/// holds the lock ([`crate::lock::LockError::Held`]); the resumed directory describes
/// another sweep ([`Mismatch`]); privileges, kernel features, loading, and the first run
/// that fails (the runs under way finish first).
pub fn run_scenario(
    sc: &Scenario,
    req: &RunRequest,
    progress: bool,
    stop: Arc<AtomicBool>,
) -> Result<(PathBuf, Vec<RunRecord>)> {
    req.validate()?;
    let plan = Plan::of(sc, req)?;
    check_supported(sc, plan.points())?;
    check_dctcp(&req.algo, plan.points())?;
    kernel::require_privileges("running a benchmark")?;
    kernel::require_struct_ops_links()?;
    kernel::ensure_bpffs()?;
    let _lock = crate::lock::acquire()?;
    remove_leftovers(PREFIX)?;
    let _ = registry::remove_orphans();

    let dir = match &req.resume {
        Some(d) => d.clone(),
        None => req.out.join(&sc.name).join(timestamp()),
    };
    let done = completed_runs(&dir);
    let todo = plan.todo(&done);
    // Every algorithm, under test or named by a flow, is resolved before anything runs.
    let (resolved, mut loaded) = resolve_algorithms(&plan.algorithms())?;
    cctl_loader::faults::step("bench.after-load")?;
    let mut meta = metadata(sc, req, &plan, &resolved, done.len());
    begin(&dir, req, &mut meta, &todo)?;

    let progress = Progress::new(progress, plan.traffic_s(&todo));
    let jobs = (req.jobs as usize).min(todo.len()).max(1);
    let points: Vec<_> = todo.iter().map(|id| plan.point(id)).collect();
    if let Some(w) = cpu_warning(&points, jobs).filter(|_| progress.on()) {
        eprintln!("cctl bench: warning: {w}");
    }
    // Algorithms no run still to do uses (a resumed sweep's finished part) go now.
    let unloads = Unloads::of(&plan, &todo);
    for n in unloads.unused(resolved.iter().map(|r| &r.requested)) {
        loaded.release(&n)?;
    }
    let feed = match todo.is_empty() {
        true => None,
        false => Some(SampleFeed::start(PORT, req.interval())?),
    };
    // What every run sees of the request: its seed resolved (the scenario's when not given).
    let run_req = RunRequest {
        seed: Some(plan.seed),
        ..req.clone()
    };
    let run = |slot: cctl_netem::slot::Slot, nth: usize, id: &RunId| -> Result<RunRecord> {
        let point = plan.point(id);
        let algo = resolved
            .iter()
            .find(|r| r.requested == id.algo)
            .expect("algorithm resolved");
        let on = (jobs > 1).then_some(slot);
        progress.start(&meta.scenario, id, point, nth, meta.runs_planned, on);
        let run_dir = id.dir(&dir);
        let _ = std::fs::remove_dir_all(&run_dir);
        let feed = feed
            .as_ref()
            .expect("a collector runs while there are runs to do");
        let res = run_once(
            point, algo, &resolved, id.rep, &run_req, &run_dir, &stop, slot, feed,
        );
        progress.done(point.duration_s);
        // The run's directory, so that a write that failed (a full disk) names where;
        // `--resume` redoes this run.
        res.with_context(|| {
            format!(
                "point {} with {} (rep {}), results in {}",
                id.point,
                id.algo,
                id.rep,
                run_dir.display()
            )
        })
    };
    let out = pool::run(&plan, todo, jobs, done.len(), &stop, (unloads, loaded), run);
    progress.finish();
    if let Some(feed) = feed {
        let _ = feed.finish();
    }
    let _ = remove_leftovers(PREFIX);
    let unloaded = out.loaded.unload();
    let mut records: Vec<RunRecord> = done.into_values().chain(out.records).collect();
    records.sort_by(|a, b| (a.point, &a.algo, a.rep).cmp(&(b.point, &b.algo, b.rep)));
    meta.runs_done = records.iter().filter(|r| r.completed).count();
    meta.interrupted = stop.load(Ordering::SeqCst);
    std::fs::write(dir.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;
    if let Some(e) = out.failure {
        return Err(e);
    }
    unloaded?;
    Ok((dir, records))
}

/// The metadata of the sweep `req` of `sc` as planned, `done` runs completed before.
fn metadata(
    sc: &Scenario,
    req: &RunRequest,
    plan: &Plan,
    resolved: &[ResolvedCc],
    done: usize,
) -> Metadata {
    let points = plan.points();
    Metadata {
        scenario: sc.name.clone(),
        id: sc.id.clone(),
        scenario_path: sc.path.display().to_string(),
        profile: req.profile.to_string(),
        repeat: plan.repeat,
        seed: plan.seed,
        kernel: kernel::release(),
        cctl_version: cctl_loader::version().into(),
        build: crate::run::current_build(),
        algorithms: resolved.to_vec(),
        interval_ms: req.interval_ms,
        queue_interval_ms: req.queue_interval_ms,
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        runs_done: done,
        runs_planned: plan.runs.len(),
        interrupted: false,
        deviations: deviations(points),
        under_test: req.algo.clone(),
        points: req.points.clone(),
        shard: req.shard,
        slot: req.slot,
        duration_s: req.duration_s,
        jobs: req.jobs,
        merged_from: Vec::new(),
        topology: points
            .iter()
            .filter_map(|p| Some((p.index, p.topology.clone()?)))
            .collect(),
        bottleneck: points
            .iter()
            .map(|p| (p.index, NetPlan::of_point(p).setup))
            .collect(),
        clock: Some(crate::run::current_clock()),
    }
}

/// Before the first run: refuses to resume `dir` when it holds another sweep (keeping its
/// start time when it is this one), says what is resumed and where the runs deviate from
/// the scenario, and writes `metadata.json` and the request into `dir`.
fn begin(dir: &Path, req: &RunRequest, meta: &mut Metadata, todo: &[RunId]) -> Result<()> {
    let previous = match std::fs::read(dir.join("metadata.json")) {
        Ok(bytes) => Some(
            serde_json::from_slice::<Metadata>(&bytes)
                .with_context(|| format!("parsing {}/metadata.json", dir.display()))?,
        ),
        Err(_) => None,
    };
    if let Some(old) = &previous {
        let what = format!("cannot resume into {}", dir.display());
        check_compatible(old, meta, &what, "resumed")?;
        for (field, old, new) in [
            ("shard", old.shard, meta.shard),
            ("slot", old.slot, meta.slot),
        ] {
            if old != new {
                return Err(Mismatch {
                    what,
                    field,
                    left: format!("{:?}", old.map(|s| s.to_string())),
                    right: format!("{:?}", new.map(|s| s.to_string())),
                    verb: "resumed",
                }
                .into());
            }
        }
        meta.started_unix = old.started_unix;
    }
    if meta.runs_done > 0 {
        eprintln!(
            "cctl bench: resuming {}: {} of {} runs completed, {} to do",
            dir.display(),
            meta.runs_done,
            meta.runs_planned,
            todo.len()
        );
    }
    for d in &meta.deviations {
        eprintln!("cctl bench: deviation: {d}");
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;
    req.write(dir)
        .with_context(|| format!("writing the request into {}", dir.display()))?;
    Ok(())
}
