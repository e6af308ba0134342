//! Part `ceiling` of `cctl bench perf`: the highest bottleneck rate at which ONE bulk cubic
//! flow with a 100 % BDP drop-tail buffer (the BDP of a 40 ms round trip at that rate)
//! reaches ≥ 95 % utilisation (issue 7, item 4) — above it, the testbed itself (CPU, tbf,
//! veth) and not the congestion control limits what a scenario can show.
//!
//! Rates are tried from low to high ([`rates`]) on a fresh [`Testbed`] each ([`PREFIX`]);
//! the sweep stops at the first rate that fails ([`sweep`]). Host: tbf without delay (the
//! host kernel has no netem; the buffer is still sized for 40 ms). Guest (6.12, netem):
//! the same with [`RTT_MS`] of delay on the ACK path ([`AccessSpec::rtt_ms`]).
//!
//! Utilisation is the tbf's own count: bytes it sent on (L2 frames, 1514 bytes per full
//! packet, what its token rate is charged with) divided by rate × time, over the flow's
//! steady part — from [`warmup`] after the connection to half a second before its stop, so
//! slow start and the drain are left out. Goodput (payload the receiver read over the whole
//! flow, slow start included) over the rate is reported beside it; it can never exceed
//! 1448/1514 = 95.6 % (headers), which is why it is not the criterion.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::{PartResult, PerfOptions, Row, Site};
use cctl_netem::flows::{run_bulk_flows_observed, FlowSpec};
use cctl_netem::testbed::{AccessSpec, PathSpec, QdiscSampler, Testbed, FRAME_BYTES};

/// Namespace prefix of the part's testbeds (`pm-ceil-snd1`, `-rtr`, `-rcv`).
pub const PREFIX: &str = "pm-ceil";
/// Round-trip time the buffer is sized for (and, in the guest, the netem delay), in ms.
pub const RTT_MS: f64 = 40.0;
/// Utilisation a rate must reach to pass, as a fraction.
pub const TARGET: f64 = 0.95;
/// Third octet of the testbed's subnets.
const SUBNET_OCTET: u8 = 73;
/// The receiver's port.
const PORT: u16 = 5441;
/// Payload per full frame: 1514-byte frame less Ethernet (14), IP (20), TCP with
/// timestamps (32) headers, in bytes.
const PAYLOAD_BYTES: f64 = 1448.0;

/// Rates to try, in Mbit/s, lowest first: full runs climb until the first failure; quick
/// runs try two rates that pass on a healthy machine.
pub fn rates(site: Site, quick: bool) -> Vec<f64> {
    match (site, quick) {
        (Site::Host, false) => vec![500.0, 1000.0, 2000.0, 4000.0, 8000.0],
        (Site::Host, true) => vec![500.0, 1000.0],
        (Site::Guest, false) => vec![25.0, 50.0, 100.0, 200.0, 400.0],
        (Site::Guest, true) => vec![25.0, 50.0],
    }
}

/// How long each flow runs, in s: 10 full, 3 quick.
pub fn duration_s(quick: bool) -> f64 {
    if quick {
        3.0
    } else {
        10.0
    }
}

/// Time after the connection before the measured window starts (slow start), in s.
pub fn warmup(quick: bool) -> f64 {
    if quick {
        1.0
    } else {
        3.0
    }
}

/// The drop-tail buffer for `rate_mbit`: one BDP at [`RTT_MS`], in full frames (at least 2).
pub fn bdp_pkts(rate_mbit: f64) -> u32 {
    let bytes = rate_mbit * 1e6 / 8.0 * RTT_MS / 1e3;
    ((bytes / f64::from(FRAME_BYTES)).ceil() as u32).max(2)
}

/// One measured rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    /// Bottleneck rate, in Mbit/s.
    pub rate_mbit: f64,
    /// Drop-tail buffer, in packets.
    pub queue_pkts: u32,
    /// tbf bytes sent over the window / (rate × window), as a fraction.
    pub utilisation: f64,
    /// Whole-flow goodput / rate, as a fraction (slow start included; ≤ 0.956 by headers).
    pub goodput_ratio: f64,
    /// Length of the measured window, in s.
    pub window_s: f64,
    /// Packets the bottleneck dropped over the whole run.
    pub drops: u64,
    /// Whether `utilisation ≥ TARGET`.
    pub passed: bool,
    /// What went wrong, if the point could not be measured (counts as a failure).
    pub error: Option<String>,
}

