//! Per-ACK replay of a port's recorded trajectory through its algorithm's f64 model: the shared step machinery.
//!
//! For algorithms without a Linux module (their declarations carry replay rules,
//! [`crate::catalogue::Algorithm::replay`]) the model is the reference `cctl conform`
//! checks the port against. The collector emits one sample per ACK at the start of the
//! kernel's ACK processing, so the pair (sample k, sample k+1) brackets ACK k: the state
//! before it and after it. For every pair this module decides from the kernel's state
//! which kind of step ACK k was (`classify`: an ACK in Open/Disorder, the start of a
//! reduction, or one it cannot check and why), and hands it to the algorithm's rules
//! (`loader/src/algo/<key>/replay.rs`, a `Rules`). Those decide from the algorithm's
//! code (`bpf/algo/<key>.bpf.c` and `bpf/algo/<key>_math.h`) which of its rules ran on ACK k,
//! recompute their outputs with the algorithm's model (`loader/src/algo/<key>/model.rs`)
//! from sample k's state and the inputs sample k+1 shows, and compare them with sample
//! k+1 within the error bounds the models' unit tests state for the fixed-point C. The
//! model is reset to the port's state at every step: a step fails only on its own.
//! Counters the samples do not carry are tracked as the set of values consistent with
//! every earlier ACK (`Counter`).

use std::collections::BTreeMap;

/// Tunables by key (the same type as [`crate::catalogue::Params`]).
type Params = BTreeMap<&'static str, u32>;
use crate::sample::{CaState, Sample};

/// Why a replay cannot run: the inputs are not one port's consecutive samples, or the
/// algorithm has no replay rules.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReplayError {
    /// `key` names no algorithm with replay rules (it has a Linux module, or is unknown).
    #[error("'{key}' has no f64 model to be checked against (models: {models})")]
    NoRules {
        /// The key asked for.
        key: String,
        /// Comma-separated keys of the algorithms that have replay rules.
        models: String,
    },
    /// Fewer than 2 samples: no ACK is bracketed.
    #[error("{count} sample(s): a model check needs at least 2 consecutive samples of one socket")]
    TooFewSamples {
        /// Samples given, count.
        count: usize,
    },
    /// A sample of another socket than sample 0's.
    #[error("sample {k} is of socket {cookie:#x}, sample 0 of {first:#x}: one socket only")]
    OtherSocket {
        /// Index of the sample, from 0.
        k: usize,
        /// Its socket cookie.
        cookie: u64,
        /// Sample 0's socket cookie.
        first: u64,
    },
    /// A sample of another algorithm (or of no cctl port).
    #[error("sample {k} is not of the '{key}' port (algorithm {algo:?})")]
    OtherAlgorithm {
        /// Index of the sample, from 0.
        k: usize,
        /// The algorithm replayed.
        key: String,
        /// The sample's algorithm, `None` for a congestion control cctl did not load.
        algo: Option<&'static str>,
    },
    /// A sample without a field of the shared measurement layer.
    #[error("sample {k} has no {what}: not a sample of a cctl port")]
    NotAPort {
        /// Index of the sample, from 0.
        k: usize,
        /// The missing field (`backoffs`, `tmin_us`).
        what: &'static str,
    },
    /// A sample without one of the algorithm's variables its rules read.
    #[error("sample {k} has no variable '{name}' (vars: {vars})")]
    MissingVar {
        /// Index of the sample, from 0.
        k: usize,
        /// The variable (a name of the algorithm's `VAR_DOCS`).
        name: String,
        /// The variables it has, as printed by `cctl trace`.
        vars: String,
    },
    /// A tunable missing from the parameters (a declaration and its rules disagree).
    #[error("tunable '{key}' missing")]
    MissingParam {
        /// The tunable's key.
        key: String,
    },
}

/// Results of the replay machinery.
pub type Result<T> = std::result::Result<T, ReplayError>;

