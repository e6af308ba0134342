//! Reading the raw series: U(t) from a flow's samples, the qdisc samples of a window, and
//! the tolerance for placing times on a grid.

use super::inputs::{FlowPoint, QueuePoint};

/// Tolerance for placing times on the δ grid and for counting whole periods, in grid steps.
pub(super) const GRID_EPS: f64 = 1e-9;

pub(super) fn positive(x: f64) -> bool {
    x > 0.0 && x.is_finite()
}

pub(super) fn non_negative(x: f64) -> bool {
    x >= 0.0 && x.is_finite()
}

/// U(t): bytes acknowledged by `t`, linear between samples, held outside them.
pub(super) fn bytes_at(points: &[FlowPoint], t: f64) -> Option<f64> {
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
pub(super) fn bytes_delta(points: &[FlowPoint], t0: f64, t1: f64) -> f64 {
    match (bytes_at(points, t0), bytes_at(points, t1)) {
        (Some(a), Some(b)) => (b - a).max(0.0),
        _ => 0.0,
    }
}

/// The queue samples with `t0 <= t_s <= t1`.
pub(super) fn queue_window(queue: &[QueuePoint], t0: f64, t1: f64) -> &[QueuePoint] {
    let a = queue.partition_point(|q| q.t_s < t0);
    let b = queue.partition_point(|q| q.t_s <= t1);
    if a < b {
        &queue[a..b]
    } else {
        &[]
    }
}
