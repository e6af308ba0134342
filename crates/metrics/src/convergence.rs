//! M5 ε-convergence time of a new flow against an old one.

use serde::{Deserialize, Serialize};

use super::fairness::{throughput_ratio, ThroughputRatio};
use super::inputs::FlowSeries;
use super::params::{ConvergenceParams, ShortTermParams};
use super::series::{non_negative, positive, GRID_EPS};
use super::throughput::{avg_throughput_bps, ewma_grid};

/// M5 ε-convergence times of a new flow, in seconds after its start; `None` = NC (not converged
/// before the end of the run, or the reference could not be computed).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Convergence {
    /// Variant A (primary): first `û_new ≥ ε·ū_fair`, `ū_fair = (ū_old + ū_new)/2` over the
    /// last `reference_fraction` of the run, in seconds.
    pub a_s: Option<f64>,
    /// Variant B: first `û_new/û_old ≥ ε` (held for `b_hold_rtts` RTTs if set), in seconds.
    pub b_s: Option<f64>,
    /// Variant C (literal): first `û_new ≥ ε·ū_new`, ū_new over `[t_s, t_end]`, in seconds.
    pub c_s: Option<f64>,
    /// ū_fair of variant A, in bit/s.
    pub u_fair_bps: Option<f64>,
    /// ū_new of variant C, in bit/s.
    pub u_new_bps: Option<f64>,
    /// M3 over the final `final_fraction` of the run, flow 1 = old, flow 2 = new ([P0 caveat]).
    pub final_ratio: Option<ThroughputRatio>,
}