/// Builds an algorithm's `Rules` for one replay from its tunables (every one present,
/// defaults filled in) and the samples (to read its variables from).
/// The constructor of an algorithm's `Rules`, as its declaration names it (`replay:`).
pub(crate) type NewRules = fn(&Params, &[Sample]) -> Result<Box<dyn Rules>>;

/// One step where the port's recorded state is not what the model computes from the
/// port's previous state and this ACK's inputs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelDivergence {
    /// Step: the ACK index k (from 0) of the pair (sample k, sample k+1).
    pub step: usize,
    /// Time of ACK k (sample k), ms since the run's start.
    pub t_ms: f64,
    /// The port's cwnd after ACK k, segments.
    pub port_cwnd: u32,
    /// The model's cwnd after ACK k, segments (real-valued); the port's own where this
    /// step's cwnd is the kernel's (loss recovery), as `detail` then says.
    pub model_cwnd: f64,
    /// Each quantity outside its bound: the variable, port vs model value, and the bound
    /// with its source; `; `-separated.
    pub detail: String,
}

/// A port's trajectory replayed through its model.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelCheck {
    /// Steps checked: consecutive sample pairs in congestion avoidance or slow start (and
    /// the ACKs that start a reduction) that the model covers, count.
    pub steps: usize,
    /// Share of those steps where every checked quantity is within its bound, %.
    pub identical_pct: f64,
    /// Largest |port cwnd − model cwnd| over the steps where the model gives a cwnd,
    /// segments (the port's windows are whole segments, the model's real-valued).
    pub max_abs_cwnd_diff: f64,
    /// The first step outside the bounds, `None` = none.
    pub first_divergence: Option<ModelDivergence>,
    /// The bounds used, in words, with where they come from (test names), what is and
    /// is not checked, and how many pairs were left out and why.
    pub bounds: String,
}

