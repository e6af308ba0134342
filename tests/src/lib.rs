//! Shared helpers of the integration tests: root check, clean slate, leftovers.

use std::path::PathBuf;
use std::sync::Mutex;

use cctl_loader::registry::{self, LoadGuard, LoadOptions};

pub mod bench;
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

/// Names in /proc/sys/net/ipv4/tcp_available_congestion_control.
pub fn available() -> Vec<String> {
    cctl_loader::kernel::available_ccs().expect("reading tcp_available_congestion_control")
}

/// Environment variable set inside the VM when a test re-runs itself there.
pub const IN_VM: &str = "CCTL_TEST_IN_VM";

/// Runs `body` where the kernel has sch_netem: here if it has, otherwise by re-running the
/// test `test_name` of the current test binary inside a virtme-ng guest with Debian's
/// netem-capable kernel (CI's hosts have no netem). `rwdir` is writable in the guest, for
/// results; `timeout` bounds the whole guest run. Panics if the guest's test fails.
pub fn in_netem_kernel(
    test_name: &str,
    rwdir: &std::path::Path,
    timeout: std::time::Duration,
    body: impl FnOnce(),
) {
    in_netem_kernel_with(test_name, &[], rwdir, timeout, body)
}

/// [`in_netem_kernel`] with extra `CCTL_TEST_*` variables for the guest's run (the host's
/// own `CCTL_TEST_*` variables are passed too; `env` wins). Where the kernel has netem the
/// variables are not set: `body` runs here with the caller's environment.
///
/// A guest that dies before the test finishes (its kernel or QEMU failed: no exit status
/// comes back) is booted once more, after printing why with the guest kernel's last log
/// lines; a test that fails in the guest is not retried.
pub fn in_netem_kernel_with(
    test_name: &str,
    env: &[(&str, &str)],
    rwdir: &std::path::Path,
    timeout: std::time::Duration,
    body: impl FnOnce(),
) {
    if cctl_netem::testbed::netem_available() {
        body();
        return;
    }
    assert!(
        std::env::var_os(IN_VM).is_none(),
        "inside the VM the kernel must have netem"
    );
    cctl_vm::check_vm_deps()
        .unwrap_or_else(|e| panic!("netem is missing here and the VM cannot start: {e}"));
    std::fs::create_dir_all(rwdir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let safe = |v: &str| {
        v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ",_-@:.".contains(c))
    };
    // Developers' filters (CCTL_TEST_ALGOS, ...) follow the test into the guest.
    let mut vars: Vec<(String, String)> = std::env::vars()
        .filter(|(k, v)| k.starts_with("CCTL_TEST_") && safe(v))
        .filter(|(k, _)| !env.iter().any(|(e, _)| e == k))
        .collect();
    for (k, v) in env {
        assert!(
            k.starts_with("CCTL_TEST_") && safe(v),
            "guest variable {k}={v}: names start with CCTL_TEST_, values are [A-Za-z0-9,_-@:.]"
        );
        vars.push((k.to_string(), v.to_string()));
    }
    let passed: String = vars.iter().map(|(k, v)| format!(" {k}={v}")).collect();
    let script = format!(
        "export {IN_VM}=1 RUST_BACKTRACE=1{passed}\nexec '{}' --exact {test_name} --nocapture --test-threads=1\n",
        exe.display()
    );
    let mut spec = cctl_vm::VmSpec::detect().unwrap_or_else(|e| panic!("{e}"));
    spec.rwdirs.push(rwdir.to_path_buf());
    spec.timeout = timeout;
    spec.echo = true;
    let out = match cctl_vm::run_in_vm(&spec, &script) {
        Err(e @ cctl_vm::VmError::NoExitStatus { .. }) => {
            eprintln!(
                "{test_name}: the guest died before the test finished; booting it once more. {e}"
            );
            cctl_vm::run_in_vm(&spec, &script)
        }
        other => other,
    }
    .unwrap_or_else(|e| panic!("running the guest: {e}"));
    assert!(
        out.success(),
        "{test_name} failed in the VM (results in {}): status {:?}",
        rwdir.display(),
        out.status
    );
    assert!(
        out.stdout.contains("test result: ok. 1 passed"),
        "the guest did not run {test_name}:\n{}",
        out.stdout
    );
}
