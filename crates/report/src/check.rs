//! Regression gating (`cctl bench check`): compares a results `summary.json` with a
//! baseline one, metric by metric, against TOML tolerances.
//!
//! **Rows** are matched by algorithm and point: the point's index and its parameters (the
//! swept `vars`, `buffer_pkts`, `rate_mbit`, `loss`, and any other scalar field a row
//! carries besides `algo`, `point` and `n`; a parameter present in only one file is not
//! compared, so summaries written by an older cctl still match). A baseline row whose
//! (algorithm, index) is absent from the results is a *missing point*; one present with
//! other parameters is a *changed point*; a baseline metric absent from the matched
//! results row is a *missing metric*. All three fail the check. Rows and metrics only
//! the results have are reported as extras and do not fail it.
//!
//! **The rule.** Each metric's mean over repetitions is compared: with `base` the
//! baseline's mean, `new` the results' and the metric's tolerance `{ rel, abs }`, the metric
//! is within when
//!
//! ```text
//! |new − base| ≤ max(abs, rel · |base|)
//! ```
//!
//! in the metric's own unit (the one in its name: Mbit/s, ms, s, packets, or none for
//! ratios). A mean that is `null` in summary.json (no repetition had a value, e.g. M5 "not
//! converged") is within only when it is `null` on both sides.
//!
//! **Tolerance file** (TOML), keyed by the metric's name exactly as in summary.json:
//!
//! ```toml
//! default = { rel = 0.1 }                        # every metric not named below
//! "M8 utilisation (wire)" = { rel = 0.05 }
//! "M1 flow1 (Mbit/s)" = { rel = 0.1, abs = 0.5 }
//! ```
//!
//! An entry takes `rel` (a fraction of |base|) and/or `abs` (in the metric's unit); the one
//! left out is 0, and an entry must give at least one. Without a file, or without
//! `default`, metrics not named get [`Bound::BUILTIN_DEFAULT`] (rel 0.1, abs 0). Unknown
//! keys, negative or non-finite values, and entries that are not tables are errors naming
//! the key; an entry naming a metric that neither summary has is a warning in the verdict
//! (one tolerance file may serve several scenarios, whose metric sets differ).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

/// Why a summary or tolerance file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The file cannot be read (or does not exist).
    #[error("{}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// A directory given where a summary is expected holds no `summary.json`.
    #[error("{}: no summary.json in this directory (give a results directory written by `cctl bench run` or `cctl bench report`, or a summary.json)", path.display())]
    NoSummary {
        /// The directory.
        path: PathBuf,
    },
    /// `summary.json` is not valid JSON or not a summary.
    #[error("{}: not a valid summary.json: {at}{message}", path.display())]
    Summary {
        /// The file.
        path: PathBuf,
        /// Where in the file (`rows[2].metrics."M4 Jain".mean: `), or empty.
        at: String,
        /// What is wrong.
        message: String,
    },
    /// The results and the baseline were timed by different clocks (virtual, real).
    #[error(
        "{} and {} were timed by different clocks (metadata.clock.clock: {results:?} vs \
         {baseline:?}): a check compares runs of one clock; run the results with --clock \
         {baseline} to compare them with this baseline",
        .results_path.display(),
        .baseline_path.display()
    )]
    ClockMismatch {
        /// The results' summary.
        results_path: PathBuf,
        /// Their clock.
        results: String,
        /// The baseline's summary.
        baseline_path: PathBuf,
        /// Its clock.
        baseline: String,
    },
    /// The tolerance file is not valid TOML.
    #[error("{}: not valid TOML: {message}", path.display())]
    TomlSyntax {
        /// The file.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A tolerance entry is invalid.
    #[error("{}: {key}: {message}", path.display())]
    Tolerance {
        /// The file.
        path: PathBuf,
        /// The key, as `"metric name".rel`.
        key: String,
        /// What is wrong.
        message: String,
    },
}

impl CheckError {
    /// Whether the error is in what the user gave (a missing or invalid file) rather than
    /// a failure to read an existing one. `cctl` decides [`CheckError::Read`] itself, as
    /// for every path named on its command line (a directory where the file belongs is
    /// bad input too: `cli/src/exit.rs`, `bad_path`).
    pub fn is_bad_input(&self) -> bool {
        match self {
            CheckError::Read { error, .. } => error.kind() == std::io::ErrorKind::NotFound,
            _ => true,
        }
    }
}

/// How far a metric may move from the baseline: `|new − base| ≤ max(abs, rel · |base|)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bound {
    /// Relative tolerance, a fraction of |baseline| (0.1 = 10 %).
    pub rel: f64,
    /// Absolute tolerance, in the metric's unit.
    pub abs: f64,
}

impl Bound {
    /// The bound of metrics the tolerance file does not name, when it has no `default`
    /// (or there is no file): 10 % of the baseline, nothing absolute — so a metric whose
    /// baseline is 0 must stay 0.
    pub const BUILTIN_DEFAULT: Bound = Bound { rel: 0.1, abs: 0.0 };

