//! The plots a scenario asks for (`plots = [...]`, [`cctl_scenario::PLOTS`]), drawn from a
//! summary and its runs into `plots/*.png` and `plots/*.svg`.
//!
//! [`KINDS`] is the table of plot kinds: a name, whether it draws one chart per run or
//! one over the sweep, and how. The plots of one summary metric against the sweep's
//! variable are data rows ([`Xy`]); the others have a function each, in [`runs`] (one
//! chart per run) and [`sweep`] (with the papers' models beside the measured points).

mod runs;
mod sweep;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;
use cctl_plot::{self as plot, Chart, Series};

use crate::axes::{xy_series, XAxis};
use crate::record::RunRecord;
use crate::summary::Summary;

/// What a plot kind draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// One chart per run (of repetition 0).
    PerRun,
    /// One chart over the sweep's summary.
    Summary,
}

/// How a plot kind is drawn.
#[derive(Clone, Copy)]
pub enum Draw {
    /// Charts of summary metrics against the sweep's variable, one per row.
    Xy(&'static [Xy]),
    /// A function of its own.
    With(fn(&Ctx) -> Result<Vec<PathBuf>>),
}

/// One plot kind of the scenario language.
#[derive(Clone, Copy)]
pub struct Kind {
    /// Its name in `plots = [...]`.
    pub name: &'static str,
    /// One chart per run, or over the sweep.
    pub scope: Scope,
    /// How it is drawn.
    pub draw: Draw,
}

/// A chart of one summary metric (its mean per point and algorithm) against the sweep's
/// variable.
#[derive(Debug, Clone, Copy)]
pub struct Xy {
    /// File stem under `plots/`.
    pub file: &'static str,
    /// Chart title (with the paper's figure).
    pub title: &'static str,
    /// The summary metric (a column of summary.json).
    pub metric: &'static str,
    /// The y axis.
    pub y_label: &'static str,
    /// A note under the chart, if any.
    pub note: Option<&'static str>,
}

const fn xy(
    file: &'static str,
    title: &'static str,
    metric: &'static str,
    y_label: &'static str,
) -> Xy {
    Xy {
        file,
        title,
        metric,
        y_label,
        note: None,
    }
}

/// Every plot kind, in the order of [`cctl_scenario::PLOTS`].
pub const KINDS: &[Kind] = &[
    Kind {
        name: "cwnd",
        scope: Scope::PerRun,
        draw: Draw::With(runs::cwnd),
    },
    Kind {
        name: "ratio_vs_rtt",
        scope: Scope::Summary,
        draw: Draw::With(sweep::ratio_vs_rtt),
    },
    Kind {
        name: "convergence",
        scope: Scope::Summary,
        draw: Draw::Xy(&[Xy {
            note: Some("80 % convergence time, variant A; points missing = not converged (NC)"),
            ..xy(
                "convergence",
                "80 % convergence time (Fig. 14)",
                "M5 A (s)",
                "t_conv (s)",
            )
        }]),
    },
    Kind {
        name: "response",
        scope: Scope::Summary,
        draw: Draw::With(sweep::response),
    },
    Kind {
        name: "buffer",
        scope: Scope::Summary,
        draw: Draw::Xy(&[
            xy(
                "buffer-throughput",
                "Aggregate throughput vs buffer (Fig. 12)",
                "M8 goodput (Mbit/s)",
                "goodput (Mbit/s)",
            ),
            xy(
                "buffer-loss",
                "Loss rate vs buffer (Fig. 12)",
                "M9 drop rate",
                "drop rate",
            ),
        ]),
    },
    Kind {
        name: "goodput",
        scope: Scope::Summary,
        draw: Draw::Xy(&[xy(
            "goodput",
            "Aggregate goodput",
            "M8 goodput (Mbit/s)",
            "goodput (Mbit/s)",
        )]),
    },
    Kind {
        name: "completion",
        scope: Scope::Summary,
        draw: Draw::Xy(&[xy(
            "completion",
            "Completion time",
            "M15 flow2 completion (s)",
            "completion (s)",
        )]),
    },
    Kind {
        name: "queue",
        scope: Scope::PerRun,
        draw: Draw::With(runs::queue),
    },
    Kind {
        name: "fairness",
        scope: Scope::Summary,
        draw: Draw::Xy(&[xy(
            "fairness",
            "Jain's fairness index (M4)",
            "M4 Jain",
            "Jain index",
        )]),
    },
    Kind {
        name: "friendliness",
        scope: Scope::Summary,
        draw: Draw::Xy(&[xy(
            "friendliness",
            "Throughput of the flow under test over the Reno flow",
            "M3 flow2/flow1",
            "flow2 / flow1",
        )]),
    },
    Kind {
        name: "timeline",
        scope: Scope::PerRun,
        draw: Draw::With(runs::timeline),
    },
    Kind {
        name: "cdf",
        scope: Scope::Summary,
        draw: Draw::With(sweep::cwnd_at_backoff_cdf),
    },
    Kind {
        name: "delay_throughput",
        scope: Scope::Summary,
        draw: Draw::With(sweep::delay_throughput),
    },
    Kind {
        name: "delay",
        scope: Scope::PerRun,
        draw: Draw::With(runs::delay),
    },
];

/// What every plot is drawn from.
pub struct Ctx<'a> {
    /// The sweep's summary.
    pub s: &'a Summary,
    /// Its runs.
    pub records: &'a [RunRecord],
    /// `plots/` of the results directory.
    pub dir: PathBuf,
    /// Notes under every chart (scenario, profile, kernel).
    pub notes: Vec<String>,
    /// The sweep's x axis.
    pub axis: XAxis,
}

