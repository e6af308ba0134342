//! Integration test of `cctl apply` on the running kernel: a round trip (apply, apply
//! again, edit, apply), the dry run, invalid and untrusted files that change nothing, and a
//! step that fails with the state before the apply kept; everything removed afterwards.
//!
//! `cctl apply` owns every name cctl loaded and every policy rule. So that it touches only
//! this test's (`ap_*` names, ports 4730x, the `cctl-ap-*` cgroup), each file the test
//! writes starts with a baseline: the names, rules and default there were before, as they
//! are. A guard restores the default and removes the test's names and rules even when an
//! assertion fails.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use cctl_loader::kernel;
use cctl_loader::policy::{self, RuleSpec, Target};
use cctl_loader::registry;
use cctl_tests::{available, cctl_bin, clean_slate, require_root, KERNEL};

const NAMES: &[&str] = &["ap_htcp", "ap_reno", "ap_new"];
const PORTS: &[u16] = &[47301, 47302];
const CGROUP: &str = "cctl-ap-test";

/// What the test compares before and after: registered CCs, default, rules, and each
/// cctl name's running version and parameters.
#[derive(Debug, PartialEq)]
struct State {
    available: Vec<String>,
    default: String,
    rules: Vec<(String, String)>,
    loaded: BTreeMap<String, (u32, BTreeMap<String, u32>)>,
}

fn state() -> State {
    let mut available = available();
    available.sort();
    State {
        available,
        default: kernel::default_cc().unwrap(),
        rules: policy::list()
            .unwrap()
            .into_iter()
            .map(|r| (r.target.to_string(), r.cc))
            .collect(),
        loaded: registry::list_loaded()
            .unwrap()
            .into_iter()
            .map(|r| (r.name, (r.version, r.params)))
            .collect(),
    }
}

fn cgroup_dir() -> PathBuf {
    policy::cgroup2_mount().unwrap().join(CGROUP)
}

fn is_test_target(t: &Target) -> bool {
    match t {
        Target::Port { port } => PORTS.contains(port),
        Target::Cgroup { path, .. } => path.to_string_lossy().contains(CGROUP),
    }
}

/// The policy's cgroup rule map swapped for an incompatible one (as an older cctl with
/// another layout could leave): adding the first rule for a cgroup must then reuse it,
/// which libbpf refuses, so that step fails. Dropping it puts the real map back.
struct IncompatibleCgroupMap {
    real: libbpf_rs::MapHandle,
    path: PathBuf,
}

impl IncompatibleCgroupMap {
    fn install() -> IncompatibleCgroupMap {
        let path = Path::new(policy::PIN_DIR).join("cgroup_rules");
        let real = libbpf_rs::MapHandle::from_pinned_path(&path)
            .expect("the policy's cgroup map is pinned");
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        // A hash map (no entries, so listing the rules sees none) with 4-byte keys
        // where the policy's has 8.
        let mut bogus = libbpf_rs::MapHandle::create(
            libbpf_rs::MapType::Hash,
            Some("cctl_ap_bogus"),
            4,
            4,
            1,
            &opts,
        )
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        bogus.pin(&path).unwrap();
        IncompatibleCgroupMap { real, path }
    }
}

impl Drop for IncompatibleCgroupMap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = self.real.pin(&self.path);
    }
}

/// Restores the default and removes the test's rules, names and cgroup.
struct Cleanup {
    default: String,
}

