//! Fault injection at the steps that change the kernel, for the fault tests
//! (`tests/tests/faults.rs`): each step calls [`step`] with its name
//! (`load.after-link-pin`; the benchmark runner, crate cctl-bench, calls it for its own
//! `bench.*` steps), which does nothing unless cctl was built with the
//! `failpoints` feature (only `cargo test --workspace` builds it so, through cctl-tests)
//! and `$FAILPOINTS` names the step (the `fail` crate's syntax):
//!
//! - `FAILPOINTS='load.after-link-pin=return'`: the step fails with an injected I/O error,
//!   as a full disk or a vanished file would make it fail;
//! - `FAILPOINTS='load.after-link-pin=return(kill)'`: the process dies by SIGKILL there, as
//!   a crash or an OOM kill would end it.
//!
//! [`STEPS`] lists every step, so that the tests cover each one.

use crate::error::Result;

/// Every fault-injection step: (name, what has happened when it is reached).
pub const STEPS: &[(&str, &str)] = &[
    (
        "load.before-link-pin",
        "program loaded, version and record written, link not pinned",
    ),
    ("load.after-link-pin", "link pinned: the name is registered"),
    (
        "unload.after-link-unpin",
        "link unpinned, record and version pins still there",
    ),
    (
        "upgrade.after-version-pin",
        "new version loaded and pinned, link not switched",
    ),
    (
        "upgrade.after-link-update",
        "link switched to the new version, record not written",
    ),
    (
        "rollback.after-link-update",
        "link switched back, record not written",
    ),
    (
        "set.after-slot-write",
        "new values in the spare slot, index not flipped",
    ),
    ("set.after-flip", "index flipped, record not written"),
    (
        "policy.add.after-attach",
        "rule in the map and program attached, record not written",
    ),
    (
        "policy.remove.after-unpin",
        "a cgroup rule's link unpinned, the rule still in the map",
    ),
    ("apply.after-first-step", "the first step of the plan done"),
    (
        "migrate.after-first-netns",
        "the first namespace's sockets moved, the other namespaces' not",
    ),
    (
        "bench.after-load",
        "the sweep's algorithms loaded (owned by the sweep), no run started",
    ),
    (
        "bench.after-testbed",
        "a run's namespaces, veths, qdiscs and taps set up, its flows not started",
    ),
];

/// Reads `$FAILPOINTS` (call once, at the start of the process); a no-op without the
/// `failpoints` feature.
pub fn setup() {
    #[cfg(feature = "failpoints")]
    std::mem::forget(fail::FailScenario::setup());
}

/// A step that changes the kernel: fails or kills the process here when `$FAILPOINTS`
/// says so (see the module's doc); otherwise does nothing.
///
/// Public for cctl's other crates (the benchmark runner's steps); `name` must be one of
/// [`STEPS`].
///
/// Errors: [`Error::Io`] ("injected fault", "failpoint <step>") when configured to return.
///
/// [`Error::Io`]: crate::error::Error::Io
pub fn step(name: &'static str) -> Result<()> {
    debug_assert!(
        STEPS.iter().any(|(s, _)| *s == name),
        "unlisted step {name}"
    );
    fail::fail_point!(name, |arg: Option<String>| {
        if arg.as_deref() == Some("kill") {
            let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
        }
        Err(crate::error::Error::io(
            "injected fault",
            name,
            std::io::Error::other(format!("failpoint {name}")),
        ))
    });
    Ok(())
}
