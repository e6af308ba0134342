//! Benchmark: CPU (% of one core) and memory of `cctl top` showing N live loopback flows at
//! a 10 Hz refresh, each flow sampled by the collector every 100 ms (10 samples/s per flow).
//!
//! Run as root: `make bench-top` or
//! `cargo build --release -p cctl && cargo run --release -p cctl-tests --example top_cpu -- [flows] [seconds] [--against top|trace] [--write-ms MS]`
//! (defaults 1000 flows, 30 s, top, 20 ms; a second run with 100 flows follows unless
//! flows is 100). It runs the release `cctl` next to this example (`target/release/cctl`)
//! in a 200x50 tmux session (`--against trace`: `cctl trace --json` into a pipe instead),
//! waits 5 s, then reads the cctl process's utime+stime from /proc/<pid>/stat over
//! `seconds`. Prints one line per run and writes them as JSON lines to
//! results/top-cpu/<timestamp>.json.
//!
//! The flows live in a private network namespace (`cctl-tb-cpu`) on loopback: N client
//! sockets running reno write 64 bytes every `write-ms` to N accepted sockets running cubic,
//! so that `--port 5470 --cc reno` selects exactly the N senders (the receiving ends are
//! flows to the kernel too). Two threads drive all sockets, nonblocking. The namespace,
//! the sockets and the tmux session are removed on exit, on error and on Ctrl-C.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cctl_tests::tmux::Tmux;

mod common;
use common::{
    catch_interrupts, cpu_seconds, interrupted, raise_nofile, release_cctl, status_kib, Flows,
    Netns, SENDER_CC, WRITE_MS,
};

/// The flows' namespace (removed at start if a crashed run left it).
const NETNS: &str = "cctl-tb-cpu";
/// The receivers' port on 127.0.0.1.
const PORT: u16 = 5470;
/// Time between starting cctl and measuring, in seconds.
const WARMUP_S: u64 = 5;
/// How long to wait for the dashboard to show all flows, in seconds.
const SHOW_TIMEOUT_S: u64 = 60;
/// Terminal size of the dashboard, columns x lines.
const WIDTH: u16 = 200;
const HEIGHT: u16 = 50;

/// Sleeps `d` in small steps; fails once Ctrl-C was pressed.
fn sleep(d: Duration) -> Result<()> {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        ensure!(!interrupted(), "interrupted");
        std::thread::sleep((d - t0.elapsed()).min(Duration::from_millis(50)));
    }
    ensure!(!interrupted(), "interrupted");
    Ok(())
}

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Against {
    /// `cctl top` in tmux.
    Top,
    /// `cctl trace --json` into a pipe (the collector alone, for comparison).
    Trace,
}

/// Command-line arguments.
struct Args {
    flows: usize,
    seconds: u64,
    against: Against,
    write_ms: u64,
}

fn parse_args() -> Result<Args> {
    const USAGE: &str = "usage: top_cpu [flows] [seconds] [--against top|trace] [--write-ms MS]";
    let mut a = Args {
        flows: 1000,
        seconds: 30,
        against: Against::Top,
        write_ms: WRITE_MS,
    };
    let mut positional = 0;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--against" => {
                a.against = match it.next().as_deref() {
                    Some("top") => Against::Top,
                    Some("trace") => Against::Trace,
                    other => bail!(
                        "--against {}: give `top` or `trace`\n{USAGE}",
                        other.unwrap_or("(nothing)")
                    ),
                }
            }
            "--write-ms" => {
                let v = it.next().unwrap_or_default();
                a.write_ms = v
                    .parse()
                    .ok()
                    .filter(|ms| (1..=1000).contains(ms))
                    .with_context(|| format!("--write-ms {v:?}: give 1 to 1000 ms\n{USAGE}"))?;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ if positional == 0 => {
                a.flows = arg
                    .parse()
                    .ok()
                    .filter(|n| (1..=20_000).contains(n))
                    .with_context(|| format!("flows {arg:?}: give 1 to 20000\n{USAGE}"))?;
                positional += 1;
            }
            _ if positional == 1 => {
                a.seconds = arg
                    .parse()
                    .ok()
                    .filter(|s| (1..=3600).contains(s))
                    .with_context(|| format!("seconds {arg:?}: give 1 to 3600\n{USAGE}"))?;
                positional += 1;
            }
            _ => bail!("unexpected argument {arg:?}\n{USAGE}"),
        }
    }
    Ok(a)
}

