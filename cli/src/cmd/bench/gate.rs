//! Gating a report on a baseline: `cctl bench check`, and `bench run --check BASELINE
//! --tolerance FILE`.

use std::path::Path;

use anyhow::Result;
use cctl_report::check::{self, SummaryFile, Tolerances};
use cctl_vm as vm;

use crate::exit::{self, usage};
use crate::out::{out, outln};

/// A baseline with its tolerances, read before anything runs (a bad one is bad input).
pub(super) struct Baseline {
    file: SummaryFile,
    tol: Tolerances,
}

impl Baseline {
    /// The baseline of `--check` (`None` without it) with the tolerances of `--tolerance`
    /// (the defaults without it).
    ///
    /// Errors: either file missing or not of its kind.
    pub(super) fn load(check: Option<&Path>, tolerance: Option<&Path>) -> Result<Option<Baseline>> {
        let Some(path) = check else {
            return Ok(None);
        };
        Ok(Some(Baseline {
            file: SummaryFile::load(path)?,
            tol: load_tolerances(tolerance)?,
        }))
    }

    /// Refuses (exit 2) a run timed by `clock` when the baseline was timed by the other.
    pub(super) fn same_clock(&self, clock: vm::Clock) -> Result<()> {
        let b = &self.file;
        if b.clock != clock.as_str() {
            usage!(
                "--check {}: the baseline was timed by the {} clock (metadata.clock.clock) \
                 and this run would be timed by the {} clock; give --clock {} to compare \
                 with it",
                b.path.display(),
                b.clock,
                clock,
                b.clock
            );
        }
        Ok(())
    }

    /// Compares the summary in `results` with the baseline (see [`gate`]).
    pub(super) fn gate(&self, results: &Path, json: bool) -> Result<i32> {
        gate(results, &self.file, &self.tol, json)
    }
}

/// The tolerances in `path`, or the defaults.
pub(super) fn load_tolerances(path: Option<&Path>) -> Result<Tolerances> {
    Ok(match path {
        Some(p) => Tolerances::load(p)?,
        None => Tolerances::default(),
    })
}

/// Compares the summary at `results` with `baseline` and prints the verdict; exit code 8
/// ([`exit::REGRESSION`]) when it fails.
pub(super) fn gate(
    results: &Path,
    baseline: &SummaryFile,
    tol: &Tolerances,
    json: bool,
) -> Result<i32> {
    let results = SummaryFile::load(results)?;
    check::same_clock(&results, baseline)?;
    let v = check::check(&results, baseline, tol);
    if json {
        outln!("{}", serde_json::to_string(&v)?)?;
    } else {
        out!("{}", v.text())?;
    }
    Ok(if v.pass { exit::OK } else { exit::REGRESSION })
}
