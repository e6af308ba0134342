//! A plain f64 model of FAST TCP (spec §8): estimation ([P1] §IV-A), window control
//! ([P1] eq. 5-7), [P0]'s adaptive α and the loss rule; the reference for
//! bpf/algo/fast_math.h, there being no Linux module to compare with.

/// FAST's parameters in real units (spec §8 "Parameters").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FastParams {
    /// γ ∈ (0, 1]: weight of the new estimate in eq. (5) (\[P0\]: 1/2).
    pub gamma: f64,
    /// η's numerator: η = min(eta_num·r/w, eta_max) (\[P1\] §IV-A: 3).
    pub eta_num: f64,
    /// η's cap (\[P1\] §IV-A: 1/4).
    pub eta_max: f64,
    /// α per level of \[P0\]'s adaptive rule, packets (m0a, m1a, m2a = 8, 20, 200).
    pub alpha_levels: [f64; 3],
    /// Level thresholds m0u, m1l, m1u, m2l, kB/s (\[P0\] Table II: 1500, 1250, 15000, 12500).
    pub thresholds_kbps: [f64; 4],
    /// Window a flow above it keeps on loss, packets (\[P1\] footnote 5: 16).
    pub min_loss_window: f64,
}

impl Default for FastParams {
    fn default() -> Self {
        Self {
            gamma: 0.5,
            eta_num: 3.0,
            eta_max: 0.25,
            alpha_levels: [8.0, 20.0, 200.0],
            thresholds_kbps: [1500.0, 1250.0, 15000.0, 12500.0],
            min_loss_window: 16.0,
        }
    }
}

/// η = min(eta_num·r/w, eta_max): the weight of one RTT sample (\[P1\] §IV-A), with r the
/// packets per ACK (spec §8 \[CHOICE\]; r = 1 is \[P1\]'s 3/w). `cwnd` in segments.
pub fn eta(cwnd: f64, ack_ratio: f64, p: &FastParams) -> f64 {
    (p.eta_num * ack_ratio / cwnd).min(p.eta_max)
}

/// T̄ ← (1 − η)·T̄ + η·T (\[P1\] §IV-A); the first sample starts the average. Any time unit.
pub fn avg_rtt(avg: Option<f64>, rtt: f64, eta: f64) -> f64 {
    match avg {
        None => rtt,
        Some(a) => (1.0 - eta) * a + eta * rtt,
    }
}

/// The window update, segments (\[P1\] eq. 5):
/// `w ← min{2w, (1 − γ)·w + γ·(baseRTT/T̄·w + α)}`.
pub fn window(w: f64, base_rtt: f64, avg_rtt: f64, alpha: f64, gamma: f64) -> f64 {
    (2.0 * w).min((1.0 - gamma) * w + gamma * (base_rtt / avg_rtt * w + alpha))
}

/// The window at which eq. (5) stands still for a fixed queueing delay `q`: α packets
/// queued, x·q = α with x = w/(baseRTT + q), so w = α·(baseRTT + q)/q = x·baseRTT + α.
pub fn equilibrium_window(base_rtt: f64, q: f64, alpha: f64) -> f64 {
    alpha * (base_rtt + q) / q
}

/// \[P0\]'s adaptive α level as hysteresis (spec §8): 0 → 1 above m0u; 1 → 0 below m1l,
/// 1 → 2 above m1u; 2 → 1 below m2l. Throughput B in kB/s.
pub fn alpha_level(level: u32, tput_kbps: f64, p: &FastParams) -> u32 {
    let [m0u, m1l, m1u, m2l] = p.thresholds_kbps;
    match level {
        0 if tput_kbps > m0u => 1,
        0 => 0,
        1 if tput_kbps < m1l => 0,
        1 if tput_kbps > m1u => 2,
        1 => 1,
        _ if tput_kbps < m2l => 1,
        _ => 2,
    }
}

/// Whether slow start ends (spec §8 "Slow start" \[CHOICE\]): mode 0 when the queueing
/// delay q̂ = T̄ − baseRTT exceeds `qdelay_frac`·baseRTT; mode 1 when the Vegas-style
/// diff = w·q̂/T̄ exceeds α/2.
pub fn ss_exit(
    w: f64,
    base_rtt: f64,
    avg_rtt: f64,
    alpha: f64,
    mode: u32,
    qdelay_frac: f64,
) -> bool {
    let q = avg_rtt - base_rtt;
    if q <= 0.0 {
        return false;
    }
    if mode == 0 {
        q > qdelay_frac * base_rtt
    } else {
        w * q / avg_rtt > alpha / 2.0
    }
}

