//! A plain f64 model of Compound TCP's rules (spec §12; Tan, Song, Zhang, Sridharan,
//! Infocom 2006), the reference for bpf/algo/compound_math.h's fixed point.

/// Compound's parameters (spec §12 "Parameters", \[GK\] Tan et al. 2006). The BPF program
/// holds α, β, k, ζ in per-mille and γ in packets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompoundParams {
    /// α, scale of the binomial growth of dwnd (1/8).
    pub alpha: f64,
    /// β, the fraction of the total window given up on loss (1/2).
    pub beta: f64,
    /// k, exponent of the growth α·win^k (0.75).
    pub k: f64,
    /// ζ, dwnd's retreat per packet of diff (1).
    pub zeta: f64,
    /// γ, the queue (diff, packets) at which dwnd stops growing (30).
    pub gamma: f64,
}

impl Default for CompoundParams {
    fn default() -> Self {
        Self {
            alpha: 0.125,
            beta: 0.5,
            k: 0.75,
            zeta: 1.0,
            gamma: 30.0,
        }
    }
}

/// diff = (expected − actual)·baseRTT with expected = win/baseRTT and actual = win/RTT:
/// the packets the flow keeps queued, packets (spec §12 "per RTT"; Tan et al. §3).
/// `win` packets, `base_rtt` and `rtt` in one time unit; 0 when RTT ≤ baseRTT.
pub fn diff(win: f64, base_rtt: f64, rtt: f64) -> f64 {
    if rtt <= base_rtt || rtt <= 0.0 {
        return 0.0;
    }
    (win / base_rtt - win / rtt) * base_rtt
}

/// The delay window after one RTT, packets (spec §12 "per RTT"):
/// `dwnd + max(α·win^k − 1, 0)` while diff < γ (binomial growth), else
/// `max(dwnd − ζ·diff, 0)` (retreat as the queue builds).
pub fn dwnd_update(win: f64, dwnd: f64, diff: f64, p: &CompoundParams) -> f64 {
    if diff < p.gamma {
        dwnd + (p.alpha * win.powf(p.k) - 1.0).max(0.0)
    } else {
        (dwnd - p.zeta * diff).max(0.0)
    }
}

/// On loss (spec §12): `cwnd ← cwnd/2`, `dwnd ← max(win·(1 − β) − cwnd/2, 0)`, so the
/// total becomes max((1 − β)·win, cwnd/2). Returns (cwnd, dwnd), packets.
pub fn on_loss(win: f64, cwnd: f64, p: &CompoundParams) -> (f64, f64) {
    (cwnd / 2.0, (win * (1.0 - p.beta) - cwnd / 2.0).max(0.0))
}

/// The Reno part's increase per acked packet: 1/win, paced by the total window
/// (spec §12 "per ACK"), packets.
pub fn reno_increase(win: f64) -> f64 {
    1.0 / win
}

#[cfg(test)]
mod tests {
    use super::*;



    const ULP: f64 = 1.0 / 1024.0;

    fn fp(x: u32) -> f64 {
        f64::from(x) * ULP
    }