/// Replays `samples` (consecutive samples of ONE socket running the port of `key`, one per
/// ACK, in order; `t0_ns` = the run's start on CLOCK_MONOTONIC, for `t_ms`) through the rules
/// `replay` builds, loaded with `params` (every tunable of the algorithm, defaults filled
/// in). `crate::model_check::check` finds the rules and defaults in the catalogue.
///
/// Errors: [`ReplayError::TooFewSamples`] (fewer than 2 samples),
/// [`ReplayError::OtherSocket`], [`ReplayError::OtherAlgorithm`], [`ReplayError::NotAPort`]
/// (samples of more than one socket, of another algorithm, or without the shared layer),
/// [`ReplayError::MissingVar`] (without the algorithm's variables).
pub fn run(
    key: &str,
    replay: crate::catalogue::Replay,
    p: &Params,
    samples: &[Sample],
    t0_ns: u64,
) -> Result<ModelCheck> {
    if samples.len() < 2 {
        return Err(ReplayError::TooFewSamples {
            count: samples.len(),
        });
    }
    let new_rules: NewRules = *replay
        .0
        .downcast_ref::<NewRules>()
        .expect("a declaration's replay holds a NewRules");
    let cookie = samples[0].cookie;
    let obs = samples
        .iter()
        .enumerate()
        .map(|(k, s)| {
            if s.cookie != cookie {
                return Err(ReplayError::OtherSocket {
                    k,
                    cookie: s.cookie,
                    first: cookie,
                });
            }
            if s.algo != Some(key) {
                return Err(ReplayError::OtherAlgorithm {
                    k,
                    key: key.to_string(),
                    algo: s.algo,
                });
            }
            Obs::new(k, s)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut rules = new_rules(p, samples)?;

    let (mut steps, mut identical, mut losses, mut max_diff) = (0usize, 0usize, 0usize, 0f64);
    let mut first = None;
    let mut skipped: BTreeMap<Skip, usize> = BTreeMap::new();
    for k in 0..obs.len() - 1 {
        let (a, b) = (&obs[k], &obs[k + 1]);
        let mut out = StepCheck::default();
        match classify(a, b) {
            Kind::Skip(why) => {
                *skipped.entry(why).or_default() += 1;
                rules.forget();
                continue;
            }
            Kind::Loss => {
                rules.loss(k, a, b, &mut out);
                rules.forget();
                losses += 1;
            }
            Kind::Ack { ran } => {
                let ack = Ack {
                    k,
                    a,
                    b,
                    ran,
                    delivered: u64::from(b.delivered - a.delivered),
                    bytes: b.bytes_acked - a.bytes_acked,
                    limited: a.in_flight >= a.cwnd,
                };
                rules.ack(&ack, &mut out);
            }
        }
        steps += 1;
        if let Some(m) = out.model_cwnd {
            max_diff = max_diff.max((f64::from(b.cwnd) - m).abs());
        }
        if out.faults.is_empty() {
            identical += 1;
        } else if first.is_none() {
            let modelled = out.model_cwnd.is_some();
            first = Some(ModelDivergence {
                step: k,
                t_ms: a.ts_ns.saturating_sub(t0_ns) as f64 / 1e6,
                port_cwnd: b.cwnd,
                model_cwnd: out.model_cwnd.unwrap_or(f64::from(b.cwnd)),
                detail: if modelled {
                    out.faults.join("; ")
                } else {
                    format!("{} (cwnd not modelled at this step)", out.faults.join("; "))
                },
            });
        }
    }
    let mut bounds = format!(
        "Per ACK k, between sample k and k+1: cong_avoid ran iff bytes_acked grew; it got \
         n = Δdelivered packets (1 with ack_counting = 1); the sender was cwnd-limited if \
         in_flight ≥ cwnd in sample k. {}",
        rules.bounds()
    );
    bounds.push_str(&format!(
        " Coverage: {steps} of {} ACKs checked ({losses} of them start a reduction)",
        obs.len() - 1
    ));
    if skipped.is_empty() {
        bounds.push('.');
    } else {
        let list: Vec<String> = skipped
            .iter()
            .map(|(s, n)| format!("{n} {}", s.what()))
            .collect();
        bounds.push_str(&format!("; not checked: {}.", list.join(", ")));
    }
    Ok(ModelCheck {
        steps,
        identical_pct: if steps == 0 {
            0.0
        } else {
            100.0 * identical as f64 / steps as f64
        },
        max_abs_cwnd_diff: max_diff,
        first_divergence: first,
        bounds,
    })
}

/// The kernel's `TCP_INFINITE_SSTHRESH`, segments: ssthresh before the first reduction.
pub(crate) const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;
/// One unit of the 2^-10 fixed point of the ports' windows, packets.
pub(crate) const ULP: f64 = 1.0 / 1024.0;

/// What one sample shows of the socket, in the kernel's units.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Obs {
    pub(crate) ts_ns: u64,
    pub(crate) state: CaState,
    pub(crate) cwnd: u32,
    /// Segments; [`INFINITE_SSTHRESH`] while infinite.
    pub(crate) ssthresh: u32,
    /// Not above `TCP_INFINITE_SSTHRESH` (docs/explanation/known-problems.md).
    pub(crate) ssthresh_ok: bool,
    pub(crate) bytes_acked: u64,
    pub(crate) delivered: u32,
    pub(crate) in_flight: u32,
    pub(crate) mss: u32,
    pub(crate) prior_cwnd: u32,
    pub(crate) backoffs: u32,
    pub(crate) tmin_us: u32,
}

impl Obs {
    fn new(k: usize, s: &Sample) -> Result<Obs> {
        let missing = |what: &'static str| ReplayError::NotAPort { k, what };
        Ok(Obs {
            ts_ns: s.ts_ns,
            state: s.ca_state,
            cwnd: s.cwnd,
            ssthresh: s.ssthresh.unwrap_or(INFINITE_SSTHRESH),
            ssthresh_ok: s.ssthresh_is_valid(),
            bytes_acked: s.bytes_acked,
            delivered: s.delivered,
            in_flight: s.in_flight,
            mss: s.mss,
            prior_cwnd: s.prior_cwnd,
            backoffs: s.backoffs.ok_or_else(|| missing("backoffs"))?,
            tmin_us: s.tmin_us.ok_or_else(|| missing("tmin_us"))?,
        })
    }

    /// Open or Disorder: the states in which cong_avoid runs.
    fn open_like(&self) -> bool {
        matches!(self.state, CaState::Open | CaState::Disorder)
    }

    /// cwnd below ssthresh (the ports' `cc_in_slow_start`).
    pub(crate) fn slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }
}

