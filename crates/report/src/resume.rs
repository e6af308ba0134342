//! What a results directory already holds: which of its runs completed
//! ([`completed_runs`]), so `--resume` skips them and `cctl bench merge` pools them; two
//! directories whose [`Metadata`] disagree on what was measured ([`check_compatible`]) are
//! never resumed into or merged.

use std::collections::BTreeMap;
use std::path::Path;

use crate::record::{ClockRecord, Metadata, RunRecord};
use crate::runs::RunId;

/// The runs under `results` whose `run.json` says they completed, with their records.
/// Runs without a readable `run.json`, or whose `run.json` says they were cut short,
/// are absent: they are the ones to redo.
pub fn completed_runs(results: &Path) -> BTreeMap<RunId, RunRecord> {
    let mut out = BTreeMap::new();
    let Ok(algos) = std::fs::read_dir(results.join("runs")) else {
        return out;
    };
    for algo in algos.flatten() {
        let Ok(runs) = std::fs::read_dir(algo.path()) else {
            continue;
        };
        for run in runs.flatten() {
            let Ok(bytes) = std::fs::read(run.path().join("run.json")) else {
                continue;
            };
            let Ok(rec) = serde_json::from_slice::<RunRecord>(&bytes) else {
                continue;
            };
            if rec.completed {
                let id = RunId {
                    point: rec.point,
                    algo: rec.algo.clone(),
                    rep: rec.rep,
                };
                out.insert(id, rec);
            }
        }
    }
    out
}

/// Two results directories measured something different.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what}: {field} differs: {left} vs {right}; only sweeps of the same clock, scenario, profile, seed, repetitions, points, algorithms with their parameters, cctl version and kernel can be {verb}")]
pub struct Mismatch {
    /// What was being done, e.g. `cannot merge results/a into results/b`.
    pub what: String,
    /// The metadata field that differs (`seed`, `algorithms`, `kernel`, ...).
    pub field: &'static str,
    /// Its value on the first side.
    pub left: String,
    /// Its value on the second side.
    pub right: String,
    /// `merged` or `resumed`.
    pub verb: &'static str,
}

/// Checks that `a` and `b` describe the same sweep: clock (virtual or real), scenario, profile, seed, repeat,
/// selected points, algorithms under test, every algorithm with its parameters, cctl
/// version and kernel. Start times, planned and done counts, shards and jobs may differ.
///
/// Errors: the first field that differs, with both values.
pub fn check_compatible(
    a: &Metadata,
    b: &Metadata,
    what: &str,
    verb: &'static str,
) -> Result<(), Mismatch> {
    let algos = |m: &Metadata| {
        let mut v: Vec<String> = m
            .algorithms
            .iter()
            .map(|r| {
                let params: Vec<String> =
                    r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!(
                    "{} ({} {}: {})",
                    r.requested,
                    r.kind,
                    r.cc_name,
                    params.join(" ")
                )
            })
            .collect();
        v.sort();
        v.join(", ")
    };
    let clock = |m: &Metadata| ClockRecord::name_of(m.clock.as_ref()).to_string();
    let checks: [(&'static str, String, String); 12] = [
        ("clock", clock(a), clock(b)),
        ("scenario", a.scenario.clone(), b.scenario.clone()),
        ("profile", a.profile.clone(), b.profile.clone()),
        ("seed", a.seed.to_string(), b.seed.to_string()),
        ("repeat", a.repeat.to_string(), b.repeat.to_string()),
        (
            "points",
            format!("{:?}", a.points),
            format!("{:?}", b.points),
        ),
        (
            "algorithms under test",
            a.under_test.join(","),
            b.under_test.join(","),
        ),
        ("algorithms", algos(a), algos(b)),
        (
            "cctl_version",
            a.cctl_version.clone(),
            b.cctl_version.clone(),
        ),
        ("kernel", a.kernel.clone(), b.kernel.clone()),
        (
            "duration_s",
            format!("{:?}", a.duration_s),
            format!("{:?}", b.duration_s),
        ),
        (
            "collector/queue intervals",
            format!("{}/{} ms", a.interval_ms, a.queue_interval_ms),
            format!("{}/{} ms", b.interval_ms, b.queue_interval_ms),
        ),
    ];
    for (field, left, right) in checks {
        if left != right {
            return Err(Mismatch {
                what: what.to_string(),
                field,
                left,
                right,
                verb,
            });
        }
    }
    Ok(())
}
