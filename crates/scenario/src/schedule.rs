//! Time-varying links as a scenario gives them: rate and delay schedules (steps and linear
//! ramps) and mahimahi packet-delivery traces binned into piecewise-constant rates, parsed
//! and checked; `cctl_netem::schedule` applies the resulting steps during a run.
//!
//! A scenario gives the changes in `[defaults]` or a profile:
//! ```toml
//! rate_schedule  = [{ at_s = 5, rate_mbit = 5 }, { at_s = 10, rate_mbit = 20, ramp_s = 2 }]
//! delay_schedule = [{ at_s = 8, rtt_ms = 80 }]
//! rate_trace = "traces/lte_synthetic.mm"   # instead of rate_schedule
//! trace_bin_ms = 100                       # default 100
//! ```
//! A ramp reaches its value at `at_s + ramp_s`, in steps of [`RAMP_STEP_MS`]. A trace
//! (Winstein et al., "Stochastic Forecasts Achieve High Throughput and Low Delay over
//! Cellular Networks", NSDI 2013; mahimahi's `mm-link` format) has one integer millisecond
//! timestamp per line, each an opportunity to deliver one 1500-byte packet; it repeats with
//! a period of its last timestamp, as mahimahi loops it. tc cannot replay single delivery
//! opportunities, so the trace is counted in bins of `trace_bin_ms` and each bin becomes a
//! constant tbf rate.

use std::path::Path;

use serde::{Deserialize, Serialize};

pub use cctl_netem::schedule::{mean_over, value_at, Quantity, Step};

use crate::error::FieldError;
use crate::rng::SplitMix64;

/// Bytes one delivery opportunity of a mahimahi trace carries (one MTU-sized packet).
pub const TRACE_PACKET_BYTES: f64 = 1500.0;

/// Default width of the bins a trace is counted in, in ms.
pub const DEFAULT_TRACE_BIN_MS: u32 = 100;

/// Spacing of the steps a linear ramp is sent as, in ms.
pub const RAMP_STEP_MS: f64 = 100.0;

/// Rate a trace bin without any delivery opportunity gets, in Mbit/s: tbf cannot stop a
/// link, so an outage becomes a trickle (one 1500-byte packet per 240 ms).
pub const MIN_TRACE_RATE_MBIT: f64 = 0.05;

/// The shipped traces (`crates/scenario/traces/`), embedded as the shipped scenarios are: (path
/// relative to a shipped scenario, contents).
pub const BUILTIN_TRACES: &[(&str, &str)] = &[
    (
        "traces/lte_synthetic.mm",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/traces/lte_synthetic.mm"
        )),
    ),
    (
        "traces/step_down_up.mm",
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/traces/step_down_up.mm"
        )),
    ),
];

/// One entry of a `rate_schedule` or `delay_schedule` as written, checked on its own and
/// against the one before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its field, e.g. `defaults.rate_schedule[2]`.
    pub field: String,
    /// When the change starts, in s.
    pub at_s: f64,
    /// Target value (Mbit/s or ms).
    pub value: f64,
    /// Length of the linear ramp to it, in s (0: a step).
    pub ramp_s: f64,
}

/// The keys an entry of a schedule of `q` may have: `at_s`, the value's key
/// ([`Quantity::key`]) and `ramp_s`.
pub fn entry_keys(q: Quantity) -> [&'static str; 3] {
    ["at_s", q.key(), "ramp_s"]
}

