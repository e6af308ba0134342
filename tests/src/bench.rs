//! Running benchmark scenarios from tests: one call runs a scenario in the ci profile and
//! returns its summary; one reads a metric out of it; others say what a sweep left behind.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use cctl_bench::execute::run_scenario;
use cctl_bench::request::RunRequest;
use cctl_loader::registry;
use cctl_netem::slot::PREFIX;
use cctl_report::record::read_records;
use cctl_report::summary::{self, Summary};
use cctl_scenario::Scenario;

/// Runs `sc` in the ci profile (repeat 1) for `algos`, results under `out`; returns the
/// run's directory and its summary, and prints the summary table.
pub fn run_ci(sc: &Scenario, algos: &[&str], out: &Path) -> (std::path::PathBuf, Summary) {
    run_ci_points(sc, algos, out, None)
}

/// [`run_ci`] of only `points` of the sweep (indices as `cctl bench run --dry-run` lists
/// them; `None`: every point).
pub fn run_ci_points(
    sc: &Scenario,
    algos: &[&str],
    out: &Path,
    points: Option<&[usize]>,
) -> (std::path::PathBuf, Summary) {
    let algos: Vec<&str> = algos.to_vec();
    let req = RunRequest {
        repeat: Some(1),
        out: out.to_path_buf(),
        points: points.map(<[usize]>::to_vec),
        ..RunRequest::new(&sc.name, &algos)
    };
    let (dir, records) = run_scenario(sc, &req, false, Arc::new(AtomicBool::new(false)))
        .unwrap_or_else(|e| panic!("{}: {e:#}", sc.name));
    let (meta, _) = read_records(&dir).expect("metadata");
    let s =
        cctl_report::write::write_all(&dir, &meta, &records, sc, cctl_bench::resolve::native_of)
            .expect("report");
    eprintln!(
        "{} -> {}\n{}",
        sc.name,
        dir.display(),
        summary::terminal_table(&s, &sc.metrics)
    );
    (dir, s)
}

/// Mean of metric `name` (a summary column such as `"M1 flow1 (Mbit/s)"`) of `algo` at
/// `point`; `None` when absent or without values.
pub fn metric(s: &Summary, algo: &str, point: usize, name: &str) -> Option<f64> {
    s.rows
        .iter()
        .find(|r| r.algo == algo && r.point == point)
        .and_then(|r| r.metrics.get(name))
        .filter(|a| !a.values.is_empty())
        .map(|a| a.mean)
}

/// Every named network namespace (`ip netns list`).
pub fn all_namespaces() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

/// The namespaces of bench runs (`cctl-b*`) in `ip netns list`.
pub fn namespaces() -> Vec<String> {
    all_namespaces()
        .into_iter()
        .filter(|n| n.starts_with(PREFIX))
        .collect()
}

/// What sweeps left behind: their namespaces (and so the veths and qdiscs of their
/// dumbbells), `cctl-b*` devices in the host namespace, and of `registered` (the names a
/// sweep loads) those still registered or with a pin or record. Empty when nothing is.
pub fn leftovers(registered: &[&str]) -> Vec<String> {
    let mut left: Vec<String> = namespaces()
        .into_iter()
        .map(|n| format!("namespace {n}"))
        .collect();
    let links = Command::new("ip")
        .args(["-o", "link"])
        .output()
        .expect("ip -o link");
    for l in String::from_utf8_lossy(&links.stdout).lines() {
        if l.contains(PREFIX) {
            left.push(format!("host device: {l}"));
        }
    }
    let ccs = crate::available();
    for n in registered {
        if ccs.iter().any(|c| c == n) {
            left.push(format!("{n} registered"));
        }
        if Path::new(registry::META_DIR)
            .join(format!("{n}.json"))
            .exists()
        {
            left.push(format!("{n} record"));
        }
        if Path::new(registry::PIN_DIR).join(n).exists() || registry::versions_dir(n).exists() {
            left.push(format!("{n} pins"));
        }
    }
    left
}

/// Panics unless sweeps left nothing behind ([`leftovers`]); `when` says at which point.
pub fn assert_nothing_left(when: &str, registered: &[&str]) {
    let left = leftovers(registered);
    assert!(left.is_empty(), "{when}: left behind: {left:?}");
}
