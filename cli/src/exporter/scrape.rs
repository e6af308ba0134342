//! What the exporter reads at scrape time rather than from samples: the socket census
//! (established flows by congestion control), the registry's records of cctl's algorithms
//! (loaded versions and their live parameters), BPF run-time statistics (opt-in), and the
//! collector's own counters; encoded by a prometheus-client [`Collector`].

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use cctl_loader::bpfstats::ProgStats;
use cctl_loader::collector::LiveCounters;
use cctl_loader::migrate::SocketInfo;
use cctl_loader::registry::LoadedCc;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Unit;

/// What one scrape read, shown by [`ScrapeCollector`].
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    /// ESTABLISHED TCP sockets by congestion control, from the census of every network
    /// namespace; `None` when the census failed.
    pub established: Option<BTreeMap<String, u64>>,
    /// cctl's registered congestion controls (`/run/cctl/<name>.json`).
    pub loaded: Vec<LoadedCc>,
    /// BPF run-time statistics of cctl's programs; `None` unless `--bpf-stats`.
    pub bpf: Option<Vec<ProgStats>>,
    /// The collector's counters since the exporter started.
    pub collector: LiveCounters,
}

/// Counts ESTABLISHED sockets by congestion control, and returns the cookies of every
/// socket listed (in any state: the flows that still exist).
pub fn count_established(list: &[SocketInfo]) -> (BTreeMap<String, u64>, HashSet<u64>) {
    let mut by_cc = BTreeMap::new();
    for s in list.iter().filter(|s| s.state == "ESTABLISHED") {
        *by_cc.entry(s.cc.clone()).or_insert(0) += 1;
    }
    (by_cc, list.iter().map(|s| s.cookie).collect())
}

/// Name, type, unit and help of every family [`ScrapeCollector`] writes, in order.
pub const SCRAPE_FAMILIES: &[(&str, &str, Option<&str>, &str)] = &[
    (
        "cctl_established_sockets",
        "gauge",
        None,
        "TCP sockets in the ESTABLISHED state at scrape time, in every network namespace of the host, by congestion control (a connection with both ends on this host is two sockets).",
    ),
    (
        "cctl_algorithm_active_version",
        "gauge",
        None,
        "Version (cc_version) of each cctl-registered congestion control that new connections get (cctl list).",
    ),
    (
        "cctl_algorithm_version_info",
        "gauge",
        None,
        "One series of value 1 per loaded version of each cctl-registered congestion control, with its algorithm, profile and struct_ops map id.",
    ),
    (
        "cctl_algorithm_parameter",
        "gauge",
        None,
        "Parameter values of each loaded version of each cctl-registered congestion control, as recorded in /run/cctl (live values after cctl set; the unit is in the parameter name).",
    ),
    (
        "cctl_collector_samples",
        "counter",
        None,
        "Samples the collector delivered to the exporter since it started.",
    ),
    (
        "cctl_collector_kernel_samples",
        "counter",
        None,
        "Samples the collector's BPF program wrote into its ring buffer since the exporter started.",
    ),
    (
        "cctl_collector_dropped_samples",
        "counter",
        None,
        "Samples the collector's BPF program dropped because its ring buffer was full, since the exporter started.",
    ),
    (
        "cctl_collector_channel_high_water_samples",
        "gauge",
        None,
        "Most samples ever waiting between the collector's ring-buffer reader and the exporter since it started (the channel holds 65,536).",
    ),
    (
        "cctl_bpf_run_seconds",
        "counter",
        Some("seconds"),
        "Time spent in each struct_ops callback of each loaded version of cctl's congestion controls while BPF statistics were on (only with --bpf-stats).",
    ),
    (
        "cctl_bpf_runs",
        "counter",
        None,
        "Runs of each struct_ops callback of each loaded version of cctl's congestion controls while BPF statistics were on (only with --bpf-stats).",
    ),
    (
        "cctl_collector_bpf_run_seconds",
        "counter",
        Some("seconds"),
        "Time spent in each collector program (tp_btf/tcp_probe, the exporter's and any other running trace's) while BPF statistics were on (only with --bpf-stats).",
    ),
    (
        "cctl_collector_bpf_runs",
        "counter",
        None,
        "Runs of each collector program (the exporter's and any other running trace's) while BPF statistics were on (only with --bpf-stats).",
    ),
    (
        "cctl_exporter_build_info",
        "gauge",
        None,
        "Always 1, labelled with the version of the cctl binary serving these metrics (cctl_version).",
    ),
];