/// Why a pair is not checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Skip {
    /// The kernel's ssthresh fault (docs/explanation/known-problems.md) in either sample.
    KernelFault,
    /// delivered, bytes_acked or the time went backwards.
    NotConsecutive,
    /// Sample k or k+1 in CWR, Recovery or Loss: the kernel drives cwnd (PRR, RTO).
    Reduction,
    /// More than one reduction in one pair.
    Backoffs,
    /// A reduction that started and ended within the pair (timeout and undo).
    ReductionWithin,
    /// ssthresh raised: the kernel's undo or restart (`tcp_current_ssthresh`).
    Undo,
    /// New SACKs but nothing cumulatively acked: whether cong_avoid runs depends on the
    /// kernel's reordering estimate, which the samples do not carry.
    SackOnly,
    /// cwnd moved on an ACK that acked nothing: the kernel set it.
    KernelSet,
}

impl Skip {
    fn what(self) -> &'static str {
        match self {
            Skip::KernelFault => "with the kernel's ssthresh fault",
            Skip::NotConsecutive => "not consecutive (delivered, bytes_acked or time went back)",
            Skip::Reduction => "in CWR/Recovery/Loss (the kernel's cwnd)",
            Skip::Backoffs => "with more than one reduction",
            Skip::ReductionWithin => "with a reduction begun and ended within the ACK",
            Skip::Undo => "where the kernel raised ssthresh (undo, restart)",
            Skip::SackOnly => "SACK-only (cong_avoid depends on the kernel's reordering estimate)",
            Skip::KernelSet => "where cwnd moved on an ACK that acked nothing (the kernel's)",
        }
    }
}

/// What ACK k was, from the pair around it.
enum Kind {
    /// An ACK in Open/Disorder; `ran`: it acked data, so cong_avoid ran.
    Ack { ran: bool },
    /// The ACK (or timeout) that started a reduction: ssthresh came from the port.
    Loss,
    /// Not checked.
    Skip(Skip),
}

fn classify(a: &Obs, b: &Obs) -> Kind {
    if !a.ssthresh_ok || !b.ssthresh_ok {
        return Kind::Skip(Skip::KernelFault);
    }
    if b.delivered < a.delivered || b.bytes_acked < a.bytes_acked || b.ts_ns < a.ts_ns {
        return Kind::Skip(Skip::NotConsecutive);
    }
    if !a.open_like() {
        return Kind::Skip(Skip::Reduction);
    }
    match b.backoffs.wrapping_sub(a.backoffs) {
        0 => {}
        1 if b.open_like() => return Kind::Skip(Skip::ReductionWithin),
        1 => return Kind::Loss,
        _ => return Kind::Skip(Skip::Backoffs),
    }
    if !b.open_like() {
        return Kind::Skip(Skip::Reduction);
    }
    if b.ssthresh > a.ssthresh {
        return Kind::Skip(Skip::Undo);
    }
    let data = b.bytes_acked > a.bytes_acked;
    if !data && b.delivered > a.delivered {
        return Kind::Skip(Skip::SackOnly);
    }
    if !data && b.cwnd != a.cwnd {
        return Kind::Skip(Skip::KernelSet);
    }
    Kind::Ack { ran: data }
}

