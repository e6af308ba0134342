//! A storm of concurrent commands on one name while flows run and the exporter is
//! scraped: `set` (three threads, each writing pairs of live tunables that always add up
//! to the same sum), `upgrade` and `rollback` (one thread), and readers (`list` with the
//! values in force, and `/metrics` of a running `cctl exporter`). A BPF program
//! (bpf/probe/livecheck.bpf.c) reads the pair as the ports do on every received segment and
//! counts torn reads: there must be none. No operation may fail or hang, and afterwards
//! every version's record holds what the kernel runs (no lost update).
//!
//! The storm lasts until the setters have made `CCTL_STORM_SETS` sets (default 100, CI's
//! short storm; one set waits for an RCU grace period, and the sets of one name are
//! serialized); the figures of a longer one are in the README.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cctl_loader::live;
use cctl_loader::livecheck::LiveCheck;
use cctl_loader::registry;
use cctl_loader::upgrade::{self, UpgradeOptions};
use cctl_tests::{cctl_bin, clean_slate, require_root, KERNEL};

const NAME: &str = "st_htcp";
/// The pairs (beta_min_pct, beta_max_pct) the setters write; each adds up to SUM.
const PAIRS: &[(u32, u32)] = &[(50, 80), (60, 70), (55, 75), (65, 65), (45, 85)];
const SUM: u32 = 130;
const EXPORTER: &str = "127.0.0.1:47611";

fn set_congestion(s: &TcpStream) {
    let name = NAME.as_bytes();
    // SAFETY: a valid socket and a buffer of `name.len()` bytes.
    let rc = unsafe {
        nix::libc::setsockopt(
            s.as_raw_fd(),
            nix::libc::IPPROTO_TCP,
            nix::libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as u32,
        )
    };
    assert_eq!(
        rc,
        0,
        "TCP_CONGESTION {NAME}: {}",
        std::io::Error::last_os_error()
    );
}

