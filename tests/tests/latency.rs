//! Latency under load in a real bench run on the host's dumbbell (tbf, no netem): a
//! forward and a reverse bpf_reno flow, an unresponsive UDP stream and irtt-style probes
//! at once; what the run writes for each, its per-packet delays and its close records.

use std::path::Path;

use cctl_loader::closerec::CloseRecord;
use cctl_report::record::RunRecord;
use cctl_scenario::Scenario;
use cctl_tests::bench::{metric, run_ci};
use cctl_tests::{require_root, KERNEL};

const SCENARIO: &str = r#"
id = "X.lul"
name = "latency-under-load-host"
title = "latency under load on the host"
source = "cctl test"
metrics = ["M1", "M8"]
plots = ["delay"]
[defaults]
rate_mbit = 20
reverse_rate_mbit = 10
rtt_ms = 0
buffer_pkts = 50
duration_s = 4
[[flows]]
cc = "{algo}"
[[flows]]
cc = "{algo}"
direction = "reverse"
[[flows]]
kind = "udp-cbr"
rate_mbit = 3
[[probes]]
interval_ms = 10
[profiles.paper]
[profiles.ci]
"#;

/// The probes come back (≥ 95 %) and see the queues the TCP packets see (within 30 %);
/// the UDP stream is received at its
/// 3 Mbit/s; the reverse flow moves data against the forward direction and is left out of
/// the forward utilisation (≤ 1); and the run's close records are the two TCP
/// connections from both ends, their bytes as the flows counted them.
#[test]
fn a_run_with_probes_udp_and_a_reverse_flow_records_each() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let sc = Scenario::parse(SCENARIO, Path::new("<test>/lul.toml")).unwrap();
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("latency");
    let (dir, s) = run_ci(&sc, &["reno"], &root);
    let run = dir.join("runs/reno/p0-r0");
    let r: RunRecord =
        serde_json::from_slice(&std::fs::read(run.join("run.json")).unwrap()).unwrap();

    let p = &r.probes[0];
    let c = &p.counts;
    assert!(c.sent >= 350, "{c:?}");
    assert!(c.returned as f64 >= 0.95 * c.sent as f64, "{c:?}");
    // What crosses the same queue sees the same delay. Forward: the probes and the data
    // share the bottleneck (tails compared: a probe samples time, a data packet the times
    // the flow sends). Back: the probes' echoes, flow 1's ACKs and flow 2's (reverse)
    // data share the reverse tbf, which flow 2 keeps full (its ACK-clocked flow 1 starves).
    let m = |name: &str| metric(&s, "reno", 0, name).unwrap_or_else(|| panic!("{name}"));
    let (probe_fwd, sojourn) = (
        m("probe1 one-way delay p99 (ms)"),
        m("hop1 sojourn p99 (ms)"),
    );
    let probe_back = m("probe1 reverse one-way delay p50 (ms)");
    let acks = m("flow1 reverse one-way delay p50 (ms)");
    let reverse_data = m("flow2 one-way delay p50 (ms)");
    eprintln!(
        "forward p99: probes {probe_fwd:.2} ms, data sojourn {sojourn:.2} ms; reverse p50: \
         probes {probe_back:.2} ms, flow 1's ACKs {acks:.2} ms, flow 2's data {reverse_data:.2} ms"
    );
    assert!(
        sojourn > 2.0,
        "the queue is loaded: sojourn p99 {sojourn} ms"
    );
    assert!(
        (probe_fwd / sojourn - 1.0).abs() < 0.3,
        "probes {probe_fwd} ms vs sojourn {sojourn} ms"
    );
    assert!(
        probe_back > 2.0,
        "the reverse queue is loaded: {probe_back} ms"
    );
    for (what, x) in [("flow 1's ACKs", acks), ("flow 2's data", reverse_data)] {
        assert!(
            (x / probe_back - 1.0).abs() < 0.3,
            "{what} {x} ms vs the probes' way back {probe_back} ms"
        );
    }

    let u = &r.udp[0];
    let rate = u.receive_rate_mbit();
    assert!((2.85..3.15).contains(&rate), "UDP {rate} Mbit/s: {u:?}");

    let reverse = r.flows.iter().find(|f| f.id == 2).unwrap();
    assert!(reverse.bytes > 1_000_000, "{reverse:?}");
    let util = metric(&s, "reno", 0, "M8 utilisation (goodput)").unwrap();
    assert!((0.1..=1.0).contains(&util), "forward utilisation {util}");

    let close: Vec<CloseRecord> =
        serde_json::from_slice(&std::fs::read(run.join("close.json")).unwrap()).unwrap();
    assert_eq!(close.len(), 4, "2 connections x 2 ends: {close:#?}");
    for f in &r.flows {
        let sender = close
            .iter()
            .find(|c| c.sport == f.local_port && c.saddr == std::net::IpAddr::V4(f.local_ip))
            .unwrap_or_else(|| panic!("flow {} has no close record: {close:#?}", f.id));
        assert_eq!(sender.cc, "bpf_reno");
        assert_eq!(sender.algo.as_deref(), Some("reno"));
        // bytes_acked counts the SYN and the FIN (one each) besides the data.
        assert!(
            sender.bytes_acked.abs_diff(f.bytes) <= 2,
            "flow {}: acked {} vs received {}",
            f.id,
            sender.bytes_acked,
            f.bytes
        );
        let receiver = close
            .iter()
            .find(|c| c.dport == f.local_port && c.daddr == std::net::IpAddr::V4(f.local_ip))
            .unwrap_or_else(|| panic!("flow {}'s receiver has no close record", f.id));
        // bytes_received counts the FIN's sequence number too.
        assert!(
            receiver.bytes_received.abs_diff(f.bytes) <= 1,
            "flow {}: received {} vs {}",
            f.id,
            receiver.bytes_received,
            f.bytes
        );
    }
    assert!(run.join("delays.csv").exists());
    assert!(dir.join("plots/delay-cdf-reno-p0.png").exists());
}
