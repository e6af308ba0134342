//! `cctl`: load, list, unload and trace BPF TCP congestion controls.

mod cmd;
mod exit;
mod exporter;
mod man;
mod out;
mod top;

use clap::{Parser, Subcommand};

/// TCP congestion control toolkit: BPF struct_ops algorithms from the
/// high-speed-TCP papers, a loader, and a per-flow collector.
#[derive(Debug, Parser)]
#[command(
    name = "cctl",
    version = cctl_loader::version(),
    about,
    propagate_version = true,
    arg_required_else_help = true,
    args_conflicts_with_subcommands = true,
    after_long_help = exit::table()
)]
struct Cli {
    /// Print the command reference (every subcommand and flag) as markdown and exit;
    /// `make docs` writes it to docs/reference/commands.md.
    #[arg(long, hide = true)]
    markdown_help: bool,
    /// Write the man pages into DIR and exit: cctl.1, one per subcommand (cctl-list.1,
    /// cctl-bench-run.1, ...) and cctl.toml.5 (the `cctl apply` file); `make install` and
    /// `make deb` install them.
    #[arg(long, value_name = "DIR")]
    man_pages: Option<std::path::PathBuf>,
    /// Print the shell completion script for SHELL (bash, zsh, fish, elvish, powershell)
    /// and exit, e.g. `cctl --completions bash > /etc/bash_completion.d/cctl`.
    #[arg(long, value_name = "SHELL")]
    completions: Option<clap_complete::Shell>,
    #[command(subcommand)]
    command: Option<Command>,
}

/// With this environment variable set (to anything), `cctl` parses its arguments and exits 0
/// without doing anything (bad arguments still exit 2 with the parser's message): the docs tests
/// (cli/tests/docs.rs) check every `cctl ...` line of README.md and docs/*.md with it,
/// without root and without touching the kernel.
const PARSE_ONLY_ENV: &str = "CCTL_PARSE_ONLY";

/// The command reference in markdown: clap-markdown over the clap definitions, which
/// include the exit-code table ([`exit::table`], the top level's long help).
fn markdown_help() -> String {
    let options = clap_markdown::MarkdownOptions::new()
        .title("cctl command reference".to_string())
        .show_footer(false);
    // clap-markdown puts the parent commands before a usage line, also before one that
    // `override_usage` gives whole (`cctl bench run`'s): "cctl bench cctl bench run ...".
    let text = clap_markdown::help_markdown_custom::<Cli>(&options);
    let lines: Vec<String> = text
        .lines()
        .map(|l| match l.strip_prefix("**Usage:** `cctl ") {
            Some(rest) => match rest.find("cctl ") {
                Some(i) => format!("**Usage:** `{}", &rest[i..]),
                None => l.to_string(),
            },
            None => l.to_string(),
        })
        .collect();
    format!(
        "<!-- Generated from the clap definitions by `make docs` (cctl --markdown-help); do not edit. -->\n\n{}\n",
        lines.join("\n")
    )
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Algorithms this binary carries, and every congestion control the kernel has.
    List(cmd::list::Args),
    /// Register an algorithm in the kernel (stays registered after cctl exits).
    Load(cmd::load::Args),
    /// Unregister an algorithm cctl loaded.
    Unload(cmd::unload::Args),
    /// Replace the implementation behind a registered name in place (new parameters or object).
    Upgrade(cmd::upgrade::Args),
    /// Return a registered name to an earlier version that is still loaded.
    Rollback(cmd::rollback::Args),
    /// Change live tunables of a loaded algorithm (running flows see them at their next ACK).
    Set(cmd::set::Args),
    /// Show or set the default congestion control of this network namespace.
    Default(cmd::default::Args),
    /// Move established TCP flows from one congestion control to another.
    Migrate(cmd::migrate::Args),
    /// TCP sockets with the congestion control (and loaded version) each runs.
    Sockets(cmd::sockets::Args),
    /// Stream per-flow samples (cwnd, RTT, CA state, algorithm variables).
    Trace(cmd::trace::Args),
    /// Live dashboard: flows, charts, internals, fairness; migrate flows from it.
    Top(top::Args),
    /// Live collector demo on the running kernel: traced bulk flows through a tbf bottleneck.
    ///
    /// Two bulk TCP flows (by default) with one algorithm through a 20 Mbit/s tbf bottleneck
    /// between network namespaces on the running kernel (no netem, no VM), traced and
    /// summarised per flow; `make demo-tbf` runs it. The project's main job, `make demo`, is
    /// the benchmark run `cctl bench run convergence-time --algo htcp,reno --profile ci`.
    Demo(cmd::demo::Args),
    /// The papers' benchmark tests on a veth/netem dumbbell.
    Bench(cmd::bench::Args),
    /// Compare ports with their Linux modules ACK by ACK on scripted ACK streams.
    Conform(cmd::conform::Args),
    /// Congestion control for new connections, chosen by port or cgroup.
    Policy(cmd::policy::Args),
    /// Make the kernel match a configuration file (algorithms, default, policy rules).
    Apply(cmd::apply::Args),
    /// Serve Prometheus metrics (aggregates by congestion control) until SIGTERM.
    Exporter(cmd::exporter::Args),
}

