//! Expansion: a parsed scenario's profile into its run points — the sweep's cartesian
//! products, each point resolved into a concrete, checked run ([`RunPoint`]) with its flows
//! ([`FlowPlan`]), its bottleneck discipline, schedules and `[topology]` plan.

use std::collections::BTreeMap;

use crate::error::{FieldError, ScenarioError};
use crate::expr::{draw, eval, origins, range, Env, Factor, NumSpec, Sourced};
use crate::model::{
    bdp_pkts, buffer_pkts, is_dctcp, BdpRtt, CcRef, FlowPlan, Profile, RunPoint, BUFFER_KEYS,
    CI_MAX_RATE_MBIT, DEFAULT_BUFFER_FLOOR_PKTS, MAX_FLOWS_PER_POINT, MAX_RATE_MBIT,
};
use crate::rng::SplitMix64;
use crate::schedule::{self as sched, TraceUse, DEFAULT_TRACE_BIN_MS};
use crate::schema::Scenario;
use crate::sweep::SweepCase;
use crate::traffic::ProbePlan;
use cctl_netem::aqm::{Aqm, Qdisc, AQM_PARAMS};

impl Scenario {
    /// Whether the test reports per-packet delays: its metrics include M13 (queueing delay)
    /// or one of its plots draws delays. `cctl bench run` turns the delay taps on for it
    /// by default, and off for the others.
    pub fn wants_delays(&self) -> bool {
        self.metrics.iter().any(|m| m == "M13") || self.plots.iter().any(|p| p.contains("delay"))
    }

    /// Emulated time the whole profile takes for one algorithm: Σ duration × repeat, in s.
    pub fn total_duration_s(&self, profile: Profile) -> Result<f64, ScenarioError> {
        let points = self.expand(profile, self.seed(profile))?;
        Ok(points.iter().map(|p| p.duration_s).sum::<f64>() * f64::from(self.repeat(profile)))
    }

