//! Latency under load, measured as irtt does: isochronous UDP probes from a client namespace,
//! echoed by a server in another, each probe's round trip and both one-way delays.
//!
//! The client sends probe `k` at `start + k·interval` after the run's t0 (absolute deadlines,
//! so a late wake-up does not shift the probes after it; a probe whose deadline has passed is
//! sent at once). The server stamps each probe when it reads it and again just before it echoes
//! it back. Every namespace shares the one kernel and its `CLOCK_MONOTONIC`, so the three hosts'
//! timestamps are on one clock and the one-way delays need no clock synchronisation:
//! forward = server rx − client tx, reverse = client rx − server tx, round trip = client rx −
//! client tx (the server's turnaround, tens of usec, included; irtt reports it apart).
//!
//! Lost forward or lost back: the server is a thread of this process, and [`Probes::finish`]
//! collects its log of the sequence numbers it received (with their stamps) after the client
//! has stopped listening. A probe the server never logged was lost forward; one it logged and
//! echoed but the client did not read within [`DRAIN_MS`] of the last send was lost back.
//!
//! Wire format (little endian; the rest of the payload is zeros): magic `cctP` (4 bytes), the
//! sequence number (u32), client tx, server rx and server tx in ns of `CLOCK_MONOTONIC`
//! (3 × u64), [`PROBE_HEADER_BYTES`] in all.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use cctl_metrics::delay::DelayStats;
use nix::time::{clock_gettime, ClockId};
use serde::{Deserialize, Serialize};

use crate::netns::udp_socket_in;

/// Bytes of a probe's header, the smallest probe payload (irtt's default `-l 0` likewise
/// sends the smallest packet its headers allow), in bytes.
pub const PROBE_HEADER_BYTES: usize = 32;

/// Largest probe payload, in bytes: a 1500-byte IPv4 packet less 28 bytes of IP and UDP
/// headers (irtt's documented maximum for IPv4).
pub const MAX_PROBE_BYTES: usize = 1472;

/// Default interval between probes, in ms: fine enough to see a queue build within one RTT;
/// irtt's own default is 1 s, latency-under-load tests run it at 10 ms or less.
pub const DEFAULT_INTERVAL_MS: u64 = 10;

/// Default probe payload, in bytes: the header alone, as irtt's default.
pub const DEFAULT_PROBE_BYTES: usize = PROBE_HEADER_BYTES;

/// How long the client keeps listening for echoes after its last probe, in ms; an echo that
/// comes later counts as lost on the way back (irtt waits 3 × the largest RTT, at least 4 s;
/// a testbed's queues hold well under a second).
pub const DRAIN_MS: u64 = 1_000;

/// How often blocked threads look at their stop flags, in ms (socket read timeout).
const POLL_MS: u64 = 50;

const MAGIC: [u8; 4] = *b"cctP";

/// What to measure: probes of `size_bytes` every `interval` from `start` to `stop` after t0,
/// marked with DSCP `dscp` (both directions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeSpec {
    /// Time between probes' send deadlines.
    pub interval: Duration,
    /// UDP payload of each probe (and of its echo), in bytes: [`PROBE_HEADER_BYTES`] to
    /// [`MAX_PROBE_BYTES`].
    pub size_bytes: usize,
    /// DiffServ code point of probes and echoes, 0..=63 (`IP_TOS` = dscp << 2, ECN bits 0).
    pub dscp: u8,
    /// First send deadline, after the run's t0.
    pub start: Duration,
    /// No probe is sent at or after this time after t0.
    pub stop: Duration,
}

impl ProbeSpec {
    /// Probes with the defaults ([`DEFAULT_INTERVAL_MS`], [`DEFAULT_PROBE_BYTES`], DSCP 0)
    /// from `start` to `stop` after t0.
    pub fn new(start: Duration, stop: Duration) -> ProbeSpec {
        ProbeSpec {
            interval: Duration::from_millis(DEFAULT_INTERVAL_MS),
            size_bytes: DEFAULT_PROBE_BYTES,
            dscp: 0,
            start,
            stop,
        }
    }

    /// The `IP_TOS` byte: the DSCP in its upper six bits, ECN (the lower two) not-ECT.
    pub fn tos(&self) -> u32 {
        u32::from(self.dscp) << 2
    }

