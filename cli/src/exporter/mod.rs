//! The Prometheus exporter behind `cctl exporter`: aggregates of the collector's samples
//! by congestion control, the socket census, cctl's registered algorithms and (opt-in)
//! BPF run-time statistics, served as OpenMetrics text at `/metrics`.
//!
//! Data flow: the collector ([`cctl_loader::collector::Trace`]) streams samples to
//! [`pump`], which feeds them to the [`Exporter`]'s per-flow table
//! ([`flows::FlowTable`]), which updates the families of [`metrics::Metrics`]. Each scrape
//! ([`Exporter::render`]) reads the scrape-time sources ([`scrape::Snapshot`]) and
//! encodes everything; [`server`] answers HTTP.

pub mod flows;
pub mod metrics;
pub mod scrape;
pub mod server;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cctl_loader::bpfstats;
use cctl_loader::collector::{LiveCounters, Trace, TraceStats};
use cctl_loader::migrate::{self, SocketFilter};
use cctl_loader::registry;
use cctl_loader::sample::Sample;
use prometheus_client::registry::Registry;

use flows::{FlowTable, PerFlow};
use metrics::{Metrics, SourceLabels};
use scrape::{ScrapeCollector, Snapshot};

/// What the exporter serves beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Serve BPF run-time statistics (the caller holds a
    /// [`cctl_loader::bpfstats::StatsGuard`] for as long as it runs).
    pub bpf_stats: bool,
    /// Serve per-flow series for at most this many flows; `None`: none.
    pub per_flow_max: Option<usize>,
}

/// The exporter's state, shared by the sample pump and the HTTP handlers.
#[derive(Debug)]
pub struct Exporter {
    metrics: Metrics,
    flows: Arc<Mutex<FlowTable>>,
    snapshot: Arc<Mutex<Snapshot>>,
    registry: Registry,
    options: Options,
    /// Serialises scrapes; holds the last error printed per source (printed once until it
    /// changes or the source recovers).
    scrape: Mutex<ScrapeLog>,
    collector: Mutex<LiveCounters>,
}

#[derive(Debug, Default)]
struct ScrapeLog {
    last_error: HashMap<&'static str, String>,
    last_scrape: Option<Instant>,
}

impl Exporter {
    /// A new exporter with empty families.
    pub fn new(options: Options) -> Exporter {
        let metrics = Metrics::new();
        let flows = Arc::new(Mutex::new(FlowTable::new()));
        let collector = ScrapeCollector::default();
        let snapshot = collector.snapshot.clone();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        registry.register_collector(Box::new(collector));
        if let Some(max) = options.per_flow_max {
            registry.register_collector(Box::new(PerFlow {
                table: flows.clone(),
                max,
            }));
        }
        Exporter {
            metrics,
            flows,
            snapshot,
            registry,
            options,
            scrape: Mutex::new(ScrapeLog::default()),
            collector: Mutex::new(LiveCounters::default()),
        }
    }

    /// Feeds collector samples into the aggregates.
    pub fn observe(&self, samples: &[Sample]) {
        if samples.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut t = self.flows.lock().unwrap_or_else(|e| e.into_inner());
        for s in samples {
            t.observe(s, &self.metrics, now);
        }
    }

    /// Records the collector's counters (served as `cctl_collector_*`).
    pub fn set_collector_counters(&self, c: LiveCounters) {
        *self.collector.lock().unwrap_or_else(|e| e.into_inner()) = c;
    }

    /// Forgets flows silent for long when no scrape has pruned them with a census lately.
    pub fn prune_if_unscraped(&self, after: Duration) {
        let last = self
            .scrape
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last_scrape;
        if last.is_none_or(|t| t.elapsed() >= after) {
            let mut t = self.flows.lock().unwrap_or_else(|e| e.into_inner());
            t.prune(None, &self.metrics, Instant::now());
        }
    }

    fn failed(&self, log: &mut ScrapeLog, source: &'static str, e: &dyn std::fmt::Display) {
        self.metrics
            .source_errors
            .get_or_create(&SourceLabels { source })
            .inc();
        let msg = format!("{e:#}");
        if log.last_error.get(source) != Some(&msg) {
            eprintln!("cctl exporter: reading the {source} failed (served without it): {msg}");
            log.last_error.insert(source, msg);
        }
    }

