//! Runs a scenario: for every point × algorithm × repetition it builds the dumbbell,
//! traces the flows with the BPF collector, samples the bottleneck qdisc, runs the
//! flows, writes the raw data and computes the per-run metrics.
//!
//! Layout of a results directory (`<out>/<scenario>/<timestamp>/`):
//! ```text
//! metadata.json                     kernel, algorithms + parameters, scenario, profile, seed, cctl version
//! runs/<algo>/p<point>-r<rep>/      samples.csv (collector), queue.csv (bottleneck), run.json (flows, metrics)
//! summary.json, summary.md          mean ± standard error over repetitions (written by report.rs)
//! plots/*.png, plots/*.svg
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use cctl_loader::sample::Sample;
use cctl_loader::{algos, kernel};
use serde::{Deserialize, Serialize};

use crate::flows::{run_bulk_flows, FlowResult, FlowSpec};
use crate::metrics::{BackoffEvent, FlowPoint, FlowSeries, QueuePoint};
use crate::scenario::{CcRef, Profile, RunPoint, Scenario};
use crate::testbed::{remove_leftovers, AccessSpec, PathSpec, QdiscSampler, Testbed};

/// Prefix of every namespace a bench run creates (removed at exit and at the next start).
pub const PREFIX: &str = "cctl-b";
/// Receiver port of the bulk flows.
pub const PORT: u16 = 5301;

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Algorithms under test (`--algo`): cctl keys (`htcp` → `bpf_htcp`) or kernel names.
    pub algos: Vec<String>,
    /// Scale profile.
    pub profile: Profile,
    /// Repetitions per point; `None` = the profile's.
    pub repeat: Option<u32>,
    /// Results root; the run goes to `<out>/<scenario name>/<timestamp>/`.
    pub out: PathBuf,
    /// Base seed of random start times (repetition r uses seed + r); `None` = the
    /// scenario's. Recorded in the metadata.
    pub seed: Option<u64>,
    /// Collector sampling interval per flow ([P0]'s δ = 100 ms).
    pub interval: Duration,
    /// Bottleneck qdisc sampling interval.
    pub queue_interval: Duration,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Only these points of the sweep, by index as `cctl bench run --dry-run` lists them
    /// (`None`: every point). Results keep the original indices, so runs of the same point
    /// from separate invocations pool in one report.
    pub points: Option<Vec<usize>>,
}

/// The points of `points` (a scenario's expansion) whose indices are in `only`, in
/// expansion order; all of them when `only` is `None`.
///
/// Errors: an index that is not a point of the expansion (the message gives the range
/// allowed), or an empty selection.
pub fn select_points(points: Vec<RunPoint>, only: Option<&[usize]>) -> Result<Vec<RunPoint>> {
    let Some(only) = only else {
        return Ok(points);
    };
    if only.is_empty() {
        bail!("no point selected: give point indices such as 0,2 (see --dry-run)");
    }
    if let Some(bad) = only.iter().find(|i| !points.iter().any(|p| p.index == **i)) {
        bail!(
            "no point {bad}: this scenario has points 0 to {} in this profile (see --dry-run)",
            points.len().saturating_sub(1)
        );
    }
    Ok(points
        .into_iter()
        .filter(|p| only.contains(&p.index))
        .collect())
}

/// A congestion control as the runner uses it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResolvedCc {
    /// As given (`htcp`, `cubic`).
    pub requested: String,
    /// Kernel name flows select with TCP_CONGESTION (`bpf_htcp`, `cubic`).
    pub cc_name: String,
    /// `cctl` (a BPF program of this binary), `native` (built-in or module).
    pub kind: String,
    /// Parameters of a cctl algorithm, as loaded.
    pub params: BTreeMap<String, u32>,
}

/// Registrations the runner made, undone on drop.
pub struct Loaded {
    guards: Vec<LoadGuard>,
}

