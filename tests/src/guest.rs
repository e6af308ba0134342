//! The checks that need a netem kernel, in parts: where this kernel has sch_netem they run
//! here, one after the other; elsewhere (these hosts) the test re-runs itself in guests of
//! Debian's 6.12 kernel on QEMU's virtual clock, several side by side, each running a share
//! of the parts after one boot. On the virtual clock a guest keeps one host CPU busy and
//! what it measures does not depend on how busy the host is, so guests side by side do
//! not disturb one another.
//!
//! `$CCTL_TEST_GUESTS` sets how many guests run side by side (default: [`guests`]);
//! `$CCTL_TEST_PARTS=a,b` runs only those parts.

use std::path::Path;
use std::time::{Duration, Instant};

use cctl_vm as vm;

/// Environment variable set inside the VM when a test re-runs itself there.
pub const IN_VM: &str = "CCTL_TEST_IN_VM";

/// The parts a guest runs (set by the host for each guest; a developer's filter on it).
pub const PARTS_ENV: &str = "CCTL_TEST_PARTS";

/// Guests side by side (default [`guests`]).
pub const GUESTS_ENV: &str = "CCTL_TEST_GUESTS";

/// One check that needs a netem kernel.
#[derive(Clone, Copy)]
pub struct Part {
    /// Its name, for `$CCTL_TEST_PARTS` and the log.
    pub name: &'static str,
    /// Its usual cost in a guest on the virtual clock, seconds of the host's wall clock (as
    /// `part NAME: passed in` prints it): the shares are balanced by it.
    pub guest_s: u32,
    /// What it runs (it panics when a check fails).
    pub run: fn(),
}

/// Guests to run side by side: `$CCTL_TEST_GUESTS`, else [`cctl_vm::guests_that_fit`] (one
/// per host CPU, at most one per 2.5 GiB of available memory, at least 1).
///
/// Panics when `$CCTL_TEST_GUESTS` is not a number from 1 to 64.
pub fn guests() -> usize {
    if let Ok(v) = std::env::var(GUESTS_ENV) {
        return match v.parse::<usize>() {
            Ok(n @ 1..=64) => n,
            _ => panic!("{GUESTS_ENV}={v}: allowed 1 to 64"),
        };
    }
    cctl_vm::guests_that_fit() as usize
}

/// `parts` in `n` shares of about equal [`Part::guest_s`] (the longest first, each to the
/// share with the least so far); within a share parts keep their order. No empty share.
pub fn split(parts: &[Part], n: usize) -> Vec<Vec<Part>> {
    let n = n.clamp(1, parts.len().max(1));
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(parts[i].guest_s));
    let mut shares: Vec<(u32, Vec<usize>)> = vec![(0, Vec::new()); n];
    for i in order {
        let least = shares.iter_mut().min_by_key(|s| s.0).expect("n >= 1");
        least.0 += parts[i].guest_s;
        least.1.push(i);
    }
    shares
        .into_iter()
        .filter(|s| !s.1.is_empty())
        .map(|(_, mut idx)| {
            idx.sort_unstable();
            idx.into_iter().map(|i| parts[i]).collect()
        })
        .collect()
}

/// The parts `$CCTL_TEST_PARTS` names (all when unset), in the order of `parts`.
///
/// Panics on a name that is not a part, listing the parts.
fn selected(parts: &[Part]) -> Vec<Part> {
    let want = std::env::var(PARTS_ENV).unwrap_or_default();
    let want: Vec<&str> = want.split(',').filter(|s| !s.is_empty()).collect();
    let names: Vec<&str> = parts.iter().map(|p| p.name).collect();
    for w in &want {
        assert!(
            names.contains(w),
            "{PARTS_ENV}: unknown part `{w}`; parts: {}",
            names.join(", ")
        );
    }
    parts
        .iter()
        .filter(|p| want.is_empty() || want.contains(&p.name))
        .copied()
        .collect()
}

/// The host's wall clock seen from a guest: the modification time of a file written in
/// `dir`, a directory of the host's file system (9p: the host sets it). `None` if it
/// cannot be written or read.
fn host_clock(dir: &Path) -> Option<std::time::SystemTime> {
    let f = dir.join(format!(".host-clock-{}", std::process::id()));
    std::fs::write(&f, b"").ok()?;
    let t = std::fs::metadata(&f).and_then(|m| m.modified()).ok();
    let _ = std::fs::remove_file(&f);
    t
}

/// Runs `parts` one after the other, printing each one's time: this kernel's clock (a
/// guest's own time on the virtual clock, where idle time is skipped) and the host's wall
/// clock through `rwdir` (what the part costs the host; [`Part::guest_s`] is balanced
/// on it).
fn run_here(parts: &[Part], rwdir: &Path) {
    for p in parts {
        let t = Instant::now();
        let host = host_clock(rwdir);
        eprintln!("part {}: starting", p.name);
        (p.run)();
        let wall = host
            .zip(host_clock(rwdir))
            .and_then(|(a, b)| b.duration_since(a).ok())
            .map_or("?".to_string(), |d| format!("{:.0?}", d));
        eprintln!(
            "part {}: passed in {:.0?} of this kernel's time, {wall} of the host's",
            p.name,
            t.elapsed()
        );
    }
}

