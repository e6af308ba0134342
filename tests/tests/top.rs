//! `cctl top` end to end: the real binary in tmux against real flows on veth, read back
//! from the screen; a migration from the dashboard; the terminal restored on q, Ctrl-C,
//! SIGTERM and panic; the refusal without a terminal.
//!
//! The tests run the debug `cctl` next to this test binary (`target/debug/cctl`, built by
//! `cargo test --workspace` / `make test`; with `-p cctl-tests` alone, run
//! `cargo build -p cctl` first): its F12 key panics on purpose (debug builds only).

use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use cctl_loader::migrate::{self, SocketFilter};
use cctl_netem::netns::spawn_in_netns;
use cctl_netem::testbed::{PathSpec, Testbed};
use cctl_tests::tmux::Tmux;
use cctl_tests::{cctl_bin, clean_slate, load_owned, require_root, KERNEL};
use socket2::{Domain, Socket, Type};

const PREFIX: &str = "cctl-tb-";
const RENO: &str = "bpf_reno";
const HTCP: &str = "bpf_htcp";
/// The receivers' ports of flow 1 and flow 2.
const PORT1: u16 = 5461;
const PORT2: u16 = 5462;
/// What the accepted (receiving) ends run, so that their rows differ from the senders'.
const RECEIVER_CC: &str = "cubic";
/// Terminal size of every session, columns x lines.
const WIDTH: u16 = 200;
const HEIGHT: u16 = 50;
/// Generous bounds for things that take well under a second on an idle machine (a noisy
/// shared 2-core box can be much slower; a bound only turns a hang into a clear failure).
const SHORT: Duration = Duration::from_secs(20);

/// Starts `cctl top args...` in a 200x50 tmux session.
fn top(args: &[&str]) -> Tmux {
    let bin = cctl_bin();
    let mut cmd = vec![bin.to_str().unwrap(), "top"];
    cmd.extend_from_slice(args);
    Tmux::start_reporting(PREFIX, &cmd, WIDTH, HEIGHT).expect("tmux session")
}

/// Whether the dashboard is up: its title line with the flow count.
fn dashboard_up(screen: &str) -> bool {
    screen
        .lines()
        .next()
        .is_some_and(|l| l.contains("cctl top") && l.contains("flows"))
}

/// The `a.b.c.d:port` addresses in `line`, left to right.
fn addrs(line: &str) -> Vec<SocketAddrV4> {
    line.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ':'))
        .filter_map(|t| t.parse().ok())
        .collect()
}

/// Whether `line` shows congestion control `cc`, bare or with its version (`bpf_reno@v1`).
fn shows_cc(line: &str, cc: &str) -> bool {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '@' || c == '.'))
        .any(|t| t == cc || t.strip_prefix(cc).is_some_and(|v| v.starts_with('@')))
}

/// The flow table's rows: the lines after its header (`Local ... Remote ... cwnd`) that
/// show an address, up to the first that does not.
fn table_rows(screen: &str) -> Vec<&str> {
    screen
        .lines()
        .skip_while(|l| !(l.contains("Local") && l.contains("Remote") && l.contains("cwnd")))
        .skip(1)
        .take_while(|l| !addrs(l).is_empty())
        .collect()
}

/// The table row of the connection whose local end is `local` (its first address).
fn row_of(screen: &str, local: SocketAddrV4) -> Option<&str> {
    table_rows(screen)
        .into_iter()
        .find(|r| addrs(r).first() == Some(&local))
}