impl Loaded {
    /// Unloads what the runner loaded.
    pub fn unload(self) -> Result<()> {
        for g in self.guards {
            g.unload()?;
        }
        Ok(())
    }
}

/// Resolves algorithm names before anything is created: cctl keys (`htcp`) are loaded
/// (unless already loaded), `<key>@<profile>` (`cubic@linux`) with that parameter profile
/// under `bpf_<key>_<tag>`; other names, and names written `native:<name>` (the kernel's
/// own `htcp`, not cctl's), must be registered or loadable as `tcp_<name>` modules.
///
/// Errors list what is available.
pub fn resolve_algorithms(names: &[String]) -> Result<(Vec<ResolvedCc>, Loaded)> {
    // First check every name, so that a bad one is refused before anything is loaded.
    for name in names {
        let native = name.strip_prefix("native:");
        if let Some((key, profile)) = name.split_once('@') {
            algos::find(key)?.profile(profile)?;
            continue;
        }
        if native.is_none() && algos::find(name).is_ok() {
            continue;
        }
        let kname = native.unwrap_or(name);
        algos::validate_cc_name(kname)?;
        if !kernel::available_ccs()?.iter().any(|n| n == kname)
            && kernel::native_module(kname).is_none()
        {
            bail!(
                "unknown algorithm '{name}': not one of cctl's ({}) and not registered in the kernel \
                 (registered: {}) nor a module tcp_{kname} of this kernel",
                algos::ALGORITHMS.iter().map(|a| a.key).collect::<Vec<_>>().join(", "),
                kernel::available_ccs()?.join(" ")
            );
        }
    }
    let mut out = Vec::new();
    let mut loaded = Loaded { guards: Vec::new() };
    for name in names {
        if out.iter().any(|r: &ResolvedCc| &r.requested == name) {
            continue;
        }
        let native = name.strip_prefix("native:");
        let (key, profile) = match name.split_once('@') {
            Some((k, p)) => (k, Some(p.to_string())),
            None => (name.as_str(), None),
        };
        let cctl = if native.is_none() {
            algos::find(key).ok()
        } else {
            None
        };
        if let Some(a) = cctl {
            let cc_name = a.default_name(profile.as_deref())?;
            let existing = registry::list_loaded()?
                .into_iter()
                .find(|l| l.name == cc_name && l.profile == profile);
            let rec = match existing {
                Some(rec) => rec,
                None => {
                    let rec = registry::load(
                        a.key,
                        &LoadOptions {
                            owned: true,
                            profile: profile.clone(),
                            ..Default::default()
                        },
                    )
                    .with_context(|| format!("loading {}", a.key))?;
                    loaded.guards.push(LoadGuard::new(rec.name.clone()));
                    rec
                }
            };
            out.push(ResolvedCc {
                requested: name.clone(),
                cc_name: rec.name,
                kind: "cctl".into(),
                params: rec.params,
            });
            continue;
        }
        let kname = native.unwrap_or(name).to_string();
        algos::validate_cc_name(&kname)?;
        if !kernel::available_ccs()?.contains(&kname) {
            let _ = std::process::Command::new("modprobe")
                .args(["-q", &format!("tcp_{kname}")])
                .status();
        }
        if !kernel::available_ccs()?.contains(&kname) {
            let name = &kname;
            bail!(
                "unknown algorithm '{name}': not one of cctl's ({}) and not registered in the kernel \
                 (registered: {}; no module tcp_{name} could be loaded)",
                algos::ALGORITHMS.iter().map(|a| a.key).collect::<Vec<_>>().join(", "),
                kernel::available_ccs()?.join(" ")
            );
        }
        out.push(ResolvedCc {
            requested: name.clone(),
            cc_name: kname,
            kind: "native".into(),
            params: BTreeMap::new(),
        });
    }
    Ok((out, loaded))
}

