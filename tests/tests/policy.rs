//! Integration tests of `cctl policy` on the running kernel: new connections get the
//! congestion control a port or cgroup rule names, on both ends, and nothing else does.
//!
//! The port-rule program sits on the cgroup v2 root, so it sees every connection of the
//! host (other tests' too): these tests only add rules for their own ports (471xx) and
//! cgroups (`cctl-po-*`), and guards remove them even when an assertion fails.

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cctl_loader::error::Error;
use cctl_loader::policy::{self, Rule, RuleSpec, Target};
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use cctl_netem::netns::spawn_in_netns;
use cctl_tests::{available, clean_slate, require_root, KERNEL};
use nix::libc;

const PREFIX: &str = "cctl-po-";
/// The port the rules name.
const PORT: u16 = 47101;
/// A port no rule names.
const OTHER_PORT: u16 = 47102;
/// The port of the unloaded-CC test.
const GONE_PORT: u16 = 47103;
/// BPF CCs loaded for the tests (cctl's reno under other names, told apart by name).
const BPF_CC: &str = "po_reno";
const BPF_CC2: &str = "po_reno2";

/// The socket's congestion control (getsockopt TCP_CONGESTION).
fn cc_of(fd: RawFd) -> String {
    let mut buf = [0u8; 16];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is valid for len bytes; fd is an open TCP socket of this process.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(
        rc,
        0,
        "getsockopt(TCP_CONGESTION): {}",
        std::io::Error::last_os_error()
    );
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A network namespace with loopback up, and its default CC (inherited from the initial
/// namespace; a namespace may only pick an allowed one), deleted on drop.
struct Netns(String, String);

impl Netns {
    /// A built-in CC that is not the namespace default, for port rules.
    fn other_cc(&self) -> &'static str {
        if self.1 == "reno" {
            "cubic"
        } else {
            "reno"
        }
    }
}

impl Netns {
    fn create(tag: &str) -> Netns {
        let name = format!("{PREFIX}{tag}{}", std::process::id());
        run(&["ip", "netns", "add", &name]);
        let mut ns = Netns(name, String::new());
        run(&["ip", "-n", &ns.0, "link", "set", "lo", "up"]);
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &ns.0,
                "cat",
                "/proc/sys/net/ipv4/tcp_congestion_control",
            ])
            .output()
            .unwrap();
        ns.1 = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(!ns.1.is_empty(), "reading the namespace default");
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

fn run(argv: &[&str]) {
    let out = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Connects to `port` inside `ns` over loopback; returns the CC of the client socket and
/// of the accepted socket.
fn connect_pair(ns: &str, port: u16) -> (String, String) {
    spawn_in_netns(ns, move || {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("listen");
        let c = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
        let (a, _) = l.accept().expect("accept");
        (cc_of(c.as_raw_fd()), cc_of(a.as_raw_fd()))
    })
    .unwrap()
    .join()
    .unwrap()
    .unwrap()
}

/// Removes the rules the tests add (ports and `cctl-po-*` cgroups) on drop.
struct RuleGuard;

impl Drop for RuleGuard {
    fn drop(&mut self) {
        remove_test_rules();
    }
}

fn is_test_rule(r: &Rule) -> bool {
    match &r.target {
        Target::Port { port } => [PORT, OTHER_PORT, GONE_PORT].contains(port),
        Target::Cgroup { path, .. } => path.to_string_lossy().contains(PREFIX),
    }
}

fn remove_test_rules() {
    for r in policy::list().unwrap_or_default() {
        if is_test_rule(&r) {
            let spec = match &r.target {
                Target::Port { port } => RuleSpec::Port((*port).into()),
                Target::Cgroup { path, .. } => RuleSpec::Cgroup(path.clone()),
            };
            let _ = policy::remove(&spec);
        }
    }
}

/// A cgroup v2 directory (with `children` nested inside it), removed on drop.
struct Cgroup {
    dirs: Vec<PathBuf>,
}

impl Cgroup {
    fn create(tag: &str, children: &[&str]) -> Cgroup {
        let root = policy::cgroup2_mount().expect("cgroup v2 is mounted");
        let top = root.join(format!("{PREFIX}{tag}{}", std::process::id()));
        let mut dirs = vec![top.clone()];
        let mut at = top;
        for c in children {
            at = at.join(c);
            dirs.push(at.clone());
        }
        let cg = Cgroup { dirs };
        std::fs::create_dir_all(cg.dirs.last().unwrap()).expect("creating cgroup");
        cg
    }

    fn path(&self, depth: usize) -> &Path {
        &self.dirs[depth]
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for d in self.dirs.iter().rev() {
            remove_cgroup(d);
        }
    }
}

/// rmdir, retried while exiting tasks still hold the cgroup.
fn remove_cgroup(d: &Path) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while d.exists() && std::fs::remove_dir(d).is_err() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn remove_leftover_cgroups() {
    let Ok(root) = policy::cgroup2_mount() else {
        return;
    };
    fn walk(d: &Path) {
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                if e.path().is_dir() {
                    walk(&e.path());
                }
            }
        }
        remove_cgroup(d);
    }
    for e in std::fs::read_dir(&root).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with(PREFIX) {
            walk(&e.path());
        }
    }
}

