//! `cctl rollback`: return a registered name to an earlier version still loaded.

use anyhow::Result;
use cctl_loader::upgrade;

use crate::cmd::upgrade::print_swap;
use crate::exit;

/// Arguments of `cctl rollback`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Swaps back atomically, like `cctl upgrade`: new connections get the earlier \
version, established ones keep theirs. `cctl list` shows the versions loaded.\n\
Examples: cctl rollback bpf_htcp; cctl rollback bpf_htcp --to 1"
)]
pub struct Args {
    /// Registered name, or the key of an algorithm loaded under its default name.
    name: String,
    /// Version to return to (default: the one before the current); allowed 1 or more
    /// (versions count from 1; `cctl list` shows those loaded).
    #[arg(long, value_name = "N", value_parser = crate::cmd::args::whole::<u32>(1, None, ""))]
    to: Option<u32>,
    /// Print the swap as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `cctl rollback`.
pub fn run(args: Args) -> Result<i32> {
    let swap = upgrade::rollback(&args.name, args.to)
        .map_err(|e| anyhow::Error::new(e).context(format!("rolling back {}", args.name)))?;
    print_swap("rolled back", &swap, args.json)?;
    Ok(exit::OK)
}