    /// Reads the scrape-time sources (socket census, registry records, BPF statistics if
    /// on), forgets flows that are gone, and encodes every family. Blocking (BPF
    /// iterators, files): call it off the async runtime's threads.
    pub fn render(&self) -> String {
        let mut log = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        let mut snap = Snapshot::default();
        match migrate::sockets_all_namespaces(&SocketFilter::default()) {
            Ok(list) => {
                log.last_error.remove("census");
                let (by_cc, alive) = scrape::count_established(&list);
                snap.established = Some(by_cc);
                let mut t = self.flows.lock().unwrap_or_else(|e| e.into_inner());
                t.prune(Some(&alive), &self.metrics, Instant::now());
            }
            Err(e) => self.failed(&mut log, "census", &e),
        }
        match registry::list_loaded() {
            Ok(mut l) => {
                log.last_error.remove("registry");
                // Live tunables as the kernel has them now (`cctl set`), not as recorded.
                l.iter_mut().for_each(cctl_loader::live::refresh);
                snap.loaded = l;
            }
            Err(e) => self.failed(&mut log, "registry", &e),
        }
        if self.options.bpf_stats {
            match bpfstats::cctl_programs() {
                Ok(p) => {
                    log.last_error.remove("bpf_stats");
                    snap.bpf = Some(p);
                }
                Err(e) => self.failed(&mut log, "bpf_stats", &e),
            }
        }
        log.last_scrape = Some(Instant::now());
        self.encode_with(snap)
    }

    /// Encodes every family with `snap` as the scrape-time sources (the collector's
    /// counters are the exporter's own).
    pub fn encode_with(&self, mut snap: Snapshot) -> String {
        snap.collector = *self.collector.lock().unwrap_or_else(|e| e.into_inner());
        *self.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = snap;
        metrics::encode(&self.registry)
    }
}

