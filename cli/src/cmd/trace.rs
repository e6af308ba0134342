//! `cctl trace`: stream per-flow samples from the BPF collector.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result};
use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::sample::Sample;
use cctl_loader::upgrade::VersionCache;

use crate::cmd::args::{real, whole, MAX_DURATION_S, MAX_INTERVAL_MS};
use crate::exit::{self, usage};
use crate::out::stdout_error;

/// Arguments of `cctl trace`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Samples come from the tcp_probe tracepoint, so any TCP flow is traced \
(native cubic too). Each flow is sampled at most once per --interval-ms, plus on every CA \
state change. cwnd/ssthresh in segments, RTTs in usec, time in CLOCK_MONOTONIC ns. \
cctl's congestion controls show their loaded version (`bpf_htcp@v2`; `version` in --json).\n\
Example: cctl trace --cc bpf_htcp --port 5201 --duration-s 10 --csv > htcp.csv"
)]
pub struct Args {
    /// Only flows using this congestion control.
    #[arg(long)]
    cc: Option<String>,
    /// Only flows with this local or remote port; allowed 1 to 65535.
    #[arg(long, value_parser = crate::cmd::args::port_parser())]
    port: Option<u16>,
    /// Only flows of this network namespace: a name from `ip netns list` or a path
    /// (/proc/<pid>/ns/net); samples carry each flow's namespace cookie (`netns_cookie`).
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// Minimum interval between samples of one flow, ms; allowed 1 to 60000.
    #[arg(long, default_value_t = 100, value_parser = whole::<u64>(1, Some(MAX_INTERVAL_MS), "ms"))]
    interval_ms: u64,
    /// Stop after this many seconds (default: until Ctrl-C); allowed more than 0 up to
    /// 86400 (a day).
    #[arg(long, value_parser = real(0.0, true, MAX_DURATION_S, "s"))]
    duration_s: Option<f64>,
    /// One JSON object per sample per line.
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// CSV with a header line.
    #[arg(long)]
    csv: bool,
    /// Instead of samples, one close record per TCP socket when it is destroyed: its
    /// whole life (bytes and segments each way, retransmissions, min/max cwnd,
    /// min/mean/max srtt, time in each CA state, busy/rwnd-/sndbuf-limited time, CE
    /// marks, the algorithm with its version and parameters), RFC 4898-style.
    #[arg(long)]
    close_records: bool,
}

/// A sample with the version of its congestion control, for `--json`.
#[derive(serde::Serialize)]
struct Versioned<'a> {
    /// The layout's version, [`cctl_loader::JSON_FORMAT`].
    format: u32,
    #[serde(flatten)]
    sample: &'a Sample,
    /// Version of a cctl-loaded congestion control (`cctl list`), else null.
    version: Option<u32>,
}

