//! A decoded collector sample: one flow's congestion state at one instant.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub use crate::algo::Vars;
use crate::catalogue;
use crate::skel::trace::types::{cctl_meas, cctl_sample};

// SAFETY: these are plain C structs of integers and byte arrays (bpf/include/cctl.h) for
// which every bit pattern is valid.
unsafe impl plain::Plain for cctl_sample {}
// SAFETY: as above.
unsafe impl plain::Plain for cctl_meas {}

/// Constants of bpf/include/cctl.h.
pub const CCTL_CA_MAGIC: u32 = 0xCC7C;
const FP_ONE: f64 = 1024.0;
const FLAG_STATE_CHANGE: u8 = 1;
const FLAG_OURS: u8 = 2;
const FLAG_FIRST: u8 = 4;
/// The kernel's `TCP_INFINITE_SSTHRESH` (segments): ssthresh before the first reduction.
const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Bytes of a record without `ca_priv` (`CCTL_SAMPLE_SHORT_BYTES`, the offset of
/// `cctl_sample.ca_priv`): what the collector sends for flows of a native CC.
pub const SAMPLE_SHORT_BYTES: usize = std::mem::offset_of!(cctl_sample, ca_priv);

/// TCP congestion-avoidance state (`icsk_ca_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum CaState {
    /// Normal operation.
    Open,
    /// SACKs or duplicate ACKs seen, no loss inferred yet.
    Disorder,
    /// Window reduced for ECN or a local congestion signal.
    #[serde(rename = "CWR")]
    Cwr,
    /// Fast retransmit / fast recovery.
    Recovery,
    /// Retransmission timeout.
    Loss,
    /// A value this version does not know.
    Unknown,
}

impl CaState {
    fn from_raw(v: u8) -> Self {
        match v {
            0 => CaState::Open,
            1 => CaState::Disorder,
            2 => CaState::Cwr,
            3 => CaState::Recovery,
            4 => CaState::Loss,
            _ => CaState::Unknown,
        }
    }

    /// Whether the window is being reduced (CWR, Recovery or Loss).
    pub fn is_reduction(self) -> bool {
        matches!(self, CaState::Cwr | CaState::Recovery | CaState::Loss)
    }
}

/// One sample of one flow. Columns of `cctl trace --csv`/`--json` in this order.
/// Fields after `delivered` are present only for flows run by a cctl algorithm.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sample {
    /// CLOCK_MONOTONIC time of the sample, ns.
    pub ts_ns: u64,
    /// Socket cookie (stable per connection).
    pub cookie: u64,
    /// Cookie of the socket's network namespace (`getsockopt(SO_NETNS_COOKIE)` of any
    /// socket there; [`crate::migrate::Netns::cookie`]).
    pub netns_cookie: u64,
    /// Local address.
    pub saddr: IpAddr,
    /// Local port.
    pub sport: u16,
    /// Remote address.
    pub daddr: IpAddr,
    /// Remote port.
    pub dport: u16,
    /// Congestion-control name of the socket (interned: one copy per distinct name).
    pub cc: &'static str,
    /// Congestion-avoidance state.
    pub ca_state: CaState,
    /// Emitted because the CA state changed (not because the interval elapsed).
    pub state_change: bool,
    /// The flow's first sample from this collector (how a trace counts flows without
    /// remembering them). Not an output column.
    #[serde(skip)]
    pub first: bool,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Slow-start threshold, segments; `None` while "infinite" (`TCP_INFINITE_SSTHRESH`).
    /// A value above that is kept as the kernel holds it: no congestion control returns
    /// one, so it shows a kernel fault (docs/explanation/known-problems.md); see
    /// [`Sample::ssthresh_is_valid`].
    pub ssthresh: Option<u32>,
    /// Smoothed RTT (kernel), usec.
    pub srtt_us: u32,
    /// RTT variance (kernel mdev), usec.
    pub rttvar_us: u32,
    /// Windowed minimum RTT (kernel), usec.
    pub min_rtt_us: u32,
    /// Bytes acknowledged over the connection's life.
    pub bytes_acked: u64,
    /// Segments currently marked lost.
    pub lost_out: u32,
    /// Retransmitted segments in flight.
    pub retrans_out: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Entries into CWR since the collector attached, counted by the kernel at each
    /// `tcp_set_ca_state()` (tracepoint `tcp_cong_state_set`), count.
    pub cwr_entries: u32,
    /// Entries into Recovery (fast retransmit) since the collector attached, count.
    pub recovery_entries: u32,
    /// Entries into Loss (retransmission timeout) since the collector attached, count.
    pub loss_entries: u32,
    /// Segments sent and not yet acknowledged.
    pub packets_out: u32,
    /// Segments estimated in flight.
    pub in_flight: u32,
    /// Maximum segment size, bytes.
    pub mss: u32,
    /// Segments delivered over the connection's life.
    pub delivered: u32,
    /// cwnd when the current (or last) window reduction began, segments (`tp->prior_cwnd`).
    pub prior_cwnd: u32,
    /// Id of the struct_ops map implementing the socket's CC, which names the loaded
    /// version of a BPF congestion control (`cctl list` shows each version's map id);
    /// `None` for a native (built-in or module) CC.
    pub ca_map_id: Option<u32>,
    /// cctl algorithm key (`reno`, `htcp`), from the shared measurement layer.
    pub algo: Option<&'static str>,
    /// Tmin: minimum RTT seen by the algorithm, usec.
    pub tmin_us: Option<u32>,
    /// Tmax: maximum RTT (since the last reset), usec.
    pub tmax_us: Option<u32>,
    /// Δ: time since the last congestion event, usec.
    pub delta_us: Option<u64>,
    /// Throughput of the last complete congestion epoch, bytes/s.
    pub epoch_tput_bytes_per_s: Option<u64>,
    /// Window reductions so far.
    pub backoffs: Option<u32>,
    /// β applied at the last reduction.
    pub last_beta: Option<f64>,
    /// The algorithm's own variables (spec §18.3), see `cctl list --vars`; in CSV one
    /// column `vars` of space-separated `name=value`.
    pub vars: Vars,
}

