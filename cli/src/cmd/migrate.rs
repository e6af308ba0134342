//! `cctl migrate`: move established TCP flows from one congestion control to another.

use anyhow::Result;
use cctl_loader::migrate::{self, Action, MigrateReport, MigrateRequest};

use super::filter::FilterArgs;
use crate::exit;
use crate::out::outln;

/// Arguments of `cctl migrate`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Only ESTABLISHED sockets are moved (cwnd and ssthresh are kept; the new \
algorithm starts with fresh state). A filter that matches nothing is an error (exit 7) and \
changes nothing. In a namespace other than the initial one the target must be in \
net.ipv4.tcp_allowed_congestion_control (the kernel's rule for a namespace's default) unless \
--allow-restricted is given. With --all-netns every namespace is checked before any socket \
moves, and there is one report per namespace with matches.\n\
Exit codes: 0 all moved, 1 some failed (see the report), 2 bad input, 5 target not allowed, 7 nothing matched.\n\
Examples: cctl migrate --from cubic --to bpf_htcp; \
cctl migrate --from cubic --to bpf_htcp --netns blue --port 5201 --dry-run; \
cctl migrate --from cubic --to bpf_htcp --all-netns --cookie 4242"
)]
pub struct Args {
    /// Congestion control the sockets run now.
    #[arg(long)]
    from: String,
    /// Congestion control to move them to (must be registered).
    #[arg(long)]
    to: String,
    #[command(flatten)]
    filter: FilterArgs,
    /// Show what would move; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Allow a target outside net.ipv4.tcp_allowed_congestion_control in a non-initial
    /// namespace.
    #[arg(long)]
    allow_restricted: bool,
    /// List every matching socket with its outcome.
    #[arg(long, short)]
    verbose: bool,
    /// One JSON object per line: each matching socket (`"kind":"socket"`), then the report.
    #[arg(long)]
    json: bool,
}

/// Prints a report as text (used by `cctl unload --migrate-to` too).
pub fn print_report(r: &MigrateReport, verbose: bool) -> Result<()> {
    if verbose {
        outln!(
            "{:<8} {:<22} {:<22} {:<12} {:<16} {:<8} NOW",
            "COOKIE",
            "LOCAL",
            "REMOTE",
            "STATE",
            "ACTION",
            "MAP_ID"
        )?;
        for s in &r.sockets {
            let i = &s.socket;
            let action = match (s.action, s.errno) {
                (Action::Failed, Some(e)) => format!("failed({e})"),
                (a, _) => serde_json::to_value(a)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
            };
            outln!(
                "{:<8} {:<22} {:<22} {:<12} {:<16} {:<8} {}{}",
                i.cookie,
                format!("{}:{}", i.saddr, i.sport),
                format!("{}:{}", i.daddr, i.dport),
                i.state,
                action,
                i.ca_map_id.map(|m| m.to_string()).unwrap_or("-".into()),
                s.new_cc,
                s.new_ca_map_id
                    .map(|m| format!(" (map {m})"))
                    .unwrap_or_default()
            )?;
        }
    }
    let verb = if r.dry_run { "would move" } else { "moved" };
    outln!(
        "{} -> {} in netns {}: matched {} established, {verb} {}, failed {}{} ({} TCP sockets walked in {:.3} ms)",
        r.from,
        r.to,
        r.netns,
        r.matched,
        if r.dry_run { r.matched } else { r.moved },
        r.failed,
        if r.skipped_not_established > 0 {
            format!(
                ", {} not established left alone",
                r.skipped_not_established
            )
        } else {
            String::new()
        },
        r.sockets_seen,
        r.elapsed_us as f64 / 1000.0
    )?;
    for (why, n) in &r.failures {
        outln!("  {n} failed: {why}")?;
    }
    Ok(())
}

/// Runs `cctl migrate`.
pub fn run(args: Args) -> Result<i32> {
    let req = MigrateRequest {
        from: args.from,
        to: args.to,
        filter: args.filter.to_filter(None),
        dry_run: args.dry_run,
        allow_restricted: args.allow_restricted,
    };
    let reports = if args.filter.all_netns {
        migrate::migrate_all_namespaces(&req)
    } else {
        migrate::migrate(&req).map(|r| vec![r])
    }
    .map_err(|e| anyhow::Error::new(e).context(format!("migrating {} -> {}", req.from, req.to)))?;
    for report in &reports {
        if args.json {
            for s in &report.sockets {
                let mut v = serde_json::to_value(s)?;
                v["kind"] = "socket".into();
                outln!("{v}")?;
            }
            let mut v = serde_json::to_value(report)?;
            v.as_object_mut().map(|o| o.remove("sockets"));
            v["kind"] = "report".into();
            outln!("{v}")?;
        } else {
            print_report(report, args.verbose)?;
        }
    }
    Ok(if reports.iter().any(|r| r.failed > 0) {
        exit::FAILURE
    } else {
        exit::OK
    })
}
