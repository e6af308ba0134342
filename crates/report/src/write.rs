//! Writing the summary of a results directory: `summary.json`, `summary.csv`, `summary.md`, the port-vs-module
//! comparison (`compare.md`, `compare.json`) and the plots, from its runs or rebuilt from disk.

use std::path::Path;

use anyhow::{Context, Result};
use cctl_metrics::MetricParams;

use crate::compare::NativeOf;
use crate::plots::plots;
use crate::record::{read_records, Metadata, RunRecord};
use crate::summary::{markdown, summarize, Summary};

/// Rebuilds `summary.json`, `summary.csv`, `summary.md` and the plots of a results directory from its
/// raw runs; returns the summary. `native_of` pairs ports with their modules
/// ([`crate::compare::NativeOf`]).
pub fn rebuild(dir: &Path, native_of: NativeOf) -> Result<Summary> {
    let (meta, records) = read_records(dir)?;
    let sc = cctl_scenario::find(&meta.scenario_path)
        .or_else(|_| cctl_scenario::find(&meta.scenario))
        .with_context(|| format!("finding scenario {}", meta.scenario))?;
    write_all(dir, &meta, &records, &sc, native_of)
}

/// Writes the summary files and plots of `records` into `dir` (and `compare.md`/`compare.json`
/// where the runs hold a port and its module, paired by `native_of`).
pub fn write_all(
    dir: &Path,
    meta: &Metadata,
    records: &[RunRecord],
    sc: &cctl_scenario::Scenario,
    native_of: NativeOf,
) -> Result<Summary> {
    let p = MetricParams::default();
    let mut s = summarize(meta, records, &p);
    s.expectations = crate::expect::evaluate(&sc.expectations, &s.row_means());
    std::fs::write(dir.join("summary.json"), serde_json::to_vec_pretty(&s)?)?;
    crate::long::write(dir, &s)?;
    let mut md = markdown(&s, &sc.title, &sc.metrics) + &crate::expect::markdown(&s.expectations);
    let figs = crate::compare::case_figures(records);
    let tol = crate::compare::Tolerances::default();
    let cmp = crate::compare::markdown(&figs, meta, &tol, native_of);
    if !cmp.is_empty() {
        md = format!("{md}\n{cmp}");
        let json = serde_json::json!({
            "tolerances": tol,
            "cases": figs,
            "violations": crate::compare::pairs(&figs, meta, native_of)
                .iter()
                .flat_map(|(p, n)| crate::compare::violations(p, n, &tol))
                .collect::<Vec<_>>(),
        });
        std::fs::write(dir.join("compare.json"), serde_json::to_vec_pretty(&json)?)?;
        std::fs::write(dir.join("compare.md"), &cmp)?;
    }
    std::fs::write(dir.join("summary.md"), md)?;
    plots(&s, records, dir, &sc.plots, sc.x.as_deref())?;
    Ok(s)
}