fn remove_test_things(default: &str) {
    // A crashed earlier run's registrations (dead owner) and namespaces go first.
    clean_slate("cctl-ap", &[]);
    if available().iter().any(|n| n == default) {
        let _ = kernel::set_default_cc(default);
    }
    for r in policy::list().unwrap_or_default() {
        if is_test_target(&r.target) {
            let spec = match &r.target {
                Target::Port { port } => RuleSpec::Port(u32::from(*port)),
                Target::Cgroup { path, .. } => RuleSpec::Cgroup(path.clone()),
            };
            let _ = policy::remove(&spec);
        }
    }
    for n in NAMES {
        if registry::list_loaded()
            .unwrap_or_default()
            .iter()
            .any(|l| l.name == *n)
        {
            let _ = registry::unload(n);
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        remove_test_things(&self.default);
        let _ = std::fs::remove_dir(cgroup_dir());
    }
}

/// The file's baseline: every name and rule there was before the test, as it is, and the
/// default it had.
fn baseline(default: &str) -> String {
    let s = cctl_tests::config_of_current_state(&|n| NAMES.contains(&n), &is_test_target);
    let (first, rest) = s.split_once('\n').expect("the default line");
    assert!(first.starts_with("default = "));
    format!("default = \"{default}\"\n{rest}")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
    p
}

fn apply(args: &[&str], file: &Path) -> Output {
    let out = Command::new(cctl_bin())
        .arg("apply")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    eprintln!(
        "$ cctl apply {} {}\n{}{}[exit {}]",
        file.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        out.status.code().unwrap_or(-1)
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn rule_cc(port: u16) -> Option<String> {
    policy::list()
        .unwrap()
        .into_iter()
        .find(|r| r.target == Target::Port { port })
        .map(|r| r.cc)
}

fn record(name: &str) -> registry::LoadedCc {
    registry::list_loaded()
        .unwrap()
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("{name} is loaded"))
}

#[test]
fn apply_round_trip_dry_run_invalid_file_and_failed_step() {
    require_root();
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let original = kernel::default_cc().unwrap();
    remove_test_things(&original);
    let _cleanup = Cleanup {
        default: original.clone(),
    };
    let dir = std::env::temp_dir().join(format!("cctl-apply-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let base = baseline(&original);
    let before = state();

    // The first file: two names, a default, a rule.
    let v1 = write(
        &dir,
        "v1.toml",
        &format!(
            "{base}[[algorithm]]\nname = \"ap_htcp\"\nalgo = \"htcp\"\nparams = {{ beta_min_pct = 60 }}\n\
             [[algorithm]]\nname = \"ap_reno\"\nalgo = \"reno\"\n\
             [[policy]]\nport = 47301\ncc = \"ap_htcp\"\n"
        )
        .replace(&format!("default = \"{original}\""), "default = \"ap_htcp\""),
    );

    // Dry run: the plan, nothing changed.
    let o = apply(&["--dry-run"], &v1);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    for line in [
        "plan for",
        "1. load ap_htcp (htcp, beta_min_pct=60)",
        "2. load ap_reno (reno)",
        &format!("3. default {original} → ap_htcp"),
        "4. policy port 47301 → ap_htcp (new rule)",
        "dry run: nothing was changed",
    ] {
        assert!(text.contains(line), "{line}:\n{text}");
    }
    let o = apply(&["--dry-run", "--json"], &v1);
    let j: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    assert_eq!(j["dry_run"], true);
    assert_eq!(j["steps"].as_array().unwrap().len(), 4);
    assert_eq!(state(), before, "a dry run changes nothing");

    // Apply, then apply again: nothing to do.
    let o = apply(&[], &v1);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("applied 4 step(s)"), "{}", stdout(&o));
    assert!(available().contains(&"ap_htcp".into()) && available().contains(&"ap_reno".into()));
    assert_eq!(kernel::default_cc().unwrap(), "ap_htcp");
    assert_eq!(rule_cc(47301).as_deref(), Some("ap_htcp"));
    assert_eq!(record("ap_htcp").params["beta_min_pct"], 60);
    let applied = state();
    let o = apply(&[], &v1);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("nothing to do: the kernel matches"),
        "{}",
        stdout(&o)
    );
    assert_eq!(state(), applied, "a second apply changes nothing");

    // Edit: other parameters (one load-time: a new version), ap_reno gone, one rule
    // replaced, one added.
    let v2 = write(
        &dir,
        "v2.toml",
        &format!(
            "{base}[[algorithm]]\nname = \"ap_htcp\"\nalgo = \"htcp\"\nparams = {{ beta_min_pct = 55, use_bandwidth_switch = 0 }}\n\
             [[policy]]\nport = 47301\ncc = \"reno\"\n[[policy]]\nport = 47302\ncc = \"ap_htcp\"\n"
        )
        .replace(&format!("default = \"{original}\""), "default = \"ap_htcp\""),
    );
    let o = apply(&["--json"], &v2);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(stdout(&o).trim()).unwrap();
    let kinds: Vec<&str> = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["upgrade", "add_rule", "add_rule", "unload"],
        "only the difference: {j}"
    );
    assert_eq!(j["done"].as_array().unwrap().len(), 4);
    let rec = record("ap_htcp");
    assert_eq!((rec.version, rec.params["beta_min_pct"]), (2, 55));
    assert!(!available().contains(&"ap_reno".into()));
    assert_eq!(rule_cc(47301).as_deref(), Some("reno"));
    assert_eq!(rule_cc(47302).as_deref(), Some("ap_htcp"));
    let edited = state();

    // Invalid and untrusted files change nothing.
    let bad = write(
        &dir,
        "bad.toml",
        &std::fs::read_to_string(&v2)
            .unwrap()
            .replace("beta_min_pct = 55", "beta_min_pct = 101"),
    );
    let o = apply(&[], &bad);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(".params.beta_min_pct: 101 is out of range"),
        "{}",
        stderr(&o)
    );
    std::fs::set_permissions(&v2, std::fs::Permissions::from_mode(0o666)).unwrap();
    let o = apply(&[], &v2);
    assert_eq!(o.status.code(), Some(9), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("writable by") && stderr(&o).contains("chmod go-w"),
        "{}",
        stderr(&o)
    );
    std::fs::set_permissions(&v2, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(
        state(),
        edited,
        "an invalid or untrusted file changes nothing"
    );

    // A failing step: the cgroup rule cannot be added (its pinned map is incompatible);
    // the load, live change, default and rule before it are undone.
    std::fs::create_dir_all(cgroup_dir()).unwrap();
    let swapped = IncompatibleCgroupMap::install();
    let v3 = write(
        &dir,
        "v3.toml",
        &format!(
            "{base}[[algorithm]]\nname = \"ap_htcp\"\nalgo = \"htcp\"\nparams = {{ beta_min_pct = 65, use_bandwidth_switch = 0 }}\n\
             [[algorithm]]\nname = \"ap_new\"\nalgo = \"reno\"\n\
             [[policy]]\nport = 47301\ncc = \"ap_new\"\n[[policy]]\nport = 47302\ncc = \"ap_htcp\"\n\
             [[policy]]\ncgroup = \"{CGROUP}\"\ncc = \"ap_new\"\n"
        )
        .replace(&format!("default = \"{original}\""), "default = \"ap_new\""),
    );
    let o = apply(&[], &v3);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("step 5/5 (policy cgroup") && err.contains("failed"),
        "{err}"
    );
    assert!(err.contains("the 4 earlier change(s) were undone"), "{err}");
    let after = state();
    assert_eq!(
        after.available, edited.available,
        "ap_new was unloaded again"
    );
    assert_eq!(after.default, edited.default);
    assert_eq!(after.rules, edited.rules);
    let rec = record("ap_htcp");
    assert_eq!(
        (rec.version, rec.params["beta_min_pct"]),
        (2, 55),
        "the live change was set back"
    );
    let running = rec
        .versions
        .iter()
        .find(|v| v.version == rec.version)
        .unwrap();
    assert_eq!(
        cctl_loader::live::values("ap_htcp", running).unwrap()["beta_min_pct"],
        55,
        "the kernel's value in force was set back"
    );
    drop(swapped);

    // Back to the baseline through apply: the test's names and rules go, the default returns.
    let back = write(&dir, "back.toml", &base);
    let o = apply(&[], &back);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let end = state();
    assert_eq!(end.available, before.available);
    assert_eq!(end.default, original);
    assert_eq!(end.rules, before.rules);
    assert!(NAMES.iter().all(|n| !end.loaded.contains_key(*n)));
    std::fs::remove_dir_all(&dir).unwrap();
}
