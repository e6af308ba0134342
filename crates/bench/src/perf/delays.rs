//! Part `delays` of `cctl bench perf`: what the per-packet delay taps cost (issue 28).
//! One cubic flow through a dumbbell's tbf bottleneck, with the taps off, timing every
//! packet, and timing 1 packet in [`SAMPLED`] (the bench default), in alternating rounds
//! so that drift on a shared machine hits every mode alike.
//!
//! Host: 1 and 4 Gbit/s, no delay (the host kernel has no netem). Guest: 25 and 50 Mbit/s
//! with 40 ms of delay on the ACK path, where the emulated CPU is the scarce thing: there
//! the figure is the machine's CPU busy share. Each round's throughput is what the receiver
//! read over the flow's life; CPU is the busy share of all CPUs over the same time
//! (`/proc/stat`), also per GB moved.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use super::{PartResult, PerfOptions, Row, Site};
use crate::cost::cpu_times;
use cctl_netem::chain::Bed;
use cctl_netem::flows::{run_bulk_flows, FlowSpec};
use cctl_netem::testbed::{AccessSpec, PathSpec};

/// Namespace prefix of the part's testbeds.
pub const PREFIX: &str = "pm-dly";
/// 1 packet in this many is timed in the sampled mode (the bench default).
pub const SAMPLED: u32 = crate::request::DELAY_SAMPLE_DEFAULT;
/// The cost the sampled mode may have, as a fraction of throughput (and of CPU per GB).
pub const TARGET: f64 = 0.02;
const SUBNET_OCTET: u8 = 74;
const PORT: u16 = 5451;
const GUEST_RTT_MS: f64 = 40.0;

/// Rates measured, Mbit/s (quick: the lower one only).
pub fn rates(site: Site, quick: bool) -> Vec<f64> {
    let all = match site {
        Site::Host => vec![1000.0, 4000.0],
        Site::Guest => vec![25.0, 50.0],
    };
    all.into_iter().take(if quick { 1 } else { 2 }).collect()
}

/// Taps off, every packet, 1 in [`SAMPLED`].
const MODES: [u32; 3] = [0, 1, SAMPLED];

fn mode_name(every: u32) -> String {
    match every {
        0 => "taps off".into(),
        1 => "every packet".into(),
        n => format!("1 in {n}"),
    }
}

/// One round of one mode at one rate.
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    /// Bottleneck rate, Mbit/s.
    pub rate_mbit: f64,
    /// 1 packet in this many timed; 0 = taps off.
    pub sample_every: u32,
    /// Goodput, Mbit/s.
    pub goodput_mbit: f64,
    /// Busy share of all CPUs over the flow, fraction.
    pub cpu_busy: f64,
    /// CPU-seconds (all CPUs) per GB received.
    pub cpu_s_per_gb: f64,
    /// Packets the taps timed and delivered.
    pub timed: u64,
}

