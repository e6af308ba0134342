//! Throughput of a flow: M1 average throughput (whole run and steady state) and M2
//! short-term (EWMA) throughput.

use serde::{Deserialize, Serialize};

use super::inputs::{FlowPoint, FlowSeries};
use super::params::{EwmaInit, ShortTermParams, SteadyState};
use super::series::{bytes_delta, non_negative, positive, GRID_EPS};

/// M1 average throughput of `flow` over `[t0_s, t1_s]`, in bit/s: `(U(t1) − U(t0))·8/(t1 − t0)`
/// from `bytes_acked` (\[CHOICE\] receiver-acknowledged bytes, i.e. goodput).
///
/// The window is clipped to the flow's samples (first to last) and U is interpolated linearly
/// between samples, so the result is the average while the flow was observed (an infinite
/// bound means "from the first" / "to the last sample"). `None` if the flow has no samples, a
/// bound is NaN, or the clipped window has no length.
pub fn avg_throughput_bps(flow: &FlowSeries, t0_s: f64, t1_s: f64) -> Option<f64> {
    if t0_s.is_nan() || t1_s.is_nan() {
        return None;
    }
    let first = flow.points.first()?.t_s;
    let last = flow.points.last()?.t_s;
    let (a, b) = (t0_s.max(first), t1_s.min(last));
    if !positive(b - a) {
        return None;
    }
    Some(bytes_delta(&flow.points, a, b) * 8.0 / (b - a))
}

/// The window in which every one of `flows` is active and observed, in seconds after the
/// run's t0: from the latest start to the earliest stop, each flow's life `[start_s,
/// stop_s]` clipped to its samples. Ratios between flows (M3, M4) compare averages over
/// it, so that no flow's figure includes time the others did not share (in [P0]'s T0.1
/// flow 1's first 30 s alone on the link). `None` for no flows, or if they never overlap.
pub fn shared_window_s(flows: &[&FlowSeries]) -> Option<(f64, f64)> {
    let mut window: Option<(f64, f64)> = None;
    for f in flows {
        let (first, last) = (f.points.first()?.t_s, f.points.last()?.t_s);
        let (a, b) = (f.start_s.max(first), f.stop_s.min(last));
        let (w0, w1) = window.unwrap_or((a, b));
        window = Some((w0.max(a), w1.min(b)));
    }
    window.filter(|(a, b)| positive(b - a))
}

/// M1 of each of `flows` over their [`shared_window_s`], in bit/s, in the order given;
/// `None` if the window is empty or a flow has no throughput there.
pub fn shared_window_throughputs_bps(flows: &[&FlowSeries]) -> Option<Vec<f64>> {
    let (a, b) = shared_window_s(flows)?;
    flows.iter().map(|f| avg_throughput_bps(f, a, b)).collect()
}

/// Start of the M1 steady-state window of a run of `run_duration_s` seconds, in seconds after
/// the run's t0: `max(min_start_s, run_fraction · run_duration_s)` (\[CHOICE\] §0).
pub fn steady_state_start_s(run_duration_s: f64, ss: &SteadyState) -> f64 {
    let frac = ss.run_fraction * run_duration_s;
    if frac.is_finite() {
        ss.min_start_s.max(frac)
    } else {
        ss.min_start_s
    }
}

/// M1 per flow, whole run and steady state (\[CHOICE\] §0: report both).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FlowThroughput {
    /// Flow id.
    pub id: usize,
    /// Average over the flow's life `[start_s, stop_s]` (clipped to its samples), in bit/s.
    pub whole_run_bps: Option<f64>,
    /// Average over the steady-state window (within the flow's life), in bit/s; `None` if the
    /// run is too short for a steady state.
    pub steady_state_bps: Option<f64>,
    /// Start of the steady-state window, in seconds after the run's t0.
    pub steady_state_from_s: f64,
}

