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
    /// `None`: no tolerance file given ([`gate`] picks the default).
    tol: Option<Tolerances>,
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
        gate(results, &self.file, self.tol.as_ref(), json)
    }
}

/// The tolerances in `path` (`None` without one).
pub(super) fn load_tolerances(path: Option<&Path>) -> Result<Option<Tolerances>> {
    Ok(match path {
        Some(p) => Some(Tolerances::load(p)?),
        None => None,
    })
}

/// Compares the summary at `results` with `baseline` and prints the verdict; exit code 8
/// ([`exit::REGRESSION`]) when it fails. Where both are exact runs of one build, QEMU and
/// guest kernel ([`SummaryFile::exact_with`]), the runs' digests are compared first and
/// printed, and without `tol` every metric must be equal (tolerance 0); otherwise `tol`
/// or the built-in default (rel 0.1).
pub(super) fn gate(
    results: &Path,
    baseline: &SummaryFile,
    tol: Option<&Tolerances>,
    json: bool,
) -> Result<i32> {
    let results = SummaryFile::load(results)?;
    check::same_clock(&results, baseline)?;
    let exact = results.exact_with(baseline);
    let tol = match tol {
        Some(t) => t.clone(),
        None if exact => Tolerances::exact(),
        None => Tolerances::default(),
    };
    let digests = exact.then(|| check::digests(&results, baseline));
    let v = check::check(&results, baseline, &tol);
    if json {
        let mut j = serde_json::to_value(&v)?;
        j["digests"] = serde_json::to_value(&digests)?;
        outln!("{j}")?;
    } else {
        if let Some(d) = &digests {
            outln!(
                "digests: {} of {} runs identical to the baseline's (same build, QEMU and kernel{})",
                d.identical,
                d.identical + d.different.len(),
                if tol.is_exact() { "; tolerance 0" } else { "" }
            )?;
            for x in &d.different {
                outln!("DIGEST {x}")?;
            }
        }
        out!("{}", v.text())?;
    }
    Ok(if v.pass { exit::OK } else { exit::REGRESSION })
}