/// ssthresh on a loss, segments (spec §8 "Loss"): w/2 (\[P1\], \[P0\]), but a window above
/// `min_loss_window` keeps at least that many (\[P1\] footnote 5); at least 2.
pub fn loss_ssthresh(w: f64, p: &FastParams) -> f64 {
    let half = w / 2.0;
    let half = if w > p.min_loss_window {
        half.max(p.min_loss_window)
    } else {
        half
    };
    half.max(2.0)
}

/// Round-trip time through one drop-tail bottleneck of `c` packets/s and propagation
/// delay `base` s with window `w` packets in flight: base + max(0, w − c·base)/c (s).
pub fn bottleneck_rtt(w: f64, base: f64, c: f64) -> f64 {
    base + (w - c * base).max(0.0) / c
}

#[cfg(test)]
mod tests {
    use super::*;

    // The C that fast.bpf.c runs (bpf/algo/fast_math.h, compiled for the host by build.rs).


    // SAFETY (every wrapper): pure functions of integers; `cnt` is a live local u32,
    // `p` a live, initialised params struct the function only reads.
    fn c_window(w: u32, base: u32, avg_fp: u64, alpha: u32, gamma_fp: u32) -> u32 {
        unsafe { crate::math::fast_window(w, base, avg_fp, alpha, gamma_fp) }
    }
    fn c_eta(w: u32, r8: u32, use_r: bool) -> u32 {
        unsafe { crate::math::fast_eta_fp16(w, r8, 3, 25, use_r.into()) }
    }
    fn c_avg(avg_fp: u64, rtt: u32, eta16: u32) -> u64 {
        unsafe { crate::math::fast_avg_rtt(avg_fp, rtt, eta16) }
    }
    /// fast.bpf.c's default tunables, with slow start's exit rule given.
    fn c_params(mode: u32, pct: u32) -> crate::math::fast_params {
        crate::math::fast_params {
            m0u_kBps: 1500,
            m1l_kBps: 1250,
            m1u_kBps: 15000,
            m2l_kBps: 12500,
            ss_exit_mode: mode,
            ss_exit_qdelay_pct: pct,
        }
    }
    fn c_level(level: u32, tput: u32) -> u32 {
        let p = c_params(0, 10);
        unsafe { crate::math::fast_alpha_level(level, tput, &p) }
    }
    fn c_ss_exit(w: u32, base: u32, avg_fp: u64, alpha: u32, mode: u32, pct: u32) -> bool {
        let p = c_params(mode, pct);
        unsafe { crate::math::fast_ss_exit(w, base, avg_fp, alpha, &p) != 0 }
    }
    fn c_spread(w: u32, target: u32, reff: u32, cnt: &mut u32, acked: u32) -> u32 {
        unsafe { crate::math::fast_spread(w, target, reff, cnt, acked) }
    }

    /// What fast_window cuts from w·baseRTT/T̄ (packets), see the test below.
    fn window_cut(w: u32, base: u32) -> f64 {
        if u64::from(w) * u64::from(base) < 1 << 43 {
            2f64.powi(-10)
        } else {
            f64::from(w) * 2f64.powi(-20) + 2f64.powi(-10)
        }
    }

    /// γ = 1/2 as fast.bpf.c passes it: (50 << 10)/100 = 512.
    const GAMMA_FP: u32 = 512;

    fn fp_avg(avg_fp: u64) -> f64 {
        avg_fp as f64 / 1024.0
    }

