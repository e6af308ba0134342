//! Delay distributions ([`DelayStats`], of any delays: also the UDP probes'), and
//! per-packet one-way delay and bottleneck sojourn time: what the testbed's delay taps
//! measured (every sampled packet timed where it left its sender, entered and left each
//! bottleneck, and reached its receiver, on one clock), reduced to per-flow and per-hop
//! percentiles, CDFs and series.
//!
//! M13 (queueing delay, spec benchmarks.md) is otherwise srtt − min RTT, which mixes the
//! reverse path and delayed ACKs into it; the sojourn time is the queue's own figure.

use serde::{Deserialize, Serialize};

/// One sampled packet's delays.
#[derive(Debug, Clone, PartialEq)]
pub struct PacketDelay {
    /// When it reached its destination, s from the run's start.
    pub t_s: f64,
    /// Flow id (1-based, as `FlowSeries::id`).
    pub flow: usize,
    /// `true` for a packet of the flow's sender (data), `false` for one of its receiver
    /// (ACKs).
    pub forward: bool,
    /// One-way delay, origin to destination, usec.
    pub owd_us: f64,
    /// Sojourn time at bottleneck `k` at index `k - 1`, usec; `None` where the packet did
    /// not cross it.
    pub sojourn_us: Vec<Option<f64>>,
}

/// Distribution of one delay, usec.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DelayStats {
    /// Values (packets, probes).
    pub n: u64,
    /// Smallest, usec.
    #[serde(default)]
    pub min_us: f64,
    /// Mean, usec.
    pub mean_us: f64,
    /// Median, usec.
    pub p50_us: f64,
    /// 95th percentile, usec.
    pub p95_us: f64,
    /// 99th percentile, usec.
    pub p99_us: f64,
    /// Largest, usec.
    pub max_us: f64,
}

/// Points of a CDF: the 0th, 1st, …, 100th percentile, usec (101 values).
pub const CDF_POINTS: usize = 101;

/// Width of a series bin, s.
pub const SERIES_BIN_S: f64 = 0.1;

/// Nearest-rank quantile `q` (0..=1) of sorted `xs`; `None` for no values.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

impl DelayStats {
    /// Of `xs` (usec, any order); `None` for no values.
    pub fn of(xs: &[f64]) -> Option<DelayStats> {
        let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        Some(DelayStats {
            n: v.len() as u64,
            min_us: *v.first()?,
            mean_us: v.iter().sum::<f64>() / v.len().max(1) as f64,
            p50_us: quantile(&v, 0.50)?,
            p95_us: quantile(&v, 0.95)?,
            p99_us: quantile(&v, 0.99)?,
            max_us: *v.last()?,
        })
    }
}

/// The [`CDF_POINTS`] percentiles of `xs`, usec; empty for no values.
pub fn cdf(xs: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    (0..CDF_POINTS)
        .filter_map(|i| quantile(&v, i as f64 / (CDF_POINTS - 1) as f64))
        .collect()
}

/// Mean of `(t_s, x)` points per [`SERIES_BIN_S`] bin, as `(bin start s, mean)`.
pub fn binned(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut bins: std::collections::BTreeMap<i64, (f64, u32)> = Default::default();
    for &(t, x) in points {
        let e = bins.entry((t / SERIES_BIN_S).floor() as i64).or_default();
        e.0 += x;
        e.1 += 1;
    }
    bins.into_iter()
        .map(|(b, (sum, n))| (b as f64 * SERIES_BIN_S, sum / f64::from(n)))
        .collect()
}

/// One flow's delays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowDelays {
    /// Flow id.
    pub id: usize,
    /// Its data's one-way delay, sender to receiver.
    pub forward: Option<DelayStats>,
    /// Its ACKs' one-way delay, receiver to sender.
    pub reverse: Option<DelayStats>,
    /// Its data's sojourn time at every bottleneck it crosses, summed.
    pub sojourn: Option<DelayStats>,
    /// CDF of the forward one-way delay ([`cdf`]), usec.
    pub forward_cdf_us: Vec<f64>,
    /// Forward one-way delay over time ([`binned`]): (s, usec).
    pub forward_series: Vec<(f64, f64)>,
}

/// One bottleneck's sojourn times, every packet that crossed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopDelays {
    /// Bottleneck, 1-based.
    pub hop: usize,
    /// Its sojourn time.
    pub sojourn: Option<DelayStats>,
    /// Its CDF ([`cdf`]), usec.
    pub sojourn_cdf_us: Vec<f64>,
    /// Over time ([`binned`]): (s, usec).
    pub sojourn_series: Vec<(f64, f64)>,
}

/// What the delay taps counted in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapCounts {
    /// 1 packet in this many was sampled.
    pub sample_every: u32,
    /// Sampled packets stamped where they entered the testbed.
    pub stamped: u64,
    /// Sampled packets that reached their destination with their stamps.
    pub delivered: u64,
    /// Sampled packets that reached a destination without stamps (evicted).
    pub unmatched: u64,
    /// Events lost to a full ring buffer.
    pub events_dropped: u64,
    /// GSO packets of more than 64 segments at their origin (the rest went unstamped).
    #[serde(default)]
    pub gso_truncated: u64,
}

/// A run's delays: counters, per flow and per bottleneck.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DelayRecord {
    /// The taps' counters.
    pub counts: TapCounts,
    /// Per flow, by id.
    pub flows: Vec<FlowDelays>,
    /// Per bottleneck, hop 1 first.
    pub hops: Vec<HopDelays>,
}

