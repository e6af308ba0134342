//! Backoffs: M14 distribution of the cwnd at backoff and M16 congestion epochs.

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::inputs::FlowSeries;
use super::stats::{coefficient_of_variation, mean};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{assert_close, assert_some_close, backoffs};

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
    fn congestion_epochs_are_the_gaps_between_backoffs() {
        let f = backoffs(0, &[(7.0, 30), (1.0, 10), (3.0, 20)]);
        assert_eq!(congestion_epochs_s(&f), vec![2.0, 4.0]);
        assert_some_close(mean_congestion_epoch_s(&f), 3.0);
        assert_eq!(mean_congestion_epoch_s(&backoffs(0, &[(1.0, 10)])), None);
    }
}
