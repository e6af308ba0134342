//! A plain f64 model of CUBIC's rules (spec §7), the reference for bpf/algo/cubic_math.h's fixed point.

/// CUBIC's parameters in real units (spec §7 "Parameters").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubicParams {
    /// C, segments/s³ (\[GK\] 0.4; Linux 41·10/1024).
    pub c: f64,
    /// β, the window multiplier on loss (\[P2\]/\[P3\] 0.8; Linux and RFC 9438 0.7).
    pub beta: f64,
    /// Fast convergence (spec §7 "Loss"; \[LINUX\] on).
    pub fast_convergence: bool,
}

impl Default for CubicParams {
    /// The spec §7 defaults of this port: C = 0.4, β = 0.8, fast convergence.
    fn default() -> Self {
        Self {
            c: 0.4,
            beta: 0.8,
            fast_convergence: true,
        }
    }
}

/// K, s: the time the cubic takes from the epoch start back to its plateau
/// (spec §7 "Window function", \[LINUX\] form): `cbrt((W_max − w_0)/C)` for a window
/// w_0 at the epoch start below W_max, else 0. Segments in, seconds out.
pub fn k(w_max: f64, w_0: f64, c: f64) -> f64 {
    if w_max <= w_0 {
        0.0
    } else {
        ((w_max - w_0) / c).cbrt()
    }
}

/// K, s, in the paper's form (spec §7): `cbrt(W_max·(1 − β)/C)`, which equals [`k`] when
/// the epoch starts at w_0 = β·W_max.
pub fn k_paper(w_max: f64, beta: f64, c: f64) -> f64 {
    (w_max * (1.0 - beta) / c).cbrt()
}

/// The cubic window W(t) = C·(t − K)³ + origin, segments (spec §7 "Window function");
/// `t`, `k` in s since the epoch start, `origin` = W_max (or w_0 when it was above).
pub fn w_cubic(t: f64, k: f64, origin: f64, c: f64) -> f64 {
    c * (t - k).powi(3) + origin
}

/// The TCP-friendly window W_tcp after `acked` packets at window `w`, segments (spec §7
/// "TCP-friendly region"): it starts at `w_0` and grows 3(1 − β)/(1 + β) per window of
/// acked packets, i.e. that much per RTT.
pub fn w_tcp(w_0: f64, acked: f64, w: f64, beta: f64) -> f64 {
    w_0 + 3.0 * (1.0 - beta) / (1.0 + beta) * acked / w
}

/// Acked packets per +1 segment to reach `target` from `w` in one RTT (spec §7
/// "Rules"): `w/(target − w)`, or 100·w (almost no growth) at or above the target.
pub fn cnt(w: f64, target: f64) -> f64 {
    if target > w {
        w / (target - w)
    } else {
        100.0 * w
    }
}

/// W_max after a reduction at window `w`, segments (spec §7 "Loss").
pub fn new_w_max(w: f64, w_max: f64, p: &CubicParams) -> f64 {
    if p.fast_convergence && w < w_max {
        w * (1.0 + p.beta) / 2.0
    } else {
        w
    }
}

/// ssthresh after a reduction, segments: max(β·w, 2) (spec §7 "Loss").
pub fn ssthresh(w: f64, p: &CubicParams) -> f64 {
    (p.beta * w).max(2.0)
}

