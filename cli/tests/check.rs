//! `cctl bench check` on a real summary.json (tests/fixtures/summary.json, from a real
//! guest run; fixtures/README.md says which): exit 0 against an unchanged copy, 8 naming
//! the one metric moved outside its tolerance, 0 once a tolerance file loosens it, 2 on
//! bad input naming the file or key. No root, no kernel.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::{cctl, text};

fn baseline() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/summary.json")
}

fn read_baseline() -> Value {
    serde_json::from_slice(&std::fs::read(baseline()).unwrap()).unwrap()
}

/// A fresh directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cctl-check-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A results directory holding `summary` as its summary.json.
fn results_dir(tag: &str, summary: &Value) -> PathBuf {
    let d = scratch(tag);
    std::fs::write(
        d.join("summary.json"),
        serde_json::to_vec_pretty(summary).unwrap(),
    )
    .unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Point 1's (20 Mbit/s) Jain index, multiplied by `factor`, in a copy of the baseline.
fn with_jain_scaled(factor: f64) -> (Value, f64, f64) {
    let mut v = read_baseline();
    let row = v["rows"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["point"] == 1)
        .expect("the fixture has point 1");
    let mean = &mut row["metrics"]["M4 Jain"]["mean"];
    let base = mean.as_f64().unwrap();
    *mean = Value::from(base * factor);
    (v, base, base * factor)
}

#[test]
fn an_unchanged_copy_of_a_real_summary_passes() {
    let copy = results_dir("same", &read_baseline());
    let o = cctl(&["bench", "check", s(&copy), "--baseline", s(&baseline())]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.starts_with("PASS: 52 metrics within, 0 outside"),
        "{out}"
    );
    // The JSON verdict says the same.
    let o = cctl(&[
        "bench",
        "check",
        s(&copy),
        "--baseline",
        s(&baseline()),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["pass"], true);
    assert_eq!(v["within"], 52);
    let _ = std::fs::remove_dir_all(copy);
}

#[test]
fn one_metric_moved_outside_its_tolerance_exits_8_naming_it_alone() {
    // −20 % against the built-in 10 %.
    let (moved, base, new) = with_jain_scaled(0.8);
    let dir = results_dir("moved", &moved);
    let o = cctl(&["bench", "check", s(&dir), "--baseline", s(&baseline())]);
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let flagged: Vec<&str> = out.lines().filter(|l| l.starts_with("OUTSIDE")).collect();
    assert_eq!(flagged.len(), 1, "{out}");
    assert!(
        flagged[0].starts_with("OUTSIDE reno point 1 (buffer_pkts=33 loss=0.0 rate_mbit=20.0) \"M4 Jain\": baseline 0.998689, result 0.798951, delta -0.199738 (-20.0 %), bound ±0.0998689 (rel 0.1, abs 0)"),
        "{out}"
    );
    assert!(
        out.contains("REGRESSION: 51 metrics within, 1 outside"),
        "{out}"
    );

    let o = cctl(&[
        "bench",
        "check",
        s(&dir),
        "--baseline",
        s(&baseline()),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["pass"], false);
    let outside = v["outside"].as_array().unwrap();
    assert_eq!(outside.len(), 1, "{v}");
    assert_eq!(outside[0]["metric"], "M4 Jain");
    assert_eq!(outside[0]["point"]["point"], 1);
    assert_eq!(outside[0]["baseline"].as_f64(), Some(base));
    assert_eq!(outside[0]["result"].as_f64(), Some(new));

    // A tolerance file loosening that metric (25 %) lets it pass; the others keep the
    // default.
    let tol = dir.join("tolerance.toml");
    std::fs::write(
        &tol,
        "default = { rel = 0.1 }\n\"M4 Jain\" = { rel = 0.25 }\n",
    )
    .unwrap();
    let o = cctl(&[
        "bench",
        "check",
        s(&dir),
        "--baseline",
        s(&baseline()),
        "--tolerance",
        s(&tol),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("PASS: 52 metrics within"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_metric_or_point_missing_from_the_results_exits_8_naming_it() {
    let mut v = read_baseline();
    let rows = v["rows"].as_array_mut().unwrap();
    rows[0]["metrics"]
        .as_object_mut()
        .unwrap()
        .remove("M9 drop rate")
        .unwrap();
    rows.retain(|r| r["point"] != 1);
    let dir = results_dir("missing", &v);
    let o = cctl(&["bench", "check", s(&dir), "--baseline", s(&baseline())]);
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("MISSING reno point 0 (buffer_pkts=17 loss=0.0 rate_mbit=10.0) \"M9 drop rate\": in the baseline, not in the results"),
        "{out}"
    );
    assert!(
        out.contains("MISSING reno point 1 (buffer_pkts=33 loss=0.0 rate_mbit=20.0): in the baseline, not in the results"),
        "{out}"
    );
    assert!(!out.contains("OUTSIDE"), "{out}");
    // The other way round the extras are reported and pass.
    let o = cctl(&["bench", "check", s(&baseline()), "--baseline", s(&dir)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("extra reno point 1 ("), "{out}");
    assert!(
        out.contains(
            "extra reno point 0 (buffer_pkts=17 loss=0.0 rate_mbit=10.0) \"M9 drop rate\""
        ),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bad_tolerance_file_exits_2_naming_the_key() {
    let dir = scratch("badtol");
    for (toml, want) in [
        (
            "\"M4 Jain\" = { rel = 0.25, absolute = 1 }\n",
            "\"M4 Jain\".absolute: unknown key; allowed: rel",
        ),
        (
            "\"M8 utilisation (wire)\" = { rel = -0.05 }\n",
            "\"M8 utilisation (wire)\".rel: -0.05 is not allowed; give a finite number >= 0",
        ),
        ("default = 0.1\n", "default: expected a table"),
        ("default = { rel = \n", "not valid TOML"),
    ] {
        let tol = dir.join("tolerance.toml");
        std::fs::write(&tol, toml).unwrap();
        let o = cctl(&[
            "bench",
            "check",
            s(&baseline()),
            "--baseline",
            s(&baseline()),
            "--tolerance",
            s(&tol),
        ]);
        assert_eq!(o.status.code(), Some(2), "{toml}: {}", text(&o));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.starts_with(&format!("cctl: {}: ", tol.display())) && e.contains(want),
            "{toml}: {e}"
        );
        assert!(o.stdout.is_empty(), "{}", text(&o));
    }
    // A tolerance for a metric neither file has is a warning, not an error.
    let tol = dir.join("tolerance.toml");
    std::fs::write(&tol, "\"M4 Jian\" = { rel = 0.5 }\n").unwrap();
    let o = cctl(&[
        "bench",
        "check",
        s(&baseline()),
        "--baseline",
        s(&baseline()),
        "--tolerance",
        s(&tol),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("warning: the tolerance for \"M4 Jian\" names a metric neither summary has"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_malformed_or_absent_summary_exits_2_naming_the_file() {
    let dir = scratch("badsum");
    let bad = dir.join("summary.json");
    std::fs::write(&bad, "{\"rows\": [{\"algo\": \"reno\"}]}").unwrap();
    let o = cctl(&["bench", "check", s(&dir), "--baseline", s(&baseline())]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).starts_with(&format!(
            "cctl: {}: not a valid summary.json: rows[0]: no `point`",
            bad.display()
        )),
        "{}",
        text(&o)
    );
    let absent = dir.join("nothing-here");
    let o = cctl(&["bench", "check", s(&baseline()), "--baseline", s(&absent)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("{}: No such file", absent.display())),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bench_run_refuses_a_bad_baseline_before_running_anything() {
    let dir = scratch("runcheck");
    let o = cctl(&[
        "bench",
        "run",
        "fairness-same-rtt",
        "--algo",
        "reno",
        "--out",
        s(&dir),
        "--check",
        s(&dir.join("none.json")),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("none.json: No such file"),
        "{}",
        text(&o)
    );
    // --tolerance only goes with --check.
    let o = cctl(&[
        "bench",
        "run",
        "fairness-same-rtt",
        "--algo",
        "reno",
        "--tolerance",
        "x.toml",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Nothing was run: the results root is still empty.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    let _ = std::fs::remove_dir_all(dir);
}

/// A copy of the baseline as if timed by `clock`.
fn with_clock(clock: &str) -> Value {
    let mut v = read_baseline();
    v["metadata"]["clock"] = serde_json::json!({
        "clock": clock, "icount_shift": 0, "machine": "tcg", "vcpus": 2, "memory_mb": 2048,
    });
    v
}

#[test]
fn check_refuses_to_compare_clocks_and_a_summary_without_one_is_real() {
    // The fixture predates the clock record: it ran on the real clock.
    let real = results_dir("clock-real", &with_clock("real"));
    let o = cctl(&["bench", "check", s(&real), "--baseline", s(&baseline())]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let virt = results_dir("clock-virtual", &with_clock("virtual"));
    let o = cctl(&["bench", "check", s(&virt), "--baseline", s(&baseline())]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("metadata.clock.clock") && err.contains(r#""virtual" vs "real""#),
        "{}",
        text(&o)
    );
    assert!(o.stdout.is_empty(), "no verdict printed: {}", text(&o));
    for d in [real, virt] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn clocks_that_cannot_run_are_refused_before_anything_runs() {
    let dir = scratch("clockrefuse");
    let run = |extra: &[&str], env: Option<(&str, &str)>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_cctl"));
        c.args([
            "bench",
            "run",
            "fairness-same-rtt",
            "--algo",
            "reno",
            "--out",
        ])
        .arg(&dir)
        .args(extra);
        if let Some((k, v)) = env {
            c.env(k, v);
        }
        c.output().expect("cctl runs")
    };
    // An unknown clock: clap names the ones there are.
    let o = run(&["--clock", "wall"], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--clock wall: not one of virtual, real"),
        "{}",
        text(&o)
    );
    // The virtual clock is the guest's: not without one.
    let o = run(&["--clock", "virtual", "--vm", "never"], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--vm never runs no guest"),
        "{}",
        text(&o)
    );
    // KVM cannot count instructions.
    let o = run(&["--clock", "virtual"], Some(("CCTL_VM_ACCEL", "kvm")));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("CCTL_VM_ACCEL=kvm forces KVM"),
        "{}",
        text(&o)
    );
    // A baseline of the other clock, before the run.
    let base = results_dir("clockbase", &with_clock("virtual"));
    let o = run(&["--clock", "real", "--check", s(&base)], None);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("give --clock virtual to compare with it"),
        "{}",
        text(&o)
    );
    // The same refusal for bench perf's guest halves.
    let o = cctl(&["bench", "perf", "--clock", "virtual", "--vm", "never"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Nothing was run: the results root is still empty.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    for d in [dir, base] {
        let _ = std::fs::remove_dir_all(d);
    }
}
