//! Upgrade in place and rollback on the running kernel, under load: flows through a
//! tbf bottleneck keep their version while new connections get the new one; bad
//! objects and bad input leave the running version in place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::registry::{self, LoadGuard, LoadOptions, LoadedCc};
use cctl_loader::sample::Sample;
use cctl_loader::upgrade::{self, UpgradeOptions};
use cctl_loader::Error;
use cctl_netem::flows::{run_bulk_flows, run_bulk_flows_observed, FlowResult, FlowSpec};
use cctl_netem::testbed::{PathSpec, Testbed};
use cctl_tests::{available, clean_slate, require_root, KERNEL};

/// Network-namespace prefix of these tests.
const PREFIX: &str = "cctl-up-";
/// The name the tests load H-TCP under.
const NAME: &str = "up_htcp";

fn now_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap();
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

fn record() -> LoadedCc {
    registry::list_loaded()
        .unwrap()
        .into_iter()
        .find(|r| r.name == NAME)
        .expect("up_htcp is loaded")
}

/// The map id the pinned link of NAME points at, as the kernel reports it.
fn linked_map_id() -> u32 {
    upgrade::running_map_id(NAME).expect("the link of up_htcp is readable")
}

fn bulk(n: usize, secs: u64) -> Vec<FlowSpec> {
    (0..n)
        .map(|i| FlowSpec {
            id: i,
            cc: NAME.into(),
            start: Duration::ZERO,
            stop: Duration::from_secs(secs),
            ..Default::default()
        })
        .collect()
}

fn assert_complete(phase: &str, results: &[FlowResult]) {
    for r in results {
        assert!(
            r.error.is_none() && r.bytes > 0,
            "{phase} flow {} failed: {:?}, {} bytes",
            r.id,
            r.error,
            r.bytes
        );
    }
}

/// Samples of the flows in `results` (by sender port), per port.
fn by_port<'a>(samples: &'a [Sample], results: &[FlowResult]) -> BTreeMap<u16, Vec<&'a Sample>> {
    let mut out = BTreeMap::new();
    for r in results {
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.sport == r.local_port).collect();
        out.insert(r.local_port, mine);
    }
    out
}

/// Every sample of every flow carries `map_id`; each flow has samples.
fn assert_version(phase: &str, flows: &BTreeMap<u16, Vec<&Sample>>, map_id: u32) {
    for (port, ss) in flows {
        assert!(ss.len() >= 5, "{phase} flow :{port}: {} samples", ss.len());
        let other: Vec<Option<u32>> = ss
            .iter()
            .map(|s| s.ca_map_id)
            .filter(|m| *m != Some(map_id))
            .collect();
        assert!(
            other.is_empty(),
            "{phase} flow :{port}: samples from maps {other:?}, expected only {map_id}"
        );
    }
}

/// Every sample after a backoff shows β = `beta` (the fixed_beta_pct of the version),
/// and at least one flow backed off.
fn assert_beta(phase: &str, flows: &BTreeMap<u16, Vec<&Sample>>, beta: f64) {
    let mut seen = 0;
    for (port, ss) in flows {
        for s in ss.iter().filter(|s| s.backoffs.unwrap_or(0) > 0) {
            let b = s.last_beta.expect("cctl sample has last_beta");
            assert!(
                (b - beta).abs() < 0.005,
                "{phase} flow :{port} backed off with β {b}, expected {beta}"
            );
            seen += 1;
        }
    }
    assert!(
        seen > 0,
        "{phase}: no flow backed off through a 100-packet queue"
    );
}