    /// The largest allowed |new − base| for a baseline value, in the metric's unit.
    pub fn allowed(&self, base: f64) -> f64 {
        self.abs.max(self.rel * base.abs())
    }

    /// Whether `new` is within the bound of `base`.
    /// Up to floating-point rounding (1e-12 of the larger magnitude), so that a delta of
    /// exactly `abs` is within.
    pub fn within(&self, base: f64, new: f64) -> bool {
        let rounding = 1e-12 * base.abs().max(new.abs());
        (new - base).abs() <= self.allowed(base) + rounding
    }
}

/// Tolerances by metric name, with a default for the others.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tolerances {
    /// Bound of metrics not named.
    pub default: Bound,
    /// Bounds by metric name, as in summary.json.
    pub metrics: BTreeMap<String, Bound>,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances {
            default: Bound::BUILTIN_DEFAULT,
            metrics: BTreeMap::new(),
        }
    }
}

impl Tolerances {
    /// Every metric equal (rel 0, abs 0): the default of a check between exact runs
    /// ([`SummaryFile::exact_with`]).
    pub fn exact() -> Tolerances {
        Tolerances {
            default: Bound { rel: 0.0, abs: 0.0 },
            metrics: BTreeMap::new(),
        }
    }

    /// Whether these are [`Tolerances::exact`].
    pub fn is_exact(&self) -> bool {
        self.metrics.is_empty() && self.default.rel == 0.0 && self.default.abs == 0.0
    }

    /// Reads a tolerance file.
    pub fn load(path: &Path) -> Result<Self, CheckError> {
        let text = std::fs::read_to_string(path).map_err(|error| CheckError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Self::parse(&text, path)
    }

    /// Parses a tolerance file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, CheckError> {
        let table: toml::Table =
            text.parse()
                .map_err(|e: toml::de::Error| CheckError::TomlSyntax {
                    path: path.to_path_buf(),
                    message: e.to_string().trim_end().to_string(),
                })?;
        let mut t = Tolerances::default();
        for (name, value) in &table {
            let bound = parse_bound(name, value, path)?;
            if name == "default" {
                t.default = bound;
            } else {
                t.metrics.insert(name.clone(), bound);
            }
        }
        Ok(t)
    }

    /// The bound of one metric.
    pub fn bound(&self, metric: &str) -> Bound {
        self.metrics.get(metric).copied().unwrap_or(self.default)
    }
}

/// A TOML key as written in a tolerance file: bare when it can be, quoted otherwise.
fn toml_key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_string()
    } else {
        format!("{k:?}")
    }
}

fn parse_bound(name: &str, value: &toml::Value, path: &Path) -> Result<Bound, CheckError> {
    let err = |key: String, message: String| CheckError::Tolerance {
        path: path.to_path_buf(),
        key,
        message,
    };
    let toml::Value::Table(entry) = value else {
        return Err(err(
            toml_key(name),
            format!(
                "expected a table such as {{ rel = 0.1, abs = 0.5 }}, found {}",
                value.type_str()
            ),
        ));
    };
    let mut bound = Bound { rel: 0.0, abs: 0.0 };
    let mut any = false;
    for (k, v) in entry {
        let key = format!("{}.{}", toml_key(name), toml_key(k));
        let slot = match k.as_str() {
            "rel" => &mut bound.rel,
            "abs" => &mut bound.abs,
            _ => {
                return Err(err(
                    key,
                    "unknown key; allowed: rel (a fraction of |baseline|), abs (in the \
                     metric's unit)"
                        .into(),
                ))
            }
        };
        let x = match v {
            toml::Value::Float(f) => *f,
            toml::Value::Integer(i) => *i as f64,
            other => {
                return Err(err(
                    key,
                    format!("expected a number, found {}", other.type_str()),
                ))
            }
        };
        if !x.is_finite() || x < 0.0 {
            return Err(err(
                key,
                format!("{x} is not allowed; give a finite number >= 0"),
            ));
        }
        *slot = x;
        any = true;
    }
    if !any {
        return Err(err(
            toml_key(name),
            "empty; give rel (a fraction of |baseline|) and/or abs (in the metric's unit)".into(),
        ));
    }
    Ok(bound)
}

/// Which point of the scenario a summary row is: its index and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointId {
    /// Algorithm under test.
    pub algo: String,
    /// Point index (as `cctl bench run --dry-run` lists them).
    pub point: u64,
    /// Parameters: `vars.<name>`, `buffer_pkts`, `rate_mbit`, `loss`, ...
    pub params: BTreeMap<String, Value>,
}

impl PointId {
    /// `reno point 1 (buffer_pkts=33 loss=0 rate_mbit=20)`.
    pub fn label(&self) -> String {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| format!("{}={v}", k.strip_prefix("vars.").unwrap_or(k)))
            .collect();
        if params.is_empty() {
            format!("{} point {}", self.algo, self.point)
        } else {
            format!("{} point {} ({})", self.algo, self.point, params.join(" "))
        }
    }

    /// The parameters both rows have that differ, as `name: base → new`.
    fn differences(&self, other: &PointId) -> Vec<String> {
        self.params
            .iter()
            .filter_map(|(k, a)| {
                let b = other.params.get(k)?;
                (!same_value(a, b)).then(|| format!("{k}: {a} → {b}"))
            })
            .collect()
    }
}

