//! Close records: one per TCP socket when it is destroyed (close.bpf.c), in the spirit
//! of RFC 4898's tcpEStats: what the connection did over its whole life, for any TCP
//! flow on the host, native congestion controls included.
//!
//! A thread owns the BPF object and reads its ring buffer; records reach the caller
//! through a channel ([`CloseRecords::recv_timeout`], [`CloseRecords::drain`]).

use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::RingBufferBuilder;

use crate::error::{Error, Result};
use crate::kernel;
use crate::ringbuf::{poll_until_stopped, Reader, Ready, POLL_INTERVAL};
use crate::sample::addr;
use crate::skel::close::types::cctl_close_record;
use crate::skel::close::CloseSkelBuilder;

// SAFETY: a plain C struct of integers and byte arrays (bpf/include/cctl.h) for which every bit
// pattern is valid.
unsafe impl plain::Plain for cctl_close_record {}

const FLAG_SEEN: u16 = 1;

/// Which sockets get a record.
#[derive(Debug, Clone, Copy, Default)]
pub struct CloseConfig {
    /// Only sockets with this local or remote port.
    pub port: Option<u16>,
    /// Only sockets of the network namespace with this cookie
    /// ([`crate::migrate::Netns::cookie`]).
    pub netns_cookie: Option<u64>,
}

/// One TCP socket's whole life, written when it is destroyed. Counters are the socket's
/// own (tcp_info's names in the docs); the `Option` fields come from tcp_probe and are
/// `None` for a socket that never received a segment once established.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CloseRecord {
    /// When it was destroyed, CLOCK_MONOTONIC ns.
    pub ts_ns: u64,
    /// Socket cookie (as in the collector's samples).
    pub cookie: u64,
    /// Cookie of its network namespace.
    pub netns_cookie: u64,
    /// Local address.
    pub saddr: IpAddr,
    /// Local port.
    pub sport: u16,
    /// Remote address.
    pub daddr: IpAddr,
    /// Remote port.
    pub dport: u16,
    /// Congestion control at the end.
    pub cc: String,
    /// Id of the struct_ops map of a BPF congestion control (names its loaded version,
    /// see `cctl list`); `None` for a native one.
    pub ca_map_id: Option<u32>,
    /// From the first segment received once established to destruction, s.
    pub duration_s: Option<f64>,
    /// Bytes acknowledged by the peer (tcpi_bytes_acked, RFC 4898 HCThruOctetsAcked).
    pub bytes_acked: u64,
    /// Bytes received (tcpi_bytes_received, HCThruOctetsReceived).
    pub bytes_received: u64,
    /// Bytes retransmitted (tcpi_bytes_retrans).
    pub bytes_retrans: u64,
    /// Segments sent (tcpi_segs_out, SegsOut).
    pub segs_out: u32,
    /// Segments received (tcpi_segs_in, SegsIn).
    pub segs_in: u32,
    /// Segments sent carrying data (tcpi_data_segs_out, DataSegsOut).
    pub data_segs_out: u32,
    /// Segments received carrying data (tcpi_data_segs_in, DataSegsIn).
    pub data_segs_in: u32,
    /// Segments retransmitted (tcpi_total_retrans, SegsRetrans).
    pub total_retrans: u32,
    /// Segments delivered with an ECN CE mark echoed (tcpi_delivered_ce).
    pub delivered_ce: u32,
    /// cwnd at destruction, segments.
    pub cwnd_at_close: u32,
    /// Smallest cwnd, segments.
    pub min_cwnd: Option<u32>,
    /// Largest cwnd, segments (RFC 4898 MaxSsCwnd/MaxCaCwnd together).
    pub max_cwnd: Option<u32>,
    /// Smallest srtt, usec.
    pub min_srtt_us: Option<u32>,
    /// Mean srtt over the segments received, usec.
    pub mean_srtt_us: Option<u32>,
    /// Largest srtt, usec.
    pub max_srtt_us: Option<u32>,
    /// Time in TCP_CA_Open, usec (from the first segment received once established
    /// until destruction, as tcp_probe saw the state change; RFC 4898 and tcp_info have
    /// no such counter).
    pub ca_open_us: Option<u64>,
    /// Time in TCP_CA_Disorder, usec.
    pub ca_disorder_us: Option<u64>,
    /// Time in TCP_CA_CWR, usec.
    pub ca_cwr_us: Option<u64>,
    /// Time in TCP_CA_Recovery, usec.
    pub ca_recovery_us: Option<u64>,
    /// Time in TCP_CA_Loss, usec.
    pub ca_loss_us: Option<u64>,
    /// cctl algorithm key of a cctl congestion control (`htcp`), from `cctl list`'s
    /// records ([`CloseRecord::annotate`]); `None` for a native one.
    pub algo: Option<String>,
    /// Its loaded version (`cctl list`), as [`CloseRecord::annotate`] finds it.
    pub version: Option<u32>,
    /// Its parameters at load, `key=value` joined by `;`, as [`CloseRecord::annotate`]
    /// finds them.
    pub params: Option<String>,
    /// Time with data in flight, limited by rwnd or sndbuf or not (tcpi_busy_time), usec;
    /// jiffies resolution.
    pub busy_us: u64,
    /// Time limited by the receive window (tcpi_rwnd_limited), usec.
    pub rwnd_limited_us: u64,
    /// Time limited by the send buffer (tcpi_sndbuf_limited), usec.
    pub sndbuf_limited_us: u64,
}

