//! The declarative configuration of `cctl apply` (`/etc/cctl/cctl.toml`): its schema,
//! parsing and validation. Everything that can be checked without the kernel is checked
//! here; what depends on the kernel's state (a name taken by someone else, a default that
//! is not registered) is checked when the plan is made ([`crate::apply::plan`]).
//!
//! # Schema
//!
//! ```toml
//! default = "bpf_htcp"            # optional: the default congestion control (of the
//!                                 #   network namespace cctl runs in); a name of this
//!                                 #   file or one the kernel has (`cubic`)
//!
//! [[algorithm]]                   # one per registered name
//! algo = "htcp"                   # algorithm key (`cctl list`)
//! name = "bpf_htcp"               # optional: default bpf_<algo> (bpf_<algo>_<tag> with a profile)
//! profile = "linux"               # optional: start from this parameter set
//! params = { beta_min_pct = 50 }  # optional: tunables over the profile's (or paper's) values
//!
//! [[policy]]                      # congestion control of new connections (`cctl policy`)
//! port = 5201                     # ONE of: port (1-65535) ...
//! # cgroup = "system.slice/backup.service"   # ... or a cgroup v2 directory
//! cc = "bpf_htcp"                 # a name of this file or one the kernel has
//! ```
//!
//! The file owns cctl's state: names cctl loaded that the file does not list are
//! unloaded, and policy rules it does not list are removed (see [`crate::apply`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::catalogue;
use crate::error::{Error, Result};

/// Where `cctl apply` reads its configuration when no file is given.
pub const DEFAULT_PATH: &str = "/etc/cctl/cctl.toml";

/// The keys allowed at the top of the file.
pub const TOP_KEYS: &[&str] = &["default", "algorithm", "policy"];
/// The keys allowed in an `[[algorithm]]` entry.
pub const ALGORITHM_KEYS: &[&str] = &["name", "algo", "profile", "params"];
/// The keys allowed in a `[[policy]]` entry.
pub const POLICY_KEYS: &[&str] = &["port", "cgroup", "cc"];

/// A validated configuration.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Config {
    /// The file it was read from (for messages).
    pub path: PathBuf,
    /// The default congestion control to set, if the file sets one.
    pub default: Option<String>,
    /// The names to have loaded, in file order.
    pub algorithms: Vec<DesiredCc>,
    /// The policy rules to have, in file order.
    pub policy: Vec<DesiredRule>,
}

/// One `[[algorithm]]`: a name to have registered, running an algorithm with parameters.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DesiredCc {
    /// Its index in the file (`algorithm[i]`), for messages.
    pub index: usize,
    /// Registered name (given, or the algorithm's default name for the profile).
    pub name: String,
    /// Algorithm key (`htcp`).
    pub algo: String,
    /// Profile the parameters start from, if any.
    pub profile: Option<String>,
    /// The tunables as the file gives them.
    pub given: BTreeMap<String, u32>,
    /// Every tunable of the algorithm with its value (profile, then `given`), resolved
    /// and checked exactly as `cctl load` does ([`catalogue::Algorithm::resolve_params_with`]).
    pub params: BTreeMap<String, u32>,
}

impl DesiredCc {
    /// `key=value` arguments of every tunable (as `cctl load --param` takes them).
    pub fn param_args(&self) -> Vec<String> {
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }
}

/// What a `[[policy]]` rule matches, as the file gives it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleTarget {
    /// A TCP port, 1-65535.
    Port(u16),
    /// A cgroup v2 directory, absolute or relative to the cgroup2 mount (resolved when
    /// the plan is made).
    Cgroup(PathBuf),
}

impl std::fmt::Display for RuleTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuleTarget::Port(p) => write!(f, "port {p}"),
            RuleTarget::Cgroup(c) => write!(f, "cgroup {}", c.display()),
        }
    }
}

/// One `[[policy]]` rule.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DesiredRule {
    /// Its index in the file (`policy[i]`), for messages.
    pub index: usize,
    /// What it matches.
    pub target: RuleTarget,
    /// The congestion control new matching connections get.
    pub cc: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    default: Option<String>,
    #[serde(default)]
    algorithm: Vec<toml::Value>,
    #[serde(default)]
    policy: Vec<toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAlgorithm {
    name: Option<String>,
    algo: String,
    profile: Option<String>,
    #[serde(default)]
    params: BTreeMap<String, toml::Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    port: Option<i64>,
    cgroup: Option<String>,
    cc: String,
}