fn setup() -> RuleGuard {
    require_root();
    clean_slate(PREFIX, &[BPF_CC, BPF_CC2]);
    remove_test_rules();
    remove_leftover_cgroups();
    RuleGuard
}

/// A process in cgroup `cg` and namespace `ns` that opens a connection to `port` and keeps
/// it (fd 3) until its stdin closes; killed on drop.
struct Connector {
    child: Child,
}

impl Connector {
    fn start(cg: &Path, ns: &str, port: u16) -> Connector {
        let script = format!(
            "echo $$ > '{}/cgroup.procs' && exec ip netns exec {ns} bash -c \
             'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected && read _'",
            cg.display()
        );
        let mut child = Command::new("bash")
            .args(["-c", &script])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawning bash");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            "connected",
            "the connector in {} failed",
            cg.display()
        );
        Connector { child }
    }

    /// The CC of the connector's socket, read through a duplicate of its fd 3
    /// (pidfd_getfd; `ip netns exec` execs in place, so the pid is the shell's).
    fn cc(&self) -> String {
        // SAFETY: plain system calls; the returned fds are owned and closed here.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.child.id(), 0) };
        assert!(
            pidfd >= 0,
            "pidfd_open: {}",
            std::io::Error::last_os_error()
        );
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), 3, 0) };
        assert!(fd >= 0, "pidfd_getfd: {}", std::io::Error::last_os_error());
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        cc_of(fd.as_raw_fd())
    }
}

impl Drop for Connector {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.write_all(b"\n");
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A listener in `ns` on `port` that accepts (and keeps) connections until dropped.
struct Server {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    fn start(ns: &str, port: u16) -> Server {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = spawn_in_netns(ns, move || {
            let l = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).unwrap();
            l.set_nonblocking(true).unwrap();
            tx.send(()).unwrap();
            let mut kept = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((s, _)) => kept.push(s),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        })
        .unwrap();
        rx.recv_timeout(Duration::from_secs(5))
            .expect("listener up");
        Server {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Pins and attachments of the policy: what must be gone when no rule is left.
fn policy_leftovers() -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(policy::PIN_DIR) {
        out.extend(rd.flatten().map(|e| e.path().display().to_string()));
    }
    let links = Command::new("bpftool")
        .args(["-j", "link", "show"])
        .output()
        .unwrap();
    let progs = Command::new("bpftool")
        .args(["-j", "prog", "show"])
        .output()
        .unwrap();
    let progs: serde_json::Value = serde_json::from_slice(&progs.stdout).unwrap();
    let ours: Vec<u64> = progs
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["name"] == "cctl_policy")
        .filter_map(|p| p["id"].as_u64())
        .collect();
    let links: serde_json::Value = serde_json::from_slice(&links.stdout).unwrap();
    for l in links.as_array().unwrap() {
        if l["prog_id"].as_u64().is_some_and(|id| ours.contains(&id)) {
            out.push(format!("link {l}"));
        }
    }
    for id in ours {
        out.push(format!("prog {id} (cctl_policy) still loaded"));
    }
    out
}

fn rule_for(target_port: u16) -> Option<Rule> {
    policy::list()
        .unwrap()
        .into_iter()
        .find(|r| r.target == Target::Port { port: target_port })
}

/// Loads cctl's reno as `name`, unloaded when the guard drops.
fn load_bpf(name: &str) -> LoadGuard {
    let opts = LoadOptions {
        name: Some(name.into()),
        owned: true,
        ..Default::default()
    };
    LoadGuard::new(registry::load("reno", &opts).expect("loading reno").name)
}

fn pair(cc: &str) -> (String, String) {
    (cc.to_string(), cc.to_string())
}

#[test]
fn a_port_rule_gives_new_connections_to_that_port_its_cc_on_both_ends_and_no_others() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let _rules = setup();
    assert!(policy_leftovers().is_empty(), "{:?}", policy_leftovers());
    let ns = Netns::create("port");
    let (default, cc) = (ns.1.clone(), ns.other_cc());
    let _bpf = load_bpf(BPF_CC);

