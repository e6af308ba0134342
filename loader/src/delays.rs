//! Per-packet delay taps (delay.bpf.c): where a testbed's packets are timestamped on
//! their way (leaving the sender, entering and leaving each bottleneck, reaching the
//! receiver), on the one clock every namespace of the testbed shares.
//!
//! Each [`Tap`] is a tcx hook (Linux 6.6+) on one device of one named namespace. The hooks
//! are BPF links held by this process: they go when [`DelayTaps::finish`] runs, when the
//! value is dropped, or when the process dies, so nothing stays attached after a crash. A
//! thread owns the BPF object and reads its ring buffer; events reach the caller through
//! a channel ([`DelayTaps::drain`]).

use std::mem::MaybeUninit;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};

use crate::error::{Error, Result};
use crate::kernel;
use crate::migrate::resolve_netns;
use crate::ringbuf::{poll_until_stopped, Reader, Ready, POLL_INTERVAL};
use crate::skel::delay::types::{cctl_delay_event, cctl_delay_role, cctl_delay_tap};
use crate::skel::delay::DelaySkelBuilder;

// SAFETY: plain C structs of integers (bpf/include/cctl.h) for which every bit pattern is valid.
unsafe impl plain::Plain for cctl_delay_event {}
unsafe impl plain::Plain for cctl_delay_tap {}
unsafe impl plain::Plain for cctl_delay_role {}

/// Timestamp slots per packet (`CCTL_DELAY_SLOTS` in bpf/include/cctl.h).
pub const SLOTS: usize = 10;

/// One place where packets are timestamped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tap {
    /// Network namespace, by its `/run/netns` name.
    pub netns: String,
    /// Device in it.
    pub dev: String,
    /// Ingress (`true`) or egress hook.
    pub ingress: bool,
    /// Timestamp slot this tap writes, 0..[`SLOTS`]; 0 = where a packet enters the
    /// testbed (its origin).
    pub slot: u8,
    /// Whether a packet's path ends here: the event is written and the stamps forgotten.
    pub terminal: bool,
}

/// What to timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayConfig {
    /// Stamp 1 IPv4 TCP packet in this many (1 = every packet), chosen by a hash of the
    /// packet's identity, so every tap picks the same packets.
    pub sample_every: u32,
    /// The taps; at least one origin (slot 0) and one terminal.
    pub taps: Vec<Tap>,
}

/// One sampled packet that reached its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayEvent {
    /// Source address.
    pub saddr: Ipv4Addr,
    /// Destination address.
    pub daddr: Ipv4Addr,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// TCP sequence number.
    pub seq: u32,
    /// IP total length, bytes.
    pub ip_len: u32,
    /// CLOCK_MONOTONIC ns at each slot; 0 where the packet did not pass.
    pub t_ns: [u64; SLOTS],
}

impl DelayEvent {
    /// Decodes one ring-buffer record; `None` if it is too short.
    pub fn decode(data: &[u8]) -> Option<DelayEvent> {
        let mut raw = cctl_delay_event::default();
        // SAFETY: cctl_delay_event is Plain (any bytes are a valid value).
        let dst = unsafe { plain::as_mut_bytes(&mut raw) };
        if data.len() < dst.len() {
            return None;
        }
        dst.copy_from_slice(&data[..dst.len()]);
        let k = &raw.key;
        Some(DelayEvent {
            saddr: Ipv4Addr::from(u32::from_be(k.saddr)),
            daddr: Ipv4Addr::from(u32::from_be(k.daddr)),
            sport: u16::from_be(k.sport),
            dport: u16::from_be(k.dport),
            seq: u32::from_be(k.seq),
            ip_len: raw.ip_len,
            t_ns: raw.t_ns,
        })
    }

    /// Time from slot `from` to slot `to`, usec; `None` unless the packet passed both
    /// (in that order).
    pub fn between_us(&self, from: u8, to: u8) -> Option<f64> {
        let (a, b) = (self.t_ns[from as usize], self.t_ns[to as usize]);
        (a != 0 && b != 0 && b >= a).then(|| (b - a) as f64 / 1e3)
    }
}

/// Counters of a finished [`DelayTaps`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DelayCounts {
    /// Sampled packets stamped at their origin.
    pub stamped: u64,
    /// Sampled packets that reached their destination with their stamps (events written).
    pub delivered: u64,
    /// Sampled packets that reached a destination without stamps (evicted from the map,
    /// or no origin tap on their path).
    pub unmatched: u64,
    /// Events lost because the ring buffer was full.
    pub events_dropped: u64,
    /// GSO packets of more than 64 segments at their origin (the segments past the 64th
    /// were not stamped).
    pub gso_truncated: u64,
}

