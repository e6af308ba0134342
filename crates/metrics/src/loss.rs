//! M9 loss: drop rate at the bottleneck and the flows' retransmission ratio.

use serde::{Deserialize, Serialize};

use super::inputs::{FlowSeries, QueuePoint};
use super::series::queue_window;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{assert_close, assert_some_close, points};

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
}
