//! A plain f64 model of TCP Africa's rules (spec §11; King et al. 2005; [P3] §II), the
//! reference for bpf/algo/africa_math.h and the mode logic of bpf/algo/africa.bpf.c.

use crate::algo::highspeed::model::{self as hstcp, HstcpParams};

/// TCP Africa's parameters in real units (spec §11 "Parameters").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AfricaParams {
    /// α_africa, packets: fast mode while Δ̂ < α (\[GAP\]; spec §11 \[CHOICE\]: 1–3, here 2).
    pub alpha: f64,
    /// HighSpeed TCP's response function for the fast mode's a(w) (RFC 3649's values).
    pub hstcp: HstcpParams,
}

impl Default for AfricaParams {
    /// α = 2 packets, RFC 3649's HSTCP (W_L 38), as africa.bpf.c's defaults.
    fn default() -> Self {
        Self {
            alpha: 2.0,
            hstcp: HstcpParams::rfc3649(),
        }
    }
}

/// Δ̂ = w·(RTT − baseRTT)/RTT, packets: the flow's packets queued at the bottleneck,
/// estimated Vegas-style (spec §11). `w` in segments, the RTTs in any one unit (s, or µs
/// as the tests use so that exact ties stay exact in f64); 0 when RTT ≤ baseRTT.
pub fn delta_hat(w: f64, rtt: f64, base_rtt: f64) -> f64 {
    if rtt <= base_rtt || rtt <= 0.0 {
        return 0.0;
    }
    w * (rtt - base_rtt) / rtt
}

/// Fast mode while Δ̂ < α, slow mode once Δ̂ ≥ α (spec §11).
pub fn is_fast(delta_hat: f64, alpha: f64) -> bool {
    delta_hat < alpha
}

/// The per-round state of the mode rule: the mode, the last Δ̂ and the current round's
/// minimum RTT (spec §11 "Once per RTT", RTT estimator \[CHOICE\]: min per RTT).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Round {
    /// Whether the flow is in fast (HSTCP) mode.
    pub fast: bool,
    /// Δ̂ at the last round end, packets.
    pub delta_hat: f64,
    /// Minimum RTT sample of the current round (unit of the samples; `None`: no sample yet).
    pub min_rtt: Option<f64>,
    /// Fast ↔ slow changes so far.
    pub switches: u32,
}

impl Default for Round {
    /// A new flow: fast mode (Δ̂ = 0 before any sample).
    fn default() -> Self {
        Self {
            fast: true,
            delta_hat: 0.0,
            min_rtt: None,
            switches: 0,
        }
    }
}

impl Round {
    /// One RTT sample (any one unit, as [`delta_hat`]).
    pub fn sample(&mut self, rtt: f64) {
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
    }

    /// End of a round at window `w` (segments), `base_rtt` the flow's minimum RTT (`None`
    /// before any sample): Δ̂ from the round's minimum RTT and the mode from Δ̂. A round
    /// without samples keeps both. The next round starts empty.
    pub fn end(&mut self, w: f64, base_rtt: Option<f64>, alpha: f64) {
        if let (Some(rtt), Some(base)) = (self.min_rtt, base_rtt) {
            self.delta_hat = delta_hat(w, rtt, base);
            let fast = is_fast(self.delta_hat, alpha);
            if fast != self.fast {
                self.switches += 1;
            }
            self.fast = fast;
        }
        self.min_rtt = None;
    }
}

/// The increase per RTT, segments: HSTCP's a(w) in fast mode, 1 (Reno) in slow mode
/// (spec §11 "ACK"); per acked packet it is this divided by w.
pub fn increase_per_rtt(w: f64, fast: bool, p: &AfricaParams) -> f64 {
    if fast {
        hstcp::a(w, &p.hstcp)
    } else {
        1.0
    }
}

