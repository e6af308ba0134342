//! A plain f64 model of BIC-TCP's rules (spec §6), the reference for bpf/algo/bic_math.h's fixed point.

/// BIC's parameters in real units (spec §6 "Parameters"). The names follow the BPF
/// program's tunables (bpf/algo/bic.bpf.c).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BicParams {
    /// S_max, the largest increase per RTT, segments (\[P0\] Table II: 32; Linux: 16).
    pub s_max: f64,
    /// B, the binary-search divisor: δ = (w_1 − w)/B (\[P0\] Table II: 4).
    pub b: f64,
    /// σ, the smoothing divisor: B/σ segments per RTT near the target (\[P0\] Table II: 20).
    pub sigma: f64,
    /// β, the window multiplier on loss (\[P0\] Table II: 0.8; Linux 819/1024).
    pub beta: f64,
    /// Low_Window: Reno at or below this window, segments (\[P0\] Table II: 14).
    pub low_window: f64,
    /// Fast convergence (spec §6 "Loss"; \[LINUX\] on).
    pub fast_convergence: bool,
    /// Before the first loss the increase is at least w/`boost_max_cnt` per RTT
    /// (spec §6 "Low-utilisation boost", \[LINUX\] 20, i.e. 5 %/RTT); `None` is off.
    pub boost_max_cnt: Option<f64>,
    /// δ = ⌊(w_1 − w)/B⌋, whole segments, as Linux's `dist` in net/ipv4/tcp_bic.c
    /// (the `linux` profile); `false`: δ is real, as in \[P0\] §IV-D.
    pub whole_delta: bool,
}

impl Default for BicParams {
    /// The spec §6 / \[P0\] Table II defaults.
    fn default() -> Self {
        Self {
            s_max: 32.0,
            b: 4.0,
            sigma: 20.0,
            beta: 0.8,
            low_window: 14.0,
            fast_convergence: true,
            boost_max_cnt: Some(20.0),
            whole_delta: false,
        }
    }
}

/// f_α(δ, w), the increase per RTT in segments (spec §6 "Rules", \[P0\] §IV-D, with the
/// third case read as (w − w_1)/(B − 1), as the spec does), δ = (w_1 − w)/B:
/// - B/σ if (δ ≤ 1 and w < w_1) or w_1 ≤ w < w_1 + B;
/// - δ if 1 < δ ≤ S_max and w < w_1;
/// - (w − w_1)/(B − 1) if B ≤ w − w_1 < S_max·(B − 1);
/// - S_max otherwise.
///
/// With `p.whole_delta` δ is rounded down to whole segments first.
/// `w`: cwnd, `w_1`: the window at the last loss (0 before any loss), segments.
pub fn increase(w: f64, w_1: f64, p: &BicParams) -> f64 {
    if w < w_1 {
        let delta = if p.whole_delta {
            ((w_1 - w) / p.b).floor()
        } else {
            (w_1 - w) / p.b
        };
        if delta <= 1.0 {
            p.b / p.sigma
        } else if delta <= p.s_max {
            delta
        } else {
            p.s_max
        }
    } else {
        let above = w - w_1;
        if above < p.b {
            p.b / p.sigma
        } else if above < p.s_max * (p.b - 1.0) {
            above / (p.b - 1.0)
        } else {
            p.s_max
        }
    }
}

/// The increase per RTT actually applied, segments: 1 (Reno) while w ≤ Low_Window
/// (spec §6 "Mode switch"), else [`increase`], raised to w/`boost_max_cnt` while no loss
/// has happened (w_1 = 0; spec §6 "Low-utilisation boost", \[LINUX\]).
pub fn effective_increase(w: f64, w_1: f64, p: &BicParams) -> f64 {
    if w <= p.low_window {
        return 1.0;
    }
    let f = increase(w, w_1, p);
    match p.boost_max_cnt {
        Some(c) if w_1 == 0.0 => f.max(w / c),
        _ => f,
    }
}

/// Acked packets per +1 segment for an increase of `f` segments per RTT at window `w`:
/// w/f (spec §6 "Linux details": `cnt = w/f`). `per_ack` is the packets-per-ACK estimate
/// Linux divides by, or 1.
pub fn cnt(w: f64, f: f64, per_ack: f64) -> f64 {
    w / f / per_ack
}

