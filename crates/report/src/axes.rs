//! The axes of a sweep's summary plots: the swept variable that varies across the points on
//! x, in its own unit, and one series per algorithm and per value of the other swept
//! variables (as in Fig. 14 of \[P0\]: convergence time against RTT, one curve per capacity).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use crate::summary::SummaryRow;
use cctl_plot::{Series, SeriesStyle};

/// The x axis of a sweep's summary plots.
#[derive(Debug, Clone, PartialEq)]
pub struct XAxis {
    /// The swept variable on x (`rate_mbit`, `rtt2_ms`, ...); `None` if the points share no
    /// swept variable, and then x is the point's index.
    pub var: Option<String>,
    /// Axis label with the unit, e.g. `capacity (Mbit/s)`.
    pub label: String,
    /// Factor from the variable's unit to the axis's: 100 for fractions of BDP shown in %.
    pub scale: f64,
}

impl XAxis {
    /// The x axis of `rows`: `preferred` (the scenario's `x`) if its value varies across the
    /// points; else the swept variable with the most distinct values (the first by name on a
    /// tie); if nothing varies, `preferred` or the first variable every point has.
    pub fn of(rows: &[SummaryRow], preferred: Option<&str>) -> XAxis {
        let values = swept_values(rows);
        let varying = |v: &str| values.get(v).is_some_and(|s| s.len() > 1);
        let in_every_row = |v: &str| rows.iter().all(|r| r.vars.contains_key(v));
        let var = match preferred {
            Some(p) if varying(p) => Some(p.to_string()),
            _ => values
                .iter()
                .filter(|(_, s)| s.len() > 1)
                .max_by(|a, b| a.1.len().cmp(&b.1.len()).then_with(|| b.0.cmp(a.0)))
                .map(|(k, _)| k.clone())
                .or_else(|| preferred.filter(|p| in_every_row(p)).map(str::to_string))
                .or_else(|| values.keys().find(|k| in_every_row(k)).cloned()),
        };
        match var {
            Some(v) => {
                let (label, scale) = label_and_scale(&v);
                XAxis {
                    var: Some(v),
                    label,
                    scale,
                }
            }
            None => XAxis {
                var: None,
                label: "point".into(),
                scale: 1.0,
            },
        }
    }

    /// The x of `row` in axis units; `None` if the row has no value of the variable.
    pub fn x(&self, row: &SummaryRow) -> Option<f64> {
        match &self.var {
            Some(v) => row.vars.get(v).map(|x| x * self.scale),
            None => Some(row.point as f64),
        }
    }
}

/// Every swept variable of `rows` with the set of its values (`None`: a point without it),
/// as `f64` bit patterns.
fn swept_values(rows: &[SummaryRow]) -> BTreeMap<String, BTreeSet<Option<u64>>> {
    let names: BTreeSet<&String> = rows.iter().flat_map(|r| r.vars.keys()).collect();
    names
        .into_iter()
        .map(|n| {
            let set = rows
                .iter()
                .map(|r| r.vars.get(n).map(|v| v.to_bits()))
                .collect();
            (n.clone(), set)
        })
        .collect()
}

/// Axis label and scale of a variable: the parameters of `scenario::PARAMS` by name, a user
/// variable by its unit suffix (`_ms`, `_s`, `_mbit`, `_mb`, `_pkts`, `_bdp`).
fn label_and_scale(var: &str) -> (String, f64) {
    let fixed = match var {
        "rate_mbit" => Some(("capacity (Mbit/s)", 1.0)),
        "reverse_rate_mbit" => Some(("reverse-path capacity (Mbit/s)", 1.0)),
        "rtt_ms" => Some(("RTT (ms)", 1.0)),
        "buffer_bdp" => Some(("buffer (% BDP)", 100.0)),
        "buffer_pkts" => Some(("buffer (packets)", 1.0)),
        "buffer_ms" => Some(("buffer (ms)", 1.0)),
        "buffer_floor_pkts" => Some(("buffer floor (packets)", 1.0)),
        "loss" => Some(("loss probability p", 1.0)),
        "init_ssthresh_bdp" => Some(("initial ssthresh (% BDP)", 100.0)),
        "web_sessions" => Some(("web sessions", 1.0)),
        "duration_s" => Some(("duration (s)", 1.0)),
        _ => None,
    };
    if let Some((label, scale)) = fixed {
        return (label.into(), scale);
    }
    let units = [
        ("_ms", "ms", 1.0),
        ("_s", "s", 1.0),
        ("_mbit", "Mbit/s", 1.0),
        ("_mb", "MB", 1.0),
        ("_pkts", "packets", 1.0),
        ("_bdp", "% BDP", 100.0),
    ];
    match units.iter().find(|(suffix, _, _)| var.ends_with(suffix)) {
        Some((_, unit, scale)) => (format!("{var} ({unit})"), *scale),
        None => (var.to_string(), 1.0),
    }
}

