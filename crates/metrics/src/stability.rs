//! \[P1\]'s per-interval metrics: period throughputs, M6 responsiveness, M7 stability, and
//! the constant-composition intervals they are computed over.

use serde::{Deserialize, Serialize};

use super::fairness::jain_index;
use super::inputs::FlowSeries;
use super::series::{bytes_delta, positive, GRID_EPS};
use super::stats::{mean, sample_std};

/// Average throughputs of `flow` in consecutive periods `[t0 + k·P, t0 + (k+1)·P]` that fit in
/// `[t0_s, t1_s]`, in bit/s (the x_i(k) of M6/M7; `period_s` P in seconds, \[P1\]: 5 s).
///
/// Each is `(U(end) − U(start))·8/P` with U held constant outside the flow's samples, so a
/// period in which the flow was not yet (or no longer) running counts its idle time. Empty if
/// the flow has no samples, `period_s` is not positive, or no whole period fits.
pub fn period_throughputs_bps(flow: &FlowSeries, t0_s: f64, t1_s: f64, period_s: f64) -> Vec<f64> {
    if flow.points.is_empty() || !positive(period_s) || !positive(t1_s - t0_s) {
        return Vec::new();
    }
    let m = ((t1_s - t0_s) / period_s + GRID_EPS).floor() as usize;
    (0..m)
        .map(|k| {
            let a = t0_s + k as f64 * period_s;
            bytes_delta(&flow.points, a, a + period_s) * 8.0 / period_s
        })
        .collect()
}

/// M6 responsiveness index R1 (\[P1\] §VI-E), in periods (multiply by the period, 5 s, for
/// seconds): `max_i max{k : |x̄_i(k) − x̄_i|/x̄_i > tolerance}` where x̄_i(k) is flow i's
/// running average of its first k period throughputs and x̄_i the mean of all m.
/// 0 if no k violates the bound.
///
/// `per_flow[i]` holds flow i's period throughputs over one constant-composition interval
/// (any unit). Flows with no periods, a non-finite value or a zero mean are skipped (the
/// relative deviation is undefined); `None` if every flow is skipped.
pub fn responsiveness_r1(per_flow: &[Vec<f64>], tolerance: f64) -> Option<usize> {
    let mut r1: Option<usize> = None;
    for x in per_flow {
        let Some(xbar) = mean(x).filter(|m| positive(*m)) else {
            continue;
        };
        let mut sum = 0.0;
        let mut last_violation = 0;
        for (i, v) in x.iter().enumerate() {
            sum += v;
            let k = i + 1;
            if ((sum / k as f64 - xbar) / xbar).abs() > tolerance {
                last_violation = k;
            }
        }
        r1 = Some(r1.map_or(last_violation, |r| r.max(last_violation)));
    }
    r1
}

/// M7 stability index (\[P1\] §VI-E).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    /// `S_i`, the coefficient of variation (sample std with divisor m − 1, over the mean) of
    /// flow i's period throughputs (dimensionless); `None` for fewer than 2 periods, a zero
    /// mean or a non-finite value.
    pub per_flow: Vec<Option<f64>>,
    /// `S`, the mean of the defined `S_i`; `None` if none is defined.
    pub s: Option<f64>,
}

/// M7 stability index S of per-flow period throughputs (as for [`responsiveness_r1`]).
pub fn stability_index(per_flow: &[Vec<f64>]) -> Stability {
    let per_flow: Vec<Option<f64>> = per_flow
        .iter()
        .map(|x| {
            let m = mean(x).filter(|m| positive(*m))?;
            Some(sample_std(x)? / m)
        })
        .collect();
    let defined: Vec<f64> = per_flow.iter().flatten().copied().collect();
    Stability {
        s: mean(&defined),
        per_flow,
    }
}

/// A stretch of a run in which the set of active flows does not change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompositionInterval {
    /// Start, in seconds after the run's t0.
    pub t0_s: f64,
    /// End, in seconds after the run's t0.
    pub t1_s: f64,
    /// Ids of the flows active throughout (`start_s ≤ t0_s` and `stop_s ≥ t1_s`), in input order.
    pub flow_ids: Vec<usize>,
}

