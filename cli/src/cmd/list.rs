//! `cctl list`: carried algorithms, and the kernel's registered congestion controls
//! with the versions of cctl's (`cctl upgrade`/`rollback`).

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use cctl_loader::bpfstats::{self, ProgStats, StatsGuard};
use cctl_loader::migrate::{self, SocketFilter};
use cctl_loader::registry::{LoadedCc, Version};
use cctl_loader::upgrade;
use cctl_loader::upgrade::SocketCounts;
use cctl_loader::{catalogue, kernel, registry};

use crate::exit;
use crate::out::outln;

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
    /// Also measure cctl's BPF programs (the collector, every registered CC's callbacks)
    /// with run-time statistics on for --bpf-stats-ms: runs and ns per call (root).
    #[arg(long)]
    bpf_stats: bool,
    /// How long --bpf-stats measures, in milliseconds; allowed 1 to 60000.
    #[arg(long, default_value_t = 1000, requires = "bpf_stats",
          value_parser = crate::cmd::args::whole::<u64>(1, Some(60_000), "ms"))]
    bpf_stats_ms: u64,
    /// Print the `--algo` list of `make compare` (every port with a Linux module, its
    /// `linux` profile where it has one, and the module as `native:<name>`), and exit.
    #[arg(long, conflicts_with_all = ["json", "params", "bpf_stats"])]
    compare_set: bool,
}

/// What `cctl list` shows of the kernel and of cctl's records, read once.
struct Listing {
    /// The kernel's registered congestion controls.
    available: Vec<String>,
    /// The kernel's default.
    default: String,
    /// cctl's registrations, with their live tunables.
    loaded: Vec<LoadedCc>,
    /// Records and pins of crashed runs.
    leftovers: Vec<std::path::PathBuf>,
    /// Registered and recorded, but pinned in a BPF file system this namespace lacks.
    unreachable: Vec<String>,
    /// Established sockets per (name, version); empty = unknown.
    counts: SocketCounts,
}

/// Runs `cctl list`.
pub fn run(args: Args) -> Result<i32> {
    if args.compare_set {
        outln!("{}", catalogue::ports_and_modules().join(","))?;
        return Ok(exit::OK);
    }
    let l = listing()?;
    if args.json {
        print_json(&l)?;
        if args.bpf_stats {
            print_bpf_stats(args.bpf_stats_ms, true)?;
        }
        return Ok(exit::OK);
    }
    print_algorithms(args.params)?;
    outln!()?;
    print_registered(&l)?;
    if !l.leftovers.is_empty() {
        outln!()?;
        outln!(
            "Leftovers of crashed runs (no registration; removed by the next cctl load, unload, \
             upgrade or rollback):"
        )?;
        for path in &l.leftovers {
            outln!("  {}", path.display())?;
        }
    }
    if args.bpf_stats {
        outln!()?;
        print_bpf_stats(args.bpf_stats_ms, false)?;
    }
    Ok(exit::OK)
}

/// Reads what the listing shows. Reads only: a listing changes nothing, leftovers of
/// crashed runs included. A planted or writable record or pin is refused (exit 9), not
/// shown as if cctl made it.
fn listing() -> Result<Listing> {
    let available = kernel::available_ccs().unwrap_or_default();
    let default = kernel::default_cc().unwrap_or_default();
    let mut loaded = registry::list_loaded()?;
    // Live tunables as they are in the kernel now (`cctl set`), not as recorded.
    loaded.iter_mut().for_each(cctl_loader::live::refresh);
    let leftovers = registry::leftovers()?;
    // Registered and recorded, but pinned in a BPF file system this namespace lacks.
    let unreachable = registry::unreachable()?;
    for name in &unreachable {
        eprintln!("cctl: warning: '{name}' {}", registry::unreachable_detail());
    }
    // Established sockets per (name, version), from a socket census of every network
    // namespace (a BPF iterator, root only); empty = unknown, not shown.
    let counts = if loaded.is_empty() {
        SocketCounts::new()
    } else {
        migrate::sockets_all_namespaces(&SocketFilter::default())
            .map(|v| {
                upgrade::socket_counts(
                    &loaded,
                    v.iter()
                        .filter(|s| s.state == "ESTABLISHED")
                        .map(|s| (s.cc.as_str(), s.ca_map_id)),
                )
            })
            .unwrap_or_default()
    };

    Ok(Listing {
        available,
        default,
        loaded,
        leftovers,
        unreachable,
        counts,
    })
}