impl CloseRecord {
    /// Fills `algo`, `version` and `params` from cctl's records of the loaded names,
    /// when the socket ran one of cctl's congestion controls.
    pub fn annotate(&mut self, versions: &mut crate::upgrade::VersionCache) {
        if let Some(v) = versions.loaded(&self.cc, self.ca_map_id) {
            self.params = Some(
                v.params
                    .iter()
                    .map(|(k, x)| format!("{k}={x}"))
                    .collect::<Vec<_>>()
                    .join(";"),
            );
            self.algo = Some(v.algo);
            self.version = Some(v.version);
        }
    }

    /// Decodes one ring-buffer record; `None` if it is too short.
    pub fn decode(data: &[u8]) -> Option<CloseRecord> {
        let mut raw = cctl_close_record::default();
        // SAFETY: cctl_close_record is Plain (any bytes are a valid value).
        let dst = unsafe { plain::as_mut_bytes(&mut raw) };
        if data.len() < dst.len() {
            return None;
        }
        dst.copy_from_slice(&data[..dst.len()]);
        let seen = raw.flags & FLAG_SEEN != 0;
        let us = |i: usize| seen.then_some(raw.ca_ns[i] / 1000);
        Some(CloseRecord {
            ts_ns: raw.ts_ns,
            cookie: raw.cookie,
            netns_cookie: raw.netns_cookie,
            saddr: addr(raw.family, &raw.saddr),
            sport: raw.sport,
            daddr: addr(raw.family, &raw.daddr),
            dport: raw.dport,
            cc: crate::algo::read_name(&raw.cc_name),
            ca_map_id: (raw.ca_map_id != 0).then_some(raw.ca_map_id),
            duration_s: seen.then(|| raw.ts_ns.saturating_sub(raw.first_ns) as f64 / 1e9),
            bytes_acked: raw.bytes_acked,
            bytes_received: raw.bytes_received,
            bytes_retrans: raw.bytes_retrans,
            segs_out: raw.segs_out,
            segs_in: raw.segs_in,
            data_segs_out: raw.data_segs_out,
            data_segs_in: raw.data_segs_in,
            total_retrans: raw.total_retrans,
            delivered_ce: raw.delivered_ce,
            cwnd_at_close: raw.snd_cwnd,
            min_cwnd: seen.then_some(raw.min_cwnd),
            max_cwnd: seen.then_some(raw.max_cwnd),
            min_srtt_us: seen.then_some(raw.min_srtt_us),
            mean_srtt_us: seen.then_some(raw.mean_srtt_us),
            max_srtt_us: seen.then_some(raw.max_srtt_us),
            ca_open_us: us(0),
            ca_disorder_us: us(1),
            ca_cwr_us: us(2),
            ca_recovery_us: us(3),
            ca_loss_us: us(4),
            algo: None,
            version: None,
            params: None,
            busy_us: raw.busy_us,
            rwnd_limited_us: raw.rwnd_limited_us,
            sndbuf_limited_us: raw.sndbuf_limited_us,
        })
    }
}

