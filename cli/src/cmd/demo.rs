//! `cctl demo`: the live collector demo on the running kernel — two bulk TCP flows with one of cctl's
//! algorithms through a 20 Mbit/s tbf bottleneck between two network namespaces,
//! traced, written to CSV and summarised per flow; everything is removed after.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use cctl_loader::sample::Sample;
use cctl_loader::summary::{summarize, FlowSummary};
use cctl_loader::{catalogue, kernel};
use cctl_netem::flows::{run_bulk_flows, FlowResult, FlowSpec};
use cctl_netem::testbed::{remove_leftovers, PathSpec, Testbed};

use crate::cmd::args::{real, whole};
use crate::exit::{self, usage};
use crate::out::outln;

/// The longest `--duration-s` (and latest `--second-start-s`) of the demo, s (an hour).
const MAX_DURATION_S: f64 = 3600.0;

/// Prefix of every namespace the demo creates.
pub const PREFIX: &str = "cctl-demo";
const PORT: u16 = 5201;

/// Arguments of `cctl demo`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: cctl demo --algo htcp --duration-s 30   (or --algo cubic: any registered CC)\n\
Writes <out>/samples.csv (one row per sample, columns as `cctl trace --csv`) and \
<out>/summary.json. Namespaces and the algorithm (if the demo loaded it) are removed \
on exit, on Ctrl-C, and at the start of the next run after a crash."
)]
pub struct Args {
    /// cctl algorithm both flows use (loaded for the run unless already loaded).
    #[arg(long, default_value = "htcp")]
    algo: String,
    /// Length of the run, s (the first flow runs all of it); allowed more than 0 up to 3600.
    #[arg(long, default_value_t = 30.0, value_parser = real(0.0, true, MAX_DURATION_S, "s"))]
    duration_s: f64,
    /// When the second flow starts, s after the first, before the end of the run; allowed 0
    /// to 3600.
    #[arg(long, default_value_t = 5.0, value_parser = real(0.0, false, MAX_DURATION_S, "s"))]
    second_start_s: f64,
    /// Number of flows (the first starts at 0, the others at --second-start-s); allowed 1 to
    /// 8.
    #[arg(long, default_value_t = 2, value_parser = whole::<usize>(1, Some(8), "flows"))]
    flows: usize,
    /// Bottleneck rate, Mbit/s (tbf); allowed 1 to 10000.
    #[arg(long, default_value_t = 20, value_parser = whole::<u32>(1, Some(10_000), "Mbit/s"))]
    rate_mbit: u32,
    /// Drop-tail queue of the bottleneck, packets (pfifo); allowed 2 to 100000.
    #[arg(long, default_value_t = 100, value_parser = whole::<u32>(2, Some(100_000), "packets"))]
    queue_pkts: u32,
    /// Directory for samples.csv and summary.json.
    #[arg(long, default_value = "results/demo")]
    out: PathBuf,
    /// Print the per-flow summary as JSON lines instead of a table.
    #[arg(long)]
    json: bool,
}

/// What the demo reports per flow.
#[derive(Debug, serde::Serialize)]
struct FlowReport {
    flow: usize,
    cc: String,
    local_port: u16,
    start_s: f64,
    duration_s: f64,
    /// Goodput measured at the receiver, Mbit/s.
    mean_throughput_mbit: f64,
    mean_cwnd_segments: Option<f64>,
    mean_srtt_ms: Option<f64>,
    backoffs: usize,
    /// β at each backoff (null where two fell between samples).
    betas: Vec<Option<f64>>,
    samples: usize,
    error: Option<String>,
}

fn report(r: &FlowResult, s: Option<&FlowSummary>) -> FlowReport {
    FlowReport {
        flow: r.id,
        cc: r.cc.clone(),
        local_port: r.local_port,
        start_s: r.started.as_secs_f64(),
        duration_s: r.ended.saturating_sub(r.started).as_secs_f64(),
        mean_throughput_mbit: r.mean_throughput_bps() / 1e6,
        mean_cwnd_segments: s.map(|s| s.mean_cwnd),
        mean_srtt_ms: s.map(|s| s.mean_srtt_us / 1e3),
        backoffs: s.map(|s| s.backoffs.len()).unwrap_or(0),
        betas: s
            .map(|s| s.backoffs.iter().map(|b| b.beta).collect())
            .unwrap_or_default(),
        samples: s.map(|s| s.samples).unwrap_or(0),
        error: r.error.clone(),
    }
}