/// The listing as JSON lines: `"kind"` algorithm, registered, leftover, unreachable.
fn print_json(l: &Listing) -> Result<()> {
    let Listing {
        available,
        default,
        loaded,
        leftovers,
        unreachable,
        counts,
    } = l;
    for a in catalogue::ALGORITHMS {
        let line = serde_json::json!({
            "format": cctl_loader::JSON_FORMAT, "kind": "algorithm", "key": a.key, "cc_name": a.cc_name, "summary": a.summary,
            "paper": a.paper, "spec": a.spec, "native": a.native, "params": a.params,
            "profiles": a.profiles, "vars": a.var_docs.iter().map(|(n, d)| serde_json::json!({"name": n, "doc": d})).collect::<Vec<_>>(),
        });
        outln!("{line}")?;
    }
    for name in available {
        let ours = loaded.iter().find(|l| &l.name == name);
        let line = serde_json::json!({
            "format": cctl_loader::JSON_FORMAT, "kind": "registered", "name": name, "default": name == default,
            "cctl": ours.is_some(), "algo": ours.map(|o| o.algo.clone()),
            "params": ours.map(|o| o.params.clone()),
            "version": ours.map(|o| o.version),
            "versions": ours.map(|o| versions_json(o, counts)),
        });
        outln!("{line}")?;
    }
    for path in leftovers {
        outln!(
            "{}",
            serde_json::json!({"format": cctl_loader::JSON_FORMAT, "kind": "leftover", "path": path.display().to_string()})
        )?;
    }
    for name in unreachable {
        outln!(
            "{}",
            serde_json::json!({"format": cctl_loader::JSON_FORMAT, "kind": "unreachable", "name": name,
                               "reason": registry::unreachable_detail()})
        )?;
    }
    Ok(())
}

