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
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use cctl_loader::sample::Sample;
use cctl_loader::{catalogue, kernel};
use serde::{Deserialize, Serialize};

use crate::feed::SampleFeed;
use crate::flows::{run_bulk_flows, FlowResult, FlowSpec};
use crate::metrics::{BackoffEvent, FlowPoint, FlowSeries, QueuePoint};
use crate::scenario::{CcRef, Profile, RunPoint, Scenario};
use crate::sweep::{
    check_compatible, completed_runs, point_indices, run_list, Mismatch, RunId, Shard,
};
use crate::testbed::{remove_leftovers, AccessSpec, PathSpec, QdiscSampler};

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
    /// Runs at once, each on its own dumbbell (slot), 1..=[`MAX_JOBS`].
    pub jobs: u32,
    /// Only this shard of the run list (`--shard K/N`).
    pub shard: Option<Shard>,
    /// Write into this results directory instead of a new `<out>/<scenario>/<timestamp>/`,
    /// skipping the runs it holds completed (`--resume`); created if missing.
    pub resume: Option<PathBuf>,
}

/// Most runs one sweep runs at once (`--jobs`): slot `s` numbers its subnets
/// `10.a.s.b`, and each slot holds up to [`crate::testbed::MAX_SENDERS`] senders.
pub const MAX_JOBS: u32 = 64;

/// One of the dumbbells of a sweep: slot `s` builds namespaces `cctl-b<s>-*` with subnets
/// `10.a.s.b`, so the runs of different slots never share a name or an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(pub u8);

impl Slot {
    /// Name prefix of the slot's namespaces and devices, `cctl-b<s>`.
    pub fn prefix(&self) -> String {
        format!("{PREFIX}{}", self.0)
    }
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

/// Registrations the runner made (by requested name), undone on drop.
pub struct Loaded {
    guards: Vec<(String, LoadGuard)>,
}

impl Loaded {
    /// Unloads what the runner loaded.
    pub fn unload(self) -> Result<()> {
        for (_, g) in self.guards {
            g.unload()?;
        }
        Ok(())
    }

    /// Unloads the algorithm requested as `requested` if the runner loaded it (its last
    /// run has ended); a no-op for names it did not load.
    pub fn release(&mut self, requested: &str) -> Result<()> {
        if let Some(i) = self.guards.iter().position(|(n, _)| n == requested) {
            let (_, g) = self.guards.remove(i);
            g.unload()?;
        }
        Ok(())
    }
}

/// An algorithm name that is neither one of cctl's nor a congestion control of the
/// kernel (registered, or a `tcp_<name>` module on disk).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unknown algorithm '{name}': not one of cctl's ({cctl}) and not registered in the kernel (registered: {registered}) nor a module tcp_{name} of {modules}")]
pub struct UnknownAlgorithm {
    /// The name as given (without `native:`).
    pub name: String,
    /// cctl's algorithm keys, comma-separated.
    pub cctl: String,
    /// The kernel's registered congestion controls, space-separated.
    pub registered: String,
    /// Which kernels' modules were looked at: `this kernel`, or `any kernel in /lib/modules`.
    pub modules: &'static str,
}

/// Which kernel the runs will use, for [`check_algorithms`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKernel {
    /// The running kernel: a kernel name must be registered or a module of it.
    Running,
    /// Possibly another one installed here (the VM boots one, with its modules from the
    /// host's /lib/modules): a module of any kernel in /lib/modules will do too.
    Installed,
}

/// Whether a module `tcp_<name>` exists for any kernel in /lib/modules.
fn module_of_an_installed_kernel(name: &str) -> bool {
    let stem = format!("tcp_{name}.ko");
    let Ok(kernels) = std::fs::read_dir("/lib/modules") else {
        return false;
    };
    kernels.flatten().any(|k| {
        std::fs::read_dir(k.path().join("kernel/net/ipv4"))
            .map(|dir| {
                dir.flatten()
                    .any(|e| e.file_name().to_str().is_some_and(|f| f.starts_with(&stem)))
            })
            .unwrap_or(false)
    })
}