/// ACK k in Open/Disorder.
pub(crate) struct Ack<'a> {
    pub(crate) k: usize,
    pub(crate) a: &'a Obs,
    pub(crate) b: &'a Obs,
    /// It acked data: cong_avoid ran (`tcp_may_raise_cwnd`).
    pub(crate) ran: bool,
    /// Packets delivered (acked or SACKed) by it: the kernel's `acked` to cong_avoid.
    pub(crate) delivered: u64,
    /// Bytes cumulatively acked by it.
    pub(crate) bytes: u64,
    /// Certainly cwnd-limited: in flight ≥ cwnd before it (else growth or none are both
    /// accepted, the kernel's `is_cwnd_limited` not being in the samples).
    pub(crate) limited: bool,
}

/// The checks of one step.
#[derive(Debug, Default)]
pub(crate) struct StepCheck {
    pub(crate) faults: Vec<String>,
    /// The model's cwnd after the ACK, segments (`None`: not modelled here).
    pub(crate) model_cwnd: Option<f64>,
}

impl StepCheck {
    /// `port` must equal `model`.
    pub(crate) fn equal(&mut self, what: &str, port: f64, model: f64, rule: &str) {
        if port != model {
            self.faults.push(format!(
                "{what}: port {} vs model {} ({rule})",
                num(port),
                num(model)
            ));
        }
    }

    /// port − model must lie in [lo, hi] (plus f64 rounding of the model).
    pub(crate) fn within(
        &mut self,
        what: &str,
        port: f64,
        model: f64,
        (lo, hi): (f64, f64),
        rule: &str,
    ) {
        let e = port - model;
        let tol = 1e-9 * model.abs().max(1.0);
        if !(e >= lo - tol && e <= hi + tol) {
            self.faults.push(format!(
                "{what}: port {} vs model {}, port − model {e:+.6} outside [{lo:+.6}, {hi:+.6}] \
                 ({rule})",
                num(port),
                num(model)
            ));
        }
    }

    /// A relation that must hold.
    pub(crate) fn holds(&mut self, ok: bool, msg: impl FnOnce() -> String) {
        if !ok {
            self.faults.push(msg());
        }
    }
}

/// A number as text: integers without decimals.
pub(crate) fn num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        let t = format!("{x:.6}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// What the samples tell of a hidden counter (an algorithm's carry between ACKs, e.g. a
/// spread or Reno counter, or the kernel's `snd_cwnd_cnt`), in the C's integer units:
/// `lo ≤ cnt ≤ hi` (`hi` None: no upper bound known).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counter {
    lo: u128,
    hi: Option<u128>,
}

impl Counter {
    pub(crate) const UNKNOWN: Counter = Counter { lo: 0, hi: None };
    pub(crate) const ZERO: Counter = Counter { lo: 0, hi: Some(0) };

    /// Whole `div`s a step `cnt += add` can release: [min, max] (max None: unbounded).
    fn release(&self, add: u128, div: u128) -> (u128, Option<u128>) {
        ((self.lo + add) / div, self.hi.map(|h| (h + add) / div))
    }

    /// The counts left after `cnt += add` released exactly `d` whole `div`s.
    fn exactly(&self, add: u128, div: u128, d: u128) -> Option<Counter> {
        let lo = (self.lo + add).max(d * div);
        let hi = ((d + 1) * div - 1).min(self.hi.map_or(u128::MAX, |h| h + add));
        (lo <= hi).then(|| Counter {
            lo: lo - d * div,
            hi: Some(hi - d * div),
        })
    }

    /// The counts left after `cnt += add` released at least `d` (the window was capped
    /// there); the remainder is still `cnt mod div`.
    fn at_least(&self, add: u128, div: u128, d: u128) -> Option<Counter> {
        let lo = (self.lo + add).max(d * div);
        let hi = self.hi.map(|h| h + add);
        if hi.is_some_and(|h| h < lo) {
            return None;
        }
        Some(match hi {
            Some(h) if h / div == lo / div => Counter {
                lo: lo % div,
                hi: Some(h % div),
            },
            _ => Counter {
                lo: 0,
                hi: Some(div - 1),
            },
        })
    }

