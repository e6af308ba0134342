//! Benchmark scenarios on a netem dumbbell, checked against what the papers describe.
//! Where the running kernel has no sch_netem (these hosts), the test re-runs itself
//! inside a virtme-ng VM with Debian's 6.12 kernel; elsewhere it runs directly.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cctl_bench::report::{self, Summary};
use cctl_bench::runner::{self, RunOptions};
use cctl_bench::scenario::{self, Profile, Scenario};
use cctl_bench::testbed::netem_available;
use cctl_bench::vm;
use cctl_tests::{require_root, KERNEL};

const IN_VM: &str = "CCTL_TEST_IN_VM";

fn results_root() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("netem-results")
}

/// Runs `sc` in the ci profile (repeat 1) for `algos`; returns its summary.
fn run(sc: &Scenario, algos: &[&str]) -> Summary {
    let opts = RunOptions {
        algos: algos.iter().map(|s| s.to_string()).collect(),
        profile: Profile::Ci,
        repeat: Some(1),
        out: results_root(),
        seed: None,
        interval: Duration::from_millis(100),
        queue_interval: Duration::from_millis(100),
        progress: false,
    };
    let (dir, records) = runner::run_scenario(sc, &opts, Arc::new(AtomicBool::new(false)))
        .unwrap_or_else(|e| panic!("{}: {e:#}", sc.name));
    let (meta, _) = runner::read_records(&dir).expect("metadata");
    let s = report::write_all(&dir, &meta, &records, sc).expect("report");
    eprintln!(
        "{} -> {}\n{}",
        sc.name,
        dir.display(),
        report::terminal_table(&s, &sc.metrics)
    );
    s
}

fn metric(s: &Summary, algo: &str, point: usize, name: &str) -> Option<f64> {
    s.rows
        .iter()
        .find(|r| r.algo == algo && r.point == point)
        .and_then(|r| r.metrics.get(name))
        .filter(|a| !a.values.is_empty())
        .map(|a| a.mean)
}

fn builtin(name: &str) -> Scenario {
    scenario::find(name).unwrap_or_else(|e| panic!("{e}"))
}

/// One flow, 20 Mbit/s, 40 ms, buffer = 100 % BDP.
const SINGLE_FLOW: &str = r#"
id = "X.1"
name = "single-flow-full-buffer"
title = "One flow, 100 % BDP buffer"
source = "cctl test"
metrics = ["M1", "M8"]
plots = ["cwnd"]
[defaults]
rate_mbit = 20
rtt_ms = 40
buffer_bdp = 1.0
duration_s = 30
[[flows]]
cc = "{algo}"
[profiles.paper]
duration_s = 30
[profiles.ci]
duration_s = 30
"#;

fn checks_in_a_netem_kernel() {
    // A single flow with a 100 % BDP buffer keeps the link busy.
    let sc = Scenario::parse(SINGLE_FLOW, Path::new("<test>/single.toml")).expect("test scenario");
    let s = run(&sc, &["reno", "htcp"]);
    for algo in ["reno", "htcp"] {
        let u = metric(&s, algo, 0, "M8 utilisation (wire)").expect("utilisation");
        assert!(
            u >= 0.9,
            "{algo}: utilisation {u} < 0.9 with a 100 % BDP buffer"
        );
    }

    // Two H-TCP flows with the same RTT share the link.
    let s = run(&builtin("fairness-same-rtt"), &["htcp"]);
    for r in s.rows.iter() {
        let ratio = metric(&s, "htcp", r.point, "M3 R_minmax").expect("ratio");
        assert!(
            ratio >= 0.8,
            "H-TCP same-RTT ratio {ratio} < 0.8 at point {}",
            r.point
        );
    }

    // With different RTTs, Reno gives the short-RTT flow more throughput.
    let s = run(&builtin("rtt-unfairness"), &["reno"]);
    let mut unequal = 0;
    for r in &s.rows {
        let (rtt1, rtt2) = (
            r.vars.get("rtt_ms").copied().unwrap_or(82.0),
            r.vars["rtt2_ms"],
        );
        if (rtt1 - rtt2).abs() < 1.0 {
            continue;
        }
        unequal += 1;
        let u1 = metric(&s, "reno", r.point, "M1 flow1 (Mbit/s)").unwrap();
        let u2 = metric(&s, "reno", r.point, "M1 flow2 (Mbit/s)").unwrap();
        let (short, long) = if rtt2 < rtt1 { (u2, u1) } else { (u1, u2) };
        assert!(
            short > long,
            "Reno: short-RTT flow {short} Mbit/s not above long-RTT {long} at point {}",
            r.point
        );
    }
    assert!(unequal > 0, "the scenario has no point with different RTTs");

    // The response function falls as the random loss rate rises.
    let s = run(&builtin("response-function"), &["reno", "htcp"]);
    for algo in ["reno", "htcp"] {
        let mut pts: Vec<(f64, f64)> = s
            .rows
            .iter()
            .filter(|r| r.algo == algo)
            .map(|r| {
                (
                    r.loss,
                    metric(&s, algo, r.point, "M1 flow1 (Mbit/s)").expect("throughput"),
                )
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        assert!(pts.len() >= 3, "{algo}: too few loss points");
        for w in pts.windows(2) {
            assert!(
                w[1].1 < w[0].1,
                "{algo}: throughput did not fall from p={} to p={}: {pts:?}",
                w[0].0,
                w[1].0
            );
        }
    }

    // The 80 % convergence time of H-TCP is computed and finite.
    let s = run(&builtin("convergence-time"), &["htcp"]);
    for r in &s.rows {
        let t = metric(&s, "htcp", r.point, "M5 A (s)");
        assert!(
            t.is_some_and(f64::is_finite),
            "H-TCP did not converge (NC) at point {}",
            r.point
        );
    }

    // The guest's native module runs the same scenario as the BPF port.
    let s = run(&builtin("fairness-same-rtt"), &["native:htcp"]);
    assert!(
        s.rows.iter().all(|r| r.metrics.contains_key("M3 R_minmax")),
        "native htcp produced no ratio"
    );
}

#[test]
fn netem_scenarios_behave_as_the_papers_describe() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    if netem_available() {
        checks_in_a_netem_kernel();
        return;
    }
    assert!(
        std::env::var_os(IN_VM).is_none(),
        "inside the VM the kernel must have netem"
    );
    // Re-run this test in a guest with a netem-capable kernel.
    vm::check_vm_deps()
        .unwrap_or_else(|e| panic!("netem is missing here and the VM cannot start: {e}"));
    let root = results_root();
    std::fs::create_dir_all(&root).unwrap();
    let exe = std::env::current_exe().unwrap();
    let script = format!(
        "export {IN_VM}=1 RUST_BACKTRACE=1\nexec '{}' --exact netem_scenarios_behave_as_the_papers_describe --nocapture --test-threads=1\n",
        exe.display()
    );
    let mut spec = vm::VmSpec::detect().unwrap_or_else(|e| panic!("{e}"));
    spec.rwdirs.push(root.clone());
    spec.timeout = Duration::from_secs(40 * 60);
    spec.echo = true;
    let out = vm::run_in_vm(&spec, &script).unwrap_or_else(|e| panic!("running the guest: {e}"));
    assert!(
        out.success(),
        "the netem checks failed in the VM (results in {}): status {:?}",
        root.display(),
        out.status
    );
    assert!(
        out.stdout.contains("test result: ok. 1 passed"),
        "the guest did not run the test:\n{}",
        out.stdout
    );
}
