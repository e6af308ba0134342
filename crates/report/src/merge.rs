//! `cctl bench merge`: results directories of one sweep, run in parts (`--shard K/N` on
//! several machines, or `--points` in several invocations), combined into one directory
//! whose summary and plots are those of a single sweep.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::compare::NativeOf;
use crate::record::Metadata;
use crate::resume::{check_compatible, completed_runs};
use crate::runs::{point_indices, run_list, RunId};
use crate::summary::Summary;
use crate::write;
use cctl_scenario::select_points;

/// What a merge did.
#[derive(Debug)]
pub struct Merged {
    /// The merged directory.
    pub dir: PathBuf,
    /// Its summary (as `cctl bench report` writes it).
    pub summary: Summary,
    /// Completed runs in it.
    pub runs: usize,
    /// Runs of the sweep that no input holds completed.
    pub missing: Vec<RunId>,
    /// Runs that more than one input holds completed, with every input holding them (the
    /// first one's copy is kept).
    pub duplicates: Vec<(RunId, Vec<PathBuf>)>,
}

/// Reads a results directory's `metadata.json`.
///
/// Errors: no (readable) metadata, naming the directory and what is expected there.
pub fn read_metadata(dir: &Path) -> Result<Metadata> {
    let path = dir.join("metadata.json");
    let bytes = std::fs::read(&path).with_context(|| {
        format!(
            "{} is not a results directory: no readable metadata.json (give directories \
             written by `cctl bench run`, e.g. results/<scenario>/<timestamp> or a --resume \
             directory)",
            dir.display()
        )
    })?;
    serde_json::from_slice(&bytes).with_context(|| format!("parsing {}", path.display()))
}

/// Every run a sweep described by `meta` plans, all shards together.
///
/// Errors: the scenario cannot be found or expanded.
pub fn planned_runs(meta: &Metadata) -> Result<Vec<RunId>> {
    let sc = cctl_scenario::find(&meta.scenario_path)
        .or_else(|_| cctl_scenario::find(&meta.scenario))
        .with_context(|| format!("finding scenario {}", meta.scenario))?;
    let profile = meta.profile.parse().map_err(anyhow::Error::msg)?;
    let points = select_points(sc.expand(profile, meta.seed)?, meta.points.as_deref())
        .map_err(anyhow::Error::msg)?;
    Ok(run_list(
        &point_indices(&points),
        &meta.under_test,
        meta.repeat,
    ))
}

