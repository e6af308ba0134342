//! FAST TCP's per-ACK replay rules: the port's recorded trajectory checked against [`super::model`].
//!
//! FAST has no Linux module, so `cctl conform` replays a port's samples through the
//! shared machinery of [`crate::algo::replay`] with these rules: which of
//! bpf/algo/fast.bpf.c's rules ran on each ACK (slow start, the window update of \[P1\] eq. (5)
//! every other RTT, the spread of an increase, the RTT average, the adaptive α, the
//! loss rule), their outputs from [`super::model`], and the bounds its unit tests state
//! for the fixed-point C (`Fast::bounds` lists them).

use super::model::{self, FastParams};
use crate::algo::replay::{
    num, param, range_text, var, Ack, Counter, Obs, Result, Rules, StepCheck, INFINITE_SSTHRESH,
};
use crate::catalogue::Params;
use crate::sample::{CaState, Sample};

/// Builds FAST's replay rules for one replay: `p` every tunable of FAST (defaults filled
/// in), `samples` the port's, read for its variables (`vars` of its declaration). The
/// constructor FAST's declaration holds (`replay: replay::rules`).
///
/// Errors: [`crate::algo::replay::ReplayError::MissingParam`],
/// [`crate::algo::replay::ReplayError::MissingVar`].
pub(crate) fn rules(p: &Params, samples: &[Sample]) -> Result<Box<dyn Rules>> {
    Ok(Box::new(Fast::new(p, samples)?))
}

const PHASE_SLOW_START: u32 = 0;
const PHASE_UPDATE: u32 = 1;
const PHASE_FREEZE: u32 = 2;
const PHASE_RECOVERY: u32 = 3;

/// FAST's exported variables (loader/src/algo/fast/mod.rs `vars`).
#[derive(Debug, Clone, Copy)]
struct FastVars {
    /// baseRTT, µs (0 = none yet).
    base: f64,
    /// T̄, µs (0 = none yet; exact: the port's usec << 10 over 1024).
    avg: f64,
    /// α in use, packets.
    alpha: f64,
    level: u32,
    target: u32,
    phase: u32,
    /// Throughput of the last RTT, kB/s.
    tput: f64,
    /// Packets per ACK (exact: the port's << 8 over 256).
    ack_ratio: f64,
}

struct Fast {
    /// The model's parameters; γ as the port holds it, ⌊1024·gamma_pct/100⌋/1024.
    m: FastParams,
    alpha_mode: bool,
    alpha_pkts: f64,
    eta_ack_ratio: bool,
    /// update_interval_ms > 0: updates by time, not every other RTT.
    interval: bool,
    ss_exit_mode: u32,
    ss_exit_frac: f64,
    ack_events: bool,
    vars: Vec<FastVars>,
    /// `ref_cwnd`: cwnd at the last window update, once one was seen (never with a
    /// fixed interval, where an update that keeps the target is invisible).
    ref_cwnd: Option<u32>,
    /// `spread_cnt`.
    carry: Counter,
}

