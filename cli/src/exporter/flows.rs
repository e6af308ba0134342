//! Per-flow state of the exporter: turns each flow's life-to-date counters (bytes acked,
//! retransmissions, backoffs) and its CA state into increments of the aggregate families,
//! and serves the opt-in per-flow series (capped).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cctl_loader::sample::Sample;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

use super::metrics::{CcLabels, Metrics, StateLabels};

/// A flow absent from the socket census is forgotten once it has sent no sample for this
/// long (a socket in a namespace the census cannot open keeps its state while it is busy).
pub const FORGET_AFTER: Duration = Duration::from_secs(60);

/// Without a census, a flow is forgotten after this long without a sample.
pub const FORGET_WITHOUT_CENSUS: Duration = Duration::from_secs(600);

/// What the exporter remembers of one flow (socket cookie). Plain values only: updating
/// it for a sample allocates nothing.
#[derive(Debug, Clone)]
struct FlowState {
    cc: &'static str,
    netns_cookie: u64,
    bytes_acked: u64,
    total_retrans: u32,
    /// The kernel's counts of entries into CWR, Recovery and Loss, as of the last sample.
    entries: [u32; 3],
    backoffs: Option<u32>,
    cwnd: u32,
    srtt_us: u32,
    min_rtt_us: u32,
    local: (std::net::IpAddr, u16),
    remote: (std::net::IpAddr, u16),
    last_seen: Instant,
}

/// The label values of the CA states whose entries are counted, in the order of
/// [`state_entries`].
pub const ENTERED_STATES: [&str; 3] = ["cwr", "recovery", "loss"];

/// A sample's kernel counts of entries into CWR, Recovery and Loss (since its collector
/// attached), in the order of [`ENTERED_STATES`].
pub fn state_entries(s: &Sample) -> [u32; 3] {
    [s.cwr_entries, s.recovery_entries, s.loss_entries]
}

/// An RTT in usec as seconds, `None` where the kernel has none yet (0, or `~0U` for
/// min_rtt before the first measurement).
pub fn rtt_seconds(us: u32) -> Option<f64> {
    (us != 0 && us != u32::MAX).then(|| f64::from(us) / 1e6)
}

/// Every flow seen, by socket cookie.
#[derive(Debug, Default)]
pub struct FlowTable {
    flows: HashMap<u64, FlowState>,
    /// The congestion-control names the families have series of.
    labelled: HashSet<&'static str>,
}

impl FlowTable {
    /// An empty table.
    pub fn new() -> FlowTable {
        FlowTable::default()
    }

