//! The \[CHOICE\] parameters of the metrics with the spec's defaults, and [`MetricParams`],
//! which gathers them to be recorded with a run's results.

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::assert_close;

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
