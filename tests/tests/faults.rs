//! The fault matrix: every step at which a command changes the kernel
//! (`cctl_loader::faults::STEPS`) gets two faults, an error returned there and a SIGKILL
//! of the process there (`$FAILPOINTS`, the `fail` crate; the cctl binary of
//! `cargo test --workspace` is built with them). After each:
//!
//! - `cctl list` tells the truth: the names it shows are the ones registered in the kernel,
//!   and the version it marks current is the one the kernel's link runs;
//! - the same command run again (`cctl apply` with the same file for apply) reaches the
//!   intended state;
//! - nothing leaks once the test's names and rules are removed: no pin, record or leftover.
//!
//! Commands that change more than names and rules say what else they left (`found`) and
//! check it themselves:
//!
//! - `cctl migrate --all-netns`, cut between namespaces, has moved some of the flows but
//!   not all; run again, it moves the rest;
//! - `cctl bench run --resume DIR` (host-sweep, one point, two algorithms, 0.2 s runs), cut
//!   once its algorithms are loaded or once a run's testbed is up, keeps the runs it had
//!   finished; an error removes everything it made; after a SIGKILL the same command
//!   removes what the killed one left (namespaces, orphaned algorithms) and completes the
//!   sweep, leaving nothing behind.
//!
//! The table of what was found is printed (`--nocapture`). Names `fx_*`, port 47511 (rules),
//! 47512 (migrated flows), namespaces `cctl-fx-*`; the sweep's `bpf_reno`, `bpf_cubic` and
//! `cctl-b*` namespaces.

use std::any::Any;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cctl_loader::faults::STEPS;
use cctl_loader::policy::{self, RuleSpec, Target};
use cctl_loader::{live, registry};
use cctl_report::resume::completed_runs;
use cctl_tests::sockets::{clients, idle_pairs, idle_pairs_here, Netns};
use cctl_tests::{available, bench, cctl_bin, clean_slate, require_root, KERNEL};

const PORT: u16 = 47511;
const NAMES: &[&str] = &[
    "fx_load", "fx_un", "fx_up", "fx_rb", "fx_set", "fx_po", "fx_ap1", "fx_ap2",
];
/// Port of the flows `cctl migrate` moves, and the namespace of half of them.
const MIGRATE_PORT: u16 = 47512;
const MIGRATE_NS: &str = "cctl-fx-mig";
/// Flows per namespace (the host's and MIGRATE_NS).
const FLOWS_PER_NS: usize = 2;
/// The smallest sweep: host-sweep's first point (tbf only, no netem) with two algorithms,
/// each run 0.2 s.
const SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/host-sweep.toml");
const SWEEP_RUNS: usize = 2;
/// What the sweep registers (cctl's reno and cubic, owned by the sweep's process).
const BENCH_NAMES: &[&str] = &["bpf_reno", "bpf_cubic"];

fn cctl<S: AsRef<std::ffi::OsStr>>(args: &[S], failpoint: Option<&str>) -> Output {
    let mut c = Command::new(cctl_bin());
    c.args(args);
    match failpoint {
        Some(f) => c.env("FAILPOINTS", f),
        None => c.env_remove("FAILPOINTS"),
    };
    c.output().expect("cctl runs")
}