/// A field and what is wrong with it, before the file is known.
#[derive(Debug)]
struct FieldError {
    field: String,
    message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}.{b}"),
    }
}

/// How a TOML value is called in messages.
fn describe(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => format!("the string \"{}\"", s.escape_debug()),
        toml::Value::Integer(i) => format!("the integer {i}"),
        toml::Value::Float(f) => format!("the float {f}"),
        toml::Value::Boolean(b) => format!("the boolean {b}"),
        toml::Value::Datetime(d) => format!("the date-time {d}"),
        toml::Value::Array(_) => "an array".into(),
        toml::Value::Table(_) => "a table".into(),
    }
}

/// Deserializes `value` (the field at `at`) as a `T`, naming the offending field: the
/// unknown key and the allowed ones, the missing key, or the field of the wrong type.
fn de_at<T: serde::de::DeserializeOwned>(
    value: toml::Value,
    at: &str,
    allowed: &[&str],
) -> std::result::Result<T, FieldError> {
    let table = match &value {
        toml::Value::Table(t) => t.clone(),
        other => {
            return Err(bad(
                at,
                format!(
                    "expected a table (keys: {}), found {}",
                    allowed.join(", "),
                    describe(other)
                ),
            ))
        }
    };
    if let Some(k) = table.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(
            join(at, &quote_key(k)),
            format!("unknown key; allowed keys: {}", allowed.join(", ")),
        ));
    }
    T::deserialize(value).map_err(|e| {
        let message = e.message().to_string();
        if let Some(rest) = message.strip_prefix("missing field `") {
            let name = rest.split('`').next().unwrap_or("");
            return bad(join(at, name), "missing: this key is required");
        }
        // Which key had the wrong type: serde names the expected type, the raw table
        // tells which key holds a value of another one.
        let wrong = allowed.iter().find_map(|k| {
            let v = table.get(*k)?;
            let want = expected_kind(k);
            (!want.is_empty() && !want.contains(&kind(v))).then_some((*k, v))
        });
        match wrong {
            Some((k, v)) => bad(
                join(at, k),
                format!("expected {}, found {}", expected_words(k), describe(v)),
            ),
            None => bad(at, message),
        }
    })
}

/// A key as it would be written in the file (quoted when it is not a bare key).
fn quote_key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        k.to_string()
    } else {
        format!("\"{}\"", k.escape_debug())
    }
}

fn kind(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "string",
        toml::Value::Integer(_) => "integer",
        toml::Value::Float(_) => "float",
        toml::Value::Boolean(_) => "boolean",
        toml::Value::Datetime(_) => "datetime",
        toml::Value::Array(_) => "array",
        toml::Value::Table(_) => "table",
    }
}

/// What each key of the schema takes, in words (`"an integer (a TCP port, 1-65535)"`);
/// cctl.toml(5) shows them too.
pub fn expected_words(key: &str) -> &'static str {
    match key {
        "algorithm" => "an array of tables ([[algorithm]] entries)",
        "policy" => "an array of tables ([[policy]] entries)",
        "params" => "a table of integers (params = { key = 1 })",
        "port" => "an integer (a TCP port, 1-65535)",
        _ => "a string",
    }
}

/// The TOML kinds each key of the schema takes.
fn expected_kind(key: &str) -> &'static [&'static str] {
    match key {
        "default" | "name" | "algo" | "profile" | "cgroup" | "cc" => &["string"],
        "algorithm" | "policy" => &["array"],
        "params" => &["table"],
        "port" => &["integer"],
        _ => &[],
    }
}

/// Line and column of a TOML syntax error, and what the parser said.
fn syntax_message(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let start = span.start.min(text.len());
            let before = text.get(..start).unwrap_or("");
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {col}: {}", e.message().trim_end())
        }
        None => e.message().trim_end().to_string(),
    }
}

fn cc_name(name: &str, field: &str) -> std::result::Result<(), FieldError> {
    catalogue::validate_cc_name(name).map_err(|e| match e {
        Error::InvalidName { name, reason } => bad(
            field,
            format!("'{name}' is not a valid congestion-control name: {reason} (allowed: 1-15 characters of [A-Za-z0-9_])"),
        ),
        other => bad(field, other.to_string()),
    })
}

