//! Part `live` of `cctl bench perf`: what live tunables (spec §18.5) cost per ACK. Each
//! algorithm with live tunables runs as built (its live tunables read from `.data`, one
//! load each, the slot index once per callback) against the same program built with
//! `-DCCTL_LIVE_CONST`, where they are `.rodata` constants the verifier folds, as every
//! load-time tunable is.
//!
//! Same transfer as part `ack` (one CPU-bound bulk flow over `lo`, MTU 1500, offloads
//! off), rounds alternating between the two builds, BPF statistics on in every round (they
//! cost both sides the same two clock reads per call). Reported per algorithm: BPF run
//! time per GB (all callbacks) and per call of the hottest callback, live / constant, with
//! every round's range; and goodput, live / constant.

use std::path::Path;

use anyhow::{bail, Context, Result};
use cctl_loader::bpfstats::{self, ProgStats, StatsGuard};
use cctl_loader::catalogue::{Algorithm, ALGORITHMS};
use serde::Serialize;

use super::ack::{spread, transfer, Round, MTU, NETNS};
use super::{median, PartResult, PerfOptions, Row, Site};
use crate::perf::Part;
use cctl_netem::testbed::LoopbackNetns;

/// One side's round: the transfer and its programs' BPF time.
#[derive(Debug, Clone, Serialize)]
pub struct LiveRound {
    /// The transfer.
    pub round: Round,
    /// BPF run time of all callbacks per GB moved, ns/GB.
    pub bpf_ns_per_gb: f64,
    /// Per callback: (name, ns per call, calls).
    pub callbacks: Vec<(String, f64, u64)>,
}

/// Per-algorithm outcome (the JSON details).
#[derive(Debug, Clone, Serialize)]
pub struct LiveResult {
    /// cctl key.
    pub key: String,
    /// Rounds of the live build.
    pub live: Vec<LiveRound>,
    /// Rounds of the constant build.
    pub constant: Vec<LiveRound>,
}

/// The algorithms with live tunables (those built twice), in catalogue order.
fn algorithms(quick: bool) -> Vec<&'static Algorithm> {
    let v: Vec<&Algorithm> = ALGORITHMS
        .iter()
        .filter(|a| a.params.iter().any(|p| p.live))
        .collect();
    if quick {
        v.into_iter().take(1).collect()
    } else {
        v
    }
}

/// Rounds per side and seconds per round.
fn schedule(site: Site, quick: bool) -> (usize, f64) {
    match (site, quick) {
        (_, true) => (2, 1.0),
        (Site::Host, false) => (5, 2.0),
        (Site::Guest, false) => (3, 2.0),
    }
}

/// The constant build of `a`, registered as `name` with its defaults and `cctl_algo_id`
/// (its live tunables keep their compiled-in defaults, as the live build's).
fn load_constant(a: &Algorithm, name: &str) -> Result<cctl_loader::algo::Registered> {
    let object = a
        .object_const
        .with_context(|| format!("{} has no constant build", a.key))?;
    let origin = format!("{} (-DCCTL_LIVE_CONST)", a.source());
    let id = u32::from(a.id);
    let reg = cctl_loader::object::load(object, Path::new(&origin), name, &[("cctl_algo_id", id)])?;
    Ok(reg)
}

/// Programs of one registration.
fn programs(cc: &str, reg: &cctl_loader::algo::Registered) -> Result<Vec<ProgStats>> {
    let id = cctl_loader::registry::map_id(&reg.map, cc)?;
    Ok(bpfstats::map_programs(cc, id)?)
}

/// One round of `cc` with its BPF time.
fn round(cc: &str, reg: &cctl_loader::algo::Registered, opts: &PerfOptions) -> Result<LiveRound> {
    let (_, secs) = schedule(opts.site, opts.quick);
    let before = programs(cc, reg)?;
    let r = transfer(cc, secs, &opts.stop)?;
    let after = programs(cc, reg)?;
    let gb = (r.bytes as f64 / 1e9).max(1e-9);
    let mut callbacks = Vec::new();
    let mut total = 0.0;
    for a in &after {
        let Some(b) = before.iter().find(|b| b.id == a.id) else {
            continue;
        };
        let d = a.since(b);
        total += d.run_time_ns as f64;
        if let Some(ns) = d.ns_per_call() {
            callbacks.push((a.callback.clone(), ns, d.run_cnt));
        }
    }
    callbacks.sort_by(|a, b| (b.1 * b.2 as f64).total_cmp(&(a.1 * a.2 as f64)));
    Ok(LiveRound {
        round: r,
        bpf_ns_per_gb: total / gb,
        callbacks,
    })
}

