//! Part `parking` of the modern testbed test (see modern.rs): the shipped `parking-lot`
//! scenario, a chain of three bottlenecks with one long flow across all of them and one
//! cross flow on each.

use std::path::Path;

use cctl_report::record::read_records;
use cctl_scenario::{self as scenario, Profile, Scenario};
use cctl_tests::bench::{metric, run_ci};

/// The congestion control of every flow: the kernel's Reno, the loss-based algorithm the
/// parking-lot result is known for (no BPF program to load).
const ALGO: &str = "native:reno";

fn parking_lot() -> Scenario {
    scenario::find("parking-lot").unwrap_or_else(|e| panic!("{e}"))
}

/// Host-side checks: scenarios parse, bad input is refused naming the field.
pub fn parse_checks() {
    // The shipped 3-hop parking lot parses: the long flow crosses hops 1-3 and has their
    // summed delay, each cross flow one hop.
    let sc = parking_lot();
    let p = &sc.expand(Profile::Ci, 1).unwrap()[0];
    let t = p.topology.as_ref().expect("a topology");
    assert_eq!(t.hops.len(), 3);
    let paths: Vec<(usize, usize)> = t.paths.iter().map(|f| (f.first, f.last)).collect();
    assert_eq!(paths, [(1, 3), (1, 1), (2, 2), (3, 3)]);
    assert_eq!(p.flows[0].rtt_ms, 30.0);
    assert!(p.flows[1..].iter().all(|f| f.rtt_ms == 10.0));
    for h in &t.hops {
        // 1 BDP of the long flow: 10 Mbit/s × 30 ms = 25 packets.
        assert_eq!((h.rate_mbit, h.buffer_pkts), (10.0, 25));
    }

    // A path outside the chain: no path from sender to receiver, naming the flow's field.
    let text = scenario::BUILTIN_FILES
        .iter()
        .find(|(f, _)| *f == "parking_lot.toml")
        .expect("shipped")
        .1;
    for bad in ["[0, 1]", "[2, 4]", "[3, 2]"] {
        let broken = text.replacen("path = [2, 2]", &format!("path = {bad}"), 1);
        let e = Scenario::parse(&broken, Path::new("bad.toml")).expect_err(bad);
        assert_eq!(e.field(), Some("flows[2].path"), "{e}");
        assert!(
            e.to_string().contains("no path from sender to receiver"),
            "{e}"
        );
    }
    // More bottlenecks than a chain may have, and a key that makes no sense on a chain.
    let broken = text.replacen("[{}, {}, {}]", "[{}, {}, {}, {}, {}]", 1);
    let e = Scenario::parse(&broken, Path::new("bad.toml")).unwrap_err();
    assert_eq!(e.field(), Some("topology.bottlenecks"), "{e}");
    let broken = text.replacen("buffer_bdp = 1.0", "buffer_bdp = 1.0\nweb_sessions = 2", 1);
    let e = Scenario::parse(&broken, Path::new("bad.toml")).unwrap_err();
    assert_eq!(e.field(), Some("defaults.web_sessions"), "{e}");
    assert!(e.to_string().contains("[topology]"), "{e}");
}

/// Runs in the netem kernel; results under `root`.
pub fn checks(root: &Path) {
    let sc = parking_lot();
    let (dir, s) = run_ci(&sc, &[ALGO], root);
    let (meta, records) = read_records(&dir).expect("records");
    let r = &records[0];
    let plan = meta
        .topology
        .get(&0)
        .expect("the topology in metadata.json");
    assert_eq!(plan.hops.len(), 3);

    // Throughput (M1): the long flow gets less than each cross flow.
    let tp: Vec<f64> = (1..=4)
        .map(|i| {
            metric(&s, ALGO, 0, &format!("M1 flow{i} (Mbit/s)"))
                .unwrap_or_else(|| panic!("M1 of flow {i}"))
        })
        .collect();
    eprintln!(
        "parking lot ({ALGO}, 3 × 10 Mbit/s, 10 ms per hop): long flow {:.2} Mbit/s, \
         cross flows {:.2} / {:.2} / {:.2} Mbit/s",
        tp[0], tp[1], tp[2], tp[3]
    );
    for (k, &cross) in tp[1..].iter().enumerate() {
        assert!(
            tp[0] < cross,
            "long flow {:.2} Mbit/s is not below cross flow {} ({cross:.2} Mbit/s)",
            tp[0],
            k + 1
        );
    }

    // The topology is real. (1) Each flow's smallest RTT is the sum of its hops' delays
    // (30 ms for the long flow, 10 ms for a cross flow) plus queueing and forwarding, and
    // less than one hop's delay more than that: a path one hop longer would be 10 ms more.
    // A cross flow starts into queues the long flow has filled, so its smallest RTT can
    // hold a few ms of queue (15.5 ms of 10 in one guest run): the bound is 80 % of the
    // shortest hop's delay.
    let hop_ms = plan
        .hops
        .iter()
        .map(|h| h.rtt_ms)
        .fold(f64::INFINITY, f64::min);
    let min_rtt_ms: Vec<f64> = r
        .series
        .iter()
        .map(|f| {
            f.points
                .iter()
                .map(|p| p.min_rtt_us)
                .filter(|&x| x > 0)
                .min()
                .expect("RTT samples") as f64
                / 1e3
        })
        .collect();
    eprintln!(
        "min RTT per flow (ms): {min_rtt_ms:?}; paths {:?}",
        plan.paths
    );
    for (f, path) in min_rtt_ms.iter().zip(&plan.paths) {
        assert!(
            path.rtt_ms <= *f && *f < path.rtt_ms + 0.8 * hop_ms,
            "min RTT {f} ms, path {}-{} sums to {} ms",
            path.first,
            path.last,
            path.rtt_ms
        );
    }
    // (2) Each bottleneck's tbf sent the bytes of exactly the flows that cross it: the long
    // flow and its own cross flow (the bytes the receivers got, plus headers and what a
    // later hop dropped: at most 15 % more).
    assert_eq!(r.hops.len(), 3);
    for h in &r.hops {
        let carried = r.flows[0].bytes + r.flows[h.hop].bytes;
        let ratio = h.sent_bytes as f64 / carried as f64;
        eprintln!(
            "hop {}: tbf sent {} B ({} pkt, {} dropped), flows across it delivered {carried} B: ratio {ratio:.3}",
            h.hop, h.sent_bytes, h.sent_packets, h.drops
        );
        assert!(
            (1.0..=1.15).contains(&ratio),
            "hop {}: sent {} B for flows across it that delivered {carried} B",
            h.hop,
            h.sent_bytes
        );
    }
    // (3) Every hop is a bottleneck: its tbf ran near its rate and its drop-tail queue
    // dropped (the summary's per-hop columns).
    for (k, h) in plan.hops.iter().enumerate() {
        let k = k + 1;
        let sent = metric(&s, ALGO, 0, &format!("hop{k} sent (Mbit/s)")).expect("hop sent");
        let drops = metric(&s, ALGO, 0, &format!("hop{k} drops (pkts)")).expect("hop drops");
        assert!(
            sent >= 0.7 * h.rate_mbit && drops > 0.0,
            "hop {k}: sent {sent:.2} Mbit/s of {} with {drops} drops: not a saturated bottleneck",
            h.rate_mbit
        );
    }
}