/// Parses a schedule array (`value`, at field `at`) of `{ at_s, <key>, ramp_s }` tables.
///
/// Errors name the entry's field: a wrong type or unknown key, a negative time or ramp, a
/// rate ≤ 0 or an RTT < 0, an entry not after the previous one (or inside its ramp).
pub fn parse_schedule(
    value: &toml::Value,
    at: &str,
    q: Quantity,
) -> Result<Vec<Entry>, FieldError> {
    let list = value.as_array().ok_or_else(|| {
        FieldError::new(
            at,
            format!(
                "expected an array of tables such as [{{ at_s = 5, {} = 10 }}]",
                q.key()
            ),
        )
    })?;
    if list.is_empty() {
        return Err(FieldError::new(
            at,
            "empty: give at least one change, or leave the key out",
        ));
    }
    let mut out: Vec<Entry> = Vec::new();
    for (i, item) in list.iter().enumerate() {
        let field = format!("{at}[{i}]");
        let table = item.as_table().ok_or_else(|| {
            FieldError::new(
                &field,
                format!("expected a table {{ at_s = .., {} = .. }}", q.key()),
            )
        })?;
        let keys = entry_keys(q);
        for k in table.keys() {
            if !keys.contains(&k.as_str()) {
                return Err(FieldError::new(
                    format!("{field}.{k}"),
                    format!("unknown field; allowed keys: `{}`", keys.join("`, `")),
                ));
            }
        }
        let num = |k: &str, required: bool| -> Result<Option<f64>, FieldError> {
            match table.get(k) {
                Some(toml::Value::Integer(n)) => Ok(Some(*n as f64)),
                Some(toml::Value::Float(x)) if x.is_finite() => Ok(Some(*x)),
                Some(v) => Err(FieldError::new(
                    format!("{field}.{k}"),
                    format!("expected a number, got {v}"),
                )),
                None if required => Err(FieldError::new(
                    format!("{field}.{k}"),
                    "missing: this field is required",
                )),
                None => Ok(None),
            }
        };
        let at_s = num("at_s", true)?.unwrap_or(0.0);
        let v = num(q.key(), true)?.unwrap_or(0.0);
        let ramp_s = num("ramp_s", false)?.unwrap_or(0.0);
        if at_s < 0.0 {
            return Err(FieldError::new(
                format!("{field}.at_s"),
                format!("{at_s} s is not allowed: a time must be ≥ 0"),
            ));
        }
        match q {
            Quantity::Rate if v <= 0.0 => {
                return Err(FieldError::new(
                    format!("{field}.rate_mbit"),
                    format!("{v} is not allowed: a rate must be > 0 Mbit/s"),
                ))
            }
            Quantity::Rtt if v < 0.0 => {
                return Err(FieldError::new(
                    format!("{field}.rtt_ms"),
                    format!("{v} is not allowed: an RTT must be ≥ 0 ms"),
                ))
            }
            _ => {}
        }
        if ramp_s < 0.0 {
            return Err(FieldError::new(
                format!("{field}.ramp_s"),
                format!("{ramp_s} s is not allowed: a ramp must be ≥ 0 s (0: a step)"),
            ));
        }
        if let Some(prev) = out.last() {
            let free = prev.at_s + prev.ramp_s;
            if at_s <= prev.at_s || at_s < free {
                let why = if at_s <= prev.at_s {
                    format!("not after the previous change at {} s", prev.at_s)
                } else {
                    format!("inside the previous change's ramp, which ends at {free} s")
                };
                return Err(FieldError::new(
                    format!("{field}.at_s"),
                    format!(
                        "{at_s} s is {why} ({}): changes must be in time order",
                        prev.field
                    ),
                ));
            }
        }
        out.push(Entry {
            field,
            at_s,
            value: v,
            ramp_s,
        });
    }
    Ok(out)
}

/// Resolves checked entries into steps for a run of `duration_s` starting at `initial`
/// (Mbit/s or ms): a ramp becomes steps every [`RAMP_STEP_MS`], the last one at
/// `at_s + ramp_s` with the target value. `ctx` names the profile and point in errors.
///
/// Errors: a change (or the end of its ramp) at or after the end of the run.
pub fn resolve(
    entries: &[Entry],
    initial: f64,
    duration_s: f64,
    ctx: &str,
) -> Result<Vec<Step>, FieldError> {
    let mut steps = Vec::new();
    let mut prev = initial;
    for e in entries {
        if e.at_s + e.ramp_s >= duration_s {
            let (k, what) = if e.at_s >= duration_s || e.ramp_s == 0.0 {
                ("at_s", format!("{} s", e.at_s))
            } else {
                (
                    "ramp_s",
                    format!("the ramp's end at {} s", e.at_s + e.ramp_s),
                )
            };
            return Err(FieldError::new(
                format!("{}.{k}", e.field),
                format!(
                    "{what} is not before the end of the run (duration_s = {duration_s}) {ctx}"
                ),
            ));
        }
        if e.ramp_s > 0.0 {
            let n = (e.ramp_s * 1000.0 / RAMP_STEP_MS).ceil().max(1.0) as usize;
            for k in 1..=n {
                let f = k as f64 / n as f64;
                steps.push(Step {
                    at_s: e.at_s + e.ramp_s * f,
                    value: prev + (e.value - prev) * f,
                });
            }
        } else {
            steps.push(Step {
                at_s: e.at_s,
                value: e.value,
            });
        }
        prev = e.value;
    }
    Ok(steps)
}

