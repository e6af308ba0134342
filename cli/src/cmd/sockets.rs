//! `cctl sockets`: the census of TCP sockets and the congestion control each runs.

use std::collections::BTreeMap;

use anyhow::Result;
use cctl_loader::migrate;

use super::filter::FilterArgs;
use crate::exit;
use crate::out::outln;

/// Arguments of `cctl sockets`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Full TCP sockets in every state (not time-wait or request sockets). \
MAP_ID is the struct_ops map id of a BPF congestion control: it names the loaded version \
(see `cctl upgrade`); '-' = native.\n\
Examples: cctl sockets --summary; cctl sockets --all-netns --cc bpf_htcp --json"
)]
pub struct Args {
    /// Only sockets running this congestion control.
    #[arg(long)]
    cc: Option<String>,
    #[command(flatten)]
    filter: FilterArgs,
    /// Established sockets counted per namespace, congestion control and version.
    #[arg(long)]
    summary: bool,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// Runs `cctl sockets`.
pub fn run(args: Args) -> Result<i32> {
    if let Some(cc) = &args.cc {
        cctl_loader::catalogue::validate_cc_name(cc)?;
    }
    let wanted = args.cc.clone();
    let filter = args.filter.to_filter(args.cc);
    let list = if args.filter.all_netns {
        migrate::sockets_all_namespaces(&filter)
    } else {
        migrate::sockets(&filter)
    }
    .map_err(|e| anyhow::Error::new(e).context("listing TCP sockets"))?;
    // A filter on a name nothing is registered as: say so (a socket may still run a name
    // unregistered since, so this is a hint, not a refusal).
    if let Some(cc) = wanted.filter(|_| list.is_empty()) {
        let registered = cctl_loader::kernel::available_ccs().unwrap_or_default();
        if !registered.contains(&cc) {
            eprintln!(
                "cctl: no socket runs '{cc}', and no congestion control of that name is \
                 registered; registered: {}",
                registered.join(" ")
            );
        }
    }

    if args.summary {
        let mut by: BTreeMap<(String, String, Option<u32>), u64> = BTreeMap::new();
        for s in list.iter().filter(|s| s.state == "ESTABLISHED") {
            *by.entry((s.netns.clone(), s.cc.clone(), s.ca_map_id))
                .or_default() += 1;
        }
        if args.json {
            for ((netns, cc, map), n) in &by {
                let v = serde_json::json!({"netns": netns, "cc": cc, "ca_map_id": map, "established": n});
                outln!("{v}")?;
            }
        } else {
            outln!("{:<20} {:<16} {:<8} ESTABLISHED", "NETNS", "CC", "MAP_ID")?;
            for ((netns, cc, map), n) in &by {
                let map = map.map(|m| m.to_string()).unwrap_or("-".into());
                outln!("{netns:<20} {cc:<16} {map:<8} {n}")?;
            }
        }
        return Ok(exit::OK);
    }
    if args.json {
        for s in &list {
            outln!("{}", serde_json::to_string(s)?)?;
        }
    } else {
        outln!(
            "{:<12} {:<8} {:<24} {:<24} {:<12} {:<16} MAP_ID",
            "NETNS",
            "COOKIE",
            "LOCAL",
            "REMOTE",
            "STATE",
            "CC"
        )?;
        for s in &list {
            outln!(
                "{:<12} {:<8} {:<24} {:<24} {:<12} {:<16} {}",
                s.netns,
                s.cookie,
                format!("{}:{}", s.saddr, s.sport),
                format!("{}:{}", s.daddr, s.dport),
                s.state,
                s.cc,
                s.ca_map_id.map(|m| m.to_string()).unwrap_or("-".into())
            )?;
        }
    }
    Ok(exit::OK)
}