    /// Flows tracked, count.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Feeds one sample into `m`: histograms get its cwnd and RTTs; the counters get what
    /// the flow's counters grew by since its previous sample (everything, at its first
    /// sample): bytes acked and retransmissions over the connection's life, and the
    /// kernel's counts of entries into CWR, Recovery and Loss since the collector attached
    /// (trace.bpf.c). Allocates nothing once the flow and its labels exist.
    pub fn observe(&mut self, s: &Sample, m: &Metrics, now: Instant) {
        let cc = CcLabels { cc: s.cc };
        m.cwnd.get_or_create(&cc).observe(f64::from(s.cwnd));
        if let Some(v) = rtt_seconds(s.srtt_us) {
            m.srtt.get_or_create(&cc).observe(v);
        }
        if let Some(v) = rtt_seconds(s.min_rtt_us) {
            m.min_rtt.get_or_create(&cc).observe(v);
        }
        let prev = self.flows.get(&s.cookie);
        // A flow's name is noted once (its first sample, or a move to another algorithm),
        // not hashed on every sample.
        if prev.is_none_or(|p| p.cc != s.cc) {
            self.labelled.insert(s.cc);
        }
        let acked = s
            .bytes_acked
            .saturating_sub(prev.map_or(0, |p| p.bytes_acked));
        let retrans = s
            .total_retrans
            .saturating_sub(prev.map_or(0, |p| p.total_retrans));
        // An algorithm's private state restarts when the flow moves to another one.
        let prev_backoffs = prev
            .filter(|p| p.cc == s.cc)
            .and_then(|p| p.backoffs)
            .unwrap_or(0);
        let backoffs = s.backoffs.map(|b| {
            if b >= prev_backoffs {
                b - prev_backoffs
            } else {
                b
            }
        });
        if acked > 0 {
            m.acked_bytes.get_or_create(&cc).inc_by(acked);
        }
        if retrans > 0 {
            m.retransmitted_segments
                .get_or_create(&cc)
                .inc_by(u64::from(retrans));
        }
        if let Some(n) = backoffs.filter(|&n| n > 0) {
            m.backoffs.get_or_create(&cc).inc_by(u64::from(n));
            if let Some(beta) = s.last_beta {
                m.backoff_beta.get_or_create(&cc).observe(beta);
            }
        }
        let entries = state_entries(s);
        let prev_entries = prev.map_or([0; 3], |p| p.entries);
        for (i, state) in ENTERED_STATES.into_iter().enumerate() {
            let n = entries[i].saturating_sub(prev_entries[i]);
            if n > 0 {
                m.ca_state_entries
                    .get_or_create(&StateLabels { cc: s.cc, state })
                    .inc_by(u64::from(n));
            }
        }
        self.flows.insert(
            s.cookie,
            FlowState {
                cc: s.cc,
                netns_cookie: s.netns_cookie,
                bytes_acked: s.bytes_acked.max(prev.map_or(0, |p| p.bytes_acked)),
                total_retrans: s.total_retrans.max(prev.map_or(0, |p| p.total_retrans)),
                entries: std::array::from_fn(|i| entries[i].max(prev_entries[i])),
                backoffs: s.backoffs,
                cwnd: s.cwnd,
                srtt_us: s.srtt_us,
                min_rtt_us: s.min_rtt_us,
                local: (s.saddr, s.sport),
                remote: (s.daddr, s.dport),
                last_seen: now,
            },
        );
        m.tracked_flows.set(self.len() as i64);
    }

    /// Forgets flows that are gone: with the cookies of every socket that exists
    /// (`census`), those not in it and silent for [`FORGET_AFTER`]; without a census,
    /// those silent for [`FORGET_WITHOUT_CENSUS`]. Then the series of every congestion
    /// control no remembered flow runs any more are dropped from the families (its counters
    /// restart from 0 if it comes back, which Prometheus's rate() reads as a reset): names
    /// come and go (tests, `cctl load --name`), and series kept for every name ever seen grew
    /// the exporter's heap by 14 MiB in the 2-hour soak. Returns how many flows were
    /// forgotten.
    pub fn prune(&mut self, census: Option<&HashSet<u64>>, m: &Metrics, now: Instant) -> usize {
        let before = self.len();
        self.flows.retain(|cookie, f| {
            let idle = now.saturating_duration_since(f.last_seen);
            match census {
                Some(alive) => alive.contains(cookie) || idle < FORGET_AFTER,
                None => idle < FORGET_WITHOUT_CENSUS,
            }
        });
        m.tracked_flows.set(self.len() as i64);
        let running: HashSet<&'static str> = self.flows.values().map(|f| f.cc).collect();
        self.labelled.retain(|&cc| {
            if running.contains(cc) {
                return true;
            }
            let l = CcLabels { cc };
            m.cwnd.remove(&l);
            m.srtt.remove(&l);
            m.min_rtt.remove(&l);
            m.acked_bytes.remove(&l);
            m.retransmitted_segments.remove(&l);
            m.backoffs.remove(&l);
            m.backoff_beta.remove(&l);
            for state in ENTERED_STATES {
                m.ca_state_entries.remove(&StateLabels { cc, state });
            }
            false
        });
        before - self.len()
    }

    /// The `max` flows with the most bytes acked among those sampled within `recent`, and
    /// how many recent flows were left out by the cap.
    fn top(&self, max: usize, recent: Duration, now: Instant) -> (Vec<(u64, &FlowState)>, usize) {
        let mut v: Vec<(u64, &FlowState)> = self
            .flows
            .iter()
            .filter(|(_, f)| now.saturating_duration_since(f.last_seen) < recent)
            .map(|(c, f)| (*c, f))
            .collect();
        v.sort_by(|a, b| b.1.bytes_acked.cmp(&a.1.bytes_acked).then(a.0.cmp(&b.0)));
        let omitted = v.len().saturating_sub(max);
        v.truncate(max);
        (v, omitted)
    }
}

