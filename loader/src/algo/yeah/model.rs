//! A plain f64 model of YeAH-TCP's per-RTT and loss rules (spec §10, [P3] §III), the
//! reference for bpf/algo/yeah_math.h.

/// YeAH's parameters (spec §10 "Parameters"); defaults are Linux `tcp_yeah`'s constants,
/// which fill the values [P3] leaves open.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct YeahParams {
    /// Q_max: most packets one flow may keep queued, packets (Linux `TCP_YEAH_ALPHA` 80).
    pub q_max: f64,
    /// φ: the mode is Fast only while L < 1/φ (Linux `TCP_YEAH_PHY` 8).
    pub phy: f64,
    /// γ: precautionary decongestion removes Q/γ packets (Linux `TCP_YEAH_GAMMA` 1).
    pub gamma: f64,
    /// ε: decongestion removes at most cwnd/2^ε (Linux `TCP_YEAH_EPSILON` 1).
    pub epsilon_shift: u32,
    /// δ: a loss removes at least cwnd/2^δ (\[P3\]: cwnd/8, Linux `TCP_YEAH_DELTA` 3).
    pub delta_shift: u32,
    /// ρ: this many consecutive Slow RTTs mean Reno competition, RTTs (Linux 16).
    pub rho: u32,
    /// ζ: count_fast above this resets count_reno, RTTs (Linux 50).
    pub zeta: u32,
    /// Linux's tests on truncated integers and its count_reno sentinel (\[LINUX\]) instead
    /// of \[P3\]'s real-valued tests and count_reno = cwnd/2.
    pub linux_rules: bool,
}

impl Default for YeahParams {
    fn default() -> Self {
        Self {
            q_max: 80.0,
            phy: 8.0,
            gamma: 1.0,
            epsilon_shift: 1,
            delta_shift: 3,
            rho: 16,
            zeta: 50,
            linux_rules: false,
        }
    }
}

/// YeAH's counters (spec §10 "Per-flow state").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct YeahState {
    /// lastQ: Q of the last completed RTT, packets.
    pub last_q: f64,
    /// count_reno: estimated window of competing Reno flows, segments.
    pub reno_count: f64,
    /// count_fast: Fast RTTs since the last reset.
    pub fast_count: u32,
    /// Consecutive Slow RTTs (Linux `doing_reno_now`).
    pub slow_rtts: u32,
    /// Mode of the last RTT.
    pub slow_mode: bool,
    /// Precautionary decongestions so far.
    pub decongestions: u32,
}

/// The sentinel / floor of count_reno, segments (\[LINUX\]).
pub const SENTINEL: f64 = 2.0;

/// count_reno at start-up: \[P3\] cwnd/2 (at least 2); Linux the sentinel 2.
pub fn initial_reno_count(cwnd: f64, p: &YeahParams) -> f64 {
    if p.linux_rules {
        SENTINEL
    } else {
        (cwnd / 2.0).max(SENTINEL)
    }
}

/// Q = RTT_queue·cwnd/RTT_min, packets: what this flow keeps queued (spec §10
/// "Estimators"). `rtt` = RTT_min of the RTT, `base` = RTT_base, same unit.
pub fn queue(cwnd: f64, rtt: f64, base: f64) -> f64 {
    if rtt <= base {
        return 0.0;
    }
    cwnd * (rtt - base) / rtt
}

/// L = RTT_queue/RTT_base, dimensionless: congestion level (spec §10 "Estimators").
pub fn level(rtt: f64, base: f64) -> f64 {
    if base <= 0.0 || rtt <= base {
        return 0.0;
    }
    (rtt - base) / base
}

/// Whether an RTT is a Slow-mode one (spec §10 "Mode"): \[P3\] Slow unless Q < Q_max and
/// L < 1/φ; Linux Slow iff ⌊Q⌋ > Q_max or RTT_queue > ⌊RTT_base/φ⌋ (µs).
pub fn is_slow(cwnd: f64, rtt: f64, base: f64, p: &YeahParams) -> bool {
    let q = queue(cwnd, rtt, base);
    if p.linux_rules {
        q.floor() > p.q_max || (rtt - base) > (base / p.phy).floor()
    } else {
        !(q < p.q_max && level(rtt, base) < 1.0 / p.phy)
    }
}

