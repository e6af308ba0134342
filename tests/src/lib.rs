//! Shared helpers of the integration tests: root check, clean slate, leftovers; running
//! scenarios and what sweeps leave ([`bench`]), checks in netem guests ([`guest`]),
//! connections to migrate ([`sockets`]), terminals ([`tmux`]).

use std::path::PathBuf;
use std::sync::Mutex;

use cctl_loader::registry::{self, LoadGuard, LoadOptions};

pub mod bench;
pub mod guest;
pub mod sockets;
pub mod tmux;

/// Kernel tests touch global state (CC names, namespaces): they take this lock.
pub static KERNEL: Mutex<()> = Mutex::new(());

/// Fails (never skips) when not root: CI runs as root, so a skipped kernel test
/// would hide a missing capability.
pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "kernel integration tests need root (CI runs them as root): run `sudo make test`"
    );
    end_guests_of_killed_runs();
}

/// Where the tests' VMs record their process groups ([`cctl_vm::PGID_DIR_ENV`]).
pub const TEST_VMS: &str = "/run/cctl-tests/vms";

/// Makes every VM this test process and its children start record its process group under
/// [`TEST_VMS`], and ends those that a test run killed before it could end them (SIGKILL,
/// a CI timeout) left running, saying so, as `cctl bench run --resume` does for its own.
pub fn end_guests_of_killed_runs() {
    if std::env::var_os(cctl_vm::PGID_DIR_ENV).is_none() {
        // Before any thread of this test reads the environment: tests of one binary run one
        // at a time (`--test-threads=1`), and this runs first in each.
        std::env::set_var(cctl_vm::PGID_DIR_ENV, TEST_VMS);
    }
    match cctl_vm::end_orphaned_vms(std::path::Path::new(TEST_VMS)) {
        Ok(ended) => {
            for msg in ended {
                eprintln!("cctl-tests: {msg}");
            }
        }
        Err(e) => panic!("ending the guests of a killed earlier test run: {e}"),
    }
}

/// Removes what a crashed earlier run may have left: namespaces with `prefix`,
/// and the registration `name` if cctl pinned it.
pub fn clean_slate(prefix: &str, names: &[&str]) {
    cctl_netem::testbed::remove_leftovers(prefix).expect("removing leftover namespaces");
    let _ = registry::remove_orphans();
    let loaded = registry::list_loaded().unwrap_or_default();
    for n in names {
        if loaded.iter().any(|l| l.name == *n) {
            registry::unload(n).expect("unloading a leftover registration");
        }
    }
}

/// The `cctl` binary next to the running test binary (`target/<profile>/cctl`, built by
/// `cargo test --workspace` / `make test`; with `-p cctl-tests` alone, run
/// `cargo build -p cctl` first). Panics with that advice when it is missing.
pub fn cctl_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binaries live in target/<profile>/deps")
        .join("cctl");
    assert!(
        bin.exists(),
        "{} missing: build it first (`cargo build -p cctl`; `make test` does)",
        bin.display()
    );
    bin
}

/// Loads `algo` under its default name for this test; the guard unloads it, also when
/// the test fails.
pub fn load_owned(algo: &str) -> LoadGuard {
    let rec = registry::load(
        algo,
        &LoadOptions {
            owned: true,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{algo} loads: {e}"));
    LoadGuard::new(rec.name)
}

/// Loads `algo` registered as `name` for this test: its record and the guard that
/// unloads it, also when the test fails.
pub fn load_owned_as(algo: &str, name: &str) -> (registry::LoadedCc, LoadGuard) {
    let rec = registry::load(
        algo,
        &LoadOptions {
            name: Some(name.into()),
            owned: true,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{algo} loads as {name}: {e}"));
    let guard = LoadGuard::new(rec.name.clone());
    (rec, guard)
}

/// Names in /proc/sys/net/ipv4/tcp_available_congestion_control.
pub fn available() -> Vec<String> {
    cctl_loader::kernel::available_ccs().expect("reading tcp_available_congestion_control")
}

/// A `cctl apply` file of the state as it is: the namespace's default, every name cctl
/// loaded that `skip_name` does not skip (with its algorithm and parameters) and every
/// policy rule `skip_rule` does not skip. Tests that run `cctl apply` start their files
/// with it, so that applying them leaves everything but their own names and rules alone.
/// Names a running process loaded for itself (`owner_pid`) are left out too: apply does
/// not touch them. Panics on a name whose algorithm the file cannot give (`?`, `object`).
pub fn config_of_current_state(
    skip_name: &dyn Fn(&str) -> bool,
    skip_rule: &dyn Fn(&cctl_loader::policy::Target) -> bool,
) -> String {
    use cctl_loader::policy::{self, Target};
    let mut s = format!(
        "default = \"{}\"\n",
        cctl_loader::kernel::default_cc().expect("the default congestion control")
    );
    for r in registry::list_loaded().expect("cctl's records") {
        if skip_name(&r.name) || (r.owner_pid.is_some() && !r.is_orphan()) {
            continue;
        }
        assert!(
            r.algo != "?" && r.algo != "object",
            "{}: the test cannot keep it in its file; unload it",
            r.name
        );
        let params: Vec<String> = r.params.iter().map(|(k, v)| format!("{k} = {v}")).collect();
        s += &format!(
            "[[algorithm]]\nname = \"{}\"\nalgo = \"{}\"\nparams = {{ {} }}\n",
            r.name,
            r.algo,
            params.join(", ")
        );
    }
    for r in policy::list().expect("the policy rules") {
        if skip_rule(&r.target) {
            continue;
        }
        match &r.target {
            Target::Port { port } => {
                s += &format!("[[policy]]\nport = {port}\ncc = \"{}\"\n", r.cc)
            }
            Target::Cgroup { path, .. } => {
                s += &format!(
                    "[[policy]]\ncgroup = \"{}\"\ncc = \"{}\"\n",
                    path.display(),
                    r.cc
                )
            }
        }
    }
    s
}
