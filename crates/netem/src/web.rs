//! Web cross traffic ([P0] T0.0): request/response sessions across the bottleneck in both
//! directions. Each session waits an exponentially distributed think time, opens a TCP
//! connection (HTTP/1.0 style: one page per connection), asks for a page whose size is
//! Pareto-distributed, reads it to the end and closes.
//!
//! Half the sessions have their client in the receiver namespace and their server in the
//! web host's sender namespace, so the pages cross the bottleneck with the bulk flows; the
//! other half go the other way. The wire format is 8 bytes (page size, little endian) one
//! way and the page the other.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::{rngs::StdRng, Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Pareto};
use serde::{Deserialize, Serialize};
use socket2::{Domain, Protocol, Socket, Type};

use crate::netns::spawn_in_netns;
use crate::testbed::Testbed;

/// Port of the web servers (on both sides).
pub const WEB_PORT: u16 = 8081;
/// [P0]'s workload: think time mean, s.
pub const THINK_MEAN_S: f64 = 1.0;
/// Pareto shape of page sizes ([P0]).
pub const PARETO_SHAPE: f64 = 1.2;
/// [CHOICE] Pareto minimum page size, bytes: 50 sessions at 1 request/s give 1.5 % of
/// 250 Mbit/s with a mean page of 6 × this (benchmarks.md T0.0).
pub const PARETO_MIN_BYTES: f64 = 1_600.0;
/// Largest page served, bytes (the Pareto tail is cut here so one page cannot last the run).
pub const MAX_PAGE_BYTES: u64 = 50_000_000;

/// How the web sessions behave.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WebSpec {
    /// Number of sessions (half in each direction; an odd one goes forward).
    pub sessions: u32,
    /// Congestion control of the web connections (`TCP_CONGESTION`).
    pub cc: String,
    /// Mean think time between requests of a session, s.
    pub think_mean_s: f64,
    /// Pareto shape of page sizes.
    pub pareto_shape: f64,
    /// Pareto minimum page size, bytes.
    pub pareto_min_bytes: f64,
    /// Seed of the think times and page sizes.
    pub seed: u64,
    /// Index of the testbed sender namespace that hosts the web side opposite the receiver.
    pub sender: usize,
}

impl WebSpec {
    /// [P0]'s T0.0 workload (exponential think time, mean 1 s; Pareto pages, shape 1.2).
    pub fn p0(sessions: u32, cc: &str, sender: usize, seed: u64) -> WebSpec {
        WebSpec {
            sessions,
            cc: cc.into(),
            think_mean_s: THINK_MEAN_S,
            pareto_shape: PARETO_SHAPE,
            pareto_min_bytes: PARETO_MIN_BYTES,
            seed,
            sender,
        }
    }

    /// [P3]'s SURGE-like heavy clients: the same page sizes, with think times short enough
    /// for about 500 kbit/s per client (mean page × 8 / 500 kbit/s).
    pub fn surge(sessions: u32, cc: &str, sender: usize, seed: u64) -> WebSpec {
        let mut w = WebSpec::p0(sessions, cc, sender, seed);
        w.think_mean_s = w.mean_page_bytes() * 8.0 / 500e3;
        w
    }

    /// Mean page size of the Pareto distribution, bytes (shape > 1).
    pub fn mean_page_bytes(&self) -> f64 {
        self.pareto_shape * self.pareto_min_bytes / (self.pareto_shape - 1.0)
    }
}

/// What the web sessions did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WebStats {
    /// Pages completed.
    pub pages: u64,
    /// Page bytes received by clients on the receiver side (crossed the bottleneck), bytes.
    pub bytes_forward: u64,
    /// Page bytes received by clients on the web host's side, bytes.
    pub bytes_reverse: u64,
    /// Requests that failed (connect, reset, short page).
    pub errors: u64,
    /// How long the sessions ran, s.
    pub duration_s: f64,
}

impl WebStats {
    /// Realised web load across the bottleneck (forward direction), bit/s.
    pub fn forward_bps(&self) -> f64 {
        if self.duration_s > 0.0 {
            self.bytes_forward as f64 * 8.0 / self.duration_s
        } else {
            0.0
        }
    }
}

/// Running web sessions; [`WebTraffic::finish`] stops them.
pub struct WebTraffic {
    stop: Arc<AtomicBool>,
    stop_servers: Arc<AtomicBool>,
    servers: Vec<JoinHandle<io::Result<()>>>,
    threads: Vec<JoinHandle<io::Result<()>>>,
    counters: Arc<Counters>,
    started: Instant,
}

#[derive(Default)]
struct Counters {
    pages: AtomicU64,
    fwd: AtomicU64,
    rev: AtomicU64,
    errors: AtomicU64,
}

fn server(listener: TcpListener, stop: Arc<AtomicBool>) {
    let page = vec![0x77u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut s, _)) => {
                let page = page.clone();
                let _ = thread::Builder::new()
                    .name("web page".into())
                    .spawn(move || {
                        let _ = s.set_nonblocking(false);
                        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                        let mut hdr = [0u8; 8];
                        if s.read_exact(&mut hdr).is_err() {
                            return;
                        }
                        let mut left = u64::from_le_bytes(hdr).min(MAX_PAGE_BYTES);
                        let _ = s.set_write_timeout(Some(Duration::from_secs(30)));
                        while left > 0 {
                            let n = page.len().min(left as usize);
                            if s.write_all(&page[..n]).is_err() {
                                return;
                            }
                            left -= n as u64;
                        }
                    });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(20))
            }
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn fetch(dst: SocketAddrV4, cc: &str, size: u64) -> io::Result<u64> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_tcp_congestion(cc.as_bytes())?;
    socket.connect_timeout(&SocketAddr::V4(dst).into(), Duration::from_secs(3))?;
    let mut s: TcpStream = socket.into();
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(&size.to_le_bytes())?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut got = 0u64;
    loop {
        match s.read(&mut buf)? {
            0 => break,
            n => got += n as u64,
        }
    }
    if got < size {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short page"));
    }
    Ok(got)
}

