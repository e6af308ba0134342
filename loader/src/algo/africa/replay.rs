//! TCP Africa's per-ACK replay rules: the port's recorded trajectory checked against [`super::model`].
//!
//! Africa has no Linux module, so `cctl conform` replays a port's samples through the
//! shared machinery of [`crate::algo::replay`] with these rules: the mode rule on the
//! recorded Δ̂, the fast mode's HighSpeed a(w) and its counting in 2^-10 segment
//! (bpf/algo/africa.bpf.c with bpf/algo/highspeed_math.h), slow start and the loss rule, against
//! [`super::model`] within the bounds its unit tests state for the fixed-point C
//! (`Africa::bounds` lists them).
//!
//! Africa depends on HighSpeed TCP: its fast mode is HighSpeed's a(w), so its replay
//! takes HighSpeed's response-function parameters ([`HstcpParams`]) and counter units.

use super::model::{self, AfricaParams};
// The one dependency on another algorithm, as in africa/mod.rs: HighSpeed's a(w).
use crate::algo::highspeed::model::HstcpParams;
use crate::algo::replay::{
    num, param, range_text, var, Ack, Counter, Obs, Result, Rules, StepCheck,
};
use crate::catalogue::Params;
use crate::sample::Sample;

/// Builds Africa's replay rules for one replay: `p` every tunable of Africa (defaults
/// filled in, HighSpeed's response-function tunables among them), `samples` the port's,
/// read for its variables (`vars` of its declaration). The constructor Africa's
/// declaration holds (`replay: replay::rules`).
///
/// Errors: [`crate::algo::replay::ReplayError::MissingParam`],
/// [`crate::algo::replay::ReplayError::MissingVar`].
pub(crate) fn rules(p: &Params, samples: &[Sample]) -> Result<Box<dyn Rules>> {
    Ok(Box::new(Africa::new(p, samples)?))
}

/// TCP Africa's exported variables (loader/src/algo/africa/mod.rs `vars`).
#[derive(Debug, Clone, Copy)]
struct AfricaVars {
    /// 1 = fast (HSTCP), 0 = slow (Reno).
    mode: f64,
    /// Δ̂ at the last round end, packets (exact: the port's << 10 over 1024).
    delta: f64,
    /// Increase per RTT at the last CA ACK, segments (exact: the port's << 16 over 65536).
    a: f64,
    switches: f64,
}

/// bpf/algo/highspeed_math.h: the counter's unit is 2^-10 segment, cwnd up to 2^22 − 1.
const HSTCP_CNT_SHIFT: u32 = 10;
const HSTCP_MAX_CWND: u64 = (1 << 22) - 1;

struct Africa {
    p: AfricaParams,
    /// a(w) from RFC 3649's table (hstcp_mode 0) rather than its formulas.
    table: bool,
    ack_events: bool,
    vars: Vec<AfricaVars>,
    /// The kernel's `snd_cwnd_cnt` (units of 2^-10 segment).
    carry: Counter,
}

