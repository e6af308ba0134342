//! Built-in bulk TCP flows across a [`Testbed`]: sender and receiver threads inside its namespaces.
//!
//! No subprocesses: a thread joins a network namespace with `setns(2)` before it creates its
//! sockets, and a socket stays in the namespace it was created in whichever thread uses it.
//! Each flow sets its congestion control with `TCP_CONGESTION` before `connect`, sends 64 KiB
//! at a time as fast as TCP allows from its start to its stop time, then shuts down its write
//! side and waits for the receiver to read everything, so byte counts are final. Neither end
//! copies the data through user space: the sender `sendfile(2)`s the same 64 KiB of a memfd
//! again and again (the socket takes references to its pages), and the receiver consumes
//! with `recv(MSG_TRUNC)`, which on TCP discards the bytes in the kernel. TCP sees the same
//! stream either way (same segments, same receive-window autotuning, which counts the bytes
//! consumed); the guest on the virtual clock saves the two copies and the zeroing of the
//! sender's pages, about a fifth of its instructions at 250 Mbit/s (`make bench-profile`). A reverse
//! flow ([`FlowSpec::reverse`]) swaps the two ends: its data goes from the receiver
//! namespace to a listener in the sender namespace, against the dumbbell's forward direction.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use serde::Serialize;
use socket2::{Domain, Protocol, Socket, Type};

use crate::netns::spawn_in_netns;
use crate::testbed::Testbed;

/// Size of each sender write, in bytes.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// Socket read/write timeout, in milliseconds: how soon a blocked sender or receiver notices
/// its stop time, the stop flag or its deadline.
pub const IO_TIMEOUT_MS: u64 = 200;

/// How long a sender waits for `connect` to complete, in milliseconds.
pub const CONNECT_TIMEOUT_MS: u64 = 3_000;

/// Grace period after a flow's stop time for draining and closing, in seconds; past it the
/// flow is abandoned with an error instead of hanging.
pub const GRACE_S: u64 = 10;

/// Cap on data written but not yet sent that a sender keeps in its socket, in bytes
/// (`TCP_NOTSENT_LOWAT`). It makes a flow's stop time sharp: without it, send-buffer
/// autotuning parks enough unsent data in the socket that a flow at 20 Mbit/s kept delivering
/// for 200-400 ms after its stop time; with it, 60-130 ms (what is in flight and queued).
pub const NOTSENT_LOWAT_BYTES: u32 = 128 * 1024;

/// How often the accept loop and a waiting sender look at the clock and the stop flag, in
/// milliseconds.
const POLL_MS: u64 = 10;

/// Where flows run: sender namespaces by index, and the receiver (namespace, address) of
/// the flow from each sender. The dumbbell ([`Testbed`]) has one receiver for all; a
/// parking-lot chain ([`crate::chain::Bed`]) one per point where flows leave it.
pub trait Endpoints {
    /// Number of senders.
    fn senders(&self) -> usize;
    /// Name of sender `i`'s network namespace (0-based).
    fn sender_ns_at(&self, i: usize) -> &str;
    /// The network namespace and address of the receiver of the flow from sender `i`.
    fn receiver_of(&self, i: usize) -> (&str, std::net::Ipv4Addr);

    /// Sender `i`'s address, where a reverse flow ([`FlowSpec::reverse`]) listens. The
    /// default asks the kernel inside sender `i`'s namespace which source address it would
    /// use towards sender `i`'s receiver (a UDP `connect`, which sends nothing).
    ///
    /// Errors: the namespace cannot be joined, or it has no route to the receiver.
    fn sender_addr_of(&self, i: usize) -> io::Result<std::net::Ipv4Addr> {
        let (_, to) = self.receiver_of(i);
        let ns = self.sender_ns_at(i).to_string();
        spawn_in_netns(&ns, move || -> io::Result<std::net::Ipv4Addr> {
            let probe = std::net::UdpSocket::bind((std::net::Ipv4Addr::UNSPECIFIED, 0))?;
            probe.connect((to, 9))?;
            match probe.local_addr()? {
                SocketAddr::V4(a) => Ok(*a.ip()),
                SocketAddr::V6(a) => Err(io::Error::other(format!(
                    "an IPv6 source address {a} towards {to}"
                ))),
            }
        })
        .and_then(join_io)
        .and_then(|r| r)
        .map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("finding sender {i}'s address in {ns}: {e}"),
            )
        })
    }
}

impl Endpoints for Testbed {
    fn senders(&self) -> usize {
        Testbed::senders(self)
    }

    fn sender_ns_at(&self, i: usize) -> &str {
        Testbed::sender_ns_at(self, i)
    }

    fn receiver_of(&self, _: usize) -> (&str, std::net::Ipv4Addr) {
        (self.receiver_ns(), self.receiver_addr())
    }

    fn sender_addr_of(&self, i: usize) -> io::Result<std::net::Ipv4Addr> {
        Ok(self.sender_addr_at(i))
    }
}

