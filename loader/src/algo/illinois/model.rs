//! A plain f64 model of TCP Illinois' rules (spec §13), the reference for
//! bpf/algo/illinois_math.h's fixed point.

/// Illinois' parameters in real units (spec §13 "Parameters", \[LINUX\] defaults matching
/// \[GK\] Liu, Başar, Srikant 2008). The BPF program holds them in per-mille.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IllinoisParams {
    /// α_min, packets per RTT at d_a = d_m (0.3).
    pub alpha_min: f64,
    /// α_max, packets per RTT for d_a ≤ d1 (10).
    pub alpha_max: f64,
    /// β_min, decrease fraction for d_a ≤ d2 (1/8).
    pub beta_min: f64,
    /// β_max, decrease fraction for d_a ≥ d3 (1/2).
    pub beta_max: f64,
    /// d1 as a fraction of d_m (0.01).
    pub d1: f64,
    /// d2 as a fraction of d_m (0.1).
    pub d2: f64,
    /// d3 as a fraction of d_m (0.8).
    pub d3: f64,
    /// Below this window (packets) α = 1 and β = 1/2, Reno (15).
    pub win_thresh: f64,
    /// θ: low-delay RTTs before α may return to α_max once it has left it (5).
    pub theta: u32,
}

impl Default for IllinoisParams {
    /// Spec §13's table.
    fn default() -> Self {
        Self {
            alpha_min: 0.3,
            alpha_max: 10.0,
            beta_min: 0.125,
            beta_max: 0.5,
            d1: 0.01,
            d2: 0.1,
            d3: 0.8,
            win_thresh: 15.0,
            theta: 5,
        }
    }
}

/// The θ bookkeeping of α (spec §13 "α(d_a)"): whether d_a has been above d1 since α
/// last returned to α_max, and how many consecutive RTTs it has since been ≤ d1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AlphaState {
    /// d_a has been above d1 (α left α_max).
    pub rtt_above: bool,
    /// Consecutive RTTs with d_a ≤ d1 since then.
    pub rtt_low: u32,
}

/// α(d_a), packets per RTT (spec §13 "Rules"; \[GK\] Liu et al. 2008 eq. for α):
/// α_max for d_a ≤ d1 (only after θ consecutive such RTTs once d_a has been above d1;
/// until then `cur_alpha` stays), else κ1/(κ2 + d_a) with κ1, κ2 chosen so that
/// α(d1) = α_max and α(d_m) = α_min. Delays in any one unit (the tests use usec);
/// d1 = `p.d1`·d_m.
pub fn alpha(da: f64, dm: f64, cur_alpha: f64, st: &mut AlphaState, p: &IllinoisParams) -> f64 {
    let d1 = p.d1 * dm;
    if da <= d1 {
        if !st.rtt_above {
            return p.alpha_max;
        }
        st.rtt_low += 1;
        if st.rtt_low < p.theta {
            return cur_alpha;
        }
        *st = AlphaState::default();
        return p.alpha_max;
    }
    st.rtt_above = true;
    let da = da.min(dm);
    // κ1/(κ2 + d_a) through (d1, α_max) and (d_m, α_min):
    //   κ2 = (d_m − d1)·α_min/(α_max − α_min) − d1,  κ1 = (κ2 + d1)·α_max
    if p.alpha_max <= p.alpha_min {
        return p.alpha_max;
    }
    let k2 = (dm - d1) * p.alpha_min / (p.alpha_max - p.alpha_min) - d1;
    let k1 = (k2 + d1) * p.alpha_max;
    k1 / (k2 + da)
}

/// β(d_a), the decrease fraction (spec §13 "Rules"): β_min for d_a ≤ d2, β_max for
/// d_a ≥ d3 (or when d3 ≤ d2), linear in between. d2, d3 = `p.d2`·d_m, `p.d3`·d_m.
pub fn beta(da: f64, dm: f64, p: &IllinoisParams) -> f64 {
    let (d2, d3) = (p.d2 * dm, p.d3 * dm);
    if da <= d2 {
        p.beta_min
    } else if da >= d3 || d3 <= d2 {
        p.beta_max
    } else {
        p.beta_min + (p.beta_max - p.beta_min) * (da - d2) / (d3 - d2)
    }
}