enum Output {
    Text(std::io::StdoutLock<'static>),
    Json(std::io::StdoutLock<'static>),
    Csv(Box<csv::Writer<std::io::StdoutLock<'static>>>),
}

fn fmt_opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

impl Output {
    fn write(&mut self, s: &Sample, version: Option<u32>, t0: u64) -> Result<()> {
        match self {
            Output::Json(w) => writeln!(
                w,
                "{}",
                serde_json::to_string(&Versioned {
                    format: cctl_loader::JSON_FORMAT,
                    sample: s,
                    version
                })?
            )?,
            Output::Csv(w) => w.serialize(s)?,
            Output::Text(w) => {
                let t = s.ts_ns.saturating_sub(t0) as f64 / 1e9;
                let mut line = format!(
                    "{t:9.3} {:>21} > {:<21} {:<10} {:<8} cwnd {:>5} ssth {:>5} srtt {:>7} rttvar {:>6} minrtt {:>6} infl {:>5} lost {:>3} retr {:>6}",
                    format!("{}:{}", s.saddr, s.sport),
                    format!("{}:{}", s.daddr, s.dport),
                    match version {
                        Some(v) => format!("{}@v{v}", s.cc),
                        None => s.cc.to_string(),
                    },
                    format!("{:?}", s.ca_state),
                    s.cwnd,
                    s.ssthresh_text(),
                    s.srtt_us,
                    s.rttvar_us,
                    s.min_rtt_us,
                    s.in_flight,
                    s.lost_out,
                    s.total_retrans,
                );
                if s.algo.is_some() {
                    line += &format!(
                        " | Δ {:.3}s Tmin {} Tmax {} backoffs {}",
                        s.delta_us.unwrap_or(0) as f64 / 1e6,
                        fmt_opt(s.tmin_us),
                        fmt_opt(s.tmax_us),
                        fmt_opt(s.backoffs)
                    );
                }
                if !s.vars.is_empty() {
                    line += &format!(" | {}", s.vars);
                }
                writeln!(w, "{line}")?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        match self {
            Output::Text(w) | Output::Json(w) => w.flush()?,
            Output::Csv(w) => w.flush()?,
        }
        Ok(())
    }
}

/// Runs `cctl trace`.
pub fn run(args: Args) -> Result<i32> {
    if args.close_records {
        if args.cc.is_some() {
            usage!("--cc with --close-records: close records cover every congestion control; filter the output by its `cc` field");
        }
        let cfg = cctl_loader::closerec::CloseConfig {
            port: args.port,
            netns_cookie: crate::cmd::filter::netns_cookie(args.netns.as_deref())?,
        };
        let format = if args.json {
            crate::cmd::close_records::Format::Json
        } else if args.csv {
            crate::cmd::close_records::Format::Csv
        } else {
            crate::cmd::close_records::Format::Text
        };
        return crate::cmd::close_records::run(
            cfg,
            format,
            args.duration_s.map(Duration::from_secs_f64),
        );
    }
    let cfg = TraceConfig {
        interval: Duration::from_millis(args.interval_ms),
        port: args.port,
        cc: args.cc.clone(),
        netns_cookie: crate::cmd::filter::netns_cookie(args.netns.as_deref())?,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut trace = Trace::start(cfg).context("starting the collector")?;
        let stdout = std::io::stdout().lock();
        let mut out = if args.json {
            Output::Json(stdout)
        } else if args.csv {
            Output::Csv(Box::new(csv::Writer::from_writer(stdout)))
        } else {
            Output::Text(stdout)
        };
        let deadline = args.duration_s.map(Duration::from_secs_f64);
        let sleep = tokio::time::sleep(deadline.unwrap_or(Duration::from_secs(u32::MAX as u64)));
        tokio::pin!(sleep);
        let mut interrupted = false;
        let mut t0 = None;
        let mut versions = VersionCache::new();
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            tokio::select! {
                s = trace.next_sample() => match s {
                    Some(s) => {
                        let t0 = *t0.get_or_insert(s.ts_ns);
                        let v = versions.of(&s);
                        // A closed pipe (`| head`) ends the trace: main exits quietly.
                        out.write(&s, v, t0).map_err(stdout_error)?;
                    }
                    None => break,
                },
                _ = &mut sleep => break,
                _ = tokio::signal::ctrl_c() => { interrupted = true; break; }
                _ = sigterm.recv() => { interrupted = true; break; }
            }
        }
        for s in trace.drain() {
            let t0 = *t0.get_or_insert(s.ts_ns);
            let v = versions.of(&s);
            out.write(&s, v, t0).map_err(stdout_error)?;
        }
        out.flush().map_err(stdout_error)?;
        let stats = trace.finish()?;
        let secs = stats.duration.as_secs_f64().max(1e-9);
        eprintln!(
            "cctl trace: {} samples, {} flows, {} ring-buffer drops in {:.1} s ({:.0} samples/s); \
             channel high water {}",
            stats.samples,
            stats.flows,
            stats.dropped,
            secs,
            stats.samples as f64 / secs,
            stats.channel_high_water
        );
        Ok(if interrupted {
            exit::INTERRUPTED
        } else {
            exit::OK
        })
    })
}