/// One bulk flow to run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FlowSpec {
    /// Caller's identifier, copied into the [`FlowResult`].
    pub id: usize,
    /// Congestion control, a `TCP_CONGESTION` name (`cubic`, `reno`, `bpf_htcp`, ...).
    pub cc: String,
    /// When the flow connects and starts sending, after the run's t0.
    pub start: Duration,
    /// When the flow stops writing, after the run's t0 (it then drains and closes).
    pub stop: Duration,
    /// Index of the testbed sender (namespace) the flow starts from; 0 is the first.
    pub sender: usize,
    /// Fixed transfer size in bytes: the flow stops once it has written this much (or at
    /// `stop`, whichever comes first). `None`: bulk until `stop`.
    pub size_bytes: Option<u64>,
    /// Whether the data flows against the dumbbell's forward direction: from the receiver
    /// namespace of `sender` to a listener in `sender`'s namespace (flent's RRUL upload
    /// half). Such a flow crosses the receiver's egress, which the testbed shapes to
    /// `reverse_rate_mbit` if set; its [`FlowResult::local_ip`] is then the receiver's.
    /// `false` (the default): from `sender` to its receiver.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reverse: bool,
}

/// What one flow did.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct FlowResult {
    /// The [`FlowSpec::id`].
    pub id: usize,
    /// The congestion control asked for.
    pub cc: String,
    /// The sender's ephemeral port, 0 if it never connected; matches trace samples to flows.
    pub local_port: u16,
    /// The sender's address (unspecified if it never connected).
    pub local_ip: std::net::Ipv4Addr,
    /// Bytes the receiver read from this flow, in bytes.
    pub bytes: u64,
    /// When the connection was established (or the flow gave up), after t0. Written as
    /// `started_s`, seconds after the run's t0 (the time base of the run's series); read
    /// also from `started`, the `{secs, nanos}` of files written before ([`secs_after_t0`]).
    #[serde(rename = "started_s", alias = "started", with = "secs_after_t0")]
    pub started: Duration,
    /// When the receiver read the flow's end of stream (or the flow gave up), after t0;
    /// written as `ended_s`, read also from `ended` (see [`FlowResult::started`]).
    #[serde(rename = "ended_s", alias = "ended", with = "secs_after_t0")]
    pub ended: Duration,
    /// Why the flow failed or was cut short, if it did.
    pub error: Option<String>,
    /// The sender's segment counters when it stopped writing (`TCP_INFO`); `None` if it
    /// never connected or in files written before they were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<SegmentCounts>,
}

/// A sender's segment counters from `TCP_INFO` (kernel 4.6+), in segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct SegmentCounts {
    /// Data segments sent, retransmissions included (`tcpi_data_segs_out`).
    pub data_segs_out: u32,
    /// Segments received: the receiver's ACKs, plus the SYN-ACK (`tcpi_segs_in`).
    pub segs_in: u32,
}

impl SegmentCounts {
    /// Data segments per ACK the receiver sent: `b` of Mathis et al.'s model (2 with
    /// delayed ACKs, 1 with quick ACKs); `None` before any ACK.
    pub fn segs_per_ack(&self) -> Option<f64> {
        let acks = self.segs_in.saturating_sub(1);
        (acks > 0).then(|| f64::from(self.data_segs_out) / f64::from(acks))
    }
}

/// A time after a run's t0 on disk: written as seconds (a JSON number, ns resolution);
/// read from seconds or from serde's `{"secs": s, "nanos": ns}` form of a [`Duration`],
/// which results files held before.
pub mod secs_after_t0 {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    /// The two forms a time after t0 has on disk.
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OnDisk {
        Seconds(f64),
        SecsNanos { secs: u64, nanos: u32 },
    }

    /// Writes `d` as seconds.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    /// Reads seconds (finite, not negative) or `{secs, nanos}`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        match OnDisk::deserialize(d)? {
            OnDisk::Seconds(s) => Duration::try_from_secs_f64(s).map_err(|_| {
                serde::de::Error::custom(format!(
                    "{s} is not a time after t0: expected seconds, 0 or more"
                ))
            }),
            OnDisk::SecsNanos { secs, nanos } => Ok(Duration::new(secs, nanos)),
        }
    }
}

impl FlowResult {
    /// Mean goodput over `[started, ended]`, in bits per second (0 for an empty interval).
    pub fn mean_throughput_bps(&self) -> f64 {
        let secs = self.ended.saturating_sub(self.started).as_secs_f64();
        if secs > 0.0 {
            self.bytes as f64 * 8.0 / secs
        } else {
            0.0
        }
    }
}

