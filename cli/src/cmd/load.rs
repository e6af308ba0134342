//! `cctl load`: register one of cctl's algorithms in the kernel.

use anyhow::Result;
use cctl_loader::registry::{self, LoadOptions};

use crate::exit;
use crate::out::outln;

/// Arguments of `cctl load`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Loading a name that is already registered is refused (not idempotent): \
unload it first, or pick another --name.\nExamples: cctl load htcp --param delta_l_ms=500; cctl load cubic --profile linux"
)]
pub struct Args {
    /// Algorithm key or default name (`cctl list` shows them).
    algo: String,
    /// Register under this name instead of bpf_<algo> (1-15 chars of [A-Za-z0-9_]).
    #[arg(long)]
    name: Option<String>,
    /// Start from a named parameter set (e.g. `linux`: the Linux module's constants);
    /// registers as bpf_<algo>_<tag> unless --name is given.
    #[arg(long)]
    profile: Option<String>,
    /// Set a tunable, key=value; repeatable (`cctl list --params` shows keys, units, ranges).
    #[arg(long = "param", value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// Print the registration as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `cctl load`.
pub fn run(args: Args) -> Result<i32> {
    let opts = LoadOptions {
        name: args.name,
        profile: args.profile,
        params: args.params,
        owned: false,
    };
    let rec = registry::load(&args.algo, &opts)
        .map_err(|e| anyhow::Error::new(e).context(format!("loading {}", args.algo)))?;
    if args.json {
        outln!("{}", serde_json::to_string(&rec)?)?;
    } else {
        outln!(
            "loaded {} as '{}' (pinned at {}/{}); select it with `sysctl net.ipv4.tcp_congestion_control={}`, \
             `iperf3 -C {}` or setsockopt(TCP_CONGESTION)",
            rec.algo, rec.name, registry::PIN_DIR, rec.name, rec.name, rec.name
        )?;
    }
    Ok(exit::OK)
}
