//! Derived-metric engine: metrics M1–M17 of `spec/benchmarks.md` §1 as pure functions of a run's raw series.
//!
//! Inputs are what a run records: per-flow periodic samples ([`FlowPoint`]) and congestion
//! events ([`BackoffEvent`]) from the collector, gathered with the flow's schedule into a
//! [`FlowSeries`], and bottleneck qdisc samples ([`QueuePoint`]). Every function is pure, never
//! panics and never returns NaN or ±∞: where a value cannot be computed (no samples, an
//! empty window, a zero denominator) it returns `None` or an empty `Vec`, as documented per item.
//!
//! Units, everywhere unless a name says otherwise: times in seconds since the run's t0 (`f64`),
//! throughputs in bit/s (`f64`), windows and queues in packets, byte counts in bytes.
//!
//! Every **\[CHOICE\]** of the spec is a named parameter with the spec's default: the `*_DEFAULT`
//! constants and the `Default` impls of the parameter structs. [`MetricParams`] gathers them so
//! a run can record the values it used with its results (benchmarks.md §6 item 6).
//!
//! Conventions shared by the flow functions:
//! - `U(t)`, the bytes a flow has had acknowledged by time t, is `bytes_acked` interpolated
//!   linearly between samples and held at the first/last sample outside them. Samples must be
//!   sorted by time; unsorted input gives unspecified (but finite, non-panicking) results.
//! - Qdisc counters are read at the first and last [`QueuePoint`] inside a window (no
//!   interpolation: drops and backlogs are not linear in time); at the default 10 ms sampling
//!   this moves a window's edges by at most 10 ms. A counter that goes backwards (qdisc
//!   re-created) contributes 0.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

/// One periodic sample of one flow (from the BPF collector).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowPoint {
    /// Sample time, in seconds since the run's t0.
    pub t_s: f64,
    /// Bytes acknowledged by the receiver over the connection's life (`tp->bytes_acked`), in bytes.
    pub bytes_acked: u64,
    /// Congestion window, in packets (segments).
    pub cwnd: u32,
    /// Kernel smoothed RTT (unscaled), in microseconds; 0 while unknown.
    pub srtt_us: u32,
    /// Kernel windowed minimum RTT, in microseconds; 0 or `u32::MAX` while unknown.
    pub min_rtt_us: u32,
    /// Retransmitted segments over the connection's life, in segments.
    pub total_retrans: u32,
    /// Segments delivered over the connection's life (`tp->delivered`), in segments.
    pub delivered: u32,
}

/// A window reduction (congestion event) of a flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BackoffEvent {
    /// Event time, in seconds since the run's t0.
    pub t_s: f64,
    /// Congestion window immediately before the reduction, in packets.
    pub cwnd_before: u32,
    /// Congestion window after the reduction, in packets, if known.
    pub cwnd_after: Option<u32>,
}

/// Everything known about one flow of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowSeries {
    /// The run's identifier for the flow.
    pub id: usize,
    /// Congestion control name (`TCP_CONGESTION`).
    pub cc: String,
    /// Configured (or measured) base round-trip propagation delay, in seconds.
    pub base_rtt_s: f64,
    /// When the flow started, in seconds since the run's t0.
    pub start_s: f64,
    /// When the flow stopped sending, in seconds since the run's t0.
    pub stop_s: f64,
    /// Periodic samples, sorted by `t_s`.
    pub points: Vec<FlowPoint>,
    /// Congestion events, sorted by `t_s` (for a cctl algorithm from its own reduction
    /// counter, exact between samples; else from the kernel's signals).
    pub backoffs: Vec<BackoffEvent>,
    /// Congestion events from the kernel's signals only, for every flow alike
    /// (`cctl_loader::summary::kernel_backoffs`): what port-vs-module comparisons count.
    #[serde(default)]
    pub kernel_backoffs: Vec<BackoffEvent>,
    /// Bytes the receiver read from the flow by its end, in bytes.
    pub bytes_received: u64,
    /// Fixed-size transfers: time from connection start to the last byte received, in seconds.
    pub completion_s: Option<f64>,
    /// Data segments sent over the connection's life (`tcpi_data_segs_out`), in segments.
    pub data_segs_out: Option<u64>,
}

/// One sample of the bottleneck qdisc (every ~10 ms); counters are cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct QueuePoint {
    /// Sample time, in seconds since the run's t0.
    pub t_s: f64,
    /// Packets waiting in the queue, in packets.
    pub backlog_pkts: u64,
    /// Bytes waiting in the queue, in bytes.
    pub backlog_bytes: u64,
    /// Packets dropped by the qdisc so far, in packets.
    pub drops: u64,
    /// Packets sent on by the qdisc so far, in packets.
    pub sent_pkts: u64,
    /// Bytes sent on by the qdisc so far (L2 frames, as the qdisc counts them), in bytes.
    pub sent_bytes: u64,
}

// ---------------------------------------------------------------------------------------------
// [CHOICE] parameters and their defaults
// ---------------------------------------------------------------------------------------------

/// M1 steady state: the steady-state window starts this long after the run's t0 at the earliest,
/// in seconds (\[CHOICE\] §0 "Warm-up").
pub const STEADY_STATE_MIN_S_DEFAULT: f64 = 60.0;
/// M1 steady state: ... or after this fraction of the run, whichever is later (\[CHOICE\] §0).
pub const STEADY_STATE_FRACTION_DEFAULT: f64 = 0.2;
/// M2 sampling interval δ, in seconds (\[P0\] eq. 2).
pub const SHORT_TERM_DELTA_S_DEFAULT: f64 = 0.1;
/// M2 EWMA time constant δ/λ, in RTTs (\[CHOICE\] `λ = min(1, δ/(100·RTT))`).
pub const SHORT_TERM_WINDOW_RTTS_DEFAULT: f64 = 100.0;
/// M3 "fair" criterion of \[P0\]'s same-RTT discussion: `R_minmax` at least this (within 5 %).
pub const FAIR_RATIO_MIN: f64 = 0.95;
/// M5 convergence factor ε ("80 % convergence time", \[P0\]).
pub const CONVERGENCE_EPS_DEFAULT: f64 = 0.8;
/// M5 variant A: the long-term averages are taken over this last fraction of the run (\[CHOICE\]).
pub const CONVERGENCE_REFERENCE_FRACTION_DEFAULT: f64 = 0.5;
/// M5 variant B, when the hold is enabled: the ratio must stay ≥ ε for this many (new-flow)
/// base RTTs (\[CHOICE\], optional; off by default).
pub const CONVERGENCE_B_HOLD_RTTS: f64 = 10.0;
/// M5 caveat: M3 is reported alongside over this last fraction of the run ("final third").
pub const CONVERGENCE_FINAL_FRACTION_DEFAULT: f64 = 1.0 / 3.0;
/// M6/M7 period length, in seconds (\[P1\]'s iperf 5-s reports).
pub const PERIOD_S_DEFAULT: f64 = 5.0;
/// M6 tolerance: a running average further than this fraction from the mean is "not settled".
pub const R1_TOLERANCE_DEFAULT: f64 = 0.1;
/// \[P1\]'s router monitor averaged the queue over periods of this length, in seconds (§6 item 3).
pub const QUEUE_AVERAGE_PERIOD_S_DEFAULT: f64 = 2.0;
/// M10 Reno response function coefficient, `w = 1.2/√p` (RFC 3649; `sqrt(1.5) ≈ 1.22` in \[P1\]).
pub const RENO_RESPONSE_COEFF: f64 = 1.2;
/// M10 HSTCP response function coefficient, `w = 0.12/p^0.835` (RFC 3649).
pub const HSTCP_RESPONSE_COEFF: f64 = 0.12;
/// M10 HSTCP response function exponent of p.
pub const HSTCP_RESPONSE_EXPONENT: f64 = 0.835;
/// M10 STCP response function coefficient, `w = (a/b)/p = 0.08/p`.
pub const STCP_RESPONSE_COEFF: f64 = 0.08;

