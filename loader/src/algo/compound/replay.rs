//! Compound TCP's per-ACK replay rules: the port's recorded trajectory checked against [`super::model`].
//!
//! Compound has no Linux module, so `cctl conform` replays a port's samples through the
//! shared machinery of [`crate::algo::replay`] with these rules: snd_cwnd = cwnd_reno +
//! ⌊dwnd⌋ (bpf/algo/compound.bpf.c), the delay window's update at a round end, the Reno
//! part's increase with its carry, slow start and the loss rule, against
//! [`super::model`] within the bounds its unit tests state for the fixed-point C
//! (`Compound::bounds` lists them).

use super::model::{self, CompoundParams};
use crate::algo::replay::{
    num, param, range_text, var, Ack, Counter, Obs, Result, Rules, StepCheck, ULP,
};
use crate::catalogue::Params;
use crate::sample::{CaState, Sample};

/// Builds Compound's replay rules for one replay: `p` every tunable of Compound
/// (defaults filled in), `samples` the port's, read for its variables (`vars` of its
/// declaration). The constructor Compound's declaration holds (`replay: replay::rules`).
///
/// Errors: [`crate::algo::replay::ReplayError::MissingParam`],
/// [`crate::algo::replay::ReplayError::MissingVar`].
pub(crate) fn rules(p: &Params, samples: &[Sample]) -> Result<Box<dyn Rules>> {
    Ok(Box::new(Compound::new(p, samples)?))
}

/// Compound's exported variables (loader/src/algo/compound/mod.rs `vars`).
#[derive(Debug, Clone, Copy)]
struct CompoundVars {
    /// cwnd_reno, segments.
    reno: u64,
    /// dwnd, packets (exact: the port's << 10 over 1024).
    dwnd: f64,
    /// diff of the last round, packets (exact as dwnd).
    diff: f64,
}

struct Compound {
    p: CompoundParams,
    ack_events: bool,
    vars: Vec<CompoundVars>,
    /// `reno_cnt`.
    carry: Counter,
}

/// The kernel's snd_cwnd given to the Reno part, dwnd kept (compound_sync): (cwnd_reno, dwnd).
fn compound_sync(cwnd: u64, reno: u64, dwnd: f64) -> (u64, f64) {
    let dw = dwnd.floor() as u64;
    if reno + dw == cwnd {
        (reno, dwnd)
    } else if cwnd > dw {
        (cwnd - dw, dwnd)
    } else if cwnd > 1 {
        (1, (cwnd - 1) as f64)
    } else {
        (cwnd, 0.0)
    }
}

/// snd_cwnd = cwnd_reno + ⌊dwnd⌋, at least 1 (compound_set_cwnd; the clamp is not recorded).
fn compound_window(reno: u64, dwnd: f64) -> u64 {
    (reno + dwnd.floor() as u64).max(1)
}

