//! A plain f64 model of TCP Hybla's rules (spec §19.1; Caini & Firrincieli, IJSCN
//! 22(5), 2004), the reference for bpf/algo/hybla_math.h.

/// Hybla's tunable (spec §19.1 "Parameters").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HyblaParams {
    /// RTT_0, seconds: the reference round-trip time whose growth per unit of time
    /// every flow gets.
    pub rtt0: f64,
}

impl Default for HyblaParams {
    /// The paper's reference RTT_0 = 25 ms (spec §19.1 \[CHOICE\]; Linux `rtt0` = 25).
    fn default() -> Self {
        Self { rtt0: 0.025 }
    }
}

/// ρ = max(RTT / RTT_0, 1), dimensionless (spec §19.1 "Rules"); `srtt` in seconds,
/// the smoothed RTT.
pub fn rho(srtt: f64, p: &HyblaParams) -> f64 {
    (srtt / p.rtt0).max(1.0)
}

/// Slow-start increase per acknowledged segment, 2^ρ − 1 segments (spec §19.1;
/// the paper's W ← W + 2^ρ − 1).
pub fn ss_increment(rho: f64) -> f64 {
    rho.exp2() - 1.0
}

/// Congestion-avoidance increase per acknowledged segment, ρ²/cwnd segments
/// (spec §19.1; the paper's W ← W + ρ²/W). `cwnd` in segments.
pub fn ca_increment(rho: f64, cwnd: f64) -> f64 {
    rho * rho / cwnd
}

/// ssthresh after a loss, segments: Reno's max(cwnd/2, 2) (spec §19.1 "Loss").
pub fn ssthresh(cwnd: f64) -> f64 {
    (cwnd / 2.0).max(2.0)
}

/// The window after one acknowledged segment, segments: slow start below
/// `ssthresh` (not beyond it), congestion avoidance at or above (spec §19.1).
pub fn on_ack(cwnd: f64, ssthresh: f64, rho: f64) -> f64 {
    if cwnd < ssthresh {
        (cwnd + ss_increment(rho)).min(ssthresh)
    } else {
        cwnd + ca_increment(rho, cwnd)
    }
}

/// Reno's window after one acknowledged segment, segments (spec §2): +1 in slow
/// start (up to ssthresh), +1/cwnd in congestion avoidance.
pub fn reno_on_ack(cwnd: f64, ssthresh: f64) -> f64 {
    if cwnd < ssthresh {
        (cwnd + 1.0).min(ssthresh)
    } else {
        cwnd + 1.0 / cwnd
    }
}

/// Slow start over one RTT (fluid: each of the cwnd segments in flight is acked
/// once and adds 2^ρ − 1): cwnd·2^ρ segments.
pub fn ss_rtt(cwnd: f64, rho: f64) -> f64 {
    cwnd + cwnd * ss_increment(rho)
}