/// Bulk flows from the testbed's sender to its receiver, one per receiver port, the
/// senders running `cc`; stopped and joined on drop.
struct BulkFlows {
    /// The senders' local ends, in the order of the ports.
    locals: Vec<SocketAddrV4>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl BulkFlows {
    fn start(bed: &Testbed, ports: &[u16], cc: &str) -> BulkFlows {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let ports_v = ports.to_vec();
        let listeners = spawn_in_netns(bed.receiver_ns(), move || {
            ports_v
                .iter()
                .map(|p| {
                    let l = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                    l.set_reuse_address(true)?;
                    // Accepted sockets inherit the listener's congestion control.
                    l.set_tcp_congestion(RECEIVER_CC.as_bytes())?;
                    l.bind(&SocketAddr::from(([0, 0, 0, 0], *p)).into())?;
                    l.listen(8)?;
                    Ok(TcpListener::from(l))
                })
                .collect::<std::io::Result<Vec<TcpListener>>>()
        })
        .unwrap()
        .join()
        .unwrap()
        .unwrap()
        .expect("listeners in the receiver namespace");
        for l in listeners {
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                let (mut s, _) = l.accept().expect("accept");
                s.set_read_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(_) if !stop.load(Ordering::Relaxed) => {}
                        Err(_) => break,
                    }
                }
            }));
        }
        let dst = bed.receiver_addr();
        let (ports_v, cc_v) = (ports.to_vec(), cc.to_string());
        let streams = spawn_in_netns(bed.sender_ns(), move || {
            ports_v
                .iter()
                .map(|p| {
                    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                    s.set_tcp_congestion(cc_v.as_bytes())?;
                    let to = SocketAddr::V4(SocketAddrV4::new(dst, *p));
                    s.connect_timeout(&to.into(), Duration::from_secs(5))?;
                    Ok(TcpStream::from(s))
                })
                .collect::<std::io::Result<Vec<TcpStream>>>()
        })
        .unwrap()
        .join()
        .unwrap()
        .unwrap()
        .expect("connections from the sender namespace");
        let mut locals = Vec::new();
        for mut s in streams {
            match s.local_addr().unwrap() {
                SocketAddr::V4(a) => locals.push(a),
                other => panic!("IPv4 flow with local address {other}"),
            }
            s.set_write_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                let chunk = vec![0x5au8; 64 * 1024];
                while !stop.load(Ordering::Relaxed) {
                    match s.write(&chunk) {
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.kind(),
                                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                            ) => {}
                        Err(e) => panic!("sender failed: {e}"),
                    }
                }
                let _ = s.shutdown(std::net::Shutdown::Both);
            }));
        }
        BulkFlows {
            locals,
            stop,
            threads,
        }
    }
}

impl Drop for BulkFlows {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The congestion control of the established sender socket towards `port`, from the
/// loader's socket iterator in namespace `ns`.
fn sender_cc(ns: &str, port: u16) -> String {
    let socks = migrate::sockets(&SocketFilter {
        netns: Some(ns.into()),
        port: Some(port),
        ..Default::default()
    })
    .expect("listing sockets");
    let senders: Vec<_> = socks
        .iter()
        .filter(|s| s.state == "ESTABLISHED" && s.dport == port)
        .collect();
    assert_eq!(senders.len(), 1, "one sender towards {port}: {socks:?}");
    senders[0].cc.clone()
}

#[test]
fn top_shows_real_veth_flows_and_migrates_one_from_the_dashboard() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate(PREFIX, &[RENO, HTCP]);
    let _reno = load_owned("reno");
    let _htcp = load_owned("htcp");
    let mut spec = PathSpec::new("cctl-tb-e", 100, 1000);
    spec.subnet_octet = 213;
    let bed = Testbed::create(&spec).expect("testbed");
    let flows = BulkFlows::start(&bed, &[PORT1, PORT2], RENO);
    let (flow1, flow2) = (flows.locals[0], flows.locals[1]);