/// Measures one algorithm, alternating the two builds.
fn measure(a: &Algorithm, index: usize, opts: &PerfOptions) -> Result<LiveResult> {
    let defaults = a.resolve_params(&[])?;
    let live_cc = format!("lv_{}", a.key);
    let const_cc = format!("ro_{}", a.key);
    // Unpinned registrations: dropping them (any error, or the end) unregisters both.
    let live_reg = a.load(&live_cc, &defaults)?;
    let const_reg = load_constant(a, &const_cc)?;
    if live_reg.link.is_none() || const_reg.link.is_none() {
        bail!("{live_cc} or {const_cc} is registered already (a crashed run?)");
    }
    let (n, _) = schedule(opts.site, opts.quick);
    let _stats = StatsGuard::enable()?;
    transfer(&live_cc, 0.3, &opts.stop)?;
    transfer(&const_cc, 0.3, &opts.stop)?;
    let mut res = LiveResult {
        key: a.key.into(),
        live: Vec::new(),
        constant: Vec::new(),
    };
    for i in 0..n {
        let live_first = (i + index).is_multiple_of(2);
        for live in [live_first, !live_first] {
            if opts.stopped() {
                return Ok(res);
            }
            if live {
                res.live.push(round(&live_cc, &live_reg, opts)?);
            } else {
                res.constant.push(round(&const_cc, &const_reg, opts)?);
            }
        }
    }
    Ok(res)
}

/// One metric of the table: its name, unit and how to read it from a round.
type Metric = (String, &'static str, Box<dyn Fn(&LiveRound) -> Option<f64>>);

/// The table rows of one algorithm.
fn rows_of(r: &LiveResult, site: Site) -> Vec<Row> {
    let item = format!("{}: live (.data) vs constant (.rodata)", r.key);
    let mut rows = Vec::new();
    let hot = r
        .constant
        .first()
        .and_then(|x| x.callbacks.first())
        .map(|c| c.0.clone())
        .unwrap_or_default();
    let hot_ns = |x: &LiveRound, cb: &str| x.callbacks.iter().find(|c| c.0 == cb).map(|c| c.1);
    let metrics: Vec<Metric> = vec![
        (
            "BPF run time per GB (all callbacks)".into(),
            "ms/GB",
            Box::new(|x: &LiveRound| Some(x.bpf_ns_per_gb / 1e6)),
        ),
        (
            format!("BPF run time per call of {hot}"),
            "ns",
            Box::new(move |x: &LiveRound| hot_ns(x, &hot)),
        ),
        (
            "throughput".into(),
            "Gbit/s",
            Box::new(|x: &LiveRound| Some(x.round.gbit_s))
                as Box<dyn Fn(&LiveRound) -> Option<f64>>,
        ),
    ];
    for (metric, unit, pick) in metrics {
        let lv: Vec<f64> = r.live.iter().filter_map(&pick).collect();
        let cv: Vec<f64> = r.constant.iter().filter_map(&pick).collect();
        if lv.is_empty() || cv.is_empty() {
            continue;
        }
        let (lm, llo, lhi) = spread(&lv);
        let (cm, clo, chi) = spread(&cv);
        rows.push(
            Row::versus(
                Part::Live,
                site,
                &item,
                &metric,
                unit,
                lm,
                "constant build",
                cm,
            )
            .with_note(format!(
                "median of {} alternating rounds; live {} to {}, constant {} to {}",
                lv.len(),
                super::fmt_num(llo),
                super::fmt_num(lhi),
                super::fmt_num(clo),
                super::fmt_num(chi)
            )),
        );
    }
    rows
}

/// Runs the part on `opts.site`.
///
/// Errors: the namespace cannot be made, a build does not load, a transfer fails. The
/// namespace and both registrations are removed in all cases.
pub fn run(opts: &PerfOptions) -> Result<PartResult> {
    let ns = LoopbackNetns::create(NETNS, Some(MTU))?;
    ns.set_offloads(&["tso", "gso", "gro"], false)?;
    let mut out = PartResult::default();
    let mut details = Vec::new();
    for (i, a) in algorithms(opts.quick).into_iter().enumerate() {
        if opts.stopped() {
            break;
        }
        match measure(a, i, opts) {
            Ok(r) => {
                out.rows.extend(rows_of(&r, opts.site));
                details.push(r);
            }
            Err(e) => out.notes.push(format!("{}: not measured: {e:#}", a.key)),
        }
    }
    drop(ns);
    if details.is_empty() {
        bail!("no algorithm could be measured: {}", out.notes.join("; "));
    }
    let (n, secs) = schedule(opts.site, opts.quick);
    out.notes.push(format!(
        "one bulk flow over lo (MTU {MTU}, offloads off), {n} rounds of {secs} s per build, \
         alternating; BPF stats on in every round; both builds with the paper defaults; \
         median BPF time per GB live / constant = {:.3}",
        median(
            &details
                .iter()
                .filter_map(|d| {
                    let l: Vec<f64> = d.live.iter().map(|x| x.bpf_ns_per_gb).collect();
                    let c: Vec<f64> = d.constant.iter().map(|x| x.bpf_ns_per_gb).collect();
                    (!l.is_empty() && !c.is_empty()).then(|| median(&l) / median(&c))
                })
                .collect::<Vec<_>>()
        )
    ));
    out.details = serde_json::to_value(&details)?;
    std::fs::write(
        opts.dir.join("live.json"),
        serde_json::to_string_pretty(&details)?,
    )?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_with_live_tunables_has_a_constant_build() {
        let algos = algorithms(false);
        assert!(!algos.is_empty());
        for a in algos {
            let obj = a.object_const.expect("constant build");
            let info = cctl_loader::object::inspect(obj, Path::new("const")).unwrap();
            let live = info.live.expect("constant build has cctl_live");
            assert_eq!(live.section, ".rodata", "{}", a.key);
        }
    }
}
