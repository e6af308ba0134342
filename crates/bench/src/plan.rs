//! A sweep planned, before anything runs (pure: no kernel, no files): the points of each
//! repetition, the run list after `--shard` and the guest's slot, which runs a resumed
//! directory still lacks, the algorithms each run uses, and when each can be unloaded.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use cctl_report::runs::{point_indices, run_list, RunId};
use cctl_scenario::{select_points, CcRef, RunPoint, Scenario};

use crate::request::RunRequest;

/// The runs of a sweep and the points they run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The base seed (repetition r draws its random start times from seed + r).
    pub seed: u64,
    /// Repetitions per point.
    pub repeat: u32,
    /// The selected points of each repetition (same indices, own start times).
    pub per_rep: Vec<Vec<RunPoint>>,
    /// Point × algorithm × repetition, in order, after the shard and the slot.
    pub runs: Vec<RunId>,
    /// The algorithms under test.
    pub under_test: Vec<String>,
}

impl Plan {
    /// Plans `req` over `sc` (whose durations are already the request's).
    ///
    /// Errors: the scenario does not expand; `--points` names a point the sweep lacks.
    pub fn of(sc: &Scenario, req: &RunRequest) -> Result<Plan> {
        let seed = req.seed_of(sc);
        let repeat = req.repeat_of(sc);
        let per_rep: Vec<Vec<RunPoint>> = (0..repeat)
            .map(|r| {
                select_points(
                    sc.expand(req.profile, seed + u64::from(r))?,
                    req.points.as_deref(),
                )
                .map_err(anyhow::Error::msg)
            })
            .collect::<Result<_>>()?;
        let mut runs = run_list(&point_indices(&per_rep[0]), &req.algo, repeat);
        if let Some(shard) = req.shard {
            runs = shard.select(runs);
        }
        if let Some(slot) = req.slot {
            runs = slot.select(runs);
        }
        Ok(Plan {
            seed,
            repeat,
            per_rep,
            runs,
            under_test: req.algo.clone(),
        })
    }

    /// The points of the sweep (those of the first repetition).
    pub fn points(&self) -> &[RunPoint] {
        &self.per_rep[0]
    }

    /// The point run `id` runs, with its repetition's start times.
    ///
    /// Panics when `id` is not a run of this plan's points.
    pub fn point(&self, id: &RunId) -> &RunPoint {
        self.per_rep[id.rep as usize]
            .iter()
            .find(|p| p.index == id.point)
            .expect("run of this plan")
    }

    /// The runs of the plan not in `done` (a resumed directory's completed runs), in order.
    pub fn todo<V>(&self, done: &BTreeMap<RunId, V>) -> Vec<RunId> {
        self.runs
            .iter()
            .filter(|r| !done.contains_key(r))
            .cloned()
            .collect()
    }

    /// The algorithms run `id` uses: the one under test, those its flows name, its web
    /// sessions'; sorted, each once.
    pub fn uses(&self, id: &RunId) -> Vec<String> {
        let mut v: BTreeSet<String> = named(self.point(id)).collect();
        v.insert(id.algo.clone());
        v.into_iter().collect()
    }

    /// Every algorithm the sweep may use (to resolve and load before anything runs): those
    /// under test first, then those the points name.
    pub fn algorithms(&self) -> Vec<String> {
        let mut names = self.under_test.clone();
        for p in self.points() {
            for n in named(p) {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
        }
        names
    }

    /// Seconds of traffic of `runs`.
    pub fn traffic_s(&self, runs: &[RunId]) -> f64 {
        runs.iter().map(|id| self.point(id).duration_s).sum()
    }
}

/// The algorithms `point` names: its flows' and its web sessions'.
fn named(point: &RunPoint) -> impl Iterator<Item = String> + '_ {
    let flows = point.flows.iter().filter_map(|f| match &f.cc {
        CcRef::Named(n) => Some(n.clone()),
        CcRef::UnderTest => None,
    });
    let web = (point.web_sessions > 0).then(|| point.web_cc.clone());
    flows.chain(web)
}

/// When each algorithm can go: the number of runs still to do that use it, counted down as
/// they end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Unloads {
    remaining: BTreeMap<String, usize>,
}

impl Unloads {
    /// The counts of `todo`'s runs in `plan`.
    pub fn of(plan: &Plan, todo: &[RunId]) -> Unloads {
        let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
        for id in todo {
            for n in plan.uses(id) {
                *remaining.entry(n).or_default() += 1;
            }
        }
        Unloads { remaining }
    }