    /// Checks the spec; the error says what was wrong and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        if self.interval.is_zero() {
            return Err("interval must be > 0".into());
        }
        if !(PROBE_HEADER_BYTES..=MAX_PROBE_BYTES).contains(&self.size_bytes) {
            return Err(format!(
                "size {} bytes: a probe needs {PROBE_HEADER_BYTES} to {MAX_PROBE_BYTES} bytes",
                self.size_bytes
            ));
        }
        if self.dscp > 63 {
            return Err(format!("dscp {}: a DSCP is 0 to 63", self.dscp));
        }
        if self.stop <= self.start {
            return Err(format!(
                "stop {:?} is not after start {:?}",
                self.stop, self.start
            ));
        }
        Ok(())
    }
}

/// One probe: when it was sent and what became of it. Delays are `None` where the probe
/// was lost before they could be measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// Sequence number, from 0 in send order.
    pub seq: u32,
    /// When the client sent it, in s after the run's t0.
    pub t_s: f64,
    /// Client rx − client tx, in usec (the server's turnaround included); `None`: no echo.
    pub rtt_us: Option<f64>,
    /// Server rx − client tx, in usec; `None`: lost forward.
    pub fwd_us: Option<f64>,
    /// Client rx − server tx, in usec; `None`: lost (either way).
    pub rev_us: Option<f64>,
}

/// The probes' counts, in probes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeCounts {
    /// Probes the client sent.
    pub sent: u64,
    /// Of those, probes the server read.
    pub server_received: u64,
    /// Of those, probes whose echo the client read in time.
    pub returned: u64,
    /// `sent − server_received`.
    pub lost_forward: u64,
    /// `server_received − returned`.
    pub lost_back: u64,
    /// Extra copies the client or the server read of a probe it already had.
    pub duplicates: u64,
    /// Probes the client failed to hand to the kernel (send errors; not in `sent`).
    pub send_errors: u64,
}

/// What a probe run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// What was asked for.
    pub spec: ProbeSpec,
    /// The counts.
    pub counts: ProbeCounts,
    /// Every probe sent, in send order.
    pub records: Vec<ProbeRecord>,
    /// The first error a thread met (a send or receive error), if any; the counts and
    /// records hold what was measured nevertheless.
    pub error: Option<String>,
}

/// A probe run in a few numbers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeSummary {
    /// Round trips of the returned probes.
    pub rtt: Option<DelayStats>,
    /// Forward one-way delays of the probes the server read.
    pub fwd: Option<DelayStats>,
    /// Reverse one-way delays of the returned probes.
    pub rev: Option<DelayStats>,
    /// Probes not returned, as a fraction of those sent (0 if none were sent).
    pub loss: f64,
    /// Probes lost forward, as a fraction of those sent.
    pub loss_forward: f64,
    /// Probes lost on the way back, as a fraction of those the server read.
    pub loss_back: f64,
}

impl ProbeResult {
    /// Percentiles of each delay and the loss fractions.
    pub fn summary(&self) -> ProbeSummary {
        let frac = |a: u64, b: u64| if b > 0 { a as f64 / b as f64 } else { 0.0 };
        let c = &self.counts;
        ProbeSummary {
            rtt: DelayStats::of(
                &self
                    .records
                    .iter()
                    .filter_map(|r| r.rtt_us)
                    .collect::<Vec<_>>(),
            ),
            fwd: DelayStats::of(
                &self
                    .records
                    .iter()
                    .filter_map(|r| r.fwd_us)
                    .collect::<Vec<_>>(),
            ),
            rev: DelayStats::of(
                &self
                    .records
                    .iter()
                    .filter_map(|r| r.rev_us)
                    .collect::<Vec<_>>(),
            ),
            loss: frac(c.sent - c.returned.min(c.sent), c.sent),
            loss_forward: frac(c.lost_forward, c.sent),
            loss_back: frac(c.lost_back, c.server_received),
        }
    }
}

/// `CLOCK_MONOTONIC` now, in ns: one clock for every namespace of the kernel.
fn mono_ns() -> u64 {
    let t = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always there");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// A probe's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Header {
    seq: u32,
    client_tx: u64,
    server_rx: u64,
    server_tx: u64,
}

impl Header {
    fn write(&self, buf: &mut [u8]) {
        buf[0..4].copy_from_slice(&MAGIC);
        buf[4..8].copy_from_slice(&self.seq.to_le_bytes());
        buf[8..16].copy_from_slice(&self.client_tx.to_le_bytes());
        buf[16..24].copy_from_slice(&self.server_rx.to_le_bytes());
        buf[24..32].copy_from_slice(&self.server_tx.to_le_bytes());
    }