/// The schedules one `[defaults]` or profile table sets, parsed and checked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerSchedules {
    /// `rate_schedule`.
    pub rate: Option<Vec<Entry>>,
    /// `delay_schedule`.
    pub delay: Option<Vec<Entry>>,
    /// `rate_trace`, read.
    pub trace: Option<Trace>,
}

impl LayerSchedules {
    /// Parses the schedule keys of the table at `at` (`defaults`, `profiles.ci`) of the
    /// scenario file `scenario` (trace paths resolve against its directory).
    ///
    /// Errors name the field: see [`parse_schedule`] and [`Trace::load`]; both
    /// `rate_schedule` and `rate_trace`; `trace_bin_ms = 0`.
    pub fn parse(
        rate: Option<&toml::Value>,
        delay: Option<&toml::Value>,
        trace: Option<&str>,
        bin_ms: Option<u32>,
        at: &str,
        scenario: &Path,
    ) -> Result<LayerSchedules, FieldError> {
        if rate.is_some() && trace.is_some() {
            return Err(FieldError::new(
                format!("{at}.rate_trace"),
                "rate_schedule is set too: give one of rate_schedule, rate_trace",
            ));
        }
        if bin_ms == Some(0) {
            return Err(FieldError::new(
                format!("{at}.trace_bin_ms"),
                "0 is not allowed: a bin must be at least 1 ms",
            ));
        }
        Ok(LayerSchedules {
            rate: rate
                .map(|v| parse_schedule(v, &format!("{at}.rate_schedule"), Quantity::Rate))
                .transpose()?,
            delay: delay
                .map(|v| parse_schedule(v, &format!("{at}.delay_schedule"), Quantity::Rtt))
                .transpose()?,
            trace: trace
                .map(|f| Trace::load(f, scenario, &format!("{at}.rate_trace")))
                .transpose()?,
        })
    }
}

/// How a run replays a trace (recorded with the run point).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceUse {
    /// The file as the scenario names it.
    pub file: String,
    /// Width of its bins, in ms.
    pub bin_ms: u32,
    /// Its mean rate over one period, in Mbit/s (1500-byte packets).
    pub mean_mbit: f64,
    /// Its period (last time), in ms.
    pub period_ms: u64,
}

/// A mahimahi packet-delivery trace, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The file as the scenario names it (`traces/lte_synthetic.mm`).
    pub file: String,
    /// Delivery opportunities, in ms, non-decreasing; the last one is the period.
    pub opportunities_ms: Vec<u64>,
}