    #[test]
    fn hand_computed_updates_follow_the_spec() {
        let p = FastParams::default();
        // w 100, baseRTT 100 ms, T̄ 125 ms, α 20: 0.5·100 + 0.5·(80 + 20) = 100, the fixed
        // point (100·25/125 = 20 packets queued)
        assert_eq!(window(100.0, 100.0, 125.0, 20.0, 0.5), 100.0);
        assert_eq!(equilibrium_window(100.0, 25.0, 20.0), 100.0);
        assert_eq!(c_window(100, 100_000, 125_000 << 10, 20, GAMMA_FP), 100);
        // w 50: 25 + 0.5·(40 + 20) = 55
        assert_eq!(window(50.0, 100.0, 125.0, 20.0, 0.5), 55.0);
        assert_eq!(c_window(50, 100_000, 125_000 << 10, 20, GAMMA_FP), 55);
        // no queue, α 200: the 2w cap
        assert_eq!(window(10.0, 100.0, 100.0, 200.0, 0.5), 20.0);
        assert_eq!(c_window(10, 100_000, 100_000 << 10, 200, GAMMA_FP), 20);
        // η: min(3/12, 1/4) = 1/4, 3/30 = 0.1; 2 packets per ACK: 0.2
        assert_eq!(eta(12.0, 1.0, &p), 0.25);
        assert!((eta(30.0, 1.0, &p) - 0.1).abs() < 1e-15);
        assert!((eta(30.0, 2.0, &p) - 0.2).abs() < 1e-15);
        assert_eq!(c_eta(12, 256, true), 16384);
        assert_eq!(c_eta(30, 512, true), 13107); // ⌊0.2·65536⌋
        assert_eq!(c_eta(30, 512, false), 6553); // r ignored: 0.1
                                                 // α levels: 12 Mb/s (1500 kB/s) is not above m0u; 1501 is
        assert_eq!(
            (alpha_level(0, 1500.0, &p), alpha_level(0, 1501.0, &p)),
            (0, 1)
        );
        assert_eq!(
            (alpha_level(1, 1300.0, &p), alpha_level(1, 1249.0, &p)),
            (1, 0)
        );
        assert_eq!(
            (alpha_level(1, 15001.0, &p), alpha_level(2, 13000.0, &p)),
            (2, 2)
        );
        assert_eq!(alpha_level(2, 12499.0, &p), 1);
        // 20 Mb/s = 2500 kB/s: 1000 segments of 1448 bytes in 579.2 ms
        assert_eq!(unsafe { crate::math::fast_tput_kBps(1000, 1448, 579_200) }, 2500);
        // loss: halve, 16-packet floor for larger windows, at least 2
        for (w, want) in [(100u32, 50.0), (20, 16.0), (16, 8.0), (10, 5.0), (3, 2.0)] {
            assert_eq!(loss_ssthresh(f64::from(w), &p), want, "w {w}");
            assert_eq!(
                f64::from(unsafe { crate::math::fast_loss_ssthresh(w, 16) }),
                want.floor()
            );
        }
        // slow start ends above 10 % queueing delay (mode 0) or diff > α/2 (mode 1)
        assert!(!ss_exit(100.0, 100.0, 110.0, 20.0, 0, 0.1));
        assert!(ss_exit(100.0, 100.0, 110.1, 20.0, 0, 0.1));
        assert!(!c_ss_exit(100, 100_000, 110_000 << 10, 20, 0, 10));
        assert!(c_ss_exit(100, 100_000, (110_000 << 10) + 1, 20, 0, 10));
        assert!(!ss_exit(110.0, 100.0, 110.0, 20.0, 1, 0.1)); // diff 10 = α/2
        assert!(ss_exit(111.0, 100.0, 110.0, 20.0, 1, 0.1));
        assert!(c_ss_exit(111, 100_000, 110_000 << 10, 20, 1, 10));
    }

    /*
     * eq. (5) in the C, for the same integer w, baseRTT and T̄ (T̄ in usec << 10, which
     * the model reads exactly): w·baseRTT/T̄ is cut to 2^-10 packet (when w·baseRTT ≥
     * 2^43, through the ratio baseRTT/T̄ cut to 2^-20: w·2^-20 + 2^-10), downwards and
     * weighted by γ, then the sum is rounded to the nearest segment. So
     * model − 0.5 − ε ≤ C ≤ model + 0.5 with ε = γ·cut (the 2w cap and the floor of 2
     * apply to both).
     */
    #[test]
    fn window_update_matches_the_model_within_half_a_segment() {
        let mut n = 0usize;
        let mut worst = 0f64;
        for gamma_fp in [102u32, 256, 512, 768, 1024] {
            let gamma = f64::from(gamma_fp) / 1024.0;
            for base in [50u32, 1000, 9_999, 20_000, 100_000, 333_333, 2_000_000] {
                for k in 0..60u64 {
                    let avg_fp =
                        (u64::from(base) << 10) + (u64::from(base) << 10) * k * k / 400 + k * 37;
                    for w in [
                        2u32, 3, 7, 16, 50, 99, 100, 1000, 4321, 65_536, 1_000_000, 50_000_000,
                    ] {
                        for alpha in [1u32, 8, 20, 200, 5000] {
                            let m = window(
                                f64::from(w),
                                f64::from(base),
                                fp_avg(avg_fp),
                                f64::from(alpha),
                                gamma,
                            )
                            .max(2.0);
                            let c = f64::from(c_window(w, base, avg_fp, alpha, gamma_fp));
                            let eps = gamma * window_cut(w, base);
                            assert!(
                                c >= m - 0.5 - eps - 1e-9 && c <= m + 0.5 + 1e-9,
                                "w {w} base {base} avg {avg_fp} α {alpha} γ {gamma}: C {c} model {m}"
                            );
                            if u64::from(w) * u64::from(base) < 1 << 43 {
                                worst = worst.max((c - m).abs());
                            }
                            n += 1;
                        }
                    }
                }
            }
        }
        eprintln!(
            "fast window: {n} points, max |C − model| {worst:.4} segments where w·baseRTT < 2^43"
        );
        assert!(n > 100_000);
    }

