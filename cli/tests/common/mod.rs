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