pub(crate) fn addr(family: u16, raw: &[u8; 16]) -> IpAddr {
    if family == libc::AF_INET6 as u16 {
        IpAddr::V6(Ipv6Addr::from(*raw)).to_canonical()
    } else {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    }
}

impl Sample {
    /// The slow-start threshold if it is one a congestion control can have set
    /// (segments, below `TCP_INFINITE_SSTHRESH`); `None` while infinite and for a
    /// value above it.
    pub fn valid_ssthresh(&self) -> Option<u32> {
        self.ssthresh.filter(|&v| v < INFINITE_SSTHRESH)
    }

    /// Whether ssthresh is infinite or a value a congestion control can have set;
    /// false for a value above `TCP_INFINITE_SSTHRESH`, which the host kernel of
    /// docs/explanation/known-problems.md stores now and then.
    pub fn ssthresh_is_valid(&self) -> bool {
        self.ssthresh.is_none_or(|v| v < INFINITE_SSTHRESH)
    }

    /// ssthresh as text for people: `-` while infinite, `!` before a value above
    /// `TCP_INFINITE_SSTHRESH` (a kernel fault, README Known problems), else segments.
    pub fn ssthresh_text(&self) -> String {
        match self.ssthresh {
            None => "-".into(),
            Some(v) if !self.ssthresh_is_valid() => format!("!{v}"),
            Some(v) => v.to_string(),
        }
    }