    fn c_pow(win: u32, k_pm: u32) -> f64 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::compound_pow_fp(win, k_pm) as f64 * ULP }
    }

    fn c_diff(win: u32, base_us: u32, rtt_us: u32) -> u32 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::compound_diff_fp(win, base_us, rtt_us) }
    }

    /// compound.bpf.c's update with the default tunables.
    fn c_update(win: u32, dwnd_fp: u32, diff_fp: u32) -> u32 {
        let p = crate::math::compound_params {
            alpha_pm: 125,
            k_pm: 750,
            zeta_pm: 1000,
            gamma_pkts: 30,
        };
        // SAFETY: p is a live, initialised struct the function only reads.
        unsafe { crate::math::compound_dwnd_update(win, dwnd_fp, diff_fp, &p) }
    }

    /// (new cwnd_reno, new dwnd << 10).
    fn c_loss(win: u32, cwnd: u32) -> (u32, u32) {
        let mut c = cwnd;
        // SAFETY: `c` is a live, exclusively borrowed u32.
        let d = unsafe { crate::math::compound_loss(win, &mut c, 500) };
        (c, d)
    }

    #[test]
    fn rules_match_hand_computed_values() {
        let p = CompoundParams::default();
        // 100^0.75 = 31.6228: dwnd grows by 31.6228/8 − 1 = 2.95285 while diff < 30
        let g = 100f64.powf(0.75) / 8.0 - 1.0;
        assert!((g - 2.952_847).abs() < 1e-6);
        // base 100 ms, RTT 125 ms: diff = 100·(1 − 100/125) = 20 < 30 → grow
        assert!((diff(100.0, 0.1, 0.125) - 20.0).abs() < 1e-9);
        assert!((dwnd_update(100.0, 10.0, 20.0, &p) - (10.0 + g)).abs() < 1e-12);
        // RTT 200 ms: diff = 50 ≥ 30 → dwnd − 50, floored at 0
        assert!((diff(100.0, 0.1, 0.2) - 50.0).abs() < 1e-9);
        assert_eq!(dwnd_update(100.0, 80.0, 50.0, &p), 30.0);
        assert_eq!(dwnd_update(100.0, 40.0, 50.0, &p), 0.0);
        // exactly γ retreats
        assert_eq!(dwnd_update(100.0, 40.0, 30.0, &p), 10.0);
        // small windows: α·win^k < 1, no growth (8^0.75/8 = 0.59)
        assert_eq!(dwnd_update(8.0, 5.0, 0.0, &p), 5.0);
        // loss: win 100 = cwnd 40 + dwnd 60 → cwnd 20, dwnd 50 − 20 = 30: total 50
        assert_eq!(on_loss(100.0, 40.0, &p), (20.0, 30.0));
        // Reno-dominated: win 100 = cwnd 100 → cwnd 50, dwnd 0
        assert_eq!(on_loss(100.0, 100.0, &p), (50.0, 0.0));
        assert_eq!(reno_increase(50.0), 0.02);
        // the same in the C
        assert_eq!(c_diff(100, 100_000, 125_000), 20 * 1024);
        assert_eq!(c_diff(100, 100_000, 200_000), 50 * 1024);
        assert_eq!(c_diff(100, 100_000, 100_000), 0);
        assert_eq!(c_update(100, 80 * 1024, 50 * 1024), 30 * 1024);
        assert_eq!(c_update(100, 40 * 1024, 50 * 1024), 0);
        assert_eq!(c_update(8, 5 * 1024, 0), 5 * 1024);
        assert!((fp(c_update(100, 10 * 1024, 20 * 1024)) - (10.0 + g)).abs() < 2e-3);
        assert_eq!(c_loss(100, 40), (20, 30 * 1024));
        assert_eq!(c_loss(100, 100), (50, 0));
    }

    #[test]
    fn log2_is_exact_on_powers_of_two_and_within_two_ulps_elsewhere() {
        for n in 0..64u32 {
            // SAFETY: a pure function of integers.
            assert_eq!(unsafe { crate::math::compound_log2_q16(1u64 << n) }, n << 16);
        }
        let mut x = 1u64;
        while x < u64::MAX / 3 {
            x = x * 3 + 1;
            // SAFETY: a pure function of integers.
            let c = f64::from(unsafe { crate::math::compound_log2_q16(x) }) / 65536.0;
            let err = (x as f64).log2() - c;
            assert!((-1e-9..2.0 / 65536.0).contains(&err), "log2({x}): {err}");
        }
    }

    /*
     * win^k = exp2(k·log2 win) in the C: log2 rounds down to 2^-16 (error in [0, 2^-16 +
     * 2^-29) from the floor and the truncated squarings), k·log2/1000 rounds down again
     * (< 2^-16), so the exponent is low by at most (k + 1)·2^-16 + 2^-29; the table's
     * rounding and the truncated products move 2^f by < 2^-25 relative; the result is
     * floored to 1/1024. So, with r = (k + 1)·2^-16·ln 2 + 2^-24:
     *     −1e-8·w^k ≤ w^k − C ≤ r·w^k + 1/1024.
     */
    fn pow_bound(model: f64, k: f64) -> (f64, f64) {
        let r = (k + 1.0) * std::f64::consts::LN_2 / 65536.0 + 2f64.powi(-24);
        (-1e-8 * model, r * model + ULP)
    }

    #[test]
    fn win_to_the_k_matches_powf_over_a_grid() {
        let (mut checked, mut max_rel) = (0usize, 0f64);
        for k_pm in [0u32, 250, 500, 700, 750, 800, 999, 1000] {
            let k = f64::from(k_pm) / 1000.0;
            let wins = (1..=5000u32).chain((0..=90).map(|i| (5000.0 * 1.2f64.powi(i)) as u32));
            for w in wins {
                let m = f64::from(w).powf(k);
                let c = c_pow(w, k_pm);
                let (lo, hi) = pow_bound(m, k);
                let err = m - c;
                assert!(
                    err >= lo && err <= hi,
                    "{w}^{k}: model {m}, C {c}, error {err} outside [{lo}, {hi}]"
                );
                max_rel = max_rel.max(err / m);
                checked += 1;
            }
        }
        eprintln!("win^k: {checked} points, max relative error {max_rel:.3e}");
        assert!(checked > 40_000);
        assert_eq!(c_pow(0, 750), 0.0);
    }

    /*
     * diff: the C computes ⌊1024·win·(RTT − base)/RTT⌋, so model − C ∈ [0, 1 ULP).
     * The dwnd update, given the same diff (<< 10, exactly representable):
     *   growth:  C adds ⌊⌊α_pm·⌊1024 w^k⌋_C⌋/1000⌋ − 1024, so model − C ∈
     *            [α·lo_pow, α·hi_pow + 2 ULP) with the pow bounds above;
     *   retreat: C subtracts ⌊ζ_pm·diff_fp/1000⌋: C − model ∈ [0, 1 ULP) before the floor
     *            at 0, which both apply.
     * The branch (diff < γ) agrees exactly since diff is the same number in both.
     */
    #[test]
    fn dwnd_update_matches_the_model_over_a_grid() {
        let p = CompoundParams::default();
        let (mut grow, mut retreat, mut zero) = (0usize, 0usize, 0usize);
        let mut max_err = 0f64;
        for win in (2..=400u32).chain([1000, 4321, 10_000, 100_000, 1_000_000]) {
            for base_us in [1000u32, 10_000, 100_000] {
                for q in [0u32, 1, 7, 100, 1000, 10_000, 50_000, 100_000, 300_000] {
                    let rtt_us = base_us + q;
                    let d_c = c_diff(win, base_us, rtt_us);
                    let d_m = diff(f64::from(win), f64::from(base_us), f64::from(rtt_us));
                    let e = d_m - fp(d_c);
                    assert!(
                        (-1e-9..ULP).contains(&e),
                        "diff {win} {base_us} {rtt_us}: {e}"
                    );
                    for dwnd_fp in [0u32, 1, 1024, 5 * 1024 + 3, 40 * 1024, 1000 * 1024] {
                        let m = dwnd_update(f64::from(win), fp(dwnd_fp), fp(d_c), &p);
                        let c = fp(c_update(win, dwnd_fp, d_c));
                        let err = m - c;
                        if fp(d_c) < p.gamma {
                            let pw = f64::from(win).powf(p.k);
                            let (lo, hi) = pow_bound(pw, p.k);
                            let (lo, hi) = (p.alpha * lo, p.alpha * hi + 2.0 * ULP);
                            assert!(
                                err >= lo && err <= hi,
                                "grow w {win} dwnd {dwnd_fp} diff {d_c}: model {m} C {c}"
                            );
                            grow += usize::from(m > fp(dwnd_fp));
                        } else {
                            assert!(
                                (-ULP..1e-9).contains(&err) || (m == 0.0 && c == 0.0),
                                "retreat w {win} dwnd {dwnd_fp} diff {d_c}: model {m} C {c}"
                            );
                            assert!(c <= fp(dwnd_fp));
                            retreat += 1;
                            zero += usize::from(c == 0.0);
                        }
                        max_err = max_err.max(err.abs());
                    }
                }
            }
        }
        eprintln!(
            "dwnd update: {grow} growths, {retreat} retreats ({zero} to 0), max |error| {max_err:.3e} pkts"
        );
        assert!(grow > 5000 && retreat > 5000 && zero > 1000);
    }

    /*
     * Loss: the C halves cwnd_reno in integers (⌊cwnd/2⌋, at least 1) and computes dwnd as
     * ⌊1024·win·(1000 − β_pm)/1000⌋ − 512·cwnd (cwnd/2 exact), floored at 0, so for the
     * integer windows the kernel has: cwnd' = ⌊model cwnd'⌋ and model dwnd' − C ∈ [0, 1 ULP).
     */
    #[test]
    fn loss_matches_the_model_and_gives_up_beta_of_the_window() {
        let p = CompoundParams::default();
        let mut checked = 0;
        for win in (2..=600u32).chain([10_000, 1_000_000]) {
            for cwnd in (1..=win).step_by(((win / 50) as usize).max(1)) {
                let (mc, md) = on_loss(f64::from(win), f64::from(cwnd), &p);
                let (cc, cd) = c_loss(win, cwnd);
                if cwnd > 2 {
                    assert_eq!(f64::from(cc), mc.floor(), "cwnd {cwnd}");
                } else {
                    assert_eq!(cc, 1);
                }
                let err = md - fp(cd);
                assert!(
                    (-1e-9..ULP).contains(&err),
                    "win {win} cwnd {cwnd}: {md} vs {}",
                    fp(cd)
                );
                // the total: (1 − β)·win unless the halved Reno part alone is bigger
                let total = mc + md;
                assert!((total - (0.5 * f64::from(win)).max(f64::from(cwnd) / 2.0)).abs() < 1e-9);
                checked += 1;
            }
        }
        assert!(checked > 20_000, "{checked}");
    }

    #[test]
    fn reno_part_gains_one_packet_per_window_of_acks() {
        for win in [1u32, 2, 10, 97, 1000] {
            let (mut cwnd, mut cnt) = (5u32, 0u32);
            // SAFETY: live, exclusively borrowed u32s.
            unsafe {
                for _ in 0..win * 7 {
                    crate::math::compound_reno_ai(&mut cwnd, &mut cnt, win, 1);
                }
                assert_eq!((cwnd, cnt), (12, 0), "win {win}");
                crate::math::compound_reno_ai(&mut cwnd, &mut cnt, win, 3 * win + 1);
            }
            // 3·win + 1 more acks: 3 packets and one ack carried (4 packets at win 1)
            assert_eq!((cwnd, cnt), if win == 1 { (16, 0) } else { (15, 1) });
            // the model: 7·win acks at 1/win each
            assert!((7.0 * f64::from(win) * reno_increase(f64::from(win)) - 7.0).abs() < 1e-9);
        }
    }

    #[test]
    fn kernel_changes_to_the_window_go_to_the_reno_part() {
        let sync = |snd: u32, reno: u32, dwnd_fp: u32| {
            let (mut r, mut d) = (reno, dwnd_fp);
            // SAFETY: live, exclusively borrowed u32s.
            unsafe { crate::math::compound_sync(snd, &mut r, &mut d) };
            (r, d)
        };
        assert_eq!(sync(50, 20, 30 * 1024 + 500), (20, 30 * 1024 + 500));
        assert_eq!(sync(70, 20, 30 * 1024 + 500), (40, 30 * 1024 + 500));
        assert_eq!(sync(31, 20, 30 * 1024 + 500), (1, 30 * 1024 + 500));
        assert_eq!(sync(30, 20, 30 * 1024 + 500), (1, 29 * 1024));
        assert_eq!(sync(1, 20, 30 * 1024), (1, 0));
    }

    /// One round of a fluid dumbbell: capacity `c` packets per time unit, propagation
    /// RTT `t0`, drop-tail buffer `buf` packets. Returns (RTT, loss).
    fn link(win: f64, c: f64, t0: f64, buf: f64) -> (f64, bool) {
        let q = (win - c * t0).max(0.0);
        (t0 + q.min(buf) / c, q > buf)
    }

    #[derive(Debug, Clone, Copy, Default)]
    struct Round {
        win: f64,
        cwnd: f64,
        dwnd: f64,
        diff: f64,
        loss: bool,
    }

    /// Rounds of the model on the fluid link (BDP 100 packets, buffer 200): per RTT the
    /// Reno part gains one packet (win acks of 1/win) and dwnd follows the rule; on loss
    /// `on_loss`. Starts in congestion avoidance at cwnd 10.
    fn model_rounds(n: usize, p: &CompoundParams) -> Vec<Round> {
        let (c, t0, buf) = (1.0, 100.0, 200.0);
        let (mut cwnd, mut dwnd) = (10.0, 0.0);
        let mut v = Vec::new();
        for _ in 0..n {
            let win = cwnd + dwnd;
            let (rtt, loss) = link(win, c, t0, buf);
            let d = diff(win, t0, rtt);
            if loss {
                (cwnd, dwnd) = on_loss(win, cwnd, p);
            } else {
                dwnd = dwnd_update(win, dwnd, d, p);
                cwnd += win * reno_increase(win);
            }
            v.push(Round {
                win,
                cwnd,
                dwnd,
                diff: d,
                loss,
            });
        }
        v
    }

    /// The same rounds with the C: integer window cwnd_reno + ⌊dwnd⌋, RTT in integer µs
    /// (time unit = 1 ms in `link`), diff and dwnd in << 10.
    fn c_rounds(n: usize) -> Vec<Round> {
        let (mut cwnd, mut dwnd_fp, mut cnt) = (10u32, 0u32, 0u32);
        let mut v = Vec::new();
        for _ in 0..n {
            let win = cwnd + (dwnd_fp >> 10);
            let (rtt, loss) = link(f64::from(win), 1.0, 100.0, 200.0);
            let d_fp = c_diff(win, 100_000, (rtt * 1000.0).round() as u32);
            if loss {
                // SAFETY: a live, exclusively borrowed u32.
                dwnd_fp = unsafe { crate::math::compound_loss(win, &mut cwnd, 500) };
                cnt = 0;
            } else {
                dwnd_fp = c_update(win, dwnd_fp, d_fp);
                // SAFETY: live, exclusively borrowed u32s.
                unsafe { crate::math::compound_reno_ai(&mut cwnd, &mut cnt, win, win) };
            }
            v.push(Round {
                win: f64::from(win),
                cwnd: f64::from(cwnd),
                dwnd: fp(dwnd_fp),
                diff: fp(d_fp),
                loss,
            });
        }
        v
    }

    /// The delay-window behaviour of spec §12, checked on a trajectory: binomial growth
    /// while diff < γ, a retreat by ζ·diff once diff ≥ γ (so the queue stays near γ while
    /// dwnd lasts), dwnd handing over to the Reno part as it keeps growing, and the
    /// collapse to (1 − β)·win on loss.
    fn check_behaviour(rounds: &[Round], p: &CompoundParams, who: &str) {
        let (mut grew, mut retreated, mut losses) = (0, 0, 0);
        let mut first_loss = None;
        for (i, r) in rounds.iter().enumerate().skip(1) {
            let prev = rounds[i - 1];
            if r.loss {
                // total after the loss is (1 − β)·win (the Reno half never exceeds it here)
                let total = r.cwnd + r.dwnd;
                assert!(
                    (total - (1.0 - p.beta) * r.win).abs() <= 1.0,
                    "{who} round {i}: after loss {total}, win {}",
                    r.win
                );
                assert!(
                    (r.dwnd - ((1.0 - p.beta) * r.win - prev.cwnd / 2.0).max(0.0)).abs() <= 0.51,
                    "{who} round {i}: dwnd after loss {}",
                    r.dwnd
                );
                losses += 1;
                first_loss.get_or_insert(i);
            } else if r.diff < p.gamma {
                let step = r.dwnd - prev.dwnd;
                let want = (p.alpha * r.win.powf(p.k) - 1.0).max(0.0);
                assert!(
                    (step - want).abs() <= 2e-4 * want + 3.0 * ULP,
                    "{who} round {i}: grew {step}, α·win^k − 1 = {want}"
                );
                grew += usize::from(step > 0.0);
            } else {
                let want = (prev.dwnd - p.zeta * r.diff).max(0.0);
                assert!(
                    (r.dwnd - want).abs() <= 2.0 * ULP,
                    "{who} round {i}: dwnd {} after retreat, want {want}",
                    r.dwnd
                );
                retreated += 1;
            }
            // while dwnd is in play after the first crossing, the queue stays near γ:
            // below γ plus one growth step plus the Reno packet
            if prev.dwnd > 0.0 && r.dwnd > 0.0 && retreated > 0 && !r.loss {
                let max_step = p.alpha * r.win.powf(p.k);
                assert!(
                    r.diff < p.gamma + max_step + 1.0,
                    "{who} round {i}: diff {} with dwnd {}",
                    r.diff,
                    r.dwnd
                );
            }
        }
        let first_loss = first_loss.expect("the Reno part fills the buffer eventually");
        // before the first loss the delay window handed over: dwnd is 0 and the queue
        // is above γ when the buffer overflows
        let before = rounds[first_loss - 1];
        assert_eq!(before.dwnd, 0.0, "{who}: dwnd at the first loss");
        assert!(
            before.diff >= p.gamma,
            "{who}: diff {} at the first loss",
            before.diff
        );
        assert!(
            grew > 10 && retreated > 10 && losses >= 2,
            "{who}: {grew} {retreated} {losses}"
        );
    }

    #[test]
    fn delay_window_grows_retreats_hands_over_and_collapses_on_loss() {
        let p = CompoundParams::default();
        let m = model_rounds(1200, &p);
        check_behaviour(&m, &p, "model");
        let c = c_rounds(1200);
        check_behaviour(&c, &p, "C");
        // the fast start: from cwnd 10, dwnd grows once α·win^k > 1 (win > 16) and then
        // reaches the BDP (100) in about half the 90 rounds Reno's +1/RTT would take
        let fill = m.iter().position(|r| r.win >= 100.0).unwrap();
        assert!(
            fill < 50,
            "model reached the BDP after {fill} rounds (Reno: 90)"
        );
        let fill_c = c.iter().position(|r| r.win >= 100.0).unwrap();
        assert!(fill_c.abs_diff(fill) <= 1, "C {fill_c}, model {fill}");
        // and the first loss comes at about the same round
        let l_m = m.iter().position(|r| r.loss).unwrap();
        let l_c = c.iter().position(|r| r.loss).unwrap();
        assert!(l_m.abs_diff(l_c) <= 3, "first loss: model {l_m}, C {l_c}");
        eprintln!("BDP reached after {fill} rounds, first loss at {l_m} (C {l_c})");
    }

    #[test]
    fn rust_layout_has_the_c_size() {
        // SAFETY: no arguments, returns a constant.
        let c = std::mem::size_of::<crate::math::cctl_compound_ca>() as u32 as usize;
        assert_eq!(
            std::mem::size_of::<crate::math::cctl_compound_ca>(),
            c
        );
        assert!(c <= 104);
    }
}