/// `addr:port`, IPv6 addresses in brackets (built at scrape time, not per sample).
fn endpoint((ip, port): (std::net::IpAddr, u16)) -> String {
    format!("{}:{port}", fmt_ip(ip))
}

fn fmt_ip(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        v4 => v4.to_string(),
    }
}

/// Per-flow series, served only with `--per-flow-max N`: the N flows with the most bytes
/// acked among those sampled in the last [`PER_FLOW_RECENT`].
#[derive(Debug)]
pub struct PerFlow {
    /// The shared table.
    pub table: Arc<Mutex<FlowTable>>,
    /// Cap on the number of flows with series.
    pub max: usize,
}

/// A flow has per-flow series while it has been sampled this recently.
pub const PER_FLOW_RECENT: Duration = Duration::from_secs(30);

/// Names, units and help of the per-flow families, as registered.
pub const PER_FLOW_FAMILIES: &[(&str, &str, &str)] = &[
    (
        "cctl_flow_cwnd_segments",
        "gauge",
        "Congestion window of one flow at its latest sample, in segments (only with --per-flow-max).",
    ),
    (
        "cctl_flow_srtt_seconds",
        "gauge",
        "Smoothed RTT of one flow at its latest sample, in seconds (only with --per-flow-max).",
    ),
    (
        "cctl_flow_min_rtt_seconds",
        "gauge",
        "Windowed minimum RTT of one flow at its latest sample, in seconds (only with --per-flow-max).",
    ),
    (
        "cctl_flow_acked_bytes",
        "counter",
        "Bytes acknowledged over one flow's life at its latest sample (only with --per-flow-max).",
    ),
    (
        "cctl_flow_retransmitted_segments",
        "counter",
        "Segments retransmitted over one flow's life at its latest sample (only with --per-flow-max).",
    ),
    (
        "cctl_exporter_per_flow_omitted_flows",
        "gauge",
        "Recently sampled flows left without per-flow series by the --per-flow-max cap.",
    ),
];

