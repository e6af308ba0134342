//! A plain f64 model of H-TCP's rules (spec §5), the reference for bpf/algo/htcp_math.h's fixed point.

/// H-TCP's parameters in real units (spec §5 "Parameters"). The names follow the BPF
/// program's tunables (bpf/algo/htcp.bpf.c), which hold the same values in ms and %.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HtcpParams {
    /// Δ_L, the low-speed threshold: Reno-like increase while Δ ≤ Δ_L, s (\[P0\] Table II: 1 s).
    pub delta_l_s: f64,
    /// Δ_B, the relative change of the epochs' maximum throughput beyond which β falls back
    /// to its lower bound, fraction (\[P0\] Table II: 0.2).
    pub delta_b: f64,
    /// Lower bound of β, and β after a throughput change or before adaptation starts
    /// (spec §5, \[LINUX\] `BETA_MIN`: 0.5).
    pub beta_min: f64,
    /// Upper bound of β (\[P0\] §IV-C: 0.8).
    pub beta_max: f64,
    /// A fixed β that overrides the adaptation (\[P2\]'s variant, 0.8 there); `None` is the
    /// spec's `fixed_beta = 0` (adaptive).
    pub fixed_beta: Option<f64>,
    /// Scale f_α by S(T_min) (spec §5, \[LINUX\] `use_rtt_scaling`: on).
    pub use_rtt_scaling: bool,
    /// T_ref of S = clamp(T_min/T_ref, lo, hi), s (spec §5 \[CHOICE\]: 0.1 s).
    pub rtt_ref_s: f64,
    /// Lower clamp of S (spec §5: 0.1).
    pub rtt_scale_min: f64,
    /// Upper clamp of S (spec §5: 2).
    pub rtt_scale_max: f64,
    /// Fall back to β = `beta_min` when the throughput changes by more than Δ_B
    /// (spec §5, \[LINUX\] `use_bandwidth_switch`: on).
    pub use_bandwidth_switch: bool,
    /// Adaptive β needs T_min strictly above this, s (spec §5 \[LINUX\]: 10 ms).
    pub adaptive_min_rtt_s: f64,
}

impl Default for HtcpParams {
    /// The spec §5 / \[P0\] Table II defaults (Linux-compatible RTT scaling, adaptive β).
    fn default() -> Self {
        Self {
            delta_l_s: 1.0,
            delta_b: 0.2,
            beta_min: 0.5,
            beta_max: 0.8,
            fixed_beta: None,
            use_rtt_scaling: true,
            rtt_ref_s: 0.1,
            rtt_scale_min: 0.1,
            rtt_scale_max: 2.0,
            use_bandwidth_switch: true,
            adaptive_min_rtt_s: 0.010,
        }
    }
}

/// The fraction of T_max − T_min kept at each congestion event (spec §5 "T_max fading").
pub const TMAX_FADE: f64 = 0.95;

/// The increase factor f_α(Δ), dimensionless (spec §5 "Increase function", \[P0\] §IV-C):
/// `f̄ = 1` for Δ ≤ Δ_L, else `f̄ = 1 + 10(Δ−Δ_L) + 0.25(Δ−Δ_L)²` (Δ in s); with RTT
/// scaling, `f = max(f̄·S, 1)` with `S = clamp(T_min/T_ref, lo, hi)`, applied to the whole
/// factor, also for Δ ≤ Δ_L (the spec's Linux-compatible form).
///
/// `delta_s`: time since the last congestion event, s. `tmin_s`: minimum RTT, s; 0 means
/// no RTT sample yet, and then nothing is scaled (the spec is silent; Linux scales only
/// when `minRTT` is set).
pub fn factor(delta_s: f64, tmin_s: f64, p: &HtcpParams) -> f64 {
    let d = delta_s - p.delta_l_s;
    let f_bar = if d > 0.0 {
        1.0 + 10.0 * d + 0.25 * d * d
    } else {
        1.0
    };
    if !p.use_rtt_scaling || tmin_s <= 0.0 || p.rtt_ref_s <= 0.0 {
        return f_bar;
    }
    let s = (tmin_s / p.rtt_ref_s).clamp(p.rtt_scale_min, p.rtt_scale_max);
    (f_bar * s).max(1.0)
}

/// The additive increase α = 2(1 − β)·f_α, packets per RTT (spec §5 "ACK (CA)", \[P0\] §IV-C):
/// the factor 2(1 − β) keeps (α, β) as TCP-friendly as Reno's (1, 0.5) at low speed.
pub fn alpha(factor: f64, beta: f64) -> f64 {
    2.0 * (1.0 - beta) * factor
}

/// Whether the epochs' maximum throughput changed by more than Δ_B:
/// `|B(k+1) − B(k)| / B(k) > Δ_B` (spec §5 "Backoff factor"). With no previous epoch
/// (B(k) = 0) any throughput is an (infinite) change, and none is none.
fn throughput_changed(maxb: f64, old_maxb: f64, delta_b: f64) -> bool {
    if old_maxb <= 0.0 {
        return maxb > 0.0;
    }
    (maxb - old_maxb).abs() / old_maxb > delta_b
}