#[test]
fn upgrade_gives_new_connections_v2_while_old_ones_keep_v1_and_rollback_returns_to_v1() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let prefix = format!("{PREFIX}a");
    clean_slate(&prefix, &[NAME]);

    // v1: a fixed β of 70 %, so that each version's parameter shows in its samples.
    let rec = registry::load(
        "htcp",
        &LoadOptions {
            name: Some(NAME.into()),
            params: vec!["fixed_beta_pct=70".into()],
            owned: true,
            ..Default::default()
        },
    )
    .expect("htcp loads as up_htcp");
    let guard = LoadGuard::new(NAME);
    let v1_map = rec.versions[0].map_id;
    assert_eq!((rec.version, linked_map_id()), (1, v1_map));

    let bed = Testbed::create(&PathSpec::new(&prefix, 20, 100)).expect("testbed");
    let mut trace = Trace::start(TraceConfig {
        interval: Duration::from_millis(50),
        port: None,
        cc: Some(NAME.into()),
        netns_cookie: None,
    })
    .expect("collector attaches");

    let (started_tx, started_rx) = mpsc::channel();
    let (old, new, back, swap_up, swap_back, t_up) = std::thread::scope(|s| {
        let bed = &bed;
        // Old connections: 3 flows for 16 s, established before the upgrade.
        let old = s.spawn(move || {
            run_bulk_flows_observed(
                bed,
                5401,
                &bulk(3, 16),
                Arc::new(AtomicBool::new(false)),
                move |id, port| {
                    let _ = started_tx.send((id, port));
                },
            )
        });
        for _ in 0..3 {
            started_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("old flows connect");
        }
        std::thread::sleep(Duration::from_millis(1500));

        let t_up = now_ns();
        let swap_up = upgrade::upgrade(
            NAME,
            &UpgradeOptions {
                params: vec!["fixed_beta_pct=55".into()],
                ..Default::default()
            },
        )
        .expect("upgrade to fixed_beta_pct=55");
        // New connections after the upgrade.
        let new = run_bulk_flows(bed, 5402, &bulk(2, 5), Arc::new(AtomicBool::new(false)))
            .expect("new flows run");
        let swap_back = upgrade::rollback(NAME, None).expect("rollback");
        // Connections after the rollback.
        let back = run_bulk_flows(bed, 5403, &bulk(2, 3), Arc::new(AtomicBool::new(false)))
            .expect("flows after rollback run");
        let old = old.join().unwrap().expect("old flows run");
        (old, new, back, swap_up, swap_back, t_up)
    });
    std::thread::sleep(Duration::from_millis(200));
    let samples = trace.drain();
    let stats = trace.finish().expect("collector stops");
    bed.destroy().expect("testbed removed");
    eprintln!(
        "old {:?}\nnew {:?}\nback {:?}\n{stats:?}",
        old.iter()
            .map(|r| r.mean_throughput_bps() / 1e6)
            .collect::<Vec<_>>(),
        new.iter()
            .map(|r| r.mean_throughput_bps() / 1e6)
            .collect::<Vec<_>>(),
        back.iter()
            .map(|r| r.mean_throughput_bps() / 1e6)
            .collect::<Vec<_>>()
    );

    // The swaps: v1 → v2 (a new map, fixed_beta_pct 55, other tunables kept) → v1.
    assert_eq!((swap_up.from.version, swap_up.to.version), (1, 2));
    assert_eq!(swap_up.from.map_id, v1_map);
    let v2_map = swap_up.to.map_id;
    assert_ne!(v2_map, v1_map);
    assert_eq!(swap_up.to.params["fixed_beta_pct"], 55);
    assert_eq!(
        swap_up
            .to
            .params
            .iter()
            .filter(|(k, v)| swap_up.from.params[*k] != **v)
            .count(),
        1,
        "only fixed_beta_pct changes"
    );
    assert_eq!((swap_back.from.version, swap_back.to.version), (2, 1));
    let rec = record();
    assert_eq!(rec.version, 1);
    assert_eq!(rec.params["fixed_beta_pct"], 70);
    let versions: Vec<(u32, u32, u32)> = rec
        .versions
        .iter()
        .map(|v| (v.version, v.map_id, v.params["fixed_beta_pct"]))
        .collect();
    assert_eq!(versions, vec![(1, v1_map, 70), (2, v2_map, 55)]);
    assert_eq!(linked_map_id(), v1_map);
    assert!(registry::version_pin(NAME, 1).exists() && registry::version_pin(NAME, 2).exists());
    let recs = [rec];
    assert_eq!(upgrade::version_of_map(&recs, v2_map), Some((NAME, 2)));

    // Nothing broke: every flow completed, none lost its connection.
    assert_complete("old", &old);
    assert_complete("new", &new);
    assert_complete("after rollback", &back);
    assert_eq!(stats.dropped, 0, "ring buffer dropped samples: {stats:?}");

    // Old connections stayed on v1 (β 0.70) and kept transferring after the upgrade;
    // new ones got v2 (β 0.55); those after the rollback v1 again.
    let old_s = by_port(&samples, &old);
    let new_s = by_port(&samples, &new);
    let back_s = by_port(&samples, &back);
    assert_version("old", &old_s, v1_map);
    assert_version("new", &new_s, v2_map);
    assert_version("after rollback", &back_s, v1_map);
    for (port, ss) in &old_s {
        let at_up = ss
            .iter()
            .filter(|s| s.ts_ns <= t_up)
            .map(|s| s.bytes_acked)
            .max();
        let last = ss.iter().map(|s| s.bytes_acked).max();
        let (at_up, last) = (at_up.unwrap_or(0), last.unwrap_or(0));
        assert!(
            last > at_up + 1_000_000,
            "old flow :{port} stalled after the upgrade: {at_up} → {last} bytes acked"
        );
    }
    assert_beta("new", &new_s, 0.55);
    assert_beta("old", &old_s, 0.70);

    // Unloading removes the link and every version's pin.
    guard.unload().expect("unload");
    assert!(!available().contains(&NAME.to_string()));
    assert!(!Path::new(registry::PIN_DIR).join(NAME).exists());
    assert!(!Path::new(registry::VERSION_DIR).join(NAME).exists());
    assert!(!Path::new(registry::META_DIR)
        .join(format!("{NAME}.json"))
        .exists());
}