    fn hull(&self, o: &Counter) -> Counter {
        Counter {
            lo: self.lo.min(o.lo),
            hi: self.hi.zip(o.hi).map(|(x, y)| x.max(y)),
        }
    }

    /// One counting step observed to release `d` whole `div`s (`cap`: at most that many
    /// apply, the rest stays in the remainder); `maybe_idle`: the step may not have run
    /// (the sender may not have been cwnd-limited). The counter after it, or the range of
    /// releases the known counts allow when `d` is not among them.
    pub(crate) fn count(
        &self,
        add: u64,
        div: u64,
        d: u64,
        cap: Option<u64>,
        maybe_idle: bool,
    ) -> std::result::Result<Counter, (u128, Option<u128>)> {
        let (add, div, d) = (u128::from(add), u128::from(div.max(1)), u128::from(d));
        let ran = if cap.map(u128::from) == Some(d) {
            self.at_least(add, div, d)
        } else {
            self.exactly(add, div, d)
        };
        let next = match (maybe_idle && d == 0, ran) {
            (true, Some(r)) => Some(self.hull(&r)),
            (true, None) => Some(*self),
            (false, r) => r,
        };
        next.ok_or_else(|| {
            let (lo, hi) = self.release(add, div);
            match cap.map(u128::from) {
                Some(c) => (lo.min(c), Some(hi.map_or(c, |h| h.min(c)))),
                None => (lo, hi),
            }
        })
    }
}

/// "+lo..+hi" for a range of releases.
pub(crate) fn range_text((lo, hi): (u128, Option<u128>)) -> String {
    match hi {
        Some(h) if h == lo => format!("+{lo}"),
        Some(h) => format!("+{lo}..+{h}"),
        None => format!("≥ +{lo}"),
    }
}