/// Splits a run at every flow start and stop into constant-composition intervals (\[P1\]'s
/// intervals for M4/M6/M7/M8), from the flows' `start_s`/`stop_s`. Intervals with no active
/// flow and flows with non-finite times are left out.
pub fn constant_composition_intervals(flows: &[FlowSeries]) -> Vec<CompositionInterval> {
    let valid = |f: &FlowSeries| f.start_s.is_finite() && f.stop_s.is_finite();
    let mut bounds: Vec<f64> = flows
        .iter()
        .filter(|f| valid(f))
        .flat_map(|f| [f.start_s, f.stop_s])
        .collect();
    bounds.sort_by(f64::total_cmp);
    bounds.dedup();
    bounds
        .windows(2)
        .filter_map(|w| {
            let (a, b) = (w[0], w[1]);
            let flow_ids: Vec<usize> = flows
                .iter()
                .filter(|f| valid(f) && f.start_s <= a && f.stop_s >= b)
                .map(|f| f.id)
                .collect();
            (!flow_ids.is_empty()).then_some(CompositionInterval {
                t0_s: a,
                t1_s: b,
                flow_ids,
            })
        })
        .collect()
}

/// \[P1\]'s per-interval metrics: E (M8), F (M4), S (M7) and R1 (M6) from period throughputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSummary {
    /// Interval start, in seconds after the run's t0.
    pub t0_s: f64,
    /// Interval end, in seconds after the run's t0.
    pub t1_s: f64,
    /// Ids of the flows, in input order.
    pub flow_ids: Vec<usize>,
    /// Whole periods m in the interval.
    pub periods: usize,
    /// x̄_i, the mean of each flow's period throughputs (0 with no periods), in bit/s.
    pub mean_bps: Vec<f64>,
    /// M8 E = Σ x̄_i, in bit/s.
    pub e_bps: f64,
    /// M4 Jain's index of the x̄_i.
    pub jain: Option<f64>,
    /// M7 S.
    pub stability: Option<f64>,
    /// M6 R1, in periods.
    pub r1_periods: Option<usize>,
    /// M6 R1, in seconds (R1 · period).
    pub r1_s: Option<f64>,
}