/// The per-RTT parameter update (spec §13): (α, β) = (1, 1/2) while the window `w`
/// (packets) is below `win_thresh`, else (α(d_a), β(d_a)).
pub fn update(
    w: f64,
    da: f64,
    dm: f64,
    cur_alpha: f64,
    st: &mut AlphaState,
    p: &IllinoisParams,
) -> (f64, f64) {
    if w < p.win_thresh {
        (1.0, 0.5)
    } else {
        (alpha(da, dm, cur_alpha, st, p), beta(da, dm, p))
    }
}

/// ssthresh after a loss, packets: `max(w − β·w, 2)` (spec §13 "Loss").
pub fn ssthresh(w: f64, beta: f64) -> f64 {
    (w - beta * w).max(2.0)
}

#[cfg(test)]
mod tests {
    use super::*;



    const A_ULP: f64 = 1.0 / 128.0;
    const B_ULP: f64 = 1.0 / 64.0;

    /// illinois.bpf.c's PM_TO_ALPHA / PM_TO_BETA.
    fn pm_to_alpha(pm: u32) -> u32 {
        ((u64::from(pm) << 7) / 1000) as u32
    }
    fn pm_to_beta(pm: u32) -> u32 {
        ((u64::from(pm) << 6) / 1000) as u32
    }

    /// The default tunables as the C sees them (integers) and the model with exactly
    /// those values, so grid tests compare rules, not the constants' quantisation
    /// (checked on its own in `defaults_quantise_to_the_linux_integers`).
    struct Setup {
        amin: u32,
        amax: u32,
        bmin: u32,
        bmax: u32,
        p: IllinoisParams,
    }

    fn setup() -> Setup {
        let (amin, amax) = (pm_to_alpha(300), pm_to_alpha(10_000));
        let (bmin, bmax) = (pm_to_beta(125), pm_to_beta(500));
        Setup {
            amin,
            amax,
            bmin,
            bmax,
            p: IllinoisParams {
                alpha_min: f64::from(amin) * A_ULP,
                alpha_max: f64::from(amax) * A_ULP,
                beta_min: f64::from(bmin) * B_ULP,
                beta_max: f64::from(bmax) * B_ULP,
                ..IllinoisParams::default()
            },
        }
    }

    /// illinois.bpf.c's params with the default d1, d2, d3 and the setup's θ, α, β.
    fn c_params(s: &Setup) -> crate::math::illinois_params {
        crate::math::illinois_params {
            theta: s.p.theta,
            d1_pm: 10,
            d2_pm: 100,
            d3_pm: 800,
            amin: s.amin,
            amax: s.amax,
            bmin: s.bmin,
            bmax: s.bmax,
        }
    }

    fn c_alpha(da: u32, dm: u32, cur: u32, st: &mut AlphaState, s: &Setup) -> u32 {
        let mut th = crate::math::illinois_theta_state {
            rtt_above: u8::from(st.rtt_above),
            rtt_low: st.rtt_low as u8,
        };
        let p = c_params(s);
        // SAFETY: `th` is a live, exclusively borrowed struct for the call; `p` a live,
        // initialised struct the function only reads.
        let a = unsafe { crate::math::illinois_alpha_fp(da, dm, cur, &mut th, &p) };
        assert!(th.rtt_above <= 1);
        *st = AlphaState {
            rtt_above: th.rtt_above == 1,
            rtt_low: th.rtt_low.into(),
        };
        a
    }

    fn c_beta(da: u32, dm: u32, s: &Setup) -> u32 {
        let p = c_params(s);
        // SAFETY: `p` is a live, initialised struct the function only reads.
        unsafe { crate::math::illinois_beta_fp(da, dm, &p) }
    }