/// Checks algorithm names as [`resolve_algorithms`] takes them, loading and creating
/// nothing: cctl keys and `<key>@<profile>` must exist; other names (and `native:<name>`)
/// must be valid congestion control names, registered in the running kernel or a
/// `tcp_<name>` module of the kernel the runs use (`run_kernel`).
///
/// Errors: [`cctl_loader::Error::UnknownAlgorithm`] (a `<key>@` that is not cctl's),
/// [`cctl_loader::Error::BadParamCombination`] (a profile the algorithm lacks),
/// [`cctl_loader::Error::InvalidName`], [`UnknownAlgorithm`], or an error reading
/// /proc/sys/net/ipv4/tcp_available_congestion_control.
pub fn check_algorithms(names: &[String], run_kernel: RunKernel) -> Result<()> {
    for name in names {
        let native = name.strip_prefix("native:");
        if let Some((key, profile)) = name.split_once('@') {
            catalogue::find(key)?.profile(profile)?;
            continue;
        }
        if native.is_none() && catalogue::find(name).is_ok() {
            continue;
        }
        let kname = native.unwrap_or(name);
        catalogue::validate_cc_name(kname)?;
        let known = kernel::available_ccs()?.iter().any(|n| n == kname)
            || kernel::native_module(kname).is_some()
            || (run_kernel == RunKernel::Installed && module_of_an_installed_kernel(kname));
        if !known {
            return Err(UnknownAlgorithm {
                name: kname.to_string(),
                cctl: catalogue::ALGORITHMS
                    .iter()
                    .map(|a| a.key)
                    .collect::<Vec<_>>()
                    .join(", "),
                registered: kernel::available_ccs()?.join(" "),
                modules: match run_kernel {
                    RunKernel::Running => "this kernel",
                    RunKernel::Installed => "any kernel in /lib/modules",
                },
            }
            .into());
        }
    }
    Ok(())
}

/// Resolves algorithm names before anything is created: cctl keys (`htcp`) are loaded
/// (unless already loaded), `<key>@<profile>` (`cubic@linux`) with that parameter profile
/// under `bpf_<key>_<tag>`; other names, and names written `native:<name>` (the kernel's
/// own `htcp`, not cctl's), must be registered or loadable as `tcp_<name>` modules.
///
/// Errors list what is available.
pub fn resolve_algorithms(names: &[String]) -> Result<(Vec<ResolvedCc>, Loaded)> {
    // First check every name, so that a bad one is refused before anything is loaded.
    check_algorithms(names, RunKernel::Running)?;
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
            catalogue::find(key).ok()
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
                    loaded
                        .guards
                        .push((name.clone(), LoadGuard::new(rec.name.clone())));
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
        catalogue::validate_cc_name(&kname)?;
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
                catalogue::ALGORITHMS.iter().map(|a| a.key).collect::<Vec<_>>().join(", "),
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
    /// CPUs of the machine (for the CPU a run needs: `cpu_busy × cpus`, with one slot).
    #[serde(default)]
    pub cpus: u32,
    /// The run went to its end (false: cut short by an interrupt; `--resume` redoes it).
    /// Files written before this field existed were written only at a run's end.
    #[serde(default = "yes")]
    pub completed: bool,
    /// Counters of each bottleneck of a `[topology]` chain at the end of the run (empty on
    /// the dumbbell, whose bottleneck is in `queue`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<crate::chain::HopStats>,
    /// The rate/delay changes applied during the run, with their timing (none without a
    /// schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::schedule::ScheduleLog>,
    /// How the bottleneck was built (qdisc, its tc lines as applied, ECN sysctl, receiver
    /// congestion control); `None` in files written before it was recorded (drop-tail).
    #[serde(default)]
    pub bottleneck: Option<crate::aqm::BottleneckSetup>,
    /// Samples of the bottleneck discipline's own counters (drops, ECN marks, its delay
    /// estimate), taken with the queue samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aqm: Vec<crate::aqm::AqmPoint>,
}

