//! BPF run-time statistics on the running kernel: a loopback flow under bpf_vegas with
//! statistics on shows its callbacks' run counts and times, mapped to the right callback
//! and version, and the kernel's statistics switch is back as it was afterwards.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use cctl_loader::bpfstats::{self, ProgStats, StatsGuard};
use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use cctl_tests::{clean_slate, require_root, KERNEL};
use socket2::{Domain, Socket, Type};

const VEGAS: &str = "bpf_vegas";
const PORT: u16 = 5464;

/// Sends `bytes` over loopback from a socket running `cc` (in this namespace).
fn loopback_flow(cc: &str, bytes: usize) {
    let listener = TcpListener::bind(("127.0.0.1", PORT)).expect("listener");
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut got = 0;
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got += n;
        }
        got
    });
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.set_tcp_congestion(cc.as_bytes()).expect("setting the CC");
    s.connect(&SocketAddr::from(([127, 0, 0, 1], PORT)).into())
        .expect("connect");
    let mut s = TcpStream::from(s);
    let chunk = vec![0x5au8; 1 << 16];
    let mut sent = 0;
    while sent < bytes {
        s.write_all(&chunk).unwrap();
        sent += chunk.len();
    }
    drop(s);
    assert_eq!(reader.join().unwrap(), sent, "the flow lost bytes");
}

fn sysctl() -> String {
    std::fs::read_to_string(bpfstats::STATS_SYSCTL)
        .unwrap()
        .trim()
        .to_string()
}

#[test]
fn a_vegas_flow_under_a_stats_guard_counts_its_callbacks_and_the_switch_is_restored() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate("cctl-ta-", &[VEGAS]);
    let before = sysctl();
    let rec = registry::load(
        "vegas",
        &LoadOptions {
            owned: true,
            ..Default::default()
        },
    )
    .expect("bpf_vegas loads");
    let guard = LoadGuard::new(rec.name.clone());
    let map_id = rec.versions[0].map_id;

    let (listed, collectors) = {
        let stats = StatsGuard::enable().expect("statistics on");
        assert_eq!(sysctl(), before, "the guard changed the sysctl");
        let start = bpfstats::cctl_programs().expect("listing cctl's programs");
        let mut trace = Trace::start(TraceConfig {
            interval: Duration::from_millis(10),
            port: Some(PORT),
            cc: None,
            netns_cookie: None,
        })
        .expect("collector attaches");
        loopback_flow(VEGAS, 32 << 20);
        let samples = trace.drain();
        let listed = bpfstats::cctl_programs().expect("listing cctl's programs");
        trace.finish().expect("collector stops");
        drop(stats);
        assert!(
            samples.iter().any(|s| s.cc == VEGAS),
            "the flow did not run bpf_vegas"
        );
        let started: BTreeSet<u32> = start.iter().map(|p| p.id).collect();
        let collectors: Vec<ProgStats> = listed
            .iter()
            .filter(|p| p.is_collector() && !started.contains(&p.id))
            .cloned()
            .collect();
        (listed, collectors)
    };
    assert_eq!(
        sysctl(),
        before,
        "kernel.bpf_stats_enabled not restored after the guard"
    );

    let vegas: Vec<&ProgStats> = listed
        .iter()
        .filter(|p| p.cc.as_deref() == Some(VEGAS))
        .collect();
    let callbacks: BTreeSet<&str> = vegas.iter().map(|p| p.callback.as_str()).collect();
    assert_eq!(
        callbacks,
        BTreeSet::from([
            "init",
            "ssthresh",
            "cong_avoid",
            "set_state",
            "cwnd_event",
            "undo_cwnd",
            "pkts_acked"
        ]),
        "{vegas:#?}"
    );
    for p in &vegas {
        assert_eq!((p.version, p.map_id), (Some(1), Some(map_id)), "{p:?}");
        // The C function of callback X is vegas_X (the kernel keeps 15 characters).
        assert!(
            format!("vegas_{}", p.callback).starts_with(&p.name),
            "program {} filed under callback {}",
            p.name,
            p.callback
        );
    }
    let busy: Vec<&&ProgStats> = vegas
        .iter()
        .filter(|p| p.callback == "cong_avoid" || p.callback == "pkts_acked")
        .collect();
    assert!(
        busy.iter().all(|p| p.run_cnt > 0 && p.run_time_ns > 0),
        "a 32 MiB flow ran cong_avoid/pkts_acked, yet: {busy:#?}"
    );
    let per_call: Vec<String> = vegas
        .iter()
        .map(|p| {
            format!(
                "{} {:.0} ns/call x{}",
                p.callback,
                p.ns_per_call().unwrap_or(0.0),
                p.run_cnt
            )
        })
        .collect();
    println!("bpf_vegas: {per_call:?}");

    // Our collector, attached during the flow, is listed and ran (other traces running
    // meanwhile may be listed too).
    let c = collectors
        .iter()
        .find(|c| c.run_cnt > 0 && c.run_time_ns > 0)
        .unwrap_or_else(|| panic!("no collector that ran: {collectors:#?}"));
    assert_eq!(c.name, "cctl_tcp_probe");
    assert_eq!(c.callback, "tcp_probe");
    println!(
        "collector: {:.0} ns/call x{}",
        c.ns_per_call().unwrap(),
        c.run_cnt
    );

    // Without the guard (and the sysctl off) the kernel stops counting.
    if before == "0" {
        let count = || {
            bpfstats::cctl_programs()
                .unwrap()
                .into_iter()
                .find(|p| p.cc.as_deref() == Some(VEGAS) && p.callback == "cong_avoid")
                .map(|p| p.run_cnt)
                .unwrap()
        };
        let n = count();
        loopback_flow(VEGAS, 8 << 20);
        assert_eq!(
            count(),
            n,
            "cong_avoid still counted after the guard dropped (does another process hold \
             BPF_ENABLE_STATS?)"
        );
    }

    guard.unload().expect("bpf_vegas unloads");
    assert!(
        !bpfstats::cctl_programs()
            .unwrap()
            .iter()
            .any(|p| p.map_id == Some(map_id)),
        "bpf_vegas programs listed after unload"
    );
}