fn fmt_betas(betas: &[Option<f64>]) -> String {
    if betas.is_empty() {
        return "-".into();
    }
    betas
        .iter()
        .map(|b| b.map(|b| format!("{b:.2}")).unwrap_or_else(|| "?".into()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `cctl demo`.
pub fn run(args: Args) -> Result<i32> {
    // The ranges are the parser's; what depends on two options is checked here.
    if args.second_start_s >= args.duration_s {
        usage!(
            "--second-start-s {}: the second flow must start before the run ends \
             (--duration-s {}); give a smaller --second-start-s or a longer run",
            args.second_start_s,
            args.duration_s
        );
    }
    // One of cctl's algorithms (loaded for the run), or a congestion control the kernel has.
    let algorithm = match catalogue::find(&args.algo) {
        Ok(a) => Some(a),
        Err(e) => {
            if !kernel::available_ccs()?.contains(&args.algo) {
                return Err(anyhow::Error::new(e).context(format!(
                    "'{}' is not registered in the kernel either ({})",
                    args.algo,
                    kernel::available_ccs()?.join(" ")
                )));
            }
            None
        }
    };
    kernel::require_privileges("running the demo")?;
    kernel::require_struct_ops_links()?;
    kernel::ensure_bpffs()?;

    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handlers")?;
    }

    // Leftovers of a crashed earlier run.
    let stale_ns = remove_leftovers(PREFIX)?;
    let stale_cc = registry::remove_orphans()?;
    if !stale_ns.is_empty() || !stale_cc.is_empty() {
        eprintln!(
            "cctl demo: removed leftovers of an earlier run: {:?} {:?}",
            stale_ns, stale_cc
        );
    }

    let cc = algorithm.map_or(args.algo.clone(), |a| a.cc_name.to_string());
    let guard = match algorithm {
        None => None,
        Some(_) if registry::list_loaded()?.into_iter().any(|l| l.name == cc) => {
            eprintln!("cctl demo: using the already loaded {cc} (it stays loaded)");
            None
        }
        Some(a) => {
            let opts = LoadOptions {
                owned: true,
                ..Default::default()
            };
            registry::load(a.key, &opts).with_context(|| format!("loading {}", a.key))?;
            Some(LoadGuard::new(cc.clone()))
        }
    };

    let spec = PathSpec::new(PREFIX, args.rate_mbit, args.queue_pkts);
    let bed = Testbed::create(&spec).context("building the veth/tbf path")?;
    let cpu0 = cctl_bench::cost::cpu_times();
    let result = run_on(&args, &cc, &bed, stop.clone());
    let cpu_busy = match (cpu0, cctl_bench::cost::cpu_times()) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
            Some(100.0 * (b1 - b0) as f64 / (t1 - t0) as f64)
        }
        _ => None,
    };

    let qdisc = bed.bottleneck_stats().ok();
    let destroyed = bed.destroy();
    let unloaded = guard.map(LoadGuard::unload).transpose();
    let (reports, trace_stats, samples_path, wall) = result?;
    destroyed.context("removing the demo namespaces")?;
    unloaded.context("unloading the demo's algorithm")?;

    if args.json {
        for r in &reports {
            outln!("{}", serde_json::to_string(r)?)?;
        }
    } else {
        outln!(
            "\n{} flows with {cc} through a {} Mbit/s tbf bottleneck, drop-tail queue {} packets, {:.1} s",
            reports.len(),
            args.rate_mbit,
            args.queue_pkts,
            wall
        )?;
        outln!(
            "{:<4} {:<9} {:>7} {:>7} {:>11} {:>10} {:>10} {:>8}  β at each backoff",
            "flow",
            "cc",
            "start s",
            "dur s",
            "thr Mbit/s",
            "mean cwnd",
            "srtt ms",
            "backoffs"
        )?;
        for r in &reports {
            outln!(
                "{:<4} {:<9} {:>7.1} {:>7.1} {:>11.2} {:>10.1} {:>10.1} {:>8}  {}",
                r.flow,
                r.cc,
                r.start_s,
                r.duration_s,
                r.mean_throughput_mbit,
                r.mean_cwnd_segments.unwrap_or(f64::NAN),
                r.mean_srtt_ms.unwrap_or(f64::NAN),
                r.backoffs,
                fmt_betas(&r.betas)
            )?;
            if let Some(e) = &r.error {
                outln!("     error: {e}")?;
            }
        }
        if let Some(q) = &qdisc {
            outln!(
                "bottleneck: {} packets sent, {} dropped ({:.2} %)",
                q.sent_packets,
                q.drops,
                100.0 * q.drops as f64 / (q.sent_packets + q.drops).max(1) as f64
            )?;
        }
        if let Some(c) = cpu_busy {
            outln!(
                "host CPU busy during the run: {c:.0} % of {} CPUs",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            )?;
        }
        outln!(
            "trace: {} samples ({:.0}/s), {} flows, {} ring-buffer drops -> {}",
            trace_stats.samples,
            trace_stats.samples as f64 / trace_stats.duration.as_secs_f64().max(1e-9),
            trace_stats.flows,
            trace_stats.dropped,
            samples_path.display()
        )?;
    }
    if stop.load(Ordering::SeqCst) {
        eprintln!("cctl demo: interrupted; partial results written, everything removed");
        return Ok(exit::INTERRUPTED);
    }
    if reports.iter().any(|r| r.error.is_some()) {
        return Ok(exit::FAILURE);
    }
    Ok(exit::OK)
}