/// Runs the selected `parts` where the kernel has netem: here if it has; otherwise by
/// re-running the test `test_name` of this test binary in [`guests`] guests side by side
/// (on the virtual clock, one vCPU each), each running a share of the parts ([`split`]).
/// `rwdir` is writable in the guests, for results; `timeout` bounds each guest's run.
/// The host's own `CCTL_TEST_*` variables follow the test into the guests.
///
/// A guest that dies before its parts finish (its kernel or QEMU failed: no exit status
/// comes back) is booted once more, after printing why with the guest kernel's last log
/// lines; a part that fails in a guest is not retried. Panics, naming the guest and its
/// parts, if any guest's run fails.
pub fn in_netem_kernel(test_name: &str, rwdir: &Path, timeout: Duration, parts: &[Part]) {
    let parts = selected(parts);
    if cctl_netem::testbed::netem_available() {
        std::fs::create_dir_all(rwdir).unwrap();
        run_here(&parts, rwdir);
        return;
    }
    assert!(
        std::env::var_os(IN_VM).is_none(),
        "inside the VM the kernel must have netem"
    );
    vm::check_vm_deps()
        .unwrap_or_else(|e| panic!("netem is missing here and the VM cannot start: {e}"));
    std::fs::create_dir_all(rwdir).unwrap();
    let exe = std::env::current_exe().unwrap();
    let safe = |v: &str| {
        v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ",_-@:.".contains(c))
    };
    // Developers' filters (CCTL_TEST_ALGOS, ...) follow the test into the guest.
    let passed: String = std::env::vars()
        .filter(|(k, v)| k.starts_with("CCTL_TEST_") && k != PARTS_ENV && safe(v))
        .map(|(k, v)| format!(" {k}={v}"))
        .collect();
    let shares = split(&parts, guests());
    let runs: Vec<(vm::VmSpec, String)> = shares
        .iter()
        .map(|share| {
            let names: Vec<&str> = share.iter().map(|p| p.name).collect();
            let script = format!(
                "export {IN_VM}=1 RUST_BACKTRACE=1{passed} {PARTS_ENV}={}\n\
                 exec '{}' --exact {test_name} --nocapture --test-threads=1\n",
                names.join(","),
                exe.display()
            );
            let mut spec = vm::VmSpec::detect().unwrap_or_else(|e| panic!("{e}"));
            spec.set_clock(vm::Clock::Virtual)
                .unwrap_or_else(|e| panic!("{e}"));
            spec.rwdirs.push(rwdir.to_path_buf());
            spec.timeout = timeout;
            // One guest's lines come as they are written; several guests' would interleave
            // (each guest's output is printed when it ends).
            spec.echo = shares.len() == 1;
            (spec, script)
        })
        .collect();
    for (j, share) in shares.iter().enumerate() {
        let names: Vec<&str> = share.iter().map(|p| p.name).collect();
        let s: u32 = share.iter().map(|p| p.guest_s).sum();
        eprintln!(
            "{test_name}: guest {} of {}: {} (about {s} s)",
            j + 1,
            shares.len(),
            names.join(", ")
        );
    }
    let t = Instant::now();
    let results = vm::run_in_vms(&runs);
    let mut failed = Vec::new();
    for (j, (res, (spec, script))) in results.into_iter().zip(&runs).enumerate() {
        let who = format!("guest {} of {}", j + 1, shares.len());
        let res = match res {
            Err(e @ vm::VmError::NoExitStatus { .. }) => {
                eprintln!(
                    "{test_name}: {who} died before its parts finished; booting it once more. {e}"
                );
                vm::run_in_vm(spec, script)
            }
            other => other,
        };
        match res {
            Ok(out) => {
                if !spec.echo {
                    eprintln!("===== {who}, {:.0?} =====", out.elapsed);
                    print!("{}", out.stdout);
                    eprint!("{}", out.stderr);
                }
                if !out.success() || !out.stdout.contains("test result: ok. 1 passed") {
                    failed.push(format!("{who} (status {})", out.status));
                }
            }
            Err(e) => failed.push(format!("{who}: {e}")),
        }
    }
    eprintln!(
        "{test_name}: {} guest(s) in {:.0?}",
        shares.len(),
        t.elapsed()
    );
    assert!(
        failed.is_empty(),
        "{test_name} failed in {} (results in {}); the guests' output is above",
        failed.join(", "),
        rwdir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nop() {}

    #[test]
    fn shares_cover_every_part_once_balanced_and_in_order() {
        let parts: Vec<Part> = [300, 200, 100, 100, 50, 20]
            .iter()
            .enumerate()
            .map(|(i, &s)| Part {
                name: ["a", "b", "c", "d", "e", "f"][i],
                guest_s: s,
                run: nop,
            })
            .collect();
        let two = split(&parts, 2);
        let sums: Vec<u32> = two
            .iter()
            .map(|s| s.iter().map(|p| p.guest_s).sum())
            .collect();
        assert_eq!(sums.iter().sum::<u32>(), 770);
        assert!(
            sums.iter().max().unwrap() - sums.iter().min().unwrap() <= 30,
            "{sums:?}"
        );
        for share in &two {
            let names: Vec<&str> = share.iter().map(|p| p.name).collect();
            let mut sorted = names.clone();
            sorted.sort_unstable();
            assert_eq!(names, sorted, "order kept");
        }
        assert_eq!(split(&parts, 16).len(), 6, "no empty guest");
        assert_eq!(split(&parts, 1)[0].len(), 6);
    }
}
