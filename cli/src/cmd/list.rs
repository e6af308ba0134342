//! `cctl list`: carried algorithms, and the kernel's registered congestion controls.

use anyhow::Result;
use cctl_loader::{algos, kernel, registry};

use crate::exit;

/// Arguments of `cctl list`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// One JSON object per line instead of tables.
    #[arg(long)]
    json: bool,
    /// Also show each algorithm's parameters (key, unit, range, default), profiles
    /// and the variables `cctl trace` shows for it.
    #[arg(long, short)]
    params: bool,
}

/// Runs `cctl list`.
pub fn run(args: Args) -> Result<i32> {
    let available = kernel::available_ccs().unwrap_or_default();
    let default = kernel::default_cc().unwrap_or_default();
    let loaded = registry::list_loaded().unwrap_or_default();

    if args.json {
        for a in algos::ALGORITHMS {
            let line = serde_json::json!({
                "kind": "algorithm", "key": a.key, "cc_name": a.cc_name, "summary": a.summary,
                "paper": a.paper, "spec": a.spec, "native": a.native, "params": a.params,
                "profiles": a.profiles, "vars": a.var_docs.iter().map(|(n, d)| serde_json::json!({"name": n, "doc": d})).collect::<Vec<_>>(),
            });
            println!("{line}");
        }
        for name in &available {
            let ours = loaded.iter().find(|l| &l.name == name);
            let line = serde_json::json!({
                "kind": "registered", "name": name, "default": *name == default,
                "cctl": ours.is_some(), "algo": ours.map(|o| o.algo.clone()),
                "params": ours.map(|o| o.params.clone()),
            });
            println!("{line}");
        }
        return Ok(exit::OK);
    }

    println!("Algorithms carried by cctl (cctl load <key>):");
    println!("  {:<9} {:<13} {:<80} PAPER", "KEY", "REGISTERS", "SUMMARY");
    for a in algos::ALGORITHMS {
        println!(
            "  {:<9} {:<13} {:<80} {}",
            a.key, a.cc_name, a.summary, a.paper
        );
        if args.params {
            for p in a.profiles {
                let vals: Vec<String> = p.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
                println!(
                    "    profile {} (registers {}_{}): {} [{}]",
                    p.name,
                    a.cc_name,
                    p.tag,
                    p.doc,
                    vals.join(" ")
                );
            }
            if !a.var_docs.is_empty() {
                println!(
                    "    trace vars: {}",
                    a.var_docs
                        .iter()
                        .map(|(n, d)| format!("{n} ({d})"))
                        .collect::<Vec<_>>()
                        .join("; ")
                );
            }
            println!(
                "{}",
                a.params_help()
                    .lines()
                    .map(|l| format!("    {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
    println!();
    println!("Registered in the kernel (/proc/sys/net/ipv4/tcp_available_congestion_control):");
    for name in &available {
        let mut notes = Vec::new();
        if *name == default {
            notes.push("default".to_string());
        }
        if let Some(l) = loaded.iter().find(|l| &l.name == name) {
            let changed: Vec<String> = algos::find(&l.algo)
                .map(|a| {
                    a.params
                        .iter()
                        .filter(|p| l.params.get(p.key).is_some_and(|v| *v != p.default))
                        .map(|p| format!("{}={}", p.key, l.params[p.key]))
                        .collect()
                })
                .unwrap_or_default();
            let mut s = format!("cctl: {}", l.algo);
            if !changed.is_empty() {
                s += &format!(" ({})", changed.join(", "));
            }
            if let Some(pid) = l.owner_pid {
                s += &if l.is_orphan() {
                    format!(", orphan of crashed pid {pid}: `cctl unload {}`", l.name)
                } else {
                    format!(", owned by pid {pid}")
                };
            }
            notes.push(s);
        }
        if notes.is_empty() {
            println!("  {name}");
        } else {
            println!("  {name:<16} [{}]", notes.join("; "));
        }
    }
    Ok(exit::OK)
}
