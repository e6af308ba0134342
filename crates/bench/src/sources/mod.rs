//! What a run measures besides its flows' collector samples: one file per source, each
//! started with the run and finished after its flows, writing its part of the run's
//! [`RunRecord`] and its raw data. A new measurement is a file here, an entry in
//! [`SOURCES`], a field on [`RunRecord`], a metrics function and a plot.
//!
//! The run ([`crate::run::run_once`]) starts every source in [`SOURCES`] order: first those
//! that start before t0 ([`Source::before_t0`]: programs to load, sessions to open, whose
//! setup is not timed), then the rest at t0, when the flows start. After the flows it
//! finishes them in the same order while the testbed stands, then removes it, then
//! finishes those that need it gone ([`Running::after_bed`]).

pub mod closing;
pub mod delays;
pub mod host_cost;
pub mod ledger;
pub mod queue;
pub mod schedule;
pub mod traffic;
pub mod web;

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use cctl_netem::chain::Bed;
use cctl_netem::flows::FlowResult;
use cctl_report::record::{ResolvedCc, RunRecord};
use cctl_scenario::RunPoint;

use crate::request::RunRequest;

/// Every source, in the order they start (within their phase) and finish: the UDP traffic
/// first (it may outlast the TCP flows, and the others measure until it ends), the host's
/// cost after everything that runs traffic, the testbed's counters last.
pub const SOURCES: &[&dyn Source] = &[
    &traffic::Traffic,
    &queue::Queue,
    &schedule::Schedule,
    &web::Web,
    &host_cost::HostCost,
    &delays::Delays,
    &ledger::Ledger,
    &closing::Closing,
];

/// The start of a run: t0 on the monotonic clock, from which the flows' start times and
/// every measured time of the run count.
#[derive(Debug, Clone, Copy)]
pub struct T0 {
    /// t0 as an [`Instant`].
    pub at: Instant,
    /// t0 on CLOCK_MONOTONIC, ns (the collector's and the taps' timestamps).
    pub ns: u64,
    /// t0 on the wall clock (`run.json`'s `t0_utc`).
    pub utc: chrono::DateTime<chrono::Utc>,
}

impl T0 {
    /// Now.
    pub fn now() -> T0 {
        let ts =
            nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
        T0 {
            ns: ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64,
            at: Instant::now(),
            utc: chrono::Utc::now(),
        }
    }
}

/// What a source sees when it starts.
pub struct Start<'a> {
    /// The point run.
    pub point: &'a RunPoint,
    /// Its repetition.
    pub rep: u32,
    /// Every resolved algorithm of the sweep (for names a point gives).
    pub all: &'a [ResolvedCc],
    /// The request (sampling intervals and rates).
    pub req: &'a RunRequest,
    /// The run's testbed.
    pub bed: &'a Bed,
    /// Set on an interrupt.
    pub stop: &'a Arc<AtomicBool>,
    /// t0; `None` for the sources that start before it.
    pub t0: Option<T0>,
}

impl Start<'_> {
    /// t0, for a source that starts at it.
    ///
    /// Panics for a source that starts before t0 ([`Source::before_t0`]).
    pub fn t0(&self) -> T0 {
        self.t0
            .expect("sources that start at t0 are started after it")
    }

    /// The run's seed: the sweep's (`req.seed`, resolved by the runner) plus the
    /// repetition, as the scenario's random start times of this repetition are drawn.
    pub fn seed(&self) -> u64 {
        self.req.seed.unwrap_or(0).wrapping_add(u64::from(self.rep))
    }
}

/// What a source sees when it finishes: the flows have ended.
pub struct End<'a> {
    /// The run's testbed; `None` once it is removed ([`Running::after_bed`]).
    pub bed: Option<&'a Bed>,
    /// The flows' results (addresses, ports, bytes).
    pub flows: &'a [FlowResult],
    /// The run's t0.
    pub t0: T0,
    /// The request.
    pub req: &'a RunRequest,
    /// The run's directory, for raw data.
    pub dir: &'a Path,
}

impl<'a> End<'a> {
    /// The testbed, for a source that finishes while it stands.
    ///
    /// Errors: the testbed is already removed.
    pub fn bed(&self) -> Result<&'a Bed> {
        self.bed
            .ok_or_else(|| anyhow::anyhow!("the testbed is removed before this source ends"))
    }
}

/// A kind of measurement of a run.
pub trait Source: Sync {
    /// Whether it starts before t0 (untimed setup). Default: at t0.
    fn before_t0(&self) -> bool {
        false
    }

    /// Starts measuring the run; `None` when the run has nothing of this kind.
    ///
    /// Errors: it cannot start (whatever it started is stopped first).
    fn start(&self, run: &Start) -> Result<Option<Box<dyn Running>>>;
}

/// A source measuring a run.
pub trait Running: Send {
    /// Whether it finishes after the testbed is removed (close records of the sockets the
    /// removal closes). Default: before.
    fn after_bed(&self) -> bool {
        false
    }

    /// Stops, writes its raw data into `end.dir` and its fields of `record` (the
    /// collector's fields are already filled).
    ///
    /// Errors: reading or writing what it measured.
    fn finish(self: Box<Self>, end: &End, record: &mut RunRecord) -> Result<()>;
}

/// Starts every source of `SOURCES` that starts before t0 (`t0` = `None`) or at it.
///
/// Errors: the first that cannot start (those started are dropped, which stops them).
pub fn start_all(run: &Start) -> Result<Vec<Box<dyn Running>>> {
    let before = run.t0.is_none();
    let mut running = Vec::new();
    for s in SOURCES.iter().filter(|s| s.before_t0() == before) {
        if let Some(r) = s.start(run)? {
            running.push(r);
        }
    }
    Ok(running)
}

/// Finishes `running` in order with what `end` gives, each writing into `record`.
///
/// Errors: the first that fails (the rest are dropped, which stops them).
pub fn finish_all(running: Vec<Box<dyn Running>>, end: End, record: &mut RunRecord) -> Result<()> {
    for r in running {
        r.finish(&end, record)?;
    }
    Ok(())
}
