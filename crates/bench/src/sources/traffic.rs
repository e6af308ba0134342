//! A run's traffic besides its TCP flows: the scenario's unresponsive UDP streams
//! (`kind = "udp-cbr"` flows, [`cctl_netem::udp`]) and its latency-under-load probes
//! (`[[probes]]`, [`cctl_netem::probes`]), started with the flows on the same t0 and
//! finished after them.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cctl_netem::chain::Bed;
use cctl_netem::flows::Endpoints;
use cctl_netem::probes::{ProbeResult, ProbeSpec, Probes};
use cctl_netem::udp::{CbrResult, CbrSpec, CbrTraffic};
use cctl_report::record::RunRecord;
use cctl_scenario::{FlowKind, RunPoint};

use super::{End, Running, Source, Start};

/// First UDP port of the streams: flow `i` (0-based) uses `UDP_PORT + i`.
pub const UDP_PORT: u16 = 5600;
/// First UDP port of the probes: `[[probes]]` table `k` uses `PROBE_PORT + k`.
pub const PROBE_PORT: u16 = 5700;

/// The UDP streams and probes of one run, running.
pub struct Streams {
    streams: Vec<CbrTraffic>,
    probes: Vec<Probes>,
}

/// What they measured.
#[derive(Debug, Default)]
pub struct Finished {
    /// One per `udp-cbr` flow, in `[[flows]]` order.
    pub udp: Vec<CbrResult>,
    /// One per `[[probes]]` table.
    pub probes: Vec<ProbeResult>,
}

/// Starts `point`'s UDP streams (flow `i` from sender `i`'s namespace to its receiver) and
/// probes (from the first sender's namespace to its receiver), timed from `t0`.
///
/// Errors: a socket cannot be made in its namespace; whatever started is stopped first.
pub fn start(point: &RunPoint, bed: &Bed, t0: Instant, stop: &Arc<AtomicBool>) -> Result<Streams> {
    let mut running = Streams {
        streams: Vec::new(),
        probes: Vec::new(),
    };
    let secs = Duration::from_secs_f64;
    for (i, f) in point.flows.iter().enumerate() {
        if f.kind != FlowKind::UdpCbr {
            continue;
        }
        let rate = f.rate_mbit.context("a udp-cbr flow has a rate")?;
        let spec = CbrSpec::new(i + 1, rate, secs(f.start_s), secs(f.stop_s));
        let (rns, raddr) = bed.receiver_of(i);
        match cctl_netem::udp::start(
            bed.sender_ns_at(i),
            rns,
            raddr,
            UDP_PORT + i as u16,
            &spec,
            t0,
            stop.clone(),
        ) {
            Ok(s) => running.streams.push(s),
            Err(e) => {
                let _ = running.finish();
                return Err(e.context(format!("starting udp-cbr flow {}", i + 1)));
            }
        }
    }
    for p in &point.probes {
        let spec = ProbeSpec {
            interval: Duration::from_secs_f64(p.interval_ms / 1e3),
            size_bytes: p.size_bytes as usize,
            dscp: p.dscp,
            start: secs(p.start_s),
            stop: secs(p.stop_s),
        };
        let (rns, raddr) = bed.receiver_of(0);
        match cctl_netem::probes::start(
            bed.sender_ns_at(0),
            rns,
            raddr,
            PROBE_PORT + p.entry as u16,
            &spec,
            t0,
            stop.clone(),
        ) {
            Ok(s) => running.probes.push(s),
            Err(e) => {
                let _ = running.finish();
                return Err(e.context(format!("starting probes {}", p.entry)));
            }
        }
    }
    Ok(running)
}

impl Streams {
    /// Waits for every stream and probe run to end (each at its stop time, or `stop`), and
    /// returns what they measured.
    ///
    /// Errors: a thread panicked (every one is joined first).
    pub fn finish(self) -> Result<Finished> {
        let mut out = Finished::default();
        let mut first_err = None;
        for s in self.streams {
            match s.finish() {
                Ok(r) => out.udp.push(r),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        for p in self.probes {
            match p.finish() {
                Ok(r) => out.probes.push(r),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// The source of a run's UDP streams and probes (`udp`, `probes` of `run.json`).
pub struct Traffic;

impl Source for Traffic {
    fn start(&self, run: &Start) -> Result<Option<Box<dyn Running>>> {
        let p = run.point;
        if p.probes.is_empty() && !p.flows.iter().any(|f| f.kind == FlowKind::UdpCbr) {
            return Ok(None);
        }
        Ok(Some(Box::new(start(p, run.bed, run.t0().at, run.stop)?)))
    }
}

impl Running for Streams {
    fn finish(self: Box<Self>, _: &End, record: &mut RunRecord) -> Result<()> {
        let f = (*self).finish().context("finishing the UDP traffic")?;
        record.udp = f.udp;
        record.probes = f.probes;
        Ok(())
    }
}
