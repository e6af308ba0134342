//! The command-line contract (docs/cli.md, "The command-line contract"), table-driven:
//! every class of bad input gets exit 2 and a message naming what was wrong, on every
//! command it applies to; every command that prints data has `--json`. The commands come
//! from the reference `cctl --markdown-help` prints, so a new command is covered by the
//! derived rows without editing this file. No root and no kernel change: every row is
//! refused before anything is done.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Exit code of bad input (cli/src/exit.rs `USAGE`).
const USAGE: i32 = 2;

fn cctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cctl"))
        .args(args)
        .env_remove("CCTL_PARSE_ONLY")
        .output()
        .expect("cctl runs")
}

/// The leaf command paths of the reference (`list`, `bench run`, `policy add`, ...).
fn leaf_commands() -> Vec<Vec<String>> {
    let o = cctl(&["--markdown-help"]);
    let text = String::from_utf8(o.stdout).unwrap();
    let paths: Vec<Vec<String>> = text
        .lines()
        .filter_map(|l| l.strip_prefix("## `")?.strip_suffix('`'))
        .map(|p| p.split(' ').skip(1).map(str::to_string).collect::<Vec<_>>())
        .filter(|p: &Vec<String>| !p.is_empty())
        .collect();
    paths
        .iter()
        .filter(|p| !paths.iter().any(|q| q.len() > p.len() && q.starts_with(p)))
        .cloned()
        .collect()
}

/// Checks one row: exit 2, no panic, stderr naming `needle`, within 10 s.
fn refused(class: &str, args: &[&str], needle: &str) {
    let t = Instant::now();
    let o = cctl(args);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "{class}: `cctl {}` took {:?}",
        args.join(" "),
        t.elapsed()
    );
    assert_eq!(
        o.status.code(),
        Some(USAGE),
        "{class}: `cctl {}` must exit 2; stderr: {stderr}",
        args.join(" ")
    );
    assert!(
        !stderr.contains("panicked"),
        "{class}: `cctl {}` panicked: {stderr}",
        args.join(" ")
    );
    assert!(
        stderr.contains(needle),
        "{class}: `cctl {}` must name `{needle}`: {stderr}",
        args.join(" ")
    );
}

#[test]
fn an_unknown_flag_is_refused_naming_it_on_every_command() {
    let leaves = leaf_commands();
    assert!(
        leaves.len() >= 20,
        "the reference lists the commands: {leaves:?}"
    );
    for path in &leaves {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--no-such-flag");
        refused("unknown flag", &args, "--no-such-flag");
    }
}

#[test]
fn every_command_that_prints_data_has_json() {
    // The one exception: the exporter serves /metrics over HTTP and prints only its log.
    const NO_DATA: &[&str] = &["exporter"];
    for path in leaf_commands() {
        let joined = path.join(" ");
        if NO_DATA.contains(&joined.as_str()) {
            continue;
        }
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = String::from_utf8_lossy(&cctl(&args).stdout).into_owned();
        assert!(
            help.contains("--json"),
            "`cctl {joined}` prints data and must take --json: {help}"
        );
    }
}

