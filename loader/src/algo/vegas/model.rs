//! A plain f64 model of TCP Vegas's once-per-RTT rule (spec §9), the reference for
//! bpf/algo/vegas_math.h.

/// Vegas's thresholds, packets (spec §9 "Parameters").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VegasParams {
    /// α: below this many queued packets, grow by one segment per RTT.
    pub alpha: f64,
    /// β: above this many queued packets, shrink by one segment per RTT.
    pub beta: f64,
    /// γ: in slow start, leave once more than this many packets are queued.
    pub gamma: f64,
    /// Compare ⌊diff⌋ instead of diff, as Linux's integer arithmetic does (\[LINUX\]).
    pub integer_diff: bool,
}

impl Default for VegasParams {
    /// The original Vegas (Brakmo & Peterson 1995, spec §9 \[GK\]): α = 1, β = 3, γ = 1.
    fn default() -> Self {
        Self {
            alpha: 1.0,
            beta: 3.0,
            gamma: 1.0,
            integer_diff: false,
        }
    }
}

impl VegasParams {
    /// Linux `tcp_vegas` (spec §9 "Linux default"): α = 2, β = 4, γ = 1, integer diff.
    pub fn linux() -> Self {
        Self {
            alpha: 2.0,
            beta: 4.0,
            gamma: 1.0,
            integer_diff: true,
        }
    }
}

/// diff = w·(rtt − baseRTT)/baseRTT, packets: the packets this flow keeps queued
/// (spec §9; Linux's denominator). `cwnd` in segments, RTTs in any one unit.
pub fn diff(cwnd: f64, rtt: f64, base_rtt: f64) -> f64 {
    if base_rtt <= 0.0 || rtt <= base_rtt {
        return 0.0;
    }
    cwnd * (rtt - base_rtt) / base_rtt
}

/// target_cwnd = w·baseRTT/rtt, segments (spec §9): the window that would empty the queue.
pub fn target_cwnd(cwnd: f64, rtt: f64, base_rtt: f64) -> f64 {
    cwnd * base_rtt / rtt
}

/// What one Vegas RTT did (spec §9 "Rules").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Slow start, diff ≤ γ: keep slow-starting.
    SlowStart,
    /// Slow start, diff > γ: w = min(w, target + 1), slow start over.
    LeftSlowStart,
    /// CA, diff > β: w − 1.
    Decrease,
    /// CA, diff < α: w + 1.
    Increase,
    /// CA, α ≤ diff ≤ β.
    Hold,
}