impl Compound {
    fn new(p: &Params, samples: &[Sample]) -> Result<Compound> {
        let pm = |k: &str| -> Result<f64> { Ok(f64::from(param(p, k)?) / 1000.0) };
        let model = CompoundParams {
            alpha: pm("alpha_pm")?,
            beta: pm("beta_pm")?,
            k: pm("k_pm")?,
            zeta: pm("zeta_pm")?,
            gamma: f64::from(param(p, "gamma_pkts")?),
        };
        let vars = (0..samples.len())
            .map(|k| {
                Ok(CompoundVars {
                    reno: var(samples, k, "cwnd_reno")? as u64,
                    dwnd: var(samples, k, "dwnd")?,
                    diff: var(samples, k, "diff")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Compound {
            p: model,
            ack_events: param(p, "ack_counting")? != 0,
            vars,
            carry: Counter::UNKNOWN,
        })
    }

    /// The bound on port − model of one dwnd update (compound/model.rs
    /// dwnd_update_matches_the_model_over_a_grid, with pow_bound of
    /// win_to_the_k_matches_powf_over_a_grid).
    fn dwnd_bound(&self, win: f64, diff: f64) -> (f64, f64) {
        if diff < self.p.gamma {
            let pw = win.powf(self.p.k);
            let r = (self.p.k + 1.0) * std::f64::consts::LN_2 / 65536.0 + 2f64.powi(-24);
            let (lo, hi) = (-1e-8 * pw, r * pw + ULP);
            (-(self.p.alpha * hi + 2.0 * ULP), -(self.p.alpha * lo))
        } else {
            (-1e-9, ULP)
        }
    }

    /// The Reno part's increase: + ⌊(carry + n)/win⌋ (compound_reno_ai). Returns the
    /// model's cwnd_reno (real-valued).
    fn reno_ai(
        &mut self,
        ack: &Ack<'_>,
        reno0: u64,
        win: u64,
        n: u64,
        vb: &CompoundVars,
        out: &mut StepCheck,
    ) -> f64 {
        let idle = !ack.limited && vb.reno == reno0;
        if vb.reno < reno0 {
            out.holds(false, || {
                format!(
                    "cwnd_reno: port {} below {reno0}: the Reno part only grows here",
                    vb.reno
                )
            });
            self.carry = Counter::UNKNOWN;
            return reno0 as f64;
        }
        let d = vb.reno - reno0;
        let x = n as f64 * model::reno_increase(win as f64);
        match self.carry.count(n, win, d, None, !ack.limited) {
            Ok(c) => self.carry = c,
            Err(range) => {
                out.holds(false, || {
                    format!(
                        "cwnd_reno: port {} (+{d} from {reno0}), but n/win = {n}/{win} = {x:.4} \
                         with the carry left by the earlier ACKs gives {} (reno_increase 1/win per \
                         packet; reno_part_gains_one_packet_per_window_of_acks: exact)",
                        vb.reno,
                        range_text(range)
                    )
                });
                self.carry = Counter::UNKNOWN;
            }
        }
        if idle {
            reno0 as f64
        } else {
            reno0 as f64 + x
        }
    }
}

impl Rules for Compound {
    fn ack(&mut self, ack: &Ack<'_>, out: &mut StepCheck) {
        let (a, b) = (ack.a, ack.b);
        let (va, vb) = (self.vars[ack.k], self.vars[ack.k + 1]);
        if !ack.ran {
            const WHY: &str = "no data acked: cong_avoid does not run";
            out.equal("cwnd", f64::from(b.cwnd), f64::from(a.cwnd), WHY);
            out.equal(
                "ssthresh",
                f64::from(b.ssthresh),
                f64::from(a.ssthresh),
                WHY,
            );
            out.equal("cwnd_reno", vb.reno as f64, va.reno as f64, WHY);
            out.equal("dwnd", vb.dwnd, va.dwnd, WHY);
            out.equal("diff", vb.diff, va.diff, WHY);
            out.model_cwnd = Some(f64::from(a.cwnd));
            return;
        }
        out.equal(
            "ssthresh",
            f64::from(b.ssthresh),
            f64::from(a.ssthresh),
            "Compound sets ssthresh only at a loss",
        );
        let cwnd_a = u64::from(a.cwnd);
        let (reno_s, dwnd_s) = compound_sync(cwnd_a, va.reno, va.dwnd);
        let round_ended = vb.diff != va.diff;
        if round_ended {
            out.holds(vb.diff >= 0.0 && vb.diff < f64::from(a.cwnd), || {
                format!(
                    "diff: port {} outside [0, cwnd {}) (diff = w·(RTT − baseRTT)/RTT < w)",
                    num(vb.diff),
                    a.cwnd
                )
            });
        }
        // the delay window: updated at a round end in congestion avoidance while cwnd-limited
        let mut dwnd_model = dwnd_s;
        if a.slow_start() {
            out.equal(
                "dwnd",
                vb.dwnd,
                dwnd_s,
                "dwnd does not change in slow start",
            );
        } else if round_ended || vb.dwnd != dwnd_s {
            let w = f64::from(a.cwnd);
            let m = model::dwnd_update(w, dwnd_s, vb.diff, &self.p);
            if ack.limited || vb.dwnd != dwnd_s {
                out.within(
                    "dwnd",
                    vb.dwnd,
                    m,
                    self.dwnd_bound(w, vb.diff),
                    "compound::model::dwnd_update of cwnd, dwnd and the recorded diff; \
                     dwnd_update_matches_the_model_over_a_grid",
                );
                dwnd_model = m;
            }
        }
        // snd_cwnd after the round's update
        let w1 = compound_window(reno_s, vb.dwnd);
        let n_of = |x: u64| if self.ack_events { 1 } else { x };
        let reno_model = if a.slow_start() {
            let grown = (w1 + ack.delivered).min(u64::from(a.ssthresh));
            if !ack.limited && b.cwnd == a.cwnd {
                // maybe not cwnd-limited: nothing grows
                out.equal(
                    "cwnd_reno",
                    vb.reno as f64,
                    reno_s as f64,
                    "not cwnd-limited: the Reno part kept",
                );
                reno_s as f64
            } else {
                // slow start grows the total; the Reno part takes it; a leftover goes to
                // the Reno increase
                let left = ack.delivered.saturating_sub(grown.saturating_sub(w1));
                let (reno1, _) = compound_sync(grown, reno_s, vb.dwnd);
                if left == 0 {
                    out.equal(
                        "cwnd",
                        f64::from(b.cwnd),
                        grown as f64,
                        "tcp_slow_start: cwnd + acked, at most ssthresh",
                    );
                    out.equal(
                        "cwnd_reno",
                        vb.reno as f64,
                        reno1 as f64,
                        "slow start's growth goes to the Reno part",
                    );
                    reno1 as f64
                } else {
                    self.reno_ai(ack, reno1, grown, n_of(left), &vb, out)
                }
            }
        } else {
            self.reno_ai(ack, reno_s, w1, n_of(ack.delivered), &vb, out)
        };
        out.model_cwnd = Some(reno_model + dwnd_model);
        out.equal(
            "cwnd",
            f64::from(b.cwnd),
            compound_window(vb.reno, vb.dwnd) as f64,
            "snd_cwnd = cwnd_reno + ⌊dwnd⌋ (compound_set_cwnd)",
        );
    }

    fn loss(&mut self, k: usize, a: &Obs, b: &Obs, out: &mut StepCheck) {
        let (va, vb) = (self.vars[k], self.vars[k + 1]);
        match b.state {
            CaState::Recovery | CaState::Cwr => {
                if b.prior_cwnd == a.cwnd {
                    // the reduction began at sample k's window: its variables are the input
                    let (reno_s, _) = compound_sync(u64::from(a.cwnd), va.reno, va.dwnd);
                    let (rm, dm) =
                        model::on_loss(f64::from(a.cwnd), reno_s as f64, &self.p);
                    out.equal(
                        "cwnd_reno",
                        vb.reno as f64,
                        if reno_s > 2 { rm.floor() } else { 1.0 },
                        "compound::model::on_loss, halved in whole segments \
                         (loss_matches_the_model_and_gives_up_beta_of_the_window)",
                    );
                    out.within(
                        "dwnd",
                        vb.dwnd,
                        dm,
                        (-ULP, 0.0),
                        "compound::model::on_loss: model − C ∈ [0, 2^-10) \
                         (loss_matches_the_model_and_gives_up_beta_of_the_window)",
                    );
                    out.equal("diff", vb.diff, va.diff, "a reduction keeps diff");
                }
                out.equal(
                    "ssthresh",
                    f64::from(b.ssthresh),
                    (vb.reno + vb.dwnd.floor() as u64).max(2) as f64,
                    "ssthresh = cwnd_reno + ⌊dwnd⌋ after the loss rule, at least 2 \
                     (compound_ssthresh)",
                );
            }
            _ => out.equal(
                "dwnd",
                vb.dwnd,
                0.0,
                "a timeout empties dwnd (compound_set_state)",
            ),
        }
    }

    fn forget(&mut self) {
        self.carry = Counter::UNKNOWN;
    }

    fn bounds(&self) -> String {
        format!(
            "Compound (bpf/algo/compound.bpf.c against loader/src/algo/compound/model.rs; α {}, β {}, k \
             {}, ζ {}, γ {}). Every ACK that acks data: snd_cwnd = cwnd_reno + ⌊dwnd⌋ (exact), the \
             kernel's window first given to the Reno part (compound_sync, exact). Delay window, at \
             a round end seen (diff or dwnd changed) in congestion avoidance: dwnd vs \
             dwnd_update(cwnd, dwnd, diff recorded): growth (diff < γ) port − model ∈ [−(α·(r·w^k \
             + 2^-10) + 2^-9), α·1e-8·w^k], r = (k + 1)·ln 2·2^-16 + 2^-24; retreat (diff ≥ γ) \
             port − model ∈ [0, 2^-10] (dwnd_update_matches_the_model_over_a_grid, \
             win_to_the_k_matches_powf_over_a_grid); unchanged in slow start (exact); diff ∈ [0, \
             w). Reno part: + ⌊(carry + n)/win⌋ per ACK of n packets, 1/win each (reno_increase), \
             the carry being every value consistent with the earlier ACKs (exact; \
             reno_part_gains_one_packet_per_window_of_acks); slow start cwnd + acked up to \
             ssthresh (the kernel's tcp_slow_start, exact). Reduction begun at sample k's window: \
             on_loss(win, cwnd_reno): cwnd_reno ⌊·⌋ (exact), dwnd model − port ∈ [0, 2^-10) \
             (loss_matches_the_model_and_gives_up_beta_of_the_window), ssthresh = cwnd_reno + \
             ⌊dwnd⌋ (exact); a timeout empties dwnd. Not checked: the RTT of a round (diff is \
             taken as recorded), the snd_cwnd clamp; where in_flight < cwnd before the ACK (maybe \
             not cwnd-limited) growth and no growth are both accepted.",
            num(self.p.alpha),
            num(self.p.beta),
            num(self.p.k),
            num(self.p.zeta),
            num(self.p.gamma)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model_check::check;
    use crate::algo::replay::testing::{defaults, sample, set_var, Tcp, T0};

    /// Compound as bpf/algo/compound.bpf.c runs it (defaults), in congestion avoidance from
    /// cwnd 20, one segment per ACK, rounds of one window with the RTT of a 40-packet BDP
    /// and 500 µs per queued packet; dwnd is the model's update cut to 2^-10 (inside the
    /// C's bound). One loss at ACK 1500: recovery for 6 ACKs, then back to ssthresh.
    struct CompoundSim {
        tcp: Tcp,
        reno: u32,
        cnt: u32,
        dwnd_fp: u32,
        diff_fp: u32,
        round_left: u32,
        rounds: usize,
        growths: usize,
        /// Rounds with diff ≥ γ.
        retreats: usize,
    }

    impl CompoundSim {
        fn sample(&self, k: usize) -> Sample {
            sample(
                k,
                &self.tcp,
                "compound",
                &[
                    ("cwnd_reno", f64::from(self.reno)),
                    ("dwnd", f64::from(self.dwnd_fp) / 1024.0),
                    ("diff", f64::from(self.diff_fp) / 1024.0),
                ],
            )
        }

        fn set_cwnd(&mut self) {
            self.tcp.cwnd = (self.reno + (self.dwnd_fp >> 10)).max(1);
        }

        fn ack(&mut self) {
            let p = CompoundParams::default();
            self.tcp.ack_one();
            self.round_left -= 1;
            if self.round_left == 0 {
                let w = self.tcp.cwnd;
                let (base, rtt) = (20_000u64, 20_000 + u64::from(w.saturating_sub(40)) * 500);
                self.diff_fp = (((u64::from(w) << 10) * (rtt - base)) / rtt) as u32;
                let m = model::dwnd_update(
                    f64::from(w),
                    f64::from(self.dwnd_fp) / 1024.0,
                    f64::from(self.diff_fp) / 1024.0,
                    &p,
                );
                let new = (m * 1024.0).floor() as u32;
                if self.diff_fp < 30 << 10 {
                    self.growths += usize::from(new > self.dwnd_fp);
                } else {
                    self.retreats += 1;
                }
                self.dwnd_fp = new;
                self.set_cwnd();
                self.round_left = self.tcp.cwnd;
                self.rounds += 1;
            }
            self.cnt += 1;
            if self.cnt >= self.tcp.cwnd {
                self.reno += self.cnt / self.tcp.cwnd;
                self.cnt %= self.tcp.cwnd;
            }
            self.set_cwnd();
        }

        /// The ACK that starts fast recovery: compound_ssthresh, then PRR's first step.
        fn loss(&mut self) {
            let win = self.tcp.cwnd;
            let keep = (u64::from(win) << 10) * 500 / 1000;
            let half = u64::from(self.reno) << 9;
            self.dwnd_fp = keep.saturating_sub(half) as u32;
            self.reno = if self.reno > 2 { self.reno >> 1 } else { 1 };
            self.cnt = 0;
            self.tcp.prior_cwnd = win;
            self.tcp.ssthresh = (self.reno + (self.dwnd_fp >> 10)).max(2);
            self.tcp.backoffs += 1;
            self.tcp.state = CaState::Recovery;
            self.tcp.cwnd = win - 1;
            self.tcp.ack_one();
        }
    }

    fn compound_run(acks: usize) -> (CompoundSim, Vec<Sample>) {
        let mut sim = CompoundSim {
            tcp: Tcp::new(20, 20, 20_000),
            reno: 20,
            cnt: 0,
            dwnd_fp: 0,
            diff_fp: 0,
            round_left: 20,
            rounds: 0,
            growths: 0,
            retreats: 0,
        };
        let mut samples = vec![sim.sample(0)];
        for k in 0..acks {
            match k {
                1500 => sim.loss(),
                1501..=1505 => {
                    sim.tcp.cwnd = (sim.tcp.cwnd - 1).max(sim.tcp.ssthresh);
                    sim.tcp.ack_one();
                }
                1506 => {
                    sim.tcp.state = CaState::Open;
                    sim.tcp.cwnd = sim.tcp.ssthresh;
                    sim.tcp.ack_one();
                    sim.round_left = sim.tcp.cwnd;
                }
                _ => sim.ack(),
            }
            samples.push(sim.sample(k + 1));
        }
        (sim, samples)
    }

    #[test]
    fn compound_trajectory_that_follows_the_model_passes() {
        let (sim, samples) = compound_run(3000);
        assert!(
            sim.rounds > 20 && sim.growths > 5 && sim.retreats >= 2,
            "{} rounds, {} growths, {} retreats",
            sim.rounds,
            sim.growths,
            sim.retreats
        );
        let c = check("compound", &defaults("compound"), &samples, T0).unwrap();
        assert_eq!(c.first_divergence, None, "{}", c.bounds);
        // ACKs 1501..=1506 are in recovery or leave it: not checked; 1500 starts it
        assert_eq!(c.steps, 3000 - 6, "{}", c.bounds);
        assert_eq!(c.identical_pct, 100.0);
        assert!(
            c.bounds.contains("1 of them start a reduction"),
            "{}",
            c.bounds
        );
        assert!(c.bounds.contains("6 in CWR/Recovery/Loss"), "{}", c.bounds);
    }

    #[test]
    fn compound_wrong_window_is_the_first_divergence() {
        let (_, mut samples) = compound_run(3000);
        let k = 700;
        samples[k + 1].cwnd += 2;
        let c = check("compound", &defaults("compound"), &samples, T0).unwrap();
        let d = c.first_divergence.expect("found");
        assert_eq!(d.step, k, "{}", d.detail);
        assert!(
            d.detail.contains("snd_cwnd = cwnd_reno + ⌊dwnd⌋"),
            "{}",
            d.detail
        );
        // a dwnd off by more than the fixed-point bound at a round end
        let (_, mut samples) = compound_run(3000);
        let k = (800..1400)
            .find(|&k| samples[k + 1].vars.get("diff") != samples[k].vars.get("diff"))
            .unwrap();
        let dw = samples[k + 1].vars.get("dwnd").unwrap();
        set_var(&mut samples[k + 1], "dwnd", dw + 0.01);
        let d = check("compound", &defaults("compound"), &samples, T0)
            .unwrap()
            .first_divergence
            .unwrap();
        assert_eq!(d.step, k, "{}", d.detail);
        assert!(d.detail.starts_with("dwnd"), "{}", d.detail);
    }
}