type RunOutput = (
    Vec<FlowReport>,
    cctl_loader::collector::TraceStats,
    PathBuf,
    f64,
);

/// Traces and runs the flows on an existing path; writes samples and summary.
fn run_on(args: &Args, cc: &str, bed: &Testbed, stop: Arc<AtomicBool>) -> Result<RunOutput> {
    let mut trace = Trace::start(TraceConfig {
        interval: cctl_loader::collector::DEFAULT_INTERVAL,
        port: Some(PORT),
        cc: Some(cc.to_string()),
        netns_cookie: None,
    })
    .context("starting the collector")?;

    let total = Duration::from_secs_f64(args.duration_s);
    let flows: Vec<FlowSpec> = (1..=args.flows)
        .map(|id| FlowSpec {
            id,
            cc: cc.to_string(),
            start: if id == 1 {
                Duration::ZERO
            } else {
                Duration::from_secs_f64(args.second_start_s)
            },
            stop: total,
            ..Default::default()
        })
        .collect();
    let bar = if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        indicatif::ProgressBar::new(total.as_secs())
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {pos}/{len} s")
            .expect("valid template"),
    );
    let t0 = Instant::now();
    let mut samples: Vec<Sample> = Vec::new();
    let results = std::thread::scope(|scope| {
        let flows_stop = stop.clone();
        let handle = scope.spawn(move || run_bulk_flows(bed, PORT, &flows, flows_stop));
        trace.collect_while(&mut samples, |got| {
            bar.set_position(t0.elapsed().as_secs().min(total.as_secs()));
            bar.set_message(format!("{} samples", got.len()));
            !handle.is_finished()
        });
        handle.join().expect("flow runner does not panic")
    })?;
    bar.finish_and_clear();
    let wall = t0.elapsed().as_secs_f64();
    samples.extend(trace.drain());
    let stats = trace.finish()?;

    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let csv_path = args.out.join("samples.csv");
    let mut w = csv::Writer::from_path(&csv_path)
        .with_context(|| format!("writing {}", csv_path.display()))?;
    for s in &samples {
        w.serialize(s)?;
    }
    w.flush()?;

    let summaries = summarize(&samples);
    let reports: Vec<FlowReport> = results
        .iter()
        .map(|r| {
            report(
                r,
                summaries
                    .iter()
                    .find(|s| s.sport == r.local_port && s.dport == PORT),
            )
        })
        .collect();
    let summary = serde_json::json!({
        "algorithm": cc,
        "rate_mbit": args.rate_mbit,
        "queue_pkts": args.queue_pkts,
        "duration_s": args.duration_s,
        "kernel": kernel::release(),
        "cctl_version": cctl_loader::version(),
        "flows": reports,
        "trace": stats,
    });
    let summary_path = args.out.join("summary.json");
    let mut f = std::fs::File::create(&summary_path)
        .with_context(|| format!("writing {}", summary_path.display()))?;
    writeln!(f, "{}", serde_json::to_string_pretty(&summary)?)?;
    Ok((reports, stats, csv_path, wall))
}