fn ok(args: &[&str]) {
    let o = cctl(args, None);
    assert!(
        o.status.success(),
        "`cctl {}`: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

fn port_rule() -> Option<policy::Rule> {
    policy::list()
        .unwrap()
        .into_iter()
        .find(|r| r.target == Target::Port { port: PORT })
}

/// Removes the test's names and rule.
fn clean() {
    if port_rule().is_some() {
        let _ = policy::remove(&RuleSpec::Port(u32::from(PORT)));
    }
    clean_slate("cctl-fx-", NAMES);
    clean_slate(cctl_netem::slot::PREFIX, BENCH_NAMES);
    let _ = registry::clean_leftovers();
}

/// `cctl list` against the kernel: every name it shows is registered, every test name
/// registered is shown, and the current version is the one the link runs.
fn list_tells_the_truth(label: &str) -> String {
    let loaded = registry::list_loaded().expect("list_loaded");
    let registered = available();
    for r in &loaded {
        assert!(
            registered.contains(&r.name),
            "{label}: list shows {} but the kernel has no such name",
            r.name
        );
    }
    let ours = |n: &str| NAMES.contains(&n) || BENCH_NAMES.contains(&n);
    for n in NAMES.iter().chain(BENCH_NAMES) {
        if registered.iter().any(|x| x == n) {
            assert!(
                loaded.iter().any(|r| r.name == *n),
                "{label}: {n} is registered but list does not show it"
            );
        }
    }
    let mut found = Vec::new();
    for r in loaded.iter().filter(|r| ours(&r.name)) {
        let running = r.versions.iter().find(|v| v.version == r.version);
        assert!(
            running.is_some(),
            "{label}: {} marks v{} current, which it does not record",
            r.name,
            r.version
        );
        found.push(format!(
            "{} v{}/{}{}",
            r.name,
            r.version,
            r.versions.len(),
            if r.is_orphan() { " (orphan)" } else { "" }
        ));
    }
    if let Some(rule) = port_rule() {
        found.push(format!(
            "rule :{PORT} → {} ({})",
            rule.cc,
            if rule.attached {
                "attached"
            } else {
                "NOT attached"
            }
        ));
    }
    let left = registry::leftovers().unwrap();
    if !left.is_empty() {
        found.push(format!("{} leftover(s)", left.len()));
    }
    if found.is_empty() {
        "nothing".into()
    } else {
        found.join(", ")
    }
}

/// The file for apply: the state as it is (names not the test's, rules not the test's,
/// the default), plus fx_ap1 and fx_ap2.
fn apply_file(dir: &Path) -> String {
    let mut s = cctl_tests::config_of_current_state(&|n| NAMES.contains(&n), &|t| {
        *t == Target::Port { port: PORT }
    });
    s += "[[algorithm]]\nname = \"fx_ap1\"\nalgo = \"reno\"\n";
    s += "[[algorithm]]\nname = \"fx_ap2\"\nalgo = \"reno\"\n";
    let path = dir.join("cctl.toml");
    std::fs::write(&path, s).unwrap();
    path.to_str().unwrap().to_string()
}

/// One step's command: sets up what it needs, and says whether the intended state holds.
struct Case {
    /// Kernel state the command starts from.
    setup: fn(),
    /// What the command needs in the case's directory or held open while the case runs
    /// (connections, a namespace); dropped when the case ends.
    prepare: fn(&Path) -> Box<dyn Any>,
    /// The command, given the case's directory.
    args: fn(&Path) -> Vec<String>,
    /// Times the step goes through before the fault (a sweep's first run finishes first).
    pass: u32,
    /// Whether the intended state holds (checked after the command ran again).
    intended: fn(&Path) -> bool,
    /// Checks what the faulted command left besides names and rules (given the fault).
    check_cut: fn(&Path, &str),
    /// That state, for the table.
    state: fn(&Path) -> Option<String>,
}

/// The fields a command that changes only names and rules leaves alone.
const PLAIN: Case = Case {
    setup: || {},
    prepare: |_| Box::new(()),
    args: |_| unreachable!("every case gives its command"),
    pass: 0,
    intended: |_| unreachable!("every case gives its intended state"),
    check_cut: |_, _| {},
    state: |_| None,
};

fn loaded(name: &str) -> Option<registry::LoadedCc> {
    registry::list_loaded()
        .unwrap()
        .into_iter()
        .find(|r| r.name == name)
}

/// The migrated flows' connecting ends running reno, and all of them.
fn moved() -> (usize, usize) {
    let c = clients(MIGRATE_PORT);
    (
        c.values().filter(|(_, cc, _)| cc == "reno").count(),
        c.len(),
    )
}

/// `cctl bench run` of the smallest sweep into `<dir>/sweep` (resumed when it exists).
fn sweep_args(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = [
        "bench",
        "run",
        SCENARIO,
        "--algo",
        "reno,cubic",
        "--points",
        "0",
        "--duration-s",
        "0.2",
        "--resume",
    ]
    .map(String::from)
    .to_vec();
    v.push(sweep_dir(dir).display().to_string());
    v
}

fn sweep_dir(dir: &Path) -> PathBuf {
    dir.join("sweep")
}

/// The sweep is complete (every run and the summary) and left nothing behind.
fn sweep_done(dir: &Path) -> bool {
    let left = bench::leftovers(BENCH_NAMES);
    assert!(left.is_empty(), "the completed sweep left {left:?}");
    completed_runs(&sweep_dir(dir)).len() == SWEEP_RUNS
        && sweep_dir(dir).join("summary.json").exists()
}

/// What a cut sweep left: its first run finished; after an error nothing else (the process
/// cleaned up); after a kill, its namespaces (and its algorithms, which `cctl list` shows).
fn sweep_cut(dir: &Path, fault: &str) {
    let runs = completed_runs(&sweep_dir(dir)).len();
    assert_eq!(runs, 1, "the first run finished before the fault");
    let left = bench::leftovers(BENCH_NAMES);
    if fault == "error" {
        assert!(left.is_empty(), "an error cleans up after itself: {left:?}");
    }
}

fn sweep_state(dir: &Path) -> Option<String> {
    Some(format!(
        "runs {}/{SWEEP_RUNS}, {} namespace(s)",
        completed_runs(&sweep_dir(dir)).len(),
        bench::namespaces().len()
    ))
}

fn case(step: &str) -> Case {
    let family = step.split('.').next().unwrap();
    let sub = step.split('.').nth(1).unwrap_or("");
    match (family, sub) {
        ("load", _) => Case {
            args: |_| {
                vec![
                    "load".into(),
                    "reno".into(),
                    "--name".into(),
                    "fx_load".into(),
                ]
            },
            intended: |_| loaded("fx_load").is_some_and(|r| r.algo == "reno"),
            ..PLAIN
        },
        ("unload", _) => Case {
            setup: || ok(&["load", "reno", "--name", "fx_un"]),
            args: |_| vec!["unload".into(), "fx_un".into()],
            intended: |_| {
                !available().iter().any(|n| n == "fx_un")
                    && registry::leftovers().unwrap().is_empty()
            },
            ..PLAIN
        },
        ("upgrade", _) => Case {
            setup: || ok(&["load", "reno", "--name", "fx_up"]),
            args: |_| vec!["upgrade".into(), "fx_up".into()],
            intended: |_| loaded("fx_up").is_some_and(|r| r.version > 1),
            ..PLAIN
        },
        ("rollback", _) => Case {
            setup: || {
                ok(&["load", "reno", "--name", "fx_rb"]);
                ok(&["upgrade", "fx_rb"]);
            },
            args: |_| vec!["rollback".into(), "fx_rb".into(), "--to".into(), "1".into()],
            intended: |_| loaded("fx_rb").is_some_and(|r| r.version == 1),
            ..PLAIN
        },
        ("set", _) => Case {
            setup: || ok(&["load", "htcp", "--name", "fx_set"]),
            args: |_| vec!["set".into(), "fx_set".into(), "beta_min_pct=55".into()],
            intended: |_| {
                loaded("fx_set").is_some_and(|mut r| {
                    live::refresh(&mut r);
                    r.params.get("beta_min_pct") == Some(&55)
                })
            },
            ..PLAIN
        },
        ("policy", "add") => Case {
            setup: || ok(&["load", "reno", "--name", "fx_po"]),
            args: |_| {
                ["policy", "add", "--port", &PORT.to_string(), "fx_po"]
                    .map(String::from)
                    .to_vec()
            },
            intended: |_| port_rule().is_some_and(|r| r.cc == "fx_po" && r.attached),
            ..PLAIN
        },
        ("policy", "remove") => Case {
            setup: || {
                ok(&["load", "reno", "--name", "fx_po"]);
                ok(&["policy", "add", "--port", &PORT.to_string(), "fx_po"]);
            },
            args: |_| {
                ["policy", "remove", "--port", &PORT.to_string()]
                    .map(String::from)
                    .to_vec()
            },
            intended: |_| port_rule().is_none(),
            ..PLAIN
        },
        ("apply", _) => Case {
            args: |dir| vec!["apply".into(), apply_file(dir)],
            intended: |_| loaded("fx_ap1").is_some() && loaded("fx_ap2").is_some(),
            ..PLAIN
        },
        // cubic flows in the host's namespace (walked first) and in MIGRATE_NS, to reno
        // (allowed in every namespace).
        ("migrate", _) => Case {
            prepare: |_| {
                let ns = Netns::new(MIGRATE_NS);
                let flows = (
                    idle_pairs_here(FLOWS_PER_NS, "cubic", MIGRATE_PORT),
                    idle_pairs(&ns.0, FLOWS_PER_NS, "cubic", MIGRATE_PORT),
                );
                assert_eq!(moved(), (0, 2 * FLOWS_PER_NS));
                Box::new((flows, ns))
            },
            args: |_| {
                [
                    "migrate",
                    "--from",
                    "cubic",
                    "--to",
                    "reno",
                    "--all-netns",
                    "--port",
                    &MIGRATE_PORT.to_string(),
                ]
                .map(String::from)
                .to_vec()
            },
            intended: |_| moved() == (2 * FLOWS_PER_NS, 2 * FLOWS_PER_NS),
            check_cut: |_, _| {
                assert_eq!(
                    moved().0,
                    FLOWS_PER_NS,
                    "the host's flows moved, the other namespace's not"
                )
            },
            state: |_| {
                let (n, all) = moved();
                Some(format!("flows {n}/{all} on reno"))
            },
            ..PLAIN
        },
        // Resumes a sweep whose first run finished (its second one cut by an error).
        ("bench", "after-load") => Case {
            prepare: |dir| {
                let o = cctl(&sweep_args(dir), Some("bench.after-testbed=1*off->return"));
                assert_eq!(
                    o.status.code(),
                    Some(1),
                    "a sweep cut in its second run: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
                Box::new(())
            },
            args: sweep_args,
            intended: sweep_done,
            check_cut: sweep_cut,
            state: sweep_state,
            ..PLAIN
        },
        // Cut in the second run, once the first has finished.
        ("bench", "after-testbed") => Case {
            args: sweep_args,
            pass: 1,
            intended: sweep_done,
            check_cut: sweep_cut,
            state: sweep_state,
            ..PLAIN
        },
        _ => panic!("no case for step {step}: add one here"),
    }
}

/// (run.json, its bytes) of each finished run of the sweep in `dir`, if there is one.
fn finished_runs(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    completed_runs(&sweep_dir(dir))
        .keys()
        .map(|id| {
            let p = id.dir(&sweep_dir(dir)).join("run.json");
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

#[test]
fn every_step_that_changes_the_kernel_survives_an_error_and_a_kill() {
    require_root();
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    clean();
    let dir = std::env::temp_dir().join(format!("cctl-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut table: BTreeMap<(usize, &str), String> = BTreeMap::new();
    let started = std::time::Instant::now();
    for (i, (step, what)) in STEPS.iter().enumerate() {
        for fault in ["error", "kill"] {
            let label = format!("{step} / {fault}");
            let case_started = std::time::Instant::now();
            let c = case(step);
            let case_dir = dir.join(format!("{i}-{fault}"));
            std::fs::create_dir_all(&case_dir).unwrap();
            (c.setup)();
            let held = (c.prepare)(&case_dir);
            let args = (c.args)(&case_dir);
            let action = if fault == "kill" {
                "return(kill)"
            } else {
                "return"
            };
            let failpoint = match c.pass {
                0 => format!("{step}={action}"),
                n => format!("{step}={n}*off->{action}"),
            };
            let o = cctl(&args, Some(&failpoint));
            let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
            match fault {
                "kill" => assert_eq!(
                    o.status.signal(),
                    Some(9),
                    "{label}: the process dies at the step (is the step reached?): {stderr}"
                ),
                _ => {
                    assert_eq!(
                        o.status.code(),
                        Some(1),
                        "{label}: fails with exit 1 (exit 0: this cctl was built without the \
                         `failpoints` feature; build it with `cargo test --workspace`, as \
                         `make test` does): {stderr}"
                    );
                    assert!(
                        stderr.contains(&format!("failpoint {step}")),
                        "{label}: {stderr}"
                    );
                }
            }
            let mut after = list_tells_the_truth(&label);
            (c.check_cut)(&case_dir, fault);
            if let Some(st) = (c.state)(&case_dir) {
                after = format!("{after}; {st}");
            }
            let kept = finished_runs(&case_dir);
            // Recovery: the same command again.
            let again = cctl(&args, None);
            if *step == "unload.after-link-unpin" {
                // The name is gone; the unload again says what the cut one left and removes it.
                let out = String::from_utf8_lossy(&again.stdout);
                assert!(
                    again.status.success()
                        && out.contains("cut short")
                        && out.contains(&format!("{}/fx_un.json", registry::META_DIR)),
                    "{label}: unload again must finish the cut one and say what it removed \
                     (exit {:?}): {out}{}",
                    again.status.code(),
                    String::from_utf8_lossy(&again.stderr)
                );
            }
            let converged = (c.intended)(&case_dir);
            assert!(
                converged,
                "{label}: `cctl {}` again (exit {:?}: {}) does not reach the intended state; \
                 list: {}",
                args.join(" "),
                again.status.code(),
                String::from_utf8_lossy(&again.stderr),
                list_tells_the_truth(&label)
            );
            for (p, bytes) in &kept {
                assert!(
                    std::fs::read(p).unwrap() == *bytes,
                    "{label}: {} was redone or changed",
                    p.display()
                );
            }
            let mut recovered = list_tells_the_truth(&label);
            if let Some(st) = (c.state)(&case_dir) {
                recovered = format!("{recovered}; {st}");
            }
            drop(held);
            clean();
            let left: Vec<String> = registry::leftovers()
                .unwrap()
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            assert!(
                left.is_empty(),
                "{label}: leftovers after cleaning: {left:?}"
            );
            bench::assert_nothing_left(&label, BENCH_NAMES);
            for n in NAMES {
                assert!(
                    !Path::new(registry::PIN_DIR).join(n).exists()
                        && !Path::new(registry::META_DIR)
                            .join(format!("{n}.json"))
                            .exists()
                        && !registry::versions_dir(n).exists(),
                    "{label}: {n} left a pin or record"
                );
            }
            assert!(port_rule().is_none(), "{label}: the rule is left");
            table.insert(
                (i, fault),
                format!(
                    "| {step} | {what} | {fault} | exit {} | {after} | again: exit {} → {recovered} | {:.1} |",
                    o.status
                        .code()
                        .map_or_else(|| format!("signal {}", o.status.signal().unwrap_or(0)), |c| c.to_string()),
                    again.status.code().unwrap_or(-1),
                    case_started.elapsed().as_secs_f64()
                ),
            );
        }
    }
    println!("| step | state at the step | fault | result | cctl list after | recovery | s |");
    println!("|---|---|---|---|---|---|---|");
    for row in table.values() {
        println!("{row}");
    }
    println!(
        "{} cases in {:.1} s",
        table.len(),
        started.elapsed().as_secs_f64()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