/// Tolerance for placing times on the δ grid and for counting whole periods, in grid steps.
const GRID_EPS: f64 = 1e-9;

/// M1 steady-state window (\[CHOICE\] §0): it starts at `max(min_start_s, run_fraction · T)`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    /// Earliest start of the steady state, in seconds after the run's t0.
    pub min_start_s: f64,
    /// Fraction of the run duration T after which the steady state starts at the latest.
    pub run_fraction: f64,
}

impl Default for SteadyState {
    fn default() -> Self {
        SteadyState {
            min_start_s: STEADY_STATE_MIN_S_DEFAULT,
            run_fraction: STEADY_STATE_FRACTION_DEFAULT,
        }
    }
}

/// How the M2 EWMA starts (\[CHOICE\] "initialise at the first sample, or 0; state which").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EwmaInit {
    /// û at the first full δ step is that step's rate `(U(t+δ) − U(t))/δ` (the default).
    #[default]
    FirstSample,
    /// û is 0 at the first grid time (a flow that has just started), then updated every δ.
    Zero,
}

/// Parameters of the M2 short-term throughput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShortTermParams {
    /// Sampling interval δ, in seconds.
    pub delta_s: f64,
    /// EWMA time constant δ/λ, in RTTs (λ = min(1, δ/(window_rtts·RTT))).
    pub window_rtts: f64,
    /// How the EWMA starts.
    pub init: EwmaInit,
}

impl Default for ShortTermParams {
    fn default() -> Self {
        ShortTermParams {
            delta_s: SHORT_TERM_DELTA_S_DEFAULT,
            window_rtts: SHORT_TERM_WINDOW_RTTS_DEFAULT,
            init: EwmaInit::FirstSample,
        }
    }
}

/// Parameters of the M5 ε-convergence time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConvergenceParams {
    /// Convergence factor ε (dimensionless).
    pub eps: f64,
    /// Variant A: ū_old and ū_new are averaged over this last fraction of the run.
    pub reference_fraction: f64,
    /// Variant B: if set, û_new/û_old must stay ≥ ε for this many base RTTs of the new flow
    /// ([`CONVERGENCE_B_HOLD_RTTS`] is the spec's value); `None`: the first crossing counts.
    pub b_hold_rtts: Option<f64>,
    /// M3 is reported alongside over this last fraction of the run.
    pub final_fraction: f64,
}

impl Default for ConvergenceParams {
    fn default() -> Self {
        ConvergenceParams {
            eps: CONVERGENCE_EPS_DEFAULT,
            reference_fraction: CONVERGENCE_REFERENCE_FRACTION_DEFAULT,
            b_hold_rtts: None,
            final_fraction: CONVERGENCE_FINAL_FRACTION_DEFAULT,
        }
    }
}

/// Every \[CHOICE\] value of the metric engine, to record with a run's results.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MetricParams {
    /// M1 steady-state window.
    pub steady_state: SteadyState,
    /// M2 short-term throughput.
    pub short_term: ShortTermParams,
    /// M5 convergence time.
    pub convergence: ConvergenceParams,
    /// M6/M7 period length, in seconds.
    pub period_s: f64,
    /// M6 tolerance (fraction of the mean).
    pub r1_tolerance: f64,
    /// M3 fair criterion (minimum `R_minmax`).
    pub fair_ratio_min: f64,
    /// Period of the \[P1\]-style queue averages, in seconds.
    pub queue_average_period_s: f64,
}