/// Counters of a finished [`CloseRecords`].
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct CloseStats {
    /// Records the kernel wrote.
    pub emitted: u64,
    /// Records lost because the ring buffer was full.
    pub dropped: u64,
}

/// Close records being written: attached until [`CloseRecords::finish`] or drop.
pub struct CloseRecords {
    rx: Receiver<CloseRecord>,
    reader: Reader<CloseStats>,
}

impl CloseRecords {
    /// Loads close.bpf.c and attaches it to tcp_probe and tcp_destroy_sock; returns once
    /// attached. Sockets destroyed from then on get a record; their accumulated fields
    /// cover what happened after this call.
    ///
    /// Errors: [`Error::NotPrivileged`], [`Error::MissingFeature`] (no BTF),
    /// [`Error::Bpf`] (verifier or attach).
    pub fn start(cfg: CloseConfig) -> Result<CloseRecords> {
        kernel::require_privileges("writing close records")?;
        kernel::require_btf()?;
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = Reader::start("cctl-close", move |ready, stop| run(cfg, tx, ready, stop))?;
        Ok(CloseRecords { rx, reader })
    }

    /// The next record, waiting at most `timeout`; `None` when none came.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<CloseRecord> {
        self.rx.recv_timeout(timeout).ok()
    }

    /// Every record written before this call and not yet returned (waits two ring-buffer
    /// reads, ~40 ms).
    pub fn drain(&self) -> Vec<CloseRecord> {
        std::thread::sleep(2 * POLL_INTERVAL + Duration::from_millis(5));
        self.rx.try_iter().collect()
    }

    /// Stops, detaches and returns the counters.
    pub fn finish(self) -> Result<CloseStats> {
        self.reader.finish()
    }
}

/// The reader's body: load, attach, read until stopped.
fn run(
    cfg: CloseConfig,
    tx: std::sync::mpsc::Sender<CloseRecord>,
    ready: Ready,
    stop: &AtomicBool,
) -> Result<CloseStats> {
    let mut storage = MaybeUninit::uninit();
    let mut open = match CloseSkelBuilder::default().open(&mut storage) {
        Ok(o) => o,
        Err(e) => return Err(Error::bpf("opening the close-record BPF object", e)),
    };
    {
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .expect("close .rodata is memory-mapped");
        ro.filter_port = cfg.port.unwrap_or(0);
        ro.filter_netns = cfg.netns_cookie.unwrap_or(0);
    }
    let mut skel = match open.load() {
        Ok(s) => s,
        Err(e) => {
            return Err(Error::bpf(
                "loading the close-record programs (verifier)",
                e,
            ))
        }
    };
    if let Err(e) = skel.attach() {
        return Err(Error::bpf(
            "attaching to tp_btf/tcp_probe and tp_btf/tcp_destroy_sock",
            e,
        ));
    }
    let mut builder = RingBufferBuilder::new();
    if let Err(e) = builder.add(&skel.maps.records, move |data: &[u8]| {
        if let Some(r) = CloseRecord::decode(data) {
            let _ = tx.send(r);
        }
        0
    }) {
        return Err(Error::bpf("setting up the ring buffer", e));
    }
    let rb = match builder.build() {
        Ok(rb) => rb,
        Err(e) => return Err(Error::bpf("setting up the ring buffer", e)),
    };
    ready.attached();
    poll_until_stopped(&rb, stop, || {})?;
    let bss = skel
        .maps
        .bss_data
        .as_deref()
        .expect("close .bss is memory-mapped");
    // SAFETY: aligned u64s of the memory-mapped .bss, alive as long as `skel`.
    let (emitted, dropped) = unsafe {
        (
            std::ptr::read_volatile(&bss.records_emitted),
            std::ptr::read_volatile(&bss.records_dropped),
        )
    };
    Ok(CloseStats { emitted, dropped })
}
