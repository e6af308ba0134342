//! Soak: the release `cctl exporter` and a collector consumer (`cctl trace --json` into a
//! pipe this example drains, counting its lines) side by side for `minutes` with N busy
//! loopback flows, to see whether memory grows, samples are dropped or scrapes slow down.
//!
//! Run as root: `make soak` or
//! `cargo build --release -p cctl && cargo run --release -p cctl-tests --example soak -- [flows] [minutes]`
//! (defaults 1000 flows, 30 min; minutes may be fractional, at least 1/6). The flows are
//! those of exporter_cpu.rs (common/mod.rs): N loopback connections in a private namespace
//! (`cctl-tx-soak`, port 5481; senders reno, receivers cubic, 64 bytes every 20 ms on each,
//! so 2N sockets are sampled, each every 100 ms by both collectors); neither consumer filters.
//! Beside them the flows come and go: a short connection opened every 100 ms on port 5482
//! and closed 1 s later (10 open at a time, 18,000 over 30 min), so that state kept for
//! closed flows would show as growing RSS and tracked flows.
//!
//! Every 10 s it records one row: elapsed seconds; VmRSS and RssAnon (KiB, /proc/<pid>/status) and CPU
//! (% of one core over the last 10 s, utime+stime) of the exporter and of the trace; the wall
//! time (ms) and size of one scrape of /metrics; the exporter's collector counters
//! (`cctl_collector_samples_total`, `_kernel_samples_total`, `_dropped_samples_total`,
//! ring-buffer drops), `cctl_exporter_tracked_flows` and `cctl_exporter_source_errors_total`;
//! the samples read from the trace's pipe and its BPF program's own counters of samples
//! written and dropped (its `.bss`, read with `bpftool map dump`; empty when bpftool cannot).
//! Each row is printed as it comes and appended to results/soak/<UTC timestamp>/samples.csv.
//! At the end (also after Ctrl-C or a failure mid-run, with the rows so far) summary.json
//! there holds RSS at 1 and 5 min and at the end, the least-squares slope of RSS (KiB/min) over
//! the rows from minute 5 on (from half the run for runs under 10 min), scrape max/median/p99
//! in the first and the last 5 minutes (half the run when shorter), the drops (the exporter's
//! counter, the trace's own end-of-run count), the channel high-water marks (the most samples
//! ever waiting between each collector's ring-buffer reader and its consumer: the exporter's
//! in every row, the trace's from its exit line) and the verdict "heap (RssAnon) flat after
//! 5 min: yes/no", yes when both RssAnon slopes are at most 64 KiB/min (1.6 MiB over the 25
//! minutes after minute 5).
//!
//! Exit status: 0 when the run completed (whatever the verdict), 1 on a setup error or when a
//! process died or could not be read mid-run, 130 on Ctrl-C (SIGINT/SIGTERM). The namespace,
//! the flows, the trace and the exporter are removed on every exit.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use nix::sys::signal::{self, Signal};

mod common;
use common::{
    catch_interrupts, cpu_seconds, free_port, interrupted, pace, raise_nofile, release_cctl,
    sample_value, scrape, status_kib, Exporter, Flows, Netns, WRITE_MS,
};

/// The flows' namespace and the receivers' port (apart from exporter_cpu's).
const NETNS: &str = "cctl-tx-soak";
const PORT: u16 = 5481;
/// Short connections: opened every [`CHURN_EVERY`] on this port, each closed after
/// [`CHURN_OPEN`] of them are younger.
const CHURN_PORT: u16 = 5482;
const CHURN_EVERY: Duration = Duration::from_millis(100);
const CHURN_OPEN: usize = 10;
/// Time between rows.
const EVERY: Duration = Duration::from_secs(10);
/// Memory counts from here on ("after the first minutes"), seconds; half the run if shorter.
const SETTLE_S: f64 = 300.0;
/// The first and last windows of the scrape statistics, seconds; half the run if shorter.
const WINDOW_S: f64 = 300.0;
/// Largest RSS slope after [`SETTLE_S`] still called flat, KiB per minute.
const FLAT_KIB_PER_MIN: f64 = 64.0;
/// The name of the trace's `.bss` map (libbpf: object name truncated, `.bss`).
const TRACE_BSS: &str = "trace_bp.bss";

/// Sleeps until `due` in small steps; fails once Ctrl-C was pressed.
fn sleep_until(due: Instant) -> Result<()> {
    loop {
        ensure!(!interrupted(), "interrupted");
        let now = Instant::now();
        if now >= due {
            return Ok(());
        }
        std::thread::sleep((due - now).min(Duration::from_millis(50)));
    }
}

