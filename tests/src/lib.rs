//! Shared helpers of the integration tests: root check, clean slate, leftovers.

use std::sync::Mutex;

use cctl_loader::registry;

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
    cctl_bench::testbed::remove_leftovers(prefix).expect("removing leftover namespaces");
    let _ = registry::remove_orphans();
    let loaded = registry::list_loaded().unwrap_or_default();
    for n in names {
        if loaded.iter().any(|l| l.name == *n) {
            registry::unload(n).expect("unloading a leftover registration");
        }
    }
}

/// Names in /proc/sys/net/ipv4/tcp_available_congestion_control.
pub fn available() -> Vec<String> {
    cctl_loader::kernel::available_ccs().expect("reading tcp_available_congestion_control")
}
