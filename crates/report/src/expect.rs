//! A scenario's expectations (`[[expect]]`, [`cctl_scenario::expect`]) judged against a
//! summary: PASS or FAIL per expectation, with the value at every (point, algorithm) it
//! selects, in `summary.json` (`expectations`), `summary.md` and the terminal.

use std::collections::BTreeMap;

use serde::Serialize;

use cctl_scenario::expect::Expectation;

/// What an expectation is judged on: one summary row's (point, algorithm) and the mean of
/// each of its metrics over the repetitions (NaN or absent: no value).
#[derive(Debug, Clone)]
pub struct RowMeans<'a> {
    /// Scenario point.
    pub point: usize,
    /// Algorithm.
    pub algo: &'a str,
    /// Metric name → mean.
    pub means: BTreeMap<&'a str, f64>,
}

/// The verdict on one expectation.
#[derive(Debug, Clone, Serialize)]
pub struct ExpectOutcome {
    /// The expectation as the scenario states it.
    #[serde(flatten)]
    pub expect: Expectation,
    /// PASS, FAIL, or NOT RUN when the run holds none of the (point, algorithm) it selects
    /// (`--points` left them out).
    pub verdict: Verdict,
    /// Every (point, algorithm) it selects, in summary order.
    pub cases: Vec<ExpectCase>,
}

/// The verdict on an expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// It held at every (point, algorithm) it selects.
    Pass,
    /// It failed at one at least.
    Fail,
    /// The run holds none of those it selects.
    NotRun,
}

impl Verdict {
    /// `PASS`, `FAIL`, `NOT RUN`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::NotRun => "NOT RUN",
        }
    }
}

/// One (point, algorithm) an expectation selects.
#[derive(Debug, Clone, Serialize)]
pub struct ExpectCase {
    /// Scenario point.
    pub point: usize,
    /// Algorithm.
    pub algo: String,
    /// Mean of the metric over the repetitions; `None` when no repetition had a value.
    pub mean: Option<f64>,
    /// Whether the mean is within the bounds.
    pub pass: bool,
}

/// Judges `expectations` against the summary's `rows`, in summary order.
pub fn evaluate(expectations: &[Expectation], rows: &[RowMeans]) -> Vec<ExpectOutcome> {
    expectations
        .iter()
        .map(|e| {
            let cases: Vec<ExpectCase> = rows
                .iter()
                .filter(|r| e.selects(r.point, r.algo))
                .map(|r| {
                    let mean = r
                        .means
                        .get(e.metric.as_str())
                        .copied()
                        .filter(|m| m.is_finite());
                    ExpectCase {
                        point: r.point,
                        algo: r.algo.to_string(),
                        mean,
                        pass: mean.is_some_and(|m| e.holds(m)),
                    }
                })
                .collect();
            ExpectOutcome {
                verdict: if cases.is_empty() {
                    Verdict::NotRun
                } else if cases.iter().all(|c| c.pass) {
                    Verdict::Pass
                } else {
                    Verdict::Fail
                },
                expect: e.clone(),
                cases,
            }
        })
        .collect()
}

/// Whether any expectation failed (`--strict` exits 8 then).
pub fn any_failed(outcomes: &[ExpectOutcome]) -> bool {
    outcomes.iter().any(|o| o.verdict == Verdict::Fail)
}

/// One line per expectation: `PASS M8 utilisation (goodput) >= 0.9 (algo=*, point=*): 4 of
/// 4`, and for a FAIL the cases that failed with their values.
pub fn lines(outcomes: &[ExpectOutcome]) -> Vec<String> {
    outcomes
        .iter()
        .map(|o| {
            let e = &o.expect;
            let held = o.cases.iter().filter(|c| c.pass).count();
            let mut line = format!(
                "{} {} {} ({}): {held} of {} held",
                o.verdict.label(),
                e.metric,
                e.bounds(),
                e.selector(),
                o.cases.len()
            );
            if o.cases.is_empty() {
                line.push_str("; it selects nothing in this run");
            }
            let failed: Vec<String> = o
                .cases
                .iter()
                .filter(|c| !c.pass)
                .map(|c| {
                    format!(
                        "point {} {} = {}",
                        c.point,
                        c.algo,
                        c.mean.map_or("no value".into(), |m| format!("{m:.4}"))
                    )
                })
                .collect();
            if !failed.is_empty() {
                line.push_str(&format!("; {}", failed.join(", ")));
            }
            if let Some(why) = &e.why {
                line.push_str(&format!(" ({why})"));
            }
            line
        })
        .collect()
}

/// The `## Expectations` section of `summary.md`; empty without expectations.
pub fn markdown(outcomes: &[ExpectOutcome]) -> String {
    if outcomes.is_empty() {
        return String::new();
    }
    let mut md = String::from("\n## Expectations\n\n");
    for l in lines(outcomes) {
        md.push_str(&format!("- {l}\n"));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(point: usize, algo: &str, util: Option<f64>) -> RowMeans<'_> {
        RowMeans {
            point,
            algo,
            means: util
                .map(|u| ("M8 utilisation (goodput)", u))
                .into_iter()
                .collect(),
        }
    }

    fn expect(algo: &str, point: cctl_scenario::expect::PointSel) -> Expectation {
        Expectation {
            metric: "M8 utilisation (goodput)".into(),
            algo: algo.into(),
            point,
            min: Some(0.9),
            max: None,
            why: Some("full pipe".into()),
        }
    }

    #[test]
    fn expectations_pass_fail_or_did_not_run() {
        use cctl_scenario::expect::PointSel;
        let rows = [
            row(0, "reno", Some(0.95)),
            row(0, "htcp", Some(0.97)),
            row(1, "reno", Some(0.80)),
            row(1, "htcp", None),
        ];
        let out = evaluate(
            &[
                expect("*", PointSel::Indices(vec![0])),
                expect("*", PointSel::Any("*".into())),
                expect("cubic", PointSel::Any("*".into())),
            ],
            &rows,
        );
        let verdicts: Vec<Verdict> = out.iter().map(|o| o.verdict).collect();
        assert_eq!(verdicts, [Verdict::Pass, Verdict::Fail, Verdict::NotRun]);
        assert!(any_failed(&out) && !any_failed(&out[..1]));
        let l = lines(&out);
        assert_eq!(
            l[0],
            "PASS M8 utilisation (goodput) >= 0.9 (algo=*, point=0): 2 of 2 held (full pipe)"
        );
        assert!(
            l[1].starts_with("FAIL ")
                && l[1].contains("2 of 4 held; point 1 reno = 0.8000, point 1 htcp = no value"),
            "{}",
            l[1]
        );
        assert!(l[2].starts_with("NOT RUN ") && l[2].contains("selects nothing"));
        let json = serde_json::to_value(&out[1]).unwrap();
        assert_eq!(json["verdict"], "fail");
        assert_eq!(json["metric"], "M8 utilisation (goodput)");
        assert_eq!(json["cases"][2]["mean"], 0.8);
    }
}
