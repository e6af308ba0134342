//! A scenario's `[[expect]]` tables: what its results must show, checked by `cctl bench run`
//! and `bench report` (PASS or FAIL per expectation, in `summary.json`).
//!
//! ```toml
//! [[expect]]
//! metric = "M8 utilisation (goodput)"   # a summary metric (cctl_metrics::names)
//! where = { algo = "*", point = "*" }   # optional; algo: a key or a glob with `*`;
//!                                       #   point: "*", an index or a list of indices
//! min = 0.9                             # at least one of min, max
//! why = "a long flow fills a 100 % BDP buffer"   # optional, shown with the verdict
//! ```
//!
//! An expectation holds at every (point, algorithm) of a run it selects: the mean of the
//! metric over the repetitions lies in `[min, max]`. It fails where the metric has no value,
//! and when it selects nothing in the run.

use serde::Deserialize;

use crate::de::de_at;
use crate::error::FieldError;

/// Which points of a run an expectation covers.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum PointSel {
    /// Every point (`"*"`).
    Any(String),
    /// These point indices (from 0, as in `summary.json`).
    Indices(Vec<usize>),
}

/// One `[[expect]]` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Expectation {
    /// A summary metric name ([`cctl_metrics::names::SUMMARY_METRICS`]).
    pub metric: String,
    /// Algorithms covered: `*`, a cctl key (`htcp`, `cubic@linux`, `native:cubic`), or a
    /// glob with `*` (`native:*`).
    pub algo: String,
    /// Points covered.
    pub point: PointSel,
    /// Smallest allowed mean, in the metric's unit.
    pub min: Option<f64>,
    /// Largest allowed mean, in the metric's unit.
    pub max: Option<f64>,
    /// Why the scenario expects it (optional).
    pub why: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawExpect {
    metric: String,
    #[serde(rename = "where")]
    selector: Option<RawWhere>,
    min: Option<f64>,
    max: Option<f64>,
    why: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWhere {
    algo: Option<String>,
    point: Option<toml::Value>,
}

impl Expectation {
    /// Whether it covers `point` (index) with `algo`.
    pub fn selects(&self, point: usize, algo: &str) -> bool {
        let point_ok = match &self.point {
            PointSel::Any(_) => true,
            PointSel::Indices(v) => v.contains(&point),
        };
        point_ok && glob(&self.algo, algo)
    }

    /// Whether it covers algorithm `algo` at some point.
    pub fn selects_algo(&self, algo: &str) -> bool {
        glob(&self.algo, algo)
    }

    /// Whether `value` is within `[min, max]`.
    pub fn holds(&self, value: f64) -> bool {
        value.is_finite()
            && self.min.is_none_or(|m| value >= m)
            && self.max.is_none_or(|m| value <= m)
    }

    /// The bounds as text: `>= 0.9`, `<= 5`, `in [0.9, 1.1]`.
    pub fn bounds(&self) -> String {
        match (self.min, self.max) {
            (Some(a), Some(b)) => format!("in [{a}, {b}]"),
            (Some(a), None) => format!(">= {a}"),
            (None, Some(b)) => format!("<= {b}"),
            (None, None) => "any".into(),
        }
    }

    /// The selector as text: `algo=*, point=*`.
    pub fn selector(&self) -> String {
        let point = match &self.point {
            PointSel::Any(s) => s.clone(),
            PointSel::Indices(v) => v.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        };
        format!("algo={}, point={point}", self.algo)
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|&i| rest.is_char_boundary(i))
                .any(|i| glob(tail, &rest[i..]))
        }
    }
}

