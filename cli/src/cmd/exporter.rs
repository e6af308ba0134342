//! `cctl exporter`: serve Prometheus metrics of the host's TCP congestion control until
//! SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use cctl_loader::bpfstats::StatsGuard;
use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::{kernel, migrate};

use crate::cmd::args::{whole, MAX_INTERVAL_MS};
use crate::exit::{self, usage};
use crate::exporter::{self, server, Exporter, Options};

/// Where the exporter listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9977";

/// Largest `--per-flow-max`: more per-flow series than this belong in `cctl trace`.
pub const PER_FLOW_CAP: usize = 10_000;

/// Arguments of `cctl exporter`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Serves OpenMetrics text at http://ADDR:PORT/metrics (GET only; `/` links to \
it; every other path is 404, every other method 405). Metrics are aggregates labelled by \
congestion control (`cc`): established sockets (socket census of every network namespace), \
histograms of cwnd (segments), srtt and min RTT (seconds), acked bytes, retransmitted \
segments, entries into CWR/Recovery/Loss, backoffs and β of cctl's algorithms, the loaded \
versions (`cc_version`) and live parameters of cctl's algorithms, the collector's samples and \
drops. Aggregates have no namespace label (one series per congestion control, whatever the \
namespace); per-flow series, only with --per-flow-max, carry the flow's `netns_cookie` (as in \
the collector's samples). docs/operations/exporter.md lists every metric and label.\n\
Stops on SIGTERM or SIGINT (exit 0), detaching the collector.\n\
Example: sudo cctl exporter --listen 0.0.0.0:9977 --bpf-stats"
)]
pub struct Args {
    /// Address and port to serve /metrics on (ADDR:PORT; [ADDR]:PORT for IPv6).
    #[arg(long, default_value = DEFAULT_LISTEN, value_name = "ADDR:PORT")]
    listen: String,
    /// Minimum interval between two samples of one flow, ms (the collector's rate limit;
    /// histograms get one observation per sample); allowed 1 to 60000.
    #[arg(long, default_value_t = 100, value_parser = whole::<u64>(1, Some(MAX_INTERVAL_MS), "ms"))]
    interval_ms: u64,
    /// Also serve per-flow series (cwnd, RTTs, bytes, retransmissions labelled by socket
    /// cookie and addresses) for at most N flows, the busiest first. Off by default: per-flow
    /// labels multiply the series a Prometheus server stores. Allowed 1 to 10000.
    #[arg(long, value_name = "N", value_parser = whole::<usize>(1, Some(PER_FLOW_CAP as i128), "flows (leave it out for no per-flow series)"))]
    per_flow_max: Option<usize>,
    /// Turn on the kernel's BPF run-time statistics while running and serve the run time of
    /// each callback of cctl's algorithms and of the collector (costs two clock reads per
    /// BPF program run, for every BPF program of the host).
    #[arg(long)]
    bpf_stats: bool,
    /// Only flows of this network namespace: a name from `ip netns list` or a path
    /// (/proc/<pid>/ns/net); samples carry each flow's namespace cookie (`netns_cookie`).
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
}

/// Parses `--listen`: an `ADDR:PORT` with a port from 1 to 65535.
pub fn parse_listen(s: &str) -> Result<SocketAddr> {
    let addr: SocketAddr = match s.parse() {
        Ok(a) => a,
        Err(_) => usage!(
            "--listen '{s}': not an ADDR:PORT; expected an IP address and a port such as \
             127.0.0.1:9977, 0.0.0.0:9977 or [::1]:9977 (host names are not resolved)"
        ),
    };
    if addr.port() == 0 {
        usage!(
            "--listen '{s}': port 0; give a port from 1 to 65535, e.g. 127.0.0.1:9977 (the \
             default, local scrapes only) or 0.0.0.0:9977 (every interface)"
        );
    }
    Ok(addr)
}

/// Runs `cctl exporter`.
pub fn run(args: Args) -> Result<i32> {
    let addr = parse_listen(&args.listen)?;
    // The port first: a busy port is reported before anything is loaded into the kernel.
    let listener = server::bind(addr)?;
    kernel::require_privileges("running the exporter (it attaches the collector)")?;
    kernel::require_btf()?;
    let stats = if args.bpf_stats {
        Some(StatsGuard::enable().context("--bpf-stats")?)
    } else {
        None
    };
    let trace = Trace::start(TraceConfig {
        interval: Duration::from_millis(args.interval_ms),
        port: None,
        cc: None,
        netns_cookie: crate::cmd::filter::netns_cookie(args.netns.as_deref())?,
    })
    .context("starting the collector")?;
    let exporter = Arc::new(Exporter::new(Options {
        bpf_stats: args.bpf_stats,
        per_flow_max: args.per_flow_max,
    }));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(4)
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let pump = tokio::spawn(exporter::pump(trace, exporter.clone(), stop_rx.clone()));
        let mut sigterm =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut sigint =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        eprintln!(
            "cctl exporter: serving http://{addr}/metrics (collector attached, sampling each flow every {} ms)",
            args.interval_ms
        );
        let mut server_stop = stop_rx.clone();
        let mut server = tokio::spawn(server::serve(listener, exporter.clone(), async move {
            let _ = server_stop.wait_for(|s| *s).await;
        }));
        // A server that ends by itself (an error) stops the exporter too.
        let ended = tokio::select! {
            _ = sigterm.recv() => None,
            _ = sigint.recv() => None,
            r = &mut server => Some(r),
        };
        match &ended {
            None => eprintln!("cctl exporter: signal received: stopping"),
            Some(_) => eprintln!("cctl exporter: the HTTP server ended: stopping"),
        }
        let _ = stop_tx.send(true);
        let served = match ended {
            Some(r) => r,
            None => server.await,
        }
        .context("the HTTP server task")?;
        let stats = pump.await.context("the collector task")?.context("the collector")?;
        served.context("serving HTTP")?;
        anyhow::Ok(stats)
    });
    // Detach what the scrapes loaded (the census iterator) and end the statistics.
    migrate::release_iterator();
    drop(stats);
    let stats = result?;
    eprintln!(
        "cctl exporter: stopped; collector detached after {} samples, {} ring-buffer drops",
        stats.samples, stats.dropped
    );
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_need_an_ip_and_a_nonzero_port() {
        assert_eq!(
            parse_listen("0.0.0.0:9977").unwrap(),
            "0.0.0.0:9977".parse().unwrap()
        );
        assert!(parse_listen("[::1]:9977").is_ok());
        assert!(parse_listen(DEFAULT_LISTEN).is_ok());
        for bad in [
            "localhost:9977",
            "9977",
            "1.2.3.4",
            "1.2.3.4:99999",
            "1.2.3.4:0",
            "",
        ] {
            let e = parse_listen(bad).unwrap_err();
            assert!(e.downcast_ref::<exit::Usage>().is_some(), "{bad}: {e}");
        }
    }
}