/// One RTT of YeAH (spec §10 "Rules"): updates `st` and returns (cwnd, ssthresh), segments.
/// Slow mode: if Q > Q_max (Linux: ⌊Q⌋ > Q_max) and cwnd > count_reno, precautionary
/// decongestion cwnd ← max(cwnd − min(Q/γ, cwnd/2^ε), count_reno) with ssthresh = cwnd;
/// count_reno + 1 (Linux: from the sentinel, max(cwnd/2, 2)); one more Slow RTT.
/// Fast mode: count_fast + 1, and above ζ count_reno is reset (\[P3\]: cwnd/2; Linux:
/// sentinel) with count_fast = 0; the Slow run ends.
pub fn per_rtt(
    st: &mut YeahState,
    cwnd: f64,
    ssthresh: f64,
    rtt: f64,
    base: f64,
    p: &YeahParams,
) -> (f64, f64) {
    let q = queue(cwnd, rtt, base);
    let (mut cwnd, mut ssthresh) = (cwnd, ssthresh);
    if is_slow(cwnd, rtt, base, p) {
        st.slow_mode = true;
        let over = if p.linux_rules {
            q.floor() > p.q_max
        } else {
            q > p.q_max
        };
        if over && cwnd > st.reno_count {
            let qd = if p.linux_rules { q.floor() } else { q };
            let red = (qd / p.gamma).min(cwnd / f64::from(1u32 << p.epsilon_shift));
            cwnd = (cwnd - red).max(st.reno_count);
            ssthresh = cwnd;
            st.decongestions += 1;
        }
        if p.linux_rules && st.reno_count <= SENTINEL {
            st.reno_count = (cwnd / 2.0).floor().max(SENTINEL);
        } else {
            st.reno_count += 1.0;
        }
        st.slow_rtts += 1;
    } else {
        st.slow_mode = false;
        st.fast_count += 1;
        if st.fast_count > p.zeta {
            st.reno_count = initial_reno_count(cwnd, p);
            st.fast_count = 0;
        }
        st.slow_rtts = 0;
    }
    st.last_q = q;
    (cwnd, ssthresh)
}