impl Fast {
    fn new(p: &Params, samples: &[Sample]) -> Result<Fast> {
        let gamma_fp = (param(p, "gamma_pct")? << 10) / 100;
        let m = FastParams {
            gamma: f64::from(gamma_fp.min(1024)) / 1024.0,
            eta_num: f64::from(param(p, "eta_num")?),
            eta_max: f64::from(param(p, "eta_max_pct")?) / 100.0,
            alpha_levels: [
                f64::from(param(p, "alpha_l0_pkts")?),
                f64::from(param(p, "alpha_l1_pkts")?),
                f64::from(param(p, "alpha_l2_pkts")?),
            ],
            thresholds_kbps: [
                f64::from(param(p, "m0u_kBps")?),
                f64::from(param(p, "m1l_kBps")?),
                f64::from(param(p, "m1u_kBps")?),
                f64::from(param(p, "m2l_kBps")?),
            ],
            min_loss_window: f64::from(param(p, "min_loss_window_pkts")?),
        };
        let vars = (0..samples.len())
            .map(|k| {
                Ok(FastVars {
                    base: var(samples, k, "base_rtt_us")?,
                    avg: var(samples, k, "avg_rtt_us")?,
                    alpha: var(samples, k, "alpha")?,
                    level: var(samples, k, "alpha_level")? as u32,
                    target: var(samples, k, "target_cwnd")? as u32,
                    phase: var(samples, k, "phase")? as u32,
                    tput: var(samples, k, "tput_kBps")?,
                    ack_ratio: var(samples, k, "ack_ratio")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Fast {
            m,
            alpha_mode: param(p, "alpha_mode")? != 0,
            alpha_pkts: f64::from(param(p, "alpha_pkts")?),
            eta_ack_ratio: param(p, "eta_ack_ratio")? != 0,
            interval: param(p, "update_interval_ms")? != 0,
            ss_exit_mode: param(p, "ss_exit_mode")?,
            ss_exit_frac: f64::from(param(p, "ss_exit_qdelay_pct")?) / 100.0,
            ack_events: param(p, "ack_counting")? != 0,
            vars,
            ref_cwnd: None,
            carry: Counter::UNKNOWN,
        })
    }

    /// α of a level (fast.bpf.c `fast_level_alpha`).
    fn alpha_for(&self, level: u32) -> f64 {
        if self.alpha_mode {
            self.m.alpha_levels[level.min(2) as usize]
        } else {
            self.alpha_pkts
        }
    }

    /// fast::model::ss_exit on the recorded state (false without a baseRTT, as the C).
    fn ss_exit(&self, cwnd: u32, v: &FastVars) -> bool {
        v.base > 0.0
            && model::ss_exit(
                f64::from(cwnd),
                v.base,
                v.avg,
                v.alpha,
                self.ss_exit_mode,
                self.ss_exit_frac,
            )
    }

    /// Relations every sample must satisfy after an ACK in Open/Disorder.
    fn invariants(&self, b: &Obs, va: &FastVars, vb: &FastVars, out: &mut StepCheck) {
        out.equal(
            "alpha",
            vb.alpha,
            self.alpha_for(vb.level),
            "α is its level's (fast_level_alpha)",
        );
        if vb.base > 0.0 {
            out.equal(
                "base_rtt_us",
                vb.base,
                f64::from(b.tmin_us),
                "baseRTT and the shared layer's Tmin are minima of the same RTT samples",
            );
        }
        if va.base > 0.0 {
            out.holds(vb.base <= va.base, || {
                format!(
                    "base_rtt_us: port {} rose from {} (a minimum)",
                    num(vb.base),
                    num(va.base)
                )
            });
        }
    }

    /// Packets per ACK: r ← clamp(7/8·r + min(p, 64)/8, 1, 64) (fast_pkts_acked).
    fn ack_ratio(&self, ack: &Ack<'_>, va: &FastVars, vb: &FastVars, out: &mut StepCheck) {
        if ack.bytes == 0 {
            out.equal(
                "ack_ratio",
                vb.ack_ratio,
                va.ack_ratio,
                "no packet acked: unchanged",
            );
        } else if ack.b.mss > 0 && ack.bytes.is_multiple_of(u64::from(ack.b.mss)) {
            let p = (ack.bytes / u64::from(ack.b.mss)).min(64) as f64;
            let m = (va.ack_ratio - va.ack_ratio / 8.0 + p / 8.0).clamp(1.0, 64.0);
            out.within(
                "ack_ratio",
                vb.ack_ratio,
                m,
                (0.0, 7.0 / 2048.0),
                "EWMA 1/8 of packets per ACK; fast_ack_ratio truncates r/8 to 2^-8: port − model ∈ \
                 [0, 7/2048]",
            );
        }
    }

    /// T̄ ← (1 − η)·T̄ + η·T per RTT sample in Open ([P1] §IV-A).
    fn avg_rtt(&self, ack: &Ack<'_>, va: &FastVars, vb: &FastVars, out: &mut StepCheck) {
        const RULE: &str = "fast/model.rs avg_rtt, one step within |T − T̄|·2^-16 + 2^-10 µs \
                            (rtt_average_matches_the_model)";
        if ack.a.state != CaState::Open {
            out.equal(
                "avg_rtt_us",
                vb.avg,
                va.avg,
                "outside Open FAST does not average RTT samples",
            );
            return;
        }
        // a new baseRTT is this ACK's RTT sample, exactly
        let sample_is_base = vb.base > 0.0 && (va.base == 0.0 || vb.base < va.base);
        if va.avg == 0.0 {
            if sample_is_base {
                out.equal(
                    "avg_rtt_us",
                    vb.avg,
                    vb.base,
                    "the first RTT sample starts T̄",
                );
            } else if vb.avg != 0.0 {
                out.holds(vb.avg >= vb.base, || {
                    format!(
                        "avg_rtt_us: port {} below baseRTT {}",
                        num(vb.avg),
                        num(vb.base)
                    )
                });
            }
            return;
        }
        let r = if self.eta_ack_ratio {
            vb.ack_ratio
        } else {
            1.0
        };
        let eta = model::eta(f64::from(ack.a.cwnd), r, &self.m);
        let bound = |t: f64| (t - va.avg).abs() * 2f64.powi(-16) + 2f64.powi(-10);
        if sample_is_base {
            let m = model::avg_rtt(Some(va.avg), vb.base, eta);
            let e = bound(vb.base);
            out.within("avg_rtt_us", vb.avg, m, (-e, e), RULE);
        } else if vb.avg != va.avg {
            // the sample is not recorded, but it is at least baseRTT and the model rises
            // with it: T̄ cannot fall below what a sample at baseRTT gives
            let low = model::avg_rtt(Some(va.avg), vb.base, eta) - bound(vb.base);
            out.holds(vb.avg >= low - 1e-9 * low.abs(), || {
                format!(
                    "avg_rtt_us: port {} below {}, what an RTT sample at baseRTT {} gives from T̄ \
                     {} with η {eta:.6} ({RULE})",
                    num(vb.avg),
                    num(low),
                    num(vb.base),
                    num(va.avg)
                )
            });
        }
    }

    /// Slow start; returns whether an RTT boundary is evident.
    fn slow_start(
        &mut self,
        ack: &Ack<'_>,
        va: &FastVars,
        vb: &FastVars,
        n: u64,
        out: &mut StepCheck,
    ) -> bool {
        let (a, b) = (ack.a, ack.b);
        let initial = a.ssthresh >= INFINITE_SSTHRESH;
        let evident = vb.tput != va.tput || vb.level != va.level;
        if initial && b.ssthresh < INFINITE_SSTHRESH && vb.phase == PHASE_UPDATE {
            // queueing delay showed at an RTT boundary: ssthresh = cwnd, then the update
            // (fast/model.rs slow_start_exit_c_agrees_with_the_model: the C never leaves
            // earlier than the model)
            out.holds(self.ss_exit(a.cwnd, vb), || {
                format!(
                    "slow start: the port left it at cwnd {} (baseRTT {} µs, T̄ {} µs, α {}) where \
                     fast::model::ss_exit (mode {}, {} % of baseRTT) says stay",
                    a.cwnd,
                    num(vb.base),
                    num(vb.avg),
                    num(vb.alpha),
                    self.ss_exit_mode,
                    num(self.ss_exit_frac * 100.0)
                )
            });
            self.update(ack, vb, a.cwnd, n, out);
            return true;
        }
        out.equal(
            "phase",
            f64::from(vb.phase),
            0.0,
            "phase 0 until slow start ends",
        );
        out.equal(
            "target_cwnd",
            f64::from(vb.target),
            f64::from(va.target),
            "no update in slow start",
        );
        out.equal(
            "ssthresh",
            f64::from(b.ssthresh),
            f64::from(a.ssthresh),
            "slow start keeps ssthresh",
        );
        if initial && evident && self.ss_exit(a.cwnd, vb) {
            // mode 1 may decide late by less than w·2^-19 packets (same test)
            let d = f64::from(a.cwnd) * (vb.avg - vb.base) / vb.avg;
            let tie =
                self.ss_exit_mode == 1 && d - vb.alpha / 2.0 < f64::from(a.cwnd) * 2f64.powi(-19);
            out.holds(tie, || {
                format!(
                    "slow start: an RTT ended (tput_kBps or alpha_level moved) at cwnd {} with T̄ \
                     {} µs over baseRTT {} µs, where fast::model::ss_exit says leave, but the port \
                     stayed (slow_start_exit_c_agrees_with_the_model: exact in mode 0)",
                    a.cwnd,
                    num(vb.avg),
                    num(vb.base)
                )
            });
        }
        let grown = (u64::from(a.cwnd) + n).min(u64::from(a.ssthresh)) as f64;
        if ack.limited || b.cwnd != a.cwnd {
            out.equal(
                "cwnd",
                f64::from(b.cwnd),
                grown,
                "tcp_slow_start: cwnd + acked, at most ssthresh",
            );
            out.model_cwnd = Some(grown);
        } else {
            out.model_cwnd = Some(f64::from(a.cwnd)); // maybe not cwnd-limited: no growth
        }
        evident
    }

    /// Congestion avoidance; returns whether an RTT boundary is evident from the phase.
    fn congestion_avoidance(
        &mut self,
        ack: &Ack<'_>,
        va: &FastVars,
        vb: &FastVars,
        n: u64,
        out: &mut StepCheck,
    ) -> bool {
        let (a, b) = (ack.a, ack.b);
        // the end of slow start or recovery: hold, phase 2, target = cwnd
        let reset = va.phase == PHASE_SLOW_START || va.phase == PHASE_RECOVERY;
        let target0 = if reset { a.cwnd } else { va.target };
        let (updated, boundary) = if self.interval {
            out.equal(
                "phase",
                f64::from(vb.phase),
                1.0,
                "with update_interval_ms every CA ACK is in phase 1",
            );
            (vb.target != target0, false)
        } else {
            match (reset, va.phase, vb.phase) {
                (true, _, PHASE_FREEZE) => (false, false),
                (true, _, PHASE_UPDATE) => (true, true),
                (false, PHASE_UPDATE, PHASE_UPDATE) | (false, PHASE_FREEZE, PHASE_FREEZE) => {
                    (false, false)
                }
                (false, PHASE_UPDATE, PHASE_FREEZE) => (false, true),
                (false, PHASE_FREEZE, PHASE_UPDATE) => (true, true),
                _ => {
                    out.holds(false, || {
                        format!(
                            "phase: {} → {} is no step of congestion avoidance (update every other \
                             RTT: 1 ↔ 2 at an RTT boundary; 0 or 3 → 2, or → 1 at a boundary)",
                            va.phase, vb.phase
                        )
                    });
                    (false, false)
                }
            }
        };
        if updated {
            self.update(ack, vb, a.ssthresh, n, out);
        } else {
            out.equal(
                "target_cwnd",
                f64::from(vb.target),
                f64::from(target0),
                if reset {
                    "the end of slow start or recovery sets the target to cwnd"
                } else {
                    "the target moves only at an update"
                },
            );
            out.equal(
                "ssthresh",
                f64::from(b.ssthresh),
                f64::from(a.ssthresh),
                "no update: ssthresh kept",
            );
            self.spread(ack, target0, n, out);
        }
        boundary
    }

    /// The window update [P1] eq. (5) on ACK k, then a decrease at once or the spread.
    fn update(
        &mut self,
        ack: &Ack<'_>,
        vb: &FastVars,
        ss_before: u32,
        n: u64,
        out: &mut StepCheck,
    ) {
        let (a, b) = (ack.a, ack.b);
        let w = f64::from(a.cwnd);
        let (m, bound, rule) = if vb.base == 0.0 || vb.avg == 0.0 {
            (w, (0.0, 0.0), "without baseRTT or T̄ the window is kept")
        } else {
            let cut = if u64::from(a.cwnd) * (vb.base as u64) < 1 << 43 {
                2f64.powi(-10)
            } else {
                w * 2f64.powi(-20) + 2f64.powi(-10)
            };
            (
                model::window(w, vb.base, vb.avg, vb.alpha, self.m.gamma).max(2.0),
                (-0.5 - self.m.gamma * cut, 0.5),
                "fast::model::window of cwnd and the recorded baseRTT, T̄, α; \
                 window_update_matches_the_model_within_half_a_segment",
            )
        };
        out.within("target_cwnd (eq. 5)", f64::from(vb.target), m, bound, rule);
        self.ref_cwnd = (!self.interval).then_some(a.cwnd);
        if vb.target < a.cwnd {
            out.equal(
                "cwnd",
                f64::from(b.cwnd),
                f64::from(vb.target),
                "a decrease applies at once",
            );
            out.equal(
                "ssthresh",
                f64::from(b.ssthresh),
                f64::from(ss_before.min(vb.target)),
                "ssthresh is kept at most cwnd after an update",
            );
            self.carry = Counter::ZERO;
            out.model_cwnd = Some(m);
        } else {
            out.equal(
                "ssthresh",
                f64::from(b.ssthresh),
                f64::from(ss_before.min(a.cwnd)),
                "ssthresh is kept at most cwnd after an update",
            );
            self.spread(ack, vb.target, n, out);
        }
    }

    /// Spreading an increase: + n·(target − ref)/ref per ACK of n packets, with the
    /// carry, never beyond the target (fast_spread).
    fn spread(&mut self, ack: &Ack<'_>, target: u32, n: u64, out: &mut StepCheck) {
        let (a, b) = (ack.a, ack.b);
        let hold = match self.ref_cwnd {
            _ if a.cwnd >= target => Some("at or above the target FAST holds the window"),
            Some(r) if target <= r || r == 0 => Some("fast_spread adds nothing when target ≤ ref"),
            _ => None,
        };
        if let Some(why) = hold {
            out.equal("cwnd", f64::from(b.cwnd), f64::from(a.cwnd), why);
            out.model_cwnd = Some(f64::from(a.cwnd));
            return;
        }
        if b.cwnd < a.cwnd || b.cwnd > target {
            out.holds(false, || {
                format!(
                    "cwnd: port {} outside [cwnd {}, target {target}] of the spread",
                    b.cwnd, a.cwnd
                )
            });
            self.carry = Counter::UNKNOWN;
            return;
        }
        let Some(r) = self.ref_cwnd else {
            // the update that set this target was not seen: its reference window is unknown
            self.carry = Counter::UNKNOWN;
            return;
        };
        let (w, t, rf) = (u64::from(a.cwnd), u64::from(target), u64::from(r));
        let d = u64::from(b.cwnd - a.cwnd);
        let x = n as f64 * (t - rf) as f64 / rf as f64;
        out.model_cwnd = Some(if !ack.limited && d == 0 {
            w as f64
        } else {
            (w as f64 + x).min(t as f64)
        });
        match self
            .carry
            .count(n * (t - rf), rf, d, Some(t - w), !ack.limited)
        {
            Ok(c) => self.carry = c,
            Err(range) => {
                out.holds(false, || {
                    format!(
                        "cwnd: port {} (+{d} from {w}), but the ramp n·(target − ref)/ref = \
                         {n}·({t} − {rf})/{rf} = {x:.4} with the carry left by the earlier ACKs \
                         gives {} (up to the target; increase_is_spread_over_one_window_of_acks: \
                         exact)",
                        b.cwnd,
                        range_text(range)
                    )
                });
                self.carry = Counter::UNKNOWN;
            }
        }
    }
}

impl Rules for Fast {
    fn ack(&mut self, ack: &Ack<'_>, out: &mut StepCheck) {
        let (a, b) = (ack.a, ack.b);
        let (va, vb) = (self.vars[ack.k], self.vars[ack.k + 1]);
        self.invariants(b, &va, &vb, out);
        self.ack_ratio(ack, &va, &vb, out);
        self.avg_rtt(ack, &va, &vb, out);
        if !ack.ran {
            const WHY: &str = "no data acked: cong_avoid does not run";
            out.equal("cwnd", f64::from(b.cwnd), f64::from(a.cwnd), WHY);
            out.equal(
                "ssthresh",
                f64::from(b.ssthresh),
                f64::from(a.ssthresh),
                WHY,
            );
            out.equal("phase", f64::from(vb.phase), f64::from(va.phase), WHY);
            out.equal(
                "target_cwnd",
                f64::from(vb.target),
                f64::from(va.target),
                WHY,
            );
            out.equal("alpha_level", f64::from(vb.level), f64::from(va.level), WHY);
            out.equal("tput_kBps", vb.tput, va.tput, WHY);
            out.model_cwnd = Some(f64::from(a.cwnd));
            return;
        }
        let n = if self.ack_events { 1 } else { ack.delivered };
        let boundary = if a.slow_start() {
            self.slow_start(ack, &va, &vb, n, out)
        } else {
            self.congestion_avoidance(ack, &va, &vb, n, out)
        };
        // an RTT boundary recomputes the level from the throughput of the RTT
        if boundary || vb.tput != va.tput || vb.level != va.level {
            let want = if self.alpha_mode {
                model::alpha_level(va.level, vb.tput, &self.m)
            } else {
                va.level
            };
            out.equal(
                "alpha_level",
                f64::from(vb.level),
                f64::from(want),
                "fast::model::alpha_level of the recorded tput_kBps at an RTT boundary \
                 (alpha_level_c_equals_the_model: exact)",
            );
        }
    }

    fn loss(&mut self, k: usize, _a: &Obs, b: &Obs, out: &mut StepCheck) {
        let vb = self.vars[k + 1];
        let m = model::loss_ssthresh(f64::from(b.prior_cwnd), &self.m);
        out.equal(
            "ssthresh",
            f64::from(b.ssthresh),
            m.floor(),
            "fast::model::loss_ssthresh of prior_cwnd, floored \
             (hand_computed_updates_follow_the_spec: C = ⌊model⌋)",
        );
        // after a timeout an ACK in Loss may already be in slow start (phase 0)
        if matches!(b.state, CaState::Recovery | CaState::Cwr) {
            out.equal(
                "phase",
                f64::from(vb.phase),
                3.0,
                "a reduction starts phase 3",
            );
        }
        out.equal(
            "target_cwnd",
            f64::from(vb.target),
            0.0,
            "a reduction clears the target",
        );
        out.equal(
            "alpha",
            vb.alpha,
            self.alpha_for(vb.level),
            "α is its level's (fast_level_alpha)",
        );
    }

    fn forget(&mut self) {
        self.ref_cwnd = None;
        self.carry = Counter::UNKNOWN;
    }

    fn bounds(&self) -> String {
        format!(
            "FAST (bpf/algo/fast.bpf.c against loader/src/algo/fast/model.rs; γ {} as the port holds \
             it). Window update, eq. (5), at each update seen ({}): target_cwnd vs window(cwnd \
             before the ACK, baseRTT, T̄, α after it, γ), at least 2: port − model ∈ [−0.5 − \
             γ·2^-10, +0.5] (w·baseRTT ≥ 2^43: cut w·2^-20 + 2^-10; \
             window_update_matches_the_model_within_half_a_segment); a decrease applies at once, \
             ssthresh = min(ssthresh, cwnd) (exact). Spread: cwnd after n acked packets = \
             min(target, cwnd + ⌊(carry + n·(target − ref))/ref⌋), the carry being every value \
             consistent with the earlier ACKs (exact; increase_is_spread_over_one_window_of_acks); \
             outside updates target and ssthresh are kept and cwnd holds at the target (exact). \
             T̄: on a new baseRTT (the sample is baseRTT) avg_rtt(T̄, baseRTT, η(cwnd, r)) within \
             |T − T̄|·2^-16 + 2^-10 µs (rtt_average_matches_the_model), otherwise T̄ at least what \
             a sample at baseRTT gives (the RTT samples are not recorded), unchanged outside Open; \
             packets per ACK r: EWMA 1/8 of Δbytes_acked/mss, port − model ∈ [0, 7/2048] (the C's \
             truncation of r/8), where Δbytes_acked is whole segments; baseRTT = Tmin and never \
             rises (exact). α: at an RTT boundary seen (a phase change, a new tput_kBps or level) \
             alpha_level(level, tput_kBps recorded) (exact; alpha_level_c_equals_the_model), α = \
             its level's (exact). Slow start: cwnd + acked up to ssthresh (the kernel's \
             tcp_slow_start, exact); it ends only where ss_exit holds and, at a boundary seen, \
             must end there (exact in mode 0, mode 1 may be late by w·2^-19 packets; \
             slow_start_exit_c_agrees_with_the_model). Reduction: ssthresh = \
             ⌊loss_ssthresh(prior_cwnd)⌋ (exact; hand_computed_updates_follow_the_spec), phase 3, \
             target 0. Not checked: the RTT samples and tput_kBps's value (the port's clock), \
             {}where in_flight < cwnd before the ACK (maybe not cwnd-limited) growth and no growth \
             are both accepted.",
            num(self.m.gamma),
            if self.interval {
                "with update_interval_ms: where target_cwnd changed"
            } else {
                "phase 2/0/3 → 1"
            },
            if self.interval {
                "the spread's rate (ref is not observable with update_interval_ms: only cwnd ≤ \
                 cwnd' ≤ target), "
            } else {
                ""
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_check::check;
    use crate::algo::replay::testing::{defaults, sample, set_var, Tcp, T0};

    /// FAST as bpf/algo/fast.bpf.c runs it (defaults: every other RTT, adaptive α, γ 1/2),
    /// written for this test in integers, on a path of baseRTT 20 ms, 100 packets of BDP
    /// (160 from ACK 1600) and 200 µs per queued packet, one full segment per ACK. The
    /// window update rounds the model's eq. (5) to the nearest segment, as the C does
    /// within its bound.
    struct FastSim {
        tcp: Tcp,
        base: u32,
        avg_fp: u64,
        level: u32,
        alpha: u32,
        target: u32,
        reff: u32,
        cnt: u32,
        phase: u32,
        tput: u32,
        r8: u32,
        round_left: u32,
        /// ACK indices of the window updates (and whether each decreased the window).
        updates: Vec<(usize, bool)>,
        ss_exit_at: Option<usize>,
    }

    impl FastSim {
        fn new() -> FastSim {
            FastSim {
                tcp: Tcp::new(10, INFINITE_SSTHRESH, 0),
                base: 0,
                avg_fp: 0,
                level: 0,
                alpha: 8,
                target: 10,
                reff: 10,
                cnt: 0,
                phase: PHASE_SLOW_START,
                tput: 0,
                r8: 256,
                round_left: 10,
                updates: Vec::new(),
                ss_exit_at: None,
            }
        }

        fn sample(&self, k: usize) -> Sample {
            let avg = self.avg_fp as f64 / 1024.0;
            let base = f64::from(self.base);
            sample(
                k,
                &self.tcp,
                "fast",
                &[
                    ("base_rtt_us", base),
                    ("avg_rtt_us", avg),
                    ("qdelay_us", if avg > base { avg - base } else { 0.0 }),
                    ("alpha", f64::from(self.alpha)),
                    ("alpha_level", f64::from(self.level)),
                    ("target_cwnd", f64::from(self.target)),
                    ("phase", f64::from(self.phase)),
                    ("tput_kBps", f64::from(self.tput)),
                    ("ack_ratio", f64::from(self.r8) / 256.0),
                ],
            )
        }

        fn ack(&mut self, k: usize) {
            let p = FastParams::default();
            // the BDP grows by 60 packets at ACK 1600 (a competing flow leaves)
            let bdp = if k < 1600 { 100 } else { 160 };
            let rtt = 20_000 + self.tcp.cwnd.saturating_sub(bdp) * 200;
            // pkts_acked
            self.r8 = self.r8 - (self.r8 >> 3) + (256 >> 3);
            if self.base == 0 || rtt < self.base {
                self.base = rtt;
            }
            self.tcp.tmin_us = self.base;
            let eta16 = ((3 * u64::from(self.r8)) << 8) / u64::from(self.tcp.cwnd);
            let eta16 = eta16.min(16_384);
            let t = u64::from(rtt) << 10;
            self.avg_fp = if self.avg_fp == 0 {
                t
            } else if t >= self.avg_fp {
                self.avg_fp + (((t - self.avg_fp) * eta16) >> 16)
            } else {
                self.avg_fp - (((self.avg_fp - t) * eta16) >> 16)
            };
            self.tcp.ack_one();
            // cong_avoid
            self.round_left -= 1;
            let boundary = self.round_left == 0;
            if boundary {
                self.round_left = self.tcp.cwnd;
                self.tput = 2000;
                self.level = model::alpha_level(self.level, 2000.0, &p);
                self.alpha = p.alpha_levels[self.level as usize] as u32;
            }
            let avg = self.avg_fp as f64 / 1024.0;
            let mut left_ss = false;
            if self.tcp.cwnd < self.tcp.ssthresh {
                let exit = self.tcp.ssthresh == INFINITE_SSTHRESH
                    && boundary
                    && model::ss_exit(
                        f64::from(self.tcp.cwnd),
                        f64::from(self.base),
                        avg,
                        f64::from(self.alpha),
                        0,
                        0.1,
                    );
                if !exit {
                    self.phase = PHASE_SLOW_START;
                    self.tcp.cwnd = (self.tcp.cwnd + 1).min(self.tcp.ssthresh);
                    return;
                }
                self.tcp.ssthresh = self.tcp.cwnd;
                left_ss = true;
                self.ss_exit_at = Some(k);
            } else if self.phase == PHASE_SLOW_START || self.phase == PHASE_RECOVERY {
                self.phase = PHASE_FREEZE;
                self.target = self.tcp.cwnd;
            }
            let update = if left_ss {
                self.phase = PHASE_UPDATE;
                true
            } else if boundary {
                let u = self.phase != PHASE_UPDATE;
                self.phase = if u { PHASE_UPDATE } else { PHASE_FREEZE };
                u
            } else {
                false
            };
            if update {
                let w = f64::from(self.tcp.cwnd);
                let m =
                    model::window(w, f64::from(self.base), avg, f64::from(self.alpha), 0.5);
                self.target = ((m + 0.5).floor() as u32).max(2);
                self.reff = self.tcp.cwnd;
                let decrease = self.target < self.tcp.cwnd;
                if decrease {
                    self.tcp.cwnd = self.target;
                    self.cnt = 0;
                }
                self.tcp.ssthresh = self.tcp.ssthresh.min(self.tcp.cwnd);
                self.updates.push((k, decrease));
            }
            if self.tcp.cwnd < self.target && self.target > self.reff {
                let c = self.cnt + (self.target - self.reff);
                let inc = c / self.reff;
                self.cnt = c % self.reff;
                self.tcp.cwnd = (self.tcp.cwnd + inc).min(self.target);
            }
        }
    }

    fn fast_run(acks: usize) -> (FastSim, Vec<Sample>) {
        let mut sim = FastSim::new();
        let mut samples = vec![sim.sample(0)];
        for k in 0..acks {
            sim.ack(k);
            samples.push(sim.sample(k + 1));
        }
        (sim, samples)
    }

    #[test]
    fn fast_trajectory_that_follows_the_model_passes() {
        let (sim, samples) = fast_run(3000);
        assert!(sim.ss_exit_at.is_some(), "slow start never ended");
        assert!(sim.updates.len() > 10, "{} updates", sim.updates.len());
        assert!(sim.updates.iter().any(|u| u.1) && sim.updates.iter().any(|u| !u.1));
        let c = check("fast", &defaults("fast"), &samples, T0).unwrap();
        assert_eq!(c.first_divergence, None, "{}", c.bounds);
        assert_eq!(c.steps, 3000, "{}", c.bounds);
        assert_eq!(c.identical_pct, 100.0);
        assert!(c.max_abs_cwnd_diff <= 1.0, "{}", c.max_abs_cwnd_diff);
        assert!(c
            .bounds
            .contains("window_update_matches_the_model_within_half_a_segment"));
        assert!(
            c.bounds.contains("3000 of 3000 ACKs checked"),
            "{}",
            c.bounds
        );
    }

    #[test]
    fn fast_wrong_window_update_is_the_first_divergence() {
        let (sim, mut samples) = fast_run(3000);
        // the third update after slow start: its target three segments too high
        let (k, _) = sim.updates[3];
        let right = samples[k + 1].vars.get("target_cwnd").unwrap();
        set_var(&mut samples[k + 1], "target_cwnd", right + 3.0);
        let c = check("fast", &defaults("fast"), &samples, T0).unwrap();
        let d = c.first_divergence.expect("the wrong target is found");
        assert_eq!(d.step, k, "{}", d.detail);
        assert!(d.detail.contains("target_cwnd (eq. 5)"), "{}", d.detail);
        assert!((d.t_ms - k as f64 * 0.25).abs() < 1e-9);
        assert!(c.identical_pct < 100.0);
    }

    #[test]
    fn fast_window_that_grows_too_fast_is_found_where_it_does() {
        let (sim, mut samples) = fast_run(3000);
        // a window one segment above the spread's, in the middle of an increase
        let (u, _) = *sim.updates.iter().skip(2).find(|u| !u.1).unwrap();
        let k = (u + 5..u + 200)
            .find(|&k| {
                samples[k + 1].cwnd == samples[k].cwnd
                    && samples[k + 1].cwnd < samples[k + 1].vars.get("target_cwnd").unwrap() as u32
            })
            .expect("a step without growth below the target");
        samples[k + 1].cwnd += 1;
        let c = check("fast", &defaults("fast"), &samples, T0).unwrap();
        let d = c.first_divergence.expect("found");
        assert_eq!(d.step, k, "{}", d.detail);
        assert!(d.detail.starts_with("cwnd"), "{}", d.detail);
    }
}