/// One `[[algorithm]]`, and whether it gave its `name` (else it is the default name).
fn parse_algorithm(
    value: toml::Value,
    index: usize,
) -> std::result::Result<(DesiredCc, bool), FieldError> {
    let at = format!("algorithm[{index}]");
    let f = |k: &str| format!("{at}.{k}");
    let raw: RawAlgorithm = de_at(value, &at, ALGORITHM_KEYS)?;
    let algorithm = catalogue::find(&raw.algo).map_err(|_| {
        bad(
            f("algo"),
            format!(
                "unknown algorithm '{}'; allowed: {}",
                raw.algo,
                catalogue::ALGORITHMS
                    .iter()
                    .map(|a| a.key)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    })?;
    if let Some(p) = &raw.profile {
        algorithm.profile(p).map_err(|e| match e {
            Error::BadParamCombination { reason, .. } => bad(f("profile"), reason),
            other => bad(f("profile"), other.to_string()),
        })?;
    }
    let named = raw.name.is_some();
    let name = match raw.name {
        Some(n) => n,
        None => algorithm
            .default_name(raw.profile.as_deref())
            .map_err(|e| bad(f("profile"), e.to_string()))?,
    };
    cc_name(&name, &f("name"))?;
    let keys = algorithm
        .params
        .iter()
        .map(|p| p.key)
        .collect::<Vec<_>>()
        .join(", ");
    let keys = if keys.is_empty() {
        format!("{} has no parameters", algorithm.key)
    } else {
        format!("parameters of {}: {keys}", algorithm.key)
    };
    let mut given = BTreeMap::new();
    let mut args = Vec::new();
    for (k, v) in &raw.params {
        let field = format!("{}.{}", f("params"), quote_key(k));
        let Some(spec) = algorithm.params.iter().find(|p| p.key == k.as_str()) else {
            return Err(bad(field, format!("unknown parameter; {keys}")));
        };
        let expected = format!("an integer in [{}, {}] {}", spec.min, spec.max, spec.unit);
        let value = match v {
            toml::Value::Integer(i) if (0..=i64::from(u32::MAX)).contains(i) => *i as u32,
            toml::Value::Integer(i) => {
                return Err(bad(
                    field,
                    format!("{i} is out of range; expected {expected}"),
                ))
            }
            other => {
                return Err(bad(
                    field,
                    format!("found {}; expected {expected}", describe(other)),
                ))
            }
        };
        given.insert(k.clone(), value);
        args.push(format!("{k}={value}"));
    }
    // The same resolution as `cctl load`: ranges, then forbidden combinations.
    let params = algorithm
        .resolve_params_with(raw.profile.as_deref(), &args)
        .map_err(|e| match e {
            Error::BadParamValue {
                key,
                reason,
                expected,
                ..
            } => bad(
                format!("{}.{key}", f("params")),
                format!("{reason}; expected {expected}"),
            ),
            Error::UnknownParam { key, .. } => bad(
                format!("{}.{key}", f("params")),
                format!("unknown parameter; {keys}"),
            ),
            Error::BadParamCombination { reason, .. } => bad(f("params"), reason),
            other => bad(f("params"), other.to_string()),
        })?;
    let cc = DesiredCc {
        index,
        name,
        algo: algorithm.key.to_string(),
        profile: raw.profile,
        given,
        params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    };
    Ok((cc, named))
}

fn parse_rule(value: toml::Value, index: usize) -> std::result::Result<DesiredRule, FieldError> {
    let at = format!("policy[{index}]");
    let f = |k: &str| format!("{at}.{k}");
    let raw: RawRule = de_at(value, &at, POLICY_KEYS)?;
    let target = match (raw.port, raw.cgroup) {
        (Some(_), Some(_)) => {
            return Err(bad(
                at,
                "give one of `port` or `cgroup`, not both (one rule each)",
            ))
        }
        (None, None) => {
            return Err(bad(
                at,
                "give one of `port` (1-65535) or `cgroup` (a cgroup v2 directory)",
            ))
        }
        (Some(p), None) => match u16::try_from(p) {
            Ok(p) if p >= 1 => RuleTarget::Port(p),
            _ => {
                return Err(bad(
                    f("port"),
                    format!("{p} is out of range; allowed: 1-65535"),
                ))
            }
        },
        (None, Some(c)) => {
            if c.trim().is_empty() || c.contains('\0') {
                return Err(bad(
                    f("cgroup"),
                    "expected a cgroup v2 directory, absolute or relative to the cgroup2 mount \
                     (e.g. \"system.slice/backup.service\")",
                ));
            }
            RuleTarget::Cgroup(PathBuf::from(c))
        }
    };
    cc_name(&raw.cc, &f("cc"))?;
    Ok(DesiredRule {
        index,
        target,
        cc: raw.cc,
    })
}

fn from_table(table: toml::Table, path: &Path) -> std::result::Result<Config, FieldError> {
    let raw: RawConfig = de_at(toml::Value::Table(table), "", TOP_KEYS)?;
    if let Some(d) = &raw.default {
        cc_name(d, "default")?;
    }
    let mut algorithms: Vec<DesiredCc> = Vec::new();
    for (i, v) in raw.algorithm.into_iter().enumerate() {
        let (a, named) = parse_algorithm(v, i)?;
        if let Some(first) = algorithms.iter().find(|o| o.name == a.name) {
            let (field, what) = if named {
                (format!("algorithm[{i}].name"), format!("'{}'", a.name))
            } else {
                (
                    format!("algorithm[{i}].algo"),
                    format!("its default name '{}'", a.name),
                )
            };
            return Err(bad(
                field,
                format!(
                    "{what} is also the name of algorithm[{}]; each name is registered once \
                     (give `name` to load one algorithm twice)",
                    first.index
                ),
            ));
        }
        algorithms.push(a);
    }
    let mut policy: Vec<DesiredRule> = Vec::new();
    for (i, v) in raw.policy.into_iter().enumerate() {
        let r = parse_rule(v, i)?;
        if let Some(first) = policy.iter().find(|o| o.target == r.target) {
            let key = match r.target {
                RuleTarget::Port(_) => "port",
                RuleTarget::Cgroup(_) => "cgroup",
            };
            return Err(bad(
                format!("policy[{i}].{key}"),
                format!(
                    "{} already has a rule (policy[{}]); one rule per port or cgroup",
                    r.target, first.index
                ),
            ));
        }
        policy.push(r);
    }
    Ok(Config {
        path: path.to_path_buf(),
        default: raw.default,
        algorithms,
        policy,
    })
}

impl Config {
    /// Parses and validates configuration `text`; `path` names the file in errors.
    /// Checks everything that does not depend on the kernel's state: keys, types,
    /// algorithm keys, profiles, names, parameter ranges and combinations (as `load`
    /// does), duplicate names and rules.
    ///
    /// Errors: [`Error::ConfigSyntax`] (line and column) for text that is not TOML,
    /// [`Error::BadConfig`] naming the field (`algorithm[1].params.beta_min_pct`) and
    /// what is allowed.
    pub fn parse(text: &str, path: &Path) -> Result<Config> {
        let table: toml::Table = toml::from_str(text).map_err(|e| Error::ConfigSyntax {
            path: path.to_path_buf(),
            message: syntax_message(text, &e),
        })?;
        from_table(table, path).map_err(|e| Error::BadConfig {
            path: path.to_path_buf(),
            field: e.field,
            message: e.message,
        })
    }

    /// Reads, checks and parses the configuration file at `path`: the file must be
    /// trusted ([`crate::security::check_trusted_file`]) before it is read.
    ///
    /// Errors: [`Error::Untrusted`], [`Error::Io`] (missing, unreadable), and those of
    /// [`Config::parse`].
    pub fn load(path: &Path) -> Result<Config> {
        crate::security::check_trusted_file(path, "the configuration file")?;
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io("reading the configuration file", path, e))?;
        Config::parse(&text, path)
    }

    /// The `[[algorithm]]` registered as `name`, if any.
    pub fn algorithm(&self, name: &str) -> Option<&DesiredCc> {
        self.algorithms.iter().find(|a| a.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
default = "bpf_htcp"

[[algorithm]]
algo = "htcp"
params = { beta_min_pct = 60 }

[[algorithm]]
name = "cubic_lx"
algo = "cubic"
profile = "linux"

[[policy]]
port = 5201
cc = "bpf_htcp"

[[policy]]
cgroup = "system.slice/backup.service"
cc = "reno"
"#;

    fn parse(text: &str) -> Result<Config> {
        Config::parse(text, Path::new("/etc/cctl/cctl.toml"))
    }

    /// Parses `GOOD` with `from` replaced by `to`; expects an error about `field`
    /// whose message contains each of `hints`.
    fn rejects(from: &str, to: &str, field: &str, hints: &[&str]) {
        assert!(GOOD.contains(from), "{from}");
        let text = GOOD.replacen(from, to, 1);
        match parse(&text) {
            Err(Error::BadConfig {
                field: f, message, ..
            }) => {
                assert_eq!(f, field, "{to}: {message}");
                for h in hints {
                    assert!(message.contains(h), "{to}: '{message}' lacks '{h}'");
                }
            }
            other => panic!("{to}: expected an error about {field}, got {other:?}"),
        }
    }

    #[test]
    fn a_good_file_gives_names_resolved_params_and_rules() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.default.as_deref(), Some("bpf_htcp"));
        let htcp = c.algorithm("bpf_htcp").unwrap();
        assert_eq!(htcp.algo, "htcp");
        assert_eq!(htcp.params["beta_min_pct"], 60);
        assert_eq!(
            htcp.params["beta_max_pct"], 80,
            "the paper's default fills in"
        );
        assert_eq!(htcp.given.len(), 1);
        let cubic = c.algorithm("cubic_lx").unwrap();
        assert_eq!(cubic.profile.as_deref(), Some("linux"));
        let linux = catalogue::find("cubic")
            .unwrap()
            .resolve_params_with(Some("linux"), &[])
            .unwrap();
        assert_eq!(cubic.params.len(), linux.len());
        assert!(linux.iter().all(|(k, v)| cubic.params[*k] == *v));
        assert_eq!(c.policy[0].target, RuleTarget::Port(5201));
        assert_eq!(
            c.policy[1].target,
            RuleTarget::Cgroup("system.slice/backup.service".into())
        );
    }

    #[test]
    fn an_empty_file_is_a_valid_configuration_of_nothing() {
        let c = parse("").unwrap();
        assert!(c.default.is_none() && c.algorithms.is_empty() && c.policy.is_empty());
    }

    #[test]
    fn a_profile_without_name_registers_under_the_profiles_default_name() {
        let c = parse("[[algorithm]]\nalgo = \"cubic\"\nprofile = \"linux\"\n").unwrap();
        let want = catalogue::find("cubic")
            .unwrap()
            .default_name(Some("linux"))
            .unwrap();
        assert_eq!(c.algorithms[0].name, want);
    }

    #[test]
    fn unknown_keys_are_named_with_the_allowed_ones() {
        rejects(
            "default =",
            "defualt =",
            "defualt",
            &["unknown key", "default, algorithm, policy"],
        );
        rejects(
            "algo = \"htcp\"",
            "algo = \"htcp\"\nparam = 1",
            "algorithm[0].param",
            &["name, algo, profile, params"],
        );
        rejects(
            "port = 5201",
            "port = 5201\nprot = 1",
            "policy[0].prot",
            &["port, cgroup, cc"],
        );
    }

    #[test]
    fn missing_and_mistyped_fields_are_named() {
        rejects("algo = \"htcp\"", "", "algorithm[0].algo", &["required"]);
        rejects("cc = \"bpf_htcp\"", "", "policy[0].cc", &["required"]);
        rejects(
            "default = \"bpf_htcp\"",
            "default = 3",
            "default",
            &["string"],
        );
        rejects(
            "algo = \"htcp\"",
            "algo = [\"htcp\"]",
            "algorithm[0].algo",
            &["string"],
        );
        rejects(
            "name = \"cubic_lx\"",
            "name = 7",
            "algorithm[1].name",
            &["string"],
        );
        rejects(
            "params = { beta_min_pct = 60 }",
            "params = 60",
            "algorithm[0].params",
            &["a table of integers", "the integer 60"],
        );
        rejects(
            "port = 5201",
            "port = \"5201\"",
            "policy[0].port",
            &["integer"],
        );
        match parse("[policy]\nport = 1\ncc = \"reno\"\n") {
            Err(Error::BadConfig { field, message, .. }) => {
                assert_eq!(field, "policy");
                assert!(
                    message.contains("array of tables") && message.contains("found a table"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_algorithms_profiles_and_bad_names_say_what_is_allowed() {
        rejects(
            "algo = \"htcp\"",
            "algo = \"htcp2\"",
            "algorithm[0].algo",
            &["unknown algorithm 'htcp2'", "reno", "cubic"],
        );
        rejects(
            "profile = \"linux\"",
            "profile = \"bsd\"",
            "algorithm[1].profile",
            &["no profile 'bsd'", "linux"],
        );
        rejects(
            "name = \"cubic_lx\"",
            "name = \"cubic-lx\"",
            "algorithm[1].name",
            &["'-'", "[A-Za-z0-9_]"],
        );
        rejects(
            "name = \"cubic_lx\"",
            "name = \"a_name_that_is_too_long\"",
            "algorithm[1].name",
            &["15"],
        );
        rejects(
            "default = \"bpf_htcp\"",
            "default = \"\"",
            "default",
            &["empty"],
        );
        rejects(
            "cc = \"reno\"",
            "cc = \"re no\"",
            "policy[1].cc",
            &["[A-Za-z0-9_]"],
        );
    }

    #[test]
    fn params_are_checked_as_load_checks_them() {
        let p = "params = { beta_min_pct = 60 }";
        rejects(
            p,
            "params = { beta_min = 60 }",
            "algorithm[0].params.beta_min",
            &["unknown parameter", "beta_min_pct", "delta_l_ms"],
        );
        rejects(
            p,
            "params = { beta_min_pct = 101 }",
            "algorithm[0].params.beta_min_pct",
            &["out of range", "[", "%"],
        );
        rejects(
            p,
            "params = { beta_min_pct = -1 }",
            "algorithm[0].params.beta_min_pct",
            &["out of range"],
        );
        rejects(
            p,
            "params = { beta_min_pct = 99999999999 }",
            "algorithm[0].params.beta_min_pct",
            &["out of range"],
        );
        rejects(
            p,
            "params = { beta_min_pct = \"60\" }",
            "algorithm[0].params.beta_min_pct",
            &["string", "an integer in"],
        );
        rejects(
            p,
            "params = { beta_min_pct = 6.0 }",
            "algorithm[0].params.beta_min_pct",
            &["float"],
        );
        rejects(
            p,
            "params = { beta_min_pct = 90, beta_max_pct = 60 }",
            "algorithm[0].params",
            &["must not exceed"],
        );
        rejects(
            p,
            "params = { \"a b\" = 1 }",
            "algorithm[0].params.\"a b\"",
            &["unknown parameter"],
        );
    }

    #[test]
    fn duplicate_names_and_rules_are_refused() {
        rejects(
            "name = \"cubic_lx\"",
            "name = \"bpf_htcp\"",
            "algorithm[1].name",
            &["also the name of algorithm[0]"],
        );
        rejects(
            "cgroup = \"system.slice/backup.service\"",
            "port = 5201",
            "policy[1].port",
            &["port 5201 already has a rule (policy[0])"],
        );
    }

    #[test]
    fn rules_need_exactly_one_target_in_range() {
        rejects("port = 5201", "port = 0", "policy[0].port", &["1-65535"]);
        rejects(
            "port = 5201",
            "port = 65536",
            "policy[0].port",
            &["1-65535"],
        );
        rejects(
            "port = 5201",
            "port = 5201\ncgroup = \"x\"",
            "policy[0]",
            &["not both"],
        );
        rejects("port = 5201", "", "policy[0]", &["one of `port`"]);
        rejects(
            "cgroup = \"system.slice/backup.service\"",
            "cgroup = \" \"",
            "policy[1].cgroup",
            &["cgroup v2 directory"],
        );
    }

    #[test]
    fn syntax_errors_give_line_and_column() {
        let e = parse("default = \"bpf_htcp\"\n[[algorithm]\n").unwrap_err();
        let Error::ConfigSyntax { message, .. } = &e else {
            panic!("{e:?}");
        };
        assert!(message.starts_with("line 2, column"), "{message}");
        assert!(
            e.to_string().starts_with("/etc/cctl/cctl.toml: line 2"),
            "{e}"
        );
    }

    #[test]
    fn load_refuses_an_untrusted_file_before_reading_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cctl-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let f = dir.join("cctl.toml");
        std::fs::write(&f, GOOD).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(Config::load(&f).unwrap().algorithms.len(), 2);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = Config::load(&f).unwrap_err();
        assert!(matches!(e, Error::Untrusted { .. }), "{e:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[cfg(test)]
mod fuzz;
