//! Benchmark scenarios on a netem dumbbell, checked against what the papers describe.

use std::path::{Path, PathBuf};

use cctl_report::summary::Summary;
use cctl_scenario::{self as scenario, Scenario};
use cctl_tests::bench::{metric, run_ci, run_ci_points};
use cctl_tests::guest::Part;

/// The parts, in the order they run.
pub const PARTS: &[Part] = &[
    Part {
        name: "netem-single-flow",
        guest_s: 46,
        run: single_flow,
    },
    Part {
        name: "netem-same-rtt",
        guest_s: 39,
        run: same_rtt,
    },
    Part {
        name: "netem-rtt-unfair",
        guest_s: 29,
        run: rtt_unfair,
    },
    Part {
        name: "netem-response",
        guest_s: 77,
        run: response,
    },
    Part {
        name: "netem-convergence",
        guest_s: 43,
        run: convergence,
    },
];

fn results_root() -> PathBuf {
    super::results_root().join("netem")
}

fn run(sc: &Scenario, algos: &[&str]) -> Summary {
    run_ci(sc, algos, &results_root()).1
}

fn builtin(name: &str) -> Scenario {
    scenario::find(name).unwrap_or_else(|e| panic!("{e}"))
}

/// A small scenario in the shipped format (one point, ci-sized), to keep CI short.
fn custom(name: &str, defaults: &str, flows: &str, sweep: &str) -> Scenario {
    let text = format!(
        "id = \"X.{name}\"\nname = \"{name}\"\ntitle = \"{name}\"\nsource = \"cctl test\"\n\
         metrics = [\"M1\", \"M3\", \"M8\"]\nplots = [\"cwnd\"]\n[defaults]\n{defaults}\n{flows}\n\
         [profiles.paper]\n{sweep}\n[profiles.ci]\n{sweep}\n"
    );
    Scenario::parse(&text, Path::new(&format!("<test>/{name}.toml")))
        .unwrap_or_else(|e| panic!("{e}"))
}

const ONE_FLOW: &str = "[[flows]]\ncc = \"{algo}\"\n";
const SINGLE_FLOW: &str = "rate_mbit = 20\nrtt_ms = 40\nbuffer_bdp = 1.0\nduration_s = 10";
const SAME_RTT: &str =
    "rate_mbit = 20\nrtt_ms = 40\nbuffer_bdp = 1.0\nduration_s = 30\nvars = { rtt2_ms = 40 }";
/// 30 Mbit/s for 10 s: at p = 1e-4 Reno's window (1.22/sqrt(p) = 122 segments) is above
/// the 100-segment BDP, so the link limits it; at 1e-3 and 1e-2 the loss does (about 39
/// and 12 segments).
const RESPONSE: &str = "rate_mbit = 30\nrtt_ms = 40\nbuffer_bdp = 1.0\nduration_s = 10";
const RESPONSE_SWEEP: &str = "sweep = { loss = [0.0001, 0.001, 0.01] }";
const TWO_FLOWS: &str =
    "[[flows]]\ncc = \"{algo}\"\n[[flows]]\ncc = \"{algo}\"\nrtt_ms = \"{rtt2_ms}\"\nstart_s = 3\n";

/// The custom scenarios parse (checked on the host before a VM boots).
pub fn parse_checks() {
    custom("single-flow", SINGLE_FLOW, ONE_FLOW, "");
    custom("same-rtt", SAME_RTT, TWO_FLOWS, "");
    custom("response", RESPONSE, ONE_FLOW, RESPONSE_SWEEP);
}

/// A single flow with a 100 % BDP buffer keeps the link busy: BPF ports and the guest's
/// native module on the same scenario. The per-packet delay taps (on by default, 1 packet
/// in 10) see the path as built: the ACKs' path holds no queue and all 40 ms of netem
/// delay, so their median one-way delay is the configured delay (within 1 ms); the data's
/// one-way delay is at least its sojourn in the bottleneck queue.
fn single_flow() {
    let sc = custom("single-flow", SINGLE_FLOW, ONE_FLOW, "");
    let s = run(&sc, &["reno", "htcp", "native:htcp"]);
    for algo in ["reno", "htcp", "native:htcp"] {
        let u = metric(&s, algo, 0, "M8 utilisation (wire)").expect("utilisation");
        println!("single flow: {algo} utilisation {u:.3} (>= 0.9)");
        assert!(
            u >= 0.9,
            "{algo}: utilisation {u} < 0.9 with a 100 % BDP buffer"
        );
        let rev =
            metric(&s, algo, 0, "flow1 reverse one-way delay p50 (ms)").expect("ACK one-way delay");
        let fwd = metric(&s, algo, 0, "flow1 one-way delay p50 (ms)").expect("one-way delay");
        let soj = metric(&s, algo, 0, "hop1 sojourn p50 (ms)").expect("sojourn");
        println!(
            "single flow: {algo} ACK one-way delay p50 {rev:.3} ms (configured 40), data \
             one-way delay p50 {fwd:.3} ms, sojourn p50 {soj:.3} ms"
        );
        assert!(
            (40.0..41.0).contains(&rev),
            "{algo}: the ACKs' median one-way delay {rev} ms is not the configured 40 ms"
        );
        assert!(fwd >= soj, "{algo}: one-way delay {fwd} < sojourn {soj}");
    }
}

