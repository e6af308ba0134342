//! The scenario file's schema: its TOML tables as serde structs, the settings and parameters
//! they hold, their validation, and the precedence of `[defaults]` and the profiles.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::de::de_at;
use crate::error::{FieldError, ScenarioError};
use crate::expr::{expr_from, is_ident, numspec_from, Draws, Env, Expr, Factor, NumSpec, Sourced};
use crate::model::*;
use crate::schedule::LayerSchedules;
use crate::sweep::{parse_sweep, SweepCase};
use crate::traffic::{parse_direction, parse_kind, Direction, FlowKind};

/// The placeholder for the algorithm under test in `cc`.
const ALGO: &str = "{algo}";

/// A parsed and validated scenario file.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Test id of `benchmarks.md`, e.g. `T0.1`.
    pub id: String,
    /// CLI name, e.g. `fairness-same-rtt`.
    pub name: String,
    /// Human title.
    pub title: String,
    /// Where the test comes from, e.g. `\[P0\] §III-C(i), §V-A, Figs. 3-9`.
    pub source: String,
    /// Metrics of `benchmarks.md` §1 the test reports (`M1`..`M17`).
    pub metrics: Vec<String>,
    /// Plots the test asks for (see [`PLOTS`]).
    pub plots: Vec<String>,
    /// The variable reports plot against, if any.
    pub x: Option<String>,
    /// \[CHOICE\]/\[GAP\] decisions to record with every result.
    pub choices: Vec<String>,
    /// The `variant` key: the algorithm profile (`linux`, `p0`, ...) every algorithm
    /// under test runs with here when `--algo` gives its plain key; `None`: the variant
    /// the scenario's paper tested ([`Scenario::paper`]), else the default port.
    pub variant: Option<String>,
    /// Where it was loaded from; `<builtin>/<file>.toml` for the shipped files.
    pub path: PathBuf,
    /// The `[defaults]` table.
    pub(crate) defaults: Layer,
    /// The `[profiles.paper]` table.
    pub(crate) paper: Layer,
    /// The `[profiles.ci]` table.
    pub(crate) ci: Layer,
    /// The `[[flows]]` tables, in order.
    pub(crate) flows: Vec<FlowSpec>,
    /// The `[topology]` chain, if any (without: the dumbbell).
    pub(crate) topology: Option<crate::topology::Topology>,
    /// The `[[expect]]` tables: what the results must show.
    pub expectations: Vec<crate::expect::Expectation>,
    /// The `[[probes]]` tables: latency probes during the run.
    pub(crate) probes: Vec<crate::traffic::ProbeTable>,
}

// ---------------------------------------------------------------------------------------
// Raw (serde) forms.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTop {
    id: String,
    name: String,
    title: String,
    source: String,
    #[serde(default)]
    metrics: Vec<String>,
    #[serde(default)]
    plots: Vec<String>,
    x: Option<String>,
    #[serde(default)]
    choices: Vec<String>,
    variant: Option<String>,
    defaults: Option<toml::Value>,
    flows: Vec<toml::Value>,
    profiles: toml::Value,
    topology: Option<toml::Value>,
    #[serde(default)]
    expect: Vec<toml::Value>,
    #[serde(default)]
    probes: Vec<toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProfiles {
    paper: toml::Value,
    ci: toml::Value,
}