/// `cctl trace --json` with its stdout counted and its stderr kept.
struct TraceProc {
    child: Child,
    /// Lines (samples) read from its stdout so far.
    lines: Arc<AtomicU64>,
    stdout: Option<JoinHandle<()>>,
    stderr: Option<JoinHandle<Vec<String>>>,
    /// Id of its BPF program's `.bss` map, once found.
    bss: Option<u32>,
    /// Whether bpftool already failed (said once).
    bpftool_failed: bool,
}

/// What `cctl trace` says on exit: `cctl trace: N samples, F flows, D ring-buffer drops ...`.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct TraceEnd {
    samples: u64,
    flows: u64,
    dropped: u64,
    /// Most samples waiting between its ring-buffer reader and its output, count.
    channel_high_water: Option<u64>,
}

impl TraceProc {
    fn start(bin: &Path) -> Result<TraceProc> {
        let mut child = Command::new(bin)
            .args(["trace", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting cctl trace")?;
        let out = child.stdout.take().context("the trace's stdout")?;
        let err = child.stderr.take().context("the trace's stderr")?;
        let lines = Arc::new(AtomicU64::new(0));
        let counter = lines.clone();
        Ok(TraceProc {
            child,
            lines,
            stdout: Some(std::thread::spawn(move || count_lines(out, &counter))),
            stderr: Some(std::thread::spawn(move || keep_stderr(err))),
            bss: None,
            bpftool_failed: false,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Samples its BPF program wrote and dropped (ring buffer full) so far, read from the
    /// program's `.bss` with bpftool; None (said once) when that fails.
    fn kernel_counters(&mut self) -> Option<(u64, u64)> {
        let r = self.read_bss();
        if let Err(e) = &r {
            if !self.bpftool_failed {
                eprintln!("soak: the trace's BPF counters are not read ({e:#}); its drops come from its exit line");
                self.bpftool_failed = true;
            }
        }
        r.ok()
    }

    fn read_bss(&mut self) -> Result<(u64, u64)> {
        let id = match self.bss {
            Some(id) => id,
            None => {
                let id = find_map(self.pid(), TRACE_BSS)?;
                self.bss = Some(id);
                id
            }
        };
        let v = bpftool(&["map", "dump", "id", &id.to_string()])?;
        let vars = v[0]["formatted"]["value"][".bss"]
            .as_array()
            .context("no formatted .bss in bpftool's dump (no BTF?)")?;
        let var = |name: &str| {
            vars.iter()
                .find_map(|o| o[name].as_u64())
                .with_context(|| format!("no {name} in the trace's .bss"))
        };
        Ok((var("samples_emitted")?, var("samples_dropped")?))
    }

    /// Stops it (SIGTERM), waits, and reads its exit line.
    fn stop(&mut self) -> Result<(ExitStatus, Option<TraceEnd>)> {
        if self.child.try_wait()?.is_none() {
            let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
            let _ = signal::kill(pid, Signal::SIGTERM);
        }
        let status = self.child.wait()?;
        if let Some(h) = self.stdout.take() {
            let _ = h.join();
        }
        let err = self
            .stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let end = err.iter().find_map(|l| parse_trace_end(l));
        Ok((status, end))
    }
}

impl Drop for TraceProc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
            let _ = signal::kill(pid, Signal::SIGTERM);
        }
        let _ = self.child.wait();
    }
}

/// Reads `out` to its end, counting newlines into `lines`.
fn count_lines(mut out: ChildStdout, lines: &AtomicU64) {
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match out.read(&mut buf) {
            Ok(0) => return,
            Ok(k) => {
                let n = buf[..k].iter().filter(|&&b| b == b'\n').count();
                lines.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// The lines of `err`; all but the exit line are passed on to our stderr.
fn keep_stderr(err: ChildStderr) -> Vec<String> {
    let mut kept = Vec::new();
    for line in BufReader::new(err).lines().map_while(|l| l.ok()) {
        if parse_trace_end(&line).is_none() {
            eprintln!("{line}");
        }
        kept.push(line);
    }
    kept
}

fn parse_trace_end(line: &str) -> Option<TraceEnd> {
    let rest = line.strip_prefix("cctl trace: ")?;
    let w: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize, unit: &str| -> Option<u64> {
        (w.get(i + 1)?.trim_end_matches(',') == unit)
            .then(|| w[i].parse().ok())
            .flatten()
    };
    Some(TraceEnd {
        samples: num(0, "samples")?,
        flows: num(2, "flows")?,
        dropped: num(4, "ring-buffer")?,
        channel_high_water: rest
            .split_once("channel high water ")
            .and_then(|(_, n)| n.trim().parse().ok()),
    })
}

/// bpftool's JSON output.
fn bpftool(args: &[&str]) -> Result<serde_json::Value> {
    let out = Command::new("bpftool")
        .arg("-j")
        .args(args)
        .output()
        .context("running bpftool")?;
    ensure!(
        out.status.success(),
        "bpftool {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    serde_json::from_slice(&out.stdout).context("bpftool's JSON")
}

/// The id of the BPF map named `name` among those process `pid` holds (/proc/PID/fdinfo).
fn find_map(pid: u32, name: &str) -> Result<u32> {
    let mut ids = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/fdinfo"))? {
        let Ok(info) = std::fs::read_to_string(e?.path()) else {
            continue;
        };
        if let Some(id) = info
            .lines()
            .find_map(|l| l.strip_prefix("map_id:"))
            .and_then(|v| v.trim().parse::<u32>().ok())
        {
            ids.push(id);
        }
    }
    for id in ids {
        let v = bpftool(&["map", "show", "id", &id.to_string()])?;
        if v["name"].as_str() == Some(name) {
            return Ok(id);
        }
    }
    bail!("process {pid} holds no BPF map {name}")
}

/// One row of samples.csv.
#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    /// Seconds since both processes ran with the flows up.
    elapsed_s: f64,
    exporter_rss_kib: u64,
    trace_rss_kib: u64,
    /// RssAnon (heap and anonymous mappings: what a leak grows; VmRSS also counts pages of
    /// the binary and libraries as code runs for the first time), KiB.
    exporter_anon_kib: u64,
    trace_anon_kib: u64,
    /// CPU over the time since the previous row, % of one core.
    exporter_cpu_pct: f64,
    trace_cpu_pct: f64,
    /// Wall time of one GET /metrics (connect to last byte), ms; empty when it failed.
    scrape_ms: Option<f64>,
    scrape_bytes: Option<usize>,
    /// The exporter's `cctl_collector_*_total` counters (since it started).
    exporter_samples: Option<u64>,
    exporter_kernel_samples: Option<u64>,
    exporter_dropped: Option<u64>,
    /// `cctl_collector_channel_high_water_samples`: most samples ever waiting in the channel
    /// between the exporter's ring-buffer reader and its flow table (depth 65,536).
    exporter_channel_high_water: Option<u64>,
    exporter_tracked_flows: Option<u64>,
    /// `cctl_exporter_source_errors_total`, every source (0 when the family is absent).
    exporter_source_errors: Option<u64>,
    /// Lines (samples) read from the trace's pipe.
    trace_samples: u64,
    /// The trace's BPF program: samples written, and dropped with its ring buffer full.
    trace_kernel_samples: Option<u64>,
    trace_dropped: Option<u64>,
}

/// The sum of every sample of family `name` (labelled or not) in an exposition.
fn sum_values(text: &str, name: &str) -> Option<f64> {
    let mut found = None;
    for l in text.lines() {
        let Some(rest) = l.strip_prefix(name) else {
            continue;
        };
        let v = if rest.starts_with(' ') {
            rest.trim().parse::<f64>().ok()
        } else if rest.starts_with('{') {
            rest.rsplit_once('}')
                .and_then(|(_, v)| v.trim().parse::<f64>().ok())
        } else {
            None
        };
        if let Some(v) = v {
            *found.get_or_insert(0.0) += v;
        }
    }
    found
}

fn round(x: f64, decimals: i32) -> f64 {
    let p = 10f64.powi(decimals);
    (x * p).round() / p
}

/// Least-squares slope of `y` over `x`.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// Max, median and p99 (nearest rank) of `v`, with their count.
#[derive(Debug, serde::Serialize)]
struct Spread {
    window_s: f64,
    n: usize,
    max: Option<f64>,
    median: Option<f64>,
    p99: Option<f64>,
}

fn spread(window_s: f64, mut v: Vec<f64>) -> Spread {
    v.sort_by(f64::total_cmp);
    let rank = |q: f64| -> Option<f64> {
        let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1)) - 1;
        v.get(i).copied()
    };
    Spread {
        window_s,
        n: v.len(),
        max: v.last().copied(),
        median: rank(0.5),
        p99: rank(0.99),
    }
}

/// One process's memory and CPU over the run.
#[derive(Debug, serde::Serialize)]
struct Memory {
    /// VmRSS of the first row (10 s), at 1 and 5 min (the first row at or after), at the end.
    rss_first_kib: Option<u64>,
    rss_1_min_kib: Option<u64>,
    rss_5_min_kib: Option<u64>,
    rss_end_kib: Option<u64>,
    /// VmHWM at the end.
    rss_peak_kib: Option<u64>,
    /// Least-squares slope of VmRSS over the rows from `slope_from_s` on.
    rss_slope_kib_per_min: Option<f64>,
    /// RssAnon at 5 min and at the end, and its slope from `slope_from_s` on.
    anon_5_min_kib: Option<u64>,
    anon_end_kib: Option<u64>,
    anon_slope_kib_per_min: Option<f64>,
    /// Mean CPU over the rows, % of one core.
    cpu_pct_mean: Option<f64>,
    /// Samples taken in per second, first row to last.
    samples_per_s: Option<f64>,
}

fn memory(
    rows: &[Row],
    rss: impl Fn(&Row) -> u64,
    anon: impl Fn(&Row) -> u64,
    cpu: impl Fn(&Row) -> f64,
    samples: impl Fn(&Row) -> Option<u64>,
    from_s: f64,
    peak: Option<u64>,
) -> Memory {
    let at = |f: &dyn Fn(&Row) -> u64, s: f64| rows.iter().find(|r| r.elapsed_s >= s - 0.5).map(f);
    let after_of = |f: &dyn Fn(&Row) -> u64| -> Vec<(f64, f64)> {
        rows.iter()
            .filter(|r| r.elapsed_s >= from_s - 0.5)
            .map(|r| (r.elapsed_s / 60.0, f(r) as f64))
            .collect()
    };
    let after = after_of(&rss);
    let anon_after = after_of(&anon);
    let rate = match (rows.first(), rows.last()) {
        (Some(a), Some(b)) if b.elapsed_s > a.elapsed_s => match (samples(a), samples(b)) {
            (Some(x), Some(y)) => Some(round(
                y.saturating_sub(x) as f64 / (b.elapsed_s - a.elapsed_s),
                0,
            )),
            _ => None,
        },
        _ => None,
    };
    Memory {
        rss_first_kib: rows.first().map(&rss),
        rss_1_min_kib: at(&rss, 60.0),
        rss_5_min_kib: at(&rss, 300.0),
        rss_end_kib: rows.last().map(&rss),
        rss_peak_kib: peak,
        rss_slope_kib_per_min: slope(&after).map(|s| round(s, 1)),
        anon_5_min_kib: at(&anon, 300.0),
        anon_end_kib: rows.last().map(&anon),
        anon_slope_kib_per_min: slope(&anon_after).map(|s| round(s, 1)),
        cpu_pct_mean: (!rows.is_empty())
            .then(|| round(rows.iter().map(&cpu).sum::<f64>() / rows.len() as f64, 2)),
        samples_per_s: rate,
    }
}

#[derive(Debug, serde::Serialize)]
struct Drops {
    /// `cctl_collector_dropped_samples_total` at the last row (since the exporter started).
    exporter: Option<u64>,
    /// What the trace said on exit (since it started); its BPF counter if it said nothing.
    trace: Option<u64>,
    /// Their sum.
    total: Option<u64>,
}

#[derive(Debug, serde::Serialize)]
struct Summary {
    flows: usize,
    sockets_sampled: usize,
    minutes_planned: f64,
    seconds_run: f64,
    rows: usize,
    interval_s: u64,
    /// Ctrl-C, or what failed mid-run.
    interrupted: bool,
    error: Option<String>,
    /// The slopes are over the rows from here on, seconds.
    slope_from_s: f64,
    exporter: Memory,
    trace: Memory,
    scrape_ms_first: Spread,
    scrape_ms_last: Spread,
    scrape_errors: usize,
    scrape_bytes_end: Option<usize>,
    exporter_tracked_flows_end: Option<u64>,
    /// Short connections opened (and closed) beside the long flows.
    short_connections: u64,
    exporter_source_errors_end: Option<u64>,
    drops: Drops,
    /// The trace's exit line, and the samples its BPF program wrote by the last row.
    trace_end: Option<TraceEnd>,
    trace_kernel_samples_end: Option<u64>,
    trace_exit: Option<String>,
    exporter_exit: Option<String>,
    flat_threshold_kib_per_min: f64,
    memory_flat: Option<bool>,
    verdict: String,
}

/// The coming and going flows: one thread in the namespace that opens a connection every
/// [`CHURN_EVERY`], writes 64 bytes on each open one, and closes the oldest (both ends)
/// once [`CHURN_OPEN`] are open. Stopped (and its connections closed) on drop.
struct Churn {
    stop: Arc<AtomicBool>,
    opened: Arc<AtomicU64>,
    worker: Option<JoinHandle<std::io::Result<std::io::Result<()>>>>,
}

impl Churn {
    fn start() -> Result<Churn> {
        let stop = Arc::new(AtomicBool::new(false));
        let opened = Arc::new(AtomicU64::new(0));
        let (stop2, opened2) = (stop.clone(), opened.clone());
        let worker = cctl_netem::netns::spawn_in_netns(NETNS, move || -> std::io::Result<()> {
            use std::io::Write;
            let l = std::net::TcpListener::bind(("127.0.0.1", CHURN_PORT))?;
            let mut open = std::collections::VecDeque::new();
            let mut next = Instant::now();
            let mut buf = [0u8; 4096];
            while !stop2.load(Ordering::Relaxed) {
                let c = std::net::TcpStream::connect(("127.0.0.1", CHURN_PORT))?;
                let (r, _) = l.accept()?;
                r.set_nonblocking(true)?;
                open.push_back((c, r));
                opened2.fetch_add(1, Ordering::Relaxed);
                if open.len() > CHURN_OPEN {
                    open.pop_front();
                }
                for (c, r) in open.iter_mut() {
                    c.write_all(&[0x5a; 64])?;
                    while let Ok(k) = r.read(&mut buf) {
                        if k == 0 {
                            break;
                        }
                    }
                }
                pace(&mut next, CHURN_EVERY);
            }
            Ok(())
        })
        .context("starting the short connections")?;
        Ok(Churn {
            stop,
            opened,
            worker: Some(worker),
        })
    }

    fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

#[derive(Debug)]
struct Args {
    flows: usize,
    minutes: f64,
}

fn parse_args() -> Result<Args> {
    let mut args = std::env::args().skip(1);
    let flows: usize = args
        .next()
        .map_or(Ok(1000), |a| a.parse())
        .context("flows: a number")?;
    let minutes: f64 = args
        .next()
        .map_or(Ok(30.0), |a| a.parse())
        .context("minutes: a number")?;
    ensure!(args.next().is_none(), "usage: soak [flows] [minutes]");
    ensure!((1..=20_000).contains(&flows), "flows: 1 to 20000");
    ensure!(
        minutes * 60.0 >= EVERY.as_secs_f64() && minutes <= 24.0 * 60.0,
        "minutes: 1/6 (one row) to 1440"
    );
    Ok(Args { flows, minutes })
}

/// How a run ended.
enum End {
    Done,
    Interrupted,
    Failed(anyhow::Error),
}

fn main() {
    let code = match soak() {
        Ok(End::Done) => 0,
        Ok(End::Interrupted) => {
            eprintln!("soak: interrupted; flows, namespace, trace and exporter removed");
            130
        }
        Ok(End::Failed(e)) => {
            eprintln!("soak: {e:#}");
            1
        }
        Err(_) if interrupted() => {
            eprintln!("soak: interrupted during setup; everything it started removed");
            130
        }
        Err(e) => {
            eprintln!("soak: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

/// Everything the rows are read from.
struct Subjects<'a> {
    exporter: &'a mut Exporter,
    trace: &'a mut TraceProc,
    port: u16,
}

/// The running counters between rows.
struct Last {
    at: Instant,
    exporter_cpu: f64,
    trace_cpu: f64,
    exporter_samples: Option<u64>,
    trace_samples: u64,
}

impl Subjects<'_> {
    fn alive(&mut self) -> Result<()> {
        if let Some(s) = self.exporter.child.try_wait()? {
            bail!("cctl exporter exited ({s})");
        }
        if let Some(s) = self.trace.child.try_wait()? {
            bail!("cctl trace exited ({s})");
        }
        Ok(())
    }

    fn last(&self) -> Result<Last> {
        Ok(Last {
            at: Instant::now(),
            exporter_cpu: cpu_seconds(self.exporter.pid())?,
            trace_cpu: cpu_seconds(self.trace.pid())?,
            exporter_samples: None,
            trace_samples: self.trace.lines.load(Ordering::Relaxed),
        })
    }

    /// One row; `scrape_errors` counts the failed scrapes (said on stderr, not fatal).
    fn row(&mut self, t0: Instant, last: &mut Last, scrape_errors: &mut usize) -> Result<Row> {
        self.alive()?;
        let now = Instant::now();
        let (ep, tp) = (self.exporter.pid(), self.trace.pid());
        let (ec, tc) = (cpu_seconds(ep)?, cpu_seconds(tp)?);
        let (erss, trss) = (status_kib(ep, "VmRSS:")?, status_kib(tp, "VmRSS:")?);
        let (eanon, tanon) = (status_kib(ep, "RssAnon:")?, status_kib(tp, "RssAnon:")?);
        let trace_samples = self.trace.lines.load(Ordering::Relaxed);
        let kernel = self.trace.kernel_counters();
        let s0 = Instant::now();
        let body = match scrape(self.port) {
            Ok(b) => Some(b),
            Err(e) => {
                *scrape_errors += 1;
                eprintln!("soak: scrape failed: {e:#}");
                None
            }
        };
        let scrape_ms = body.as_ref().map(|_| s0.elapsed().as_secs_f64() * 1e3);
        let value = |name: &str| {
            body.as_deref()
                .and_then(|b| sample_value(b, name))
                .map(|v| v as u64)
        };
        let dt = (now - last.at).as_secs_f64();
        let row = Row {
            elapsed_s: round((now - t0).as_secs_f64(), 1),
            exporter_rss_kib: erss,
            trace_rss_kib: trss,
            exporter_anon_kib: eanon,
            trace_anon_kib: tanon,
            exporter_cpu_pct: round(100.0 * (ec - last.exporter_cpu) / dt, 2),
            trace_cpu_pct: round(100.0 * (tc - last.trace_cpu) / dt, 2),
            scrape_ms: scrape_ms.map(|m| round(m, 2)),
            scrape_bytes: body.as_ref().map(|b| b.len()),
            exporter_samples: value("cctl_collector_samples_total"),
            exporter_kernel_samples: value("cctl_collector_kernel_samples_total"),
            exporter_dropped: value("cctl_collector_dropped_samples_total"),
            exporter_channel_high_water: value("cctl_collector_channel_high_water_samples"),
            exporter_tracked_flows: value("cctl_exporter_tracked_flows"),
            // The family is left out of the exposition until a source fails.
            exporter_source_errors: body
                .as_deref()
                .map(|b| sum_values(b, "cctl_exporter_source_errors_total").unwrap_or(0.0) as u64),
            trace_samples,
            trace_kernel_samples: kernel.map(|k| k.0),
            trace_dropped: kernel.map(|k| k.1),
        };
        let rate = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => format!("{:.0}", b.saturating_sub(a) as f64 / dt),
            _ => "-".into(),
        };
        println!(
            "{:>7.0} {:>9} {:>9} {:>7.1} {:>7.1} {:>9} {:>7} {:>9} {:>8} {:>8} {:>9} {:>8}",
            row.elapsed_s,
            row.exporter_anon_kib,
            row.trace_anon_kib,
            row.exporter_cpu_pct,
            row.trace_cpu_pct,
            opt(row.scrape_ms.map(|m| format!("{m:.1}"))),
            opt(row.scrape_bytes),
            rate(last.exporter_samples, row.exporter_samples),
            opt(row.exporter_dropped),
            opt(row.exporter_channel_high_water),
            rate(Some(last.trace_samples), Some(trace_samples)),
            opt(row.trace_dropped),
        );
        *last = Last {
            at: now,
            exporter_cpu: ec,
            trace_cpu: tc,
            exporter_samples: row.exporter_samples.or(last.exporter_samples),
            trace_samples,
        };
        Ok(row)
    }
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// A span as said in the verdict and the summary: `5 min`, `1.5 min`, `15 s`.
fn span(s: f64) -> String {
    if s < 60.0 {
        format!("{} s", round(s, 1))
    } else {
        format!("{} min", round(s / 60.0, 1))
    }
}

/// Runs the soak; every guard (namespace, flows, trace, exporter) has been dropped when it
/// returns. Err: a setup error (nothing measured).
fn soak() -> Result<End> {
    let a = parse_args()?;
    ensure!(
        nix::unistd::geteuid().is_root(),
        "run as root: the collectors and the namespace need it"
    );
    catch_interrupts()?;
    let bin = release_cctl()?;
    raise_nofile(2 * a.flows as u64 + 256)?;
    let dir =
        PathBuf::from("results/soak").join(chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let csv_path = dir.join("samples.csv");
    let mut csv = csv::Writer::from_path(&csv_path)
        .with_context(|| format!("creating {}", csv_path.display()))?;

    let port = free_port()?;
    let mut exporter = Exporter::start(&bin, port)?;
    let ns = Netns::create(NETNS)?;
    let flows = Flows::start(&ns, PORT, a.flows, WRITE_MS)?;
    let churn = Churn::start()?;
    let mut trace = TraceProc::start(&bin)?;
    let planned = Duration::from_secs_f64(a.minutes * 60.0);
    println!(
        "soak: {} loopback flows ({} sockets, each sampled every 100 ms by both collectors), \
         {} min; cctl exporter pid {} on 127.0.0.1:{port}, cctl trace --json pid {}; a row every {} s \
         to {}",
        a.flows,
        2 * a.flows,
        a.minutes,
        exporter.pid(),
        trace.pid(),
        EVERY.as_secs(),
        csv_path.display()
    );
    println!(
        "{:>7} {:>9} {:>9} {:>7} {:>7} {:>9} {:>7} {:>9} {:>8} {:>8} {:>9} {:>8}",
        "time s",
        "exp anon",
        "trc anon",
        "exp CPU",
        "trc CPU",
        "scrape ms",
        "bytes",
        "exp smp/s",
        "exp drop",
        "exp ch hw",
        "trc smp/s",
        "trc drop"
    );
    let mut subjects = Subjects {
        exporter: &mut exporter,
        trace: &mut trace,
        port,
    };
    let t0 = Instant::now();
    let mut last = subjects.last()?;
    last.exporter_samples = scrape(port)
        .ok()
        .and_then(|b| sample_value(&b, "cctl_collector_samples_total"))
        .map(|v| v as u64);
    let mut rows: Vec<Row> = Vec::new();
    let mut scrape_errors = 0;
    let mut end = End::Done;
    for k in 1u32.. {
        let due = t0 + EVERY * k;
        if due > t0 + planned {
            break;
        }
        let r = sleep_until(due)
            .and_then(|()| subjects.row(t0, &mut last, &mut scrape_errors))
            .and_then(|row| {
                csv.serialize(&row)?;
                csv.flush()?;
                Ok(row)
            });
        match r {
            Ok(row) => rows.push(row),
            Err(_) if interrupted() => {
                end = End::Interrupted;
                break;
            }
            Err(e) => {
                end = End::Failed(e);
                break;
            }
        }
    }
    let peak = |pid: u32| status_kib(pid, "VmHWM:").ok();
    let (exporter_peak, trace_peak) = (peak(exporter.pid()), peak(trace.pid()));
    let (trace_status, trace_end) = match trace.stop() {
        Ok((s, e)) => (Some(s), e),
        Err(_) => (None, None),
    };
    if !matches!(exporter.child.try_wait(), Ok(Some(_))) {
        let pid = nix::unistd::Pid::from_raw(exporter.pid() as i32);
        let _ = signal::kill(pid, Signal::SIGTERM);
    }
    let exporter_status = exporter.child.wait().ok();
    let churned = churn.opened();
    drop(churn);
    drop(flows);
    drop(ns);

    let seconds_run = rows.last().map_or(0.0, |r| r.elapsed_s);
    let slope_from_s = SETTLE_S.min(planned.as_secs_f64() / 2.0);
    let window_s = WINDOW_S.min(seconds_run / 2.0);
    let half = EVERY.as_secs_f64() / 2.0;
    let first: Vec<f64> = rows
        .iter()
        .filter(|r| r.elapsed_s <= window_s + half)
        .filter_map(|r| r.scrape_ms)
        .collect();
    let last_w: Vec<f64> = rows
        .iter()
        .filter(|r| r.elapsed_s > seconds_run - window_s + half)
        .filter_map(|r| r.scrape_ms)
        .collect();
    let exporter_mem = memory(
        &rows,
        |r| r.exporter_rss_kib,
        |r| r.exporter_anon_kib,
        |r| r.exporter_cpu_pct,
        |r| r.exporter_samples,
        slope_from_s,
        exporter_peak,
    );
    let trace_mem = memory(
        &rows,
        |r| r.trace_rss_kib,
        |r| r.trace_anon_kib,
        |r| r.trace_cpu_pct,
        |r| Some(r.trace_samples),
        slope_from_s,
        trace_peak,
    );
    let end_row = rows.last();
    let exporter_drops = end_row.and_then(|r| r.exporter_dropped);
    let trace_drops = trace_end
        .map(|e| e.dropped)
        .or(end_row.and_then(|r| r.trace_dropped));
    // The heap (RssAnon) is what a leak grows; VmRSS also counts file pages and ring-buffer
    // pages touched late (both slopes are in summary.json).
    let slopes = [
        exporter_mem.anon_slope_kib_per_min,
        trace_mem.anon_slope_kib_per_min,
    ];
    let memory_flat = match slopes {
        [Some(e), Some(t)] => Some(e <= FLAT_KIB_PER_MIN && t <= FLAT_KIB_PER_MIN),
        _ => None,
    };
    let verdict = format!(
        "heap (RssAnon) flat after {}: {} (slope exporter {} KiB/min, trace {} KiB/min, threshold {FLAT_KIB_PER_MIN} KiB/min)",
        span(slope_from_s),
        match memory_flat {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unknown, fewer than 2 rows after it",
        },
        opt(slopes[0]),
        opt(slopes[1]),
    );
    let (interrupted_run, error) = match &end {
        End::Done => (false, None),
        End::Interrupted => (true, Some("interrupted".to_string())),
        End::Failed(e) => (true, Some(format!("{e:#}"))),
    };
    let summary = Summary {
        flows: a.flows,
        sockets_sampled: 2 * a.flows,
        minutes_planned: a.minutes,
        seconds_run,
        rows: rows.len(),
        interval_s: EVERY.as_secs(),
        interrupted: interrupted_run,
        error,
        slope_from_s,
        exporter: exporter_mem,
        trace: trace_mem,
        scrape_ms_first: spread(window_s, first),
        scrape_ms_last: spread(window_s, last_w),
        scrape_errors,
        scrape_bytes_end: end_row.and_then(|r| r.scrape_bytes),
        exporter_tracked_flows_end: end_row.and_then(|r| r.exporter_tracked_flows),
        short_connections: churned,
        exporter_source_errors_end: end_row.and_then(|r| r.exporter_source_errors),
        drops: Drops {
            exporter: exporter_drops,
            trace: trace_drops,
            total: exporter_drops.zip(trace_drops).map(|(e, t)| e + t),
        },
        trace_end,
        trace_kernel_samples_end: end_row.and_then(|r| r.trace_kernel_samples),
        trace_exit: trace_status.map(|s| s.to_string()),
        exporter_exit: exporter_status.map(|s| s.to_string()),
        flat_threshold_kib_per_min: FLAT_KIB_PER_MIN,
        memory_flat,
        verdict,
    };
    let path = dir.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(&summary)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    print_summary(&summary);
    println!("wrote {} and {}", csv_path.display(), path.display());
    Ok(end)
}

fn print_summary(s: &Summary) {
    let kib = |v: Option<u64>| opt(v);
    for (name, m) in [("exporter", &s.exporter), ("trace", &s.trace)] {
        println!(
            "{name:>8}: RSS {} KiB at 10 s, {} at 1 min, {} at 5 min, {} at the end (peak {}); \
             slope from {} {} KiB/min; RssAnon {} KiB at 5 min, {} at the end, slope {} KiB/min; \
             CPU {} % of one core; {} samples/s",
            kib(m.rss_first_kib),
            kib(m.rss_1_min_kib),
            kib(m.rss_5_min_kib),
            kib(m.rss_end_kib),
            kib(m.rss_peak_kib),
            span(s.slope_from_s),
            opt(m.rss_slope_kib_per_min),
            kib(m.anon_5_min_kib),
            kib(m.anon_end_kib),
            opt(m.anon_slope_kib_per_min),
            opt(m.cpu_pct_mean),
            opt(m.samples_per_s),
        );
    }
    for (name, w) in [("first", &s.scrape_ms_first), ("last", &s.scrape_ms_last)] {
        let ms = |v: Option<f64>| opt(v.map(|v| format!("{v:.1}")));
        println!(
            "  scrape, {name} {}: max {} ms, median {}, p99 {} ({} scrapes)",
            span(w.window_s),
            ms(w.max),
            ms(w.median),
            ms(w.p99),
            w.n
        );
    }
    println!(
        "   drops: exporter {}, trace {}, total {}; scrape errors {}, exporter source errors {}",
        opt(s.drops.exporter),
        opt(s.drops.trace),
        opt(s.drops.total),
        s.scrape_errors,
        opt(s.exporter_source_errors_end)
    );
    println!(
        "   flows: {} short connections came and went; the exporter tracked {} flows at the end \
         ({} long-lived sockets)",
        s.short_connections,
        opt(s.exporter_tracked_flows_end),
        s.sockets_sampled
    );
    println!("{}", s.verdict);
}