/// M5 ε-convergence time of `new` (started at `new.start_s`) against `old` in a run
/// `[0, run_end_s]`, all variants (A, B, C) of benchmarks.md §1 M5.
///
/// û is M2 ([`short_term_throughput`](super::short_term_throughput) with `st`) of each flow with its own `base_rtt_s`; only
/// grid times in `[new.start_s, run_end_s]` count. Variant B compares û_new and û_old at the
/// same grid times (both flows must have samples there) and needs û_new > 0; with a hold, the
/// ratio must stay ≥ ε at every grid time for `b_hold_rtts · new.base_rtt_s` seconds, inside
/// the data, and the time reported is the start of that stretch.
pub fn convergence_time(
    new: &FlowSeries,
    old: &FlowSeries,
    run_end_s: f64,
    p: &ConvergenceParams,
    st: &ShortTermParams,
) -> Convergence {
    let t_s = new.start_s;
    let ref_from = run_end_s * (1.0 - p.reference_fraction);
    let u_fair_bps = match (
        avg_throughput_bps(old, ref_from, run_end_s),
        avg_throughput_bps(new, ref_from, run_end_s),
    ) {
        (Some(a), Some(b)) => Some((a + b) / 2.0),
        _ => None,
    };
    let u_new_bps = avg_throughput_bps(new, t_s, run_end_s);
    let final_from = run_end_s * (1.0 - p.final_fraction);
    let final_ratio = match (
        avg_throughput_bps(old, final_from, run_end_s),
        avg_throughput_bps(new, final_from, run_end_s),
    ) {
        (Some(a), Some(b)) => Some(throughput_ratio(a, b)),
        _ => None,
    };

    let delta = st.delta_s;
    let in_run = |t: f64| t >= t_s - GRID_EPS && t <= run_end_s + GRID_EPS;
    let grid_new = ewma_grid(&new.points, new.base_rtt_s, st);
    let first_reaching = |reference: Option<f64>| -> Option<f64> {
        let threshold = p.eps * reference?;
        if !positive(threshold) {
            return None;
        }
        let (k0, values) = grid_new.as_ref()?;
        values.iter().enumerate().find_map(|(i, &u)| {
            let t = (k0 + i as i64) as f64 * delta;
            (in_run(t) && u >= threshold).then(|| (t - t_s).max(0.0))
        })
    };
    let a_s = first_reaching(u_fair_bps);
    let c_s = first_reaching(u_new_bps);

    let b_s = (|| {
        let (kn, vn) = grid_new.as_ref()?;
        let (ko, vo) = ewma_grid(&old.points, old.base_rtt_s, st)?;
        let hold_s = p.b_hold_rtts.map_or(0.0, |h| h * new.base_rtt_s);
        if !non_negative(hold_s) || !p.eps.is_finite() {
            return None;
        }
        let k_lo = (*kn).max(ko);
        let k_hi = (kn + vn.len() as i64).min(ko + vo.len() as i64) - 1;
        let mut streak: Option<f64> = None;
        for k in k_lo..=k_hi {
            let t = k as f64 * delta;
            if !in_run(t) {
                continue;
            }
            let (un, uo) = (vn[(k - kn) as usize], vo[(k - ko) as usize]);
            if un > 0.0 && un >= p.eps * uo {
                let start = *streak.get_or_insert(t);
                if t - start >= hold_s - GRID_EPS {
                    return Some((start - t_s).max(0.0));
                }
            } else {
                streak = None;
            }
        }
        None
    })();

    Convergence {
        a_s,
        b_s,
        c_s,
        u_fair_bps,
        u_new_bps,
        final_ratio,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{assert_some_close, piecewise_flow};
    use crate::CONVERGENCE_B_HOLD_RTTS;

    /// λ = 1 (RTT 0.1 ms): û is the rate of the last δ step, so crossings are exact.
    const INSTANT_RTT_S: f64 = 0.0001;

    #[test]
    fn convergence_variants_a_b_c_find_their_own_first_crossing() {
        // Reference [50, 100] s: both flows at 5 Mb/s, ū_fair = 5 → A needs û_new ≥ 4 Mb/s,
        // first at 20.1 s. B: 3.5/4 = 0.875 ≥ 0.8 first at 12.1 s. C: ū_new over [10, 100] =
        // (2·1 + 3·3.5 + 5·3.9 + 80·5)/90 = 4.8 Mb/s → needs ≥ 3.84, first at 15.1 s.
        let old = piecewise_flow(
            1,
            0.0,
            100.0,
            INSTANT_RTT_S,
            &[(0.0, 10e6), (12.0, 4e6), (15.0, 5e6)],
        );
        let new = piecewise_flow(
            2,
            10.0,
            100.0,
            INSTANT_RTT_S,
            &[(10.0, 1e6), (12.0, 3.5e6), (15.0, 3.9e6), (20.0, 5e6)],
        );
        let c = convergence_time(
            &new,
            &old,
            100.0,
            &ConvergenceParams::default(),
            &ShortTermParams::default(),
        );
        assert_some_close(c.u_fair_bps, 5e6);
        assert_some_close(c.u_new_bps, 4.8e6);
        assert_some_close(c.a_s, 10.1);
        assert_some_close(c.b_s, 2.1);
        assert_some_close(c.c_s, 5.1);
        assert_some_close(c.final_ratio.and_then(|r| r.minmax), 1.0);
    }

    #[test]
    fn convergence_is_nc_when_the_new_flow_never_reaches_80_percent() {
        // ū_fair = 5.5 Mb/s, the new flow stays at 1 Mb/s: A and B are NC. C (the literal
        // definition) converges at once, because the flow is at its own long-term average.
        let old = piecewise_flow(1, 0.0, 100.0, INSTANT_RTT_S, &[(0.0, 10e6)]);
        let new = piecewise_flow(2, 10.0, 100.0, INSTANT_RTT_S, &[(10.0, 1e6)]);
        let c = convergence_time(
            &new,
            &old,
            100.0,
            &ConvergenceParams::default(),
            &ShortTermParams::default(),
        );
        assert_some_close(c.u_fair_bps, 5.5e6);
        assert_eq!(c.a_s, None);
        assert_eq!(c.b_s, None);
        assert_some_close(c.c_s, 0.1);
        assert_some_close(c.final_ratio.and_then(|r| r.signed_2_over_1), 0.1);
    }

    #[test]
    fn convergence_b_with_a_hold_needs_the_ratio_to_stay_above_eps() {
        // λ = 0.1/(1·0.1) = 1; hold 10 RTTs = 1 s. Ratio 0.9 during (10, 10.5] (0.4 s, too
        // short), 0.5 until 15 s, then 1.0 from 15.1 s on.
        let st = ShortTermParams {
            window_rtts: 1.0,
            ..Default::default()
        };
        let old = piecewise_flow(1, 0.0, 30.0, 0.1, &[(0.0, 10e6)]);
        let new = piecewise_flow(
            2,
            10.0,
            30.0,
            0.1,
            &[(10.0, 9e6), (10.5, 5e6), (15.0, 10e6)],
        );
        let plain = convergence_time(&new, &old, 30.0, &ConvergenceParams::default(), &st);
        assert_some_close(plain.b_s, 0.1);
        let held = ConvergenceParams {
            b_hold_rtts: Some(CONVERGENCE_B_HOLD_RTTS),
            ..Default::default()
        };
        assert_some_close(convergence_time(&new, &old, 30.0, &held, &st).b_s, 5.1);
        // A hold longer than the data left is never confirmed.
        let too_long = ConvergenceParams {
            b_hold_rtts: Some(1000.0),
            ..Default::default()
        };
        assert_eq!(convergence_time(&new, &old, 30.0, &too_long, &st).b_s, None);
    }

    #[test]
    fn convergence_of_empty_flows_is_nc_without_panicking() {
        let empty = FlowSeries::default();
        let old = piecewise_flow(1, 0.0, 100.0, 0.1, &[(0.0, 10e6)]);
        let p = ConvergenceParams::default();
        let st = ShortTermParams::default();
        for c in [
            convergence_time(&empty, &old, 100.0, &p, &st),
            convergence_time(&old, &empty, 100.0, &p, &st),
            convergence_time(&empty, &empty, 0.0, &p, &st),
        ] {
            assert_eq!((c.a_s, c.b_s), (None, None));
            assert_eq!(c.u_fair_bps, None);
        }
    }
}