/// ssthresh after a loss, segments (spec §10 "Loss"): without Reno competition
/// (slow_rtts < ρ) cwnd − min(max(cwnd/2^δ, lastQ), cwnd/2), the Westwood-like drain of
/// the own queue; with it cwnd/2; at least 2. count_fast = 0, count_reno halved (≥ 2).
pub fn ssthresh(st: &mut YeahState, cwnd: f64, p: &YeahParams) -> f64 {
    let red = if st.slow_rtts < p.rho {
        (cwnd / f64::from(1u32 << p.delta_shift))
            .max(st.last_q)
            .min(cwnd / 2.0)
    } else {
        cwnd / 2.0
    };
    st.fast_count = 0;
    st.reno_count = (st.reno_count / 2.0).max(SENTINEL);
    (cwnd - red).max(2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::cctl_yeah_ca;

    /// The tunables as the C rules take them (bpf/algo/yeah_math.h `struct yeah_params`).
    fn c_params(p: &YeahParams) -> crate::math::yeah_params {
        let a = args(p);
        crate::math::yeah_params {
            q_max_pkts: a[0],
            phy: a[1],
            gamma: a[2],
            epsilon_shift: a[3],
            delta_shift: a[4],
            rho_rtts: a[5],
            zeta_rtts: a[6],
            linux_rules: a[7],
        }
    }

    /// The tunables as yeah.bpf.c passes them (all integers).
    fn args(p: &YeahParams) -> [u32; 8] {
        [
            p.q_max as u32,
            p.phy as u32,
            p.gamma as u32,
            p.epsilon_shift,
            p.delta_shift,
            p.rho,
            p.zeta,
            p.linux_rules.into(),
        ]
    }

    fn to_c(st: &YeahState) -> cctl_yeah_ca {
        cctl_yeah_ca {
            last_q: st.last_q as u32,
            reno_count: st.reno_count as u32,
            fast_count: st.fast_count,
            doing_reno_now: st.slow_rtts,
            slow_mode: st.slow_mode.into(),
            decongestions: st.decongestions,
            ..Default::default()
        }
    }

    fn c_init(cwnd: u32, p: &YeahParams) -> u32 {
        let cp = c_params(p);
        // SAFETY: `cp` is live for the call, which only reads it.
        unsafe { crate::math::yeah_initial_reno_count(cwnd, &cp) }
    }

    /// One C RTT from `ca`: (cwnd, ssthresh).
    fn c_per_rtt(
        ca: &mut cctl_yeah_ca,
        cwnd: u32,
        ssth: u32,
        rtt: u32,
        base: u32,
        p: &YeahParams,
    ) -> (u32, u32) {
        let cp = c_params(p);
        let r = crate::math::yeah_rtt {
            rtt_us: rtt,
            base_us: base,
        };
        let mut s = ssth;
        // SAFETY: `ca` and `s` are live, exclusively borrowed for the call, which only
        // reads and writes them; `r` and `cp` are live and only read.
        let w = unsafe { crate::math::yeah_per_rtt(ca, cwnd, &mut s, &r, &cp) };
        (w, s)
    }

    fn c_ssthresh(ca: &mut cctl_yeah_ca, cwnd: u32, p: &YeahParams) -> u32 {
        let cp = c_params(p);
        // SAFETY: `ca` and `cp` are live, `ca` exclusively borrowed, for the call.
        unsafe { crate::math::yeah_loss_ssthresh(ca, cwnd, &cp) }
    }

    fn state(reno_count: f64, fast_count: u32, slow_rtts: u32, last_q: f64) -> YeahState {
        YeahState {
            last_q,
            reno_count,
            fast_count,
            slow_rtts,
            slow_mode: slow_rtts > 0,
            decongestions: 0,
        }
    }

    fn linux() -> YeahParams {
        YeahParams {
            linux_rules: true,
            ..YeahParams::default()
        }
    }

    #[test]
    fn hand_computed_rtts_follow_the_spec() {
        let paper = YeahParams::default();
        // cwnd 100, RTT_base 100 ms, RTT_min 120 ms: Q = 16.67, L = 0.2 >= 1/8: Slow, no
        // decongestion (Q < 80); count_reno 50 -> 51 ([P3]), sentinel 2 -> 50 (Linux)
        let mut st = state(50.0, 0, 0, 0.0);
        assert!((queue(100.0, 120e3, 100e3) - 50.0 / 3.0).abs() < 1e-12);
        assert_eq!(
            per_rtt(&mut st, 100.0, 1e9, 120e3, 100e3, &paper),
            (100.0, 1e9)
        );
        assert_eq!((st.slow_mode, st.reno_count, st.slow_rtts), (true, 51.0, 1));
        let mut st = state(2.0, 0, 0, 0.0);
        per_rtt(&mut st, 100.0, 1e9, 120e3, 100e3, &linux());
        assert_eq!(st.reno_count, 50.0);
        // cwnd 1000, 100 ms / 110 ms: Q = 90.9 > 80 (L = 0.1 < 1/8): decongestion by Q
        let mut st = state(100.0, 0, 0, 0.0);
        let (w, s) = per_rtt(&mut st, 1000.0, 1e9, 110e3, 100e3, &paper);
        assert!(
            (w - (1000.0 - 1e4 / 110.0)).abs() < 1e-9 && w == s,
            "{w} {s}"
        );
        assert_eq!((st.decongestions, st.reno_count), (1, 101.0));
        let mut ca = to_c(&state(100.0, 0, 0, 0.0));
        assert_eq!(
            c_per_rtt(&mut ca, 1000, 1_000_000, 110_000, 100_000, &paper),
            (910, 910)
        );
        assert_eq!((ca.last_q, ca.decongestions, ca.reno_count), (90, 1, 101));
        // cwnd 100, 100 ms / 105 ms: Q = 4.8, L = 0.05: Fast; count_fast 51 > ζ resets
        let mut st = state(70.0, 50, 3, 0.0);
        per_rtt(&mut st, 100.0, 1e9, 105e3, 100e3, &paper);
        assert_eq!(
            (st.slow_mode, st.fast_count, st.slow_rtts, st.reno_count),
            (false, 0, 0, 50.0)
        );
        let mut st = state(70.0, 50, 3, 0.0);
        per_rtt(&mut st, 100.0, 1e9, 105e3, 100e3, &linux());
        assert_eq!(st.reno_count, 2.0);
        // L exactly 1/8 (80 ms / 90 ms): [P3] Slow (L < 1/φ fails), Linux Fast (not >)
        assert!(is_slow(10.0, 90e3, 80e3, &paper));
        assert!(!is_slow(10.0, 90e3, 80e3, &linux()));
        let mut ca = to_c(&state(5.0, 0, 0, 0.0));
        c_per_rtt(&mut ca, 10, 1000, 90_000, 80_000, &paper);
        assert_eq!(ca.slow_mode, 1);
        let mut ca = to_c(&state(5.0, 0, 0, 0.0));
        c_per_rtt(&mut ca, 10, 1000, 90_000, 80_000, &linux());
        assert_eq!(ca.slow_mode, 0);
        // loss at cwnd 1000: lastQ 90 -> remove max(90, 125) = 125; lastQ 700 -> 500;
        // lastQ 200 -> 200; after 16 Slow RTTs -> halve
        for (q, slow, want) in [
            (90.0, 0, 875.0),
            (700.0, 0, 500.0),
            (200.0, 15, 800.0),
            (90.0, 16, 500.0),
        ] {
            let mut st = state(40.0, 7, slow, q);
            assert_eq!(
                ssthresh(&mut st, 1000.0, &paper),
                want,
                "lastQ {q}, {slow} Slow RTTs"
            );
            assert_eq!((st.fast_count, st.reno_count), (0, 20.0));
            let mut ca = to_c(&state(40.0, 7, slow, q));
            assert_eq!(f64::from(c_ssthresh(&mut ca, 1000, &paper)), want);
            assert_eq!((ca.fast_count, ca.reno_count), (0, 20));
        }
        assert_eq!(initial_reno_count(10.0, &paper), 5.0);
        assert_eq!(c_init(10, &paper), 5);
        assert_eq!(c_init(10, &linux()), 2);
    }

    fn rtt_pairs() -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        for base in [1u32, 50, 1000, 8000, 20_000, 80_000, 100_000, 300_000] {
            for k in 0..=300u64 {
                v.push((base, (u64::from(base) * (1000 + k * k / 10) / 1000) as u32));
            }
            v.push((base, base + base / 8));
            v.push((base, base + base / 8 + 1));
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /*
     * One RTT from the same (integer) state in the model and the C, over a grid of
     * windows, RTTs and counter states: the mode and every counter must agree exactly
     * (the C's tests are exact integer forms of the model's); cwnd and ssthresh may
     * differ by less than one segment (the C removes ⌊Q⌋/γ and ⌊cwnd/2^ε⌋), count_reno
     * by at most one (Linux sets it to ⌊cwnd/2⌋ of the decongested window, which
     * carries that < 1 difference into the floor), and lastQ is ⌊Q⌋.
     */
    #[test]
    fn per_rtt_c_matches_the_model_over_a_grid() {
        let pairs = rtt_pairs();
        let (mut slow, mut fast, mut decong, mut n) = (0, 0, 0, 0usize);
        for p in [YeahParams::default(), linux()] {
            for &(base, rtt) in &pairs {
                for cwnd in [2u32, 9, 64, 100, 641, 1000, 7919, 100_000] {
                    for (rc, fc, sr) in [
                        (2u32, 0u32, 0u32),
                        (5, 50, 0),
                        (60, 49, 15),
                        (500, 3, 16),
                        (3, 51, 200),
                    ] {
                        let mut st = state(f64::from(rc), fc, sr, 0.0);
                        let (wm, sm) = per_rtt(
                            &mut st,
                            f64::from(cwnd),
                            1e12,
                            f64::from(rtt),
                            f64::from(base),
                            &p,
                        );
                        let mut ca = to_c(&state(f64::from(rc), fc, sr, 0.0));
                        let (wc, sc) = c_per_rtt(&mut ca, cwnd, u32::MAX, rtt, base, &p);
                        let at =
                            format!("cwnd {cwnd} rtt {rtt} base {base} state {rc}/{fc}/{sr} {p:?}");
                        assert_eq!(ca.slow_mode != 0, st.slow_mode, "{at}");
                        assert_eq!(
                            (ca.fast_count, ca.doing_reno_now, ca.decongestions),
                            (st.fast_count, st.slow_rtts, st.decongestions),
                            "{at}"
                        );
                        assert!(
                            (f64::from(wc) - wm).abs() < 1.0,
                            "{at}: cwnd C {wc} model {wm}"
                        );
                        if st.decongestions > 0 {
                            assert!(
                                (f64::from(sc) - sm).abs() < 1.0,
                                "{at}: ssthresh C {sc} model {sm}"
                            );
                            decong += 1;
                        } else {
                            assert_eq!((sc, sm), (u32::MAX, 1e12), "{at}");
                        }
                        // count_reno = ⌊cwnd/2⌋ of a window already within 1 of the
                        // model's: within 1 segment, inclusive
                        assert!(
                            (f64::from(ca.reno_count) - st.reno_count).abs() <= 1.0,
                            "{at}: count_reno C {} model {}",
                            ca.reno_count,
                            st.reno_count
                        );
                        assert_eq!(f64::from(ca.last_q), st.last_q.floor(), "{at}");
                        // SAFETY: pure functions of integers.
                        let (qc, lc) = unsafe {
                            (
                                crate::math::yeah_queue(cwnd, rtt, base),
                                crate::math::yeah_level_fp(rtt, base),
                            )
                        };
                        assert_eq!(
                            f64::from(qc),
                            queue(f64::from(cwnd), f64::from(rtt), f64::from(base)).floor()
                        );
                        let l = level(f64::from(rtt), f64::from(base));
                        assert!(
                            (0.0..1.0 / 1024.0 + 1e-12).contains(&(l - f64::from(lc) / 1024.0)),
                            "{at}: L"
                        );
                        if st.slow_mode {
                            slow += 1
                        } else {
                            fast += 1
                        }
                        n += 1;
                    }
                }
            }
        }
        eprintln!("yeah per-RTT: {n} points, {slow} Slow, {fast} Fast, {decong} decongestions");
        assert!(slow > 1000 && fast > 1000 && decong > 1000);
    }

    /// ssthresh (spec §10 "Loss") from the same integer state: within one segment of the
    /// model (⌊cwnd/2^δ⌋ and ⌊cwnd/2⌋ in the C), never below 2, counters equal.
    #[test]
    fn loss_rule_c_matches_the_model_over_a_grid() {
        let mut n = 0;
        for p in [YeahParams::default(), linux()] {
            for cwnd in (2..=3000u32).step_by(7).chain([65_535, 1_000_000]) {
                for q in [0u32, 1, 7, 80, 150, 400, 2000, 100_000] {
                    for sr in [0u32, 15, 16, 1000] {
                        let mut st = state(33.0, 12, sr, f64::from(q));
                        let m = ssthresh(&mut st, f64::from(cwnd), &p);
                        let mut ca = to_c(&state(33.0, 12, sr, f64::from(q)));
                        let c = c_ssthresh(&mut ca, cwnd, &p);
                        assert!(
                            (f64::from(c) - m).abs() < 1.0 && c >= 2,
                            "cwnd {cwnd} lastQ {q} slow {sr}: C {c} model {m}"
                        );
                        assert_eq!((ca.fast_count, ca.reno_count), (0, 16));
                        assert_eq!(st.reno_count, 16.5);
                        n += 1;
                    }
                }
            }
        }
        assert!(n > 10_000);
    }
}
