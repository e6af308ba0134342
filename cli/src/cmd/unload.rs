//! `cctl unload`: unregister an algorithm that cctl loaded, refusing while established
//! flows use it unless told where to move them (`--migrate-to`).

use anyhow::Result;
use cctl_loader::migrate::{self, MigrateRequest, SocketFilter};
use cctl_loader::{catalogue, policy, registry, Error};

use crate::exit;
use crate::out::outln;

/// Arguments of `cctl unload`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Established TCP sockets still using the algorithm, in any network \
namespace (cctl's own, those in /run/netns and those of running processes), make unload \
refuse (exit 6) with their count; --migrate-to NAME moves them to NAME first (as `cctl migrate` \
does, namespace by namespace) and unloads only if none is left. Sockets in other states \
(listening, closing) keep the algorithm until they close.\n\
Examples: cctl unload htcp   (or: cctl unload bpf_htcp); cctl unload bpf_htcp --migrate-to cubic"
)]
pub struct Args {
    /// Registered name or algorithm key.
    name: String,
    /// Move the established sockets that use it to this congestion control first.
    #[arg(long, value_name = "NAME")]
    migrate_to: Option<String>,
    /// With --migrate-to: allow a target outside net.ipv4.tcp_allowed_congestion_control
    /// in non-initial namespaces.
    #[arg(long, requires = "migrate_to")]
    allow_restricted: bool,
    /// Print the result as one JSON object: the record of what was unloaded
    /// (`unloaded`) and the migrations done first (`migrated`); or, when an earlier unload
    /// of the name was cut short after it unregistered the name, what this one removed of
    /// it (`finished`: `name`, `removed`).
    #[arg(long)]
    json: bool,
}

/// The registered name `cctl unload ARG` means, if cctl loaded it.
fn registered_name(arg: &str) -> Option<String> {
    let loaded = registry::list_loaded().ok()?;
    if loaded.iter().any(|l| l.name == arg) {
        return Some(arg.to_string());
    }
    let a = catalogue::find(arg).ok()?;
    loaded
        .iter()
        .any(|l| l.name == a.cc_name)
        .then(|| a.cc_name.to_string())
}

fn in_use(name: &str, users: &std::collections::BTreeMap<String, u64>, hint: String) -> Error {
    Error::InUse {
        name: name.into(),
        count: users.values().sum(),
        detail: users
            .iter()
            .map(|(ns, n)| format!("netns {ns}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        hint,
    }
}

/// Runs `cctl unload`.
pub fn run(args: Args) -> Result<i32> {
    let ctx = |e: Error| anyhow::Error::new(e).context(format!("unloading {}", args.name));
    let mut migrated = Vec::new();
    // Names cctl did not load get registry::unload's own refusal below.
    if let Some(name) = registered_name(&args.name) {
        // A policy rule naming it would make new connections fail back to the default.
        let rules = policy::rules_using(&name).map_err(ctx)?;
        if !rules.is_empty() {
            let listed: Vec<String> = rules
                .iter()
                .map(|r| format!("{} \u{2192} {}", r.target, r.cc))
                .collect();
            return Err(ctx(Error::NamedByPolicy {
                name: name.clone(),
                rules: listed.join(", "),
            }));
        }
        let users = migrate::established_users(&name).map_err(ctx)?;
        if !users.is_empty() {
            let Some(to) = &args.migrate_to else {
                return Err(ctx(in_use(
                    &name,
                    &users,
                    format!(
                        "not unloaded; move them first with `cctl unload {name} --migrate-to cubic` \
                         (or `cctl migrate --from {name} --to OTHER [--netns NS]`)"
                    ),
                )));
            };
            for ns in users.keys() {
                let netns = if ns == "current" {
                    None
                } else if let Some(pid) = ns.strip_prefix("pid:") {
                    Some(format!("/proc/{pid}/ns/net"))
                } else {
                    Some(ns.clone())
                };
                let req = MigrateRequest {
                    from: name.clone(),
                    to: to.clone(),
                    filter: SocketFilter {
                        netns,
                        ..Default::default()
                    },
                    dry_run: false,
                    allow_restricted: args.allow_restricted,
                };
                match migrate::migrate(&req) {
                    // A closed stdout must not stop the unload halfway: the report is
                    // lost, and the closing line below ends the command after the unload.
                    Ok(r) => {
                        if !args.json {
                            let _ = super::migrate::print_report(&r, false);
                        }
                        migrated.push(r);
                    }
                    // Closed since the census: nothing left there.
                    Err(Error::NoMatch { .. }) => {}
                    Err(e) => return Err(ctx(e)),
                }
            }
            let left = migrate::established_users(&name).map_err(ctx)?;
            if !left.is_empty() {
                return Err(ctx(in_use(
                    &name,
                    &left,
                    format!("the migration to {to} left them behind; not unloaded"),
                )));
            }
        }
    }
    let rec = match registry::unload_or_finish(&args.name).map_err(ctx)? {
        registry::Unloaded::Now(rec) => rec,
        registry::Unloaded::Finished { name, removed } => {
            if args.json {
                outln!(
                    "{}",
                    serde_json::json!({ "finished": { "name": name, "removed": removed } })
                )?;
                return Ok(exit::OK);
            }
            let removed: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
            outln!(
                "'{name}' was no longer registered: an earlier unload unregistered it and was cut \
                 short; removed what it left: {}",
                removed.join(", ")
            )?;
            return Ok(exit::OK);
        }
    };
    if args.json {
        outln!(
            "{}",
            serde_json::json!({ "unloaded": rec, "migrated": migrated })
        )?;
        return Ok(exit::OK);
    }
    outln!("unloaded '{}' ({})", rec.name, rec.algo)?;
    Ok(exit::OK)
}