    // The flows live in the testbed's sender namespace, where the loader moves flows only
    // to an allowed (non-restricted) congestion control unless told otherwise.
    let t = top(&["--allow-restricted"]);
    t.wait_for("the dashboard", SHORT, dashboard_up);
    assert!(
        t.alternate_on().unwrap(),
        "top runs in the alternate screen"
    );
    // Both flows (and their receiving ends), on the testbed's receiver address only, so
    // that other flows on this machine do not push them off the screen.
    t.keys(&["/"]).unwrap();
    t.type_text(&format!("addr:{}", bed.receiver_addr()))
        .unwrap();
    t.keys(&["Enter"]).unwrap();
    let screen = t.wait_for("both flows with bpf_reno in the flow table", SHORT, |s| {
        [flow1, flow2]
            .iter()
            .all(|f| row_of(s, *f).is_some_and(|r| shows_cc(r, RENO)))
    });
    for port in [PORT1, PORT2] {
        let receiver = SocketAddrV4::new(bed.receiver_addr(), port);
        assert!(
            row_of(&screen, receiver).is_some_and(|r| shows_cc(r, RECEIVER_CC)),
            "the receiving end {receiver} runs {RECEIVER_CC}:\n{screen}"
        );
    }
    let header = screen
        .lines()
        .find(|l| l.contains("Local") && l.contains("Remote"))
        .unwrap();
    for col in [
        "CC", "State", "cwnd", "ssthresh", "srtt", "rttvar", "Mbit/s", "retrans",
    ] {
        assert!(header.contains(col), "column {col} missing: {header}");
    }
    assert!(
        row_of(&screen, flow1).is_some_and(|r| r.contains("Open") || r.contains("Recovery")),
        "flow 1's row shows its CA state:\n{screen}"
    );

    // Only flow 1's connection (its sender and receiver rows), then select the sender row.
    // The prompt starts with the current filter: erase it.
    t.keys(&["/"]).unwrap();
    let current = format!("addr:{}", bed.receiver_addr());
    for _ in 0..current.len() {
        t.keys(&["BSpace"]).unwrap();
    }
    t.type_text(&format!("port:{PORT1}")).unwrap();
    t.keys(&["Enter"]).unwrap();
    let screen = t.wait_for("flow 1 alone", SHORT, |s| {
        let rows = table_rows(s);
        rows.len() == 2
            && row_of(s, flow1).is_some()
            && row_of(s, flow2).is_none()
            && s.lines().next().is_some_and(|l| l.contains("2/"))
    });
    // The sender row is selected when the Migrate dialog names its local end.
    let rows = table_rows(&screen).len();
    let label = flow1.to_string();
    let mut chosen = false;
    for index in 0..rows {
        t.keys(&["Home"]).unwrap();
        for _ in 0..index {
            t.keys(&["Down"]).unwrap();
        }
        t.keys(&["m"]).unwrap();
        let dialog = t.wait_for("the Migrate dialog", SHORT, |s| s.contains(" Migrate "));
        if dialog.contains(&format!("Move flow {label}")) {
            chosen = true;
            break;
        }
        t.keys(&["Escape"]).unwrap();
        t.wait_for("the dialog to close", SHORT, |s| !s.contains(" Migrate "));
    }
    assert!(
        chosen,
        "no row of the table selects flow 1 ({label}) for migration"
    );
    t.type_text(HTCP).unwrap();
    t.keys(&["Enter"]).unwrap();
    let confirm = t.wait_for("the confirmation", SHORT, |s| s.contains("[y/N]"));
    assert!(
        confirm.contains(&format!("Move flow {label}")) && confirm.contains(&format!("to {HTCP}?")),
        "the confirmation names flow 1 and bpf_htcp:\n{confirm}"
    );
    t.keys(&["y"]).unwrap();
    let screen = t.wait_for("the migration's result", SHORT, |s| {
        s.contains("migrated: moved 1") || s.contains("migrate failed")
    });
    assert!(
        screen.contains("migrated: moved 1 of 1"),
        "the migration failed:\n{screen}"
    );

    // The kernel agrees: flow 1 on bpf_htcp, flow 2 still on bpf_reno.
    assert_eq!(sender_cc(bed.sender_ns(), PORT1), HTCP);
    assert_eq!(sender_cc(bed.sender_ns(), PORT2), RENO);
    t.wait_for("bpf_htcp on flow 1's row", SHORT, |s| {
        row_of(s, flow1).is_some_and(|r| shows_cc(r, HTCP))
    });

