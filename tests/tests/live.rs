//! Live tunables (spec §18.5) on the running kernel: `cctl set` changes H-TCP's Δ_L and
//! RTT scaling under an established, traced flow, which sees the new values at its next
//! ACKs with its per-flow state (Tmin, Δ, cwnd) untouched; load-time keys and
//! out-of-range values are refused with the rule; `cctl list` shows the values in force.

use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::registry;
use cctl_loader::sample::{CaState, Sample};
use cctl_netem::flows::{run_bulk_flows, FlowSpec};
use cctl_netem::testbed::{PathSpec, Testbed};
use cctl_tests::{cctl_bin, clean_slate, require_root, KERNEL};

const PORT: u16 = 5311;
const NAME: &str = "cctl_it_live";

fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// f̄, the increase factor H-TCP used at this sample: α / (2 (1 - β)).
fn factor(s: &Sample) -> Option<f64> {
    let (a, b) = (s.vars.get("alpha")?, s.vars.get("beta")?);
    (b < 1.0).then(|| a / (2.0 * (1.0 - b)))
}

fn cctl(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(cctl_bin())
        .args(args)
        .output()
        .expect("cctl runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cctl_set_changes_a_running_flows_internals_at_its_next_acks_without_a_reset() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate("cctl-lv", &[NAME]);
    let (rec, guard) = cctl_tests::load_owned_as("htcp", NAME);
    assert!(
        rec.versions[0]
            .data_pin
            .as_ref()
            .is_some_and(|p| p.exists()),
        "the .data map is pinned and recorded: {:?}",
        rec.versions[0].data_pin
    );

    // Refusals first (nothing changes): a load-time key, a value out of range, a
    // forbidden combination with the running values.
    let (code, _, err) = cctl(&["set", NAME, "ack_counting=1"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("load-time only") && err.contains("cctl upgrade"),
        "{err}"
    );
    let (code, _, err) = cctl(&["set", NAME, "beta_max_pct=101"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("out of range") && err.contains("[10, 100]"),
        "{err}"
    );
    let (code, _, err) = cctl(&["set", NAME, "beta_min_pct=90"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("must not exceed"), "{err}");

    // A traced flow through a 20 Mbit/s, 100-packet drop-tail bottleneck; 3.5 s in,
    // Δ_L goes from 1 s to 1 ms and the RTT scaling (S = 0.1 at this path's Tmin) off,
    // so f̄ jumps from max(1, 0.1 f(Δ - 1 s)) to 1 + 10 Δ + 0.25 Δ² at the next ACK.
    let bed = Testbed::create(&PathSpec::new("cctl-lv", 20, 100)).expect("testbed");
    let mut trace = Trace::start(TraceConfig {
        interval: Duration::from_millis(20),
        port: Some(PORT),
        cc: Some(NAME.into()),
        netns_cookie: None,
    })
    .expect("collector attaches");
    let setter = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(3500));
        let before = monotonic_ns();
        let r = cctl(&["set", NAME, "delta_l_ms=1", "use_rtt_scaling=0"]);
        (before, monotonic_ns(), r)
    });
    let flows = [FlowSpec {
        id: 1,
        cc: NAME.into(),
        start: Duration::ZERO,
        stop: Duration::from_secs(7),
        ..Default::default()
    }];
    let results =
        run_bulk_flows(&bed, PORT, &flows, Arc::new(AtomicBool::new(false))).expect("flows run");
    let (set_start, set_end, (code, out, err)) = setter.join().expect("setter");
    std::thread::sleep(Duration::from_millis(200));
    let samples = trace.drain();
    trace.finish().expect("collector stops");
    bed.destroy().expect("testbed removed");
    assert_eq!(code, 0, "cctl set failed: {err}");
    assert!(
        out.contains("delta_l_ms 1000 -> 1") && out.contains("use_rtt_scaling 1 -> 0"),
        "{out}"
    );
    let r = &results[0];
    assert!(r.error.is_none(), "flow failed: {:?}", r.error);
    let mine: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.sport == r.local_port && s.dport == PORT)
        .collect();
    let (pre, post): (Vec<&Sample>, Vec<&Sample>) = mine.iter().partition(|s| s.ts_ns < set_start);
    assert!(
        pre.len() >= 50 && post.len() >= 50,
        "samples: {} before, {} after",
        pre.len(),
        post.len()
    );

    // Before: f̄ = 1 wherever Δ <= Δ_L = 1 s (Open samples from 100 ms after a
    // congestion event: α is recomputed at CA ACKs, β at the event).
    let pre_low: Vec<f64> = pre
        .iter()
        .filter(|s| {
            s.ca_state == CaState::Open
                && s.delta_us.is_some_and(|d| (100_000..950_000).contains(&d))
        })
        .filter_map(|s| factor(s))
        .collect();
    assert!(
        !pre_low.is_empty(),
        "no sample before the set with Δ < 1.9 s"
    );
    assert!(
        pre_low.iter().all(|f| (0.95..=1.05).contains(f)),
        "f̄ before the set: {pre_low:?}"
    );

    // After: every Open sample with Δ >= 100 ms has f̄ = 1 + 10 Δ + 0.25 Δ²(ms) (±15 %:
    // α is traced at the last CA ACK, Δ at the sample).
    let rtt_us = pre.last().map(|s| s.srtt_us).unwrap_or(0);
    let first_new = post
        .iter()
        .find(|s| {
            s.ca_state == CaState::Open
                && s.delta_us.is_some_and(|d| d >= 100_000)
                && factor(s).is_some_and(|f| f > 1.5)
        })
        .expect("a sample after the set shows the new f̄");
    // From the start of `cctl set` (the flip happens inside it, before its grace period).
    let latency_ms = (first_new.ts_ns.saturating_sub(set_start)) as f64 / 1e6;
    let checked: Vec<(f64, f64)> = post
        .iter()
        .filter(|s| s.ts_ns >= first_new.ts_ns && s.ca_state == CaState::Open)
        .filter_map(|s| {
            let d = s.delta_us? as f64 / 1e6;
            let f = factor(s)?;
            (d >= 0.1).then_some((1.0 + 10.0 * d + 0.25 * d * d, f))
        })
        .collect();
    assert!(
        checked.len() >= 10,
        "too few Open samples after the set: {checked:?}"
    );
    let off = checked
        .iter()
        .filter(|(want, got)| (got / want - 1.0).abs() > 0.15)
        .count();
    assert!(
        off * 10 <= checked.len(),
        "f̄ after the set differs from 1 + 10Δ + 0.25Δ² by more than 15 % in {off} of {} samples: {checked:?}",
        checked.len()
    );

    // No reset: Tmin is the flow's, no cwnd back at the initial window outside Loss, Δ
    // keeps counting unless a congestion event came.
    let tmin_pre = pre.last().and_then(|s| s.tmin_us).expect("Tmin before");
    let tmin_post = post.first().and_then(|s| s.tmin_us).expect("Tmin after");
    assert!(
        tmin_post <= tmin_pre && tmin_post > 0,
        "Tmin {tmin_pre} -> {tmin_post}"
    );
    let (last_pre, first_post) = (pre.last().unwrap(), post.first().unwrap());
    if first_post.backoffs == last_pre.backoffs {
        assert!(
            first_post.delta_us >= last_pre.delta_us,
            "Δ reset by the set: {:?} -> {:?}",
            last_pre.delta_us,
            first_post.delta_us
        );
    }
    assert!(
        post.iter()
            .filter(|s| s.ca_state != CaState::Loss)
            .all(|s| s.cwnd > 10 || s.backoffs > first_post.backoffs),
        "cwnd back to the initial window after the set"
    );
    // Throughput: the second after the set moves at least 80 % of the second before.
    let acked_at = |t: u64| {
        mine.iter()
            .rfind(|s| s.ts_ns <= t)
            .map(|s| s.bytes_acked)
            .unwrap_or(0)
    };
    let before_b = acked_at(set_start) - acked_at(set_start - 1_000_000_000);
    let after_b = acked_at(set_end + 1_000_000_000) - acked_at(set_end);
    assert!(
        after_b as f64 >= 0.8 * before_b as f64,
        "throughput dip after the set: {before_b} B in the second before, {after_b} B after"
    );
    eprintln!(
        "live change: set took {:.1} ms; first sample with the new f̄ {latency_ms:.1} ms after it began \
         (srtt {rtt_us} us, sample interval 20 ms); {} Open samples checked, {off} off by > 15 %; \
         {before_b} B acked in the second before, {after_b} B after",
        (set_end - set_start) as f64 / 1e6,
        checked.len()
    );
    assert!(
        latency_ms <= (set_end - set_start) as f64 / 1e6 + rtt_us as f64 / 1e3 + 20.0,
        "the new value took {latency_ms:.1} ms to show (srtt {rtt_us} us, interval 20 ms)"
    );

    // `cctl list --json` shows the values in force.
    let (code, out, err) = cctl(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let line = out
        .lines()
        .find(|l| l.contains(&format!("\"name\":\"{NAME}\"")))
        .expect("listed");
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["params"]["delta_l_ms"], 1, "{line}");
    assert_eq!(v["params"]["use_rtt_scaling"], 0, "{line}");

    guard.unload().expect("unload");
    assert!(!std::path::Path::new(&registry::data_pin_path(NAME, 1)).exists());
}
