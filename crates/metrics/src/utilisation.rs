//! M8 aggregate goodput, wire rate at the bottleneck and utilisation (efficiency).

use serde::{Deserialize, Serialize};

use super::inputs::{FlowSeries, QueuePoint};
use super::series::{bytes_delta, non_negative, positive, queue_window};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::{assert_some_close, linear_queue, piecewise_flow};

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
}