/// One Vegas RTT (with ≥ 3 RTT samples, `rtt` their minimum): the new window,
/// segments (≥ 2), and what was done (spec §9 "Rules"; \[P1\] footnote 6's sign law).
pub fn update(
    cwnd: f64,
    rtt: f64,
    base_rtt: f64,
    in_slow_start: bool,
    p: &VegasParams,
) -> (f64, Action) {
    let d = diff(cwnd, rtt, base_rtt);
    let d = if p.integer_diff { d.floor() } else { d };
    let (w, a) = if in_slow_start {
        if d > p.gamma {
            (
                cwnd.min(target_cwnd(cwnd, rtt, base_rtt) + 1.0),
                Action::LeftSlowStart,
            )
        } else {
            (cwnd, Action::SlowStart)
        }
    } else if d > p.beta {
        (cwnd - 1.0, Action::Decrease)
    } else if d < p.alpha {
        (cwnd + 1.0, Action::Increase)
    } else {
        (cwnd, Action::Hold)
    };
    (w.max(2.0), a)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The C that vegas.bpf.c runs (bpf/algo/vegas_math.h, compiled for the host by build.rs).


    const LEFT_SS: u32 = 1;
    const DECREASE: u32 = 2;
    const INCREASE: u32 = 4;

    fn c_diff(cwnd: u32, rtt: u32, base: u32) -> f64 {
        // SAFETY: a pure function of integers.
        f64::from(unsafe { crate::math::vegas_diff_fp(cwnd, rtt, base) }) / 1024.0
    }

    fn c_target(cwnd: u32, rtt: u32, base: u32) -> u32 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::vegas_target_cwnd(cwnd, rtt, base) }
    }

    fn c_update(cwnd: u32, rtt: u32, base: u32, ss: bool, p: &VegasParams) -> (u32, Action) {
        let r = crate::math::vegas_rtt {
            rtt_us: rtt,
            base_us: base,
        };
        let cp = crate::math::vegas_params {
            alpha: p.alpha as u32,
            beta: p.beta as u32,
            gamma: p.gamma as u32,
            integer_diff: p.integer_diff.into(),
        };
        let mut what = 0u32;
        // SAFETY: `r` and `cp` are live, initialised structs the call only reads; `what`
        // is a live u32 the call writes once.
        let w = unsafe { crate::math::vegas_update(cwnd, &r, ss.into(), &cp, &mut what) };
        let a = match (ss, what) {
            (true, 0) => Action::SlowStart,
            (true, LEFT_SS) => Action::LeftSlowStart,
            (false, DECREASE) => Action::Decrease,
            (false, INCREASE) => Action::Increase,
            (false, 0) => Action::Hold,
            other => panic!("impossible action bits {other:?}"),
        };
        (w, a)
    }

    #[test]
    fn hand_computed_rtts_follow_the_spec() {
        // w = 20, baseRTT 10 ms, rtt 12 ms: diff = 20·2/10 = 4, target = 16.67
        assert_eq!(diff(20.0, 12_000.0, 10_000.0), 4.0);
        assert!((target_cwnd(20.0, 12_000.0, 10_000.0) - 50.0 / 3.0).abs() < 1e-12);
        let orig = VegasParams::default();
        let linux = VegasParams::linux();
        // original: 4 > β = 3, one segment less; Linux: ⌊4⌋ = 4 is not > 4, hold
        assert_eq!(
            update(20.0, 12_000.0, 10_000.0, false, &orig),
            (19.0, Action::Decrease)
        );
        assert_eq!(
            update(20.0, 12_000.0, 10_000.0, false, &linux),
            (20.0, Action::Hold)
        );
        assert_eq!(
            c_update(20, 12_000, 10_000, false, &orig),
            (19, Action::Decrease)
        );
        assert_eq!(
            c_update(20, 12_000, 10_000, false, &linux),
            (20, Action::Hold)
        );
        // w = 20, rtt 10.5 ms: diff = 1, not < α = 1 (hold, original); < α = 2 (Linux: grow)
        assert_eq!(
            update(20.0, 10_500.0, 10_000.0, false, &orig).1,
            Action::Hold
        );
        assert_eq!(
            update(20.0, 10_500.0, 10_000.0, false, &linux),
            (21.0, Action::Increase)
        );
        // Linux: diff = 4.6 truncates to 4 (hold), the real rule shrinks above β = 4
        let p4 = VegasParams {
            alpha: 2.0,
            beta: 4.0,
            gamma: 1.0,
            integer_diff: false,
        };
        assert_eq!(
            update(20.0, 12_300.0, 10_000.0, false, &linux).1,
            Action::Hold
        );
        assert_eq!(
            update(20.0, 12_300.0, 10_000.0, false, &p4).1,
            Action::Decrease
        );
        assert_eq!(c_update(20, 12_300, 10_000, false, &linux).1, Action::Hold);
        assert_eq!(c_update(20, 12_300, 10_000, false, &p4).1, Action::Decrease);
        // slow start, w = 40, rtt 12 ms: diff = 8 > γ: w = min(40, 33.3 + 1) = 34.33 (C: 34)
        let (w, a) = update(40.0, 12_000.0, 10_000.0, true, &orig);
        assert_eq!(a, Action::LeftSlowStart);
        assert!((w - (1.0 + 400.0 / 12.0)).abs() < 1e-12);
        assert_eq!(
            c_update(40, 12_000, 10_000, true, &orig),
            (34, Action::LeftSlowStart)
        );
        // never below 2 segments
        assert_eq!(
            update(2.0, 50_000.0, 10_000.0, false, &orig),
            (2.0, Action::Decrease)
        );
        assert_eq!(
            c_update(2, 50_000, 10_000, false, &orig),
            (2, Action::Decrease)
        );
    }

    fn rtts() -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        for base in [1u32, 7, 100, 999, 10_000, 33_333, 100_000, 400_000] {
            for k in 0..=400u64 {
                // rtt from base to 5·base, plus exact ties of diff with integers for w = 20
                v.push((base, (u64::from(base) * (100 + k) / 100) as u32));
            }
            for n in 0..=40u32 {
                let r = u64::from(base) + u64::from(base) * u64::from(n) / 20;
                v.push((base, r as u32));
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /*
     * Decisions: the C compares exact integer products, so its action must equal the
     * model's for every point (the model's f64 diff is exact enough: a non-tie differs
     * from an integer threshold by at least 1/base ≥ 2.5e-6, a tie is computed exactly).
     * Window: the same integer except after leaving slow start, where the C caps at
     * ⌊target⌋ + 1 and the model at target + 1: 0 ≤ model − C < 1.
     * Traced diff: ⌊1024·diff⌋/1024, so 0 ≤ model − C < 1/1024 (below saturation).
     */
    #[test]
    fn c_decisions_equal_the_model_over_a_grid() {
        let grid = rtts();
        let mut n = [0usize; 5];
        for p in [VegasParams::default(), VegasParams::linux()] {
            for &(base, rtt) in &grid {
                for cwnd in [2u32, 3, 5, 10, 20, 37, 100, 1000, 65_535] {
                    let (wf, wc) = (f64::from(cwnd), f64::from(rtt));
                    let d = diff(wf, wc, f64::from(base));
                    let dc = c_diff(cwnd, rtt, base);
                    assert!(
                        (0.0..1.0 / 1024.0 + 1e-9).contains(&(d - dc)),
                        "diff w {cwnd} rtt {rtt} base {base}: model {d} C {dc}"
                    );
                    assert_eq!(
                        c_target(cwnd, rtt, base),
                        target_cwnd(wf, wc, f64::from(base)).floor() as u32
                    );
                    for ss in [false, true] {
                        let (m, ma) = update(wf, wc, f64::from(base), ss, &p);
                        let (c, ca) = c_update(cwnd, rtt, base, ss, &p);
                        assert_eq!(ma, ca, "w {cwnd} rtt {rtt} base {base} ss {ss} {p:?}");
                        let err = m - f64::from(c);
                        assert!(
                            (-1e-9..1.0).contains(&err),
                            "w {cwnd} rtt {rtt} base {base}: model {m} C {c}"
                        );
                        n[ma as usize] += 1;
                    }
                }
            }
        }
        eprintln!("vegas decisions: {n:?} (ss, left ss, decrease, increase, hold)");
        assert!(n.iter().all(|&k| k > 100), "{n:?}");
    }

    /// On a fixed path (base 20 ms, bottleneck 1000 packets/s, so rtt = base + queue/x),
    /// the window settles with α ≤ queued packets ≤ β (model), and the C agrees step by step.
    #[test]
    fn window_settles_with_between_alpha_and_beta_packets_queued() {
        let (base, c_pps) = (20_000u32, 1000.0);
        for p in [VegasParams::default(), VegasParams::linux()] {
            let (mut wm, mut wc) = (30.0f64, 30u32);
            let bdp = c_pps * f64::from(base) / 1e6; // 20 packets
            let rtt_of = |w: f64| -> u32 {
                let q = (w - bdp).max(0.0); // packets queued
                base + (q / c_pps * 1e6).round() as u32
            };
            let mut last = Vec::new();
            for step in 0..200 {
                let (m, _) = update(wm, f64::from(rtt_of(wm)), f64::from(base), false, &p);
                let (c, _) = c_update(wc, rtt_of(f64::from(wc)), base, false, &p);
                wm = m;
                wc = c;
                assert_eq!(wm, f64::from(wc), "step {step}");
                if step >= 150 {
                    last.push(wc);
                }
            }
            let d = diff(
                f64::from(wc),
                f64::from(rtt_of(f64::from(wc))),
                f64::from(base),
            );
            let d = if p.integer_diff { d.floor() } else { d };
            assert!(d >= p.alpha && d <= p.beta, "{p:?}: diff {d} at w {wc}");
            assert!(last.iter().all(|&w| w == wc), "oscillates: {last:?}");
        }
    }
}
