//! `cctl policy`: choose the congestion control of new connections by port or cgroup.

use std::path::PathBuf;

use anyhow::{Context, Result};
use cctl_loader::policy::{self, Rule, RuleSpec, Target};

use crate::exit;
use crate::out::outln;

/// Arguments of `cctl policy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Give new connections to/on a port, or of a cgroup, a congestion control.
    Add(AddArgs),
    /// Show the rules, with how many connections each changed.
    List(ListArgs),
    /// Remove a rule (or all); the last one gone detaches the program.
    Remove(RemoveArgs),
}

/// `cctl policy add`.
#[derive(Debug, clap::Args)]
#[command(
    group = clap::ArgGroup::new("target").required(true).args(["port", "cgroup"]),
    after_help = "Examples:\n  cctl policy add --port 5201 bpf_htcp\n  \
cctl policy add --cgroup system.slice/backup.service reno\n\n\
A port rule matches connections TO the port (client side) and connections accepted ON it\n\
(server side), in every network namespace of the host. A cgroup rule matches sockets\n\
created by processes in the cgroup or below it. Precedence: an application's own\n\
setsockopt(TCP_CONGESTION) > the deepest cgroup rule > ancestor cgroup rules > port rules.\n\
Adding a rule for a port or cgroup that has one replaces it. Established connections are\n\
not changed (that is `cctl migrate`)."
)]
struct AddArgs {
    /// TCP port; allowed 1 to 65535.
    #[arg(long, value_name = "N", value_parser = crate::cmd::args::whole::<u32>(1, Some(65_535), ""))]
    port: Option<u32>,
    /// cgroup v2 directory: absolute, or relative to the cgroup2 mount.
    #[arg(long, value_name = "PATH")]
    cgroup: Option<PathBuf>,
    /// Registered congestion control (see `cctl list`).
    name: String,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

/// `cctl policy list`.
#[derive(Debug, clap::Args)]
struct ListArgs {
    /// One JSON object per rule and line.
    #[arg(long)]
    json: bool,
}

/// `cctl policy remove`.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("target").required(true).args(["port", "cgroup", "all"]))]
struct RemoveArgs {
    /// The port rule to remove; allowed 1 to 65535.
    #[arg(long, value_name = "N", value_parser = crate::cmd::args::whole::<u32>(1, Some(65_535), ""))]
    port: Option<u32>,
    /// The cgroup rule to remove (as given to `add`, or its absolute path).
    #[arg(long, value_name = "PATH")]
    cgroup: Option<PathBuf>,
    /// Remove every rule and every pin of the policy.
    #[arg(long)]
    all: bool,
    /// Print the removed rules as one JSON object (`{"removed": [RULE, ...]}`).
    #[arg(long)]
    json: bool,
}

fn spec(port: Option<u32>, cgroup: Option<PathBuf>) -> RuleSpec {
    match (port, cgroup) {
        (Some(p), _) => RuleSpec::Port(p),
        (None, Some(c)) => RuleSpec::Cgroup(c),
        (None, None) => unreachable!("clap requires --port or --cgroup"),
    }
}

/// Runs `cctl policy`.
pub fn run(args: Args) -> Result<i32> {
    match args.command {
        Command::Add(a) => add(a),
        Command::List(a) => list(a),
        Command::Remove(a) => remove(a),
    }
}

fn add(a: AddArgs) -> Result<i32> {
    let spec = spec(a.port, a.cgroup);
    let added = policy::add(&spec, &a.name).with_context(|| "adding a policy rule".to_string())?;
    if a.json {
        outln!("{}", serde_json::to_string(&added)?)?;
    } else if let Some(old) = &added.replaced {
        outln!(
            "policy: new connections of {} now get {} (replaced {old})",
            added.target,
            added.cc
        )?;
    } else {
        outln!(
            "policy: new connections of {} now get {}",
            added.target,
            added.cc
        )?;
    }
    Ok(exit::OK)
}

fn describe(r: &Rule) -> String {
    let mut notes = Vec::new();
    if !r.cc_registered {
        notes.push(format!(
            "{} is not registered: matching connections keep the default",
            r.cc
        ));
    }
    if !r.attached {
        notes.push("program not attached: `cctl policy remove --all` and add again".into());
    }
    if let Target::Cgroup { exists: false, .. } = &r.target {
        notes.push("the cgroup is gone".into());
    }
    if let Some(e) = &r.last_error {
        notes.push(format!("last failure: {e}"));
    }
    if notes.is_empty() {
        String::new()
    } else {
        format!("  [{}]", notes.join("; "))
    }
}

fn list(a: ListArgs) -> Result<i32> {
    let rules = policy::list().context("listing policy rules")?;
    if a.json {
        for r in &rules {
            outln!("{}", serde_json::to_string(r)?)?;
        }
        return Ok(exit::OK);
    }
    if rules.is_empty() {
        outln!("no policy rules (add one: cctl policy add --port N NAME)")?;
        return Ok(exit::OK);
    }
    outln!(
        "{:<48} {:<16} {:>9} {:>9} {:>9}",
        "MATCH",
        "CC",
        "APPLIED",
        "KEPT",
        "FAILED"
    )?;
    for r in &rules {
        outln!(
            "{:<48} {:<16} {:>9} {:>9} {:>9}{}",
            r.target.to_string(),
            r.cc,
            r.applied,
            r.kept,
            r.failed,
            describe(r)
        )?;
    }
    Ok(exit::OK)
}

fn remove(a: RemoveArgs) -> Result<i32> {
    if a.all {
        let rules = policy::remove_all().context("removing every policy rule")?;
        if a.json {
            outln!("{}", serde_json::json!({ "removed": rules }))?;
            return Ok(exit::OK);
        }
        outln!(
            "policy: removed {} rule(s); nothing is attached any more",
            rules.len()
        )?;
        return Ok(exit::OK);
    }
    let spec = spec(a.port, a.cgroup);
    let rule = policy::remove(&spec).context("removing a policy rule")?;
    if a.json {
        outln!("{}", serde_json::json!({ "removed": [rule] }))?;
        return Ok(exit::OK);
    }
    outln!(
        "policy: removed {} → {} (it had applied {} connection(s))",
        rule.target,
        rule.cc,
        rule.applied
    )?;
    Ok(exit::OK)
}