    t.keys(&["q"]).unwrap();
    assert_eq!(t.wait_exit(SHORT), 0, "q exits with status 0");
    assert!(!t.alternate_on().unwrap(), "q leaves the alternate screen");
    assert!(t.cursor_visible().unwrap(), "q shows the cursor again");
    assert!(t.tty_cooked().unwrap(), "q turns raw mode off");
    drop(t);
    drop(flows);
    bed.destroy().expect("testbed removed");
}

#[test]
fn top_restores_the_terminal_on_ctrl_c_and_on_panic() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();

    // Ctrl-C, a key in raw mode.
    let t = top(&[]);
    t.wait_for("the dashboard", SHORT, dashboard_up);
    assert!(
        t.alternate_on().unwrap(),
        "top runs in the alternate screen"
    );
    assert!(!t.tty_cooked().unwrap(), "top runs in raw mode");
    assert!(!t.cursor_visible().unwrap(), "top hides the cursor");
    t.keys(&["C-c"]).unwrap();
    assert_eq!(t.wait_exit(SHORT), 130, "Ctrl-C exits with status 130");
    assert!(
        !t.alternate_on().unwrap(),
        "Ctrl-C leaves the alternate screen"
    );
    assert!(t.cursor_visible().unwrap(), "Ctrl-C shows the cursor again");
    assert!(t.tty_cooked().unwrap(), "Ctrl-C turns raw mode off");
    drop(t);

    // SIGTERM, as from `kill`.
    let t = top(&[]);
    t.wait_for("the dashboard", SHORT, dashboard_up);
    let pid = nix::unistd::Pid::from_raw(t.command_pid().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    assert_eq!(t.wait_exit(SHORT), 130, "SIGTERM exits with status 130");
    assert!(
        !t.alternate_on().unwrap(),
        "SIGTERM leaves the alternate screen"
    );
    assert!(
        t.cursor_visible().unwrap(),
        "SIGTERM shows the cursor again"
    );
    assert!(t.tty_cooked().unwrap(), "SIGTERM turns raw mode off");
    drop(t);

    // A panic (F12 in debug builds).
    let t = top(&[]);
    t.wait_for("the dashboard", SHORT, dashboard_up);
    t.keys(&["F12"]).unwrap();
    assert_eq!(t.wait_exit(SHORT), 101, "a panic exits with status 101");
    assert!(
        !t.alternate_on().unwrap(),
        "a panic leaves the alternate screen"
    );
    assert!(
        t.cursor_visible().unwrap(),
        "a panic shows the cursor again"
    );
    assert!(t.tty_cooked().unwrap(), "a panic turns raw mode off");
    let after = t.transcript(HEIGHT.into()).unwrap();
    assert!(
        after.contains("panicked"),
        "the panic message is on the screen after exit:\n{after}"
    );
}

#[test]
fn top_without_a_terminal_refuses_and_points_to_trace_json() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let out = Command::new(cctl_bin())
        .arg("top")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("running cctl top");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(err.contains("needs a terminal"), "{err}");
    assert!(err.contains("cctl trace --json"), "{err}");
    assert!(out.stdout.is_empty(), "nothing on stdout");

    // A terminal on stdin but not on stdout (`cctl top | less`) is refused the same way.
    let bin = cctl_bin();
    let script = format!(
        "'{}' top > /dev/null; echo \"exit=$?\"; sleep 30",
        bin.display()
    );
    let t = Tmux::start(PREFIX, &["sh", "-c", &script], WIDTH, HEIGHT).unwrap();
    let screen = t.wait_for("cctl top to exit", SHORT, |s| s.contains("exit="));
    assert!(screen.contains("exit=2"), "{screen}");
    assert!(screen.contains("cctl trace --json"), "{screen}");
}
