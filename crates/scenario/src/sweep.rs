//! Sweeps: parsing a `sweep` (a table of lists, or an array of them) into cartesian
//! products, and expanding a profile's products into its run points, the last key varying
//! fastest.

use std::collections::BTreeMap;

use super::error::{FieldError, ScenarioError};
use super::expr::{describe, is_ident, Sourced};
use super::point::RunPoint;
use super::schema::{
    is_setting, Profile, Scenario, BUFFER_KEYS, INTEGER_PARAMS, PARAMS, STRING_SWEEPS,
};

/// One cartesian product of a sweep.
#[derive(Debug, Clone)]
pub(super) struct SweepCase {
    /// `profiles.ci.sweep` or `profiles.ci.sweep[1]`.
    pub(super) at: String,
    pub(super) axes: Vec<(String, Vec<f64>)>,
    /// Axes of string settings ([`STRING_SWEEPS`]), varied after (inside) the numeric ones.
    pub(super) strings: Vec<(String, Vec<String>)>,
}

/// Parses the list of a string setting's sweep (`qdisc = ["pfifo", "fq_codel"]`).
fn parse_string_axis(
    key: &str,
    list: &toml::Value,
    key_at: &str,
) -> Result<Vec<String>, FieldError> {
    let toml::Value::Array(items) = list else {
        return Err(FieldError::new(
            key_at,
            format!("expected a list of strings, found {}", describe(list)),
        ));
    };
    if items.is_empty() {
        return Err(FieldError::new(
            key_at,
            "an empty list; give at least one value",
        ));
    }
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_at = format!("{key_at}[{i}]");
        let toml::Value::String(v) = item else {
            return Err(FieldError::new(
                item_at,
                format!("expected a string, found {}", describe(item)),
            ));
        };
        if key == "qdisc" && cctl_netem::aqm::Qdisc::parse(v).is_none() {
            return Err(FieldError::new(item_at, cctl_netem::aqm::Qdisc::unknown(v)));
        }
        out.push(v.clone());
    }
    Ok(out)
}

pub(super) fn parse_sweep(value: &toml::Value, at: &str) -> Result<Vec<SweepCase>, FieldError> {
    let tables: Vec<(String, &toml::Table)> = match value {
        toml::Value::Table(t) => vec![(at.to_string(), t)],
        toml::Value::Array(a) => {
            if a.is_empty() {
                return Err(FieldError::new(
                    at,
                    "an empty array of sweeps; give a table of lists or omit `sweep`",
                ));
            }
            a.iter()
                .enumerate()
                .map(|(i, v)| match v {
                    toml::Value::Table(t) => Ok((format!("{at}[{i}]"), t)),
                    other => Err(FieldError::new(
                        format!("{at}[{i}]"),
                        format!("expected a table of lists, found {}", describe(other)),
                    )),
                })
                .collect::<Result<_, _>>()?
        }
        other => {
            return Err(FieldError::new(
                at,
                format!(
                    "expected a table of lists (or an array of them), found {}",
                    describe(other)
                ),
            ))
        }
    };
    let mut cases = Vec::new();
    for (case_at, table) in tables {
        let mut axes = Vec::new();
        let mut strings = Vec::new();
        let mut buffers = Vec::new();
        for (key, list) in table {
            let key_at = format!("{case_at}.{key}");
            if STRING_SWEEPS.contains(&key.as_str()) {
                strings.push((key.clone(), parse_string_axis(key, list, &key_at)?));
                continue;
            }
            if !is_ident(key) || key == "algo" {
                return Err(FieldError::new(
                    key_at,
                    "not a parameter or variable name ([a-z_][a-z0-9_]*, not `algo`)",
                ));
            }
            if !PARAMS.contains(&key.as_str()) && is_setting(key) {
                return Err(FieldError::new(
                    key_at,
                    format!(
                        "`{key}` cannot be swept; sweepable parameters: {}",
                        PARAMS.join(", ")
                    ),
                ));
            }
            if BUFFER_KEYS.contains(&key.as_str()) {
                buffers.push(key.clone());
            }
            let toml::Value::Array(items) = list else {
                return Err(FieldError::new(
                    key_at,
                    format!("expected a list of numbers, found {}", describe(list)),
                ));
            };
            if items.is_empty() {
                return Err(FieldError::new(
                    key_at,
                    "an empty list; give at least one value",
                ));
            }
            let mut values = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let item_at = format!("{key_at}[{i}]");
                let v = match item {
                    toml::Value::Integer(n) => *n as f64,
                    toml::Value::Float(x) if x.is_finite() => *x,
                    other => {
                        return Err(FieldError::new(
                            item_at,
                            format!("expected a number, found {}", describe(other)),
                        ))
                    }
                };
                if INTEGER_PARAMS.contains(&key.as_str()) && (v.fract() != 0.0 || v < 0.0) {
                    return Err(FieldError::new(
                        item_at,
                        format!("`{key}` takes whole numbers ≥ 0, found {v}"),
                    ));
                }
                values.push(v);
            }
            axes.push((key.clone(), values));
        }
        if buffers.len() > 1 {
            return Err(FieldError::new(
                case_at,
                format!(
                    "sweeps {}: give only one of {}",
                    buffers.join(" and "),
                    BUFFER_KEYS.join(", ")
                ),
            ));
        }
        cases.push(SweepCase {
            at: case_at,
            axes,
            strings,
        });
    }
    Ok(cases)
}

