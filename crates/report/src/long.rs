//! `summary.csv`: the per-run metrics of a summary in long format, one row per value
//! (`run,point,algorithm,flow,metric,unit,value`), for joining and plotting with any tool.
//! The flow number and the unit come from the metric's name, read against the name
//! templates of [`cctl_metrics::names::SUMMARY_METRICS`].

use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::runs::RunId;
use crate::summary::Summary;

/// The column names of `summary.csv`, in order.
pub const COLUMNS: [&str; 7] = [
    "run",
    "point",
    "algorithm",
    "flow",
    "metric",
    "unit",
    "value",
];

/// Unit symbols a metric name may end with, in parentheses (`M1 flow1 (Mbit/s)`). A
/// parenthesised suffix that is not one of these is part of the name (`M8 utilisation
/// (goodput)`); a test checks every template's suffix is one or the other.
pub const UNITS: &[&str] = &["Mbit/s", "s", "ms", "pkts", "%"];

/// Parenthesised suffixes of metric names that qualify the metric rather than give a unit.
pub const QUALIFIERS: &[&str] = &["goodput", "wire"];

/// One row of `summary.csv`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The run's directory under the results directory (`runs/<algo>/p<point>-r<rep>`):
    /// its `run.json` and `samples.csv` are there.
    pub run: String,
    /// Index of the scenario point (`summary.json`'s `rows[].point`).
    pub point: usize,
    /// Algorithm under test, as requested (`htcp`, `cubic@linux`).
    pub algorithm: String,
    /// Flow number (1, 2, ...; `run.json`'s `flows[].id`) of a per-flow metric; `None`
    /// (an empty cell) for a run-level one.
    pub flow: Option<u32>,
    /// The metric's name without its unit, the flow number written `{N}`
    /// (`M1 flow{N}`, `M8 utilisation (goodput)`, `hop2 drops`).
    pub metric: String,
    /// Unit, from the name's parenthesised suffix (one of [`UNITS`]); empty for a ratio or
    /// count without one.
    pub unit: String,
    /// The value, in `unit`.
    pub value: f64,
}

/// A metric name split into (metric, flow, unit), e.g. `M1 flow2 (Mbit/s)` → (`M1
/// flow{N}`, 2, `Mbit/s`). The flow is the number standing for the `{N}` that follows
/// `flow` in the name's template; other numbers (hops, probes) stay in the metric.
pub fn split_name(name: &str) -> (String, Option<u32>, String) {
    let (base, unit) = match name.rsplit_once(" (") {
        Some((base, rest)) if rest.ends_with(')') => {
            let u = &rest[..rest.len() - 1];
            if UNITS.contains(&u) {
                (base, u.to_string())
            } else {
                (name, String::new())
            }
        }
        _ => (name, String::new()),
    };
    let flow = cctl_metrics::names::SUMMARY_METRICS
        .iter()
        .find_map(|t| flow_of(t, name));
    let metric = match flow {
        Some((at, len, _)) => format!("{}{{N}}{}", &base[..at], &base[at + len..]),
        None => base.to_string(),
    };
    (metric, flow.map(|f| f.2), unit)
}

/// Where `name` has the flow number of `template`'s `flow{N}` (byte offset and length of
/// the digits) and the number, if `name` matches `template` and the template has one.
fn flow_of(template: &str, name: &str) -> Option<(usize, usize, u32)> {
    let mut flow = None;
    let (mut t, mut n, mut at) = (template, name, 0);
    while let Some((head, tail)) = t.split_once("{N}") {
        let rest = n.strip_prefix(head)?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || rest.starts_with('0') {
            return None;
        }
        at += head.len();
        if head.ends_with("flow") && flow.is_none() {
            flow = Some((at, digits, rest[..digits].parse().ok()?));
        }
        at += digits;
        (t, n) = (tail, &rest[digits..]);
    }
    (t == n).then_some(flow).flatten()
}

/// The rows of `s`: every value of every run, in the order of `summary.json`'s `runs`
/// and, within a run, of its metric names. Metrics with no value (`runs[].nc`) have no row.
pub fn rows(s: &Summary) -> Vec<Row> {
    let mut out = Vec::new();
    for r in &s.runs {
        let id = RunId {
            point: r.point,
            algo: r.algo.clone(),
            rep: r.rep,
        };
        let run = id.dir(Path::new("")).to_string_lossy().into_owned();
        for (name, value) in &r.values {
            let (metric, flow, unit) = split_name(name);
            out.push(Row {
                run: run.clone(),
                point: r.point,
                algorithm: r.algo.clone(),
                flow,
                metric,
                unit,
                value: *value,
            });
        }
    }
    out
}

/// Writes `summary.csv` of `s` into `dir` (a header row, then [`rows`]).
pub fn write(dir: &Path, s: &Summary) -> Result<()> {
    let path = dir.join("summary.csv");
    let mut w =
        csv::Writer::from_path(&path).with_context(|| format!("creating {}", path.display()))?;
    let rows = rows(s);
    if rows.is_empty() {
        w.write_record(COLUMNS)?;
    }
    for row in rows {
        w.serialize(row)?;
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_per_flow_name_gives_its_flow_and_unit_and_a_run_level_one_none() {
        let s = |m: &str, f: Option<u32>, u: &str| (m.to_string(), f, u.to_string());
        assert_eq!(
            split_name("M1 flow2 (Mbit/s)"),
            s("M1 flow{N}", Some(2), "Mbit/s")
        );
        assert_eq!(
            split_name("M13 flow12 mean qdelay (ms)"),
            s("M13 flow{N} mean qdelay", Some(12), "ms")
        );
        assert_eq!(
            split_name("udp flow1 received (Mbit/s)"),
            s("udp flow{N} received", Some(1), "Mbit/s")
        );
        assert_eq!(
            split_name("M8 utilisation (goodput)"),
            s("M8 utilisation (goodput)", None, "")
        );
        assert_eq!(split_name("M4 Jain"), s("M4 Jain", None, ""));
        assert_eq!(split_name("CPU busy (%)"), s("CPU busy", None, "%"));
        assert_eq!(
            split_name("backoffs flow3"),
            s("backoffs flow{N}", Some(3), "")
        );
        // A hop is not a flow: its number stays in the metric.
        assert_eq!(
            split_name("hop2 drops (pkts)"),
            s("hop2 drops", None, "pkts")
        );
    }

    #[test]
    fn every_template_ends_in_a_known_unit_a_qualifier_or_no_parenthesis() {
        for t in cctl_metrics::names::SUMMARY_METRICS {
            if let Some((_, rest)) = t.rsplit_once(" (") {
                let suffix = rest.trim_end_matches(')');
                assert!(
                    UNITS.contains(&suffix) || QUALIFIERS.contains(&suffix),
                    "{t:?}: add ({suffix}) to long::UNITS or long::QUALIFIERS"
                );
            }
        }
    }
}