/// M1 of `flow` in a run `[0, run_end_s]`: whole-run and steady-state averages, in bit/s.
pub fn flow_throughput(flow: &FlowSeries, run_end_s: f64, ss: &SteadyState) -> FlowThroughput {
    let from = steady_state_start_s(run_end_s, ss);
    FlowThroughput {
        id: flow.id,
        whole_run_bps: avg_throughput_bps(flow, flow.start_s, flow.stop_s),
        steady_state_bps: avg_throughput_bps(
            flow,
            from.max(flow.start_s),
            run_end_s.min(flow.stop_s),
        ),
        steady_state_from_s: from,
    }
}

/// M2 EWMA gain λ = min(1, δ/(window_rtts·RTT)) (dimensionless, in [0, 1]); `delta_s` and
/// `rtt_s` in seconds. 1 (no smoothing) if `window_rtts·rtt_s` is not positive.
pub fn ewma_lambda(delta_s: f64, rtt_s: f64, window_rtts: f64) -> f64 {
    let window = window_rtts * rtt_s;
    if positive(window) && non_negative(delta_s) {
        (delta_s / window).min(1.0)
    } else {
        1.0
    }
}

/// M2 on the δ grid: (index k of the first value, û at t = k·δ, (k+1)·δ, …).
pub(super) fn ewma_grid(
    points: &[FlowPoint],
    rtt_s: f64,
    p: &ShortTermParams,
) -> Option<(i64, Vec<f64>)> {
    let delta = p.delta_s;
    if !positive(delta) {
        return None;
    }
    let (first, last) = (points.first()?.t_s, points.last()?.t_s);
    if !first.is_finite() || !last.is_finite() {
        return None;
    }
    let k0 = (first / delta - GRID_EPS).ceil() as i64;
    let k1 = (last / delta + GRID_EPS).floor() as i64;
    if k1 < k0 {
        return None;
    }
    let lambda = ewma_lambda(delta, rtt_s, p.window_rtts);
    let rate = |k: i64| bytes_delta(points, (k - 1) as f64 * delta, k as f64 * delta) * 8.0 / delta;
    let (k_first, mut u) = match p.init {
        EwmaInit::FirstSample if k1 > k0 => (k0 + 1, rate(k0 + 1)),
        EwmaInit::FirstSample => return None,
        EwmaInit::Zero => (k0, 0.0),
    };
    let mut values = Vec::with_capacity((k1 - k_first + 1) as usize);
    values.push(u);
    for k in k_first + 1..=k1 {
        u = (1.0 - lambda) * u + lambda * rate(k);
        values.push(u);
    }
    Some((k_first, values))
}