    pub(super) fn point(
        &self,
        profile: Profile,
        index: usize,
        env: Env,
        vars: BTreeMap<String, f64>,
        settings: BTreeMap<String, (String, String)>,
        seed: u64,
    ) -> Result<RunPoint, FieldError> {
        let at = self.layer(profile).at.clone();
        let ctx = if vars.is_empty() && settings.is_empty() {
            format!("(profile {profile})")
        } else {
            let v: Vec<String> = vars
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .chain(settings.iter().map(|(k, (v, _))| format!("{k}={v}")))
                .collect();
            format!("(profile {profile}, point {})", v.join(", "))
        };
        let required = |k: &str| -> Result<&Sourced, FieldError> {
            env.get(k).ok_or_else(|| {
                FieldError::new(
                    format!("{at}.{k}"),
                    format!("missing: set `{k}` in [defaults] or [{at}]"),
                )
            })
        };
        let positive = |s: &Sourced, what: &str| -> Result<f64, FieldError> {
            if s.value.is_finite() && s.value > 0.0 {
                Ok(s.value)
            } else {
                Err(FieldError::new(
                    &s.field,
                    format!("{} is not allowed: {what} must be > 0 {ctx}", s.value),
                ))
            }
        };
        let cap = |s: &Sourced| -> Result<(), FieldError> {
            if s.value > MAX_RATE_MBIT {
                return Err(FieldError::new(
                    &s.field,
                    format!("{} Mbit/s is above the highest capacity a scenario may use, {MAX_RATE_MBIT} Mbit/s (10 Gbit/s)", s.value),
                ));
            }
            if profile == Profile::Ci && s.value > CI_MAX_RATE_MBIT {
                let inherited = if s.field.starts_with(&at) {
                    String::new()
                } else {
                    format!(" (inherited by {at})")
                };
                return Err(FieldError::new(
                    &s.field,
                    format!("{} Mbit/s{inherited} is above the ci profile's cap of {CI_MAX_RATE_MBIT} Mbit/s (so that an emulated guest keeps up; higher rates belong in the paper profile)", s.value),
                ));
            }
            Ok(())
        };
        // The most specific layer that sets rate_schedule or rate_trace decides.
        let rate_layer = [self.layer(profile), &self.defaults]
            .into_iter()
            .find(|l| l.schedules.rate.is_some() || l.schedules.trace.is_some());
        let trace = rate_layer.and_then(|l| l.schedules.trace.as_ref().map(|t| (t, &l.at)));
        // With a trace, rate_mbit (the BDP's rate) defaults to the trace's mean.
        let trace_rate = trace.map(|(t, at)| Sourced {
            value: t.mean_mbit(),
            field: format!("{at}.rate_trace"),
        });
        let rate_s = match (env.get("rate_mbit"), &trace_rate) {
            (Some(s), _) => s,
            (None, Some(t)) => t,
            (None, None) => required("rate_mbit")?,
        };
        let rate = positive(rate_s, "the capacity (Mbit/s)")?;
        cap(rate_s)?;
        let reverse = match env.get("reverse_rate_mbit") {
            Some(s) => {
                cap(s)?;
                Some(positive(s, "the reverse-path capacity (Mbit/s)")?)
            }
            None => None,
        };
        // 0 adds no delay: the path's own RTT (tens of usec) on tbf alone, no netem.
        let rtt = {
            let s = required("rtt_ms")?;
            if s.value.is_finite() && s.value >= 0.0 {
                s.value
            } else {
                return Err(FieldError::new(
                    &s.field,
                    format!(
                        "{} is not allowed: the RTT (ms) must be ≥ 0 (0: no added delay) {ctx}",
                        s.value
                    ),
                ));
            }
        };
        let duration = positive(required("duration_s")?, "the duration (s)")?;
        let loss = match env.get("loss") {
            Some(s) if !(0.0..1.0).contains(&s.value) => {
                return Err(FieldError::new(
                    &s.field,
                    format!("{} is outside [0, 1): a loss probability {ctx}", s.value),
                ))
            }
            Some(s) => s.value,
            None => 0.0,
        };
        let floor = env
            .get("buffer_floor_pkts")
            .map_or(DEFAULT_BUFFER_FLOOR_PKTS as f64, |s| s.value);
        let web_sessions = env.get("web_sessions").map_or(0.0, |s| s.value) as u32;

        let mut flows = self.flows_of(&env, duration, seed, index, &ctx)?;
        let topology = match &self.topology {
            Some(t) => Some(t.plan(
                &env,
                &mut flows,
                self.setting(profile, |l| &l.bdp_rtt).unwrap_or_default(),
                floor,
                profile,
                &ctx,
            )?),
            None => None,
        };
        let bdp_rtt = match self.setting(profile, |l| &l.bdp_rtt).unwrap_or_default() {
            BdpRtt::Flow1 => flows.first().map_or(rtt, |f| f.rtt_ms),
            BdpRtt::Min => flows
                .iter()
                .map(|f| f.rtt_ms)
                .reduce(f64::min)
                .unwrap_or(rtt),
        };
        let bdp = bdp_pkts(rate, bdp_rtt);

        let (raw_pkts, fraction, buf_s) = if let Some(s) = env.get("buffer_bdp") {
            (s.value * bdp, Some(s.value), s)
        } else if let Some(s) = env.get("buffer_pkts") {
            (s.value, None, s)
        } else if let Some(s) = env.get("buffer_ms") {
            (bdp_pkts(rate, s.value), None, s)
        } else {
            return Err(FieldError::new(
                format!("{at}.buffer_bdp"),
                format!(
                    "missing: set one of {} in [defaults] or [{at}]",
                    BUFFER_KEYS.join(", ")
                ),
            ));
        };
        if !(raw_pkts.is_finite() && raw_pkts >= 0.0) || buf_s.value < 0.0 {
            return Err(FieldError::new(
                &buf_s.field,
                format!(
                    "{} is not allowed: the buffer must be ≥ 0 {ctx}",
                    buf_s.value
                ),
            ));
        }
        let (pkts, floored) = buffer_pkts(raw_pkts, floor);
        if pkts < 1.0 {
            return Err(FieldError::new(
                &buf_s.field,
                format!("the buffer is {pkts} packets after the floor (buffer_floor_pkts = {floor}); a drop-tail queue needs at least 1 packet {ctx}"),
            ));
        }
        if pkts > f64::from(u32::MAX) {
            return Err(FieldError::new(
                &buf_s.field,
                format!("the buffer is {pkts} packets, more than a queue can hold {ctx}"),
            ));
        }
        let (rate_schedule, rate_trace) = match (rate_layer, trace) {
            (_, Some((t, at))) => {
                let bin_ms = self
                    .setting(profile, |l| &l.trace_bin_ms)
                    .unwrap_or(DEFAULT_TRACE_BIN_MS);
                let steps = t.bin(bin_ms, duration);
                if let Some(top) = steps.iter().map(|s| s.value).reduce(f64::max) {
                    cap(&Sourced {
                        value: top,
                        field: format!("{at}.rate_trace"),
                    })?;
                }
                let used = TraceUse {
                    file: t.file.clone(),
                    bin_ms,
                    mean_mbit: t.mean_mbit(),
                    period_ms: t.period_ms(),
                };
                (steps, Some(used))
            }
            (Some(l), None) => {
                let entries = l.schedules.rate.as_deref().unwrap_or_default();
                for e in entries {
                    cap(&Sourced {
                        value: e.value,
                        field: format!("{}.rate_mbit", e.field),
                    })?;
                }
                (sched::resolve(entries, rate, duration, &ctx)?, None)
            }
            (None, None) => (Vec::new(), None),
        };
        let delay_schedule = match [self.layer(profile), &self.defaults]
            .into_iter()
            .find_map(|l| l.schedules.delay.as_ref())
        {
            Some(entries) => sched::resolve(entries, rtt, duration, &ctx)?,
            None => Vec::new(),
        };
        if topology.is_some() && (!rate_schedule.is_empty() || !delay_schedule.is_empty()) {
            let key = if rate_schedule.is_empty() {
                "delay_schedule"
            } else if rate_trace.is_some() {
                "rate_trace"
            } else {
                "rate_schedule"
            };
            let at = [self.layer(profile), &self.defaults]
                .into_iter()
                .find(|l| match key {
                    "delay_schedule" => l.schedules.delay.is_some(),
                    "rate_trace" => l.schedules.trace.is_some(),
                    _ => l.schedules.rate.is_some(),
                })
                .map_or("defaults".to_string(), |l| l.at.clone());
            return Err(FieldError::new(
                format!("{at}.{key}"),
                "a schedule changes the dumbbell's one bottleneck; it is not implemented on a [topology] chain yet",
            ));
        }
        let tbf_burst_ms = self.setting(profile, |l| &l.tbf_burst_ms);
        if let Some(b) = tbf_burst_ms.filter(|b| !(*b > 0.0 && *b <= 1000.0)) {
            let at = if self.layer(profile).raw.tbf_burst_ms.is_some() {
                at.clone()
            } else {
                "defaults".to_string()
            };
            return Err(FieldError::new(
                format!("{at}.tbf_burst_ms"),
                format!("{b} is not allowed: the tbf bucket must be in (0, 1000] ms"),
            ));
        }
        if profile == Profile::Ci {
            if let Some(f) = flows
                .iter()
                .find(|f| f.rate_mbit.is_some_and(|r| r > CI_MAX_RATE_MBIT))
            {
                return Err(FieldError::new(
                    format!("flows[{}].rate_mbit", f.entry),
                    format!(
                        "{} Mbit/s is above the ci profile's cap of {CI_MAX_RATE_MBIT} Mbit/s \
                         (so that an emulated guest keeps up) {ctx}",
                        f.rate_mbit.unwrap_or_default()
                    ),
                ));
            }
        }
        let probes = self.probes_of(&env, duration, &ctx)?;
        let aqm = self.aqm_of(profile, &env, &settings, pkts as u32, &flows, &ctx)?;
        let init_ssthresh_pkts = match env.get("init_ssthresh_bdp") {
            Some(s) => Some(
                (positive(s, "the initial ssthresh fraction")? * bdp)
                    .round()
                    .max(2.0) as u32,
            ),
            None => None,
        };
        Ok(RunPoint {
            index,
            vars,
            rate_mbit: rate,
            reverse_rate_mbit: reverse,
            rtt_ms: rtt,
            bdp_rtt_ms: bdp_rtt,
            bdp_pkts: bdp,
            buffer_bdp: fraction.unwrap_or(pkts / bdp),
            buffer_pkts: pkts as u32,
            buffer_floored: floored,
            loss,
            loss_model: self.setting(profile, |l| &l.loss_model).unwrap_or_default(),
            init_ssthresh_pkts,
            web_sessions,
            web_model: self.setting(profile, |l| &l.web_model).unwrap_or_default(),
            web_cc: self
                .setting(profile, |l| &l.web_cc)
                .unwrap_or_else(|| "reno".to_string()),
            duration_s: duration,
            flows,
            topology,
            rate_schedule,
            delay_schedule,
            rate_trace,
            tbf_burst_ms,
            aqm,
            settings: settings.into_iter().map(|(k, (v, _))| (k, v)).collect(),
            probes,
        })
    }

