//! A plain f64 model of Scalable TCP's rules (spec §3), the reference for
//! bpf/algo/scalable_math.h and the window arithmetic of bpf/algo/scalable.bpf.c.

/// Scalable TCP's parameters in real units (spec §3 "Parameters"); the BPF program's
/// tunables hold the same values in segments, 1/10000 and 1/1000.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalableParams {
    /// Low_Window, segments: Reno's increase while w ≤ Low_Window (\[P0\] Table II: 16).
    pub low_window: f64,
    /// a, segments per acked packet in scalable mode (\[P0\], Kelly 2003: 0.01).
    pub a: f64,
    /// β, the multiplier of w on a loss (\[P0\]: 0.875, i.e. b = 0.125).
    pub beta: f64,
}

impl Default for ScalableParams {
    /// \[P0\] Table II / spec §3.
    fn default() -> Self {
        Self {
            low_window: 16.0,
            a: 0.01,
            beta: 0.875,
        }
    }
}

/// Whether the scalable (MIMD) rules apply at window `w` (segments): only for
/// w > Low_Window (spec §3 "Mode switch"); at or below it the flow is in legacy (Reno) mode.
pub fn is_scalable(w: f64, p: &ScalableParams) -> bool {
    w > p.low_window
}

/// The increase of w per acknowledged packet, segments (spec §3 "ACK"): `1/w` in legacy
/// mode, `a` in scalable mode (so `a·w` per RTT, 1 % per RTT with a = 0.01).
pub fn increase_per_packet(w: f64, p: &ScalableParams) -> f64 {
    if is_scalable(w, p) {
        p.a
    } else {
        1.0 / w
    }
}

/// Congestion avoidance for one ACK of `acked` packets: the per-packet rule applied
/// `acked` times (spec §0.2 "per ACK" = per newly acknowledged packet). `w` in segments.
pub fn on_ack(w: f64, acked: u32, p: &ScalableParams) -> f64 {
    (0..acked).fold(w, |w, _| w + increase_per_packet(w, p))
}

/// ssthresh after a loss, ECN echo or timeout, segments: `max(β·w, 2)` (spec §3 "Loss").
pub fn ssthresh(w: f64, p: &ScalableParams) -> f64 {
    (p.beta * w).max(2.0)
}