    assert_eq!(
        connect_pair(&ns.0, PORT),
        pair(&default),
        "before the rule the namespace default applies"
    );

    let added = policy::add(&RuleSpec::Port(PORT.into()), cc).expect("adding the rule");
    assert_eq!(added.replaced, None);
    assert_eq!(
        connect_pair(&ns.0, PORT),
        pair(cc),
        "client (remote port) and accepted (local port) sockets get the rule's CC"
    );
    assert_eq!(
        connect_pair(&ns.0, OTHER_PORT),
        pair(&default),
        "another port keeps the namespace default"
    );
    let r = rule_for(PORT).expect("the rule is listed");
    assert_eq!(r.cc, cc);
    assert!(r.attached && r.cc_registered);
    assert_eq!((r.applied, r.kept, r.failed), (2, 0, 0), "{r:?}");

    // An application's own choice (here: the default, explicitly) wins: kept, not changed.
    let explicit = default.clone();
    let app_choice = spawn_in_netns(&ns.0, move || {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, PORT)).unwrap();
        let s = socket_with_cc(&explicit);
        connect_raw(&s, PORT);
        let (_a, _) = l.accept().unwrap();
        cc_of(s.as_raw_fd())
    })
    .unwrap()
    .join()
    .unwrap()
    .unwrap();
    assert_eq!(app_choice, default);
    assert_eq!(rule_for(PORT).unwrap().kept, 1);

    // Adding again replaces the rule, for new connections at once.
    let again = policy::add(&RuleSpec::Port(PORT.into()), BPF_CC).expect("replacing the rule");
    assert_eq!(again.replaced.as_deref(), Some(cc));
    assert_eq!(connect_pair(&ns.0, PORT), pair(BPF_CC));
    assert_eq!(policy::rules_using(BPF_CC).unwrap().len(), 1);

    let removed = policy::remove(&RuleSpec::Port(PORT.into())).expect("removing the rule");
    assert_eq!(removed.cc, BPF_CC);
    assert_eq!(
        connect_pair(&ns.0, PORT),
        pair(&default),
        "after removal the namespace default applies again"
    );
    assert!(
        policy_leftovers().is_empty(),
        "the last rule gone, nothing may stay: {:?}",
        policy_leftovers()
    );
    assert!(policy::rules_using(BPF_CC).unwrap().is_empty());
}

/// A TCP socket whose application set `cc` itself.
fn socket_with_cc(cc: &str) -> OwnedFd {
    // SAFETY: plain system calls on a socket this function owns.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        assert!(fd >= 0);
        let rc = libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        );
        assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
        OwnedFd::from_raw_fd(fd)
    }
}

