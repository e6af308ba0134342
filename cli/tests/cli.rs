//! The `cctl` binary on bad input: a clear message, the documented exit code, and
//! nothing changed in the kernel. The tests that need root are `#[ignore]`d, so that
//! `make check` runs the others in parallel as any user; `make test` runs them serially
//! as root (CI), some dropping privileges.

use std::process::{Command, Output};

mod common;
use common::cctl;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn available() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap()
}

#[test]
fn unknown_algorithm_lists_the_available_ones() {
    let o = cctl(&["load", "vegas9"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.starts_with("cctl: loading vegas9: unknown algorithm 'vegas9'"),
        "{e}"
    );
    assert!(e.contains("reno") && e.contains("htcp"), "{e}");
}

#[test]
fn bad_names_are_refused_before_touching_the_kernel() {
    let before = available();
    for name in ["a_name_of_16_chr", "bpf-htcp", "x/y", "a.b", ""] {
        let o = cctl(&["load", "htcp", "--name", name]);
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("[A-Za-z0-9_]"),
            "{name}: {}",
            stderr(&o)
        );
    }
    assert_eq!(available(), before);
}

#[test]
fn unknown_param_lists_valid_keys_with_units_and_ranges() {
    let o = cctl(&["load", "htcp", "--param", "alpha=3"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(e.contains("unknown parameter 'alpha'"), "{e}");
    assert!(
        e.contains("delta_l_ms") && e.contains("[1..=60000]") && e.contains("ms"),
        "{e}"
    );
    let o = cctl(&[
        "load",
        "htcp",
        "--param",
        "beta_max_pct=95",
        "--param",
        "beta_min_pct=96",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("must not exceed"), "{}", stderr(&o));
    let o = cctl(&["load", "htcp", "--param", "delta_b_pct=101"]);
    assert!(
        stderr(&o).contains("expected an integer in [0, 100] %"),
        "{}",
        stderr(&o)
    );
}

#[test]
#[ignore = "root: reaches the kernel; `make test` runs it serially"]
fn a_taken_name_is_refused_and_the_existing_one_untouched() {
    let before = available();
    let o = cctl(&["load", "htcp", "--name", "cubic"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("'cubic' is already registered in the kernel"),
        "{}",
        stderr(&o)
    );
    assert_eq!(available(), before);
}

#[test]
fn unloading_a_native_algorithm_is_refused() {
    let o = cctl(&["unload", "cubic"]);
    assert_eq!(o.status.code(), Some(5));
    assert!(stderr(&o).contains("not loaded by cctl"), "{}", stderr(&o));
    assert!(available().split_whitespace().any(|n| n == "cubic"));
}

#[test]
#[ignore = "root: drops privileges with setpriv; `make test` runs it serially"]
fn without_root_it_says_so() {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_cctl"))
        .args(["load", "htcp", "--name", "cctl_cli_np"])
        .output()
        .expect("setpriv runs");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("needs root (or CAP_BPF + CAP_NET_ADMIN"),
        "{}",
        stderr(&o)
    );
    assert!(!available().contains("cctl_cli_np"));
}

#[test]
#[ignore = "root: checks the kernel after the privilege check; `make test` runs it serially"]
fn a_kernel_without_btf_is_named_as_the_missing_feature() {
    let o = Command::new(env!("CARGO_BIN_EXE_cctl"))
        .env("CCTL_VMLINUX_BTF", "/nonexistent/vmlinux")
        .args(["load", "htcp", "--name", "cctl_cli_nobtf"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the running kernel lacks BTF"),
        "{}",
        stderr(&o)
    );
    assert!(!available().contains("cctl_cli_nobtf"));
}

/// A kernel whose BTF has struct_ops links but not the Reno kfuncs (a pre-5.13 kind of
/// kernel, played with a BTF made from a tiny C file) is told which kfuncs are missing.
#[test]
fn a_kernel_without_the_kfuncs_is_told_which_ones_are_missing() {
    let dir = std::env::temp_dir().join(format!("cctl-nokfunc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("fake.c");
    std::fs::write(
        &c,
        "struct bpf_struct_ops_link { int a; };\nstruct tcp_congestion_ops { int b; };\n\
         struct bpf_struct_ops_link l;\nstruct tcp_congestion_ops o;\n",
    )
    .unwrap();
    let obj = dir.join("fake.o");
    let st = Command::new("clang")
        .args(["-g", "-O2", "-target", "bpf", "-c"])
        .arg(&c)
        .arg("-o")
        .arg(&obj)
        .status()
        .expect("clang (installed by make deps)");
    assert!(st.success());
    let o = Command::new(env!("CARGO_BIN_EXE_cctl"))
        .env("CCTL_VMLINUX_BTF", &obj)
        .args(["load", "htcp", "--name", "cctl_cli_nokf"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let err = stderr(&o);
    if nix::unistd::geteuid().is_root() {
        assert_eq!(o.status.code(), Some(4), "{err}");
        assert!(
            err.contains("kfunc(s)") && err.contains("tcp_slow_start") && err.contains("htcp"),
            "{err}"
        );
    } else {
        assert_eq!(o.status.code(), Some(3), "{err}");
    }
    assert!(!available().contains("cctl_cli_nokf"));
}

#[test]
fn list_shows_carried_algorithms_and_the_kernels() {
    let o = cctl(&["list"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("bpf_htcp") && out.contains("bpf_reno") && out.contains("[P0]"),
        "{out}"
    );
    assert!(out.contains("cubic"), "{out}");
    let o = cctl(&["list", "--json"]);
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("one JSON object per line");
        assert!(
            v["kind"] == "algorithm" || v["kind"] == "registered" || v["kind"] == "leftover",
            "{v}"
        );
    }
}

#[test]
fn trace_rejects_a_zero_interval() {
    let o = cctl(&["trace", "--interval-ms", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--interval-ms 0: allowed 1 to 60000 ms"),
        "{}",
        stderr(&o)
    );
}

/// Runs a loopback bulk transfer on `port` for `secs` while `cctl trace` runs.
fn trace_during_transfer(port: u16, fmt: &str) -> Output {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_cctl"))
        .args([
            "trace",
            "--port",
            &port.to_string(),
            "--duration-s",
            "3",
            "--interval-ms",
            "20",
            fmt,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let rx = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        while s.read(&mut buf).map(|n| n > 0).unwrap_or(false) {}
    });
    let mut tx = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let chunk = vec![7u8; 1 << 16];
    let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while std::time::Instant::now() < end {
        tx.write_all(&chunk).unwrap();
    }
    drop(tx);
    rx.join().unwrap();
    child.wait_with_output().unwrap()
}

#[test]
#[ignore = "root: loads the collector; `make test` runs it serially"]
fn trace_json_has_one_sample_object_per_line_and_a_summary() {
    let o = trace_during_transfer(5391, "--json");
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let samples: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert!(samples.len() >= 10, "only {} samples", samples.len());
    for s in &samples {
        assert!(s["sport"] == 5391 || s["dport"] == 5391, "{s}");
        assert_eq!(s["format"], 1, "{s}");
        for key in [
            "ts_ns",
            "cookie",
            "cc",
            "cwnd",
            "srtt_us",
            "rttvar_us",
            "min_rtt_us",
            "bytes_acked",
            "lost_out",
            "total_retrans",
            "in_flight",
            "mss",
            "ca_state",
        ] {
            assert!(!s[key].is_null(), "{key} missing in {s}");
        }
    }
    let e = stderr(&o);
    assert!(
        e.contains("cctl trace: ") && e.contains(" samples, ") && e.contains(" ring-buffer drops"),
        "{e}"
    );
    assert!(e.contains(" 0 ring-buffer drops"), "{e}");
}

#[test]
#[ignore = "root: loads the collector; `make test` runs it serially"]
fn trace_csv_has_a_header_and_rows_of_equal_width() {
    let o = trace_during_transfer(5392, "--csv");
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let mut lines = out.lines();
    let header = lines.next().expect("header");
    assert!(
        header.starts_with("ts_ns,cookie,netns_cookie,saddr,sport,daddr,dport,cc,ca_state"),
        "{header}"
    );
    let width = header.split(',').count();
    let rows: Vec<&str> = lines.collect();
    assert!(rows.len() >= 10, "only {} rows", rows.len());
    assert!(rows.iter().all(|r| r.split(',').count() == width));
}

#[test]
fn default_refuses_an_unregistered_name_and_keeps_the_current_one() {
    let before = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    let o = cctl(&["default", "bpf_htcp_nope"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is not registered; registered: "),
        "{}",
        stderr(&o)
    );
    let after = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    assert_eq!(before, after);
    let o = cctl(&["default"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), before);
}

#[test]
fn bench_refuses_bad_input_before_creating_anything() {
    let ns_before = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap()
        .stdout;
    let o = cctl(&["bench", "run", "no-such-test", "--algo", "reno"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("no-such-test"), "{}", stderr(&o));

    let o = cctl(&[
        "bench",
        "run",
        "fairness-same-rtt",
        "--algo",
        "reno",
        "--profile",
        "huge",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--profile"), "{}", stderr(&o));

    let o = cctl(&[
        "bench",
        "run",
        "fairness-same-rtt",
        "--algo",
        "reno",
        "--repeat",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // A point the sweep does not have: refused with the range, nothing run.
    let o = cctl(&[
        "bench",
        "run",
        "native-comparison",
        "--algo",
        "reno",
        "--points",
        "1,9",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no point 9: this scenario has points 0 to 3"),
        "{}",
        stderr(&o)
    );
    let o = cctl(&[
        "bench",
        "run",
        "native-comparison",
        "--algo",
        "reno",
        "--points",
        "3,1",
        "--dry-run",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("point  1: buffer_bdp=1,n=1")
            && out.contains("point  3: buffer_bdp=1,loss=0.001,n=1")
            && !out.contains("point  0")
            && out.contains("2 points x 1 algorithms"),
        "{out}"
    );

    let dir = std::env::temp_dir().join(format!("cctl-cli-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "id = \"U1\"\nname = \"bad\"\ntitle = \"bad\"\nsource = \"test\"\nmetrics = [\"M1\"]\nplots = []\n\
         [defaults]\nrate_mbit = 10\nrtt_ms = -5\nbuffer_bdp = 1.0\nduration_s = 10\n[[flows]]\ncc = \"{algo}\"\n\
         [profiles.paper]\n[profiles.ci]\n",
    )
    .unwrap();
    let o = cctl(&[
        "bench",
        "run",
        bad.to_str().unwrap(),
        "--algo",
        "reno",
        "--dry-run",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("bad.toml") && e.contains("rtt_ms"), "{e}");

    std::fs::write(
        &bad,
        std::fs::read_to_string(&bad)
            .unwrap()
            .replace("rtt_ms = -5", "rtt_ms = 40\nloss = 1.5"),
    )
    .unwrap();
    let o = cctl(&[
        "bench",
        "run",
        bad.to_str().unwrap(),
        "--algo",
        "reno",
        "--dry-run",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("bad.toml") && e.contains("loss"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();

    let ns_after = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap()
        .stdout;
    assert_eq!(
        ns_before, ns_after,
        "a refused bench run created namespaces"
    );
}

#[test]
fn bench_list_names_every_test_of_the_spec() {
    let o = cctl(&["bench", "list", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let ids: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for id in [
        "T0.1", "T0.9", "T1.1", "T1.4", "T2.5", "T2.7", "T3.1", "T3.6", "V1", "PL1", "MM1", "LUL1",
    ] {
        assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
    }
    // The 22 tests of benchmarks.md, the port-vs-module comparison, the parking lot,
    // modern-mix and rrul.
    assert_eq!(ids.len(), 26);
}

#[test]
fn bench_perf_refuses_unknown_parts_and_names_the_allowed_ones() {
    let out = std::env::temp_dir().join(format!("cctl-cli-perf-{}", std::process::id()));
    let o = cctl(&[
        "bench",
        "perf",
        "--parts",
        "ack,acks",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("unknown part 'acks'")
            && stderr(&o).contains("ack, live, collector, migrate, ceiling"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists(), "a refused run created {}", out.display());
}

/// `cctl ARGS` with its standard output a pipe whose reader is already gone, so that
/// every write fails with EPIPE; as nobody when run as root (`cctl list` then reads only
/// what any user may).
fn cctl_into_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = nix::unistd::pipe().expect("pipe");
    drop(reader);
    let mut cmd = if nix::unistd::geteuid().is_root() {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_cctl"));
        c
    } else {
        Command::new(env!("CARGO_BIN_EXE_cctl"))
    };
    cmd.args(args)
        .stdout(std::process::Stdio::from(writer))
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("cctl runs")
}

#[test]
fn a_closed_pipe_ends_printing_commands_quietly() {
    for args in [
        &["list", "--params"][..],
        &["list", "--json"],
        &["bench", "list"],
        &["bench", "list", "--json"],
        &[
            "bench",
            "run",
            "native-comparison",
            "--algo",
            "reno",
            "--dry-run",
        ],
    ] {
        let o = cctl_into_closed_pipe(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "cctl {args:?}: {e}");
        assert!(e.is_empty(), "cctl {args:?} printed on stderr: {e}");
    }
}

#[test]
fn bench_run_refuses_an_unknown_scenario_as_bad_input() {
    let o = cctl(&["bench", "run", "nosuch", "--algo", "reno"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("no scenario `nosuch`") && e.contains("fairness-same-rtt"),
        "{e}"
    );
    let o = cctl(&["bench", "run", "/nonexistent/s.toml", "--algo", "reno"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("/nonexistent/s.toml"), "{}", stderr(&o));
}

#[test]
fn bench_dry_run_refuses_an_unknown_algorithm_and_lists_the_allowed_ones() {
    let o = cctl(&[
        "bench",
        "run",
        "fairness-same-rtt",
        "--algo",
        "reno,nosuch",
        "--dry-run",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("unknown algorithm 'nosuch'")
            && e.contains("htcp")
            && e.contains("registered: "),
        "{e}"
    );
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    // A profile the algorithm lacks, and a name the kernel would refuse.
    for algo in ["htcp@nosuch", "native:a/b"] {
        let o = cctl(&[
            "bench",
            "run",
            "fairness-same-rtt",
            "--algo",
            algo,
            "--dry-run",
        ]);
        assert_eq!(o.status.code(), Some(2), "{algo}: {}", stderr(&o));
    }
}

#[test]
fn a_papers_scenario_runs_its_variants_and_bad_variants_exit_2_naming_what_exists() {
    let dry = |args: &[&str]| {
        let mut a = vec!["bench", "run"];
        a.extend_from_slice(args);
        a.push("--dry-run");
        cctl(&a)
    };
    let algos = |o: &std::process::Output| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("algorithms: ").map(String::from))
            .unwrap_or_default()
    };
    let o = dry(&["fairness-same-rtt", "--algo", "reno,highspeed,fast,htcp"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(algos(&o), "reno, highspeed@p0, fast@p0, htcp");
    let o = dry(&[
        "fairness-same-rtt",
        "--algo",
        "highspeed,fast",
        "--port-defaults",
    ]);
    assert_eq!(algos(&o), "highspeed, fast");
    // An unknown variant; a variant of an algorithm that has none.
    for (algo, says) in [
        ("fast@p9", "there is no profile 'p9'; profiles: p0, p1"),
        ("reno@p0", "reno has no profiles"),
    ] {
        let o = dry(&["fairness-same-rtt", "--algo", algo]);
        assert_eq!(o.status.code(), Some(2), "{algo}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{algo}: {}", stderr(&o));
    }
    // A scenario asking for a variant one of its algorithms lacks.
    let dir = std::env::temp_dir().join(format!("cctl-variant-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/host-sweep.toml"),
    )
    .unwrap();
    let file = dir.join("s.toml");
    std::fs::write(&file, format!("variant = \"linux\"\n{base}")).unwrap();
    let f = file.to_str().unwrap();
    let o = dry(&[f, "--algo", "htcp"]);
    let ok = (o.status.code(), algos(&o));
    let o = dry(&[f, "--algo", "htcp,fast"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(ok, (Some(0), "htcp@linux".to_string()));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("variant = \"linux\"") && e.contains("profiles: p0, p1"),
        "{e}"
    );
}

#[test]
fn sockets_and_migrate_share_the_socket_filter_flags() {
    let help = |cmd: &str| String::from_utf8_lossy(&cctl(&[cmd, "--help"]).stdout).into_owned();
    for cmd in ["sockets", "migrate"] {
        let h = help(cmd);
        for flag in [
            "--port",
            "--addr",
            "--cookie",
            "--netns",
            "--all-netns",
            "--cgroup",
        ] {
            assert!(h.contains(flag), "cctl {cmd} --help lacks {flag}: {h}");
        }
    }
    assert!(help("sockets").contains("--cc"));
    assert!(!help("migrate").contains("--cc "));
    // Refused by the parser, before anything else.
    for args in [
        &["sockets", "--netns", "x", "--all-netns"][..],
        &[
            "migrate",
            "--from",
            "a",
            "--to",
            "b",
            "--netns",
            "x",
            "--all-netns",
        ],
        &["migrate", "--from", "a", "--to", "b", "--port", "70000"],
    ] {
        let o = cctl(args);
        assert_eq!(o.status.code(), Some(2), "cctl {args:?}: {}", stderr(&o));
    }
}

/// A scratch directory (mode 0755) with `text` written to `cctl.toml` in it (mode `mode`).
fn config_file(tag: &str, text: &str, mode: u32) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("cctl-cli-apply-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let f = dir.join("cctl.toml");
    std::fs::write(&f, text).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).unwrap();
    f
}

#[test]
fn apply_refuses_an_invalid_file_naming_the_field_and_changes_nothing() {
    let before = available();
    for (text, field, hint) in [
        (
            "[[algorithm]]\nalgo = \"htcp\"\nparams = { beta_min_pct = 101 }\n",
            "algorithm[0].params.beta_min_pct",
            "[10, 100] %",
        ),
        (
            "[[algorithm]]\nalgo = \"htcp9\"\n",
            "algorithm[0].algo",
            "allowed: reno, htcp",
        ),
        (
            "[[policy]]\nport = 0\ncc = \"reno\"\n",
            "policy[0].port",
            "1-65535",
        ),
        (
            "defualt = \"reno\"\n",
            "defualt",
            "allowed keys: default, algorithm, policy",
        ),
        ("[[algorithm]\n", "line 1, column", ""),
    ] {
        let f = config_file("bad", text, 0o644);
        for extra in [&[][..], &["--dry-run"][..]] {
            let mut args = vec!["apply", f.to_str().unwrap()];
            args.extend_from_slice(extra);
            let o = cctl(&args);
            let e = stderr(&o);
            assert_eq!(o.status.code(), Some(2), "{text}: {e}");
            assert!(
                e.starts_with(&format!("cctl: {}: {field}", f.display())),
                "{text}: {e}"
            );
            assert!(e.contains(hint), "{text}: {e}");
        }
        std::fs::remove_dir_all(f.parent().unwrap()).unwrap();
    }
    assert_eq!(available(), before);
}

#[test]
fn apply_refuses_a_file_others_can_write_and_says_how_to_fix_it() {
    let f = config_file("untrusted", "default = \"reno\"\n", 0o646);
    let o = cctl(&["apply", f.to_str().unwrap(), "--dry-run"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(9), "{e}");
    assert!(
        e.contains("writable by others") && e.contains(&format!("chmod go-w {}", f.display())),
        "{e}"
    );
    std::fs::remove_dir_all(f.parent().unwrap()).unwrap();
}

#[test]
fn exporter_refuses_a_bad_listen_address_and_says_what_is_allowed() {
    for (listen, says) in [
        ("localhost:9977", "not an ADDR:PORT"),
        ("9977", "not an ADDR:PORT"),
        ("127.0.0.1:99999", "not an ADDR:PORT"),
        ("127.0.0.1:0", "port 0"),
        // TEST-NET-1: never an address of this host.
        ("192.0.2.1:9977", "not an address of this host"),
    ] {
        let o = cctl(&["exporter", "--listen", listen]);
        assert_eq!(o.status.code(), Some(2), "{listen}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(says) && e.contains(listen), "{listen}: {e}");
        assert!(
            e.contains("127.0.0.1") && e.contains("0.0.0.0"),
            "{listen}: {e}"
        );
    }
    let o = cctl(&["exporter", "--per-flow-max", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--per-flow-max 0: allowed 1 to 10000 flows"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn exporter_refuses_a_port_in_use_before_touching_the_kernel() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let o = cctl(&["exporter", "--listen", &addr]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("--listen {addr}: the address is already in use")),
        "{e}"
    );
    assert!(e.contains("choose a free port"), "{e}");
    assert!(!e.contains("collector"), "it went on after the bind: {e}");
}

#[test]
#[ignore = "root: drops privileges with setpriv; `make test` runs it serially"]
fn exporter_without_root_says_so() {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_cctl"))
        .args(["exporter", "--listen", "127.0.0.1:19976"])
        .output()
        .expect("setpriv runs");
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(
        e.contains("running the exporter (it attaches the collector) needs root"),
        "{e}"
    );
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let out = cctl(&["--version"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let commit = text
        .trim()
        .strip_prefix(&format!("cctl {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("`cctl --version` is `cctl VERSION (COMMIT)`: {text}"));
    let hex = commit.trim_end_matches("-modified");
    assert!(
        hex == "unknown" || (hex.len() >= 7 && hex.chars().all(|c| c.is_ascii_hexdigit())),
        "the commit is a git hash (or `unknown` outside a checkout): {commit}"
    );
    assert_eq!(commit, cctl_loader::COMMIT);
}

#[test]
fn man_pages_and_completions_come_from_the_cli_definition() {
    let dir = std::env::temp_dir().join(format!("cctl-man-{}", std::process::id()));
    let o = cctl(&["--man-pages", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let pages: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for page in [
        "cctl.1",
        "cctl-load.1",
        "cctl-bench-run.1",
        "cctl-policy-add.1",
    ] {
        assert!(pages.iter().any(|p| p == page), "{page} in {pages:?}");
    }
    assert!(
        !pages.iter().any(|p| p.contains("-help")),
        "no pages for clap's help subcommands: {pages:?}"
    );
    let top = std::fs::read_to_string(dir.join("cctl.1")).unwrap();
    assert!(
        top.contains(cctl_loader::COMMIT),
        "the page names the build"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let o = cctl(&["--completions", shell]);
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success() && script.contains("unload") && script.contains("bench"));
    }
    let o = cctl(&["--completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "an unknown shell is bad input");
}