/// w_1 after a loss at window `w`, segments (spec §6 "Loss"): (1 + β)/2·w when fast
/// convergence is on and w < w_1, else w.
pub fn new_w_max(w: f64, w_1: f64, p: &BicParams) -> f64 {
    if p.fast_convergence && w < w_1 {
        (1.0 + p.beta) / 2.0 * w
    } else {
        w
    }
}

/// ssthresh after a loss at window `w`, segments (spec §6 "Loss", \[LINUX\]):
/// max(w/2, 2) at or below Low_Window, else max(β·w, 2).
pub fn ssthresh(w: f64, p: &BicParams) -> f64 {
    let s = if w <= p.low_window {
        w / 2.0
    } else {
        p.beta * w
    };
    s.max(2.0)
}

/// One step of Linux's packets-per-ACK estimate (spec §6 "Linux details": EWMA, gain
/// 1/16): r ← r + (pkts − r)/16, packets per ACK.
pub fn per_ack_ewma(r: f64, pkts: f64) -> f64 {
    r + (pkts - r) / 16.0
}

#[cfg(test)]
mod tests {
    use super::*;

    // The C is bpf/algo/bic_math.h unchanged, compiled for the host (by
    // build.rs). Fixed point is << 10 (1.0 == 1024).


    const ULP: f64 = 1.0 / 1024.0;

    /// The C's parameters (integers as bic.bpf.c's tunables hold them) and the model's.
    #[derive(Debug, Clone, Copy)]
    struct Case {
        smax: u32,
        b: u32,
        sigma: u32,
        beta_fp: u32,
        low_window: u32,
        boost: u32,
        whole: u32,
    }

    impl Case {
        fn model(&self) -> BicParams {
            BicParams {
                s_max: self.smax.into(),
                b: self.b.into(),
                sigma: self.sigma.into(),
                beta: f64::from(self.beta_fp) / 1024.0,
                low_window: self.low_window.into(),
                fast_convergence: true,
                boost_max_cnt: (self.boost != 0).then_some(self.boost.into()),
                whole_delta: self.whole != 0,
            }
        }
        fn c_params(&self) -> crate::math::bic_params {
            crate::math::bic_params {
                b: self.b,
                smax: self.smax,
                smooth: self.sigma,
                whole_delta: self.whole,
                low_window: self.low_window,
                boost_max_cnt: self.boost,
            }
        }
        fn c_inc(&self, w: u32, w_1: u32) -> f64 {
            let p = self.c_params();
            // SAFETY: p is a live, initialised struct the function only reads.
            f64::from(unsafe { crate::math::bic_inc_fp(w, w_1, &p) }) * ULP
        }
        fn c_eff(&self, w: u32, w_1: u32) -> u32 {
            let p = self.c_params();
            // SAFETY: p is a live, initialised struct the function only reads.
            unsafe { crate::math::bic_effective_inc_fp(w, w_1, &p) }
        }
    }

    fn c_cnt(w: u32, inc_fp: u32, rescale: bool, delayed_ack: u32) -> u32 {
        // SAFETY: a pure function of integers, no pointers.
        unsafe { crate::math::bic_cnt(w, inc_fp, rescale.into(), delayed_ack) }
    }

    const P0: Case = Case {
        smax: 32,
        b: 4,
        sigma: 20,
        beta_fp: 819,
        low_window: 14,
        boost: 20,
        whole: 0,
    };
    const LINUX: Case = Case {
        smax: 16,
        whole: 1,
        ..P0
    };

    fn cases() -> Vec<Case> {
        vec![
            P0,
            LINUX,
            Case { b: 2, ..P0 },
            Case {
                b: 8,
                sigma: 3,
                ..P0
            },
            Case {
                smax: 1,
                boost: 0,
                ..P0
            },
            Case {
                smax: 100,
                b: 5,
                sigma: 7,
                low_window: 0,
                ..P0
            },
            Case {
                b: 7,
                sigma: 3,
                whole: 1,
                ..P0
            },
        ]
    }