/// JSON values equal, numbers up to rounding (relative 1e-9).
fn same_value(a: &Value, b: &Value) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-9 * x.abs().max(y.abs()),
        _ => a == b,
    }
}

/// One row of a summary: a point with one algorithm, and its metrics' means.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Which point.
    pub id: PointId,
    /// Metric name → mean over repetitions (`None`: no repetition had a value).
    pub means: BTreeMap<String, Option<f64>>,
}

/// What `cctl bench check` reads of a summary.json.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryFile {
    /// The file.
    pub path: PathBuf,
    /// `metadata.scenario`, if there.
    pub scenario: Option<String>,
    /// `metadata.profile`, if there.
    pub profile: Option<String>,
    /// `metadata.clock.clock` (`virtual` or `real`); `real` in a summary that predates it.
    pub clock: String,
    /// `metadata.clock.qemu`, if there.
    pub qemu: Option<String>,
    /// `metadata.build` (the cctl binary's digest), if there.
    pub build: Option<String>,
    /// `metadata.kernel`, if there.
    pub kernel: Option<String>,
    /// Each run's result digest (`runs[].digest`) by (algorithm, point, repetition).
    pub digests: BTreeMap<(String, u64, u64), String>,
    /// The rows.
    pub rows: Vec<Row>,
}

impl SummaryFile {
    /// Whether `self` and `baseline` are virtual-clock runs of the same cctl build, QEMU and
    /// guest kernel, whose runs carry digests: then the same request and seed give the same
    /// runs, and `cctl bench check` compares digests first and defaults to tolerance 0.
    pub fn exact_with(&self, baseline: &SummaryFile) -> bool {
        let same = |a: &Option<String>, b: &Option<String>| a.is_some() && a == b;
        self.clock == "virtual"
            && baseline.clock == "virtual"
            && same(&self.build, &baseline.build)
            && same(&self.qemu, &baseline.qemu)
            && same(&self.kernel, &baseline.kernel)
            && !baseline.digests.is_empty()
    }
}

/// The digest part of a check of exact runs ([`SummaryFile::exact_with`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DigestCheck {
    /// Baseline runs whose digest the results' run of the same algorithm, point and
    /// repetition has too.
    pub identical: usize,
    /// Baseline runs whose digest differs (or that the results lack), as
    /// `algo point rep: baseline digest vs result digest`.
    pub different: Vec<String>,
}

/// Compares the run digests of `results` with `baseline`'s.
pub fn digests(results: &SummaryFile, baseline: &SummaryFile) -> DigestCheck {
    let mut c = DigestCheck {
        identical: 0,
        different: Vec::new(),
    };
    for ((algo, point, rep), d) in &baseline.digests {
        match results.digests.get(&(algo.clone(), *point, *rep)) {
            Some(r) if r == d => c.identical += 1,
            r => c.different.push(format!(
                "{algo} point {point} rep {rep}: {d} vs {}",
                r.map_or("(no such run)", String::as_str)
            )),
        }
    }
    c
}

/// The summary.json a path names: the file itself, or the one in a results directory.
pub fn summary_path(path: &Path) -> Result<PathBuf, CheckError> {
    if path.is_dir() {
        let p = path.join("summary.json");
        if !p.exists() {
            return Err(CheckError::NoSummary {
                path: path.to_path_buf(),
            });
        }
        Ok(p)
    } else {
        Ok(path.to_path_buf())
    }
}

impl SummaryFile {
    /// Reads a summary.json, or the one in a results directory.
    pub fn load(path: &Path) -> Result<Self, CheckError> {
        let path = summary_path(path)?;
        let text = std::fs::read_to_string(&path).map_err(|error| CheckError::Read {
            path: path.clone(),
            error,
        })?;
        Self::parse(&text, &path)
    }

