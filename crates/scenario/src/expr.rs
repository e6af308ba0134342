//! The value language of `[[flows]]` fields: numbers, products of numbers and `{var}`
//! references, and random draws (`uniform`, `choice`, `exponential`); parsing, evaluation
//! against a point's variables, the range a value can take, and drawing one.

use std::collections::{BTreeMap, BTreeSet};

use super::error::FieldError;
use super::rng::SplitMix64;

/// One factor of an [`Expr`].
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Factor {
    /// A number.
    Num(f64),
    /// A `{var}` reference, by name.
    Var(String),
}

/// A product of numbers and variables.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Expr {
    /// As written, for messages.
    pub(super) text: String,
    /// Its factors; the value is their product (1 for none).
    pub(super) factors: Vec<Factor>,
}

/// A flow field's value: an expression or a random draw whose operands are expressions.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum NumSpec {
    /// A fixed value.
    Expr(Expr),
    /// `{ uniform = [low, high] }`.
    Uniform(Expr, Expr),
    /// `{ exponential = mean }`.
    Exponential(Expr),
    /// `{ choice = [a, b, ...] }`, each equally likely.
    Choice(Vec<Expr>),
}

impl NumSpec {
    /// The expressions it is made of.
    pub(super) fn exprs(&self) -> Vec<&Expr> {
        match self {
            NumSpec::Expr(e) | NumSpec::Exponential(e) => vec![e],
            NumSpec::Uniform(a, b) => vec![a, b],
            NumSpec::Choice(l) => l.iter().collect(),
        }
    }
}

/// A resolved value and the field it came from.
#[derive(Debug, Clone)]
pub(super) struct Sourced {
    /// The value.
    pub(super) value: f64,
    /// Dotted path of the field that set it, e.g. `profiles.ci.sweep.rtt_ms[1]`.
    pub(super) field: String,
}

/// A point's parameters and variables by name.
pub(super) type Env = BTreeMap<String, Sourced>;

/// Whether `s` is a variable name: `[a-z_][a-z0-9_]*`.
pub(super) fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Parses a product of numbers and `{var}` references, e.g. `"{interval_s}*4"`; `at` names
/// the field in errors.
fn parse_expr(text: &str, at: &str) -> Result<Expr, FieldError> {
    let mut factors = Vec::new();
    for term in text.split('*') {
        let term = term.trim();
        if let Some(name) = term.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            if name == "algo" {
                return Err(FieldError::new(
                    at,
                    "`{algo}` names an algorithm and is allowed only in `cc`",
                ));
            }
            if !is_ident(name) {
                return Err(FieldError::new(
                    at,
                    format!("`{{{name}}}` is not a variable name ([a-z_][a-z0-9_]*)"),
                ));
            }
            factors.push(Factor::Var(name.to_string()));
        } else if let Ok(v) = term.parse::<f64>() {
            if !v.is_finite() {
                return Err(FieldError::new(
                    at,
                    format!("`{term}` is not a finite number"),
                ));
            }
            factors.push(Factor::Num(v));
        } else {
            return Err(FieldError::new(
                at,
                format!(
                    "`{text}` is not a number or a product of numbers and {{var}} references \
                     (e.g. \"{{rtt_ms}}\", \"{{interval_s}}*4\")"
                ),
            ));
        }
    }
    Ok(Expr {
        text: text.to_string(),
        factors,
    })
}

/// An expression from a TOML number or string; `at` names the field in errors.
pub(super) fn expr_from(value: &toml::Value, at: &str) -> Result<Expr, FieldError> {
    match value {
        toml::Value::Integer(i) => Ok(Expr {
            text: i.to_string(),
            factors: vec![Factor::Num(*i as f64)],
        }),
        toml::Value::Float(f) if f.is_finite() => Ok(Expr {
            text: f.to_string(),
            factors: vec![Factor::Num(*f)],
        }),
        toml::Value::String(s) => parse_expr(s, at),
        other => Err(FieldError::new(
            at,
            format!(
                "expected a number or a \"{{var}}\" expression, found {}",
                describe(other)
            ),
        )),
    }
}

/// How a TOML value is shown in messages: `` `3` ``, "a table", "an array".
pub(super) fn describe(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(_) => "a table".to_string(),
        toml::Value::Array(_) => "an array".to_string(),
        other => format!("`{other}`"),
    }
}

