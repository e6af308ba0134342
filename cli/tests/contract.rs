//! The command-line contract (docs/reference/cli-contract.md, "The command-line contract"), table-driven:
//! every class of bad input gets exit 2 and a message `cctl: <what>: <why>` naming what was
//! wrong and what is allowed, on every command it applies to, and changes nothing; every
//! command that prints data has `--json`. The commands, and the numeric options with their
//! ranges, come from the reference `cctl --markdown-help` prints, so a new command or
//! option is covered by the derived rows without editing this file. No root and no kernel
//! change: every row is refused before anything is done.

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

mod common;
use common::{cctl, cctl_parse_only};

/// Exit code of bad input (cli/src/exit.rs `USAGE`).
const USAGE: i32 = 2;

/// The reference, as `cctl --markdown-help` prints it.
fn reference() -> String {
    let o = cctl(&["--markdown-help"]);
    assert_eq!(o.status.code(), Some(0), "cctl --markdown-help");
    String::from_utf8(o.stdout).unwrap()
}

/// An option of a command in the reference.
#[derive(Debug, Clone)]
struct RefOption {
    /// The command path (`["bench", "run"]`).
    path: Vec<String>,
    /// The long flag (`--rate-mbit`).
    flag: String,
    /// Its description, one line.
    desc: String,
    /// Its default value, if it has one.
    default: Option<String>,
}

/// Every option with a value or not, of every command of the reference.
fn reference_options() -> Vec<RefOption> {
    let mut out: Vec<RefOption> = Vec::new();
    let mut path: Vec<String> = Vec::new();
    for line in reference().lines() {
        if let Some(p) = line.strip_prefix("## `").and_then(|l| l.strip_suffix('`')) {
            path = p.split(' ').skip(1).map(str::to_string).collect();
            continue;
        }
        if let Some(rest) = line.strip_prefix("* `") {
            // `* `-p`, `--params` — ...`, `* `--port <PORT>` — ...`; positionals (`<NAME>`)
            // are not options.
            let Some(at) = rest.find("--") else { continue };
            if rest.starts_with('<') {
                continue;
            }
            let flag: String = rest[at..]
                .chars()
                .take_while(|c| *c != ' ' && *c != '`')
                .collect();
            let desc = rest.split_once(" — ").map_or("", |(_, d)| d).to_string();
            out.push(RefOption {
                path: path.clone(),
                flag,
                desc,
                default: None,
            });
            continue;
        }
        if let Some(d) = line.trim().strip_prefix("Default value: `") {
            if let Some(last) = out.last_mut() {
                last.default = Some(d.trim_end_matches('`').to_string());
            }
        }
    }
    out
}

/// A numeric option's range as its description states it: `allowed 1 to 10000`, `allowed
/// more than 0 up to 86400`, `allowed 0 or more`.
#[derive(Debug, Clone)]
struct Range {
    /// The words after `allowed `, which the refusal repeats.
    text: String,
    lo: f64,
    /// `more than lo`: lo itself is refused.
    lo_open: bool,
    /// The highest allowed, as written (whole numbers only in the reference).
    hi: Option<String>,
}

fn number_at(s: &str) -> Option<(String, &str)> {
    let n: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    if n.is_empty() || n.parse::<f64>().is_err() {
        return None;
    }
    let rest = &s[n.len()..];
    Some((n, rest))
}

fn range_of(desc: &str) -> Option<Range> {
    let lower = desc.to_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("allowed ") {
        let start = from + i + "allowed ".len();
        from = start;
        let s = &desc[start..];
        let (lo_open, s2) = match s.strip_prefix("more than ") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let Some((lo, rest)) = number_at(s2) else {
            continue;
        };
        let (hi, rest) = if let Some(r) = rest
            .strip_prefix(" to ")
            .or_else(|| rest.strip_prefix(" up to "))
        {
            match number_at(r) {
                Some((hi, rest)) => (Some(hi), rest),
                None => continue,
            }
        } else if let Some(r) = rest.strip_prefix(" or more") {
            (None, r)
        } else {
            continue;
        };
        let text = s[..s.len() - rest.len()].to_string();
        return Some(Range {
            text,
            lo: lo.parse().unwrap(),
            lo_open,
            hi,
        });
    }
    None
}

/// Adds 1 to a whole number written in decimal, of any size.
fn plus_one(n: &str) -> String {
    let v: u128 = n.parse().expect("a whole upper bound");
    (v + 1).to_string()
}