    #[test]
    fn defaults_quantise_to_the_linux_integers() {
        // tcp_illinois.c: ALPHA_MIN (3*128)/10 = 38, ALPHA_MAX 1280, BETA_MIN 8, BETA_MAX 32
        let s = setup();
        assert_eq!((s.amin, s.amax, s.bmin, s.bmax), (38, 1280, 8, 32));
        // the quantisation itself costs at most one ULP of each
        let d = IllinoisParams::default();
        assert!((d.alpha_min - s.p.alpha_min).abs() < A_ULP);
        assert_eq!(
            (d.alpha_max, d.beta_min, d.beta_max),
            (s.p.alpha_max, s.p.beta_min, s.p.beta_max)
        );
    }

    #[test]
    fn alpha_and_beta_match_hand_computed_values() {
        let p = IllinoisParams::default();
        let dm = 100_000.0; // usec; d1 = 1 ms, d2 = 10 ms, d3 = 80 ms
        let mut st = AlphaState {
            rtt_above: true,
            rtt_low: 0,
        };
        // α(d_m) = α_min, and just above d1 α is (nearly) α_max
        assert!((alpha(dm, dm, 1.0, &mut st, &p) - 0.3).abs() < 1e-12);
        assert!((alpha(1000.001, dm, 1.0, &mut st, &p) - 10.0).abs() < 1e-4);
        // half way: 99·10 / (99 + 49.5·9.7/0.3) = 990/1699.5
        assert!((alpha(50_500.0, dm, 1.0, &mut st, &p) - 990.0 / 1699.5).abs() < 1e-12);
        // β: 1/8 to 10 ms, 1/2 from 80 ms, 0.125 + 0.375·35/70 at 45 ms
        for (da, b) in [
            (0.0, 0.125),
            (10_000.0, 0.125),
            (45_000.0, 0.3125),
            (80_000.0, 0.5),
            (99_000.0, 0.5),
        ] {
            assert!((beta(da, dm, &p) - b).abs() < 1e-12, "β({da})");
        }
        assert_eq!(ssthresh(100.0, 0.125), 87.5);
        assert_eq!(ssthresh(10.0, 0.5), 5.0);
        assert_eq!(ssthresh(3.0, 0.5), 2.0);
        // below win_thresh: Reno
        let mut st = AlphaState::default();
        assert_eq!(update(14.0, 99_000.0, dm, 3.0, &mut st, &p), (1.0, 0.5));
        assert_eq!(update(15.0, 0.0, dm, 3.0, &mut st, &p), (10.0, 0.125));
    }

    #[test]
    fn alpha_returns_to_max_only_after_theta_low_delay_rtts() {
        let s = setup();
        let dm = 100_000u32;
        let (mut m_st, mut c_st) = (AlphaState::default(), AlphaState::default());
        // a congested RTT: α leaves α_max
        let m = alpha(60_000.0, f64::from(dm), 10.0, &mut m_st, &s.p);
        let c = c_alpha(60_000, dm, 1280, &mut c_st, &s);
        assert!(m < 1.0 && m_st.rtt_above && c_st.rtt_above);
        // θ − 1 = 4 low-delay RTTs keep the current α, the 5th restores α_max
        for k in 1..=5u32 {
            let m2 = alpha(500.0, f64::from(dm), m, &mut m_st, &s.p);
            let c2 = c_alpha(500, dm, c, &mut c_st, &s);
            if k < 5 {
                assert_eq!((m2, c2), (m, c), "RTT {k}");
                assert_eq!((m_st.rtt_low, c_st.rtt_low), (k, k));
            } else {
                assert_eq!((m2, c2), (s.p.alpha_max, s.amax));
                assert_eq!(m_st, AlphaState::default());
                assert_eq!(c_st, AlphaState::default());
            }
        }
    }

