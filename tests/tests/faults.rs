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
//! The table of what was found is printed (`--nocapture`). Names `fx_*`, port 47511.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Output};

use cctl_loader::faults::STEPS;
use cctl_loader::policy::{self, RuleSpec, Target};
use cctl_loader::{live, registry};
use cctl_tests::{available, cctl_bin, clean_slate, require_root, KERNEL};

const PORT: u16 = 47511;
const NAMES: &[&str] = &[
    "fx_load", "fx_un", "fx_up", "fx_rb", "fx_set", "fx_po", "fx_ap1", "fx_ap2",
];

fn cctl(args: &[&str], failpoint: Option<&str>) -> Output {
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
    for n in NAMES {
        if registered.iter().any(|x| x == n) {
            assert!(
                loaded.iter().any(|r| r.name == *n),
                "{label}: {n} is registered but list does not show it"
            );
        }
    }
    let mut found = Vec::new();
    for r in loaded.iter().filter(|r| NAMES.contains(&r.name.as_str())) {
        let running = r.versions.iter().find(|v| v.version == r.version);
        assert!(
            running.is_some(),
            "{label}: {} marks v{} current, which it does not record",
            r.name,
            r.version
        );
        found.push(format!("{} v{}/{}", r.name, r.version, r.versions.len()));
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
    setup: fn(),
    args: fn(&str) -> Vec<String>,
    intended: fn() -> bool,
}

fn loaded(name: &str) -> Option<registry::LoadedCc> {
    registry::list_loaded()
        .unwrap()
        .into_iter()
        .find(|r| r.name == name)
}

fn case(step: &str) -> Case {
    let family = step.split('.').next().unwrap();
    let sub = step.split('.').nth(1).unwrap_or("");
    match (family, sub) {
        ("load", _) => Case {
            setup: || {},
            args: |_| {
                vec![
                    "load".into(),
                    "reno".into(),
                    "--name".into(),
                    "fx_load".into(),
                ]
            },
            intended: || loaded("fx_load").is_some_and(|r| r.algo == "reno"),
        },
        ("unload", _) => Case {
            setup: || ok(&["load", "reno", "--name", "fx_un"]),
            args: |_| vec!["unload".into(), "fx_un".into()],
            intended: || {
                !available().iter().any(|n| n == "fx_un")
                    && registry::leftovers().unwrap().is_empty()
            },
        },
        ("upgrade", _) => Case {
            setup: || ok(&["load", "reno", "--name", "fx_up"]),
            args: |_| vec!["upgrade".into(), "fx_up".into()],
            intended: || loaded("fx_up").is_some_and(|r| r.version > 1),
        },
        ("rollback", _) => Case {
            setup: || {
                ok(&["load", "reno", "--name", "fx_rb"]);
                ok(&["upgrade", "fx_rb"]);
            },
            args: |_| vec!["rollback".into(), "fx_rb".into(), "--to".into(), "1".into()],
            intended: || loaded("fx_rb").is_some_and(|r| r.version == 1),
        },
        ("set", _) => Case {
            setup: || ok(&["load", "htcp", "--name", "fx_set"]),
            args: |_| vec!["set".into(), "fx_set".into(), "beta_min_pct=55".into()],
            intended: || {
                loaded("fx_set").is_some_and(|mut r| {
                    live::refresh(&mut r);
                    r.params.get("beta_min_pct") == Some(&55)
                })
            },
        },
        ("policy", "add") => Case {
            setup: || ok(&["load", "reno", "--name", "fx_po"]),
            args: |_| {
                ["policy", "add", "--port", &PORT.to_string(), "fx_po"]
                    .map(String::from)
                    .to_vec()
            },
            intended: || port_rule().is_some_and(|r| r.cc == "fx_po" && r.attached),
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
            intended: || port_rule().is_none(),
        },
        ("apply", _) => Case {
            setup: || {},
            args: |file| vec!["apply".into(), file.into()],
            intended: || loaded("fx_ap1").is_some() && loaded("fx_ap2").is_some(),
        },
        _ => panic!("no case for step {step}: add one here"),
    }
}

#[test]
fn every_step_that_changes_the_kernel_survives_an_error_and_a_kill() {
    require_root();
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    clean();
    let dir = std::env::temp_dir().join(format!("cctl-faults-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut table: BTreeMap<(usize, &str), String> = BTreeMap::new();
    for (i, (step, what)) in STEPS.iter().enumerate() {
        for fault in ["error", "kill"] {
            let label = format!("{step} / {fault}");
            let c = case(step);
            (c.setup)();
            let file = apply_file(&dir);
            let args = (c.args)(&file);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let action = if fault == "kill" {
                "return(kill)"
            } else {
                "return"
            };
            let o = cctl(&args, Some(&format!("{step}={action}")));
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
            let after = list_tells_the_truth(&label);
            // Recovery: the same command again.
            let again = cctl(&args, None);
            let converged = (c.intended)();
            assert!(
                converged,
                "{label}: `cctl {}` again (exit {:?}: {}) does not reach the intended state; \
                 list: {}",
                args.join(" "),
                again.status.code(),
                String::from_utf8_lossy(&again.stderr),
                list_tells_the_truth(&label)
            );
            let recovered = list_tells_the_truth(&label);
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
                    "| {step} | {what} | {fault} | exit {} | {after} | again: exit {} → {recovered} |",
                    o.status
                        .code()
                        .map_or_else(|| format!("signal {}", o.status.signal().unwrap_or(0)), |c| c.to_string()),
                    again.status.code().unwrap_or(-1)
                ),
            );
        }
    }
    println!("| step | state at the step | fault | result | cctl list after | recovery |");
    println!("|---|---|---|---|---|---|");
    for row in table.values() {
        println!("{row}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
