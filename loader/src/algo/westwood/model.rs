//! A plain f64 model of TCP Westwood+'s bandwidth estimator and loss rule (spec §14),
//! the reference for bpf/algo/westwood_math.h.

/// Westwood+'s constants (spec §14; \[LINUX\] tcp_westwood).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WestwoodParams {
    /// Shortest sample interval, s: an interval closes once longer than max(RTT, this)
    /// (Linux `TCP_WESTWOOD_RTT_MIN`, 50 ms).
    pub win_min_s: f64,
    /// Weight of the old value in both filter stages (7/8).
    pub keep: f64,
}

impl Default for WestwoodParams {
    fn default() -> Self {
        Self {
            win_min_s: 0.050,
            keep: 7.0 / 8.0,
        }
    }
}

/// The estimator's state (spec §14 "Bandwidth estimate"), in real units. Times are in
/// seconds in these docs, but any one unit works if used throughout (rates are then
/// bytes per that unit); the tests use µs so that the interval test `Δ > max(RTT, 50 ms)`
/// is decided on exact integers, as in the C.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Estimator {
    /// First filter stage, bytes/s.
    pub bw_ns: f64,
    /// BWE, the second stage, bytes/s.
    pub bw: f64,
    /// When the current sample interval began, s.
    pub win_start: f64,
    /// Bytes acked in the current interval.
    pub bk: f64,
    /// Last RTT sample, s (0: none).
    pub rtt: f64,
    /// RTT_min, s (0: none).
    pub rtt_min: f64,
    /// Number of samples filtered so far.
    pub samples: u32,
    /// The first ACK has been seen.
    pub started: bool,
}

/// One filter step of spec §14: `bw_ns = k·bw_ns + (1−k)·sample`, `bw = k·bw + (1−k)·bw_ns`
/// (k = 7/8); an empty filter (both 0) takes the first sample in both stages (\[LINUX\]).
/// Bytes/s in, bytes/s out.
pub fn filter(bw_ns: f64, bw: f64, sample: f64, keep: f64) -> (f64, f64) {
    if bw_ns == 0.0 && bw == 0.0 {
        return (sample, sample);
    }
    let ns = keep * bw_ns + (1.0 - keep) * sample;
    (ns, keep * bw + (1.0 - keep) * ns)
}

impl Estimator {
    /// A new estimator whose first interval starts at `now` (s).
    pub fn new(now: f64) -> Self {
        Self {
            win_start: now,
            ..Self::default()
        }
    }

    /// An ACK at `now` (s) acknowledging `bytes` new bytes, with the last RTT sample
    /// (s) already recorded in `self.rtt`: the interval [win_start, now) is filtered
    /// once it is longer than max(RTT, win_min), then the bytes start the next one
    /// (spec §14; Westwood+'s once-per-RTT sampling, Grieco & Mascolo 2004). The very
    /// first ACK only marks where counting starts, its bytes are not counted (\[LINUX\]:
    /// the sequence number at connection setup is not a reliable starting point).
    pub fn ack(&mut self, now: f64, bytes: f64, p: &WestwoodParams) {
        let bytes = if self.started { bytes } else { 0.0 };
        self.started = true;
        let delta = now - self.win_start;
        if self.rtt > 0.0 && delta > self.rtt.max(p.win_min_s) {
            (self.bw_ns, self.bw) = filter(self.bw_ns, self.bw, self.bk / delta, p.keep);
            self.bk = 0.0;
            self.win_start = now;
            self.samples += 1;
        }
        self.bk += bytes;
        if self.rtt > 0.0 && (self.rtt_min == 0.0 || self.rtt < self.rtt_min) {
            self.rtt_min = self.rtt;
        }
    }
}