/// Taps attached: until [`DelayTaps::finish`] or drop.
pub struct DelayTaps {
    rx: Receiver<DelayEvent>,
    reader: Reader<DelayCounts>,
}

impl DelayTaps {
    /// Loads delay.bpf.c, fills its tap table and attaches one tcx hook per tap (each in
    /// its namespace); returns once all are attached.
    ///
    /// Errors: [`Error::BadFilter`] for a config that cannot work (no taps, a slot out of
    /// range, `sample_every` 0, a namespace or device that does not exist);
    /// [`Error::NotPrivileged`]; [`Error::MissingFeature`] (no BTF); [`Error::Bpf`]
    /// (verifier; attach: tcx needs Linux 6.6).
    pub fn start(cfg: DelayConfig) -> Result<DelayTaps> {
        check(&cfg)?;
        kernel::require_privileges("timestamping packets")?;
        kernel::require_btf()?;
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = Reader::start("cctl-delays", move |ready, stop| run(cfg, tx, ready, stop))?;
        Ok(DelayTaps { rx, reader })
    }

    /// Every event written before this call and not yet returned (waits two ring-buffer
    /// reads, ~40 ms).
    pub fn drain(&self) -> Vec<DelayEvent> {
        std::thread::sleep(2 * POLL_INTERVAL + Duration::from_millis(5));
        self.rx.try_iter().collect()
    }

    /// Detaches every tap, reads what is left in the ring buffer, and returns it with the
    /// counters.
    ///
    /// Errors: [`Error::Bpf`] when polling the ring buffer failed.
    pub fn finish(self) -> Result<(Vec<DelayEvent>, DelayCounts)> {
        let counts = self.reader.finish()?;
        Ok((self.rx.try_iter().collect(), counts))
    }
}

fn check(cfg: &DelayConfig) -> Result<()> {
    let bad = |reason: String| Error::BadFilter {
        what: "delay taps".into(),
        reason,
    };
    if cfg.sample_every == 0 {
        return Err(bad(
            "sample_every is 0; give 1 (every packet) or more".into()
        ));
    }
    if !cfg.taps.iter().any(|t| t.slot == 0) || !cfg.taps.iter().any(|t| t.terminal) {
        return Err(bad(
            "need at least one origin tap (slot 0) and one terminal tap".into(),
        ));
    }
    if let Some(t) = cfg.taps.iter().find(|t| t.slot as usize >= SLOTS) {
        return Err(bad(format!(
            "tap {}/{} has slot {}; slots are 0..{}",
            t.netns,
            t.dev,
            t.slot,
            SLOTS - 1
        )));
    }
    Ok(())
}

/// Attaches `prog_fd` as a tcx hook on `dev` of `netns`; returns the link and the tap's
/// key (namespace cookie, ifindex, direction).
fn attach(prog_fd: i32, tap: &Tap) -> Result<(OwnedFd, cctl_delay_tap)> {
    let ns = resolve_netns(Some(&tap.netns))?;
    let cookie = ns.cookie()?;
    ns.within(|| {
        let no_device = |why: String| Error::BadFilter {
            what: format!("delay tap {}/{}", tap.netns, tap.dev),
            reason: format!("no such device in that namespace ({why})"),
        };
        let name =
            std::ffi::CString::new(tap.dev.as_str()).map_err(|e| no_device(e.to_string()))?;
        // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(no_device(std::io::Error::last_os_error().to_string()));
        }
        let attach_type = if tap.ingress {
            libbpf_rs::libbpf_sys::BPF_TCX_INGRESS
        } else {
            libbpf_rs::libbpf_sys::BPF_TCX_EGRESS
        };
        // SAFETY: a plain syscall wrapper; null options are allowed.
        let fd = unsafe {
            libbpf_rs::libbpf_sys::bpf_link_create(
                prog_fd,
                ifindex as i32,
                attach_type,
                std::ptr::null(),
            )
        };
        if fd < 0 {
            return Err(Error::io(
                format!(
                    "attaching the delay tap to {} {} of {} (tcx needs Linux 6.6)",
                    tap.dev,
                    if tap.ingress { "ingress" } else { "egress" },
                    tap.netns
                ),
                "-",
                std::io::Error::from_raw_os_error(-fd),
            ));
        }
        // SAFETY: bpf_link_create returned a new file descriptor we own.
        let link = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok((
            link,
            cctl_delay_tap {
                netns_cookie: cookie,
                ifindex,
                ingress: u32::from(tap.ingress),
            },
        ))
    })
}

