//! Integration tests on the running kernel: load → /proc → real flows through a
//! tbf bottleneck → traced samples → backoffs → unload → gone.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use cctl_loader::sample::Sample;
use cctl_loader::summary::summarize;
use cctl_netem::flows::{run_bulk_flows, FlowSpec};
use cctl_netem::testbed::{PathSpec, Testbed};
use cctl_tests::{available, clean_slate, require_root, KERNEL};

const PORT: u16 = 5301;

/// Runs one traced bulk flow with `cc` through a 20 Mbit/s, 100-packet tbf path.
fn traced_flow(prefix: &str, cc: &str, secs: u64) -> (Vec<Sample>, u16, f64) {
    let bed = Testbed::create(&PathSpec::new(prefix, 20, 100)).expect("testbed");
    let mut trace = Trace::start(TraceConfig {
        interval: Duration::from_millis(50),
        port: Some(PORT),
        cc: Some(cc.into()),
        netns_cookie: None,
    })
    .expect("collector attaches");
    let flows = [FlowSpec {
        id: 1,
        cc: cc.into(),
        start: Duration::ZERO,
        stop: Duration::from_secs(secs),
        ..Default::default()
    }];
    let results =
        run_bulk_flows(&bed, PORT, &flows, Arc::new(AtomicBool::new(false))).expect("flows run");
    std::thread::sleep(Duration::from_millis(200));
    let samples = trace.drain();
    let stats = trace.finish().expect("collector stops");
    assert_eq!(stats.dropped, 0, "ring buffer dropped samples: {stats:?}");
    bed.destroy().expect("testbed removed");
    let r = &results[0];
    assert!(r.error.is_none(), "flow failed: {:?}", r.error);
    (samples, r.local_port, r.mean_throughput_bps())
}

#[test]
fn htcp_loads_carries_a_traced_flow_backs_off_within_bounds_and_unloads() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let name = "cctl_it_htcp";
    clean_slate("cctl-it", &[name]);

    let opts = LoadOptions {
        name: Some(name.into()),
        owned: true,
        ..Default::default()
    };
    let rec = registry::load("htcp", &opts).expect("bpf_htcp loads");
    let guard = LoadGuard::new(rec.name.clone());
    assert!(
        available().contains(&name.to_string()),
        "{name} not in /proc after load"
    );
    assert!(registry::list_loaded()
        .unwrap()
        .iter()
        .any(|l| l.name == name && l.algo == "htcp"));

    let (samples, port, bps) = traced_flow("cctl-it", name, 8);
    let mine: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.sport == port && s.dport == PORT)
        .collect();
    assert!(
        mine.len() >= 20,
        "too few samples for the flow: {}",
        mine.len()
    );
    assert!(mine.iter().all(|s| s.cc == name && s.algo == Some("htcp")));
    assert!(mine.iter().all(|s| s.cwnd > 0), "cwnd 0 in a sample");
    assert!(
        mine.iter().skip(1).all(|s| s.srtt_us > 0),
        "srtt 0 in a sample"
    );
    assert!(mine
        .iter()
        .any(|s| s.vars.get("alpha").is_some() && s.tmin_us.unwrap_or(0) > 0));
    assert!(
        bps > 12e6 && bps < 21e6,
        "throughput {bps} bit/s outside 12-21 Mbit/s"
    );

    let owned: Vec<Sample> = mine.into_iter().cloned().collect();
    let flow = &summarize(&owned)[0];
    assert!(
        !flow.backoffs.is_empty(),
        "a 100-packet drop-tail queue must cause losses in 8 s"
    );
    for b in &flow.backoffs {
        if let Some(beta) = b.beta {
            assert!((0.5..=0.8).contains(&beta), "β {beta} outside [0.5, 0.8]");
        }
    }
    assert!(
        flow.backoffs.iter().any(|b| b.beta.is_some()),
        "no backoff with a known β"
    );

    guard.unload().expect("unload");
    assert!(
        !available().contains(&name.to_string()),
        "{name} still registered after unload"
    );
    assert!(!registry::list_loaded()
        .unwrap()
        .iter()
        .any(|l| l.name == name));
}