/// Runs `flows` from the testbed's sender namespace to one listener on `port` in its receiver
/// namespace (a [`FlowSpec::reverse`] flow the other way, to a listener on `port` in its
/// sender namespace) and returns one result per flow, in the order given.
///
/// Returns when every flow has stopped and drained, or early when `stop` becomes true (flows
/// then stop writing at once, drain and close; flows that had not started report an error).
/// Every wait is bounded: a flow still busy [`GRACE_S`] seconds after its stop time is
/// abandoned with an error. Errors of single flows are in their results; the call itself
/// fails only if the run cannot be set up (listener, threads).
pub fn run_bulk_flows(
    bed: &(impl Endpoints + ?Sized),
    port: u16,
    flows: &[FlowSpec],
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Vec<FlowResult>> {
    run_bulk_flows_observed(bed, port, flows, stop, |_, _| {})
}

/// [`run_bulk_flows`], calling `on_started(flow id, sender's local port)` from the flow's
/// thread as soon as each flow has connected (before it sends), so a caller can attach
/// per-flow tracing while the run goes on.
pub fn run_bulk_flows_observed(
    bed: &(impl Endpoints + ?Sized),
    port: u16,
    flows: &[FlowSpec],
    stop: Arc<AtomicBool>,
    on_started: impl Fn(usize, u16) + Send + Sync + 'static,
) -> anyhow::Result<Vec<FlowResult>> {
    check_flows(bed, flows)?;
    let Some(last_stop) = flows.iter().map(|f| f.stop).max() else {
        return Ok(Vec::new());
    };
    let routes = routes_of(bed, port, flows)?;
    let listeners = listen_all(&routes)?;
    let t0 = Instant::now();
    let run_deadline = t0 + last_stop + Duration::from_secs(GRACE_S);
    let senders_done = Arc::new(AtomicBool::new(false));
    let mut receivers = Vec::with_capacity(listeners.len());
    for (_, listener) in listeners {
        let done = Arc::clone(&senders_done);
        let spawned = thread::Builder::new()
            .name("bulk receiver".into())
            .spawn(move || receive_all(listener, t0, run_deadline, &done));
        match spawned {
            Ok(h) => receivers.push(h),
            Err(e) => {
                senders_done.store(true, Ordering::Relaxed);
                return Err(anyhow!(e)).context("starting a receiver thread");
            }
        }
    }

    let on_started: Arc<dyn Fn(usize, u16) + Send + Sync> = Arc::new(on_started);
    // Set if the run cannot be set up completely, to end the flows already started.
    let abort = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::with_capacity(flows.len());
    for (flow, (_, from_ns, dst)) in flows.iter().zip(&routes) {
        let flow_c = flow.clone();
        let halt = [Arc::clone(&stop), Arc::clone(&abort)];
        let on_started = Arc::clone(&on_started);
        let dst = *dst;
        let spawned = spawn_in_netns(from_ns, move || {
            send_flow(&flow_c, dst, t0, &halt, &*on_started)
        });
        match spawned {
            Ok(handle) => senders.push(handle),
            Err(e) => {
                // The flows already started end on their own, bounded, and so does the receiver.
                abort.store(true, Ordering::Relaxed);
                senders_done.store(true, Ordering::Relaxed);
                return Err(anyhow!(e)).context(format!("starting the sender of flow {}", flow.id));
            }
        }
    }
    let outcomes: Vec<SenderOutcome> = senders
        .into_iter()
        .map(|handle| join_io(handle).unwrap_or_else(|e| SenderOutcome::failed(t0, e.to_string())))
        .collect();
    senders_done.store(true, Ordering::Relaxed);
    let mut received = HashMap::new();
    for receiver in receivers {
        received.extend(
            receiver
                .join()
                .map_err(|_| anyhow!("the receiver thread panicked"))?,
        );
    }

    Ok(results(flows, outcomes, received))
}

/// Fails on a flow that stops before it starts or names a sender the testbed lacks.
fn check_flows(bed: &(impl Endpoints + ?Sized), flows: &[FlowSpec]) -> anyhow::Result<()> {
    for f in flows {
        if f.stop < f.start {
            bail!(
                "flow {}: stop time {:?} is before its start time {:?}",
                f.id,
                f.stop,
                f.start
            );
        }
    }
    for f in flows {
        if f.sender >= bed.senders() {
            bail!(
                "flow {}: sender {} does not exist (the testbed has {})",
                f.id,
                f.sender,
                bed.senders()
            );
        }
    }
    Ok(())
}

/// Where one flow's data goes: the namespace of its listener, the namespace its data
/// sender connects from, and the address it connects to.
type Route = (String, String, SocketAddrV4);

/// Each flow's [`Route`], in flow order. Forward: sender -> receiver; reverse: receiver
/// -> sender (errors where the testbed has no address for that sender).
fn routes_of(
    bed: &(impl Endpoints + ?Sized),
    port: u16,
    flows: &[FlowSpec],
) -> anyhow::Result<Vec<Route>> {
    let mut routes = Vec::with_capacity(flows.len());
    for f in flows {
        let (rcv_ns, rcv_addr) = bed.receiver_of(f.sender);
        let snd_ns = bed.sender_ns_at(f.sender);
        routes.push(if f.reverse {
            let addr = bed
                .sender_addr_of(f.sender)
                .with_context(|| format!("flow {} (reverse)", f.id))?;
            (
                snd_ns.to_string(),
                rcv_ns.to_string(),
                SocketAddrV4::new(addr, port),
            )
        } else {
            (
                rcv_ns.to_string(),
                snd_ns.to_string(),
                SocketAddrV4::new(rcv_addr, port),
            )
        });
    }
    Ok(routes)
}

/// One non-blocking listener per destination the routes use (the dumbbell has one for
/// forward flows, and one per sender that reverse flows go to), each bound in its
/// namespace.
fn listen_all(routes: &[Route]) -> anyhow::Result<Vec<(SocketAddrV4, TcpListener)>> {
    let mut listeners: Vec<(SocketAddrV4, TcpListener)> = Vec::new();
    for (ns, _, dst) in routes {
        let dst = *dst;
        if listeners.iter().any(|(d, _)| *d == dst) {
            continue;
        }
        let listen = move || -> io::Result<TcpListener> {
            let listener = TcpListener::bind(dst)?; // std sets SO_REUSEADDR
                                                    // accept(2) waits at most this long (SO_RCVTIMEO), so the accept loop wakes
                                                    // five times a second, not a hundred: each wake-up costs a guest on the
                                                    // virtual clock a timer event.
            socket2::SockRef::from(&listener)
                .set_read_timeout(Some(Duration::from_millis(IO_TIMEOUT_MS)))?;
            Ok(listener)
        };
        let listener = spawn_in_netns(ns, listen)
            .and_then(join_io)
            .and_then(|listener| listener)
            .with_context(|| format!("listening on {dst} in network namespace {ns}"))?;
        listeners.push((dst, listener));
    }
    Ok(listeners)
}

/// Each flow's result from its sender's outcome and what the receivers counted for its
/// connection (by the sender's local address), in flow order.
fn results(
    flows: &[FlowSpec],
    outcomes: Vec<SenderOutcome>,
    mut received: HashMap<SocketAddrV4, Received>,
) -> Vec<FlowResult> {
    flows
        .iter()
        .zip(outcomes)
        .map(|(flow, out)| {
            let got = out.local.and_then(|a| received.remove(&a));
            let mut error = out.error;
            let ended = match (&got, out.local) {
                (Some(r), _) => {
                    if error.is_none() {
                        error = r.error.clone();
                    }
                    r.ended.unwrap_or(out.finished)
                }
                (None, Some(_)) => {
                    error
                        .get_or_insert_with(|| "the receiver never accepted the connection".into());
                    out.finished
                }
                (None, None) => out.finished,
            };
            FlowResult {
                id: flow.id,
                cc: flow.cc.clone(),
                local_port: out.local.map_or(0, |a| a.port()),
                local_ip: out
                    .local
                    .map_or(std::net::Ipv4Addr::UNSPECIFIED, |a| *a.ip()),
                bytes: got.map_or(0, |r| r.bytes),
                started: out.started,
                ended,
                error,
                segments: out.segments,
            }
        })
        .collect()
}

/// Joins a thread started by [`spawn_in_netns`], turning a panic into an error.
fn join_io<T>(handle: JoinHandle<io::Result<T>>) -> io::Result<T> {
    handle
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the thread panicked")))
}

/// What a sender thread saw.
struct SenderOutcome {
    local: Option<SocketAddrV4>,
    /// Connection established (or gave up), after t0.
    started: Duration,
    /// Sender finished (drained or gave up), after t0.
    finished: Duration,
    error: Option<String>,
    /// Segment counters when the sender stopped writing.
    segments: Option<SegmentCounts>,
}

impl SenderOutcome {
    fn failed(t0: Instant, error: String) -> SenderOutcome {
        let now = t0.elapsed();
        SenderOutcome {
            local: None,
            started: now,
            finished: now,
            error: Some(error),
            segments: None,
        }
    }
}

/// Sends one flow: waits for its start, connects with its CC, writes until its stop time (or
/// a `halt` flag), shuts down its write side and waits for the receiver to close.
fn send_flow(
    flow: &FlowSpec,
    dst: SocketAddrV4,
    t0: Instant,
    halt: &[Arc<AtomicBool>],
    on_started: &(dyn Fn(usize, u16) + Send + Sync),
) -> SenderOutcome {
    let halted = || halt.iter().any(|h| h.load(Ordering::Relaxed));
    let stop_at = t0 + flow.stop;
    let deadline = stop_at + Duration::from_secs(GRACE_S);
    let fail = |error: String| SenderOutcome::failed(t0, error);

    while Instant::now() < t0 + flow.start {
        if halted() {
            return fail("the run was stopped before this flow's start time".into());
        }
        thread::sleep(
            (t0 + flow.start)
                .saturating_duration_since(Instant::now())
                .min(poll()),
        );
    }
    let socket = match Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)) {
        Ok(s) => s,
        Err(e) => return fail(format!("creating a TCP socket: {e}")),
    };
    if let Err(e) = socket.set_tcp_congestion(flow.cc.as_bytes()) {
        return fail(format!("setting TCP_CONGESTION={}: {e}", flow.cc));
    }
    if let Err(e) = set_notsent_lowat(&socket, NOTSENT_LOWAT_BYTES) {
        return fail(format!(
            "setting TCP_NOTSENT_LOWAT={NOTSENT_LOWAT_BYTES}: {e}"
        ));
    }
    let timeout = Duration::from_millis(CONNECT_TIMEOUT_MS);
    if let Err(e) = socket.connect_timeout(&SocketAddr::V4(dst).into(), timeout) {
        return fail(format!("connecting to {dst}: {e}"));
    }
    let started = t0.elapsed();
    let local = match socket.local_addr().map(|a| a.as_socket()) {
        Ok(Some(SocketAddr::V4(a))) => a,
        Ok(Some(SocketAddr::V6(_))) => return fail("the socket has an IPv6 local address".into()),
        Ok(None) => return fail("the socket has no IP local address".into()),
        Err(e) => return fail(format!("reading the local address: {e}")),
    };
    let mut out = SenderOutcome {
        local: Some(local),
        started,
        finished: started,
        error: None,
        segments: None,
    };
    on_started(flow.id, local.port());

    let io_timeout = Some(Duration::from_millis(IO_TIMEOUT_MS));
    let mut stream: TcpStream = socket.into();
    if let Err(e) = stream
        .set_write_timeout(io_timeout)
        .and(stream.set_read_timeout(io_timeout))
    {
        out.error = Some(format!("setting socket timeouts: {e}"));
    }
    let chunk = match payload() {
        Ok(f) => f,
        Err(e) => return fail(format!("creating the payload memfd: {e}")),
    };
    let mut left = flow.size_bytes.unwrap_or(u64::MAX);
    while out.error.is_none() && left > 0 && Instant::now() < stop_at && !halted() {
        let n = CHUNK_BYTES.min(usize::try_from(left).unwrap_or(usize::MAX));
        let mut offset: libc::off_t = 0;
        match nix::sys::sendfile::sendfile(&stream, &chunk, Some(&mut offset), n) {
            Ok(w) => left -= w as u64,
            Err(e) => match io::Error::from(e) {
                e if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                e => out.error = Some(format!("sending: {e}")),
            },
        }
    }
    // Shut down cleanly: the receiver reads to EOF and then closes, which we wait for.
    if let Err(e) = stream.shutdown(Shutdown::Write) {
        out.error
            .get_or_insert(format!("shutting down the write side: {e}"));
    } else if let Err(e) = wait_for_close(&mut stream, deadline) {
        out.error.get_or_insert(e);
    }
    out.finished = t0.elapsed();
    // After the drain, so every segment sent has been answered.
    out.segments = segment_counts(&stream).ok();
    out
}