impl Point {
    /// A point that could not be measured.
    pub fn failed(rate_mbit: f64, error: String) -> Point {
        Point {
            rate_mbit,
            queue_pkts: bdp_pkts(rate_mbit),
            utilisation: f64::NAN,
            goodput_ratio: f64::NAN,
            window_s: 0.0,
            drops: 0,
            passed: false,
            error: Some(error),
        }
    }
}

/// Tries `rates` in order with `measure` until one fails (or `stop` is set): every point
/// measured, the last one the first failure if there was one. A `measure` error is a failed
/// point carrying the error; a point during which `stop` was set is left out.
pub fn sweep(
    rates: &[f64],
    stop: &AtomicBool,
    mut measure: impl FnMut(f64) -> Result<Point>,
) -> Vec<Point> {
    let mut out = Vec::new();
    for &r in rates {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let p = measure(r).unwrap_or_else(|e| Point::failed(r, format!("{e:#}")));
        if stop.load(Ordering::SeqCst) {
            // Interrupted during the measurement: the point means nothing.
            break;
        }
        let passed = p.passed;
        out.push(p);
        if !passed {
            break;
        }
    }
    out
}

/// The highest passing point and the first failing one of a sweep.
pub fn ceiling(points: &[Point]) -> (Option<&Point>, Option<&Point>) {
    (
        points.iter().take_while(|p| p.passed).last(),
        points.iter().find(|p| !p.passed),
    )
}

/// Measures one rate: a fresh testbed, one cubic flow of [`duration_s`], the tbf counters
/// sampled at [`warmup`] after the connection and half a second before the stop.
///
/// Errors: the testbed cannot be built, the flow fails, the counters cannot be read.
pub fn measure(site: Site, rate_mbit: f64, quick: bool, stop: Arc<AtomicBool>) -> Result<Point> {
    let queue_pkts = bdp_pkts(rate_mbit);
    let mut spec = PathSpec::new(PREFIX, rate_mbit, queue_pkts);
    spec.subnet_octet = SUBNET_OCTET;
    spec.senders = vec![AccessSpec {
        rtt_ms: if site == Site::Guest { RTT_MS } else { 0.0 },
        loss: 0.0,
        ..Default::default()
    }];
    let bed = Testbed::create(&spec).context("building the testbed")?;
    let dur = duration_s(quick);
    let (from, to) = (warmup(quick), dur - 0.5);
    let mut sampler = QdiscSampler::start(bed.router_ns(), &spec.bottleneck_dev())?;

    // The sampler thread learns the connection time from the flow's start callback.
    let (tx, rx) = mpsc::channel::<Instant>();
    let tx = Mutex::new(tx);
    let halt = stop.clone();
    let window = std::thread::spawn(move || -> Result<(f64, u64)> {
        let started = rx
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| anyhow!("the flow did not connect within 10 s"))?;
        let mut at = |t: f64| -> Result<(Instant, u64)> {
            let due = started + Duration::from_secs_f64(t);
            while Instant::now() < due {
                if halt.load(Ordering::SeqCst) {
                    bail!("stopped");
                }
                std::thread::sleep(
                    due.saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(100)),
                );
            }
            let t0 = Instant::now();
            let s = sampler.sample()?;
            // The middle of the sample's round trip to tc.
            Ok((t0 + (Instant::now() - t0) / 2, s.sent_bytes))
        };
        let (t1, b1) = at(from)?;
        let (t2, b2) = at(to)?;
        Ok(((t2 - t1).as_secs_f64(), b2.saturating_sub(b1)))
    });
    let flows = [FlowSpec {
        id: 0,
        cc: "cubic".into(),
        start: Duration::ZERO,
        stop: Duration::from_secs_f64(dur),
        sender: 0,
        size_bytes: None,
        reverse: false,
    }];
    let results = run_bulk_flows_observed(&bed, PORT, &flows, stop, move |_, _| {
        if let Ok(tx) = tx.lock() {
            let _ = tx.send(Instant::now());
        }
    });
    let window = window
        .join()
        .map_err(|_| anyhow!("the sampling thread panicked"))?;
    let results = results?;
    let flow = &results[0];
    if let Some(e) = &flow.error {
        bail!("the flow failed: {e}");
    }
    let (window_s, bytes) = window?;
    let stats = bed.bottleneck_stats()?;
    bed.destroy()?;
    let rate_bps = rate_mbit * 1e6;
    let utilisation = bytes as f64 * 8.0 / (rate_bps * window_s);
    Ok(Point {
        rate_mbit,
        queue_pkts,
        utilisation,
        goodput_ratio: flow.mean_throughput_bps() / rate_bps,
        window_s,
        drops: stats.drops,
        passed: utilisation >= TARGET,
        error: None,
    })
}