/// What one run produced (also written to `run.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Index of the scenario point.
    pub point: usize,
    /// Swept values of the point.
    pub vars: BTreeMap<String, f64>,
    /// Algorithm under test (requested name).
    pub algo: String,
    /// Repetition, 0-based.
    pub rep: u32,
    /// The point as run (rate, buffer, loss, flows).
    pub spec: RunPoint,
    /// Per-flow outcome of the traffic generator.
    pub flows: Vec<FlowResult>,
    /// Per-flow series for the metrics.
    pub series: Vec<FlowSeries>,
    /// Bottleneck samples.
    pub queue: Vec<QueuePoint>,
    /// Forward-path loss drops (netem random or gact periodic; all senders), packets.
    pub random_drops: u64,
    /// Collector counters.
    pub samples: u64,
    /// Ring-buffer drops of the collector.
    pub sample_drops: u64,
    /// Wall-clock length of the run, s.
    pub wall_s: f64,
    /// What the web cross traffic did (none without web sessions).
    #[serde(default)]
    pub web: Option<crate::web::WebStats>,
    /// Share of the machine's CPU time that was busy during the run (all CPUs), 0..1.
    #[serde(default)]
    pub cpu_busy: f64,
}

/// Busy and total jiffies of all CPUs, from /proc/stat (busy share = Δbusy / Δtotal).
pub fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).unwrap_or(&0);
    Some((total - idle, total))
}