/// Reads until the peer closes (EOF) or `deadline` passes.
fn wait_for_close(stream: &mut TcpStream, deadline: Instant) -> Result<(), String> {
    let mut buf = [0u8; 512];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("waiting for the receiver to finish: {e}")),
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "gave up waiting for the receiver to finish, {GRACE_S} s after the stop time"
            ));
        }
    }
}

/// The IPv4 form of a peer address (the testbed is IPv4-only).
fn v4(a: SocketAddr) -> SocketAddrV4 {
    match a {
        SocketAddr::V4(a) => a,
        SocketAddr::V6(a) => SocketAddrV4::new(
            a.ip()
                .to_ipv4_mapped()
                .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
            a.port(),
        ),
    }
}

/// What the receiver saw on one connection.
struct Received {
    bytes: u64,
    /// When it read end-of-stream, after t0.
    ended: Option<Duration>,
    error: Option<String>,
}

/// Accepts connections until the senders are done (or `deadline`), reads each on its own
/// thread until EOF, and returns what each sender port delivered.
fn receive_all(
    listener: TcpListener,
    t0: Instant,
    deadline: Instant,
    senders_done: &AtomicBool,
) -> HashMap<SocketAddrV4, Received> {
    let mut readers = Vec::new();
    while !senders_done.load(Ordering::Relaxed) && Instant::now() < deadline {
        match listener.accept() {
            Ok((stream, peer)) => {
                let spawned = thread::Builder::new()
                    .name(format!("bulk rx {}", peer.port()))
                    .spawn(move || receive_one(stream, t0, deadline));
                match spawned {
                    Ok(h) => readers.push((v4(peer), Some(h))),
                    Err(_) => readers.push((v4(peer), None)),
                }
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => thread::sleep(poll()),
        }
    }
    readers
        .into_iter()
        .map(|(port, h)| {
            let got = match h.map(JoinHandle::join) {
                Some(Ok(r)) => r,
                Some(Err(_)) => Received::failed("the receiving thread panicked"),
                None => Received::failed("could not start a receiving thread"),
            };
            (port, got)
        })
        .collect()
}

impl Received {
    fn failed(why: &str) -> Received {
        Received {
            bytes: 0,
            ended: None,
            error: Some(why.into()),
        }
    }
}

/// Counts the bytes of one connection until EOF (then closes it) or `deadline`.
fn receive_one(stream: TcpStream, t0: Instant, deadline: Instant) -> Received {
    let mut got = Received {
        bytes: 0,
        ended: None,
        error: None,
    };
    let setup = stream
        .set_nonblocking(false)
        .and(stream.set_read_timeout(Some(Duration::from_millis(IO_TIMEOUT_MS))));
    if let Err(e) = setup {
        got.error = Some(format!("receiver: setting socket options: {e}"));
        return got;
    }
    // Never written: MSG_TRUNC makes TCP discard what it consumes instead of copying it.
    let mut buf = vec![0u8; 4 * CHUNK_BYTES];
    loop {
        match discard(&stream, &mut buf) {
            Ok(0) => {
                got.ended = Some(t0.elapsed());
                return got; // dropping the stream closes it: the sender sees EOF
            }
            Ok(n) => got.bytes += n as u64,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                got.ended = Some(t0.elapsed());
                got.error = Some(format!("receiver: {e}"));
                return got;
            }
        }
        if Instant::now() >= deadline {
            got.ended = Some(t0.elapsed());
            got.error = Some(format!(
                "receiver: no end of stream {GRACE_S} s after the last stop time"
            ));
            return got;
        }
    }
}