/// M2 short-term average throughput of `flow` (\[P0\] eq. 2), as `(t in s, û in bit/s)` pairs:
/// `û(t+δ) = (1 − λ)·û(t) + λ·(U(t+δ) − U(t))/δ` with λ from [`ewma_lambda`] and `rtt_s` the
/// RTT that sets the averaging window (normally `flow.base_rtt_s`).
///
/// `bytes_acked` is resampled (linear interpolation) onto the grid t = k·δ (multiples of δ
/// since the run's t0, so different flows share grid times) that lies within the flow's
/// samples. With [`EwmaInit::FirstSample`] the series starts one δ after the first grid time,
/// at that step's rate; with [`EwmaInit::Zero`] it starts at the first grid time with 0.
/// Empty if the flow has no samples, the samples span less than one δ, or `delta_s` is not
/// positive.
pub fn short_term_throughput(
    flow: &FlowSeries,
    rtt_s: f64,
    p: &ShortTermParams,
) -> Vec<(f64, f64)> {
    match ewma_grid(&flow.points, rtt_s, p) {
        Some((k0, values)) => values
            .into_iter()
            .enumerate()
            .map(|(i, u)| ((k0 + i as i64) as f64 * p.delta_s, u))
            .collect(),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{assert_close, assert_some_close, close, piecewise_flow, points};

    #[test]
    fn avg_throughput_is_the_bytes_acked_slope_over_the_window() {
        let f = piecewise_flow(0, 0.0, 10.0, 0.1, &[(0.0, 8e6)]);
        assert_some_close(avg_throughput_bps(&f, 2.0, 7.0), 8e6);
    }

    #[test]
    fn avg_throughput_interpolates_between_samples() {
        // U(0.5) = 500 B, U(1.5) = 2000 B: 1500 B in 1 s = 12 000 bit/s.
        let f = points(&[(0.0, 0), (1.0, 1000), (2.0, 3000)]);
        assert_some_close(avg_throughput_bps(&f, 0.5, 1.5), 12_000.0);
    }

    #[test]
    fn avg_throughput_clips_the_window_to_the_samples() {
        let f = piecewise_flow(0, 10.0, 20.0, 0.1, &[(10.0, 4e6)]);
        assert_some_close(avg_throughput_bps(&f, 0.0, 100.0), 4e6);
    }

    #[test]
    fn avg_throughput_is_none_without_samples_or_window() {
        let f = piecewise_flow(0, 0.0, 10.0, 0.1, &[(0.0, 8e6)]);
        assert_eq!(avg_throughput_bps(&FlowSeries::default(), 0.0, 10.0), None);
        assert_eq!(avg_throughput_bps(&f, 5.0, 5.0), None);
        assert_eq!(avg_throughput_bps(&f, 7.0, 3.0), None);
        assert_eq!(avg_throughput_bps(&f, 20.0, 30.0), None);
        assert_eq!(avg_throughput_bps(&f, f64::NAN, 3.0), None);
        assert_eq!(avg_throughput_bps(&points(&[(1.0, 5)]), 0.0, 2.0), None);
    }

    #[test]
    fn the_shared_window_runs_from_the_latest_start_to_the_earliest_stop() {
        // flow 1 from 0 to 100 s, flow 2 from 30 s to 90 s: they share [30, 90].
        let f1 = piecewise_flow(1, 0.0, 100.0, 0.1, &[(0.0, 8e6)]);
        let f2 = piecewise_flow(2, 30.0, 90.0, 0.1, &[(30.0, 4e6)]);
        let (a, b) = shared_window_s(&[&f1, &f2]).unwrap();
        assert_close(a, 30.0);
        assert_close(b, 90.0);
        let f3 = piecewise_flow(3, 95.0, 100.0, 0.1, &[(95.0, 4e6)]);
        assert_eq!(shared_window_s(&[&f2, &f3]), None);
        assert_eq!(shared_window_s(&[]), None);
        assert_eq!(shared_window_s(&[&f1, &FlowSeries::default()]), None);
    }

    #[test]
    fn shared_window_throughputs_leave_out_a_flows_time_alone() {
        // T0.1's shape: flow 1 has the link alone for 30 s at 20 Mb/s, then both share it
        // at 10 Mb/s each. Over their own lives flow 1 averages 13 Mb/s against flow 2's
        // 10 (a ratio of 0.77); over the shared window both have 10 (ratio 1).
        let f1 = piecewise_flow(1, 0.0, 100.0, 0.1, &[(0.0, 20e6), (30.0, 10e6)]);
        let f2 = piecewise_flow(2, 30.0, 100.0, 0.1, &[(30.0, 10e6)]);
        let own = [&f1, &f2].map(|f| avg_throughput_bps(f, f.start_s, f.stop_s).unwrap());
        assert_close(own[0], 13e6);
        assert_close(own[1], 10e6);
        let shared = shared_window_throughputs_bps(&[&f1, &f2]).unwrap();
        assert_close(shared[0], 10e6);
        assert_close(shared[1], 10e6);
    }

    #[test]
    fn steady_state_starts_after_60_s_or_20_percent_whichever_is_later() {
        let ss = SteadyState::default();
        assert_close(steady_state_start_s(600.0, &ss), 120.0);
        assert_close(steady_state_start_s(200.0, &ss), 60.0);
    }

    #[test]
    fn flow_throughput_reports_whole_run_and_steady_state() {
        // 8 Mb/s for 100 s then 16 Mb/s for 200 s: whole = (1e8 + 4e8) B·8/300 s;
        // steady state from 60 s: (4e7 + 4e8) B·8/240 s.
        let f = piecewise_flow(3, 0.0, 300.0, 0.1, &[(0.0, 8e6), (100.0, 16e6)]);
        let t = flow_throughput(&f, 300.0, &SteadyState::default());
        assert_eq!(t.id, 3);
        assert_some_close(t.whole_run_bps, 4e9 / 300.0);
        assert_some_close(t.steady_state_bps, 3.52e9 / 240.0);
        assert_close(t.steady_state_from_s, 60.0);
        let short = flow_throughput(&f, 50.0, &SteadyState::default());
        assert_eq!(short.steady_state_bps, None);
    }

    #[test]
    fn ewma_lambda_makes_the_time_constant_100_rtts() {
        assert_close(ewma_lambda(0.1, 0.162, 100.0), 0.1 / 16.2); // ≈ 0.00617
        assert_close(ewma_lambda(0.1, 0.042, 100.0), 0.1 / 4.2); // ≈ 0.0238
        assert_close(ewma_lambda(0.1, 0.0005, 100.0), 1.0);
        assert_close(ewma_lambda(0.1, 0.0, 100.0), 1.0);
    }

    #[test]
    fn short_term_throughput_of_a_constant_rate_flow_is_that_rate() {
        let f = piecewise_flow(0, 0.0, 20.0, 0.05, &[(0.0, 10e6)]);
        let s = short_term_throughput(&f, f.base_rtt_s, &ShortTermParams::default());
        assert_eq!(s.len(), 200);
        assert!(s.iter().all(|&(_, u)| close(u, 10e6, 1e-9)));
    }

    #[test]
    fn short_term_throughput_follows_the_ewma_from_the_first_sample() {
        // λ = 0.1/(100·0.002) = 0.5; step rates 800, 2400, 2400 bit/s.
        let f = points(&[(0.0, 0), (0.1, 10), (0.2, 40), (0.3, 70)]);
        let s = short_term_throughput(&f, 0.002, &ShortTermParams::default());
        let want = [(0.1, 800.0), (0.2, 1600.0), (0.3, 2000.0)];
        assert_eq!(s.len(), want.len());
        for (&(t, u), &(wt, wu)) in s.iter().zip(&want) {
            assert_close(t, wt);
            assert_close(u, wu);
        }
    }

    #[test]
    fn short_term_throughput_from_zero_starts_at_zero() {
        let f = points(&[(0.0, 0), (0.1, 10), (0.2, 40), (0.3, 70)]);
        let p = ShortTermParams {
            init: EwmaInit::Zero,
            ..Default::default()
        };
        let s = short_term_throughput(&f, 0.002, &p);
        let want = [(0.0, 0.0), (0.1, 400.0), (0.2, 1400.0), (0.3, 1900.0)];
        assert_eq!(s.len(), want.len());
        for (&(t, u), &(wt, wu)) in s.iter().zip(&want) {
            assert_close(t, wt);
            assert_close(u, wu);
        }
    }

    #[test]
    fn short_term_grid_is_aligned_to_multiples_of_delta() {
        // Samples at 0.05, 0.15, …, 0.45 s, 1000 B/s: grid 0.1…0.4, first value at 0.2.
        let tb: Vec<(f64, u64)> = (0..5)
            .map(|i| (0.05 + 0.1 * i as f64, 50 + 100 * i as u64))
            .collect();
        let s = short_term_throughput(&points(&tb), 0.001, &ShortTermParams::default());
        let times: Vec<f64> = s.iter().map(|p| p.0).collect();
        assert_eq!(times.len(), 3);
        for (t, want) in times.iter().zip([0.2, 0.3, 0.4]) {
            assert_close(*t, want);
        }
        assert!(s.iter().all(|&(_, u)| close(u, 8000.0, 1e-9)));
    }

    #[test]
    fn short_term_throughput_is_empty_for_too_few_samples() {
        let p = ShortTermParams::default();
        assert!(short_term_throughput(&FlowSeries::default(), 0.1, &p).is_empty());
        assert!(short_term_throughput(&points(&[(0.0, 0), (0.05, 9)]), 0.1, &p).is_empty());
        let bad = ShortTermParams { delta_s: 0.0, ..p };
        assert!(short_term_throughput(&points(&[(0.0, 0), (1.0, 9)]), 0.1, &bad).is_empty());
    }
}