/// The backoff factor β at a congestion event, dimensionless (spec §5 "Backoff factor",
/// \[P0\] §IV-C):
/// - a fixed β (`p.fixed_beta`, \[P2\]) overrides everything and leaves `modeswitch` alone;
/// - with the bandwidth switch on, `|B(k+1) − B(k)| / B(k) > Δ_B` gives β = `beta_min` and
///   clears `modeswitch` (adaptive mode is left);
/// - otherwise, if `modeswitch` is set, T_min > `adaptive_min_rtt_s` and T_max > 0,
///   β = clamp(T_min/T_max, `beta_min`, `beta_max`);
/// - otherwise β = `beta_min` and `modeswitch` is set (adaptation may start next time).
///
/// `maxb` = B(k+1), the maximum throughput of the epoch that just ended, and `old_maxb` =
/// B(k), the previous epoch's, packets/s. `tmin_s`, `tmax_s`: minimum and maximum RTT, s.
pub fn beta(
    maxb: f64,
    old_maxb: f64,
    modeswitch: &mut bool,
    tmin_s: f64,
    tmax_s: f64,
    p: &HtcpParams,
) -> f64 {
    if let Some(fixed) = p.fixed_beta {
        return fixed;
    }
    if p.use_bandwidth_switch && throughput_changed(maxb, old_maxb, p.delta_b) {
        *modeswitch = false;
        return p.beta_min;
    }
    if *modeswitch && tmin_s > p.adaptive_min_rtt_s && tmax_s > 0.0 {
        (tmin_s / tmax_s).clamp(p.beta_min, p.beta_max)
    } else {
        *modeswitch = true;
        p.beta_min
    }
}

/// T_max after a congestion event, s (spec §5 "T_max fading", \[LINUX\]):
/// `T_max ← T_min + 0.95·(T_max − T_min)`. Left alone while there is no RTT sample
/// (T_min = 0) or nothing to fade (T_max ≤ T_min), as Linux does.
pub fn fade_tmax(tmin_s: f64, tmax_s: f64) -> f64 {
    if tmin_s <= 0.0 || tmax_s <= tmin_s {
        return tmax_s;
    }
    tmin_s + TMAX_FADE * (tmax_s - tmin_s)
}

