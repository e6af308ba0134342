//! `cctl top`: a live terminal dashboard of per-flow cwnd, RTT and throughput from the
//! collector, with charts, algorithm internals, fairness, BPF run time, export, and
//! migration of flows to another congestion control.
//!
//! State ([`app`]), data source ([`source`]) and rendering ([`view`]) are kept apart; this
//! module is the event loop that joins them to a real terminal.

pub mod app;
pub mod export;
pub mod source;
pub mod view;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cctl_loader::bpfstats;
use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::kernel;
use cctl_loader::migrate::{self, MigrateRequest, SocketFilter};
use ratatui::crossterm::event::{self, Event};

use crate::cmd::args::{real, whole, MAX_INTERVAL_MS};
use crate::exit::{self, usage};
use app::{describe_scope, Action, App, BpfCc, Filter, MigrateAction, Scope};
use cctl_loader::upgrade::VersionCache;
use source::{LiveSource, Source};

/// Arguments of `cctl top`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Keys: q quit, ? help, / filter (port:N addr:A cc:NAME), s/r sort, \
Space mark flows for the overlay, p pause, Left/Right scroll, +/- zoom, 0 live, m/M migrate the \
flow / every flow of its CC, e export CSV+SVG.\n\
Needs a terminal and root (the collector is a BPF program); without a terminal use \
`cctl trace --json`.\n\
Example: cctl top --port 5201 --refresh-hz 10"
)]
pub struct Args {
    /// Only flows with this local or remote port (in-kernel filter); allowed 1 to 65535.
    #[arg(long, value_parser = crate::cmd::args::port_parser())]
    port: Option<u16>,
    /// Only flows of this network namespace: a name from `ip netns list` or a path
    /// (/proc/<pid>/ns/net); samples carry each flow's namespace cookie (`netns_cookie`).
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// Only flows running this congestion control (in-kernel filter).
    #[arg(long)]
    cc: Option<String>,
    /// Initial table filter, as typed after `/` (e.g. `addr:10.0.0.2 cc:htcp`).
    #[arg(long)]
    filter: Option<String>,
    /// Minimum interval between two samples of one flow, ms; allowed 1 to 60000.
    #[arg(long, default_value_t = 100, value_parser = whole::<u64>(1, Some(MAX_INTERVAL_MS), "ms"))]
    interval_ms: u64,
    /// Screen refreshes per second; allowed 1 to 60.
    #[arg(long, default_value_t = 10, value_parser = whole::<u32>(1, Some(60), "per second"))]
    refresh_hz: u32,
    /// Sample history kept per flow for the charts, s; allowed 10 to 3600.
    #[arg(long, default_value_t = 120.0, value_parser = real(10.0, false, 3600.0, "s"))]
    history_s: f64,
    /// Drop a flow from the table after this long without a sample, s; allowed more than 0
    /// up to 3600.
    #[arg(long, default_value_t = 10.0, value_parser = real(0.0, true, 3600.0, "s"))]
    expire_s: f64,
    /// Where `e` writes its CSV and SVG files.
    #[arg(long, default_value = ".")]
    export_dir: PathBuf,
    /// Let migrations give a non-initial network namespace a congestion control outside
    /// net.ipv4.tcp_allowed_congestion_control (as `cctl migrate --allow-restricted`).
    #[arg(long)]
    allow_restricted: bool,
}

/// Runs `cctl top`.
pub fn run(args: Args) -> Result<i32> {
    let mut app = App::new(args.history_s, args.expire_s);
    if let Some(f) = &args.filter {
        match Filter::parse(f) {
            Ok(f) => app.filter = f,
            Err(e) => usage!("--filter {f}: {e}"),
        }
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        usage!(
            "cctl top needs a terminal (stdin and stdout must be a TTY); for a stream of \
             samples use `cctl trace --json` (or `cctl trace --csv`)"
        );
    }
    app.targets = kernel::available_ccs().context("reading the available congestion controls")?;
    let trace = Trace::start(TraceConfig {
        interval: Duration::from_millis(args.interval_ms),
        port: args.port,
        cc: args.cc.clone(),
        netns_cookie: crate::cmd::filter::netns_cookie(args.netns.as_deref())?,
    })
    .context("starting the collector")?;
    let stats = bpfstats::StatsGuard::enable();
    let mut src = LiveSource { trace };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, stop.clone()).context("installing a signal handler")?;
    }

    let terminal = ratatui::try_init().context("setting up the terminal")?;
    let restore = Restore;
    let out = event_loop(
        terminal,
        &mut app,
        &mut src,
        &args,
        &stop,
        stats.as_ref().err(),
    );
    drop(restore);
    let _ = src.trace.finish();
    drop(stats);
    out
}

