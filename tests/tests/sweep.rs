//! Sweeps at scale on the running kernel, through the `cctl` binary, on a short tbf-only
//! scenario (tests/scenarios/host-sweep.toml: 3 points x 2 algorithms, 4 s each):
//! shards merged back into the unsplit sweep, `--resume` after a SIGKILL, `--jobs 2` with
//! two dumbbells at once (and Ctrl-C), and bad input refused before anything is made.

use std::collections::BTreeSet;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use cctl_report::resume::completed_runs;
use cctl_report::runs::RunId;
use cctl_tests::bench::{assert_nothing_left, namespaces};
use cctl_tests::{cctl_bin, clean_slate, require_root, KERNEL};

const SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/host-sweep.toml");
const ALGOS: &str = "reno,cubic";
/// What the sweep registers (cctl's reno and cubic).
const REGISTERED: [&str; 2] = ["bpf_reno", "bpf_cubic"];

fn root(test: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("sweep")
        .join(test);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn setup() -> std::sync::MutexGuard<'static, ()> {
    require_root();
    let g = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    clean_slate("cctl-b", &REGISTERED);
    g
}

fn cctl(args: &[&str]) -> Output {
    Command::new(cctl_bin())
        .args(args)
        .output()
        .expect("running cctl")
}

fn spawn(args: &[&str]) -> Child {
    Command::new(cctl_bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting cctl")
}

/// Starts cctl with its stderr in `log` (read while it runs).
fn spawn_logged(args: &[String], log: &Path) -> Child {
    Command::new(cctl_bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("starting cctl")
}

fn bench(dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = ["bench", "run", SCENARIO, "--algo", ALGOS, "--resume"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(dir.display().to_string());
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn assert_ok(what: &str, o: &Output) {
    assert!(o.status.success(), "{what}: {:?}\n{}", o.status, stderr(o));
}

fn runs(dir: &Path) -> BTreeSet<RunId> {
    completed_runs(dir).into_keys().collect()
}

/// Sends SIGINT (Ctrl-C) to a running cctl.
fn interrupt(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
}

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// [`wait_for`] on a running cctl (`child`, its stderr in `log`): fails at once, with its
/// exit status, if it exits first; either failure ends with the last 40 lines of `log`.
fn wait_for_running(
    what: &str,
    timeout: Duration,
    child: &mut Child,
    log: &Path,
    mut cond: impl FnMut() -> bool,
) {
    let end = Instant::now() + timeout;
    let tail = || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        format!(
            "{} ended with:\n{}",
            log.display(),
            lines[lines.len().saturating_sub(40)..].join("\n")
        )
    };
    while !cond() {
        if let Some(status) = child.try_wait().unwrap() {
            // What it wrote just before it exited may be what was waited for.
            if cond() {
                return;
            }
            panic!("cctl exited ({status}) before {what}; {}", tail());
        }
        assert!(
            Instant::now() < end,
            "timed out waiting for {what} ({} s); {}",
            timeout.as_secs(),
            tail()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn shards_merge_into_exactly_the_runs_of_the_unsplit_sweep() {
    let _g = setup();
    let d = root("shards");
    let unsplit = d.join("unsplit");
    // Which runs, not what they measure: 1-s runs.
    let short = ["--duration-s", "1"];
    assert_ok("unsplit sweep", &cctl(&strs(&bench(&unsplit, &short))));
    let all = runs(&unsplit);
    assert_eq!(all.len(), 6, "3 points x 2 algorithms: {all:?}");

    let mut shards = Vec::new();
    let mut seen = BTreeSet::new();
    for k in 1..=3 {
        let dir = d.join(format!("shard-{k}"));
        let shard = format!("{k}/3");
        assert_ok(
            &shard,
            &cctl(&strs(&bench(
                &dir,
                &[short[0], short[1], "--shard", &shard],
            ))),
        );
        let mine = runs(&dir);
        assert_eq!(mine.len(), 2, "shard {shard}: {mine:?}");
        assert!(
            mine.is_disjoint(&seen),
            "shard {shard} repeats a run: {mine:?}"
        );
        seen.extend(mine);
        shards.push(dir);
    }
    assert_nothing_left("after the shards", &REGISTERED);

    let merged = d.join("merged");
    let mut args = vec!["bench".to_string(), "merge".into()];
    args.extend(shards.iter().map(|p| p.display().to_string()));
    args.extend(["--out".into(), merged.display().to_string()]);
    let o = cctl(&strs(&args));
    assert_ok("merge", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("6 runs of 6 planned, 0 missing, 0 duplicated"),
        "{out}"
    );
    assert_eq!(
        runs(&merged),
        all,
        "the merged runs are the unsplit sweep's"
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(merged.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["rows"].as_array().map(Vec::len),
        Some(6),
        "{summary}"
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(merged.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(meta["runs_done"], 6);
    assert!(meta["shard"].is_null(), "{meta}");

    // Two shards only: the third's runs are reported missing.
    let partial = d.join("partial");
    let o = cctl(&[
        "bench",
        "merge",
        &shards[0].display().to_string(),
        &shards[1].display().to_string(),
        "--out",
        &partial.display().to_string(),
    ]);
    assert_ok("partial merge", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    for id in runs(&shards[2]) {
        assert!(
            out.contains(&format!("missing: {id}")),
            "{id} not reported missing:\n{out}"
        );
    }

    // A shard of another seed is refused, naming the field, and nothing is written.
    let other = d.join("other-seed");
    assert_ok(
        "other seed",
        &cctl(&strs(&bench(&other, &["--shard", "1/3", "--seed", "99"]))),
    );
    let refused = d.join("refused");
    let o = cctl(&[
        "bench",
        "merge",
        &shards[1].display().to_string(),
        &other.display().to_string(),
        "--out",
        &refused.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("seed differs"), "{}", stderr(&o));
    assert!(
        !refused.exists(),
        "a refused merge wrote {}",
        refused.display()
    );
    assert_nothing_left("at the end", &REGISTERED);
}

#[test]
fn resume_after_sigkill_skips_finished_runs_and_redoes_the_cut_one() {
    let _g = setup();
    let d = root("resume");
    let dir = d.join("sweep");
    let mut child = spawn(&strs(&bench(&dir, &[])));
    // Kill it 1.5 s into its third run: two runs are whole, one is half-written.
    let third = dir.join("runs/reno/p1-r0");
    wait_for("the third run", Duration::from_secs(60), || third.exists());
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    let st = child.wait().unwrap();
    assert_eq!(st.signal(), Some(9));
    let before = completed_runs(&dir);
    assert_eq!(
        before.len(),
        2,
        "two runs finished before the kill: {:?}",
        before.keys()
    );
    assert!(
        !third.join("run.json").exists(),
        "the cut run has no run.json"
    );
    assert!(
        !namespaces().is_empty(),
        "a SIGKILL leaves the dumbbell (what resume cleans)"
    );
    let kept: Vec<(PathBuf, Vec<u8>)> = before
        .keys()
        .map(|id| {
            let p = id.dir(&dir).join("run.json");
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect();

    let o = cctl(&strs(&bench(&dir, &[])));
    assert_ok("resume", &o);
    assert!(
        stderr(&o).contains("2 of 6 runs completed, 4 to do"),
        "{}",
        stderr(&o)
    );
    for (p, bytes) in kept {
        assert_eq!(
            std::fs::read(&p).unwrap(),
            bytes,
            "{} was redone",
            p.display()
        );
    }
    let after = completed_runs(&dir);
    assert_eq!(after.len(), 6, "{:?}", after.keys());
    assert!(third.join("run.json").exists(), "the cut run was redone");
    assert!(dir.join("summary.json").exists());
    assert_nothing_left("after the resume", &REGISTERED);

    // Resuming a finished sweep runs nothing; resuming with other parameters is refused.
    let o = cctl(&strs(&bench(&dir, &[])));
    assert_ok("second resume", &o);
    assert!(
        stderr(&o).contains("6 of 6 runs completed, 0 to do"),
        "{}",
        stderr(&o)
    );
    let o = cctl(&strs(&bench(&dir, &["--repeat", "2"])));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("repeat differs"), "{}", stderr(&o));
    assert_nothing_left("after the refused resume", &REGISTERED);
}

#[test]
fn two_jobs_run_two_dumbbells_at_once_and_leave_nothing() {
    let _g = setup();
    let d = root("jobs");
    let dir = d.join("sweep");
    let mut child = spawn(&strs(&bench(&dir, &["--jobs", "2"])));
    let mut both = false;
    let end = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() && Instant::now() < end {
        let ns = namespaces();
        both |= ns.iter().any(|n| n == "cctl-b0-rtr") && ns.iter().any(|n| n == "cctl-b1-rtr");
        std::thread::sleep(Duration::from_millis(50));
    }
    let st = child.wait().unwrap();
    assert!(st.success(), "{st:?}");
    assert!(
        both,
        "slots 0 and 1 never had their dumbbells up at the same time"
    );
    let done = completed_runs(&dir);
    assert_eq!(done.len(), 6);
    // Each run's flows come from its slot's subnet, and both slots ran.
    let mut slots = BTreeSet::new();
    for rec in done.values() {
        let ip = rec.flows[0].local_ip;
        assert!(
            rec.series[0].points.len() > 10,
            "{}: samples reached its slot",
            rec.algo
        );
        slots.insert(ip.octets()[2]);
    }
    assert_eq!(slots, BTreeSet::from([0, 1]), "{slots:?}");
    assert_nothing_left("after --jobs 2", &REGISTERED);

    // Ctrl-C while both slots run: exit 130, everything removed.
    let dir = d.join("interrupted");
    let mut child = spawn(&strs(&bench(&dir, &["--jobs", "2"])));
    wait_for("both slots", Duration::from_secs(60), || {
        let ns = namespaces();
        ns.iter().any(|n| n == "cctl-b0-rtr") && ns.iter().any(|n| n == "cctl-b1-rtr")
    });
    interrupt(&child);
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(130), "{st:?}");
    assert_nothing_left("after Ctrl-C", &REGISTERED);
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(meta["interrupted"], true);
}

#[test]
fn bad_input_is_refused_before_anything_is_made() {
    let _g = setup();
    let d = root("bad");
    let dir = d.join("never");
    for (args, says) in [
        (vec!["--shard", "4/3"], "K must be between 1 and N (3)"),
        (vec!["--shard", "0/3"], "K is 1-based"),
        (vec!["--shard", "x"], "not K/N"),
        (vec!["--jobs", "0"], "allowed 1 to 64"),
    ] {
        let o = cctl(&strs(&bench(&dir, &args)));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(!dir.exists(), "{args:?} created {}", dir.display());
        assert!(namespaces().is_empty(), "{args:?} made namespaces");
    }
    let empty = d.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = d.join("merged");
    let o = cctl(&[
        "bench",
        "merge",
        &empty.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is not a results directory"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());

    // A second cctl bench on the same kernel is refused, naming the first one's PID.
    let first_dir = d.join("first");
    let mut first = spawn(&strs(&bench(&first_dir, &[])));
    wait_for(
        "the first sweep's dumbbell",
        Duration::from_secs(60),
        || !namespaces().is_empty(),
    );
    let o = cctl(&strs(&bench(&dir, &[])));
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "another cctl bench (PID {}) is running",
            first.id()
        )),
        "{}",
        stderr(&o)
    );
    assert!(!dir.exists(), "the refused sweep created {}", dir.display());
    interrupt(&first);
    assert_eq!(first.wait().unwrap().code(), Some(130));
    assert_nothing_left("after the refusals", &REGISTERED);
}

/// Processes in process group `pgid`.
fn group_alive(pgid: i32) -> bool {
    Command::new("pgrep")
        .args(["-g", &pgid.to_string()])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The VMs of a sweep (on the virtual clock, one sealed guest per run, in `slots/<J>/`) die
/// the two ways they can, and `--resume` goes on after each:
/// 1. run 2's guest dies (QEMU's process group killed while it runs): cctl says the VM
///    exited without finishing and exits 1, run 1 is kept whole in the combined directory
///    and nothing is left running;
/// 2. cctl is killed while run 2's VM runs: QEMU outlives it, and the next `--resume` ends
///    that VM (saying so) before it does run 2 again.
#[test]
fn resume_goes_on_after_the_guest_dies_and_ends_the_vm_a_killed_cctl_left() {
    let _g = setup();
    let d = root("vm");
    let dir = d.join("sweep");
    // One guest at a time (the virtual clock's default is one per CPU): run 2's guest starts
    // after run 1's, and its output is echoed, which is how the test sees it running.
    let args = bench(&dir, &["--vm", "always", "--shard", "1/3", "--jobs", "1"]);
    let pgid_file = dir.join("slots").join("2").join("vm.pgid");
    let read_pgid = || -> i32 {
        std::fs::read_to_string(&pgid_file)
            .expect("the VM's process group is recorded")
            .split_whitespace()
            .next()
            .and_then(|w| w.parse().ok())
            .expect("vm.pgid starts with the group id")
    };
    // Run 2's guest has started its run: its own announcement follows cctl's for slot 2.
    let run2_running = |log: &Path| {
        pgid_file.exists()
            && std::fs::read_to_string(log).is_ok_and(|t| {
                t.split_once("for slot 2/2")
                    .is_some_and(|(_, after)| after.contains("of traffic"))
            })
    };

    // 1. Run 2's guest dies.
    let log = d.join("first.stderr");
    let mut child = spawn_logged(&args, &log);
    wait_for_running(
        "run 2's guest",
        Duration::from_secs(600),
        &mut child,
        &log,
        || run2_running(&log),
    );
    assert_eq!(
        completed_runs(&dir.join("slots").join("1")).len(),
        1,
        "run 1's guest ended and handed its run back"
    );
    let pgid = read_pgid();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(-pgid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "a dead guest fails the sweep: {err}"
    );
    assert!(
        err.contains("the VM exited") && err.contains("without the script finishing"),
        "cctl says the VM died: {err}"
    );
    assert_eq!(completed_runs(&dir).len(), 1, "the finished run is kept");
    wait_for(
        "the dead VM's last processes to exit",
        Duration::from_secs(10),
        || !group_alive(pgid),
    );
    assert!(!pgid_file.exists(), "vm.pgid removed with the VM");

    // 2. cctl dies while the resumed run 2's VM runs (once its guest has started the run:
    // killed while the guest boots, QEMU soon dies of the pipe cctl held).
    let log = d.join("second.stderr");
    let mut child = spawn_logged(&args, &log);
    wait_for_running(
        "the resumed run 2's guest",
        Duration::from_secs(600),
        &mut child,
        &log,
        || run2_running(&log),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let pgid = read_pgid();
    assert!(
        group_alive(pgid),
        "QEMU outlives a killed cctl (what resume must end)"
    );

    let o = cctl(&strs(&args));
    assert_ok("resume in the VM", &o);
    assert!(
        stderr(&o).contains(&format!(
            "ended the VM left running by an earlier cctl (process group {pgid}"
        )),
        "{}",
        stderr(&o)
    );
    assert!(!group_alive(pgid), "the old VM is gone");
    assert!(!pgid_file.exists(), "vm.pgid removed once the VM ended");
    assert_eq!(completed_runs(&dir).len(), 2, "shard 1/3 of 6 runs");
    assert_nothing_left("after the VM resume", &REGISTERED);
}

/// A real run of one point of host-sweep (reno, 10 Mbit/s, 4 s) with expectations in the
/// scenario: one that a full link meets (goodput utilisation >= 0.8), one it cannot (mean
/// qdelay <= 1 ms behind a 50-packet drop-tail buffer, which a long Reno flow fills).
/// `--strict` makes the run exit 8 after printing both verdicts; `bench report` on the same
/// directory exits 0 without `--strict` and 8 with it; summary.json holds both with their
/// measured means.
#[test]
fn a_real_run_judges_its_scenarios_expectations() {
    let _g = setup();
    let d = root("expect");
    let sc = d.join("host-sweep-expect.toml");
    std::fs::write(
        &sc,
        std::fs::read_to_string(SCENARIO).unwrap()
            + "\n[[expect]]\nmetric = \"M8 utilisation (goodput)\"\nmin = 0.8\n\
               \n[[expect]]\nmetric = \"M13 mean qdelay all flows (ms)\"\nmax = 1\n\
               \n[[expect]]\nmetric = \"unintended drops (pkts)\"\nmax = 0\n",
    )
    .unwrap();
    let dir = d.join("out");
    let o = cctl(&[
        "bench",
        "run",
        sc.to_str().unwrap(),
        "--algo",
        "reno",
        "--points",
        "0",
        "--resume",
        dir.to_str().unwrap(),
        "--strict",
    ]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("PASS M8 utilisation (goodput) >= 0.8 (algo=*, point=*): 1 of 1 held"),
        "{out}"
    );
    assert!(
        out.contains("FAIL M13 mean qdelay all flows (ms) <= 1 (algo=*, point=*): 0 of 1 held"),
        "{out}"
    );
    // The drop ledger: drops at the bottleneck only, so the run is valid.
    assert!(
        out.contains("PASS unintended drops (pkts) <= 0 (algo=*, point=*): 1 of 1 held"),
        "{out}"
    );
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("runs/reno/p0-r0/run.json")).unwrap())
            .unwrap();
    assert!(
        run["drops"]["bottleneck"].as_u64().unwrap() > 0,
        "{}",
        run["drops"]
    );
    assert!(run.get("invalid").is_none(), "{}", run["invalid"]);
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert!(summary.get("invalid_runs").is_none());
    let e = &summary["expectations"];
    assert_eq!(
        (e[0]["verdict"].as_str(), e[1]["verdict"].as_str()),
        (Some("pass"), Some("fail"))
    );
    let util = e[0]["cases"][0]["mean"].as_f64().unwrap();
    let qdelay = e[1]["cases"][0]["mean"].as_f64().unwrap();
    assert!((0.8..=1.05).contains(&util), "utilisation {util}");
    assert!(qdelay > 1.0, "mean qdelay {qdelay} ms");
    assert_ok(
        "bench report",
        &cctl(&["bench", "report", dir.to_str().unwrap()]),
    );
    let o = cctl(&["bench", "report", dir.to_str().unwrap(), "--strict"]);
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    assert_nothing_left("after the run", &REGISTERED);
}

/// A results file system with room for the sweep's metadata and about two of its runs
/// (a 4-s run of host-sweep writes about 90 KiB: run.json, samples, delays, queue).
const SMALL_FS: &str = "250k";

/// A tmpfs mounted at `dir` of `size` (e.g. "600k"), unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "mount tmpfs: {}", stderr(&o));
        Tmpfs(dir.to_path_buf())
    }

    fn resize(&self, size: &str) {
        let o = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .output()
            .unwrap();
        assert!(o.status.success(), "remount tmpfs: {}", stderr(&o));
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_results_file_system_fails_the_sweep_keeps_finished_runs_and_resume_completes() {
    let _g = setup();
    let d = root("full");
    let mnt = d.join("small");
    let fs = Tmpfs::mount(&mnt, SMALL_FS);
    let dir = mnt.join("sweep");
    // The delay taps (off by default for host-sweep, which reports no delays) write
    // delays.csv, so that the runs outgrow the small file system part-way.
    let taps = ["--points", "0,1", "--delay-sample", "10"];
    let o = cctl(&strs(&bench(&dir, &taps)));
    let err = stderr(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a full disk fails the sweep: {err}"
    );
    assert!(
        err.contains("No space left on device") && err.contains(&mnt.display().to_string()),
        "the error names the file system's state and the path: {err}"
    );
    let kept = completed_runs(&dir);
    assert!(
        !kept.is_empty() && kept.len() < 4,
        "some runs finished before the disk filled: {:?}",
        kept.keys()
    );
    for id in kept.keys() {
        let run = std::fs::read(id.dir(&dir).join("run.json")).unwrap();
        assert!(
            serde_json::from_slice::<serde_json::Value>(&run).is_ok(),
            "{id}: a finished run.json is whole"
        );
    }
    assert_nothing_left("after the full disk", &REGISTERED);
    fs.resize("64m");
    let o = cctl(&strs(&bench(&dir, &taps)));
    assert_ok("resume after the disk was grown", &o);
    assert!(
        stderr(&o).contains(&format!("{} of 4 runs completed", kept.len())),
        "{}",
        stderr(&o)
    );
    assert_eq!(completed_runs(&dir).len(), 4);
    assert!(dir.join("summary.json").exists());
    assert_nothing_left("after the resume", &REGISTERED);
    eprintln!(
        "full disk at {SMALL_FS}: {} of 4 runs kept, the rest done by --resume",
        kept.len()
    );
}