/// The random draws' keys: `{ uniform = [a, b] }`, `{ choice = [a, ...] }`,
/// `{ exponential = mean }`.
const UNIFORM: &str = "uniform";
const CHOICE: &str = "choice";
const EXPONENTIAL: &str = "exponential";
/// Every key of a random draw, as [`numspec_from`] matches them.
#[cfg(test)]
pub(crate) const DRAW_FORMS: &[&str] = &[UNIFORM, CHOICE, EXPONENTIAL];

/// Which random forms a flow field allows.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Draws {
    UniformChoice,
    All,
}

/// A flow field's value from TOML: an expression, or a random draw that `draws` allows.
pub(super) fn numspec_from(
    value: &toml::Value,
    at: &str,
    draws: Draws,
) -> Result<NumSpec, FieldError> {
    let toml::Value::Table(t) = value else {
        return expr_from(value, at).map(NumSpec::Expr);
    };
    let allowed = match draws {
        Draws::UniformChoice => {
            "a number, a \"{var}\" expression, { uniform = [a, b] } or { choice = [a, ...] }"
        }
        Draws::All => {
            "a number, a \"{var}\" expression, { uniform = [a, b] }, { choice = [a, ...] } or \
             { exponential = mean }"
        }
    };
    let mut keys = t.keys();
    let (Some(key), None) = (keys.next(), keys.next()) else {
        return Err(FieldError::new(at, format!("expected {allowed}")));
    };
    let inner = &t[key];
    let at_k = format!("{at}.{key}");
    let list = |v: &toml::Value| -> Result<Vec<Expr>, FieldError> {
        let toml::Value::Array(a) = v else {
            return Err(FieldError::new(
                &at_k,
                format!("expected an array, found {}", describe(v)),
            ));
        };
        a.iter()
            .enumerate()
            .map(|(i, e)| expr_from(e, &format!("{at_k}[{i}]")))
            .collect()
    };
    match (key.as_str(), draws) {
        (UNIFORM, Draws::UniformChoice | Draws::All) => {
            let l = list(inner)?;
            if l.len() != 2 {
                return Err(FieldError::new(
                    at_k,
                    format!("expected [low, high], found {} values", l.len()),
                ));
            }
            let mut l = l.into_iter();
            Ok(NumSpec::Uniform(l.next().expect("2"), l.next().expect("2")))
        }
        (CHOICE, Draws::UniformChoice | Draws::All) => {
            let l = list(inner)?;
            if l.is_empty() {
                return Err(FieldError::new(at_k, "expected at least one value"));
            }
            Ok(NumSpec::Choice(l))
        }
        (EXPONENTIAL, Draws::All) => Ok(NumSpec::Exponential(expr_from(inner, &at_k)?)),
        (EXPONENTIAL, _) => Err(FieldError::new(
            at_k,
            format!("{{ exponential = mean }} is allowed only in on_s/off_s; here: {allowed}"),
        )),
        _ => Err(FieldError::new(
            at_k,
            format!("unknown form `{key}`; expected {allowed}"),
        )),
    }
}

/// The value of `e` with the variables of `env`; an undefined variable or a non-finite
/// result is an error at `at`.
pub(super) fn eval(e: &Expr, env: &Env, at: &str) -> Result<f64, FieldError> {
    let mut v = 1.0;
    for f in &e.factors {
        v *= match f {
            Factor::Num(n) => *n,
            Factor::Var(name) => match env.get(name) {
                Some(s) => s.value,
                None => {
                    let known: Vec<&str> = env.keys().map(String::as_str).collect();
                    return Err(FieldError::new(
                        at,
                        format!(
                            "\"{}\" names `{name}`, which is not defined; defined here: {}",
                            e.text,
                            known.join(", ")
                        ),
                    ));
                }
            },
        };
    }
    if !v.is_finite() {
        return Err(FieldError::new(
            at,
            format!("\"{}\" evaluates to {v}, not a finite number", e.text),
        ));
    }
    Ok(v)
}

