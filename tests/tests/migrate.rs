//! Moving established flows (`cctl migrate`, `cctl unload --migrate-to`) on the running
//! kernel: 200 data-carrying cubic connections through a tbf bottleneck move to bpf_htcp
//! without a reset or a lost byte, and bad input changes nothing; one socket moves by its
//! cookie, and `--all-netns` moves flows in several namespaces at once or nothing at all
//! (those tests use the prefix `cctl-ta-` and the names bpf_cubic and bpf_vegas).
//!
//! The tests run the real `cctl` binary next to this test binary (`target/<profile>/cctl`,
//! built by `cargo test --workspace` / `make test`; with `-p cctl-tests` alone, run
//! `cargo build -p cctl` first).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::migrate::{self, SocketFilter, SocketInfo};
use cctl_loader::registry::LoadGuard;
use cctl_netem::netns::spawn_in_netns;
use cctl_netem::testbed::{PathSpec, Testbed};
use cctl_tests::sockets::{clients, idle_pairs, idle_pairs_here, Netns};
use cctl_tests::{cctl_bin, clean_slate, load_owned, require_root, KERNEL};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use socket2::{Domain, Socket, Type};

const PREFIX: &str = "cctl-ma-";
const HTCP: &str = "bpf_htcp";
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

fn cctl(args: &[&str]) -> Output {
    Command::new(cctl_bin())
        .args(args)
        .output()
        .expect("running cctl")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Puts `name` into tcp_allowed_congestion_control (global) and restores the old list on
/// drop. A crash leaves nothing behind for long: the kernel drops a name from the list
/// when it is unregistered, and clean_slate unloads bpf_htcp.
struct AllowGuard(String);

impl AllowGuard {
    fn allow(name: &str) -> AllowGuard {
        let old = std::fs::read_to_string(ALLOWED).unwrap().trim().to_string();
        std::fs::write(ALLOWED, format!("{old} {name}")).expect("extending the allowed list");
        AllowGuard(old)
    }
}

impl Drop for AllowGuard {
    fn drop(&mut self) {
        let _ = std::fs::write(ALLOWED, &self.0);
    }
}

/// Loads bpf_htcp for this test; the guard unloads it, also when the test fails.
fn load_htcp() -> LoadGuard {
    load_owned("htcp")
}

fn census(ns: &str) -> Vec<SocketInfo> {
    let mut v = migrate::sockets(&SocketFilter {
        netns: Some(ns.into()),
        ..Default::default()
    })
    .expect("census");
    v.sort_by_key(|s| s.cookie);
    v
}

fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap();
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// What one sender wrote: its local port, bytes and CRC-32 of the stream.
struct Sent {
    port: u16,
    bytes: u64,
    crc: u32,
    error: Option<String>,
}

/// What the receiver got on one connection, keyed by the peer's port.
struct Received {
    bytes: u64,
    crc: u32,
    error: Option<String>,
}

#[test]
fn two_hundred_busy_cubic_flows_move_to_bpf_htcp_without_a_reset_or_a_lost_byte() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate(PREFIX, &[HTCP]);
    const FLOWS: usize = 200;
    const PORT: u16 = 5411;
    const CHUNK: usize = 16 * 1024;

    let guard = load_htcp();
    // The documented way to let a non-initial namespace's flows run a restricted CC.
    let _allow = AllowGuard::allow(HTCP);

    // 300 Mbit/s: 200 flows saturate it without saturating two shared cores; a queue of
    // 2000 packets (80 ms) keeps losses rare enough that no flow sits in a retransmission
    // timeout (and so without ACKs, hence without samples) for a whole second.
    let mut spec = PathSpec::new("cctl-ma-t", 300, 2000);
    spec.subnet_octet = 41;
    let bed = Testbed::create(&spec).expect("testbed");
    let mut trace = Trace::start(TraceConfig {
        interval: Duration::from_millis(50),
        port: Some(PORT),
        cc: None,
        netns_cookie: None,
    })
    .expect("collector attaches");

    // Receiver: one thread per accepted connection, counting and checksumming.
    let rx_bytes: Arc<Vec<AtomicU64>> = Arc::new((0..FLOWS).map(|_| AtomicU64::new(0)).collect());
    let listener = spawn_in_netns(bed.receiver_ns(), move || {
        TcpListener::bind(("0.0.0.0", PORT))
    })
    .unwrap()
    .join()
    .unwrap()
    .unwrap()
    .expect("listener");
    let counters = rx_bytes.clone();
    let acceptor = std::thread::spawn(move || {
        let mut readers = Vec::new();
        for i in 0..FLOWS {
            let (mut s, peer) = listener.accept().expect("accept");
            let counters = counters.clone();
            readers.push(std::thread::spawn(move || {
                let mut h = crc32fast::Hasher::new();
                let mut buf = vec![0u8; 64 * 1024];
                let mut error = None;
                loop {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            h.update(&buf[..n]);
                            counters[i].fetch_add(n as u64, Ordering::Relaxed);
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            error = Some(e.to_string());
                            break;
                        }
                    }
                }
                (
                    peer.port(),
                    Received {
                        bytes: counters[i].load(Ordering::Relaxed),
                        crc: h.finalize(),
                        error,
                    },
                )
            }));
        }
        readers
            .into_iter()
            .map(|r| r.join().unwrap())
            .collect::<BTreeMap<u16, Received>>()
    });

    // Senders: sockets made in the sender namespace with cubic, then one writer thread each,
    // writing a ChaCha8 stream seeded with the flow's index.
    let dst = SocketAddrV4::new(bed.receiver_addr(), PORT);
    let streams = spawn_in_netns(bed.sender_ns(), move || {
        (0..FLOWS)
            .map(|_| {
                let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                s.set_tcp_congestion(b"cubic")?;
                s.connect_timeout(&SocketAddr::V4(dst).into(), Duration::from_secs(5))?;
                Ok(TcpStream::from(s))
            })
            .collect::<std::io::Result<Vec<TcpStream>>>()
    })
    .unwrap()
    .join()
    .unwrap()
    .unwrap()
    .expect("200 connections");
    let stop = Arc::new(AtomicBool::new(false));
    let senders: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let port = s.local_addr().unwrap().port();
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(i as u64);
                let mut h = crc32fast::Hasher::new();
                let mut chunk = vec![0u8; CHUNK];
                let mut bytes = 0u64;
                let mut error = None;
                while !stop.load(Ordering::Relaxed) {
                    rng.fill_bytes(&mut chunk);
                    if let Err(e) = s.write_all(&chunk) {
                        error = Some(e.to_string());
                        break;
                    }
                    h.update(&chunk);
                    bytes += CHUNK as u64;
                }
                if let Err(e) = s.shutdown(std::net::Shutdown::Write) {
                    error.get_or_insert(e.to_string());
                }
                // Keep the socket until the receiver has read the end of stream.
                let mut sink = [0u8; 1];
                let _ = s.read(&mut sink);
                Sent {
                    port,
                    bytes,
                    crc: h.finalize(),
                    error,
                }
            })
        })
        .collect();

    // Aggregate received bytes per 100 ms bin, and samples, around the migration.
    let total = |c: &Arc<Vec<AtomicU64>>| c.iter().map(|a| a.load(Ordering::Relaxed)).sum::<u64>();
    let mut samples = Vec::new();
    let mut bins: Vec<(Instant, u64)> = Vec::new();
    let t0 = Instant::now();
    let tick = |samples: &mut Vec<_>, bins: &mut Vec<(Instant, u64)>, trace: &mut Trace| {
        std::thread::sleep(Duration::from_millis(100));
        samples.extend(trace.drain());
        bins.push((Instant::now(), total(&rx_bytes)));
    };
    while t0.elapsed() < Duration::from_secs(4) {
        tick(&mut samples, &mut bins, &mut trace);
    }
    let before_census = census(bed.sender_ns());
    assert_eq!(
        before_census
            .iter()
            .filter(|s| s.state == "ESTABLISHED" && s.cc == "cubic")
            .count(),
        FLOWS,
        "the sender namespace must hold 200 established cubic sockets"
    );
    let m_start = Instant::now();
    let out = cctl(&[
        "migrate",
        "--from",
        "cubic",
        "--to",
        HTCP,
        "--netns",
        bed.sender_ns(),
        "--json",
    ]);
    let m_end = Instant::now();
    let returned_ns = monotonic_ns();
    assert!(out.status.success(), "cctl migrate failed: {}", text(&out));
    let report: serde_json::Value = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["kind"] == "report")
        .unwrap_or_else(|| panic!("no report line: {}", text(&out)));
    assert_eq!(report["matched"], FLOWS, "{report}");
    assert_eq!(report["moved"], FLOWS, "{report}");
    assert_eq!(report["failed"], 0, "{report}");
    while t0.elapsed() < Duration::from_secs(8) {
        tick(&mut samples, &mut bins, &mut trace);
    }
    stop.store(true, Ordering::SeqCst);
    let sent: Vec<Sent> = senders.into_iter().map(|h| h.join().unwrap()).collect();
    let received = acceptor.join().unwrap();
    samples.extend(trace.drain());
    let stats = trace.finish().expect("collector stops");
    bed.destroy().expect("testbed removed");
    guard.unload().expect("bpf_htcp unloads");

    // Every byte stream complete and identical, no connection reset.
    assert_eq!(received.len(), FLOWS);
    for s in &sent {
        assert!(s.error.is_none(), "sender {} failed: {:?}", s.port, s.error);
        let r = received
            .get(&s.port)
            .unwrap_or_else(|| panic!("no receiver for port {}", s.port));
        assert!(
            r.error.is_none(),
            "receiver of {} failed: {:?}",
            s.port,
            r.error
        );
        assert!(s.bytes > 0, "flow {} sent nothing", s.port);
        assert_eq!(r.bytes, s.bytes, "flow {}: bytes received vs sent", s.port);
        assert_eq!(
            r.crc, s.crc,
            "flow {}: CRC-32 of the stream differs",
            s.port
        );
    }

    // Within 1 s of migrate returning, each flow's latest sample shows bpf_htcp.
    assert_eq!(stats.dropped, 0, "collector dropped samples: {stats:?}");
    let deadline = returned_ns + 1_000_000_000;
    let silent: Vec<String> = sent
        .iter()
        .filter(|s| {
            !samples.iter().any(|x| {
                x.sport == s.port && x.dport == PORT && x.ts_ns > returned_ns && x.ts_ns <= deadline
            })
        })
        .map(|s| {
            let last = samples
                .iter()
                .filter(|x| x.sport == s.port && x.dport == PORT && x.ts_ns <= returned_ns)
                .max_by_key(|x| x.ts_ns);
            let next = samples
                .iter()
                .filter(|x| x.sport == s.port && x.dport == PORT && x.ts_ns > deadline)
                .min_by_key(|x| x.ts_ns);
            format!(
                "{}: last before {:?} ms {:?}, next after {:?} ms",
                s.port,
                last.map(|x| (returned_ns as i64 - x.ts_ns as i64) / 1_000_000),
                last.map(|x| x.ca_state),
                next.map(|x| (x.ts_ns - returned_ns) / 1_000_000)
            )
        })
        .collect();
    assert!(
        silent.is_empty(),
        "{} flows without a sample in the second after the migration: {silent:?}",
        silent.len()
    );
    for s in &sent {
        let latest = samples
            .iter()
            .filter(|x| x.sport == s.port && x.dport == PORT && x.ts_ns <= deadline)
            .max_by_key(|x| x.ts_ns)
            .unwrap_or_else(|| panic!("no sample of flow {}", s.port));
        assert!(
            latest.ts_ns > returned_ns,
            "flow {}: no sample within 1 s after the migration",
            s.port
        );
        assert_eq!(latest.cc, HTCP, "flow {}: latest sample {latest:?}", s.port);
        assert!(latest.ca_map_id.is_some_and(|id| id > 0));
    }

    // Aggregate throughput: the second after the migration keeps at least half the rate
    // of the two seconds before it, and the two seconds after that at least 80 %. The
    // bottleneck sets the aggregate and the switch keeps cwnd/ssthresh, so a dip below that
    // is a stall, not noise.
    let rate = |from: Instant, to: Instant| {
        let at = |t: Instant| {
            bins.iter()
                .filter(|(ts, _)| *ts <= t)
                .map(|(ts, b)| (*ts, *b))
                .next_back()
                .unwrap()
        };
        let (ta, a) = at(from);
        let (tb, b) = at(to);
        (b - a) as f64 * 8.0 / (tb - ta).as_secs_f64()
    };
    let before = rate(m_start - Duration::from_secs(2), m_start);
    let just_after = rate(m_end, m_end + Duration::from_secs(1));
    let later = rate(
        m_end + Duration::from_secs(1),
        m_end + Duration::from_secs(3),
    );
    println!(
        "migration took {:?}; aggregate {:.1} Mbit/s before, {:.1} in the second after, {:.1} 1-3 s after",
        m_end - m_start,
        before / 1e6,
        just_after / 1e6,
        later / 1e6
    );
    assert!(
        before > 100e6,
        "aggregate before {before} bit/s: the path is not busy"
    );
    assert!(
        just_after >= 0.5 * before,
        "throughput fell to {just_after} from {before} bit/s"
    );
    assert!(
        later >= 0.8 * before,
        "throughput did not recover: {later} vs {before}"
    );
}