/// The algorithms cctl carries; with `params`, each one's profiles, trace variables and
/// parameters.
fn print_algorithms(params: bool) -> Result<()> {
    outln!("Algorithms carried by cctl (cctl load <key>):")?;
    outln!("  {:<9} {:<13} {:<80} PAPER", "KEY", "REGISTERS", "SUMMARY")?;
    for a in catalogue::ALGORITHMS {
        outln!(
            "  {:<9} {:<13} {:<80} {}",
            a.key,
            a.cc_name,
            a.summary,
            a.paper
        )?;
        if params {
            for p in a.profiles {
                let vals: Vec<String> = p.values.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let papers = if p.papers.is_empty() {
                    String::new()
                } else {
                    format!(", {}'s tests run it", p.papers.join(", "))
                };
                outln!(
                    "    profile {} (registers {}_{}{papers}): {} [{}]",
                    p.name,
                    a.cc_name,
                    p.tag,
                    p.doc,
                    vals.join(" ")
                )?;
            }
            if !a.var_docs.is_empty() {
                outln!(
                    "    trace vars: {}",
                    a.var_docs
                        .iter()
                        .map(|(n, d)| format!("{n} ({d})"))
                        .collect::<Vec<_>>()
                        .join("; ")
                )?;
            }
            outln!(
                "{}",
                a.params_help()
                    .lines()
                    .map(|l| format!("    {l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )?;
        }
    }
    Ok(())
}

/// The kernel's registered congestion controls, with cctl's versions of its own.
fn print_registered(l: &Listing) -> Result<()> {
    let Listing {
        available,
        default,
        loaded,
        counts,
        ..
    } = l;
    outln!("Registered in the kernel (/proc/sys/net/ipv4/tcp_available_congestion_control):")?;
    for name in available {
        let mut notes = Vec::new();
        if name == default {
            notes.push("default".to_string());
        }
        if let Some(l) = loaded.iter().find(|x| &x.name == name) {
            let changed: Vec<String> = catalogue::find(&l.algo)
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
            outln!("  {name}")?;
        } else {
            outln!("  {name:<16} [{}]", notes.join("; "))?;
        }
        if let Some(l) = loaded.iter().find(|x| &x.name == name) {
            for line in versions_table(l, counts) {
                outln!("      {line}")?;
            }
        }
    }
    Ok(())
}

/// Turns BPF run-time statistics on for `ms`, and prints what cctl's programs did
/// meanwhile: one line (or JSON object, `"kind":"bpf_prog"`) per program and callback.
fn print_bpf_stats(ms: u64, json: bool) -> Result<()> {
    let ctx = "measuring cctl's BPF programs";
    let on = StatsGuard::enable().context(ctx)?;
    let before = bpfstats::cctl_programs().context(ctx)?;
    std::thread::sleep(std::time::Duration::from_millis(ms));
    let after = bpfstats::cctl_programs().context(ctx)?;
    drop(on);
    let window: Vec<ProgStats> = after
        .iter()
        .map(|p| {
            match before
                .iter()
                .find(|b| b.id == p.id && b.callback == p.callback)
            {
                Some(b) => p.since(b),
                None => p.clone(),
            }
        })
        .collect();
    if json {
        for p in &window {
            let mut v = serde_json::to_value(p)?;
            v["format"] = cctl_loader::JSON_FORMAT.into();
            v["kind"] = "bpf_prog".into();
            v["window_ms"] = ms.into();
            v["ns_per_call"] = serde_json::json!(p.ns_per_call());
            outln!("{v}")?;
        }
        return Ok(());
    }
    outln!("cctl's BPF programs over {ms} ms (run-time statistics on meanwhile):")?;
    outln!(
        "  {:<16} {:<4} {:<12} {:<8} {:<16} {:>10} NS/CALL",
        "CC",
        "VER",
        "CALLBACK",
        "PROG_ID",
        "NAME",
        "RUNS"
    )?;
    for p in &window {
        outln!(
            "  {:<16} {:<4} {:<12} {:<8} {:<16} {:>10} {}",
            p.cc.as_deref().unwrap_or("(collector)"),
            p.version.map(|v| format!("v{v}")).unwrap_or("-".into()),
            p.callback,
            p.id,
            p.name,
            p.run_cnt,
            p.ns_per_call()
                .map(|n| format!("{n:.0}"))
                .unwrap_or("-".into())
        )?;
    }
    if window.is_empty() {
        outln!("  (none: no collector running and no congestion control loaded by cctl)")?;
    }
    Ok(())
}

/// Tunables of a version that differ from its algorithm's defaults, `key=value`.
fn changed_params(v: &Version) -> Vec<String> {
    let defaults: BTreeMap<&str, u32> = catalogue::find(&v.algo)
        .map(|a| a.params.iter().map(|p| (p.key, p.default)).collect())
        .unwrap_or_default();
    v.params
        .iter()
        .filter(|(k, val)| defaults.get(k.as_str()) != Some(*val))
        .map(|(k, val)| format!("{k}={val}"))
        .collect()
}

/// One line per loaded version of a name, the current one marked `*`: version, map
/// id, what it is, non-default tunables, and (when `counts` knows) its sockets.
pub fn versions_table(rec: &LoadedCc, counts: &SocketCounts) -> Vec<String> {
    rec.versions
        .iter()
        .map(|v| {
            let mark = if v.version == rec.version { '*' } else { ' ' };
            let what = match &v.object {
                Some(p) => format!("object {}", p.display()),
                None => match &v.profile {
                    Some(p) => format!("{}@{p}", v.algo),
                    None => v.algo.clone(),
                },
            };
            let mut line = format!("{mark} v{:<3} map {:<7} {what}", v.version, v.map_id);
            let changed = changed_params(v);
            if !changed.is_empty() {
                line += &format!(" ({})", changed.join(", "));
            }
            if !counts.is_empty() {
                let n = counts
                    .get(&(rec.name.clone(), v.version))
                    .copied()
                    .unwrap_or(0);
                line += &format!(", {n} established socket(s)");
            }
            line
        })
        .collect()
}

/// The versions of a name as JSON: each [`Version`] with `current` and `sockets`
/// (null when no census was taken).
pub fn versions_json(rec: &LoadedCc, counts: &SocketCounts) -> Vec<serde_json::Value> {
    rec.versions
        .iter()
        .map(|v| {
            let mut j = serde_json::to_value(v).expect("Version serializes");
            j["current"] = serde_json::json!(v.version == rec.version);
            j["sockets"] = if counts.is_empty() {
                serde_json::Value::Null
            } else {
                serde_json::json!(counts
                    .get(&(rec.name.clone(), v.version))
                    .copied()
                    .unwrap_or(0))
            };
            j
        })
        .collect()
}
