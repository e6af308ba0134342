//! Running benchmark scenarios from tests: one call runs a scenario in the ci profile and
//! returns its summary; one reads a metric out of it.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cctl_bench::execute::run_scenario;
use cctl_bench::run::RunOptions;
use cctl_report::record::read_records;
use cctl_report::summary::{self, Summary};
use cctl_scenario::{Profile, Scenario};

/// Runs `sc` in the ci profile (repeat 1) for `algos`, results under `out`; returns the
/// run's directory and its summary, and prints the summary table.
pub fn run_ci(sc: &Scenario, algos: &[&str], out: &Path) -> (std::path::PathBuf, Summary) {
    let opts = RunOptions {
        algos: algos.iter().map(|s| s.to_string()).collect(),
        profile: Profile::Ci,
        repeat: Some(1),
        out: out.to_path_buf(),
        seed: None,
        interval: Duration::from_millis(100),
        queue_interval: Duration::from_millis(100),
        delay_sample: cctl_bench::run::DELAY_SAMPLE_DEFAULT,
        progress: false,
        points: None,
        jobs: 1,
        shard: None,
        slot: None,
        duration_s: None,
        resume: None,
    };
    let (dir, records) = run_scenario(sc, &opts, Arc::new(AtomicBool::new(false)))
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
