//! M12 queue length at the bottleneck and M13 queueing delay of a flow.

use serde::{Deserialize, Serialize};

use super::inputs::{FlowSeries, QueuePoint};
use super::series::{positive, queue_window, GRID_EPS};
use super::stats::mean;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{assert_close, assert_some_close};
    use crate::{FlowPoint, QUEUE_AVERAGE_PERIOD_S_DEFAULT};

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
}
