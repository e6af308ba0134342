//! The scripted receiver of one connection: decides, for every segment the sender puts on
//! the TUN device, whether it is lost, what the cumulative ACK, SACK/D-SACK blocks,
//! timestamp echo and ECE of the answer are, and when the answer reaches the sender
//! (the script's RTT after the decision). No I/O: [`Receiver::on_segment`] takes parsed
//! segments and queues [`PendingAck`]s, the driver writes them when due.
//!
//! The path model: all of the RTT is on the ACK path (a segment reaches the receiver the
//! moment the sender's kernel emits it, or behind the script's bottleneck), so what each
//! ACK says is fixed when the segment arrives, and the two senders of a lockstep run see
//! the same path. The script's time-driven rules (stalls, RTT changes) are decided once per
//! arriving segment for all the senders of a run ([`ScriptClock`]): the second sender's
//! copy of a segment arrives some tens of microseconds after the first's, and a stall or
//! an RTT step beginning in between must not treat them differently.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::rc::Rc;

use super::script::{AckPolicy, Script};
use super::wire::{Reply, Segment};

/// Arrivals of two senders' copies of a segment at most this far apart share the first
/// one's script decisions, usec (the driver pairs ACKs within the same window).
pub const SHARED_DECISION_US: u64 = 1000;

/// The script's time-driven decisions per arriving data segment, shared by the receivers
/// of one lockstep run: entry `j` is (arrival time usec, lost to a stall, RTT factor) of
/// the `j`-th data segment the first receiver to see it got. A later receiver's `j`-th
/// segment takes them when it arrives within [`SHARED_DECISION_US`] of that; otherwise
/// (the senders no longer send alike) it decides on its own time.
pub type ScriptClock = Rc<RefCell<Vec<(u64, bool, f64)>>>;

/// Window shift the receiver advertises when the sender offers window scaling.
pub const RCV_WSCALE: u8 = 7;

/// An answer waiting for its time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingAck {
    /// When it reaches the sender, usec on the driver's clock.
    pub due_us: u64,
    /// The packet.
    pub reply: Reply,
}

/// Counters of what the receiver did, for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReceiverStats {
    /// Data segments seen (delivered or lost), count.
    pub segments: u64,
    /// Segments the script lost (first transmissions and stalls), count.
    pub lost: u64,
    /// Segments treated as CE-marked, count.
    pub ce_marked: u64,
    /// D-SACK blocks sent, count.
    pub dsacks: u64,
    /// ACKs queued, count.
    pub acks: u64,
}

/// One connection's receiver (see the module docs).
#[derive(Debug)]
pub struct Receiver {
    local: (Ipv4Addr, u16),
    peer: (Ipv4Addr, u16),
    base_rtt_us: f64,
    start_us: u64,
    policy: AckPolicy,
    delack_us: u64,
    sack: bool,
    dsack: bool,
    ecn: bool,
    timestamps: bool,
    rwnd_bytes: u64,
    loss: super::script::SegmentSet,
    ce: super::script::SegmentSet,
    stalls: Vec<super::script::Phase>,
    /// The script, for its RTT schedule.
    sched: Script,

    /// The sender's initial sequence number; `None` before its SYN.
    irs: Option<u32>,
    iss: u32,
    mss: u32,
    wscale: Option<u8>,
    ts_ok: bool,
    sack_ok: bool,
    ecn_ok: bool,
    /// Next expected byte, relative to irs + 1.
    rcv_nxt: u64,
    /// Highest byte seen (delivered or lost), relative; segments starting at or above it
    /// are first transmissions.
    high_seen: u64,
    /// Out-of-order ranges above rcv_nxt, most recently changed first.
    ooo: Vec<(u64, u64)>,
    /// A D-SACK block to report in the next ACK.
    dsack_block: Option<(u64, u64)>,
    ts_recent: u32,
    last_ack_sent: u64,
    ece: bool,
    /// In-order segments not yet ACKed (delayed ACKs).
    unacked: u32,
    delack_deadline: Option<u64>,
    last_due: u64,
    /// The bottleneck in front of the receiver: usec to carry one byte (0 = none).
    usec_per_byte: f64,
    /// When the bottleneck has carried every segment read so far, usec.
    link_free_us: f64,
    /// Decisions shared with the other receivers of the run, if any.
    clock: Option<ScriptClock>,
    /// Data segments arrived so far (the index into `clock`).
    arrivals: usize,
    /// The RTT factor decided for the segment being answered (`None`: from the time).
    factor_now: Option<f64>,
    /// Answers not yet due, in order.
    pub pending: VecDeque<PendingAck>,
    /// What it did.
    pub stats: ReceiverStats,
}