/// The loss rule, packets: `max(BWE·RTT_min/MSS, 2)` (spec §14 "Loss" and "Timeout").
/// `bw` bytes/s, `rtt_min` s, `mss` bytes.
pub fn ssthresh(bw: f64, rtt_min: f64, mss: f64) -> f64 {
    (bw * rtt_min / mss).max(2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::cctl_westwood_ca;



    /// westwood.bpf.c's init, on the host.
    fn c_new(now_us: u32, snd_una: u32) -> cctl_westwood_ca {
        cctl_westwood_ca {
            win_start_us: now_us,
            snd_una,
            first_ack: 1,
            reset_rtt_min: 1,
            ..Default::default()
        }
    }

    fn c_ack(ca: &mut cctl_westwood_ca, now_us: u32, snd_una: u32, mss: u32, slow: bool) {
        let a = crate::math::westwood_ack_info {
            now_us,
            snd_una,
            mss,
            slowpath: slow.into(),
        };
        // westwood.bpf.c's defaults: win_min_ms = 50, filter_shift = 3
        let p = crate::math::westwood_params {
            win_min_us: 50_000,
            shift: 3,
        };
        // SAFETY: `ca` is a live, exclusively borrowed struct of the C layout; `a` and `p`
        // are live, initialised structs the function only reads.
        unsafe { crate::math::westwood_ack(ca, &a, &p) }
    }

    fn c_count(cumul: u32, mss: u32, accounted: &mut u32) -> u32 {
        // SAFETY: `accounted` is a live, exclusively borrowed u32.
        unsafe { crate::math::westwood_acked_count(cumul, mss, accounted) }
    }

    #[test]
    fn filter_and_loss_rule_match_hand_computed_values() {
        let k = 7.0 / 8.0;
        assert_eq!(filter(0.0, 0.0, 5000.0, k), (5000.0, 5000.0));
        // (7·1000 + 9000)/8 = 2000, then (7·1000 + 2000)/8 = 1125
        assert_eq!(filter(1000.0, 1000.0, 9000.0, k), (2000.0, 1125.0));
        // 10 Mbit/s = 1.25e6 B/s, 40 ms, 1250-byte segments: a BDP of 40 packets
        assert_eq!(ssthresh(1.25e6, 0.040, 1250.0), 40.0);
        assert_eq!(ssthresh(2.5e6, 0.1, 1448.0), 2.5e5 / 1448.0);
        assert_eq!(ssthresh(1000.0, 0.01, 1448.0), 2.0);
        // SAFETY: pure functions of integers, or of a live exclusively borrowed struct.
        unsafe {
            assert_eq!(crate::math::westwood_bw_rttmin(1_250_000, 40_000, 1250), 40);
            assert_eq!(crate::math::westwood_bw_rttmin(2_500_000, 100_000, 1448), 172);
            assert_eq!(crate::math::westwood_bw_rttmin(1000, 10_000, 1448), 2);
            assert_eq!(
                crate::math::westwood_bw_rttmin(u64::MAX / 2, 4_000_000, 1),
                u32::MAX
            );
            let mut ca = cctl_westwood_ca::default();
            crate::math::westwood_filter(&mut ca, 250, 50_000, 3); // 5000 B/s fills both
            assert_eq!((ca.bw_ns_Bps, ca.bw_Bps), (5000, 5000));
            ca.bw_ns_Bps = 1000;
            ca.bw_Bps = 1000;
            crate::math::westwood_filter(&mut ca, 450, 50_000, 3); // 9000 B/s
            assert_eq!((ca.bw_ns_Bps, ca.bw_Bps), (2000, 1125));
        }
    }

    #[test]
    fn dupacks_are_credited_once() {
        let mss = 1000;
        let mut acc = 0;
        // three dupACKs: one MSS each
        for _ in 0..3 {
            assert_eq!(c_count(0, mss, &mut acc), mss);
        }
        assert_eq!(acc, 3 * mss);
        // the cumulative ACK for 5 segments: only the 2 not yet credited
        assert_eq!(c_count(5 * mss, mss, &mut acc), 2 * mss);
        assert_eq!(acc, 0);
        // a delayed ACK of 2 segments with nothing credited counts fully
        assert_eq!(c_count(2 * mss, mss, &mut acc), 2 * mss);
        // a cumulative ACK smaller than the credit: one MSS, credit reduced
        acc = 4 * mss;
        assert_eq!(c_count(3 * mss, mss, &mut acc), mss);
        assert_eq!(acc, mss);
    }

    /// A deterministic pseudo-random sequence (64-bit LCG, Knuth's constants).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }
    }

    /*
     * The C estimator against the model over ACK streams whose rate changes every
     * second (0.1 to 100 MB/s), with jittered ACK spacing, 1-4 segments per ACK and RTTs
     * of 1-300 ms. Both see the same interval boundaries (integer µs timestamps, so
     * `delta > max(RTT, 50 ms)` decides alike). The C truncates each sample
     * (bk·10⁶/Δ) and each filter step (>> 3) by < 1 B/s, so with e = model − C:
     *   stage 1: e' < 7/8·e + 1/8 + 1 → e < 9 B/s;  stage 2: e' < 7/8·e + 9/8 + 1 → e < 17 B/s,
     * one-sided (every step rounds down). Bound: 0 ≤ model − C < 17 B/s.
     */
    #[test]
    fn estimator_matches_the_model_over_varying_ack_streams() {
        // time in µs (see `Estimator`): rates in bytes/µs, compared as bytes/s
        let p = WestwoodParams {
            win_min_s: 50_000.0,
            ..WestwoodParams::default()
        };
        let mut rng = Lcg(42);
        let (mut filtered, mut max_err) = (0u32, 0f64);
        for run in 0..12 {
            let rtt_us = [1000u32, 20_000, 49_999, 50_000, 50_001, 120_000, 300_000][run % 7];
            let mss = [536u32, 1448, 8948][run % 3];
            let (mut now, mut una) = (1_000_000u32 + run as u32 * 7, 12_345u32);
            let mut c = c_new(now, una);
            let mut m = Estimator::new(f64::from(now));
            for _sec in 0..8 {
                let rate = [1e5, 1e6, 1.25e7, 1e8, 3e6][rng.next(5) as usize];
                let t_end = now + 1_000_000;
                while now < t_end {
                    let segs = 1 + rng.next(4) as u32;
                    let bytes = segs * mss;
                    let gap = (f64::from(bytes) / rate * 1e6) as u32;
                    now += (gap / 2 + rng.next(u64::from(gap) + 1) as u32).max(1);
                    una = una.wrapping_add(bytes);
                    c.rtt_us = rtt_us;
                    m.rtt = f64::from(rtt_us);
                    c_ack(&mut c, now, una, mss, false);
                    m.ack(f64::from(now), f64::from(bytes), &p);
                    let (bw, bw_ns) = (m.bw * 1e6, m.bw_ns * 1e6);
                    let err = bw - c.bw_Bps as f64;
                    assert!(
                        (-1e-9 * bw..17.0).contains(&err),
                        "run {run}: model {bw} C {} (error {err})",
                        c.bw_Bps
                    );
                    let err_ns = bw_ns - c.bw_ns_Bps as f64;
                    assert!((-1e-9 * bw_ns..9.0).contains(&err_ns), "stage 1: {err_ns}");
                    max_err = max_err.max(err);
                }
            }
            assert_eq!(c.rtt_min_us, rtt_us);
            filtered += m.samples;
        }
        eprintln!("Westwood+ estimator: {filtered} samples filtered, max error {max_err:.3} B/s");
        assert!(filtered > 500);
    }

    /// At a constant rate the estimate converges to it and the loss rule gives the BDP;
    /// an interval lasts max(RTT, 50 ms): one sample per RTT for RTT > 50 ms.
    #[test]
    fn constant_rate_converges_and_loss_rule_gives_the_bdp() {
        // time in µs (see `Estimator`)
        let p = WestwoodParams {
            win_min_s: 50_000.0,
            ..WestwoodParams::default()
        };
        for rtt_us in [10_000u32, 40_000, 120_000] {
            // 1250-byte segments every 1000 µs: 1.25 MB/s (10 Mbit/s)
            let (mss, mut now, mut una) = (1250u32, 5_000_000u32, 0u32);
            let mut c = c_new(now, una);
            let mut m = Estimator::new(f64::from(now));
            for _ in 0..10_000 {
                now += 1000;
                una += mss;
                c.rtt_us = rtt_us;
                m.rtt = f64::from(rtt_us);
                c_ack(&mut c, now, una, mss, true);
                m.ack(f64::from(now), f64::from(mss), &p);
            }
            // an interval closes at the first ACK after max(RTT, 50 ms): 1 ms later
            let interval = f64::from(rtt_us.max(50_000) + 1000) / 1e6;
            let expect_samples = (10.0 / interval) as u32;
            assert!(
                m.samples + 1 >= expect_samples && m.samples <= expect_samples + 1,
                "RTT {rtt_us}: {} samples, want about {expect_samples}",
                m.samples
            );
            // the first interval misses the first ACK's bytes; after 80+ samples the
            // cascade has forgotten that to within 1e-4
            let bw = m.bw * 1e6;
            assert!((bw - 1.25e6).abs() < 125.0, "model {bw}");
            assert!(
                (bw - c.bw_Bps as f64) < 17.0 && bw >= c.bw_Bps as f64,
                "C {}",
                c.bw_Bps
            );
            let (bw, rtt_min) = (1.25e6, m.rtt_min / 1e6);
            let bdp = 1.25e6 * f64::from(rtt_us) / 1e6 / 1250.0;
            assert_eq!(ssthresh(bw, rtt_min, 1250.0), bdp);
            // SAFETY: a pure function of integers.
            let s = unsafe { crate::math::westwood_bw_rttmin(c.bw_Bps, c.rtt_min_us, mss) };
            assert!(
                f64::from(s) <= bdp && f64::from(s) >= bdp - 1.0,
                "C {s}, BDP {bdp}"
            );
        }
    }

    /*
     * The C's loss rule is ⌊⌊BWE·RTT_min/10⁶⌋/MSS⌋ = ⌊BWE·RTT_min/(10⁶·MSS)⌋ (nested floor
     * division of non-negative integers), so it equals the model rounded down, exactly,
     * whenever BWE·RTT_min < 2⁵³ (f64 exact); and at least 2.
     */
    #[test]
    fn loss_rule_is_the_model_rounded_down() {
        let mut checked = 0;
        for bw in [
            0u64,
            1,
            999,
            125_000,
            1_250_000,
            12_345_678,
            125_000_000,
            1_250_000_000,
        ] {
            for rtt in [
                1u32, 100, 999, 10_000, 40_000, 123_457, 1_000_000, 4_000_000,
            ] {
                for mss in [1u32, 536, 1448, 8948, 65_535] {
                    // SAFETY: a pure function of integers.
                    let c = unsafe { crate::math::westwood_bw_rttmin(bw, rtt, mss) };
                    let m = ssthresh(bw as f64, f64::from(rtt) / 1e6, f64::from(mss));
                    let exact =
                        (u128::from(bw) * u128::from(rtt) / (1_000_000 * u128::from(mss))).max(2);
                    assert_eq!(u128::from(c), exact.min(u128::from(u32::MAX)));
                    if bw.saturating_mul(u64::from(rtt)) < 1 << 53 && exact < 1 << 32 {
                        assert!((m.floor() - c as f64).abs() <= 1.0, "{bw} {rtt} {mss}");
                    }
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 8 * 8 * 5);
    }

    #[test]
    fn rtt_min_restarts_after_a_timeout() {
        let mut c = c_new(0, 0);
        c.rtt_us = 30_000;
        c_ack(&mut c, 1000, 1448, 1448, false);
        c.rtt_us = 20_000;
        c_ack(&mut c, 2000, 2896, 1448, false);
        c.rtt_us = 25_000;
        c_ack(&mut c, 3000, 4344, 1448, false);
        assert_eq!(c.rtt_min_us, 20_000);
        c.reset_rtt_min = 1; // what CA_EVENT_LOSS does
        c.rtt_us = 60_000;
        c_ack(&mut c, 4000, 5792, 1448, false);
        assert_eq!(c.rtt_min_us, 60_000);
    }

    #[test]
    fn rust_layout_has_the_c_size() {
        // SAFETY: no arguments, returns a constant.
        let c = std::mem::size_of::<crate::math::cctl_westwood_ca>() as u32 as usize;
        assert_eq!(std::mem::size_of::<cctl_westwood_ca>(), c);
        assert!(c <= 104);
    }
    /// linux_exact at HZ = 250: RTT samples round up to 4-ms jiffies, the interval closes
    /// past max(RTT, 12 jiffies), and the estimate is bytes per jiffy in 32 bits.
    #[test]
    fn linux_estimate_is_in_bytes_per_jiffy() {
        // SAFETY: pure functions and a live, exclusively borrowed state.
        unsafe {
            assert_eq!(crate::math::westwood_linux_rtt_us(10_001, 250), 12_000);
            let mut ca = cctl_westwood_ca::default();
            crate::math::westwood_linux_init(&mut ca, 1000, 0);
            assert_eq!((ca.rtt_us, ca.rtt_min_us), (20_000_000, 20_000_000));
            ca.rtt_us = 40_000; // 10 jiffies: intervals of 12
            crate::math::westwood_linux_ack(&mut ca, 1005, 14_480, 1448, 0, 250);
            assert_eq!((ca.bk, ca.rtt_min_us), (0, 40_000), "the first ACK sets snd_una");
            crate::math::westwood_linux_ack(&mut ca, 1010, 28_960, 1448, 0, 250);
            assert_eq!(ca.bk, 14_480, "10 jiffies: the interval is still open");
            crate::math::westwood_linux_ack(&mut ca, 1014, 43_440, 1448, 0, 250);
            // 14,480 bytes over 14 jiffies: 1,034 bytes per jiffy, 258,500 bytes/s.
            assert_eq!((ca.bw_Bps, ca.bk), (1034 * 250, 14_480));
            // BWE · RTT_min / MSS = 1034 · 10 / 1448 = 7 segments.
            assert_eq!(crate::math::westwood_linux_limit(&ca, 1448, 250), 7);
        }
    }
}