impl Scenario {
    pub(super) fn sweep_cases(&self, profile: Profile) -> Vec<SweepCase> {
        let layer = self.layer(profile);
        match layer.sweep.as_ref().or(self.defaults.sweep.as_ref()) {
            Some(cases) => cases.clone(),
            None => vec![SweepCase {
                at: format!("{}.sweep", layer.at),
                axes: Vec::new(),
                strings: Vec::new(),
            }],
        }
    }

    /// `choice`, `exponential`) come from `seed` and the point's index.
    pub fn expand(&self, profile: Profile, seed: u64) -> Result<Vec<RunPoint>, ScenarioError> {
        let invalid = |error: FieldError| ScenarioError::Invalid {
            path: self.path.clone(),
            error,
        };
        let base = self.base_env(profile);
        let mut points = Vec::new();
        for case in self.sweep_cases(profile) {
            let n = case.axes.len();
            let lens: Vec<usize> = case
                .axes
                .iter()
                .map(|(_, v)| v.len())
                .chain(case.strings.iter().map(|(_, v)| v.len()))
                .collect();
            let mut idx = vec![0usize; lens.len()];
            'points: loop {
                let mut env = base.clone();
                let mut vars = BTreeMap::new();
                if case
                    .axes
                    .iter()
                    .any(|(k, _)| BUFFER_KEYS.contains(&k.as_str()))
                {
                    env.retain(|k, _| !BUFFER_KEYS.contains(&k.as_str()));
                }
                for ((name, values), &i) in case.axes.iter().zip(&idx) {
                    env.insert(
                        name.clone(),
                        Sourced {
                            value: values[i],
                            field: format!("{}.{name}[{i}]", case.at),
                        },
                    );
                    vars.insert(name.clone(), values[i]);
                }
                let settings: BTreeMap<String, (String, String)> = case
                    .strings
                    .iter()
                    .zip(&idx[n..])
                    .map(|((name, values), &i)| {
                        (
                            name.clone(),
                            (values[i].clone(), format!("{}.{name}[{i}]", case.at)),
                        )
                    })
                    .collect();
                let point = self
                    .point(profile, points.len(), env, vars, settings, seed)
                    .map_err(invalid)?;
                points.push(point);
                // Odometer: the last axis varies fastest.
                let mut d = idx.len();
                loop {
                    if d == 0 {
                        break 'points;
                    }
                    d -= 1;
                    idx[d] += 1;
                    if idx[d] < lens[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
        }
        Ok(points)
    }
}

/// The points of `points` (a scenario's expansion) whose indices are in `only`, in
/// expansion order; all of them when `only` is `None`.
///
/// Errors: an index that is not a point of the expansion (the message gives the range
/// allowed), or an empty selection.
pub fn select_points(
    points: Vec<RunPoint>,
    only: Option<&[usize]>,
) -> Result<Vec<RunPoint>, String> {
    let Some(only) = only else {
        return Ok(points);
    };
    if only.is_empty() {
        return Err("no point selected: give point indices such as 0,2 (see --dry-run)".into());
    }
    if let Some(bad) = only.iter().find(|i| !points.iter().any(|p| p.index == **i)) {
        return Err(format!(
            "no point {bad}: this scenario has points 0 to {} in this profile (see --dry-run)",
            points.len().saturating_sub(1)
        ));
    }
    Ok(points
        .into_iter()
        .filter(|p| only.contains(&p.index))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_input::rejects;
    use crate::Profile;

    #[test]
    fn empty_sweep_lists_are_rejected() {
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rtt_ms = [] }",
            "profiles.ci.sweep.rtt_ms",
            &["empty list"],
        );
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = []",
            "profiles.ci.sweep",
            &["empty array"],
        );
    }

    #[test]
    fn selected_points_keep_their_indices_and_bad_ones_are_named() {
        let sc = crate::find("native-comparison").unwrap();
        let all = sc.expand(Profile::Ci, 1).unwrap();
        assert_eq!(select_points(all.clone(), None).unwrap(), all);
        let some = select_points(all.clone(), Some(&[3, 1])).unwrap();
        assert_eq!(some.iter().map(|p| p.index).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(some[1].loss, 0.001);
        let e = select_points(all.clone(), Some(&[0, 4])).unwrap_err();
        assert!(e.contains("no point 4") && e.contains("0 to 3"), "{e}");
        let e = select_points(all, Some(&[])).unwrap_err();
        assert!(e.contains("no point selected"), "{e}");
    }
}