/// The labels of a flow's series: congestion control, socket cookie, the cookie of its
/// network namespace (`netns_cookie`, as in the collector's samples), and its endpoints.
fn flow_labels(cookie: u64, f: &FlowState) -> [(&'static str, String); 5] {
    [
        ("cc", f.cc.to_string()),
        ("cookie", cookie.to_string()),
        ("netns_cookie", f.netns_cookie.to_string()),
        ("local", endpoint(f.local)),
        ("remote", endpoint(f.remote)),
    ]
}

impl Collector for PerFlow {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let (top, omitted) = table.top(self.max, PER_FLOW_RECENT, Instant::now());
        let unit_of = |name: &str| {
            ["seconds", "bytes", "segments"]
                .into_iter()
                .find(|u| name.ends_with(&format!("_{u}")))
                .map(|u| match u {
                    "seconds" => Unit::Seconds,
                    "bytes" => Unit::Bytes,
                    other => Unit::Other(other.into()),
                })
        };
        for (name, kind, help) in &PER_FLOW_FAMILIES[..5] {
            let unit = unit_of(name);
            let base = unit
                .as_ref()
                .map_or(*name, |u| &name[..name.len() - u.as_str().len() - 1]);
            let ty = if *kind == "counter" {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut family = encoder.encode_descriptor(base, help, unit.as_ref(), ty)?;
            for (cookie, f) in &top {
                let labels = flow_labels(*cookie, f);
                let e = family.encode_family(&labels)?;
                match *name {
                    "cctl_flow_cwnd_segments" => ConstGauge::new(i64::from(f.cwnd)).encode(e)?,
                    "cctl_flow_srtt_seconds" => {
                        ConstGauge::new(rtt_seconds(f.srtt_us).unwrap_or(0.0)).encode(e)?
                    }
                    "cctl_flow_min_rtt_seconds" => {
                        ConstGauge::new(rtt_seconds(f.min_rtt_us).unwrap_or(0.0)).encode(e)?
                    }
                    "cctl_flow_acked_bytes" => ConstCounter::new(f.bytes_acked).encode(e)?,
                    _ => ConstCounter::new(u64::from(f.total_retrans)).encode(e)?,
                }
            }
        }
        let (name, _, help) = PER_FLOW_FAMILIES[5];
        let e = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        ConstGauge::new(omitted as i64).encode(e)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cctl_loader::sample::CaState;
    use std::net::{IpAddr, Ipv4Addr};

    /// A sample of flow `cookie` running `cc` (for tests of the exporter).
    pub fn sample(cookie: u64, cc: &'static str) -> Sample {
        Sample {
            ts_ns: 0,
            cookie,
            netns_cookie: 0,
            saddr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            sport: 40000 + cookie as u16,
            daddr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            dport: 5201,
            cc,
            ca_state: CaState::Open,
            state_change: false,
            first: false,
            cwnd: 10,
            ssthresh: None,
            srtt_us: 20_000,
            rttvar_us: 1000,
            min_rtt_us: 19_000,
            bytes_acked: 0,
            lost_out: 0,
            retrans_out: 0,
            total_retrans: 0,
            cwr_entries: 0,
            recovery_entries: 0,
            loss_entries: 0,
            packets_out: 0,
            in_flight: 0,
            mss: 1448,
            delivered: 0,
            prior_cwnd: 0,
            ca_map_id: None,
            algo: None,
            tmin_us: None,
            tmax_us: None,
            delta_us: None,
            epoch_tput_bytes_per_s: None,
            backoffs: None,
            last_beta: None,
            vars: Default::default(),
        }
    }

    fn counter(
        f: &prometheus_client::metrics::family::Family<
            CcLabels,
            prometheus_client::metrics::counter::Counter,
        >,
        cc: &'static str,
    ) -> u64 {
        f.get(&CcLabels { cc }).map_or(0, |c| c.get())
    }

    fn entries(m: &Metrics, cc: &'static str, state: &'static str) -> u64 {
        m.ca_state_entries
            .get(&StateLabels { cc, state })
            .map_or(0, |c| c.get())
    }

    #[test]
    fn counters_grow_by_what_each_flow_grew_by_and_a_first_sample_counts_its_life() {
        let (m, mut t, now) = (Metrics::new(), FlowTable::new(), Instant::now());
        let mut a = sample(1, "bpf_htcp");
        a.bytes_acked = 1000;
        a.total_retrans = 2;
        t.observe(&a, &m, now);
        a.bytes_acked = 5000;
        a.total_retrans = 5;
        t.observe(&a, &m, now);
        let mut b = sample(2, "cubic");
        b.bytes_acked = 700;
        t.observe(&b, &m, now);
        assert_eq!(counter(&m.acked_bytes, "bpf_htcp"), 5000);
        assert_eq!(counter(&m.retransmitted_segments, "bpf_htcp"), 5);
        assert_eq!(counter(&m.acked_bytes, "cubic"), 700);
        assert_eq!(m.tracked_flows.get(), 2);
        // A sample out of order (lower counters) adds nothing.
        a.bytes_acked = 4000;
        t.observe(&a, &m, now);
        assert_eq!(counter(&m.acked_bytes, "bpf_htcp"), 5000);
    }

    #[test]
    fn entries_into_cwr_recovery_and_loss_are_the_kernel_counts_growth() {
        let (m, mut t, now) = (Metrics::new(), FlowTable::new(), Instant::now());
        let mut s = sample(1, "cubic");
        // A first sample counts what the kernel counted since the collector attached.
        (s.cwr_entries, s.recovery_entries, s.loss_entries) = (0, 2, 1);
        t.observe(&s, &m, now);
        assert_eq!(entries(&m, "cubic", "recovery"), 2);
        // The CA state of a sample does not matter, only the counts' growth.
        s.ca_state = CaState::Recovery;
        (s.cwr_entries, s.recovery_entries, s.loss_entries) = (1, 5, 1);
        t.observe(&s, &m, now);
        // Out of order (lower counts) adds nothing.
        (s.cwr_entries, s.recovery_entries, s.loss_entries) = (0, 4, 0);
        t.observe(&s, &m, now);
        assert_eq!(entries(&m, "cubic", "recovery"), 5);
        assert_eq!(entries(&m, "cubic", "loss"), 1);
        assert_eq!(entries(&m, "cubic", "cwr"), 1);
        // Another flow's counts are its own.
        let mut o = sample(2, "cubic");
        o.loss_entries = 3;
        t.observe(&o, &m, now);
        assert_eq!(entries(&m, "cubic", "loss"), 4);
    }

    #[test]
    fn backoffs_count_increments_restart_with_a_new_algorithm_and_record_beta() {
        let (m, mut t, now) = (Metrics::new(), FlowTable::new(), Instant::now());
        let mut s = sample(1, "bpf_htcp");
        s.backoffs = Some(0);
        t.observe(&s, &m, now);
        s.backoffs = Some(2);
        s.last_beta = Some(0.75);
        t.observe(&s, &m, now);
        assert_eq!(counter(&m.backoffs, "bpf_htcp"), 2);
        let h = m.backoff_beta.get(&CcLabels { cc: "bpf_htcp" }).unwrap();
        assert_eq!((h.count(), h.sum()), (1, 0.75));
        drop(h);
        // Migrated to bpf_reno: its own count starts at 0.
        s.cc = "bpf_reno";
        s.backoffs = Some(1);
        t.observe(&s, &m, now);
        assert_eq!(counter(&m.backoffs, "bpf_reno"), 1);
        assert_eq!(counter(&m.backoffs, "bpf_htcp"), 2);
    }

    #[test]
    fn rtts_without_a_measurement_are_not_observed() {
        let (m, mut t, now) = (Metrics::new(), FlowTable::new(), Instant::now());
        let mut s = sample(1, "cubic");
        s.srtt_us = 0;
        s.min_rtt_us = u32::MAX;
        t.observe(&s, &m, now);
        let cc = CcLabels { cc: "cubic" };
        assert!(m.srtt.get(&cc).is_none() && m.min_rtt.get(&cc).is_none());
        assert_eq!(m.cwnd.get(&cc).unwrap().count(), 1);
    }

    #[test]
    fn the_series_of_a_congestion_control_no_flow_runs_go_with_its_last_flow() {
        let (m, mut t, t0) = (Metrics::new(), FlowTable::new(), Instant::now());
        let mut a = sample(1, "xp_gone");
        a.recovery_entries = 2;
        t.observe(&a, &m, t0);
        t.observe(&sample(2, "cubic"), &m, t0);
        let alive = HashSet::from([2u64]);
        t.prune(Some(&alive), &m, t0 + Duration::from_secs(1));
        assert_eq!(counter(&m.acked_bytes, "xp_gone"), 0);
        assert!(
            m.cwnd.get(&CcLabels { cc: "xp_gone" }).is_some(),
            "kept while its flow is"
        );
        t.prune(Some(&alive), &m, t0 + FORGET_AFTER);
        assert!(m.cwnd.get(&CcLabels { cc: "xp_gone" }).is_none());
        assert_eq!(entries(&m, "xp_gone", "recovery"), 0);
        assert!(
            m.cwnd.get(&CcLabels { cc: "cubic" }).is_some(),
            "a running one stays"
        );
    }

    #[test]
    fn gone_flows_are_forgotten_after_a_grace_period() {
        let (m, mut t, t0) = (Metrics::new(), FlowTable::new(), Instant::now());
        t.observe(&sample(1, "cubic"), &m, t0);
        t.observe(&sample(2, "cubic"), &m, t0);
        let alive = HashSet::from([2u64]);
        assert_eq!(t.prune(Some(&alive), &m, t0 + Duration::from_secs(1)), 0);
        assert_eq!(t.prune(Some(&alive), &m, t0 + FORGET_AFTER), 1);
        assert_eq!(t.len(), 1);
        assert_eq!(m.tracked_flows.get(), 1);
        assert_eq!(t.prune(None, &m, t0 + FORGET_WITHOUT_CENSUS), 1);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn per_flow_series_keep_the_busiest_flows_up_to_the_cap() {
        let (m, now) = (Metrics::new(), Instant::now());
        let mut t = FlowTable::new();
        for c in 1..=5u64 {
            let mut s = sample(c, "cubic");
            s.bytes_acked = c * 100;
            t.observe(&s, &m, now);
        }
        let (top, omitted) = t.top(2, PER_FLOW_RECENT, now);
        assert_eq!(top.iter().map(|(c, _)| *c).collect::<Vec<_>>(), vec![5, 4]);
        assert_eq!(omitted, 3);
        let (top, _) = t.top(2, PER_FLOW_RECENT, now + PER_FLOW_RECENT);
        assert!(top.is_empty(), "flows silent for too long have no series");
    }
}