impl Receiver {
    /// A receiver at `local` for the sender at `peer`, following `script` with base RTT
    /// `base_rtt_ms`, on a clock whose run started at `start_us` (usec).
    pub fn new(
        script: &Script,
        base_rtt_ms: f64,
        local: (Ipv4Addr, u16),
        peer: (Ipv4Addr, u16),
        start_us: u64,
    ) -> Receiver {
        let scale = script.window_scale(base_rtt_ms);
        Receiver {
            local,
            peer,
            base_rtt_us: base_rtt_ms * 1000.0,
            start_us,
            policy: script.ack,
            delack_us: (script.delack_timeout_ms * 1000.0) as u64,
            sack: script.sack,
            dsack: script.dsack,
            ecn: script.ecn,
            timestamps: script.timestamps,
            rwnd_bytes: 0,
            loss: script.loss.scaled(scale),
            ce: script.ce.scaled(scale),
            stalls: script.stall.clone(),
            sched: script.clone(),
            irs: None,
            iss: 0x1000_0000,
            mss: 0,
            wscale: None,
            ts_ok: false,
            sack_ok: false,
            ecn_ok: false,
            rcv_nxt: 0,
            high_seen: 0,
            ooo: Vec::new(),
            dsack_block: None,
            ts_recent: 0,
            last_ack_sent: 0,
            ece: false,
            unacked: 0,
            delack_deadline: None,
            last_due: 0,
            usec_per_byte: if script.rate_mbit > 0.0 {
                8.0 / script.rate_mbit
            } else {
                0.0
            },
            link_free_us: 0.0,
            clock: None,
            arrivals: 0,
            factor_now: None,
            pending: VecDeque::new(),
            stats: ReceiverStats::default(),
        }
        .with_rwnd(if script.rwnd_segments == 0 {
            0
        } else {
            ((f64::from(script.rwnd_segments) * scale).round() as u32).max(4)
        })
    }