#[test]
fn each_class_of_bad_input_gets_exit_2_and_names_what_was_wrong() {
    let dir = std::env::temp_dir().join(format!("cctl-contract-{}", std::process::id()));
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let d = empty.to_str().unwrap();
    let missing = "/nonexistent/cctl-contract.toml";
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let rows: &[(&str, &[&str], &str)] = &[
        // A negative number: the option's own parser refuses it, naming the option.
        ("negative number", &["rollback", "x", "--to", "-1"], "--to"),
        (
            "negative number",
            &[
                "bench",
                "run",
                "t0.1",
                "--algo",
                "reno",
                "--seed",
                "-1",
                "--dry-run",
            ],
            "--seed",
        ),
        (
            "negative number",
            &["trace", "--duration-s", "-1"],
            "--duration-s",
        ),
        (
            "negative number",
            &["conform", "reno", "--runs", "-3"],
            "--runs",
        ),
        // Port 0 (every command: 1-65535; omit --port for every port).
        ("port 0", &["trace", "--port", "0"], "--port"),
        ("port 0", &["top", "--port", "0"], "--port"),
        ("port 0", &["sockets", "--port", "0"], "--port"),
        (
            "port 0",
            &["migrate", "--from", "reno", "--to", "cubic", "--port", "0"],
            "--port",
        ),
        (
            "port 0",
            &["policy", "add", "--port", "0", "reno"],
            "port 0",
        ),
        ("port 0", &["policy", "remove", "--port", "0"], "port 0"),
        // A file or directory named on the command line that is not there.
        ("missing file", &["apply", missing], missing),
        (
            "missing file",
            &["bench", "run", missing, "--algo", "reno", "--dry-run"],
            missing,
        ),
        (
            "missing file",
            &["bench", "check", missing, "--baseline", missing],
            missing,
        ),
        (
            "missing file",
            &["conform", "reno", "--script", missing],
            missing,
        ),
        (
            "missing directory",
            &["bench", "report", "/nonexistent/results"],
            "/nonexistent/results",
        ),
        (
            "missing directory",
            &["bench", "merge", "--out", out, "/nonexistent/results"],
            "/nonexistent/results",
        ),
        // A directory where a file belongs; a directory without results.
        ("directory for a file", &["apply", d], d),
        ("empty results directory", &["bench", "report", d], d),
        (
            "empty results directory",
            &["bench", "merge", "--out", out, d],
            d,
        ),
        // An invalid congestion-control name.
        (
            "invalid name",
            &["load", "reno", "--name", "bad.name"],
            "bad.name",
        ),
        (
            "invalid name",
            &["unload", "bad.name"],
            "invalid congestion-control name",
        ),
        (
            "invalid name",
            &["set", "bad.name", "beta=1"],
            "invalid congestion-control name",
        ),
        (
            "invalid name",
            &["upgrade", "bad.name"],
            "invalid congestion-control name",
        ),
        (
            "invalid name",
            &["rollback", "bad.name"],
            "invalid congestion-control name",
        ),
        (
            "invalid name",
            &["default", "bad.name"],
            "invalid congestion-control name",
        ),
        (
            "invalid name",
            &["sockets", "--cc", "bad.name"],
            "invalid congestion-control name",
        ),
        // A valid name that is not loaded.
        ("not loaded", &["unload", "cctl_nosuch"], "is not loaded"),
        (
            "not loaded",
            &["set", "cctl_nosuch", "beta=1"],
            "is not loaded",
        ),
        ("not loaded", &["upgrade", "cctl_nosuch"], "is not loaded"),
        ("not loaded", &["rollback", "cctl_nosuch"], "is not loaded"),
        (
            "not loaded",
            &["default", "cctl_nosuch"],
            "is not registered",
        ),
        // An unknown algorithm or scenario.
        ("unknown algorithm", &["load", "nosuch"], "nosuch"),
        ("unknown algorithm", &["conform", "nosuch"], "nosuch"),
        (
            "unknown algorithm",
            &["bench", "run", "t0.1", "--algo", "nosuch", "--dry-run"],
            "nosuch",
        ),
        (
            "unknown scenario",
            &[
                "bench",
                "run",
                "nosuch-scenario",
                "--algo",
                "reno",
                "--dry-run",
            ],
            "nosuch-scenario",
        ),
        // dctcp where the scenario marks no ECN, even in a dry run.
        (
            "dctcp without ECN",
            &[
                "bench",
                "run",
                "fairness-same-rtt",
                "--algo",
                "dctcp",
                "--dry-run",
            ],
            "ECN",
        ),
    ];
    for (class, args, needle) in rows {
        refused(class, args, needle);
    }
    assert!(!Path::new(out).exists(), "a refused merge creates nothing");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_missing_file_is_reported_once_not_with_its_os_error_twice() {
    let o = cctl(&[
        "bench",
        "check",
        "/nonexistent/a.json",
        "--baseline",
        "/nonexistent/b.json",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.matches("No such file or directory").count() <= 1,
        "the OS error once: {stderr}"
    );
}