fn connect_raw(s: &OwnedFd, port: u16) {
    let addr = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: addr is a valid sockaddr_in of the size given.
    let rc = unsafe {
        libc::connect(
            s.as_raw_fd(),
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "connect: {}", std::io::Error::last_os_error());
}

#[test]
fn cgroup_rules_apply_to_their_subtree_the_deepest_wins_and_cgroup_rules_beat_port_rules() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let _rules = setup();
    let ns = Netns::create("cg");
    let (default, cc) = (ns.1.clone(), ns.other_cc());
    let _bpf = load_bpf(BPF_CC);
    let _bpf2 = load_bpf(BPF_CC2);
    let cg = Cgroup::create("cg", &["inner"]);
    let (outer, inner) = (cg.path(0).to_path_buf(), cg.path(1).to_path_buf());
    let root = policy::cgroup2_mount().unwrap();
    let _server = Server::start(&ns.0, PORT);
    let _server2 = Server::start(&ns.0, OTHER_PORT);

    policy::add(&RuleSpec::Port(PORT.into()), cc).unwrap();
    // Given relative to the cgroup2 mount, as /proc/PID/cgroup shows it.
    let rel = PathBuf::from("/").join(outer.strip_prefix(&root).unwrap());
    policy::add(&RuleSpec::Cgroup(rel), BPF_CC2).unwrap();
    policy::add(&RuleSpec::Cgroup(inner.clone()), BPF_CC).unwrap();

    let uses = policy::rules_using(BPF_CC).unwrap();
    assert_eq!(uses.len(), 1, "{uses:?}");
    assert!(matches!(&uses[0].target, Target::Cgroup { path, .. } if *path == inner));

    // The test process's own cgroup has no rule: the port rule applies.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let own = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("on cgroup v2");
    let own = root.join(own.trim_start_matches('/'));
    assert_eq!(Connector::start(&own, &ns.0, PORT).cc(), cc);
    assert_eq!(Connector::start(&own, &ns.0, OTHER_PORT).cc(), default);
    // A cgroup rule beats the port rule ...
    assert_eq!(Connector::start(&outer, &ns.0, PORT).cc(), BPF_CC2);
    // ... applies to any port ...
    assert_eq!(Connector::start(&outer, &ns.0, OTHER_PORT).cc(), BPF_CC2);
    // ... and the deepest cgroup rule wins over its ancestor's.
    assert_eq!(Connector::start(&inner, &ns.0, PORT).cc(), BPF_CC);
    assert_eq!(Connector::start(&inner, &ns.0, OTHER_PORT).cc(), BPF_CC);

    let rules = policy::list().unwrap();
    let find = |p: &Path| {
        rules
            .iter()
            .find(|r| matches!(&r.target, Target::Cgroup { path, .. } if path == p))
            .cloned()
            .unwrap()
    };
    let (inner_rule, outer_rule) = (find(&inner), find(&outer));
    assert_eq!(
        (inner_rule.applied, inner_rule.kept),
        (2, 0),
        "{inner_rule:?}"
    );
    assert_eq!(
        (outer_rule.applied, outer_rule.kept),
        (2, 2),
        "the inner rule chose first for the inner cgroup: {outer_rule:?}"
    );

    // Removing the inner rule hands its subtree to the outer one, and so on up.
    policy::remove(&RuleSpec::Cgroup(inner.clone())).unwrap();
    assert_eq!(Connector::start(&inner, &ns.0, PORT).cc(), BPF_CC2);
    policy::remove(&RuleSpec::Cgroup(outer.clone())).unwrap();
    assert_eq!(Connector::start(&inner, &ns.0, PORT).cc(), cc);
    policy::remove(&RuleSpec::Port(PORT.into())).unwrap();
    assert_eq!(Connector::start(&inner, &ns.0, PORT).cc(), default);
    assert!(policy_leftovers().is_empty(), "{:?}", policy_leftovers());
}

#[test]
fn a_rule_whose_cc_is_unloaded_leaves_connections_on_the_default_and_counts_the_failure() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let _rules = setup();
    let ns = Netns::create("gone");
    let guard = load_bpf(BPF_CC);
    policy::add(&RuleSpec::Port(GONE_PORT.into()), BPF_CC).unwrap();
    assert_eq!(connect_pair(&ns.0, GONE_PORT), pair(BPF_CC));
    // Unregister it behind the policy's back (as another tool or a crash would).
    drop(guard);
    assert!(!available().contains(&BPF_CC.to_string()));

    assert_eq!(
        connect_pair(&ns.0, GONE_PORT),
        pair(&ns.1),
        "with its CC gone the rule changes nothing"
    );
    let r = rule_for(GONE_PORT).unwrap();
    assert!(!r.cc_registered, "{r:?}");
    assert_eq!(r.applied, 2, "{r:?}");
    assert_eq!(r.failed, 2, "client and accepted socket: {r:?}");
    assert!(
        r.last_error
            .as_deref()
            .is_some_and(|e| e.starts_with("ENOENT")),
        "{r:?}"
    );
    policy::remove(&RuleSpec::Port(GONE_PORT.into())).unwrap();
    assert!(policy_leftovers().is_empty(), "{:?}", policy_leftovers());
}

/// Rules and pins, to compare before and after a refused command.
fn snapshot() -> (Vec<String>, Vec<String>) {
    let rules = policy::list()
        .unwrap()
        .iter()
        .map(|r| format!("{} {}", r.target, r.cc))
        .collect();
    let mut pins: Vec<String> = std::fs::read_dir(policy::PIN_DIR)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path().display().to_string())
                .collect()
        })
        .unwrap_or_default();
    pins.sort();
    (rules, pins)
}