#[derive(Deserialize, Default, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLayer {
    pub(crate) rate_mbit: Option<f64>,
    pub(crate) reverse_rate_mbit: Option<f64>,
    pub(crate) rtt_ms: Option<f64>,
    pub(crate) buffer_bdp: Option<f64>,
    pub(crate) buffer_pkts: Option<u32>,
    pub(crate) buffer_ms: Option<f64>,
    pub(crate) buffer_floor_pkts: Option<u32>,
    pub(crate) bdp_rtt: Option<BdpRtt>,
    pub(crate) loss: Option<f64>,
    pub(crate) loss_model: Option<LossModel>,
    pub(crate) init_ssthresh_bdp: Option<f64>,
    pub(crate) web_sessions: Option<u32>,
    pub(crate) web_model: Option<WebModel>,
    pub(crate) web_cc: Option<String>,
    pub(crate) duration_s: Option<f64>,
    pub(crate) qdisc: Option<String>,
    pub(crate) ecn: Option<bool>,
    pub(crate) codel_target_ms: Option<f64>,
    pub(crate) codel_interval_ms: Option<f64>,
    pub(crate) ce_threshold_ms: Option<f64>,
    pub(crate) pie_target_ms: Option<f64>,
    pub(crate) red_min_pkts: Option<f64>,
    pub(crate) red_max_pkts: Option<f64>,
    pub(crate) red_probability: Option<f64>,
    pub(crate) repeat: Option<u32>,
    pub(crate) seed: Option<u64>,
    pub(crate) note: Option<String>,
    #[serde(default)]
    pub(crate) vars: BTreeMap<String, f64>,
    pub(crate) sweep: Option<toml::Value>,
    /// Steps and ramps of the bottleneck rate (see [`crate::schedule`]).
    pub(crate) rate_schedule: Option<toml::Value>,
    /// Steps and ramps of the ACK-path delay (see [`crate::schedule`]).
    pub(crate) delay_schedule: Option<toml::Value>,
    /// A mahimahi trace file replayed as the bottleneck rate.
    pub(crate) rate_trace: Option<String>,
    /// Width of the bins a trace is counted in, ms.
    pub(crate) trace_bin_ms: Option<u32>,
    /// tbf bucket at the bottleneck, ms of the rate.
    pub(crate) tbf_burst_ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFlow {
    cc: Option<String>,
    rtt_ms: Option<toml::Value>,
    start_s: Option<toml::Value>,
    stop_s: Option<toml::Value>,
    count: Option<toml::Value>,
    start_step_s: Option<toml::Value>,
    size_mb: Option<toml::Value>,
    on_s: Option<toml::Value>,
    off_s: Option<toml::Value>,
    path: Option<toml::Value>,
    kind: Option<String>,
    direction: Option<String>,
    rate_mbit: Option<toml::Value>,
}

// ---------------------------------------------------------------------------------------
// Parsed forms.

/// A `[defaults]` or `[profiles.X]` table.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layer {
    /// `defaults` or `profiles.ci`.
    pub(crate) at: String,
    pub(crate) raw: RawLayer,
    pub(crate) sweep: Option<Vec<SweepCase>>,
    /// `rate_schedule`, `delay_schedule` and `rate_trace`, parsed.
    pub(crate) schedules: LayerSchedules,
}

#[derive(Debug, Clone)]
pub(crate) struct FlowSpec {
    pub(crate) cc: CcRef,
    pub(crate) rtt_ms: NumSpec,
    pub(crate) start_s: NumSpec,
    pub(crate) stop_s: Option<NumSpec>,
    pub(crate) count: Expr,
    pub(crate) start_step_s: Expr,
    pub(crate) size_mb: Option<Expr>,
    pub(crate) on_s: Option<NumSpec>,
    pub(crate) off_s: Option<NumSpec>,
    /// `path = [first, last]` as written (checked against `[topology]`).
    pub(crate) path: Option<(i64, i64)>,
    /// TCP or constant-bit-rate UDP.
    pub(crate) kind: FlowKind,
    /// Which way the data goes (TCP only).
    pub(crate) direction: Direction,
    /// A `udp-cbr` flow's rate, Mbit/s (required there, refused for TCP).
    pub(crate) rate_mbit: Option<Expr>,
}

// ---------------------------------------------------------------------------------------
// Parsing.