/// Restores the terminal when dropped (quit, error); ratatui's panic hook does it on panic.
struct Restore;

impl Drop for Restore {
    fn drop(&mut self) {
        ratatui::restore();
        let _ = ratatui::crossterm::execute!(std::io::stdout(), ratatui::crossterm::cursor::Show);
    }
}

fn event_loop(
    mut terminal: ratatui::DefaultTerminal,
    app: &mut App,
    src: &mut impl Source,
    args: &Args,
    stop: &AtomicBool,
    stats_err: Option<&cctl_loader::error::Error>,
) -> Result<i32> {
    let frame = Duration::from_secs_f64(1.0 / f64::from(args.refresh_hz));
    let mut versions = VersionCache::new();
    let mut buf = Vec::new();
    let (done_tx, done_rx) = mpsc::channel::<String>();
    let mut meter = Meter::new(src.counters());
    if let Some(e) = stats_err {
        app.footer.bpf_note = Some(format!("no BPF stats ({e})"));
    }
    let mut next_frame = Instant::now();
    // A migration runs on its own thread; quitting waits for it, so that no flow is left
    // half-moved by the process exiting under it.
    let mut running: Option<std::thread::JoinHandle<()>> = None;
    let finish = |running: Option<std::thread::JoinHandle<()>>, code: i32| {
        if let Some(t) = running {
            let _ = t.join();
        }
        Ok(code)
    };
    loop {
        let now = Instant::now();
        let wait = next_frame.saturating_duration_since(now);
        if event::poll(wait)? {
            loop {
                if let Event::Key(k) = event::read()? {
                    match app.on_key(k) {
                        Some(Action::Quit) => return finish(running, exit::OK),
                        Some(Action::Interrupt) => return finish(running, exit::INTERRUPTED),
                        Some(Action::Migrate(a)) => {
                            if running.as_ref().is_some_and(|t| !t.is_finished()) {
                                app.set_status("a migration is still running; wait for its result");
                                continue;
                            }
                            let tx = done_tx.clone();
                            let allow = args.allow_restricted;
                            running = Some(std::thread::spawn(move || {
                                let _ = tx.send(run_migration(&a, allow));
                            }));
                        }
                        Some(Action::Export) => {
                            app.set_status(match export::export(app, &args.export_dir) {
                                Ok(x) => format!(
                                    "exported: {} ({} samples), {}",
                                    x.csv.display(),
                                    x.rows,
                                    x.svgs
                                        .iter()
                                        .map(|p| p.display().to_string())
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                                Err(e) => format!("export failed: {e:#}"),
                            });
                        }
                        None => {}
                    }
                }
                if !event::poll(Duration::ZERO)? {
                    break;
                }
            }
            if Instant::now() < next_frame {
                continue;
            }
        }
        if stop.load(Ordering::SeqCst) {
            return finish(running, exit::INTERRUPTED);
        }
        next_frame = Instant::now() + frame;
        src.drain(&mut buf);
        for s in buf.drain(..) {
            let v = versions.of(&s);
            app.ingest(s, v);
        }
        while let Ok(msg) = done_rx.try_recv() {
            app.set_status(msg);
        }
        meter.update(app, src.counters());
        app.tick(src.now_ns());
        terminal.draw(|f| view::draw(f, app))?;
    }
}

/// Runs a confirmed migration and describes the outcome for the status line.
fn run_migration(a: &MigrateAction, allow_restricted: bool) -> String {
    let filter = match &a.scope {
        Scope::Flow { cookie, .. } => SocketFilter {
            cookie: Some(*cookie),
            ..Default::default()
        },
        Scope::AllOf => SocketFilter::default(),
    };
    let req = MigrateRequest {
        from: a.from.clone(),
        to: a.to.clone(),
        filter,
        dry_run: false,
        allow_restricted,
    };
    let t0 = Instant::now();
    let result = migrate::migrate_all_namespaces(&req);
    // The dashboard lives long and migrates rarely: do not keep the iterator and its ring
    // buffer (sized for every TCP socket of the host) loaded between migrations.
    migrate::release_iterator();
    match result {
        Ok(reports) => {
            let matched: u64 = reports.iter().map(|r| r.matched).sum();
            let moved: u64 = reports.iter().map(|r| r.moved).sum();
            let mut failures = std::collections::BTreeMap::<String, u64>::new();
            for r in &reports {
                for (k, v) in &r.failures {
                    *failures.entry(k.clone()).or_default() += v;
                }
            }
            let mut msg = format!(
                "migrated: moved {moved} of {matched} socket(s) from {} to {} ({} namespace{}) in {:.1} ms",
                a.from,
                a.to,
                reports.len(),
                if reports.len() == 1 { "" } else { "s" },
                t0.elapsed().as_secs_f64() * 1e3
            );
            if !failures.is_empty() {
                msg += &format!(
                    "; failed: {}",
                    failures
                        .iter()
                        .map(|(k, v)| format!("{v} {k}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            msg
        }
        Err(e) => format!("migrate failed ({}): {e}", describe_scope(a)),
    }
}

/// Footer figures: sample rate, drops, own CPU use and BPF run time, once a second.
struct Meter {
    at: Instant,
    counters: (u64, u64),
    cpu_s: f64,
    bpf: Vec<bpfstats::ProgStats>,
}

/// CPU time (user + system) of the whole process, all threads, s.
fn process_cpu_s() -> f64 {
    // SAFETY: getrusage fills the struct it is given and has no other effect.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

impl Meter {
    fn new(counters: (u64, u64)) -> Meter {
        Meter {
            at: Instant::now(),
            counters,
            cpu_s: process_cpu_s(),
            bpf: bpfstats::cctl_programs().unwrap_or_default(),
        }
    }

    fn update(&mut self, app: &mut App, counters: (u64, u64)) {
        let dt = self.at.elapsed().as_secs_f64();
        if dt < 1.0 {
            return;
        }
        let cpu = process_cpu_s();
        app.footer.samples_per_s = counters.0.saturating_sub(self.counters.0) as f64 / dt;
        app.footer.drops = counters.1;
        app.footer.cpu_pct = (cpu - self.cpu_s) / dt * 100.0;
        if app.footer.bpf_note.is_none() {
            match bpfstats::cctl_programs() {
                Ok(now) => {
                    bpf_footer(app, &self.bpf, &now, dt);
                    self.bpf = now;
                }
                Err(e) => app.footer.bpf_note = Some(format!("no BPF stats ({e})")),
            }
        }
        self.at = Instant::now();
        self.counters = counters;
        self.cpu_s = cpu;
    }
}

/// Run time per call and calls per second of each program between two readings,
/// grouped into the collector (every `cctl_tcp_probe` loaded, this one's included) and
/// each loaded version of a cctl congestion control.
fn bpf_footer(app: &mut App, before: &[bpfstats::ProgStats], now: &[bpfstats::ProgStats], dt: f64) {
    let per_call = |ns: u64, cnt: u64| if cnt > 0 { ns as f64 / cnt as f64 } else { 0.0 };
    let (mut coll_ns, mut coll_cnt, mut collectors) = (0, 0, 0);
    // Per CC version: run time (ns) and calls over the window, in the order first seen.
    let mut totals: Vec<(u64, u64)> = Vec::new();
    app.footer.bpf_cc.clear();
    for p in now {
        let d = match before.iter().find(|q| q.id == p.id) {
            Some(b) => p.since(b),
            None => p.clone(),
        };
        let Some(cc) = &p.cc else {
            coll_ns += d.run_time_ns;
            coll_cnt += d.run_cnt;
            collectors += 1;
            continue;
        };
        let label = match p.version {
            Some(v) => format!("{cc}@v{v}"),
            None => cc.clone(),
        };
        let i = match app.footer.bpf_cc.iter().position(|c| c.label == label) {
            Some(i) => i,
            None => {
                app.footer.bpf_cc.push(BpfCc {
                    label,
                    ..Default::default()
                });
                totals.push((0, 0));
                app.footer.bpf_cc.len() - 1
            }
        };
        totals[i].0 += d.run_time_ns;
        totals[i].1 += d.run_cnt;
        app.footer.bpf_cc[i].callbacks.push((
            p.callback.clone(),
            per_call(d.run_time_ns, d.run_cnt),
            d.run_cnt as f64 / dt,
        ));
    }
    for (c, (ns, cnt)) in app.footer.bpf_cc.iter_mut().zip(totals) {
        c.ns_per_call = per_call(ns, cnt);
        c.calls_per_s = cnt as f64 / dt;
    }
    app.footer.bpf_collector =
        (collectors > 0).then(|| (per_call(coll_ns, coll_cnt), coll_cnt as f64 / dt));
}

#[cfg(test)]
mod tests;
