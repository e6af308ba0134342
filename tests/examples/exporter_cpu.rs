//! Benchmark: CPU (% of one core) and memory of `cctl exporter` with N busy loopback flows at
//! the default sampling (each flow every 100 ms), and how long a scrape of /metrics takes.
//!
//! Run as root: `make bench-exporter` or
//! `cargo build --release -p cctl && cargo run --release -p cctl-tests --example exporter_cpu -- [flows] [seconds]`
//! (defaults 1000 flows, 30 s). It starts the release `cctl exporter` next to this example
//! (`target/release/cctl`), opens N loopback connections in a private network namespace
//! (`cctl-tx-cpu`; senders reno, receivers cubic, 64 bytes written every 20 ms on each, so
//! both ends are sampled: 2N sockets), scrapes once to let the exporter see every flow,
//! waits 5 s, then reads the exporter's utime+stime from /proc/<pid>/stat over `seconds`
//! without scrapes; then times 10 scrapes (the CPU they cost is reported apart). Prints the
//! figures and writes them as one JSON line to results/exporter-cpu/<timestamp>.json. The
//! namespace and the exporter are removed on exit and on error.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cctl_netem::netns::spawn_in_netns;
use socket2::{Domain, Socket, Type};

const NETNS: &str = "cctl-tx-cpu";
const PORT: u16 = 5480;
const SENDER_CC: &str = "reno";
const RECEIVER_CC: &str = "cubic";
const WRITE_BYTES: usize = 64;
const WRITE_MS: u64 = 20;
const READ_MS: u64 = 100;
const WORKERS: usize = 2;
const WARMUP: Duration = Duration::from_secs(5);
const SCRAPES: usize = 10;

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

/// N loopback connections kept busy by [`WORKERS`] threads; closed on drop.
struct Flows {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
}

impl Flows {
    fn start(n: usize) -> Result<Flows> {
        let pairs = spawn_in_netns(
            NETNS,
            move || -> std::io::Result<Vec<(TcpStream, TcpStream)>> {
                let l = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                l.set_reuse_address(true)?;
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
        let mut chunks: Vec<Vec<(TcpStream, TcpStream)>> =
            (0..WORKERS).map(|_| Vec::new()).collect();
        for (i, p) in pairs.into_iter().enumerate() {
            chunks[i % WORKERS].push(p);
        }
        let workers = chunks
            .into_iter()
            .map(|mut mine| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let data = [0x5au8; WRITE_BYTES];
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut next = Instant::now();
                    let mut last_read = Instant::now();
                    while !stop.load(Ordering::Relaxed) {
                        for (s, _) in mine.iter_mut() {
                            match s.write(&data) {
                                Ok(_) => {}
                                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                                Err(_) => {}
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
                        next += Duration::from_millis(WRITE_MS);
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        } else {
                            next = now;
                        }
                    }
                })
            })
            .collect();
        Ok(Flows { stop, workers })
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

/// Raises RLIMIT_NOFILE's soft limit to `fds` (up to the hard limit).
fn raise_nofile(fds: u64) -> Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read/write the struct passed by reference.
    unsafe {
        ensure!(
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0,
            "getrlimit"
        );
        if lim.rlim_cur >= fds {
            return Ok(());
        }
        ensure!(
            lim.rlim_max >= fds,
            "{fds} descriptors needed, hard limit {}",
            lim.rlim_max
        );
        lim.rlim_cur = fds;
        ensure!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0, "setrlimit");
    }
    Ok(())
}

/// utime + stime of process `pid` (all threads), seconds.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (did the exporter exit?)"))?;
    let rest = &stat[stat.rfind(')').context("malformed stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks as f64 / hz)
}

/// A `Vm*:` line of /proc/<pid>/status, KiB.
fn status_kib(pid: u32, key: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {key} in /proc/{pid}/status"))
}

/// GET /metrics: the body.
fn scrape(port: u16) -> Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = String::new();
    s.read_to_string(&mut raw)?;
    let (head, body) = raw.split_once("\r\n\r\n").context("no HTTP header")?;
    ensure!(head.starts_with("HTTP/1.1 200"), "scrape: {head}");
    Ok(body.to_string())
}

/// The value of the unlabelled sample `name` in an exposition.
fn sample_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// The exporter process, stopped with SIGTERM on drop.
struct Exporter(Child);

impl Drop for Exporter {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.0.wait();
    }
}