fn monotonic_ns() -> u64 {
    let ts =
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// The congestion-control name flow `f` uses when `algo` is under test.
fn flow_cc(f: &crate::scenario::FlowPlan, algo: &ResolvedCc, all: &[ResolvedCc]) -> String {
    match &f.cc {
        CcRef::UnderTest => algo.cc_name.clone(),
        CcRef::Named(n) => all
            .iter()
            .find(|r| &r.requested == n)
            .map(|r| r.cc_name.clone())
            .unwrap_or_else(|| n.clone()),
    }
}

/// Builds the testbed of one point: one sender per flow with its RTT, the scenario's loss.
pub fn path_for(point: &RunPoint) -> PathSpec {
    let mut spec = PathSpec::new(PREFIX, point.rate_mbit, point.buffer_pkts.max(1));
    spec.reverse_rate_mbit = point.reverse_rate_mbit;
    spec.senders = point
        .flows
        .iter()
        .map(|f| AccessSpec {
            rtt_ms: f.rtt_ms,
            loss: point.loss,
            loss_model: point.loss_model,
        })
        .collect();
    if point.web_sessions > 0 {
        // The web host on the senders' side, at the scenario's RTT.
        spec.senders.push(AccessSpec {
            rtt_ms: point.rtt_ms,
            loss: point.loss,
            loss_model: point.loss_model,
        });
    }
    spec
}

/// Runs one point once with one algorithm; writes `dir/{samples.csv,queue.csv,run.json}`.
#[allow(clippy::too_many_arguments)]
pub fn run_once(
    point: &RunPoint,
    algo: &ResolvedCc,
    all: &[ResolvedCc],
    rep: u32,
    opts: &RunOptions,
    dir: &Path,
    stop: &Arc<AtomicBool>,
) -> Result<RunRecord> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let bed = Testbed::create(&path_for(point)).context("building the dumbbell")?;
    let mut trace = Trace::start(TraceConfig {
        interval: opts.interval,
        port: Some(PORT),
        cc: None,
    })
    .context("starting the collector")?;

    let flows: Vec<FlowSpec> = point
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| FlowSpec {
            id: i + 1,
            cc: flow_cc(f, algo, all),
            start: Duration::from_secs_f64(f.start_s),
            stop: Duration::from_secs_f64(f.stop_s),
            sender: i,
            size_bytes: f.size_bytes,
        })
        .collect();

    // Bottleneck sampler.
    let queue: Arc<Mutex<Vec<QueuePoint>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let web = if point.web_sessions > 0 {
        let web_cc = all
            .iter()
            .find(|r| r.requested == point.web_cc)
            .map_or(point.web_cc.clone(), |r| r.cc_name.clone());
        let sender = point.flows.len();
        let seed = 0x5eed ^ ((point.index as u64) << 8) ^ u64::from(rep);
        let spec = match point.web_model {
            crate::scenario::WebModel::Surge => {
                crate::web::WebSpec::surge(point.web_sessions, &web_cc, sender, seed)
            }
            crate::scenario::WebModel::P0 => {
                crate::web::WebSpec::p0(point.web_sessions, &web_cc, sender, seed)
            }
        };
        Some(crate::web::start(&bed, &spec).context("starting the web cross traffic")?)
    } else {
        None
    };
    let cpu0 = cpu_times();
    let t0_ns = monotonic_ns();
    let t0 = Instant::now();
    let sampler = {
        let (queue, done) = (queue.clone(), done.clone());
        let (ns, dev) = (bed.router_ns().to_string(), bed.spec().bottleneck_dev());
        let every = opts.queue_interval;
        let mut tc = QdiscSampler::start(&ns, &dev).context("starting the queue sampler")?;
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Ok(q) = tc.sample() {
                    queue.lock().expect("queue lock").push(QueuePoint {
                        t_s: t0.elapsed().as_secs_f64(),
                        backlog_pkts: q.backlog_packets,
                        backlog_bytes: q.backlog_bytes,
                        drops: q.drops,
                        sent_pkts: q.sent_packets,
                        sent_bytes: q.sent_bytes,
                    });
                }
                std::thread::sleep(every);
            }
        })
    };

    let mut samples: Vec<Sample> = Vec::new();
    let results = std::thread::scope(|scope| {
        let flows_stop = stop.clone();
        let handle = scope.spawn(|| run_bulk_flows(&bed, PORT, &flows, flows_stop));
        trace.collect_while(&mut samples, |_| !handle.is_finished());
        handle
            .join()
            .map_err(|_| anyhow!("the flow runner panicked"))?
    })?;
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let web = web.map(crate::web::WebTraffic::finish);
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_busy = match (cpu0, cpu_times()) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => (b1 - b0) as f64 / (t1 - t0) as f64,
        _ => f64::NAN,
    };
    samples.extend(trace.drain());
    let stats = trace.finish()?;
    let random_drops: u64 = (0..bed.senders())
        .map(|i| bed.random_drops(i).unwrap_or(0))
        .sum();
    bed.destroy().context("removing the dumbbell")?;

    // Raw data first, so an interrupted run keeps what it measured.
    let mut w = csv::Writer::from_path(dir.join("samples.csv"))?;
    for s in &samples {
        w.serialize(s)?;
    }
    w.flush()?;
    let queue = std::mem::take(&mut *queue.lock().expect("queue lock"));
    let mut w = csv::Writer::from_path(dir.join("queue.csv"))?;
    for q in &queue {
        w.serialize(q)?;
    }
    w.flush()?;

    let series = flow_series(point, &flows, &results, &samples, t0_ns);
    let record = RunRecord {
        point: point.index,
        vars: point.vars.clone(),
        algo: algo.requested.clone(),
        rep,
        spec: point.clone(),
        flows: results,
        series,
        queue,
        random_drops,
        samples: stats.samples,
        sample_drops: stats.dropped,
        wall_s,
        web,
        cpu_busy,
    };
    std::fs::write(dir.join("run.json"), serde_json::to_vec_pretty(&record)?)?;
    Ok(record)
}