    /// The header of `buf`, if it is a probe.
    fn read(buf: &[u8]) -> Option<Header> {
        if buf.len() < PROBE_HEADER_BYTES || buf[0..4] != MAGIC {
            return None;
        }
        let u64_at = |i: usize| u64::from_le_bytes(buf[i..i + 8].try_into().expect("8 bytes"));
        Some(Header {
            seq: u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes")),
            client_tx: u64_at(8),
            server_rx: u64_at(16),
            server_tx: u64_at(24),
        })
    }
}

/// Whether `e` is a read timeout (`SO_RCVTIMEO` expiry shows as EAGAIN).
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Keeps the first error of a run.
type FirstError = Arc<Mutex<Option<String>>>;

fn note(first: &FirstError, e: String) {
    if let Ok(mut slot) = first.lock() {
        slot.get_or_insert(e);
    }
}

/// What the server logged: seq → (server rx, server tx) in ns, and duplicates.
type ServerLog = (HashMap<u32, (u64, u64)>, u64);
/// What the client's sender did: (seq, t_s, client tx ns) per probe sent, and send errors.
type SendLog = (Vec<(u32, f64, u64)>, u64);
/// What the client's receiver read: seq → client rx ns, and duplicates.
type EchoLog = (HashMap<u32, u64>, u64);

/// A running probe measurement; [`Probes::finish`] ends it and returns the result.
pub struct Probes {
    spec: ProbeSpec,
    sender: JoinHandle<SendLog>,
    receiver: JoinHandle<EchoLog>,
    server: JoinHandle<ServerLog>,
    server_stop: Arc<AtomicBool>,
    error: FirstError,
}

/// Starts probes from a client in namespace `client_ns` to a server on `server_addr:port`
/// in namespace `server_ns`, on the schedule of `spec` counted from `t0`. Setting `stop` ends
/// the sending early (the client then drains as after its stop time).
///
/// Errors: an invalid spec, or a socket that cannot be created in its namespace (nothing is
/// left running then).
pub fn start(
    client_ns: &str,
    server_ns: &str,
    server_addr: Ipv4Addr,
    port: u16,
    spec: &ProbeSpec,
    t0: Instant,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Probes> {
    spec.validate().map_err(|e| anyhow!("probes: {e}"))?;
    let server_at = SocketAddrV4::new(server_addr, port);
    let server_sock = udp_socket_in(
        server_ns,
        server_at,
        None,
        spec.tos(),
        Duration::from_millis(POLL_MS),
    )
    .context("starting the probe server")?;
    let client_sock = udp_socket_in(
        client_ns,
        SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        Some(server_at),
        spec.tos(),
        Duration::from_millis(POLL_MS),
    )
    .context("starting the probe client")?;
    let client_rx = client_sock
        .try_clone()
        .context("cloning the probe client's socket")?;

    let error: FirstError = Arc::default();
    let server_stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU32::new(0));
    let sending_done = Arc::new(AtomicBool::new(false));

    let (e, st) = (Arc::clone(&error), Arc::clone(&server_stop));
    let server = thread::Builder::new()
        .name("probe server".into())
        .spawn(move || serve(&server_sock, &st, &e))
        .context("starting the probe server thread")?;
    let (e, n, done) = (
        Arc::clone(&error),
        Arc::clone(&sent),
        Arc::clone(&sending_done),
    );
    let receiver = thread::Builder::new()
        .name("probe echoes".into())
        .spawn(move || receive_echoes(&client_rx, &n, &done, &e));
    let receiver = match receiver {
        Ok(h) => h,
        Err(err) => {
            server_stop.store(true, Ordering::Relaxed);
            let _ = server.join();
            return Err(anyhow!(err)).context("starting the probe receiver thread");
        }
    };
    let (e, spec_c) = (Arc::clone(&error), spec.clone());
    let (n, done) = (Arc::clone(&sent), Arc::clone(&sending_done));
    let sender = thread::Builder::new()
        .name("probe sender".into())
        .spawn(move || {
            let log = send_probes(&client_sock, &spec_c, t0, &stop, &n, &e);
            done.store(true, Ordering::Release);
            log
        });
    let sender = match sender {
        Ok(h) => h,
        Err(err) => {
            sending_done.store(true, Ordering::Release);
            let _ = receiver.join();
            server_stop.store(true, Ordering::Relaxed);
            let _ = server.join();
            return Err(anyhow!(err)).context("starting the probe sender thread");
        }
    };
    Ok(Probes {
        spec: spec.clone(),
        sender,
        receiver,
        server,
        server_stop,
        error,
    })
}