fn yes() -> bool {
    true
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

/// Builds the testbed of one point in slot 0: one sender per flow with its RTT, the
/// scenario's loss.
pub fn path_for(point: &RunPoint) -> PathSpec {
    path_in_slot(point, Slot(0))
}

/// [`path_for`] in slot `slot`: its names and subnets.
pub fn path_in_slot(point: &RunPoint, slot: Slot) -> PathSpec {
    let mut spec = PathSpec::new(slot.prefix(), point.rate_mbit, point.buffer_pkts.max(1));
    spec.subnet_octet = slot.0;
    spec.aqm = point.aqm.clone();
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
    crate::schedule::initial_path(point, &mut spec);
    spec
}

/// Runs one point once with one algorithm on slot `slot`'s dumbbell, its samples from
/// `feed`; writes `dir/{samples.csv,queue.csv,run.json}` (`run.json` last, by rename, so
/// a run with a `run.json` is whole).
#[allow(clippy::too_many_arguments)]
pub fn run_once(
    point: &RunPoint,
    algo: &ResolvedCc,
    all: &[ResolvedCc],
    rep: u32,
    opts: &RunOptions,
    dir: &Path,
    stop: &Arc<AtomicBool>,
    slot: Slot,
    feed: &SampleFeed,
) -> Result<RunRecord> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
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
    let mut path = path_in_slot(point, slot);
    // dctcp's receivers must run dctcp too: it echoes every CE mark (not classic ECN's
    // latched ECE), which is what the sender's marked fraction α is computed from.
    if flows.iter().any(|f| crate::scenario::is_dctcp(&f.cc)) {
        path.receiver_cc = Some("dctcp".into());
    }
    let setup = crate::aqm::BottleneckSetup {
        aqm: point.aqm.clone(),
        tc: path.bottleneck_tc_lines(),
        ecn_sysctl: point.aqm.ecn_sysctl().into(),
        receiver_cc: path.receiver_cc.clone(),
    };
    let bed = crate::chain::Bed::create(point, slot, &path)?;
    feed.subscribe(slot.0);
    let counters0 = feed.counters();

    // Bottleneck sampler.
    let queue: Arc<Mutex<Vec<QueuePoint>>> = Arc::default();
    let aqm_points: Arc<Mutex<Vec<crate::aqm::AqmPoint>>> = Arc::default();
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
        let dumbbell = bed
            .dumbbell()
            .context("web cross traffic needs the dumbbell")?;
        Some(crate::web::start(dumbbell, &spec).context("starting the web cross traffic")?)
    } else {
        None
    };
    let cpu0 = cpu_times();
    let t0_ns = monotonic_ns();
    let t0 = Instant::now();
    // Schedules are refused with a [topology] chain when the scenario is parsed.
    let schedule = match bed.dumbbell() {
        Some(t) => crate::schedule::ScheduleDriver::start(
            t,
            &point.rate_schedule,
            &point.delay_schedule,
            t0,
        )
        .context("starting the schedule driver")?,
        None => None,
    };
    let sampler = {
        let (queue, aqm_points, done) = (queue.clone(), aqm_points.clone(), done.clone());
        let (ns, dev) = bed.sampled_queue();
        let every = opts.queue_interval;
        let qdisc = point.aqm.qdisc;
        let mut tc = QdiscSampler::start(&ns, &dev).context("starting the queue sampler")?;
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Ok((q, a)) = tc.sample_with_aqm(qdisc) {
                    if let Some(stats) = a {
                        aqm_points
                            .lock()
                            .expect("aqm lock")
                            .push(crate::aqm::AqmPoint {
                                t_s: t0.elapsed().as_secs_f64(),
                                stats,
                            });
                    }
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

    let results = std::thread::scope(|scope| {
        let flows_stop = stop.clone();
        let handle = scope.spawn(|| run_bulk_flows(&bed, PORT, &flows, flows_stop));
        while !handle.is_finished() {
            feed.pump(Duration::from_millis(100));
        }
        handle
            .join()
            .map_err(|_| anyhow!("the flow runner panicked"))?
    })?;
    let completed = !stop.load(Ordering::SeqCst);
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let schedule = schedule
        .map(crate::schedule::ScheduleDriver::finish)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    let web = web.map(crate::web::WebTraffic::finish);
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_busy = match (cpu0, cpu_times()) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => (b1 - b0) as f64 / (t1 - t0) as f64,
        _ => f64::NAN,
    };
    let samples = feed.take(slot.0);
    let dropped = feed.counters().dropped.saturating_sub(counters0.dropped);
    let random_drops: u64 = (0..crate::flows::Endpoints::senders(&bed))
        .map(|i| bed.random_drops(i).unwrap_or(0))
        .sum();
    let hops = bed.hop_stats().context("reading the chain's bottlenecks")?;
    bed.destroy().context("removing the testbed")?;

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
    let aqm = std::mem::take(&mut *aqm_points.lock().expect("aqm lock"));
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
        samples: samples.len() as u64,
        sample_drops: dropped,
        wall_s,
        web,
        cpu_busy,
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        completed,
        hops,
        schedule,
        bottleneck: Some(setup),
        aqm,
    };
    let tmp = dir.join("run.json.part");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&record)?)?;
    std::fs::rename(&tmp, dir.join("run.json"))?;
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
    /// Algorithms under test, as requested (`--algo`); [`Metadata::algorithms`] also holds
    /// those the scenario's flows name.
    #[serde(default)]
    pub under_test: Vec<String>,
    /// The points selected with `--points` (`None`: all).
    #[serde(default)]
    pub points: Option<Vec<usize>>,
    /// The shard of the run list this directory holds (`None`: all of it).
    #[serde(default)]
    pub shard: Option<Shard>,
    /// Runs run at once (`--jobs`).
    #[serde(default = "one")]
    pub jobs: u32,
    /// Directories merged into this one by `cctl bench merge`.
    #[serde(default)]
    pub merged_from: Vec<String>,
    /// The `[topology]` chain of each point (by index) of a scenario that has one: hops
    /// (rate, delay, buffer) and each flow's path and RTT.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topology: BTreeMap<usize, crate::scenario::TopologyPlan>,
    /// The bottleneck of each point (by index) as slot 0 builds it: qdisc, parameters, tc
    /// lines, ECN sysctl; the receiver's congestion control when a named flow runs dctcp
    /// (a run's `run.json` has what it applied, also for dctcp under test).
    #[serde(default)]
    pub bottleneck: BTreeMap<usize, crate::aqm::BottleneckSetup>,
}

