//! `cctl bench diff` on a real results directory (the report crate's fixture, written by
//! `cctl bench run`): exit 0 on a copy, 1 with the first difference named, 2 on directories
//! that cannot be compared. No root, no kernel.

use std::path::{Path, PathBuf};

mod common;
use common::{cctl, root, text};

/// A copy of the fixture in a fresh directory named `name`.
fn copy(name: &str) -> PathBuf {
    let src = root().join("crates/report/tests/fixtures/results-bcd7aa4");
    let dst = std::env::temp_dir().join(format!("cctl-cli-diff-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(dst.join("runs/reno/p0-r0")).unwrap();
    for f in ["metadata.json", "runs/reno/p0-r0/run.json"] {
        std::fs::copy(src.join(f), dst.join(f)).unwrap();
    }
    dst
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn edit_json(path: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(path, v.to_string()).unwrap();
}

#[test]
fn a_copy_is_identical_and_a_changed_sample_is_named() {
    let (a, b) = (copy("a"), copy("b"));
    let o = cctl(&["bench", "diff", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("identical: 0 samples compared in 1 runs"),
        "{}",
        text(&o)
    );

    edit_json(&b.join("runs/reno/p0-r0/run.json"), |v| {
        v["series"][0]["points"][7]["srtt_us"] = 1.into();
    });
    let o = cctl(&["bench", "diff", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("first difference: reno p0 r0, flow 1, t = ")
            && out.contains("run.json series[0].points[7].srtt_us: "),
        "{}",
        text(&o)
    );

    let o = cctl(&["bench", "diff", s(&a), s(&b), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["identical"], false);
    assert_eq!(
        v["first"]["difference"]["field"],
        "series[0].points[7].srtt_us"
    );
    assert_eq!(v["first"]["difference"]["b"], "1");
    assert_eq!(v["first"]["run"]["algo"], "reno");
    for d in [a, b] {
        let _ = std::fs::remove_dir_all(d);
    }
}

#[test]
fn directories_that_cannot_be_compared_exit_2_naming_the_field() {
    let (a, b) = (copy("meta-a"), copy("meta-b"));
    edit_json(&b.join("metadata.json"), |v| {
        v["clock"] = serde_json::json!({"clock": "virtual", "icount_shift": 0, "machine": "tcg"});
    });
    let o = cctl(&["bench", "diff", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("clock differs") && err.contains("virtual"),
        "{}",
        text(&o)
    );

    edit_json(&b.join("metadata.json"), |v| {
        v.as_object_mut().unwrap().remove("clock");
        v["cctl_version"] = "0.2.0 (abcdef123456)".into();
    });
    let o = cctl(&["bench", "diff", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("cctl_version differs"),
        "{}",
        text(&o)
    );

    // Another build, kernel or QEMU: each named with both values.
    let virt = |qemu: &str| serde_json::json!({"clock": "virtual", "icount_shift": 0, "machine": "tcg", "qemu": qemu});
    let cases = [
        (
            "build",
            "build",
            ["sha256:aaaa", "sha256:bbbb"].map(serde_json::Value::from),
        ),
        (
            "kernel",
            "kernel",
            ["6.12.95+deb12-amd64", "6.12.57+deb12-amd64"].map(serde_json::Value::from),
        ),
        (
            "qemu",
            "clock",
            [virt("7.2.22 (Debian)"), virt("10.0.2 (Debian)")],
        ),
    ];
    let shown = [
        ["sha256:aaaa", "sha256:bbbb"],
        ["6.12.95+deb12-amd64", "6.12.57+deb12-amd64"],
        ["7.2.22 (Debian)", "10.0.2 (Debian)"],
    ];
    for ((field, key, values), shown) in cases.into_iter().zip(shown) {
        for (dir, v) in [&a, &b].into_iter().zip(values) {
            edit_json(&dir.join("metadata.json"), |m| {
                m["cctl_version"] = "0.1.0 (bcd7aa4)".into();
                m["kernel"] = "6.12.95+deb12-amd64".into();
                m.as_object_mut().unwrap().remove("build");
                m.as_object_mut().unwrap().remove("clock");
                m[key] = v;
            });
        }
        let o = cctl(&["bench", "diff", s(&a), s(&b)]);
        assert_eq!(o.status.code(), Some(2), "{field}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{field} differs: {} vs {}", shown[0], shown[1])),
            "{field}: {}",
            text(&o)
        );
    }

    let o = cctl(&["bench", "diff", s(&a), "/nonexistent/results"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("is not a results directory"),
        "{}",
        text(&o)
    );
    for d in [a, b] {
        let _ = std::fs::remove_dir_all(d);
    }
}