/// [`start`], then [`Probes::finish`]: blocks until the probes' stop time (or `stop`) and the
/// drain after it.
pub fn run(
    client_ns: &str,
    server_ns: &str,
    server_addr: Ipv4Addr,
    port: u16,
    spec: &ProbeSpec,
    t0: Instant,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<ProbeResult> {
    start(client_ns, server_ns, server_addr, port, spec, t0, stop)?.finish()
}

impl Probes {
    /// Waits for the last probe (the spec's stop time, or the stop flag) and for its echoes
    /// (at most [`DRAIN_MS`] more), stops the server and matches the three logs.
    ///
    /// Errors: a thread panicked (the others are still joined first).
    pub fn finish(self) -> anyhow::Result<ProbeResult> {
        let sent = self.sender.join();
        let echoes = self.receiver.join();
        self.server_stop.store(true, Ordering::Relaxed);
        let served = self.server.join();
        let ((sent, send_errors), (echoes, dup_client), (served, dup_server)) =
            match (sent, echoes, served) {
                (Ok(a), Ok(b), Ok(c)) => (a, b, c),
                _ => bail!("a probe thread panicked"),
            };
        let mut counts = ProbeCounts {
            sent: sent.len() as u64,
            duplicates: dup_client + dup_server,
            send_errors,
            ..ProbeCounts::default()
        };
        let us = |later: u64, earlier: u64| (later as f64 - earlier as f64) / 1e3;
        let records: Vec<ProbeRecord> = sent
            .iter()
            .map(|&(seq, t_s, tx)| {
                let at_server = served.get(&seq);
                let back = echoes.get(&seq);
                counts.server_received += u64::from(at_server.is_some());
                counts.returned += u64::from(back.is_some() && at_server.is_some());
                ProbeRecord {
                    seq,
                    t_s,
                    rtt_us: back.map(|&rx| us(rx, tx)),
                    fwd_us: at_server.map(|&(srx, _)| us(srx, tx)),
                    rev_us: back.zip(at_server).map(|(&rx, &(_, stx))| us(rx, stx)),
                }
            })
            .collect();
        counts.lost_forward = counts.sent - counts.server_received;
        counts.lost_back = counts.server_received - counts.returned;
        let error = self.error.lock().ok().and_then(|e| e.clone());
        Ok(ProbeResult {
            spec: self.spec,
            counts,
            records,
            error,
        })
    }
}

/// The client's sender: one probe per deadline from `spec.start` until `spec.stop` (or `stop`).
fn send_probes(
    sock: &UdpSocket,
    spec: &ProbeSpec,
    t0: Instant,
    stop: &AtomicBool,
    sent: &AtomicU32,
    error: &FirstError,
) -> SendLog {
    let mut log = Vec::new();
    let mut errors = 0;
    let mut buf = vec![0u8; spec.size_bytes];
    let end = t0 + spec.stop;
    for k in 0u32.. {
        let Some(due) = spec
            .interval
            .checked_mul(k)
            .and_then(|d| spec.start.checked_add(d))
            .map(|d| t0 + d)
        else {
            break;
        };
        if due >= end {
            break;
        }
        // Sleep to the deadline in slices, to notice the stop flag.
        loop {
            if stop.load(Ordering::Relaxed) {
                return (log, errors);
            }
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            thread::sleep(left.min(Duration::from_millis(POLL_MS)));
        }
        let tx = mono_ns();
        Header {
            seq: k,
            client_tx: tx,
            server_rx: 0,
            server_tx: 0,
        }
        .write(&mut buf);
        match sock.send(&buf) {
            Ok(_) => {
                log.push((k, t0.elapsed().as_secs_f64(), tx));
                sent.store(k + 1, Ordering::Release);
            }
            Err(e) => {
                errors += 1;
                note(error, format!("probe client: sending probe {k}: {e}"));
            }
        }
    }
    (log, errors)
}

/// The client's receiver: reads echoes until every probe sent has returned after the sender
/// finished, or [`DRAIN_MS`] after it finished.
fn receive_echoes(
    sock: &UdpSocket,
    sent: &AtomicU32,
    sending_done: &AtomicBool,
    error: &FirstError,
) -> EchoLog {
    let mut got: HashMap<u32, u64> = HashMap::new();
    let mut dups = 0;
    let mut buf = vec![0u8; MAX_PROBE_BYTES + 1];
    let mut done_at: Option<Instant> = None;
    loop {
        if done_at.is_none() && sending_done.load(Ordering::Acquire) {
            done_at = Some(Instant::now());
        }
        if let Some(at) = done_at {
            let all_back = got.len() as u64 >= u64::from(sent.load(Ordering::Acquire));
            if all_back || at.elapsed() >= Duration::from_millis(DRAIN_MS) {
                return (got, dups);
            }
        }
        match sock.recv(&mut buf) {
            Ok(n) => {
                let rx = mono_ns();
                if let Some(h) = Header::read(&buf[..n]) {
                    if got.insert(h.seq, rx).is_some() {
                        dups += 1;
                    }
                }
            }
            Err(e) if is_timeout(&e) => {}
            // ICMP port unreachable (no server yet) shows as ECONNREFUSED on a connected
            // socket; the probe is simply lost.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                note(error, format!("probe client: {e}"));
            }
            Err(e) => {
                note(error, format!("probe client: receiving echoes: {e}"));
                thread::sleep(Duration::from_millis(POLL_MS));
            }
        }
    }
}