/// The window just before each loss when a loss comes every `1/loss_p` packets and the
/// flow stays in scalable mode: from β·W, `a` per packet reaches W again after 1/p packets,
/// so `W = a / ((1 − β)·p)` segments — the response function `w = (a/b)/p` of spec §3/§17.
pub fn response_peak(loss_p: f64, p: &ScalableParams) -> f64 {
    p.a / ((1.0 - p.beta) * loss_p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::cctl_scalable_ca;

    // The C under test is bpf/algo/scalable_math.h, unchanged, compiled for the host by build.rs.


    fn c_mode(cwnd: u32, low: u32) -> u8 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::scalable_mode(cwnd, low) }
    }

    fn c_ai_args(mode: u8, cwnd: u32, acked: u32, a: u32) -> (u32, u32) {
        let p = crate::math::scalable_params { a_per_10k: a };
        let mut ai = crate::math::scalable_ai::default();
        // SAFETY: `p` is a live, initialised struct the function only reads; `ai` a live,
        // exclusively borrowed struct for the call.
        unsafe { crate::math::scalable_ai_args(mode, cwnd, acked, &p, &mut ai) };
        (ai.w, ai.n)
    }

    fn c_counts_packets(a: u32) -> bool {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::scalable_counts_packets(a) != 0 }
    }

    fn c_ssthresh(cwnd: u32, beta: u32) -> u32 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::scalable_ssthresh_segs(cwnd, beta) }
    }

    fn c_incr(mode: u8, cwnd: u32, a: u32) -> f64 {
        // SAFETY: a pure function of integers.
        f64::from(unsafe { crate::math::scalable_incr_ppm(mode, cwnd, a) }) / 1e6
    }

    /// The behaviour of the kernel's kfunc `tcp_cong_avoid_ai(tp, w, acked)` (written from
    /// its documented semantics): credit left over from a larger w is spent as one segment,
    /// then the counter adds `acked` and every full `w` of it becomes one segment.
    fn kernel_ai(cwnd: &mut u32, cnt: &mut u32, w: u32, acked: u32) {
        if *cnt >= w {
            *cnt = 0;
            *cwnd += 1;
        }
        *cnt += acked;
        if *cnt >= w {
            let d = *cnt / w;
            *cnt -= d * w;
            *cwnd += d;
        }
    }

    /// What scalable.bpf.c does in congestion avoidance (no slow start): one ACK.
    /// Returns the new mode.
    fn bpf_ca_ack(cwnd: &mut u32, cnt: &mut u32, mode: u8, acked: u32, low: u32, a: u32) -> u8 {
        let m = c_mode(*cwnd, low);
        if m != mode && !c_counts_packets(a) {
            *cnt = 0;
        }
        let (w, n) = c_ai_args(m, *cwnd, acked, a);
        kernel_ai(cwnd, cnt, w, n);
        m
    }

    /// Tiny deterministic generator (xorshift64*) for ACK sizes.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        /// 1..=max packets, mostly 1 and 2 (delayed ACKs), sometimes stretch ACKs.
        fn acked(&mut self, max: u32) -> u32 {
            let r = self.next();
            match r % 10 {
                0..=3 => 1,
                4..=7 => 2,
                _ => 1 + ((r >> 8) % u64::from(max)) as u32,
            }
        }
    }

    #[test]
    fn skeleton_type_has_the_c_size_and_fits_icsk_ca_priv() {
        // SAFETY: no arguments, returns a constant.
        let c = std::mem::size_of::<crate::math::cctl_scalable_ca>() as u32;
        assert_eq!(std::mem::size_of::<cctl_scalable_ca>() as u32, c);
        assert!(c <= 104);
    }

    #[test]
    fn hand_computed_values_from_the_spec() {
        let p = ScalableParams::default();
        // the switch sits exactly at Low_Window = 16: legacy at 16, scalable at 17
        assert!(!is_scalable(16.0, &p) && is_scalable(16.0001, &p));
        assert_eq!((c_mode(16, 16), c_mode(17, 16)), (0, 1));
        // legacy: +1/w per packet; at w = 10, ten packets add ~1 segment
        assert!((on_ack(10.0, 10, &p) - 10.958_648).abs() < 1e-6);
        // scalable: 1 % per RTT at w = 1000 (1000 packets acked in one RTT)
        assert!((on_ack(1000.0, 1000, &p) - 1010.0).abs() < 1e-9);
        // loss: 0.875·w, and never below 2
        assert_eq!(ssthresh(100.0, &p), 87.5);
        assert_eq!(ssthresh(2.0, &p), 2.0);
        assert_eq!(c_ssthresh(100, 875), 88); // 100 - ⌊100/8⌋, as Linux
        assert_eq!(c_ssthresh(2, 875), 2);
        // response function: a/b = 0.08 → W = 0.08 / p
        assert!((response_peak(1e-4, &p) - 800.0).abs() < 1e-9);
        // trace values: 1/cwnd in legacy mode, a in scalable mode
        assert_eq!(c_incr(0, 16, 100), 0.0625);
        assert_eq!(c_incr(1, 17, 100), 0.01);
    }

    /*
     * ssthresh: the C computes w − ⌊w·(1000 − β‰)/1000⌋ = ⌈β·w⌉ for integer w, so it equals
     * the model rounded *up* to a whole segment (exactly; products < 2⁵³), floored at 2.
     * With β = 0.875 it is Linux's max(cwnd − (cwnd >> 3), 2) bit for bit.
     */
    #[test]
    fn ssthresh_is_beta_times_cwnd_rounded_up_and_linux_exact_at_seven_eighths() {
        let mut cwnds: Vec<u32> = (0..=5000).collect();
        cwnds.extend((0..40).map(|k| (1.5f64.powi(k) * 5001.0) as u32));
        cwnds.push(u32::MAX);
        let mut checked = 0usize;
        for beta in 500..=999u32 {
            let p = ScalableParams {
                beta: f64::from(beta) / 1000.0,
                ..ScalableParams::default()
            };
            for &w in &cwnds {
                let exact = (u64::from(w) * u64::from(beta)).div_ceil(1000).max(2);
                assert_eq!(u64::from(c_ssthresh(w, beta)), exact, "w {w} β {beta}");
                if w < 1 << 24 {
                    let m = ssthresh(f64::from(w), &p);
                    let got = f64::from(c_ssthresh(w, beta));
                    assert!(
                        got >= m - 1e-9 && got - m < 1.0,
                        "w {w} β {beta}: {got} vs {m}"
                    );
                }
                checked += 1;
            }
        }
        for w in 0..=200_000u32 {
            assert_eq!(c_ssthresh(w, 875), (w - (w >> 3)).max(2), "w {w}");
        }
        assert!(checked > 2_500_000);
    }

    /*
     * Scalable mode alone (cwnd > Low_Window throughout): the C gives w += a per packet with
     * a = k/10⁴, and cwnd + cnt/w_ai is the exact rational window, so it must equal the
     * model (which adds a per packet in f64) to f64 rounding: bound 1e-9·w. Checked for
     * every a in 1..=10000 that divides 10⁴ (packet counter) and a sample of the others
     * (1/10⁴ counter), over 20 000 random ACKs each.
     */
    #[test]
    fn scalable_mode_window_is_exact_against_the_model() {
        let mut rng = Rng(0x5eed_5ca1);
        let mut a_values: Vec<u32> = (1..=10_000).filter(|a| 10_000 % a == 0).collect();
        a_values.extend([3, 7, 33, 99, 101, 150, 333, 777, 1234, 9999]);
        let (mut max_err, mut checked) = (0f64, 0usize);
        for &a in &a_values {
            let p = ScalableParams {
                low_window: 16.0,
                a: f64::from(a) / 1e4,
                beta: 0.875,
            };
            let (mut cwnd, mut cnt, mut mode) = (20u32, 0u32, 1u8);
            let mut w = 20.0;
            for _ in 0..20_000 {
                if cwnd > 5_000_000 {
                    break;
                }
                let acked = rng.acked(64);
                mode = bpf_ca_ack(&mut cwnd, &mut cnt, mode, acked, 16, a);
                assert_eq!(mode, 1);
                w = on_ack(w, acked, &p);
                let (w_ai, _) = c_ai_args(1, cwnd, 1, a);
                let c_real = f64::from(cwnd) + f64::from(cnt) / f64::from(w_ai);
                let err = (c_real - w).abs();
                assert!(err <= 1e-9 * w, "a {a}: C {c_real}, model {w}");
                max_err = max_err.max(err / w);
                checked += 1;
            }
        }
        eprintln!("scalable mode: {checked} ACKs, max relative error {max_err:.2e}");
        assert!(checked > 500_000);
    }

    /*
     * Legacy mode and the crossing into scalable mode. The kernel's counter divides by the
     * integer cwnd, the model by the real w, so each segment of Reno growth costs the C up
     * to one packet's worth more or less (w² − w vs w² growth: the C lags by < 1 segment);
     * the mode test on the integer vs the real window can shift the switch by one segment,
     * and a counter reset at the switch (1/a not whole) drops < 1 segment. Bound: 2 segments.
     * Windows start at 2..=16 and run 30 000 ACKs of 1..=8 packets, a = 0.01 and 0.03.
     */
    #[test]
    fn legacy_mode_and_the_switch_stay_within_two_segments_of_the_model() {
        let mut rng = Rng(42);
        let (mut max_err, mut switched) = (0f64, 0usize);
        for a in [100u32, 300] {
            for low in [4u32, 16, 100] {
                let p = ScalableParams {
                    low_window: f64::from(low),
                    a: f64::from(a) / 1e4,
                    beta: 0.875,
                };
                for start in 2..=16u32 {
                    let (mut cwnd, mut cnt, mut mode) = (start, 0u32, c_mode(start, low));
                    let mut w = f64::from(start);
                    for _ in 0..30_000 {
                        let acked = rng.acked(8);
                        let before = mode;
                        mode = bpf_ca_ack(&mut cwnd, &mut cnt, mode, acked, low, a);
                        switched += usize::from(before != mode);
                        w = on_ack(w, acked, &p);
                        let err = (f64::from(cwnd) - w).abs();
                        assert!(
                            err <= 2.0,
                            "a {a} low {low} start {start}: C {cwnd}, model {w}"
                        );
                        max_err = max_err.max(err);
                    }
                    assert!(cwnd > low, "reached scalable mode");
                }
            }
        }
        eprintln!("legacy + switch: max error {max_err:.3} segments, {switched} switches");
        // one switch per run that starts at or below Low_Window: 3 + 15 + 15 per a
        assert_eq!(switched, 66);
    }

    /*
     * The `linux` profile (Low_Window 100, a = 0.01, β = 0.875) against Linux's
     * tcp_scalable, whose increase is tcp_cong_avoid_ai(tp, min(cwnd, 100), acked) and whose
     * ssthresh is max(cwnd − cwnd/8, 2): cwnd and counter must agree bit for bit across
     * the switch at 100, including after losses that take cwnd back below it.
     */
    #[test]
    fn linux_profile_is_bit_exact_with_tcp_scalable() {
        let mut rng = Rng(7);
        let (mut c, mut c_cnt, mut mode) = (10u32, 0u32, 0u8);
        let (mut l, mut l_cnt) = (10u32, 0u32);
        let (mut crossings, mut losses) = (0, 0);
        for i in 0..400_000 {
            let acked = rng.acked(16);
            let before = mode;
            mode = bpf_ca_ack(&mut c, &mut c_cnt, mode, acked, 100, 100);
            crossings += usize::from(before != mode);
            let l_ai = l.min(100);
            kernel_ai(&mut l, &mut l_cnt, l_ai, acked);
            assert_eq!((c, c_cnt), (l, l_cnt), "ACK {i}");
            if c > 90 + (rng.next() % 60) as u32 && rng.next().is_multiple_of(200) {
                // a loss: ssthresh, cwnd = ssthresh after recovery, counter reset by the kernel
                c = c_ssthresh(c, 875);
                l = (l - (l >> 3)).max(2);
                assert_eq!(c, l);
                (c_cnt, l_cnt) = (0, 0);
                losses += 1;
            }
        }
        eprintln!("linux profile: {crossings} mode changes, {losses} losses");
        assert!(crossings > 10 && losses > 50);
    }

    /*
     * Response function (spec §17: w ≈ (a/b)/p). A deterministic loss every 1/p packets:
     * the C-driven window's peaks converge to W = a/(b·p). The C's ssthresh rounds β·W up by
     * δ ∈ [0, 1) segment, so its fixed point is W = (a/p + δ)/b: up to 1/b = 8 segments
     * above, plus one segment of whole-segment growth. Bound: 1/b + 1 = 9 segments.
     */
    #[test]
    fn periodic_losses_reach_the_response_function_peak() {
        let p = ScalableParams::default();
        for loss_p in [1e-3, 1e-4, 2e-5] {
            let peak = response_peak(loss_p, &p);
            let period = (1.0 / loss_p) as u32;
            let (mut cwnd, mut cnt, mut mode) = (peak as u32 / 2, 0u32, 1u8);
            let mut last_peak = 0;
            for _ in 0..60 {
                for _ in 0..period {
                    mode = bpf_ca_ack(&mut cwnd, &mut cnt, mode, 1, 16, 100);
                }
                last_peak = cwnd;
                cwnd = c_ssthresh(cwnd, 875);
                cnt = 0;
            }
            let err = (f64::from(last_peak) - peak).abs();
            assert!(err <= 9.0, "p {loss_p}: peak {last_peak} vs {peak}");
        }
    }
}