/// ssthresh after a loss, packets: `max(β·w, 2)` (spec §5 "Loss", \[P0\] §IV-C), `cwnd` = w
/// in packets.
pub fn ssthresh(cwnd: f64, beta: f64) -> f64 {
    (beta * cwnd).max(2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    // These tests run the C that the BPF program runs over grids of inputs and check it
    // against the model within bounds derived from its fixed-point resolution and its
    // documented truncations. build.rs compiles bpf/algo/htcp_math.h unchanged for the host
    // (crate::math); fixed point
    // is << 10 (1.0 == 1024).


    /// One unit in the last place of the fixed point: 1/1024.
    const ULP: f64 = 1.0 / 1024.0;
    const FP_ONE: u32 = 1024;

    /// The parameters as htcp.bpf.c hands them to htcp_math.h: from its tunables in ms and
    /// % (PCT_TO_FP truncates, so 0.8 is 819/1024 and 0.1 is 102/1024): htcp_math.h's
    /// `struct htcp_params`, as htcp.bpf.c's `htcp_params_get` fills it.
    type CParams = crate::math::htcp_params;

    fn pct(x: f64) -> u32 {
        (x * 100.0).round() as u32
    }

    /// htcp.bpf.c's `PCT_TO_FP(p)`.
    fn pct_to_fp(pct: u32) -> u32 {
        (pct << 10) / 100
    }

    fn ms(x_s: f64) -> u32 {
        (x_s * 1e3).round() as u32
    }

    impl CParams {
        fn of(p: &HtcpParams) -> Self {
            Self {
                delta_l_us: u64::from(ms(p.delta_l_s)) * 1000,
                delta_b_pct: pct(p.delta_b),
                beta_lo: pct_to_fp(pct(p.beta_min)),
                beta_hi: pct_to_fp(pct(p.beta_max)),
                fixed_beta_fp: p.fixed_beta.map_or(0, |b| pct_to_fp(pct(b))),
                use_rtt_scaling: p.use_rtt_scaling.into(),
                rtt_ref_us: ms(p.rtt_ref_s) * 1000,
                s_lo: pct_to_fp(pct(p.rtt_scale_min)),
                s_hi: pct_to_fp(pct(p.rtt_scale_max)),
                use_bandwidth_switch: p.use_bandwidth_switch.into(),
                tmin_adaptive_us: ms(p.adaptive_min_rtt_s) * 1000,
            }
        }
    }

    fn c_factor(delta_us: u64, tmin_us: u32, c: &CParams) -> u32 {
        // SAFETY: `c` is a live, initialised struct the function only reads.
        unsafe { crate::math::htcp_factor_fp(delta_us, tmin_us, c) }
    }

    fn c_alpha(factor_fp: u32, beta_fp: u32) -> u32 {
        // SAFETY: a pure function of integers, no pointers.
        unsafe { crate::math::htcp_alpha_fp(factor_fp, beta_fp) }
    }

    /// β << 10 and the new mode-switch flag.
    fn c_beta(
        maxb: u32,
        old_maxb: u32,
        modeswitch: bool,
        tmin_us: u32,
        tmax_us: u32,
        c: &CParams,
    ) -> (u32, bool) {
        let e = crate::math::htcp_event {
            maxb,
            old_maxb,
            tmin_us,
            tmax_us,
        };
        let mut ms = u8::from(modeswitch);
        // SAFETY: `e` and `c` are live, initialised structs the function only reads; `ms`
        // is a live, exclusively borrowed u8 for the duration of the call, which only
        // reads and writes that byte.
        let b = unsafe { crate::math::htcp_beta_fp(&e, &mut ms, c) };
        assert!(ms <= 1, "modeswitch must stay a bool, got {ms}");
        (b, ms == 1)
    }

    fn c_fade_tmax(tmin_us: u32, tmax_us: u32) -> u32 {
        // SAFETY: a pure function of integers, no pointers.
        unsafe { crate::math::htcp_fade_tmax(tmin_us, tmax_us) }
    }

    fn c_ssthresh(cwnd: u32, beta_fp: u32) -> u32 {
        // SAFETY: a pure function of integers, no pointers.
        unsafe { crate::math::htcp_fp_ssthresh(cwnd, beta_fp) }
    }

    fn fp(x: u32) -> f64 {
        f64::from(x) * ULP
    }

    fn secs(us: u64) -> f64 {
        us as f64 / 1e6
    }

    /// Δ, µs, 0..=600 s: every 10 ms up to 3 s; every µs within ±1 ms of Δ_L = 1 s and
    /// Δ_L + k ms + 999 µs (just below the quadratic term's ms truncation step) for
    /// k < 200; then 3..600 s every 250 ms plus a sub-ms offset that varies; and 600 s.
    fn delta_grid_us() -> Vec<u64> {
        let dl = 1_000_000u64;
        let mut v: Vec<u64> = (0..=300).map(|k| k * 10_000).collect();
        v.extend((dl - 1000)..=(dl + 1000));
        v.extend((0..200).map(|k| dl + k * 1000 + 999));
        v.extend((0..2388).map(|k| 3_000_000 + k * 250_000 + (k * 7919) % 1000));
        v.push(600_000_000);
        v.sort_unstable();
        v.dedup();
        assert!(*v.last().unwrap() == 600_000_000 && v[0] == 0);
        v
    }

    /// T_min, µs, 1 ms..=400 ms, with both sides of S's clamps (10 ms, 200 ms), of T_ref
    /// (100 ms) and of the 10 ms needed for adaptive β.
    const TMINS_US: [u32; 20] = [
        1000, 2000, 5000, 9999, 10_000, 10_001, 12_345, 20_000, 33_333, 50_000, 99_999, 100_000,
        100_001, 150_000, 199_999, 200_000, 200_001, 250_000, 333_333, 400_000,
    ];

    /// β << 10 from 0.5 to 0.8: exactly representable, so the model sees what the C sees.
    const BETAS_FP: [u32; 7] = [512, 563, 614, 666, 717, 768, 819];

    /*
     * Error bound of the C's f_α (spec §5 "Increase function"), in units of 1.0; one
     * ULP = 1/1024. With d = Δ − Δ_L > 0 (s) the C computes
     *     f̄_c = 1 + ⌊10·1024·d⌋/1024 + ⌊0.25·1024·d_ms²⌋/1024,  d_ms = d truncated to ms,
     * so f̄ − f̄_c ∈ [0, e_f̄) with e_f̄ = 2 ULP (the two floors) + 0.0005·d
     * (0.25·(d² − (d − 0.001)²) ≤ 0.0005·d: the ms truncation). With RTT scaling,
     *     S_c = clamp(⌊1024·T_min/T_ref⌋, ⌊102.4⌋, 2048)/1024,  S − S_c ∈ [0, 1 ULP)
     * (the floor, and the 0.1 clamp stored as 102/1024), and f_c = max(⌊1024·f̄_c·S_c⌋/1024, 1),
     * so, max(·, 1) being 1-Lipschitz,
     *     0 ≤ f − f_c ≤ e_f̄·S + f̄·ULP + ULP.
     * Every step rounds down, hence the one-sided check. Relative to f this is about
     * 1/(1024·S) (≤ 1 % at S = 0.1: S has 10 bits) plus 5e-5 (the ms truncation) over an
     * absolute floor of (2S + 1) ULP. Without scaling it is e_f̄ alone.
     */
    fn factor_bound(delta_s: f64, tmin_s: f64, p: &HtcpParams) -> f64 {
        let d = (delta_s - p.delta_l_s).max(0.0);
        let e_fbar = if d > 0.0 { 2.0 * ULP + 0.0005 * d } else { 0.0 };
        if !p.use_rtt_scaling || tmin_s <= 0.0 {
            return e_fbar;
        }
        let f_bar = factor(delta_s, 0.0, p);
        let s = (tmin_s / p.rtt_ref_s).clamp(p.rtt_scale_min, p.rtt_scale_max);
        e_fbar * s + f_bar * ULP + ULP
    }

    /// Slack for the model's own f64 rounding in one-sided checks.
    const F64_SLACK: f64 = 1e-9;

    #[test]
    fn factor_matches_the_model_over_a_grid_of_delta_and_tmin() {
        let deltas = delta_grid_us();
        let (mut checked, mut max_rel, mut max_of_bound) = (0usize, 0f64, 0f64);
        let (mut clamped_lo, mut clamped_hi, mut floored, mut low_speed) = (0, 0, 0, 0);
        for scaling in [false, true] {
            let p = HtcpParams {
                use_rtt_scaling: scaling,
                ..HtcpParams::default()
            };
            let c = CParams::of(&p);
            for &tmin_us in &TMINS_US {
                let tmin_s = secs(tmin_us.into());
                for &delta_us in &deltas {
                    let delta_s = secs(delta_us);
                    let m = factor(delta_s, tmin_s, &p);
                    let got = fp(c_factor(delta_us, tmin_us, &c));
                    let bound = factor_bound(delta_s, tmin_s, &p);
                    let err = m - got;
                    assert!(
                        err >= -F64_SLACK * m && err <= bound,
                        "f_α(Δ = {delta_us} us, Tmin = {tmin_us} us, scaling {scaling}): \
                         C {got}, model {m}, error {err} outside [0, {bound}]"
                    );
                    checked += 1;
                    max_rel = max_rel.max(err.abs() / m);
                    if bound > 0.0 {
                        max_of_bound = max_of_bound.max(err / bound);
                    }
                    let s = tmin_s / p.rtt_ref_s;
                    if scaling && s < p.rtt_scale_min {
                        clamped_lo += 1;
                    }
                    if scaling && s > p.rtt_scale_max {
                        clamped_hi += 1;
                    }
                    if scaling && m == 1.0 && delta_s > p.delta_l_s {
                        floored += 1;
                    }
                    if delta_s <= p.delta_l_s {
                        low_speed += 1;
                    }
                }
            }
        }
        eprintln!(
            "f_α: {checked} points, max relative error {max_rel:.3e}, max error/bound {max_of_bound:.3}"
        );
        assert_eq!(checked, 2 * TMINS_US.len() * deltas.len());
        assert!(deltas.len() > 4500, "Δ grid too small: {}", deltas.len());
        assert!(clamped_lo > 0 && clamped_hi > 0 && floored > 0 && low_speed > 0);
    }

    /*
     * α = 2(1 − β)·f_α (spec §5 "ACK (CA)"). With β = β_fp/1024 exact, the C's
     * α_c = max(⌊2·(1024 − β_fp)·f_c⌋, 1)/1024 (f_c << 10) is below the model by at most
     * 2(1 − β)·(f's bound) + 1 ULP (the floor); the floor at 1/1024 never acts here since
     * α ≥ 2·0.2·1 = 0.4.
     */
    #[test]
    fn alpha_matches_the_model_over_a_grid_of_delta_and_tmin() {
        let deltas = delta_grid_us();
        let (mut checked, mut max_rel, mut max_abs) = (0usize, 0f64, 0f64);
        for scaling in [false, true] {
            let p = HtcpParams {
                use_rtt_scaling: scaling,
                ..HtcpParams::default()
            };
            let c = CParams::of(&p);
            for &tmin_us in &TMINS_US {
                let tmin_s = secs(tmin_us.into());
                for &delta_us in &deltas {
                    let delta_s = secs(delta_us);
                    let f_fp = c_factor(delta_us, tmin_us, &c);
                    let f = factor(delta_s, tmin_s, &p);
                    let f_bound = factor_bound(delta_s, tmin_s, &p);
                    for &beta_fp in &BETAS_FP {
                        let b = fp(beta_fp);
                        let m = alpha(f, b);
                        let got = fp(c_alpha(f_fp, beta_fp));
                        let bound = 2.0 * (1.0 - b) * f_bound + ULP;
                        let err = m - got;
                        assert!(
                            err >= -F64_SLACK * m && err <= bound,
                            "α(Δ = {delta_us} us, Tmin = {tmin_us} us, β = {b}, scaling \
                             {scaling}): C {got}, model {m}, error {err} outside [0, {bound}]"
                        );
                        checked += 1;
                        max_rel = max_rel.max(err.abs() / m);
                        max_abs = max_abs.max(err.abs());
                    }
                }
            }
        }
        eprintln!(
            "α: {checked} points, max relative error {max_rel:.3e}, max absolute {max_abs:.3e}"
        );
        assert_eq!(checked, 2 * TMINS_US.len() * deltas.len() * BETAS_FP.len());
        assert!(checked > 500_000);
    }

    #[test]
    fn alpha_is_one_for_delta_below_delta_l_without_rtt_scaling() {
        let p = HtcpParams {
            use_rtt_scaling: false,
            ..HtcpParams::default()
        };
        let c = CParams::of(&p);
        let deltas: Vec<u64> = (0..=1_000_000)
            .step_by(997)
            .chain([999_999, 1_000_000])
            .collect();
        let mut checked = 0;
        for &delta_us in &deltas {
            for tmin_us in [0].into_iter().chain(TMINS_US) {
                let f = factor(secs(delta_us), secs(tmin_us.into()), &p);
                assert_eq!(f, 1.0);
                assert_eq!(alpha(f, 0.5), 1.0, "Reno's (α, β) = (1, 0.5)");
                let f_fp = c_factor(delta_us, tmin_us, &c);
                assert_eq!(f_fp, FP_ONE, "Δ = {delta_us} us, Tmin = {tmin_us} us");
                assert_eq!(c_alpha(f_fp, FP_ONE / 2), FP_ONE);
                checked += 1;
            }
        }
        assert_eq!(checked, deltas.len() * (TMINS_US.len() + 1));
        assert!(checked > 20_000);
    }

    #[test]
    fn rtt_scaling_applies_below_delta_l_too() {
        // f = max(1·S, 1): S = 2 for Tmin ≥ 200 ms, S = 1.5 at 150 ms, the floor below 100 ms.
        let p = HtcpParams::default();
        let c = CParams::of(&p);
        for (tmin_us, want) in [(400_000, 2.0), (150_000, 1.5), (100_000, 1.0), (5000, 1.0)] {
            for delta_us in [0, 500_000, 1_000_000] {
                let m = factor(secs(delta_us), secs(tmin_us.into()), &p);
                assert!((m - want).abs() < F64_SLACK, "model {m}, want {want}");
                assert_eq!(
                    fp(c_factor(delta_us, tmin_us, &c)),
                    want,
                    "Tmin = {tmin_us} us"
                );
            }
        }
    }

    /// htcp_math.h caps Δ − Δ_L at 1000 s (HTCP_DELTA_CAP_US) so that f_α fits a u32: a
    /// documented departure from spec §5, where f̄ grows without bound.
    #[test]
    fn factor_stops_growing_1000_s_after_delta_l() {
        let p = HtcpParams::default();
        let c = CParams::of(&p);
        let cap_s = p.delta_l_s + 1000.0;
        for tmin_us in [1000, 50_000, 400_000] {
            let tmin_s = secs(tmin_us.into());
            for delta_us in [
                1_000_000_000,
                1_001_000_000,
                1_001_000_001,
                1_500_000_000,
                86_400_000_000,
            ] {
                let capped_s = secs(delta_us).min(cap_s);
                let m = factor(capped_s, tmin_s, &p);
                let err = m - fp(c_factor(delta_us, tmin_us, &c));
                let bound = factor_bound(capped_s, tmin_s, &p);
                assert!(
                    err >= -F64_SLACK * m && err <= bound,
                    "Δ = {delta_us} us: {err} vs {bound}"
                );
            }
        }
    }

    /// Regression: with S up to 100 (an earlier parameter range) f̄·S·1024 wrapped
    /// past 2³² in htcp_factor_fp. The loader now caps S at 10 (rtt_scale_max_pct
    /// <= 1000), where the largest f_α fits, and the C saturates instead of wrapping.
    #[test]
    fn factor_does_not_wrap_with_the_largest_allowed_rtt_scale() {
        let p = HtcpParams {
            rtt_ref_s: 0.010,
            rtt_scale_max: 10.0,
            ..HtcpParams::default()
        };
        let c = CParams::of(&p);
        let tmin_us = 200_000;
        for delta_us in [
            300_000_000u64,
            800_000_000,
            897_000_000,
            950_000_000,
            1_001_000_000,
        ] {
            let (delta_s, tmin_s) = (secs(delta_us), secs(tmin_us.into()));
            let m = factor(delta_s, tmin_s, &p);
            let got = fp(c_factor(delta_us, tmin_us, &c));
            let bound = factor_bound(delta_s, tmin_s, &p);
            eprintln!("Δ = {delta_us} us, Tmin = {tmin_us} us, S = 10: C {got}, model {m}");
            assert!(
                (m - got).abs() <= bound,
                "Δ = {delta_us} us: C {got}, model {m}"
            );
        }
    }

    #[test]
    fn factor_is_unscaled_before_the_first_rtt_sample() {
        let p = HtcpParams::default();
        let c = CParams::of(&p);
        for delta_us in [0, 1_000_000, 1_500_000, 11_000_000, 600_000_000] {
            let m = factor(secs(delta_us), 0.0, &p);
            let unscaled = factor(
                secs(delta_us),
                0.0,
                &HtcpParams {
                    use_rtt_scaling: false,
                    ..p
                },
            );
            assert_eq!(m, unscaled);
            let err = m - fp(c_factor(delta_us, 0, &c));
            assert!(
                err >= 0.0 && err <= factor_bound(secs(delta_us), 0.0, &p),
                "Δ = {delta_us} us: {err}"
            );
        }
    }

    /// One β case: throughputs (packets/s), the incoming flag, T_min and T_max (µs).
    #[derive(Debug, Clone, Copy)]
    struct BetaCase {
        maxb: u32,
        old_maxb: u32,
        modeswitch: bool,
        tmin_us: u32,
        tmax_us: u32,
    }

    /// T_max, µs, for a T_min: T_min ≤ T_max ≤ 2 s around the ratios where β clamps (0.8,
    /// 0.5; exact where T_min divides), and T_max = 0 (no sample).
    fn tmaxes_us(tmin: u32) -> Vec<u32> {
        let mut v: Vec<u32> = [
            tmin,
            tmin + 1,
            tmin * 10 / 9,
            tmin * 5 / 4 - 1,
            tmin * 5 / 4,
            tmin * 5 / 4 + 1,
            tmin * 4 / 3,
            tmin * 3 / 2,
            tmin * 2 - 1,
            tmin * 2,
            tmin * 2 + 1,
            tmin * 3,
            tmin + 20_000,
            500_000,
            1_000_000,
            2_000_000,
        ]
        .into_iter()
        .filter(|&t| t >= tmin && t <= 2_000_000)
        .collect();
        v.push(0);
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Pairs (B(k+1), B(k)), packets/s: B(k+1) = ⌊B(k)·k/100⌋ for k = 50..=150, so ratios
    /// 0.5..1.5 on both sides of 0.8 and 1.2. The exact ties (ratio 0.8 or 1.2, where
    /// B(k) is a multiple of 5) are kept on purpose: the spec's `> Δ_B` and the C's
    /// `now < lo || now > hi` both call them no change, and for integers ≤ 10⁶ the model's
    /// f64 quotient cannot land on the wrong side of 0.2 (a non-tie is ≥ 1/(5·B(k)) away,
    /// far more than f64's rounding). B(k) = 0 (first epoch) comes with B(k+1) = 0, 1, 1000.
    fn throughput_pairs() -> Vec<(u32, u32)> {
        let mut v = vec![(0, 0), (1, 0), (1000, 0)];
        for old in [1u32, 5, 97, 1000, 12_345, 250_000, 1_000_000] {
            for k in 50..=150u64 {
                v.push(((u64::from(old) * k / 100) as u32, old));
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    fn beta_grid() -> Vec<BetaCase> {
        let pairs = throughput_pairs();
        let mut v = Vec::new();
        for &tmin_us in &TMINS_US {
            for tmax_us in tmaxes_us(tmin_us) {
                for &(maxb, old_maxb) in &pairs {
                    for modeswitch in [false, true] {
                        v.push(BetaCase {
                            maxb,
                            old_maxb,
                            modeswitch,
                            tmin_us,
                            tmax_us,
                        });
                    }
                }
            }
        }
        v
    }

    /// Runs one case through the model and the C: ((β, flag) model, (β, flag) C).
    fn both_betas(k: &BetaCase, p: &HtcpParams) -> ((f64, bool), (f64, bool)) {
        let mut ms = k.modeswitch;
        let m = beta(
            f64::from(k.maxb),
            f64::from(k.old_maxb),
            &mut ms,
            secs(k.tmin_us.into()),
            secs(k.tmax_us.into()),
            p,
        );
        let (b, c_ms) = c_beta(
            k.maxb,
            k.old_maxb,
            k.modeswitch,
            k.tmin_us,
            k.tmax_us,
            &CParams::of(p),
        );
        ((m, ms), (fp(b), c_ms))
    }

    /*
     * β (spec §5 "Backoff factor"): the branch and the new mode-switch flag must agree
     * exactly. The value: β_lo = 512/1024 is exact; the adaptive β is
     * clamp(⌊1024·T_min/T_max⌋, 512, 819)/1024, so model − C ∈ [0, 1 ULP) (the floor, and
     * 0.8 stored as 819/1024 = 0.7998).
     */
    #[test]
    fn beta_matches_the_model_over_a_grid_of_rtts_and_throughput_changes() {
        let grid = beta_grid();
        let (mut checked, mut max_err) = (0usize, 0f64);
        let (mut switched, mut adaptive, mut entering, mut at_lo, mut at_hi) = (0, 0, 0, 0, 0);
        for bw in [false, true] {
            let p = HtcpParams {
                use_bandwidth_switch: bw,
                ..HtcpParams::default()
            };
            for k in &grid {
                let ((m, m_ms), (got, c_ms)) = both_betas(k, &p);
                assert_eq!(
                    m_ms, c_ms,
                    "modeswitch differs for {k:?}, bandwidth switch {bw}"
                );
                let err = m - got;
                assert!(
                    (-F64_SLACK..ULP).contains(&err),
                    "β for {k:?}, bandwidth switch {bw}: C {got}, model {m}, error {err}"
                );
                checked += 1;
                max_err = max_err.max(err);
                match (k.modeswitch, m_ms) {
                    (true, false) => switched += 1,
                    (true, true) => {
                        adaptive += 1;
                        at_lo += usize::from(m == p.beta_min);
                        at_hi += usize::from(m == p.beta_max);
                    }
                    (false, true) => entering += 1,
                    (false, false) => switched += 1,
                }
            }
        }
        eprintln!(
            "β: {checked} points ({switched} bandwidth switches, {adaptive} adaptive of which \
             {at_lo} at 0.5 and {at_hi} at 0.8, {entering} entering adaptive mode), max error {max_err:.3e}"
        );
        assert_eq!(checked, 2 * grid.len());
        assert!(checked > 200_000);
        assert!(switched > 0 && adaptive > 0 && entering > 0 && at_lo > 0 && at_hi > 0);
    }

    #[test]
    fn beta_stays_between_half_and_0_8() {
        let grid = beta_grid();
        let p = HtcpParams::default();
        for k in &grid {
            let ((m, _), (got, _)) = both_betas(k, &p);
            assert!((0.5..=0.8).contains(&m), "model β {m} for {k:?}");
            assert!(
                (512.0..=819.0).contains(&(got * 1024.0)),
                "C β {got} for {k:?}"
            );
        }
        assert!(grid.len() > 100_000);
    }

    #[test]
    fn throughput_change_over_20_percent_forces_beta_half() {
        let p = HtcpParams::default();
        let (mut forced, mut kept) = (0, 0);
        for k in beta_grid() {
            // the C's and Linux's test, in integers: 5·B(k+1) ∉ [4·B(k), 6·B(k)]
            let (now, old) = (5 * u64::from(k.maxb), u64::from(k.old_maxb));
            let changed = now < 4 * old || now > 6 * old;
            // only cases where adaptation gives more than 0.5, in the model (T_min/T_max >
            // 0.5) and in the C (⌊1024·T_min/T_max⌋ ≥ 513)
            let adaptive_above_half = k.modeswitch
                && k.tmin_us > 10_000
                && k.tmax_us > 0
                && 1024 * u64::from(k.tmin_us) >= 513 * u64::from(k.tmax_us);
            if !adaptive_above_half {
                continue;
            }
            let ((m, m_ms), (got, c_ms)) = both_betas(&k, &p);
            if changed {
                assert_eq!((m, m_ms), (0.5, false), "model, {k:?}");
                assert_eq!((got, c_ms), (0.5, false), "C, {k:?}");
                forced += 1;
            } else {
                assert!(
                    m > 0.5 && got > 0.5 && m_ms && c_ms,
                    "{k:?}: model {m}, C {got}"
                );
                kept += 1;
            }
        }
        eprintln!("bandwidth switch: {forced} forced to 0.5, {kept} kept adaptive");
        assert!(forced > 10_000 && kept > 10_000, "{forced} / {kept}");
    }

    #[test]
    fn fixed_beta_overrides_adaptation() {
        let p = HtcpParams {
            fixed_beta: Some(0.8),
            ..HtcpParams::default()
        };
        let grid = beta_grid();
        for k in &grid {
            let ((m, m_ms), (got, c_ms)) = both_betas(k, &p);
            assert_eq!(m, 0.8, "{k:?}");
            assert_eq!(got, 819.0 / 1024.0, "{k:?}");
            assert_eq!(
                (m_ms, c_ms),
                (k.modeswitch, k.modeswitch),
                "flag untouched: {k:?}"
            );
        }
        assert!(grid.len() > 100_000);
    }

    /*
     * T_max fading (spec §5): the C keeps ⌊0.95·(T_max − T_min)⌋ µs, so one step is
     * below the model by [0, 1) µs; since each later step shrinks an earlier error by
     * 0.95, n steps stay within Σ 0.95^i < 20 µs. The C reaches T_min exactly (the gap
     * g → ⌊0.95·g⌋ strictly decreases to 0).
     */
    #[test]
    fn tmax_fades_towards_tmin() {
        let mut checked = 0;
        for &tmin_us in &TMINS_US {
            for tmax_us in tmaxes_us(tmin_us).into_iter().filter(|&t| t > 0) {
                let (mut c, mut m) = (tmax_us, secs(tmax_us.into()));
                let tmin_s = secs(tmin_us.into());
                let one = c_fade_tmax(tmin_us, c);
                let err1 = fade_tmax(tmin_s, m) * 1e6 - f64::from(one);
                assert!(
                    (-1e-6..1.0).contains(&err1),
                    "one step from {tmax_us}: {err1} us"
                );
                for step in 0..400 {
                    let (c2, m2) = (c_fade_tmax(tmin_us, c), fade_tmax(tmin_s, m));
                    assert!(
                        c2 <= c && c2 >= tmin_us,
                        "C went {c} -> {c2} (Tmin {tmin_us})"
                    );
                    assert!(m2 <= m && m2 >= tmin_s, "model went {m} -> {m2}");
                    let err = m2 * 1e6 - f64::from(c2);
                    assert!(
                        (-1e-6..20.0).contains(&err),
                        "step {step} from {tmax_us}: {err} us"
                    );
                    (c, m) = (c2, m2);
                }
                assert_eq!(c, tmin_us);
                assert!((m - tmin_s) * 1e6 < 0.01);
                checked += 1;
            }
        }
        assert!(checked > 200, "{checked}");
        // nothing to fade: no sample yet, or T_max == T_min
        for (tmin_us, tmax_us) in [(0, 0), (0, 50_000), (50_000, 50_000), (50_000, 0)] {
            assert_eq!(c_fade_tmax(tmin_us, tmax_us), tmax_us);
            assert_eq!(
                fade_tmax(secs(tmin_us.into()), secs(tmax_us.into())),
                secs(tmax_us.into())
            );
        }
    }

    /// cwnd, packets: small windows one by one, then large ones up to 10⁹.
    fn cwnd_grid() -> Vec<u32> {
        let mut v: Vec<u32> = (0..=2000).collect();
        v.extend(
            (0..=60)
                .map(|k| (1.4f64.powi(k) * 2001.0) as u32)
                .filter(|&w| w <= 1_000_000_000),
        );
        v
    }

    /*
     * ssthresh = max(β·w, 2) (spec §5 "Loss"). With β = β_fp/1024 exact and w an integer
     * the C's ⌊w·β_fp/1024⌋ is the model rounded down to a whole segment: exact equality
     * with ⌊model⌋ (products < 2⁵³, so f64 is exact), over every β_fp in [512, 819].
     */
    #[test]
    fn ssthresh_is_beta_times_cwnd_rounded_down() {
        let cwnds = cwnd_grid();
        let mut checked = 0usize;
        for beta_fp in 512..=819u32 {
            for &w in &cwnds {
                let m = ssthresh(f64::from(w), fp(beta_fp));
                assert_eq!(
                    f64::from(c_ssthresh(w, beta_fp)),
                    m.floor(),
                    "w = {w}, β = {beta_fp}/1024"
                );
                checked += 1;
            }
        }
        assert_eq!(checked, 308 * cwnds.len());
        assert!(checked > 600_000);
    }

    #[test]
    fn ssthresh_never_below_two() {
        for beta_fp in 0..=FP_ONE {
            for w in 0..=10u32 {
                assert!(c_ssthresh(w, beta_fp) >= 2, "w = {w}, β = {beta_fp}/1024");
                assert!(ssthresh(f64::from(w), fp(beta_fp)) >= 2.0);
            }
        }
    }

    #[test]
    fn defaults_are_the_papers_and_reach_the_c_as_htcp_bpf_c_passes_them() {
        let c = CParams::of(&HtcpParams::default());
        assert_eq!(
            (
                c.delta_l_us,
                c.delta_b_pct,
                c.rtt_ref_us,
                c.tmin_adaptive_us
            ),
            (1_000_000, 20, 100_000, 10_000)
        );
        assert_eq!((c.beta_lo, c.beta_hi, c.fixed_beta_fp), (512, 819, 0));
        assert_eq!(
            (c.s_lo, c.s_hi, c.use_rtt_scaling, c.use_bandwidth_switch),
            (102, 2048, 1, 1)
        );
    }
    /// linux_exact: α = 2 f (128 - β) with tcp_htcp.c's integer f at HZ = 250: Δ = 3 s is
    /// 750 jiffies, 500 past Δ_L, f = 1 + (5000 + 250² / 250) / 250 = 1 + 21 = 22; with
    /// minRTT = 25 jiffies (100 ms) the RTT scaling is 1.
    #[test]
    fn linux_alpha_is_the_modules_integer_formula() {
        let mut ca = crate::math::cctl_htcp_ca {
            beta: 64 << 3,
            last_cong_j: 10_000,
            ..Default::default()
        };
        // SAFETY: a live, exclusively borrowed state.
        unsafe { crate::math::htcp_linux_alpha_update(&mut ca, 10_750, 250, 25, 1) };
        assert_eq!(ca.alpha >> 3, 2 * 22 * 64);
        // Below Δ_L f = 1; at minRTT = 50 jiffies (200 ms) S = 2 doubles it.
        // SAFETY: as above.
        unsafe { crate::math::htcp_linux_alpha_update(&mut ca, 10_100, 250, 50, 1) };
        assert_eq!(ca.alpha >> 3, 2 * 2 * 64);
    }

    /// linux_exact: the counter grows by the packets pkts_acked saw, tested before it
    /// grows; cwnd + 1 once (cnt · α) >> 7 >= cwnd, and the next ACK counts 1 packet.
    #[test]
    fn linux_cong_avoid_counts_pkts_acked_before_it_tests() {
        let mut ca = crate::math::cctl_htcp_ca {
            alpha: 128 << 3,
            beta: 64 << 3,
            pkts_acked: 2,
            last_cong_j: 0,
            ..Default::default()
        };
        let (mut cwnd, mut cnt) = (10u32, 9u32);
        // SAFETY: live, exclusively borrowed values.
        unsafe { crate::math::htcp_linux_cong_avoid(&mut ca, &mut cwnd, &mut cnt, 1000, 100, 250, 25, 1) };
        assert_eq!((cwnd, cnt, ca.pkts_acked), (10, 11, 1), "9 < 10: counted, not grown");
        // SAFETY: as above.
        unsafe { crate::math::htcp_linux_cong_avoid(&mut ca, &mut cwnd, &mut cnt, 1000, 100, 250, 25, 1) };
        assert_eq!((cwnd, cnt), (11, 0), "11 >= 10: +1 segment, the counter restarts");
    }

    /// `htcp@p2` ([P2]'s H-TCP against Cubic): whatever the RTTs and the epochs'
    /// throughputs, the C and the model back off to 0.8 (819/1024, PCT_TO_FP's truncation).
    #[test]
    fn p2_profile_backs_off_to_0_8_whatever_the_rtts_and_throughputs() {
        let v = crate::catalogue::find("htcp").unwrap().resolve_params_with(Some("p2"), &[]).unwrap();
        let p = HtcpParams {
            fixed_beta: Some(f64::from(v["fixed_beta_pct"]) / 100.0),
            ..HtcpParams::default()
        };
        let c = CParams::of(&p);
        let mut cases = 0;
        for tmin in [5_000u32, 20_000, 162_000] {
            for tmax in tmaxes_us(tmin) {
                for (maxb, old) in throughput_pairs() {
                    for ms in [false, true] {
                        let mut m = ms;
                        let want = beta(f64::from(maxb), f64::from(old), &mut m, secs(tmin.into()), secs(tmax.into()), &p);
                        assert_eq!(want, 0.8);
                        assert_eq!(c_beta(maxb, old, ms, tmin, tmax, &c).0, 819, "tmin {tmin} tmax {tmax}");
                        cases += 1;
                    }
                }
            }
        }
        assert!(cases > 50, "{cases}");
    }
}
