//! The CI smoke version of the performance benchmark: `cctl bench perf --quick` runs every
//! part on the host and the guest halves (native modules, netem) in the 6.12 guest, writes
//! `perf.json` and `perf.md` with a figure and its reference for each part, and leaves no
//! namespace or loaded algorithm behind. The figures of a quick run are not checked against
//! the targets (that is the benchmark's job, not a test's on a noisy machine); only
//! that they were measured: finite, positive, with their references and ratios.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use cctl_bench::perf::{self, Part, Site};
use cctl_loader::registry;
use cctl_tests::{cctl_bin, require_root, KERNEL};

fn out_root() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("perf-smoke")
}

fn loaded() -> Vec<String> {
    registry::list_loaded()
        .expect("listing cctl's algorithms")
        .into_iter()
        .map(|r| r.name)
        .collect()
}

/// A quick run takes 2-3 minutes (host half, one guest boot, guest half); past this it is
/// stuck and gets interrupted, so the failure shows its progress lines instead of hanging CI.
const WATCHDOG: Duration = Duration::from_secs(600);

/// Runs `cmd` to completion, with its output captured; past [`WATCHDOG`] it gets SIGINT (cctl
/// stops its parts and cleans up) and, 60 s later, SIGKILL.
fn run_watched(cmd: &mut Command) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting cctl bench perf");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let started = Instant::now();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(WATCHDOG).is_ok() {
            return false;
        }
        eprintln!("perf smoke: still running after {WATCHDOG:?}: SIGINT");
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        if done_rx.recv_timeout(Duration::from_secs(60)).is_err() {
            eprintln!("perf smoke: still running 60 s after SIGINT: SIGKILL");
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
        true
    });
    let out = child
        .wait_with_output()
        .expect("waiting for cctl bench perf");
    let _ = done_tx.send(());
    let fired = watchdog.join().unwrap_or(false);
    if fired {
        eprintln!(
            "perf smoke: cctl bench perf was interrupted by the test's watchdog after {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    out
}

/// The kernel log's last 40 lines (an OOM kill, a warning from the stack), for a failure.
fn kernel_log_tail() -> String {
    Command::new("dmesg")
        .output()
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(40)..].join("\n")
        })
        .unwrap_or_else(|e| format!("(dmesg failed: {e})"))
}

#[test]
fn perf_quick_measures_every_part_beside_its_reference_and_cleans_up() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let root = out_root();
    let _ = std::fs::remove_dir_all(&root);
    let ns_before = cctl_tests::bench::all_namespaces();
    let loaded_before = loaded();

    let o = run_watched(
        Command::new(cctl_bin())
            .args(["bench", "perf", "--quick", "--out"])
            .arg(&root),
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        o.status.success(),
        "cctl bench perf --quick failed ({:?}):\n{stderr}\n{stdout}\nkernel log (last lines):\n{}",
        o.status,
        kernel_log_tail()
    );

    let dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("results root")
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(
        dirs.len(),
        1,
        "one timestamped run directory expected: {dirs:?}"
    );
    let report = perf::read(&dirs[0].join("perf.json")).expect("perf.json");
    assert!(report.quick);
    assert!(
        !report.failed(),
        "a part failed: {:#?}",
        report
            .parts
            .iter()
            .filter(|p| p.error.is_some())
            .collect::<Vec<_>>()
    );
    assert!(
        report
            .guest_kernel
            .as_deref()
            .is_some_and(|k| k.starts_with("6.12")),
        "guest kernel {:?}",
        report.guest_kernel
    );

    for part in Part::ALL {
        let mut sites = vec![Site::Host];
        if part.has_guest_half() {
            sites.push(Site::Guest);
        }
        for site in sites {
            let outcome = report
                .parts
                .iter()
                .find(|p| p.part == part && p.site == site)
                .unwrap_or_else(|| panic!("no {part} outcome on {site:?}"));
            let rows = &outcome.result.rows;
            assert!(!rows.is_empty(), "{part} on {site:?}: no figures");
            for r in rows {
                assert!(r.value.is_finite() && r.value >= 0.0, "{part}: {r:?}");
                if let Some(reference) = r.reference {
                    assert!(
                        reference.is_finite() && reference > 0.0,
                        "{part}: reference of {r:?}"
                    );
                    let ratio = r.ratio.expect("a row with a reference has a ratio");
                    assert!((ratio - r.value / reference).abs() < 1e-9, "{r:?}");
                }
            }
            // Each part compares with something (the point: ratios, not times).
            if part != Part::Migrate && part != Part::Ceiling {
                assert!(
                    rows.iter().any(|r| r.reference.is_some()),
                    "{part} on {site:?}: no reference figure"
                );
            }
        }
    }

    // Per-ACK cost: reno and cubic against their built-in modules on the host, a module
    // only the guest has in the guest; throughput and CPU per GB for each.
    let ack = |site: Site, algo: &str| -> Vec<&perf::Row> {
        report
            .rows()
            .filter(|r| {
                r.part == Part::Ack
                    && r.site == site
                    && r.item.contains(algo)
                    && r.reference.is_some()
            })
            .collect()
    };
    for algo in ["reno", "cubic"] {
        let rows = ack(Site::Host, algo);
        assert!(rows.len() >= 2, "ack {algo} on the host: {rows:?}");
        for r in rows {
            let ratio = r.ratio.unwrap();
            // Sanity, not a target: a port 3x off its module means the measurement broke.
            assert!((0.33..3.0).contains(&ratio), "ack {algo}: {r:?}");
        }
    }
    assert!(
        report.rows().any(|r| r.part == Part::Ack
            && r.site == Site::Guest
            && r.reference.is_some()
            && !r.item.contains("reno")
            && !r.item.contains("cubic")),
        "the guest compared no module beyond reno and cubic"
    );

    let md = std::fs::read_to_string(dirs[0].join("perf.md")).expect("perf.md");
    assert!(md.contains("| part | where | item |"), "{md}");
    for part in Part::ALL {
        assert!(
            md.contains(&format!("| {part} |")),
            "{part} missing from perf.md:\n{md}"
        );
    }
    assert!(stdout.contains("results: "), "{stdout}");

    let leftovers: Vec<String> = cctl_tests::bench::all_namespaces()
        .into_iter()
        .filter(|n| !ns_before.contains(n))
        .collect();
    assert!(
        leftovers.is_empty(),
        "namespaces left behind: {leftovers:?}"
    );
    assert_eq!(loaded(), loaded_before, "algorithms left loaded");
}