    /// The `[[probes]]` of a point: their times resolved and checked against the run.
    fn probes_of(&self, env: &Env, duration: f64, ctx: &str) -> Result<Vec<ProbePlan>, FieldError> {
        let mut plans = Vec::with_capacity(self.probes.len());
        for (i, p) in self.probes.iter().enumerate() {
            let at = |k: &str| format!("probes[{i}].{k}");
            let start_s = match &p.start_s {
                Some(x) => eval(x, env, &at("start_s"))?,
                None => 0.0,
            };
            let stop_s = match &p.stop_s {
                Some(x) => eval(x, env, &at("stop_s"))?,
                None => duration,
            };
            if !(start_s.is_finite() && start_s >= 0.0) {
                return Err(FieldError::new(
                    at("start_s"),
                    format!("{start_s} s is not allowed: must be ≥ 0 {ctx}"),
                ));
            }
            if stop_s > duration + 1e-9 {
                return Err(FieldError::new(
                    at("stop_s"),
                    format!(
                        "{stop_s} s is after the end of the run (duration_s = {duration}) {ctx}"
                    ),
                ));
            }
            if start_s >= stop_s {
                let key = if p.stop_s.is_some() {
                    "stop_s"
                } else {
                    "start_s"
                };
                return Err(FieldError::new(
                    at(key),
                    format!(
                        "probes would start at {start_s} s, not before their stop at {stop_s} s; \
                         start_s must be < stop_s {ctx}"
                    ),
                ));
            }
            plans.push(ProbePlan {
                entry: i,
                interval_ms: p.interval_ms,
                size_bytes: p.size_bytes,
                dscp: p.dscp,
                start_s,
                stop_s,
            });
        }
        Ok(plans)
    }

