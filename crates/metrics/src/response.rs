//! M10 response functions (window against loss rate) and M11 fair-to-Reno factor.

use serde::{Deserialize, Serialize};

use super::params::{
    HSTCP_RESPONSE_COEFF, HSTCP_RESPONSE_EXPONENT, RENO_RESPONSE_COEFF, STCP_RESPONSE_COEFF,
};
use super::series::{non_negative, positive};

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
/// goodput of the n Reno flows (see [`aggregate_goodput_bps`](super::aggregate_goodput_bps)) in the same unit. `None` unless
/// both are finite, the first non-negative and the second positive.
pub fn fair_to_reno(g_r_with_reno: f64, g_r_with_x: f64) -> Option<f64> {
    (non_negative(g_r_with_reno) && positive(g_r_with_x)).then(|| g_r_with_reno / g_r_with_x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::assert_some_close;

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
}