/// `cmd` and every subcommand below it taking `-1` as a value, so that a negative number
/// is refused by the option's own parser, naming the option and its range (`--to -1:
/// allowed 1 or more`), instead of as an unexpected argument.
fn negative_numbers_as_values(cmd: clap::Command) -> clap::Command {
    cmd.allow_negative_numbers(true)
        .mut_subcommands(negative_numbers_as_values)
}

fn main() {
    cctl_loader::faults::setup();
    let cli = match negative_numbers_as_values(<Cli as clap::CommandFactory>::command())
        .try_get_matches()
        .and_then(|m| <Cli as clap::FromArgMatches>::from_arg_matches(&m))
    {
        Ok(cli) => cli,
        // Help and version are no errors (exit 0; or the help, exit 2, of a command line
        // that is only a command needing more).
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp
                    | clap::error::ErrorKind::DisplayVersion
                    | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) =>
        {
            e.exit()
        }
        // Every other refusal of the command line in the contract's form (exit 2).
        Err(e) => {
            eprintln!("cctl: {}", exit::clap_message(&e));
            std::process::exit(exit::USAGE);
        }
    };
    if cli.markdown_help {
        print!("{}", markdown_help());
        std::process::exit(exit::OK);
    }
    if let Some(dir) = &cli.man_pages {
        if let Err(e) = man::write_all(<Cli as clap::CommandFactory>::command(), dir) {
            eprintln!("cctl: writing man pages into {}: {e}", dir.display());
            std::process::exit(exit::FAILURE);
        }
        std::process::exit(exit::OK);
    }
    if let Some(shell) = cli.completions {
        let mut script = Vec::new();
        clap_complete::generate(
            shell,
            &mut <Cli as clap::CommandFactory>::command(),
            "cctl",
            &mut script,
        );
        // A reader that stops early (`| head`) is no failure, as everywhere.
        let _ = std::io::Write::write_all(&mut std::io::stdout(), &script);
        std::process::exit(exit::OK);
    }
    if std::env::var_os(PARSE_ONLY_ENV).is_some() {
        std::process::exit(exit::OK);
    }
    let Some(command) = cli.command else {
        // Only `--markdown-help` may come without a subcommand (arg_required_else_help).
        eprintln!("cctl: a subcommand is required (cctl --help)");
        std::process::exit(exit::USAGE);
    };
    let result = match command {
        Command::List(a) => cmd::list::run(a),
        Command::Load(a) => cmd::load::run(a),
        Command::Unload(a) => cmd::unload::run(a),
        Command::Upgrade(a) => cmd::upgrade::run(a),
        Command::Rollback(a) => cmd::rollback::run(a),
        Command::Set(a) => cmd::set::run(a),
        Command::Default(a) => cmd::default::run(a),
        Command::Migrate(a) => cmd::migrate::run(a),
        Command::Sockets(a) => cmd::sockets::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Top(a) => top::run(a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Conform(a) => cmd::conform::run(a),
        Command::Policy(a) => cmd::policy::run(a),
        Command::Apply(a) => cmd::apply::run(a),
        Command::Exporter(a) => cmd::exporter::run(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        // The reader of a pipe went away (`cctl list | head -1`): it wanted no more
        // output, which is no failure of cctl; the command's guards have run. Exit 0,
        // quietly, rather than the shell's 141 for a death by SIGPIPE, so that
        // `set -o pipefail` scripts taking the first lines do not fail.
        Err(e) if out::is_stdout_closed(&e) => std::process::exit(exit::OK),
        Err(e) => {
            eprintln!("cctl: {}", exit::message(&e));
            std::process::exit(exit::code_for(&e));
        }
    }
}