/// Turns the collector's samples into per-flow series for the metrics (matched by the
/// sender's address and port).
pub fn flow_series(
    point: &RunPoint,
    flows: &[FlowSpec],
    results: &[FlowResult],
    samples: &[Sample],
    t0_ns: u64,
) -> Vec<FlowSeries> {
    results
        .iter()
        .zip(flows)
        .zip(&point.flows)
        .map(|((r, spec), plan)| {
            let mine: Vec<Sample> = samples
                .iter()
                .filter(|s| {
                    s.sport == r.local_port
                        && s.dport == PORT
                        && s.saddr == std::net::IpAddr::V4(r.local_ip)
                })
                .cloned()
                .collect();
            let t = |ns: u64| ns.saturating_sub(t0_ns) as f64 / 1e9;
            let points = mine
                .iter()
                .map(|s| FlowPoint {
                    t_s: t(s.ts_ns),
                    bytes_acked: s.bytes_acked,
                    cwnd: s.cwnd,
                    srtt_us: s.srtt_us,
                    min_rtt_us: s.min_rtt_us,
                    total_retrans: s.total_retrans,
                    delivered: s.delivered,
                })
                .collect();
            let summary = cctl_loader::summary::summarize(&mine);
            let backoffs = summary
                .first()
                .map(|f| {
                    f.backoffs
                        .iter()
                        .map(|b| BackoffEvent {
                            t_s: t(b.ts_ns),
                            cwnd_before: b.cwnd_before,
                            cwnd_after: b.ssthresh_after,
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut ordered = mine.clone();
            ordered.sort_by_key(|s| s.ts_ns);
            let kernel_backoffs = cctl_loader::summary::kernel_backoffs(&ordered)
                .iter()
                .map(|b| BackoffEvent {
                    t_s: t(b.ts_ns),
                    cwnd_before: b.cwnd_before,
                    cwnd_after: b.ssthresh_after,
                })
                .collect();
            FlowSeries {
                id: spec.id,
                cc: spec.cc.clone(),
                base_rtt_s: plan.rtt_ms / 1000.0,
                start_s: r.started.as_secs_f64(),
                stop_s: r.ended.as_secs_f64(),
                points,
                backoffs,
                kernel_backoffs,
                bytes_received: r.bytes,
                completion_s: spec
                    .size_bytes
                    .map(|_| r.ended.saturating_sub(r.started).as_secs_f64()),
                data_segs_out: None,
            }
        })
        .collect()
}

/// Metadata of a results directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metadata {
    /// Scenario name and id.
    pub scenario: String,
    /// Test id of benchmarks.md.
    pub id: String,
    /// Where the scenario came from.
    pub scenario_path: String,
    /// Profile (`ci`, `paper`).
    pub profile: String,
    /// Repetitions per point.
    pub repeat: u32,
    /// Seed of random start times.
    pub seed: u64,
    /// `uname -r`.
    pub kernel: String,
    /// cctl version.
    pub cctl_version: String,
    /// Algorithms with their parameters.
    pub algorithms: Vec<ResolvedCc>,
    /// Collector interval, ms.
    pub interval_ms: u64,
    /// Bottleneck sampling interval, ms.
    pub queue_interval_ms: u64,
    /// Unix time of the start, s.
    pub started_unix: u64,
    /// Runs completed.
    pub runs_done: usize,
    /// Runs planned.
    pub runs_planned: usize,
    /// Whether the run was interrupted.
    pub interrupted: bool,
    /// Where the runs differ from the scenario, and why (threats to validity).
    #[serde(default)]
    pub deviations: Vec<String>,
}

/// Scenario settings the runner records as deviations instead of applying.
pub fn deviations(points: &[RunPoint]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(p) = points.iter().find(|p| p.init_ssthresh_pkts.is_some()) {
        out.push(format!(
            "initial ssthresh preset ([P3]: 50 % BDP, e.g. {} packets) not applied: Linux has no \
             per-connection setter that works for every congestion control and its route-metric \
             path is ignored with tcp_no_ssthresh_metrics_save; flows start with ssthresh = infinity",
            p.init_ssthresh_pkts.unwrap_or(0)
        ));
    }
    out.push(
        "bottleneck queue sampled every queue_interval_ms (benchmarks.md's [CHOICE] is 10 ms); \
         tbf rather than htb; delay on the ACK path; loss at each sender's egress \
         (netem random, or gact every N-th packet where the scenario asks for periodic loss)"
            .into(),
    );
    out
}

/// Runs every point × algorithm × repetition of `sc`; returns the results directory and
/// the records of the completed runs. Cleans up leftovers first and everything it made at
/// the end, also when interrupted through `stop` (then it returns what was completed).
pub fn run_scenario(
    sc: &Scenario,
    opts: &RunOptions,
    stop: Arc<AtomicBool>,
) -> Result<(PathBuf, Vec<RunRecord>)> {
    let seed = opts.seed.unwrap_or_else(|| sc.seed(opts.profile));
    let repeat = opts
        .repeat
        .unwrap_or_else(|| sc.repeat(opts.profile))
        .max(1);
    // Each repetition draws its own random start times from seed + rep.
    let per_rep: Vec<Vec<RunPoint>> = (0..repeat)
        .map(|r| {
            select_points(
                sc.expand(opts.profile, seed + u64::from(r))?,
                opts.points.as_deref(),
            )
        })
        .collect::<Result<_>>()?;
    let points = per_rep[0].clone();
    check_supported(sc, &points)?;
    kernel::require_privileges("running a benchmark")?;
    kernel::require_struct_ops_links()?;
    kernel::ensure_bpffs()?;
    remove_leftovers(PREFIX)?;
    let _ = registry::remove_orphans();

    // Every algorithm, under test or named by a flow, is resolved before anything runs.
    let mut names = opts.algos.clone();
    for p in &points {
        for f in &p.flows {
            if let CcRef::Named(n) = &f.cc {
                names.push(n.clone());
            }
        }
        if p.web_sessions > 0 {
            names.push(p.web_cc.clone());
        }
    }
    let (resolved, loaded) = resolve_algorithms(&names)?;
    let under_test: Vec<ResolvedCc> = opts
        .algos
        .iter()
        .filter_map(|a| resolved.iter().find(|r| &r.requested == a).cloned())
        .collect();

    let stamp = timestamp();
    let dir = opts.out.join(&sc.name).join(stamp);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut meta = Metadata {
        scenario: sc.name.clone(),
        id: sc.id.clone(),
        scenario_path: sc.path.display().to_string(),
        profile: opts.profile.to_string(),
        repeat,
        seed,
        kernel: kernel::release(),
        cctl_version: env!("CARGO_PKG_VERSION").into(),
        algorithms: resolved.clone(),
        interval_ms: opts.interval.as_millis() as u64,
        queue_interval_ms: opts.queue_interval.as_millis() as u64,
        started_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        runs_done: 0,
        runs_planned: points.len() * under_test.len() * repeat as usize,
        interrupted: false,
        deviations: deviations(&points),
    };
    for d in &meta.deviations {
        eprintln!("cctl bench: deviation: {d}");
    }
    std::fs::write(dir.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;

    let total_s: f64 = points.iter().map(|p| p.duration_s).sum::<f64>()
        * (under_test.len() as f64)
        * f64::from(repeat);
    let bar = if opts.progress && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        indicatif::ProgressBar::new(total_s.ceil() as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} {msg} [{bar:30}] {pos}/{len} s (eta {eta})",
        )
        .expect("valid template"),
    );

    let mut records = Vec::new();
    let mut failure = None;
    'outer: for rep in 0..repeat {
        for point in &per_rep[rep as usize] {
            for algo in &under_test {
                if stop.load(Ordering::SeqCst) {
                    break 'outer;
                }
                bar.set_message(format!(
                    "{} p{} {} r{}",
                    sc.name, point.index, algo.requested, rep
                ));
                if opts.progress && bar.is_hidden() {
                    // No terminal (e.g. inside the VM): one line per run instead of a bar.
                    eprintln!(
                        "cctl bench: run {}/{}: point {} ({}) with {}, repetition {}, {:.0} s",
                        records.len() + 1,
                        meta.runs_planned,
                        point.index,
                        point.label(),
                        algo.requested,
                        rep,
                        point.duration_s
                    );
                }
                let run_dir = dir
                    .join("runs")
                    .join(&algo.requested)
                    .join(format!("p{}-r{rep}", point.index));
                match run_once(point, algo, &resolved, rep, opts, &run_dir, &stop) {
                    Ok(r) => records.push(r),
                    Err(e) => {
                        failure = Some(e.context(format!(
                            "point {} with {} (rep {rep})",
                            point.index, algo.requested
                        )));
                        break 'outer;
                    }
                }
                bar.inc(point.duration_s.ceil() as u64);
            }
        }
    }
    bar.finish_and_clear();
    let _ = remove_leftovers(PREFIX);
    let unloaded = loaded.unload();
    meta.runs_done = records.len();
    meta.interrupted = stop.load(Ordering::SeqCst);
    std::fs::write(dir.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;
    if let Some(e) = failure {
        return Err(e);
    }
    unloaded?;
    Ok((dir, records))
}

/// Refuses, before anything is created, scenario features this runner does not implement
/// yet (named, so the user knows what is missing).
pub fn check_supported(sc: &Scenario, points: &[RunPoint]) -> Result<()> {
    for p in points {
        let missing = if p.flows.len() + 1 > crate::testbed::MAX_SENDERS {
            Some(format!(
                "{} flows (at most {})",
                p.flows.len(),
                crate::testbed::MAX_SENDERS
            ))
        } else {
            None
        };
        if let Some(m) = missing {
            bail!(
                "scenario {} ({}) point {} needs {m}, which `cctl bench` does not implement yet; \
                 nothing was run",
                sc.name,
                sc.path.display(),
                p.label()
            );
        }
    }
    Ok(())
}

/// UTC time as `YYYYMMDDTHHMMSSZ` (for directory names).
pub fn timestamp() -> String {
    chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string()
}

/// Reads the run records of a results directory (for `cctl bench report`).
pub fn read_records(dir: &Path) -> Result<(Metadata, Vec<RunRecord>)> {
    let meta: Metadata = serde_json::from_slice(
        &std::fs::read(dir.join("metadata.json"))
            .with_context(|| format!("reading {}/metadata.json", dir.display()))?,
    )
    .with_context(|| format!("parsing {}/metadata.json", dir.display()))?;
    let mut records = Vec::new();
    let runs = dir.join("runs");
    if runs.is_dir() {
        for algo in std::fs::read_dir(&runs)? {
            for run in std::fs::read_dir(algo?.path())? {
                let path = run?.path().join("run.json");
                if let Ok(bytes) = std::fs::read(&path) {
                    records.push(
                        serde_json::from_slice(&bytes)
                            .with_context(|| format!("parsing {}", path.display()))?,
                    );
                }
            }
        }
    }
    records.sort_by(|a: &RunRecord, b: &RunRecord| {
        (a.point, &a.algo, a.rep).cmp(&(b.point, &b.algo, b.rep))
    });
    Ok((meta, records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selected_points_keep_their_indices_and_bad_ones_are_named() {
        let sc = crate::scenario::find("native-comparison").unwrap();
        let all = sc.expand(Profile::Ci, 1).unwrap();
        assert_eq!(select_points(all.clone(), None).unwrap(), all);
        let some = select_points(all.clone(), Some(&[3, 1])).unwrap();
        assert_eq!(some.iter().map(|p| p.index).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(some[1].loss, 0.001);
        let e = select_points(all.clone(), Some(&[0, 4]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no point 4") && e.contains("0 to 3"), "{e}");
        let e = select_points(all, Some(&[])).unwrap_err().to_string();
        assert!(e.contains("no point selected"), "{e}");
    }
}