#[derive(Debug, serde::Serialize)]
struct Figures {
    flows: usize,
    sockets_sampled: usize,
    seconds: f64,
    /// Exporter CPU over the run without scrapes, % of one core.
    cpu_percent: f64,
    /// Samples the exporter took in per second over the run.
    samples_per_s: f64,
    /// Ring-buffer drops over the run.
    dropped: f64,
    rss_kib: u64,
    rss_peak_kib: u64,
    /// Wall time of one scrape (GET /metrics to the last byte), ms: min, median, max.
    scrape_ms: [f64; 3],
    /// Exporter CPU per scrape, ms.
    scrape_cpu_ms: f64,
    /// Size of the exposition, bytes; series in it.
    scrape_bytes: usize,
    series: usize,
}

fn run() -> Result<Figures> {
    let mut args = std::env::args().skip(1);
    let flows: usize = args
        .next()
        .map_or(Ok(1000), |a| a.parse())
        .context("flows: a number")?;
    let seconds: u64 = args
        .next()
        .map_or(Ok(30), |a| a.parse())
        .context("seconds: a number")?;
    ensure!((1..=20_000).contains(&flows), "flows: 1 to 20000");
    ensure!((1..=3600).contains(&seconds), "seconds: 1 to 3600");
    ensure!(
        nix::unistd::geteuid().is_root(),
        "run as root (the exporter attaches BPF)"
    );
    let bin: PathBuf = std::env::current_exe()?
        .parent()
        .and_then(|p| p.parent())
        .context("target dir")?
        .join("cctl");
    ensure!(
        bin.exists(),
        "{} missing: cargo build --release -p cctl",
        bin.display()
    );
    raise_nofile(2 * flows as u64 + 256)?;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = Command::new(&bin)
        .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting cctl exporter")?;
    let exporter = Exporter(child);
    let pid = exporter.0.id();
    let t0 = Instant::now();
    while scrape(port).is_err() {
        if t0.elapsed() > Duration::from_secs(20) {
            bail!("the exporter did not answer within 20 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ns = Netns::create()?;
    let _flows = Flows::start(flows)?;
    std::thread::sleep(WARMUP);
    let first = scrape(port)?;
    let c0 = cpu_seconds(pid)?;
    let s0 = sample_value(&first, "cctl_collector_samples_total").unwrap_or(0.0);
    let d0 = sample_value(&first, "cctl_collector_dropped_samples_total").unwrap_or(0.0);
    let m0 = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let elapsed = m0.elapsed().as_secs_f64();
    let c1 = cpu_seconds(pid)?;
    let mut times = Vec::new();
    let mut last = String::new();
    for _ in 0..SCRAPES {
        let t = Instant::now();
        last = scrape(port)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let c2 = cpu_seconds(pid)?;
    let s1 = sample_value(&last, "cctl_collector_samples_total").unwrap_or(0.0);
    let d1 = sample_value(&last, "cctl_collector_dropped_samples_total").unwrap_or(0.0);
    times.sort_by(f64::total_cmp);
    let series = last
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .count();
    Ok(Figures {
        flows,
        sockets_sampled: 2 * flows,
        seconds: elapsed,
        cpu_percent: 100.0 * (c1 - c0) / elapsed,
        samples_per_s: (s1 - s0) / (elapsed + times.iter().sum::<f64>() / 1e3),
        dropped: d1 - d0,
        rss_kib: status_kib(pid, "VmRSS:")?,
        rss_peak_kib: status_kib(pid, "VmHWM:")?,
        scrape_ms: [times[0], times[times.len() / 2], times[times.len() - 1]],
        scrape_cpu_ms: (c2 - c1) * 1e3 / SCRAPES as f64,
        scrape_bytes: last.len(),
        series,
    })
}

fn main() {
    match run() {
        Ok(f) => {
            println!(
                "cctl exporter, {} loopback flows ({} sockets sampled every 100 ms): CPU {:.1} % of one core \
                 over {:.0} s ({:.0} samples/s, {} drops), RSS {} KiB (peak {} KiB); scrape {:.1}/{:.1}/{:.1} ms \
                 min/median/max, {:.1} ms CPU each, {} bytes, {} series",
                f.flows,
                f.sockets_sampled,
                f.cpu_percent,
                f.seconds,
                f.samples_per_s,
                f.dropped,
                f.rss_kib,
                f.rss_peak_kib,
                f.scrape_ms[0],
                f.scrape_ms[1],
                f.scrape_ms[2],
                f.scrape_cpu_ms,
                f.scrape_bytes,
                f.series
            );
            let dir = PathBuf::from("results/exporter-cpu");
            let stamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            if std::fs::create_dir_all(&dir).is_ok() {
                let path = dir.join(format!("{stamp}.json"));
                if std::fs::write(&path, serde_json::to_string(&f).unwrap() + "\n").is_ok() {
                    println!("written to {}", path.display());
                }
            }
        }
        Err(e) => {
            eprintln!("exporter_cpu: {e:#}");
            std::process::exit(1);
        }
    }
}
