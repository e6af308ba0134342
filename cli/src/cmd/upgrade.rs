//! `cctl upgrade`: replace the implementation behind a registered name in place.

use std::path::PathBuf;

use anyhow::Result;
use cctl_loader::registry::Version;
use cctl_loader::upgrade::{self, Swap, UpgradeOptions};

use crate::exit;
use crate::out::outln;

/// Arguments of `cctl upgrade`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "New connections get the new version at once; established ones keep running \
the version they started with (`cctl list` shows the versions). Earlier versions stay loaded \
until `cctl unload`, so `cctl rollback NAME` can return to them. Parameters start from the \
current version's values.\n\
Examples: cctl upgrade htcp --param beta_max_pct=70; cctl upgrade bpf_htcp --object my_htcp.bpf.o"
)]
pub struct Args {
    /// Registered name, or the key of an algorithm loaded under its default name.
    name: String,
    /// Set a tunable, key=value, over the current version's values; repeatable
    /// (`cctl list --params` shows keys, units, ranges).
    #[arg(long = "param", value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// Start from this profile's values instead of the current version's.
    #[arg(long, conflicts_with = "object")]
    profile: Option<String>,
    /// Load this BPF object instead: exactly one struct_ops map, a tcp_congestion_ops
    /// (its name is set to the registered name).
    #[arg(long, value_name = "FILE", conflicts_with = "params")]
    object: Option<PathBuf>,
    /// Print the swap as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `v2 (map 123, htcp beta_max_pct=70)`: a version, its map and what changed.
pub fn describe(v: &Version) -> String {
    let what = match &v.object {
        Some(p) => format!("object {}", p.display()),
        None => {
            let mut s = v.algo.clone();
            if let Some(p) = &v.profile {
                s += &format!("@{p}");
            }
            s
        }
    };
    format!("v{} (map {}, {what})", v.version, v.map_id)
}

/// Parameters whose values differ between two versions, `k=old→new`.
pub fn param_changes(from: &Version, to: &Version) -> Vec<String> {
    if from.object.is_some() || to.object.is_some() {
        return Vec::new();
    }
    to.params
        .iter()
        .filter(|(k, v)| from.params.get(*k) != Some(v))
        .map(|(k, v)| match from.params.get(k) {
            Some(old) => format!("{k}={old}→{v}"),
            None => format!("{k}={v}"),
        })
        .collect()
}

/// Prints a swap, as text or one JSON object.
pub fn print_swap(verb: &str, swap: &Swap, json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string(swap)?)?;
        return Ok(());
    }
    let changes = param_changes(&swap.from, &swap.to);
    outln!(
        "{verb} '{}': {} → {}{}; new connections get v{}, established ones keep the version they run",
        swap.name,
        describe(&swap.from),
        describe(&swap.to),
        if changes.is_empty() {
            String::new()
        } else {
            format!(" [{}]", changes.join(", "))
        },
        swap.to.version
    )?;
    Ok(())
}

/// Runs `cctl upgrade`.
pub fn run(args: Args) -> Result<i32> {
    let opts = UpgradeOptions {
        params: args.params,
        profile: args.profile,
        object: args.object,
    };
    let swap = upgrade::upgrade(&args.name, &opts)
        .map_err(|e| anyhow::Error::new(e).context(format!("upgrading {}", args.name)))?;
    print_swap("upgraded", &swap, args.json)?;
    Ok(exit::OK)
}
