//! Benchmark: host seconds per second of traffic on the virtual clock, an older `cctl`
//! against this one, side by side in the same minutes.
//!
//! Run as root: `make bench-speed` (builds the revision `SPEED_BASE` into
//! target/speed-base/) or
//! `cargo run --release -p cctl-tests --example guest_speed -- OLD_CCTL [seconds]`
//! (default 20 s of traffic per run). For each point of `tests/scenarios/speed-*.toml`
//! (two flows at 250 and at 10 Mbit/s, one flow at 250 Mbit/s; 42 ms, 20 % BDP, H-TCP,
//! seed 1), both binaries run the point at the same time, each in its own sealed guest
//! (`--clock virtual --vm always --jobs 1`): once for 1 s of traffic and once for `seconds`.
//! A run's host wall time is the whole `cctl bench run` process. Host seconds per traffic
//! second are the slope between the two runs, `(wall(seconds) - wall(1)) / (seconds - 1)`;
//! the fixed cost per run (boot, setup, report) is `wall(1) - slope`. Prints one row per
//! point with old, new and new/old, and each long run's goodput (Mbit/s, all flows) as a
//! glance at whether the results moved. Results directories stay in results/bench-speed/.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{ensure, Context, Result};

mod common;
use common::release_cctl;

/// (label, scenario file under tests/scenarios, point index).
const POINTS: [(&str, &str, &str); 3] = [
    ("250 Mbit/s, two flows", "speed-two-flows.toml", "0"),
    ("250 Mbit/s, one flow", "speed-one-flow.toml", "0"),
    ("10 Mbit/s, two flows", "speed-two-flows.toml", "1"),
];

/// One run's host wall time, s, and its goodput over all flows, Mbit/s.
struct Timed {
    wall_s: f64,
    goodput_mbit: f64,
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let old = PathBuf::from(
        args.first()
            .context("usage: guest_speed OLD_CCTL [seconds]")?,
    );
    ensure!(old.exists(), "{} missing", old.display());
    let seconds: f64 = args
        .get(1)
        .map_or(Ok(20.0), |s| s.parse())
        .context("seconds")?;
    ensure!(seconds > 1.0, "seconds: more than 1");
    let new = release_cctl()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("repo")?;
    let out = root.join("results/bench-speed").join(stamp());
    println!(
        "{:<24} {:>9} {:>9} {:>7}   {:>8} {:>8}   {:>8} {:>8}",
        "point (s/s = host s per traffic s)",
        "old s/s",
        "new s/s",
        "new/old",
        "old fix",
        "new fix",
        "old Mb/s",
        "new Mb/s"
    );
    for (label, file, point) in POINTS {
        let scenario = root.join("tests/scenarios").join(file);
        let mut walls = Vec::new();
        for d in [1.0, seconds] {
            let tag = format!("{}-p{point}-{d}s", file.trim_end_matches(".toml"));
            let (o, n) = std::thread::scope(|s| {
                let o = s.spawn(|| run(&old, &scenario, point, d, &out.join(format!("old-{tag}"))));
                let n = s.spawn(|| run(&new, &scenario, point, d, &out.join(format!("new-{tag}"))));
                (o.join(), n.join())
            });
            let o = o.map_err(|_| anyhow::anyhow!("panicked"))??;
            let n = n.map_err(|_| anyhow::anyhow!("panicked"))??;
            walls.push((o, n));
        }
        let slope = |short: f64, long: f64| (long - short) / (seconds - 1.0);
        let (s, l) = (&walls[0], &walls[1]);
        let so = slope(s.0.wall_s, l.0.wall_s);
        let sn = slope(s.1.wall_s, l.1.wall_s);
        println!(
            "{label:<24} {so:>9.2} {sn:>9.2} {:>7.2}   {:>7.1}s {:>7.1}s   {:>8.1} {:>8.1}",
            sn / so,
            s.0.wall_s - so,
            s.1.wall_s - sn,
            l.0.goodput_mbit,
            l.1.goodput_mbit,
        );
    }
    println!("results: {}", out.display());
    Ok(())
}

/// Runs `point` of `scenario` for `seconds` with `cctl` into `out`; its wall time and goodput.
fn run(cctl: &Path, scenario: &Path, point: &str, seconds: f64, out: &Path) -> Result<Timed> {
    let t = Instant::now();
    let status = Command::new(cctl)
        .args(["bench", "run"])
        .arg(scenario)
        .args(["--algo", "htcp", "--profile", "paper", "--points", point])
        .args([
            "--clock", "virtual", "--vm", "always", "--jobs", "1", "--seed", "1",
        ])
        .args(["--duration-s", &seconds.to_string()])
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("running {}", cctl.display()))?;
    let wall_s = t.elapsed().as_secs_f64();
    ensure!(
        status.success(),
        "{} failed ({status}); results in {}",
        cctl.display(),
        out.display()
    );
    Ok(Timed {
        wall_s,
        goodput_mbit: goodput_mbit(out, seconds)?,
    })
}

/// Bytes delivered by all flows of the combined results under `out` (`<scenario>/<stamp>/`),
/// over `seconds`, in Mbit/s.
fn goodput_mbit(out: &Path, seconds: f64) -> Result<f64> {
    let mut bytes = 0u64;
    let mut runs = 0;
    for sc in std::fs::read_dir(out)?.flatten() {
        for stamp in std::fs::read_dir(sc.path())?.flatten() {
            for run in cctl_report::resume::completed_runs(&stamp.path()).into_values() {
                runs += 1;
                bytes += run.flows.iter().map(|f| f.bytes).sum::<u64>();
            }
        }
    }
    ensure!(runs > 0, "no completed run under {}", out.display());
    Ok(bytes as f64 * 8.0 / seconds / 1e6)
}

/// A UTC timestamp for the results directory's name.
fn stamp() -> String {
    chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string()
}