impl Default for MetricParams {
    fn default() -> Self {
        MetricParams {
            steady_state: SteadyState::default(),
            short_term: ShortTermParams::default(),
            convergence: ConvergenceParams::default(),
            period_s: PERIOD_S_DEFAULT,
            r1_tolerance: R1_TOLERANCE_DEFAULT,
            fair_ratio_min: FAIR_RATIO_MIN,
            queue_average_period_s: QUEUE_AVERAGE_PERIOD_S_DEFAULT,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn positive(x: f64) -> bool {
    x > 0.0 && x.is_finite()
}

fn non_negative(x: f64) -> bool {
    x >= 0.0 && x.is_finite()
}

/// U(t): bytes acknowledged by `t`, linear between samples, held outside them.
fn bytes_at(points: &[FlowPoint], t: f64) -> Option<f64> {
    let first = points.first()?;
    let last = points.last()?;
    if !t.is_finite() {
        return None;
    }
    if t <= first.t_s {
        return Some(first.bytes_acked as f64);
    }
    if t >= last.t_s {
        return Some(last.bytes_acked as f64);
    }
    // first.t_s < t < last.t_s, so (sorted) 1 <= j <= len-1; clamp for unsorted input.
    let j = points
        .partition_point(|p| p.t_s <= t)
        .clamp(1, points.len() - 1);
    let (a, b) = (&points[j - 1], &points[j]);
    let (ua, ub) = (a.bytes_acked as f64, b.bytes_acked as f64);
    let dt = b.t_s - a.t_s;
    if positive(dt) {
        Some(ua + (ub - ua) * ((t - a.t_s) / dt).clamp(0.0, 1.0))
    } else {
        Some(ub)
    }
}

/// U(t1) − U(t0), in bytes, never negative; 0 without samples.
fn bytes_delta(points: &[FlowPoint], t0: f64, t1: f64) -> f64 {
    match (bytes_at(points, t0), bytes_at(points, t1)) {
        (Some(a), Some(b)) => (b - a).max(0.0),
        _ => 0.0,
    }
}

/// The queue samples with `t0 <= t_s <= t1`.
fn queue_window(queue: &[QueuePoint], t0: f64, t1: f64) -> &[QueuePoint] {
    let a = queue.partition_point(|q| q.t_s < t0);
    let b = queue.partition_point(|q| q.t_s <= t1);
    if a < b {
        &queue[a..b]
    } else {
        &[]
    }
}

fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample standard deviation (divisor n − 1); `None` for fewer than 2 values.
fn sample_std(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    let ss: f64 = xs.iter().map(|x| (x - m) * (x - m)).sum();
    Some((ss / (xs.len() - 1) as f64).sqrt())
}

// ---------------------------------------------------------------------------------------------
// M1 average throughput
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// M2 short-term throughput
// ---------------------------------------------------------------------------------------------

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
fn ewma_grid(points: &[FlowPoint], rtt_s: f64, p: &ShortTermParams) -> Option<(i64, Vec<f64>)> {
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

// ---------------------------------------------------------------------------------------------
// M3 throughput ratio, M4 Jain's index
// ---------------------------------------------------------------------------------------------

/// M3 throughput ratio of two flows (\[CHOICE\] report both forms).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThroughputRatio {
    /// `min(ū1, ū2)/max(ū1, ū2)` in [0, 1] (0: one flow starved); `None` if both are 0.
    pub minmax: Option<f64>,
    /// `ū2/ū1` (> 1: flow 2 won); `None` if ū1 is 0.
    pub signed_2_over_1: Option<f64>,
}

/// M3 throughput ratio of flow 1 (`u1_bps`) and flow 2 (`u2_bps`), both in bit/s. Negative or
/// non-finite inputs give `None` fields.
pub fn throughput_ratio(u1_bps: f64, u2_bps: f64) -> ThroughputRatio {
    if !non_negative(u1_bps) || !non_negative(u2_bps) {
        return ThroughputRatio {
            minmax: None,
            signed_2_over_1: None,
        };
    }
    let (lo, hi) = (u1_bps.min(u2_bps), u1_bps.max(u2_bps));
    ThroughputRatio {
        minmax: positive(hi).then(|| lo / hi),
        signed_2_over_1: positive(u1_bps).then(|| u2_bps / u1_bps),
    }
}

/// \[P0\]'s same-RTT fairness criterion: `minmax ≥ threshold` (the spec's is [`FAIR_RATIO_MIN`]).
pub fn is_fair(minmax: f64, threshold: f64) -> bool {
    minmax >= threshold
}

/// M3 `R_rtt = ū_longRTT / ū_shortRTT` (dimensionless) for flows a and b with average
/// throughputs in bit/s and RTTs in seconds. With equal RTTs flow b counts as the long one
/// (`ū_b/ū_a`, the signed ratio when called as flow 1, flow 2). `None` if the short-RTT flow's
/// throughput is not positive or an input is invalid.
pub fn r_rtt(u_a_bps: f64, rtt_a_s: f64, u_b_bps: f64, rtt_b_s: f64) -> Option<f64> {
    if ![u_a_bps, u_b_bps].iter().all(|u| non_negative(*u))
        || ![rtt_a_s, rtt_b_s].iter().all(|r| r.is_finite())
    {
        return None;
    }
    let (u_long, u_short) = if rtt_a_s > rtt_b_s {
        (u_a_bps, u_b_bps)
    } else {
        (u_b_bps, u_a_bps)
    };
    positive(u_short).then(|| u_long / u_short)
}

/// M4 Jain's fairness index `(Σx)²/(n·Σx²)` of per-flow average throughputs (any common unit),
/// in (0, 1], 1 = equal shares, 1/n = one flow has everything. `None` for no flows, all-zero
/// shares, or a negative or non-finite share.
pub fn jain_index(shares: &[f64]) -> Option<f64> {
    if shares.is_empty() || !shares.iter().all(|x| non_negative(*x)) {
        return None;
    }
    let sum: f64 = shares.iter().sum();
    let sum_sq: f64 = shares.iter().map(|x| x * x).sum();
    positive(sum_sq).then(|| (sum * sum / (shares.len() as f64 * sum_sq)).min(1.0))
}

// ---------------------------------------------------------------------------------------------
// M5 convergence time
// ---------------------------------------------------------------------------------------------

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
/// û is M2 ([`short_term_throughput`] with `st`) of each flow with its own `base_rtt_s`; only
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

// ---------------------------------------------------------------------------------------------
// M6 responsiveness, M7 stability, constant-composition intervals
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// M8 aggregate throughput and utilisation
// ---------------------------------------------------------------------------------------------

/// M8 aggregate goodput E of `flows` over `[t0_s, t1_s]`, in bit/s: the bytes all flows had
/// acknowledged in the window (U held constant outside each flow's samples, so flows active
/// for part of the window count for that part) times 8 over the window length. For a window in
/// which the set of flows is constant this is \[P1\]'s `Σ x̄_i`. `None` if the window has no
/// length; `Some(0.0)` for no flows.
pub fn aggregate_goodput_bps<'a>(
    flows: impl IntoIterator<Item = &'a FlowSeries>,
    t0_s: f64,
    t1_s: f64,
) -> Option<f64> {
    let span = t1_s - t0_s;
    if !positive(span) {
        return None;
    }
    let bytes: f64 = flows
        .into_iter()
        .map(|f| bytes_delta(&f.points, t0_s, t1_s))
        .sum();
    Some(bytes * 8.0 / span)
}

/// Rate at the bottleneck from the qdisc's `sent_bytes` over the samples in `[t0_s, t1_s]`, in
/// bit/s (L2 bytes, as the qdisc counts them). `None` with fewer than 2 samples in the window.
pub fn wire_throughput_bps(queue: &[QueuePoint], t0_s: f64, t1_s: f64) -> Option<f64> {
    let w = queue_window(queue, t0_s, t1_s);
    let (a, b) = (w.first()?, w.last()?);
    let span = b.t_s - a.t_s;
    positive(span).then(|| b.sent_bytes.saturating_sub(a.sent_bytes) as f64 * 8.0 / span)
}

/// Packet rate at the bottleneck from `sent_pkts` over the samples in `[t0_s, t1_s]`, in
/// packets per millisecond (\[P1\]'s utilisation unit; 800 Mb/s ≈ 66 packets/ms).
pub fn wire_rate_pkts_per_ms(queue: &[QueuePoint], t0_s: f64, t1_s: f64) -> Option<f64> {
    let w = queue_window(queue, t0_s, t1_s);
    let (a, b) = (w.first()?, w.last()?);
    let span_ms = (b.t_s - a.t_s) * 1e3;
    positive(span_ms).then(|| b.sent_pkts.saturating_sub(a.sent_pkts) as f64 / span_ms)
}

/// M8 utilisation `rate_bps / capacity_bps` (dimensionless; both in bit/s). `None` unless the
/// capacity is positive and the rate finite and non-negative.
pub fn utilisation(rate_bps: f64, capacity_bps: f64) -> Option<f64> {
    (positive(capacity_bps) && non_negative(rate_bps)).then(|| rate_bps / capacity_bps)
}

/// M8 efficiency of a run window (\[CHOICE\] both goodput- and wire-based utilisation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Efficiency {
    /// Aggregate goodput E, in bit/s.
    pub goodput_bps: Option<f64>,
    /// E / C (dimensionless).
    pub goodput_utilisation: Option<f64>,
    /// Bottleneck qdisc send rate, in bit/s (L2 bytes).
    pub wire_bps: Option<f64>,
    /// Wire rate / C (dimensionless).
    pub wire_utilisation: Option<f64>,
    /// Bottleneck qdisc send rate, in packets per millisecond.
    pub wire_pkts_per_ms: Option<f64>,
}

/// M8 over `[t0_s, t1_s]` for `flows` sharing a bottleneck of `capacity_bps` (bit/s) sampled
/// as `queue`.
pub fn efficiency(
    flows: &[FlowSeries],
    queue: &[QueuePoint],
    t0_s: f64,
    t1_s: f64,
    capacity_bps: f64,
) -> Efficiency {
    let goodput_bps = aggregate_goodput_bps(flows, t0_s, t1_s);
    let wire_bps = wire_throughput_bps(queue, t0_s, t1_s);
    Efficiency {
        goodput_bps,
        goodput_utilisation: goodput_bps.and_then(|e| utilisation(e, capacity_bps)),
        wire_bps,
        wire_utilisation: wire_bps.and_then(|w| utilisation(w, capacity_bps)),
        wire_pkts_per_ms: wire_rate_pkts_per_ms(queue, t0_s, t1_s),
    }
}

// ---------------------------------------------------------------------------------------------
// M9 loss
// ---------------------------------------------------------------------------------------------

/// M9 bottleneck drop rate over a window (\[CHOICE\] primary loss measure).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DropRate {
    /// Packets dropped in the window, in packets.
    pub drops: u64,
    /// Packets enqueued in the window, ≈ sent + (backlog at the end − backlog at the start),
    /// in packets.
    pub enqueued: u64,
    /// `drops / (enqueued + drops)` (dimensionless, in [0, 1]).
    pub rate: f64,
}