/// The reader's body: load, fill the tap table, attach, read until stopped.
fn run(
    cfg: DelayConfig,
    tx: std::sync::mpsc::Sender<DelayEvent>,
    ready: Ready,
    stop: &AtomicBool,
) -> Result<DelayCounts> {
    let mut storage = MaybeUninit::uninit();
    let mut open = match DelaySkelBuilder::default().open(&mut storage) {
        Ok(o) => o,
        Err(e) => return Err(Error::bpf("opening the delay-tap BPF object", e)),
    };
    open.maps
        .rodata_data
        .as_deref_mut()
        .expect("delay .rodata is memory-mapped")
        .sample_every = cfg.sample_every;
    let skel = match open.load() {
        Ok(s) => s,
        Err(e) => return Err(Error::bpf("loading the delay-tap programs (verifier)", e)),
    };
    let mut links = Vec::with_capacity(cfg.taps.len());
    for tap in &cfg.taps {
        let prog = if tap.ingress {
            &skel.progs.delay_ingress
        } else {
            &skel.progs.delay_egress
        };
        let (link, key) = attach(prog.as_fd().as_raw_fd(), tap)?;
        let role = cctl_delay_role {
            slot: u32::from(tap.slot),
            terminal: u32::from(tap.terminal),
        };
        // SAFETY: both are Plain structs; their bytes are the map's key and value.
        let (k, v) = unsafe { (plain::as_bytes(&key), plain::as_bytes(&role)) };
        if let Err(e) = skel.maps.taps.update(k, v, MapFlags::ANY) {
            return Err(Error::bpf("filling the delay-tap table", e));
        }
        links.push(link);
    }
    let mut builder = RingBufferBuilder::new();
    if let Err(e) = builder.add(&skel.maps.events, move |data: &[u8]| {
        if let Some(ev) = DelayEvent::decode(data) {
            let _ = tx.send(ev);
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
    // Events of packets under way when the taps come off.
    drop(links);
    let _ = rb.consume();
    let bss = skel
        .maps
        .bss_data
        .as_deref()
        .expect("delay .bss is memory-mapped");
    // SAFETY: aligned u64s of the memory-mapped .bss, alive as long as `skel`.
    let counts = unsafe {
        DelayCounts {
            stamped: std::ptr::read_volatile(&bss.stamped),
            delivered: std::ptr::read_volatile(&bss.delivered),
            unmatched: std::ptr::read_volatile(&bss.unmatched),
            events_dropped: std::ptr::read_volatile(&bss.events_dropped),
            gso_truncated: std::ptr::read_volatile(&bss.gso_truncated),
        }
    };
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tap(slot: u8, terminal: bool) -> Tap {
        Tap {
            netns: "x".into(),
            dev: "y".into(),
            ingress: terminal,
            slot,
            terminal,
        }
    }

    #[test]
    fn a_config_without_origin_or_terminal_or_with_a_bad_slot_is_refused() {
        let ok = DelayConfig {
            sample_every: 1,
            taps: vec![tap(0, false), tap(1, true)],
        };
        assert!(check(&ok).is_ok());
        for (cfg, needle) in [
            (
                DelayConfig {
                    sample_every: 0,
                    ..ok.clone()
                },
                "sample_every is 0",
            ),
            (
                DelayConfig {
                    sample_every: 1,
                    taps: vec![tap(1, true)],
                },
                "origin tap",
            ),
            (
                DelayConfig {
                    sample_every: 1,
                    taps: vec![tap(0, false), tap(10, true)],
                },
                "slots are 0..9",
            ),
        ] {
            let e = check(&cfg).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn events_decode_from_network_order_and_time_between_slots() {
        let mut raw = cctl_delay_event::default();
        raw.key.saddr = u32::from(Ipv4Addr::new(10, 80, 0, 1)).to_be();
        raw.key.daddr = u32::from(Ipv4Addr::new(10, 77, 0, 129)).to_be();
        raw.key.sport = 40000u16.to_be();
        raw.key.dport = 5301u16.to_be();
        raw.key.seq = 7u32.to_be();
        raw.ip_len = 1500;
        raw.t_ns[0] = 1_000_000;
        raw.t_ns[1] = 1_500_000;
        raw.t_ns[9] = 3_000_000;
        // SAFETY: Plain.
        let ev = DelayEvent::decode(unsafe { plain::as_bytes(&raw) }).unwrap();
        assert_eq!(ev.saddr, Ipv4Addr::new(10, 80, 0, 1));
        assert_eq!(
            (ev.sport, ev.dport, ev.seq, ev.ip_len),
            (40000, 5301, 7, 1500)
        );
        assert_eq!(ev.between_us(0, 9), Some(2000.0));
        assert_eq!(ev.between_us(1, 9), Some(1500.0));
        assert_eq!(ev.between_us(2, 9), None);
        assert!(DelayEvent::decode(&[0u8; 8]).is_none());
    }
}
