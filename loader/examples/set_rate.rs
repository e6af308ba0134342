//! What a `cctl set` costs with many versions loaded (a benchmark, `make bench-set`): loads
//! htcp as `sr_htcp`, then for 1 and for 21 loaded versions (20 upgrades) makes sets of one
//! live tunable pair for `seconds` each and prints sets/s and ms per set, side by side.
//! Run as root: `cargo run --release -p cctl-loader --example set_rate -- [seconds]`
//! (default 5). The name is unloaded on every exit.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use cctl_loader::live;
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use cctl_loader::upgrade::{self, UpgradeOptions};

const NAME: &str = "sr_htcp";

/// Sets for `d`; returns (sets, seconds).
fn sets_for(d: Duration) -> Result<(u64, f64)> {
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < d {
        let pair = if n.is_multiple_of(2) {
            ["beta_min_pct=55", "beta_max_pct=75"]
        } else {
            ["beta_min_pct=60", "beta_max_pct=70"]
        };
        live::set(NAME, &pair.map(String::from)).context("cctl set")?;
        n += 1;
    }
    Ok((n, t0.elapsed().as_secs_f64()))
}

fn main() -> Result<()> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().context("seconds: a whole number"))
        .transpose()?
        .unwrap_or(5);
    if registry::list_loaded()?.iter().any(|l| l.name == NAME) {
        registry::unload(NAME)?;
    }
    registry::load(
        "htcp",
        &LoadOptions {
            name: Some(NAME.into()),
            ..Default::default()
        },
    )?;
    let guard = LoadGuard::new(NAME);
    let d = Duration::from_secs(seconds);
    let (n1, s1) = sets_for(d)?;
    for _ in 0..20 {
        upgrade::upgrade(NAME, &UpgradeOptions::default()).context("cctl upgrade")?;
    }
    let versions = registry::list_loaded()?
        .into_iter()
        .find(|l| l.name == NAME)
        .map_or(0, |l| l.versions.len());
    let (n21, s21) = sets_for(d)?;
    guard.unload()?;
    let (r1, r21) = (n1 as f64 / s1, n21 as f64 / s21);
    println!("| versions loaded | sets | s | sets/s | ms per set |");
    println!("|---:|---:|---:|---:|---:|");
    println!("| 1 | {n1} | {s1:.1} | {r1:.1} | {:.2} |", 1e3 / r1);
    println!(
        "| {versions} | {n21} | {s21:.1} | {r21:.1} | {:.2} |",
        1e3 / r21
    );
    println!("sets/s with {versions} versions / with 1: {:.2}", r21 / r1);
    Ok(())
}
