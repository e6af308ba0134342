//! `cctl exporter` scraped by a real Prometheus server (Debian's `prometheus`, 2.42): bulk
//! flows with cctl's htcp and cubic (under this test's own names) through a veth/tbf
//! bottleneck, with a 2-s loss burst (every ACK dropped) that fires their retransmission
//! timers; through Prometheus's HTTP API, the target is up without scrape errors, the
//! established flows per congestion control are the true numbers, and the retransmission and
//! CA-state counters equal what a trace taken in the same run read of the same kernel
//! counters (total_retrans; the collector's per-flow counts of entries into CWR, Recovery and
//! Loss), once every flow has settled. Afterwards the server is stopped and the exporter has
//! detached its BPF programs.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cctl_loader::collector::{Trace, TraceConfig};
use cctl_loader::migrate::{self, SocketFilter};
use cctl_loader::sample::{CaState, Sample};
use cctl_netem::netns::spawn_in_netns;
use cctl_netem::testbed::{PathSpec, Testbed};
use cctl_tests::{cctl_bin, clean_slate, load_owned_as, require_root, KERNEL};
use socket2::{Domain, Socket, Type};

const PREFIX: &str = "cctl-xp";
/// The senders' congestion controls: cctl's htcp and cubic under names of this test's own,
/// so that the exporter's counters by `cc` hold this test's flows and no other flow of the
/// host (a busy host's cubic flows enter CWR and Recovery too).
const HTCP: &str = "xp_htcp";
const CUBIC: &str = "xp_cubic";
/// The receivers' congestion control (the receiver namespace's default), apart from both.
const RECEIVER_CC: &str = "reno";
const PORT: u16 = 5311;
const FLOWS_PER_CC: usize = 2;
/// How long each flow sends at full speed, through a 20 Mbit/s bottleneck with a 30-packet
/// queue: long enough for losses, recoveries and backoffs.
const BULK: Duration = Duration::from_secs(8);
const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A free TCP port on 127.0.0.1 (the kernel's pick, released for the child to take).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process stopped with SIGTERM (then SIGKILL after 10 s) when dropped, even on
/// panic; `stop` returns its exit code.
struct ChildGuard {
    name: &'static str,
    child: Option<Child>,
}

impl ChildGuard {
    fn stop(&mut self) -> Option<i32> {
        let mut child = self.child.take()?;
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                return st.code();
            }
            if Instant::now() > deadline {
                eprintln!("{} ignored SIGTERM for 10 s: killing it", self.name);
                let _ = child.kill();
                return child.wait().ok().and_then(|s| s.code());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A temporary directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `GET path` on 127.0.0.1:port, HTTP/1.1 with Connection: close; (status code, body).
fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok((code, body))
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((len, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Waits until `GET path` answers 200, for at most `timeout`.
fn wait_http_ok(port: u16, path: &str, timeout: Duration, what: &str) {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok((200, _)) = http_get(port, path) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not answer {path} within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The Prometheus server under test.
struct Prometheus {
    port: u16,
    guard: ChildGuard,
    _dir: TempDir,
}

impl Prometheus {
    /// Starts Prometheus with its own storage in a temporary directory, scraping the exporter
    /// at 127.0.0.1:`target` every second.
    fn start(target: u16) -> Prometheus {
        assert!(
            Path::new(PROMETHEUS).exists(),
            "{PROMETHEUS} missing: install Debian's prometheus package (`make deps` does)"
        );
        let dir = std::env::temp_dir().join(format!("cctl-prometheus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let dir = TempDir(dir);
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\n\
             scrape_configs:\n  - job_name: cctl\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        );
        std::fs::write(dir.0.join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.0.join("prometheus.log")).unwrap();
        let child = Command::new(PROMETHEUS)
            .arg(format!(
                "--config.file={}",
                dir.0.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.0.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        let p = Prometheus {
            port,
            guard: ChildGuard {
                name: "prometheus",
                child: Some(child),
            },
            _dir: dir,
        };
        wait_http_ok(port, "/-/ready", Duration::from_secs(30), "prometheus");
        p
    }

    /// The `data` of an API call, panicking on an error status.
    fn api(&self, path: &str) -> serde_json::Value {
        let (code, body) = http_get(self.port, path).expect("prometheus answers");
        let v: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"));
        assert_eq!(code, 200, "{path}: {body}");
        assert_eq!(v["status"], "success", "{path}: {body}");
        v["data"].clone()
    }

    /// An instant PromQL query: label set -> value.
    fn query(&self, promql: &str) -> Vec<(BTreeMap<String, String>, f64)> {
        let data = self.api(&format!("/api/v1/query?query={}", url_encode(promql)));
        data["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{promql}: {data}"))
            .iter()
            .map(|r| {
                let labels = r["metric"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                    .collect();
                let value = r["value"][1].as_str().unwrap().parse::<f64>().unwrap();
                (labels, value)
            })
            .collect()
    }

    /// The single value of `promql`, 0 when it has no result (a series not yet created).
    fn value(&self, promql: &str) -> f64 {
        let r = self.query(promql);
        assert!(r.len() <= 1, "{promql}: {r:?}");
        r.first().map_or(0.0, |(_, v)| *v)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.0.join("prometheus.log")).unwrap_or_default()
    }
}

/// What the test's own trace says about its flows (the sender sockets, local port != PORT),
/// by congestion control: retransmitted segments (each flow's largest total_retrans) and
/// entries into CWR/Recovery/Loss (each flow's largest kernel count, `*_entries`).
#[derive(Debug, Default, PartialEq)]
struct Truth {
    retrans: BTreeMap<String, u64>,
    entries: BTreeMap<(String, &'static str), u64>,
}

const STATES: [&str; 3] = ["cwr", "recovery", "loss"];

fn kernel_entries(s: &Sample) -> [u32; 3] {
    [s.cwr_entries, s.recovery_entries, s.loss_entries]
}

fn truth(samples: &[Sample]) -> Truth {
    let mut t = Truth::default();
    let mut per_flow: HashMap<u64, (&'static str, u32, [u32; 3])> = HashMap::new();
    for s in samples.iter().filter(|s| s.dport == PORT) {
        let f = per_flow.entry(s.cookie).or_insert((s.cc, 0, [0; 3]));
        f.1 = f.1.max(s.total_retrans);
        for (m, k) in f.2.iter_mut().zip(kernel_entries(s)) {
            *m = (*m).max(k);
        }
    }
    for (cc, retrans, entries) in per_flow.values() {
        *t.retrans.entry(cc.to_string()).or_default() += u64::from(*retrans);
        for (st, n) in STATES.into_iter().zip(entries) {
            *t.entries.entry((cc.to_string(), st)).or_default() += u64::from(*n);
        }
    }
    t
}

/// Entries into CWR/Recovery/Loss seen as a change of state between two samples of a flow
/// (a lower bound of the kernel's counts: a state entered and left between two samples is
/// not seen): how many, and those the kernel's count did not grow over (from, to, count).
fn sampled_entries(samples: &[Sample]) -> (usize, Vec<(CaState, CaState, u32)>) {
    let mut last: HashMap<u64, &Sample> = HashMap::new();
    let (mut seen, mut uncounted) = (0, Vec::new());
    for s in samples.iter().filter(|s| s.dport == PORT) {
        if let Some(p) = last.insert(s.cookie, s) {
            let i = match s.ca_state {
                CaState::Cwr => 0,
                CaState::Recovery => 1,
                CaState::Loss => 2,
                _ => continue,
            };
            if p.ca_state != s.ca_state {
                seen += 1;
                if kernel_entries(s)[i] == kernel_entries(p)[i] {
                    uncounted.push((p.ca_state, s.ca_state, kernel_entries(s)[i]));
                }
            }
        }
    }
    (seen, uncounted)
}

/// Whether every flow of the test (sender side) has been idle for the last second of
/// samples: each of its samples since then in Open, with nothing lost or retransmitted
/// outstanding and at most one segment (a ping) in flight, so its send queue is drained and
/// no more CA-state changes or retransmissions are coming. A flow still sending what its
/// bulk transfer queued in the socket is not idle, though it passes through Open.
fn quiescent(samples: &[Sample]) -> bool {
    let Some(now) = samples.iter().map(|s| s.ts_ns).max() else {
        return false;
    };
    let mut idle: HashMap<u64, bool> = HashMap::new();
    for s in samples
        .iter()
        .filter(|s| s.dport == PORT && s.ts_ns + 1_000_000_000 >= now)
    {
        let quiet = s.ca_state == CaState::Open
            && s.lost_out == 0
            && s.retrans_out == 0
            && s.packets_out <= 1;
        *idle.entry(s.cookie).or_insert(true) &= quiet;
    }
    idle.len() == 2 * FLOWS_PER_CC && idle.values().all(|&q| q)
}

/// After `after`, drops every segment the receiver namespace `ns` sends to `sender` (its
/// ACKs) for `d`: a blackhole route, more specific than the path's own, added then
/// removed. Long enough for the senders' retransmission timers (200 ms at least) to fire.
fn blackhole_acks(
    ns: String,
    sender: std::net::Ipv4Addr,
    after: Duration,
    d: Duration,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let dst = format!("{sender}/32");
        let ip = |verb: &str| {
            let st = Command::new("ip")
                .args(["-n", &ns, "route", verb, "blackhole", &dst])
                .status()
                .expect("ip runs");
            assert!(st.success(), "ip -n {ns} route {verb} blackhole {dst}");
        };
        std::thread::sleep(after);
        ip("add");
        std::thread::sleep(d);
        ip("del");
    })
}

/// (id, name) of the loaded BPF programs named like cctl's collector and census iterator.
fn cctl_progs() -> BTreeSet<(u32, String)> {
    let out = Command::new("bpftool")
        .args(["prog", "show"])
        .output()
        .expect("bpftool runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (id, rest) = l.split_once(':')?;
            let name = rest
                .split_whitespace()
                .skip_while(|w| *w != "name")
                .nth(1)?;
            let id = id.trim().parse().ok()?;
            (name == "cctl_tcp_probe" || name == "cctl_migrate").then(|| (id, name.to_string()))
        })
        .collect()
}

/// ESTABLISHED sockets of `cc` outside this test's namespaces (the host's own).
fn others_established(cc: &str) -> u64 {
    migrate::sockets_all_namespaces(&SocketFilter::default())
        .expect("census")
        .iter()
        .filter(|s| s.state == "ESTABLISHED" && s.cc == cc && !s.netns.starts_with(PREFIX))
        .count() as u64
}

/// The test's flows: a receiver in the receiver namespace, and `FLOWS_PER_CC` senders per
/// congestion control in the sender namespace that send at full speed for [`BULK`], then
/// stay established and send one small message every 300 ms (so that both collectors take
/// a last sample of each flow after its losses are over) until `release` is set.
struct Flows {
    stop: Arc<AtomicBool>,
    release: Arc<AtomicBool>,
    senders: Vec<Joined>,
    receiver: Joined,
    bulk_done: Arc<std::sync::atomic::AtomicUsize>,
}

/// A thread in a namespace: joining it (outer), then its own result (inner).
type Joined = std::thread::JoinHandle<std::io::Result<std::io::Result<u64>>>;

fn start_flows(bed: &Testbed) -> Flows {
    let dst = SocketAddrV4::new(bed.receiver_addr(), PORT);
    let total = 2 * FLOWS_PER_CC;
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = spawn_in_netns(bed.receiver_ns(), move || -> std::io::Result<u64> {
        let l = TcpListener::bind(dst)?;
        ready_tx.send(()).unwrap();
        let mut readers = Vec::new();
        for _ in 0..total {
            let (mut s, _) = l.accept()?;
            readers.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                let mut n = 0u64;
                while let Ok(k) = s.read(&mut buf) {
                    if k == 0 {
                        break;
                    }
                    n += k as u64;
                }
                n
            }));
        }
        Ok(readers.into_iter().map(|r| r.join().unwrap_or(0)).sum())
    })
    .expect("receiver thread");
    ready_rx
        .recv_timeout(Duration::from_secs(5))
        .expect("receiver listening");
    let stop = Arc::new(AtomicBool::new(false));
    let release = Arc::new(AtomicBool::new(false));
    let bulk_done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut senders = Vec::new();
    for i in 0..total {
        let cc = if i % 2 == 0 { HTCP } else { CUBIC };
        let (stop, release, bulk_done) = (stop.clone(), release.clone(), bulk_done.clone());
        senders.push(
            spawn_in_netns(bed.sender_ns(), move || -> std::io::Result<u64> {
                let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                s.set_tcp_congestion(cc.as_bytes())?;
                s.connect(&SocketAddr::from(dst).into())?;
                let mut s = TcpStream::from(s);
                let chunk = vec![0x5au8; 1 << 16];
                let t0 = Instant::now();
                let mut sent = 0u64;
                while t0.elapsed() < BULK && !stop.load(Ordering::Relaxed) {
                    s.write_all(&chunk)?;
                    sent += chunk.len() as u64;
                }
                bulk_done.fetch_add(1, Ordering::SeqCst);
                while !release.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(300));
                    s.write_all(b"ping")?;
                    sent += 4;
                }
                Ok(sent)
            })
            .expect("sender thread"),
        );
    }
    Flows {
        stop,
        release,
        senders,
        receiver,
        bulk_done,
    }
}

impl Flows {
    /// Ends every flow and returns the bytes sent and received.
    fn end(self) -> (u64, u64) {
        self.stop.store(true, Ordering::SeqCst);
        self.release.store(true, Ordering::SeqCst);
        let sent = self
            .senders
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap()
                    .expect("joined the namespace")
                    .expect("sender ran")
            })
            .sum();
        let got = self
            .receiver
            .join()
            .unwrap()
            .expect("joined the namespace")
            .expect("receiver ran");
        (sent, got)
    }
}