    /// Decodes one ring-buffer record: a `struct cctl_sample`, or its first
    /// [`SAMPLE_SHORT_BYTES`] (no `ca_priv`, sent for native CCs; read as zeros). `None`
    /// if shorter than that.
    pub fn decode(data: &[u8]) -> Option<Sample> {
        if data.len() < SAMPLE_SHORT_BYTES {
            return None;
        }
        let mut raw = cctl_sample::default();
        // SAFETY: cctl_sample is Plain (any bytes are a valid value).
        let dst = unsafe { plain::as_mut_bytes(&mut raw) };
        let n = data.len().min(dst.len());
        dst[..n].copy_from_slice(&data[..n]);
        let mut s = Sample {
            ts_ns: raw.ts_ns,
            cookie: raw.cookie,
            netns_cookie: raw.netns_cookie,
            saddr: addr(raw.family, &raw.saddr),
            sport: raw.sport,
            daddr: addr(raw.family, &raw.daddr),
            dport: raw.dport,
            cc: crate::algo::intern_name(&raw.cc_name),
            ca_state: CaState::from_raw(raw.ca_state),
            state_change: raw.flags & FLAG_STATE_CHANGE != 0,
            first: raw.flags & FLAG_FIRST != 0,
            cwnd: raw.snd_cwnd,
            ssthresh: (raw.snd_ssthresh != INFINITE_SSTHRESH).then_some(raw.snd_ssthresh),
            srtt_us: raw.srtt_us,
            rttvar_us: raw.rttvar_us,
            min_rtt_us: raw.min_rtt_us,
            bytes_acked: raw.bytes_acked,
            lost_out: raw.lost_out,
            retrans_out: raw.retrans_out,
            total_retrans: raw.total_retrans,
            cwr_entries: raw.cwr_entries,
            recovery_entries: raw.recovery_entries,
            loss_entries: raw.loss_entries,
            packets_out: raw.packets_out,
            in_flight: raw.in_flight,
            mss: raw.mss_cache,
            delivered: raw.delivered,
            prior_cwnd: raw.prior_cwnd,
            ca_map_id: (raw.ca_map_id != 0).then_some(raw.ca_map_id),
            algo: None,
            tmin_us: None,
            tmax_us: None,
            delta_us: None,
            epoch_tput_bytes_per_s: None,
            backoffs: None,
            last_beta: None,
            vars: Vars::default(),
        };
        if raw.flags & FLAG_OURS != 0 {
            s.decode_ours(&raw);
        }
        Some(s)
    }

    fn decode_ours(&mut self, raw: &cctl_sample) {
        let mut m = cctl_meas::default();
        if plain::copy_from_bytes(&mut m, &raw.ca_priv).is_err() || m.magic >> 16 != CCTL_CA_MAGIC {
            return;
        }
        let algo = catalogue::by_id(((m.magic >> 8) & 0xff) as u8);
        self.algo = algo.map(|a| a.key);
        self.tmin_us = Some(m.tmin_us);
        self.tmax_us = Some(m.tmax_us);
        self.delta_us = Some(raw.mstamp_us.saturating_sub(m.cong_us));
        self.epoch_tput_bytes_per_s = Some(m.epoch_tput_Bps);
        self.backoffs = Some(m.backoffs);
        self.last_beta = Some(f64::from(m.last_beta) / FP_ONE);
        if let Some(a) = algo {
            self.vars = (a.vars)(&raw.ca_priv);
        }
    }
}

#[cfg(test)]
#[allow(clippy::field_reassign_with_default)]
mod tests {
    use super::*;
    use crate::skel::htcp::types::cctl_htcp_ca;

    const ALGO_HTCP: u32 = 2;

    #[test]
    fn rust_types_have_the_sizes_of_the_c_structs() {
        {
            assert_eq!(
                std::mem::size_of::<cctl_sample>() as u32,
                (std::mem::size_of::<crate::math::cctl_sample>() as u32)
            );
            assert_eq!(
                std::mem::size_of::<cctl_meas>() as u32,
                (std::mem::size_of::<crate::math::cctl_meas>() as u32)
            );
            assert_eq!(
                std::mem::size_of::<cctl_htcp_ca>() as u32,
                (std::mem::size_of::<crate::math::cctl_htcp_ca>() as u32)
            );
        }
        assert!(
            std::mem::size_of::<cctl_htcp_ca>() <= 104,
            "must fit icsk_ca_priv"
        );
    }

    fn bytes_of(raw: &cctl_sample) -> Vec<u8> {
        // SAFETY: cctl_sample is Plain; reading its bytes is always valid.
        unsafe { plain::as_bytes(raw) }.to_vec()
    }

    #[test]
    fn decodes_a_native_flow_without_cctl_fields() {
        let mut raw = cctl_sample::default();
        raw.family = libc::AF_INET as u16;
        raw.saddr[..4].copy_from_slice(&[10, 77, 0, 1]);
        raw.daddr[..4].copy_from_slice(&[10, 77, 0, 2]);
        raw.sport = 40000;
        raw.dport = 5201;
        raw.snd_cwnd = 42;
        raw.snd_ssthresh = INFINITE_SSTHRESH;
        raw.ca_state = 3;
        for (d, s) in raw.cc_name.iter_mut().zip(b"cubic") {
            *d = *s as _;
        }
        let s = Sample::decode(&bytes_of(&raw)).unwrap();
        assert_eq!(s.saddr.to_string(), "10.77.0.1");
        assert_eq!(s.dport, 5201);
        assert_eq!(s.cc, "cubic");
        assert_eq!(s.cwnd, 42);
        assert_eq!(s.ssthresh, None);
        assert!(s.ssthresh_is_valid());
        assert_eq!(s.ca_state, CaState::Recovery);
        assert!(s.algo.is_none() && s.vars.is_empty());
    }

