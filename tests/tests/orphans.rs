//! A test run killed while its guest runs (SIGKILL, a CI timeout) leaves the guest's QEMU
//! running; the next run ends it and says so. Every VM started under
//! `$CCTL_VM_PGID_DIR` records its process group there (`<pid>-<n>/vm.pgid`), and
//! `cctl_vm::end_orphaned_vms` ends those whose starter is dead (cctl-tests'
//! `require_root` does, at the start of every root test).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cctl_tests::{cctl_bin, require_root, KERNEL};

/// Processes in process group `pgid`.
fn group(pgid: i32) -> String {
    let o = Command::new("pgrep")
        .args(["-a", "-g", &pgid.to_string()])
        .output()
        .expect("pgrep runs");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_guest_of_a_killed_run_is_ended_by_the_next_saying_so() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("orphans");
    let _ = std::fs::remove_dir_all(&root);
    let vms = root.join("vms");
    std::fs::create_dir_all(&vms).unwrap();
    let mut child = Command::new(cctl_bin())
        .args(["conform", "reno", "--short", "--vm", "always", "--out"])
        .arg(root.join("out"))
        .env(cctl_vm::PGID_DIR_ENV, &vms)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cctl conform starts");
    let record = vms
        .join(format!("{}-0", child.id()))
        .join(cctl_vm::PGID_FILE);
    let t0 = Instant::now();
    while !record.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{} not written within 60 s",
            record.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let pgid: i32 = std::fs::read_to_string(&record)
        .unwrap()
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .expect("the record holds a process group");
    // Killed as a CI timeout kills: its VM is not told.
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let left = group(pgid);
    assert!(
        !left.is_empty(),
        "the VM group {pgid} should outlive its killed starter (nothing to test otherwise)"
    );
    println!("left running by the killed cctl:\n{left}");
    let ended = cctl_vm::end_orphaned_vms(&vms).expect("ending the orphaned VM");
    println!("{ended:?}");
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert!(
        ended[0].contains(&format!("process group {pgid}")) && ended[0].contains("had died"),
        "says what it ended: {}",
        ended[0]
    );
    assert_eq!(group(pgid), "", "the VM group {pgid} still runs");
    assert_eq!(
        std::fs::read_dir(&vms).unwrap().count(),
        0,
        "its record is removed"
    );
    // A running starter's VM is not touched: this process is alive, its record stays.
    let mine = vms.join(format!("{}-0", std::process::id()));
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join(cctl_vm::PGID_FILE), format!("{pgid} x\n")).unwrap();
    assert!(cctl_vm::end_orphaned_vms(&vms).unwrap().is_empty());
    assert!(mine.exists(), "the record of a running process stays");
    std::fs::remove_dir_all(&root).unwrap();
}
