//! Part `ack` of `cctl bench perf`: the per-ACK cost of each BPF port against the native
//! module of the same algorithm (issue 7, item 1).
//!
//! One bulk TCP flow, CPU-bound (no bottleneck), over `lo` in a private namespace whose MTU
//! is set to 1500 and whose segmentation offloads are off (TSO, GSO, GRO), so that a
//! gigabyte takes ~690,000 segments and hundreds of thousands of ACK events: the
//! congestion control's per-ACK work is then a visible share of the stack's. Rounds
//! alternate port and module (ABAB…, the first side alternating per algorithm) with the same
//! length; each round gives goodput (bytes read by the receiver / wall time) and CPU per GB:
//! the busy time of all CPUs from /proc/stat over the round (user, system, irq, softirq —
//! wherever the stack ran) divided by the gigabytes moved. The table has the medians and
//! the ratios port / module; the note gives every round's range, so a reader can see
//! whether a 1 % difference stands out of the round-to-round spread.
//!
//! BPF stats: one more round of the port with `BPF_ENABLE_STATS` held gives each callback's
//! run time per call and calls per GB (stats are off during the A/B rounds: they add two
//! clock reads to every call of the port and none to the module).
//!
//! Host: reno and cubic (the built-in modules). Guest (6.12, modules loaded with modprobe):
//! every algorithm with a Linux module. Each port runs in its `linux` profile where it has
//! one (the module's constants).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cctl_loader::bpfstats::{self, ProgStats, StatsGuard};
use cctl_loader::catalogue::ALGORITHMS;
use serde::Serialize;
use socket2::{Domain, Socket, Type};

use super::{median, PartResult, PerfOptions, Row, Site};
use crate::cost::cpu_times;
use crate::perf::Part;
use crate::resolve::resolve_algorithms;
use cctl_netem::netns::spawn_in_netns;
use cctl_netem::testbed::LoopbackNetns;

/// The private namespace of the transfers.
pub(super) const NETNS: &str = "pa-ack";
/// Receiver port inside it.
const PORT: u16 = 5480;
/// MTU of `lo` in the namespace, bytes.
pub(super) const MTU: u32 = 1500;
/// Bytes per write() of the sender.
const CHUNK: usize = 1 << 16;

/// One round of one side.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// Kernel CC name (`bpf_cubic_l`, `cubic`).
    pub cc: String,
    /// Bytes the receiver read.
    pub bytes: u64,
    /// Wall time of the transfer, s.
    pub seconds: f64,
    /// Goodput, Gbit/s.
    pub gbit_s: f64,
    /// Busy time of all CPUs over the round per GB moved, CPU-seconds per GB.
    pub cpu_s_per_gb: f64,
}

/// Per-algorithm outcome (the JSON details).
#[derive(Debug, Clone, Serialize)]
pub struct AlgoResult {
    /// cctl key (`cubic`).
    pub key: String,
    /// Port as selected (`cubic@linux`) and its kernel name.
    pub port: String,
    /// Module name (`cubic`).
    pub native: String,
    /// Every round, in the order run.
    pub rounds: Vec<Round>,
    /// The port's callbacks over the stats round: (callback, ns per call, calls per GB).
    pub callbacks: Vec<(String, f64, f64)>,
}

/// The algorithms measured on `site` (keys), and whether the run is quick.
fn algorithms(site: Site, quick: bool) -> Vec<&'static str> {
    let with_module = ALGORITHMS
        .iter()
        .filter(|a| a.native.is_some())
        .map(|a| a.key);
    match (site, quick) {
        (Site::Host, _) => vec!["reno", "cubic"],
        (Site::Guest, true) => vec!["reno", "cubic", "htcp"],
        (Site::Guest, false) => with_module.collect(),
    }
}

/// `key@linux` where the algorithm has a `linux` profile, else `key`.
fn port_variant(key: &str) -> String {
    match cctl_loader::catalogue::find(key) {
        Ok(a) if a.profiles.iter().any(|p| p.name == "linux") => format!("{key}@linux"),
        _ => key.to_string(),
    }
}

/// Rounds per side and seconds per round.
fn schedule(site: Site, quick: bool) -> (usize, f64) {
    match (site, quick) {
        (_, true) => (2, 1.0),
        (Site::Host, false) => (5, 2.0),
        // Under TCG everything is ~20x slower and the guest half covers 9 algorithms.
        (Site::Guest, false) => (3, 2.0),
    }
}

/// Longest time a transfer may go without moving a byte before it is called stalled, s.
const STALL_S: u64 = 20;