/// The `N flows` (or `N/M flows`) of the dashboard's title line.
fn flows_shown(screen: &str) -> Option<u64> {
    let title = screen.lines().next()?;
    let before = title[..title.find(" flows")?].split_whitespace().last()?;
    before.split('/').next()?.parse().ok()
}

/// The number after `key` in the footer (`samples/s 10012`).
fn footer_figure(screen: &str, key: &str) -> Option<f64> {
    screen.lines().rev().find_map(|l| {
        let at = l.find(key)? + key.len();
        l[at..]
            .split_whitespace()
            .next()?
            .trim_end_matches('%')
            .parse()
            .ok()
    })
}

/// What one run measured.
#[derive(Debug, serde::Serialize)]
struct Figures {
    against: Against,
    flows: usize,
    write_ms: u64,
    refresh_hz: u32,
    seconds: f64,
    /// Flows on the dashboard's title at the end (top only).
    flows_shown: Option<u64>,
    /// Mean of the footer's samples/s over the run (top), or samples read per second (trace).
    samples_per_s: Option<f64>,
    /// The footer's drops at the end (top only).
    drops: Option<f64>,
    /// The cctl process's CPU time over the run, in % of one core.
    cpu_percent: f64,
    /// Its resident memory at the end and its peak, in KiB.
    rss_kib: u64,
    rss_peak_kib: u64,
    /// Write errors of the flow generator (0 expected).
    generator_errors: u64,
}

/// The `cctl` measured: a tmux session or a child process with a line counter.
enum Subject {
    Top(Tmux),
    Trace { child: Child, lines: Arc<AtomicU64> },
}