fn one() -> u32 {
    1
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
    if points
        .iter()
        .any(|p| !p.rate_schedule.is_empty() || !p.delay_schedule.is_empty())
    {
        out.push(
            "time-varying link: changes applied through one tc -batch per run (timing in each \
             run.json's `schedule`); tbf refills its bucket at every rate change; a trace is \
             replayed as piecewise-constant rates per trace_bin_ms bin"
                .into(),
        );
    }
    if let Some(p) = points.iter().find(|p| p.aqm.ecn) {
        out.push(format!(
            "ECN on ({} at point {}): net.ipv4.tcp_ecn=1 in every sender and receiver \
             namespace; with a dctcp flow the receiver namespace runs dctcp (dctcp is added to \
             the kernel's tcp_allowed_congestion_control for that)",
            p.aqm.qdisc, p.index
        ));
    }
    out.push(
        "bottleneck queue sampled every queue_interval_ms (benchmarks.md's [CHOICE] is 10 ms); \
         tbf rather than htb; delay on the ACK path; loss at each sender's egress \
         (netem random, or gact every N-th packet where the scenario asks for periodic loss)"
            .into(),
    );
    if points.iter().any(|p| p.topology.is_some()) {
        out.push(
            "[topology] chain: each hop's delay on its link's reverse (ACK) direction, so a \
             flow's RTT is the sum over its hops; queue.csv samples hop 1 only, run.json has \
             every hop's final counters"
                .into(),
        );
    }
    out
}