#[test]
fn a_storm_of_sets_upgrades_and_reads_tears_nothing_loses_nothing_and_ends() {
    require_root();
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    clean_slate("cctl-st-", &[NAME]);
    let sets_target: u64 = std::env::var("CCTL_STORM_SETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let (_, _guard) = cctl_tests::load_owned_as("htcp", NAME);
    live::set(NAME, &["beta_min_pct=50".into(), "beta_max_pct=80".into()]).unwrap();
    let check = LiveCheck::attach(NAME, 1, "beta_min_pct", "beta_max_pct", SUM)
        .expect("the checker attaches");
    // The control: a checker told the wrong sum must count every read as torn (so the
    // checker reads the values the ports read).
    let control = LiveCheck::attach(NAME, 1, "beta_min_pct", "beta_max_pct", SUM + 1)
        .expect("the control attaches");

    // Flows: four bulk loopback connections running the name.
    let stop = Arc::new(AtomicBool::new(false));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let mut threads = Vec::new();
    {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            listener.set_nonblocking(true).unwrap();
            let mut sinks = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut s, _)) => {
                        let stop = stop.clone();
                        sinks.push(std::thread::spawn(move || {
                            let mut buf = vec![0u8; 1 << 16];
                            s.set_read_timeout(Some(Duration::from_millis(200)))
                                .unwrap();
                            while !stop.load(Ordering::Relaxed) {
                                if let Ok(0) = s.read(&mut buf) {
                                    break;
                                }
                            }
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
            for s in sinks {
                let _ = s.join();
            }
        }));
    }
    for _ in 0..4 {
        let stop = stop.clone();
        threads.push(std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            set_congestion(&s);
            let buf = vec![7u8; 1 << 16];
            while !stop.load(Ordering::Relaxed) {
                if s.write_all(&buf).is_err() {
                    break;
                }
            }
        }));
    }

    // The exporter, scraped by a thread.
    let mut exporter = Command::new(cctl_bin())
        .args(["exporter", "--listen", EXPORTER])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let ops = Arc::new(AtomicU64::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let counts: Vec<Arc<AtomicU64>> = (0..5).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut workers = Vec::new();
    let spawn = |kind: usize, f: Box<dyn Fn(u64) -> Result<(), String> + Send>| {
        let (ops, failures, count) = (ops.clone(), failures.clone(), counts[kind].clone());
        let sets = counts[0].clone();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while sets.load(Ordering::Relaxed) < sets_target {
                assert!(Instant::now() < deadline, "the storm did not end in 600 s");
                if let Err(e) = f(i) {
                    failures.lock().unwrap().push(e);
                }
                i += 1;
                count.fetch_add(1, Ordering::Relaxed);
                ops.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    for t in 0..3u64 {
        workers.push(spawn(
            0,
            Box::new(move |i| {
                let (a, b) = PAIRS[((i + t) % PAIRS.len() as u64) as usize];
                live::set(
                    NAME,
                    &[format!("beta_min_pct={a}"), format!("beta_max_pct={b}")],
                )
                .map(|_| ())
                .map_err(|e| format!("set: {e}"))
            }),
        ));
    }
    // Upgrades and rollbacks to v1, at most 20 versions (each one stays loaded).
    workers.push(spawn(
        1,
        Box::new(|i| {
            std::thread::sleep(Duration::from_millis(50));
            if i % 2 == 0 && i < 40 {
                upgrade::upgrade(NAME, &UpgradeOptions::default())
                    .map(|_| ())
                    .map_err(|e| format!("upgrade: {e}"))
            } else {
                upgrade::rollback(NAME, Some(1))
                    .map(|_| ())
                    .or_else(|e| match e {
                        // Already on v1 (the previous rollback): not a failure.
                        cctl_loader::Error::NoVersion { .. } => Ok(()),
                        e => Err(format!("rollback: {e}")),
                    })
            }
        }),
    ));
    workers.push(spawn(
        2,
        Box::new(|_| {
            std::thread::sleep(Duration::from_millis(2));
            let mut l = registry::list_loaded().map_err(|e| format!("list: {e}"))?;
            for r in &mut l {
                live::refresh(r);
            }
            let r = l
                .iter()
                .find(|r| r.name == NAME)
                .ok_or("list: the name is gone")?;
            let (a, b) = (r.params.get("beta_min_pct"), r.params.get("beta_max_pct"));
            match (a, b) {
                (Some(a), Some(b)) if a + b == SUM => Ok(()),
                _ => Err(format!("list: the pair in force is {a:?} + {b:?}")),
            }
        }),
    ));
    workers.push(spawn(
        3,
        Box::new(|_| {
            std::thread::sleep(Duration::from_millis(20));
            let mut s = match TcpStream::connect(EXPORTER) {
                Ok(s) => s,
                Err(_) => return Ok(()), // not listening yet
            };
            write!(
                s,
                "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            .map_err(|e| format!("scrape: {e}"))?;
            let mut out = String::new();
            s.read_to_string(&mut out)
                .map_err(|e| format!("scrape: {e}"))?;
            if out.starts_with("HTTP/1.1 200") {
                Ok(())
            } else {
                Err(format!("scrape: {}", out.lines().next().unwrap_or("")))
            }
        }),
    ));
    let started = Instant::now();
    for w in workers {
        w.join().expect("a storm thread panicked");
    }
    let wall = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    let c = check.counts();
    let wrong = control.counts();
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(exporter.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let status = exporter.wait().unwrap();
    let mut exporter_log = String::new();
    let _ = exporter
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut exporter_log);

    // No lost update: every version's record holds what the kernel runs.
    let mut rec = registry::list_loaded()
        .unwrap()
        .into_iter()
        .find(|r| r.name == NAME)
        .unwrap();
    let recorded: Vec<_> = rec.versions.iter().map(|v| v.params.clone()).collect();
    live::refresh(&mut rec);
    let failures = failures.lock().unwrap();
    println!(
        "storm: {} operations in {:.1} s (sets {}, upgrades+rollbacks {}, lists {}, scrapes {}), \
         {} versions; BPF reads of the pair {}, torn {}; failures {}",
        ops.load(Ordering::Relaxed),
        wall.as_secs_f64(),
        counts[0].load(Ordering::Relaxed),
        counts[1].load(Ordering::Relaxed),
        counts[2].load(Ordering::Relaxed),
        counts[3].load(Ordering::Relaxed),
        rec.versions.len(),
        c.reads,
        c.torn,
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "operations failed: {:?}",
        &failures[..failures.len().min(5)]
    );
    assert!(
        c.reads >= 1000,
        "the checker saw the flows: {} reads",
        c.reads
    );
    assert_eq!(c.torn, 0, "torn reads of the live pair");
    assert!(
        wrong.reads > 0 && wrong.torn == wrong.reads,
        "the control (wrong sum) counts every read as torn: {wrong:?}"
    );
    for (v, before) in rec.versions.iter().zip(&recorded) {
        for k in ["beta_min_pct", "beta_max_pct"] {
            assert_eq!(
                v.params.get(k),
                before.get(k),
                "v{}: the record says {k} = {:?}, the kernel runs {:?} (a lost update)",
                v.version,
                before.get(k),
                v.params.get(k)
            );
        }
    }
    assert!(
        status.success(),
        "the exporter exits 0 on SIGTERM: {exporter_log}"
    );
}