    /// Targets w_1 (0 = no loss yet) and windows around each, segments: every window
    /// within S_max·B·2 of the target, then a sparse spread up to 10⁶.
    fn grid(c: &Case) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        let span = (c.smax * c.b * 2 + 20) as i64;
        for w_1 in [0u32, 15, 40, 100, 777, 1000, 4096, 100_000, 1_000_000] {
            for d in -span..=span {
                let w = i64::from(w_1) + d;
                if (1..=2_000_000).contains(&w) {
                    v.push((w as u32, w_1));
                }
            }
            for k in 0..60 {
                v.push((((1.3f64).powi(k)) as u32 + 1, w_1));
            }
        }
        v
    }

    #[test]
    fn increase_matches_hand_computed_values() {
        let p = BicParams::default();
        // w_1 = 1000: δ = 50 > S_max → 32; δ = 25 → 25; δ = 0.5 → B/σ = 0.2
        assert_eq!(increase(800.0, 1000.0, &p), 32.0);
        assert_eq!(increase(900.0, 1000.0, &p), 25.0);
        assert_eq!(increase(998.0, 1000.0, &p), 0.2);
        assert_eq!(increase(996.0, 1000.0, &p), 0.2); // δ = 1 exactly: still B/σ
        assert_eq!(increase(995.0, 1000.0, &p), 1.25);
        // above the target: creep for B segments, then (w − w_1)/3, then S_max
        assert_eq!(increase(1002.0, 1000.0, &p), 0.2);
        assert_eq!(increase(1010.0, 1000.0, &p), 10.0 / 3.0);
        assert_eq!(increase(1095.0, 1000.0, &p), 95.0 / 3.0);
        assert_eq!(increase(1096.0, 1000.0, &p), 32.0);
        // Reno below Low_Window, the 5 % boost before the first loss
        assert_eq!(effective_increase(14.0, 1000.0, &p), 1.0);
        assert_eq!(effective_increase(2000.0, 0.0, &p), 100.0);
        assert_eq!(effective_increase(2000.0, 1.0, &p), 32.0);
        // loss: fast convergence below the old target, β·w, Reno halving when small
        assert_eq!(new_w_max(1000.0, 1200.0, &p), 900.0);
        assert_eq!(new_w_max(1000.0, 900.0, &p), 1000.0);
        assert_eq!(ssthresh(1000.0, &p), 800.0);
        assert_eq!(ssthresh(10.0, &p), 5.0);
        assert_eq!(ssthresh(3.0, &p), 2.0);
        assert_eq!(cnt(800.0, 32.0, 1.0), 25.0);
        // Linux's whole-segment δ: creep for 2B below the target, then whole steps
        let l = BicParams {
            s_max: 16.0,
            whole_delta: true,
            ..p
        };
        assert_eq!(increase(995.0, 1000.0, &l), 0.2); // ⌊5/4⌋ = 1
        assert_eq!(increase(993.0, 1000.0, &l), 0.2); // ⌊7/4⌋ = 1
        assert_eq!(increase(992.0, 1000.0, &l), 2.0);
        assert_eq!(increase(990.0, 1000.0, &l), 2.0); // ⌊10/4⌋ = 2, not 2.5
        assert_eq!(increase(936.0, 1000.0, &l), 16.0);
        assert_eq!(increase(932.0, 1000.0, &l), 16.0); // ⌊68/4⌋ = 17 > S_max
    }

    /*
     * f_α (spec §6 "Rules"). The C picks the same case as the model for every integer
     * input: δ ≤ 1 and δ ≤ S_max compare ⌊1024·(w_1 − w)/B⌋ with 1024 and 1024·S_max,
     * and an integer w_1 − w beyond B (or S_max·B) puts it at least 1024/B ≥ 1 above
     * them (B ≤ 1000, the loader's limit); the comparisons above the target are exact
     * integer ones. Within a case each value (δ, B/σ, (w − w_1)/(B − 1), S_max, w/boost)
     * is the model's rounded down to 1/1024, and a max of two such is too, so
     * 0 ≤ model − C < 1 ULP = 1/1024 segment per RTT.
     */
    #[test]
    fn increase_matches_the_model_within_one_ulp_over_a_grid() {
        let (mut checked, mut max_err) = (0usize, 0f64);
        let mut seen = [0usize; 4]; // near target, δ, probing, S_max
        for c in cases() {
            let p = c.model();
            for (w, w_1) in grid(&c) {
                let (wf, w1f) = (f64::from(w), f64::from(w_1));
                let m = increase(wf, w1f, &p);
                let got = c.c_inc(w, w_1);
                let err = m - got;
                assert!(
                    (0.0..ULP).contains(&err) || (m < ULP && got == ULP),
                    "f(w = {w}, w_1 = {w_1}, {c:?}): C {got}, model {m}"
                );
                let m_eff = effective_increase(wf, w1f, &p);
                let got_eff = f64::from(c.c_eff(w, w_1)) * ULP;
                let err_eff = m_eff - got_eff;
                assert!(
                    (0.0..ULP).contains(&err_eff) || (m_eff < ULP && got_eff == ULP),
                    "effective f(w = {w}, w_1 = {w_1}, {c:?}): C {got_eff}, model {m_eff}"
                );
                max_err = max_err.max(err).max(err_eff);
                checked += 1;
                let near = p.b / p.sigma;
                let i = if m == p.s_max {
                    3
                } else if m == near {
                    0
                } else if wf < w1f {
                    1
                } else {
                    2
                };
                seen[i] += 1;
            }
        }
        eprintln!("f_α: {checked} points {seen:?}, max error {max_err:.3e} segments/RTT");
        assert!(
            checked > 20_000 && seen.iter().all(|&n| n > 500),
            "{seen:?}"
        );
    }

    /*
     * cnt = w/f (spec §6 "Linux details"). Given the C's own f, cnt_C = max(⌊w/f_C⌋, 1)
     * exactly (w·1024 and f_C are integers). Against the model's w/f it is within
     * (−1, w·(f − f_C)/(f·f_C)] ⊂ (−1, w/(1024·f·f_C)]: the floor, and f_C ≤ f by < 1 ULP.
     * With the packets-per-ACK rescaling (d = 16·ratio) cnt_C = ⌊⌊w/f_C⌋·16/d⌋.
     */
    #[test]
    fn cnt_is_window_over_increase_rounded_down() {
        let mut checked = 0usize;
        for c in cases() {
            let p = c.model();
            for (w, w_1) in grid(&c) {
                let f_fp = c.c_eff(w, w_1);
                let (wf, ff) = (f64::from(w), f64::from(f_fp) * ULP);
                let got = c_cnt(w, f_fp, false, 32);
                let exact = (wf * 1024.0 / f64::from(f_fp)).floor().max(1.0);
                assert_eq!(f64::from(got), exact, "w = {w}, f = {f_fp}/1024");
                let mf = effective_increase(wf, f64::from(w_1), &p);
                let m = cnt(wf, mf, 1.0);
                let err = f64::from(got) - m;
                let hi = wf / (1024.0 * mf * ff);
                assert!(
                    (err > -1.0 && err <= hi + 1e-9) || (m < 1.0 && got == 1),
                    "cnt(w = {w}, w_1 = {w_1}): C {got}, model {m}"
                );
                for d in [16u32, 24, 32, 48, 160] {
                    let r = c_cnt(w, f_fp, true, d);
                    let want = ((exact as u64 * 16) / u64::from(d)).max(1);
                    assert_eq!(u64::from(r), want, "rescaled cnt, w = {w}, d = {d}");
                }
                checked += 1;
            }
        }
        assert!(checked > 20_000);
    }

    /*
     * Loss (spec §6 "Loss"): with β = β_fp/1024 exact and w an integer, the C's
     * ⌊w·(1024 + β_fp)/2048⌋ and ⌊w·β_fp/1024⌋ (⌊w/2⌋ at or below Low_Window) are the
     * model's values rounded down to whole segments: exact equality with ⌊model⌋.
     */
    #[test]
    fn loss_rules_are_the_model_rounded_down() {
        let mut checked = 0usize;
        for beta_fp in [512u32, 717, 819, 900, 1023] {
            for low_window in [0u32, 14, 38] {
                let p = BicParams {
                    beta: f64::from(beta_fp) / 1024.0,
                    low_window: low_window.into(),
                    ..BicParams::default()
                };
                for w in (0..3000u32).chain((0..40).map(|k| 3000 + 1.5f64.powi(k) as u32)) {
                    for w_1 in [0u32, w / 2, w, w + 1, w.saturating_mul(2)] {
                        for fc in [false, true] {
                            let p = BicParams {
                                fast_convergence: fc,
                                ..p
                            };
                            // SAFETY: pure functions of integers, no pointers.
                            let (nw, ss) = unsafe {
                                (
                                    crate::math::bic_new_w_max(w, w_1, beta_fp, fc.into()),
                                    crate::math::bic_ssthresh_of(w, beta_fp, low_window),
                                )
                            };
                            let (wf, w1f) = (f64::from(w), f64::from(w_1));
                            assert_eq!(f64::from(nw), new_w_max(wf, w1f, &p).floor());
                            assert_eq!(f64::from(ss), ssthresh(wf, &p).floor());
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 100_000);
    }

    /*
     * Packets-per-ACK EWMA (gain 1/16). The C keeps d ≈ 16·r as an integer and
     * subtracts ⌊d/16⌋; its error E = d − 16·r obeys E' = 15/16·E + frac(d/16) ∈
     * [15/16·E, 15/16·E + 1), so from E = 0 it stays in [0, 16): 0 ≤ d/16 − r < 1.
     */
    #[test]
    fn packets_per_ack_estimate_tracks_the_ewma_within_one_packet() {
        let (mut d, mut r) = (32u32, 2.0f64);
        let mut x = 12345u64;
        for i in 0..200_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pkts = if i % 50_000 < 25_000 {
                1 + (x >> 60) as u32 % 3
            } else {
                (x >> 58) as u32 % 45
            };
            // SAFETY: a pure function of integers, no pointers.
            d = unsafe { crate::math::bic_delayed_ack(d, pkts) };
            r = per_ack_ewma(r, pkts.into());
            let e = f64::from(d) / 16.0 - r;
            assert!((-1e-9..1.0).contains(&e), "step {i}: C {d}/16, model {r}");
        }
    }

    /// One RTT of growth in the model: w ← w + f_α(w).
    fn rtt_step(w: f64, w_1: f64, p: &BicParams) -> f64 {
        w + effective_increase(w, w_1, p)
    }

    #[test]
    fn binary_search_approaches_the_target_without_overshooting_then_probes() {
        let p = BicParams::default();
        let w_1 = 1000.0;
        let mut w = ssthresh(w_1, &p);
        let mut rtts = 0;
        while w < w_1 - p.b {
            let next = rtt_step(w, w_1, &p);
            assert!(next < w_1, "overshot from {w} to {next}");
            assert!(next - w <= p.s_max);
            w = next;
            rtts += 1;
        }
        // 200 segments below: 6 RTTs at S_max, then halving the remaining distance by 3/4
        assert!((8..=20).contains(&rtts), "{rtts} RTTs to reach the target");
        // then creeps past the old maximum and probes with growing increments
        let mut last_inc = 0.0;
        for _ in 0..200 {
            let next = rtt_step(w, w_1, &p);
            let inc = next - w;
            if w >= w_1 + p.b {
                assert!(inc >= last_inc - 1e-12, "probing slowed down at {w}");
            }
            last_inc = inc;
            w = next;
        }
        assert!(w > w_1 + 1000.0 && last_inc == p.s_max, "w = {w}");
    }

    #[test]
    fn rust_layout_has_the_c_size() {
        // SAFETY: no arguments, returns a constant.
        let c = std::mem::size_of::<crate::math::cctl_bic_ca>() as u32 as usize;
        assert_eq!(
            std::mem::size_of::<crate::math::cctl_bic_ca>(),
            c
        );
        assert!(c <= 104, "must fit icsk_ca_priv");
    }
    /// linux_exact: tcp_bic.c's integer cnt. At w = 104 near w_1 = 111 (dist = 1): w·σ/B =
    /// 104·20/4 = 520, over a packets-per-ACK estimate of 30/16: 277 (the fixed-point rule
    /// gives 278). Far below: w / S_max; probing above: w·(B-1)/(w - w_1); Reno at or
    /// below Low_Window, unscaled.
    #[test]
    fn linux_cnt_is_tcp_bics_integer_arithmetic() {
        let p = crate::math::bic_params {
            b: 4,
            smax: 16,
            smooth: 20,
            whole_delta: 1,
            low_window: 14,
            boost_max_cnt: 20,
        };
        // SAFETY: pure functions of their arguments.
        let cnt = |w, w_1, rescale, d| unsafe { crate::math::bic_linux_cnt(w, w_1, &p, rescale, d) };
        assert_eq!(cnt(104, 111, 0, 32), 520);
        assert_eq!(cnt(104, 111, 1, 30), 277);
        assert_eq!(cnt(100, 300, 0, 32), 100 / 16);
        assert_eq!(cnt(120, 100, 0, 32), 120 * 3 / 20);
        assert_eq!(cnt(12, 100, 1, 30), 12);
        assert_eq!(cnt(200, 0, 0, 32), 12, "before a loss: w / S_max = 12 <= 20");
    }
}