#[test]
fn native_cubic_flow_is_traced_without_cctl_fields() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate("cctl-it", &[]);
    let (samples, port, _) = traced_flow("cctl-it", "cubic", 4);
    let mine: Vec<&Sample> = samples.iter().filter(|s| s.sport == port).collect();
    assert!(mine.len() >= 10, "too few cubic samples: {}", mine.len());
    assert!(mine
        .iter()
        .all(|s| s.cc == "cubic" && s.algo.is_none() && s.vars.is_empty()));
    assert!(mine.iter().all(|s| s.cwnd > 0 && s.mss > 0));
    assert!(
        mine.iter().any(|s| s.ssthresh.is_some()),
        "cubic never left slow start"
    );
}

#[test]
fn reno_loads_and_carries_a_flow_with_the_shared_measurements() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let name = "cctl_it_reno";
    clean_slate("cctl-it", &[name]);
    let opts = LoadOptions {
        name: Some(name.into()),
        owned: true,
        ..Default::default()
    };
    registry::load("reno", &opts).expect("bpf_reno loads");
    let guard = LoadGuard::new(name);
    let (samples, port, _) = traced_flow("cctl-it", name, 4);
    let mine: Vec<Sample> = samples.into_iter().filter(|s| s.sport == port).collect();
    assert!(mine.len() >= 10);
    assert!(mine.iter().all(|s| s.algo == Some("reno")));
    let flow = &summarize(&mine)[0];
    assert!(
        flow.backoffs
            .iter()
            .all(|b| b.beta.is_none_or(|x| x == 0.5)),
        "reno's β must be 0.5"
    );
    guard.unload().expect("unload");
    assert!(!available().contains(&name.to_string()));
}

#[test]
fn a_name_already_registered_is_refused_and_left_untouched() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let before = available();
    let opts = LoadOptions {
        name: Some("cubic".into()),
        owned: true,
        ..Default::default()
    };
    let e = registry::load("htcp", &opts).unwrap_err().to_string();
    assert!(e.contains("already registered"), "{e}");
    assert_eq!(available(), before);
    let e = registry::unload("cubic").unwrap_err().to_string();
    assert!(e.contains("not loaded by cctl"), "{e}");
    assert!(available().contains(&"cubic".to_string()));
}

#[test]
fn loading_twice_is_refused_with_a_hint() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let name = "cctl_it_twice";
    clean_slate("cctl-it", &[name]);
    let opts = LoadOptions {
        name: Some(name.into()),
        owned: true,
        ..Default::default()
    };
    registry::load("reno", &opts).expect("first load");
    let guard = LoadGuard::new(name);
    let e = registry::load("reno", &opts).unwrap_err().to_string();
    assert!(
        e.contains("already loaded by cctl") && e.contains("cctl unload"),
        "{e}"
    );
    assert_eq!(available().iter().filter(|n| *n == name).count(), 1);
    guard.unload().unwrap();
}

#[test]
fn an_orphan_of_a_crashed_run_is_removed() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let name = "cctl_it_orphan";
    clean_slate("cctl-it", &[name]);
    let opts = LoadOptions {
        name: Some(name.into()),
        owned: true,
        ..Default::default()
    };
    registry::load("reno", &opts).expect("load");
    // Pretend the owner died: rewrite its metadata with a pid that cannot exist.
    let meta = std::path::Path::new(registry::META_DIR).join(format!("{name}.json"));
    let mut rec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    rec["owner_pid"] = serde_json::json!(u32::MAX - 1);
    std::fs::write(&meta, serde_json::to_vec(&rec).unwrap()).unwrap();
    let removed = registry::remove_orphans().unwrap();
    assert!(removed.contains(&name.to_string()), "{removed:?}");
    assert!(!available().contains(&name.to_string()));
}