impl Drop for Subject {
    fn drop(&mut self) {
        if let Subject::Trace { child, .. } = self {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn run(n: usize, a: &Args) -> Result<Figures> {
    let ns = Netns::create(NETNS)?;
    let flows = Flows::start(&ns, PORT, n, a.write_ms)?;
    let bin = release_cctl()?;
    let bin = bin.to_str().context("non-UTF-8 path")?;
    let port = PORT.to_string();
    let filter = ["--port", port.as_str(), "--cc", SENDER_CC];
    let (subject, pid) = match a.against {
        Against::Top => {
            let mut cmd = vec![bin, "top", "--refresh-hz", "10", "--interval-ms", "100"];
            cmd.extend_from_slice(&filter);
            let t = Tmux::start_reporting("cctl-tb-cpu-", &cmd, WIDTH, HEIGHT)?;
            let pid = t.command_pid()?;
            (Subject::Top(t), pid)
        }
        Against::Trace => {
            let mut child = Command::new(bin)
                .args(["trace", "--json", "--interval-ms", "100"])
                .args(filter)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()?;
            let out = child.stdout.take().unwrap();
            let lines = Arc::new(AtomicU64::new(0));
            let counter = lines.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::with_capacity(1 << 20, out);
                let mut line = Vec::new();
                while matches!(r.read_until(b'\n', &mut line), Ok(k) if k > 0) {
                    counter.fetch_add(1, Ordering::Relaxed);
                    line.clear();
                }
            });
            let pid = child.id();
            (Subject::Trace { child, lines }, pid)
        }
    };
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    ensure!(comm.trim() == "cctl", "process {pid} is {comm:?}, not cctl");

    // Wait until the dashboard shows every flow, then let it settle.
    if let Subject::Top(t) = &subject {
        let t0 = Instant::now();
        loop {
            let screen = t.screen()?;
            if flows_shown(&screen) == Some(n as u64) {
                break;
            }
            if let Some(code) = t.reported_status()? {
                bail!(
                    "cctl top exited with status {code}:\n{}",
                    t.transcript(50)?.trim_end()
                );
            }
            if t0.elapsed() > Duration::from_secs(SHOW_TIMEOUT_S) {
                bail!(
                    "cctl top did not show {n} flows within {SHOW_TIMEOUT_S} s; screen:\n{}",
                    screen.trim_end()
                );
            }
            sleep(Duration::from_millis(200))?;
        }
    }
    sleep(Duration::from_secs(WARMUP_S))?;

    let (c0, t0) = (cpu_seconds(pid)?, Instant::now());
    let l0 = match &subject {
        Subject::Trace { lines, .. } => lines.load(Ordering::Relaxed),
        Subject::Top(_) => 0,
    };
    let mut rates = Vec::new();
    let mut last_screen = String::new();
    while t0.elapsed() < Duration::from_secs(a.seconds) {
        sleep(Duration::from_secs(1).min(Duration::from_secs(a.seconds) - t0.elapsed()))?;
        if let Subject::Top(t) = &subject {
            last_screen = t.screen()?;
            if let Some(r) = footer_figure(&last_screen, "samples/s") {
                rates.push(r);
            }
            if let Some(status) = t.reported_status()? {
                bail!("cctl top exited (status {status}) while measured");
            }
        }
    }
    let (c1, secs) = (cpu_seconds(pid)?, t0.elapsed().as_secs_f64());
    let rss_kib = status_kib(pid, "VmRSS:")?;
    let rss_peak_kib = status_kib(pid, "VmHWM:")?;
    let samples_per_s = match &subject {
        Subject::Trace { lines, .. } => Some((lines.load(Ordering::Relaxed) - l0) as f64 / secs),
        Subject::Top(_) => {
            (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64)
        }
    };
    let generator_errors = flows.errors();
    drop(subject);
    drop(flows);
    Ok(Figures {
        against: a.against,
        flows: n,
        write_ms: a.write_ms,
        refresh_hz: 10,
        seconds: secs,
        flows_shown: flows_shown(&last_screen),
        samples_per_s,
        drops: footer_figure(&last_screen, "drops"),
        cpu_percent: (c1 - c0) / secs * 100.0,
        rss_kib,
        rss_peak_kib,
        generator_errors,
    })
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

fn main() {
    let code = match bench() {
        Ok(()) => 0,
        Err(_) if interrupted() => {
            eprintln!("top_cpu: interrupted; flows, namespace and tmux session removed");
            130
        }
        Err(e) => {
            eprintln!("top_cpu: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

/// Runs the benchmark; every guard (namespace, sockets, tmux) has been dropped when it returns.
fn bench() -> Result<()> {
    let a = parse_args()?;
    ensure!(
        nix::unistd::geteuid().is_root(),
        "run as root: the collector and the namespace need it"
    );
    catch_interrupts()?;
    let mut sizes = vec![a.flows];
    if a.flows != 100 {
        sizes.push(100);
    }
    raise_nofile(2 * *sizes.iter().max().unwrap() as u64 + 256)?;
    let dir = PathBuf::from("results/top-cpu");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join(format!(
        "{}.json",
        chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
    ));
    let mut out = std::fs::File::create(&path)?;
    println!(
        "{:>6} {:>5} {:>6} {:>10} {:>6} {:>7} {:>9} {:>8}",
        "cctl", "flows", "shown", "samples/s", "drops", "cpu %", "RSS KiB", "peak KiB"
    );
    for n in sizes {
        let f = run(n, &a)?;
        println!(
            "{:>6} {:>5} {:>6} {:>10} {:>6} {:>7.2} {:>9} {:>8}",
            format!("{:?}", f.against).to_lowercase(),
            f.flows,
            opt(f.flows_shown),
            opt(f.samples_per_s.map(|r| format!("{r:.0}"))),
            opt(f.drops),
            f.cpu_percent,
            f.rss_kib,
            f.rss_peak_kib
        );
        if f.generator_errors > 0 {
            eprintln!(
                "top_cpu: the flow generator saw {} write errors",
                f.generator_errors
            );
        }
        writeln!(out, "{}", serde_json::to_string(&f)?)?;
    }
    println!("wrote {}", path.display());
    Ok(())
}