/// M9 bottleneck drop rate from the qdisc samples in `[t0_s, t1_s]`. `None` with fewer than 2
/// samples or if nothing arrived at the queue. Injected (netem) losses are not in these
/// counters; report them separately.
pub fn bottleneck_drop_rate(queue: &[QueuePoint], t0_s: f64, t1_s: f64) -> Option<DropRate> {
    let w = queue_window(queue, t0_s, t1_s);
    if w.len() < 2 {
        return None;
    }
    let (a, b) = (w.first()?, w.last()?);
    let drops = b.drops.saturating_sub(a.drops);
    let sent = i128::from(b.sent_pkts.saturating_sub(a.sent_pkts));
    let backlog_change = i128::from(b.backlog_pkts) - i128::from(a.backlog_pkts);
    let enqueued = u64::try_from((sent + backlog_change).max(0)).unwrap_or(u64::MAX);
    let arrived = enqueued.saturating_add(drops);
    (arrived > 0).then(|| DropRate {
        drops,
        enqueued,
        rate: drops as f64 / arrived as f64,
    })
}

/// M9 retransmission ratio of one flow, `total_retrans` (last sample) / `data_segs_out`
/// (dimensionless). `None` without samples or without a positive `data_segs_out`.
pub fn retransmission_ratio(flow: &FlowSeries) -> Option<f64> {
    let retrans = flow.points.last()?.total_retrans;
    let segs = flow.data_segs_out.filter(|s| *s > 0)?;
    Some(f64::from(retrans) / segs as f64)
}

/// M9 retransmission ratio pooled over `flows`, `Σ retrans / Σ data_segs_out` over the flows
/// that have both (dimensionless). `None` if no flow has both.
pub fn retransmission_ratio_pooled<'a>(
    flows: impl IntoIterator<Item = &'a FlowSeries>,
) -> Option<f64> {
    let (mut retrans, mut segs) = (0u64, 0u64);
    for f in flows {
        if let (Some(last), Some(s)) = (f.points.last(), f.data_segs_out) {
            retrans = retrans.saturating_add(u64::from(last.total_retrans));
            segs = segs.saturating_add(s);
        }
    }
    (segs > 0).then(|| retrans as f64 / segs as f64)
}

// ---------------------------------------------------------------------------------------------
// M10 response functions, M11 fair-to-Reno
// ---------------------------------------------------------------------------------------------

/// M10 theoretical response functions (algorithms.md §17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFunction {
    /// Standard TCP: `w = 1.2/√p`.
    Reno,
    /// HighSpeed TCP: `w = 0.12/p^0.835`.
    Hstcp,
    /// Scalable TCP: `w = 0.08/p`.
    Stcp,
}

/// M10 equilibrium average window `w` of `rf` at per-packet loss probability `p`, in packets.
///
/// With `low_window_pkts = Some(W_L)` the high-speed algorithms fall back to Reno where Reno's
/// window `1.2/√p` is at most W_L (their legacy mode: RFC 3649 W_L = 38; \[P0\] Table II HSTCP 31,
/// STCP 16); `None` uses the high-speed formula everywhere. `None` unless `0 < p ≤ 1`.
pub fn response_window_pkts(
    rf: ResponseFunction,
    p: f64,
    low_window_pkts: Option<f64>,
) -> Option<f64> {
    if !(positive(p) && p <= 1.0) {
        return None;
    }
    let reno = RENO_RESPONSE_COEFF / p.sqrt();
    let w = match rf {
        ResponseFunction::Reno => return Some(reno),
        ResponseFunction::Hstcp => HSTCP_RESPONSE_COEFF / p.powf(HSTCP_RESPONSE_EXPONENT),
        ResponseFunction::Stcp => STCP_RESPONSE_COEFF / p,
    };
    match low_window_pkts {
        Some(wl) if reno <= wl => Some(reno),
        _ => Some(w),
    }
}

/// M10 response function as throughput, `w·MSS·8/RTT` in bit/s, with `mss_bytes` in bytes and
/// `rtt_s` in seconds (see [`response_window_pkts`]). `None` for invalid p, MSS or RTT.
pub fn response_throughput_bps(
    rf: ResponseFunction,
    p: f64,
    low_window_pkts: Option<f64>,
    mss_bytes: f64,
    rtt_s: f64,
) -> Option<f64> {
    if !positive(mss_bytes) || !positive(rtt_s) {
        return None;
    }
    Some(response_window_pkts(rf, p, low_window_pkts)? * mss_bytes * 8.0 / rtt_s)
}

/// M11 fair-to-Reno factor (\[P3\] §V-D), `G_R(n Reno + 1 Reno) / G_R(n Reno + 1 X)`
/// (dimensionless; > 1: X takes more than a Reno flow would). Both arguments are the aggregate
/// goodput of the n Reno flows (see [`aggregate_goodput_bps`]) in the same unit. `None` unless
/// both are finite, the first non-negative and the second positive.
pub fn fair_to_reno(g_r_with_reno: f64, g_r_with_x: f64) -> Option<f64> {
    (non_negative(g_r_with_reno) && positive(g_r_with_x)).then(|| g_r_with_reno / g_r_with_x)
}

// ---------------------------------------------------------------------------------------------
// M12 queue length, M13 queueing delay
// ---------------------------------------------------------------------------------------------

/// Time-average of the bottleneck backlog over the qdisc samples in `[t0_s, t1_s]`, in
/// packets: the backlog is taken as linear between samples (trapezoidal rule), so unevenly
/// spaced samples are weighted by the time they cover. One sample: its value. `None` with no
/// samples in the window.
pub fn time_average_backlog_pkts(queue: &[QueuePoint], t0_s: f64, t1_s: f64) -> Option<f64> {
    let w = queue_window(queue, t0_s, t1_s);
    let (first, last) = (w.first()?, w.last()?);
    let span = last.t_s - first.t_s;
    if !positive(span) {
        return Some(w.iter().map(|q| q.backlog_pkts as f64).sum::<f64>() / w.len() as f64);
    }
    let area: f64 = w
        .windows(2)
        .map(|p| {
            (p[0].backlog_pkts as f64 + p[1].backlog_pkts as f64) / 2.0 * (p[1].t_s - p[0].t_s)
        })
        .sum();
    Some(area / span)
}

/// M12 normalised average queue length (\[P3\] §V-A): time-average backlog (packets, see
/// [`time_average_backlog_pkts`]) over `[t0_s, t1_s]` divided by the buffer `buffer_pkts`
/// (dimensionless, normally in [0, 1]). `None` without samples or for a non-positive buffer.
pub fn normalised_queue_length(
    queue: &[QueuePoint],
    t0_s: f64,
    t1_s: f64,
    buffer_pkts: f64,
) -> Option<f64> {
    if !positive(buffer_pkts) {
        return None;
    }
    Some(time_average_backlog_pkts(queue, t0_s, t1_s)? / buffer_pkts)
}