/// Polls `f` until it returns Ok or `timeout` passes; then panics with its last error.
fn eventually<T>(timeout: Duration, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("{e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

#[test]
fn a_real_prometheus_scrapes_flow_counts_retransmissions_and_ca_states_that_match_the_trace() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    clean_slate(PREFIX, &[HTCP, CUBIC]);
    let t_start = Instant::now();
    let progs_before = cctl_progs();
    let (_, htcp) = load_owned_as("htcp", HTCP);
    let (_, cubic) = load_owned_as("cubic", CUBIC);

    let mut spec = PathSpec::new(PREFIX, 20, 30);
    spec.subnet_octet = 97;
    let bed = Testbed::create(&spec).expect("veth/tbf testbed");
    let set_default = Command::new("ip")
        .args(["netns", "exec", bed.receiver_ns(), "sysctl", "-qw"])
        .arg(format!("net.ipv4.tcp_congestion_control={RECEIVER_CC}"))
        .status()
        .expect("ip netns exec runs");
    assert!(
        set_default.success(),
        "setting the receivers' congestion control"
    );

    // The exporter, as a service runs it, and Prometheus scraping it every second.
    let exporter_port = free_port();
    let exporter = Command::new(cctl_bin())
        .args([
            "exporter",
            "--listen",
            &format!("127.0.0.1:{exporter_port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cctl exporter starts");
    let mut exporter = ChildGuard {
        name: "cctl exporter",
        child: Some(exporter),
    };
    wait_http_ok(exporter_port, "/", Duration::from_secs(20), "cctl exporter");
    let prom = Prometheus::start(exporter_port);
    eventually(Duration::from_secs(15), || {
        let up = prom.value("up{job=\"cctl\"}");
        (up == 1.0)
            .then_some(())
            .ok_or(format!("up = {up}\n{}", prom.log()))
    });

    // The counters before the flows (host flows of these congestion controls may exist).
    let counters = |p: &Prometheus| {
        let mut m = BTreeMap::new();
        for cc in [HTCP, CUBIC] {
            m.insert(
                format!("retrans {cc}"),
                p.value(&format!("cctl_retransmitted_segments_total{{cc=\"{cc}\"}}")),
            );
            for st in STATES {
                m.insert(
                    format!("{st} {cc}"),
                    p.value(&format!(
                        "cctl_ca_state_entries_total{{cc=\"{cc}\",state=\"{st}\"}}"
                    )),
                );
            }
        }
        m
    };
    let before = counters(&prom);

    // The trace of the same run, then the flows.
    // Only the test's flows (in-kernel port filter): fewer samples for a loaded CI host.
    let mut trace = Trace::start(TraceConfig {
        port: Some(PORT),
        ..TraceConfig::default()
    })
    .expect("collector attaches");
    let flows = start_flows(&bed);
    let mut samples = Vec::new();
    // A loss burst: every flow's ACKs dropped for 2 s, 2 s into the bulk transfer, so that
    // the retransmission timers fire (entries into Loss) in every run.
    let blackhole = blackhole_acks(
        bed.receiver_ns().to_string(),
        bed.sender_addr(),
        Duration::from_secs(2),
        Duration::from_secs(2),
    );
    let bulk_done = flows.bulk_done.clone();
    trace.collect_while(&mut samples, |_| {
        bulk_done.load(Ordering::SeqCst) < 2 * FLOWS_PER_CC
    });
    // Quiet: losses are repaired, every flow is back in Open with nothing retransmitted or
    // lost outstanding (after the loss burst's timeouts that can take seconds: a flow still
    // recovering when the trace stopped kept counting in the exporter); then 1 s more, the
    // pings giving both collectors a last sample of each flow after its last change.
    let quiet_from = Instant::now();
    loop {
        let until = Instant::now() + Duration::from_millis(500);
        trace.collect_while(&mut samples, |_| Instant::now() < until);
        if quiet_from.elapsed() >= Duration::from_secs(2) && quiescent(&samples) {
            break;
        }
        assert!(
            quiet_from.elapsed() < Duration::from_secs(60),
            "the flows did not settle (Open, nothing lost or retransmitted outstanding) \
             within 60 s of the bulk transfer"
        );
    }
    let settled_until = Instant::now() + Duration::from_secs(1);
    trace.collect_while(&mut samples, |_| Instant::now() < settled_until);
    // Every sample the kernel wrote, read: on a loaded host the reader may lag behind.
    let drained_by = Instant::now() + Duration::from_secs(10);
    while (samples.len() as u64) < trace.counters().kernel_emitted && Instant::now() < drained_by {
        samples.extend(trace.drain());
    }
    let c = trace.counters();
    assert_eq!(
        (c.dropped, samples.len() as u64),
        (0, c.kernel_emitted),
        "the test's own trace lost samples (ring buffer full, or not read in 10 s): its \
         truth would be incomplete"
    );
    blackhole
        .join()
        .expect("the loss burst was applied and removed");
    let truth = truth(&samples);
    let (sampled, uncounted) = sampled_entries(&samples);
    println!(
        "trace: {} samples; truth (kernel counts) {truth:?}; {sampled} entries seen as \
         changes between samples, {} of them with no growth of the kernel's count: {:?}",
        samples.len(),
        uncounted.len(),
        &uncounted[..uncounted.len().min(10)]
    );
    for cc in [HTCP, CUBIC] {
        let loss = truth.entries.get(&(cc.to_string(), "loss")).copied();
        assert!(
            loss.unwrap_or(0) > 0,
            "the 2-s loss burst fired no retransmission timer of a {cc} flow: {truth:?}"
        );
    }
    let total_retrans: u64 = truth.retrans.values().sum();
    let recoveries: u64 = truth
        .entries
        .iter()
        .filter(|((_, st), _)| *st != "cwr")
        .map(|(_, n)| n)
        .sum();
    assert!(
        total_retrans > 0 && recoveries > 0,
        "the bottleneck caused no loss: nothing to compare ({truth:?})"
    );
    for cc in [HTCP, CUBIC] {
        assert!(
            samples.iter().any(|s| s.cc == cc && s.dport == PORT),
            "no sample of a {cc} flow"
        );
    }

    // While the flows are established: the target is healthy, the flow counts true.
    let targets = prom.api("/api/v1/targets");
    let active = targets["activeTargets"].as_array().unwrap();
    assert_eq!(active.len(), 1, "{targets}");
    assert_eq!(active[0]["health"], "up", "{targets}");
    assert_eq!(active[0]["lastError"], "", "{targets}");
    let established = eventually(Duration::from_secs(10), || {
        let got: BTreeMap<String, f64> = prom
            .query("cctl_established_sockets")
            .into_iter()
            .map(|(l, v)| (l["cc"].clone(), v))
            .collect();
        let mut want = BTreeMap::new();
        for (cc, ours) in [
            (HTCP, FLOWS_PER_CC),
            (CUBIC, FLOWS_PER_CC),
            (RECEIVER_CC, 2 * FLOWS_PER_CC),
        ] {
            let want_n = (ours as u64 + others_established(cc)) as f64;
            want.insert(cc.to_string(), want_n);
            if got.get(cc) != Some(&want_n) {
                return Err(format!(
                    "cctl_established_sockets: got {got:?}, want {want:?}"
                ));
            }
        }
        Ok(got)
    });
    println!("PromQL cctl_established_sockets: {established:?}");

    // The counters: what Prometheus scraped since `before` equals the trace's truth.
    let after = eventually(Duration::from_secs(10), || {
        let after = counters(&prom);
        for (key, v) in &after {
            let (what, cc) = key.split_once(' ').unwrap();
            let want = if what == "retrans" {
                truth.retrans.get(cc).copied().unwrap_or(0)
            } else {
                let st = STATES.into_iter().find(|s| *s == what).unwrap();
                truth
                    .entries
                    .get(&(cc.to_string(), st))
                    .copied()
                    .unwrap_or(0)
            };
            let got = v - before[key];
            if got != want as f64 {
                return Err(format!(
                    "{key}: Prometheus has {got} (now {v}, before {}), the trace {want}\n\
                     before {before:?}\nafter {after:?}\ntruth {truth:?}",
                    before[key]
                ));
            }
        }
        Ok(after)
    });
    println!("PromQL counters before {before:?}\nafter {after:?}");
    for promql in [
        "sum by (cc) (rate(cctl_acked_bytes_total[5s]))",
        "histogram_quantile(0.5, sum by (cc, le) (rate(cctl_cwnd_segments_bucket[10s])))",
        "cctl_algorithm_active_version",
        "cctl_collector_dropped_samples_total",
    ] {
        println!("PromQL {promql}: {:?}", prom.query(promql));
    }
    assert_eq!(
        prom.value(&format!("cctl_algorithm_active_version{{cc=\"{HTCP}\"}}")),
        1.0
    );
    assert!(
        !prom
            .query(&format!(
                "cctl_algorithm_parameter{{cc=\"{HTCP}\",cc_version=\"1\"}}"
            ))
            .is_empty(),
        "no parameters of {HTCP}"
    );
    assert!(prom.value(&format!("cctl_cwnd_segments_count{{cc=\"{HTCP}\"}}")) > 0.0);

    // Clean-up: the flows, the trace, Prometheus, then the exporter (SIGTERM: exit 0, and
    // its collector and census iterator are gone).
    let (sent, got) = flows.end();
    assert_eq!(sent, got, "the flows lost bytes");
    let stats = trace.finish().expect("trace stops");
    assert_eq!(stats.dropped, 0, "the test's trace dropped samples");
    let mut prom = prom;
    prom.guard.stop();
    let mut stderr = exporter.child.as_mut().unwrap().stderr.take().unwrap();
    let code = exporter.stop();
    let mut log = String::new();
    stderr.read_to_string(&mut log).unwrap();
    assert_eq!(code, Some(0), "exporter's exit; its stderr:\n{log}");
    assert!(log.contains("collector detached"), "{log}");
    // This test's own census (others_established) loaded an iterator too.
    migrate::release_iterator();
    eventually(Duration::from_secs(5), || {
        let now = cctl_progs();
        let left: Vec<_> = now.difference(&progs_before).collect();
        left.is_empty().then_some(()).ok_or(format!(
            "BPF programs left after the exporter stopped: {left:?}"
        ))
    });
    bed.destroy().expect("testbed removed");
    htcp.unload().expect("the test's htcp unloads");
    cubic.unload().expect("the test's cubic unloads");
    println!(
        "exporter test took {:.1} s",
        t_start.elapsed().as_secs_f64()
    );
}