/// Two H-TCP flows with the same RTT share the link. [P0] T0.1 computes the ratio over the
/// whole run and over its last 50 %; the second half is past flow 2's start-up.
fn same_rtt() {
    let sc = custom("same-rtt", SAME_RTT, TWO_FLOWS, "");
    let s = run(&sc, &["htcp"]);
    let ratio = metric(&s, "htcp", 0, "M3 R_minmax last 50 %").expect("ratio");
    println!("same RTT: H-TCP R_minmax over the last 50 % {ratio:.3} (>= 0.8)");
    assert!(
        ratio >= 0.8,
        "H-TCP same-RTT throughput ratio {ratio} < 0.8 over the last 50 %"
    );
}

/// With different RTTs, Reno gives the short-RTT flow more throughput.
fn rtt_unfair() {
    let sc = custom(
        "rtt-unfair",
        "rate_mbit = 20\nrtt_ms = 80\nbuffer_bdp = 0.5\nduration_s = 20\nvars = { rtt2_ms = 20 }",
        TWO_FLOWS,
        "",
    );
    let s = run(&sc, &["reno"]);
    let u_long = metric(&s, "reno", 0, "M1 flow1 (Mbit/s)").unwrap();
    let u_short = metric(&s, "reno", 0, "M1 flow2 (Mbit/s)").unwrap();
    println!("RTT unfairness: Reno 20 ms flow {u_short:.2} Mbit/s, 80 ms flow {u_long:.2}");
    assert!(
        u_short > u_long,
        "Reno: 20 ms flow {u_short} Mbit/s not above the 80 ms flow's {u_long}"
    );
}

/// The response function falls as the random loss rate rises.
fn response() {
    let sc = custom("response", RESPONSE, ONE_FLOW, RESPONSE_SWEEP);
    let s = run(&sc, &["reno", "htcp"]);
    for algo in ["reno", "htcp"] {
        let mut pts: Vec<(f64, f64)> = s
            .rows
            .iter()
            .filter(|r| r.algo == algo)
            .map(|r| {
                (
                    r.loss,
                    metric(&s, algo, r.point, "M1 flow1 (Mbit/s)").expect("throughput"),
                )
            })
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        println!("response: {algo} (loss, Mbit/s) {pts:?}");
        assert_eq!(pts.len(), 3, "{algo}: loss points {pts:?}");
        for w in pts.windows(2) {
            assert!(
                w[1].1 < w[0].1,
                "{algo}: throughput did not fall from p={} to p={}: {pts:?}",
                w[0].0,
                w[1].0
            );
        }
    }
}

/// The 80 % convergence time of H-TCP is computed and finite: the shipped T0.7 in the ci
/// profile, at its 10 Mbit/s point. Its 50 Mbit/s point carries five times the packets
/// (a minute of the guest's virtual clock cost about 2 min of the host's); `make demo`
/// runs both points.
fn convergence() {
    let (_, s) = run_ci_points(
        &builtin("convergence-time"),
        &["htcp"],
        &results_root(),
        Some(&[0]),
    );
    assert_eq!(s.rows.len(), 1, "one point, one algorithm");
    let r = &s.rows[0];
    assert_eq!(r.rate_mbit, 10.0, "point 0 of the ci sweep is 10 Mbit/s");
    let t = metric(&s, "htcp", r.point, "M5 A (s)");
    println!("convergence: H-TCP at 10 Mbit/s, 80 % time {t:?} s");
    assert!(
        t.is_some_and(f64::is_finite),
        "H-TCP did not converge (NC) at 10 Mbit/s"
    );
}
