//! IPv4/TCP on the TUN device: the sender's segments parsed and the receiver's SYN-ACKs
//! and ACKs built, with etherparse (MSS, window scale, SACK-permitted, timestamps, SACK
//! blocks, ECE/CWR and the IP ECN field).

use std::net::Ipv4Addr;

use etherparse::{PacketBuilder, SlicedPacket, TcpOptionElement, TransportSlice};

/// What the receiver needs of one segment from the sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Sender's address and port.
    pub src: (Ipv4Addr, u16),
    /// Receiver's address and port.
    pub dst: (Ipv4Addr, u16),
    /// Sequence number of the first byte (of the SYN for a SYN).
    pub seq: u32,
    /// Payload length, bytes.
    pub len: u32,
    /// Flags.
    pub syn: bool,
    /// FIN flag.
    pub fin: bool,
    /// RST flag.
    pub rst: bool,
    /// ECE flag (on a SYN: ECN requested).
    pub ece: bool,
    /// CWR flag (the sender reduced for an ECE).
    pub cwr: bool,
    /// IP ECN codepoint (0 not-ECT, 1/2 ECT, 3 CE).
    pub ip_ecn: u8,
    /// TSval, if the segment carries timestamps.
    pub tsval: Option<u32>,
    /// MSS option (SYN).
    pub mss: Option<u16>,
    /// Window-scale option (SYN).
    pub wscale: Option<u8>,
    /// SACK-permitted option (SYN).
    pub sack_ok: bool,
}

/// Parses an IPv4/TCP packet as read from the TUN device; `None` for anything else
/// (IPv6 router solicitations, ...).
pub fn parse(pkt: &[u8]) -> Option<Segment> {
    let sliced = SlicedPacket::from_ip(pkt).ok()?;
    let ip = match sliced.net? {
        etherparse::NetSlice::Ipv4(v4) => v4,
        _ => return None,
    };
    let h = ip.header();
    let tcp = match sliced.transport? {
        TransportSlice::Tcp(t) => t,
        _ => return None,
    };
    let mut s = Segment {
        src: (h.source_addr(), tcp.source_port()),
        dst: (h.destination_addr(), tcp.destination_port()),
        seq: tcp.sequence_number(),
        len: tcp.payload().len() as u32,
        syn: tcp.syn(),
        fin: tcp.fin(),
        rst: tcp.rst(),
        ece: tcp.ece(),
        cwr: tcp.cwr(),
        ip_ecn: h.ecn().value(),
        tsval: None,
        mss: None,
        wscale: None,
        sack_ok: false,
    };
    for o in tcp.options_iterator().flatten() {
        match o {
            TcpOptionElement::Timestamp(v, _) => s.tsval = Some(v),
            TcpOptionElement::MaximumSegmentSize(m) => s.mss = Some(m),
            TcpOptionElement::WindowScale(w) => s.wscale = Some(w),
            TcpOptionElement::SelectiveAcknowledgementPermitted => s.sack_ok = true,
            _ => {}
        }
    }
    Some(s)
}

/// A reply of the receiver to write into the TUN device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Receiver's (source) address and port.
    pub src: (Ipv4Addr, u16),
    /// Sender's (destination) address and port.
    pub dst: (Ipv4Addr, u16),
    /// Receiver's sequence number.
    pub seq: u32,
    /// Cumulative ACK.
    pub ack: u32,
    /// Window field (already scaled down).
    pub window: u16,
    /// SYN-ACK rather than an ACK.
    pub syn: bool,
    /// ECE flag.
    pub ece: bool,
    /// SYN-ACK options: MSS, window shift, SACK-permitted.
    pub syn_opts: Option<(u16, u8, bool)>,
    /// (TSval, TSecr).
    pub ts: Option<(u32, u32)>,
    /// SACK blocks [start, end), first the one holding the latest segment (or a D-SACK).
    pub sacks: Vec<(u32, u32)>,
}

impl Default for Reply {
    fn default() -> Self {
        let any = (Ipv4Addr::UNSPECIFIED, 0);
        Reply {
            src: any,
            dst: any,
            seq: 0,
            ack: 0,
            window: 0,
            syn: false,
            ece: false,
            syn_opts: None,
            ts: None,
            sacks: Vec::new(),
        }
    }
}

impl Reply {
    /// The IPv4 packet. At most 4 SACK blocks fit without timestamps, 3 with.
    ///
    /// # Panics
    /// If etherparse refuses the options (more SACK blocks than fit), a bug of the caller.
    pub fn build(&self) -> Vec<u8> {
        let mut b = PacketBuilder::ipv4(self.src.0.octets(), self.dst.0.octets(), 64)
            .tcp(self.src.1, self.dst.1, self.seq, self.window)
            .ack(self.ack);
        if self.syn {
            b = b.syn();
        }
        if self.ece {
            b = b.ece();
        }
        let mut opts = Vec::new();
        if let Some((mss, ws, sack)) = self.syn_opts {
            opts.push(TcpOptionElement::MaximumSegmentSize(mss));
            if sack {
                opts.push(TcpOptionElement::SelectiveAcknowledgementPermitted);
            }
            opts.push(TcpOptionElement::WindowScale(ws));
        }
        if let Some((v, e)) = self.ts {
            opts.push(TcpOptionElement::Timestamp(v, e));
        }
        if let Some((&first, rest)) = self.sacks.split_first() {
            let mut more = [None; 3];
            for (i, r) in rest.iter().take(3).enumerate() {
                more[i] = Some(*r);
            }
            opts.push(TcpOptionElement::SelectiveAcknowledgement(first, more));
        }
        let b = b.options(&opts).expect("TCP options fit in 40 bytes");
        let mut out = Vec::with_capacity(b.size(0));
        b.write(&mut out, &[]).expect("writing to a Vec");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_ack_parses_back_with_its_options() {
        let r = Reply {
            src: (Ipv4Addr::new(10, 9, 0, 2), 5001),
            dst: (Ipv4Addr::new(10, 9, 0, 1), 40000),
            seq: 7,
            ack: 1000,
            window: 512,
            ece: true,
            ts: Some((5, 6)),
            sacks: vec![(2000, 3000), (4000, 5000)],
            ..Default::default()
        };
        let pkt = r.build();
        let s = parse(&pkt).unwrap();
        assert_eq!((s.src, s.dst, s.seq, s.len), (r.src, r.dst, 7, 0));
        assert!(s.ece && !s.syn && !s.cwr);
        assert_eq!(s.tsval, Some(5));
        let sliced = SlicedPacket::from_ip(&pkt).unwrap();
        let Some(TransportSlice::Tcp(t)) = sliced.transport else {
            panic!()
        };
        let sack = t.options_iterator().flatten().find_map(|o| match o {
            TcpOptionElement::SelectiveAcknowledgement(a, b) => Some((a, b)),
            _ => None,
        });
        assert_eq!(sack, Some(((2000, 3000), [Some((4000, 5000)), None, None])));
    }

    #[test]
    fn a_syn_ack_carries_mss_wscale_and_sack_permitted() {
        let r = Reply {
            syn: true,
            syn_opts: Some((1448, 7, true)),
            ts: Some((1, 2)),
            ..Default::default()
        };
        let s = parse(&r.build()).unwrap();
        assert!(s.syn && s.sack_ok);
        assert_eq!((s.mss, s.wscale), (Some(1448), Some(7)));
    }
}