impl Trace {
    /// Parses trace `text` read from `file`: one whole number of milliseconds per line,
    /// non-decreasing, the last one > 0.
    ///
    /// Errors say the file and the line: `traces/x.mm line 3: "1.5" is not a whole number
    /// of milliseconds`; an empty trace.
    pub fn parse(text: &str, file: &str) -> Result<Trace, String> {
        let mut out: Vec<u64> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim();
            let ms: u64 = t.parse().map_err(|_| {
                format!(
                    "{file} line {}: {t:?} is not a whole number of milliseconds \
                     (a mahimahi trace has one delivery time per line)",
                    i + 1
                )
            })?;
            if let Some(&last) = out.last() {
                if ms < last {
                    return Err(format!(
                        "{file} line {}: {ms} ms is before the previous line's {last} ms \
                         (times must not decrease)",
                        i + 1
                    ));
                }
            }
            out.push(ms);
        }
        match out.last() {
            None => Err(format!(
                "{file}: the trace is empty (no delivery opportunity)"
            )),
            Some(0) => Err(format!(
                "{file}: the last time is 0 ms; a trace needs a period > 0 (its last time)"
            )),
            Some(_) => Ok(Trace {
                file: file.to_string(),
                opportunities_ms: out,
            }),
        }
    }

    /// Reads the trace `file` a scenario at `scenario` names: relative to the scenario's
    /// directory; a shipped scenario's (`<builtin>/...`), or a relative path that exists
    /// on neither, is looked up among [`BUILTIN_TRACES`]. Errors name `field`.
    pub fn load(file: &str, scenario: &Path, field: &str) -> Result<Trace, FieldError> {
        let builtin = BUILTIN_TRACES.iter().find(|(n, _)| *n == file);
        let on_disk = scenario
            .parent()
            .map_or_else(|| Path::new(file).to_path_buf(), |d| d.join(file));
        let text = if scenario.starts_with("<builtin>") || !on_disk.exists() {
            match builtin {
                Some((_, text)) => text.to_string(),
                None => {
                    return Err(FieldError::new(
                        field,
                        format!(
                            "no trace file {} (relative paths resolve against the scenario's \
                             directory; shipped traces: {})",
                            on_disk.display(),
                            BUILTIN_TRACES
                                .iter()
                                .map(|(n, _)| *n)
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ))
                }
            }
        } else {
            std::fs::read_to_string(&on_disk).map_err(|e| {
                FieldError::new(field, format!("reading {}: {e}", on_disk.display()))
            })?
        };
        Trace::parse(&text, file).map_err(|m| FieldError::new(field, m))
    }

    /// The trace's period (its last time), in ms.
    pub fn period_ms(&self) -> u64 {
        *self
            .opportunities_ms
            .last()
            .expect("a parsed trace is not empty")
    }

    /// Mean rate over one period, in Mbit/s (1500-byte packets).
    pub fn mean_mbit(&self) -> f64 {
        self.opportunities_ms.len() as f64 * TRACE_PACKET_BYTES * 8.0
            / (self.period_ms() as f64 * 1000.0)
    }

    /// The trace over a run of `duration_s`, looped, counted in bins of `bin_ms` ms: one step
    /// per bin (the first at 0 s), each at `opportunities · 1500 · 8 / bin` (the last bin
    /// over its covered part), empty bins at [`MIN_TRACE_RATE_MBIT`]; runs of bins with the
    /// same rate merged into one step.
    pub fn bin(&self, bin_ms: u32, duration_s: f64) -> Vec<Step> {
        let bin = u64::from(bin_ms.max(1));
        let end_ms = (duration_s * 1000.0).ceil() as u64;
        let nbins = end_ms.div_ceil(bin) as usize;
        let mut counts = vec![0u64; nbins];
        let period = self.period_ms();
        let mut base = 0;
        'outer: loop {
            for &t in &self.opportunities_ms {
                let t = base + t;
                if t >= end_ms {
                    break 'outer;
                }
                counts[(t / bin) as usize] += 1;
            }
            base += period;
        }
        let mut steps: Vec<Step> = Vec::new();
        for (k, c) in counts.iter().enumerate() {
            let start = k as u64 * bin;
            let width = bin.min(end_ms - start) as f64;
            let rate =
                (*c as f64 * TRACE_PACKET_BYTES * 8.0 / (width * 1000.0)).max(MIN_TRACE_RATE_MBIT);
            if steps.last().is_some_and(|s| s.value == rate) {
                continue;
            }
            steps.push(Step {
                at_s: start as f64 / 1000.0,
                value: rate,
            });
        }
        steps
    }
}

/// Opportunity times (ms) of a link at `rate(t)` Mbit/s, one per 1500-byte packet, from 0
/// ms to `end_ms`, as a trace file's text.
fn trace_text(end_ms: f64, rate_at: impl Fn(f64) -> f64) -> String {
    let mut out = String::new();
    // Bits of credit: an opportunity is due each time 12000 bits have accrued.
    let mut credit = 0.0f64;
    let bits = TRACE_PACKET_BYTES * 8.0;
    // Ticks of 10 us.
    for tick in 0..(end_ms * 100.0) as u64 {
        credit += rate_at(tick as f64 / 100.0) * 10.0; // Mbit/s × 10 us, in bits
        let t = (tick + 1) as f64 / 100.0;
        while credit >= bits {
            credit -= bits;
            out.push_str(&format!("{}\n", t.ceil().max(1.0) as u64));
        }
    }
    out
}