fn parse_flow(value: toml::Value, at: &str) -> Result<FlowSpec, FieldError> {
    let raw: RawFlow = de_at(value, at)?;
    let f = |k: &str| format!("{at}.{k}");
    let cc = match raw.cc.as_deref() {
        None | Some(ALGO) => CcRef::UnderTest,
        Some(name) => {
            if name.is_empty() || name.contains(['{', '}']) || name.contains(char::is_whitespace) {
                return Err(FieldError::new(
                    f("cc"),
                    format!("`{name}`: expected \"{{algo}}\" (the algorithm under test) or an algorithm name such as \"reno\""),
                ));
            }
            CcRef::Named(name.to_string())
        }
    };
    let opt = |v: &Option<toml::Value>, k: &str, d: Draws| -> Result<Option<NumSpec>, FieldError> {
        v.as_ref().map(|v| numspec_from(v, &f(k), d)).transpose()
    };
    let var = |name: &str| Expr {
        text: format!("{{{name}}}"),
        factors: vec![Factor::Var(name.into())],
    };
    let num = |x: f64| Expr {
        text: x.to_string(),
        factors: vec![Factor::Num(x)],
    };
    let kind = parse_kind(raw.kind.as_deref(), &f("kind"))?;
    let direction = parse_direction(raw.direction.as_deref(), &f("direction"))?;
    match kind {
        FlowKind::Tcp => {
            if raw.rate_mbit.is_some() {
                return Err(FieldError::new(
                    f("rate_mbit"),
                    "only a kind = \"udp-cbr\" flow has a rate; a TCP flow's rate is its \
                     congestion control's (remove rate_mbit, or set kind = \"udp-cbr\")",
                ));
            }
        }
        FlowKind::UdpCbr => {
            if raw.rate_mbit.is_none() {
                return Err(FieldError::new(
                    f("rate_mbit"),
                    "missing: a kind = \"udp-cbr\" flow needs rate_mbit (Mbit/s of IPv4 packets)",
                ));
            }
            let refused = [
                ("cc", raw.cc.is_some(), "it has no congestion control"),
                (
                    "size_mb",
                    raw.size_mb.is_some(),
                    "it sends at its rate from start_s to stop_s",
                ),
                (
                    "direction",
                    direction == Direction::Reverse,
                    "reverse flows are TCP only (direction = \"forward\" or leave it out)",
                ),
            ];
            if let Some((key, _, why)) = refused.iter().find(|(_, set, _)| *set) {
                return Err(FieldError::new(
                    f(key),
                    format!("not allowed in a kind = \"udp-cbr\" flow: {why}"),
                ));
            }
        }
    }
    let on_s = opt(&raw.on_s, "on_s", Draws::All)?;
    let off_s = opt(&raw.off_s, "off_s", Draws::All)?;
    if off_s.is_some() && on_s.is_none() {
        return Err(FieldError::new(
            f("off_s"),
            "off_s needs on_s (an on/off source alternates both)",
        ));
    }
    Ok(FlowSpec {
        cc,
        rtt_ms: opt(&raw.rtt_ms, "rtt_ms", Draws::UniformChoice)?
            .unwrap_or(NumSpec::Expr(var("rtt_ms"))),
        start_s: opt(&raw.start_s, "start_s", Draws::UniformChoice)?
            .unwrap_or(NumSpec::Expr(num(0.0))),
        stop_s: opt(&raw.stop_s, "stop_s", Draws::UniformChoice)?,
        count: raw
            .count
            .as_ref()
            .map(|v| expr_from(v, &f("count")))
            .transpose()?
            .unwrap_or(num(1.0)),
        start_step_s: raw
            .start_step_s
            .as_ref()
            .map(|v| expr_from(v, &f("start_step_s")))
            .transpose()?
            .unwrap_or(num(0.0)),
        size_mb: raw
            .size_mb
            .as_ref()
            .map(|v| expr_from(v, &f("size_mb")))
            .transpose()?,
        on_s,
        off_s,
        path: raw
            .path
            .as_ref()
            .map(|v| crate::topology::parse_path(v, &f("path")))
            .transpose()?,
        kind,
        direction,
        rate_mbit: raw
            .rate_mbit
            .as_ref()
            .map(|v| expr_from(v, &f("rate_mbit")))
            .transpose()?,
    })
}