/// What the system looks like to a contract row: the congestion controls registered and
/// the default (what `cctl list` reads), the network namespaces, and cctl's pins and
/// records. A refused command line must leave all of it as it was.
fn system_state() -> Vec<String> {
    let mut s = Vec::new();
    for f in [
        "/proc/sys/net/ipv4/tcp_available_congestion_control",
        "/proc/sys/net/ipv4/tcp_congestion_control",
    ] {
        let v = std::fs::read_to_string(f).unwrap_or_default();
        s.push(format!("{f}: {}", v.trim()));
    }
    for d in ["/run/netns", "/sys/fs/bpf", "/sys/fs/bpf/cctl", "/run/cctl"] {
        let mut names: Vec<String> = std::fs::read_dir(d)
            .map(|r| {
                r.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        s.push(format!("{d}: {}", names.join(" ")));
    }
    s
}

/// Fails unless the system is as `before`, naming what changed.
fn assert_unchanged(before: &[String], what: &str) {
    let after = system_state();
    let changed: Vec<String> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(b, a)| format!("before {b}\n       after  {a}"))
        .collect();
    assert!(
        changed.is_empty(),
        "{what} changed the system (a refusal changes nothing):\n{}",
        changed.join("\n")
    );
}

/// The leaf command paths of the reference (`list`, `bench run`, `policy add`, ...).
fn leaf_commands() -> Vec<Vec<String>> {
    let text = reference();
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

/// Checks one row: exit 2, no panic, stderr `cctl: <what>: <why>` (never clap's `error:
/// ...`) naming `needle`, within 10 s, and nothing changed on the system.
fn refused(class: &str, args: &[&str], needle: &str) {
    let before = system_state();
    let t = Instant::now();
    let o = cctl(args);
    check_refusal(class, args, needle, o, t);
    assert_unchanged(&before, &format!("{class}: `cctl {}`", args.join(" ")));
}

/// [`refused`] of the parser alone (`CCTL_PARSE_ONLY`): the option's own parser refuses the
/// value, so a regression fails the row instead of running the command.
fn refused_by_parser(class: &str, args: &[&str], needle: &str) {
    let t = Instant::now();
    let o = cctl_parse_only(args);
    check_refusal(class, args, needle, o, t);
}

fn check_refusal(class: &str, args: &[&str], needle: &str, o: Output, t: Instant) {
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
    assert!(
        stderr.starts_with("cctl: ") && !stderr.lines().any(|l| l.starts_with("error:")),
        "{class}: `cctl {}` must say `cctl: <what>: <why>`: {stderr}",
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
    // A file, for "a file where a directory is in the path".
    let file = dir.join("file.toml");
    std::fs::write(&file, "").unwrap();
    let under_file = file.join("x.toml");
    let under_file = under_file.to_str().unwrap();
    let summary = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/summary.json");
    let summary = summary.to_str().unwrap();
    let before = system_state();
    let rows: &[(&str, &[&str], &str)] = &[
        // A negative number: the option's own parser refuses it, naming the option and its
        // range (every numeric option: numeric_options_are_refused_outside_their_range).
        (
            "negative number",
            &["rollback", "x", "--to", "-1"],
            "--to -1: allowed 1 or more",
        ),
        (
            "negative number",
            &["demo", "--rate-mbit", "-1"],
            "--rate-mbit -1: allowed 1 to 10000 Mbit/s",
        ),
        (
            "negative number",
            &[
                "bench",
                "run",
                "t0.1",
                "--algo",
                "reno",
                "--repeat",
                "-1",
                "--dry-run",
            ],
            "--repeat -1: allowed 1 to 1000",
        ),
        // Out of range: the parser states the option's real range, not its type's.
        (
            "out of range",
            &["demo", "--rate-mbit", "0"],
            "--rate-mbit 0: allowed 1 to 10000 Mbit/s",
        ),
        (
            "out of range",
            &[
                "bench",
                "run",
                "t0.1",
                "--algo",
                "reno",
                "--repeat",
                "0",
                "--dry-run",
            ],
            "--repeat 0: allowed 1 to 1000",
        ),
        (
            "out of range",
            &[
                "bench",
                "run",
                "t0.1",
                "--algo",
                "reno",
                "--points",
                "4",
                "--dry-run",
            ],
            "--points: no point 4",
        ),
        // A duration past its cap.
        (
            "duration past the cap",
            &[
                "bench",
                "run",
                "t0.1",
                "--algo",
                "reno",
                "--duration-s",
                "1e12",
                "--dry-run",
            ],
            "--duration-s 1e12: allowed more than 0 up to 86400 s",
        ),
        (
            "duration past the cap",
            &["trace", "--duration-s", "86401"],
            "--duration-s 86401: allowed more than 0 up to 86400 s",
        ),
        (
            "duration past the cap",
            &["demo", "--duration-s", "3601"],
            "--duration-s 3601: allowed more than 0 up to 3600 s",
        ),
        (
            "not a number",
            &["trace", "--duration-s", "nan"],
            "--duration-s nan: not a number",
        ),
        // An algorithm given twice.
        (
            "duplicate algorithm",
            &["bench", "run", "t0.1", "--algo", "reno,reno", "--dry-run"],
            "--algo: reno is given twice",
        ),
        (
            "duplicate algorithm",
            &[
                "bench",
                "run",
                "t0.1",
                "--algo",
                "htcp,cubic,bpf_htcp",
                "--dry-run",
            ],
            "--algo: htcp and bpf_htcp are the same algorithm",
        ),
        (
            "duplicate algorithm",
            &["conform", "reno,cubic,reno"],
            "reno is given twice",
        ),
        (
            "duplicate algorithm",
            &["conform", "all,reno"],
            "reno would be given twice",
        ),
        // What clap refuses itself, in the same form.
        (
            "parser: missing argument",
            &["load"],
            "cctl: <ALGO>: required",
        ),
        (
            "parser: unknown subcommand",
            &["bench", "nosuch"],
            "cctl: nosuch: unknown subcommand",
        ),
        (
            "parser: unknown value",
            &[
                "bench",
                "run",
                "t0.1",
                "--algo",
                "reno",
                "--vm",
                "nosuch",
                "--dry-run",
            ],
            "cctl: --vm nosuch: not one of auto, always, never",
        ),
        (
            "parser: conflicting options",
            &["trace", "--json", "--csv"],
            "cctl: --json: cannot be used with '--csv'",
        ),
        (
            "parser: missing value",
            &["list", "--bpf-stats", "--bpf-stats-ms"],
            "cctl: --bpf-stats-ms: needs a value",
        ),
        (
            "parser: unexpected argument",
            &["list", "extra"],
            "cctl: extra: unexpected argument",
        ),
        (
            "parser: not an address",
            &["sockets", "--addr", "nosuch"],
            "cctl: --addr nosuch: not an IP address",
        ),
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
            "--port 0: allowed 1 to 65535",
        ),
        (
            "port 0",
            &["policy", "remove", "--port", "0"],
            "--port 0: allowed 1 to 65535",
        ),
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
        // A directory where a file belongs (exit::bad_path, for every command), or a file
        // where a directory is in the path; a directory without results.
        ("directory for a file", &["apply", d], d),
        (
            "directory for a file",
            &["bench", "run", d, "--algo", "reno", "--dry-run"],
            "is a directory; give a file",
        ),
        (
            "directory for a file",
            &[
                "bench",
                "check",
                summary,
                "--baseline",
                summary,
                "--tolerance",
                d,
            ],
            "is a directory; give a file",
        ),
        (
            "directory for a file",
            &[
                "bench",
                "run",
                "t0.1",
                "--algo",
                "reno",
                "--check",
                summary,
                "--tolerance",
                d,
                "--dry-run",
            ],
            "is a directory; give a file",
        ),
        (
            "directory for a file",
            &["conform", "reno", "--script", d],
            "is a directory; give a file",
        ),
        (
            "file in the path",
            &["bench", "run", under_file, "--algo", "reno", "--dry-run"],
            "is a file, not a directory",
        ),
        (
            "file in the path",
            &[
                "bench",
                "check",
                summary,
                "--baseline",
                summary,
                "--tolerance",
                under_file,
            ],
            "is a file, not a directory",
        ),
        (
            "file in the path",
            &["conform", "reno", "--script", under_file],
            "is a file, not a directory",
        ),
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
    // Each row is checked alone (refused); the whole table too, for what a row might
    // leave behind to happen later.
    assert_unchanged(&before, "the table");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn numeric_options_are_refused_outside_their_range() {
    // Every numeric option states its range in its description ("allowed 1 to 10000"),
    // which its parser enforces; a value below and one above each range are refused with
    // exit 2 naming the option, the value and the range. The options come from the
    // reference; these must be among them (a lost range statement fails here).
    const KNOWN: &[(&str, &str)] = &[
        ("list", "--bpf-stats-ms"),
        ("rollback", "--to"),
        ("migrate", "--port"),
        ("migrate", "--cookie"),
        ("sockets", "--port"),
        ("sockets", "--cookie"),
        ("trace", "--port"),
        ("trace", "--interval-ms"),
        ("trace", "--duration-s"),
        ("top", "--port"),
        ("top", "--interval-ms"),
        ("top", "--refresh-hz"),
        ("top", "--history-s"),
        ("top", "--expire-s"),
        ("demo", "--duration-s"),
        ("demo", "--second-start-s"),
        ("demo", "--flows"),
        ("demo", "--rate-mbit"),
        ("demo", "--queue-pkts"),
        ("bench run", "--repeat"),
        ("bench run", "--points"),
        ("bench run", "--seed"),
        ("bench run", "--interval-ms"),
        ("bench run", "--queue-interval-ms"),
        ("bench run", "--delay-sample"),
        ("bench run", "--jobs"),
        ("bench run", "--duration-s"),
        ("bench calibrate", "--rates"),
        ("conform", "--runs"),
        ("conform", "--jobs"),
        ("policy add", "--port"),
        ("policy remove", "--port"),
        ("exporter", "--interval-ms"),
        ("exporter", "--per-flow-max"),
    ];
    let options = reference_options();
    let numeric: Vec<(RefOption, Range)> = options
        .iter()
        .filter_map(|o| range_of(&o.desc).map(|r| (o.clone(), r)))
        .collect();
    for (cmd, flag) in KNOWN {
        assert!(
            numeric
                .iter()
                .any(|(o, _)| o.path.join(" ") == *cmd && o.flag == *flag),
            "`cctl {cmd} {flag}` must state its range (\"allowed A to B\") in the reference"
        );
    }
    // An option with a numeric default is numeric: it must state its range too.
    for o in &options {
        if o.default
            .as_deref()
            .is_some_and(|d| d.parse::<f64>().is_ok())
        {
            assert!(
                range_of(&o.desc).is_some(),
                "`cctl {} {}` has a numeric default and must state its range (\"allowed A to \
                 B\"): {}",
                o.path.join(" "),
                o.flag,
                o.desc
            );
        }
    }
    for (o, r) in &numeric {
        assert!(r.lo >= 0.0, "{} {}: {r:?}", o.path.join(" "), o.flag);
        let mut values = vec!["-1".to_string()];
        // Below the range.
        if r.lo_open {
            values.push(r.text.split(' ').nth(2).unwrap().to_string());
        } else if r.lo >= 1.0 {
            values.push(format!("{}", r.lo - 1.0));
        }
        // Above it; past the type's largest for `N or more`.
        match &r.hi {
            Some(hi) => values.push(plus_one(hi)),
            None => values.push("18446744073709551616".to_string()),
        }
        values.push("x".to_string());
        for v in &values {
            let mut args: Vec<&str> = o.path.iter().map(String::as_str).collect();
            args.push(&o.flag);
            args.push(v);
            refused_by_parser("out of range", &args, &format!("cctl: {} {v}: ", o.flag));
            // The message states the range as the reference does.
            let stderr = String::from_utf8_lossy(&cctl_parse_only(&args).stderr).into_owned();
            assert!(
                stderr.contains(&format!("allowed {}", r.text)),
                "`cctl {}` must state the range `allowed {}`: {stderr}",
                args.join(" "),
                r.text
            );
        }
        // The default, and the range's own ends, are accepted.
        let mut ok: Vec<String> = o.default.iter().cloned().collect();
        if !r.lo_open {
            ok.push(r.text.split(' ').next().unwrap().to_string());
        }
        ok.extend(r.hi.iter().cloned());
        for v in &ok {
            let mut args: Vec<&str> = o.path.iter().map(String::as_str).collect();
            args.push(&o.flag);
            args.push(v);
            // Options that need others to parse (`--bpf-stats-ms` requires `--bpf-stats`).
            let o2 = cctl_parse_only(&args);
            let stderr = String::from_utf8_lossy(&o2.stderr);
            assert!(
                !stderr.contains(&format!("{} {v}: ", o.flag)),
                "`cctl {}` must be accepted: {stderr}",
                args.join(" ")
            );
        }
    }
}

#[test]
fn help_and_version_are_no_errors() {
    for args in [&["--help"][..], &["--version"], &["bench", "run", "--help"]] {
        let o = cctl(args);
        assert_eq!(o.status.code(), Some(0), "cctl {}", args.join(" "));
        assert!(!o.stdout.is_empty(), "cctl {}", args.join(" "));
        assert!(o.stderr.is_empty(), "cctl {}", args.join(" "));
    }
    // The parse-only mode of the docs tests parses as ever: a good line exits 0.
    let o = cctl_parse_only(&["demo", "--rate-mbit", "10000", "--duration-s", "3600"]);
    assert_eq!(o.status.code(), Some(0));
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