    #[test]
    fn an_ssthresh_above_infinite_is_kept_and_marked_invalid() {
        let mut raw = cctl_sample::default();
        raw.family = libc::AF_INET as u16;
        raw.snd_cwnd = 721_775_367;
        raw.ca_state = 2;
        for (raw_ssthresh, kept, valid) in [
            (0x8110_4110, Some(0x8110_4110), None),
            (INFINITE_SSTHRESH, None, None),
            (
                INFINITE_SSTHRESH - 1,
                Some(INFINITE_SSTHRESH - 1),
                Some(INFINITE_SSTHRESH - 1),
            ),
            (3, Some(3), Some(3)),
        ] {
            raw.snd_ssthresh = raw_ssthresh;
            let s = Sample::decode(&bytes_of(&raw)).unwrap();
            assert_eq!(s.ssthresh, kept, "{raw_ssthresh:#x}");
            assert_eq!(s.valid_ssthresh(), valid, "{raw_ssthresh:#x}");
            assert_eq!(s.ssthresh_is_valid(), raw_ssthresh <= INFINITE_SSTHRESH);
        }
    }

    #[test]
    fn decodes_htcp_variables_from_ca_priv() {
        let mut h = cctl_htcp_ca::default();
        h.m.magic = (CCTL_CA_MAGIC << 16) | (ALGO_HTCP << 8) | 1;
        h.m.tmin_us = 20_000;
        h.m.tmax_us = 30_000;
        h.m.cong_us = 1_000_000;
        h.m.backoffs = 3;
        h.m.last_beta = 700;
        h.alpha = 3 * 1024;
        h.beta = 512;
        let mut raw = cctl_sample::default();
        raw.flags = FLAG_OURS;
        raw.mstamp_us = 3_500_000;
        // SAFETY: cctl_htcp_ca is Plain.
        let hb = unsafe { plain::as_bytes(&h) };
        raw.ca_priv[..hb.len()].copy_from_slice(hb);
        let s = Sample::decode(&bytes_of(&raw)).unwrap();
        assert_eq!(s.algo, Some("htcp"));
        assert_eq!(s.delta_us, Some(2_500_000));
        assert_eq!(s.tmin_us, Some(20_000));
        assert_eq!(s.backoffs, Some(3));
        assert!((s.last_beta.unwrap() - 0.6836).abs() < 1e-3);
        assert_eq!(s.vars.get("alpha"), Some(3.0));
        assert_eq!(s.vars.get("beta"), Some(0.5));
        assert_eq!(
            s.vars.to_string(),
            "alpha=3 beta=0.500000 maxb_pps=0 old_maxb_pps=0"
        );
    }

    #[test]
    fn short_records_are_rejected() {
        assert!(Sample::decode(&[0u8; 10]).is_none());
        assert!(Sample::decode(&[0u8; SAMPLE_SHORT_BYTES - 1]).is_none());
    }

    #[test]
    fn a_record_without_ca_priv_decodes_like_the_full_one() {
        assert_eq!(SAMPLE_SHORT_BYTES, 168);
        let mut raw = cctl_sample::default();
        raw.family = libc::AF_INET as u16;
        raw.sport = 5411;
        raw.snd_cwnd = 10;
        raw.ca_map_id = 0;
        for (d, s) in raw.cc_name.iter_mut().zip(b"cubic") {
            *d = *s as _;
        }
        let full = bytes_of(&raw);
        let short = Sample::decode(&full[..SAMPLE_SHORT_BYTES]).unwrap();
        let long = Sample::decode(&full).unwrap();
        assert_eq!((short.sport, short.cwnd), (5411, 10));
        assert_eq!(short.cc, "cubic");
        assert_eq!(format!("{short:?}"), format!("{long:?}"));
    }
}