/// E, F, S and R1 over `[t0_s, t1_s]` for `flows`, the flows active throughout it, from their
/// period throughputs ([`period_throughputs_bps`] with `period_s`, in seconds) and the M6
/// `r1_tolerance`.
pub fn interval_summary(
    flows: &[&FlowSeries],
    t0_s: f64,
    t1_s: f64,
    period_s: f64,
    r1_tolerance: f64,
) -> IntervalSummary {
    let per_flow: Vec<Vec<f64>> = flows
        .iter()
        .map(|f| period_throughputs_bps(f, t0_s, t1_s, period_s))
        .collect();
    let mean_bps: Vec<f64> = per_flow.iter().map(|x| mean(x).unwrap_or(0.0)).collect();
    let r1_periods = responsiveness_r1(&per_flow, r1_tolerance);
    IntervalSummary {
        t0_s,
        t1_s,
        flow_ids: flows.iter().map(|f| f.id).collect(),
        periods: per_flow.iter().map(Vec::len).max().unwrap_or(0),
        e_bps: mean_bps.iter().sum(),
        jain: jain_index(&mean_bps),
        stability: stability_index(&per_flow).s,
        r1_periods,
        r1_s: r1_periods.map(|r| r as f64 * period_s),
        mean_bps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{assert_close, assert_some_close, piecewise_flow};
    use crate::{PERIOD_S_DEFAULT, R1_TOLERANCE_DEFAULT};

    #[test]
    fn period_throughputs_are_whole_5_s_averages() {
        let f = piecewise_flow(0, 0.0, 12.0, 0.1, &[(0.0, 8e6), (5.0, 16e6)]);
        let x = period_throughputs_bps(&f, 0.0, 12.0, PERIOD_S_DEFAULT);
        assert_eq!(x.len(), 2);
        assert_close(x[0], 8e6);
        assert_close(x[1], 16e6);
        assert!(period_throughputs_bps(&FlowSeries::default(), 0.0, 12.0, 5.0).is_empty());
        assert!(period_throughputs_bps(&f, 0.0, 4.0, 5.0).is_empty());
    }

    #[test]
    fn responsiveness_r1_is_the_last_period_outside_10_percent_of_the_mean() {
        // x̄ = 8; running averages 0, 5, 6.67, 7.5, 8: deviations 1, 0.375, 0.167, 0.0625, 0.
        let per_flow = vec![vec![0.0, 10.0, 10.0, 10.0, 10.0], vec![4.0; 5]];
        assert_eq!(responsiveness_r1(&per_flow, R1_TOLERANCE_DEFAULT), Some(3));
    }

    #[test]
    fn responsiveness_r1_is_zero_for_constant_flows_and_none_without_data() {
        assert_eq!(responsiveness_r1(&[vec![3.0; 4]], 0.1), Some(0));
        assert_eq!(responsiveness_r1(&[], 0.1), None);
        assert_eq!(responsiveness_r1(&[vec![0.0, 0.0]], 0.1), None);
    }

    #[test]
    fn stability_index_is_the_mean_coefficient_of_variation() {
        // [1, 3]: mean 2, std √2 → S1 = 0.7071; [2, 2, 2]: S2 = 0; S = 0.35355.
        let s = stability_index(&[vec![1.0, 3.0], vec![2.0, 2.0, 2.0]]);
        assert_some_close(s.per_flow[0], 2f64.sqrt() / 2.0);
        assert_some_close(s.per_flow[1], 0.0);
        assert_some_close(s.s, 2f64.sqrt() / 4.0);
    }

    #[test]
    fn stability_is_undefined_for_a_single_period() {
        let s = stability_index(&[vec![5.0]]);
        assert_eq!(s.per_flow, vec![None]);
        assert_eq!(s.s, None);
    }

    #[test]
    fn constant_composition_intervals_split_at_every_start_and_stop() {
        let mut a = piecewise_flow(0, 0.0, 30.0, 0.1, &[(0.0, 1e6)]);
        let b = piecewise_flow(1, 10.0, 20.0, 0.1, &[(10.0, 1e6)]);
        a.points.clear();
        let iv = constant_composition_intervals(&[a, b]);
        let got: Vec<(f64, f64, Vec<usize>)> = iv
            .into_iter()
            .map(|i| (i.t0_s, i.t1_s, i.flow_ids))
            .collect();
        assert_eq!(
            got,
            vec![
                (0.0, 10.0, vec![0]),
                (10.0, 20.0, vec![0, 1]),
                (20.0, 30.0, vec![0])
            ]
        );
    }

    #[test]
    fn interval_summary_combines_e_jain_s_and_r1() {
        // 8 and 24 Mb/s for 20 s: E = 32 Mb/s, F = 32²/(2·(8² + 24²)) = 0.8, S = 0, R1 = 0.
        let a = piecewise_flow(0, 0.0, 20.0, 0.1, &[(0.0, 8e6)]);
        let b = piecewise_flow(1, 0.0, 20.0, 0.1, &[(0.0, 24e6)]);
        let s = interval_summary(&[&a, &b], 0.0, 20.0, PERIOD_S_DEFAULT, R1_TOLERANCE_DEFAULT);
        assert_eq!(s.periods, 4);
        assert_eq!(s.flow_ids, vec![0, 1]);
        assert_close(s.e_bps, 32e6);
        assert_some_close(s.jain, 0.8);
        assert_some_close(s.stability, 0.0);
        assert_eq!(s.r1_periods, Some(0));
        assert_some_close(s.r1_s, 0.0);
    }
}