    /*
     * The RTT average: η in the C is ⌊65536·η⌋/65536 (the 1/4 cap is exact) and each step
     * moves by ⌊|T − T̄|·η⌋ in 2^-10 usec, so one step is within |T − T̄|·2^-16 + 2^-10 usec
     * of the model's (same T̄ in). Over many steps the errors shrink by (1 − η) each, so
     * a run of samples stays within that bound divided by η.
     */
    #[test]
    fn rtt_average_matches_the_model() {
        let p = FastParams::default();
        let mut n = 0;
        for w in [4u32, 12, 13, 30, 100, 1000, 100_000] {
            for r8 in [256u32, 384, 512, 1024] {
                let r = f64::from(r8) / 256.0;
                let e_m = eta(f64::from(w), r, &p);
                let e_c = c_eta(w, r8, true);
                assert!(
                    (e_m - f64::from(e_c) / 65536.0) < 2f64.powi(-16)
                        && f64::from(e_c) / 65536.0 <= e_m + 1e-15,
                    "η w {w} r {r}"
                );
                for avg_us in [1_000u64, 20_000, 150_000] {
                    for rtt in [500u32, 1_000, 19_999, 20_000, 25_000, 400_000] {
                        let avg_fp = avg_us << 10;
                        let m = avg_rtt(Some(avg_us as f64), f64::from(rtt), e_m);
                        let c = fp_avg(c_avg(avg_fp, rtt, e_c));
                        let bound = (f64::from(rtt) - avg_us as f64).abs() * 2f64.powi(-16)
                            + 2f64.powi(-10);
                        assert!(
                            (m - c).abs() <= bound + 1e-9,
                            "w {w} r {r} avg {avg_us} rtt {rtt}: C {c} model {m}"
                        );
                        n += 1;
                    }
                }
                // a run of samples alternating around 30 ms
                let (mut am, mut ac) = (None, 0u64);
                for i in 0..2000u32 {
                    let rtt = 30_000 + (i % 7) * 1000;
                    am = Some(avg_rtt(am, f64::from(rtt), e_m));
                    ac = c_avg(ac, rtt, e_c);
                }
                // each step adds at most e (the one-step bound, |T − T̄| ≤ 6 ms) and shrinks
                // the error carried so far by (1 − η): at most e/η in all
                let bound = (6000.0 * 2f64.powi(-16) + 2f64.powi(-10)) / e_m;
                assert!(
                    (am.unwrap() - fp_avg(ac)).abs() <= bound,
                    "run w {w} r {r}: {am:?} vs {}",
                    fp_avg(ac)
                );
            }
        }
        assert_eq!(
            c_avg(0, 12_345, 100),
            12_345 << 10,
            "the first sample starts the average"
        );
        assert!(n > 500);
        // packets per ACK: EWMA 1/8, clamped to [1, 64]
        let mut r = 256;
        for _ in 0..200 {
            r = unsafe { crate::math::fast_ack_ratio(r, 2) };
        }
        assert!((505..=512).contains(&r), "{r}");
        assert_eq!(unsafe { crate::math::fast_ack_ratio(256, 0) }, 256);
        assert_eq!(unsafe { crate::math::fast_ack_ratio(64 << 8, 1000) }, 64 << 8);
    }