    /// Of `names`, those no run still to do uses (a resumed sweep's finished part): they can
    /// go before the first run.
    pub fn unused<'a>(&self, names: impl IntoIterator<Item = &'a String>) -> Vec<String> {
        names
            .into_iter()
            .filter(|n| !self.remaining.contains_key(*n))
            .cloned()
            .collect()
    }

    /// Run `id` has ended: the algorithms whose last run it was.
    pub fn ended(&mut self, plan: &Plan, id: &RunId) -> Vec<String> {
        let mut last = Vec::new();
        for n in plan.uses(id) {
            if let Some(c) = self.remaining.get_mut(&n) {
                *c = c.saturating_sub(1);
                if *c == 0 {
                    self.remaining.remove(&n);
                    last.push(n);
                }
            }
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cctl_report::runs::Shard;

    /// T0.7: two points in the ci profile, flow 2 starting at a random time.
    fn request(algos: &[&str]) -> RunRequest {
        RunRequest {
            repeat: Some(2),
            ..RunRequest::new("convergence-time", algos)
        }
    }

    fn sweep() -> Scenario {
        cctl_scenario::find("convergence-time").unwrap()
    }

    #[test]
    fn a_plan_has_each_point_per_algorithm_and_repetition_with_its_own_start_times() {
        let sc = sweep();
        let plan = Plan::of(&sc, &request(&["reno", "htcp"])).unwrap();
        let points = plan.points().len();
        assert!(points > 1);
        assert_eq!(plan.runs.len(), points * 2 * 2);
        assert_eq!(plan.seed, sc.seed(cctl_scenario::Profile::Ci));
        // Repetition 1 draws from seed + 1: same points, other start times.
        let (p0, p1) = (&plan.per_rep[0][0], &plan.per_rep[1][0]);
        assert_eq!(p0.index, p1.index);
        assert_ne!(
            p0.flows.iter().map(|f| f.start_s).collect::<Vec<_>>(),
            p1.flows.iter().map(|f| f.start_s).collect::<Vec<_>>()
        );
        let id = &plan.runs[plan.runs.len() - 1];
        assert_eq!(plan.point(id).index, id.point);
    }

    #[test]
    fn shards_and_slots_split_the_list_and_resume_skips_the_completed_runs() {
        let sc = sweep();
        let all = Plan::of(&sc, &request(&["reno", "htcp"])).unwrap().runs;
        let mut parts = Vec::new();
        for k in 1..=3 {
            for j in 1..=2 {
                let req = RunRequest {
                    shard: Some(Shard { k, n: 3 }),
                    slot: Some(Shard { k: j, n: 2 }),
                    ..request(&["reno", "htcp"])
                };
                parts.extend(Plan::of(&sc, &req).unwrap().runs);
            }
        }
        parts.sort();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(parts, sorted, "every run in exactly one shard and slot");

        let plan = Plan::of(&sc, &request(&["reno"])).unwrap();
        let done: BTreeMap<RunId, ()> = plan.runs.iter().take(3).map(|r| (r.clone(), ())).collect();
        let todo = plan.todo(&done);
        assert_eq!(todo, plan.runs[3..].to_vec());
        assert_eq!(
            plan.traffic_s(&todo),
            todo.iter().map(|r| plan.point(r).duration_s).sum::<f64>()
        );
    }

    #[test]
    fn an_algorithm_is_unloaded_after_the_last_run_that_uses_it() {
        let sc = sweep();
        let mut plan = Plan::of(&sc, &request(&["reno", "htcp"])).unwrap();
        // One flow of every point names cubic: every run uses it.
        for reps in &mut plan.per_rep {
            for p in reps {
                p.flows[0].cc = CcRef::Named("cubic".into());
            }
        }
        assert_eq!(plan.algorithms(), ["reno", "htcp", "cubic"]);
        // A resumed sweep whose reno runs are done: reno goes before the first run.
        let todo: Vec<RunId> = plan
            .runs
            .iter()
            .filter(|r| r.algo == "htcp")
            .cloned()
            .collect();
        let mut unloads = Unloads::of(&plan, &todo);
        let names = plan.algorithms();
        assert_eq!(unloads.unused(&names), ["reno"]);
        let (last, rest) = todo.split_last().unwrap();
        for id in rest {
            assert!(unloads.ended(&plan, id).is_empty(), "{id}");
        }
        assert_eq!(unloads.ended(&plan, last), ["cubic", "htcp"]);
        assert_eq!(unloads, Unloads::default());
    }
}