    /// d_m, usec: 1 ms .. 3 s; and d_a over [0, d_m] with both sides of d1, d2, d3.
    fn grid() -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        for dm in [
            1000u32, 1001, 1999, 4321, 10_000, 33_333, 99_999, 100_000, 250_007, 1_000_000,
            3_000_000,
        ] {
            let mut das: Vec<u32> = (0..=400)
                .map(|k| (u64::from(dm) * k / 400) as u32)
                .collect();
            for f in [10u64, 100, 800] {
                let d = (u64::from(dm) * f / 1000) as u32;
                das.extend([d.saturating_sub(1), d, d + 1]);
            }
            das.sort_unstable();
            das.dedup();
            v.extend(das.into_iter().filter(|&d| d <= dm).map(|d| (d, dm)));
        }
        v
    }

    /*
     * α (spec §13), C vs model with the same constants (38/128, 1280/128). The C computes
     * α = ⌊d_m'·α_max / (d_m' + ⌊d_a'·(α_max − α_min)/α_min⌋)⌋ with d1 rounded down to a
     * usec (d_m' = d_m − d1, d_a' = d_a − d1). The d1 rounding moves d_m' and d_a' by < 1 µs,
     * the inner floor moves the denominator D ≥ d_m' by < 1, so the quotient is off by a
     * relative (3 + r)/d_m' at most (r = (α_max − α_min)/α_min = 32.7); the outer floor
     * costs < 1 ULP (1/128). Bound: |model − C| ≤ 1/128 + α·(3 + r)/d_m'.
     * The branch (d_a ≤ d1) and the θ bookkeeping must agree exactly (d_a is an integer, so
     * d_a ≤ 0.01·d_m iff d_a ≤ ⌊0.01·d_m⌋).
     */
    #[test]
    fn alpha_matches_the_model_over_a_grid_of_delays() {
        let s = setup();
        let r = (s.p.alpha_max - s.p.alpha_min) / s.p.alpha_min;
        let (mut checked, mut max_err, mut curve) = (0usize, 0f64, 0usize);
        for (da, dm) in grid() {
            for above in [false, true] {
                let st0 = AlphaState {
                    rtt_above: above,
                    rtt_low: 0,
                };
                let (mut m_st, mut c_st) = (st0, st0);
                let m = alpha(f64::from(da), f64::from(dm), 1.0, &mut m_st, &s.p);
                let c = f64::from(c_alpha(da, dm, 128, &mut c_st, &s)) * A_ULP;
                assert_eq!(m_st, c_st, "state, d_a {da} d_m {dm}");
                let dmp = f64::from(dm) - 0.01 * f64::from(dm);
                let bound = A_ULP + m * (3.0 + r) / dmp;
                let err = (m - c).abs();
                assert!(
                    err <= bound,
                    "α(d_a {da}, d_m {dm}): model {m}, C {c}, |err| {err} > {bound}"
                );
                assert!(
                    (s.p.alpha_min - A_ULP..=s.p.alpha_max).contains(&c),
                    "C α {c} out of [α_min, α_max]"
                );
                max_err = max_err.max(err);
                checked += 1;
                curve += usize::from(m_st.rtt_above);
            }
        }
        eprintln!("α: {checked} points ({curve} on the curve), max |error| {max_err:.3e}");
        assert!(checked > 8000 && curve > 4000);
    }

    #[test]
    fn alpha_falls_monotonically_from_max_to_min_as_delay_grows() {
        let s = setup();
        for dm in [1000u32, 100_000, 3_000_000] {
            let mut last = u32::MAX;
            for k in 0..=1000u64 {
                let da = (u64::from(dm) * k / 1000) as u32;
                let mut st = AlphaState {
                    rtt_above: true,
                    rtt_low: 0,
                };
                let a = c_alpha(da, dm, s.amax, &mut st, &s);
                assert!(a <= last, "α rose at d_a {da} (d_m {dm})");
                last = a;
            }
            assert_eq!(last, s.amin, "α(d_m) = α_min (d_m {dm})");
        }
    }

    /*
     * β (spec §13), C vs model with the same constants (8/64, 32/64). The C rounds d2 and
     * d3 down to a usec (shifting the ramp by < 1 µs, i.e. β by < (β_max − β_min)/(d3 − d2)
     * at each end) and floors the quotient (< 1 ULP = 1/64).
     * Bound: |model − C| ≤ 1/64 + 2·(β_max − β_min)/(d3 − d2 − 1).
     */
    #[test]
    fn beta_matches_the_model_over_a_grid_of_delays() {
        let s = setup();
        let (mut checked, mut max_err, mut ramp) = (0usize, 0f64, 0usize);
        for (da, dm) in grid() {
            let m = beta(f64::from(da), f64::from(dm), &s.p);
            let c = f64::from(c_beta(da, dm, &s)) * B_ULP;
            let span = 0.7 * f64::from(dm) - 1.0;
            let bound = B_ULP + 2.0 * (s.p.beta_max - s.p.beta_min) / span;
            let err = (m - c).abs();
            assert!(err <= bound, "β(d_a {da}, d_m {dm}): model {m}, C {c}");
            assert!((0.125..=0.5).contains(&c));
            max_err = max_err.max(err);
            checked += 1;
            ramp += usize::from(m > s.p.beta_min && m < s.p.beta_max);
        }
        eprintln!("β: {checked} points ({ramp} on the ramp), max |error| {max_err:.3e}");
        assert!(checked > 4000 && ramp > 2000);
    }

    #[test]
    fn average_delay_is_the_mean_rtt_above_base() {
        // SAFETY: pure functions of integers.
        unsafe {
            assert_eq!(crate::math::illinois_avg_delay(0, 0, 10_000), 0);
            assert_eq!(crate::math::illinois_avg_delay(3 * 12_000, 3, 10_000), 2000);
            assert_eq!(crate::math::illinois_avg_delay(10_000 + 10_001, 2, 10_000), 0);
            assert_eq!(
                crate::math::illinois_avg_delay(u64::from(u32::MAX) * 1000, 1000, 1),
                u32::MAX - 1
            );
        }
    }

    /*
     * ssthresh = max(w − β·w, 2): the C subtracts ⌊w·β_fp/64⌋, so for β exactly
     * representable it is the model rounded up to a whole segment (exact in f64).
     */
    #[test]
    fn ssthresh_is_the_model_rounded_up() {
        let mut checked = 0;
        for beta_fp in 0..=64u32 {
            let b = f64::from(beta_fp) * B_ULP;
            for w in (0..=3000u32).chain([65_535, 1 << 20, 123_456_789, u32::MAX]) {
                // SAFETY: a pure function of integers.
                let c = unsafe { crate::math::illinois_fp_ssthresh(w, beta_fp) };
                let m = ssthresh(f64::from(w), b);
                assert_eq!(f64::from(c), m.ceil(), "w {w}, β {beta_fp}/64");
                checked += 1;
            }
        }
        assert!(checked > 190_000);
    }

    /*
     * w += α/w per acked packet, done as +1 segment per d = ⌊128·w/α_fp⌋ acked packets
     * (tcp_cong_avoid_ai keeps the remainder): per RTT (w packets) that is w/d. From
     * d ≤ w/α < d + 1: α ≤ w/d < α·(d + 1)/d, i.e. never slower than α and faster by at
     * most a relative 1/d = α/w (one ULP of the division).
     */
    #[test]
    fn increase_per_rtt_is_alpha() {
        let mut checked = 0;
        for alpha_fp in [38u32, 64, 128, 200, 640, 1280] {
            let a = f64::from(alpha_fp) * A_ULP;
            for w in (15..=5000u32).chain([100_000, 1 << 24]) {
                // SAFETY: a pure function of integers.
                let d = unsafe { crate::math::illinois_ai_divisor(w, alpha_fp) };
                let per_rtt = f64::from(w) / f64::from(d);
                let hi = a * f64::from(d + 1) / f64::from(d);
                assert!(
                    per_rtt >= a - 1e-12 && per_rtt <= hi + 1e-12,
                    "w {w} α {a}: {per_rtt} per RTT (d {d})"
                );
                checked += 1;
            }
        }
        assert!(checked > 25_000);
    }

    #[test]
    fn rust_layout_has_the_c_size() {
        // SAFETY: no arguments, returns a constant.
        let c = std::mem::size_of::<crate::math::cctl_illinois_ca>() as u32 as usize;
        assert_eq!(
            std::mem::size_of::<crate::math::cctl_illinois_ca>(),
            c
        );
        assert!(c <= 104);
    }
}