/// The shipped `traces/step_down_up.mm`: 20 Mbit/s for 5 s, 5 Mbit/s for 5 s, 20 Mbit/s
/// for 5 s (15 s).
pub fn step_down_up_trace() -> String {
    trace_text(15_000.0, |t| {
        if (5000.0..10_000.0).contains(&t) {
            5.0
        } else {
            20.0
        }
    })
}

/// The shipped `traces/lte_synthetic.mm`: 60 s of an LTE-like rate made here (not
/// measured): the log of the rate follows a mean-reverting random walk (mean 10 Mbit/s,
/// new value every 200 ms, clamped to 1–30 Mbit/s) with rare outages of 200–600 ms, drawn
/// from SplitMix64 seeded with 19.
pub fn lte_synthetic_trace() -> String {
    const SEGMENT_MS: f64 = 200.0;
    let n = (60_000.0 / SEGMENT_MS) as usize;
    let mut rng = SplitMix64::new(19);
    let (mu, theta, sigma) = (10f64.ln(), 0.25, 0.3);
    let mut x = mu;
    let mut rates = Vec::with_capacity(n);
    let mut outage = 0;
    for _ in 0..n {
        // Box–Muller.
        let (u1, u2) = (rng.unit().max(1e-12), rng.unit());
        let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
        x += theta * (mu - x) + sigma * z;
        x = x.clamp(1f64.ln(), 30f64.ln());
        if outage == 0 && rng.unit() < 0.01 {
            outage = 1 + (rng.unit() * 3.0) as usize;
        }
        if outage > 0 {
            outage -= 1;
            rates.push(0.0);
        } else {
            rates.push((x.exp() * 100.0).round() / 100.0);
        }
    }
    trace_text(60_000.0, |t| rates[((t / SEGMENT_MS) as usize).min(n - 1)])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str, q: Quantity) -> Result<Vec<Entry>, FieldError> {
        let v: toml::Table = toml::from_str(&format!("s = {text}")).unwrap();
        parse_schedule(&v["s"], "defaults.rate_schedule", q)
    }

    #[test]
    fn steps_and_ramps_resolve_to_steps_reaching_the_value_at_the_ramps_end() {
        let e = entries(
            "[{ at_s = 5, rate_mbit = 5 }, { at_s = 10, rate_mbit = 15, ramp_s = 0.5 }]",
            Quantity::Rate,
        )
        .unwrap();
        let s = resolve(&e, 20.0, 15.0, "").unwrap();
        assert_eq!(
            s[0],
            Step {
                at_s: 5.0,
                value: 5.0
            }
        );
        assert_eq!(s.len(), 1 + 5);
        assert!((s[1].at_s - 10.1).abs() < 1e-9 && (s[1].value - 7.0).abs() < 1e-9);
        assert_eq!(
            s[5],
            Step {
                at_s: 10.5,
                value: 15.0
            }
        );
        assert_eq!(value_at(&s, 20.0, 4.9), 20.0);
        assert_eq!(value_at(&s, 20.0, 6.0), 5.0);
        assert!((mean_over(&s, 20.0, 0.0, 10.0) - 12.5).abs() < 1e-9);
    }

    #[test]
    fn out_of_order_negative_and_late_changes_are_named() {
        let e = entries(
            "[{ at_s = 5, rate_mbit = 5 }, { at_s = 3, rate_mbit = 1 }]",
            Quantity::Rate,
        )
        .unwrap_err();
        assert_eq!(e.field, "defaults.rate_schedule[1].at_s");
        assert!(e.message.contains("time order"), "{e}");
        let e = entries(
            "[{ at_s = 5, rate_mbit = 5, ramp_s = 3 }, { at_s = 7, rate_mbit = 1 }]",
            Quantity::Rate,
        )
        .unwrap_err();
        assert!(e.message.contains("ramp"), "{e}");
        let e = entries("[{ at_s = 5, rate_mbit = 0 }]", Quantity::Rate).unwrap_err();
        assert_eq!(e.field, "defaults.rate_schedule[0].rate_mbit");
        let e = entries("[{ at_s = 5, rtt = 3 }]", Quantity::Rtt).unwrap_err();
        assert_eq!(e.field, "defaults.rate_schedule[0].rtt");
        let e = entries("[]", Quantity::Rtt).unwrap_err();
        assert!(e.message.contains("empty"), "{e}");
        let ok = entries("[{ at_s = 12, rate_mbit = 5 }]", Quantity::Rate).unwrap();
        let e = resolve(&ok, 10.0, 10.0, "(profile ci)").unwrap_err();
        assert_eq!(e.field, "defaults.rate_schedule[0].at_s");
        assert!(e.message.contains("duration_s = 10"), "{e}");
    }

    #[test]
    fn malformed_and_empty_traces_name_the_file_and_line() {
        let e = Trace::parse("1\n2\nx3\n", "t.mm").unwrap_err();
        assert!(e.starts_with("t.mm line 3:"), "{e}");
        let e = Trace::parse("5\n2\n", "t.mm").unwrap_err();
        assert!(e.starts_with("t.mm line 2:"), "{e}");
        assert!(Trace::parse("", "t.mm").unwrap_err().contains("empty"));
    }

    #[test]
    fn a_trace_is_binned_looped_and_merged() {
        // 2 opportunities every 4 ms, period 4 ms: 6 Mbit/s.
        let t = Trace::parse("2\n4\n", "t.mm").unwrap();
        assert!((t.mean_mbit() - 6.0).abs() < 1e-9);
        // Looped: 2, 4, 6, ... ms; the first bin misses the one at 0 ms, the others hold 50.
        let s = t.bin(100, 1.0);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!((s[0].value - 5.88).abs() < 1e-9 && (s[1].value - 6.0).abs() < 1e-9);
        // A gap becomes the floor rate.
        let t = Trace::parse("1\n2\n300\n", "t.mm").unwrap();
        let s = t.bin(100, 0.3);
        assert_eq!(
            s[1],
            Step {
                at_s: 0.1,
                value: MIN_TRACE_RATE_MBIT
            }
        );
    }

    /// The shipped traces are what the generators make; `CCTL_WRITE_TRACES=1` rewrites them.
    #[test]
    fn shipped_traces_are_what_their_generators_make() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces");
        let made = [
            ("traces/lte_synthetic.mm", lte_synthetic_trace()),
            ("traces/step_down_up.mm", step_down_up_trace()),
        ];
        if std::env::var_os("CCTL_WRITE_TRACES").is_some() {
            for (name, text) in &made {
                std::fs::write(dir.join(name.trim_start_matches("traces/")), text).unwrap();
            }
        }
        for (name, text) in &made {
            let shipped = BUILTIN_TRACES.iter().find(|(n, _)| n == name).unwrap().1;
            assert!(shipped == text, "{name} differs from its generator");
        }
    }

    #[test]
    fn shipped_traces_bin_to_their_mean_rates() {
        let t = Trace::parse(BUILTIN_TRACES[1].1, "step").unwrap();
        let s = t.bin(100, 15.0);
        // A bin holds a whole number of packets: 41 or 42 at 5 Mbit/s (±1.6 %); the mean
        // over seconds is exact to 1 %.
        for (from, want) in [(1.0, 20.0), (6.0, 5.0), (11.0, 20.0)] {
            let got = mean_over(&s, 0.0, from, from + 3.0);
            assert!((got - want).abs() / want < 0.01, "{from}: {got}");
            assert!((value_at(&s, 0.0, from) - want).abs() / want < 0.02);
        }
        let t = Trace::parse(BUILTIN_TRACES[0].1, "lte").unwrap();
        let m = t.mean_mbit();
        assert!((5.0..15.0).contains(&m), "{m}");
        assert!((t.period_ms() as f64 - 60_000.0).abs() < 10.0);
        let s = t.bin(100, 60.0);
        let binned = mean_over(&s, 0.0, 0.0, 60.0);
        assert!((binned - m).abs() / m < 0.01, "{binned} vs {m}");
    }
}
