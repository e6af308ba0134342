//! The `sweep` key: a table of lists, or an array of them, parsed into cartesian products
//! ([`SweepCase`]); `crate::expand` expands them into run points, the last key varying fastest.

use crate::error::FieldError;
use crate::expr::{describe, is_ident};
use crate::model::{is_setting, BUFFER_KEYS, INTEGER_PARAMS, PARAMS, STRING_SWEEPS};

/// One cartesian product of a sweep.
#[derive(Debug, Clone)]
pub(crate) struct SweepCase {
    /// `profiles.ci.sweep` or `profiles.ci.sweep[1]`.
    pub(crate) at: String,
    pub(crate) axes: Vec<(String, Vec<f64>)>,
    /// Axes of string settings ([`STRING_SWEEPS`]), varied after (inside) the numeric ones.
    pub(crate) strings: Vec<(String, Vec<String>)>,
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

pub(crate) fn parse_sweep(value: &toml::Value, at: &str) -> Result<Vec<SweepCase>, FieldError> {
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

#[cfg(test)]
mod tests {
    use crate::test_input::rejects;

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
}