/// Parses `[[expect]]` table `v` at `at` (`expect[0]`); `points` is the largest number of
/// points of the scenario's profiles (a point index must exist in one of them).
pub(crate) fn parse_expect(v: toml::Value, at: &str) -> Result<Expectation, FieldError> {
    let raw: RawExpect = de_at(v, at)?;
    if !cctl_metrics::names::is_summary_metric(&raw.metric) {
        return Err(FieldError::new(
            format!("{at}.metric"),
            format!(
                "unknown metric `{}`; allowed: the names in a summary.json, `{{N}}` a flow or \
                 hop number: {}",
                raw.metric,
                cctl_metrics::names::SUMMARY_METRICS.join(", ")
            ),
        ));
    }
    for (k, x) in [("min", raw.min), ("max", raw.max)] {
        if x.is_some_and(|x| !x.is_finite()) {
            return Err(FieldError::new(
                format!("{at}.{k}"),
                "must be a finite number",
            ));
        }
    }
    match (raw.min, raw.max) {
        (None, None) => {
            return Err(FieldError::new(
                at,
                "give `min`, `max` or both: the bounds the metric's mean must lie within",
            ))
        }
        (Some(a), Some(b)) if a > b => {
            return Err(FieldError::new(
                format!("{at}.min"),
                format!("{a} is above max {b}; the bounds are [min, max]"),
            ))
        }
        _ => {}
    }
    let w = raw.selector.unwrap_or(RawWhere {
        algo: None,
        point: None,
    });
    let algo = w.algo.unwrap_or_else(|| "*".into());
    let algo_ok = !algo.is_empty()
        && algo
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_:@.*-".contains(c));
    if !algo_ok {
        return Err(FieldError::new(
            format!("{at}.where.algo"),
            format!(
                "`{algo}`: expected `*`, an algorithm key (`htcp`, `cubic@linux`, \
                 `native:cubic`) or a glob of one (`native:*`)"
            ),
        ));
    }
    let point = match w.point {
        None => PointSel::Any("*".into()),
        Some(toml::Value::String(s)) if s == "*" => PointSel::Any(s),
        Some(toml::Value::Integer(i)) if i >= 0 => PointSel::Indices(vec![i as usize]),
        Some(toml::Value::Array(a))
            if !a.is_empty() && a.iter().all(|x| x.as_integer().is_some_and(|i| i >= 0)) =>
        {
            PointSel::Indices(
                a.iter()
                    .filter_map(|x| x.as_integer().map(|i| i as usize))
                    .collect(),
            )
        }
        Some(other) => {
            return Err(FieldError::new(
                format!("{at}.where.point"),
                format!(
                    "{other}: expected \"*\", a point index (0, 1, ... as in summary.json) or a \
                     non-empty list of them"
                ),
            ))
        }
    };
    Ok(Expectation {
        metric: raw.metric,
        algo,
        point,
        min: raw.min,
        max: raw.max,
        why: raw.why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Expectation, FieldError> {
        let v: toml::Value = toml::from_str(text).unwrap();
        parse_expect(v, "expect[0]")
    }

    #[test]
    fn an_expectation_selects_and_holds() {
        let e = parse(
            "metric = \"M8 utilisation (goodput)\"\nwhere = { algo = \"native:*\", point = [1, 2] }\nmin = 0.9",
        )
        .unwrap();
        assert!(e.selects(1, "native:cubic") && !e.selects(0, "native:cubic"));
        assert!(!e.selects(1, "cubic"));
        assert!(e.holds(0.9) && e.holds(1.2) && !e.holds(0.89) && !e.holds(f64::NAN));
        assert_eq!(e.bounds(), ">= 0.9");
        assert_eq!(e.selector(), "algo=native:*, point=1,2");
        let any = parse("metric = \"M4 Jain\"\nmax = 1").unwrap();
        assert!(any.selects(7, "htcp") && any.holds(0.5));
    }

    #[test]
    fn bad_expectations_name_their_field() {
        for (text, field, says) in [
            (
                "metric = \"M8 utilisation\"\nmin = 1",
                "expect[0].metric",
                "unknown metric",
            ),
            ("metric = \"M4 Jain\"", "expect[0]", "give `min`, `max`"),
            (
                "metric = \"M4 Jain\"\nmin = 2\nmax = 1",
                "expect[0].min",
                "above max",
            ),
            ("metric = \"M4 Jain\"\nmin = nan", "expect[0].min", "finite"),
            (
                "metric = \"M4 Jain\"\nmin = 1\nwhere = { algo = \"Cubic\" }",
                "expect[0].where.algo",
                "expected `*`",
            ),
            (
                "metric = \"M4 Jain\"\nmin = 1\nwhere = { point = -1 }",
                "expect[0].where.point",
                "point index",
            ),
            (
                "metric = \"M4 Jain\"\nmin = 1\nwhere = { point = \"all\" }",
                "expect[0].where.point",
                "point index",
            ),
            (
                "metric = \"M4 Jain\"\nmin = 1\nwhere = { rtt = 1 }",
                "expect[0].where.rtt",
                "unknown field",
            ),
            (
                "metric = \"M4 Jain\"\nminimum = 1",
                "expect[0].minimum",
                "unknown field",
            ),
        ] {
            let e = parse(text).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.message.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn globs() {
        assert!(glob("*", "") && glob("a*c", "abbc") && glob("*:cubic", "native:cubic"));
        assert!(!glob("a*c", "abd") && !glob("cubic", "cubic@linux"));
    }
}