#[test]
fn bad_targets_and_filters_are_refused_and_change_nothing() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate(PREFIX, &[HTCP]);
    let ns = Netns::new("cctl-ma-bad");
    let _conns = idle_pairs(&ns.0, 4, "cubic", 5412);
    let guard = load_htcp();
    let before = census(&ns.0);
    assert_eq!(before.iter().filter(|s| s.cc == "cubic").count(), 4);

    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["--to", "ma_nosuch"],
            2,
            "is not registered in the kernel (registered: ",
        ),
        (
            &["--to", "reno", "--port", "9"],
            7,
            "no established TCP socket matches --from cubic --port 9",
        ),
        (
            &["--to", "reno", "--addr", "10.9.9.9"],
            7,
            "nothing was changed",
        ),
        (&["--to", "cubic"], 2, "source and target are the same"),
        // Restricted: not in tcp_allowed_congestion_control, and this is not the initial namespace.
        (
            &["--to", HTCP],
            5,
            "it is restricted (not in net.ipv4.tcp_allowed_congestion_control",
        ),
    ];
    for (extra, code, msg) in cases {
        let mut args = vec!["migrate", "--from", "cubic", "--netns", &ns.0];
        args.extend_from_slice(extra);
        let o = cctl(&args);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(msg),
            "{args:?}: {}",
            text(&o)
        );
        assert_eq!(census(&ns.0), before, "{args:?} changed a socket");
    }
    let o = cctl(&[
        "migrate",
        "--from",
        "cubic",
        "--to",
        "reno",
        "--netns",
        "cctl-ma-none",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give a name from `ip netns list`"));

    // The override moves them, and a dry run before it changes nothing.
    let o = cctl(&[
        "migrate",
        "--from",
        "cubic",
        "--to",
        HTCP,
        "--netns",
        &ns.0,
        "--allow-restricted",
        "--dry-run",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(census(&ns.0), before, "a dry run changed a socket");
    let o = cctl(&[
        "migrate",
        "--from",
        "cubic",
        "--to",
        HTCP,
        "--netns",
        &ns.0,
        "--allow-restricted",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let after = census(&ns.0);
    assert_eq!(
        after
            .iter()
            .filter(|s| s.cc == HTCP && s.ca_map_id.is_some())
            .count(),
        4
    );
    // Back, so the guard can unload it.
    let o = cctl(&["migrate", "--from", HTCP, "--to", "reno", "--netns", &ns.0]);
    assert!(o.status.success(), "{}", text(&o));
    guard.unload().expect("unload");
}

#[test]
fn unload_refuses_while_flows_use_it_and_migrates_them_first_when_asked() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate(PREFIX, &[HTCP]);
    let ns = Netns::new("cctl-ma-unl");
    let guard = load_htcp();
    let _conns = idle_pairs(&ns.0, 3, HTCP, 5413);

    let o = cctl(&["unload", HTCP]);
    assert_eq!(o.status.code(), Some(6), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is still used by 3 established TCP socket(s)"),
        "{err}"
    );
    assert!(
        err.contains("netns cctl-ma-unl: 3") && err.contains("--migrate-to"),
        "{err}"
    );
    assert!(
        cctl_tests::available().contains(&HTCP.to_string()),
        "refused, yet unloaded"
    );

    let o = cctl(&["unload", HTCP, "--migrate-to", "reno"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!cctl_tests::available().contains(&HTCP.to_string()));
    let now = census(&ns.0);
    assert_eq!(
        now.iter()
            .filter(|s| s.state == "ESTABLISHED" && s.sport != 5413)
            .map(|s| s.cc.as_str())
            .collect::<Vec<_>>(),
        vec!["reno"; 3]
    );
    drop(guard);
}

const TA_PREFIX: &str = "cctl-ta-";
const BPF_CUBIC: &str = "bpf_cubic";
const VEGAS: &str = "bpf_vegas";

/// The JSON lines of `cctl ... --json` with `"kind": kind`.
fn json_kind(o: &Output, kind: &str) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kind"] == kind)
        .collect()
}

#[test]
fn a_cookie_moves_exactly_one_of_two_flows_with_the_same_ports_pattern() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate(TA_PREFIX, &[BPF_CUBIC, VEGAS]);
    const PORT: u16 = 5461;
    let guard = load_owned("cubic");
    let ns = Netns::new("cctl-ta-ck");
    let conns = idle_pairs(&ns.0, 2, BPF_CUBIC, PORT);
    let before = clients(PORT);
    assert_eq!(before.len(), 2, "{before:?}");
    assert!(before
        .values()
        .all(|(n, cc, _)| n == &ns.0 && cc == BPF_CUBIC));
    let (&picked, &other) = (before.keys().next().unwrap(), before.keys().nth(1).unwrap());

    // `cctl sockets --cookie` shows that one socket, with its cookie in --json.
    let o = cctl(&[
        "sockets",
        "--all-netns",
        "--cookie",
        &picked.to_string(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let listed: Vec<serde_json::Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 1, "{}", text(&o));
    assert_eq!(listed[0]["cookie"], picked);
    assert_eq!(listed[0]["dport"], PORT);

    // A cookie that is no socket of the namespace matches nothing and changes nothing.
    let o = cctl(&[
        "migrate",
        "--from",
        BPF_CUBIC,
        "--to",
        "reno",
        "--netns",
        &ns.0,
        "--cookie",
        &(picked.max(other) + 1_000_000).to_string(),
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--cookie"),
        "{}",
        text(&o)
    );
    assert_eq!(clients(PORT), before);

    let o = cctl(&[
        "migrate",
        "--from",
        BPF_CUBIC,
        "--to",
        "reno",
        "--netns",
        &ns.0,
        "--cookie",
        &picked.to_string(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let reports = json_kind(&o, "report");
    assert_eq!(reports.len(), 1, "{}", text(&o));
    assert_eq!(reports[0]["matched"], 1, "{}", text(&o));
    assert_eq!(reports[0]["moved"], 1, "{}", text(&o));
    let sockets = json_kind(&o, "socket");
    assert_eq!(sockets.len(), 1, "{}", text(&o));
    assert_eq!(sockets[0]["cookie"], picked);

    let after = clients(PORT);
    assert_eq!(after[&picked].1, "reno", "{after:?}");
    assert_eq!(
        after[&other], before[&other],
        "the other flow changed: {after:?}"
    );
    drop(conns);
    guard.unload().expect("bpf_cubic unloads");
}

#[test]
fn all_netns_moves_the_flows_of_two_namespaces_at_once() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate(TA_PREFIX, &[BPF_CUBIC, VEGAS]);
    const PORT: u16 = 5462;
    let cubic = load_owned("cubic");
    let vegas = load_owned("vegas");
    let (a, b) = (Netns::new("cctl-ta-a"), Netns::new("cctl-ta-b"));
    let conns = (
        idle_pairs(&a.0, 2, BPF_CUBIC, PORT),
        idle_pairs(&b.0, 3, BPF_CUBIC, PORT),
    );
    let before = clients(PORT);
    assert_eq!(before.len(), 5, "{before:?}");

    let o = cctl(&[
        "migrate",
        "--from",
        BPF_CUBIC,
        "--to",
        VEGAS,
        "--all-netns",
        "--port",
        &PORT.to_string(),
        "--allow-restricted",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let reports: BTreeMap<String, (u64, u64)> = json_kind(&o, "report")
        .iter()
        .map(|r| {
            (
                r["netns"].as_str().unwrap().to_string(),
                (r["matched"].as_u64().unwrap(), r["moved"].as_u64().unwrap()),
            )
        })
        .collect();
    assert_eq!(
        reports,
        BTreeMap::from([(a.0.clone(), (2, 2)), (b.0.clone(), (3, 3))]),
        "one report per namespace with flows: {}",
        text(&o)
    );
    let after = clients(PORT);
    assert_eq!(after.len(), 5, "{after:?}");
    for (cookie, (ns, cc, map)) in &after {
        assert_eq!(ns, &before[cookie].0);
        assert_eq!(cc, VEGAS, "{cookie} in {ns}: {after:?}");
        assert!(map.is_some(), "bpf_vegas is a BPF CC: it has a map id");
    }

    // The library call, back to reno, and the text output of one line per namespace.
    let o = cctl(&[
        "migrate",
        "--from",
        VEGAS,
        "--to",
        "reno",
        "--all-netns",
        "--port",
        &PORT.to_string(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{}", text(&o));
    assert!(
        lines[0].contains(&format!("in netns {}: matched 2 established, moved 2", a.0))
            || lines[1].contains(&format!("in netns {}: matched 2 established, moved 2", a.0)),
        "{}",
        text(&o)
    );
    assert!(clients(PORT).values().all(|(_, cc, _)| cc == "reno"));
    drop(conns);
    vegas.unload().expect("bpf_vegas unloads");
    cubic.unload().expect("bpf_cubic unloads");
}

#[test]
fn one_namespace_that_may_not_use_the_target_fails_the_whole_all_netns_call_and_moves_nothing() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate(TA_PREFIX, &[BPF_CUBIC, VEGAS]);
    const PORT: u16 = 5463;
    let cubic = load_owned("cubic");
    let vegas = load_owned("vegas");
    let allowed = std::fs::read_to_string(ALLOWED).unwrap();
    assert!(
        !allowed.split_whitespace().any(|n| n == VEGAS),
        "bpf_vegas must be restricted for this test: {allowed}"
    );
    // The initial namespace (which may use any registered CC) is walked first; the
    // restricted one comes after it.
    let ns = Netns::new("cctl-ta-r");
    let conns = (
        idle_pairs_here(2, BPF_CUBIC, PORT),
        idle_pairs(&ns.0, 2, BPF_CUBIC, PORT),
    );
    let before = clients(PORT);
    assert_eq!(before.len(), 4, "{before:?}");
    assert_eq!(
        before.values().filter(|(n, _, _)| n == "current").count(),
        2,
        "the test runs in the initial namespace: {before:?}"
    );

    let port = PORT.to_string();
    let o = cctl(&[
        "migrate",
        "--from",
        BPF_CUBIC,
        "--to",
        VEGAS,
        "--all-netns",
        "--port",
        &port,
    ]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("cannot migrate to '{VEGAS}' in netns {}", ns.0))
            && err.contains("restricted"),
        "{}",
        text(&o)
    );
    assert_eq!(
        clients(PORT),
        before,
        "a socket moved although the call failed"
    );

    let e = migrate::migrate_all_namespaces(&migrate::MigrateRequest {
        from: BPF_CUBIC.into(),
        to: VEGAS.into(),
        filter: SocketFilter {
            port: Some(PORT),
            ..Default::default()
        },
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(e, cctl_loader::Error::NotAllowed { .. }), "{e}");
    assert_eq!(
        clients(PORT),
        before,
        "a socket moved although the call failed"
    );

    // Nothing to match anywhere: exit 7, saying where it looked.
    let o = cctl(&[
        "migrate",
        "--from",
        BPF_CUBIC,
        "--to",
        VEGAS,
        "--all-netns",
        "--port",
        "5469",
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("in any network namespace; nothing was changed"),
        "{}",
        text(&o)
    );
    drop(conns);
    vegas.unload().expect("bpf_vegas unloads");
    cubic.unload().expect("bpf_cubic unloads");
}

/// Sends `bytes` over a loopback connection (client running reno) in the calling thread's
/// namespace, on `port`.
fn loopback_transfer(port: u16, bytes: usize) {
    let l = TcpListener::bind(("127.0.0.1", port)).unwrap();
    let rx = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut sink = Vec::new();
        s.read_to_end(&mut sink).unwrap();
        sink.len()
    });
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_tcp_congestion(b"reno").unwrap();
    s.connect(&SocketAddr::from(([127, 0, 0, 1], port)).into())
        .unwrap();
    let mut s = TcpStream::from(s);
    let chunk = vec![7u8; 64 * 1024];
    let mut sent = 0;
    while sent < bytes {
        s.write_all(&chunk).unwrap();
        sent += chunk.len();
    }
    drop(s);
    assert_eq!(rx.join().unwrap(), sent);
}

/// Samples carry their namespace's cookie, and `netns_cookie` filters in the kernel: the
/// same port carries a flow in each of two namespaces; a trace filtered by one namespace's
/// cookie (as `cctl trace --netns` resolves it) sees only that one's, an unfiltered trace
/// both, each under its own cookie. An unknown `--netns` is bad input.
#[test]
fn samples_carry_their_namespace_and_a_netns_filter_keeps_one() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate(TA_PREFIX, &[]);
    const PORT: u16 = 5463;
    let (a, b) = (Netns::new("cctl-ta-nsa"), Netns::new("cctl-ta-nsb"));
    let cookie = |n: &str| migrate::resolve_netns(Some(n)).unwrap().cookie().unwrap();
    let (ca, cb) = (cookie(&a.0), cookie(&b.0));
    let here = migrate::resolve_netns(None).unwrap().cookie().unwrap();
    assert!(
        ca != cb && ca != here && cb != here,
        "{ca} {cb} {here}: three namespaces, three cookies"
    );
    let start = |netns_cookie| {
        Trace::start(TraceConfig {
            interval: Duration::from_millis(10),
            port: Some(PORT),
            cc: None,
            netns_cookie,
        })
        .expect("collector attaches")
    };
    let (mut only_a, mut all) = (start(Some(ca)), start(None));
    for ns in [&a.0, &b.0] {
        spawn_in_netns(ns, || loopback_transfer(PORT, 16 << 20))
            .unwrap()
            .join()
            .unwrap()
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let (sa, sall) = (only_a.drain(), all.drain());
    only_a.finish().unwrap();
    all.finish().unwrap();
    assert!(!sa.is_empty(), "no sample of namespace a");
    assert!(
        sa.iter().all(|s| s.netns_cookie == ca),
        "the filtered trace let in {:?}",
        sa.iter()
            .map(|s| s.netns_cookie)
            .collect::<std::collections::BTreeSet<_>>()
    );
    let seen: std::collections::BTreeSet<u64> = sall.iter().map(|s| s.netns_cookie).collect();
    assert_eq!(seen, [ca, cb].into_iter().collect(), "the unfiltered trace");

    let o = cctl(&["trace", "--netns", "cctl-ta-nosuch", "--duration-s", "1"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("give a name from `ip netns list`"),
        "{}",
        text(&o)
    );
}