fn round(site: Site, rate_mbit: f64, every: u32, secs: f64) -> Result<Round> {
    let bdp_pkts = ((rate_mbit * 1e6 / 8.0 * GUEST_RTT_MS / 1e3) / 1514.0).ceil() as u32;
    let mut spec = PathSpec::new(PREFIX, rate_mbit, bdp_pkts.max(16));
    spec.subnet_octet = SUBNET_OCTET;
    spec.senders = vec![AccessSpec {
        rtt_ms: if site == Site::Guest {
            GUEST_RTT_MS
        } else {
            0.0
        },
        ..Default::default()
    }];
    let bed = Bed::create(None, &spec).context("building the testbed")?;
    let taps = crate::sources::delays::start(&bed, every)?;
    let flows = [FlowSpec {
        id: 1,
        cc: "cubic".into(),
        start: Duration::ZERO,
        stop: Duration::from_secs_f64(secs),
        ..Default::default()
    }];
    let cpu0 = cpu_times();
    let t0 = Instant::now();
    let res = run_bulk_flows(&bed, PORT, &flows, Arc::new(AtomicBool::new(false)));
    let wall = t0.elapsed().as_secs_f64();
    let cpu1 = cpu_times();
    let timed = match taps {
        Some((t, _)) => t.finish()?.1.delivered,
        None => 0,
    };
    bed.destroy()?;
    let res = res?;
    let r = &res[0];
    if let Some(e) = &r.error {
        anyhow::bail!("the flow failed: {e}");
    }
    let life = r.ended.saturating_sub(r.started).as_secs_f64().max(1e-3);
    let (busy, cpu_s) = match (cpu0, cpu1) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
            let share = (b1 - b0) as f64 / (t1 - t0) as f64;
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
            (share, share * cpus * wall)
        }
        _ => (f64::NAN, f64::NAN),
    };
    Ok(Round {
        rate_mbit,
        sample_every: every,
        goodput_mbit: r.bytes as f64 * 8.0 / life / 1e6,
        cpu_busy: busy,
        cpu_s_per_gb: cpu_s / (r.bytes as f64 / 1e9).max(1e-9),
        timed,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs the part: [`MODES`] in alternating rounds (3 of 8 s; quick: 1 of 2 s) at every
/// rate.
///
/// Errors: a testbed cannot be built, the taps cannot be attached, a flow fails.
pub fn run(opts: &PerfOptions) -> Result<PartResult> {
    cctl_netem::testbed::remove_leftovers(PREFIX)?;
    let (rounds, secs) = if opts.quick { (1, 2.0) } else { (3, 8.0) };
    let mut all = Vec::new();
    for rate in rates(opts.site, opts.quick) {
        for _ in 0..rounds {
            for every in MODES {
                if opts.stopped() {
                    break;
                }
                let r = round(opts.site, rate, every, secs)
                    .with_context(|| format!("{rate} Mbit/s, {}", mode_name(every)))?;
                eprintln!(
                    "cctl bench perf: delays {rate} Mbit/s {}: {:.1} Mbit/s, CPU {:.1} %",
                    mode_name(every),
                    r.goodput_mbit,
                    100.0 * r.cpu_busy
                );
                all.push(r);
            }
        }
    }
    let mut rows = Vec::new();
    for rate in rates(opts.site, opts.quick) {
        let of = |every: u32, f: fn(&Round) -> f64| {
            median(
                all.iter()
                    .filter(|r| r.rate_mbit == rate && r.sample_every == every)
                    .map(f)
                    .collect(),
            )
        };
        let off_tput = of(0, |r| r.goodput_mbit);
        let off_cpu = of(0, |r| r.cpu_s_per_gb);
        let off_busy = of(0, |r| r.cpu_busy);
        for every in [1, SAMPLED] {
            let item = format!("delay taps {}, {rate} Mbit/s", mode_name(every));
            let note = format!(
                "median of {rounds} rounds of {secs} s; {} packets timed (median)",
                of(every, |r| r.timed as f64)
            );
            let tput = of(every, |r| r.goodput_mbit);
            let mut row = Row::versus(
                super::Part::Delays,
                opts.site,
                &item,
                "throughput",
                "Mbit/s",
                tput,
                "taps off",
                off_tput,
            )
            .with_note(note.clone());
            if every == SAMPLED {
                row = row.with_target(
                    "≤ 2 % slower than with the taps off",
                    tput >= (1.0 - TARGET) * off_tput,
                );
            }
            rows.push(row);
            let cpu = of(every, |r| r.cpu_s_per_gb);
            let mut row = Row::versus(
                super::Part::Delays,
                opts.site,
                &item,
                "CPU per GB",
                "CPU-s/GB",
                cpu,
                "taps off",
                off_cpu,
            )
            .with_note(note.clone());
            if every == SAMPLED {
                row = row.with_target(
                    "≤ 2 % more CPU per GB than with the taps off",
                    cpu <= (1.0 + TARGET) * off_cpu,
                );
            }
            rows.push(row);
            rows.push(
                Row::versus(
                    super::Part::Delays,
                    opts.site,
                    &item,
                    "CPU busy share",
                    "%",
                    100.0 * of(every, |r| r.cpu_busy),
                    "taps off",
                    100.0 * off_busy,
                )
                .with_note(note),
            );
        }
    }
    Ok(PartResult {
        rows,
        details: serde_json::to_value(&all)?,
        notes: vec![format!(
            "one cubic flow per round through a tbf bottleneck with a 40-ms BDP buffer{}; modes \
             alternate within each round",
            if opts.site == Site::Guest {
                " and 40 ms of netem delay on the ACK path"
            } else {
                " (no delay: the host has no netem)"
            }
        )],
    })
}
