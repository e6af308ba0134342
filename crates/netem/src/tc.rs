//! Running the host tools the emulator is built with (iproute2's `ip` and `tc`, `ethtool`,
//! `sysctl`), as Mininet and flent do: one command or a batch of lines through one process,
//! a failure reported with its full command line and the tool's stderr verbatim; and the
//! root qdisc of `tc -s -j qdisc show`, which every counter reader starts from.

use std::io::Write as _;
use std::process::{Command, Stdio};

/// Why a testbed operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    /// The [`PathSpec`] cannot describe a testbed.
    #[error("invalid path spec: {0}")]
    InvalidSpec(String),
    /// A tool could not be started at all (not installed, not executable).
    #[error("running `{command}`: {source}{}", package_hint(command))]
    Spawn {
        /// The full command line.
        command: String,
        /// Why it did not start.
        source: std::io::Error,
    },
    /// A tool ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}): {}", stderr.trim_end())]
    Command {
        /// The full command line.
        command: String,
        /// How it exited (`exit status: 2`, ...).
        status: String,
        /// Its stderr, verbatim.
        stderr: String,
    },
    /// A tool the testbed runs is not installed.
    #[error("`{tool}` is not installed (Debian package {package}; `make deps` installs it)")]
    MissingTool {
        /// The program.
        tool: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// The running kernel has no sch_netem, which delay and random loss need.
    #[error(
        "the running kernel has no sch_netem (needed for delay and random loss): {0}; \
             run the scenario in a VM with a netem-capable kernel (cctl bench does this by itself)"
    )]
    NoNetem(String),
    /// A tool's output could not be understood.
    #[error("parsing the output of `{command}`: {reason}")]
    Parse {
        /// The full command line.
        command: String,
        /// What was wrong with the output.
        reason: String,
    },
}

/// Programs the testbed runs, with the Debian packages that provide them.
pub const TOOLS: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("tc", "iproute2"),
    ("ethtool", "ethtool"),
    ("sysctl", "procps"),
];

/// Fails with [`TestbedError::MissingTool`] naming the first tool of [`TOOLS`] not on `PATH`
/// (or in /sbin, /usr/sbin).
pub fn check_tools() -> Result<(), TestbedError> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<std::path::PathBuf> = std::env::split_paths(&path)
        .chain(["/sbin", "/usr/sbin", "/bin", "/usr/bin"].map(std::path::PathBuf::from))
        .collect();
    for &(tool, package) in TOOLS {
        if !dirs.iter().any(|d| d.join(tool).is_file()) {
            return Err(TestbedError::MissingTool { tool, package });
        }
    }
    Ok(())
}

/// " (install the Debian package X)" for the tool a failed command line starts with.
fn package_hint(command: &str) -> String {
    let tool = command.split_whitespace().next().unwrap_or("");
    let package = match tool {
        "ip" | "tc" => "iproute2",
        "ethtool" => "ethtool",
        "modprobe" => "kmod",
        "sysctl" => "procps",
        "ping" => "iputils-ping",
        _ => return String::new(),
    };
    format!(" (install the Debian package {package}: `make deps`)")
}

/// Runs a command line given as space-separated words (none of which contains a space).
pub(crate) fn run_words(line: &str) -> Result<String, TestbedError> {
    run(&line.split_whitespace().collect::<Vec<_>>())
}

/// Runs `argv` (program first), returning its stdout; a failure carries the command line and
/// its stderr verbatim.
pub(crate) fn run(argv: &[&str]) -> Result<String, TestbedError> {
    run_with_input(argv, argv.join(" "), None)
}

/// Runs `argv` (`ip`/`tc` with global options) in batch mode (`-batch -`) on `lines`, one
/// command each, in one process; stops at the first failing line unless `-force` is given.
/// A failure carries the lines and the tool's stderr (which names the failing line).
pub(crate) fn run_batch(argv: &[&str], lines: &[String]) -> Result<String, TestbedError> {
    let mut full: Vec<&str> = argv.to_vec();
    full.extend(["-batch", "-"]);
    let command = format!("{} <<< {:?}", full.join(" "), lines.join("; "));
    let mut input = lines.join("\n");
    input.push('\n');
    run_with_input(&full, command, Some(&input))
}

/// The one process runner: `argv` with `input` on its stdin (none: /dev/null), its stdout
/// on success; `command` is how errors name it.
fn run_with_input(
    argv: &[&str],
    command: String,
    input: Option<&str>,
) -> Result<String, TestbedError> {
    let spawn_error = |source| TestbedError::Spawn {
        command: command.clone(),
        source,
    };
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A tool that exits early closes the pipe; its status below says why.
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child.wait_with_output().map_err(spawn_error)?;
    if !out.status.success() {
        return Err(TestbedError::Command {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The qdiscs of `tc -s -j qdisc show dev X` (a JSON array) and the root one among them;
/// `None` for the root when the device has none.
///
/// Errors: the text is not JSON, or not an array.
pub fn qdiscs_and_root(json: &str) -> Result<(Vec<serde_json::Value>, Option<usize>), String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let serde_json::Value::Array(list) = v else {
        return Err("expected a JSON array of qdiscs".into());
    };
    let root = list
        .iter()
        .position(|q| q.get("root").and_then(|r| r.as_bool()) == Some(true));
    Ok((list, root))
}