impl Africa {
    fn new(p: &Params, samples: &[Sample]) -> Result<Africa> {
        let table = param(p, "hstcp_mode")? == 0;
        let hstcp = if table {
            // the table is RFC 3649's, whatever the formula tunables say
            HstcpParams::rfc3649()
        } else {
            HstcpParams {
                low_window: f64::from(param(p, "low_window_pkts")?),
                high_window: f64::from(param(p, "high_window_pkts")?),
                high_p: f64::from(param(p, "high_p_ppb")?) * 1e-9,
                high_decrease: f64::from(param(p, "high_decrease_per_mille")?) / 1000.0,
            }
        };
        let vars = (0..samples.len())
            .map(|k| {
                Ok(AfricaVars {
                    mode: var(samples, k, "mode")?,
                    delta: var(samples, k, "delta_hat")?,
                    a: var(samples, k, "a")?,
                    switches: var(samples, k, "mode_switches")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Africa {
            p: AfricaParams {
                alpha: f64::from(param(p, "alpha_cpkt")?) / 100.0,
                hstcp,
            },
            table,
            ack_events: param(p, "ack_counting")? != 0,
            vars,
            carry: Counter::UNKNOWN,
        })
    }

    /// The mode rule and its counter, after any ACK.
    fn invariants(&self, va: &AfricaVars, vb: &AfricaVars, out: &mut StepCheck) {
        let fast = model::is_fast(vb.delta, self.p.alpha);
        out.equal(
            "mode",
            vb.mode,
            if fast { 1.0 } else { 0.0 },
            "africa::model::is_fast of the recorded Δ̂ \
             (delta_hat_and_mode_match_the_model_over_a_grid: the C compares the same number, \
             exact)",
        );
        out.equal(
            "mode_switches",
            vb.switches - va.switches,
            if vb.mode != va.mode { 1.0 } else { 0.0 },
            "one switch per mode change, at most one round end per ACK",
        );
    }

    /// The increase a(w) the fast mode must use at cwnd `w` against the model's.
    fn check_a(&self, vb: &AfricaVars, w: u64, out: &mut StepCheck) {
        if vb.mode == 0.0 {
            out.equal("a", vb.a, 1.0, "slow mode: Reno's 1 segment per RTT");
            return;
        }
        let am = model::increase_per_rtt(w as f64, true, &self.p);
        if self.table {
            let lag = (0.05 * vb.a).min(1.75);
            out.within(
                "a",
                vb.a,
                am,
                (-lag, 1.0),
                "RFC 3649's row a = row + 1 lags hstcp::a at the row's bound by at most min(5 %, \
                 1.75) (rfc_table_rows_follow_the_formulas) and exceeds a(w) within the row by \
                 less than 1",
            );
            out.holds(vb.a.fract() == 0.0, || {
                format!("a: port {} is no row of RFC 3649's table", num(vb.a))
            });
        } else {
            let e = 5e-4 * am + 2.0 / 65536.0;
            out.within(
                "a",
                vb.a,
                am,
                (-e, e),
                "hstcp::a within 5e-4·a + 2^-15 \
                 (formula_mode_matches_the_model_over_a_grid_of_windows)",
            );
        }
    }

    /// One congestion-avoidance step at window `w` of `n` counted packets: w += a/w per
    /// packet with the carry (hstcp_ai_step). Returns the model's cwnd.
    fn ca_step(
        &mut self,
        ack: &Ack<'_>,
        w: u64,
        n: u64,
        va: &AfricaVars,
        vb: &AfricaVars,
        out: &mut StepCheck,
    ) -> f64 {
        let b = ack.b;
        // the sender may not have been cwnd-limited: then nothing ran
        let maybe_idle = !ack.limited && w == u64::from(ack.a.cwnd) && vb.a == va.a;
        if !maybe_idle {
            self.check_a(vb, w, out);
        }
        let a_model = model::increase_per_rtt(w as f64, vb.mode != 0.0, &self.p);
        let x = n as f64 * a_model / w as f64;
        if w >= HSTCP_MAX_CWND {
            out.equal(
                "cwnd",
                f64::from(b.cwnd),
                w as f64,
                "no growth at HSTCP_MAX_CWND",
            );
            return w as f64;
        }
        if u64::from(b.cwnd) < w {
            out.holds(false, || {
                format!(
                    "cwnd: port {} below {w}: congestion avoidance only grows",
                    b.cwnd
                )
            });
            self.carry = Counter::UNKNOWN;
            return w as f64 + x;
        }
        let d = u64::from(b.cwnd) - w;
        let a_q16 = (vb.a * 65536.0).round() as u64;
        let add = n * (a_q16 >> (16 - HSTCP_CNT_SHIFT));
        match self
            .carry
            .count(add, w << HSTCP_CNT_SHIFT, d, None, maybe_idle)
        {
            Ok(c) => self.carry = c,
            Err(range) => {
                out.holds(false, || {
                    format!(
                        "cwnd: port {} (+{d} from {w}), but n·a/w = {n}·{}/{w} = {:.4} (a as \
                         recorded; the model's a(w) {a_model:.4}) with the carry left by the \
                         earlier ACKs gives {} (w += a/w per packet, counted in 2^-10 segment: \
                         exact)",
                        b.cwnd,
                        num(vb.a),
                        n as f64 * vb.a / w as f64,
                        range_text(range)
                    )
                });
                self.carry = Counter::UNKNOWN;
            }
        }
        if maybe_idle && d == 0 {
            w as f64
        } else {
            w as f64 + x
        }
    }
}

impl Rules for Africa {
    fn ack(&mut self, ack: &Ack<'_>, out: &mut StepCheck) {
        let (a, b) = (ack.a, ack.b);
        let (va, vb) = (self.vars[ack.k], self.vars[ack.k + 1]);
        self.invariants(&va, &vb, out);
        if !ack.ran {
            const WHY: &str = "no data acked: cong_avoid does not run";
            out.equal("cwnd", f64::from(b.cwnd), f64::from(a.cwnd), WHY);
            out.equal(
                "ssthresh",
                f64::from(b.ssthresh),
                f64::from(a.ssthresh),
                WHY,
            );
            out.equal("mode", vb.mode, va.mode, WHY);
            out.equal("delta_hat", vb.delta, va.delta, WHY);
            out.equal("a", vb.a, va.a, WHY);
            out.model_cwnd = Some(f64::from(a.cwnd));
            return;
        }
        out.equal(
            "ssthresh",
            f64::from(b.ssthresh),
            f64::from(a.ssthresh),
            "Africa sets ssthresh only at a loss",
        );
        if vb.delta != va.delta {
            out.holds(
                b.tmin_us > 0 && vb.delta >= 0.0 && vb.delta < f64::from(a.cwnd),
                || {
                    format!(
                    "delta_hat: port {} at a round end outside [0, cwnd {}) or without a baseRTT \
                     (Δ̂ = w·(RTT − baseRTT)/RTT < w)",
                    num(vb.delta),
                    a.cwnd
                )
                },
            );
        }
        let cwnd_a = u64::from(a.cwnd);
        let n_of = |x: u64| if self.ack_events { 1 } else { x };
        let model = if a.slow_start() {
            let grown = (cwnd_a + ack.delivered).min(u64::from(a.ssthresh));
            let left = ack.delivered.saturating_sub(grown.saturating_sub(cwnd_a));
            let idle = !ack.limited && b.cwnd == a.cwnd;
            if idle || left == 0 {
                if !idle {
                    out.equal(
                        "cwnd",
                        f64::from(b.cwnd),
                        grown as f64,
                        "tcp_slow_start: cwnd + acked, at most ssthresh",
                    );
                }
                out.equal("a", vb.a, va.a, "no congestion-avoidance step on this ACK");
                if idle {
                    cwnd_a as f64
                } else {
                    grown as f64
                }
            } else {
                self.ca_step(ack, grown, n_of(left), &va, &vb, out)
            }
        } else {
            self.ca_step(ack, cwnd_a, n_of(ack.delivered), &va, &vb, out)
        };
        out.model_cwnd = Some(model);
    }

    fn loss(&mut self, k: usize, _a: &Obs, b: &Obs, out: &mut StepCheck) {
        let (va, vb) = (self.vars[k], self.vars[k + 1]);
        out.equal(
            "ssthresh",
            f64::from(b.ssthresh),
            model::ssthresh(f64::from(b.prior_cwnd)).floor(),
            "africa::model::ssthresh of prior_cwnd, floored (tcp_reno_ssthresh: max(w/2, 2) in \
             whole segments)",
        );
        self.invariants(&va, &vb, out);
    }

    fn forget(&mut self) {
        self.carry = Counter::UNKNOWN;
    }

    fn bounds(&self) -> String {
        format!(
            "Africa (bpf/algo/africa.bpf.c against loader/src/algo/africa/model.rs; α {} packets, a(w) \
             from {}). Every ACK: mode = is_fast(Δ̂ recorded, α) (exact; \
             delta_hat_and_mode_match_the_model_over_a_grid), mode_switches + 1 exactly at a mode \
             change; at a round end seen (Δ̂ changed) Δ̂ ∈ [0, w) with a baseRTT. Congestion \
             avoidance: a = 1 in slow mode (exact), in fast mode {}; cwnd + ⌊(carry + n·a)/w⌋ in \
             2^-10 segment with the port's a (hstcp_ai_step's counting, exact), the carry being \
             every value consistent with the earlier ACKs; slow start cwnd + acked up to ssthresh, \
             the leftover to congestion avoidance (the kernel's tcp_slow_start, exact). Reduction: \
             ssthresh = ⌊ssthresh(prior_cwnd)⌋ = max(w/2, 2) (exact). Not checked: the RTT of a \
             round (Δ̂ is taken as recorded), the snd_cwnd clamp; where in_flight < cwnd before \
             the ACK (maybe not cwnd-limited) growth and no growth are both accepted.",
            num(self.p.alpha),
            if self.table {
                "RFC 3649's table"
            } else {
                "RFC 3649's formulas"
            },
            if self.table {
                "a whole row value with a − hstcp::a(w) ∈ [−min(0.05·a, 1.75), 1] \
                 (rfc_table_rows_follow_the_formulas)"
            } else {
                "|a − hstcp::a(w)| ≤ 5e-4·a + 2^-15 \
                 (formula_mode_matches_the_model_over_a_grid_of_windows)"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::replay::testing::{defaults, sample, set_var, Tcp, T0};
    use crate::model_check::{check, has_model};
    use crate::sample::CaState;

    /// TCP Africa as bpf/algo/africa.bpf.c runs it with the formula a(w) (hstcp_mode 1): from
    /// cwnd 90 in congestion avoidance, one segment per ACK, rounds of one window with the
    /// RTT of a 100-packet BDP and 250 µs per queued packet; a(w) is the model's cut to
    /// 2^-16 (inside the C's bound). One loss at ACK 2000.
    struct AfricaSim {
        tcp: Tcp,
        cnt: u64,
        fast: bool,
        delta_q10: u32,
        a_q16: u32,
        switches: u32,
        round_left: u32,
    }

    impl AfricaSim {
        fn sample(&self, k: usize) -> Sample {
            sample(
                k,
                &self.tcp,
                "africa",
                &[
                    ("mode", if self.fast { 1.0 } else { 0.0 }),
                    ("delta_hat", f64::from(self.delta_q10) / 1024.0),
                    ("a", f64::from(self.a_q16) / 65536.0),
                    ("mode_switches", f64::from(self.switches)),
                ],
            )
        }

        fn ack(&mut self) {
            let p = AfricaParams::default();
            self.tcp.ack_one();
            self.round_left -= 1;
            let w = self.tcp.cwnd;
            if self.round_left == 0 {
                let (base, rtt) = (20_000u64, 20_000 + u64::from(w.saturating_sub(100)) * 250);
                self.delta_q10 = (((u64::from(w) * (rtt - base)) << 10) / rtt) as u32;
                let fast = u64::from(self.delta_q10) * 100 < 200 << 10;
                if fast != self.fast {
                    self.switches += 1;
                }
                self.fast = fast;
                self.round_left = w;
            }
            self.a_q16 = if self.fast {
                (model::increase_per_rtt(f64::from(w), true, &p) * 65536.0).floor() as u32
            } else {
                65536
            };
            let thr = u64::from(w) << 10;
            let c = self.cnt + u64::from(self.a_q16 >> 6);
            self.tcp.cwnd += (c / thr) as u32;
            self.cnt = c % thr;
        }
    }

    fn africa_run(acks: usize) -> (AfricaSim, Vec<Sample>) {
        let mut sim = AfricaSim {
            tcp: Tcp::new(90, 90, 20_000),
            cnt: 0,
            fast: true,
            delta_q10: 0,
            a_q16: 65536,
            switches: 0,
            round_left: 90,
        };
        let mut samples = vec![sim.sample(0)];
        for k in 0..acks {
            match k {
                2000 => {
                    sim.tcp.prior_cwnd = sim.tcp.cwnd;
                    sim.tcp.ssthresh = (sim.tcp.cwnd / 2).max(2);
                    sim.tcp.backoffs += 1;
                    sim.tcp.state = CaState::Recovery;
                    sim.tcp.cwnd -= 1;
                    sim.cnt = 0;
                    sim.tcp.ack_one();
                }
                2001..=2003 => sim.tcp.ack_one(),
                2004 => {
                    sim.tcp.state = CaState::Open;
                    sim.tcp.cwnd = sim.tcp.ssthresh;
                    sim.round_left = sim.tcp.cwnd;
                    sim.tcp.ack_one();
                }
                _ => sim.ack(),
            }
            samples.push(sim.sample(k + 1));
        }
        (sim, samples)
    }

    fn africa_params() -> Params {
        let mut p = defaults("africa");
        p.insert("hstcp_mode", 1);
        p
    }

    #[test]
    fn africa_trajectory_that_follows_the_model_passes() {
        let (sim, samples) = africa_run(4000);
        assert!(sim.switches >= 2, "{} switches", sim.switches);
        let c = check("africa", &africa_params(), &samples, T0).unwrap();
        assert_eq!(c.first_divergence, None, "{}", c.bounds);
        assert_eq!(c.steps, 4000 - 4, "{}", c.bounds);
        assert_eq!(c.identical_pct, 100.0);
        assert!(c.max_abs_cwnd_diff < 1.0, "{}", c.max_abs_cwnd_diff);
    }

    #[test]
    fn africa_wrong_window_is_the_first_divergence() {
        let (_, mut samples) = africa_run(4000);
        let k = 1200;
        samples[k + 1].cwnd += 3;
        let c = check("africa", &africa_params(), &samples, T0).unwrap();
        let d = c.first_divergence.expect("found");
        assert_eq!(d.step, k, "{}", d.detail);
        assert_eq!(d.port_cwnd, samples[k + 1].cwnd);
        assert!(
            (d.model_cwnd - f64::from(samples[k].cwnd)).abs() < 1.0,
            "{}",
            d.model_cwnd
        );
        assert!(d.detail.starts_with("cwnd"), "{}", d.detail);
        // a mode that contradicts the recorded Δ̂
        let (_, mut samples) = africa_run(4000);
        let m = samples[301].vars.get("mode").unwrap();
        set_var(&mut samples[301], "mode", 1.0 - m);
        let d = check("africa", &africa_params(), &samples, T0)
            .unwrap()
            .first_divergence
            .unwrap();
        assert_eq!(d.step, 300, "{}", d.detail);
        assert!(d.detail.starts_with("mode"), "{}", d.detail);
    }

    #[test]
    fn refuses_what_it_cannot_check() {
        let (_, samples) = africa_run(10);
        let e = check("cubic", &defaults("cubic"), &samples, T0).unwrap_err();
        assert!(e.to_string().contains("no f64 model"), "{e}");
        let e = check("africa", &africa_params(), &samples[..1], T0).unwrap_err();
        assert!(e.to_string().contains("at least 2"), "{e}");
        let e = check("fast", &defaults("fast"), &samples, T0).unwrap_err();
        assert!(e.to_string().contains("not of the 'fast' port"), "{e}");
        let mut other = samples.clone();
        other[3].cookie = 1;
        assert!(check("africa", &africa_params(), &other, T0).is_err());
        assert!(has_model("fast") && has_model("compound") && has_model("africa"));
        assert!(!has_model("cubic"));
    }
}
