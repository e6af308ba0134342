//! The collector: per-flow samples from the tcp_probe tracepoint (trace.bpf.c),
//! through a BPF ring buffer, as a tokio stream of [`Sample`]s.
//!
//! A dedicated thread owns the BPF object and polls the ring buffer; samples go
//! to the consumer through a bounded channel. A slow consumer makes the ring
//! buffer fill, and the kernel counts what it then drops ([`TraceStats::dropped`]).

use std::mem::MaybeUninit;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::RingBufferBuilder;

use crate::catalogue::validate_cc_name;
use crate::error::{Error, Result};
use crate::kernel;
use crate::ringbuf::{poll_until_stopped, Reader, Ready};
use crate::sample::Sample;
use crate::skel::trace::TraceSkelBuilder;

/// Default minimum interval between two samples of one flow: 100 ms, [P0]'s δ
/// (spec §18.3). A CA-state change is always sampled.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// What to trace.
#[derive(Debug, Clone)]
pub struct TraceConfig {
    /// Minimum gap between samples of one flow (in-kernel rate limit).
    pub interval: Duration,
    /// Keep only flows with this local or remote port.
    pub port: Option<u16>,
    /// Keep only flows running this congestion control.
    pub cc: Option<String>,
    /// Keep only flows of the network namespace with this cookie
    /// ([`crate::migrate::Netns::cookie`]).
    pub netns_cookie: Option<u64>,
}

impl Default for TraceConfig {
    fn default() -> Self {
        TraceConfig {
            interval: DEFAULT_INTERVAL,
            port: None,
            cc: None,
            netns_cookie: None,
        }
    }
}

/// Counters of a finished trace.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TraceStats {
    /// Samples delivered to user space.
    pub samples: u64,
    /// Distinct flows (socket cookies) seen.
    pub flows: usize,
    /// Samples the kernel could not write because the ring buffer was full.
    pub dropped: u64,
    /// Samples the kernel wrote.
    pub kernel_emitted: u64,
    /// Most samples ever waiting in the channel to the consumer, count.
    pub channel_high_water: u64,
    /// Time from attach to stop.
    pub duration: Duration,
}

/// Counters of a running trace, since it started (see [`Trace::counters`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LiveCounters {
    /// Samples delivered to user space (decoded by the collector thread; some may still
    /// wait in the channel), count.
    pub samples: u64,
    /// Samples the kernel wrote into the ring buffer, count.
    pub kernel_emitted: u64,
    /// Samples the kernel could not write because the ring buffer was full, count.
    pub dropped: u64,
    /// Most samples ever waiting in the channel between the collector thread and the
    /// consumer (its depth is 65,536), count.
    pub channel_high_water: u64,
}

impl LiveCounters {
    /// What happened between `earlier` and `self` (for rates: divide by the time between
    /// the two readings). Saturates at 0 if `earlier` is from another trace.
    pub fn since(&self, earlier: &LiveCounters) -> LiveCounters {
        LiveCounters {
            samples: self.samples.saturating_sub(earlier.samples),
            kernel_emitted: self.kernel_emitted.saturating_sub(earlier.kernel_emitted),
            dropped: self.dropped.saturating_sub(earlier.dropped),
            channel_high_water: self.channel_high_water,
        }
    }
}

/// The shared side of [`LiveCounters`]: written by the collector thread, read by anyone.
#[derive(Debug, Default)]
struct LiveAtomics {
    samples: AtomicU64,
    kernel_emitted: AtomicU64,
    dropped: AtomicU64,
    channel_high_water: AtomicU64,
    /// Completed reads of the ring buffer (for [`Trace::drain`]'s wait).
    reads: AtomicU64,
}

impl LiveAtomics {
    fn read(&self) -> LiveCounters {
        LiveCounters {
            samples: self.samples.load(Ordering::Relaxed),
            kernel_emitted: self.kernel_emitted.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            channel_high_water: self.channel_high_water.load(Ordering::Relaxed),
        }
    }
}

/// A running trace: a stream of samples until [`Trace::finish`].
pub struct Trace {
    // Dropped before the reader: a closed channel unblocks a collector waiting on it.
    rx: tokio::sync::mpsc::Receiver<Sample>,
    live: Arc<LiveAtomics>,
    reader: Reader<TraceStats>,
}