/// HyStart's RTT-rise threshold, s: clamp(RTT_min/8, lo, hi) (spec §7 "Parameters",
/// \[LINUX\] 4 ms, 16 ms).
pub fn hystart_delay_threshold(rtt_min: f64, lo: f64, hi: f64) -> f64 {
    (rtt_min / 8.0).clamp(lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::cctl_cubic_ca;

    // The C is bpf/algo/cubic_math.h unchanged, compiled for the host by build.rs.
    #[allow(clippy::too_many_arguments)]
    unsafe fn cctl_cubic_update(
        ca: *mut cctl_cubic_ca,
        beta_fp: u32,
        c_1024: u32,
        fast_convergence: u32,
        tcp_friendliness: u32,
        cwnd: u32,
        acked: u32,
        now_us: u32,
    ) {
        let p = crate::math::cubic_params {
            beta_fp,
            c_1024,
            fast_convergence,
            tcp_friendliness,
        };
        // SAFETY: the caller passes a live, exclusively borrowed `ca`.
        unsafe { crate::math::cubic_update(ca, &p, cwnd, acked, now_us) }
    }

    unsafe fn cctl_cubic_on_reduction(
        ca: *mut cctl_cubic_ca,
        beta_fp: u32,
        fast_convergence: u32,
        w: u32,
    ) -> u32 {
        let p = crate::math::cubic_params {
            beta_fp,
            c_1024: 410,
            fast_convergence,
            tcp_friendliness: 1,
        };
        // SAFETY: the caller passes a live, exclusively borrowed `ca`.
        unsafe { crate::math::cubic_on_reduction(ca, &p, w) }
    }

    #[allow(clippy::too_many_arguments)]
    unsafe fn cctl_cubic_hystart_update(
        ca: *mut cctl_cubic_ca,
        detect: u32,
        low_window: u32,
        ack_delta_us: u32,
        delay_min_us: u32,
        delay_max_us: u32,
        min_samples: u32,
        cwnd: u32,
        delay_us: u32,
        now_us: u32,
        snd_una: u32,
        snd_nxt: u32,
        ack_delay_us: u32,
        paced: i32,
    ) -> i32 {
        let h = crate::math::cubic_hystart_params {
            detect,
            low_window,
            ack_delta_us,
            delay_min_us,
            delay_max_us,
            min_samples,
        };
        let a = crate::math::cubic_hystart_ack {
            delay_us,
            now_us,
            snd_una,
            snd_nxt,
            ack_delay_us,
            paced,
        };
        // SAFETY: the caller passes a live, exclusively borrowed `ca`; `h` and `a` are
        // live, initialised structs the function only reads.
        unsafe { crate::math::cubic_hystart_update(ca, &h, cwnd, &a) }
    }

    fn cbrt_c(x: u64) -> u32 {
        // SAFETY: a pure function of integers, no pointers.
        unsafe { crate::math::cubic_cbrt(x) }
    }

    fn k_c(diff: u32, c_1024: u32) -> u32 {
        // SAFETY: a pure function of integers, no pointers.
        unsafe { crate::math::cubic_k_1024(diff, c_1024) }
    }

    fn target_c(t_1024: u64, k_1024: u32, origin: u32, c_1024: u32) -> u32 {
        // SAFETY: a pure function of integers, no pointers.
        unsafe { crate::math::cubic_w_target(t_1024, k_1024, origin, c_1024) }
    }

    /// ⌊cbrt(x)⌋ checked the slow, certain way: y³ ≤ x < (y + 1)³ in u128.
    fn is_floor_cbrt(x: u64, y: u32) -> bool {
        let (x, y) = (u128::from(x), u128::from(y));
        y * y * y <= x && x < (y + 1) * (y + 1) * (y + 1)
    }

    /// The cube root is exact (⌊cbrt⌋, not an approximation like Linux's table +
    /// Newton step): every x < 2²⁰, every perfect cube n³ and its neighbours n³ ± 1 up
    /// to the largest cube below 2⁶⁴ (n = 2642245), 10⁶ pseudo-random 64-bit values
    /// spread over all magnitudes, and the extremes.
    #[test]
    fn cube_root_is_exact_floor_over_the_whole_u64_range() {
        let mut checked = 0usize;
        for x in 0..(1u64 << 20) {
            assert!(is_floor_cbrt(x, cbrt_c(x)), "x = {x}: {}", cbrt_c(x));
            checked += 1;
        }
        for n in (1u64..=2_642_245).step_by(7).chain([2_642_245]) {
            let cube = n * n * n;
            for x in [cube - 1, cube, cube.saturating_add(1)] {
                let y = cbrt_c(x);
                assert!(is_floor_cbrt(x, y), "x = {x}: {y}");
                checked += 1;
            }
            assert_eq!(cbrt_c(cube), n as u32);
        }
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..1_000_000u64 {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let x = s >> (i % 64);
            assert!(is_floor_cbrt(x, cbrt_c(x)), "x = {x}");
            checked += 1;
        }
        for x in [u64::MAX, u64::MAX - 1, 1 << 63, (1 << 63) - 1] {
            assert!(is_floor_cbrt(x, cbrt_c(x)), "x = {x}");
        }
        assert_eq!(cbrt_c(u64::MAX), 2_642_245);
        eprintln!("cbrt: {checked} values, all exact");
    }

    /// C values, 1/1024: Linux's 410, small and large ones up to the loader's 16384.
    const CS_1024: [u32; 6] = [410, 409, 41, 1, 4096, 16_384];

    /*
     * K (spec §7): the C computes ⌊cbrt(⌊(W_max − w_0)·2⁴⁰/c⌋)⌋ in 1/1024 s. With
     * c = c_1024/1024 exactly, the model's 1024·K = cbrt((W_max − w_0)·2⁴⁰/c_1024); the
     * inner floor lowers the argument by < 1 and so the root by < 1/(3·root²) ≤ 1/3 for
     * root ≥ 1, and the outer floor by < 1: 0 ≤ 1024·K_model − K_C < 1 (1/1024 s). For
     * W_max − w_0 ≥ 2²⁴ the C divides before scaling by 2²⁰ (relative error < 2⁻³⁰ in the
     * argument, < 2⁻³¹·root in the root, ≤ 0.002 units at the largest root): the bound
     * is then 1.002.
     */
    #[test]
    fn k_matches_the_model_within_one_1024th_of_a_second() {
        let mut diffs: Vec<u32> = (1..=5000).collect();
        diffs.extend((0..80).map(|i| (1.3f64.powi(i) * 5000.0).min(4e9) as u32));
        diffs.extend([1 << 24, (1 << 24) + 1, u32::MAX]);
        let (mut checked, mut max_err) = (0usize, 0f64);
        for &c_1024 in &CS_1024 {
            let c = f64::from(c_1024) / 1024.0;
            for &d in &diffs {
                let m = k(f64::from(d), 0.0, c) * 1024.0;
                let got = f64::from(k_c(d, c_1024));
                if f64::from(d) * 2f64.powi(40) / f64::from(c_1024) >= 2f64.powi(64) {
                    // the argument saturates at 2⁶⁴ − 1: K = 2642245/1024 s (43 min)
                    assert_eq!(got, 2_642_245.0, "diff = {d}, c = {c_1024}/1024");
                    continue;
                }
                let err = m - got;
                let bound = if d >= 1 << 24 { 1.002 } else { 1.0 };
                assert!(
                    err > -1e-6 * m.max(1.0) && err < bound,
                    "K(diff = {d}, c = {c_1024}/1024): C {got}, model {m}"
                );
                max_err = max_err.max(err);
                checked += 1;
            }
        }
        eprintln!("K: {checked} points, max error {max_err:.4} / 1024 s");
        assert!(checked > 30_000);
        // the paper's form agrees with Linux's when the epoch starts at β·W_max
        for w_max in [100.0, 1000.0, 12345.0] {
            let p = CubicParams::default();
            let a = k(w_max, p.beta * w_max, p.c);
            assert!((a - k_paper(w_max, p.beta, p.c)).abs() < 1e-9);
        }
    }

    #[test]
    fn model_matches_hand_computed_values() {
        let p = CubicParams::default();
        // W_max = 1000, β = 0.8: w_0 = 800, K = cbrt(200/0.4) = cbrt(500) = 7.937 s
        let kk = k(1000.0, 800.0, p.c);
        assert!((kk - 7.937_005).abs() < 1e-5, "{kk}");
        assert!((w_cubic(0.0, kk, 1000.0, p.c) - 800.0).abs() < 1e-9);
        assert!((w_cubic(kk, kk, 1000.0, p.c) - 1000.0).abs() < 1e-12);
        // one second past K: 1000 + 0.4; two: 1000 + 3.2
        assert!((w_cubic(kk + 2.0, kk, 1000.0, p.c) - 1003.2).abs() < 1e-9);
        // β = 0.7 (Linux): K = cbrt(300/0.4) = cbrt(750) = 9.0856 s
        assert!((k_paper(1000.0, 0.7, 0.4) - 9.085_603).abs() < 1e-5);
        // W_tcp: 3·0.2/1.8 = 1/3 segment per RTT at β = 0.8; 0.9/1.7 at 0.7
        assert!((w_tcp(800.0, 800.0 * 3.0, 800.0, 0.8) - 801.0).abs() < 1e-9);
        assert!((w_tcp(0.0, 1.0, 1.0, 0.7) - 0.9 / 1.7).abs() < 1e-12);
        assert_eq!(cnt(100.0, 150.0), 2.0);
        assert_eq!(cnt(100.0, 100.0), 10_000.0);
        assert_eq!(new_w_max(1000.0, 1200.0, &p), 900.0);
        assert_eq!(new_w_max(1000.0, 900.0, &p), 1000.0);
        assert_eq!(ssthresh(1000.0, &p), 800.0);
        assert_eq!(hystart_delay_threshold(0.100, 0.004, 0.016), 0.0125);
        assert_eq!(hystart_delay_threshold(0.010, 0.004, 0.016), 0.004);
        assert_eq!(hystart_delay_threshold(0.400, 0.004, 0.016), 0.016);
    }

    /*
     * W(t) (spec §7 "Window function") at times on the C's 1/1024 s grid, so that t is
     * the same for both: the C's C·|t − K|³ is ⌊⌊offs³/2¹⁰⌋·c_1024/2³⁰⌋ with offs = |t − K|
     * in 1/1024 s, i.e. the exact c_1024·offs³/2⁴⁰ lowered by less than 1 + c_1024/2³⁰
     * segments, and it is added to or taken from the origin: the C's W is the model's
     * rounded towards the origin by less than 1 + 2⁻¹⁶ segments (saturating at 0).
     * Grid: t − K in ±120 s in 1/1024 s steps near K and coarser further out, K up to
     * 60 s, W_max from 10 to 10⁶ segments, C over CS_1024.
     */
    #[test]
    fn cubic_window_matches_the_model_on_the_1024th_second_grid() {
        let mut offsets: Vec<i64> = (-4096..=4096).collect();
        offsets.extend((0..=2400).map(|i| i * 50 - 60_000));
        offsets.extend((0..=240).map(|i| i * 512 - 122_880));
        let (mut checked, mut max_err, mut saturated) = (0usize, 0f64, 0usize);
        for &c_1024 in &CS_1024 {
            let c = f64::from(c_1024) / 1024.0;
            for k_1024 in [0u32, 1, 1000, 8128, 30_000, 61_440] {
                for origin in [10u32, 800, 1000, 65_536, 1_000_000] {
                    for &o in &offsets {
                        let t_1024 = i64::from(k_1024) + o;
                        if t_1024 < 0 {
                            continue;
                        }
                        let t = t_1024 as f64 / 1024.0;
                        let kk = f64::from(k_1024) / 1024.0;
                        let m = w_cubic(t, kk, f64::from(origin), c);
                        let got = f64::from(target_c(t_1024 as u64, k_1024, origin, c_1024));
                        if m <= 0.0 {
                            assert_eq!(got, 0.0, "t = {t}, K = {kk}: model {m}");
                            saturated += 1;
                            continue;
                        }
                        if m >= f64::from(u32::MAX) {
                            assert_eq!(got, f64::from(u32::MAX));
                            saturated += 1;
                            continue;
                        }
                        // error towards the origin, in segments
                        let toward = if o >= 0 { m - got } else { got - m };
                        let slack = 1e-12 * m;
                        assert!(
                            toward >= -slack && toward < 1.0 + 1.0 / 65_536.0 + slack,
                            "W(t = {t}, K = {kk}, origin = {origin}, c = {c_1024}/1024): \
                             C {got}, model {m}"
                        );
                        max_err = max_err.max(toward);
                        checked += 1;
                    }
                }
            }
        }
        eprintln!("W(t): {checked} points, {saturated} saturated, max error {max_err:.4} segments");
        assert!(checked > 1_000_000 && saturated > 1000);
    }

    /*
     * W(t) at arbitrary µs times: the C first rounds t down to 1/1024 s
     * (cubic_us_to_1024), which moves |t − K| by < 1/1024 s, so on top of the bound above
     * the error may grow by |W'| over 1/1024 s: 3·C·(|t − K| + 1/1024)²/1024 segments.
     */
    #[test]
    fn cubic_window_matches_the_model_at_microsecond_times() {
        let c_1024 = 410u32;
        let c = f64::from(c_1024) / 1024.0;
        let mut checked = 0usize;
        for (w_max, w_0) in [(1000u32, 800u32), (1000, 700), (100, 80), (50_000, 40_000)] {
            let k_1024 = k_c(w_max - w_0, c_1024);
            let kk = f64::from(k_1024) / 1024.0;
            for us in (0..60_000_000u64).step_by(997) {
                // SAFETY: a pure function of integers, no pointers.
                let t_1024 = unsafe { crate::math::cubic_us_to_1024(us) };
                assert_eq!(t_1024, us * 1024 / 1_000_000);
                let t = us as f64 / 1e6;
                let m = w_cubic(t, kk, f64::from(w_max), c);
                let got = f64::from(target_c(t_1024, k_1024, w_max, c_1024));
                if m <= 0.0 {
                    assert_eq!(got, 0.0);
                    continue;
                }
                let d = (t - kk).abs() + 1.0 / 1024.0;
                let bound = 1.0 + 1.0 / 65_536.0 + 3.0 * c * d * d / 1024.0 + 1e-9 * m;
                assert!(
                    (m - got).abs() < bound,
                    "t = {t} s, K = {kk}: C {got}, model {m}, bound {bound}"
                );
                checked += 1;
            }
        }
        assert!(checked > 200_000);
    }

    /// Emulates the kernel's tcp_cong_avoid_ai(tp, w, acked) on (cwnd, cwnd_cnt).
    fn cong_avoid_ai(cwnd: &mut u32, cwnd_cnt: &mut u32, w: u32, acked: u32) {
        if *cwnd_cnt >= w {
            *cwnd_cnt = 0;
            *cwnd += 1;
        }
        *cwnd_cnt += acked;
        if *cwnd_cnt >= w {
            let delta = *cwnd_cnt / w;
            *cwnd_cnt -= delta * w;
            *cwnd += delta;
        }
    }

    struct Flow {
        ca: cctl_cubic_ca,
        cwnd: u32,
        cwnd_cnt: u32,
        now_us: u32,
    }

    impl Flow {
        /// One RTT of congestion avoidance: cwnd ACKs (one packet each) evenly spread.
        fn rtt(&mut self, rtt_us: u32, beta_fp: u32, c_1024: u32, friendly: bool) {
            let n = self.cwnd;
            for i in 0..n {
                let now = self.now_us + (u64::from(rtt_us) * u64::from(i) / u64::from(n)) as u32;
                // SAFETY: `ca` is a live, exclusively borrowed cctl_cubic_ca (size checked in
                // rust_layout_has_the_c_size); the C only reads and writes its fields.
                unsafe {
                    cctl_cubic_update(
                        &mut self.ca,
                        beta_fp,
                        c_1024,
                        1,
                        friendly.into(),
                        self.cwnd,
                        1,
                        now,
                    )
                };
                cong_avoid_ai(&mut self.cwnd, &mut self.cwnd_cnt, self.ca.cnt, 1);
            }
            self.now_us += rtt_us;
        }
    }

    fn flow_after_loss(w: u32, beta_fp: u32, rtt_us: u32) -> Flow {
        let mut ca = cctl_cubic_ca {
            delay_min_us: rtt_us,
            ..Default::default()
        };
        // a first loss at w with no previous W_max: W_max = w, cwnd = ⌊β w⌋
        // SAFETY: `ca` is a live, exclusively borrowed cctl_cubic_ca.
        let cwnd = unsafe { cctl_cubic_on_reduction(&mut ca, beta_fp, 1, w) };
        Flow {
            ca,
            cwnd,
            cwnd_cnt: 0,
            now_us: 5_000_000,
        }
    }

    /*
     * A whole epoch through the C, ACK by ACK (tcp_cong_avoid_ai emulated, one packet
     * per ACK, fixed RTT): the window must follow the model's W(t). The C aims at
     * W(t + RTT_min) one RTT ahead, so at the end of each RTT cwnd should sit at W(t)
     * give or take: the one-RTT step of W (cnt is an integer, the target an integer),
     * and 2 segments for the roundings of cnt and target. K and W_max (traced) must be
     * the model's within 1/1024 s and exactly.
     */
    #[test]
    fn an_epoch_driven_ack_by_ack_follows_the_cubic() {
        for (beta_fp, w, rtt_us) in [
            (819u32, 1000u32, 100_000u32),
            (717, 1000, 100_000),
            (819, 300, 20_000),
            (717, 5000, 50_000),
        ] {
            let mut f = flow_after_loss(w, beta_fp, rtt_us);
            let p = CubicParams {
                beta: f64::from(beta_fp) / 1024.0,
                c: 410.0 / 1024.0,
                fast_convergence: true,
            };
            let w_0 = f64::from(f.cwnd);
            let kk = k(f64::from(w), w_0, p.c);
            let rtt = f64::from(rtt_us) / 1e6;
            let start = f.now_us;
            let (mut max_dev, mut rtts) = (0f64, 0);
            while f64::from(f.now_us - start) / 1e6 < 2.0 * kk {
                f.rtt(rtt_us, beta_fp, 410, false);
                rtts += 1;
                let t = f64::from(f.now_us - start) / 1e6;
                // the C started its epoch at the first ACK: t is the same clock
                let m = w_cubic(t, kk, f64::from(w), p.c);
                let step = (w_cubic(t + rtt, kk, f64::from(w), p.c) - m).abs();
                let dev = f64::from(f.cwnd) - m;
                assert!(
                    dev.abs() <= step + 2.0,
                    "β {beta_fp}, W_max {w}, RTT {rtt_us} us: after {rtts} RTTs (t = {t:.3} s) \
                     cwnd {} vs W(t) {m:.2} (step {step:.2})",
                    f.cwnd
                );
                max_dev = max_dev.max(dev.abs());
            }
            assert_eq!(f.ca.w_max, w);
            assert_eq!(f.ca.origin, w);
            assert!((kk * 1024.0 - f64::from(f.ca.k_1024)).abs() < 1.0);
            eprintln!(
                "epoch β {beta_fp}/1024 W_max {w} RTT {rtt_us} us: {rtts} RTTs, K {:.3} s, \
                 max |cwnd − W(t)| {max_dev:.2} segments",
                f64::from(f.ca.k_1024) / 1024.0
            );
        }
    }

    /*
     * TCP-friendly region (spec §7): with a tiny C (1/1024) and a short RTT (5 ms) the
     * cubic rises about 3·C^(1/3)·(W_max − w_0)^(2/3) ≈ 10 segments/s ≈ 0.05 per RTT at
     * first, while W_tcp rises 3(1 − β)/(1 + β) ≥ 1/3 per RTT from w_0: the window must
     * follow W_tcp.
     * The C counts W_tcp in whole segments per ⌊w(1+β)/(3(1−β))⌋ packets and lets cwnd
     * follow it with cnt = w/(W_tcp − w); allow 2 segments of lag and the truncation of
     * the packet count (one segment per 1/w_0 of relative error).
     */
    #[test]
    fn with_a_tiny_c_the_window_follows_the_reno_friendly_line() {
        for beta_fp in [819u32, 717] {
            let mut f = flow_after_loss(1000, beta_fp, 5_000);
            let beta = f64::from(beta_fp) / 1024.0;
            let w_0 = f64::from(f.cwnd);
            let rate = 3.0 * (1.0 - beta) / (1.0 + beta);
            for n in 1..=300 {
                f.rtt(5_000, beta_fp, 1, true);
                let m = w_0 + rate * f64::from(n);
                let dev = f64::from(f.cwnd) - m;
                assert!(
                    dev.abs() <= 2.0 + rate * f64::from(n) * 2.0 / w_0,
                    "β {beta_fp}: after {n} RTTs cwnd {} vs W_tcp {m:.2}",
                    f.cwnd
                );
            }
            // and without friendliness it stays near w_0
            let mut g = flow_after_loss(1000, beta_fp, 5_000);
            for _ in 0..300 {
                g.rtt(5_000, beta_fp, 1, false);
            }
            // 1.5 s of the cubic alone: cwnd ≈ W(1.5 s + RTT), 13-20 segments above w_0
            let c = 1.0 / 1024.0;
            let cubic_only = w_cubic(1.505, k(1000.0, w_0, c), 1000.0, c);
            assert!(
                (f64::from(g.cwnd) - cubic_only).abs() <= 3.0,
                "{} vs W = {cubic_only:.2}",
                g.cwnd
            );
            assert!(f.cwnd > g.cwnd + 50);
        }
    }

    /// The packets per W_tcp segment: ⌊w(1024 + β)/(3(1024 − β))⌋, exact, at least 1.
    #[test]
    fn reno_friendly_acks_per_segment_is_exact() {
        for beta_fp in [1u32, 512, 717, 819, 1023] {
            for w in (1..5000u32).chain([100_000, 1_000_000, u32::MAX]) {
                // SAFETY: a pure function of integers, no pointers.
                let got = unsafe { crate::math::cubic_reno_acks_per_segment(w, beta_fp) };
                let want = (u64::from(w) * u64::from(1024 + beta_fp)
                    / (3 * u64::from(1024 - beta_fp)))
                .clamp(1, u64::from(u32::MAX));
                assert_eq!(u64::from(got), want, "w {w}, β {beta_fp}");
                // the model's packets per segment: w/(3(1 − β)/(1 + β))
                let b = f64::from(beta_fp) / 1024.0;
                let m = f64::from(w) * (1.0 + b) / (3.0 * (1.0 - b));
                if m < f64::from(u32::MAX) {
                    let g = f64::from(got);
                    assert!(
                        g <= m.max(1.0) * (1.0 + 1e-12) && g > m - 1.0,
                        "w {w}, β {beta_fp}: C {got}, model {m}"
                    );
                }
            }
        }
    }

    #[test]
    fn cnt_is_capped_before_the_first_loss_and_floored_at_two() {
        let mut ca = cctl_cubic_ca::default();
        // no loss yet: W_max = 0, the cubic is flat at cwnd → cnt would be 100·w
        // SAFETY: `ca` is a live, exclusively borrowed cctl_cubic_ca.
        unsafe { cctl_cubic_update(&mut ca, 819, 410, 1, 0, 500, 1, 1000) };
        assert_eq!(ca.cnt, 20);
        assert_eq!((ca.origin, ca.k_1024), (500, 0));
        // far below the target: w/(target − w) < 2 → 2
        let mut ca = cctl_cubic_ca {
            w_max: 10_000,
            ..Default::default()
        };
        // SAFETY: as above.
        unsafe { cctl_cubic_update(&mut ca, 819, 16_384, 1, 0, 100, 1, 1000) };
        ca.epoch_start_us = 1; // pretend the epoch began long ago
                               // SAFETY: as above.
        unsafe { cctl_cubic_update(&mut ca, 819, 16_384, 1, 0, 100, 1, 2_000_000_000) };
        assert_eq!(ca.cnt, 2);
    }

    /*
     * Loss (spec §7 "Loss"): with β exact in 1/1024 and integer windows, the C's
     * ⌊w(1024 + β)/2048⌋ and max(⌊w β/1024⌋, 2) are the model's values rounded down.
     */
    #[test]
    fn loss_rules_are_the_model_rounded_down() {
        let mut checked = 0;
        for beta_fp in [512u32, 717, 819, 1000] {
            let p = CubicParams {
                beta: f64::from(beta_fp) / 1024.0,
                ..CubicParams::default()
            };
            for w in (0..5000u32).chain((0..40).map(|i| 5000 + 1.6f64.powi(i) as u32)) {
                for w_max in [0, w / 2, w, w + 1, w.saturating_mul(3)] {
                    for fc in [false, true] {
                        let p = CubicParams {
                            fast_convergence: fc,
                            ..p
                        };
                        // SAFETY: pure functions of integers, no pointers.
                        let (nw, ss) = unsafe {
                            (
                                crate::math::cubic_new_w_max(w, w_max, beta_fp, fc.into()),
                                crate::math::cubic_ssthresh_of(w, beta_fp),
                            )
                        };
                        let (wf, wmf) = (f64::from(w), f64::from(w_max));
                        assert_eq!(f64::from(nw), new_w_max(wf, wmf, &p).floor());
                        assert_eq!(f64::from(ss), ssthresh(wf, &p).floor());
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 100_000);
        // a reduction ends the epoch
        let mut ca = cctl_cubic_ca {
            epoch_start_us: 123,
            w_max: 2000,
            ..Default::default()
        };
        // SAFETY: `ca` is a live, exclusively borrowed cctl_cubic_ca.
        let s = unsafe { cctl_cubic_on_reduction(&mut ca, 819, 1, 1000) };
        // ⌊1000·819/1024⌋ = 799, ⌊1000·1843/2048⌋ = 899
        assert_eq!((s, ca.epoch_start_us, ca.w_max), (799, 0, 899));
    }

    /// HyStart parameters as the linux profile has them.
    struct Hy {
        detect: u32,
    }

    impl Hy {
        #[allow(clippy::too_many_arguments)]
        fn update(
            &self,
            ca: &mut cctl_cubic_ca,
            cwnd: u32,
            delay_us: u32,
            now_us: u32,
            snd_una: u32,
            snd_nxt: u32,
            paced: bool,
        ) -> bool {
            // SAFETY: `ca` is a live, exclusively borrowed cctl_cubic_ca.
            unsafe {
                cctl_cubic_hystart_update(
                    ca,
                    self.detect,
                    16,
                    2000,
                    4000,
                    16_000,
                    8,
                    cwnd,
                    delay_us,
                    now_us,
                    snd_una,
                    snd_nxt,
                    0,
                    paced.into(),
                ) == 1
            }
        }
    }

    fn hystart_state(rtt_min_us: u32, now_us: u32) -> cctl_cubic_ca {
        let mut ca = cctl_cubic_ca {
            delay_min_us: rtt_min_us,
            ..Default::default()
        };
        // SAFETY: `ca` is a live, exclusively borrowed cctl_cubic_ca.
        unsafe { crate::math::cubic_hystart_round(&mut ca, now_us, 1000) };
        ca
    }

    /*
     * HyStart's delay detector (spec §7): after 8 samples in a round, the round's
     * smallest RTT must exceed RTT_min + clamp(RTT_min/8, 4 ms, 16 ms). Check the
     * threshold against the model on both sides, for RTT_min from 1 ms to 400 ms.
     */
    #[test]
    fn hystart_delay_detection_fires_exactly_above_the_threshold() {
        let hy = Hy { detect: 2 };
        for rtt_min_us in [
            1000u32, 20_000, 32_000, 50_000, 100_000, 128_000, 200_000, 400_000,
        ] {
            let thr = hystart_delay_threshold(f64::from(rtt_min_us) / 1e6, 0.004, 0.016);
            let thr_us = (thr * 1e6).floor() as u32;
            for (rise, fires) in [(thr_us, false), (thr_us + 1, true)] {
                let mut ca = hystart_state(rtt_min_us, 0);
                let mut fired_at = None;
                for i in 0..9u32 {
                    let now = 100 * (i + 1) * 1000; // far apart: no ACK train
                    if hy.update(&mut ca, 100, rtt_min_us + rise, now, 500, 5000, false) {
                        fired_at = Some(i);
                        break;
                    }
                }
                assert_eq!(
                    fired_at.is_some(),
                    fires,
                    "RTT_min {rtt_min_us} us, rise {rise} us (threshold {thr_us} us)"
                );
                if fires {
                    assert_eq!(fired_at, Some(8), "fires on the first sample after 8");
                    assert_eq!(ca.found, 1);
                }
            }
            // below hystart_low_window nothing is detected
            let mut ca = hystart_state(rtt_min_us, 0);
            for i in 0..20u32 {
                assert!(!hy.update(&mut ca, 15, rtt_min_us * 3, i * 100_000, 500, 5000, false));
            }
        }
    }

    /*
     * HyStart's ACK-train detector: ACKs 1 ms apart (≤ 2 ms: one train) fire once the
     * train spans more than RTT_min/2 since the round started (RTT_min unhalved when
     * paced); ACKs 3 ms apart never do; a new round (snd_una past end_seq) restarts it.
     */
    #[test]
    fn hystart_ack_train_fires_after_half_the_minimum_rtt() {
        let hy = Hy { detect: 1 };
        let rtt_min = 40_000u32;
        for (paced, span) in [(false, rtt_min / 2), (true, rtt_min)] {
            let mut ca = hystart_state(rtt_min, 0);
            let mut fired = None;
            for i in 1..=100u32 {
                if hy.update(&mut ca, 100, rtt_min, i * 1000, 500, 5000, paced) {
                    fired = Some(i * 1000);
                    break;
                }
            }
            assert_eq!(fired, Some(span + 1000), "paced {paced}");
        }
        let mut ca = hystart_state(rtt_min, 0);
        for i in 1..=100u32 {
            assert!(!hy.update(&mut ca, 100, rtt_min, i * 3000, 500, 5000, false));
        }
        // a new round restarts the train at the current time
        let mut ca = hystart_state(rtt_min, 0);
        for i in 1..=15u32 {
            assert!(!hy.update(&mut ca, 100, rtt_min, i * 1000, 500, 5000, false));
        }
        assert!(!hy.update(&mut ca, 100, rtt_min, 16_000, 1001, 9000, false));
        assert_eq!((ca.round_start_us, ca.end_seq), (16_000, 9000));
        for i in 17..=36u32 {
            assert!(!hy.update(&mut ca, 100, rtt_min, i * 1000, 1001, 9000, false));
        }
        assert!(hy.update(&mut ca, 100, rtt_min, 37_000, 1001, 9000, false));
    }

    fn linux_p() -> crate::math::cubic_params {
        crate::math::cubic_params {
            beta_fp: 717,
            c_1024: 410,
            fast_convergence: 1,
            tcp_friendliness: 1,
        }
    }

    fn update_jiffies(ca: &mut cctl_cubic_ca, cwnd: u32, acked: u32, now_j: u32) {
        // SAFETY: a live, exclusively borrowed `ca` and params.
        unsafe { crate::math::cubic_update_jiffies(ca, &linux_p(), cwnd, acked, now_j, 250) }
    }

    #[test]
    fn linux_cube_root_is_within_a_percent_and_k_follows_it() {
        // K's arguments: (W_max - w_0) · ⌊2^40/410⌋ >= 2.68e9 (Linux: "avg err ~0.195 %").
        let mut worst = 0.0f64;
        for a in ((1u64 << 31)..(1 << 31) + (1 << 30))
            .step_by(99_991)
            .chain((31..63).map(|b| (1u64 << b) + 12_345))
        {
            // SAFETY: a pure function.
            let x = unsafe { crate::math::cubic_linux_cbrt(a) } as f64;
            let exact = (a as f64).cbrt();
            worst = worst.max((x - exact).abs() / exact);
        }
        assert!(worst < 0.005, "largest relative error {worst}");
        // K for a drop of 300 segments at C = 0.4: cbrt(300/0.4) = 9.086 s.
        // SAFETY: a pure function.
        let k = unsafe { crate::math::cubic_linux_k_1024(300, 410) } as f64 / 1024.0;
        assert!((k - 9.086).abs() < 0.03, "K = {k} s");
        // Small arguments come from the table alone.
        // SAFETY: pure functions.
        let small: Vec<u32> = (0..8).map(|a| unsafe { crate::math::cubic_linux_cbrt(a) }).collect();
        assert_eq!(small, vec![0, 1, 1, 1, 2, 2, 2, 2]);
    }

    #[test]
    fn linux_exact_recomputes_cnt_at_most_once_per_jiffy() {
        let mut ca = cctl_cubic_ca {
            w_max: 100,
            delay_min_us: 40_000,
            ..Default::default()
        };
        update_jiffies(&mut ca, 70, 1, 1000);
        assert_eq!((ca.epoch_start_us, ca.last_time, ca.last_cwnd), (1000, 1000, 70));
        let cnt = ca.cnt;
        assert!(cnt > 2, "{cnt}");
        // The same jiffy, a new cwnd: no recomputation, the packets are counted.
        ca.cnt = 12_345;
        update_jiffies(&mut ca, 71, 1, 1000);
        assert_eq!((ca.cnt, ca.ack_cnt, ca.last_cwnd), (12_345, 2, 70));
        // The same cwnd for up to HZ/32 = 7 jiffies: nothing recomputed either.
        update_jiffies(&mut ca, 70, 1, 1007);
        assert_eq!((ca.cnt, ca.ack_cnt), (12_345, 3));
        // The next jiffy with a new cwnd recomputes it.
        update_jiffies(&mut ca, 71, 1, 1008);
        assert_ne!(ca.cnt, 12_345);
        assert_eq!(ca.last_time, 1008);
    }

    #[test]
    fn linux_exact_grows_w_tcp_by_the_truncated_factor() {
        // β = 717: ⌊⌊8·1741/3⌋/307⌋ = 15, so 15·w/8 = 1.875 w packets per segment.
        // SAFETY: a pure function.
        assert_eq!(unsafe { crate::math::cubic_linux_reno_acks_per_segment(80, 717) }, 150);
        let mut ca = cctl_cubic_ca {
            w_max: 0,
            ..Default::default()
        };
        update_jiffies(&mut ca, 80, 1, 5000);
        assert_eq!((ca.w_tcp, ca.ack_cnt), (80, 1));
        for j in 1..=150 {
            update_jiffies(&mut ca, 80, 1, 5000 + j * 8);
        }
        assert_eq!((ca.w_tcp, ca.ack_cnt), (81, 1), "+1 after 150 packets, 1 left over");
    }

    #[test]
    fn rust_layout_has_the_c_size() {
        // SAFETY: no arguments, returns a constant.
        let c = std::mem::size_of::<crate::math::cctl_cubic_ca>() as u32 as usize;
        assert_eq!(std::mem::size_of::<cctl_cubic_ca>(), c);
        assert!(c <= 104, "must fit icsk_ca_priv");
    }
}