/// The server: stamps and echoes every probe until `stop`.
fn serve(sock: &UdpSocket, stop: &AtomicBool, error: &FirstError) -> ServerLog {
    let mut log: HashMap<u32, (u64, u64)> = HashMap::new();
    let mut dups = 0;
    let mut buf = vec![0u8; MAX_PROBE_BYTES + 1];
    while !stop.load(Ordering::Relaxed) {
        match sock.recv_from(&mut buf) {
            Ok((n, peer)) => {
                let rx = mono_ns();
                let Some(mut h) = Header::read(&buf[..n]) else {
                    continue;
                };
                h.server_rx = rx;
                h.server_tx = mono_ns();
                h.write(&mut buf[..n]);
                if let Err(e) = sock.send_to(&buf[..n], peer) {
                    note(error, format!("probe server: echoing probe {}: {e}", h.seq));
                }
                if log.insert(h.seq, (h.server_rx, h.server_tx)).is_some() {
                    dups += 1;
                }
            }
            Err(e) if is_timeout(&e) => {}
            Err(e) => {
                note(error, format!("probe server: {e}"));
                thread::sleep(Duration::from_millis(POLL_MS));
            }
        }
    }
    (log, dups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_header_survives_the_wire_and_other_datagrams_are_not_probes() {
        let h = Header {
            seq: 7,
            client_tx: 1,
            server_rx: u64::MAX,
            server_tx: 3,
        };
        let mut buf = vec![0u8; 64];
        h.write(&mut buf);
        assert_eq!(Header::read(&buf), Some(h));
        assert_eq!(Header::read(&buf[..PROBE_HEADER_BYTES - 1]), None);
        buf[0] = b'x';
        assert_eq!(Header::read(&buf), None);
    }

    #[test]
    fn the_summary_tells_loss_forward_from_loss_back() {
        let rec = |seq, fwd: Option<f64>, rev: Option<f64>| ProbeRecord {
            seq,
            t_s: f64::from(seq) * 0.01,
            rtt_us: fwd.zip(rev).map(|(a, b)| a + b),
            fwd_us: fwd,
            rev_us: rev,
        };
        let r = ProbeResult {
            spec: ProbeSpec::new(Duration::ZERO, Duration::from_secs(1)),
            counts: ProbeCounts {
                sent: 4,
                server_received: 3,
                returned: 2,
                lost_forward: 1,
                lost_back: 1,
                ..ProbeCounts::default()
            },
            records: vec![
                rec(0, Some(100.0), Some(50.0)),
                rec(1, None, None),
                rec(2, Some(300.0), None),
                rec(3, Some(200.0), Some(70.0)),
            ],
            error: None,
        };
        let s = r.summary();
        assert_eq!((s.loss, s.loss_forward), (0.5, 0.25));
        assert!((s.loss_back - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.fwd.unwrap().n, 3);
        assert_eq!(s.fwd.unwrap().p50_us, 200.0);
        assert_eq!(s.rtt.unwrap().max_us, 270.0);
        assert_eq!(s.rev.unwrap().min_us, 50.0);
    }

    #[test]
    fn specs_outside_the_limits_are_refused_with_what_is_allowed() {
        let ok = ProbeSpec::new(Duration::ZERO, Duration::from_secs(1));
        assert_eq!(ok.validate(), Ok(()));
        assert_eq!(
            ProbeSpec {
                dscp: 46,
                ..ok.clone()
            }
            .tos(),
            0xb8,
            "EF"
        );
        let e = ProbeSpec {
            size_bytes: 8,
            ..ok.clone()
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("32 to 1472"), "{e}");
        let e = ProbeSpec {
            dscp: 64,
            ..ok.clone()
        }
        .validate()
        .unwrap_err();
        assert!(e.contains("0 to 63"), "{e}");
        assert!(ProbeSpec {
            interval: Duration::ZERO,
            ..ok.clone()
        }
        .validate()
        .is_err());
        assert!(ProbeSpec {
            stop: Duration::ZERO,
            ..ok
        }
        .validate()
        .is_err());
    }

    /// Needs root: probes across an idle 10 Mbit/s dumbbell, then under 20 Mbit/s of UDP.
    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn probes_see_the_forward_queue_and_tell_forward_from_reverse() {
        use crate::testbed::{PathSpec, Testbed};
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test builds network namespaces and needs root, as CI has"
        );
        let spec = PathSpec {
            subnet_octet: 207,
            ..PathSpec::new("cctl-lu2", 10, 100)
        };
        let bed = Testbed::create(&spec).expect("creating the dumbbell");
        let probe = |t0: Instant| {
            let spec = ProbeSpec::new(Duration::from_millis(10), Duration::from_millis(1010));
            run(
                bed.sender_ns(),
                bed.receiver_ns(),
                bed.receiver_addr(),
                5207,
                &spec,
                t0,
                Arc::new(AtomicBool::new(false)),
            )
        };
        let idle = probe(Instant::now());
        let t0 = Instant::now();
        let load = crate::udp::start(
            bed.sender_ns(),
            bed.receiver_ns(),
            bed.receiver_addr(),
            5208,
            &crate::udp::CbrSpec::new(0, 20.0, Duration::ZERO, Duration::from_millis(1300)),
            t0,
            Arc::new(AtomicBool::new(false)),
        );
        let loaded = probe(t0);
        let load = load.and_then(|l| l.finish());
        bed.destroy().expect("removing the dumbbell");
        let (idle, loaded, load) = (idle.unwrap(), loaded.unwrap(), load.unwrap());
        let (i, l) = (idle.summary(), loaded.summary());
        eprintln!("idle: {:?} {i:?}", idle.counts);
        eprintln!("loaded: {:?} {l:?}; udp {load:?}", loaded.counts);

        assert_eq!(idle.error, None);
        assert_eq!(idle.counts.sent, 100);
        assert_eq!(idle.counts.returned, idle.counts.sent, "{:?}", idle.counts);
        let mut turnaround = Vec::new();
        for r in &idle.records {
            let (rtt, fwd, rev) = (r.rtt_us.unwrap(), r.fwd_us.unwrap(), r.rev_us.unwrap());
            assert!(fwd >= 0.0 && rev >= 0.0, "{r:?}");
            // The round trip is the two one-way delays and the server's turnaround.
            assert!(rtt >= fwd + rev, "{r:?}");
            turnaround.push(rtt - fwd - rev);
        }
        // An idle path has no queue: most probes cross it in well under 5 ms. Not every
        // one: on a busy 2-core host a probe now and then waits for a CPU (5.4 ms once).
        let (f, r) = (i.fwd.as_ref().unwrap(), i.rev.as_ref().unwrap());
        assert!(f.p95_us < 5_000.0 && r.p95_us < 5_000.0, "{i:?}");
        turnaround.sort_by(f64::total_cmp);
        assert!(turnaround[turnaround.len() / 2] < 1_000.0, "{turnaround:?}");
        // Sent on absolute deadlines: the 100th probe 990 ms after the first.
        let span = idle.records[99].t_s - idle.records[0].t_s;
        assert!((span - 0.99).abs() < 0.005, "span {span} s");

        // 20 Mbit/s into 10: the forward queue fills (100 packets of 1242 bytes at 10 Mbit/s
        // is ~100 ms) and tail-drops probes; the reverse path stays empty.
        let (fwd, rev) = (l.fwd.unwrap(), l.rev.unwrap());
        assert!(fwd.p50_us > 50_000.0 && fwd.p50_us < 150_000.0, "{fwd:?}");
        assert!(rev.p95_us < 5_000.0, "{rev:?}");
        assert!(loaded.counts.lost_forward > 0, "{:?}", loaded.counts);
        assert_eq!(loaded.counts.lost_back, 0, "{:?}", loaded.counts);
        assert!(load.lost_packets() > 0, "{load:?}");
    }
}