    /// Parses the text of a summary.json; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, CheckError> {
        let bad = |at: String, message: String| CheckError::Summary {
            path: path.to_path_buf(),
            at: if at.is_empty() { at } else { format!("{at}: ") },
            message,
        };
        let v: Value = serde_json::from_str(text).map_err(|e| bad(String::new(), e.to_string()))?;
        let top = v.as_object().ok_or_else(|| {
            bad(
                String::new(),
                format!("expected an object, found {}", kind(&v)),
            )
        })?;
        let meta = top.get("metadata").and_then(Value::as_object);
        let meta_str = |k: &str| {
            meta.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let rows = top
            .get("rows")
            .ok_or_else(|| bad(String::new(), "no `rows`".into()))?;
        let rows = rows.as_array().ok_or_else(|| {
            bad(
                "rows".into(),
                format!("expected an array, found {}", kind(rows)),
            )
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let at = format!("rows[{i}]");
            let obj = row.as_object().ok_or_else(|| {
                bad(
                    at.clone(),
                    format!("expected an object, found {}", kind(row)),
                )
            })?;
            let algo = match obj.get("algo") {
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(bad(
                        format!("{at}.algo"),
                        format!("expected a string, found {}", kind(other)),
                    ))
                }
                None => return Err(bad(at, "no `algo`".into())),
            };
            let point = match obj.get("point") {
                Some(p) => p.as_u64().ok_or_else(|| {
                    bad(
                        format!("{at}.point"),
                        format!("expected a point index (integer >= 0), found {p}"),
                    )
                })?,
                None => return Err(bad(at, "no `point`".into())),
            };
            let mut params = BTreeMap::new();
            for (k, v) in obj {
                match (k.as_str(), v) {
                    ("algo" | "point" | "n", _) => {}
                    (_, Value::Number(_) | Value::String(_) | Value::Bool(_)) => {
                        params.insert(k.clone(), v.clone());
                    }
                    _ => {}
                }
            }
            // Swept values; one that repeats a row field (`rate_mbit`) is said once.
            if let Some(Value::Object(vars)) = obj.get("vars") {
                for (name, x) in vars {
                    if !params.get(name).is_some_and(|y| same_value(x, y)) {
                        params.insert(format!("vars.{name}"), x.clone());
                    }
                }
            }
            let metrics = match obj.get("metrics") {
                Some(Value::Object(m)) => m,
                Some(other) => {
                    return Err(bad(
                        format!("{at}.metrics"),
                        format!("expected an object, found {}", kind(other)),
                    ))
                }
                None => return Err(bad(at, "no `metrics`".into())),
            };
            let mut means = BTreeMap::new();
            for (name, agg) in metrics {
                let at = format!("{at}.metrics.{name:?}");
                let mean = match agg.get("mean") {
                    Some(Value::Null) => None,
                    Some(Value::Number(n)) => n.as_f64(),
                    Some(other) => {
                        return Err(bad(
                            format!("{at}.mean"),
                            format!("expected a number or null, found {}", kind(other)),
                        ))
                    }
                    None => return Err(bad(at, "no `mean`".into())),
                };
                means.insert(name.clone(), mean);
            }
            out.push(Row {
                id: PointId {
                    algo,
                    point,
                    params,
                },
                means,
            });
        }
        let mut digests = BTreeMap::new();
        for r in top
            .get("runs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let (Some(algo), Some(point), Some(rep), Some(d)) = (
                r.get("algo").and_then(Value::as_str),
                r.get("point").and_then(Value::as_u64),
                r.get("rep").and_then(Value::as_u64),
                r.get("digest").and_then(Value::as_str),
            ) else {
                continue;
            };
            digests.insert((algo.to_string(), point, rep), d.to_string());
        }
        Ok(SummaryFile {
            path: path.to_path_buf(),
            scenario: meta_str("scenario"),
            profile: meta_str("profile"),
            qemu: meta
                .and_then(|m| m.get("clock"))
                .and_then(|c| c.get("qemu"))
                .and_then(Value::as_str)
                .map(str::to_string),
            build: meta_str("build"),
            kernel: meta_str("kernel"),
            digests,
            clock: meta
                .and_then(|m| m.get("clock"))
                .and_then(|c| c.get("clock"))
                .and_then(Value::as_str)
                .unwrap_or("real")
                .to_string(),
            rows: out,
        })
    }

    /// Every metric name of every row.
    pub fn metric_names(&self) -> BTreeSet<&str> {
        self.rows
            .iter()
            .flat_map(|r| r.means.keys().map(String::as_str))
            .collect()
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One metric of one point compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Which point (the results' row).
    pub point: PointId,
    /// Metric name, as in summary.json.
    pub metric: String,
    /// The baseline's mean (`None`: no value).
    pub baseline: Option<f64>,
    /// The results' mean (`None`: no value).
    pub result: Option<f64>,
    /// result − baseline, in the metric's unit.
    pub delta: Option<f64>,
    /// The largest allowed |delta|: max(abs, rel · |baseline|).
    pub allowed: Option<f64>,
    /// The tolerance that applied.
    pub tolerance: Bound,
    /// Whether the metric is within.
    pub within: bool,
}

/// A baseline point whose index the results have with other parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChangedPoint {
    /// The baseline's row.
    pub baseline: PointId,
    /// The results' row of the same algorithm and index.
    pub result: PointId,
    /// `name: base → new` for each parameter that differs.
    pub differences: Vec<String>,
}

/// A metric of one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointMetric {
    /// Which point.
    pub point: PointId,
    /// Metric name.
    pub metric: String,
}

/// The outcome of a check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Whether every baseline metric is there and within its bound.
    pub pass: bool,
    /// The results' summary.json.
    pub results: PathBuf,
    /// The baseline's summary.json.
    pub baseline: PathBuf,
    /// Metrics compared within their bounds.
    pub within: usize,
    /// Metrics outside their bounds (failures).
    pub outside: Vec<Comparison>,
    /// Baseline points the results lack (failures).
    pub missing_points: Vec<PointId>,
    /// Baseline points the results have with other parameters (failures).
    pub changed_points: Vec<ChangedPoint>,
    /// Baseline metrics the results' matching row lacks (failures).
    pub missing_metrics: Vec<PointMetric>,
    /// Points only the results have (not failures).
    pub extra_points: Vec<PointId>,
    /// Metrics only the results have (not failures).
    pub extra_metrics: Vec<PointMetric>,
    /// Things worth knowing that do not fail the check: tolerances naming no metric of
    /// either file, summaries of different scenarios or profiles.
    pub warnings: Vec<String>,
    /// The tolerances used.
    pub tolerances: Tolerances,
}