/// Congestion avoidance over one RTT (fluid, cwnd acks of ρ²/cwnd each):
/// cwnd + ρ² segments.
pub fn ca_rtt(cwnd: f64, rho: f64) -> f64 {
    cwnd + cwnd * ca_increment(rho, cwnd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::{hybla_params, hybla_step};

    const ONE: f64 = 1024.0; // ρ fixed point (HYBLA_RHO_SHIFT = 10)
    const Q16: f64 = 65536.0;
    const RHO_MAX: f64 = 4096.0;

    fn params(rtt0_ms: u32, linux_compat: bool) -> hybla_params {
        hybla_params {
            rtt0_ms,
            linux_compat: linux_compat.into(),
        }
    }

    fn c_rho_fp(srtt_us: u32, rtt0_ms: u32, linux: bool) -> u32 {
        let p = params(rtt0_ms, linux);
        // SAFETY: a pure function reading the params struct it is given.
        unsafe { crate::math::hybla_rho_fp(srtt_us << 3, &p) }
    }

    fn c_pow2(rho_fp: u32, linux: bool) -> f64 {
        // SAFETY: a pure function of integers.
        (unsafe { crate::math::hybla_pow2_q16(rho_fp, linux.into()) }) as f64 / Q16
    }

    /// One cong_avoid call of the C (Open state).
    #[derive(Debug, Clone, Copy, PartialEq)]
    struct C {
        cwnd: u32,
        ssthresh: u32,
        cnt: u32,
        frac: u32,
        credit: u64,
        carry: u32,
    }

    impl C {
        fn new(cwnd: u32, ssthresh: u32) -> Self {
            Self {
                cwnd,
                ssthresh,
                cnt: 0,
                frac: 0,
                credit: 0,
                carry: 0,
            }
        }

        fn step(&mut self, acked: u32, rho_fp: u32, linux: bool) {
            let mut s = hybla_step {
                credit: self.credit,
                cwnd: self.cwnd,
                ssthresh: self.ssthresh,
                cwnd_cnt: self.cnt,
                frac_q16: self.frac,
                acked,
                carry_q16: 0,
            };
            let p = params(25, linux);
            // SAFETY: `s` and `p` are live structs of the C layout; the call only
            // reads p and reads/writes s.
            unsafe { crate::math::hybla_step(&mut s, rho_fp, &p) };
            self.credit = s.credit;
            self.cwnd = s.cwnd;
            self.cnt = s.cwnd_cnt;
            self.frac = s.frac_q16;
            self.carry = s.carry_q16;
        }

        /// cwnd plus the increase carried below one segment, segments.
        fn real(&self) -> f64 {
            if self.cwnd < self.ssthresh {
                f64::from(self.cwnd) + f64::from(self.frac) / Q16
            } else {
                f64::from(self.cwnd)
                    + self.credit as f64 / (f64::from(self.cwnd) * (1u64 << 20) as f64)
            }
        }
    }

    /// The kernel's Reno on one cong_avoid call, integer (tcp_slow_start, then
    /// tcp_cong_avoid_ai(tp, cwnd, acked)): (cwnd, snd_cwnd_cnt).
    fn kernel_reno(cwnd: u32, cnt: u32, ssthresh: u32, mut acked: u32) -> (u32, u32) {
        let (mut cwnd, mut cnt) = (cwnd, cnt);
        if cwnd < ssthresh {
            let w = (cwnd + acked).min(ssthresh);
            acked -= w - cwnd;
            cwnd = w;
            if acked == 0 {
                return (cwnd, cnt);
            }
        }
        let w = cwnd;
        if cnt >= w {
            cnt = 0;
            cwnd += 1;
        }
        cnt += acked;
        if cnt >= w {
            let delta = cnt / w;
            cnt -= delta * w;
            cwnd += delta;
        }
        (cwnd, cnt)
    }

    #[test]
    fn rho_one_is_exactly_reno() {
        // spec §19.1: "With ρ = 1 Hybla is exactly Reno" (srtt <= RTT_0 gives ρ = 1)
        let p = HyblaParams::default();
        assert_eq!(rho(0.010, &p), 1.0);
        assert_eq!(rho(0.025, &p), 1.0);
        assert_eq!(ss_increment(1.0), 1.0);
        for cwnd in [1.0, 2.0, 3.5, 10.0, 99.0, 1000.0] {
            for ss in [2.0, 10.0, 64.0, 1e9] {
                assert_eq!(on_ack(cwnd, ss, 1.0), reno_on_ack(cwnd, ss));
            }
        }
    }

    #[test]
    fn hand_computed_increments_follow_the_spec() {
        let p = HyblaParams::default();
        // satellite path: srtt 600 ms, RTT_0 25 ms -> ρ = 24
        assert!((rho(0.600, &p) - 24.0).abs() < 1e-12);
        // ρ = 2: slow start +3 per ack (2^2 − 1), CA +4/w per ack
        assert_eq!(ss_increment(2.0), 3.0);
        assert_eq!(ca_increment(2.0, 40.0), 0.1);
        assert!((ss_increment(1.5) - (2f64.sqrt() * 2.0 - 1.0)).abs() < 1e-15);
        assert_eq!(ssthresh(40.0), 20.0);
        assert_eq!(ssthresh(3.0), 2.0);
        // slow start never passes ssthresh
        assert_eq!(on_ack(30.0, 32.0, 3.0), 32.0);
    }

    /// The paper's point (spec §19.1 "Idea"): a flow with RTT = ρ·RTT_0 grows per unit
    /// of time like the reference flow. Slow start: the window after time t is
    /// w0·2^(t/RTT_0) for every ρ; CA: the rate w/RTT grows by 1/RTT_0² per second.
    #[test]
    fn growth_per_unit_time_is_that_of_the_reference_flow() {
        let rtt0 = HyblaParams::default().rtt0;
        let t = 1.2; // seconds: a multiple of every ρ·RTT_0 below
        for r in [1.0f64, 2.0, 4.0, 8.0] {
            let rtts = (t / (r * rtt0)).round() as i32;
            let mut w = 2.0;
            for _ in 0..rtts {
                w = ss_rtt(w, r);
            }
            let reference = 2.0 * (t / rtt0).exp2();
            assert!(
                (w / reference - 1.0).abs() < 1e-9,
                "ρ {r}: {w} vs {reference}"
            );

            let mut w = 100.0;
            for _ in 0..rtts {
                w = ca_rtt(w, r);
            }
            let rate_gain = (w - 100.0) / (r * rtt0); // packets/s gained over t
            assert!(
                (rate_gain - t / (rtt0 * rtt0)).abs() < 1e-6,
                "ρ {r}: {rate_gain} vs {}",
                t / (rtt0 * rtt0)
            );
        }
    }

    /*
     * ρ: the C rounds srtt·1024/RTT_0 down, so 0 <= ρ − C/1024 < 2^-10; Linux (linux_compat)
     * rounds 8ρ down: C/1024 == ⌊8ρ⌋/8. Both are >= 1 and saturate at 4096.
     */
    #[test]
    fn c_rho_is_the_model_rounded_down() {
        let mut n = 0;
        for rtt0_ms in [1u32, 7, 25, 100, 600, 1000] {
            let p = HyblaParams {
                rtt0: f64::from(rtt0_ms) / 1000.0,
            };
            for srtt_us in (0..400u32).map(|k| k * 997 + 1).chain([
                25_000,
                25_001,
                50_000,
                600_000,
                4_000_000,
                500_000_000,
            ]) {
                let m = rho(f64::from(srtt_us) / 1e6, &p).min(RHO_MAX);
                let c = f64::from(c_rho_fp(srtt_us, rtt0_ms, false)) / ONE;
                let err = m - c;
                assert!(
                    (-1e-9..1.0 / ONE).contains(&err),
                    "srtt {srtt_us} rtt0 {rtt0_ms}: model {m} C {c}"
                );
                let l = f64::from(c_rho_fp(srtt_us, rtt0_ms, true)) / ONE;
                // ⌊8ρ⌋/8 from exact integers: 8 srtt / (1000 RTT_0)
                let exact = (u64::from(srtt_us) * 8 / (u64::from(rtt0_ms) * 1000)) as f64 / 8.0;
                assert_eq!(
                    l,
                    exact.clamp(1.0, RHO_MAX),
                    "srtt {srtt_us} rtt0 {rtt0_ms}"
                );
                n += 1;
            }
        }
        assert!(n > 2000);
    }

    /*
     * 2^ρ: |C − 2^ρ| < 2^ρ·2^-26 + 2^-16 segments for every ρ with 10 fraction bits up
     * to the exponent cap (integer part 16), exact for whole ρ; above the cap the
     * integer part stays 16. Linux: 2^⌊ρ⌋·⌊128·2^(k/8)⌋/128, k = ⌊8ρ⌋ mod 8.
     */
    #[test]
    fn c_pow2_is_within_its_bound() {
        let mut worst: f64 = 0.0;
        for rho_fp in 1024u32..17 * 1024 {
            let r = f64::from(rho_fp) / ONE;
            let c = c_pow2(rho_fp, false);
            let m = r.exp2();
            let bound = m * 2f64.powi(-26) + 2f64.powi(-16);
            assert!((c - m).abs() < bound, "ρ {r}: C {c} model {m}");
            worst = worst.max((c - m).abs() / m);
            if rho_fp % 1024 == 0 {
                assert_eq!(c, m, "whole ρ {r}");
            }
            let k = (rho_fp >> 7) & 7;
            let table = (128.0 * (f64::from(k) / 8.0).exp2()).floor();
            let ip = (rho_fp >> 10).min(16);
            assert_eq!(c_pow2(rho_fp, true), table * f64::from(1u32 << ip) / 128.0);
        }
        // capped exponent: ρ = 20.5 counts as 16.5
        assert_eq!(
            c_pow2(20 * 1024 + 512, false),
            c_pow2(16 * 1024 + 512, false)
        );
        eprintln!("hybla 2^ρ worst relative error {worst:e}");
        // SAFETY: pure functions of integers.
        unsafe {
            assert_eq!(crate::math::hybla_ss_inc_q16(1024, 0), 65536);
            assert_eq!(crate::math::hybla_ss_inc_q16(2048, 0), 3 * 65536);
            assert_eq!(crate::math::hybla_ss_inc_q16(1024, 1), 65536);
        }
    }

    /// ρ = 1 (rho_fp = 1024): the C is bit-exact the kernel's Reno (tcp_slow_start
    /// + tcp_cong_avoid_ai), snd_cwnd_cnt being the credit >> 20.
    #[test]
    fn c_with_rho_one_is_bit_exact_reno() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = |m: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(m)) as u32
        };
        for start in [1u32, 2, 10, 50] {
            let mut c = C::new(start, 64);
            let (mut w, mut cnt) = (start, 0u32);
            for i in 0..20_000 {
                if i % 3000 == 2999 {
                    // a loss: ssthresh = w/2, window restarts from ssthresh (both reset their counters)
                    let ss = (w / 2).max(2);
                    c = C::new(ss, ss);
                    (w, cnt) = (ss, 0);
                }
                let acked = 1 + rnd(if i % 7 == 0 { 40 } else { 3 });
                c.step(acked, 1024, false);
                (w, cnt) = kernel_reno(w, cnt, c.ssthresh, acked);
                assert_eq!(c.cwnd, w, "call {i}");
                assert_eq!(c.credit, u64::from(cnt) << 20, "call {i}");
            }
            assert!(w > 100, "{w}");
        }
    }

    /*
     * Congestion avoidance, one call from a fresh credit that does not reach a whole
     * segment: the window stays, the credit is exactly acked·rho_fp², and the traced
     * fraction is the model's acked·ρ²/w rounded down to 1/65536 (ρ = rho_fp/1024).
     */
    #[test]
    fn c_ca_increment_is_the_model_below_one_segment() {
        for rho_fp in [1024u32, 1100, 1536, 2048, 3000, 10_000, 24 * 1024] {
            let r = f64::from(rho_fp) / ONE;
            for w in [2u32, 10, 100, 1000, 30_000, 1_000_000] {
                for acked in [1u32, 2, 3, 17] {
                    let m = f64::from(acked) * ca_increment(r, f64::from(w));
                    if m >= 1.0 {
                        continue;
                    }
                    let mut c = C::new(w, 1);
                    c.step(acked, rho_fp, false);
                    assert_eq!(c.cwnd, w);
                    assert_eq!(
                        c.credit,
                        u64::from(acked) * u64::from(rho_fp) * u64::from(rho_fp)
                    );
                    let err = m - f64::from(c.carry) / Q16;
                    assert!(
                        (-1e-12..1.0 / Q16).contains(&err),
                        "ρ {r} w {w} acked {acked}: model {m} C {}",
                        c.carry
                    );
                }
            }
        }
    }

    /*
     * Long runs, one packet per ACK. Slow start: the C carries its fraction exactly, so
     * after k ACKs |C − model| <= k·(2^ρ·2^-26 + 2^-16) (the 2^ρ bound per ACK).
     * CA: the C divides by the whole window where the model divides by the real one,
     * a relative difference < 1/w per ACK, so over a growth G from w0 the two differ by
     * at most G/w0 + 1 segments (the +1: the C's window is whole, its credit not yet).
     */
    #[test]
    fn c_runs_track_the_model() {
        for rho_fp in [1024u32, 1300, 2048, 2560, 4096, 6000] {
            let r = f64::from(rho_fp) / ONE;
            // slow start from 2 towards a far ssthresh
            let mut c = C::new(2, 1 << 30);
            let mut m = 2.0;
            let k = 200;
            for _ in 0..k {
                c.step(1, rho_fp, false);
                m = on_ack(m, f64::from(1u32 << 30), r);
                if m > 1e6 {
                    break;
                }
            }
            if m <= 1e6 {
                let bound = f64::from(k) * ((r.exp2()) * 2f64.powi(-26) + 2f64.powi(-16));
                assert!(
                    (c.real() - m).abs() <= bound + 1e-9,
                    "ss ρ {r}: C {} model {m}",
                    c.real()
                );
            }
            // congestion avoidance from w0 = 100
            let mut c = C::new(100, 2);
            let mut m = 100.0;
            for _ in 0..20_000 {
                c.step(1, rho_fp, false);
                m = on_ack(m, 2.0, r);
            }
            let bound = (m - 100.0) / 100.0 + 1.0;
            assert!(
                (c.real() - m).abs() <= bound,
                "ca ρ {r}: C {} model {m} bound {bound}",
                c.real()
            );
        }
    }

    /// Slow start stops at ssthresh and the ACKs left over grow the window in CA (as
    /// tcp_slow_start); Linux's arithmetic just cuts at ssthresh.
    #[test]
    fn c_slow_start_hands_left_over_acks_to_ca() {
        // ρ = 2: +3 per ACK. cwnd 10, ssthresh 16: 2 ACKs reach 16 (the 2nd is cut);
        // 5 acked -> 3 left for CA at w = 16 with ρ² = 4: credit 12/16 of a segment.
        let mut c = C::new(10, 16);
        c.step(5, 2048, false);
        assert_eq!(c.cwnd, 16);
        assert_eq!(c.credit, 3 * 2048 * 2048);
        assert_eq!(c.carry, 65536 * 12 / 16);
        let mut l = C::new(10, 16);
        l.step(5, 2048, true);
        assert_eq!((l.cwnd, l.frac), (16, 0));
    }

    /// linux_compat: increments in 1/128 segment rounded down, and the snd_cwnd_cnt
    /// fallback of one segment per w calls once ⌊128ρ²/w⌋ = 0 (the header's numbers).
    #[test]
    fn c_linux_compat_reproduces_the_module_arithmetic() {
        // ρ = 1, w = 100: ⌊128/100⌋ = 1/128 per call -> 128 calls per segment (Reno: 100)
        let mut c = C::new(100, 2);
        let mut calls = 0;
        while c.cwnd == 100 {
            c.step(1, 1024, true);
            calls += 1;
        }
        assert_eq!(calls, 128);
        assert_eq!(c.cnt, 0); // the carry reset snd_cwnd_cnt
                              // ρ = 1, w = 200: the increment rounds to 0; one segment after 200 calls
        let mut c = C::new(200, 2);
        let mut calls = 0;
        while c.cwnd == 200 {
            c.step(1, 1024, true);
            calls += 1;
        }
        assert_eq!((calls, c.cnt), (200, 0));
        // slow start, ρ = 1.5 (8ρ = 12 -> table[4] = 181): +2·181/128 − 1 = 234/128 per call
        let mut c = C::new(10, 100);
        c.step(1, 12 << 7, true);
        assert_eq!((c.cwnd, c.frac), (11, (234 - 128) * 512));
    }
}