/// Time-average backlog in consecutive periods of `period_s` seconds from `t0_s` (\[P1\]'s 2-s
/// queue averages), as `(period start in s, average in packets)`; periods without samples are
/// left out.
pub fn queue_period_averages(
    queue: &[QueuePoint],
    t0_s: f64,
    t1_s: f64,
    period_s: f64,
) -> Vec<(f64, f64)> {
    if !positive(period_s) || !positive(t1_s - t0_s) {
        return Vec::new();
    }
    let m = ((t1_s - t0_s) / period_s + GRID_EPS).floor() as usize;
    (0..m)
        .filter_map(|k| {
            let a = t0_s + k as f64 * period_s;
            Some((a, time_average_backlog_pkts(queue, a, a + period_s)?))
        })
        .collect()
}

/// M13 queueing delay of one flow over a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueingDelay {
    /// Samples used.
    pub samples: usize,
    /// Smallest q, in seconds.
    pub min_s: f64,
    /// Mean q over the (periodic) samples, in seconds.
    pub mean_s: f64,
    /// Largest q, in seconds.
    pub max_s: f64,
}

/// M13 per-sample queueing delay `q = srtt − min_rtt` of `flow`, as `(t in s, q in s)`,
/// skipping samples whose srtt or min RTT is unknown (0, or `u32::MAX` for min RTT); q is
/// clamped at 0.
pub fn queueing_delay_series(flow: &FlowSeries) -> Vec<(f64, f64)> {
    flow.points
        .iter()
        .filter(|p| p.srtt_us != 0 && p.min_rtt_us != 0 && p.min_rtt_us != u32::MAX)
        .map(|p| {
            (
                p.t_s,
                f64::from(p.srtt_us.saturating_sub(p.min_rtt_us)) / 1e6,
            )
        })
        .collect()
}

/// M13 min/mean/max queueing delay of `flow` over the samples in `[t0_s, t1_s]` (see
/// [`queueing_delay_series`]). `None` without usable samples.
pub fn queueing_delay(flow: &FlowSeries, t0_s: f64, t1_s: f64) -> Option<QueueingDelay> {
    let q: Vec<f64> = queueing_delay_series(flow)
        .into_iter()
        .filter(|(t, _)| *t >= t0_s && *t <= t1_s)
        .map(|(_, q)| q)
        .collect();
    Some(QueueingDelay {
        samples: q.len(),
        mean_s: mean(&q)?,
        min_s: q.iter().copied().fold(f64::INFINITY, f64::min),
        max_s: q.iter().copied().fold(0.0, f64::max),
    })
}

// ---------------------------------------------------------------------------------------------
// M14 cwnd at backoff, M15 completion time, M16 congestion epochs, M17 reference curves
// ---------------------------------------------------------------------------------------------

/// One histogram bin `[lo_pkts, hi_pkts)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramBin {
    /// Lower edge (inclusive), in packets.
    pub lo_pkts: u64,
    /// Upper edge (exclusive), in packets.
    pub hi_pkts: u64,
    /// Backoffs with cwnd in the bin.
    pub count: u64,
}

/// M14 distribution of cwnd immediately before each backoff, pooled over flows and runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackoffDistribution {
    /// Backoffs pooled.
    pub count: usize,
    /// Mean cwnd before backoff, in packets.
    pub mean_pkts: f64,
    /// Standard deviation of the distribution (divisor n), in packets.
    pub std_pkts: f64,
    /// Coefficient of variation std/mean (dimensionless); `None` if the mean is 0.
    pub cov: Option<f64>,
    /// Non-empty bins of width `bin_width_pkts`, ascending (empty bins are left out).
    pub histogram: Vec<HistogramBin>,
}

/// Coefficient of variation std/mean of `xs` with the population standard deviation (divisor
/// n: the spread of the distribution itself), dimensionless. `None` for no values, a
/// non-finite value or a zero mean.
pub fn coefficient_of_variation(xs: &[f64]) -> Option<f64> {
    let m = mean(xs).filter(|m| *m != 0.0)?;
    let var = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
    Some(var.sqrt() / m.abs())
}

/// M14 cwnd-at-backoff distribution of all `cwnd_before` of `flows` (pool several runs by
/// chaining their flows), with bins of `bin_width_pkts` packets (0 is taken as 1). `None` if
/// there are no backoffs.
pub fn cwnd_at_backoff<'a>(
    flows: impl IntoIterator<Item = &'a FlowSeries>,
    bin_width_pkts: u32,
) -> Option<BackoffDistribution> {
    let cwnds: Vec<f64> = flows
        .into_iter()
        .flat_map(|f| f.backoffs.iter().map(|b| f64::from(b.cwnd_before)))
        .collect();
    let mean_pkts = mean(&cwnds)?;
    let std_pkts = (cwnds
        .iter()
        .map(|x| (x - mean_pkts) * (x - mean_pkts))
        .sum::<f64>()
        / cwnds.len() as f64)
        .sqrt();
    let width = u64::from(bin_width_pkts.max(1));
    let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
    for c in &cwnds {
        *bins.entry(*c as u64 / width).or_default() += 1;
    }
    Some(BackoffDistribution {
        count: cwnds.len(),
        mean_pkts,
        std_pkts,
        cov: coefficient_of_variation(&cwnds),
        histogram: bins
            .into_iter()
            .map(|(k, count)| HistogramBin {
                lo_pkts: k * width,
                hi_pkts: (k + 1) * width,
                count,
            })
            .collect(),
    })
}

/// M15 completion times of the flows started k-th in each run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionSummary {
    /// Start order within a run, 1 = the first flow started.
    pub start_rank: usize,
    /// Completion times of the runs' k-th flows that completed, in run order, in seconds.
    pub values_s: Vec<f64>,
    /// Runs whose k-th flow did not complete (no `completion_s`).
    pub not_completed: usize,
    /// Mean of `values_s`, in seconds.
    pub mean_s: Option<f64>,
    /// Standard error of that mean, in seconds (0 for one value).
    pub stderr_s: Option<f64>,
}

/// M15 completion times (\[P2\] §III) grouped by start order: flows of each run are ranked by
/// `start_s` (ties by id), and rank k collects `completion_s` of every run's k-th flow.
/// Flows with a non-finite start are ranked last.
pub fn completion_times_by_start_order(runs: &[&[FlowSeries]]) -> Vec<CompletionSummary> {
    let mut out: Vec<CompletionSummary> = Vec::new();
    for run in runs {
        let mut order: Vec<&FlowSeries> = run.iter().collect();
        order.sort_by(|a, b| {
            let key = |f: &FlowSeries| {
                if f.start_s.is_finite() {
                    f.start_s
                } else {
                    f64::INFINITY
                }
            };
            key(a).total_cmp(&key(b)).then(a.id.cmp(&b.id))
        });
        for (i, f) in order.iter().enumerate() {
            if out.len() <= i {
                out.push(CompletionSummary {
                    start_rank: i + 1,
                    values_s: Vec::new(),
                    not_completed: 0,
                    mean_s: None,
                    stderr_s: None,
                });
            }
            match f.completion_s.filter(|c| c.is_finite()) {
                Some(c) => out[i].values_s.push(c),
                None => out[i].not_completed += 1,
            }
        }
    }
    for s in &mut out {
        if let Some((m, se)) = mean_and_stderr(&s.values_s) {
            s.mean_s = Some(m);
            s.stderr_s = Some(se);
        }
    }
    out
}

