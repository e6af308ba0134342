//! `cctl default`: show or set the network namespace's default congestion control.

use anyhow::Result;
use cctl_loader::{catalogue, kernel};

use crate::exit::{self, usage};
use crate::out::outln;

/// Arguments of `cctl default`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The default is per network namespace: this sets it for the namespace \
cctl runs in. Namespaces created afterwards start with the initial namespace's default; \
existing ones keep their own. Sockets that are already open keep their algorithm.\n\
Example: cctl default bpf_htcp"
)]
pub struct Args {
    /// Registered congestion-control name; without it, print the current default.
    name: Option<String>,
    /// Print the result as one JSON object: `{"default": NAME}`, or `{"old": .., "new": ..}`
    /// after a change.
    #[arg(long)]
    json: bool,
}

/// Runs `cctl default`.
pub fn run(args: Args) -> Result<i32> {
    let Some(name) = args.name else {
        let current = kernel::default_cc()?;
        if args.json {
            outln!("{}", serde_json::json!({ "default": current }))?;
        } else {
            outln!("{current}")?;
        }
        return Ok(exit::OK);
    };
    catalogue::validate_cc_name(&name)?;
    let available = kernel::available_ccs()?;
    if !available.contains(&name) {
        let hint = catalogue::find(&name)
            .map(|a| {
                format!(
                    " (did you mean `cctl load {}` first, then `cctl default {}`?)",
                    a.key, a.cc_name
                )
            })
            .unwrap_or_default();
        usage!(
            "'{name}' is not registered; registered: {}{hint}",
            available.join(" ")
        );
    }
    kernel::require_privileges("setting the default congestion control")?;
    let old = kernel::default_cc()?;
    kernel::set_default_cc(&name)?;
    if args.json {
        outln!("{}", serde_json::json!({ "old": old, "new": name }))?;
        return Ok(exit::OK);
    }
    outln!(
        "default congestion control of this network namespace: {old} -> {name}\n\
         (new sockets here use it; network namespaces created from now on inherit the initial \
         namespace's default; existing namespaces and open sockets are unchanged)"
    )?;
    Ok(exit::OK)
}