    /// The same receiver, deciding the script's time-driven rules together with the
    /// other receivers that share `clock` (see [`ScriptClock`]).
    pub fn sharing(mut self, clock: ScriptClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Whether the data segment arriving at `now_us` is lost to a stall, and the RTT
    /// factor its answer takes: shared with the other receivers of the run.
    fn decide(&mut self, now_us: u64) -> (bool, f64) {
        let t = self.t_rtts(now_us);
        let mine = (Script::in_phase(&self.stalls, t), self.sched.rtt_factor(t));
        let j = self.arrivals;
        self.arrivals += 1;
        let Some(clock) = &self.clock else {
            return mine;
        };
        let mut log = clock.borrow_mut();
        match log.get(j) {
            Some(&(at, stalled, factor)) if at.abs_diff(now_us) <= SHARED_DECISION_US => {
                (stalled, factor)
            }
            Some(_) => mine,
            None => {
                if log.len() == j {
                    log.push((now_us, mine.0, mine.1));
                }
                mine
            }
        }
    }

    fn with_rwnd(mut self, segs: u32) -> Self {
        self.rwnd_bytes = u64::from(segs);
        self
    }

    /// The sender's port (demultiplexes the TUN device's packets).
    pub fn peer_port(&self) -> u16 {
        self.peer.1
    }

    /// Sender's MSS as negotiated, bytes (0 before the SYN).
    pub fn mss(&self) -> u32 {
        self.mss
    }

    /// Base RTTs since the start at `now_us`.
    fn t_rtts(&self, now_us: u64) -> f64 {
        now_us.saturating_sub(self.start_us) as f64 / self.base_rtt_us
    }

    /// When an answer decided at `now_us` reaches the sender (never before an earlier one).
    fn due(&mut self, now_us: u64) -> u64 {
        let factor = self
            .factor_now
            .unwrap_or_else(|| self.sched.rtt_factor(self.t_rtts(now_us)));
        let rtt = self.base_rtt_us * factor;
        let due = (now_us + rtt.round() as u64).max(self.last_due);
        self.last_due = due;
        due
    }

    /// When a data segment read at `now_us` reaches the receiver through the script's
    /// bottleneck (`rate_mbit`): after the segments before it have been carried, each taking
    /// its IP length (payload + 52 bytes of IP and TCP headers with timestamps) at the
    /// rate; the queue is unbounded. `now_us` itself without a bottleneck.
    fn arrival(&mut self, s: &Segment, now_us: u64) -> u64 {
        if self.usec_per_byte <= 0.0 {
            return now_us;
        }
        let start = self.link_free_us.max(now_us as f64);
        self.link_free_us = start + f64::from(s.len + 52) * self.usec_per_byte;
        self.link_free_us.round() as u64
    }

    /// Takes one segment of the sender, read at `now_us`.
    pub fn on_segment(&mut self, s: &Segment, now_us: u64) {
        if s.rst {
            return;
        }
        if s.syn {
            self.on_syn(s, now_us);
            return;
        }
        let Some(irs) = self.irs else { return };
        if s.len == 0 {
            return; // pure ACKs (the handshake's third segment, window updates)
        }
        self.stats.segments += 1;
        let now_us = self.arrival(s, now_us);
        let start = u64::from(s.seq.wrapping_sub(irs.wrapping_add(1)));
        // Relative sequence numbers stay below 2^32 here: runs carry far less than 4 GB.
        let end = start + u64::from(s.len);
        let first_tx = start >= self.high_seen;
        self.high_seen = self.high_seen.max(end);
        let index = start / u64::from(self.mss.max(1));
        let (stalled, factor) = self.decide(now_us);
        if stalled || (first_tx && self.loss.contains(index)) {
            self.stats.lost += 1;
            return;
        }
        self.factor_now = Some(factor);
        self.answer(s, now_us, start, end, first_tx, index);
        self.factor_now = None;
    }

    /// The answer to a delivered data segment (see [`Receiver::on_segment`]).
    fn answer(
        &mut self,
        s: &Segment,
        now_us: u64,
        start: u64,
        end: u64,
        first_tx: bool,
        index: u64,
    ) {
        if s.cwr {
            self.ece = false;
        }
        if self.ecn_ok && first_tx && self.ce.contains(index) {
            self.ece = true;
            self.stats.ce_marked += 1;
        }
        if end <= self.rcv_nxt {
            // A duplicate: report it at once, as a D-SACK where allowed (RFC 2883).
            if self.dsack && self.sack_ok {
                self.dsack_block = Some((start, end));
                self.stats.dsacks += 1;
            }
            self.ack_now(now_us);
            return;
        }
        if start <= self.rcv_nxt {
            if start <= self.last_ack_sent {
                if let Some(v) = s.tsval {
                    self.ts_recent = v;
                }
            }
            let filled_hole = !self.ooo.is_empty();
            self.rcv_nxt = end;
            // Pull in what the hole held.
            loop {
                let before = self.rcv_nxt;
                self.ooo.retain(|&(a, b)| {
                    if a <= before {
                        self.rcv_nxt = self.rcv_nxt.max(b);
                        false
                    } else {
                        true
                    }
                });
                if self.rcv_nxt == before {
                    break;
                }
            }
            if filled_hole || self.policy == AckPolicy::Every {
                self.ack_now(now_us);
                return;
            }
            self.unacked += 1;
            if self.unacked >= 2 {
                self.ack_now(now_us);
            } else if self.delack_deadline.is_none() {
                self.delack_deadline = Some(now_us + self.delack_us);
            }
            return;
        }
        // Out of order: a hole below; a dupACK with SACK at once (RFC 5681 §4.2).
        let mut block = (start, end);
        self.ooo.retain(|&(a, b)| {
            if a <= block.1 && block.0 <= b {
                block = (block.0.min(a), block.1.max(b));
                false
            } else {
                true
            }
        });
        self.ooo.insert(0, block);
        self.ack_now(now_us);
    }

    /// Fires the delayed-ACK timer if it is due at `now_us`.
    pub fn poll(&mut self, now_us: u64) {
        if self.delack_deadline.is_some_and(|d| now_us >= d) {
            self.ack_now(now_us);
        }
    }

    /// Fires the delayed-ACK timer now if it is armed (the driver fires the timers of all
    /// senders of a lockstep run together).
    pub fn fire_delack(&mut self, now_us: u64) {
        if self.delack_deadline.is_some() {
            self.ack_now(now_us);
        }
    }

    /// When the delayed-ACK timer fires, if armed, usec.
    pub fn delack_deadline(&self) -> Option<u64> {
        self.delack_deadline
    }

    fn on_syn(&mut self, s: &Segment, now_us: u64) {
        self.irs = Some(s.seq);
        self.mss = u32::from(s.mss.unwrap_or(536));
        self.wscale = s.wscale;
        self.ts_ok = s.tsval.is_some() && self.timestamps;
        self.sack_ok = s.sack_ok && self.sack;
        self.ecn_ok = self.ecn && s.ece && s.cwr;
        if let Some(v) = s.tsval {
            self.ts_recent = v;
        }
        let reply = Reply {
            src: self.local,
            dst: self.peer,
            seq: self.iss,
            ack: s.seq.wrapping_add(1),
            window: self.window_field(true),
            syn: true,
            ece: self.ecn_ok,
            syn_opts: Some((
                self.mss as u16,
                if self.wscale.is_some() { RCV_WSCALE } else { 0 },
                self.sack_ok,
            )),
            ts: self.ts_ok.then(|| (self.ts_val(now_us), self.ts_recent)),
            sacks: Vec::new(),
        };
        let due = self.due(now_us);
        self.pending.push_back(PendingAck { due_us: due, reply });
    }

    fn ts_val(&self, now_us: u64) -> u32 {
        (now_us.saturating_sub(self.start_us) / 1000) as u32 + 1
    }

    fn window_field(&self, syn: bool) -> u16 {
        let bytes = if self.rwnd_bytes == 0 {
            u64::from(u16::MAX) << RCV_WSCALE
        } else {
            self.rwnd_bytes * u64::from(self.mss.max(1))
        };
        match (syn, self.wscale) {
            (false, Some(_)) => (bytes >> RCV_WSCALE).min(u64::from(u16::MAX)) as u16,
            _ => bytes.min(u64::from(u16::MAX)) as u16,
        }
    }

    fn ack_now(&mut self, now_us: u64) {
        let irs = self.irs.expect("ACKs follow the SYN");
        self.unacked = 0;
        self.delack_deadline = None;
        let base = irs.wrapping_add(1);
        let abs = |x: u64| base.wrapping_add(x as u32);
        let max_blocks = if self.ts_ok { 3 } else { 4 };
        let mut sacks = Vec::new();
        if self.sack_ok {
            if let Some((a, b)) = self.dsack_block.take() {
                sacks.push((abs(a), abs(b)));
            }
            for &(a, b) in &self.ooo {
                if sacks.len() == max_blocks {
                    break;
                }
                sacks.push((abs(a), abs(b)));
            }
        }
        let reply = Reply {
            src: self.local,
            dst: self.peer,
            seq: self.iss.wrapping_add(1),
            ack: abs(self.rcv_nxt),
            window: self.window_field(false),
            syn: false,
            ece: self.ece,
            syn_opts: None,
            ts: self.ts_ok.then(|| (self.ts_val(now_us), self.ts_recent)),
            sacks,
        };
        self.last_ack_sent = self.rcv_nxt;
        self.stats.acks += 1;
        let due = self.due(now_us);
        self.pending.push_back(PendingAck { due_us: due, reply });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const SND: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 1, 0, 1), 40000);
    const RCV: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 1, 0, 2), 5001);
    const ISN: u32 = 0xffff_fff0; // wraps: relative numbering must survive it

    fn script(extra: &str) -> Script {
        Script::parse(
            &format!("name = \"t\"\ndoc = \"\"\nrtt_ms = [10]\nduration_rtts = 10\n{extra}"),
            Path::new("t.toml"),
        )
        .unwrap()
    }

    fn seg(seq: u32, len: u32) -> Segment {
        Segment {
            src: SND,
            dst: RCV,
            seq,
            len,
            syn: false,
            fin: false,
            rst: false,
            ece: false,
            cwr: false,
            ip_ecn: 0,
            tsval: Some(seq),
            mss: None,
            wscale: None,
            sack_ok: false,
        }
    }

    fn connected(extra: &str) -> Receiver {
        let mut r = Receiver::new(&script(extra), 10.0, RCV, SND, 0);
        let mut syn = seg(ISN, 0);
        syn.syn = true;
        syn.mss = Some(1000);
        syn.wscale = Some(7);
        syn.sack_ok = true;
        r.on_segment(&syn, 0);
        let synack = r.pending.pop_front().unwrap();
        assert_eq!(synack.due_us, 10_000, "the SYN-ACK comes one RTT later");
        assert!(synack.reply.syn && synack.reply.ack == ISN.wrapping_add(1));
        r
    }

    fn data(n: u64) -> Segment {
        seg(ISN.wrapping_add(1).wrapping_add((n * 1000) as u32), 1000)
    }

    #[test]
    fn every_segment_is_acked_one_rtt_later() {
        let mut r = connected("");
        r.on_segment(&data(0), 20_000);
        r.on_segment(&data(1), 20_005);
        let a: Vec<_> = r.pending.drain(..).collect();
        assert_eq!(a.len(), 2);
        assert_eq!((a[0].due_us, a[1].due_us), (30_000, 30_005));
        assert_eq!(a[1].reply.ack, ISN.wrapping_add(1).wrapping_add(2000));
    }

    #[test]
    fn a_bottleneck_spaces_a_burst_by_its_rate() {
        // 8 Mbit/s: 1 usec per byte; a 1000-byte segment with its 52 header bytes, 1052 us.
        let mut r = connected("rate_mbit = 8\n");
        for n in 0..3 {
            r.on_segment(&data(n), 20_000);
        }
        let due: Vec<u64> = r.pending.drain(..).map(|a| a.due_us).collect();
        assert_eq!(
            due,
            vec![31_052, 32_104, 33_156],
            "queued behind each other"
        );
        // An idle link carries the next segment at once.
        r.on_segment(&data(3), 50_000);
        assert_eq!(r.pending.pop_front().unwrap().due_us, 61_052);
    }

    #[test]
    fn two_receivers_share_a_stall_decided_at_the_first_arrival() {
        // A stall from 2 base RTTs (20 ms): the first receiver's segment arrives just
        // before it, the second's copy 50 us later, inside it; both are delivered.
        let clock = ScriptClock::default();
        let extra = "[[stall]]\nat_rtts = 2\nfor_rtts = 1\n";
        let mut a = connected(extra).sharing(clock.clone());
        let mut b = connected(extra).sharing(clock.clone());
        a.on_segment(&data(0), 19_980);
        b.on_segment(&data(0), 20_030);
        assert_eq!((a.stats.lost, b.stats.lost), (0, 0));
        assert_eq!(b.pending.back().unwrap().due_us, 30_030);
        // Far apart (the senders no longer send alike): each decides on its own time.
        a.on_segment(&data(1), 21_000);
        b.on_segment(&data(1), 25_000);
        assert_eq!((a.stats.lost, b.stats.lost), (1, 1));
        let mut c = connected(extra).sharing(clock);
        c.on_segment(&data(0), 22_000);
        assert_eq!(
            c.stats.lost, 1,
            "3 ms after the first arrival: its own decision"
        );
    }

    #[test]
    fn a_lost_segment_gives_dupacks_with_sack_then_the_retransmission_is_acked() {
        let mut r = connected("[loss]\nsegments = [1]\n");
        for n in 0..4 {
            r.on_segment(&data(n), 1000 + n);
        }
        let a: Vec<_> = r.pending.drain(..).collect();
        assert_eq!(a.len(), 3, "segment 1 is lost");
        let base = ISN.wrapping_add(1);
        assert_eq!(a[1].reply.ack, base.wrapping_add(1000));
        assert_eq!(
            a[1].reply.sacks,
            vec![(base.wrapping_add(2000), base.wrapping_add(3000))]
        );
        assert_eq!(
            a[2].reply.sacks,
            vec![(base.wrapping_add(2000), base.wrapping_add(4000))]
        );
        r.on_segment(&data(1), 5000); // the retransmission is delivered
        let a = r.pending.pop_front().unwrap();
        assert_eq!(a.reply.ack, base.wrapping_add(4000));
        assert!(a.reply.sacks.is_empty());
        assert_eq!(r.stats.lost, 1);
    }

    #[test]
    fn a_duplicate_is_reported_as_dsack() {
        let mut r = connected("");
        r.on_segment(&data(0), 1000);
        r.on_segment(&data(0), 2000);
        let a: Vec<_> = r.pending.drain(..).collect();
        let base = ISN.wrapping_add(1);
        assert_eq!(a[1].reply.sacks, vec![(base, base.wrapping_add(1000))]);
        assert_eq!(r.stats.dsacks, 1);
    }

    #[test]
    fn delayed_acks_cover_two_segments_or_time_out() {
        let mut r = connected("ack = \"delayed\"\ndelack_timeout_ms = 40\n");
        r.on_segment(&data(0), 1000);
        assert!(r.pending.is_empty());
        r.on_segment(&data(1), 1100);
        assert_eq!(r.pending.len(), 1);
        r.on_segment(&data(2), 1200);
        assert_eq!(r.delack_deadline(), Some(41_200));
        r.poll(41_199);
        assert_eq!(r.pending.len(), 1);
        r.poll(41_200);
        assert_eq!(r.pending.len(), 2);
        assert_eq!(r.pending[1].due_us, 51_200);
    }

    #[test]
    fn ce_marks_are_echoed_until_cwr() {
        let mut r = Receiver::new(
            &script("ecn = true\n[ce]\nsegments = [1]\n"),
            10.0,
            RCV,
            SND,
            0,
        );
        let mut syn = seg(ISN, 0);
        syn.syn = true;
        syn.ece = true;
        syn.cwr = true;
        syn.mss = Some(1000);
        r.on_segment(&syn, 0);
        assert!(r.pending.pop_front().unwrap().reply.ece, "SYN-ACK with ECE");
        r.on_segment(&data(0), 1);
        r.on_segment(&data(1), 2);
        r.on_segment(&data(2), 3);
        let mut cwr = data(3);
        cwr.cwr = true;
        r.on_segment(&cwr, 4);
        let e: Vec<bool> = r.pending.drain(..).map(|a| a.reply.ece).collect();
        assert_eq!(e, vec![false, true, true, false]);
    }

    #[test]
    fn a_stall_loses_everything_in_it() {
        let mut r = connected("[[stall]]\nat_rtts = 1\nfor_rtts = 2\n");
        r.on_segment(&data(0), 5_000);
        r.on_segment(&data(1), 15_000);
        r.on_segment(&data(1), 35_000);
        assert_eq!(r.stats.lost, 1);
        assert_eq!(r.pending.len(), 2);
    }
}