impl DelayRecord {
    /// Reduces the packets of a run with `flows` flows (ids 1..=flows) and `hops`
    /// bottlenecks.
    pub fn from_packets(
        counts: TapCounts,
        packets: &[PacketDelay],
        flows: usize,
        hops: usize,
    ) -> DelayRecord {
        let flows = (1..=flows)
            .map(|id| {
                let mine = || packets.iter().filter(move |p| p.flow == id);
                let fwd: Vec<f64> = mine().filter(|p| p.forward).map(|p| p.owd_us).collect();
                let rev: Vec<f64> = mine().filter(|p| !p.forward).map(|p| p.owd_us).collect();
                let soj: Vec<f64> = mine()
                    .filter(|p| p.forward)
                    .filter_map(|p| {
                        let crossed: Vec<f64> = p.sojourn_us.iter().flatten().copied().collect();
                        (!crossed.is_empty()).then(|| crossed.iter().sum())
                    })
                    .collect();
                let series: Vec<(f64, f64)> = mine()
                    .filter(|p| p.forward)
                    .map(|p| (p.t_s, p.owd_us))
                    .collect();
                FlowDelays {
                    id,
                    forward: DelayStats::of(&fwd),
                    reverse: DelayStats::of(&rev),
                    sojourn: DelayStats::of(&soj),
                    forward_cdf_us: cdf(&fwd),
                    forward_series: binned(&series),
                }
            })
            .collect();
        let hops = (1..=hops)
            .map(|hop| {
                let pts: Vec<(f64, f64)> = packets
                    .iter()
                    .filter_map(|p| Some((p.t_s, (*p.sojourn_us.get(hop - 1)?)?)))
                    .collect();
                let xs: Vec<f64> = pts.iter().map(|p| p.1).collect();
                HopDelays {
                    hop,
                    sojourn: DelayStats::of(&xs),
                    sojourn_cdf_us: cdf(&xs),
                    sojourn_series: binned(&pts),
                }
            })
            .collect();
        DelayRecord {
            counts,
            flows,
            hops,
        }
    }

    /// Summary metrics (names in [`crate::names::SUMMARY_METRICS`]), ms.
    pub fn metrics(&self) -> Vec<(String, f64)> {
        let ms = |x: f64| x / 1e3;
        let mut out = Vec::new();
        for f in &self.flows {
            if let Some(s) = f.forward {
                for (q, v) in [("p50", s.p50_us), ("p95", s.p95_us), ("p99", s.p99_us)] {
                    out.push((format!("flow{} one-way delay {q} (ms)", f.id), ms(v)));
                }
            }
            if let Some(s) = f.reverse {
                out.push((
                    format!("flow{} reverse one-way delay p50 (ms)", f.id),
                    ms(s.p50_us),
                ));
            }
            if let Some(s) = f.sojourn {
                out.push((format!("M13 flow{} mean sojourn (ms)", f.id), ms(s.mean_us)));
            }
        }
        for h in &self.hops {
            if let Some(s) = h.sojourn {
                out.push((format!("M13 hop{} mean sojourn (ms)", h.hop), ms(s.mean_us)));
                for (q, v) in [("p50", s.p50_us), ("p95", s.p95_us), ("p99", s.p99_us)] {
                    out.push((format!("hop{} sojourn {q} (ms)", h.hop), ms(v)));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(t_s: f64, flow: usize, forward: bool, owd_us: f64, soj: Option<f64>) -> PacketDelay {
        PacketDelay {
            t_s,
            flow,
            forward,
            owd_us,
            sojourn_us: vec![soj],
        }
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 0.95), Some(95.0));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 1.0), Some(100.0));
        assert_eq!(quantile(&[], 0.5), None);
        let s = DelayStats::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.n, s.mean_us, s.p50_us, s.max_us), (3, 2.0, 2.0, 3.0));
        assert_eq!(cdf(&v).len(), CDF_POINTS);
        assert!(DelayStats::of(&[]).is_none());
    }

    #[test]
    fn packets_reduce_per_flow_and_per_hop_into_named_metrics() {
        let packets = vec![
            pkt(0.01, 1, true, 1_000.0, Some(800.0)),
            pkt(0.02, 1, true, 3_000.0, Some(2_800.0)),
            pkt(0.15, 1, false, 20_000.0, None),
            pkt(0.03, 2, true, 5_000.0, Some(4_800.0)),
        ];
        let r = DelayRecord::from_packets(TapCounts::default(), &packets, 2, 1);
        let f1 = &r.flows[0];
        assert_eq!(f1.forward.unwrap().n, 2);
        assert_eq!(f1.forward.unwrap().p50_us, 1_000.0);
        assert_eq!(f1.reverse.unwrap().p50_us, 20_000.0);
        assert_eq!(f1.sojourn.unwrap().mean_us, 1_800.0);
        assert_eq!(f1.forward_series, vec![(0.0, 2_000.0)]);
        assert_eq!(r.hops[0].sojourn.unwrap().n, 3);
        let m = r.metrics();
        for (name, _) in &m {
            assert!(
                crate::names::is_summary_metric(name),
                "{name} is not listed"
            );
        }
        let get = |n: &str| m.iter().find(|(k, _)| k == n).map(|x| x.1);
        assert_eq!(get("flow1 one-way delay p50 (ms)"), Some(1.0));
        assert_eq!(get("flow1 reverse one-way delay p50 (ms)"), Some(20.0));
        assert_eq!(get("M13 flow2 mean sojourn (ms)"), Some(4.8));
        assert_eq!(get("hop1 sojourn p99 (ms)"), Some(4.8));
    }
}