/// One algorithm's rules, checked step by step: implemented next to its model in
/// `loader/src/algo/<key>/replay.rs`, built for one replay by the constructor its
/// declaration holds ([`Replay`]).
pub(crate) trait Rules {
    /// ACK k in Open/Disorder (sample k and k+1 in `ack`).
    fn ack(&mut self, ack: &Ack<'_>, out: &mut StepCheck);
    /// ACK (or timeout) k that started a reduction: the port's ssthresh rule.
    fn loss(&mut self, k: usize, a: &Obs, b: &Obs, out: &mut StepCheck);
    /// A pair was not checked: forget what the samples told of hidden state.
    fn forget(&mut self);
    /// What is checked, with which bounds and from where.
    fn bounds(&self) -> String;
}

/// A tunable (defaults filled in by [`check`]).
///
/// Errors: [`ReplayError::MissingParam`].
pub(crate) fn param(p: &Params, key: &str) -> Result<u32> {
    p.get(key)
        .copied()
        .ok_or_else(|| ReplayError::MissingParam {
            key: key.to_string(),
        })
}

/// Variable `name` of sample `k`.
///
/// Errors: [`ReplayError::MissingVar`].
pub(crate) fn var(samples: &[Sample], k: usize, name: &str) -> Result<f64> {
    samples[k]
        .vars
        .get(name)
        .ok_or_else(|| ReplayError::MissingVar {
            k,
            name: name.to_string(),
            vars: samples[k].vars.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_keeps_the_carries_consistent_with_every_step() {
        // cnt unknown; +3 per step, one unit per 10
        let mut c = Counter::UNKNOWN;
        c = c.count(3, 10, 0, None, false).unwrap(); // cnt + 3 < 10: cnt ≤ 6
        assert_eq!(c, Counter { lo: 3, hi: Some(9) });
        c = c.count(3, 10, 1, None, false).unwrap(); // 6..12 ≥ 10: was 7..9, now 0..2
        assert_eq!(c, Counter { lo: 0, hi: Some(2) });
        assert_eq!(c.count(3, 10, 1, None, false), Err((0, Some(0))));
        // capped at 1: the remainder stays
        assert_eq!(
            c.count(30, 10, 1, Some(1), false).unwrap(),
            Counter { lo: 0, hi: Some(2) }
        );
        // maybe idle: either kept or advanced
        assert_eq!(
            c.count(3, 10, 0, None, true).unwrap(),
            Counter { lo: 0, hi: Some(5) }
        );
    }
}

/// Helpers of the algorithms' replay tests: simulated ports' samples.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::algo::Var;
    use std::net::Ipv4Addr;

    /// The run's start, ns (sample k is at T0 + k·250 µs).
    pub(crate) const T0: u64 = 1_000_000_000;
    /// The simulated segment size, bytes.
    pub(crate) const MSS: u32 = 1448;

    /// A sample's kernel state, as a simulated port leaves it.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Tcp {
        pub(crate) state: CaState,
        pub(crate) cwnd: u32,
        pub(crate) ssthresh: u32,
        pub(crate) bytes_acked: u64,
        pub(crate) delivered: u32,
        pub(crate) prior_cwnd: u32,
        pub(crate) backoffs: u32,
        pub(crate) tmin_us: u32,
    }

    impl Tcp {
        pub(crate) fn new(cwnd: u32, ssthresh: u32, tmin_us: u32) -> Tcp {
            Tcp {
                state: CaState::Open,
                cwnd,
                ssthresh,
                bytes_acked: 0,
                delivered: 0,
                prior_cwnd: 0,
                backoffs: 0,
                tmin_us,
            }
        }

        /// One ACK of one full segment.
        pub(crate) fn ack_one(&mut self) {
            self.delivered += 1;
            self.bytes_acked += u64::from(MSS);
        }
    }

    /// Sample `k` of a simulated port of `algo` in state `t` with its variables `vars`.
    pub(crate) fn sample(
        k: usize,
        t: &Tcp,
        algo: &'static str,
        vars: &[(&'static str, f64)],
    ) -> Sample {
        Sample {
            ts_ns: T0 + k as u64 * 250_000,
            cookie: 0x5eed,
            netns_cookie: 0,
            saddr: Ipv4Addr::new(10, 0, 0, 1).into(),
            sport: 40_000,
            daddr: Ipv4Addr::new(10, 0, 0, 2).into(),
            dport: 5201,
            cc: crate::algo::intern(&format!("bpf_{algo}")),
            ca_state: t.state,
            state_change: false,
            first: false,
            cwnd: t.cwnd,
            ssthresh: (t.ssthresh != INFINITE_SSTHRESH).then_some(t.ssthresh),
            srtt_us: t.tmin_us,
            rttvar_us: 1000,
            min_rtt_us: t.tmin_us,
            bytes_acked: t.bytes_acked,
            lost_out: 0,
            retrans_out: 0,
            total_retrans: 0,
            cwr_entries: 0,
            recovery_entries: 0,
            loss_entries: 0,
            packets_out: t.cwnd,
            in_flight: t.cwnd,
            mss: MSS,
            delivered: t.delivered,
            prior_cwnd: t.prior_cwnd,
            ca_map_id: Some(1),
            algo: Some(algo),
            tmin_us: Some(t.tmin_us),
            tmax_us: Some(t.tmin_us),
            delta_us: Some(0),
            epoch_tput_bytes_per_s: Some(0),
            backoffs: Some(t.backoffs),
            last_beta: Some(0.5),
            vars: vars
                .iter()
                .map(|&(name, value)| Var { name, value })
                .collect(),
        }
    }

    /// Every tunable of `key` at its default.
    pub(crate) fn defaults(key: &str) -> Params {
        crate::catalogue::find(key)
            .unwrap()
            .params
            .iter()
            .map(|p| (p.key, p.default))
            .collect()
    }

    /// Sets variable `name` of `s` (it must have it).
    pub(crate) fn set_var(s: &mut Sample, name: &str, value: f64) {
        s.vars.iter_mut().find(|v| v.name == name).unwrap().value = value;
    }
}