    /// The bottleneck discipline of a point: `qdisc` (swept, or from the layers), `ecn`, and
    /// the parameters of that qdisc, checked; a parameter of another qdisc is an error unless
    /// `qdisc` is swept (then it applies to the points whose qdisc takes it). A flow running
    /// dctcp needs ECN marking at the bottleneck.
    fn aqm_of(
        &self,
        profile: Profile,
        env: &Env,
        settings: &BTreeMap<String, (String, String)>,
        buffer_pkts: u32,
        flows: &[FlowPlan],
        ctx: &str,
    ) -> Result<Aqm, FieldError> {
        let layer_field = |k: &str| {
            if self.layer(profile).raw.qdisc.is_some() && k == "qdisc"
                || self.layer(profile).raw.ecn.is_some() && k == "ecn"
            {
                format!("{}.{k}", self.layer(profile).at)
            } else {
                format!("defaults.{k}")
            }
        };
        let (name, qdisc_field, swept) = match settings.get("qdisc") {
            Some((v, field)) => (v.clone(), field.clone(), true),
            None => (
                self.setting(profile, |l| &l.qdisc)
                    .unwrap_or_else(|| "pfifo".into()),
                layer_field("qdisc"),
                false,
            ),
        };
        let qdisc = Qdisc::parse(&name)
            .ok_or_else(|| FieldError::new(&qdisc_field, Qdisc::unknown(&name)))?;
        let mut aqm = Aqm {
            qdisc,
            ecn: self.setting(profile, |l| &l.ecn).unwrap_or(false),
            ..Aqm::default()
        };
        for &(key, owner) in AQM_PARAMS {
            let Some(s) = env.get(key) else { continue };
            if owner != qdisc {
                if swept {
                    continue;
                }
                return Err(FieldError::new(
                    &s.field,
                    format!(
                        "`{key}` is a parameter of {owner}, but the bottleneck is {qdisc} \
                         ({qdisc_field}); remove it or set qdisc = \"{owner}\" {ctx}"
                    ),
                ));
            }
            let v = s.value;
            let bad =
                |why: &str| FieldError::new(&s.field, format!("{v} is not allowed: {why} {ctx}"));
            match key {
                "red_probability" if !(v > 0.0 && v <= 1.0) => {
                    return Err(bad("a probability in (0, 1]"))
                }
                "red_min_pkts" | "red_max_pkts" if !(v >= 1.0 && v <= f64::from(buffer_pkts)) => {
                    return Err(bad(&format!(
                        "RED's thresholds are in packets, from 1 to the buffer ({buffer_pkts} packets)"
                    )))
                }
                _ if !(v.is_finite() && v > 0.0) => return Err(bad("must be > 0 ms")),
                _ => {}
            }
            let slot = match key {
                "codel_target_ms" => &mut aqm.codel_target_ms,
                "codel_interval_ms" => &mut aqm.codel_interval_ms,
                "ce_threshold_ms" => &mut aqm.ce_threshold_ms,
                "pie_target_ms" => &mut aqm.pie_target_ms,
                "red_min_pkts" => &mut aqm.red_min_pkts,
                "red_max_pkts" => &mut aqm.red_max_pkts,
                _ => &mut aqm.red_probability,
            };
            *slot = Some(v);
        }
        match qdisc {
            Qdisc::FqCodel => {
                let t = *aqm
                    .codel_target_ms
                    .get_or_insert(cctl_netem::aqm::CODEL_TARGET_MS_DEFAULT);
                let i = *aqm
                    .codel_interval_ms
                    .get_or_insert(cctl_netem::aqm::CODEL_INTERVAL_MS_DEFAULT);
                if t >= i {
                    let field = env.get("codel_target_ms").map_or_else(
                        || env["codel_interval_ms"].field.clone(),
                        |s| s.field.clone(),
                    );
                    return Err(FieldError::new(
                        field,
                        format!(
                            "CoDel's target ({t} ms) must be below its interval ({i} ms) {ctx}"
                        ),
                    ));
                }
            }
            Qdisc::Pie => {
                aqm.pie_target_ms
                    .get_or_insert(cctl_netem::aqm::PIE_TARGET_MS_DEFAULT);
            }
            Qdisc::Red => {
                let (min, max) =
                    cctl_netem::aqm::red_defaults(buffer_pkts, aqm.red_min_pkts, aqm.red_max_pkts);
                if let (Some(lo), Some(hi)) = (aqm.red_min_pkts, aqm.red_max_pkts) {
                    if lo > hi {
                        return Err(FieldError::new(
                            &env["red_min_pkts"].field,
                            format!("red_min_pkts = {lo} is above red_max_pkts = {hi} {ctx}"),
                        ));
                    }
                }
                aqm.red_min_pkts = Some(min);
                aqm.red_max_pkts = Some(max);
                aqm.red_probability
                    .get_or_insert(cctl_netem::aqm::RED_PROBABILITY_DEFAULT);
            }
            Qdisc::Pfifo | Qdisc::Cake => {}
        }
        if !aqm.marks() {
            for (i, f) in flows.iter().enumerate() {
                if let CcRef::Named(n) = &f.cc {
                    if is_dctcp(n) {
                        return Err(FieldError::new(
                            format!("flows[{}].cc", f.entry),
                            format!(
                                "dctcp needs ECN marking at the bottleneck: set ecn = true and a \
                                 marking qdisc (red with red_min_pkts = red_max_pkts = K and \
                                 red_probability = 1, or fq_codel with ce_threshold_ms); here \
                                 qdisc = {qdisc} ({qdisc_field}), ecn = {} (flow {}) {ctx}",
                                aqm.ecn,
                                i + 1
                            ),
                        ));
                    }
                }
            }
        }
        Ok(aqm)
    }