/// `500` as `500 Mbit/s`, `2000` as `2 Gbit/s`.
fn fmt_rate(mbit: f64) -> String {
    if mbit >= 1000.0 {
        format!("{} Gbit/s", mbit / 1000.0)
    } else {
        format!("{mbit} Mbit/s")
    }
}

fn describe(p: &Point) -> String {
    match &p.error {
        Some(e) => format!("{}: not measured ({e})", fmt_rate(p.rate_mbit)),
        None => format!(
            "{}: {:.1} % (goodput {:.1} %, {} drops)",
            fmt_rate(p.rate_mbit),
            p.utilisation * 100.0,
            p.goodput_ratio * 100.0,
            p.drops
        ),
    }
}

/// Runs the part on `opts.site`.
///
/// Errors: the guest kernel has no netem, or the first rate cannot be measured at all.
pub fn run(opts: &PerfOptions) -> Result<PartResult> {
    if opts.site == Site::Guest && !cctl_vm::netem_available() {
        bail!("the guest kernel cannot attach sch_netem, which the 40 ms delay needs");
    }
    let rates = rates(opts.site, opts.quick);
    let points = sweep(&rates, &opts.stop, |r| {
        let p = measure(opts.site, r, opts.quick, opts.stop.clone());
        if let Ok(p) = &p {
            eprintln!("  ceiling: {}", describe(p));
        }
        p
    });
    if points.is_empty() {
        return Ok(PartResult {
            notes: vec!["interrupted before a rate was measured".into()],
            ..Default::default()
        });
    }
    if let [only] = points.as_slice() {
        if let Some(e) = &only.error {
            bail!("{}: {e}", fmt_rate(only.rate_mbit));
        }
    }
    let (pass, fail) = ceiling(&points);
    let place = match opts.site {
        Site::Host => "tbf, no delay (host kernel has no netem)".to_string(),
        Site::Guest => format!("tbf + netem {RTT_MS} ms RTT"),
    };
    let sweep_text = points.iter().map(describe).collect::<Vec<_>>().join("; ");
    let first_fail = match fail {
        Some(p) => format!("first failing rate {}", describe(p)),
        None if points.len() == rates.len() => {
            format!(
                "every rate tried passed (up to {})",
                fmt_rate(rates[rates.len() - 1])
            )
        }
        None => "stopped before a rate failed".into(),
    };
    let note = format!(
        "1 cubic flow, drop-tail buffer = BDP at {RTT_MS} ms, {place}; utilisation = tbf sent bytes / (rate x time) \
         from {} s after connect to 0.5 s before the stop of a {} s flow (goodput: whole flow, at most {:.1} % by headers); \
         {first_fail}. Sweep: {sweep_text}",
        warmup(opts.quick),
        duration_s(opts.quick),
        PAYLOAD_BYTES / f64::from(FRAME_BYTES) * 100.0,
    );
    let mut row = Row::single(
        super::Part::Ceiling,
        opts.site,
        "highest bottleneck rate with >= 95 % utilisation",
        "rate",
        "Mbit/s",
        pass.map_or(0.0, |p| p.rate_mbit),
    )
    .with_note(note);
    if pass.is_none() {
        row.note = format!("no rate passed; {}", row.note);
    }
    let mut res = PartResult {
        rows: vec![row],
        ..Default::default()
    };
    if opts.quick {
        res.notes.push(format!(
            "--quick: only {} and {} s flows; the ceiling is at least the highest rate that passed",
            rates
                .iter()
                .map(|r| fmt_rate(*r))
                .collect::<Vec<_>>()
                .join(" and "),
            duration_s(opts.quick)
        ));
    }
    res.details = serde_json::json!({
        "rtt_ms": RTT_MS,
        "target": TARGET,
        "duration_s": duration_s(opts.quick),
        "warmup_s": warmup(opts.quick),
        "points": points,
    });
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(rate: f64, util: f64) -> Point {
        Point {
            rate_mbit: rate,
            queue_pkts: bdp_pkts(rate),
            utilisation: util,
            goodput_ratio: util * 0.95,
            window_s: 7.0,
            drops: 0,
            passed: util >= TARGET,
            error: None,
        }
    }

    #[test]
    fn the_sweep_stops_at_the_first_failure_and_names_both_ends() {
        let utils = [0.99, 0.97, 0.80, 0.99];
        let rates = [1.0, 2.0, 3.0, 4.0];
        let mut calls = 0;
        let pts = sweep(&rates, &AtomicBool::new(false), |r| {
            calls += 1;
            Ok(point(r, utils[r as usize - 1]))
        });
        assert_eq!(calls, 3, "4 is never tried after 3 failed");
        let (pass, fail) = ceiling(&pts);
        assert_eq!(pass.unwrap().rate_mbit, 2.0);
        assert_eq!(fail.unwrap().rate_mbit, 3.0);
    }

    #[test]
    fn an_error_is_a_failed_point_and_a_stop_ends_the_sweep() {
        let pts = sweep(&[1.0, 2.0], &AtomicBool::new(false), |r| {
            if r > 1.5 {
                bail!("tbf said no")
            }
            Ok(point(r, 0.99))
        });
        assert_eq!(pts.len(), 2);
        assert!(!pts[1].passed);
        assert_eq!(pts[1].error.as_deref(), Some("tbf said no"));
        assert_eq!(ceiling(&pts).0.unwrap().rate_mbit, 1.0);
        let none = sweep(&[1.0], &AtomicBool::new(true), |r| Ok(point(r, 1.0)));
        assert!(none.is_empty());
        let stop = AtomicBool::new(false);
        let cut = sweep(&[1.0, 2.0, 3.0], &stop, |r| {
            if r > 1.5 {
                stop.store(true, Ordering::SeqCst); // SIGINT during the second point
            }
            Ok(point(r, 0.99))
        });
        assert_eq!(cut.len(), 1, "the interrupted point is left out");
        assert_eq!(ceiling(&[point(1.0, 0.5)]), (None, Some(&point(1.0, 0.5))));
    }

    #[test]
    fn the_buffer_is_one_bdp_at_40_ms_in_full_frames() {
        // 1 Gbit/s × 40 ms = 5,000,000 bytes = 3302.5 frames of 1514 bytes.
        assert_eq!(bdp_pkts(1000.0), 3303);
        assert_eq!(bdp_pkts(100.0), 331);
        assert_eq!(bdp_pkts(0.01), 2);
    }

    #[test]
    fn rates_climb_and_quick_runs_two() {
        for site in [Site::Host, Site::Guest] {
            for quick in [false, true] {
                let r = rates(site, quick);
                assert!(r.windows(2).all(|w| w[0] < w[1]), "{r:?}");
                assert_eq!(r.len() == 2, quick);
            }
            assert!(warmup(true) < duration_s(true) - 0.5);
            assert!(warmup(false) < duration_s(false) - 0.5);
        }
        assert_eq!(fmt_rate(2000.0), "2 Gbit/s");
        assert_eq!(fmt_rate(500.0), "500 Mbit/s");
    }
}