/// One transfer of `secs` with `cc`; returns bytes read and wall time.
///
/// Every blocking step has a bound: the accept waits at most [`STALL_S`], and the sender
/// and receiver give up when no byte moved for [`STALL_S`] (a loopback flow moves
/// gigabytes per second), so a flow the kernel stops serving fails the round with its
/// `ss -tin` state instead of hanging the benchmark.
///
/// Errors: the flow cannot be set up (listen, `TCP_CONGESTION`, connect), or it stalled.
pub(super) fn transfer(cc: &str, secs: f64, stop: &Arc<AtomicBool>) -> Result<Round> {
    let listener = spawn_in_netns(NETNS, || -> std::io::Result<TcpListener> {
        let l = TcpListener::bind(("127.0.0.1", PORT))?;
        l.set_nonblocking(true)?;
        Ok(l)
    })?
    .join()
    .map_err(|_| anyhow::anyhow!("listener thread panicked"))???;
    let stall = Duration::from_secs(STALL_S);
    let receiver = std::thread::spawn(move || -> std::io::Result<u64> {
        let since = Instant::now();
        let mut s = loop {
            match listener.accept() {
                Ok((s, _)) => break s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if since.elapsed() > stall {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!("no connection within {STALL_S} s"),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(e),
            }
        };
        s.set_nonblocking(false)?;
        s.set_read_timeout(Some(stall))?;
        let mut buf = vec![0u8; 1 << 18];
        let mut got = 0u64;
        loop {
            match s.read(&mut buf) {
                Ok(0) => return Ok(got),
                Ok(n) => got += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(stalled(e, "read", got)),
            }
        }
    });
    let cc_name = cc.to_string();
    let stop = stop.clone();
    let sender = spawn_in_netns(NETNS, move || -> std::io::Result<()> {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
        s.set_tcp_congestion(cc_name.as_bytes())?;
        s.connect_timeout(&SocketAddr::from(([127, 0, 0, 1], PORT)).into(), stall)?;
        s.set_write_timeout(Some(stall))?;
        let mut s = TcpStream::from(s);
        let chunk = vec![0x5au8; CHUNK];
        let end = Instant::now() + Duration::from_secs_f64(secs);
        let mut sent = 0u64;
        while Instant::now() < end && !stop.load(Ordering::Relaxed) {
            match s.write(&chunk) {
                Ok(n) => sent += n as u64,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(stalled(e, "write", sent)),
            }
        }
        s.shutdown(std::net::Shutdown::Write)
    })?;
    let t0 = Instant::now();
    let c0 = cpu_times().context("reading /proc/stat")?;
    let sent = sender
        .join()
        .map_err(|_| anyhow::anyhow!("sender thread panicked"))?
        .map_err(|e| anyhow::anyhow!("sender with {cc}: {e}"))?;
    if let Err(e) = sent {
        // The receiver ends on its own: the sender's socket is closed, or its timeout.
        let _ = receiver.join();
        bail!("sender with {cc}: {e}");
    }
    let bytes = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("receiver thread panicked"))?
        .with_context(|| format!("receiver with {cc}"))?;
    let seconds = t0.elapsed().as_secs_f64();
    let c1 = cpu_times().context("reading /proc/stat")?;
    let busy_s = (c1.0 - c0.0) as f64 / clk_tck();
    let gb = bytes as f64 / 1e9;
    Ok(Round {
        cc: cc.to_string(),
        bytes,
        seconds,
        gbit_s: bytes as f64 * 8.0 / seconds / 1e9,
        cpu_s_per_gb: if gb > 0.0 { busy_s / gb } else { f64::NAN },
    })
}

/// The error of a transfer's read or write that failed after `bytes` bytes (a timeout is
/// [`STALL_S`] without progress), with the namespace's `ss -tin` taken while the socket
/// is still open.
fn stalled(e: std::io::Error, op: &str, bytes: u64) -> std::io::Error {
    std::io::Error::new(
        e.kind(),
        format!("{op} after {bytes} bytes: {e}; {}", flow_state()),
    )
}

/// `ss -tin` of the namespace's flows, for the error of a stalled transfer.
fn flow_state() -> String {
    match std::process::Command::new("ip")
        .args(["netns", "exec", NETNS, "ss", "-tin"])
        .output()
    {
        Ok(o) => format!(
            "ss -tin in {NETNS}: {}",
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        ),
        Err(e) => format!("(ss -tin failed: {e})"),
    }
}

/// Clock ticks per second of /proc/stat.
fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The port's programs (by kernel CC name) among cctl's struct_ops programs.
fn port_programs(cc: &str) -> Result<Vec<ProgStats>> {
    Ok(bpfstats::cctl_programs()?
        .into_iter()
        .filter(|p| p.cc.as_deref() == Some(cc))
        .collect())
}

