//! Fairness between flows: M3 throughput ratios (and the M17 reference curves of RTT
//! unfairness they are compared with) and M4 Jain's index.

use serde::{Deserialize, Serialize};

use super::series::{non_negative, positive};

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

/// \[P0\]'s same-RTT fairness criterion: `minmax ≥ threshold` (the spec's is [`FAIR_RATIO_MIN`](super::FAIR_RATIO_MIN)).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::assert_some_close;
    use crate::FAIR_RATIO_MIN;

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
}