/// Merges `inputs` into `out` (which must not exist or be empty): copies every completed
/// run, writes the merged metadata (no shard, every run planned) and rebuilds the summary
/// and plots (ports paired with their modules by `native_of`).
///
/// Errors: no input; an input that is not a results directory; inputs that describe
/// different sweeps ([`crate::resume::Mismatch`], naming the field); `out` not empty or
/// one of the inputs; I/O.
pub fn merge(inputs: &[PathBuf], out: &Path, native_of: NativeOf) -> Result<Merged> {
    if inputs.is_empty() {
        bail!("nothing to merge: give one or more results directories");
    }
    let metas: Vec<Metadata> = inputs
        .iter()
        .map(|d| read_metadata(d))
        .collect::<Result<_>>()?;
    for (dir, m) in inputs.iter().zip(&metas).skip(1) {
        let what = format!(
            "cannot merge {} with {}",
            dir.display(),
            inputs[0].display()
        );
        check_compatible(&metas[0], m, &what, "merged")?;
    }
    if let Ok(mut entries) = std::fs::read_dir(out) {
        if entries.next().is_some() {
            bail!(
                "--out {}: the directory exists and is not empty; give a new directory",
                out.display()
            );
        }
    }
    let out_abs = std::path::absolute(out)?;
    for d in inputs {
        if std::path::absolute(d)? == out_abs {
            bail!("--out {} is one of the inputs", out.display());
        }
    }

    let mut holders: BTreeMap<RunId, Vec<PathBuf>> = BTreeMap::new();
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    for dir in inputs {
        for id in completed_runs(dir).into_keys() {
            let have = holders.entry(id.clone()).or_default();
            if have.is_empty() {
                copy_run(&id.dir(dir), &id.dir(out))?;
            }
            have.push(dir.clone());
        }
    }
    let planned = planned_runs(&metas[0])?;
    let missing: Vec<RunId> = planned
        .iter()
        .filter(|r| !holders.contains_key(r))
        .cloned()
        .collect();
    let duplicates: Vec<(RunId, Vec<PathBuf>)> = holders
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();

    let mut meta = metas[0].clone();
    meta.shard = None;
    meta.started_unix = metas.iter().map(|m| m.started_unix).min().unwrap_or(0);
    meta.runs_planned = planned.len();
    meta.runs_done = holders.len();
    meta.interrupted = metas.iter().any(|m| m.interrupted);
    meta.jobs = metas.iter().map(|m| m.jobs).max().unwrap_or(1);
    meta.merged_from = inputs.iter().map(|d| d.display().to_string()).collect();
    std::fs::write(out.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;
    let summary = write::rebuild(out, native_of)?;
    Ok(Merged {
        dir: out.to_path_buf(),
        summary,
        runs: holders.len(),
        missing,
        duplicates,
    })
}

/// Combines the slot directories of a run on the virtual clock (one guest per run of the
/// N-run list, guest J writing `slots/J/` with slot `J/N`) into their parent `dir`: copies
/// every completed run, writes the metadata of the whole run (its shard, if any, `jobs`
/// guests at a time, every run of the shard planned) and rebuilds the summary and plots.
/// Called again after a `--resume`, it brings `dir` up to date.
///
/// Errors: a slot that is not a results directory (its guest wrote nothing); slots that
/// describe different sweeps (naming the field); I/O.
pub fn combine_slots(
    dir: &Path,
    slots: &[PathBuf],
    jobs: u32,
    native_of: NativeOf,
) -> Result<Merged> {
    let metas: Vec<Metadata> = slots
        .iter()
        .map(|d| read_metadata(d))
        .collect::<Result<_>>()?;
    let Some(first) = metas.first() else {
        bail!("no slot directories to combine into {}", dir.display());
    };
    for (d, m) in slots.iter().zip(&metas).skip(1) {
        let what = format!("cannot combine {} with {}", d.display(), slots[0].display());
        check_compatible(first, m, &what, "combined")?;
    }
    let mut holders: BTreeMap<RunId, Vec<PathBuf>> = BTreeMap::new();
    for d in slots {
        for id in completed_runs(d).into_keys() {
            copy_run(&id.dir(d), &id.dir(dir))?;
            holders.entry(id).or_default().push(d.clone());
        }
    }
    let mut planned = planned_runs(first)?;
    if let Some(shard) = first.shard {
        planned = shard.select(planned);
    }
    let missing: Vec<RunId> = planned
        .iter()
        .filter(|r| !holders.contains_key(r))
        .cloned()
        .collect();
    let mut meta = first.clone();
    meta.slot = None;
    meta.jobs = jobs;
    meta.started_unix = metas.iter().map(|m| m.started_unix).min().unwrap_or(0);
    meta.runs_planned = planned.len();
    meta.runs_done = holders.len();
    meta.interrupted = metas.iter().any(|m| m.interrupted);
    meta.merged_from = slots.iter().map(|d| d.display().to_string()).collect();
    std::fs::write(dir.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;
    let summary = write::rebuild(dir, native_of)?;
    Ok(Merged {
        dir: dir.to_path_buf(),
        summary,
        runs: holders.len(),
        missing,
        duplicates: Vec::new(),
    })
}

fn copy_run(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    for entry in std::fs::read_dir(from).with_context(|| format!("reading {}", from.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            let dest = to.join(entry.file_name());
            std::fs::copy(entry.path(), &dest).with_context(|| {
                format!("copying {} to {}", entry.path().display(), dest.display())
            })?;
        }
    }
    Ok(())
}
