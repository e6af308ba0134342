//! Benchmark: how many samples per second the collector delivers, and how many the
//! ring buffer drops, with N loopback bulk flows and a given per-flow interval.
//!
//! Run as root: `cargo run --release -p cctl-loader --example collector_rate -- [flows] [interval_us] [secs]`
//! (defaults 4 flows, 1000 us, 5 s). Prints one line of figures.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cctl_loader::collector::{Trace, TraceConfig};

const PORT: u16 = 5399;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flows: usize = args.first().map(|s| s.parse()).transpose()?.unwrap_or(4);
    let interval_us: u64 = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
    let secs: u64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(5);

    let mut trace = Trace::start(TraceConfig {
        interval: Duration::from_micros(interval_us),
        port: Some(PORT),
        cc: None,
    })?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", PORT))?;
    let stop = Arc::new(AtomicBool::new(false));
    let bytes = Arc::new(AtomicU64::new(0));
    let rx_bytes = bytes.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().take(flows) {
            let mut s = s.unwrap();
            let b = rx_bytes.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    b.fetch_add(n as u64, Ordering::Relaxed);
                }
            });
        }
    });
    let senders: Vec<_> = (0..flows)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", PORT)).unwrap();
                let chunk = vec![1u8; 1 << 16];
                while !stop.load(Ordering::Relaxed) {
                    if s.write_all(&chunk).is_err() {
                        break;
                    }
                }
            })
        })
        .collect();

    let t0 = Instant::now();
    let mut received = 0u64;
    while t0.elapsed() < Duration::from_secs(secs) {
        if trace.recv_timeout(Duration::from_millis(50)).is_some() {
            received += 1;
        }
        received += trace.drain().len() as u64;
    }
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        let _ = s.join();
    }
    received += trace.drain().len() as u64;
    let stats = trace.finish()?;
    let el = stats.duration.as_secs_f64();
    println!(
        "collector_rate: {flows} flows, interval {interval_us} us, {el:.1} s: {:.0} samples/s delivered \
         ({} samples, {} flows seen), kernel emitted {}, ring-buffer drops {} ({:.3} %), \
         loopback goodput {:.1} Gbit/s",
        received as f64 / el,
        received,
        stats.flows,
        stats.kernel_emitted,
        stats.dropped,
        100.0 * stats.dropped as f64 / (stats.kernel_emitted + stats.dropped).max(1) as f64,
        bytes.load(Ordering::Relaxed) as f64 * 8.0 / el / 1e9
    );
    Ok(())
}