/// Checks that `results` and `baseline` were timed by the same clock.
///
/// Errors: [`CheckError::ClockMismatch`], naming both.
pub fn same_clock(results: &SummaryFile, baseline: &SummaryFile) -> Result<(), CheckError> {
    if results.clock == baseline.clock {
        return Ok(());
    }
    Err(CheckError::ClockMismatch {
        results_path: results.path.clone(),
        results: results.clock.clone(),
        baseline_path: baseline.path.clone(),
        baseline: baseline.clock.clone(),
    })
}

/// Compares `results` with `baseline` under `tol` (see the module documentation).
pub fn check(results: &SummaryFile, baseline: &SummaryFile, tol: &Tolerances) -> Verdict {
    let mut v = Verdict {
        pass: true,
        results: results.path.clone(),
        baseline: baseline.path.clone(),
        within: 0,
        outside: Vec::new(),
        missing_points: Vec::new(),
        changed_points: Vec::new(),
        missing_metrics: Vec::new(),
        extra_points: Vec::new(),
        extra_metrics: Vec::new(),
        warnings: Vec::new(),
        tolerances: tol.clone(),
    };
    for (what, b, r) in [
        ("scenario", &baseline.scenario, &results.scenario),
        ("profile", &baseline.profile, &results.profile),
    ] {
        if let (Some(b), Some(r)) = (b, r) {
            if b != r {
                v.warnings.push(format!(
                    "the baseline's {what} is {b:?}, the results' {r:?}"
                ));
            }
        }
    }
    let names: BTreeSet<&str> = baseline
        .metric_names()
        .union(&results.metric_names())
        .copied()
        .collect();
    for name in tol.metrics.keys() {
        if !names.contains(name.as_str()) {
            v.warnings.push(format!(
                "the tolerance for {name:?} names a metric neither summary has (a typo?)"
            ));
        }
    }
    let find = |rows: &[Row], id: &PointId| -> Option<usize> {
        rows.iter()
            .position(|r| r.id.algo == id.algo && r.id.point == id.point)
    };
    for b in &baseline.rows {
        let Some(i) = find(&results.rows, &b.id) else {
            v.missing_points.push(b.id.clone());
            continue;
        };
        let r = &results.rows[i];
        let differences = b.id.differences(&r.id);
        if !differences.is_empty() {
            v.changed_points.push(ChangedPoint {
                baseline: b.id.clone(),
                result: r.id.clone(),
                differences,
            });
            continue;
        }
        for (metric, &base) in &b.means {
            let Some(&new) = r.means.get(metric) else {
                v.missing_metrics.push(PointMetric {
                    point: r.id.clone(),
                    metric: metric.clone(),
                });
                continue;
            };
            let tolerance = tol.bound(metric);
            let (delta, allowed, within) = match (base, new) {
                (Some(b), Some(n)) => (
                    Some(n - b),
                    Some(tolerance.allowed(b)),
                    tolerance.within(b, n),
                ),
                (Some(b), None) => (None, Some(tolerance.allowed(b)), false),
                (None, Some(_)) => (None, None, false),
                (None, None) => (None, None, true),
            };
            if within {
                v.within += 1;
            } else {
                v.outside.push(Comparison {
                    point: r.id.clone(),
                    metric: metric.clone(),
                    baseline: base,
                    result: new,
                    delta,
                    allowed,
                    tolerance,
                    within,
                });
            }
        }
        for metric in r.means.keys().filter(|m| !b.means.contains_key(*m)) {
            v.extra_metrics.push(PointMetric {
                point: r.id.clone(),
                metric: metric.clone(),
            });
        }
    }
    for r in &results.rows {
        if find(&baseline.rows, &r.id).is_none() {
            v.extra_points.push(r.id.clone());
        }
    }
    v.pass = v.outside.is_empty()
        && v.missing_points.is_empty()
        && v.changed_points.is_empty()
        && v.missing_metrics.is_empty();
    v
}

/// A number with up to 6 significant digits, without trailing zeros.
fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = 6 - 1 - x.abs().log10().floor() as i32;
    let s = format!("{:.*}", digits.clamp(0, 12) as usize, x);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn opt(x: Option<f64>) -> String {
    x.map_or_else(|| "no value".to_string(), num)
}