/// Median, min and max of one side's figure.
pub(super) fn spread(xs: &[f64]) -> (f64, f64, f64) {
    let min = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let max = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (median(xs), min, max)
}

/// Measures one algorithm: A/B rounds, then the stats round.
fn measure(key: &str, index: usize, opts: &PerfOptions) -> Result<AlgoResult> {
    let port = port_variant(key);
    let native_name = cctl_loader::catalogue::find(key)?
        .native
        .context("no native module")?
        .to_string();
    let (resolved, loaded) = resolve_algorithms(&[port.clone(), format!("native:{native_name}")])?;
    let port_cc = resolved[0].cc_name.clone();
    let native_cc = resolved[1].cc_name.clone();
    let (n, secs) = schedule(opts.site, opts.quick);
    let mut rounds = Vec::new();
    let mut run = || -> Result<Vec<(String, f64, f64)>> {
        // Warm-up (page cache, the program's first calls), not counted.
        transfer(&port_cc, 0.3, &opts.stop)?;
        transfer(&native_cc, 0.3, &opts.stop)?;
        for i in 0..n {
            let order = if (i + index).is_multiple_of(2) {
                [&port_cc, &native_cc]
            } else {
                [&native_cc, &port_cc]
            };
            for cc in order {
                if opts.stopped() {
                    return Ok(Vec::new());
                }
                rounds.push(transfer(cc, secs, &opts.stop)?);
            }
        }
        // BPF stats round (the port only).
        let guard = StatsGuard::enable()?;
        let before = port_programs(&port_cc)?;
        let r = transfer(&port_cc, secs, &opts.stop)?;
        let after = port_programs(&port_cc)?;
        drop(guard);
        let gb = r.bytes as f64 / 1e9;
        let mut cbs: Vec<(String, f64, f64)> = after
            .iter()
            .filter_map(|a| {
                let b = before.iter().find(|b| b.id == a.id)?;
                let d = a.since(b);
                let per_call = d.ns_per_call()?;
                Some((
                    a.callback.clone(),
                    per_call,
                    d.run_cnt as f64 / gb.max(1e-9),
                ))
            })
            .collect();
        cbs.sort_by(|a, b| (b.1 * b.2).total_cmp(&(a.1 * a.2)));
        Ok(cbs)
    };
    let callbacks = run();
    let unloaded = loaded.unload();
    let callbacks = callbacks?;
    unloaded?;
    Ok(AlgoResult {
        key: key.to_string(),
        port: format!("{port} ({port_cc})"),
        native: native_cc,
        rounds,
        callbacks,
    })
}

/// The table rows of one algorithm.
fn rows_of(r: &AlgoResult, site: Site) -> Vec<Row> {
    let side = |cc: &str| -> Vec<&Round> { r.rounds.iter().filter(|x| x.cc == cc).collect() };
    let port_cc = r
        .rounds
        .iter()
        .map(|x| x.cc.clone())
        .find(|c| *c != r.native);
    let Some(port_cc) = port_cc else {
        return Vec::new();
    };
    let (p, m) = (side(&port_cc), side(&r.native));
    let item = format!("{}: {} vs {}", r.key, r.port, r.native);
    let mut rows = Vec::new();
    type Pick = fn(&Round) -> f64;
    let metrics: [(&str, &str, Pick, bool); 2] = [
        ("throughput", "Gbit/s", |x| x.gbit_s, true),
        ("CPU per GB", "CPU-s/GB", |x| x.cpu_s_per_gb, false),
    ];
    for (metric, unit, pick, higher_better) in metrics {
        let pv: Vec<f64> = p.iter().map(|x| pick(x)).collect();
        let mv: Vec<f64> = m.iter().map(|x| pick(x)).collect();
        let (pm, plo, phi) = spread(&pv);
        let (mm, mlo, mhi) = spread(&mv);
        let mut row = Row::versus(
            Part::Ack,
            site,
            &item,
            metric,
            unit,
            pm,
            &format!("native {}", r.native),
            mm,
        )
        .with_note(format!(
            "median of {} alternating rounds; port {} to {}, module {} to {}",
            pv.len(),
            super::fmt_num(plo),
            super::fmt_num(phi),
            super::fmt_num(mlo),
            super::fmt_num(mhi)
        ));
        if let Some(ratio) = row.ratio {
            row = if higher_better {
                row.with_target(
                    "throughput within 1 % of native (ratio >= 0.99)",
                    ratio >= 0.99,
                )
            } else {
                row.with_target("CPU/GB within 1 % of native (ratio <= 1.01)", ratio <= 1.01)
            };
        }
        rows.push(row);
    }
    if !r.callbacks.is_empty() {
        let total_ns_per_gb: f64 = r.callbacks.iter().map(|c| c.1 * c.2).sum();
        let hot = r
            .callbacks
            .iter()
            .take(4)
            .map(|c| format!("{} {:.0} ns x {:.0}/GB", c.0, c.1, c.2))
            .collect::<Vec<_>>()
            .join(", ");
        rows.push(
            Row::single(
                Part::Ack,
                site,
                &item,
                "BPF run time per GB (all callbacks)",
                "ms/GB",
                total_ns_per_gb / 1e6,
            )
            .with_note(format!("BPF stats round; hottest: {hot}")),
        );
    }
    rows
}