/// One series of `metric`'s mean (with standard-error bars) against `axis` per algorithm and
/// per combination of the other swept variables that vary across `rows` (labelled
/// `htcp, rate_mbit=10`), each sorted by x. Rows without the metric, with no values of it,
/// or without an x are left out.
pub fn xy_series(rows: &[SummaryRow], axis: &XAxis, metric: &str) -> Vec<Series> {
    let others: Vec<String> = swept_values(rows)
        .into_iter()
        .filter(|(k, s)| s.len() > 1 && axis.var.as_ref() != Some(k))
        .map(|(k, _)| k)
        .collect();
    // (algo, values of `others`) → (x, mean, stderr) points.
    type Key = (String, Vec<Option<f64>>);
    type Points = Vec<(f64, f64, f64)>;
    let mut groups: Vec<(Key, Points)> = Vec::new();
    for r in rows {
        // Swept string settings (e.g. `qdisc`) split series like the algorithm does.
        let mut algo = r.algo.clone();
        for (k, v) in &r.settings {
            algo += &format!(", {k}={v}");
        }
        let key: Key = (
            algo,
            others.iter().map(|k| r.vars.get(k).copied()).collect(),
        );
        let i = match groups.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                groups.push((key, Vec::new()));
                groups.len() - 1
            }
        };
        let (Some(x), Some(m)) = (axis.x(r), r.metrics.get(metric)) else {
            continue;
        };
        if !m.values.is_empty() {
            groups[i].1.push((x, m.mean, m.stderr));
        }
    }
    groups.sort_by(|(a, _), (b, _)| {
        a.0.cmp(&b.0).then_with(|| {
            a.1.iter()
                .zip(&b.1)
                .map(|(x, y)| match (x, y) {
                    (Some(x), Some(y)) => x.total_cmp(y),
                    _ => x.is_some().cmp(&y.is_some()),
                })
                .find(|o| *o != Ordering::Equal)
                .unwrap_or(Ordering::Equal)
        })
    });
    groups
        .into_iter()
        .map(|((algo, values), mut pts)| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut label = algo;
            for (k, v) in others.iter().zip(values) {
                if let Some(v) = v {
                    label += &format!(", {k}={v}");
                }
            }
            Series {
                label,
                points: pts.iter().map(|&(x, y, _)| (x, y)).collect(),
                style: SeriesStyle::ErrorBars(pts.iter().map(|&(_, _, e)| e).collect()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::Aggregate;
    use cctl_scenario::{self as scenario, Profile};

    const METRIC: &str = "M5 A (s)";

    /// A summary row of `algo` at a point with swept `vars`, whose metric mean is `y`.
    fn row(point: usize, algo: &str, vars: &[(&str, f64)], y: f64) -> SummaryRow {
        let agg = Aggregate {
            mean: y,
            stderr: 0.5,
            values: vec![y],
            nc: 0,
        };
        SummaryRow {
            point,
            vars: vars.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            buffer_pkts: 100,
            rate_mbit: vars
                .iter()
                .find(|(k, _)| *k == "rate_mbit")
                .map_or(10.0, |v| v.1),
            loss: 0.0,
            settings: BTreeMap::new(),
            algo: algo.into(),
            n: 1,
            metrics: BTreeMap::from([(METRIC.to_string(), agg)]),
        }
    }

    fn xs(s: &Series) -> Vec<f64> {
        s.points.iter().map(|p| p.0).collect()
    }

    #[test]
    fn a_rate_sweep_at_one_rtt_puts_the_rate_on_x_not_the_point_index() {
        // T0.7's ci profile: x = "rtt_ms" in the scenario, but the rate is what varies.
        let mut rows = Vec::new();
        for algo in ["htcp", "reno"] {
            rows.push(row(0, algo, &[("rate_mbit", 10.0)], 3.0));
            rows.push(row(1, algo, &[("rate_mbit", 50.0)], 7.0));
        }
        let axis = XAxis::of(&rows, Some("rtt_ms"));
        assert_eq!(axis.var.as_deref(), Some("rate_mbit"));
        assert_eq!(axis.label, "capacity (Mbit/s)");
        let series = xy_series(&rows, &axis, METRIC);
        let labels: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["htcp", "reno"]);
        for s in &series {
            assert_eq!(xs(s), [10.0, 50.0]);
            assert_eq!(s.points[1].1, 7.0);
        }
    }

    #[test]
    fn a_rate_by_rtt_grid_has_rtt_on_x_and_one_curve_per_algorithm_and_rate() {
        // T0.7's paper profile, as Fig. 14: one curve per capacity.
        let mut rows = Vec::new();
        for algo in ["reno", "htcp"] {
            for (i, (rate, rtt)) in [(250.0, 22.0), (250.0, 42.0), (10.0, 22.0), (10.0, 42.0)]
                .into_iter()
                .enumerate()
            {
                rows.push(row(i, algo, &[("rate_mbit", rate), ("rtt_ms", rtt)], rtt));
            }
        }
        let axis = XAxis::of(&rows, Some("rtt_ms"));
        assert_eq!(
            (axis.var.as_deref(), axis.label.as_str()),
            (Some("rtt_ms"), "RTT (ms)")
        );
        let series = xy_series(&rows, &axis, METRIC);
        let labels: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "htcp, rate_mbit=10",
                "htcp, rate_mbit=250",
                "reno, rate_mbit=10",
                "reno, rate_mbit=250"
            ]
        );
        assert!(series.iter().all(|s| xs(s) == [22.0, 42.0]));
    }

    #[test]
    fn fractions_of_bdp_are_shown_in_percent_and_user_variables_by_their_suffix() {
        let rows = [
            row(0, "reno", &[("buffer_bdp", 0.2)], 1.0),
            row(1, "reno", &[("buffer_bdp", 1.0)], 2.0),
        ];
        let axis = XAxis::of(&rows, Some("buffer_bdp"));
        assert_eq!((axis.label.as_str(), axis.scale), ("buffer (% BDP)", 100.0));
        assert_eq!(xs(&xy_series(&rows, &axis, METRIC)[0]), [20.0, 100.0]);
        assert_eq!(label_and_scale("rtt2_ms").0, "rtt2_ms (ms)");
        assert_eq!(label_and_scale("size_mb").0, "size_mb (MB)");
        assert_eq!(label_and_scale("n").0, "n");
    }

    #[test]
    fn without_a_swept_variable_x_is_the_point_index_and_says_so() {
        let rows = [row(0, "reno", &[], 1.0)];
        let axis = XAxis::of(&rows, None);
        assert_eq!((axis.var, axis.label.as_str()), (None, "point"));
    }

    /// Every shipped scenario's profiles: the x variable varies whenever the points differ,
    /// x values are that variable's (not the point index), and no series has two points at
    /// one x.
    #[test]
    fn every_shipped_profile_plots_against_a_varying_variable_with_one_point_per_x() {
        for sc in scenario::builtin() {
            for profile in Profile::ALL {
                let points = sc.expand(profile, 1).unwrap();
                let rows: Vec<SummaryRow> = ["htcp", "reno"]
                    .iter()
                    .flat_map(|a| {
                        points.iter().map(move |p| {
                            let vars: Vec<(&str, f64)> =
                                p.vars.iter().map(|(k, v)| (k.as_str(), *v)).collect();
                            SummaryRow {
                                settings: p.settings.clone(),
                                ..row(p.index, a, &vars, 1.0)
                            }
                        })
                    })
                    .collect();
                let axis = XAxis::of(&rows, sc.x.as_deref());
                let what = format!("{} {profile}", sc.name);
                if points.len() > 1 {
                    let var = axis.var.clone().unwrap_or_else(|| panic!("{what}: no x"));
                    let distinct: BTreeSet<u64> = points
                        .iter()
                        .filter_map(|p| p.vars.get(&var))
                        .map(|v| v.to_bits())
                        .collect();
                    assert!(distinct.len() > 1, "{what}: {var} does not vary");
                }
                for s in xy_series(&rows, &axis, METRIC) {
                    let x = xs(&s);
                    let unique: BTreeSet<u64> = x.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(unique.len(), x.len(), "{what}: {} has {x:?}", s.label);
                    if let Some(var) = &axis.var {
                        let values: Vec<f64> = points
                            .iter()
                            .filter_map(|p| p.vars.get(var))
                            .map(|v| v * axis.scale)
                            .collect();
                        assert!(x.iter().all(|v| values.contains(v)), "{what}: {x:?}");
                    }
                }
            }
        }
    }
}