#[test]
fn bad_input_is_refused_with_a_clear_message_and_changes_nothing() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let _rules = setup();
    let root = policy::cgroup2_mount().unwrap();

    for with_a_rule in [false, true] {
        if with_a_rule {
            policy::add(&RuleSpec::Port(PORT.into()), "reno").unwrap();
        }
        let before = snapshot();
        let cases: Vec<(Result<String, Error>, &str)> = vec![
            (
                policy::add(&RuleSpec::Port(OTHER_PORT.into()), "po_nosuch").map(|a| a.cc),
                "'po_nosuch' is not registered in the kernel; registered: ",
            ),
            (
                policy::add(&RuleSpec::Port(0), "reno").map(|a| a.cc),
                "port 0 is out of range; ports are 1-65535",
            ),
            (
                policy::add(&RuleSpec::Port(70000), "reno").map(|a| a.cc),
                "port 70000 is out of range; ports are 1-65535",
            ),
            (
                policy::add(&RuleSpec::Cgroup(root.join("cctl-po-missing")), "reno").map(|a| a.cc),
                "does not exist",
            ),
            (
                policy::add(&RuleSpec::Cgroup(root.clone()), "reno").map(|a| a.cc),
                "root cgroup",
            ),
            (
                policy::remove(&RuleSpec::Port(OTHER_PORT.into())).map(|r| r.cc),
                "no policy rule for port 47102",
            ),
            (
                policy::remove(&RuleSpec::Cgroup("cctl-po-missing".into())).map(|r| r.cc),
                "no policy rule for cgroup cctl-po-missing",
            ),
        ];
        for (res, expected) in cases {
            let msg = res.expect_err(expected).to_string();
            assert!(msg.contains(expected), "'{msg}' lacks '{expected}'");
            if msg.contains("registered: ") {
                assert!(
                    msg.contains("reno"),
                    "the error lists what is registered: {msg}"
                );
            }
            if msg.starts_with("no policy rule") {
                let listed = if with_a_rule {
                    "port 47101 → reno"
                } else {
                    "there are no policy rules"
                };
                assert!(msg.contains(listed), "the error lists the rules: {msg}");
            }
            assert_eq!(
                snapshot(),
                before,
                "a refused command changed something: {msg}"
            );
        }
    }
    policy::remove(&RuleSpec::Port(PORT.into())).unwrap();
    assert!(policy_leftovers().is_empty(), "{:?}", policy_leftovers());
}

/// A stale pin does not fool `policy add` (issue 29): the port rule's pinned link is cut
/// with `bpftool link detach` (the pin stays, the program no longer runs). `policy list`
/// shows the rule as not attached, and adding the rule again replaces the dead link, so
/// that new connections get the rule's CC again.
#[test]
fn a_stale_link_pin_is_replaced_not_trusted() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    let _rules = setup();
    let ns = Netns::create("stale");
    let (default, cc) = (ns.1.clone(), ns.other_cc());
    policy::add(&RuleSpec::Port(PORT.into()), cc).expect("adding the rule");
    assert_eq!(connect_pair(&ns.0, PORT), pair(cc));

    let link = "/sys/fs/bpf/cctl-policy/port_link";
    run(&["bpftool", "link", "detach", "pinned", link]);
    assert!(Path::new(link).exists(), "bpftool leaves the pin");
    assert_eq!(
        connect_pair(&ns.0, PORT),
        pair(&default),
        "the detached program no longer chooses"
    );
    let r = rule_for(PORT).expect("the rule is still in the map");
    assert!(!r.attached, "a detached link is not attached: {r:?}");

    let again = policy::add(&RuleSpec::Port(PORT.into()), cc).expect("adding it again");
    assert_eq!(
        again.replaced, None,
        "the dead rule was not replaced in place"
    );
    assert!(rule_for(PORT).unwrap().attached);
    assert_eq!(
        connect_pair(&ns.0, PORT),
        pair(cc),
        "the new link chooses again"
    );
    policy::remove(&RuleSpec::Port(PORT.into())).expect("removing the rule");
    assert!(policy_leftovers().is_empty(), "{:?}", policy_leftovers());
}
