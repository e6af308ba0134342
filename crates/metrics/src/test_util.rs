//! Synthetic flows and queues for the metric tests, and float comparisons.

use super::inputs::{BackoffEvent, FlowPoint, FlowSeries, QueuePoint};

/// Sampling interval of the synthetic flows, in seconds.
pub(super) const DT: f64 = 0.1;

pub(super) fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1.0)
}

#[track_caller]
pub(super) fn assert_close(got: f64, want: f64) {
    assert!(close(got, want, 1e-9), "got {got}, want {want}");
}

#[track_caller]
pub(super) fn assert_some_close(got: Option<f64>, want: f64) {
    match got {
        Some(g) => assert!(close(g, want, 1e-6), "got {g}, want {want}"),
        None => panic!("got None, want {want}"),
    }
}

/// A flow sampled every `DT` from `start_s` to `stop_s` whose rate is piecewise constant:
/// `rates[i] = (from_s, bit/s)` holds from `from_s` to the next piece (or `stop_s`).
pub(super) fn piecewise_flow(
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

pub(super) fn points(tb: &[(f64, u64)]) -> FlowSeries {
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

pub(super) fn backoffs(id: usize, events: &[(f64, u32)]) -> FlowSeries {
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

pub(super) fn linear_queue() -> Vec<QueuePoint> {
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
