//! `cctl apply`: make the kernel match a configuration file (algorithms, default
//! congestion control, policy rules), changing only what differs.

use std::path::PathBuf;

use anyhow::Result;
use cctl_loader::apply::{self, Done, Plan};
use cctl_loader::config::{self, Config};
use cctl_loader::{kernel, Error};

use crate::exit::{self, usage};
use crate::out::outln;

/// Arguments of `cctl apply`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "The file lists the algorithms to have loaded (name, algo, profile, \
params), the default congestion control and the policy rules; `cctl apply` loads what is \
missing, upgrades a name whose parameters differ, sets the default, adds and removes rules, \
and unloads the names cctl loaded that the file does not list (not while established \
connections use them: those are kept and named, exit 6). Everything is validated first: an \
invalid file changes nothing (exit 2). If a step fails, the steps already done are undone \
and the error names the step. The file and /run/cctl must be writable by root only.\n\
Example:\n  default = \"bpf_htcp\"\n  [[algorithm]]\n  algo = \"htcp\"\n  params = { beta_min_pct = 60 }\n  \
[[policy]]\n  port = 5201\n  cc = \"bpf_htcp\""
)]
pub struct Args {
    /// Configuration file [default: /etc/cctl/cctl.toml].
    file: Option<PathBuf>,
    /// Print the plan and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the plan and what was done as one JSON object.
    #[arg(long)]
    json: bool,
}

/// What `--json` prints.
#[derive(serde::Serialize)]
struct Report<'a> {
    file: &'a std::path::Path,
    dry_run: bool,
    /// Whether anything was (or, with --dry-run, would be) changed.
    changes: bool,
    #[serde(flatten)]
    plan: &'a Plan,
    done: &'a [Done],
}

fn print_plan(cfg: &Config, plan: &Plan) -> Result<()> {
    if plan.is_empty() {
        outln!("nothing to do: the kernel matches {}", cfg.path.display())?;
    } else {
        outln!(
            "plan for {} ({} step(s)):",
            cfg.path.display(),
            plan.steps.len()
        )?;
        for (i, s) in plan.steps.iter().enumerate() {
            outln!("  {}. {s}", i + 1)?;
        }
    }
    for k in &plan.kept {
        outln!("kept {}: {}", k.name, k.reason)?;
    }
    Ok(())
}

/// Runs `cctl apply`.
/// Whether `path` is the file `cctl apply` reads when given none.
fn args_default(path: &std::path::Path) -> bool {
    path == std::path::Path::new(config::DEFAULT_PATH)
}

pub fn run(args: Args) -> Result<i32> {
    let path = args
        .file
        .unwrap_or_else(|| PathBuf::from(config::DEFAULT_PATH));
    let ctx = |e: Error| {
        // Errors about the file name it themselves.
        let named = matches!(
            e,
            Error::BadConfig { .. } | Error::ConfigSyntax { .. } | Error::Untrusted { .. }
        );
        let e = anyhow::Error::new(e);
        if named {
            e
        } else {
            e.context(format!("applying {}", path.display()))
        }
    };
    // A file that is not there, or a directory, is bad input (exit 2), as for every
    // command that takes a file.
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => usage!(
            "the configuration file {} does not exist: give one (`cctl apply FILE`){}; \
             `cctl apply --help` shows its format",
            path.display(),
            if args_default(&path) {
                format!(" or create {}", config::DEFAULT_PATH)
            } else {
                String::new()
            }
        ),
        Ok(m) if m.is_dir() => usage!(
            "{} is a directory; `cctl apply` takes a configuration file (e.g. {})",
            path.display(),
            config::DEFAULT_PATH
        ),
        _ => {}
    }
    let cfg = Config::load(&path).map_err(ctx)?;
    let _lock = if args.dry_run {
        None
    } else {
        kernel::require_privileges(&format!("applying {}", path.display())).map_err(ctx)?;
        Some(apply::lock().map_err(ctx)?)
    };
    let observed = apply::observe(&cfg).map_err(ctx)?;
    let plan = apply::plan(&cfg, &observed).map_err(ctx)?;
    let mut done = Vec::new();
    if !args.json {
        print_plan(&cfg, &plan)?;
    }
    if args.dry_run {
        if !args.json && !plan.is_empty() {
            outln!("dry run: nothing was changed")?;
        }
    } else if !plan.is_empty() {
        let total = plan.steps.len();
        let json = args.json;
        let mut printed: Result<()> = Ok(());
        done = apply::execute(&plan, &mut |d: &Done| {
            if !json && printed.is_ok() {
                printed = outln!("done {}/{total}: {}: {}", d.index, d.step, d.result);
            }
        })
        .map_err(ctx)?;
        printed?;
        if !json {
            outln!(
                "applied {total} step(s); the kernel matches {}",
                cfg.path.display()
            )?;
        }
    }
    if args.json {
        let report = Report {
            file: &cfg.path,
            dry_run: args.dry_run,
            changes: !plan.is_empty(),
            plan: &plan,
            done: &done,
        };
        outln!("{}", serde_json::to_string(&report)?)?;
    }
    if plan.kept.is_empty() {
        Ok(exit::OK)
    } else {
        if !args.dry_run {
            eprintln!(
                "cctl: applied {}, except: {} kept (in use)",
                path.display(),
                plan.kept
                    .iter()
                    .map(|k| k.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        Ok(if args.dry_run { exit::OK } else { exit::IN_USE })
    }
}