/// Starts the servers and `spec.sessions` sessions on `bed` (the receiver namespace and
/// sender `spec.sender`). Errors if a namespace or listener cannot be set up.
pub fn start(bed: &Testbed, spec: &WebSpec) -> Result<WebTraffic> {
    let stop = Arc::new(AtomicBool::new(false));
    let stop_servers = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let web_ns = bed.sender_ns_at(spec.sender).to_string();
    let rcv_ns = bed.receiver_ns().to_string();
    let web_addr = bed.sender_addr_at(spec.sender);
    let rcv_addr = bed.receiver_addr();
    let mut threads = Vec::new();
    let mut servers = Vec::new();
    for (ns, addr) in [(&web_ns, web_addr), (&rcv_ns, rcv_addr)] {
        let bind = SocketAddrV4::new(addr, WEB_PORT);
        let listener = spawn_in_netns(ns, move || -> io::Result<TcpListener> {
            let l = TcpListener::bind(bind)?;
            l.set_nonblocking(true)?;
            Ok(l)
        })?
        .join()
        .map_err(|_| anyhow::anyhow!("web listener thread panicked"))???;
        let st = stop_servers.clone();
        servers.push(spawn_in_netns(ns, move || server(listener, st))?);
    }
    let think = Exp::new(1.0 / spec.think_mean_s.max(1e-3)).context("think-time distribution")?;
    let pages =
        Pareto::new(spec.pareto_min_bytes, spec.pareto_shape).context("page-size distribution")?;
    for i in 0..spec.sessions {
        // Even sessions fetch across the bottleneck (client behind it).
        let forward = i % 2 == 0;
        let (client_ns, dst) = if forward {
            (&rcv_ns, SocketAddrV4::new(web_addr, WEB_PORT))
        } else {
            (&web_ns, SocketAddrV4::new(rcv_addr, WEB_PORT))
        };
        let (st, c, cc) = (stop.clone(), counters.clone(), spec.cc.clone());
        let mut rng =
            StdRng::seed_from_u64(spec.seed.wrapping_mul(1_000_003).wrapping_add(u64::from(i)));
        threads.push(spawn_in_netns(client_ns, move || {
            // Sessions start at a random point of their first think time.
            let mut wait = Duration::from_secs_f64(think.sample(&mut rng) * rng.gen::<f64>());
            loop {
                let until = Instant::now() + wait;
                while Instant::now() < until {
                    if st.load(Ordering::Relaxed) {
                        return;
                    }
                    thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
                }
                let size = (pages.sample(&mut rng) as u64).min(MAX_PAGE_BYTES);
                match fetch(dst, &cc, size) {
                    Ok(n) => {
                        c.pages.fetch_add(1, Ordering::Relaxed);
                        if forward {
                            c.fwd.fetch_add(n, Ordering::Relaxed);
                        } else {
                            c.rev.fetch_add(n, Ordering::Relaxed);
                        }
                    }
                    Err(_) => {
                        c.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                wait = Duration::from_secs_f64(think.sample(&mut rng));
            }
        })?);
    }
    Ok(WebTraffic {
        stop,
        stop_servers,
        servers,
        threads,
        counters,
        started: Instant::now(),
    })
}

impl WebTraffic {
    /// Stops the sessions (a page in progress is finished or times out), then the
    /// servers, and returns what the sessions did.
    pub fn finish(self) -> WebStats {
        self.stop.store(true, Ordering::Relaxed);
        let duration_s = self.started.elapsed().as_secs_f64();
        for t in self.threads {
            let _ = t.join();
        }
        self.stop_servers.store(true, Ordering::Relaxed);
        for t in self.servers {
            let _ = t.join();
        }
        WebStats {
            pages: self.counters.pages.load(Ordering::Relaxed),
            bytes_forward: self.counters.fwd.load(Ordering::Relaxed),
            bytes_reverse: self.counters.rev.load(Ordering::Relaxed),
            errors: self.counters.errors.load(Ordering::Relaxed),
            duration_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::{AccessSpec, PathSpec};

    #[test]
    fn p0_pages_average_six_times_their_minimum_and_surge_clients_ask_500_kbit_s() {
        let w = WebSpec::p0(10, "reno", 1, 1);
        assert!((w.mean_page_bytes() - 9_600.0).abs() < 1e-6);
        let s = WebSpec::surge(10, "reno", 1, 1);
        assert!((s.mean_page_bytes() * 8.0 / s.think_mean_s - 500e3).abs() < 1.0);
    }

    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn web_sessions_fetch_pages_in_both_directions_across_the_bottleneck() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test builds namespaces and needs root, as CI has"
        );
        let mut spec = PathSpec {
            subnet_octet: 205,
            ..PathSpec::new("cctl-bw", 20, 100)
        };
        spec.senders.push(AccessSpec::default());
        let bed = Testbed::create(&spec).expect("testbed");
        let mut web = WebSpec::p0(6, "reno", 1, 7);
        web.think_mean_s = 0.2;
        let t = start(&bed, &web).expect("web starts");
        thread::sleep(Duration::from_secs(4));
        let stats = t.finish();
        bed.destroy().unwrap();
        assert!(
            stats.pages >= 20,
            "only {} pages in 4 s: {stats:?}",
            stats.pages
        );
        assert!(
            stats.bytes_forward > 0 && stats.bytes_reverse > 0,
            "{stats:?}"
        );
        assert_eq!(stats.errors, 0, "{stats:?}");
    }
}