impl Verdict {
    /// The verdict for a terminal: one line per failure, extras and warnings, then a
    /// closing count.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for c in &self.outside {
            let delta = match (c.delta, c.baseline) {
                (Some(d), Some(b)) if b != 0.0 => {
                    format!(
                        "{}{} ({:+.1} %)",
                        if d >= 0.0 { "+" } else { "" },
                        num(d),
                        100.0 * d / b.abs()
                    )
                }
                (Some(d), _) => format!("{}{}", if d >= 0.0 { "+" } else { "" }, num(d)),
                (None, _) => "–".into(),
            };
            let bound = match c.allowed {
                Some(a) => format!(
                    "±{} (rel {}, abs {})",
                    num(a),
                    num(c.tolerance.rel),
                    num(c.tolerance.abs)
                ),
                None => "a value on both sides or none on both".into(),
            };
            let _ = writeln!(
                out,
                "OUTSIDE {} {:?}: baseline {}, result {}, delta {delta}, bound {bound}",
                c.point.label(),
                c.metric,
                opt(c.baseline),
                opt(c.result),
            );
        }
        for p in &self.missing_points {
            let _ = writeln!(
                out,
                "MISSING {}: in the baseline, not in the results",
                p.label()
            );
        }
        for c in &self.changed_points {
            let _ = writeln!(
                out,
                "CHANGED {}: the results' point {} has other parameters ({})",
                c.baseline.label(),
                c.result.point,
                c.differences.join(", ")
            );
        }
        for m in &self.missing_metrics {
            let _ = writeln!(
                out,
                "MISSING {} {:?}: in the baseline, not in the results",
                m.point.label(),
                m.metric
            );
        }
        for p in &self.extra_points {
            let _ = writeln!(out, "extra {}: only in the results", p.label());
        }
        for m in &self.extra_metrics {
            let _ = writeln!(
                out,
                "extra {} {:?}: only in the results",
                m.point.label(),
                m.metric
            );
        }
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        let _ = writeln!(
            out,
            "{}: {} metrics within, {} outside, {} missing, {} points missing or changed \
             (results {}, baseline {})",
            if self.pass { "PASS" } else { "REGRESSION" },
            self.within,
            self.outside.len(),
            self.missing_metrics.len(),
            self.missing_points.len() + self.changed_points.len(),
            self.results.display(),
            self.baseline.display(),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("tol.toml")
    }

    /// (algorithm, point, rate in Mbit/s, metric means).
    type TestRow<'a> = (&'a str, u64, f64, &'a [(&'a str, Option<f64>)]);

    fn summary(rows: &[TestRow]) -> SummaryFile {
        let rows: Vec<Value> = rows
            .iter()
            .map(|(algo, point, rate, metrics)| {
                let m: serde_json::Map<String, Value> = metrics
                    .iter()
                    .map(|(k, x)| {
                        (
                            k.to_string(),
                            serde_json::json!({"mean": x, "stderr": 0.0, "values": [], "nc": 0}),
                        )
                    })
                    .collect();
                serde_json::json!({
                    "point": point, "vars": {"rate_mbit": rate}, "buffer_pkts": 20,
                    "rate_mbit": rate, "loss": 0.0, "algo": algo, "n": 1, "metrics": m,
                })
            })
            .collect();
        let text = serde_json::json!({
            "metadata": {"scenario": "s", "profile": "ci"},
            "rows": rows,
        })
        .to_string();
        SummaryFile::parse(&text, Path::new("summary.json")).unwrap()
    }

    #[test]
    fn within_is_the_larger_of_abs_and_rel_times_the_baseline() {
        let b = Bound { rel: 0.1, abs: 0.5 };
        assert!(b.within(10.0, 11.0));
        assert!(!b.within(10.0, 11.01));
        assert!(b.within(10.0, 9.0));
        // Near zero the absolute part decides.
        assert!(b.within(1.0, 1.5));
        assert!(!b.within(1.0, 1.51));
        assert!(b.within(0.0, -0.5));
        // A negative baseline counts by its magnitude.
        assert!(b.within(-10.0, -11.0));
    }

    #[test]
    fn the_builtin_default_allows_ten_percent_and_keeps_zero_at_zero() {
        let t = Tolerances::default();
        assert_eq!(t.bound("anything"), Bound::BUILTIN_DEFAULT);
        assert!(t.bound("x").within(100.0, 110.0));
        assert!(!t.bound("x").within(100.0, 110.1));
        assert!(t.bound("x").within(0.0, 0.0));
        assert!(!t.bound("x").within(0.0, 1e-9));
    }

    #[test]
    fn a_tolerance_file_names_metrics_and_a_default_and_omitted_parts_are_zero() {
        let t = Tolerances::parse(
            "default = { rel = 0.2 }\n\"M8 utilisation (wire)\" = { rel = 0.05 }\n\
             \"M1 flow1 (Mbit/s)\" = { abs = 1 }\n",
            p(),
        )
        .unwrap();
        assert_eq!(t.default, Bound { rel: 0.2, abs: 0.0 });
        assert_eq!(
            t.bound("M8 utilisation (wire)"),
            Bound {
                rel: 0.05,
                abs: 0.0
            }
        );
        assert_eq!(t.bound("M1 flow1 (Mbit/s)"), Bound { rel: 0.0, abs: 1.0 });
        assert_eq!(t.bound("M4 Jain"), t.default);
        // Without `default` the built-in one applies.
        let t = Tolerances::parse("\"M4 Jain\" = { rel = 0.01, abs = 0.5 }", p()).unwrap();
        assert_eq!(t.default, Bound::BUILTIN_DEFAULT);
    }

    #[test]
    fn bad_tolerances_are_refused_naming_the_key() {
        let cases = [
            (
                "\"M4 Jain\" = { rel = 0.1, absolute = 1 }",
                "\"M4 Jain\".absolute: unknown key",
            ),
            (
                "\"M4 Jain\" = { rel = -0.1 }",
                "\"M4 Jain\".rel: -0.1 is not allowed",
            ),
            ("default = { abs = nan }", "default.abs: NaN is not allowed"),
            (
                "\"M4 Jain\" = { rel = \"10%\" }",
                "\"M4 Jain\".rel: expected a number, found string",
            ),
            ("\"M4 Jain\" = 0.1", "\"M4 Jain\": expected a table"),
            ("\"M4 Jain\" = {}", "\"M4 Jain\": empty"),
        ];
        for (text, want) in cases {
            let e = Tolerances::parse(text, p()).unwrap_err().to_string();
            assert!(e.starts_with("tol.toml: "), "{e}");
            assert!(e.contains(want), "{text}: {e}");
        }
        let e = Tolerances::parse("default = { rel = ", p())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("tol.toml: not valid TOML"), "{e}");
    }

    #[test]
    fn an_unchanged_copy_passes() {
        let s = summary(&[
            (
                "reno",
                0,
                10.0,
                &[("M4 Jain", Some(0.99)), ("M5 A (s)", None)],
            ),
            ("reno", 1, 20.0, &[("M4 Jain", Some(0.95))]),
        ]);
        let v = check(&s, &s, &Tolerances::default());
        assert!(v.pass, "{}", v.text());
        assert_eq!(v.within, 3);
        assert!(v.text().starts_with("PASS: 3 metrics within, 0 outside"));
    }

    #[test]
    fn a_metric_moved_outside_its_bound_fails_and_is_named_alone() {
        let base = summary(&[(
            "reno",
            0,
            10.0,
            &[("M4 Jain", Some(0.9)), ("M8 goodput (Mbit/s)", Some(9.0))],
        )]);
        let new = summary(&[(
            "reno",
            0,
            10.0,
            &[("M4 Jain", Some(0.7)), ("M8 goodput (Mbit/s)", Some(9.5))],
        )]);
        let v = check(&new, &base, &Tolerances::default());
        assert!(!v.pass);
        assert_eq!(v.within, 1);
        assert_eq!(v.outside.len(), 1);
        let c = &v.outside[0];
        assert_eq!(c.metric, "M4 Jain");
        assert_eq!((c.baseline, c.result), (Some(0.9), Some(0.7)));
        assert!((c.delta.unwrap() + 0.2).abs() < 1e-12);
        assert!((c.allowed.unwrap() - 0.09).abs() < 1e-12);
        let text = v.text();
        assert!(
            text.contains("OUTSIDE reno point 0 (buffer_pkts=20 loss=0.0 rate_mbit=10.0) \"M4 Jain\": baseline 0.9, result 0.7, delta -0.2 (-22.2 %), bound ±0.09 (rel 0.1, abs 0)"),
            "{text}"
        );
        assert!(!text.contains("goodput"), "{text}");
        // Loosened by name, it passes; an absolute tolerance alone does too.
        for tol in [
            "\"M4 Jain\" = { rel = 0.25 }",
            "\"M4 Jain\" = { abs = 0.2 }",
        ] {
            let t = Tolerances::parse(tol, p()).unwrap();
            assert!(check(&new, &base, &t).pass, "{tol}");
        }
        // Tightening the default catches the goodput change (+5.6 %).
        let t = Tolerances::parse(
            "default = { rel = 0.05 }\n\"M4 Jain\" = { rel = 0.25 }",
            p(),
        )
        .unwrap();
        let v = check(&new, &base, &t);
        assert_eq!(v.outside.len(), 1);
        assert_eq!(v.outside[0].metric, "M8 goodput (Mbit/s)");
    }

    #[test]
    fn a_value_that_appears_or_vanishes_is_outside() {
        let base = summary(&[(
            "reno",
            0,
            10.0,
            &[("M5 A (s)", Some(3.0)), ("M5 B (s)", None)],
        )]);
        let new = summary(&[(
            "reno",
            0,
            10.0,
            &[("M5 A (s)", None), ("M5 B (s)", Some(2.0))],
        )]);
        let v = check(&new, &base, &Tolerances::default());
        let names: Vec<&str> = v.outside.iter().map(|c| c.metric.as_str()).collect();
        assert_eq!(names, ["M5 A (s)", "M5 B (s)"]);
        assert!(
            v.text().contains("baseline 3, result no value"),
            "{}",
            v.text()
        );
    }

    #[test]
    fn missing_points_and_metrics_fail_and_extras_do_not() {
        let base = summary(&[
            (
                "reno",
                0,
                10.0,
                &[("M4 Jain", Some(0.9)), ("M3 R_rtt", Some(1.0))],
            ),
            ("reno", 1, 20.0, &[("M4 Jain", Some(0.9))]),
        ]);
        let new = summary(&[
            ("reno", 0, 10.0, &[("M4 Jain", Some(0.9))]),
            ("cubic", 1, 20.0, &[("M4 Jain", Some(0.9))]),
        ]);
        let v = check(&new, &base, &Tolerances::default());
        assert!(!v.pass);
        assert_eq!(v.missing_points.len(), 1);
        assert_eq!(v.missing_points[0].point, 1);
        assert_eq!(v.missing_metrics.len(), 1);
        assert_eq!(v.missing_metrics[0].metric, "M3 R_rtt");
        assert_eq!(v.extra_points.len(), 1);
        assert_eq!(v.extra_points[0].algo, "cubic");
        let text = v.text();
        assert!(text.contains("MISSING reno point 1 ("), "{text}");
        assert!(
            text.contains(
                "MISSING reno point 0 (buffer_pkts=20 loss=0.0 rate_mbit=10.0) \"M3 R_rtt\""
            ),
            "{text}"
        );
        assert!(text.contains("extra cubic point 1"), "{text}");
        // The other way round, only extras: it passes.
        let base2 = summary(&[("reno", 0, 10.0, &[("M4 Jain", Some(0.9))])]);
        let new2 = summary(&[
            (
                "reno",
                0,
                10.0,
                &[("M4 Jain", Some(0.9)), ("M3 R_rtt", Some(1.0))],
            ),
            ("reno", 1, 20.0, &[("M4 Jain", Some(0.9))]),
        ]);
        let v = check(&new2, &base2, &Tolerances::default());
        assert!(v.pass, "{}", v.text());
        assert_eq!((v.extra_points.len(), v.extra_metrics.len()), (1, 1));
    }

    #[test]
    fn a_point_with_other_parameters_is_a_changed_point() {
        let base = summary(&[("reno", 0, 10.0, &[("M4 Jain", Some(0.9))])]);
        let new = summary(&[("reno", 0, 50.0, &[("M4 Jain", Some(0.9))])]);
        let v = check(&new, &base, &Tolerances::default());
        assert!(!v.pass);
        assert_eq!(v.changed_points.len(), 1);
        assert_eq!(v.changed_points[0].differences, ["rate_mbit: 10.0 → 50.0"]);
    }

    #[test]
    fn a_tolerance_for_a_metric_neither_file_has_is_a_warning() {
        let s = summary(&[("reno", 0, 10.0, &[("M4 Jain", Some(0.9))])]);
        let t = Tolerances::parse("\"M4 Jian\" = { rel = 0.5 }", p()).unwrap();
        let v = check(&s, &s, &t);
        assert!(v.pass);
        assert_eq!(v.warnings.len(), 1);
        assert!(v.warnings[0].contains("\"M4 Jian\""), "{:?}", v.warnings);
    }

    #[test]
    fn malformed_summaries_are_refused_naming_the_file_and_the_place() {
        let f = Path::new("base/summary.json");
        let cases = [
            ("{", "base/summary.json: not a valid summary.json: EOF"),
            ("[]", "expected an object, found an array"),
            ("{\"metadata\": {}}", "no `rows`"),
            ("{\"rows\": [{\"point\": 0, \"metrics\": {}}]}", "rows[0]: no `algo`"),
            ("{\"rows\": [{\"algo\": \"reno\", \"point\": -1, \"metrics\": {}}]}", "rows[0].point: expected a point index"),
            ("{\"rows\": [{\"algo\": \"reno\", \"point\": 0, \"metrics\": {\"M4 Jain\": {\"mean\": \"x\"}}}]}", "rows[0].metrics.\"M4 Jain\".mean: expected a number or null, found a string"),
        ];
        for (text, want) in cases {
            let e = SummaryFile::parse(text, f).unwrap_err().to_string();
            assert!(
                e.starts_with("base/summary.json: not a valid summary.json"),
                "{e}"
            );
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn numbers_print_with_six_significant_digits() {
        assert_eq!(num(9.573128764), "9.57313");
        assert_eq!(num(0.000123456789), "0.000123457");
        assert_eq!(num(1234567.0), "1234567");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(0.0), "0");
    }

    #[test]
    fn clocks_are_not_mixed_and_a_summary_without_one_is_real() {
        let with = |clock: Option<&str>| {
            let mut meta = serde_json::json!({"scenario": "s", "profile": "ci"});
            if let Some(c) = clock {
                meta["clock"] = serde_json::json!({"clock": c, "machine": "tcg", "vcpus": 1});
            }
            let text = serde_json::json!({"metadata": meta, "rows": []}).to_string();
            SummaryFile::parse(&text, Path::new("summary.json")).unwrap()
        };
        let (old, real, virt) = (with(None), with(Some("real")), with(Some("virtual")));
        assert_eq!(old.clock, "real");
        assert!(same_clock(&old, &real).is_ok());
        assert!(same_clock(&virt, &with(Some("virtual"))).is_ok());
        let e = same_clock(&virt, &old).unwrap_err();
        assert!(e.is_bad_input());
        let msg = e.to_string();
        assert!(
            msg.contains("metadata.clock.clock") && msg.contains("\"virtual\" vs \"real\""),
            "{msg}"
        );
    }
}