    #[test]
    fn alpha_level_c_equals_the_model() {
        let p = FastParams::default();
        for level in 0..3 {
            for tput in (0..20_000u32).step_by(7).chain([
                1249,
                1250,
                1251,
                1500,
                1501,
                12_499,
                12_500,
                15_000,
                15_001,
                u32::MAX,
            ]) {
                assert_eq!(
                    c_level(level, tput),
                    alpha_level(level, f64::from(tput), &p),
                    "level {level} B {tput}"
                );
            }
        }
    }

    #[test]
    fn slow_start_exit_c_agrees_with_the_model() {
        let (mut n, mut exits) = (0, 0);
        for base in [100u32, 20_000, 100_000] {
            for k in 0..300u64 {
                let avg_fp = (u64::from(base) << 10) + (u64::from(base) << 10) * k / 1000 + k;
                for w in [2u32, 10, 64, 300, 5000] {
                    for alpha in [8u32, 20, 200] {
                        for pct in [0u32, 5, 10, 25] {
                            let m0 = ss_exit(
                                f64::from(w),
                                f64::from(base),
                                fp_avg(avg_fp),
                                f64::from(alpha),
                                0,
                                f64::from(pct) / 100.0,
                            );
                            assert_eq!(
                                c_ss_exit(w, base, avg_fp, alpha, 0, pct),
                                m0,
                                "mode 0 w {w} base {base} avg {avg_fp} pct {pct}"
                            );
                            exits += usize::from(m0);
                        }
                        let m1 = ss_exit(
                            f64::from(w),
                            f64::from(base),
                            fp_avg(avg_fp),
                            f64::from(alpha),
                            1,
                            0.0,
                        );
                        let c1 = c_ss_exit(w, base, avg_fp, alpha, 1, 0);
                        if m1 != c1 {
                            // only within w·2^-19 packets of the threshold, and only late
                            let avg = fp_avg(avg_fp);
                            let d = f64::from(w) * (avg - f64::from(base)) / avg;
                            assert!(
                                m1 && (d - f64::from(alpha) / 2.0) < f64::from(w) * 2f64.powi(-19),
                                "mode 1 w {w} base {base} avg {avg_fp}"
                            );
                        }
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 10_000 && exits > 1000);
    }

    /// Spreading: after k acked packets the C window is min(target, w₀ + ⌊k·(target −
    /// ref)/ref⌋), the model's linear ramp rounded down, so it reaches the target after
    /// exactly one reference window of acked packets, in whatever ACK sizes.
    #[test]
    fn increase_is_spread_over_one_window_of_acks() {
        for (reff, target) in [(10u32, 20u32), (100, 137), (1000, 1001), (57, 114), (3, 5)] {
            for ack_size in [1u32, 2, 3, 7] {
                let (mut w, mut cnt, mut k) = (reff, 0u32, 0u32);
                while k < reff {
                    let a = ack_size.min(reff - k);
                    w = c_spread(w, target, reff, &mut cnt, a);
                    k += a;
                    let m =
                        f64::from(reff) + f64::from(k) * f64::from(target - reff) / f64::from(reff);
                    assert_eq!(
                        w,
                        (m.floor() as u32).min(target),
                        "ref {reff} target {target} after {k}"
                    );
                }
                assert_eq!(w, target);
                assert_eq!(
                    c_spread(w, target, reff, &mut cnt, 5),
                    target,
                    "never beyond the target"
                );
            }
        }
    }

    /// Iterates eq. (5) at a fixed queueing delay (T̄ = baseRTT + q): the model converges
    /// monotonically (the map is w·(1 − γq/T̄) + γα, a contraction by 1 − γq/T̄ < 1) to
    /// w* = α(baseRTT + q)/q, where x·q = α packets are queued, i.e. w* = x·baseRTT + α.
    /// The C, in whole segments, also moves monotonically and stops for good at a window
    /// whose queue is within (0.5 + ε)/γ of α (ε as in the update's bound, 2^-10·γ here):
    /// a window w is a fixed point once |γ(α − w·q/T̄)| ≤ 0.5 + ε, the rounding.
    #[test]
    fn window_converges_without_oscillation_to_alpha_queued_at_fixed_delay() {
        let mut cases = 0;
        for (base, q) in [
            (20_000u32, 2_000u32),
            (100_000, 5_000),
            (100_000, 50_000),
            (1_000, 3_000),
            (200_000, 1_000),
        ] {
            for alpha in [8u32, 20, 200] {
                for gamma_fp in [256u32, 512, 1024] {
                    let gamma = f64::from(gamma_fp) / 1024.0;
                    let t = f64::from(base + q);
                    let avg_fp = u64::from(base + q) << 10;
                    let wstar = equilibrium_window(f64::from(base), f64::from(q), f64::from(alpha));
                    assert!((wstar * f64::from(q) / t - f64::from(alpha)).abs() < 1e-9);
                    assert!(
                        (wstar - (wstar / t * f64::from(base) + f64::from(alpha))).abs() < 1e-9
                    );
                    for w0 in [2u32, (wstar * 3.0) as u32 + 5] {
                        // model
                        let (mut w, mut prev_step) = (f64::from(w0), 0f64);
                        for _ in 0..20_000 {
                            let nw = window(w, f64::from(base), t, f64::from(alpha), gamma);
                            let step = nw - w;
                            assert!(step * prev_step >= 0.0, "model oscillates at {w}");
                            if step != 0.0 {
                                prev_step = step;
                            }
                            w = nw;
                        }
                        assert!((w - wstar).abs() <= 1e-6 * wstar, "model {w} vs w* {wstar}");
                        // C
                        let (mut wc, mut dir, mut still) = (w0, 0i64, 0);
                        for _ in 0..20_000 {
                            let n = c_window(wc, base, avg_fp, alpha, gamma_fp);
                            let d = i64::from(n) - i64::from(wc);
                            assert!(d * dir >= 0, "C oscillates at {wc} -> {n}");
                            if d != 0 {
                                dir = d.signum();
                                assert_eq!(still, 0, "C moved again after standing still");
                            } else {
                                still += 1;
                            }
                            wc = n;
                        }
                        assert!(still > 100, "C never settled");
                        let queued = f64::from(wc) * f64::from(q) / t;
                        let eps = gamma * window_cut(wc, base);
                        let band = (0.5 + eps) / gamma;
                        assert!(
                            (queued - f64::from(alpha)).abs() <= band + 1e-9,
                            "base {base} q {q} α {alpha} γ {gamma}: C settles at {wc} ({queued:.3} queued), w* {wstar:.2}"
                        );
                        cases += 1;
                    }
                }
            }
        }
        assert_eq!(cases, 90);
    }

    /// On one bottleneck (c packets/s, baseRTT d) where the queue is what the window puts
    /// there, eq. (5) with T̄ = the RTT the window causes converges to w = c·d + α, α
    /// packets queued ([P1] Theorem 2: geometric convergence), model and C alike.
    #[test]
    fn one_bottleneck_fixed_point_has_alpha_packets_queued() {
        for (c_pps, base_s) in [(1667.0, 0.0001), (1667.0, 0.020), (8333.0, 0.100)] {
            for alpha in [8u32, 20, 200] {
                let p = FastParams::default();
                let target = c_pps * base_s + f64::from(alpha);
                let (mut wm, mut wc) = (2.0f64, 2u32);
                let mut prev = 0.0;
                for _ in 0..5000 {
                    let t = bottleneck_rtt(wm, base_s, c_pps);
                    let nw = window(wm, base_s, t, f64::from(alpha), p.gamma);
                    assert!(nw >= wm - 1e-9 || prev <= 0.0, "model turned back at {wm}");
                    prev = nw - wm;
                    wm = nw;
                    let tc = bottleneck_rtt(f64::from(wc), base_s, c_pps);
                    let base_us = (base_s * 1e6).round() as u32;
                    wc = c_window(wc, base_us, ((tc * 1e6) * 1024.0) as u64, alpha, GAMMA_FP);
                }
                assert!(
                    (wm - target).abs() < 1e-6 * target,
                    "model {wm} vs {target}"
                );
                let queued_m = wm - c_pps * base_s;
                assert!((queued_m - f64::from(alpha)).abs() < 1e-6 * target);
                // C: whole segments plus the µs rounding of baseRTT
                let queued_c = f64::from(wc) - c_pps * base_s;
                assert!(
                    (queued_c - f64::from(alpha)).abs() <= 1.5,
                    "C {wc} ({queued_c:.2} queued), α {alpha}"
                );
            }
        }
    }

    /// Queueing delay (s) of one drop-tail bottleneck of `c` packets/s shared by flows with
    /// windows `w` (packets) and propagation delays `d` (s): the q ≥ 0 at which
    /// Σ w_i/(d_i + q) = c (0 while the windows do not fill the pipe), by bisection.
    fn shared_queue_s(w: &[f64], d: &[f64], c: f64) -> f64 {
        let rate = |q: f64| w.iter().zip(d).map(|(w, d)| w / (d + q)).sum::<f64>();
        if rate(0.0) <= c {
            return 0.0;
        }
        let (mut lo, mut hi) = (0.0, 100.0);
        for _ in 0..200 {
            let mid = (lo + hi) / 2.0;
            if rate(mid) > c {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// [P0]'s T0.2 point in the fluid model, with the window and level rules fast.bpf.c
    /// runs (fast_window, fast_alpha_level): 250 Mbit/s (20 833 packets/s of 1500 B),
    /// flow 1 at 162 ms alone for 400 updates, then flow 2 at 42 ms joining with 400
    /// packets in flight (where its slow start leaves it: about 11 MB/s, above m0u, so it
    /// moves to level 1). Returns each flow's rate
    /// (packets/s), α level and the packets it keeps queued after 4000 more updates.
    fn two_flows(profile: Option<&str>) -> [(f64, u32, f64); 2] {
        let a = crate::catalogue::find("fast").unwrap();
        let v = a.resolve_params_with(profile, &[]).unwrap();
        let levels = [v["alpha_l0_pkts"], v["alpha_l1_pkts"], v["alpha_l2_pkts"]];
        let alpha = |level: u32| if v["alpha_mode"] == 0 { v["alpha_pkts"] } else { levels[level as usize] };
        let (c, d) = (250e6 / 12_000.0, [0.162, 0.042]);
        let (mut w, mut level) = ([10u32, 0], [0u32, 0]);
        for step in 0..4400 {
            let n = if step < 400 { 1 } else { 2 };
            if step == 400 {
                w[1] = 400;
            }
            let wf: Vec<f64> = w[..n].iter().map(|&x| f64::from(x)).collect();
            let q = shared_queue_s(&wf, &d[..n], c);
            for i in 0..n {
                let t = d[i] + q;
                let x_kbps = f64::from(w[i]) / t * 1.5;
                if v["alpha_mode"] == 1 {
                    level[i] = c_level(level[i], x_kbps as u32);
                }
                let base_us = (d[i] * 1e6) as u32;
                w[i] = c_window(w[i], base_us, ((t * 1e6) * 1024.0) as u64, alpha(level[i]), GAMMA_FP);
            }
        }
        let wf = [f64::from(w[0]), f64::from(w[1])];
        let q = shared_queue_s(&wf, &d, c);
        [0, 1].map(|i| {
            let x = wf[i] / (d[i] + q);
            (x, level[i], x * q)
        })
    }

    /// The lock-in of T0.2: flow 1 reaches level 2 (α = 200) alone; the newcomer settles
    /// where x_i·q = α_i gives it 20/220 of the link, below m1u's 120 Mbit/s, so it never
    /// climbs to level 2, and flow 1 never falls below m2l: the split is the α levels',
    /// whatever the RTTs. [P0]'s reading (`fast@p0`, levels halved) keeps the same split
    /// with half the queue; one α for both (`fast@p1`) shares the link equally.
    #[test]
    fn adaptive_alpha_locks_the_newcomer_at_the_lower_level_and_fixed_alpha_shares_equally() {
        for (profile, levels, queued, ratio) in [
            (None, [2, 1], [200.0, 20.0], 0.1),
            (Some("p0"), [2, 1], [100.0, 10.0], 0.1),
            (Some("p1"), [0, 0], [200.0, 200.0], 1.0),
        ] {
            let [f1, f2] = two_flows(profile);
            eprintln!("{profile:?}: flow 1 {f1:?}, flow 2 {f2:?}");
            assert_eq!([f1.1, f2.1], levels, "{profile:?}: α levels (none with one α)");
            for (f, want) in [(f1, queued[0]), (f2, queued[1])] {
                assert!((f.2 - want).abs() <= 1.5, "{profile:?}: {f:?} queues {} not {want}", f.2);
            }
            let r = f2.0 / f1.0;
            assert!((r - ratio).abs() < 0.02, "{profile:?}: ratio {r}, want {ratio}");
            assert!(f1.0 + f2.0 > 0.99 * 250e6 / 12_000.0, "{profile:?}: link not full");
        }
    }
}
