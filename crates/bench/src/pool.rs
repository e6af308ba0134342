//! The `--jobs` workers of a sweep: N threads take runs off one queue, each on its own slot;
//! the first failure stops the others from starting new runs (those under way finish), an
//! interrupt does the same, and each algorithm is unloaded when its last run has ended.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use anyhow::Result;
use cctl_netem::slot::Slot;
use cctl_report::runs::RunId;
use cctl_scenario::RunPoint;

use crate::plan::{Plan, Unloads};
use crate::resolve::Loaded;

/// What the workers leave.
pub struct Outcome<T> {
    /// The records of the runs that ended (in the order they ended).
    pub records: Vec<T>,
    /// The first error: of a run, or of unloading an algorithm after its last run.
    pub failure: Option<anyhow::Error>,
    /// The algorithms still loaded (to unload at the end).
    pub loaded: Loaded,
}

struct Shared<T> {
    queue: VecDeque<RunId>,
    records: Vec<T>,
    failure: Option<anyhow::Error>,
    unloads: Unloads,
    loaded: Loaded,
    started: usize,
}

/// Runs `todo` (runs of `plan`) on `jobs` workers: worker s calls `work(Slot(s), nth, id)`
/// for each run it takes, `nth` counting from `started` + 1 (runs completed before, for the
/// progress lines). Stops taking runs on the first failure or when `stop` is set. `unloads`
/// counts the runs of `todo` per algorithm; an algorithm of `loaded` is released when its
/// count reaches 0.
pub fn run<T: Send, F>(
    plan: &Plan,
    todo: Vec<RunId>,
    jobs: usize,
    started: usize,
    stop: &AtomicBool,
    (unloads, loaded): (Unloads, Loaded),
    work: F,
) -> Outcome<T>
where
    F: Fn(Slot, usize, &RunId) -> Result<T> + Sync,
{
    let shared = Mutex::new(Shared {
        queue: todo.into(),
        records: Vec::new(),
        failure: None,
        unloads,
        loaded,
        started,
    });
    std::thread::scope(|scope| {
        for s in 0..jobs {
            let (shared, work) = (&shared, &work);
            scope.spawn(move || {
                while let Some((id, nth)) = next(shared, stop) {
                    let res = work(Slot(s as u8), nth, &id);
                    ended(shared, plan, &id, res);
                }
            });
        }
    });
    let sh = shared.into_inner().expect("sweep lock");
    Outcome {
        records: sh.records,
        failure: sh.failure,
        loaded: sh.loaded,
    }
}

/// The next run to start and its number; `None` when there is none or the sweep stops.
fn next<T>(shared: &Mutex<Shared<T>>, stop: &AtomicBool) -> Option<(RunId, usize)> {
    let mut sh = shared.lock().expect("sweep lock");
    if stop.load(Ordering::SeqCst) || sh.failure.is_some() {
        return None;
    }
    let id = sh.queue.pop_front()?;
    sh.started += 1;
    Some((id, sh.started))
}

/// Records how run `id` ended and unloads the algorithms whose last run it was.
fn ended<T>(shared: &Mutex<Shared<T>>, plan: &Plan, id: &RunId, res: Result<T>) {
    let mut sh = shared.lock().expect("sweep lock");
    match res {
        Ok(r) => sh.records.push(r),
        Err(e) => {
            sh.failure.get_or_insert(e);
        }
    }
    for n in sh.unloads.ended(plan, id) {
        if let Err(e) = sh.loaded.release(&n) {
            sh.failure
                .get_or_insert(e.context(format!("unloading {n}")));
        }
    }
}

/// What a sweep shows while it runs: a bar of seconds of traffic on a terminal, else
/// (inside the VM, in CI) one line per run as it starts; nothing when off.
pub struct Progress {
    bar: indicatif::ProgressBar,
    lines: bool,
    on: bool,
}

impl Progress {
    /// A progress display of `traffic_s` seconds of traffic; `on` = false shows nothing.
    pub fn new(on: bool, traffic_s: f64) -> Progress {
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let bar = if on && terminal {
            indicatif::ProgressBar::new(traffic_s.ceil() as u64)
        } else {
            indicatif::ProgressBar::hidden()
        };
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} {msg} [{bar:30}] {pos}/{len} s (eta {eta})",
            )
            .expect("valid template"),
        );
        Progress {
            bar,
            lines: on && !terminal,
            on,
        }
    }

    /// Whether anything is shown (warnings about the sweep go with it).
    pub fn on(&self) -> bool {
        self.on
    }

    /// Run `id` of `scenario` starts, the `nth` of `planned`, on `slot` when runs share
    /// the machine: its name on the bar, or a line.
    pub fn start(
        &self,
        scenario: &str,
        id: &RunId,
        point: &RunPoint,
        nth: usize,
        planned: usize,
        slot: Option<Slot>,
    ) {
        self.bar
            .set_message(format!("{scenario} p{} {} r{}", id.point, id.algo, id.rep));
        if self.lines {
            let on = slot.map_or(String::new(), |s| format!(" (slot {})", s.0));
            eprintln!(
                "cctl bench: run {nth}/{planned}: point {} ({}) with {}, repetition {}, {:.0} s{on}",
                point.index,
                point.label(),
                id.algo,
                id.rep,
                point.duration_s
            );
        }
    }

    /// A run of `secs` seconds of traffic has ended.
    pub fn done(&self, secs: f64) {
        self.bar.inc(secs.ceil() as u64);
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RunRequest;

    fn plan() -> Plan {
        let sc = cctl_scenario::find("fairness-same-rtt").unwrap();
        Plan::of(
            &sc,
            &RunRequest::new("fairness-same-rtt", &["reno", "htcp"]),
        )
        .unwrap()
    }

    /// The pool over every run of [`plan`] with `jobs` workers.
    fn pool<T: Send>(
        jobs: usize,
        started: usize,
        stop: bool,
        work: impl Fn(Slot, usize, &RunId) -> Result<T> + Sync,
    ) -> (Vec<RunId>, Outcome<T>) {
        let plan = plan();
        let todo = plan.runs.clone();
        let unloads = Unloads::of(&plan, &todo);
        let stop = AtomicBool::new(stop);
        let out = run(
            &plan,
            todo.clone(),
            jobs,
            started,
            &stop,
            (unloads, Loaded::default()),
            work,
        );
        (todo, out)
    }

    #[test]
    fn every_run_is_done_once_on_the_slots_and_numbered_after_those_done_before() {
        let (todo, out) = pool(3, 5, false, |slot, nth, id| {
            assert!(slot.0 < 3);
            Ok((nth, id.clone()))
        });
        assert!(out.failure.is_none());
        let mut nths: Vec<usize> = out.records.iter().map(|(n, _)| *n).collect();
        nths.sort();
        assert_eq!(nths, (6..6 + todo.len()).collect::<Vec<_>>());
        let mut ids: Vec<RunId> = out.records.into_iter().map(|(_, id)| id).collect();
        ids.sort();
        let mut want = todo;
        want.sort();
        assert_eq!(ids, want);
    }

    #[test]
    fn the_first_failure_stops_new_runs_and_is_the_one_kept() {
        let (_, out) = pool(1, 0, false, |_, nth, _| {
            if nth >= 2 {
                anyhow::bail!("run {nth} failed")
            }
            Ok(nth)
        });
        assert_eq!(out.records, [1]);
        assert_eq!(out.failure.unwrap().to_string(), "run 2 failed");
        let (_, stopped) = pool(2, 0, true, |_, nth, _| Ok(nth));
        assert!(
            stopped.records.is_empty(),
            "an interrupted sweep starts no run"
        );
    }
}
