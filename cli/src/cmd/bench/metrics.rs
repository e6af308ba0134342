//! `cctl bench metrics`: what each metric of a results directory means — the families
//! M1–M17 and the names of `summary.json` with their units and definitions
//! ([`cctl_metrics::names`]), and which shipped scenarios list each family. `--markdown`
//! prints the reference page docs/reference/metrics.md (`make docs` writes it).

use std::fmt::Write as _;

use anyhow::Result;
use cctl_metrics::names::{self, Family, Metric};
use cctl_scenario::Scenario;

use crate::exit;
use crate::out::{out, outln};

/// Arguments of `cctl bench metrics`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example: cctl bench metrics --json | grep '\"M5\"'")]
pub(super) struct MetricsArgs {
    /// One JSON object per line: each family (`family`, `title`, `measures`, `formula`,
    /// `unit`, `shown_as`, `scenarios`), then each metric name (`name`, `unit`,
    /// `definition`, `family` or null).
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print the reference page docs/reference/metrics.md instead of the list.
    #[arg(long)]
    markdown: bool,
}

/// Runs `cctl bench metrics`.
pub(super) fn run(a: MetricsArgs) -> Result<i32> {
    let scenarios = cctl_scenario::builtin();
    if a.markdown {
        out!("{}", markdown(&scenarios))?;
    } else if a.json {
        for f in names::FAMILIES {
            let line = serde_json::json!({
                "family": f.id, "title": f.title, "measures": f.measures,
                "formula": f.formula, "unit": f.unit, "shown_as": f.shown_as,
                "scenarios": listed_by(f, &scenarios),
            });
            outln!("{line}")?;
        }
        for m in names::METRICS {
            let line = serde_json::json!({
                "name": m.name, "unit": m.unit, "definition": m.definition,
                "family": m.family().map(|f| f.id),
            });
            outln!("{line}")?;
        }
    } else {
        for f in names::FAMILIES {
            outln!("{:<4} {} ({}): {}", f.id, f.title, f.unit, f.measures)?;
            for m in members(Some(f)) {
                outln!("     {:<40} {:<7} {}", m.name, m.unit, m.definition)?;
            }
        }
        outln!("other")?;
        for m in members(None) {
            outln!("     {:<40} {:<7} {}", m.name, m.unit, m.definition)?;
        }
    }
    Ok(exit::OK)
}

/// The metric names of family `f` (`None`: the unnumbered ones), in table order.
fn members(f: Option<&Family>) -> impl Iterator<Item = &'static Metric> + '_ {
    names::METRICS.iter().filter(move |m| m.family() == f)
}

/// `T0.1 fairness-same-rtt`, ... for every scenario whose `metrics` lists `f`.
fn listed_by(f: &Family, scenarios: &[Scenario]) -> Vec<String> {
    scenarios
        .iter()
        .filter(|s| s.metrics.iter().any(|m| m == f.id))
        .map(|s| format!("{} {}", s.id, s.name))
        .collect()
}

/// A table of metric names: name, unit, definition.
fn name_table(out: &mut String, metrics: &[&Metric]) {
    out.push_str("| name | unit | definition |\n|---|---|---|\n");
    for m in metrics {
        let _ = writeln!(out, "| `{}` | {} | {} |", m.name, m.unit, m.definition);
    }
    out.push('\n');
}

/// docs/reference/metrics.md: one section per family, then the unnumbered names.
fn markdown(scenarios: &[Scenario]) -> String {
    let mut out = format!(
        "<!-- Generated from crates/metrics/src/names.rs by `make docs` (cctl bench metrics \
         --markdown); do not edit. -->\n\n# Metrics\n\n\
         What the metrics of a results directory mean: the values of `summary.json` and the \
         tables of `summary.md` and `index.html` ([benchmarks](../guide/benchmarks.md#results-and-the-report) says how a run \
         writes them). Names are templates with their units in them: `{{N}}` is a flow, \
         numbered from 1 in the scenario's `[[flows]]` order, or a bottleneck of a \
         `[topology]` chain. The shared window is the time both flows 1 and 2 were active; \
         the steady state starts at {} s or {} % of the run, whichever is later. Values are \
         the mean ± standard error over repetitions; NC means not converged. A scenario's \
         `metrics = [...]` lists the families its tables show first. The same list, one \
         JSON object per line:\n\n```\ncctl bench metrics --json\n```\n\n",
        cctl_metrics::STEADY_STATE_MIN_S_DEFAULT,
        cctl_metrics::STEADY_STATE_FRACTION_DEFAULT * 100.0,
    );
    for f in names::FAMILIES {
        let _ = writeln!(out, "## {} {}\n\n{}\n", f.id, f.title, f.measures);
        let _ = writeln!(out, "How: {}\n", f.formula);
        let listed = listed_by(f, scenarios);
        let _ = writeln!(
            out,
            "Unit: {}. Listed by: {}.\n",
            f.unit,
            if listed.is_empty() {
                "no shipped scenario".to_string()
            } else {
                listed.join(", ")
            }
        );
        let ms: Vec<&Metric> = members(Some(f)).collect();
        if ms.is_empty() {
            let _ = writeln!(out, "Not a value of summary.json: {}.\n", f.shown_as);
        } else {
            name_table(&mut out, &ms);
        }
    }
    out.push_str(
        "## Other metrics\n\nThe path as built, its counters, cross traffic, latency probes \
         and the host.\n\n",
    );
    name_table(&mut out, &members(None).collect::<Vec<_>>());
    out.pop();
    out
}