/// The sender's payload: a memfd holding [`CHUNK_BYTES`] of `0x5a`, which `sendfile(2)`
/// hands to the socket by reference.
fn payload() -> io::Result<std::fs::File> {
    let fd =
        nix::sys::memfd::memfd_create(c"cctl-bulk", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(&[0x5a_u8; CHUNK_BYTES])?;
    Ok(file)
}

/// Consumes up to `buf.len()` bytes of `stream` without copying them (`recv(MSG_TRUNC)`,
/// which TCP implements as discard); returns how many, 0 at the end of the stream.
fn discard(stream: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    nix::sys::socket::recv(
        stream.as_raw_fd(),
        buf,
        nix::sys::socket::MsgFlags::MSG_TRUNC,
    )
    .map_err(io::Error::from)
}

/// A TCP socket's `TCP_INFO` (`struct tcp_info`), which socket2 0.5 has no wrapper for.
///
/// Errors: getsockopt(2) fails (not a TCP socket, closed descriptor).
pub fn tcp_info(sock: &impl std::os::fd::AsRawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data; all-zero is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `sock` is an open socket for the duration of the call, and we pass a pointer
    // to a live tcp_info with its exact size; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

/// The socket's [`SegmentCounts`].
fn segment_counts(stream: &TcpStream) -> io::Result<SegmentCounts> {
    let info = tcp_info(stream)?;
    Ok(SegmentCounts {
        data_segs_out: info.tcpi_data_segs_out,
        segs_in: info.tcpi_segs_in,
    })
}

/// Sets `TCP_NOTSENT_LOWAT` (bytes), which socket2 0.5 has no wrapper for.
fn set_notsent_lowat(socket: &Socket, bytes: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: `socket` is an open socket for the duration of the call, and we pass a pointer
    // to a live c_int together with its exact size, as setsockopt(2) requires.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether `e` is a socket timeout (`SO_RCVTIMEO`/`SO_SNDTIMEO` expiry shows as EAGAIN).
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

fn poll() -> Duration {
    Duration::from_millis(POLL_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netns::netns_exists;
    use crate::testbed::PathSpec;

    fn result(bytes: u64, started_ms: u64, ended_ms: u64) -> FlowResult {
        FlowResult {
            id: 0,
            cc: "cubic".into(),
            local_port: 40000,
            local_ip: std::net::Ipv4Addr::UNSPECIFIED,
            bytes,
            started: Duration::from_millis(started_ms),
            ended: Duration::from_millis(ended_ms),
            error: None,
            segments: None,
        }
    }

    #[test]
    fn segments_per_ack_leaves_out_the_syn_ack() {
        // 1,000 data segments answered by 500 ACKs and the SYN-ACK: delayed ACKs, b = 2.
        let c = SegmentCounts {
            data_segs_out: 1000,
            segs_in: 501,
        };
        assert_eq!(c.segs_per_ack(), Some(2.0));
        let none = SegmentCounts {
            data_segs_out: 0,
            segs_in: 1,
        };
        assert_eq!(none.segs_per_ack(), None);
    }

    #[test]
    fn mean_throughput_is_bits_over_the_flow_lifetime() {
        // 2.5 MB in 2 s = 10 Mbit/s.
        assert_eq!(result(2_500_000, 1000, 3000).mean_throughput_bps(), 10e6);
    }

    #[test]
    fn mean_throughput_of_an_empty_interval_is_zero() {
        assert_eq!(result(1000, 500, 500).mean_throughput_bps(), 0.0);
        assert_eq!(result(1000, 600, 500).mean_throughput_bps(), 0.0);
    }

    #[test]
    fn joining_a_missing_namespace_fails_before_a_thread_starts() {
        let err = spawn_in_netns("cctl-no-such-netns", || ()).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert!(
            err.to_string().contains("/run/netns/cctl-no-such-netns"),
            "{err}"
        );
    }

    /// Needs root: builds a 20 Mbit/s, 100-packet path and pushes one cubic flow through it.
    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn bulk_flow_through_tbf_reaches_the_bottleneck_rate() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test builds network namespaces and needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN); \
             run `cargo test -p cctl-bench` as root, as CI does"
        );
        let spec = PathSpec {
            subnet_octet: 201,
            ..PathSpec::new("cctl-bt", 20, 100)
        };
        let bed = Testbed::create(&spec).expect("creating the testbed");
        let flows = [
            FlowSpec {
                id: 0,
                cc: "cubic".into(),
                start: Duration::ZERO,
                stop: Duration::from_secs(4),
                ..Default::default()
            },
            // A CC the kernel does not know fails alone, with the name in its error.
            FlowSpec {
                id: 1,
                cc: "cctl_no_such".into(),
                start: Duration::ZERO,
                stop: Duration::from_secs(1),
                ..Default::default()
            },
        ];
        let started = Instant::now();
        let results = run_bulk_flows(&bed, 5201, &flows, Arc::new(AtomicBool::new(false)))
            .expect("running the flows");
        let wall = started.elapsed();
        let stats = bed
            .bottleneck_stats()
            .expect("reading the bottleneck's qdisc stats");
        let cubic = &results[0];
        let mbit = cubic.mean_throughput_bps() / 1e6;
        eprintln!("cubic: {cubic:?}, {mbit:.2} Mbit/s; run took {wall:?}; bottleneck: {stats}");

        assert_eq!(cubic.error, None);
        assert!(cubic.local_port > 0);
        assert!(cubic.bytes > 0);
        assert!(
            (12.0..=21.0).contains(&mbit),
            "mean throughput {mbit:.2} Mbit/s"
        );
        assert!(stats.sent_packets > 0, "{stats}");
        let bogus = results[1].error.as_deref().unwrap_or_default();
        assert!(
            bogus.starts_with("setting TCP_CONGESTION=cctl_no_such: "),
            "{bogus}"
        );
        assert_eq!(results[1].bytes, 0);

        let (snd, rcv) = (bed.sender_ns().to_string(), bed.receiver_ns().to_string());
        let rtr = bed.router_ns().to_string();
        bed.destroy().expect("destroying the testbed");
        assert!(
            !netns_exists(&snd) && !netns_exists(&rcv) && !netns_exists(&rtr),
            "namespaces left behind"
        );
    }
}

#[cfg(test)]
mod dumbbell_tests {
    use super::*;
    use crate::testbed::{netem_available, AccessSpec, PathSpec, Testbed, TestbedError};

    fn require_root() {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test builds network namespaces and needs root; run it as root, as CI does"
        );
    }

    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn two_senders_share_the_bottleneck_from_their_own_namespaces() {
        require_root();
        let mut spec = PathSpec {
            subnet_octet: 202,
            ..PathSpec::new("cctl-bt2", 20, 100)
        };
        spec.senders.push(AccessSpec::default());
        let bed = Testbed::create(&spec).expect("creating the dumbbell");
        assert_eq!(bed.senders(), 2);
        let flows: Vec<FlowSpec> = (0..2)
            .map(|i| FlowSpec {
                id: i,
                cc: "reno".into(),
                start: Duration::ZERO,
                stop: Duration::from_secs(5),
                sender: i,
                size_bytes: None,
                reverse: false,
            })
            .collect();
        let results = run_bulk_flows(&bed, 5202, &flows, Arc::new(AtomicBool::new(false))).unwrap();
        for (i, r) in results.iter().enumerate() {
            assert!(r.error.is_none(), "flow {i}: {:?}", r.error);
            assert_eq!(r.local_ip, bed.sender_addr_at(i));
        }
        let total: f64 = results.iter().map(FlowResult::mean_throughput_bps).sum();
        assert!(total > 15e6 && total < 21e6, "aggregate {total} bit/s");
        assert!(
            results.iter().all(|r| r.mean_throughput_bps() > 3e6),
            "a flow starved: {results:?}"
        );
        bed.destroy().unwrap();
    }

    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn a_fixed_size_transfer_delivers_exactly_its_size() {
        require_root();
        let spec = PathSpec {
            subnet_octet: 203,
            ..PathSpec::new("cctl-bt3", 50, 100)
        };
        let bed = Testbed::create(&spec).unwrap();
        let flows = [FlowSpec {
            id: 0,
            cc: "cubic".into(),
            start: Duration::ZERO,
            stop: Duration::from_secs(20),
            sender: 0,
            size_bytes: Some(3_000_000),
            reverse: false,
        }];
        let r = &run_bulk_flows(&bed, 5203, &flows, Arc::new(AtomicBool::new(false))).unwrap()[0];
        assert!(r.error.is_none(), "{:?}", r.error);
        assert_eq!(r.bytes, 3_000_000);
        // 24 Mbit at ≤ 50 Mbit/s takes at least ~0.5 s and far less than the 20 s stop.
        let secs = r.ended.saturating_sub(r.started).as_secs_f64();
        assert!(secs > 0.45 && secs < 10.0, "completion {secs} s");
        bed.destroy().unwrap();
    }

    /// Needs root: one forward and one reverse cubic flow on a 20/10 Mbit/s dumbbell.
    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn a_reverse_flow_runs_from_the_receiver_through_the_reverse_rate() {
        require_root();
        let spec = PathSpec {
            subnet_octet: 206,
            reverse_rate_mbit: Some(10.0),
            ..PathSpec::new("cctl-lu1", 20, 100)
        };
        let bed = Testbed::create(&spec).unwrap();
        let flows = [
            FlowSpec {
                id: 0,
                cc: "cubic".into(),
                stop: Duration::from_secs(3),
                ..Default::default()
            },
            // Half overlapping: while both run, the forward flow's ACKs queue behind the
            // reverse flow's data in the 10 Mbit/s tbf (up to 120 ms), which halves its rate
            // when it has not filled its path first (11.6 to 18.9 Mbit/s in 17 fully overlapping
            // runs; 19.0 in each of 8 runs like this one).
            FlowSpec {
                id: 1,
                cc: "cubic".into(),
                start: Duration::from_millis(1500),
                stop: Duration::from_millis(4500),
                reverse: true,
                ..Default::default()
            },
        ];
        let out = run_bulk_flows(&bed, 5206, &flows, Arc::new(AtomicBool::new(false)));
        let (rcv, snd) = (bed.receiver_addr(), bed.sender_addr());
        // The default sender_addr_of (what a chain uses) finds the same address by routing.
        struct Plain<'a>(&'a Testbed);
        impl Endpoints for Plain<'_> {
            fn senders(&self) -> usize {
                self.0.senders()
            }
            fn sender_ns_at(&self, i: usize) -> &str {
                self.0.sender_ns_at(i)
            }
            fn receiver_of(&self, i: usize) -> (&str, std::net::Ipv4Addr) {
                Endpoints::receiver_of(self.0, i)
            }
        }
        let routed = Plain(&bed).sender_addr_of(0);
        bed.destroy().unwrap();
        let out = out.unwrap();
        let mbit: Vec<f64> = out.iter().map(|r| r.mean_throughput_bps() / 1e6).collect();
        eprintln!("forward, reverse: {mbit:?} Mbit/s; {out:?}");
        for r in &out {
            assert!(r.error.is_none(), "{r:?}");
            assert!(r.bytes > 0, "{r:?}");
        }
        assert_eq!((out[0].local_ip, out[1].local_ip), (snd, rcv));
        assert_eq!(routed.unwrap(), snd);
        // Each direction has its own tbf: 20 Mbit/s forward, 10 Mbit/s reverse.
        assert!(
            (12.0..=21.0).contains(&mbit[0]),
            "forward {} Mbit/s",
            mbit[0]
        );
        assert!(
            (6.0..=10.5).contains(&mbit[1]),
            "reverse {} Mbit/s",
            mbit[1]
        );
    }

    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn delay_needs_netem_and_gives_the_configured_rtt_where_present() {
        require_root();
        let mut spec = PathSpec {
            subnet_octet: 204,
            ..PathSpec::new("cctl-bt4", 20, 100)
        };
        spec.senders[0].rtt_ms = 40.0;
        match Testbed::create(&spec) {
            Err(TestbedError::NoNetem(msg)) => {
                assert!(!netem_available(), "NoNetem although netem works: {msg}");
                assert!(
                    !crate::netns::netns_exists("cctl-bt4-snd1"),
                    "left a namespace behind"
                );
            }
            Err(e) => panic!("unexpected error: {e}"),
            Ok(bed) => {
                assert!(netem_available());
                let addr = bed.receiver_addr().to_string();
                let out = std::process::Command::new("ip")
                    .args([
                        "netns",
                        "exec",
                        bed.sender_ns(),
                        "ping",
                        "-c",
                        "3",
                        "-i",
                        "0.2",
                        &addr,
                    ])
                    .output()
                    .expect("ping runs");
                let text = String::from_utf8_lossy(&out.stdout);
                let avg: f64 = text
                    .lines()
                    .find(|l| l.contains("min/avg/max"))
                    .and_then(|l| l.split('=').nth(1))
                    .and_then(|v| v.trim().split('/').nth(1))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or_else(|| panic!("no ping summary in {text}"));
                assert!((39.0..60.0).contains(&avg), "RTT {avg} ms for a 40 ms path");
                bed.destroy().unwrap();
            }
        }
    }
}
