//! `cctl unload`: unregister an algorithm that cctl loaded.

use anyhow::Result;
use cctl_loader::registry;

use crate::exit;

/// Arguments of `cctl unload`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: cctl unload htcp   (or: cctl unload bpf_htcp)\n\
Established sockets that use it keep running it until they close."
)]
pub struct Args {
    /// Registered name or algorithm key.
    name: String,
}

/// Runs `cctl unload`.
pub fn run(args: Args) -> Result<i32> {
    let rec = registry::unload(&args.name)
        .map_err(|e| anyhow::Error::new(e).context(format!("unloading {}", args.name)))?;
    println!("unloaded '{}' ({})", rec.name, rec.algo);
    Ok(exit::OK)
}
