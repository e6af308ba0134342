//! `cctl set`: change live tunables of a loaded algorithm (spec §18.5).

use anyhow::Result;
use cctl_loader::live;

use crate::exit;
use crate::out::outln;

/// Arguments of `cctl set`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Only live parameters change this way (`cctl list --params` marks them \
`live`); established and new flows see the values at their next ACK, and related keys given \
together change together. Load-time parameters change with `cctl upgrade NAME --param K=V`.\n\
Example: cctl set bpf_htcp beta_min_pct=60 beta_max_pct=70"
)]
pub struct Args {
    /// Registered name (or the key of an algorithm loaded under its default name).
    name: String,
    /// key=value, one or more (checked as `cctl load` checks them).
    #[arg(value_name = "KEY=VALUE", required = true)]
    assignments: Vec<String>,
    /// Print what was done as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `cctl set`.
pub fn run(args: Args) -> Result<i32> {
    let report = live::set(&args.name, &args.assignments)
        .map_err(|e| anyhow::Error::new(e).context(format!("setting {}", args.name)))?;
    if args.json {
        outln!("{}", serde_json::to_string(&report)?)?;
        return Ok(exit::OK);
    }
    for v in &report.versions {
        let which = if v.current { " (current)" } else { "" };
        match &v.skipped {
            Some(why) => outln!(
                "{} version {}{which}: not changed: {why}",
                report.name,
                v.version
            )?,
            None => {
                let changes: Vec<String> = v
                    .changed
                    .iter()
                    .map(|(k, (old, new))| format!("{k} {old} -> {new}"))
                    .collect();
                outln!(
                    "{} version {}{which}: {}",
                    report.name,
                    v.version,
                    changes.join(", ")
                )?;
            }
        }
    }
    Ok(exit::OK)
}