const CHANNEL_DEPTH: usize = 65_536;

/// How often the collector thread reads the ring buffer when the program has not woken it:
/// samples reach [`Trace::drain_ready`] at most this late.
pub const POLL_INTERVAL: Duration = crate::ringbuf::POLL_INTERVAL;

/// Pending bytes in the ring buffer above which the program wakes the collector thread at
/// once: a sixteenth of the 16-MiB ring, about 4,000 full or 6,700 short samples.
const WAKEUP_BYTES: u64 = 1 << 20;

impl Trace {
    /// Loads and attaches the collector, returning once it is attached.
    ///
    /// Errors: [`Error::InvalidName`] for a bad `cc` filter, [`Error::NotPrivileged`],
    /// [`Error::MissingFeature`] (no BTF), [`Error::Bpf`] (verifier or attach).
    pub fn start(cfg: TraceConfig) -> Result<Trace> {
        if let Some(cc) = &cfg.cc {
            validate_cc_name(cc)?;
        }
        kernel::require_privileges("tracing TCP flows")?;
        kernel::require_btf()?;
        let (tx, rx) = tokio::sync::mpsc::channel(CHANNEL_DEPTH);
        let live = Arc::new(LiveAtomics::default());
        let thread_live = live.clone();
        let reader = Reader::start("cctl-collector", move |ready, stop| {
            run(cfg, tx, ready, stop, thread_live)
        })?;
        Ok(Trace { rx, live, reader })
    }

    /// Counters since the start, as of the collector's last ring-buffer poll (at most
    /// ~50 ms old while samples flow). Cheap (three atomic loads): call it every refresh.
    pub fn counters(&self) -> LiveCounters {
        self.live.read()
    }

    /// Next sample, waiting for it; `None` once the trace has stopped.
    pub async fn next_sample(&mut self) -> Option<Sample> {
        self.rx.recv().await
    }

    /// Next sample for callers outside an async runtime, waiting at most `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Option<Sample> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.rx.try_recv() {
                Ok(s) => return Some(s),
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return None,
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => {
                    if Instant::now() >= deadline {
                        return None;
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        }
    }

    /// Appends samples to `out` for as long as `busy(out)` holds (checked at least every
    /// 100 ms), e.g. while traffic runs on another thread; then everything emitted until
    /// then ([`Trace::drain`]).
    pub fn collect_while(
        &mut self,
        out: &mut Vec<Sample>,
        mut busy: impl FnMut(&[Sample]) -> bool,
    ) {
        while busy(out) {
            if let Some(s) = self.recv_timeout(Duration::from_millis(100)) {
                out.push(s);
            }
            out.extend(self.drain_ready());
        }
        out.extend(self.drain());
    }

    /// Every sample the kernel emitted before this call and not yet returned: waits
    /// (about [`POLL_INTERVAL`], at most four) until the collector thread has read the
    /// ring buffer after the call began, then returns without waiting for more.
    pub fn drain(&mut self) -> Vec<Sample> {
        let start = self.live.reads.load(Ordering::SeqCst);
        let deadline = Instant::now() + 4 * POLL_INTERVAL;
        // Two reads: the one under way when called may have begun before the call.
        while self.live.reads.load(Ordering::SeqCst) < start + 2
            && Instant::now() < deadline
            && self.reader.is_running()
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.drain_ready()
    }

    /// Samples already delivered to this side of the channel when called, without waiting
    /// (those still in the ring buffer, or delivered during the call, come with a later
    /// call, within [`POLL_INTERVAL`]); at most the channel's depth (65,536 samples). For
    /// periodic readers such as a dashboard's frame loop.
    pub fn drain_ready(&mut self) -> Vec<Sample> {
        take_queued(&mut self.rx)
    }

    /// Stops the trace, detaches the program and returns its counters. Samples
    /// still queued can be read with [`Trace::drain`] before calling this.
    pub fn finish(self) -> Result<TraceStats> {
        let Trace { mut rx, reader, .. } = self;
        reader.stop();
        // Unblock a collector waiting on a full channel.
        rx.close();
        while rx.try_recv().is_ok() {}
        reader.finish()
    }
}