/// M16 congestion epochs of `flow`: the times between consecutive backoffs, in seconds, in
/// time order (backoffs are sorted first; non-finite times are dropped). Empty with fewer than
/// 2 backoffs.
pub fn congestion_epochs_s(flow: &FlowSeries) -> Vec<f64> {
    let mut t: Vec<f64> = flow
        .backoffs
        .iter()
        .map(|b| b.t_s)
        .filter(|t| t.is_finite())
        .collect();
    t.sort_by(f64::total_cmp);
    t.windows(2).map(|w| w[1] - w[0]).collect()
}

/// M16 mean congestion epoch of `flow`, in seconds; `None` with fewer than 2 backoffs.
pub fn mean_congestion_epoch_s(flow: &FlowSeries) -> Option<f64> {
    mean(&congestion_epochs_s(flow))
}

/// M17 theoretical models of RTT unfairness (\[P0\] §V-B).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RttUnfairnessModel {
    /// Standard TCP with synchronised losses: ratio ∝ (RTT_short/RTT_long)².
    Reno,
    /// H-TCP with RTT-scaled increase: ratio ∝ RTT_short/RTT_long.
    Htcp,
}

/// M17 reference throughput ratio `ū_longRTT/ū_shortRTT` predicted by `model` for two flows
/// with RTTs `rtt_a_s` and `rtt_b_s` (seconds, either order), normalised to 1 at equal RTTs,
/// in (0, 1]. `None` unless both RTTs are positive.
pub fn reference_rtt_ratio(model: RttUnfairnessModel, rtt_a_s: f64, rtt_b_s: f64) -> Option<f64> {
    if !positive(rtt_a_s) || !positive(rtt_b_s) {
        return None;
    }
    let r = rtt_a_s.min(rtt_b_s) / rtt_a_s.max(rtt_b_s);
    Some(match model {
        RttUnfairnessModel::Reno => r * r,
        RttUnfairnessModel::Htcp => r,
    })
}

// ---------------------------------------------------------------------------------------------
// Repetitions
// ---------------------------------------------------------------------------------------------

