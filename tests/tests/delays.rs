//! Per-packet delay taps on a real dumbbell (tcx hooks of delay.bpf.c in the running
//! kernel, a real TCP flow through a tbf bottleneck): the sojourn time they measure is
//! what the bottleneck's own backlog says it must be, and the one-way delays add up.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cctl_bench::sources::delays::{packets, record};
use cctl_netem::chain::Bed;
use cctl_netem::flows::{run_bulk_flows, FlowSpec};
use cctl_netem::testbed::{PathSpec, QdiscSampler};
use cctl_tests::{clean_slate, require_root, KERNEL};

const PORT: u16 = 5391;
const RATE_MBIT: f64 = 10.0;

fn monotonic_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap();
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// One reno flow for 3 s through a 10 Mbit/s tbf with a 60-packet drop-tail queue, every
/// packet timed, the bottleneck's backlog sampled every 5 ms. The median sojourn time of
/// the data packets that entered the queue after the first second equals the median
/// backlog over the same time, drained at the bottleneck's rate (within 15 %); a data
/// packet's one-way delay is at least its sojourn; the ACKs (no queue on their way, no
/// netem on this host) take under a millisecond; and no timed packet went missing.
#[test]
fn sojourn_times_agree_with_the_bottlenecks_backlog() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let prefix = "cctl-dl";
    clean_slate(prefix, &[]);
    let bed = Bed::create(None, &PathSpec::new(prefix, RATE_MBIT, 60)).expect("testbed");
    let (taps, plan) = cctl_bench::sources::delays::start(&bed, 1)
        .expect("attaching the taps")
        .expect("sampling on");
    let (ns, dev) = bed.sampled_queue();
    let backlog: Arc<Mutex<Vec<(f64, u64)>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let t0_ns = monotonic_ns();
    let t0 = Instant::now();
    let sampler = {
        let (backlog, done) = (backlog.clone(), done.clone());
        let mut tc = QdiscSampler::start(&ns, &dev).expect("sampler");
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Ok(q) = tc.sample() {
                    backlog
                        .lock()
                        .unwrap()
                        .push((t0.elapsed().as_secs_f64(), q.backlog_bytes));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let flows = [FlowSpec {
        id: 1,
        cc: "reno".into(),
        start: Duration::ZERO,
        stop: Duration::from_secs(3),
        ..Default::default()
    }];
    let results =
        run_bulk_flows(&bed, PORT, &flows, Arc::new(AtomicBool::new(false))).expect("flow runs");
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let (events, counts) = taps.finish().expect("taps finish");
    bed.destroy().unwrap();
    assert!(results[0].error.is_none(), "{:?}", results[0].error);

    let pk = packets(&events, &plan, &results, t0_ns);
    let rec = record(counts, 1, &pk, 1, &plan);
    eprintln!(
        "counts {:?}; events {}: forward {} reverse {}; sender segments {:?}",
        rec.counts,
        events.len(),
        pk.iter().filter(|p| p.forward).count(),
        pk.iter().filter(|p| !p.forward).count(),
        results[0].segments
    );
    let fwd: Vec<_> = pk.iter().filter(|p| p.forward && p.t_s > 1.0).collect();
    assert!(
        fwd.len() > 1000,
        "{} data packets timed after 1 s",
        fwd.len()
    );
    assert_eq!(rec.counts.events_dropped, 0);
    assert_eq!(rec.counts.unmatched, 0, "{:?}", rec.counts);
    // Every timed packet not dropped at the bottleneck arrived: what is missing is at most
    // what the queue dropped plus what was in flight at the end.
    assert!(
        rec.counts.delivered as f64 >= 0.9 * rec.counts.stamped as f64,
        "{:?}",
        rec.counts
    );
    for p in &fwd {
        let s = p.sojourn_us[0].expect("data crossed the bottleneck");
        assert!(p.owd_us >= s, "owd {} < sojourn {s}", p.owd_us);
    }
    let mut soj: Vec<f64> = fwd.iter().map(|p| p.sojourn_us[0].unwrap()).collect();
    soj.sort_by(f64::total_cmp);
    let soj_p50 = soj[soj.len() / 2];
    let mut drain: Vec<f64> = backlog
        .lock()
        .unwrap()
        .iter()
        .filter(|(t, _)| *t > 1.0 && *t < 3.0)
        .map(|&(_, b)| b as f64 * 8.0 / (RATE_MBIT * 1e6) * 1e6)
        .collect();
    drain.sort_by(f64::total_cmp);
    assert!(drain.len() > 100, "{} backlog samples", drain.len());
    let drain_p50 = drain[drain.len() / 2];
    let ratio = soj_p50 / drain_p50;
    eprintln!(
        "median sojourn {:.2} ms, median backlog/rate {:.2} ms, ratio {ratio:.3}; \
         {} data packets, reverse p50 {:.3} ms",
        soj_p50 / 1e3,
        drain_p50 / 1e3,
        soj.len(),
        rec.flows[0].reverse.unwrap().p50_us / 1e3
    );
    assert!((0.85..=1.15).contains(&ratio), "ratio {ratio}");
    let rev = rec.flows[0].reverse.expect("ACKs timed");
    assert!(rev.p50_us < 1_000.0, "ACK one-way delay {rev:?}");
}