/// Where the variables of `exprs` got their values: "; `rtt2_ms` = -82 from
/// profiles.ci.sweep.rtt2_ms[1]", or nothing.
pub(super) fn origins<'a>(exprs: impl IntoIterator<Item = &'a Expr>, env: &Env) -> String {
    let mut out = String::new();
    let mut seen = BTreeSet::new();
    for e in exprs {
        for f in &e.factors {
            if let Factor::Var(name) = f {
                if let (Some(s), true) = (env.get(name), seen.insert(name)) {
                    out += &format!("; `{name}` = {} from {}", s.value, s.field);
                }
            }
        }
    }
    out
}

/// The smallest and largest value `spec` can take (exponential: [0, ∞)).
pub(super) fn range(spec: &NumSpec, env: &Env, at: &str) -> Result<(f64, f64), FieldError> {
    Ok(match spec {
        NumSpec::Expr(e) => {
            let v = eval(e, env, at)?;
            (v, v)
        }
        NumSpec::Uniform(a, b) => {
            let (lo, hi) = (
                eval(a, env, &format!("{at}.uniform[0]"))?,
                eval(b, env, &format!("{at}.uniform[1]"))?,
            );
            if lo > hi {
                return Err(FieldError::new(
                    format!("{at}.uniform"),
                    format!("[{lo}, {hi}]: the low bound is above the high bound"),
                ));
            }
            (lo, hi)
        }
        NumSpec::Exponential(m) => {
            let mean = eval(m, env, &format!("{at}.exponential"))?;
            if mean.is_nan() || mean <= 0.0 {
                return Err(FieldError::new(
                    format!("{at}.exponential"),
                    format!("{mean}: the mean must be > 0"),
                ));
            }
            (f64::MIN_POSITIVE, f64::INFINITY)
        }
        NumSpec::Choice(l) => {
            let mut lo = f64::INFINITY;
            let mut hi = f64::NEG_INFINITY;
            for (i, e) in l.iter().enumerate() {
                let v = eval(e, env, &format!("{at}.choice[{i}]"))?;
                lo = lo.min(v);
                hi = hi.max(v);
            }
            (lo, hi)
        }
    })
}

/// Draws a value of `spec`; call only after [`range`] succeeded (variables are defined).
pub(super) fn draw(spec: &NumSpec, env: &Env, rng: &mut SplitMix64) -> f64 {
    let ev = |e: &Expr| eval(e, env, "").unwrap_or(f64::NAN);
    match spec {
        NumSpec::Expr(e) => ev(e),
        NumSpec::Uniform(a, b) => {
            let (lo, hi) = (ev(a), ev(b));
            lo + (hi - lo) * rng.unit()
        }
        NumSpec::Exponential(m) => -ev(m) * (1.0 - rng.unit()).ln(),
        NumSpec::Choice(l) => ev(&l[((rng.unit() * l.len() as f64) as usize).min(l.len() - 1)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, f64)]) -> Env {
        vars.iter()
            .map(|(k, v)| {
                let field = format!("defaults.{k}");
                (k.to_string(), Sourced { value: *v, field })
            })
            .collect()
    }

    #[test]
    fn a_product_of_numbers_and_variables_evaluates_against_the_point() {
        let e = parse_expr("{rtt_ms} * {rtt_ratio}*2", "flows[0].rtt_ms").unwrap();
        let v = eval(&e, &env(&[("rtt_ms", 25.0), ("rtt_ratio", 4.0)]), "at").unwrap();
        assert_eq!(v, 200.0);
        let e = eval(&e, &env(&[("rtt_ms", 25.0)]), "flows[0].rtt_ms").unwrap_err();
        assert_eq!(e.field, "flows[0].rtt_ms");
        assert!(e.message.contains("`rtt_ratio`"), "{e}");
        assert!(parse_expr("{algo}", "x")
            .unwrap_err()
            .message
            .contains("only in `cc`"));
        assert!(parse_expr("2+3", "x").is_err());
    }

    #[test]
    fn the_range_of_a_draw_bounds_every_value_drawn() {
        let e = env(&[("interval_s", 10.0)]);
        let spec = numspec_from(
            &toml::Value::try_from(toml::toml! { uniform = [5, "{interval_s}*2"] }).unwrap(),
            "flows[0].start_s",
            Draws::UniformChoice,
        )
        .unwrap();
        assert_eq!(range(&spec, &e, "at").unwrap(), (5.0, 20.0));
        let mut rng = SplitMix64::new(7);
        for _ in 0..100 {
            assert!((5.0..20.0).contains(&draw(&spec, &e, &mut rng)));
        }
    }
}