fn parse_layer(value: toml::Value, at: &str, path: &Path) -> Result<Layer, FieldError> {
    let raw: RawLayer = de_at(value, at)?;
    let schedules = LayerSchedules::parse(
        raw.rate_schedule.as_ref(),
        raw.delay_schedule.as_ref(),
        raw.rate_trace.as_deref(),
        raw.trace_bin_ms,
        at,
        path,
    )?;
    let sweep = raw
        .sweep
        .as_ref()
        .map(|s| parse_sweep(s, &format!("{at}.sweep")))
        .transpose()?;
    let set: Vec<&str> = numeric(&raw)
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| BUFFER_KEYS.contains(k))
        .collect();
    if set.len() > 1 {
        return Err(FieldError::new(
            format!("{at}.{}", set[1]),
            format!(
                "{} is set too: give only one of {}",
                set[0],
                BUFFER_KEYS.join(", ")
            ),
        ));
    }
    for name in raw.vars.keys() {
        let v_at = format!("{at}.vars.{name}");
        if PARAMS.contains(&name.as_str()) || is_setting(name) {
            return Err(FieldError::new(
                v_at,
                format!("`{name}` is a parameter: set it directly in [{at}], not in vars"),
            ));
        }
        if !is_ident(name) || name == "algo" {
            return Err(FieldError::new(
                v_at,
                "not a variable name ([a-z_][a-z0-9_]*, not `algo`)",
            ));
        }
    }
    if let Some(0) = raw.repeat {
        return Err(FieldError::new(
            format!("{at}.repeat"),
            "must be at least 1",
        ));
    }
    if let Some(q) = &raw.qdisc {
        if cctl_netem::aqm::Qdisc::parse(q).is_none() {
            return Err(FieldError::new(
                format!("{at}.qdisc"),
                cctl_netem::aqm::Qdisc::unknown(q),
            ));
        }
    }
    if let Some(cc) = &raw.web_cc {
        if cc.is_empty() || cc.contains(['{', '}']) {
            return Err(FieldError::new(
                format!("{at}.web_cc"),
                "expected an algorithm name such as \"reno\"",
            ));
        }
    }
    Ok(Layer {
        at: at.to_string(),
        raw,
        sweep,
        schedules,
    })
}

/// The numeric parameters a layer sets, in [`PARAMS`] order.
fn numeric(raw: &RawLayer) -> Vec<(&'static str, f64)> {
    let mut out = Vec::new();
    let mut put = |k: &'static str, v: Option<f64>| {
        if let Some(v) = v {
            out.push((k, v));
        }
    };
    put("rate_mbit", raw.rate_mbit);
    put("reverse_rate_mbit", raw.reverse_rate_mbit);
    put("rtt_ms", raw.rtt_ms);
    put("buffer_bdp", raw.buffer_bdp);
    put("buffer_pkts", raw.buffer_pkts.map(f64::from));
    put("buffer_ms", raw.buffer_ms);
    put("buffer_floor_pkts", raw.buffer_floor_pkts.map(f64::from));
    put("loss", raw.loss);
    put("init_ssthresh_bdp", raw.init_ssthresh_bdp);
    put("web_sessions", raw.web_sessions.map(f64::from));
    put("duration_s", raw.duration_s);
    put("codel_target_ms", raw.codel_target_ms);
    put("codel_interval_ms", raw.codel_interval_ms);
    put("ce_threshold_ms", raw.ce_threshold_ms);
    put("pie_target_ms", raw.pie_target_ms);
    put("red_min_pkts", raw.red_min_pkts);
    put("red_max_pkts", raw.red_max_pkts);
    put("red_probability", raw.red_probability);
    out
}

fn syntax_error(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {col}: {}", e.message())
        }
        None => e.message().to_string(),
    }
}

