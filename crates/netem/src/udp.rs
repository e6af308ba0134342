//! Unresponsive cross traffic: a constant-bit-rate UDP stream from one namespace to another
//! (iperf3 `-u -b`'s kind of load, the unresponsive flow of RRUL-style tests), and what
//! arrived of it.
//!
//! The sender sends datagram `k` at `start + k·gap` after the run's t0, with
//! `gap = (size + 28) · 8 / rate`: the rate counts IPv4 packets (payload plus 28 bytes of IP
//! and UDP headers), as a link does, not the payload alone. Deadlines are absolute: a sender
//! that wakes late sends the datagrams it owes back to back, so the mean rate holds. The
//! receiver counts datagrams and bytes; what did not arrive was dropped on the way (at a tbf
//! bottleneck, its qdisc counts the same drops).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde::{Deserialize, Serialize};

use crate::netns::udp_socket_in;

/// Default UDP payload of a datagram, in bytes: below any tunnel's MTU, as QUIC's and
/// VoIP-trunk-sized traffic; 1228-byte IPv4 packets.
pub const DEFAULT_DATAGRAM_BYTES: usize = 1200;

/// Largest payload, in bytes: a 1500-byte IPv4 packet less 28 bytes of IP and UDP headers.
pub const MAX_DATAGRAM_BYTES: usize = 1472;

/// Smallest payload, in bytes (the sequence number each datagram carries).
pub const MIN_DATAGRAM_BYTES: usize = 8;

/// IPv4 and UDP header bytes counted in the rate, in bytes.
pub const IP_UDP_HEADER_BYTES: usize = 28;

/// Highest rate a stream may ask for, in Mbit/s (what one thread of sendto(2) calls keeps up
/// with is far less; this catches a slip of units).
pub const MAX_RATE_MBIT: f64 = 10_000.0;

/// After the sender stops, the receiver ends once no datagram came for this long, in ms
/// (a bottleneck's queue drains meanwhile) ...
pub const QUIET_MS: u64 = 300;

/// ... or at the latest this long after the sender stopped, in ms.
pub const DRAIN_MAX_MS: u64 = 5_000;

/// How often blocked threads look at their stop flags, in ms (socket read timeout).
const POLL_MS: u64 = 50;

/// One constant-bit-rate stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CbrSpec {
    /// Caller's identifier, copied into the [`CbrResult`].
    pub id: usize,
    /// Sending rate of IPv4 packets (payload + [`IP_UDP_HEADER_BYTES`]), in Mbit/s (10^6 bit/s).
    pub rate_mbit: f64,
    /// UDP payload of each datagram, in bytes ([`MIN_DATAGRAM_BYTES`] to [`MAX_DATAGRAM_BYTES`]).
    pub size_bytes: usize,
    /// DiffServ code point, 0..=63 (`IP_TOS` = dscp << 2).
    pub dscp: u8,
    /// When sending starts, after the run's t0.
    pub start: Duration,
    /// When sending stops, after the run's t0.
    pub stop: Duration,
}

impl CbrSpec {
    /// A stream of [`DEFAULT_DATAGRAM_BYTES`] datagrams at `rate_mbit` Mbit/s, DSCP 0.
    pub fn new(id: usize, rate_mbit: f64, start: Duration, stop: Duration) -> CbrSpec {
        CbrSpec {
            id,
            rate_mbit,
            size_bytes: DEFAULT_DATAGRAM_BYTES,
            dscp: 0,
            start,
            stop,
        }
    }

    /// Time between datagrams' deadlines: one IPv4 packet at the rate.
    pub fn gap(&self) -> Duration {
        Duration::from_secs_f64(
            ((self.size_bytes + IP_UDP_HEADER_BYTES) * 8) as f64 / (self.rate_mbit * 1e6),
        )
    }

