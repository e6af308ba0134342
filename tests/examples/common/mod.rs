//! What the collector benchmarks share (exporter_cpu.rs, soak.rs, top_cpu.rs): busy
//! loopback flows in a private network namespace, the release `cctl` and `cctl exporter` as a
//! child process, /metrics scrapes, and CPU time and memory of a process from /proc. Each
//! example compiles its own copy and uses part of it.
#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use cctl_netem::netns::spawn_in_netns;
use socket2::{Domain, Socket, Type};

/// The senders' congestion control and the receivers'.
pub const SENDER_CC: &str = "reno";
pub const RECEIVER_CC: &str = "cubic";
/// Bytes per write, and how often each sender writes by default, in milliseconds.
const WRITE_BYTES: usize = 64;
pub const WRITE_MS: u64 = 20;
/// How often the receivers are drained, in milliseconds.
const READ_MS: u64 = 100;
/// Threads driving the sockets.
const WORKERS: usize = 2;
/// How long the exporter may take to answer its first scrape.
const EXPORTER_START: Duration = Duration::from_secs(20);

/// Set by SIGINT/SIGTERM once [`catch_interrupts`] ran; every wait checks it.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Makes SIGINT and SIGTERM set [`interrupted`] instead of killing the process, so that
/// the guards (namespace, flows, child processes) are dropped.
pub fn catch_interrupts() -> Result<()> {
    use nix::sys::signal::{signal, SigHandler, Signal};
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { signal(sig, SigHandler::Handler(on_signal)) }?;
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived since [`catch_interrupts`].
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// Sleeps until the next tick of a loop paced every `period` (`next` is the tick due);
/// a loop that fell behind starts its ticks again from now.
pub fn pace(next: &mut Instant, period: Duration) {
    *next += period;
    let now = Instant::now();
    if *next > now {
        std::thread::sleep(*next - now);
    } else {
        *next = now;
    }
}

/// A network namespace with loopback up, deleted on drop.
pub struct Netns(&'static str);

impl Netns {
    /// Creates `name` (after removing namespaces a crashed run left under that name).
    pub fn create(name: &'static str) -> Result<Netns> {
        cctl_netem::testbed::remove_leftovers(name)?;
        ip(&["netns", "add", name])?;
        let ns = Netns(name);
        ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "delete", self.0]);
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

/// N loopback connections to 127.0.0.1:`port` in a namespace (senders reno, receivers cubic,
/// 64 bytes written every `write_ms` on each, receivers drained every 100 ms, so both ends
/// are sampled), kept busy by [`WORKERS`] threads; closed on drop.
pub struct Flows {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    /// Write errors other than a full buffer, over all flows.
    errors: Arc<AtomicU64>,
}

impl Flows {
    /// Opens `n` connections in namespace `netns` and starts writing every `write_ms`.
    pub fn start(netns: &Netns, port: u16, n: usize, write_ms: u64) -> Result<Flows> {
        let pairs = spawn_in_netns(
            netns.0,
            move || -> std::io::Result<Vec<(TcpStream, TcpStream)>> {
                let l = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                l.set_reuse_address(true)?;
                l.set_tcp_congestion(RECEIVER_CC.as_bytes())?;
                l.bind(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
                l.listen(1024)?;
                let l = TcpListener::from(l);
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                    s.set_tcp_congestion(SENDER_CC.as_bytes())?;
                    s.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
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
                        pace(&mut next, period);
                    }
                })
            })
            .collect();
        Ok(Flows {
            stop,
            workers,
            errors,
        })
    }

    /// Write errors other than a full buffer so far, over all flows.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
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
pub fn raise_nofile(fds: u64) -> Result<()> {
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
pub fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (did the process exit?)"))?;
    let rest = &stat[stat.rfind(')').context("malformed stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>()? + f[12].parse::<u64>()?;
    // SAFETY: sysconf has no memory effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks as f64 / hz)
}

/// A `Vm*:` line of /proc/<pid>/status, KiB.
pub fn status_kib(pid: u32, key: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {key} in /proc/{pid}/status"))
}

/// GET /metrics: the body.
pub fn scrape(port: u16) -> Result<String> {
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
pub fn sample_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// The release `cctl` next to this example (`target/release/cctl`).
pub fn release_cctl() -> Result<PathBuf> {
    let bin = std::env::current_exe()?
        .parent()
        .and_then(|p| p.parent())
        .context("target dir")?
        .join("cctl");
    ensure!(
        bin.exists(),
        "{} missing: cargo build --release -p cctl",
        bin.display()
    );
    Ok(bin)
}

/// A free TCP port on 127.0.0.1 (free when asked).
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The `cctl exporter` process, stopped with SIGTERM on drop (unless already reaped).
pub struct Exporter {
    /// The process (its stdout goes to /dev/null, its stderr to ours).
    pub child: Child,
}

impl Exporter {
    /// Starts `bin exporter --listen 127.0.0.1:port` and waits until /metrics answers.
    pub fn start(bin: &std::path::Path, port: u16) -> Result<Exporter> {
        let child = Command::new(bin)
            .args(["exporter", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting cctl exporter")?;
        let mut exporter = Exporter { child };
        let t0 = Instant::now();
        while scrape(port).is_err() {
            if let Some(status) = exporter.child.try_wait()? {
                bail!("cctl exporter exited ({status}) before answering");
            }
            if t0.elapsed() > EXPORTER_START {
                bail!(
                    "the exporter did not answer within {} s",
                    EXPORTER_START.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(exporter)
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        // A child already waited for keeps its status: no signal to a reused pid.
        if matches!(self.child.try_wait(), Ok(None)) {
            let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        let _ = self.child.wait();
    }
}
