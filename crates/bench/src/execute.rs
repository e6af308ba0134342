//! A sweep executed: every point × algorithm × repetition of a scenario (or a shard of
//! them, or what a resumed directory lacks), `--jobs` at a time on their own slots, under
//! the kernel's bench lock, with one collector for all, algorithms loaded for the sweep and
//! unloaded after their last run, and everything removed at the end or on an interrupt.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use cctl_loader::{kernel, registry};
use cctl_netem::slot::{Slot, MAX_JOBS, PREFIX};
use cctl_netem::testbed::remove_leftovers;
use cctl_report::record::{timestamp, Metadata, ResolvedCc, RunRecord};
use cctl_report::resume::{check_compatible, completed_runs, Mismatch};
use cctl_report::runs::{point_indices, run_list, RunId};
use cctl_scenario::{select_points, CcRef, RunPoint, Scenario};

use crate::cost::cpu_warning;
use crate::feed::SampleFeed;
use crate::network::{check_dctcp, check_supported, setup_of};
use crate::resolve::{resolve_algorithms, Loaded};
use crate::run::{run_once, RunOptions, PORT};
use crate::validity::deviations;

/// Runs every point × algorithm × repetition of `sc` (or `opts.shard`'s part of them),
/// `opts.jobs` at a time; returns the results directory and the records of the completed
/// runs (with `opts.resume`, also those completed before). Takes the kernel's bench lock
/// ([`crate::lock`]), cleans up leftovers first and everything it made at the end, also
/// when interrupted through `stop` (then it returns what was completed). An algorithm is
/// unloaded when the last run that uses it has ended.
///
/// Errors: another `cctl bench` holds the lock ([`crate::lock::LockError::Held`]); the
/// resumed directory describes another sweep ([`Mismatch`]); privileges, kernel features,
/// loading, and the first run that fails (the runs under way finish first).
pub fn run_scenario(
    sc: &Scenario,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
) -> Result<(PathBuf, Vec<RunRecord>)> {
    let seed = opts.seed.unwrap_or_else(|| sc.seed(opts.profile));
    let repeat = opts
        .repeat
        .unwrap_or_else(|| sc.repeat(opts.profile))
        .max(1);
    if opts.jobs == 0 || opts.jobs > MAX_JOBS {
        bail!("--jobs {}: give 1 to {MAX_JOBS} runs at once", opts.jobs);
    }
    // Each repetition draws its own random start times from seed + rep.
    let per_rep: Vec<Vec<RunPoint>> = (0..repeat)
        .map(|r| {
            select_points(
                sc.expand(opts.profile, seed + u64::from(r))?,
                opts.points.as_deref(),
            )
            .map_err(anyhow::Error::msg)
        })
        .collect::<Result<_>>()?;
    let points = per_rep[0].clone();
    check_supported(sc, &points)?;
    check_dctcp(&opts.algos, &points)?;
    kernel::require_privileges("running a benchmark")?;
    kernel::require_struct_ops_links()?;
    kernel::ensure_bpffs()?;
    let _lock = crate::lock::acquire()?;
    remove_leftovers(PREFIX)?;
    let _ = registry::remove_orphans();

    let mut list = run_list(&point_indices(&points), &opts.algos, repeat);
    if let Some(shard) = opts.shard {
        list = shard.select(list);
    }
    if let Some(slot) = opts.slot {
        list = slot.select(list);
    }
    let runs_planned = list.len();
    let dir = match &opts.resume {
        Some(d) => d.clone(),
        None => opts.out.join(&sc.name).join(timestamp()),
    };
    let previous = match std::fs::read(dir.join("metadata.json")) {
        Ok(bytes) => Some(
            serde_json::from_slice::<Metadata>(&bytes)
                .with_context(|| format!("parsing {}/metadata.json", dir.display()))?,
        ),
        Err(_) => None,
    };
    let done = completed_runs(&dir);
    let todo: Vec<RunId> = list.into_iter().filter(|r| !done.contains_key(r)).collect();

    // Every algorithm, under test or named by a flow, is resolved before anything runs;
    // each is counted by the runs still to do that use it.
    let uses = |id: &RunId| -> Vec<String> {
        let mut v = vec![id.algo.clone()];
        if let Some(p) = per_rep[id.rep as usize]
            .iter()
            .find(|p| p.index == id.point)
        {
            for f in &p.flows {
                if let CcRef::Named(n) = &f.cc {
                    v.push(n.clone());
                }
            }
            if p.web_sessions > 0 {
                v.push(p.web_cc.clone());
            }
        }
        v.sort();
        v.dedup();
        v
    };
    let mut names = opts.algos.clone();
    for p in &points {
        for f in &p.flows {
            if let CcRef::Named(n) = &f.cc {
                names.push(n.clone());
            }
        }
        if p.web_sessions > 0 {
            names.push(p.web_cc.clone());
        }
    }
    let (resolved, loaded) = resolve_algorithms(&names)?;
    cctl_loader::faults::step("bench.after-load")?;
    let under_test: Vec<ResolvedCc> = opts
        .algos
        .iter()
        .filter_map(|a| resolved.iter().find(|r| &r.requested == a).cloned())
        .collect();

    let mut meta = Metadata {
        scenario: sc.name.clone(),
        id: sc.id.clone(),
        scenario_path: sc.path.display().to_string(),
        profile: opts.profile.to_string(),
        repeat,
        seed,
        kernel: kernel::release(),
        cctl_version: cctl_loader::version().into(),
        algorithms: resolved.clone(),
        interval_ms: opts.interval.as_millis() as u64,
        queue_interval_ms: opts.queue_interval.as_millis() as u64,
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        runs_done: done.len(),
        runs_planned,
        interrupted: false,
        deviations: deviations(&points),
        under_test: opts.algos.clone(),
        points: opts.points.clone(),
        shard: opts.shard,
        slot: opts.slot,
        duration_s: opts.duration_s,
        jobs: opts.jobs,
        merged_from: Vec::new(),
        topology: points
            .iter()
            .filter_map(|p| Some((p.index, p.topology.clone()?)))
            .collect(),
        bottleneck: points
            .iter()
            .map(|p| (p.index, setup_of(p, &opts.algos)))
            .collect(),
        clock: Some(crate::run::current_clock()),
    };
    if let Some(old) = &previous {
        let what = format!("cannot resume into {}", dir.display());
        check_compatible(old, &meta, &what, "resumed")?;
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
    if !done.is_empty() {
        eprintln!(
            "cctl bench: resuming {}: {} of {} runs completed, {} to do",
            dir.display(),
            done.len(),
            runs_planned,
            todo.len()
        );
    }
    for d in &meta.deviations {
        eprintln!("cctl bench: deviation: {d}");
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;

    let point_of = |id: &RunId| -> &RunPoint {
        per_rep[id.rep as usize]
            .iter()
            .find(|p| p.index == id.point)
            .expect("run list built from these points")
    };
    let total_s: f64 = todo.iter().map(|id| point_of(id).duration_s).sum();
    let bar = if opts.progress && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        indicatif::ProgressBar::new(total_s.ceil() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} s (eta {eta})",
        )
        .expect("valid template"),
    );
    let jobs = (opts.jobs as usize).min(todo.len()).max(1);
    if opts.progress {
        if let Some(w) = cpu_warning(&todo.iter().map(point_of).collect::<Vec<_>>(), jobs) {
            eprintln!("cctl bench: warning: {w}");
        }
    }

    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
    for id in &todo {
        for n in uses(id) {
            *remaining.entry(n).or_default() += 1;
        }
    }
    // Algorithms no run still to do uses (a resumed sweep's finished part) go now.
    let mut loaded = loaded;
    for r in &resolved {
        if !remaining.contains_key(&r.requested) {
            loaded.release(&r.requested)?;
        }
    }

    struct Shared {
        queue: std::collections::VecDeque<RunId>,
        records: Vec<RunRecord>,
        failure: Option<anyhow::Error>,
        remaining: BTreeMap<String, usize>,
        loaded: Loaded,
        started: usize,
    }
    let shared = Mutex::new(Shared {
        queue: todo.iter().cloned().collect(),
        records: Vec::new(),
        failure: None,
        remaining,
        loaded,
        started: done.len(),
    });
    let feed = if todo.is_empty() {
        None
    } else {
        Some(SampleFeed::start(PORT, opts.interval)?)
    };
    std::thread::scope(|scope| {
        for s in 0..jobs {
            let (shared, feed, bar, stop) = (&shared, feed.as_ref(), &bar, &stop);
            let (under_test, resolved, dir, meta) = (&under_test, &resolved, &dir, &meta);
            let (point_of, uses) = (&point_of, &uses);
            scope.spawn(move || loop {
                let (id, nth) = {
                    let mut sh = shared.lock().expect("sweep lock");
                    if stop.load(Ordering::SeqCst) || sh.failure.is_some() {
                        return;
                    }
                    let Some(id) = sh.queue.pop_front() else {
                        return;
                    };
                    sh.started += 1;
                    (id, sh.started)
                };
                let point = point_of(&id);
                let algo = under_test
                    .iter()
                    .find(|r| r.requested == id.algo)
                    .expect("algorithm resolved");
                bar.set_message(format!(
                    "{} p{} {} r{}",
                    meta.scenario, id.point, id.algo, id.rep
                ));
                if opts.progress && bar.is_hidden() {
                    // No terminal (e.g. inside the VM): one line per run instead of a bar.
                    eprintln!(
                        "cctl bench: run {nth}/{}: point {} ({}) with {}, repetition {}, {:.0} s{}",
                        meta.runs_planned,
                        point.index,
                        point.label(),
                        algo.requested,
                        id.rep,
                        point.duration_s,
                        if jobs > 1 {
                            format!(" (slot {s})")
                        } else {
                            String::new()
                        }
                    );
                }
                let run_dir = id.dir(dir);
                let _ = std::fs::remove_dir_all(&run_dir);
                let feed = feed.expect("a collector runs while there are runs to do");
                let res = run_once(
                    point,
                    algo,
                    resolved,
                    id.rep,
                    opts,
                    &run_dir,
                    stop,
                    Slot(s as u8),
                    feed,
                );
                bar.inc(point.duration_s.ceil() as u64);
                let mut sh = shared.lock().expect("sweep lock");
                match res {
                    Ok(r) => sh.records.push(r),
                    Err(e) => {
                        // The run's directory, so that a write that failed (a full
                        // disk) names where; `--resume` redoes this run.
                        let e = e.context(format!(
                            "point {} with {} (rep {}), results in {}",
                            id.point,
                            id.algo,
                            id.rep,
                            run_dir.display()
                        ));
                        sh.failure.get_or_insert(e);
                    }
                }
                for n in uses(&id) {
                    let left = sh.remaining.get_mut(&n).map(|c| {
                        *c -= 1;
                        *c
                    });
                    if left == Some(0) {
                        if let Err(e) = sh.loaded.release(&n) {
                            sh.failure
                                .get_or_insert(e.context(format!("unloading {n}")));
                        }
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    if let Some(feed) = feed {
        let _ = feed.finish();
    }
    let _ = remove_leftovers(PREFIX);
    let sh = shared.into_inner().expect("sweep lock");
    let unloaded = sh.loaded.unload();
    let mut records: Vec<RunRecord> = done.into_values().chain(sh.records).collect();
    records.sort_by(|a, b| (a.point, &a.algo, a.rep).cmp(&(b.point, &b.algo, b.rep)));
    meta.runs_done = records.iter().filter(|r| r.completed).count();
    meta.interrupted = stop.load(Ordering::SeqCst);
    std::fs::write(dir.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;
    if let Some(e) = sh.failure {
        return Err(e);
    }
    unloaded?;
    Ok((dir, records))
}