/// ssthresh after a loss, segments: `max(w/2, 2)` (\[P3\] §V-A: the hybrids halve).
pub fn ssthresh(w: f64) -> f64 {
    (w / 2.0).max(2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::cctl_africa_ca;

    // The C under test is bpf/algo/africa_math.h (and bpf/algo/highspeed_math.h for a(w)), unchanged,
    // compiled for the host by build.rs (crate::math).


    const FAST: u8 = 1;
    const Q10: f64 = 1024.0;

    fn c_delta(cwnd: u32, rtt_us: u32, base_us: u32) -> u32 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::africa_delta_q10(cwnd, rtt_us, base_us) }
    }

    fn c_fast(delta_q10: u32, alpha_cpkt: u32) -> bool {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::africa_mode_for(delta_q10, alpha_cpkt) == FAST }
    }

    fn c_sample(ca: &mut cctl_africa_ca, rtt_us: u32) {
        // SAFETY: `ca` is a live, exclusively borrowed struct of the C layout (the
        // skeleton type, whose size a test checks against the C's).
        unsafe { crate::math::africa_rtt_sample(ca, rtt_us) }
    }

    fn c_end(ca: &mut cctl_africa_ca, cwnd: u32, base_us: u32, alpha_cpkt: u32) {
        // SAFETY: as in `c_sample`.
        unsafe { crate::math::africa_round_end(ca, cwnd, base_us, alpha_cpkt) }
    }

    fn c_round_over(ack: u32, beg: u32) -> bool {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::africa_round_over(ack, beg) != 0 }
    }

    /// HSTCP table a(w) << 16 for cwnd, as africa.bpf.c's fast mode in table mode.
    fn c_table_a(cwnd: u32) -> u32 {
        let (mut a, mut b) = (0, 0);
        // SAFETY: pure functions; `a`, `b` are live, exclusively borrowed u32s.
        unsafe {
            let idx = crate::math::hstcp_table_index(cwnd);
            crate::math::hstcp_table_ab(idx, &mut a, &mut b);
        }
        a
    }

    fn c_ai_step(cwnd: &mut u32, cnt: &mut u32, n: u32, a_q16: u32) {
        // SAFETY: `cwnd` and `cnt` are live, exclusively borrowed u32s for the call.
        unsafe { crate::math::hstcp_ai_step(cwnd, cnt, n, a_q16, u32::MAX) }
    }

    /// A new flow's state as africa_init leaves it (fast mode).
    fn c_new() -> cctl_africa_ca {
        cctl_africa_ca {
            mode: FAST,
            ..Default::default()
        }
    }

    #[test]
    fn skeleton_type_has_the_c_size_and_fits_icsk_ca_priv() {
        // SAFETY: no arguments, returns a constant.
        let c = std::mem::size_of::<crate::math::cctl_africa_ca>() as u32;
        assert_eq!(std::mem::size_of::<cctl_africa_ca>() as u32, c);
        assert!(c <= 104);
    }

    #[test]
    fn hand_computed_queue_estimates_and_modes() {
        // w = 100, RTT 110 ms over a 100 ms base: 100·10/110 = 9.09 packets queued → slow
        assert!((delta_hat(100.0, 110e3, 100e3) - 9.0909).abs() < 1e-4);
        assert!(!is_fast(9.09, 2.0));
        assert_eq!(c_delta(100, 110_000, 100_000), 9309); // ⌊9.0909·1024⌋
        assert!(!c_fast(9309, 200));
        // w = 20, RTT 105 ms: 0.952 packets → fast
        assert!(is_fast(delta_hat(20.0, 105e3, 100e3), 2.0));
        assert!(c_fast(c_delta(20, 105_000, 100_000), 200));
        // exactly α (22·10/110 = 2): slow, in both
        assert_eq!(delta_hat(22.0, 110e3, 100e3), 2.0);
        assert!(!is_fast(2.0, 2.0));
        assert_eq!(c_delta(22, 110_000, 100_000), 2048);
        assert!(!c_fast(2048, 200) && c_fast(2047, 200));
        // no queue (RTT at or below the base): Δ̂ = 0
        assert_eq!(
            (delta_hat(50.0, 1e5, 1e5), c_delta(50, 100_000, 100_000)),
            (0.0, 0)
        );
        assert_eq!(c_delta(50, 90_000, 100_000), 0);
        // halving on loss
        assert_eq!((ssthresh(100.0), ssthresh(3.0)), (50.0, 2.0));
        // increase: HSTCP a(w) in fast mode, 1 in slow mode
        let p = AfricaParams::default();
        assert!((increase_per_rtt(1000.0, true, &p) - 8.03).abs() < 0.01);
        assert_eq!(increase_per_rtt(1000.0, false, &p), 1.0);
    }

    /*
     * Δ̂ over a grid: the C computes ⌊1024·w·(RTT − base)/RTT⌋ in integers, so it is the
     * model rounded down to 1/1024 packet: model − C ∈ [0, 1/1024) (checked against the
     * exact integer quotient too). The mode then agrees with the model's except when α
     * lies in (C, model], less than 1/1024 below Δ̂, where the C, seeing less queue, says
     * fast; those ties are counted.
     */
    #[test]
    fn delta_hat_and_mode_match_the_model_over_a_grid() {
        let cwnds = [
            1u32, 2, 3, 10, 22, 38, 100, 1000, 12_345, 100_000, 4_000_000,
        ];
        let bases = [100u32, 1000, 10_000, 50_000, 100_000, 400_000];
        let alphas = [1u32, 50, 100, 150, 200, 300, 1000, 100_000];
        let (mut checked, mut ties, mut fast, mut slow) = (0usize, 0, 0, 0);
        for &w in &cwnds {
            for &base in &bases {
                for k in 0..=400u32 {
                    let rtt = base + base * k / 100 + k; // base .. 5·base
                    let exact = (u64::from(w) * u64::from(rtt - base) * 1024) / u64::from(rtt);
                    let got = c_delta(w, rtt, base);
                    assert_eq!(u64::from(got), exact.min(u64::from(u32::MAX)));
                    let m = delta_hat(f64::from(w), f64::from(rtt), f64::from(base));
                    let err = m - f64::from(got) / Q10;
                    assert!(
                        (-1e-9 * m.max(1.0)..1.0 / Q10).contains(&err),
                        "{w} {rtt} {base}"
                    );
                    for &a in &alphas {
                        let alpha = f64::from(a) / 100.0;
                        let (mf, cf) = (is_fast(m, alpha), c_fast(got, a));
                        if mf != cf {
                            assert!(cf && m >= alpha && m - alpha < 1.0 / Q10, "{w} {rtt} {a}");
                            ties += 1;
                        }
                        if cf {
                            fast += 1;
                        } else {
                            slow += 1;
                        }
                        checked += 1;
                    }
                }
            }
        }
        eprintln!("Δ̂/mode: {checked} points, {fast} fast, {slow} slow, {ties} ties within 1/1024");
        assert!(fast > 10_000 && slow > 10_000 && ties * 1000 < checked);
    }

    /// Tiny deterministic generator (xorshift64).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /*
     * The mode-switching rules, C against the model, over 200 000 random rounds: rounds
     * with 0..=5 RTT samples (none → mode and Δ̂ kept), rounds before any baseRTT (kept),
     * random windows and a baseRTT that sometimes drops. Mode and switch count must agree
     * exactly and Δ̂ within 1/1024 packet; a tie (α less than 1/1024 below the model's Δ̂,
     * see above) would be the only excuse, and the RTTs here are whole ms so that none
     * occurs (asserted).
     */
    #[test]
    fn mode_switching_rules_match_the_model_round_by_round() {
        let mut rng = Rng(0xaf21_ca00_1234_5678);
        let alpha_cpkt = 200;
        let alpha = 2.0;
        let (mut c, mut m) = (c_new(), Round::default());
        let mut base_us: u32 = 0;
        let (mut empty, mut kept_no_base, mut fast_rounds, mut slow_rounds) = (0, 0, 0, 0);
        for i in 0..200_000 {
            let span = if rng.below(2) == 0 { 60 } else { 5000 };
            let w = 1 + rng.below(span) as u32;
            let samples = rng.below(6);
            if i % 50_000 == 0 {
                base_us = 0; // "no baseRTT yet" rounds at the start and now and then
            }
            for _ in 0..samples {
                let span = if rng.below(3) == 0 { 3 } else { 40 };
                let rtt_ms = 20 + rng.below(span) as u32;
                let rtt_us = rtt_ms * 1000;
                c_sample(&mut c, rtt_us);
                m.sample(f64::from(rtt_us));
                if i % 50_000 >= 10 && (base_us == 0 || rtt_us < base_us) {
                    base_us = rtt_us;
                }
            }
            let before = (m.fast, m.delta_hat);
            let base = (base_us > 0).then_some(f64::from(base_us));
            c_end(&mut c, w, base_us, alpha_cpkt);
            m.end(f64::from(w), base, alpha);
            if samples == 0 {
                empty += 1;
                assert_eq!((m.fast, m.delta_hat), before, "no samples: kept");
            } else if base_us == 0 {
                kept_no_base += 1;
                assert_eq!((m.fast, m.delta_hat), before, "no baseRTT: kept");
            }
            assert_eq!(c.mode == FAST, m.fast, "round {i}: mode");
            assert_eq!(c.switches, m.switches, "round {i}: switches");
            let err = m.delta_hat - f64::from(c.delta_q10) / Q10;
            assert!((-1e-9..1.0 / Q10).contains(&err), "round {i}: Δ̂ {err}");
            assert_eq!(
                (c.round_cnt, c.round_min_us),
                (0, 0),
                "next round starts empty"
            );
            if m.fast {
                fast_rounds += 1;
            } else {
                slow_rounds += 1;
            }
        }
        eprintln!(
            "rounds: {fast_rounds} fast, {slow_rounds} slow, {} switches, {empty} empty, \
             {kept_no_base} before a baseRTT",
            m.switches
        );
        assert!(m.switches > 10_000 && empty > 10_000 && kept_no_base > 10);
    }

    #[test]
    fn a_round_ends_at_the_first_ack_beyond_its_start_across_sequence_wrap() {
        for beg in [0u32, 1000, u32::MAX - 10, 1 << 31] {
            assert!(!c_round_over(beg, beg));
            assert!(!c_round_over(beg.wrapping_sub(500), beg));
            assert!(c_round_over(beg.wrapping_add(1), beg));
            assert!(c_round_over(beg.wrapping_add(1 << 20), beg));
        }
    }

    /*
     * A flow through one drop-tail bottleneck, driven round by round by the C code the way
     * africa.bpf.c drives it (table-mode a(w) in fast mode, 1 in slow, per acked packet;
     * a round = one window of ACKs; the round's RTT = base + queue/capacity, queue =
     * max(0, w − BDP)). For this fluid queue Δ̂ = w·q/(C·RTT) equals the queue itself, so
     * the flow must be fast exactly while its queue is below α and slow above it (ties
     * within 1/1024 excepted), grow by about a(w) segments per round when fast and by 1
     * when slow, and switch back to fast after the loss that halves it.
     */
    #[test]
    fn on_a_fluid_bottleneck_the_flow_is_fast_until_alpha_packets_queue() {
        let (base_us, bdp) = (50_000u32, 2000u32); // 50 ms, 40 packets/ms
        let (mut cwnd, mut cnt) = (400u32, 0u32);
        let mut ca = c_new();
        let (mut fast_rounds, mut slow_rounds, mut back_to_fast) = (0, 0, 0);
        let mut was_slow = false;
        for round in 0..400 {
            let queue = f64::from(cwnd.saturating_sub(bdp));
            let rtt_us = base_us + (queue * 1000.0 / 40.0) as u32;
            for _ in 0..3 {
                c_sample(&mut ca, rtt_us);
            }
            c_end(&mut ca, cwnd, base_us, 200);
            let fast = ca.mode == FAST;
            let delta = f64::from(ca.delta_q10) / Q10;
            assert!(
                (delta - queue).abs() < 0.03,
                "round {round}: Δ̂ {delta}, queue {queue}"
            );
            if (queue - 2.0).abs() > 0.03 {
                assert_eq!(fast, queue < 2.0, "round {round}: queue {queue}");
            }
            if fast && was_slow {
                back_to_fast += 1;
            }
            was_slow = !fast;
            let a = if fast { c_table_a(cwnd) } else { 1 << 16 };
            let w0 = cwnd;
            for _ in 0..w0 {
                c_ai_step(&mut cwnd, &mut cnt, 1, a);
            }
            let grew = f64::from(cwnd - w0);
            let per_rtt = f64::from(a) / 65536.0;
            assert!(
                (grew - per_rtt).abs() <= 1.0 + 0.02 * per_rtt,
                "round {round}: +{grew}"
            );
            if fast {
                fast_rounds += 1;
            } else {
                slow_rounds += 1;
            }
            if cwnd > bdp + 60 {
                cwnd /= 2; // a loss: halve (africa.bpf.c uses tcp_reno_ssthresh)
                cnt = 0;
            }
        }
        eprintln!("fluid bottleneck: {fast_rounds} fast rounds, {slow_rounds} slow, {back_to_fast} returns to fast");
        assert!(fast_rounds > 50 && slow_rounds > 20 && back_to_fast >= 2);
    }
}
