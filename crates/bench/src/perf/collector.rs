//! Part `collector` of `cctl bench perf`: the collector's highest drop-free sample rate,
//! its CPU, and what tracing costs a saturated loopback flow, next to polling `ss -tin`.
//!
//! Everything runs on loopback inside a private network namespace ([`NETNS`], `lo` at
//! MTU 1500 so that a flow makes many ACKs, hence many `tcp_probe` events, per second):
//! - **max rate**: N bulk flows traced at a 1 µs per-flow interval (every event is
//!   sampled), N swept; the highest delivered samples/s with zero ring-buffer drops, and
//!   the lowest offered rate (emitted + dropped) at which drops appeared. The collector
//!   thread's CPU (from `/proc/self/task/<tid>/schedstat`, ns) and the BPF program's run
//!   time (BPF stats) are measured in each run.
//! - **on/off**: one saturated flow (CPU-bound), rounds alternating off / collector at its
//!   default sampling ([`TraceConfig::default`], 100 ms, no filter, as `cctl trace`) /
//!   `ss -tin` polled at the same per-flow rate (every 100 ms); throughput of each arm,
//!   the collector's CPU (reader thread + BPF run time) against `ss`'s (children's rusage).
//!
//! The collector has no guest half: on [`Site::Guest`] the part returns nothing.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use cctl_loader::bpfstats::{self, ProgStats, StatsGuard};
use cctl_loader::collector::{LiveCounters, Trace, TraceConfig, DEFAULT_INTERVAL};
use serde::Serialize;
use socket2::{Domain, Socket, Type};

use super::{median, Part, PartResult, PerfOptions, Row, Site};
use cctl_netem::netns::spawn_in_netns;
use cctl_netem::testbed::LoopbackNetns;

/// The private network namespace the part runs in (created and deleted by it).
pub const NETNS: &str = "pc-col";

/// MTU of `lo` in [`NETNS`], bytes: Ethernet-sized segments mean ~40× more ACKs per byte
/// than loopback's default 64 KiB, hence a higher event rate per flow.
pub const LO_MTU: u32 = 1500;

/// The listening port of the bulk flows (the collector's port filter in the max-rate runs).
pub const PORT: u16 = 5411;

/// Per-flow interval of the max-rate runs: 1 µs, i.e. every `tcp_probe` event is sampled.
pub const MAX_RATE_INTERVAL: Duration = Duration::from_micros(1);

/// Congestion control of the bulk flows (built in everywhere, needs no loading).
const FLOW_CC: &str = "cubic";

/// Sender write size, bytes.
const CHUNK: usize = 64 * 1024;

/// Warm-up before each measured window (flows ramp up, the collector attaches), ms.
const WARMUP_MS: u64 = 300;

/// Run lengths and sweep points of one mode.
#[derive(Debug, Clone, Serialize)]
struct Plan {
    /// Flow counts of the max-rate sweep.
    sweep_flows: Vec<usize>,
    /// Measured window of each sweep point, s.
    sweep_s: f64,
    /// Rounds of each arm (off, collector, ss) in the on/off comparison.
    rounds: usize,
    /// Measured window of each round, s.
    round_s: f64,
}

impl Plan {
    fn for_mode(quick: bool) -> Plan {
        if quick {
            Plan {
                sweep_flows: vec![2, 8, 32],
                sweep_s: 1.5,
                rounds: 2,
                round_s: 1.0,
            }
        } else {
            Plan {
                sweep_flows: vec![1, 2, 4, 8, 16, 32],
                sweep_s: 2.5,
                rounds: 5,
                round_s: 2.0,
            }
        }
    }
}

/// One point of the max-rate sweep.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RatePoint {
    /// Bulk flows.
    pub flows: usize,
    /// Per-flow sampling interval, µs.
    pub interval_us: f64,
    /// Measured window, s.
    pub seconds: f64,
    /// Samples decoded by the collector thread per second.
    pub delivered_per_s: f64,
    /// Samples the program tried to write per second (emitted + dropped).
    pub offered_per_s: f64,
    /// Ring-buffer drops in the window, count.
    pub dropped: u64,
    /// Collector thread CPU (read + decode + hand-over), share of one core.
    pub reader_cpu_share: f64,
    /// Collector thread CPU per million delivered samples, CPU-s.
    pub reader_cpu_s_per_m: f64,
    /// BPF program run time per call, ns (`None` without BPF stats).
    pub bpf_ns_per_call: Option<f64>,
    /// BPF program calls per second.
    pub bpf_calls_per_s: f64,
    /// BPF program run time as a share of one core.
    pub bpf_cpu_share: Option<f64>,
    /// Loopback goodput of all flows, Gbit/s.
    pub goodput_gbit: f64,
}

