//! `cctl trace --close-records`: one record per TCP socket when it is destroyed
//! ([`cctl_loader::closerec`]), as text, JSON lines or CSV, until the duration ends or
//! Ctrl-C.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cctl_loader::closerec::{CloseConfig, CloseRecord, CloseRecords};
use cctl_loader::upgrade::VersionCache;

use crate::exit;
use crate::out::stdout_error;

/// How the records are written.
pub enum Format {
    /// One line per record for people.
    Text,
    /// One JSON object per line.
    Json,
    /// CSV with a header line.
    Csv,
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn text(r: &CloseRecord) -> String {
    format!(
        "{:>21} > {:<21} {:<10}{} dur {} s  acked {} B  rcvd {} B  out {} in {} retr {}  cwnd {}..{}  srtt {}/{}/{} us  busy {} rwnd-lim {} sndbuf-lim {} us  CE {}",
        format!("{}:{}", r.saddr, r.sport),
        format!("{}:{}", r.daddr, r.dport),
        r.cc,
        r.version.map_or(String::new(), |v| format!("@v{v}")),
        r.duration_s.map_or("-".into(), |d| format!("{d:.3}")),
        r.bytes_acked,
        r.bytes_received,
        r.segs_out,
        r.segs_in,
        r.total_retrans,
        opt(r.min_cwnd),
        opt(r.max_cwnd),
        opt(r.min_srtt_us),
        opt(r.mean_srtt_us),
        opt(r.max_srtt_us),
        r.busy_us,
        r.rwnd_limited_us,
        r.sndbuf_limited_us,
        r.delivered_ce
    )
}

/// Writes close records of the sockets `cfg` selects to stdout in `format` for
/// `duration` (until Ctrl-C or SIGTERM without one); returns the exit code.
pub fn run(cfg: CloseConfig, format: Format, duration: Option<Duration>) -> Result<i32> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }
    let recs = CloseRecords::start(cfg).context("starting the close records")?;
    let mut versions = VersionCache::new();
    let stdout = std::io::stdout();
    let mut csv = matches!(format, Format::Csv).then(|| csv::Writer::from_writer(stdout.lock()));
    let mut n = 0u64;
    let mut write = |mut r: CloseRecord| -> Result<()> {
        r.annotate(&mut versions);
        n += 1;
        match format {
            Format::Csv => csv
                .as_mut()
                .expect("a CSV writer")
                .serialize(&r)
                .map_err(|e| stdout_error(e.into())),
            Format::Json => writeln!(stdout.lock(), "{}", serde_json::to_string(&r)?)
                .map_err(|e| stdout_error(e.into())),
            Format::Text => {
                writeln!(stdout.lock(), "{}", text(&r)).map_err(|e| stdout_error(e.into()))
            }
        }
    };
    let end = duration.map(|d| Instant::now() + d);
    while !stop.load(Ordering::SeqCst) && end.is_none_or(|e| Instant::now() < e) {
        if let Some(r) = recs.recv_timeout(Duration::from_millis(100)) {
            write(r)?;
        }
    }
    for r in recs.drain() {
        write(r)?;
    }
    if let Some(w) = csv.as_mut() {
        w.flush().map_err(|e| stdout_error(e.into()))?;
    }
    let stats = recs.finish()?;
    eprintln!(
        "cctl trace: {n} close records, {} ring-buffer drops",
        stats.dropped
    );
    Ok(if stop.load(Ordering::SeqCst) {
        exit::INTERRUPTED
    } else {
        exit::OK
    })
}
