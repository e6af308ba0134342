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
//! namespace and the exporter are removed on exit and on error. The flows, the exporter and
//! the /proc readings are in common/mod.rs, shared with the soak (soak.rs).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};

mod common;
use common::{
    cpu_seconds, free_port, raise_nofile, release_cctl, sample_value, scrape, status_kib, Exporter,
    Flows, Netns, WRITE_MS,
};

const NETNS: &str = "cctl-tx-cpu";
const PORT: u16 = 5480;
const WARMUP: Duration = Duration::from_secs(5);
const SCRAPES: usize = 10;

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
    let bin = release_cctl()?;
    raise_nofile(2 * flows as u64 + 256)?;
    let port = free_port()?;
    let exporter = Exporter::start(&bin, port)?;
    let pid = exporter.pid();
    let ns = Netns::create(NETNS)?;
    let _flows = Flows::start(&ns, PORT, flows, WRITE_MS)?;
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
