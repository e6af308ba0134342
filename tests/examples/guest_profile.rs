//! Benchmark: where a sealed guest's instructions go on the virtual clock, per delivered
//! segment, by symbol (kernel function, BPF program, or user-space function).
//!
//! Run as root: `make bench-profile` or
//! `cargo build --release -p cctl && cargo run --release -p cctl-tests --example guest_profile -- [seconds] [top] [DIR]`
//! (defaults 10 s of traffic, the top 30; DIR: read a results directory it wrote before
//! instead of running). It runs `tests/scenarios/speed-one-flow.toml`
//! (one H-TCP flow, 250 Mbit/s, 42 ms, 20 % BDP) with `cctl bench run --clock virtual
//! --profile-guest`, whose guest samples every CPU with perf's cpu-clock event every
//! 100,000 ns of guest time. On the virtual clock (icount shift 0) guest time advances one
//! ns per instruction while the vCPU runs and jumps over halts, so a sample is 100,000
//! instructions and the samples in the idle loop's halt are idle time, not instructions.
//!
//! Only the samples from the flow's start to its end count (the run's `t0_ns` and the flow's
//! start and end in run.json, on the guest's monotonic clock, which perf's timestamps
//! follow). Instructions per segment = busy samples x 100,000 / the sender's
//! `tcpi_data_segs_out`. Prints the busy share, instructions per second of traffic and per
//! segment, and the top symbols with their share of the busy samples. The results directory
//! (with perf.data and the guest's kallsyms) stays under results/guest-profile/.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};

mod common;
use common::release_cctl;

/// The guest's sampling period in instructions (`cctl bench run --profile-guest`).
const PERIOD: f64 = 100_000.0;

/// Symbols where an idle vCPU halts; samples there are idle time.
const IDLE_SYMBOLS: &[&str] = &["pv_native_safe_halt", "native_safe_halt", "default_idle"];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let seconds: f64 = args
        .first()
        .map_or(Ok(10.0), |s| s.parse())
        .context("seconds")?;
    let top: usize = args.get(1).map_or(Ok(30), |s| s.parse()).context("top")?;
    let cctl = release_cctl()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("repo")?;
    let out = root.join("results/guest-profile");
    let dir = match args.get(2) {
        Some(d) => PathBuf::from(d),
        None => {
            let status = Command::new(&cctl)
                .args(["bench", "run"])
                .arg(root.join("tests/scenarios/speed-one-flow.toml"))
                .args(["--algo", "htcp", "--profile", "paper", "--clock", "virtual"])
                .args(["--vm", "always", "--seed", "1", "--profile-guest"])
                .args(["--duration-s", &seconds.to_string()])
                .arg("--out")
                .arg(&out)
                .status()
                .context("running cctl")?;
            ensure!(status.success(), "cctl bench run failed: {status}");
            newest(&out.join("speed-one-flow"))?
        }
    };
    let profile = Profile::read(&dir.join("slots/1"))?;
    profile.print(top, seconds);
    println!("results: {}", dir.display());
    Ok(())
}

/// The newest results directory under `dir` (their names are timestamps).
fn newest(dir: &Path) -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    dirs.sort();
    dirs.pop()
        .with_context(|| format!("no results in {}", dir.display()))
}

/// The samples of one slot's traffic window.
struct Profile {
    /// Busy samples by (symbol, where it lives).
    by_symbol: HashMap<(String, String), u64>,
    busy: u64,
    idle: u64,
    /// Data segments the senders sent.
    segments: u64,
    /// The window's length, s.
    window_s: f64,
}

impl Profile {
    /// Reads `slot/perf.data` (with `slot/kallsyms`) through `perf script`, keeping the
    /// samples between the first flow's start and the last flow's end (`slot/runs/*/run.json`).
    fn read(slot: &Path) -> Result<Profile> {
        let run = cctl_report::resume::completed_runs(slot)
            .into_values()
            .next()
            .with_context(|| format!("no completed run in {}", slot.display()))?;
        let t0 = run.t0_ns.context("run.json has no t0_ns")? as f64 / 1e9;
        let start = t0
            + run
                .flows
                .iter()
                .map(|f| f.started.as_secs_f64())
                .fold(f64::MAX, f64::min);
        let end = t0
            + run
                .flows
                .iter()
                .map(|f| f.ended.as_secs_f64())
                .fold(0.0, f64::max);
        let segments = run
            .flows
            .iter()
            .filter_map(|f| f.segments.as_ref().map(|s| u64::from(s.data_segs_out)))
            .sum();
        let script = Command::new("perf")
            .arg("script")
            .arg("-i")
            .arg(slot.join("perf.data"))
            .arg("--kallsyms")
            .arg(slot.join("kallsyms"))
            .args(["-F", "comm,tid,time,ip,sym,dso"])
            .output()
            .context("running perf script (Debian package linux-perf)")?;
        ensure!(
            script.status.success(),
            "perf script failed: {}",
            script.status
        );
        let mut p = Profile {
            by_symbol: HashMap::new(),
            busy: 0,
            idle: 0,
            segments,
            window_s: end - start,
        };
        for line in String::from_utf8_lossy(&script.stdout).lines() {
            let Some((time, sym, dso)) = parse(line) else {
                continue;
            };
            if time < start || time > end {
                continue;
            }
            if IDLE_SYMBOLS.contains(&sym) {
                p.idle += 1;
            } else {
                p.busy += 1;
                *p.by_symbol.entry((sym.into(), dso.into())).or_default() += 1;
            }
        }
        if p.busy + p.idle == 0 {
            bail!("no samples between {start:.3} s and {end:.3} s");
        }
        Ok(p)
    }

    fn print(&self, top: usize, seconds: f64) {
        let insns = self.busy as f64 * PERIOD;
        println!(
            "guest profile, one flow at 250 Mbit/s for {seconds} s: window {:.2} s, busy {:.1} %, \
             {:.3e} instructions/s of traffic, {} segments, {:.0} instructions per segment",
            self.window_s,
            100.0 * self.busy as f64 / (self.busy + self.idle) as f64,
            insns / self.window_s,
            self.segments,
            insns / self.segments.max(1) as f64,
        );
        let mut rows: Vec<_> = self.by_symbol.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        println!("{:>7} {:>9}  symbol (where)", "busy %", "insn/seg");
        for ((sym, dso), n) in rows.into_iter().take(top) {
            println!(
                "{:>7.2} {:>9.0}  {sym} ({dso})",
                100.0 * *n as f64 / self.busy as f64,
                *n as f64 * PERIOD / self.segments.max(1) as f64,
            );
        }
    }
}

/// One `perf script -F comm,tid,time,ip,sym,dso` line: `COMM TID TIME: IP SYM (DSO)`, where
/// COMM may hold spaces. Returns (time in s, symbol, dso); `None` for other lines.
fn parse(line: &str) -> Option<(f64, &str, &str)> {
    let (head, tail) = line.split_once(": ")?;
    let time: f64 = head.split_whitespace().last()?.parse().ok()?;
    let tail = tail.trim();
    let open = tail.rfind(" (")?;
    let dso = tail[open + 2..].trim_end_matches(')');
    let sym = tail[..open]
        .split_once(' ')
        .map_or("[unknown]", |(_, s)| s.trim());
    let dso = dso.rsplit('/').next().unwrap_or(dso);
    Some((time, sym, dso))
}
