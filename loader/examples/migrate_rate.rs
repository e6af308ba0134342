//! Benchmark: the aggregate throughput of 50 busy flows per 100 ms bin around a migration.
//! (The time to move 1,000 and 10,000 idle flows is part `migrate` of `cctl bench perf`,
//! crates/bench/src/perf/migrate.rs; `make bench-migrate` runs both.)
//!
//! Run as root: `make bench-migrate` or
//! `cargo run --release -p cctl-loader --example migrate_rate -- [--json]`.
//! Everything runs in the namespace `cctl-ma-bench` over lo (created and removed here);
//! flows move between cubic and `ma_htcp` (bpf_htcp registered under a private name).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cctl_loader::migrate::{self, MigrateRequest, SocketFilter};
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use socket2::{Domain, Socket, Type};

const NS: &str = "cctl-ma-bench";
const CC: &str = "ma_htcp";

struct Netns;

impl Netns {
    fn create() -> Result<Netns> {
        // A crashed earlier run's namespace.
        if std::path::Path::new("/run/netns").join(NS).exists() {
            let _ = Command::new("ip").args(["netns", "delete", NS]).status();
        }
        for args in [
            vec!["netns", "add", NS],
            vec!["-n", NS, "link", "set", "lo", "up"],
        ] {
            if !Command::new("ip").args(&args).status()?.success() {
                bail!("ip {} failed", args.join(" "));
            }
        }
        Ok(Netns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "delete", NS]).status();
    }
}

/// Runs `f` on a thread inside the namespace.
fn in_ns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let file = std::fs::File::open(format!("/run/netns/{NS}"))?;
    std::thread::spawn(move || {
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
        f()
    })
    .join()
    .map_err(|_| anyhow::anyhow!("namespace thread panicked"))
}

fn pairs(n: usize, port: u16) -> Result<Vec<TcpStream>> {
    in_ns(move || -> std::io::Result<Vec<TcpStream>> {
        let l = TcpListener::bind(("127.0.0.1", port))?;
        let mut v = Vec::with_capacity(2 * n);
        for _ in 0..n {
            let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
            s.set_tcp_congestion(b"cubic")?;
            s.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())?;
            v.push(TcpStream::from(s));
            v.push(l.accept()?.0);
        }
        Ok(v)
    })?
    .context("opening connections")
}

fn req(from: &str, to: &str, port: Option<u16>) -> MigrateRequest {
    MigrateRequest {
        from: from.into(),
        to: to.into(),
        filter: SocketFilter {
            netns: Some(NS.into()),
            port,
            ..Default::default()
        },
        dry_run: false,
        allow_restricted: true,
    }
}

fn main() -> Result<()> {
    let json = std::env::args().skip(1).any(|a| a == "--json");
    if registry::list_loaded()?.iter().any(|l| l.name == CC) {
        registry::unload(CC)?;
    }
    let rec = registry::load(
        "htcp",
        &LoadOptions {
            name: Some(CC.into()),
            owned: true,
            ..Default::default()
        },
    )?;
    let _guard = LoadGuard::new(rec.name);
    let _ns = Netns::create()?;

    // Throughput dip: 50 bulk flows over lo, migrated at t = 1.5 s.
    const FLOWS: usize = 50;
    let port = 5423;
    // A 2 Gbit/s tbf on lo keeps 50 bulk flows from taking every CPU cycle of a small box.
    let st = Command::new("tc")
        .args([
            "-n", NS, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "2gbit", "burst", "2mb",
            "latency", "20ms",
        ])
        .status()?;
    if !st.success() {
        bail!("tc qdisc add tbf on lo failed");
    }
    let conns = pairs(FLOWS, port)?;
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for (i, mut s) in conns.into_iter().enumerate() {
        let (stop, bytes) = (stop.clone(), bytes.clone());
        threads.push(std::thread::spawn(move || {
            let mut buf = vec![7u8; 64 * 1024];
            if i % 2 == 0 {
                while !stop.load(Ordering::Relaxed) {
                    if s.write_all(&buf).is_err() {
                        break;
                    }
                }
                let _ = s.shutdown(std::net::Shutdown::Write);
            } else {
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    bytes.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
        }));
    }
    let t0 = Instant::now();
    let mut bins = Vec::new();
    let mut last = 0u64;
    // The migration runs on its own thread so that the 100 ms bins keep their pace.
    let migrator = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let t = Instant::now();
        let r = migrate::migrate(&req("cubic", CC, Some(port)));
        (t - t0, t.elapsed(), r)
    });
    for k in 1..=30 {
        let due = t0 + Duration::from_millis(100 * k);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let now = bytes.load(Ordering::Relaxed);
        bins.push((now - last) as f64 * 8.0 / 0.1 / 1e9);
        last = now;
    }
    let (at, took, r) = migrator.join().expect("migration thread");
    let moved = r?.moved;
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        let _ = t.join();
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    if json {
        println!(
            "{}",
            serde_json::json!({"kind": "throughput_dip", "flows": FLOWS, "bin_ms": 100,
                "migrate_at_ms": at.as_millis() as u64, "migrate_ms": took.as_secs_f64() * 1e3,
                "moved": moved, "gbit_per_bin": bins})
        );
    } else {
        println!();
        println!(
            "Throughput dip: {FLOWS} bulk loopback flows (tbf 2 Gbit/s), migrated cubic -> {CC} at {} ms ({moved} moved in {:.1} ms); Gbit/s per 100 ms bin:",
            at.as_millis(),
            took.as_secs_f64() * 1e3
        );
        for (k, b) in bins.iter().enumerate() {
            let mark =
                if (k + 1) * 100 > at.as_millis() as usize && k * 100 <= at.as_millis() as usize {
                    " <- migrate"
                } else {
                    ""
                };
            println!("  {:>5} ms {b:>7.2}{mark}", (k + 1) * 100);
        }
        println!(
            "  mean before {:.2}, bin of the migration and next {:.2}, last 1 s {:.2} Gbit/s",
            mean(&bins[5..15]),
            mean(&bins[15..17]),
            mean(&bins[20..30])
        );
    }
    Ok(())
}