/// Runs the part on `opts.site`.
///
/// Errors: the namespace cannot be made, a port does not load, a module is missing, a
/// transfer fails. The namespace and every algorithm loaded here are removed in all cases.
pub fn run(opts: &PerfOptions) -> Result<PartResult> {
    let ns = LoopbackNetns::create(NETNS, Some(MTU))?;
    // Segmentation offloads would carry 64 KB per packet and ACK, whatever the MTU.
    ns.set_offloads(&["tso", "gso", "gro"], false)?;
    let mut out = PartResult::default();
    let mut details = Vec::new();
    for (i, key) in algorithms(opts.site, opts.quick).into_iter().enumerate() {
        if opts.stopped() {
            break;
        }
        match measure(key, i, opts) {
            Ok(r) => {
                out.rows.extend(rows_of(&r, opts.site));
                details.push(r);
            }
            Err(e) => out.notes.push(format!("{key}: not measured: {e:#}")),
        }
    }
    if details.is_empty() {
        bail!("no algorithm could be measured: {}", out.notes.join("; "));
    }
    let (n, secs) = schedule(opts.site, opts.quick);
    out.notes.push(format!(
        "one bulk flow over lo (MTU {MTU}, TSO/GSO/GRO off) in netns {NETNS}, {n} rounds of {secs} s per side, \
         alternating; CPU = busy time of all CPUs (/proc/stat) per GB; ports in their linux \
         profile where they have one; BPF stats only in an extra port round"
    ));
    out.details = serde_json::to_value(&details)?;
    std::fs::write(
        opts.dir.join("ack.json"),
        serde_json::to_string_pretty(&details)?,
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(cc: &str, gbit: f64, cpu: f64) -> Round {
        Round {
            cc: cc.into(),
            bytes: 1,
            seconds: 1.0,
            gbit_s: gbit,
            cpu_s_per_gb: cpu,
        }
    }

    #[test]
    fn rows_are_medians_with_ratios_and_targets() {
        let r = AlgoResult {
            key: "cubic".into(),
            port: "cubic@linux (bpf_cubic_l)".into(),
            native: "cubic".into(),
            rounds: vec![
                round("bpf_cubic_l", 10.0, 0.20),
                round("cubic", 10.0, 0.20),
                round("cubic", 11.0, 0.19),
                round("bpf_cubic_l", 9.0, 0.22),
                round("bpf_cubic_l", 9.5, 0.21),
                round("cubic", 10.5, 0.19),
            ],
            callbacks: vec![
                ("cong_avoid".into(), 100.0, 1e6),
                ("ssthresh".into(), 50.0, 10.0),
            ],
        };
        let rows = rows_of(&r, Site::Host);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].value, 9.5);
        assert_eq!(rows[0].reference, Some(10.5));
        assert!(!rows[0].target.as_ref().unwrap().met);
        assert!((rows[1].ratio.unwrap() - 0.21 / 0.19).abs() < 1e-12);
        assert!(!rows[1].target.as_ref().unwrap().met);
        assert!((rows[2].value - (100.0 * 1e6 + 500.0) / 1e6).abs() < 1e-9);
        assert!(
            rows[2].note.contains("cong_avoid 100 ns"),
            "{}",
            rows[2].note
        );
    }

    #[test]
    fn host_measures_the_builtin_modules_and_the_guest_every_module() {
        assert_eq!(algorithms(Site::Host, false), vec!["reno", "cubic"]);
        let all = algorithms(Site::Guest, false);
        assert!(all.contains(&"htcp") && all.contains(&"westwood") && !all.contains(&"fast"));
        assert_eq!(port_variant("cubic"), "cubic@linux");
        assert_eq!(port_variant("reno"), "reno");
    }
}
