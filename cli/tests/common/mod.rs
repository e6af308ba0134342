//! Helpers every CLI test file shares: run the `cctl` binary cargo built, show its output.
#![allow(dead_code)] // each test file uses some of them

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs `cctl args`; with `parse_only`, with `$CCTL_PARSE_ONLY` set (it parses its
/// arguments and exits without doing anything), else with it removed.
pub fn run<S: AsRef<OsStr>>(args: &[S], parse_only: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cctl"));
    c.args(args);
    if parse_only {
        c.env("CCTL_PARSE_ONLY", "1");
    } else {
        c.env_remove("CCTL_PARSE_ONLY");
    }
    c.output().expect("cctl runs")
}

/// Runs `cctl args`.
pub fn cctl(args: &[&str]) -> Output {
    run(args, false)
}

/// Runs `cctl args` that only parses them.
pub fn cctl_parse_only(args: &[&str]) -> Output {
    run(args, true)
}

/// A run's stdout and stderr, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Fails, naming the first differing line, when the file at `rel` (relative to the
/// repository root) is not `generated`: a generated doc that `make docs` must rewrite.
#[allow(dead_code)] // not every test binary that includes this module checks a file
pub fn assert_generated(rel: &str, generated: &str) {
    let on_disk = std::fs::read_to_string(root().join(rel)).unwrap_or_default();
    if on_disk == generated {
        return;
    }
    let first = on_disk
        .lines()
        .zip(generated.lines())
        .position(|(a, b)| a != b)
        .unwrap_or_else(|| on_disk.lines().count().min(generated.lines().count()));
    panic!(
        "{rel} is stale (first difference at line {}: {:?} on disk, {:?} generated): run `make docs`",
        first + 1,
        on_disk.lines().nth(first).unwrap_or("<end of file>"),
        generated.lines().nth(first).unwrap_or("<end of file>"),
    );
}