/// Mean and standard error of the mean (sample std with divisor n − 1, over √n) of repeated
/// measurements, in their unit (\[P0\]: error bar = standard error). The standard error is 0 for
/// one value; `None` for no values or a non-finite value.
pub fn mean_and_stderr(xs: &[f64]) -> Option<(f64, f64)> {
    let m = mean(xs)?;
    let se = sample_std(xs).map_or(0.0, |s| s / (xs.len() as f64).sqrt());
    Some((m, se))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sampling interval of the synthetic flows, in seconds.
    const DT: f64 = 0.1;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    #[track_caller]
    fn assert_close(got: f64, want: f64) {
        assert!(close(got, want, 1e-9), "got {got}, want {want}");
    }

    #[track_caller]
    fn assert_some_close(got: Option<f64>, want: f64) {
        match got {
            Some(g) => assert!(close(g, want, 1e-6), "got {g}, want {want}"),
            None => panic!("got None, want {want}"),
        }
    }

    /// A flow sampled every `DT` from `start_s` to `stop_s` whose rate is piecewise constant:
    /// `rates[i] = (from_s, bit/s)` holds from `from_s` to the next piece (or `stop_s`).
    fn piecewise_flow(
        id: usize,
        start_s: f64,
        stop_s: f64,
        base_rtt_s: f64,
        rates: &[(f64, f64)],
    ) -> FlowSeries {
        let bytes = |t: f64| {
            let mut b = 0.0;
            for (i, &(from, bps)) in rates.iter().enumerate() {
                let to = rates.get(i + 1).map_or(stop_s, |r| r.0);
                let end = t.min(to);
                if end > from {
                    b += (end - from) * bps / 8.0;
                }
            }
            b
        };
        let (k0, k1) = ((start_s / DT).round() as i64, (stop_s / DT).round() as i64);
        let points = (k0..=k1)
            .map(|k| {
                let t = k as f64 * DT;
                FlowPoint {
                    t_s: t,
                    bytes_acked: bytes(t).round() as u64,
                    ..Default::default()
                }
            })
            .collect();
        FlowSeries {
            id,
            cc: "reno".into(),
            base_rtt_s,
            start_s,
            stop_s,
            points,
            ..Default::default()
        }
    }

    fn points(tb: &[(f64, u64)]) -> FlowSeries {
        FlowSeries {
            points: tb
                .iter()
                .map(|&(t_s, bytes_acked)| FlowPoint {
                    t_s,
                    bytes_acked,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn backoffs(id: usize, events: &[(f64, u32)]) -> FlowSeries {
        FlowSeries {
            id,
            backoffs: events
                .iter()
                .map(|&(t_s, cwnd_before)| BackoffEvent {
                    t_s,
                    cwnd_before,
                    cwnd_after: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    // ---- M1 ----

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

    // ---- M2 ----

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

    // ---- M3, M4 ----

    #[test]
    fn throughput_ratio_reports_min_over_max_and_flow_2_over_flow_1() {
        let r = throughput_ratio(4e6, 2e6);
        assert_some_close(r.minmax, 0.5);
        assert_some_close(r.signed_2_over_1, 0.5);
        let r = throughput_ratio(2e6, 4e6);
        assert_some_close(r.minmax, 0.5);
        assert_some_close(r.signed_2_over_1, 2.0);
    }

    #[test]
    fn throughput_ratio_of_a_starved_flow_is_zero_and_of_two_idle_flows_is_none() {
        let r = throughput_ratio(0.0, 3e6);
        assert_some_close(r.minmax, 0.0);
        assert_eq!(r.signed_2_over_1, None);
        let r = throughput_ratio(0.0, 0.0);
        assert_eq!((r.minmax, r.signed_2_over_1), (None, None));
        assert_eq!(throughput_ratio(f64::NAN, 1.0).minmax, None);
    }

    #[test]
    fn flows_within_5_percent_are_fair() {
        assert!(is_fair(0.96, FAIR_RATIO_MIN));
        assert!(!is_fair(0.94, FAIR_RATIO_MIN));
    }

    #[test]
    fn r_rtt_divides_the_long_rtt_flow_by_the_short_rtt_flow() {
        assert_some_close(r_rtt(9e6, 0.042, 1e6, 0.162), 1.0 / 9.0);
        assert_some_close(r_rtt(1e6, 0.162, 9e6, 0.042), 1.0 / 9.0);
        assert_some_close(r_rtt(2e6, 0.1, 3e6, 0.1), 1.5);
        assert_eq!(r_rtt(1e6, 0.162, 0.0, 0.042), None);
    }

    #[test]
    fn jain_index_is_one_for_equal_shares() {
        assert_some_close(jain_index(&[5.0, 5.0, 5.0]), 1.0);
        assert_some_close(jain_index(&[7.0]), 1.0);
    }

    #[test]
    fn jain_index_is_one_over_n_when_one_flow_takes_everything() {
        assert_some_close(jain_index(&[10.0, 0.0, 0.0, 0.0]), 0.25);
    }

    #[test]
    fn jain_index_of_one_and_three_is_0_8() {
        // (1+3)² / (2·(1+9)) = 16/20.
        assert_some_close(jain_index(&[1.0, 3.0]), 0.8);
    }

    #[test]
    fn jain_index_is_none_for_no_flows_all_zero_or_negative_shares() {
        assert_eq!(jain_index(&[]), None);
        assert_eq!(jain_index(&[0.0, 0.0]), None);
        assert_eq!(jain_index(&[1.0, -1.0]), None);
    }

    // ---- M5 ----

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

    // ---- M6, M7, intervals ----

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

    // ---- M8, M9 ----

    fn linear_queue() -> Vec<QueuePoint> {
        // 1 s of 10 ms samples: 1.25 MB/s (10 Mb/s) and 1000 packets/s sent.
        (0..=100)
            .map(|i| {
                let t = f64::from(i) * 0.01;
                QueuePoint {
                    t_s: t,
                    sent_bytes: 12_500 * i as u64,
                    sent_pkts: 10 * i as u64,
                    ..Default::default()
                }
            })
            .collect()
    }

    #[test]
    fn aggregate_goodput_sums_the_bytes_of_all_flows_over_the_window() {
        // 1e7 B + 5e6 B in 10 s = 12 Mb/s (flow 2 only ran for half the window).
        let a = piecewise_flow(0, 0.0, 10.0, 0.1, &[(0.0, 8e6)]);
        let b = piecewise_flow(1, 5.0, 10.0, 0.1, &[(5.0, 8e6)]);
        let flows = [a, b];
        assert_some_close(aggregate_goodput_bps(&flows, 0.0, 10.0), 12e6);
        assert_some_close(aggregate_goodput_bps(&[], 0.0, 10.0), 0.0);
        assert_eq!(aggregate_goodput_bps(&flows, 1.0, 1.0), None);
        let e = efficiency(&flows, &[], 0.0, 10.0, 20e6);
        assert_some_close(e.goodput_utilisation, 0.6);
        assert_eq!(e.wire_bps, None);
    }

    #[test]
    fn wire_utilisation_uses_the_qdisc_bytes_sent() {
        let e = efficiency(&[], &linear_queue(), 0.0, 1.0, 20e6);
        assert_some_close(e.wire_bps, 10e6);
        assert_some_close(e.wire_utilisation, 0.5);
        assert_some_close(e.wire_pkts_per_ms, 1.0);
        assert_eq!(utilisation(1.0, 0.0), None);
    }

    #[test]
    fn drop_rate_is_drops_over_enqueued_plus_drops() {
        // Sent 1000, backlog 10 → 30, drops 5 → 25: 20 / (1020 + 20).
        let q = [
            QueuePoint {
                t_s: 0.0,
                sent_pkts: 100,
                backlog_pkts: 10,
                drops: 5,
                ..Default::default()
            },
            QueuePoint {
                t_s: 1.0,
                sent_pkts: 1100,
                backlog_pkts: 30,
                drops: 25,
                ..Default::default()
            },
        ];
        let d = bottleneck_drop_rate(&q, 0.0, 1.0).expect("two samples");
        assert_eq!((d.drops, d.enqueued), (20, 1020));
        assert_close(d.rate, 20.0 / 1040.0);
        assert_eq!(bottleneck_drop_rate(&q[..1], 0.0, 1.0), None);
        assert_eq!(bottleneck_drop_rate(&[q[0], q[0]], 0.0, 1.0), None);
    }

    #[test]
    fn retransmission_ratio_is_retransmits_over_data_segments() {
        let mut f = points(&[(0.0, 0), (1.0, 100)]);
        f.points[1].total_retrans = 5;
        assert_eq!(retransmission_ratio(&f), None);
        f.data_segs_out = Some(1000);
        assert_some_close(retransmission_ratio(&f), 0.005);
        let mut g = f.clone();
        g.data_segs_out = Some(3000);
        g.points[1].total_retrans = 15;
        assert_some_close(retransmission_ratio_pooled([&f, &g]), 20.0 / 4000.0);
        assert_eq!(retransmission_ratio_pooled([&FlowSeries::default()]), None);
    }

    // ---- M10, M11 ----

    #[test]
    fn response_functions_match_their_closed_forms() {
        // p = 1e-4: Reno 1.2/0.01 = 120; STCP 0.08/1e-4 = 800; HSTCP 0.12·10^3.34 = 262.53.
        assert_some_close(
            response_window_pkts(ResponseFunction::Reno, 1e-4, None),
            120.0,
        );
        assert_some_close(
            response_window_pkts(ResponseFunction::Stcp, 1e-4, None),
            800.0,
        );
        let h = response_window_pkts(ResponseFunction::Hstcp, 1e-4, None).expect("valid p");
        assert!((h - 262.531).abs() < 0.01, "{h}");
        assert_eq!(
            response_window_pkts(ResponseFunction::Reno, 0.0, None),
            None
        );
        assert_eq!(
            response_window_pkts(ResponseFunction::Reno, 1.5, None),
            None
        );
    }

    #[test]
    fn response_throughput_is_window_times_mss_over_rtt() {
        // 120 packets · 1448 B · 8 / 0.1 s = 13 900 800 bit/s.
        let x = response_throughput_bps(ResponseFunction::Reno, 1e-4, None, 1448.0, 0.1);
        assert_some_close(x, 13_900_800.0);
        assert_eq!(
            response_throughput_bps(ResponseFunction::Reno, 1e-4, None, 1448.0, 0.0),
            None
        );
    }

    #[test]
    fn response_with_a_low_window_is_reno_below_it() {
        // p = 0.01: Reno w = 12 ≤ 16 → legacy mode; p = 1e-4: Reno 120 > 16 → 0.08/p.
        let stcp = ResponseFunction::Stcp;
        assert_some_close(response_window_pkts(stcp, 0.01, Some(16.0)), 12.0);
        assert_some_close(response_window_pkts(stcp, 1e-4, Some(16.0)), 800.0);
    }

    #[test]
    fn fair_to_reno_above_one_means_x_takes_more_than_reno() {
        assert_some_close(fair_to_reno(90e6, 60e6), 1.5);
        assert_some_close(fair_to_reno(60e6, 60e6), 1.0);
        assert_eq!(fair_to_reno(90e6, 0.0), None);
    }

    // ---- M12, M13 ----

    #[test]
    fn normalised_queue_length_is_the_time_weighted_backlog_over_the_buffer() {
        // (0 s, 0), (1 s, 10), (3 s, 10): area 5 + 20 = 25 over 3 s = 8.33 packets (the plain
        // mean of the samples would be 6.67); buffer 100 → 0.0833.
        let q: Vec<QueuePoint> = [(0.0, 0), (1.0, 10), (3.0, 10)]
            .iter()
            .map(|&(t_s, backlog_pkts)| QueuePoint {
                t_s,
                backlog_pkts,
                ..Default::default()
            })
            .collect();
        assert_some_close(time_average_backlog_pkts(&q, 0.0, 3.0), 25.0 / 3.0);
        assert_some_close(normalised_queue_length(&q, 0.0, 3.0, 100.0), 25.0 / 300.0);
        assert_some_close(time_average_backlog_pkts(&q, 2.5, 3.5), 10.0);
        assert_eq!(normalised_queue_length(&q, 0.0, 3.0, 0.0), None);
        assert_eq!(time_average_backlog_pkts(&q, 4.0, 5.0), None);
    }

    #[test]
    fn queue_period_averages_are_time_averages_per_period() {
        // Backlog 0, 2, 2, 4, 4 at 0..4 s: [0, 2] → (1 + 2)/2 = 1.5, [2, 4] → (3 + 4)/2 = 3.5.
        let q: Vec<QueuePoint> = [0u64, 2, 2, 4, 4]
            .iter()
            .enumerate()
            .map(|(i, &b)| QueuePoint {
                t_s: i as f64,
                backlog_pkts: b,
                ..Default::default()
            })
            .collect();
        let avg = queue_period_averages(&q, 0.0, 4.0, QUEUE_AVERAGE_PERIOD_S_DEFAULT);
        assert_eq!(avg.len(), 2);
        assert_close(avg[0].0, 0.0);
        assert_close(avg[0].1, 1.5);
        assert_close(avg[1].0, 2.0);
        assert_close(avg[1].1, 3.5);
    }

    #[test]
    fn queueing_delay_is_srtt_minus_min_rtt() {
        // q = 10, 50, 0 ms; the sample with an unknown min RTT is skipped.
        let rtts = [
            (110_000, 100_000),
            (150_000, 100_000),
            (100_000, 100_000),
            (120_000, u32::MAX),
        ];
        let f = FlowSeries {
            points: rtts
                .iter()
                .enumerate()
                .map(|(i, &(srtt_us, min_rtt_us))| FlowPoint {
                    t_s: i as f64,
                    srtt_us,
                    min_rtt_us,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let q = queueing_delay(&f, 0.0, 10.0).expect("usable samples");
        assert_eq!(q.samples, 3);
        assert_close(q.min_s, 0.0);
        assert_close(q.mean_s, 0.02);
        assert_close(q.max_s, 0.05);
        assert_eq!(queueing_delay_series(&f).len(), 3);
        assert_eq!(queueing_delay(&f, 5.0, 10.0), None);
    }

    // ---- M14–M17 ----

    #[test]
    fn cwnd_at_backoff_pools_flows_into_a_histogram_with_its_cov() {
        // 10, 20, 30: mean 20, std √(200/3) = 8.165, CoV 0.408.
        let a = backoffs(0, &[(1.0, 10), (2.0, 20)]);
        let b = backoffs(1, &[(1.5, 30)]);
        let d = cwnd_at_backoff([&a, &b], 10).expect("three backoffs");
        assert_eq!(d.count, 3);
        assert_close(d.mean_pkts, 20.0);
        assert_close(d.std_pkts, (200.0f64 / 3.0).sqrt());
        assert_some_close(d.cov, (200.0f64 / 3.0).sqrt() / 20.0);
        let bins: Vec<(u64, u64, u64)> = d
            .histogram
            .iter()
            .map(|b| (b.lo_pkts, b.hi_pkts, b.count))
            .collect();
        assert_eq!(bins, vec![(10, 20, 1), (20, 30, 1), (30, 40, 1)]);
        assert_eq!(cwnd_at_backoff([&FlowSeries::default()], 10), None);
    }

    #[test]
    fn coefficient_of_variation_uses_the_population_std() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population std 2 → 0.4.
        assert_some_close(
            coefficient_of_variation(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]),
            0.4,
        );
        assert_eq!(coefficient_of_variation(&[]), None);
        assert_eq!(coefficient_of_variation(&[0.0, 0.0]), None);
    }

    #[test]
    fn completion_times_are_grouped_by_start_order() {
        let flow = |id: usize, start_s: f64, completion_s: Option<f64>| FlowSeries {
            id,
            start_s,
            completion_s,
            ..Default::default()
        };
        let run1 = vec![flow(0, 0.0, Some(10.0)), flow(1, 5.0, Some(12.0))];
        let run2 = vec![flow(0, 5.0, None), flow(1, 0.0, Some(14.0))];
        let s = completion_times_by_start_order(&[&run1, &run2]);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].start_rank, s[0].values_s.clone()),
            (1, vec![10.0, 14.0])
        );
        assert_some_close(s[0].mean_s, 12.0);
        assert_some_close(s[0].stderr_s, 2.0); // std √8 over √2
        assert_eq!(
            (s[1].start_rank, s[1].values_s.clone(), s[1].not_completed),
            (2, vec![12.0], 1)
        );
        assert_some_close(s[1].stderr_s, 0.0);
        assert!(completion_times_by_start_order(&[]).is_empty());
    }

    #[test]
    fn congestion_epochs_are_the_gaps_between_backoffs() {
        let f = backoffs(0, &[(7.0, 30), (1.0, 10), (3.0, 20)]);
        assert_eq!(congestion_epochs_s(&f), vec![2.0, 4.0]);
        assert_some_close(mean_congestion_epoch_s(&f), 3.0);
        assert_eq!(mean_congestion_epoch_s(&backoffs(0, &[(1.0, 10)])), None);
    }

    #[test]
    fn reference_rtt_ratio_is_quadratic_for_reno_and_linear_for_htcp() {
        assert_some_close(
            reference_rtt_ratio(RttUnfairnessModel::Reno, 0.040, 0.160),
            0.0625,
        );
        assert_some_close(
            reference_rtt_ratio(RttUnfairnessModel::Htcp, 0.160, 0.040),
            0.25,
        );
        assert_some_close(reference_rtt_ratio(RttUnfairnessModel::Reno, 0.1, 0.1), 1.0);
        assert_eq!(
            reference_rtt_ratio(RttUnfairnessModel::Reno, 0.0, 0.1),
            None
        );
    }

    // ---- repetitions, parameters ----

    #[test]
    fn mean_and_stderr_of_repetitions() {
        // 1, 2, 3, 4: mean 2.5, sample std √(5/3) = 1.291, stderr 1.291/2 = 0.6455.
        let (m, se) = mean_and_stderr(&[1.0, 2.0, 3.0, 4.0]).expect("values");
        assert_close(m, 2.5);
        assert_close(se, (5.0f64 / 3.0).sqrt() / 2.0);
        assert_eq!(mean_and_stderr(&[7.0]), Some((7.0, 0.0)));
        assert_eq!(mean_and_stderr(&[]), None);
        assert_eq!(mean_and_stderr(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn metric_params_default_to_the_spec_choices_and_round_trip_as_json() {
        let p = MetricParams::default();
        assert_close(p.short_term.delta_s, 0.1);
        assert_close(p.short_term.window_rtts, 100.0);
        assert_eq!(p.short_term.init, EwmaInit::FirstSample);
        assert_close(p.convergence.eps, 0.8);
        assert_close(p.convergence.reference_fraction, 0.5);
        assert_eq!(p.convergence.b_hold_rtts, None);
        assert_close(p.steady_state.min_start_s, 60.0);
        assert_close(p.steady_state.run_fraction, 0.2);
        assert_close(p.period_s, 5.0);
        assert_close(p.r1_tolerance, 0.1);
        let json = serde_json::to_string(&p).expect("serialises");
        assert!(json.contains("\"first_sample\""), "{json}");
        let back: MetricParams = serde_json::from_str(&json).expect("deserialises");
        assert_eq!(back, p);
    }
}