/// Feeds the trace's samples to `exporter` until `stop` turns true or the trace ends, then
/// detaches the collector and returns its counters.
pub async fn pump(
    mut trace: Trace,
    exporter: Arc<Exporter>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<TraceStats> {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut ticks = 0u64;
    loop {
        tokio::select! {
            s = trace.next_sample() => match s {
                Some(s) => {
                    let mut batch = vec![s];
                    batch.extend(trace.drain_ready());
                    exporter.observe(&batch);
                    exporter.set_collector_counters(trace.counters());
                }
                None => break,
            },
            _ = tick.tick() => {
                exporter.set_collector_counters(trace.counters());
                ticks += 1;
                if ticks.is_multiple_of(30) {
                    exporter.prune_if_unscraped(flows::FORGET_AFTER);
                }
            }
            _ = stop.changed() => break,
        }
    }
    let rest = trace.drain();
    exporter.observe(&rest);
    exporter.set_collector_counters(trace.counters());
    let stats = tokio::task::spawn_blocking(move || trace.finish())
        .await
        .map_err(|e| anyhow::anyhow!("stopping the collector: {e}"))??;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cctl_loader::bpfstats::ProgStats;
    use cctl_loader::registry::{LoadedCc, Version};
    use cctl_loader::sample::CaState;
    use std::collections::BTreeMap;

    fn record() -> LoadedCc {
        let params = BTreeMap::from([
            ("beta_min_pct".to_string(), 50),
            ("delta_l_ms".into(), 1000),
        ]);
        let v = |version, map_id| Version {
            version,
            map_id,
            algo: "htcp".into(),
            profile: None,
            params: params.clone(),
            object: None,
            data_pin: None,
            loaded_at: 0,
        };
        LoadedCc {
            name: "bpf_htcp".into(),
            algo: "htcp".into(),
            profile: None,
            params: params.clone(),
            loaded_at: 0,
            kernel: "6.18".into(),
            cctl_version: "0.1.0".into(),
            owner_pid: None,
            version: 2,
            versions: vec![v(1, 41), v(2, 42)],
        }
    }

    fn prog(cc: Option<&str>, callback: &str) -> ProgStats {
        ProgStats {
            id: 7,
            name: "x".into(),
            cc: cc.map(Into::into),
            version: cc.map(|_| 2),
            map_id: cc.map(|_| 42),
            callback: callback.into(),
            run_time_ns: 1_500,
            run_cnt: 3,
            recursion_misses: 0,
        }
    }

    /// An exporter with every family populated: samples of two congestion controls with
    /// state changes and backoffs, per-flow series, a census, a registry record and BPF
    /// statistics.
    fn populated() -> String {
        let e = Exporter::new(Options {
            bpf_stats: true,
            per_flow_max: Some(2),
        });
        let mut batch = Vec::new();
        for cookie in 1..=3u64 {
            let mut s =
                flows::tests::sample(cookie, if cookie == 1 { "cubic" } else { "bpf_htcp" });
            s.netns_cookie = 4096;
            s.bytes_acked = 1 << 20;
            s.total_retrans = 3;
            s.backoffs = Some(1);
            s.last_beta = Some(0.7);
            batch.push(s.clone());
            s.ca_state = CaState::Recovery;
            s.recovery_entries = 1;
            s.backoffs = Some(2);
            batch.push(s);
        }
        e.observe(&batch);
        e.set_collector_counters(LiveCounters {
            samples: 6,
            kernel_emitted: 7,
            dropped: 1,
            channel_high_water: 5,
        });
        e.metrics
            .source_errors
            .get_or_create(&SourceLabels { source: "census" })
            .inc();
        e.encode_with(Snapshot {
            established: Some(BTreeMap::from([
                ("bpf_htcp".into(), 2),
                ("cubic".into(), 1),
            ])),
            loaded: vec![record()],
            bpf: Some(vec![
                prog(Some("bpf_htcp"), "cong_avoid"),
                prog(None, "tcp_probe"),
            ]),
            collector: LiveCounters::default(),
        })
    }

    #[test]
    fn every_registered_metric_follows_the_prometheus_naming_conventions() {
        let text = populated();
        let problems = metrics::lint::problems(&text);
        assert!(problems.is_empty(), "{problems:#?}\n{text}");
        let families = metrics::lint::parse(&text);
        // Every family docs/operations/exporter.md lists is there, with samples.
        let mut documented: Vec<(&str, &str)> = metrics::SAMPLE_FAMILIES
            .iter()
            .map(|d| (d.name, d.kind))
            .collect();
        documented.extend(scrape::SCRAPE_FAMILIES.iter().map(|f| (f.0, f.1)));
        documented.extend(flows::PER_FLOW_FAMILIES.iter().map(|f| (f.0, f.1)));
        assert_eq!(families.len(), documented.len(), "{:?}", families.keys());
        for (name, kind) in documented {
            let f = families
                .get(name)
                .unwrap_or_else(|| panic!("{name} not served:\n{text}"));
            assert_eq!(f.kind, kind, "{name}");
            assert!(!f.samples.is_empty(), "{name} has no sample:\n{text}");
        }
    }

    #[test]
    fn the_operations_doc_lists_every_family_and_every_label() {
        let doc = include_str!("../../../docs/operations/exporter.md");
        let families = metrics::lint::parse(&populated());
        for (name, f) in &families {
            let served = if f.kind == "counter" {
                format!("`{name}_total`")
            } else {
                format!("`{name}`")
            };
            assert!(
                doc.contains(&served),
                "{served} is not in docs/operations/exporter.md"
            );
        }
        for (label, _) in metrics::LABELS.iter().filter(|(l, _)| *l != "le") {
            assert!(
                doc.contains(&format!("| `{label}` |")) || doc.contains(&format!("`{label}`, `")),
                "label {label} has no row in docs/operations/exporter.md"
            );
        }
    }

    #[test]
    fn the_exposition_carries_the_values_fed_in() {
        let text = populated();
        for line in [
            "cctl_established_sockets{cc=\"bpf_htcp\"} 2",
            "cctl_acked_bytes_total{cc=\"bpf_htcp\"} 2097152",
            "cctl_retransmitted_segments_total{cc=\"cubic\"} 3",
            "cctl_ca_state_entries_total{cc=\"bpf_htcp\",state=\"recovery\"} 2",
            "cctl_backoffs_total{cc=\"bpf_htcp\"} 4",
            "cctl_algorithm_active_version{cc=\"bpf_htcp\",algo=\"htcp\"} 2",
            "cctl_algorithm_parameter{cc=\"bpf_htcp\",cc_version=\"1\",param=\"delta_l_ms\"} 1000",
            "cctl_collector_dropped_samples_total 1",
            "cctl_bpf_runs_total{cc=\"bpf_htcp\",cc_version=\"2\",callback=\"cong_avoid\"} 3",
            "cctl_bpf_run_seconds_total{cc=\"bpf_htcp\",cc_version=\"2\",callback=\"cong_avoid\"} 0.0000015",
            "cctl_exporter_per_flow_omitted_flows 1",
            "cctl_exporter_source_errors_total{source=\"census\"} 1",
            "cctl_srtt_seconds_bucket{le=\"0.0256\",cc=\"cubic\"} 2",
            "cctl_flow_cwnd_segments{cc=\"bpf_htcp\",cookie=\"2\",netns_cookie=\"4096\",local=\"10.0.0.1:40002\",remote=\"10.0.0.2:5201\"} 10",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        // One label name per concept: the algorithm is `cc` everywhere, its loaded version
        // `cc_version`, the binary's `cctl_version`.
        for stale in [
            "{name=",
            ",name=",
            "{version=",
            ",version=",
            "cctl_flows_established",
        ] {
            assert!(!text.contains(stale), "{stale} in\n{text}");
        }
        assert!(
            text.contains("cctl_exporter_build_info{cctl_version=\""),
            "{text}"
        );
        assert!(text.contains("cctl_algorithm_version_info{cc=\"bpf_htcp\",cc_version=\"1\",algo=\"htcp\",profile=\"\",map_id=\"41\",active=\"false\"} 1"), "{text}");
    }

    #[test]
    fn without_per_flow_or_bpf_stats_those_families_are_absent() {
        let e = Exporter::new(Options::default());
        e.observe(&[flows::tests::sample(1, "cubic")]);
        let text = e.encode_with(Snapshot::default());
        assert!(!text.contains("cctl_flow_"), "{text}");
        assert!(!text.contains("cctl_bpf_run"), "{text}");
        assert!(!text.contains("cookie="), "{text}");
        assert!(metrics::lint::problems(&text).is_empty());
    }
}