#[test]
fn a_stalled_consumer_makes_the_kernel_count_ring_buffer_drops() {
    use std::io::{Read, Write};
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    const P: u16 = 5398;
    let mut trace = Trace::start(TraceConfig {
        interval: Duration::from_micros(1),
        port: Some(P),
        cc: None,
        netns_cookie: None,
    })
    .expect("collector attaches");
    let at_start = trace.counters();
    let listener = std::net::TcpListener::bind(("127.0.0.1", P)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let rx = std::thread::spawn(move || {
        let mut readers = Vec::new();
        for s in listener.incoming().take(4) {
            let mut s = s.unwrap();
            readers.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                while s.read(&mut buf).map(|n| n > 0).unwrap_or(false) {}
            }));
        }
        readers.into_iter().for_each(|r| r.join().unwrap());
    });
    let senders: Vec<_> = (0..4)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(("127.0.0.1", P)).unwrap();
                let chunk = vec![0u8; 1 << 16];
                while !stop.load(std::sync::atomic::Ordering::Relaxed)
                    && s.write_all(&chunk).is_ok()
                {}
            })
        })
        .collect();
    // Read nothing until samples are dropped (10 s at most): at tens of thousands of
    // samples/s the 65,536-sample channel and then the 4 MiB ring buffer fill up.
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while trace.counters().since(&at_start).dropped == 0 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    // The live counters moved while nobody read a sample, drops included.
    let stalled = trace.counters().since(&at_start);
    assert!(
        stalled.samples > 0 && stalled.dropped > 0,
        "live counters during the stall: {stalled:?}"
    );
    assert!(stalled.kernel_emitted >= stalled.samples, "{stalled:?}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    senders.into_iter().for_each(|s| s.join().unwrap());
    rx.join().unwrap();
    let queued = trace.drain().len() as u64;
    let last = trace.counters();
    let stats = trace.finish().expect("collector stops");
    eprintln!(
        "stalled consumer: {stats:?}, {queued} queued; live counters during the stall {stalled:?}"
    );
    assert!(
        last.dropped >= stalled.dropped && last.samples >= stalled.samples,
        "counters went back: {stalled:?} then {last:?}"
    );
    assert!(
        stats.dropped >= last.dropped && stats.samples >= last.samples,
        "the final counters are below the live ones: {last:?}, {stats:?}"
    );
    assert!(
        stats.dropped > 0,
        "no drops counted with a stalled consumer: {stats:?}"
    );
    assert!(
        queued > 0 && stats.samples >= queued,
        "{queued} queued, {stats:?}"
    );
    assert!(
        stats.kernel_emitted >= stats.samples,
        "user space got more than the kernel wrote: {stats:?}"
    );
}