/// What `rx` holds at the call, and nothing that arrives during it.
///
/// Bounded on purpose: emptying the channel "until it is empty" never ends while the
/// collector thread refills it as fast as this side takes (32 saturated loopback flows
/// sampled on every event do), and the returned vector then grows until the process is
/// killed for memory.
fn take_queued<T>(rx: &mut tokio::sync::mpsc::Receiver<T>) -> Vec<T> {
    let n = rx.len();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match rx.try_recv() {
            Ok(s) => out.push(s),
            Err(_) => break,
        }
    }
    out
}

impl futures::Stream for Trace {
    type Item = Sample;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Sample>> {
        self.rx.poll_recv(cx)
    }
}

/// The collector thread: load, attach, poll until stopped.
fn run(
    cfg: TraceConfig,
    tx: tokio::sync::mpsc::Sender<Sample>,
    ready: Ready,
    stop: &AtomicBool,
    live: Arc<LiveAtomics>,
) -> Result<TraceStats> {
    let mut storage = MaybeUninit::uninit();
    let mut open = match TraceSkelBuilder::default().open(&mut storage) {
        Ok(o) => o,
        Err(e) => return Err(Error::bpf("opening the collector BPF object", e)),
    };
    {
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .expect("trace .rodata is memory-mapped");
        ro.interval_ns = cfg.interval.as_nanos().min(u64::MAX as u128) as u64;
        ro.filter_port = cfg.port.unwrap_or(0);
        ro.filter_netns = cfg.netns_cookie.unwrap_or(0);
        ro.wakeup_bytes = WAKEUP_BYTES;
        if let Some(cc) = &cfg.cc {
            for (d, b) in ro.filter_cc.iter_mut().zip(cc.bytes()) {
                *d = b as _;
            }
        }
    }
    let skel = match open.load() {
        Ok(s) => s,
        Err(e) => return Err(Error::bpf("loading the collector (verifier)", e)),
    };
    let _link = match skel.progs.cctl_tcp_probe.attach() {
        Ok(l) => l,
        Err(e) => return Err(Error::bpf("attaching the collector to tp_btf/tcp_probe", e)),
    };
    // In this order: the second counter counts what the kernel made the first skip
    // (trace.bpf.c, count_entry).
    let mut state_links = Vec::new();
    for prog in [
        &skel.progs.cctl_cong_state_set,
        &skel.progs.cctl_cong_state_set2,
    ] {
        match prog.attach() {
            Ok(l) => state_links.push(l),
            Err(e) => {
                return Err(Error::bpf(
                    "attaching the CA-state counters to tp_btf/tcp_cong_state_set",
                    e,
                ))
            }
        }
    }
    let started = Instant::now();

    let bss = skel
        .maps
        .bss_data
        .as_deref()
        .expect("trace .bss is memory-mapped");
    // The kernel updates these behind our back: read them with volatile loads.
    let kernel_counters = || {
        // SAFETY: both fields are aligned u64s of the memory-mapped .bss, which lives as
        // long as `skel`; a torn read is impossible for an aligned u64 on 64-bit targets.
        unsafe {
            (
                std::ptr::read_volatile(&bss.samples_emitted),
                std::ptr::read_volatile(&bss.samples_dropped),
            )
        }
    };
    let publish = || {
        let (emitted, dropped) = kernel_counters();
        live.kernel_emitted.store(emitted, Ordering::Relaxed);
        live.dropped.store(dropped, Ordering::Relaxed);
    };
    // Flows are counted by their first sample (flagged by the program), not remembered:
    // a set of every cookie ever seen grew with each short connection for the life of a
    // long trace (the exporter's and the trace's heap rose in steps in the 30-min soak).
    let mut flows = 0usize;
    {
        let mut builder = RingBufferBuilder::new();
        let cb_flows = &mut flows;
        let cb_live = live.clone();
        let cb_publish = &publish;
        let cb_stop = stop;
        let added = builder.add(&skel.maps.samples, move |data: &[u8]| {
            if let Some(s) = Sample::decode(data) {
                *cb_flows += usize::from(s.first);
                cb_live.samples.fetch_add(1, Ordering::Relaxed);
                // Blocks while the consumer is behind; the kernel then counts drops. A
                // refused sample comes back with the error: no copy per sample.
                let mut s = s;
                loop {
                    match tx.try_send(s) {
                        Ok(()) => {
                            let queued = (tx.max_capacity() - tx.capacity()) as u64;
                            cb_live
                                .channel_high_water
                                .fetch_max(queued, Ordering::Relaxed);
                            break;
                        }
                        Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => return 0,
                        Err(tokio::sync::mpsc::error::TrySendError::Full(back)) => {
                            if cb_stop.load(Ordering::SeqCst) {
                                return 0;
                            }
                            // Drops pile up in the kernel meanwhile: keep them visible.
                            cb_publish();
                            std::thread::sleep(Duration::from_millis(1));
                            s = back;
                        }
                    }
                }
            }
            0
        });
        if let Err(e) = added {
            return Err(Error::bpf("setting up the ring buffer", e));
        }
        let rb = match builder.build() {
            Ok(rb) => rb,
            Err(e) => return Err(Error::bpf("setting up the ring buffer", e)),
        };
        ready.attached();
        // The program wakes this thread only when the ring buffer holds more than
        // `wakeup_bytes` (trace.bpf.c); otherwise it is read every POLL_INTERVAL. One
        // wakeup per sample cost more CPU than decoding the samples.
        poll_until_stopped(&rb, stop, || {
            publish();
            live.reads.fetch_add(1, Ordering::SeqCst);
        })?;
    }
    let end = live.read();
    Ok(TraceStats {
        samples: end.samples,
        flows,
        dropped: end.dropped,
        kernel_emitted: end.kernel_emitted,
        channel_high_water: end.channel_high_water,
        duration: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taking_what_is_queued_ends_while_a_producer_keeps_refilling_the_channel() {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(64);
        for i in 0..40 {
            tx.try_send(i).unwrap();
        }
        let halt = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(40));
        let producer = {
            let (halt, sent) = (halt.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut i = 40u64;
                while !halt.load(Ordering::Relaxed) {
                    if tx.try_send(i).is_ok() {
                        i += 1;
                        sent.store(i, Ordering::Relaxed);
                    }
                }
                i
            })
        };
        // The producer is running before the call.
        while sent.load(Ordering::Relaxed) == 40 {
            std::thread::yield_now();
        }
        // Without the bound this call would not return until the producer stops.
        let got = take_queued(&mut rx);
        halt.store(true, Ordering::Relaxed);
        let produced = producer.join().unwrap();
        assert!((41..=64).contains(&got.len()), "{} taken", got.len());
        assert_eq!(got[..40], (0..40).collect::<Vec<u64>>()[..], "in order");
        // Nothing is lost: the rest comes with the next call, in order.
        let rest = take_queued(&mut rx);
        let all: Vec<u64> = got.into_iter().chain(rest).collect();
        assert_eq!(all, (0..produced).collect::<Vec<u64>>());
    }

    #[test]
    fn live_counters_read_what_the_collector_thread_stored() {
        let live = LiveAtomics::default();
        assert_eq!(live.read(), LiveCounters::default());
        live.samples.fetch_add(7, Ordering::Relaxed);
        live.kernel_emitted.store(9, Ordering::Relaxed);
        live.dropped.store(2, Ordering::Relaxed);
        assert_eq!(
            live.read(),
            LiveCounters {
                samples: 7,
                kernel_emitted: 9,
                dropped: 2,
                channel_high_water: 0,
            }
        );
    }

    #[test]
    fn counters_since_an_earlier_reading_are_differences_and_never_negative() {
        let a = LiveCounters {
            samples: 10,
            kernel_emitted: 12,
            dropped: 1,
            channel_high_water: 0,
        };
        let b = LiveCounters {
            samples: 25,
            kernel_emitted: 30,
            dropped: 1,
            channel_high_water: 0,
        };
        assert_eq!(
            b.since(&a),
            LiveCounters {
                samples: 15,
                kernel_emitted: 18,
                dropped: 0,
                channel_high_water: 0,
            }
        );
        assert_eq!(a.since(&b), LiveCounters::default());
    }
}
