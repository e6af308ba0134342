//! The BPF file system taken away under registered names (issue 29, resource faults).
//! cctl's link pins hold its registrations: the file system they are pinned in decides
//! what cctl can see and change. Two cases, each in a private mount namespace
//! (`unshare -m`) so that the host's `/sys/fs/bpf` and what others pinned in it stay:
//!
//! - **Unmounted while the pins live on**: a name loaded on the host, then cctl run where
//!   `/sys/fs/bpf` is unmounted. `cctl list` warns that the name is registered and recorded
//!   but unreachable from there; `unload` refuses it (exit 5, saying why); `load` refuses
//!   to mount a BPF file system that would vanish with the namespace (exit 4); nothing run
//!   there removes the name's record, so the host's `cctl list` still shows it whole.
//! - **Unmounted with the pins**: a name loaded into a BPF file system mounted in the
//!   namespace, which is then unmounted: the kernel drops the links and the name
//!   unregisters. `cctl list` no longer shows it, its record is a leftover, and `cctl
//!   apply` of a file naming it loads it again (converges). Nothing is left after.
//!
//! Names `bf_a`, `bf_c`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use cctl_loader::registry;
use cctl_tests::{available, cctl_bin, clean_slate, config_of_current_state, require_root, KERNEL};

const LIVE: &str = "bf_a";
const DROPPED: &str = "bf_c";
/// Exit codes (cli/src/exit.rs).
const CONFLICT: i32 = 5;
const MISSING_FEATURE: i32 = 4;

/// `sh -c SCRIPT` in a new private mount namespace, with `$CCTL` the binary under test.
fn in_private_mount_ns(script: &str) -> Output {
    Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "--",
            "sh",
            "-c",
            script,
        ])
        .env("CCTL", cctl_bin())
        .output()
        .expect("unshare runs")
}

fn cctl(args: &[&str]) -> Output {
    Command::new(cctl_bin())
        .args(args)
        .output()
        .expect("cctl runs")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn clean() {
    clean_slate("cctl-bf-", &[LIVE, DROPPED]);
    let _ = registry::clean_leftovers();
}

/// Unloads the test's names on drop, also when an assertion fails.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        clean();
    }
}

#[test]
fn names_whose_bpf_file_system_is_gone_are_reported_kept_and_reloaded() {
    require_root();
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    clean();
    let _cleanup = Cleanup;

    // Case 1: the pins live on in the host's file system; cctl runs where it is unmounted.
    let o = cctl(&["load", "reno", "--name", LIVE]);
    assert!(o.status.success(), "load on the host: {}", text(&o));
    let o = in_private_mount_ns(
        r#"umount /sys/fs/bpf || exit 100
           "$CCTL" list --json; echo "list=$?" >&2
           "$CCTL" unload bf_a; echo "unload=$?" >&2
           "$CCTL" load reno --name bf_b; echo "load=$?" >&2
           "$CCTL" list --json >/dev/null 2>&1; "$CCTL" unload bf_a >/dev/null 2>&1; true"#,
    );
    let out = text(&o);
    println!("case 1, in a namespace without /sys/fs/bpf:\n{out}");
    assert!(out.contains("list=0"), "list answers: {out}");
    assert!(
        out.contains(&format!(
            "'{LIVE}' is registered in the kernel and recorded in /run/cctl, but its link pin \
             is not in /sys/fs/bpf/cctl"
        )),
        "list warns about the unreachable name: {out}"
    );
    assert!(
        out.contains(r#""kind":"unreachable""#) && out.contains(&format!(r#""name":"{LIVE}""#)),
        "list --json has it: {out}"
    );
    assert!(
        out.contains(&format!("unload={CONFLICT}")),
        "unload refused as a conflict: {out}"
    );
    assert!(
        out.contains(&format!("load={MISSING_FEATURE}"))
            && out.contains("would vanish with the namespace"),
        "load refuses to mount a BPF file system that dies with the namespace: {out}"
    );
    assert!(
        !available().iter().any(|n| n == "bf_b"),
        "nothing registered from there"
    );
    let host = registry::list_loaded().unwrap();
    let rec = host
        .iter()
        .find(|r| r.name == LIVE)
        .unwrap_or_else(|| panic!("{LIVE} still listed on the host: {host:?}"));
    assert_eq!(rec.algo, "reno", "its record was kept whole");
    assert!(registry::leftovers().unwrap().is_empty());
    let o = cctl(&["unload", LIVE]);
    assert!(o.status.success(), "unload on the host: {}", text(&o));

    // Case 2: the pins go with the file system: the name unregisters.
    let o = in_private_mount_ns(
        r#"mount -t bpf bpf /sys/fs/bpf || exit 100
           "$CCTL" load reno --name bf_c || exit 101
           grep -qw bf_c /proc/sys/net/ipv4/tcp_available_congestion_control || exit 102
           umount /sys/fs/bpf"#,
    );
    assert!(o.status.success(), "case 2's namespace: {}", text(&o));
    let deadline = Instant::now() + Duration::from_secs(5);
    while available().iter().any(|n| n == DROPPED) {
        assert!(
            Instant::now() < deadline,
            "{DROPPED} still registered 5 s after its file system was unmounted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let listed = registry::list_loaded().unwrap();
    assert!(
        !listed.iter().any(|r| r.name == DROPPED),
        "list shows only what is registered: {listed:?}"
    );
    let left = registry::leftovers().unwrap();
    assert!(
        left.contains(&Path::new("/run/cctl").join(format!("{DROPPED}.json"))),
        "its record is a leftover: {left:?}"
    );
    println!("case 2: {DROPPED} unregistered with its file system; leftovers {left:?}");

    // `cctl apply` of a file naming it converges.
    let file = std::env::temp_dir().join(format!("cctl-bpffs-{}.toml", std::process::id()));
    let mut cfg = config_of_current_state(&|n| n == DROPPED, &|_| false);
    cfg.push_str(&format!(
        "\n[[algorithm]]\nalgo = \"reno\"\nname = \"{DROPPED}\"\n"
    ));
    std::fs::write(&file, cfg).unwrap();
    let o = cctl(&["apply", file.to_str().unwrap()]);
    assert!(o.status.success(), "apply: {}", text(&o));
    assert!(available().iter().any(|n| n == DROPPED), "registered again");
    assert!(registry::list_loaded()
        .unwrap()
        .iter()
        .any(|r| r.name == DROPPED));
    assert!(registry::leftovers().unwrap().is_empty(), "no leftover");
    let o = cctl(&["apply", "--dry-run", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("nothing to do"),
        "converged: {}",
        text(&o)
    );
}
