//! `cctl bench diff A B`: two results directories compared sample by sample
//! ([`cctl_report::diff`]); prints the first place they differ, or "identical".

use std::path::PathBuf;

use anyhow::Result;
use cctl_report::diff::{self, Diff, Difference};
use cctl_report::record::Metadata;

use crate::exit::{self, usage};
use crate::out::outln;

/// Arguments of `cctl bench diff`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: cctl bench diff results/calibrate/20261128T101500Z \
results/calibrate/20261128T103000Z\n\n\
Every run both directories completed is compared by its result digest first (run.json's \
digest, recomputed from the files; a file changed or cut short after the run shows as a \
digest mismatch), then samples.csv, queue.csv and delays.csv row \
by row and field by field, then close.json and run.json. Not differences: run.json's wall_s, \
cpu_busy and cpus (the host, not the run); socket and object names (cookie, netns_cookie, \
sport, dport, local_port, ca_map_id); where a run started on the guest's clock (ts_ns is \
compared as time since the run's t0_ns); metadata.json and request.json (start time, paths, \
version stamp). Both directories must hold the same scenario, profile, clock, QEMU, cctl \
version and build, and kernel. Exit codes: 0 identical, 1 different, 2 bad input."
)]
pub struct DiffArgs {
    /// The first results directory.
    a: PathBuf,
    /// The second results directory.
    b: PathBuf,
    /// Print the comparison as one JSON object (runs, first difference, sample counts).
    #[arg(long)]
    json: bool,
}

/// A results directory's metadata; anything unreadable is bad input (exit 2).
fn metadata(dir: &std::path::Path) -> Result<Metadata> {
    super::results_dir(dir)?;
    match cctl_report::merge::read_metadata(dir) {
        Ok(m) => Ok(m),
        Err(e) => usage!("{e:#}"),
    }
}

/// One place as a line: `flow 2, t = 3.214000 s, samples.csv row 812 cwnd: 118 vs 119`.
fn place(d: &Difference) -> String {
    let mut s = String::new();
    if let Some(f) = d.flow {
        s += &format!("flow {f}, ");
    }
    if let Some(t) = d.t_s {
        s += &format!("t = {t:.6} s, ");
    }
    format!("{s}{} {}: {} vs {}", d.file, d.field, d.a, d.b)
}

/// Runs `cctl bench diff`.
pub fn run(a: DiffArgs) -> Result<i32> {
    let (ma, mb) = (metadata(&a.a)?, metadata(&a.b)?);
    if let Err(e) = diff::comparable(&ma, &mb) {
        usage!(
            "cannot compare {} with {}: {e}",
            a.a.display(),
            a.b.display()
        );
    }
    let d = diff::diff(&a.a, &a.b)?;
    if a.json {
        print_json(&d)?;
    } else {
        print_text(&d)?;
    }
    Ok(if d.identical() {
        exit::OK
    } else {
        exit::FAILURE
    })
}

fn print_json(d: &Diff) -> Result<()> {
    let first = d
        .first()
        .map(|(run, diff)| serde_json::json!({ "run": run, "difference": diff }));
    let v = serde_json::json!({
        "identical": d.identical(),
        "samples": d.samples(),
        "first": first,
        "runs": d.runs,
        "only_in_a": d.only_in_a,
        "only_in_b": d.only_in_b,
    });
    outln!("{v}")?;
    Ok(())
}

fn print_text(d: &Diff) -> Result<()> {
    for r in &d.runs {
        if r.digest_a == r.digest_b {
            outln!("{}: digest {}", r.run, r.digest_a)?;
        } else {
            outln!("{}: digest {} vs {}", r.run, r.digest_a, r.digest_b)?;
        }
        for side in &r.mismatched {
            let which = if *side == 'a' { "first" } else { "second" };
            outln!(
                "{}: digest mismatch: the {which} directory's files no longer give the digest its run.json recorded (changed or cut short after the run)",
                r.run
            )?;
        }
        match &r.first {
            None => outln!("{}: identical ({} samples)", r.run, r.samples)?,
            Some(x) => outln!(
                "{}: differs after {} of {} samples: {}",
                r.run,
                r.identical_samples,
                r.samples,
                place(x)
            )?,
        }
    }
    for (side, runs) in [("first", &d.only_in_a), ("second", &d.only_in_b)] {
        for r in runs.iter() {
            outln!("{r}: completed in the {side} directory only")?;
        }
    }
    match d.first() {
        _ if d.identical() => outln!("identical: {} samples compared in {} runs", d.samples(), d.runs.len())?,
        None if d.runs.iter().any(|r| !r.mismatched.is_empty()) => outln!(
            "different: a run's files do not match the digest its run.json recorded"
        )?,
        Some((run, x)) => outln!("first difference: {run}, {}", place(x))?,
        None => outln!(
            "different: the directories completed different runs ({} samples of the common runs identical)",
            d.samples()
        )?,
    }
    Ok(())
}