impl Ctx<'_> {
    /// The runs of repetition 0 (per-run plots draw those).
    fn first_reps(&self) -> impl Iterator<Item = &RunRecord> {
        self.records.iter().filter(|r| r.rep == 0)
    }

    /// Renders an x-y chart into `stem`.png/.svg.
    fn render(
        &self,
        stem: &str,
        title: &str,
        x: &str,
        y: &str,
        series: Vec<Series>,
        notes: &[String],
    ) -> Result<PathBuf> {
        let chart = Chart {
            title: title.into(),
            x_label: x.into(),
            y_label: y.into(),
            series,
            notes: notes.to_vec(),
            ..Default::default()
        };
        Ok(plot::render(&chart, &self.dir.join(stem))?.0)
    }

    /// The chart of one [`Xy`] row.
    fn xy(&self, row: &Xy) -> Result<PathBuf> {
        let series = xy_series(&self.s.rows, &self.axis, row.metric);
        let mut notes = self.notes.clone();
        notes.extend(row.note.map(String::from));
        self.render(
            row.file,
            row.title,
            &self.axis.label,
            row.y_label,
            series,
            &notes,
        )
    }
}

/// Renders the plots `kinds` (names of [`KINDS`]) into `dir/plots`, against the variable
/// `x` (default: the sweep's first); returns the PNG paths.
///
/// Errors: a kind not in [`KINDS`]; rendering or writing a chart.
pub fn plots(
    s: &Summary,
    records: &[RunRecord],
    dir: &Path,
    kinds: &[String],
    x: Option<&str>,
) -> Result<Vec<PathBuf>> {
    let pdir = dir.join("plots");
    std::fs::create_dir_all(&pdir)?;
    let mut notes = vec![format!(
        "{} ({}), profile {}, kernel {}",
        s.metadata.scenario, s.metadata.id, s.metadata.profile, s.metadata.kernel
    )];
    if s.metadata.profile == "ci" {
        notes.push("ci profile: never compare with the papers' numbers".into());
    }
    let cx = Ctx {
        s,
        records,
        dir: pdir,
        notes,
        axis: XAxis::of(&s.rows, x),
    };
    let mut out = Vec::new();
    for name in kinds {
        let Some(kind) = KINDS.iter().find(|k| k.name == name) else {
            anyhow::bail!("unknown plot kind '{name}'");
        };
        match kind.draw {
            Draw::Xy(rows) => {
                for row in rows {
                    out.push(cx.xy(row)?);
                }
            }
            Draw::With(f) => out.extend(f(&cx)?),
        }
    }
    Ok(out)
}

/// A point's variables as `k=v k=v`.
fn point_vars(v: &BTreeMap<String, f64>) -> String {
    v.iter()
        .map(|(k, x)| format!("{k}={x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plot_table_and_the_scenario_language_name_the_same_kinds() {
        let table: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        assert_eq!(
            table,
            cctl_scenario::PLOTS,
            "KINDS and cctl_scenario::PLOTS"
        );
        for k in KINDS {
            if let Draw::Xy(rows) = k.draw {
                assert!(!rows.is_empty(), "{}", k.name);
                assert_eq!(
                    k.scope,
                    Scope::Summary,
                    "{}: an xy row plots the summary",
                    k.name
                );
            }
        }
    }
}