/// The scrape-time families, encoded from the latest [`Snapshot`].
#[derive(Debug, Default)]
pub struct ScrapeCollector {
    /// Written by each scrape before encoding.
    pub snapshot: Arc<Mutex<Snapshot>>,
}

type Labels = Vec<(&'static str, String)>;

/// One family's series: labels and value.
enum Series {
    /// An unlabelled counter.
    Total(u64),
    /// An unlabelled gauge.
    Level(f64),
    Gauge(Vec<(Labels, f64)>),
    Counter(Vec<(Labels, f64)>),
}

fn unit_of(u: Option<&str>) -> Option<Unit> {
    u.map(|u| match u {
        "seconds" => Unit::Seconds,
        "bytes" => Unit::Bytes,
        other => Unit::Other(other.into()),
    })
}

impl Snapshot {
    /// The series of the family `name` of [`SCRAPE_FAMILIES`]; `None` to leave the family
    /// out (a source that is off or failed).
    fn series(&self, name: &str) -> Option<Series> {
        let gauges = |v: Vec<(Labels, f64)>| Some(Series::Gauge(v));
        let one = |v: u64| Some(Series::Total(v));
        match name {
            "cctl_established_sockets" => gauges(
                self.established
                    .as_ref()?
                    .iter()
                    .map(|(cc, n)| (vec![("cc", cc.clone())], *n as f64))
                    .collect(),
            ),
            "cctl_algorithm_active_version" => gauges(
                self.loaded
                    .iter()
                    .map(|l| {
                        (
                            vec![("cc", l.name.clone()), ("algo", l.algo.clone())],
                            f64::from(l.version),
                        )
                    })
                    .collect(),
            ),
            "cctl_algorithm_version_info" => gauges(
                self.loaded
                    .iter()
                    .flat_map(|l| {
                        versions(l).into_iter().map(move |v| {
                            (
                                vec![
                                    ("cc", l.name.clone()),
                                    ("cc_version", v.version.to_string()),
                                    ("algo", v.algo.clone()),
                                    ("profile", v.profile.clone().unwrap_or_default()),
                                    ("map_id", v.map_id.to_string()),
                                    ("active", (v.version == l.version).to_string()),
                                ],
                                1.0,
                            )
                        })
                    })
                    .collect(),
            ),
            "cctl_algorithm_parameter" => gauges(
                self.loaded
                    .iter()
                    .flat_map(|l| {
                        versions(l).into_iter().flat_map(move |v| {
                            v.params.into_iter().map(move |(k, val)| {
                                (
                                    vec![
                                        ("cc", l.name.clone()),
                                        ("cc_version", v.version.to_string()),
                                        ("param", k),
                                    ],
                                    f64::from(val),
                                )
                            })
                        })
                    })
                    .collect(),
            ),
            "cctl_collector_samples" => one(self.collector.samples),
            "cctl_collector_kernel_samples" => one(self.collector.kernel_emitted),
            "cctl_collector_dropped_samples" => one(self.collector.dropped),
            "cctl_collector_channel_high_water_samples" => {
                Some(Series::Level(self.collector.channel_high_water as f64))
            }
            "cctl_bpf_run_seconds" | "cctl_bpf_runs" => {
                let mut by: BTreeMap<(String, u32, String), (u64, u64)> = BTreeMap::new();
                for p in self.bpf.as_ref()?.iter().filter(|p| !p.is_collector()) {
                    let key = (
                        p.cc.clone().unwrap_or_default(),
                        p.version.unwrap_or(0),
                        p.callback.clone(),
                    );
                    let e = by.entry(key).or_default();
                    e.0 += p.run_time_ns;
                    e.1 += p.run_cnt;
                }
                let secs = name == "cctl_bpf_run_seconds";
                Some(Series::Counter(
                    by.into_iter()
                        .map(|((cc, v, cb), (ns, n))| {
                            (
                                vec![("cc", cc), ("cc_version", v.to_string()), ("callback", cb)],
                                if secs { ns as f64 / 1e9 } else { n as f64 },
                            )
                        })
                        .collect(),
                ))
            }
            "cctl_collector_bpf_run_seconds" | "cctl_collector_bpf_runs" => {
                let secs = name == "cctl_collector_bpf_run_seconds";
                Some(Series::Counter(
                    self.bpf
                        .as_ref()?
                        .iter()
                        .filter(|p| p.is_collector())
                        .map(|p| {
                            (
                                vec![("prog_id", p.id.to_string())],
                                if secs {
                                    p.run_time_ns as f64 / 1e9
                                } else {
                                    p.run_cnt as f64
                                },
                            )
                        })
                        .collect(),
                ))
            }
            "cctl_exporter_build_info" => gauges(vec![(
                vec![("cctl_version", cctl_loader::version().to_string())],
                1.0,
            )]),
            _ => None,
        }
    }
}

/// The loaded versions of a record; metadata written before versions existed has none
/// listed, and its one version is the record itself.
fn versions(l: &LoadedCc) -> Vec<cctl_loader::registry::Version> {
    if !l.versions.is_empty() {
        return l.versions.clone();
    }
    vec![cctl_loader::registry::Version {
        version: l.version,
        map_id: 0,
        algo: l.algo.clone(),
        profile: l.profile.clone(),
        params: l.params.clone(),
        object: None,
        data_pin: None,
        loaded_at: l.loaded_at,
    }]
}

/// Writes a whole-number value as an integer (exact counts), others as floats.
fn encode_gauge(v: f64, e: prometheus_client::encoding::MetricEncoder) -> std::fmt::Result {
    if v.fract() == 0.0 && v.abs() < 9e15 {
        ConstGauge::new(v as i64).encode(e)
    } else {
        ConstGauge::new(v).encode(e)
    }
}

fn encode_counter(v: f64, e: prometheus_client::encoding::MetricEncoder) -> std::fmt::Result {
    if v.fract() == 0.0 && (0.0..9e15).contains(&v) {
        ConstCounter::new(v as u64).encode(e)
    } else {
        ConstCounter::new(v).encode(e)
    }
}

impl Collector for ScrapeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snap = self.snapshot.lock().unwrap_or_else(|e| e.into_inner());
        for (name, kind, unit, help) in SCRAPE_FAMILIES {
            let Some(series) = snap.series(name) else {
                continue;
            };
            let unit = unit_of(*unit);
            let base = unit
                .as_ref()
                .map_or(*name, |u| &name[..name.len() - u.as_str().len() - 1]);
            let ty = if *kind == "counter" {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut family = encoder.encode_descriptor(base, help, unit.as_ref(), ty)?;
            match series {
                // A family without labels is one sample of the family itself.
                Series::Total(v) => encode_counter(v as f64, family)?,
                Series::Level(v) => encode_gauge(v, family)?,
                Series::Gauge(v) => {
                    for (labels, value) in v {
                        encode_gauge(value, family.encode_family(&labels)?)?;
                    }
                }
                Series::Counter(v) => {
                    for (labels, value) in v {
                        encode_counter(value, family.encode_family(&labels)?)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cctl_loader::migrate::Family;
    use std::net::{IpAddr, Ipv4Addr};

    fn sock(cookie: u64, cc: &str, state: &str) -> SocketInfo {
        SocketInfo {
            netns: "current".into(),
            cookie,
            family: Family::Ipv4,
            saddr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            sport: 1,
            daddr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            dport: 2,
            state: state.into(),
            cc: cc.into(),
            ca_map_id: None,
        }
    }

    #[test]
    fn the_census_counts_established_sockets_and_keeps_every_cookie() {
        let (by, alive) = count_established(&[
            sock(1, "cubic", "ESTABLISHED"),
            sock(2, "cubic", "LISTEN"),
            sock(3, "bpf_htcp", "ESTABLISHED"),
            sock(4, "cubic", "ESTABLISHED"),
        ]);
        assert_eq!(by.get("cubic"), Some(&2));
        assert_eq!(by.get("bpf_htcp"), Some(&1));
        assert_eq!(alive.len(), 4);
    }
}