impl Scenario {
    /// Reads, parses and validates the scenario file at `path`.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Scenario::parse(&text, path)
    }

    /// Parses and validates scenario `text`; `path` is only used to name the file in errors
    /// and in [`Scenario::path`]. Both profiles are expanded once, so a scenario that parses
    /// is known to expand.
    pub fn parse(text: &str, path: &Path) -> Result<Scenario, ScenarioError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| ScenarioError::Syntax {
            path: path.to_path_buf(),
            message: syntax_error(text, &e),
        })?;
        let invalid = |error: FieldError| ScenarioError::Invalid {
            path: path.to_path_buf(),
            error,
        };
        let scenario = Scenario::from_table(table, path).map_err(invalid)?;
        let mut most_points = 0;
        for profile in Profile::ALL {
            most_points = most_points.max(scenario.expand(profile, scenario.seed(profile))?.len());
        }
        for (i, e) in scenario.expectations.iter().enumerate() {
            if let crate::expect::PointSel::Indices(v) = &e.point {
                if let Some(p) = v.iter().find(|&&p| p >= most_points) {
                    return Err(invalid(FieldError::new(
                        format!("expect[{i}].where.point"),
                        format!(
                            "point {p} matches nothing: the profiles have at most {most_points} \
                             point(s), indices 0 to {}",
                            most_points - 1
                        ),
                    )));
                }
            }
        }
        // After expanding, so that a misspelt reference is reported as undefined at the flow
        // rather than as an unused variable.
        scenario.check_variables().map_err(invalid)?;
        Ok(scenario)
    }

    pub(crate) fn from_table(table: toml::Table, path: &Path) -> Result<Scenario, FieldError> {
        let top: RawTop = de_at(toml::Value::Table(table), "")?;
        check_header(&top)?;
        let defaults = match top.defaults {
            Some(v) => parse_layer(v, "defaults", path)?,
            None => Layer {
                at: "defaults".into(),
                ..Layer::default()
            },
        };
        let profiles: RawProfiles = de_at(top.profiles, "profiles")?;
        let paper = parse_layer(profiles.paper, "profiles.paper", path)?;
        let ci = parse_layer(profiles.ci, "profiles.ci", path)?;
        if top.flows.is_empty() {
            return Err(FieldError::new(
                "flows",
                "at least one [[flows]] table is needed",
            ));
        }
        let mut topology = top
            .topology
            .map(|v| crate::topology::parse_topology(v, "topology"))
            .transpose()?;
        if topology.is_some() {
            if let Some(i) = top.flows.iter().position(|v| v.get("rtt_ms").is_some()) {
                return Err(FieldError::new(
                    format!("flows[{i}].rtt_ms"),
                    "with [topology] a flow's RTT is the sum of the rtt_ms of the hops on its \
                     path: set them in topology.bottlenecks",
                ));
            }
        }
        let flows = top
            .flows
            .into_iter()
            .enumerate()
            .map(|(i, v)| parse_flow(v, &format!("flows[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let probes = top
            .probes
            .into_iter()
            .enumerate()
            .map(|(i, v)| crate::traffic::parse_probe(v, &format!("probes[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        check_chain(&mut topology, &flows, &probes)?;
        let expectations = top
            .expect
            .into_iter()
            .enumerate()
            .map(|(i, v)| crate::expect::parse_expect(v, &format!("expect[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let scenario = Scenario {
            id: top.id,
            name: top.name,
            title: top.title,
            source: top.source,
            metrics: top.metrics,
            plots: top.plots,
            x: top.x,
            choices: top.choices,
            variant: top.variant,
            path: path.to_path_buf(),
            defaults,
            paper,
            ci,
            flows,
            topology,
            expectations,
            probes,
        };
        Ok(scenario)
    }

    /// The paper the test comes from: the first `[P<digit>]` key of `source` (`"P0"` for
    /// `[P0] §III-C(i)`), `None` for scenarios of no paper (`source = "cctl"`).
    pub fn paper(&self) -> Option<&str> {
        let b = self.source.as_bytes();
        (0..b.len().saturating_sub(3))
            .find(|&i| {
                b[i] == b'[' && b[i + 1] == b'P' && b[i + 2].is_ascii_digit() && b[i + 3] == b']'
            })
            .map(|i| &self.source[i + 1..i + 3])
    }

    /// Every user variable is used, and `x` names something each profile defines.
    pub(crate) fn check_variables(&self) -> Result<(), FieldError> {
        let mut used: BTreeSet<&str> = BTreeSet::new();
        for f in &self.flows {
            let mut specs: Vec<&NumSpec> = vec![&f.rtt_ms, &f.start_s];
            specs.extend(f.stop_s.iter().chain(&f.on_s).chain(&f.off_s));
            let mut exprs: Vec<&Expr> = vec![&f.count, &f.start_step_s];
            exprs.extend(&f.size_mb);
            exprs.extend(&f.rate_mbit);
            for s in specs {
                exprs.extend(s.exprs());
            }
            for e in exprs {
                for fac in &e.factors {
                    if let Factor::Var(v) = fac {
                        used.insert(v);
                    }
                }
            }
        }
        for p in &self.probes {
            for e in p.start_s.iter().chain(&p.stop_s) {
                for fac in &e.factors {
                    if let Factor::Var(v) = fac {
                        used.insert(v);
                    }
                }
            }
        }
        if let Some(x) = &self.x {
            used.insert(x);
        }
        for layer in [&self.defaults, &self.paper, &self.ci] {
            for name in layer.raw.vars.keys() {
                if !used.contains(name.as_str()) {
                    return Err(FieldError::new(
                        format!("{}.vars.{name}", layer.at),
                        format!("`{name}` is not used by any flow or by `x` (a typo?)"),
                    ));
                }
            }
            for case in layer.sweep.iter().flatten() {
                for (name, _) in &case.axes {
                    if !PARAMS.contains(&name.as_str())
                        && !used.contains(name.as_str())
                        && !STRING_SWEEPS.contains(&name.as_str())
                    {
                        return Err(FieldError::new(
                            format!("{}.{name}", case.at),
                            format!("`{name}` is neither a parameter ({}) nor a variable used by a flow or by `x` (a typo?)", PARAMS.join(", ")),
                        ));
                    }
                }
            }
        }
        if let Some(x) = &self.x {
            for profile in Profile::ALL {
                for case in self.sweep_cases(profile) {
                    let defined = self.base_env(profile).contains_key(x)
                        || case.axes.iter().any(|(k, _)| k == x);
                    if !defined {
                        return Err(FieldError::new("x", format!("`{x}` is not defined in profile {profile} ({}); x must name a parameter, a var or a sweep key", case.at)));
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn layer(&self, profile: Profile) -> &Layer {
        match profile {
            Profile::Ci => &self.ci,
            Profile::Paper => &self.paper,
        }
    }

    /// The scenario with every point of `profile` lasting `duration_s` seconds instead of the
    /// profile's duration (`cctl bench run --duration-s`); flows' start and stop times stay
    /// as the scenario gives them.
    ///
    /// Errors: a duration that is not > 0, one that a sweep sets per point (naming the
    /// point), or any error the shorter points then have (a flow starting after the end).
    pub fn with_duration(
        mut self,
        profile: Profile,
        duration_s: f64,
    ) -> Result<Scenario, ScenarioError> {
        let path = self.path.clone();
        let invalid = |field: &str, message: String| ScenarioError::Invalid {
            path: path.clone(),
            error: FieldError::new(field, message),
        };
        if !(duration_s.is_finite() && duration_s > 0.0) {
            return Err(invalid(
                "duration_s",
                format!("--duration-s {duration_s}: a duration must be > 0 s"),
            ));
        }
        match profile {
            Profile::Ci => self.ci.raw.duration_s = Some(duration_s),
            Profile::Paper => self.paper.raw.duration_s = Some(duration_s),
        }
        let points = self.expand(profile, self.seed(profile))?;
        if let Some(p) = points.iter().find(|p| p.duration_s != duration_s) {
            return Err(invalid(
                "duration_s",
                format!(
                    "--duration-s {duration_s}: point {} ({}) sets its own duration ({} s) in the sweep",
                    p.index,
                    p.label(),
                    p.duration_s
                ),
            ));
        }
        Ok(self)
    }

    /// Number of repetitions of every point of `profile` (default 1).
    pub fn repeat(&self, profile: Profile) -> u32 {
        self.layer(profile)
            .raw
            .repeat
            .or(self.defaults.raw.repeat)
            .unwrap_or(1)
    }

    /// Base seed of `profile`'s random draws (default 1); a runner passes this plus the
    /// repetition index to [`Scenario::expand`].
    pub fn seed(&self, profile: Profile) -> u64 {
        self.layer(profile)
            .raw
            .seed
            .or(self.defaults.raw.seed)
            .unwrap_or(1)
    }

    /// The profile's `note` (for `ci`: that it must not be compared with the papers).
    pub fn note(&self, profile: Profile) -> Option<&str> {
        self.layer(profile)
            .raw
            .note
            .as_deref()
            .or(self.defaults.raw.note.as_deref())
    }

    /// Parameters and variables of `profile` before the sweep.
    pub(crate) fn base_env(&self, profile: Profile) -> Env {
        let mut env = Env::new();
        for layer in [&self.defaults, self.layer(profile)] {
            let nums = numeric(&layer.raw);
            if nums.iter().any(|(k, _)| BUFFER_KEYS.contains(k)) {
                env.retain(|k, _| !BUFFER_KEYS.contains(&k.as_str()));
            }
            for (k, v) in nums {
                env.insert(
                    k.to_string(),
                    Sourced {
                        value: v,
                        field: format!("{}.{k}", layer.at),
                    },
                );
            }
            for (k, v) in &layer.raw.vars {
                env.insert(
                    k.clone(),
                    Sourced {
                        value: *v,
                        field: format!("{}.vars.{k}", layer.at),
                    },
                );
            }
        }
        env
    }

    pub(crate) fn setting<T: Clone>(
        &self,
        profile: Profile,
        get: impl Fn(&RawLayer) -> &Option<T>,
    ) -> Option<T> {
        get(&self.layer(profile).raw)
            .clone()
            .or_else(|| get(&self.defaults.raw).clone())
    }
}

/// Refuses a bad `id`, `name` or `title`, and `metrics` or `plots` the language lacks.
fn check_header(top: &RawTop) -> Result<(), FieldError> {
    // A test id of benchmarks.md ("T0.1"), or a user's own: a letter, then letters,
    // digits, '.', '_' or '-' (at most 32 characters).
    let id_ok = top.id.len() <= 32
        && top
            .id
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        && top
            .id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if !id_ok {
        return Err(FieldError::new(
            "id",
            format!(
                "`{}`: expected a paper test id such as \"T0.1\" (`cctl bench list`), or a user id: \
                 a letter, then letters, digits, '.', '_' or '-' (at most 32 characters)",
                top.id
            ),
        ));
    }
    let name_ok = !top.name.is_empty()
        && top.name.split('-').all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        });
    if !name_ok {
        return Err(FieldError::new(
            "name",
            format!(
                "`{}`: expected lowercase words joined by `-`, e.g. \"fairness-same-rtt\"",
                top.name
            ),
        ));
    }
    if top.title.trim().is_empty() {
        return Err(FieldError::new("title", "must not be empty"));
    }
    for (i, m) in top.metrics.iter().enumerate() {
        if !METRICS.contains(&m.as_str()) {
            return Err(FieldError::new(
                format!("metrics[{i}]"),
                format!("unknown metric `{m}`; allowed: {}", METRICS.join(", ")),
            ));
        }
    }
    for (i, p) in top.plots.iter().enumerate() {
        if !PLOTS.contains(&p.as_str()) {
            return Err(FieldError::new(
                format!("plots[{i}]"),
                format!("unknown plot `{p}`; allowed: {}", PLOTS.join(", ")),
            ));
        }
    }
    Ok(())
}

/// Refuses what a `[topology]` chain cannot run (probes, reverse flows) and paths without
/// one; checks each flow's path against the chain.
fn check_chain(
    topology: &mut Option<crate::topology::Topology>,
    flows: &[FlowSpec],
    probes: &[crate::traffic::ProbeTable],
) -> Result<(), FieldError> {
    if topology.is_some() {
        if !probes.is_empty() {
            return Err(FieldError::new(
                "probes",
                "[[probes]] are not implemented on a [topology] chain yet (which of its \
                 paths would they measure?); they run on the dumbbell only",
            ));
        }
        if let Some(i) = flows.iter().position(|f| f.direction == Direction::Reverse) {
            return Err(FieldError::new(
                format!("flows[{i}].direction"),
                "reverse flows are not implemented on a [topology] chain yet (its reverse \
                 direction has no bottleneck); they run on the dumbbell only",
            ));
        }
    }
    match topology {
        Some(t) => t.check_paths(&flows.iter().map(|f| f.path).collect::<Vec<_>>())?,
        None => {
            if let Some(i) = flows.iter().position(|f| f.path.is_some()) {
                return Err(FieldError::new(
                    format!("flows[{i}].path"),
                    "a path needs a [topology] (without one, every flow crosses the \
                     dumbbell's single bottleneck)",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_input::rejects;

    #[test]
    fn profile_names_parse_and_print() {
        assert_eq!("ci".parse::<Profile>(), Ok(Profile::Ci));
        assert_eq!("paper".parse::<Profile>().unwrap().to_string(), "paper");
        assert!("full"
            .parse::<Profile>()
            .unwrap_err()
            .contains("`ci` or `paper`"));
    }

    #[test]
    fn unknown_fields_are_named_with_the_allowed_keys() {
        rejects(
            "source = \"test\"",
            "source = \"test\"\ncolour = 1",
            "colour",
            &["allowed keys", "`metrics`"],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\nrtt = 3",
            "flows[1].rtt",
            &["allowed keys", "`rtt_ms`", "`size_mb`"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nbuffer = 3",
            "defaults.buffer",
            &["`buffer_pkts`", "`sweep`"],
        );
        rejects(
            "[profiles.ci]",
            "[profiles.full]\nduration_s = 1\n[profiles.ci]",
            "profiles.full",
            &["`paper`, `ci`"],
        );
        rejects(
            "start_s = 5",
            "start_s = { normal = [1, 2] }",
            "flows[1].start_s.normal",
            &["uniform", "choice"],
        );
    }

    #[test]
    fn wrong_types_and_missing_fields_are_named() {
        rejects(
            "rate_mbit = 10\n",
            "rate_mbit = \"ten\"\n",
            "defaults.rate_mbit",
            &["expected f64"],
        );
        rejects(
            "title = \"A scenario for error tests\"\n",
            "",
            "title",
            &["required"],
        );
        rejects(
            "\n[profiles.ci]\nsweep = { rtt_ms = [22, 42, 82] }\nduration_s = 40\n",
            "\n",
            "profiles.ci",
            &["required"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nbuffer_pkts = 30",
            "defaults.buffer_pkts",
            &["only one of"],
        );
        rejects(
            "rtt_ms = [22, 42, 82] }\nduration_s = 40",
            "rtt_ms = [22, \"x\"] }\nduration_s = 40",
            "profiles.ci.sweep.rtt_ms[1]",
            &["expected a number"],
        );
    }

    #[test]
    fn syntax_errors_give_the_line() {
        let e = Scenario::parse("id = \"T0.1\"\nname = \n", Path::new("x.toml")).unwrap_err();
        assert!(matches!(e, ScenarioError::Syntax { .. }));
        assert!(e.to_string().starts_with("x.toml: line 2, column"), "{e}");
    }

    #[test]
    fn unknown_metrics_and_plots_are_rejected() {
        rejects(
            "metrics = [\"M1\"]",
            "metrics = [\"M1\", \"M18\"]",
            "metrics[1]",
            &["M18", "M17"],
        );
        rejects(
            "plots = [\"cwnd\"]",
            "plots = [\"pie\"]",
            "plots[0]",
            &["`pie`", "ratio_vs_rtt"],
        );
        rejects("id = \"T9.1\"", "id = \"9.1\"", "id", &["T0.1"]);
        rejects(
            "name = \"bad-input\"",
            "name = \"FieldError Input\"",
            "name",
            &["lowercase"],
        );
    }

    #[test]
    fn an_undefined_variable_is_rejected() {
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\nrtt_ms = \"{rtt2_ms}\"\n",
            "flows[0].rtt_ms",
            &["`rtt2_ms`", "not defined", "rtt_ms"],
        );
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\nstart_s = \"{algo}\"\n",
            "flows[0].start_s",
            &["only in `cc`"],
        );
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{alg}\"\n",
            "flows[0].cc",
            &["\"{algo}\""],
        );
        rejects("x = \"rtt_ms\"", "x = \"rtt2_ms\"", "x", &["not defined"]);
        rejects(
            "duration_s = 40",
            "duration_s = 40\nvars = { rtt2 = 5 }",
            "profiles.ci.vars.rtt2",
            &["not used"],
        );
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rtt_msec = [22] }",
            "profiles.ci.sweep.rtt_msec",
            &["neither a parameter"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = 40\nvars = { loss = 0.1 }",
            "profiles.ci.vars.loss",
            &["is a parameter"],
        );
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { repeat = [1, 2] }",
            "profiles.ci.sweep.repeat",
            &["cannot be swept"],
        );
    }
}
