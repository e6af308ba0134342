//! Bad input of the virtual-time commands, refused with exit 2 before anything runs or is
//! created: `cctl bench calibrate`'s parts, rates and clocks; `cctl bench run --duration-s`;
//! resuming a one-guest-per-slot run with another layout. No root, no kernel, no guest.

use std::path::{Path, PathBuf};

mod common;
use common::{cctl, text};

/// A fresh, empty directory for one test.
fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cctl-virtual-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs cctl, expects exit 2 with `want` in its stderr.
fn refused(args: &[&str], want: &str) {
    let o = cctl(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(want),
        "{args:?}: expected {want:?} in {}",
        text(&o)
    );
}

#[test]
fn calibrate_refuses_bad_parts_rates_and_clocks_and_creates_nothing() {
    let out = scratch("calibrate");
    let base = ["bench", "calibrate", "--quick", "--out", s(&out)];
    let with = |extra: &[&'static str]| -> Vec<String> {
        base.iter()
            .map(|a| a.to_string())
            .chain(extra.iter().map(|a| a.to_string()))
            .collect()
    };
    let cases: [(&[&str], &str); 6] = [
        (
            &["--parts", "speed"],
            "unknown part 'speed'; the parts are ceiling,path,theory,repeat,load,agree",
        ),
        // Above what the scenario language allows: the option's parser refuses it, naming
        // the value and the range (the language's limit).
        (
            &["--parts", "ceiling", "--rates", "10,20000"],
            "--rates 20000: allowed more than 0 up to 10000 Mbit/s",
        ),
        (
            &["--rates", "0"],
            "--rates 0: allowed more than 0 up to 10000 Mbit/s",
        ),
        (
            &["--clock", "wall"],
            "--clock wall: not one of virtual, real",
        ),
        (
            &["--clock", "virtual", "--vm", "never"],
            "--vm never runs no guest",
        ),
        // The agreement part runs the other clock too: virtual, which needs a guest.
        (
            &["--clock", "real", "--vm", "never", "--parts", "agree"],
            "--vm never runs no guest",
        ),
    ];
    for (extra, want) in cases {
        let args = with(extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&refs, want);
    }
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "nothing is created"
    );
    let _ = std::fs::remove_dir_all(out);
}

fn host_sweep() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/scenarios/host-sweep.toml")
        .display()
        .to_string()
}

#[test]
fn bench_run_refuses_a_duration_that_is_not_positive_or_past_its_cap() {
    let out = scratch("duration");
    for (d, value) in [
        ("--duration-s=0", "0"),
        ("--duration-s=-5", "-5"),
        ("--duration-s=86401", "86401"),
    ] {
        refused(
            &[
                "bench",
                "run",
                &host_sweep(),
                "--algo",
                "reno",
                d,
                "--out",
                s(&out),
                "--dry-run",
            ],
            &format!("--duration-s {value}: allowed more than 0 up to 86400 s"),
        );
    }
    // A valid one shortens every point, as the dry run shows.
    let o = cctl(&[
        "bench",
        "run",
        &host_sweep(),
        "--algo",
        "reno",
        "--duration-s",
        "2",
        "--dry-run",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(
        t.contains("(1 flows, 2 s)") && t.contains("= 6 s of traffic"),
        "{t}"
    );
    let _ = std::fs::remove_dir_all(out);
}

#[test]
fn a_run_resumes_only_with_the_guest_layout_it_started_with() {
    // Started one guest per run for two runs: resuming a request of three runs (host-sweep's
    // three points), or on the real clock (one guest), is refused.
    let two = scratch("slots");
    for j in ["1", "2"] {
        std::fs::create_dir_all(two.join("slots").join(j)).unwrap();
    }
    let run = |dir: &Path, extra: &[&str]| -> Vec<String> {
        [
            "bench",
            "run",
            &host_sweep(),
            "--algo",
            "reno",
            "--resume",
            s(dir),
        ]
        .iter()
        .map(|a| a.to_string())
        .chain(extra.iter().map(|a| a.to_string()))
        .collect()
    };
    for (extra, want) in [
        (
            &["--clock", "virtual", "--jobs", "3"][..],
            "one guest per run for 2 runs",
        ),
        (&["--clock", "virtual"][..], "and this request plans 3"),
        (
            &["--clock", "real", "--vm", "always"][..],
            "resume it with --clock virtual",
        ),
    ] {
        let args = run(&two, extra);
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&refs, want);
    }
    // Started in one guest (a metadata.json, no slots): not resumed one guest per slot.
    let one = scratch("oneguest");
    std::fs::write(one.join("metadata.json"), "{}").unwrap();
    let args = run(&one, &["--clock", "virtual"]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    refused(&refs, "this sweep ran in one guest");
    for d in [two, one] {
        let _ = std::fs::remove_dir_all(d);
    }
}
