//! A scenario's `[[expect]]` tables: `cctl bench report` on a real results directory
//! (crates/report/tests/fixtures/results-bcd7aa4, reno at 10 Mbit/s: goodput utilisation
//! 0.948) prints PASS or FAIL per expectation, writes them into summary.json, and exits 8
//! with `--strict` when one fails; a bad expectation is refused naming its field before
//! anything runs. No root, no kernel.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::{cctl, root, text};

/// A fresh directory for one test, removed when the guard is dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

fn scratch(tag: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("cctl-expect-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}

/// tests/scenarios/host-sweep.toml with `expect` appended, written into `dir`.
fn scenario(dir: &Path, expect: &str) -> PathBuf {
    let base = std::fs::read_to_string(root().join("tests/scenarios/host-sweep.toml")).unwrap();
    let p = dir.join("host-sweep.toml");
    std::fs::write(&p, format!("{base}\n{expect}")).unwrap();
    p
}

/// A copy of the fixture's results directory whose metadata names `scenario`.
fn results(dir: &Path, scenario: &Path) -> PathBuf {
    let from = root().join("crates/report/tests/fixtures/results-bcd7aa4");
    let to = dir.join("results");
    let run = to.join("runs/reno/p0-r0");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::copy(from.join("runs/reno/p0-r0/run.json"), run.join("run.json")).unwrap();
    let mut meta: Value =
        serde_json::from_slice(&std::fs::read(from.join("metadata.json")).unwrap()).unwrap();
    meta["scenario_path"] = Value::String(scenario.display().to_string());
    std::fs::write(
        to.join("metadata.json"),
        serde_json::to_vec_pretty(&meta).unwrap(),
    )
    .unwrap();
    to
}

const PASSING: &str = "[[expect]]\nmetric = \"M8 utilisation (goodput)\"\nmin = 0.9\n\
why = \"one long flow fills the link\"\n";
const FAILING: &str = "[[expect]]\nmetric = \"M13 mean qdelay all flows (ms)\"\n\
where = { algo = \"reno\", point = 0 }\nmax = 10\n";
const NOT_RUN: &str = "[[expect]]\nmetric = \"M4 Jain\"\nwhere = { point = 2 }\nmin = 0.7\n";

#[test]
fn report_prints_pass_and_fail_and_strict_exits_8() {
    let d = scratch("report");
    let sc = scenario(&d, &format!("{PASSING}\n{FAILING}\n{NOT_RUN}"));
    let dir = results(&d, &sc);
    let o = cctl(&["bench", "report", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "PASS M8 utilisation (goodput) >= 0.9 (algo=*, point=*): 1 of 1 held \
             (one long flow fills the link)"
        ),
        "{}",
        text(&o)
    );
    assert!(
        out.contains(
            "FAIL M13 mean qdelay all flows (ms) <= 10 (algo=reno, point=0): 0 of 1 held; \
             point 0 reno = 47.2156"
        ),
        "{}",
        text(&o)
    );
    assert!(out.contains("NOT RUN M4 Jain >= 0.7"), "{}", text(&o));
    let summary: Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let verdicts: Vec<&str> = summary["expectations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["pass", "fail", "not_run"]);
    assert_eq!(summary["expectations"][0]["cases"][0]["mean"], 0.9480112);
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(
        md.contains("## Expectations") && md.contains("- FAIL M13"),
        "{md}"
    );

    let o = cctl(&["bench", "report", dir.to_str().unwrap(), "--strict"]);
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
    // Only the passing one: --strict exits 0 (NOT RUN does not fail it).
    let sc = scenario(&d, &format!("{PASSING}\n{NOT_RUN}"));
    let pass = scratch("report-pass");
    let dir = results(&pass, &sc);
    let o = cctl(&["bench", "report", dir.to_str().unwrap(), "--strict"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn bad_expectations_are_refused_naming_the_field_before_anything_runs() {
    let d = scratch("bad");
    for (expect, says) in [
        (
            "[[expect]]\nmetric = \"M8 utilisation\"\nmin = 0.9\n",
            "expect[0].metric: unknown metric `M8 utilisation`",
        ),
        (
            "[[expect]]\nmetric = \"M4 Jain\"\nwhere = { point = 3 }\nmin = 0.7\n",
            "expect[0].where.point: point 3 matches nothing: the profiles have at most 3 point(s)",
        ),
        (
            "[[expect]]\nmetric = \"M4 Jain\"\n",
            "expect[0]: give `min`, `max` or both",
        ),
        (
            "[[expect]]\nmetric = \"M4 Jain\"\nmin = 0.7\nwhere = { algo = \"htcp\" }\n",
            "expect[0].where.algo `htcp` matches none of the algorithms of this run (reno)",
        ),
    ] {
        let sc = scenario(&d, expect);
        let o = cctl(&[
            "bench",
            "run",
            sc.to_str().unwrap(),
            "--algo",
            "reno",
            "--dry-run",
        ]);
        assert_eq!(o.status.code(), Some(2), "{expect}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(says),
            "{expect}: {}",
            text(&o)
        );
    }
    // A good one is listed by --dry-run.
    let sc = scenario(&d, PASSING);
    let o = cctl(&[
        "bench",
        "run",
        sc.to_str().unwrap(),
        "--algo",
        "reno",
        "--dry-run",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("expect: M8 utilisation (goodput) >= 0.9 (algo=*, point=*)"),
        "{}",
        text(&o)
    );
}