    pub(super) fn flows_of(
        &self,
        env: &Env,
        duration: f64,
        seed: u64,
        index: usize,
        ctx: &str,
    ) -> Result<Vec<FlowPlan>, FieldError> {
        let mut rng =
            SplitMix64::new(seed ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let mut plans = Vec::new();
        for (e, f) in self.flows.iter().enumerate() {
            let at = |k: &str| format!("flows[{e}].{k}");
            let count = eval(&f.count, env, &at("count"))?;
            // A count driven by a variable may be 0: the table has no flow at that point
            // (how a sweep turns flow mixes on and off, e.g. modern-mix).
            let from_var = f.count.factors.iter().any(|x| matches!(x, Factor::Var(_)));
            if from_var && count == 0.0 {
                continue;
            }
            if count.fract() != 0.0 || count < 1.0 {
                return Err(FieldError::new(
                    at("count"),
                    format!(
                        "{count} is not allowed: a whole number ≥ 1{} {ctx}",
                        origins([&f.count], env)
                    ),
                ));
            }
            let step = eval(&f.start_step_s, env, &at("start_step_s"))?;
            if step < 0.0 {
                return Err(FieldError::new(
                    at("start_step_s"),
                    format!(
                        "{step} is not allowed: must be ≥ 0{} {ctx}",
                        origins([&f.start_step_s], env)
                    ),
                ));
            }
            let (size_bytes, rate_mbit) = sizes(f, env, e, ctx)?;
            check_times(f, env, e, (duration, count, step), ctx)?;
            let cc = f.cc.clone();
            for k in 0..count as usize {
                let rtt_ms = draw(&f.rtt_ms, env, &mut rng);
                let start = draw(&f.start_s, env, &mut rng) + k as f64 * step;
                let stop = f
                    .stop_s
                    .as_ref()
                    .map_or(duration, |s| draw(s, env, &mut rng));
                let mut push = |start_s: f64, stop_s: f64| -> Result<(), FieldError> {
                    if plans.len() >= MAX_FLOWS_PER_POINT {
                        return Err(FieldError::new(
                            format!("flows[{e}]"),
                            format!("more than {MAX_FLOWS_PER_POINT} flows in one run {ctx}"),
                        ));
                    }
                    plans.push(FlowPlan {
                        entry: e,
                        cc: cc.clone(),
                        rtt_ms,
                        start_s,
                        stop_s,
                        size_bytes,
                        kind: f.kind,
                        direction: f.direction,
                        rate_mbit,
                    });
                    Ok(())
                };
                match &f.on_s {
                    None => push(start, stop)?,
                    Some(on) => {
                        let mut t = start;
                        while t < stop {
                            let end = (t + draw(on, env, &mut rng)).min(stop);
                            if end > t {
                                push(t, end)?;
                            }
                            match &f.off_s {
                                Some(off) => t = end + draw(off, env, &mut rng),
                                None => break,
                            }
                        }
                    }
                }
            }
        }
        if plans.is_empty() {
            return Err(FieldError::new(
                "flows",
                format!("every flow table has count 0: a run needs at least one flow {ctx}"),
            ));
        }
        Ok(plans)
    }
}

/// Flow table `e`'s transfer size (bytes) and udp-cbr rate (Mbit/s), each checked.
fn sizes(
    f: &crate::schema::FlowSpec,
    env: &Env,
    e: usize,
    ctx: &str,
) -> Result<(Option<u64>, Option<f64>), FieldError> {
    let at = |k: &str| format!("flows[{e}].{k}");
    let size_bytes = match &f.size_mb {
        Some(x) => {
            let mb = eval(x, env, &at("size_mb"))?;
            if mb <= 0.0 {
                return Err(FieldError::new(
                    at("size_mb"),
                    format!(
                        "{mb} is not allowed: must be > 0 MB{} {ctx}",
                        origins([x], env)
                    ),
                ));
            }
            Some((mb * 1e6).round() as u64)
        }
        None => None,
    };
    let rate_mbit = match &f.rate_mbit {
        Some(x) => {
            let r = eval(x, env, &at("rate_mbit"))?;
            if !(r.is_finite() && r > 0.0 && r <= MAX_RATE_MBIT) {
                return Err(FieldError::new(
                    at("rate_mbit"),
                    format!(
                        "{r} Mbit/s is not allowed: a udp-cbr rate is > 0 and at most \
                         {MAX_RATE_MBIT} Mbit/s{} {ctx}",
                        origins([x], env)
                    ),
                ));
            }
            Some(r)
        }
        None => None,
    };
    Ok((size_bytes, rate_mbit))
}

/// Refuses flow table `e`'s RTT, start, stop and on/off periods where they cannot run:
/// negative, after the run's end, or a start (of the last of `count` flows `step` s apart)
/// not before its stop.
fn check_times(
    f: &crate::schema::FlowSpec,
    env: &Env,
    e: usize,
    (duration, count, step): (f64, f64, f64),
    ctx: &str,
) -> Result<(), FieldError> {
    let at = |k: &str| format!("flows[{e}].{k}");
    let (rtt_lo, _) = range(&f.rtt_ms, env, &at("rtt_ms"))?;
    if rtt_lo.is_nan() || rtt_lo < 0.0 {
        return Err(FieldError::new(
            at("rtt_ms"),
            format!(
                "{rtt_lo} ms is not allowed: an RTT must be ≥ 0 (0: no added delay){} {ctx}",
                origins(f.rtt_ms.exprs(), env)
            ),
        ));
    }
    let (start_lo, start_hi) = range(&f.start_s, env, &at("start_s"))?;
    if start_lo < 0.0 {
        return Err(FieldError::new(
            at("start_s"),
            format!(
                "{start_lo} s is not allowed: must be ≥ 0{} {ctx}",
                origins(f.start_s.exprs(), env)
            ),
        ));
    }
    let (stop_lo, stop_hi, stop_field) = match &f.stop_s {
        Some(s) => {
            let (lo, hi) = range(s, env, &at("stop_s"))?;
            (lo, hi, at("stop_s"))
        }
        None => (duration, duration, "duration_s".to_string()),
    };
    if stop_hi > duration + 1e-9 {
        return Err(FieldError::new(
            at("stop_s"),
            format!(
                "{stop_hi} s is after the end of the run (duration_s = {duration}){} {ctx}",
                origins(f.stop_s.iter().flat_map(NumSpec::exprs), env)
            ),
        ));
    }
    let last_start = start_hi + (count - 1.0) * step;
    if last_start >= stop_lo {
        return Err(FieldError::new(
            at("start_s"),
            format!(
                "a flow would start at {last_start} s, not before its stop at {stop_lo} s \
                 ({stop_field}); start_s must be < stop_s{} {ctx}",
                origins(
                    f.start_s
                        .exprs()
                        .into_iter()
                        .chain(f.stop_s.iter().flat_map(NumSpec::exprs)),
                    env
                )
            ),
        ));
    }
    for (k, spec) in [("on_s", &f.on_s), ("off_s", &f.off_s)] {
        let Some(spec) = spec else { continue };
        let (lo, _) = range(spec, env, &at(k))?;
        if lo <= 0.0 {
            return Err(FieldError::new(
                at(k),
                format!(
                    "{lo} s is not allowed: periods must be > 0{} {ctx}",
                    origins(spec.exprs(), env)
                ),
            ));
        }
    }
    Ok(())
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
    use std::path::Path;

    use std::collections::BTreeSet;

    use super::*;
    use crate::model::LossModel;
    use crate::test_input::{rejects, shipped, GOOD};
    use crate::{find, BUILTIN_FILES};

    #[test]
    fn bdp_of_100_mbit_by_82_ms_is_683_packets_and_20_percent_is_137() {
        assert_eq!(bdp_pkts(100.0, 82.0).round(), 683.0);
        assert_eq!(
            buffer_pkts(0.2 * bdp_pkts(100.0, 82.0), 2.0),
            (137.0, false)
        );
        assert_eq!(bdp_pkts(250.0, 42.0), 875.0);
        assert_eq!(buffer_pkts(0.2 * 875.0, 2.0), (175.0, false));
        // The same through a scenario: T0.4's paper grid at 20 % BDP, T0.1 at 250 Mb/s × 42 ms.
        let t04 = shipped("T0.4").expand(Profile::Paper, 1).unwrap();
        let p = t04.iter().find(|p| p.vars["buffer_bdp"] == 0.2).unwrap();
        assert_eq!(
            (p.bdp_pkts.round(), p.buffer_pkts, p.buffer_floored),
            (683.0, 137, false)
        );
        let one_percent = t04.iter().find(|p| p.vars["buffer_bdp"] == 0.01).unwrap();
        assert_eq!(one_percent.buffer_pkts, 7, "1 % of 683.3 rounds to 7");
        let t01 = shipped("T0.1").expand(Profile::Paper, 1).unwrap();
        let p = t01
            .iter()
            .find(|p| p.rate_mbit == 250.0 && p.rtt_ms == 42.0)
            .unwrap();
        assert_eq!((p.bdp_pkts, p.buffer_pkts), (875.0, 175));
    }

    #[test]
    fn one_mbit_by_22_ms_at_20_percent_is_floored_to_2_packets_and_flagged() {
        assert_eq!(buffer_pkts(0.2 * bdp_pkts(1.0, 22.0), 2.0), (2.0, true));
        let text = BUILTIN_FILES[0]
            .1
            .replace("rate_mbit = [10, 250]", "rate_mbit = [1, 10, 100, 250]");
        let s = Scenario::parse(&text, Path::new("t0_1_full_grid.toml")).unwrap();
        let points = s.expand(Profile::Paper, 1).unwrap();
        assert_eq!(points.len(), 20);
        let p = points
            .iter()
            .find(|p| p.rate_mbit == 1.0 && p.rtt_ms == 22.0)
            .unwrap();
        assert!((p.bdp_pkts - 1.8333).abs() < 1e-3);
        assert_eq!(
            (p.buffer_pkts, p.buffer_floored, p.buffer_bdp),
            (2, true, 0.2)
        );
        let floored: Vec<f64> = points
            .iter()
            .filter(|p| p.buffer_floored)
            .map(|p| p.rtt_ms)
            .collect();
        // 1 Mb/s: 20 % of 1.8/3.5/6.8 packets is below 2; of 13.5 and 27 it is not.
        assert_eq!(floored, [22.0, 42.0, 82.0]);
        assert!(points
            .iter()
            .filter(|p| p.rate_mbit >= 10.0)
            .all(|p| !p.buffer_floored));
    }

    #[test]
    fn a_buffer_below_one_packet_after_the_floor_is_rejected() {
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.001\nbuffer_floor_pkts = 0",
            "defaults.buffer_bdp",
            &["at least 1 packet", "buffer_floor_pkts = 0"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_pkts = 0\nbuffer_floor_pkts = 0",
            "defaults.buffer_pkts",
            &["at least 1 packet"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = -0.2",
            "defaults.buffer_bdp",
            &["≥ 0"],
        );
    }

    #[test]
    fn a_zero_rtt_point_adds_no_delay_to_any_flow() {
        let text = GOOD.replacen(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rtt_ms = [0, 42] }",
            1,
        );
        let sc = Scenario::parse(&text, Path::new("/tmp/cases/zero.toml")).unwrap();
        let points = sc.expand(Profile::Ci, 1).unwrap();
        let zero = points
            .iter()
            .find(|p| p.rtt_ms == 0.0)
            .expect("a 0-ms point");
        assert!(zero.flows.iter().all(|f| f.rtt_ms == 0.0));
        let other = points
            .iter()
            .find(|p| p.rtt_ms == 42.0)
            .expect("a 42-ms point");
        assert!(other.flows.iter().all(|f| f.rtt_ms == 42.0));
    }

    #[test]
    fn negative_delays_rates_and_durations_are_rejected() {
        rejects(
            "rate_mbit = 10\n",
            "rate_mbit = -10\n",
            "defaults.rate_mbit",
            &["> 0"],
        );
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rtt_ms = [22, -42, 82] }",
            "profiles.ci.sweep.rtt_ms[1]",
            &["≥ 0", "0: no added delay"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = -40",
            "profiles.ci.duration_s",
            &["> 0"],
        );
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\nrtt_ms = -5\n",
            "flows[0].rtt_ms",
            &["≥ 0", "0: no added delay"],
        );
        rejects("start_s = 5", "start_s = -5", "flows[1].start_s", &["≥ 0"]);
    }

    #[test]
    fn loss_model_is_random_unless_periodic_is_asked_for() {
        let v1 = find("native-comparison").unwrap();
        let pts = v1.expand(Profile::Ci, 1).unwrap();
        let lossy: Vec<_> = pts.iter().filter(|p| p.loss > 0.0).collect();
        assert_eq!(lossy.len(), 1);
        assert_eq!(lossy[0].loss_model, LossModel::Periodic);
        let t3 = find("t3.3").unwrap();
        assert!(t3
            .expand(Profile::Ci, 1)
            .unwrap()
            .iter()
            .all(|p| p.loss_model == LossModel::Random));
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nloss_model = \"bursty\"",
            "defaults.loss_model",
            &["random", "periodic"],
        );
    }

    #[test]
    fn loss_outside_zero_to_one_is_rejected() {
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nloss = 1.0",
            "defaults.loss",
            &["[0, 1)"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = 40\nloss = -0.01",
            "profiles.ci.loss",
            &["[0, 1)"],
        );
    }

    #[test]
    fn a_ci_profile_above_50_mbit_is_rejected() {
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { rate_mbit = [10, 100] }",
            "profiles.ci.sweep.rate_mbit[1]",
            &["100 Mbit/s", "cap of 50"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = 40\nrate_mbit = 51",
            "profiles.ci.rate_mbit",
            &["cap of 50"],
        );
        rejects(
            "rate_mbit = 10\n",
            "rate_mbit = 100\n",
            "defaults.rate_mbit",
            &["inherited by profiles.ci", "cap of 50"],
        );
        rejects(
            "duration_s = 40",
            "duration_s = 40\nreverse_rate_mbit = 60",
            "profiles.ci.reverse_rate_mbit",
            &["cap of 50"],
        );
    }

    #[test]
    fn a_flow_starting_after_its_stop_is_rejected() {
        rejects(
            "start_s = 5",
            "start_s = 50",
            "flows[1].start_s",
            &["not before its stop at 40", "profile ci"],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\nstop_s = 3",
            "flows[1].start_s",
            &["start_s must be < stop_s"],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\nstop_s = 700",
            "flows[1].stop_s",
            &["after the end of the run"],
        );
        rejects(
            "start_s = 5",
            "start_s = { uniform = [5, 45] }",
            "flows[1].start_s",
            &["45"],
        );
        rejects(
            "start_s = 5",
            "start_s = 5\ncount = 3\nstart_step_s = 20",
            "flows[1].start_s",
            &["45"],
        );
    }

    #[test]
    fn a_count_below_one_is_rejected() {
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\ncount = 0\n",
            "flows[0].count",
            &["≥ 1"],
        );
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\ncount = 1.5\n",
            "flows[0].count",
            &["whole number"],
        );
    }

    #[test]
    fn qdisc_keys_are_checked_and_name_the_field() {
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nqdisc = \"fifo\"",
            "defaults.qdisc",
            &["unknown qdisc \"fifo\"", "pfifo, fq_codel, pie, red, cake"],
        );
        rejects(
            "sweep = { rtt_ms = [22, 42, 82] }",
            "sweep = { qdisc = [\"pfifo\", \"codel\"] }",
            "profiles.ci.sweep.qdisc[1]",
            &["unknown qdisc \"codel\"", "fq_codel"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\nqdisc = \"pie\"\ncodel_target_ms = 5",
            "defaults.codel_target_ms",
            &["parameter of fq_codel", "bottleneck is pie"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\ncodel_target_ms = 5",
            "defaults.codel_target_ms",
            &["bottleneck is pfifo"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_pkts = 100\nqdisc = \"red\"\nred_min_pkts = 30\nred_max_pkts = 20",
            "defaults.red_min_pkts",
            &["above red_max_pkts"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_pkts = 100\nqdisc = \"red\"\nred_probability = 1.5",
            "defaults.red_probability",
            &["(0, 1]"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_pkts = 100\nqdisc = \"fq_codel\"\ncodel_target_ms = 100",
            "defaults.codel_target_ms",
            &["below its interval"],
        );
        rejects(
            "cc = \"reno\"",
            "cc = \"dctcp\"",
            "flows[1].cc",
            &["dctcp needs ECN marking", "ecn = true"],
        );
        rejects(
            "buffer_bdp = 0.2",
            "buffer_bdp = 0.2\necn = \"yes\"",
            "defaults.ecn",
            &["bool"],
        );
    }

    #[test]
    fn a_marking_aqm_takes_dctcp_and_resolves_its_defaults() {
        let text = GOOD
            .replacen("cc = \"reno\"", "cc = \"dctcp\"", 1)
            .replacen(
                "buffer_bdp = 0.2",
                "buffer_pkts = 100\nqdisc = \"red\"\necn = true\nred_min_pkts = 20\nred_max_pkts = 20\nred_probability = 1.0",
                1,
            );
        let sc = Scenario::parse(&text, Path::new("dctcp.toml")).unwrap();
        let p = &sc.expand(Profile::Ci, 1).unwrap()[0];
        assert!(p.aqm.marks());
        assert_eq!(
            (
                p.aqm.red_min_pkts,
                p.aqm.red_max_pkts,
                p.aqm.red_probability
            ),
            (Some(20.0), Some(20.0), Some(1.0))
        );
        let text = GOOD.replacen(
            "buffer_bdp = 0.2",
            "buffer_pkts = 60\nqdisc = \"fq_codel\"",
            1,
        );
        let sc = Scenario::parse(&text, Path::new("fq.toml")).unwrap();
        let p = &sc.expand(Profile::Ci, 1).unwrap()[0];
        assert_eq!(
            (p.aqm.codel_target_ms, p.aqm.codel_interval_ms, p.aqm.ecn),
            (Some(5.0), Some(100.0), false)
        );
    }

    #[test]
    fn modern_mix_sweeps_qdisc_strings_and_three_flow_mixes() {
        let sc = shipped("modern-mix");
        let ci = sc.expand(Profile::Ci, 1).unwrap();
        assert_eq!(ci.len(), 6);
        let mixes: Vec<(String, Vec<CcRef>)> = ci
            .iter()
            .map(|p| {
                (
                    p.aqm.qdisc.to_string(),
                    p.flows.iter().map(|f| f.cc.clone()).collect(),
                )
            })
            .collect();
        let named = |n: &str| CcRef::Named(n.into());
        assert_eq!(
            mixes[0],
            ("pfifo".into(), vec![CcRef::UnderTest, CcRef::UnderTest])
        );
        assert_eq!(
            mixes[1],
            ("fq_codel".into(), vec![CcRef::UnderTest, CcRef::UnderTest])
        );
        assert_eq!(mixes[3].1, vec![CcRef::UnderTest, named("bbr")]);
        assert_eq!(
            mixes[5],
            (
                "fq_codel".into(),
                vec![CcRef::UnderTest, named("native:cubic")]
            )
        );
        assert!(
            ci[1].label().contains("qdisc=fq_codel"),
            "{}",
            ci[1].label()
        );
        assert!(ci
            .iter()
            .all(|p| p.rate_mbit <= 50.0 && p.duration_s <= 20.0));
        let paper = sc.expand(Profile::Paper, 1).unwrap();
        assert_eq!(paper.len(), 24);
        let buffers: BTreeSet<u64> = paper.iter().map(|p| p.buffer_bdp.to_bits()).collect();
        let rtts: BTreeSet<u64> = paper.iter().map(|p| p.rtt_ms.to_bits()).collect();
        assert_eq!((buffers.len(), rtts.len()), (2, 2));
        // A literal count of 0 is still refused; one from a variable leaves the table out.
        rejects(
            "cc = \"{algo}\"\n",
            "cc = \"{algo}\"\ncount = 0\n",
            "flows[0].count",
            &["≥ 1"],
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