/// Compiles the BPF objects of tests/fixtures with clang into a fresh directory.
fn fixtures() -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let out = std::env::temp_dir().join(format!("cctl-up-fixtures-{}", std::process::id()));
    std::fs::create_dir_all(&out).unwrap();
    for f in ["dummy_ops", "rejected", "reno_object"] {
        let o = std::process::Command::new("clang")
            .args(["-g", "-O2", "-target", "bpf", "-c"])
            .arg(src.join(format!("{f}.bpf.c")))
            .arg("-o")
            .arg(out.join(format!("{f}.bpf.o")))
            .output()
            .expect("running clang (install it: `make deps`)");
        assert!(
            o.status.success(),
            "clang {f}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    out
}

/// One short traced flow with NAME; returns the map ids its samples carry.
fn flow_map_ids(bed: &Testbed, port: u16) -> Vec<Option<u32>> {
    let mut trace = Trace::start(TraceConfig {
        interval: Duration::from_millis(50),
        port: Some(port),
        cc: Some(NAME.into()),
        netns_cookie: None,
    })
    .expect("collector attaches");
    let r = run_bulk_flows(bed, port, &bulk(1, 2), Arc::new(AtomicBool::new(false)))
        .expect("flow runs");
    std::thread::sleep(Duration::from_millis(200));
    let samples = trace.drain();
    trace.finish().expect("collector stops");
    assert_complete("probe", &r);
    let mut ids: Vec<Option<u32>> = samples
        .iter()
        .filter(|s| s.sport == r[0].local_port)
        .map(|s| s.ca_map_id)
        .collect();
    assert!(ids.len() >= 5, "{} samples", ids.len());
    ids.dedup();
    ids
}

#[test]
fn bad_objects_and_bad_input_leave_the_running_version_in_place() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let prefix = format!("{PREFIX}b");
    clean_slate(&prefix, &[NAME]);
    let dir = fixtures();
    let (rec, guard) = cctl_tests::load_owned_as("htcp", NAME);
    let v1 = rec.versions[0].map_id;
    let unchanged = |what: &str| {
        let r = record();
        assert_eq!(
            (r.version, r.versions.len(), linked_map_id()),
            (1, 1, v1),
            "{what} changed the running version"
        );
        assert!(
            !registry::version_pin(NAME, 2).exists(),
            "{what} left a pin"
        );
    };
    let object = |f: &str| UpgradeOptions {
        object: Some(dir.join(format!("{f}.bpf.o"))),
        ..Default::default()
    };

    // A struct_ops object of another type (bpf_dummy_ops) is refused, naming both.
    let e = upgrade::upgrade(NAME, &object("dummy_ops")).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::BadObject { .. }), "{msg}");
    assert!(
        msg.contains("'fx_dummy' is a struct bpf_dummy_ops, not a struct tcp_congestion_ops"),
        "{msg}"
    );
    unchanged("a bpf_dummy_ops object");

    // An object the verifier rejects: the verifier's own words are in the error.
    let e = upgrade::upgrade(NAME, &object("rejected")).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Rejected { .. }), "{msg}");
    assert!(
        msg.contains("fx_init") && msg.contains("access beyond struct"),
        "no verifier message in: {msg}"
    );
    unchanged("a rejected object");

    // Bad input.
    let e = upgrade::upgrade("up_none", &UpgradeOptions::default()).unwrap_err();
    assert!(e.to_string().contains("is not loaded"), "{e}");
    let e = upgrade::upgrade(
        NAME,
        &UpgradeOptions {
            params: vec!["beta_max_pct=101".into()],
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("beta_max_pct") && e.to_string().contains("[10, 100] %"),
        "{e}"
    );
    unchanged("an out-of-range parameter");
    let e = upgrade::rollback(NAME, None).unwrap_err();
    assert!(
        matches!(e, Error::NoVersion { .. }) && e.to_string().contains("no version before v1"),
        "{e}"
    );
    let e = upgrade::rollback(NAME, Some(7)).unwrap_err();
    assert!(e.to_string().contains("no version v7"), "{e}");
    unchanged("a rollback without an earlier version");

    // Connections still get v1 and work.
    let bed = Testbed::create(&PathSpec::new(&prefix, 20, 100)).expect("testbed");
    assert_eq!(flow_map_ids(&bed, 5411), vec![Some(v1)]);

    // A valid object becomes v2 under the registered name; rollback returns to v1.
    let swap = upgrade::upgrade(NAME, &object("reno_object")).expect("a valid object loads");
    assert_eq!(swap.to.version, 2);
    assert!(swap.to.object.is_some());
    assert!(available().contains(&NAME.to_string()));
    assert_eq!(flow_map_ids(&bed, 5412), vec![Some(swap.to.map_id)]);
    upgrade::rollback(NAME, None).expect("rollback to v1");
    assert_eq!(flow_map_ids(&bed, 5413), vec![Some(v1)]);
    bed.destroy().expect("testbed removed");

    guard.unload().expect("unload");
    assert!(!Path::new(registry::VERSION_DIR).join(NAME).exists());

    // Version pins of a name whose link pin is gone (a crash) are removed.
    registry::load(
        "reno",
        &LoadOptions {
            name: Some(NAME.into()),
            owned: true,
            ..Default::default()
        },
    )
    .expect("reno loads as up_htcp");
    std::fs::remove_file(Path::new(registry::PIN_DIR).join(NAME)).unwrap();
    assert!(registry::version_pin(NAME, 1).exists());
    registry::remove_orphans().unwrap();
    assert!(!Path::new(registry::VERSION_DIR).join(NAME).exists());
    assert!(!Path::new(registry::META_DIR)
        .join(format!("{NAME}.json"))
        .exists());
    let _ = std::fs::remove_dir_all(dir);
}