    /// Checks the spec; the error says what was wrong and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.rate_mbit.is_finite() && self.rate_mbit > 0.0 && self.rate_mbit <= MAX_RATE_MBIT)
        {
            return Err(format!(
                "rate {} Mbit/s: must be > 0 and at most {MAX_RATE_MBIT} Mbit/s",
                self.rate_mbit
            ));
        }
        if !(MIN_DATAGRAM_BYTES..=MAX_DATAGRAM_BYTES).contains(&self.size_bytes) {
            return Err(format!(
                "size {} bytes: a datagram carries {MIN_DATAGRAM_BYTES} to {MAX_DATAGRAM_BYTES} bytes",
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

/// What one stream did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CbrResult {
    /// The [`CbrSpec::id`].
    pub id: usize,
    /// The rate asked for, in Mbit/s (IPv4 packets).
    pub rate_mbit: f64,
    /// UDP payload per datagram, in bytes.
    pub size_bytes: usize,
    /// When sending started (the spec's start), in s after t0.
    pub start_s: f64,
    /// Datagrams sent.
    pub sent_packets: u64,
    /// Payload bytes sent, in bytes.
    pub sent_bytes: u64,
    /// Datagrams the sender failed to hand to the kernel (not in `sent_packets`).
    pub send_errors: u64,
    /// Datagrams received.
    pub received_packets: u64,
    /// Payload bytes received, in bytes.
    pub received_bytes: u64,
    /// First datagram's arrival, in s after t0; `None` if none arrived.
    pub first_rx_s: Option<f64>,
    /// Last datagram's arrival, in s after t0; `None` if none arrived.
    pub last_rx_s: Option<f64>,
    /// The first error met (send or receive), if any.
    pub error: Option<String>,
}

impl CbrResult {
    /// Datagrams sent but not received (dropped on the way, or still queued at the end).
    pub fn lost_packets(&self) -> u64 {
        self.sent_packets.saturating_sub(self.received_packets)
    }

    /// Achieved receive rate of IPv4 packets, in Mbit/s: every packet received over the time
    /// from the start of sending to the last arrival (0 if none arrived). Counted from the
    /// start rather than the first arrival, which a neighbour (ARP) resolution can delay by
    /// tens of ms while the first datagrams wait for it.
    pub fn receive_rate_mbit(&self) -> f64 {
        match self.last_rx_s {
            Some(b) if b > self.start_s => {
                let ip_bytes = (self.size_bytes + IP_UDP_HEADER_BYTES) as f64;
                self.received_packets as f64 * ip_bytes * 8.0 / (b - self.start_s) / 1e6
            }
            _ => 0.0,
        }
    }
}

/// What the sender thread saw: packets, errors, the first error.
type Sent = (u64, u64, Option<String>);
/// What the receiver thread saw: packets, bytes, first and last arrival (s after t0), error.
type Received = (u64, u64, Option<f64>, Option<f64>, Option<String>);

/// A running stream; [`CbrTraffic::finish`] ends it and returns the result.
pub struct CbrTraffic {
    spec: CbrSpec,
    sender: JoinHandle<Sent>,
    receiver: JoinHandle<Received>,
    sender_done: Arc<AtomicBool>,
}

/// Starts `spec`'s stream from namespace `sender_ns` to a receiver on `receiver_addr:port`
/// in namespace `receiver_ns`, on a schedule counted from `t0`. Setting `stop` ends the
/// sending early.
///
/// Errors: an invalid spec, or a socket that cannot be created in its namespace (nothing is
/// left running then).
pub fn start(
    sender_ns: &str,
    receiver_ns: &str,
    receiver_addr: Ipv4Addr,
    port: u16,
    spec: &CbrSpec,
    t0: Instant,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<CbrTraffic> {
    spec.validate()
        .map_err(|e| anyhow!("UDP stream {}: {e}", spec.id))?;
    let dst = SocketAddrV4::new(receiver_addr, port);
    let tos = u32::from(spec.dscp) << 2;
    let rx_sock = udp_socket_in(receiver_ns, dst, None, tos, Duration::from_millis(POLL_MS))
        .with_context(|| format!("UDP stream {}: receiver", spec.id))?;
    let tx_sock = udp_socket_in(
        sender_ns,
        SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        Some(dst),
        tos,
        Duration::from_millis(POLL_MS),
    )
    .with_context(|| format!("UDP stream {}: sender", spec.id))?;
    let sender_done = Arc::new(AtomicBool::new(false));
    let done = Arc::clone(&sender_done);
    let receiver = thread::Builder::new()
        .name(format!("udp rx {}", spec.id))
        .spawn(move || receive(&rx_sock, t0, &done))
        .context("starting a UDP receiver thread")?;
    let (spec_c, done) = (spec.clone(), Arc::clone(&sender_done));
    let sender = thread::Builder::new()
        .name(format!("udp tx {}", spec.id))
        .spawn(move || {
            let out = send(&tx_sock, &spec_c, t0, &stop);
            done.store(true, Ordering::Release);
            out
        });
    let sender = match sender {
        Ok(h) => h,
        Err(e) => {
            sender_done.store(true, Ordering::Release);
            let _ = receiver.join();
            return Err(anyhow!(e)).context("starting a UDP sender thread");
        }
    };
    Ok(CbrTraffic {
        spec: spec.clone(),
        sender,
        receiver,
        sender_done,
    })
}

/// [`start`], then [`CbrTraffic::finish`].
pub fn run(
    sender_ns: &str,
    receiver_ns: &str,
    receiver_addr: Ipv4Addr,
    port: u16,
    spec: &CbrSpec,
    t0: Instant,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<CbrResult> {
    start(sender_ns, receiver_ns, receiver_addr, port, spec, t0, stop)?.finish()
}

impl CbrTraffic {
    /// Waits for the stop time (or the stop flag) and the drain after it ([`QUIET_MS`], at
    /// most [`DRAIN_MAX_MS`]), and returns the counts.
    ///
    /// Errors: a thread panicked (both are joined first).
    pub fn finish(self) -> anyhow::Result<CbrResult> {
        let sent = self.sender.join();
        self.sender_done.store(true, Ordering::Release);
        let received = self.receiver.join();
        let ((sent_packets, send_errors, tx_err), (rx_packets, rx_bytes, first, last, rx_err)) =
            match (sent, received) {
                (Ok(s), Ok(r)) => (s, r),
                _ => bail!("UDP stream {}: a thread panicked", self.spec.id),
            };
        Ok(CbrResult {
            id: self.spec.id,
            rate_mbit: self.spec.rate_mbit,
            size_bytes: self.spec.size_bytes,
            start_s: self.spec.start.as_secs_f64(),
            sent_packets,
            sent_bytes: sent_packets * self.spec.size_bytes as u64,
            send_errors,
            received_packets: rx_packets,
            received_bytes: rx_bytes,
            first_rx_s: first,
            last_rx_s: last,
            error: tx_err.or(rx_err),
        })
    }
}

/// The sender: datagram `k` at `start + k·gap` until `stop` (or the stop flag).
fn send(sock: &UdpSocket, spec: &CbrSpec, t0: Instant, stop: &AtomicBool) -> Sent {
    let gap = spec.gap().as_secs_f64();
    let (begin, end) = (t0 + spec.start, t0 + spec.stop);
    let mut buf = vec![0u8; spec.size_bytes];
    let (mut sent, mut errors, mut first_error) = (0u64, 0u64, None);
    for k in 0u64.. {
        let due = begin + Duration::from_secs_f64(k as f64 * gap);
        if due >= end {
            break;
        }
        loop {
            if stop.load(Ordering::Relaxed) {
                return (sent, errors, first_error);
            }
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            thread::sleep(left.min(Duration::from_millis(POLL_MS)));
        }
        buf[..8].copy_from_slice(&k.to_le_bytes());
        match sock.send(&buf) {
            Ok(_) => sent += 1,
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| format!("sending datagram {k}: {e}"));
            }
        }
    }
    (sent, errors, first_error)
}

/// The receiver: counts datagrams until the sender is done and the link has been quiet for
/// [`QUIET_MS`] (at most [`DRAIN_MAX_MS`] after the sender finished).
fn receive(sock: &UdpSocket, t0: Instant, sender_done: &AtomicBool) -> Received {
    let mut buf = vec![0u8; MAX_DATAGRAM_BYTES + 1];
    let (mut packets, mut bytes) = (0u64, 0u64);
    let (mut first, mut last) = (None, None);
    let mut error = None;
    let mut last_seen = Instant::now();
    let mut done_at: Option<Instant> = None;
    loop {
        if done_at.is_none() && sender_done.load(Ordering::Acquire) {
            done_at = Some(Instant::now());
        }
        if let Some(at) = done_at {
            let quiet = last_seen.elapsed() >= Duration::from_millis(QUIET_MS)
                && at.elapsed() >= Duration::from_millis(QUIET_MS);
            if quiet || at.elapsed() >= Duration::from_millis(DRAIN_MAX_MS) {
                return (packets, bytes, first, last, error);
            }
        }
        match sock.recv(&mut buf) {
            Ok(n) => {
                let t = t0.elapsed().as_secs_f64();
                last_seen = Instant::now();
                packets += 1;
                bytes += n as u64;
                first.get_or_insert(t);
                last = Some(t);
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => {
                error.get_or_insert_with(|| format!("receiving: {e}"));
                thread::sleep(Duration::from_millis(POLL_MS));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gap_counts_ip_and_udp_headers() {
        // 1228-byte IPv4 packets at 9.824 Mbit/s: one per ms.
        let s = CbrSpec::new(0, 9.824, Duration::ZERO, Duration::from_secs(1));
        assert!((s.gap().as_secs_f64() - 1e-3).abs() < 1e-12);
    }

    #[test]
    fn the_receive_rate_counts_from_the_start_to_the_last_arrival() {
        let r = CbrResult {
            id: 0,
            rate_mbit: 10.0,
            size_bytes: 1222,
            start_s: 1.0,
            sent_packets: 1001,
            sent_bytes: 1001 * 1222,
            send_errors: 0,
            received_packets: 1000,
            received_bytes: 1000 * 1222,
            first_rx_s: Some(1.05),
            last_rx_s: Some(2.0),
            error: None,
        };
        // 1000 packets of 1250 bytes in 1 s = 10 Mbit/s.
        assert!((r.receive_rate_mbit() - 10.0).abs() < 1e-9);
        assert_eq!(r.lost_packets(), 1);
        let none = CbrResult {
            received_packets: 0,
            first_rx_s: None,
            last_rx_s: None,
            ..r
        };
        assert_eq!(none.receive_rate_mbit(), 0.0);
        assert_eq!(none.lost_packets(), 1001);
    }

    #[test]
    fn specs_outside_the_limits_are_refused_with_what_is_allowed() {
        let ok = CbrSpec::new(3, 5.0, Duration::ZERO, Duration::from_secs(1));
        assert_eq!(ok.validate(), Ok(()));
        for (bad, hint) in [
            (
                CbrSpec {
                    rate_mbit: 0.0,
                    ..ok.clone()
                },
                "> 0",
            ),
            (
                CbrSpec {
                    size_bytes: 1500,
                    ..ok.clone()
                },
                "8 to 1472",
            ),
            (
                CbrSpec {
                    dscp: 99,
                    ..ok.clone()
                },
                "0 to 63",
            ),
            (
                CbrSpec {
                    stop: Duration::ZERO,
                    ..ok.clone()
                },
                "not after",
            ),
        ] {
            let e = bad.validate().unwrap_err();
            assert!(e.contains(hint), "{e}");
        }
    }

    /// Needs root: UDP at half and at twice a 10 Mbit/s tbf bottleneck.
    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn a_cbr_stream_gets_its_rate_below_the_bottleneck_and_the_bottleneck_above_it() {
        use crate::testbed::{PathSpec, Testbed};
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test builds network namespaces and needs root, as CI has"
        );
        let spec = PathSpec {
            subnet_octet: 208,
            ..PathSpec::new("cctl-lu3", 10, 100)
        };
        let bed = Testbed::create(&spec).expect("creating the dumbbell");
        let stream = |rate: f64, port: u16| {
            let spec = CbrSpec::new(0, rate, Duration::ZERO, Duration::from_millis(1500));
            let before = bed.bottleneck_stats();
            let out = run(
                bed.sender_ns(),
                bed.receiver_ns(),
                bed.receiver_addr(),
                port,
                &spec,
                Instant::now(),
                Arc::new(AtomicBool::new(false)),
            );
            let after = bed.bottleneck_stats();
            (out, before.and_then(|b| after.map(|a| a.drops - b.drops)))
        };
        let (half, half_drops) = stream(5.0, 5209);
        let (twice, twice_drops) = stream(20.0, 5210);
        bed.destroy().expect("removing the dumbbell");
        let (half, twice) = (half.unwrap(), twice.unwrap());
        let (half_drops, twice_drops) = (half_drops.unwrap(), twice_drops.unwrap());
        eprintln!(
            "5 Mbit/s: {:.3} Mbit/s received, {half_drops} tbf drops, {half:?}",
            half.receive_rate_mbit()
        );
        eprintln!(
            "20 Mbit/s: {:.3} Mbit/s received, {twice_drops} tbf drops, {twice:?}",
            twice.receive_rate_mbit()
        );
        assert_eq!(half.error, None);
        // 1.5 s at 5 Mbit/s of 1228-byte packets: 763 datagrams.
        assert!((760..=764).contains(&half.sent_packets), "{half:?}");
        assert_eq!(half.lost_packets(), 0, "{half:?}");
        assert!(half_drops <= 3, "{half_drops} tbf drops");
        let r = half.receive_rate_mbit();
        assert!((r - 5.0).abs() < 0.15, "{r} Mbit/s");
        // tbf counts 14 more bytes of Ethernet header per packet: 10 × 1228/1242 of IP.
        let r = twice.receive_rate_mbit();
        assert!((9.5..=10.2).contains(&r), "{r} Mbit/s");
        assert!(twice.lost_packets() > twice.sent_packets / 3, "{twice:?}");
        // Every loss is a tbf drop (tbf may also drop a stray packet of the host's own).
        let (lost, drops) = (twice.lost_packets(), twice_drops);
        assert!(
            lost <= drops && drops <= lost + 3,
            "{lost} lost, {drops} tbf drops"
        );
    }
}