/// Runs every point × algorithm × repetition of `sc` (or `opts.shard`'s part of them),
/// `opts.jobs` at a time; returns the results directory and the records of the completed
/// runs (with `opts.resume`, also those completed before). Takes the kernel's bench lock
/// ([`crate::lock`]), cleans up leftovers first and everything it made at the end, also
/// when interrupted through `stop` (then it returns what was completed). An algorithm is
/// unloaded when the last run that uses it has ended.
///
/// Errors: another `cctl bench` holds the lock ([`crate::lock::LockError::Held`]); the
/// resumed directory describes another sweep ([`Mismatch`]); privileges, kernel features,
/// loading, and the first run that fails (the runs under way finish first).
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
    if opts.jobs == 0 || opts.jobs > MAX_JOBS {
        bail!("--jobs {}: give 1 to {MAX_JOBS} runs at once", opts.jobs);
    }
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
    crate::aqm::check_dctcp(&opts.algos, &points)?;
    kernel::require_privileges("running a benchmark")?;
    kernel::require_struct_ops_links()?;
    kernel::ensure_bpffs()?;
    let _lock = crate::lock::acquire()?;
    remove_leftovers(PREFIX)?;
    let _ = registry::remove_orphans();

    let mut list = run_list(&point_indices(&points), &opts.algos, repeat);
    if let Some(shard) = opts.shard {
        list = shard.select(list);
    }
    let runs_planned = list.len();
    let dir = match &opts.resume {
        Some(d) => d.clone(),
        None => opts.out.join(&sc.name).join(timestamp()),
    };
    let previous = match std::fs::read(dir.join("metadata.json")) {
        Ok(bytes) => Some(
            serde_json::from_slice::<Metadata>(&bytes)
                .with_context(|| format!("parsing {}/metadata.json", dir.display()))?,
        ),
        Err(_) => None,
    };
    let done = completed_runs(&dir);
    let todo: Vec<RunId> = list.into_iter().filter(|r| !done.contains_key(r)).collect();

    // Every algorithm, under test or named by a flow, is resolved before anything runs;
    // each is counted by the runs still to do that use it.
    let uses = |id: &RunId| -> Vec<String> {
        let mut v = vec![id.algo.clone()];
        if let Some(p) = per_rep[id.rep as usize]
            .iter()
            .find(|p| p.index == id.point)
        {
            for f in &p.flows {
                if let CcRef::Named(n) = &f.cc {
                    v.push(n.clone());
                }
            }
            if p.web_sessions > 0 {
                v.push(p.web_cc.clone());
            }
        }
        v.sort();
        v.dedup();
        v
    };
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
        runs_done: done.len(),
        runs_planned,
        interrupted: false,
        deviations: deviations(&points),
        under_test: opts.algos.clone(),
        points: opts.points.clone(),
        shard: opts.shard,
        jobs: opts.jobs,
        merged_from: Vec::new(),
        topology: points
            .iter()
            .filter_map(|p| Some((p.index, p.topology.clone()?)))
            .collect(),
        bottleneck: points
            .iter()
            .map(|p| (p.index, crate::aqm::setup_of(p, &opts.algos)))
            .collect(),
    };
    if let Some(old) = &previous {
        let what = format!("cannot resume into {}", dir.display());
        check_compatible(old, &meta, &what, "resumed")?;
        if old.shard != meta.shard {
            return Err(Mismatch {
                what,
                field: "shard",
                left: format!("{:?}", old.shard.map(|s| s.to_string())),
                right: format!("{:?}", meta.shard.map(|s| s.to_string())),
                verb: "resumed",
            }
            .into());
        }
        meta.started_unix = old.started_unix;
    }
    if !done.is_empty() {
        eprintln!(
            "cctl bench: resuming {}: {} of {} runs completed, {} to do",
            dir.display(),
            done.len(),
            runs_planned,
            todo.len()
        );
    }
    for d in &meta.deviations {
        eprintln!("cctl bench: deviation: {d}");
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;

    let point_of = |id: &RunId| -> &RunPoint {
        per_rep[id.rep as usize]
            .iter()
            .find(|p| p.index == id.point)
            .expect("run list built from these points")
    };
    let total_s: f64 = todo.iter().map(|id| point_of(id).duration_s).sum();
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
    let jobs = (opts.jobs as usize).min(todo.len()).max(1);
    if opts.progress {
        if let Some(w) = cpu_warning(&todo.iter().map(point_of).collect::<Vec<_>>(), jobs) {
            eprintln!("cctl bench: warning: {w}");
        }
    }

    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
    for id in &todo {
        for n in uses(id) {
            *remaining.entry(n).or_default() += 1;
        }
    }
    // Algorithms no run still to do uses (a resumed sweep's finished part) go now.
    let mut loaded = loaded;
    for r in &resolved {
        if !remaining.contains_key(&r.requested) {
            loaded.release(&r.requested)?;
        }
    }

    struct Shared {
        queue: std::collections::VecDeque<RunId>,
        records: Vec<RunRecord>,
        failure: Option<anyhow::Error>,
        remaining: BTreeMap<String, usize>,
        loaded: Loaded,
        started: usize,
    }
    let shared = Mutex::new(Shared {
        queue: todo.iter().cloned().collect(),
        records: Vec::new(),
        failure: None,
        remaining,
        loaded,
        started: done.len(),
    });
    let feed = if todo.is_empty() {
        None
    } else {
        Some(SampleFeed::start(PORT, opts.interval)?)
    };
    std::thread::scope(|scope| {
        for s in 0..jobs {
            let (shared, feed, bar, stop) = (&shared, feed.as_ref(), &bar, &stop);
            let (under_test, resolved, dir, meta) = (&under_test, &resolved, &dir, &meta);
            let (point_of, uses) = (&point_of, &uses);
            scope.spawn(move || loop {
                let (id, nth) = {
                    let mut sh = shared.lock().expect("sweep lock");
                    if stop.load(Ordering::SeqCst) || sh.failure.is_some() {
                        return;
                    }
                    let Some(id) = sh.queue.pop_front() else {
                        return;
                    };
                    sh.started += 1;
                    (id, sh.started)
                };
                let point = point_of(&id);
                let algo = under_test
                    .iter()
                    .find(|r| r.requested == id.algo)
                    .expect("algorithm resolved");
                bar.set_message(format!(
                    "{} p{} {} r{}",
                    meta.scenario, id.point, id.algo, id.rep
                ));
                if opts.progress && bar.is_hidden() {
                    // No terminal (e.g. inside the VM): one line per run instead of a bar.
                    eprintln!(
                        "cctl bench: run {nth}/{}: point {} ({}) with {}, repetition {}, {:.0} s{}",
                        meta.runs_planned,
                        point.index,
                        point.label(),
                        algo.requested,
                        id.rep,
                        point.duration_s,
                        if jobs > 1 {
                            format!(" (slot {s})")
                        } else {
                            String::new()
                        }
                    );
                }
                let run_dir = id.dir(dir);
                let _ = std::fs::remove_dir_all(&run_dir);
                let feed = feed.expect("a collector runs while there are runs to do");
                let res = run_once(
                    point,
                    algo,
                    resolved,
                    id.rep,
                    opts,
                    &run_dir,
                    stop,
                    Slot(s as u8),
                    feed,
                );
                bar.inc(point.duration_s.ceil() as u64);
                let mut sh = shared.lock().expect("sweep lock");
                match res {
                    Ok(r) => sh.records.push(r),
                    Err(e) => {
                        let e = e.context(format!(
                            "point {} with {} (rep {})",
                            id.point, id.algo, id.rep
                        ));
                        sh.failure.get_or_insert(e);
                    }
                }
                for n in uses(&id) {
                    let left = sh.remaining.get_mut(&n).map(|c| {
                        *c -= 1;
                        *c
                    });
                    if left == Some(0) {
                        if let Err(e) = sh.loaded.release(&n) {
                            sh.failure
                                .get_or_insert(e.context(format!("unloading {n}")));
                        }
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    if let Some(feed) = feed {
        let _ = feed.finish();
    }
    let _ = remove_leftovers(PREFIX);
    let sh = shared.into_inner().expect("sweep lock");
    let unloaded = sh.loaded.unload();
    let mut records: Vec<RunRecord> = done.into_values().chain(sh.records).collect();
    records.sort_by(|a, b| (a.point, &a.algo, a.rep).cmp(&(b.point, &b.algo, b.rep)));
    meta.runs_done = records.iter().filter(|r| r.completed).count();
    meta.interrupted = stop.load(Ordering::SeqCst);
    std::fs::write(dir.join("metadata.json"), serde_json::to_vec_pretty(&meta)?)?;
    if let Some(e) = sh.failure {
        return Err(e);
    }
    unloaded?;
    Ok((dir, records))
}

/// CPUs one run needs, estimated from its bottleneck rate: a fixed part (collector, queue
/// sampler, flow threads) and a part per Mbit/s that the kernel spends forwarding through
/// the dumbbell's veths and qdiscs. From `make bench-jobs` and a host sweep of one flow at
/// 10-1000 Mbit/s on this project's 2-vCPU machines (busy share of all CPUs x CPUs, one
/// slot): on the host kernel 0.05 CPUs at 10 Mbit/s, 0.25 at 100, 0.86 at 300; in the TCG
/// guest 0.36 at 10 Mbit/s (T0.1's two flows), about 8 times the host's.
pub fn cpus_per_run(point: &RunPoint) -> f64 {
    let (fixed, per_mbit) = if crate::vm::emulated_cpu() {
        (TCG_CPUS_FIXED, TCG_CPUS_PER_MBIT)
    } else {
        (HOST_CPUS_FIXED, HOST_CPUS_PER_MBIT)
    };
    // A chain forwards every hop's traffic.
    let mbit = point.topology.as_ref().map_or(point.rate_mbit, |t| {
        t.hops.iter().map(|h| h.rate_mbit).sum()
    });
    fixed + per_mbit * mbit
}

/// Measured CPU per run on the host kernel: fixed part, CPUs.
const HOST_CPUS_FIXED: f64 = 0.03;
/// Measured CPU per run on the host kernel: per Mbit/s of bottleneck, CPUs.
const HOST_CPUS_PER_MBIT: f64 = 0.0028;
/// Measured CPU per run in the TCG guest: fixed part, CPUs.
const TCG_CPUS_FIXED: f64 = 0.05;
/// Measured CPU per run in the TCG guest: per Mbit/s of bottleneck, CPUs.
const TCG_CPUS_PER_MBIT: f64 = 0.031;

/// Share of the machine's CPUs that runs may use before they measure less than the link
/// carries. In the TCG guest the emulator's own threads share the host's cores with the
/// vCPUs: `make bench-jobs` lost 5-7 points of link utilisation with 4 slots at 72 % of
/// the guest's CPUs and none with 2 slots at 36 %. On the host, headroom for the system.
fn usable_cpu_share() -> f64 {
    if crate::vm::emulated_cpu() {
        0.5
    } else {
        0.8
    }
}

/// A warning when `jobs` of the costliest of `points` at once would need more CPU than the
/// machine can give runs ([`cpus_per_run`], [`usable_cpu_share`]), naming the need and the
/// `--jobs` that fits.
pub fn cpu_warning(points: &[&RunPoint], jobs: usize) -> Option<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let usable = cpus * usable_cpu_share();
    let worst = points
        .iter()
        .map(|p| cpus_per_run(p))
        .fold(0.0_f64, f64::max);
    let need = worst * jobs as f64;
    (jobs > 1 && need > usable).then(|| {
        format!(
            "{jobs} runs at once need about {need:.1} CPUs (up to {worst:.2} each) and runs \
             can use {usable:.1} of this machine's {cpus:.0}{}: they would compete for CPU \
             and measure less than the link carries; --jobs {} fits",
            if crate::vm::emulated_cpu() {
                " (an emulated guest)"
            } else {
                ""
            },
            ((usable / worst).floor() as usize).max(1)
        )
    })
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