/// What the sweep says: the best drop-free point and where drops began.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SweepSummary {
    /// Highest delivered rate among the points without drops, samples/s (0 if none).
    pub max_clean_per_s: f64,
    /// Flows of that point.
    pub max_clean_flows: Option<usize>,
    /// Lowest offered rate among the points with drops, samples/s (`None`: no drops).
    pub drops_from_offered_per_s: Option<f64>,
}

/// Summarises a sweep (pure: unit-tested).
pub fn summarise(points: &[RatePoint]) -> SweepSummary {
    let clean = points
        .iter()
        .filter(|p| p.dropped == 0)
        .max_by(|a, b| a.delivered_per_s.total_cmp(&b.delivered_per_s));
    let drops_from = points
        .iter()
        .filter(|p| p.dropped > 0)
        .map(|p| p.offered_per_s)
        .min_by(f64::total_cmp);
    SweepSummary {
        max_clean_per_s: clean.map_or(0.0, |p| p.delivered_per_s),
        max_clean_flows: clean.map(|p| p.flows),
        drops_from_offered_per_s: drops_from,
    }
}

/// Runs the part on `opts.site` (nothing on the guest).
///
/// Errors: not root, `ip`/`ss` missing or failing, the collector failing to load or attach,
/// the flows failing to connect. The namespace is deleted in every case.
pub fn run(opts: &PerfOptions) -> Result<PartResult> {
    if opts.site == Site::Guest {
        return Ok(PartResult::default());
    }
    let plan = Plan::for_mode(opts.quick);
    let ns = LoopbackNetns::create(NETNS, Some(LO_MTU))?;
    let mut res = PartResult::default();
    let offloads = ns.set_offloads(&["tso", "gso"], false);
    if let Err(e) = &offloads {
        res.notes.push(format!(
            "{e:#}: lo keeps TSO/GSO, so fewer, larger segments and a lower event rate"
        ));
    }
    let mut details = serde_json::Map::new();
    details.insert("plan".into(), serde_json::to_value(&plan)?);
    details.insert("netns".into(), NETNS.into());
    details.insert("lo_mtu".into(), LO_MTU.into());
    details.insert("lo_tso_gso_off".into(), offloads.is_ok().into());

    // 1. Max rate, with BPF stats on (they add two clock reads per call to every run).
    let mut points = Vec::new();
    {
        let stats = StatsGuard::enable().ok();
        for &n in &plan.sweep_flows {
            if opts.stopped() {
                break;
            }
            let p = rate_point(&ns, n, plan.sweep_s, stats.is_some(), &opts.stop)
                .with_context(|| format!("max-rate run with {n} flows"))?;
            points.push(p);
        }
        if stats.is_none() {
            res.notes
                .push("BPF run-time statistics unavailable: no BPF time figures".into());
        }
    }
    let sum = summarise(&points);
    details.insert("sweep".into(), serde_json::to_value(&points)?);
    details.insert("sweep_summary".into(), serde_json::to_value(&sum)?);
    let sweep_note = points
        .iter()
        .map(|p| {
            format!(
                "{}f: {:.0}/s{}",
                p.flows,
                p.delivered_per_s,
                if p.dropped > 0 {
                    format!(" ({} drops, offered {:.0}/s)", p.dropped, p.offered_per_s)
                } else {
                    String::new()
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let target = 1_000_000.0;
    res.rows.push(
        Row::single(
            Part::Collector,
            Site::Host,
            "collector max rate, 0 drops (1 µs per-flow interval)",
            "delivered samples",
            "samples/s",
            sum.max_clean_per_s,
        )
        .with_target(
            ">= 1,000,000 samples/s with no drops",
            sum.max_clean_per_s >= target,
        )
        .with_note(format!(
            "sweep {sweep_note}; drops from offered {}",
            sum.drops_from_offered_per_s
                .map_or("- (none seen)".into(), |r| format!("{r:.0}/s"))
        )),
    );
    if let Some(best) = sum
        .max_clean_flows
        .and_then(|f| points.iter().find(|p| p.flows == f))
    {
        res.rows.push(
            Row::single(
                Part::Collector,
                Site::Host,
                &format!(
                    "collector reader thread at {:.0} samples/s",
                    best.delivered_per_s
                ),
                "CPU per million samples",
                "CPU-s/M",
                best.reader_cpu_s_per_m,
            )
            .with_note(format!(
                "{:.1} % of a core; a whole core would read {:.1} M samples/s",
                100.0 * best.reader_cpu_share,
                1.0 / best.reader_cpu_s_per_m
            )),
        );
        if let (Some(ns_call), Some(share)) = (best.bpf_ns_per_call, best.bpf_cpu_share) {
            res.rows.push(
                Row::single(
                    Part::Collector,
                    Site::Host,
                    "collector BPF program (every event sampled)",
                    "run time per call",
                    "ns",
                    ns_call,
                )
                .with_note(format!(
                    "{:.0} calls/s = {:.1} % of a core",
                    best.bpf_calls_per_s,
                    100.0 * share
                )),
            );
        }
    }

    // 2. On/off and ss at the default sampling, on a flow as a host with a TSO-capable NIC
    // sends it (64 KiB segments).
    if !opts.stopped() {
        if offloads.is_ok() {
            ns.set_offloads(&["tso", "gso"], true)?;
        }
        onoff(&ns, &plan, opts, &mut res, &mut details)?;
    }
    res.details = serde_json::Value::Object(details);
    res.notes.push(format!(
        "loopback in netns {NETNS} (lo MTU {LO_MTU}; TSO/GSO off for the max-rate sweep, \
         on for the on/off and ss rounds), flows {FLOW_CC}; the flows, the collector \
         and ss share the machine's CPUs, so figures are ratios of side-by-side runs"
    ));
    res.notes.push(
        "max rate: the flows, not the collector, bound the offered rate here (every tcp_probe \
         event is a packet through the stack on the same cores); drops, when any, come from the \
         reader thread being scheduled late on saturated cores. BPF ns/call are measured with \
         BPF stats on (two clock reads more per call)"
            .into(),
    );
    if opts.stopped() {
        res.notes.push("interrupted: partial figures".into());
    }
    drop(ns);
    Ok(res)
}

/// One max-rate run: `flows` bulk flows traced at [`MAX_RATE_INTERVAL`].
fn rate_point(
    ns: &LoopbackNetns,
    flows: usize,
    secs: f64,
    stats_on: bool,
    stop: &Arc<AtomicBool>,
) -> Result<RatePoint> {
    let before: Vec<u32> = collector_progs()?.iter().map(|p| p.id).collect();
    let mut trace = Trace::start(TraceConfig {
        interval: MAX_RATE_INTERVAL,
        port: Some(PORT),
        cc: None,
        netns_cookie: None,
    })
    .context("starting the collector")?;
    let prog_id = collector_progs()?
        .into_iter()
        .map(|p| p.id)
        .filter(|id| !before.contains(id))
        .max();
    let load = Load::start(ns, flows)?;
    let reader = collector_tid().context("finding the collector thread")?;
    let sleep_drain = |trace: &mut Trace, d: Duration| {
        let end = Instant::now() + d;
        while Instant::now() < end {
            let _ = trace.drain_ready();
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    sleep_drain(&mut trace, Duration::from_millis(WARMUP_MS));
    let c0 = trace.counters();
    let cpu0 = thread_cpu_ns(reader)?;
    let s0 = prog_stats(prog_id)?;
    let b0 = load.bytes();
    let t0 = Instant::now();
    let window = Duration::from_secs_f64(secs);
    while t0.elapsed() < window && !stop.load(Ordering::SeqCst) {
        sleep_drain(&mut trace, Duration::from_millis(50));
    }
    let dt = t0.elapsed().as_secs_f64();
    let c1 = trace.counters();
    let cpu1 = thread_cpu_ns(reader)?;
    let s1 = prog_stats(prog_id)?;
    let b1 = load.bytes();
    load.stop()?;
    let _ = trace.drain();
    trace.finish().context("stopping the collector")?;
    let d: LiveCounters = c1.since(&c0);
    let cpu_s = (cpu1 - cpu0) as f64 / 1e9;
    let bpf = match (s0, s1) {
        (Some(a), Some(b)) => Some(b.since(&a)),
        _ => None,
    };
    let calls = bpf.as_ref().map_or(0, |s| s.run_cnt);
    let ns_call = bpf
        .as_ref()
        .and_then(|s| s.ns_per_call())
        .filter(|_| stats_on);
    Ok(RatePoint {
        flows,
        interval_us: MAX_RATE_INTERVAL.as_secs_f64() * 1e6,
        seconds: dt,
        delivered_per_s: d.samples as f64 / dt,
        offered_per_s: (d.kernel_emitted + d.dropped) as f64 / dt,
        dropped: d.dropped,
        reader_cpu_share: cpu_s / dt,
        reader_cpu_s_per_m: if d.samples > 0 {
            cpu_s / (d.samples as f64 / 1e6)
        } else {
            f64::NAN
        },
        bpf_ns_per_call: ns_call,
        bpf_calls_per_s: calls as f64 / dt,
        bpf_cpu_share: ns_call.map(|n| n * calls as f64 / dt / 1e9),
        goodput_gbit: (b1 - b0) as f64 * 8.0 / dt / 1e9,
    })
}

/// One on/off round of one arm.
#[derive(Debug, Clone, Serialize)]
struct Round {
    arm: &'static str,
    round: usize,
    seconds: f64,
    gbit: f64,
    /// Collector thread (collector arm) or ss children (ss arm) CPU, share of a core.
    cpu_share: f64,
    /// Samples delivered (collector arm) or ss polls (ss arm).
    events: u64,
}

/// The on/off comparison at the default sampling; fills rows and details.
fn onoff(
    ns: &LoopbackNetns,
    plan: &Plan,
    opts: &PerfOptions,
    res: &mut PartResult,
    details: &mut serde_json::Map<String, serde_json::Value>,
) -> Result<()> {
    let load = Load::start(ns, 1)?;
    std::thread::sleep(Duration::from_millis(WARMUP_MS));
    let window = Duration::from_secs_f64(plan.round_s);
    let mut rounds = Vec::new();
    'outer: for r in 0..plan.rounds {
        for arm in ["off", "collector", "ss"] {
            if opts.stopped() {
                break 'outer;
            }
            rounds.push(match arm {
                "off" => {
                    let b0 = load.bytes();
                    let t0 = Instant::now();
                    std::thread::sleep(window);
                    let dt = t0.elapsed().as_secs_f64();
                    Round {
                        arm,
                        round: r,
                        seconds: dt,
                        gbit: (load.bytes() - b0) as f64 * 8.0 / dt / 1e9,
                        cpu_share: 0.0,
                        events: 0,
                    }
                }
                "collector" => {
                    let mut trace =
                        Trace::start(TraceConfig::default()).context("starting the collector")?;
                    let tid = collector_tid()?;
                    std::thread::sleep(Duration::from_millis(100));
                    let c0 = trace.counters();
                    let cpu0 = thread_cpu_ns(tid)?;
                    let b0 = load.bytes();
                    let t0 = Instant::now();
                    while t0.elapsed() < window {
                        let _ = trace.drain_ready();
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let dt = t0.elapsed().as_secs_f64();
                    let b1 = load.bytes();
                    let cpu1 = thread_cpu_ns(tid)?;
                    let c1 = trace.counters();
                    trace.finish()?;
                    Round {
                        arm,
                        round: r,
                        seconds: dt,
                        gbit: (b1 - b0) as f64 * 8.0 / dt / 1e9,
                        cpu_share: (cpu1 - cpu0) as f64 / 1e9 / dt,
                        events: c1.since(&c0).samples,
                    }
                }
                _ => {
                    let ch0 = children_cpu_s();
                    let b0 = load.bytes();
                    let t0 = Instant::now();
                    let mut polls = 0u64;
                    let mut next = t0;
                    while t0.elapsed() < window {
                        poll_ss()?;
                        polls += 1;
                        next += DEFAULT_INTERVAL;
                        if let Some(w) = next.checked_duration_since(Instant::now()) {
                            std::thread::sleep(w);
                        }
                    }
                    let dt = t0.elapsed().as_secs_f64();
                    Round {
                        arm,
                        round: r,
                        seconds: dt,
                        gbit: (load.bytes() - b0) as f64 * 8.0 / dt / 1e9,
                        cpu_share: (children_cpu_s() - ch0) / dt,
                        events: polls,
                    }
                }
            });
        }
    }
    // The BPF program's cost at the default sampling (stats on only here: they slow it).
    let bpf = if opts.stopped() {
        None
    } else {
        bpf_at_default(plan.round_s)?
    };
    load.stop()?;

    let med = |arm: &str, f: fn(&Round) -> f64| {
        median(
            &rounds
                .iter()
                .filter(|r| r.arm == arm)
                .map(f)
                .collect::<Vec<_>>(),
        )
    };
    let n = rounds.iter().filter(|r| r.arm == "off").count();
    let off = med("off", |r| r.gbit);
    let on = med("collector", |r| r.gbit);
    let ss = med("ss", |r| r.gbit);
    let col_cpu = med("collector", |r| r.cpu_share);
    let ss_cpu = med("ss", |r| r.cpu_share);
    let spread = |arm: &str| {
        let v: Vec<f64> = rounds
            .iter()
            .filter(|r| r.arm == arm)
            .map(|r| r.gbit)
            .collect();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{lo:.2}-{hi:.2}")
    };
    let interval_ms = DEFAULT_INTERVAL.as_millis();
    let cost = 1.0 - on / off;
    res.rows.push(
        Row::versus(
            Part::Collector,
            Site::Host,
            &format!("saturated loopback flow, collector on (default {interval_ms} ms sampling)"),
            "throughput",
            "Gbit/s",
            on,
            "collector off",
            off,
        )
        .with_target("<= 1 % throughput cost at default sampling", cost <= 0.01)
        .with_note(format!(
            "median of {n} alternating rounds of {:.1} s; on {}, off {} Gbit/s; cost {:.2} %",
            plan.round_s,
            spread("collector"),
            spread("off"),
            100.0 * cost
        )),
    );
    res.rows.push(
        Row::versus(
            Part::Collector,
            Site::Host,
            &format!("saturated loopback flow, ss -tin polled every {interval_ms} ms"),
            "throughput",
            "Gbit/s",
            ss,
            "collector off",
            off,
        )
        .with_note(format!(
            "median of {n} rounds; range {} Gbit/s",
            spread("ss")
        )),
    );
    let bpf_share = bpf.as_ref().and_then(|b| b.2);
    let col_total = col_cpu + bpf_share.unwrap_or(0.0);
    res.rows.push(
        Row::versus(
            Part::Collector,
            Site::Host,
            &format!("CPU of watching 1 saturated flow every {interval_ms} ms"),
            "CPU",
            "% of a core",
            100.0 * col_total,
            "ss -tin polling (ip netns exec + ss, children rusage)",
            100.0 * ss_cpu,
        )
        .with_note(match &bpf {
            Some((calls, ns_call, Some(share))) => format!(
                "collector = reader thread {:.3} % + BPF program {:.0} calls/s × {ns_call:.0} ns = {:.2} %",
                100.0 * col_cpu,
                calls,
                100.0 * share
            ),
            _ => format!(
                "collector = reader thread {:.3} % (no BPF stats)",
                100.0 * col_cpu
            ),
        }),
    );
    details.insert("onoff_rounds".into(), serde_json::to_value(&rounds)?);
    details.insert(
        "default_bpf".into(),
        serde_json::to_value(bpf.map(
            |(c, n, s)| serde_json::json!({"calls_per_s": c, "ns_per_call": n, "cpu_share": s}),
        ))?,
    );
    Ok(())
}

/// Calls/s, ns per call and core share of a collector at the default sampling, tracing the
/// running load for `secs` with BPF stats on; `None` if stats cannot be enabled.
fn bpf_at_default(secs: f64) -> Result<Option<(f64, f64, Option<f64>)>> {
    let Ok(_stats) = StatsGuard::enable() else {
        return Ok(None);
    };
    let before: Vec<u32> = collector_progs()?.iter().map(|p| p.id).collect();
    let mut trace = Trace::start(TraceConfig::default())?;
    let id = collector_progs()?
        .into_iter()
        .map(|p| p.id)
        .filter(|id| !before.contains(id))
        .max();
    std::thread::sleep(Duration::from_millis(100));
    let s0 = prog_stats(id)?;
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        let _ = trace.drain_ready();
        std::thread::sleep(Duration::from_millis(20));
    }
    let s1 = prog_stats(id)?;
    let dt = t0.elapsed().as_secs_f64();
    trace.finish()?;
    Ok(match (s0, s1) {
        (Some(a), Some(b)) => {
            let d = b.since(&a);
            let calls = d.run_cnt as f64 / dt;
            d.ns_per_call().map(|n| (calls, n, Some(n * calls / 1e9)))
        }
        _ => None,
    })
}

/// One `ss -tin state established` inside [`NETNS`], output discarded.
fn poll_ss() -> Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", NETNS, "ss", "-tin", "state", "established"])
        .output()
        .context("running ip netns exec ss (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ss -tin in {NETNS} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// CPU time of this process's reaped children (user + system), s.
fn children_cpu_s() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_CHILDREN is always valid.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_CHILDREN, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// The collector programs loaded now (ours and anyone else's).
fn collector_progs() -> Result<Vec<ProgStats>> {
    Ok(bpfstats::cctl_programs()?
        .into_iter()
        .filter(ProgStats::is_collector)
        .collect())
}

/// Current statistics of collector program `id`.
fn prog_stats(id: Option<u32>) -> Result<Option<ProgStats>> {
    let Some(id) = id else { return Ok(None) };
    Ok(collector_progs()?.into_iter().find(|p| p.id == id))
}

/// The thread id of this process's collector thread (`cctl-collector`).
fn collector_tid() -> Result<u32> {
    for e in std::fs::read_dir("/proc/self/task")? {
        let e = e?;
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim() == "cctl-collector" {
            return e
                .file_name()
                .to_string_lossy()
                .parse()
                .map_err(|_| anyhow!("odd task id"));
        }
    }
    bail!("no cctl-collector thread in this process")
}

/// CPU time of thread `tid` of this process, ns (`/proc/self/task/<tid>/schedstat`).
fn thread_cpu_ns(tid: u32) -> Result<u64> {
    let path = format!("/proc/self/task/{tid}/schedstat");
    let s = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_schedstat(&s).ok_or_else(|| anyhow!("unexpected {path}: {s:?}"))
}

/// The first field of a `schedstat` line: time spent on the CPU, ns.
pub fn parse_schedstat(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

/// N bulk loopback flows in [`NETNS`]: sender and receiver threads, bytes counted.
struct Load {
    stop: Arc<AtomicBool>,
    bytes: Arc<AtomicU64>,
    threads: Vec<JoinHandle<std::io::Result<Result<()>>>>,
}

impl Load {
    fn start(_ns: &LoopbackNetns, flows: usize) -> Result<Load> {
        let stop = Arc::new(AtomicBool::new(false));
        let bytes = Arc::new(AtomicU64::new(0));
        let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, PORT));
        let (tx, rx) = std::sync::mpsc::channel::<Result<()>>();
        let mut threads = Vec::new();
        {
            let stop = stop.clone();
            let bytes = bytes.clone();
            threads.push(spawn_in_netns(NETNS, move || -> Result<()> {
                let sock = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                sock.set_reuse_address(true)?;
                let bound = sock.bind(&addr.into()).and_then(|_| sock.listen(1024));
                let _ = tx.send(bound.map_err(|e| anyhow!("listening on {addr}: {e}")));
                let listener: std::net::TcpListener = sock.into();
                listener.set_nonblocking(true)?;
                let mut readers = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((mut s, _)) => {
                            s.set_nonblocking(false)?;
                            s.set_read_timeout(Some(Duration::from_millis(200)))?;
                            let stop = stop.clone();
                            let bytes = bytes.clone();
                            readers.push(std::thread::spawn(move || {
                                let mut buf = vec![0u8; CHUNK];
                                while !stop.load(Ordering::Relaxed) {
                                    match s.read(&mut buf) {
                                        Ok(0) => break,
                                        Ok(n) => {
                                            bytes.fetch_add(n as u64, Ordering::Relaxed);
                                        }
                                        Err(e)
                                            if matches!(
                                                e.kind(),
                                                std::io::ErrorKind::WouldBlock
                                                    | std::io::ErrorKind::TimedOut
                                                    | std::io::ErrorKind::Interrupted
                                            ) => {}
                                        Err(_) => break,
                                    }
                                }
                            }));
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5))
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                for r in readers {
                    let _ = r.join();
                }
                Ok(())
            })?);
        }
        rx.recv_timeout(Duration::from_secs(5))
            .map_err(|_| anyhow!("listener in {NETNS} did not start"))??;
        let (ctx, crx) = std::sync::mpsc::channel::<Result<()>>();
        for _ in 0..flows {
            let stop = stop.clone();
            let ctx = ctx.clone();
            threads.push(spawn_in_netns(NETNS, move || -> Result<()> {
                let connected = (|| -> Result<std::net::TcpStream> {
                    let sock = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                    sock.set_tcp_congestion(FLOW_CC.as_bytes())
                        .with_context(|| format!("setting TCP_CONGESTION={FLOW_CC}"))?;
                    sock.connect_timeout(&addr.into(), Duration::from_secs(3))
                        .with_context(|| format!("connecting to {addr}"))?;
                    let s: std::net::TcpStream = sock.into();
                    s.set_write_timeout(Some(Duration::from_millis(200)))?;
                    Ok(s)
                })();
                let mut s = match connected {
                    Ok(s) => {
                        let _ = ctx.send(Ok(()));
                        s
                    }
                    Err(e) => {
                        let _ = ctx.send(Err(anyhow!("{e:#}")));
                        return Err(e);
                    }
                };
                let chunk = vec![1u8; CHUNK];
                while !stop.load(Ordering::Relaxed) {
                    match s.write(&chunk) {
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock
                                    | std::io::ErrorKind::TimedOut
                                    | std::io::ErrorKind::Interrupted
                            ) => {}
                        // The receivers stop first and reset what they did not read.
                        Err(_) if stop.load(Ordering::Relaxed) => break,
                        Err(e) => return Err(e.into()),
                    }
                }
                Ok(())
            })?);
        }
        let load = Load {
            stop,
            bytes,
            threads,
        };
        for _ in 0..flows {
            match crx.recv_timeout(Duration::from_secs(5)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    let _ = load.stop();
                    bail!("bulk flow: {e}");
                }
                Err(_) => {
                    let _ = load.stop();
                    bail!("bulk flow did not connect within 5 s");
                }
            }
        }
        Ok(load)
    }

    /// Bytes received so far by all flows.
    fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Stops every flow and joins the threads; the first error of any thread.
    fn stop(self) -> Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        let mut first = None;
        for t in self.threads {
            let r = match t.join() {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => Err(e.into()),
                Err(_) => Err(anyhow!("a flow thread panicked")),
            };
            if let (Err(e), None) = (r, &first) {
                first = Some(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(flows: usize, delivered: f64, offered: f64, dropped: u64) -> RatePoint {
        RatePoint {
            flows,
            interval_us: 1.0,
            seconds: 1.0,
            delivered_per_s: delivered,
            offered_per_s: offered,
            dropped,
            reader_cpu_share: 0.1,
            reader_cpu_s_per_m: 0.5,
            bpf_ns_per_call: None,
            bpf_calls_per_s: 0.0,
            bpf_cpu_share: None,
            goodput_gbit: 1.0,
        }
    }

    #[test]
    fn the_best_clean_point_wins_and_drops_start_at_the_lowest_lossy_offer() {
        let s = summarise(&[
            point(1, 100_000.0, 100_000.0, 0),
            point(4, 300_000.0, 300_000.0, 0),
            point(8, 350_000.0, 500_000.0, 12),
            point(16, 320_000.0, 450_000.0, 40),
        ]);
        assert_eq!(s.max_clean_per_s, 300_000.0);
        assert_eq!(s.max_clean_flows, Some(4));
        assert_eq!(s.drops_from_offered_per_s, Some(450_000.0));
    }

    #[test]
    fn a_sweep_without_clean_points_reports_zero_and_without_drops_none() {
        let s = summarise(&[point(8, 1.0, 2.0, 1)]);
        assert_eq!((s.max_clean_per_s, s.max_clean_flows), (0.0, None));
        assert_eq!(
            summarise(&[point(1, 5.0, 5.0, 0)]).drops_from_offered_per_s,
            None
        );
    }

    #[test]
    fn schedstat_gives_the_on_cpu_time_in_ns() {
        assert_eq!(parse_schedstat("313030 236640 3\n"), Some(313_030));
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn quick_mode_is_shorter_than_full_mode() {
        let (q, f) = (Plan::for_mode(true), Plan::for_mode(false));
        let total =
            |p: &Plan| p.sweep_flows.len() as f64 * p.sweep_s + 3.0 * p.rounds as f64 * p.round_s;
        assert!(total(&q) < total(&f));
        assert!(f.rounds >= 5);
    }
}
