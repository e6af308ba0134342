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

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cctl_netem::netns::spawn_in_netns;
use cctl_tests::tmux::Tmux;
use nix::sys::signal::{self, SigHandler, Signal};
use socket2::{Domain, Socket, Type};

/// The flows' namespace (removed at start if a crashed run left it).
const NETNS: &str = "cctl-tb-cpu";
/// The receivers' port on 127.0.0.1.
const PORT: u16 = 5470;
/// The senders' congestion control (what `--cc` selects) and the receivers'.
const SENDER_CC: &str = "reno";
const RECEIVER_CC: &str = "cubic";
/// Bytes per write.
const WRITE_BYTES: usize = 64;
/// How often the receivers are drained, in milliseconds.
const READ_MS: u64 = 100;
/// Threads driving the sockets.
const WORKERS: usize = 2;
/// Time between starting cctl and measuring, in seconds.
const WARMUP_S: u64 = 5;
/// How long to wait for the dashboard to show all flows, in seconds.
const SHOW_TIMEOUT_S: u64 = 60;
/// Terminal size of the dashboard, columns x lines.
const WIDTH: u16 = 200;
const HEIGHT: u16 = 50;

/// Set by SIGINT/SIGTERM; every wait checks it.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Sleeps `d` in small steps; fails once Ctrl-C was pressed.
fn sleep(d: Duration) -> Result<()> {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        ensure!(!INTERRUPTED.load(Ordering::SeqCst), "interrupted");
        std::thread::sleep((d - t0.elapsed()).min(Duration::from_millis(50)));
    }
    ensure!(!INTERRUPTED.load(Ordering::SeqCst), "interrupted");
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
        write_ms: 20,
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

/// The namespace, deleted on drop.
struct Netns;

impl Netns {
    fn create() -> Result<Netns> {
        cctl_netem::testbed::remove_leftovers(NETNS)?;
        ip(&["netns", "add", NETNS])?;
        let ns = Netns;
        ip(&["-n", NETNS, "link", "set", "lo", "up"])?;
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "delete", NETNS]);
    }
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("running ip")?;
    ensure!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(())
}

/// N loopback connections in [`NETNS`] kept busy by [`WORKERS`] threads; stopped and
/// closed on drop.
struct Flows {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    /// Write errors other than a full buffer, over all flows.
    errors: Arc<AtomicU64>,
}

impl Flows {
    fn start(n: usize, write_ms: u64) -> Result<Flows> {
        let pairs = spawn_in_netns(
            NETNS,
            move || -> std::io::Result<Vec<(TcpStream, TcpStream)>> {
                let l = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                l.set_reuse_address(true)?;
                // Accepted sockets inherit it: the receiving ends are not selected by --cc reno.
                l.set_tcp_congestion(RECEIVER_CC.as_bytes())?;
                l.bind(&SocketAddr::from(([127, 0, 0, 1], PORT)).into())?;
                l.listen(1024)?;
                let l = TcpListener::from(l);
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                    s.set_tcp_congestion(SENDER_CC.as_bytes())?;
                    s.connect(&SocketAddr::from(([127, 0, 0, 1], PORT)).into())?;
                    let (r, _) = l.accept()?;
                    let s = TcpStream::from(s);
                    s.set_nodelay(true)?;
                    s.set_nonblocking(true)?;
                    r.set_nonblocking(true)?;
                    pairs.push((s, r));
                }
                Ok(pairs)
            },
        )?
        .join()
        .map_err(|_| anyhow::anyhow!("the connecting thread panicked"))??
        .with_context(|| format!("opening {n} loopback connections"))?;

        let stop = Arc::new(AtomicBool::new(false));
        let errors = Arc::new(AtomicU64::new(0));
        let mut chunks: Vec<Vec<(TcpStream, TcpStream)>> =
            (0..WORKERS).map(|_| Vec::new()).collect();
        for (i, p) in pairs.into_iter().enumerate() {
            chunks[i % WORKERS].push(p);
        }
        let workers = chunks
            .into_iter()
            .map(|mut mine| {
                let (stop, errors) = (stop.clone(), errors.clone());
                std::thread::spawn(move || {
                    let period = Duration::from_millis(write_ms);
                    let data = [0x5au8; WRITE_BYTES];
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut next = Instant::now();
                    let mut last_read = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        for (s, _) in mine.iter_mut() {
                            match s.write(&data) {
                                Ok(_) => {}
                                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                                Err(_) => {
                                    errors.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        if last_read.elapsed() >= Duration::from_millis(READ_MS) {
                            last_read = Instant::now();
                            for (_, r) in mine.iter_mut() {
                                while let Ok(k) = r.read(&mut buf) {
                                    if k == 0 {
                                        break;
                                    }
                                }
                            }
                        }
                        next += period;
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        } else {
                            next = now;
                        }
                    }
                    // Dropping `mine` closes the sockets.
                })
            })
            .collect();
        Ok(Flows {
            stop,
            workers,
            errors,
        })
    }
}

impl Drop for Flows {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

/// Raises RLIMIT_NOFILE's soft limit to what `fds` descriptors need (up to the hard limit).
fn raise_nofile(fds: u64) -> Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct passed by reference.
    unsafe {
        ensure!(
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0,
            "getrlimit: {}",
            std::io::Error::last_os_error()
        );
        if lim.rlim_cur >= fds {
            return Ok(());
        }
        ensure!(
            lim.rlim_max >= fds,
            "{fds} file descriptors needed, the hard limit is {} (raise it: ulimit -Hn)",
            lim.rlim_max
        );
        lim.rlim_cur = fds;
        ensure!(
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0,
            "setrlimit: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

/// CPU time of process `pid` (all threads), utime + stime, in seconds.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (did cctl exit?)"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').context("malformed stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat(5), i.e. 11 and 12 after the name.
    let ticks: u64 = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks as f64 / hz)
}

/// A `Vm*:` line of /proc/<pid>/status, in KiB.
fn status_kib(pid: u32, key: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {key} in /proc/{pid}/status"))
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

fn cctl_bin() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let bin = exe.parent().unwrap().parent().unwrap().join("cctl");
    ensure!(
        bin.exists(),
        "{} missing: run `cargo build --release -p cctl` first (`make bench-top` does)",
        bin.display()
    );
    Ok(bin)
}

fn run(n: usize, a: &Args) -> Result<Figures> {
    let _ns = Netns::create()?;
    let flows = Flows::start(n, a.write_ms)?;
    let bin = cctl_bin()?;
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
    let generator_errors = flows.errors.load(Ordering::Relaxed);
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
        Err(_) if INTERRUPTED.load(Ordering::SeqCst) => {
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
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { signal::signal(sig, SigHandler::Handler(on_signal)) }?;
    }
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