/// Every algorithm cctl carries passes the verifier on this kernel, carries a real
/// traced flow through a drop-tail bottleneck with its variables in the samples,
/// and unloads; each profile (e.g. `linux`) passes the verifier too.
#[test]
fn every_algorithm_loads_carries_a_traced_flow_with_its_variables_and_unloads() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    // For developers running several copies at once: CCTL_TEST_PREFIX (namespace
    // prefix) and CCTL_TEST_ALGOS (comma-separated keys). CI sets neither.
    let prefix = std::env::var("CCTL_TEST_PREFIX").unwrap_or_else(|_| "cctl-ia".into());
    let only = std::env::var("CCTL_TEST_ALGOS").ok();
    let algos: Vec<_> = cctl_loader::catalogue::ALGORITHMS
        .iter()
        .filter(|a| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|k| k == a.key))
        })
        .collect();
    let names: Vec<String> = algos.iter().map(|a| format!("cit_{}", a.key)).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    clean_slate(&prefix, &refs);
    let mut failures = Vec::new();
    for a in algos {
        let name = format!("cit_{}", a.key);
        let rec = registry::load(
            a.key,
            &LoadOptions {
                name: Some(name.clone()),
                owned: true,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{} does not load: {e:#}", a.key));
        let guard = LoadGuard::new(rec.name.clone());
        let (samples, port, bps) = traced_flow(&prefix, &name, 5);
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.sport == port).collect();
        let with_vars = mine
            .iter()
            .filter(|s| s.algo == Some(a.key))
            .filter(|s| a.var_docs.iter().all(|(v, _)| s.vars.get(v).is_some()))
            .count();
        println!(
            "{:<10} {:>6.2} Mbit/s, {} samples, {} with all of its variables",
            a.key,
            bps / 1e6,
            mine.len(),
            with_vars
        );
        if mine.len() < 10 || with_vars < mine.len() || !(8e6..=21e6).contains(&bps) {
            failures.push(format!(
                "{}: {:.2} Mbit/s (want 8-21), {} samples (want >= 10), {} with every variable",
                a.key,
                bps / 1e6,
                mine.len(),
                with_vars
            ));
        }
        guard.unload().expect("unload");
        assert!(!available().contains(&name), "{name} still registered");
        for p in a.profiles {
            let rec = registry::load(
                a.key,
                &LoadOptions {
                    profile: Some(p.name.into()),
                    owned: true,
                    ..Default::default()
                },
            )
            .unwrap_or_else(|e| panic!("{} profile {} does not load: {e:#}", a.key, p.name));
            assert_eq!(rec.name, format!("{}_{}", a.cc_name, p.tag));
            LoadGuard::new(rec.name).unload().expect("unload");
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn listing_changes_nothing_and_a_change_of_state_removes_leftovers() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let (name, other) = ("cit_leftover", "cit_leftover2");
    clean_slate("cctl-it", &[name, other]);
    // What a run that crashed between unpinning and cleaning leaves: metadata and a
    // version pin directory without a link pin.
    let meta = std::path::Path::new(registry::META_DIR).join(format!("{name}.json"));
    let versions = std::path::Path::new(registry::VERSION_DIR).join(name);
    std::fs::create_dir_all(registry::META_DIR).unwrap();
    std::fs::write(&meta, b"{}").unwrap();
    std::fs::create_dir_all(&versions).unwrap();
    let found = registry::leftovers().unwrap();
    assert!(
        found.contains(&meta) && found.contains(&versions),
        "{found:?}"
    );

    registry::list_loaded().unwrap();
    let o = std::process::Command::new(cctl_tests::cctl_bin())
        .arg("list")
        .output()
        .unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Leftovers of crashed runs") && out.contains(&*meta.to_string_lossy()),
        "{out}"
    );
    assert!(
        meta.exists() && versions.exists(),
        "a listing removed leftovers"
    );

    // A change of state (here a load) removes them.
    registry::load(
        "reno",
        &LoadOptions {
            name: Some(other.into()),
            owned: true,
            ..Default::default()
        },
    )
    .expect("load");
    let guard = LoadGuard::new(other);
    assert!(
        !meta.exists() && !versions.exists(),
        "a load left the leftovers"
    );
    guard.unload().unwrap();

    // The explicit step says what it removed.
    std::fs::write(&meta, b"{}").unwrap();
    let removed = registry::clean_leftovers().unwrap();
    assert!(removed.contains(&meta), "{removed:?}");
    assert!(!meta.exists());
}

/// Runs a 2-s reno flow through a 20 Mbit/s, 20-packet dumbbell and returns its drop
/// ledger; `undersize` first replaces the sender's egress queue (not the bottleneck) with a
/// 10 Mbit/s tbf holding one packet.
fn ledger_of_a_flow(prefix: &str, undersize: bool) -> cctl_netem::ledger::DropLedger {
    clean_slate(prefix, &[]);
    let bed = Testbed::create(&PathSpec::new(prefix, 20, 20)).expect("testbed");
    if undersize {
        let st = std::process::Command::new("tc")
            .args(["-n", bed.sender_ns(), "qdisc", "replace", "dev"])
            .arg(bed.spec().sender_dev())
            .args([
                "root", "tbf", "rate", "10mbit", "burst", "3000", "limit", "1600",
            ])
            .status()
            .unwrap();
        assert!(st.success(), "tc qdisc replace");
    }
    let flows = [FlowSpec {
        id: 1,
        cc: "reno".into(),
        start: Duration::ZERO,
        stop: Duration::from_secs(2),
        ..Default::default()
    }];
    let r = run_bulk_flows(&bed, PORT + 7, &flows, Arc::new(AtomicBool::new(false)))
        .expect("flows run");
    assert!(r[0].error.is_none(), "{:?}", r[0].error);
    let l = cctl_netem::ledger::read(&bed.drop_places(), 0, 0).expect("ledger");
    bed.destroy().unwrap();
    l
}

/// The drop ledger tells intended drops from the others: a flow that fills the
/// bottleneck's 20-packet queue drops there only; the same flow behind an undersized
/// queue on the sender's own device (one packet) has its drops there, named, and the
/// bottleneck none.
#[test]
fn the_drop_ledger_catches_an_undersized_queue_off_the_bottleneck() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let clean = ledger_of_a_flow("cctl-il", false);
    assert!(
        clean.bottleneck > 0,
        "a reno flow fills 20 packets: {clean:?}"
    );
    assert!(clean.unintended().is_empty(), "{clean:?}");
    let bad = ledger_of_a_flow("cctl-il", true);
    let places = bad.unintended();
    assert!(
        places.len() == 1
            && places[0].starts_with("qdisc cctl-il-snd1/cctl-ils0 tbf: ")
            && bad.unintended_total() > 0,
        "{bad:?}"
    );
    eprintln!("clean: {clean:?}\nundersized: {bad:?}");
}
