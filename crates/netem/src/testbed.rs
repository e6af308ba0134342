//! A dumbbell in network namespaces: N senders, each with its own veth access link to a
//! router namespace, whose egress towards the receiver namespace is the bottleneck — a tbf
//! rate limiter over a drop-tail pfifo. Optional per-sender propagation delay and random
//! loss use netem (spec benchmarks.md §7.1).
//!
//! ```text
//!   <prefix>-snd1  10.80.X.1 <s>s0 ==== <s>a0 10.80.X.254 ┐
//!   <prefix>-snd2  10.81.X.1 <s>s1 ==== <s>a1 10.81.X.254 ├ <prefix>-rtr  10.77.X.254 <s>b0 ==== <s>r0 10.77.X.129  <prefix>-rcv
//!   ...                                                   ┘                egress of <s>b0: tbf rate R (1:) -> pfifo limit Q (10:)
//!   delay: netem delay RTT on <s>a<i> egress (the ACK path), limit well above the BDP
//!   loss:  netem loss random p on <s>s<i> egress (the forward data path, before the bottleneck),
//!          or with LossModel::Periodic a clsact egress filter `matchall action gact pass
//!          random determ drop N` there (every N = round(1/p)-th packet)
//! ```
//!
//! Where netem goes, and why: a packet held in the sender's own qdisc still counts against
//! its socket's TCP Small Queues budget, which throttles the flow (seen: a second H-TCP flow
//! held at 1.3 Mbit/s of 20 when the bottleneck sat on the sender's egress). So the
//! bottleneck and the delay live in the router namespace — crossing into it orphans the
//! packet, as a real router does — and the delay is applied to the ACKs, away from the
//! bottleneck queue, so netem's own queue neither buffers nor drops data. Random loss at
//! the sender's egress never queues (netem without delay forwards at once), and netem
//! reports it to TCP as sent, like a loss on the wire.
//!
//! Everything is built with iproute2 (`ip`, `tc`) and `ethtool`, as Mininet and flent do; a
//! failing command is reported with its full command line and its stderr verbatim.
//! Offloads (TSO, GSO, GRO) are off on every veth end so that the bottleneck queue holds
//! MTU-sized packets and `queue_pkts` means what it says. Each sender and the receiver get
//! the sysctls of §7.2 (no metrics cache, large socket buffers, no slow start after idle).

use std::fmt;
use std::net::Ipv4Addr;

use std::process::Command;

use serde::{Deserialize, Serialize};

pub use crate::aqm::FRAME_BYTES;
use crate::netns::netns_exists;
pub use crate::tc::{check_tools, TestbedError, TOOLS};
use crate::tc::{run, run_batch, run_words};

/// Largest interface name the kernel accepts (IFNAMSIZ - 1), in bytes.
pub const IFNAME_MAX: usize = 15;

/// Longest accepted [`PathSpec::prefix`], in bytes.
pub const PREFIX_MAX: usize = 64;

/// How the forward-path loss of a point is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LossModel {
    /// Independent per-packet loss with probability `loss` (netem `loss random`).
    #[default]
    Random,
    /// Every `round(1/loss)`-th packet of the sender (tc `gact ... random determ drop N`):
    /// the same packets are lost in every run, so two algorithms (a BPF port and its
    /// module) face identical losses — the periodic-loss model of Mathis et al. (1997).
    Periodic,
}

/// One sender's access link to the router.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct AccessSpec {
    /// Round-trip propagation delay added on this sender's path, in ms (netem on the ACK
    /// path); 0 = none (no netem).
    pub rtt_ms: f64,
    /// Per-packet loss probability on this sender's forward path, in [0, 1); 0 = none.
    pub loss: f64,
    /// Random (netem) or periodic (tc gact, every `round(1/loss)`-th packet) loss.
    pub loss_model: LossModel,
}

/// What the dumbbell looks like.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathSpec {
    /// Name prefix: the namespaces are `<prefix>-snd1..N`, `<prefix>-rtr` and `<prefix>-rcv`.
    /// Up to [`PREFIX_MAX`] characters of `[A-Za-z0-9._-]`, not starting with `-` or `.`.
    pub prefix: String,
    /// Bottleneck rate (the tbf token rate), in Mbit/s (10^6 bit/s).
    pub rate_mbit: f64,
    /// Drop-tail queue length at the bottleneck, in packets (the child `pfifo limit`).
    pub queue_pkts: u32,
    /// Third octet of every subnet: sender i is `10.(80+i).X.1`, the receiver `10.77.X.129`,
    /// the router `.254` on each link. Give concurrent testbeds different octets.
    pub subnet_octet: u8,
    /// The senders' access links, at least one, at most [`MAX_SENDERS`].
    pub senders: Vec<AccessSpec>,
    /// Rate of the reverse (receiver → senders) direction, in Mbit/s, shaped by tbf on the
    /// receiver's egress (an asymmetric path such as [P2]'s DSL uplink); `None` = unshaped.
    pub reverse_rate_mbit: Option<f64>,
    /// tbf bucket at the bottleneck, in ms of the rate (at least two frames); default
    /// [`DEFAULT_BURST_MS`]. See [`PathSpec::burst_bytes`].
    pub burst_ms: f64,
    /// Queue discipline at the bottleneck (default: drop-tail pfifo under tbf) and ECN
    /// (see [`crate::aqm`]); `queue_pkts` is its limit.
    pub aqm: crate::aqm::Aqm,
    /// `net.ipv4.tcp_congestion_control` of the receiver namespace; `None`: the kernel's
    /// default (dctcp flows need dctcp at the receiver too).
    pub receiver_cc: Option<String>,
}

/// Default tbf bucket at the bottleneck, in ms of the rate.
pub const DEFAULT_BURST_MS: f64 = 1.0;

/// Most senders a testbed can have (subnets 10.80.X.0 to 10.179.X.0, two-digit device suffixes).
pub const MAX_SENDERS: usize = 100;

impl PathSpec {
    /// One sender without delay or loss, subnet octet 0; rate in Mbit/s, queue in packets.
    pub fn new(prefix: impl Into<String>, rate_mbit: impl Into<f64>, queue_pkts: u32) -> PathSpec {
        PathSpec {
            prefix: prefix.into(),
            rate_mbit: rate_mbit.into(),
            queue_pkts,
            subnet_octet: 0,
            senders: vec![AccessSpec::default()],
            reverse_rate_mbit: None,
            burst_ms: DEFAULT_BURST_MS,
            aqm: crate::aqm::Aqm::default(),
            receiver_cc: None,
        }
    }

    /// The tc lines (for `tc -n <rtr> -batch`) of the dumbbell's bottleneck
    /// ([`PathSpec::bottleneck_lines`] on [`PathSpec::bottleneck_dev`]).
    pub fn bottleneck_tc_lines(&self) -> Vec<String> {
        self.bottleneck_lines(&self.bottleneck_dev())
    }

    /// Name of the first sender's network namespace, `<prefix>-snd1`.
    pub fn sender_ns(&self) -> String {
        self.sender_ns_at(0)
    }

    /// Name of sender `i`'s network namespace (0-based), `<prefix>-snd<i+1>`.
    pub fn sender_ns_at(&self, i: usize) -> String {
        format!("{}-snd{}", self.prefix, i + 1)
    }

    /// Name of the receiver's network namespace, `<prefix>-rcv`.
    pub fn receiver_ns(&self) -> String {
        format!("{}-rcv", self.prefix)
    }

    /// Name of the router's network namespace (the bottleneck), `<prefix>-rtr`.
    pub fn router_ns(&self) -> String {
        format!("{}-rtr", self.prefix)
    }

    /// Sender `i`'s veth end (in its namespace), at most [`IFNAME_MAX`] bytes.
    pub fn sender_dev_at(&self, i: usize) -> String {
        format!("{}s{i}", short_name(&self.prefix))
    }

    /// The first sender's veth end.
    pub fn sender_dev(&self) -> String {
        self.sender_dev_at(0)
    }

    /// Router's veth end towards sender `i`; its egress carries the ACK-path delay.
    pub fn router_access_dev(&self, i: usize) -> String {
        format!("{}a{i}", short_name(&self.prefix))
    }

    /// Router's veth end towards the receiver; its egress is the bottleneck.
    pub fn bottleneck_dev(&self) -> String {
        format!("{}b0", short_name(&self.prefix))
    }

    /// Receiver's veth end (in the receiver namespace).
    pub fn receiver_dev(&self) -> String {
        format!("{}r0", short_name(&self.prefix))
    }

    /// Sender `i`'s address, `10.(80+i).<subnet_octet>.1`.
    pub fn sender_addr_at(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 80 + i as u8, self.subnet_octet, 1)
    }

    /// The first sender's address.
    pub fn sender_addr(&self) -> Ipv4Addr {
        self.sender_addr_at(0)
    }

    /// Receiver's address, `10.77.<subnet_octet>.129`.
    pub fn receiver_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.subnet_octet, 129)
    }

    /// Whether building this path needs sch_netem (some sender has a delay or loss).
    /// Periodic loss uses cls_matchall and act_gact instead, which kernels without netem
    /// here lack as well; it counts as needing the netem-capable kernel.
    pub fn needs_netem(&self) -> bool {
        self.senders.iter().any(|a| a.rtt_ms > 0.0 || a.loss > 0.0)
    }

    /// tbf bucket size, in bytes: one millisecond at the bottleneck rate, but at least two
    /// full frames (a bucket smaller than one frame would drop every full-size packet).
    ///
    /// Small on purpose: a bigger bucket lets a burst through at veth speed after an idle
    /// spell, which the papers' dummynet bottleneck never did. One millisecond keeps tbf's
    /// hrtimer wake-ups from losing tokens on a busy host at high rates; an emulated VM on
    /// a loaded host wakes later than that (a 1 ms bucket carried 12 of 20 Mbit/s with a
    /// standing queue), which [`PathSpec::burst_ms`] (`tbf_burst_ms`) can make up for.
    pub fn burst_bytes(&self) -> u32 {
        burst_bytes_at(self.rate_mbit, self.burst_ms)
    }

    /// The bottleneck's child qdisc under tbf (handle 10:, parent 1:1), as `tc` arguments:
    /// the one place that says what it is, used to build it and to re-set it after a rate
    /// change (tbf's `change` hands its byte limit to a fifo child as a packet count).
    pub fn bottleneck_child(&self) -> String {
        self.aqm.child(self.queue_pkts)
    }

    /// `tc -batch` lines that set the bottleneck rate to `rate_mbit` (Mbit/s) during a run:
    /// tbf's rate and burst, then the child qdisc re-set to [`PathSpec::bottleneck_child`],
    /// so that the drop-tail buffer stays what the scenario says. CAKE (its own shaper at
    /// the root) changes its `bandwidth` alone.
    pub fn rate_change_lines(&self, rate_mbit: f64) -> Vec<String> {
        let bdev = self.bottleneck_dev();
        if self.aqm.qdisc == crate::aqm::Qdisc::Cake {
            return vec![format!(
                "qdisc change dev {bdev} root handle 1: cake bandwidth {}kbit",
                (rate_mbit * 1000.0).round() as u64
            )];
        }
        vec![
            format!(
                "qdisc change dev {bdev} root handle 1: tbf rate {}kbit burst {} latency 1s",
                (rate_mbit * 1000.0).round() as u64,
                burst_bytes_at(rate_mbit, self.burst_ms)
            ),
            format!(
                "qdisc change dev {bdev} parent 1:1 handle 10: {}",
                self.bottleneck_child()
            ),
        ]
    }

    /// `tc -batch` lines that set the delay of every sender's ACK path to `rtt_ms` (ms)
    /// during a run (`replace`: a link built without delay has no netem yet).
    pub fn delay_change_lines(&self, rtt_ms: f64) -> Vec<String> {
        let limit = netem_limit_pkts(self.rate_mbit, rtt_ms);
        (0..self.senders.len())
            .map(|i| {
                format!(
                    "qdisc replace dev {} root netem delay {}us limit {limit}",
                    self.router_access_dev(i),
                    (rtt_ms * 1000.0).round() as u64
                )
            })
            .collect()
    }

    /// The `tc` batch lines that build this spec's bottleneck on `dev`: a root tbf (`1:`)
    /// at [`PathSpec::rate_mbit`] over [`PathSpec::bottleneck_child`] (`10:`), or CAKE at
    /// the root ([`crate::aqm::Aqm::tc_lines`]). The dumbbell and every hop of a
    /// parking-lot chain ([`crate::chain`]) are built from it.
    pub(crate) fn bottleneck_lines(&self, dev: &str) -> Vec<String> {
        self.aqm
            .tc_lines(dev, self.rate_mbit, self.burst_bytes(), self.queue_pkts)
    }

    /// netem queue limit for sender `i`'s delay line, in packets: well above what one RTT
    /// of ACKs and data at the bottleneck rate can fill (4 × BDP, at least 1000).
    pub fn netem_limit(&self, i: usize) -> u64 {
        netem_limit_pkts(self.rate_mbit, self.senders[i].rtt_ms)
    }

    /// Checks the spec before anything is created.
    pub fn validate(&self) -> Result<(), TestbedError> {
        let bad = |why: String| Err(TestbedError::InvalidSpec(why));
        let p = &self.prefix;
        if p.is_empty() || p.len() > PREFIX_MAX {
            return bad(format!(
                "prefix {p:?} must have 1 to {PREFIX_MAX} characters"
            ));
        }
        if !p
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        {
            return bad(format!("prefix {p:?} may only contain [A-Za-z0-9._-]"));
        }
        if p.starts_with('-') || p.starts_with('.') {
            return bad(format!("prefix {p:?} must not start with '-' or '.'"));
        }
        if !(self.rate_mbit >= 0.01 && self.rate_mbit <= 100_000.0) {
            return bad(format!(
                "rate_mbit must be in [0.01, 100000] Mbit/s, got {}",
                self.rate_mbit
            ));
        }
        if !(self.burst_ms > 0.0 && self.burst_ms <= 1000.0) {
            return bad(format!(
                "burst_ms must be in (0, 1000] ms, got {}",
                self.burst_ms
            ));
        }
        if self.queue_pkts == 0 {
            return bad("queue_pkts must be at least 1 packet".into());
        }
        if let Some(r) = self.reverse_rate_mbit {
            if !(0.01..=100_000.0).contains(&r) {
                return bad(format!(
                    "reverse_rate_mbit must be in [0.01, 100000] Mbit/s, got {r}"
                ));
            }
        }
        if self.senders.is_empty() || self.senders.len() > MAX_SENDERS {
            return bad(format!(
                "senders must number 1 to {MAX_SENDERS}, got {}",
                self.senders.len()
            ));
        }
        for (i, a) in self.senders.iter().enumerate() {
            if !(a.rtt_ms >= 0.0 && a.rtt_ms <= 60_000.0) {
                return bad(format!(
                    "senders[{i}].rtt_ms must be in [0, 60000] ms, got {}",
                    a.rtt_ms
                ));
            }
            if !(a.loss >= 0.0 && a.loss < 1.0) {
                return bad(format!(
                    "senders[{i}].loss must be in [0, 1), got {}",
                    a.loss
                ));
            }
        }
        Ok(())
    }
}

/// netem queue limit of a delay line of `rtt_ms` ms behind a `rate_mbit` Mbit/s
/// bottleneck, in packets: 4 × its BDP, at least 1000.
pub(crate) fn netem_limit_pkts(rate_mbit: f64, rtt_ms: f64) -> u64 {
    let bdp = rate_mbit * 1e6 * (rtt_ms / 1000.0) / (1500.0 * 8.0);
    ((4.0 * bdp).ceil() as u64).max(1000)
}

/// tbf bucket size of `burst_ms` ms at `rate_mbit` Mbit/s, at least two full frames, in
/// bytes (see [`PathSpec::burst_bytes`]).
pub fn burst_bytes_at(rate_mbit: f64, burst_ms: f64) -> u32 {
    let bytes = (rate_mbit * 1e6 / 8.0 / 1000.0 * burst_ms) as u64;
    bytes
        .max(2 * u64::from(FRAME_BYTES))
        .min(u64::from(u32::MAX)) as u32
}

/// A deterministic stem for interface names, at most `IFNAME_MAX - 3` bytes, so that
/// `<stem>s99` and `<stem>r0` fit the kernel's limit.
///
/// A prefix that fits is used as is; a longer one keeps its first 6 bytes and appends 6 hex
/// digits of its FNV-1a hash, so different long prefixes still get different names.
pub(crate) fn short_name(prefix: &str) -> String {
    const STEM_MAX: usize = IFNAME_MAX - 3;
    if prefix.len() <= STEM_MAX {
        return prefix.to_string();
    }
    let mut hash: u32 = 0x811c_9dc5;
    for b in prefix.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    // Prefixes are ASCII (validated), so byte slicing is on a char boundary.
    format!("{}{:06x}", &prefix[..STEM_MAX - 6], hash & 0xff_ffff)
}

/// Counters of the bottleneck's root `tbf` qdisc (they include what its `pfifo` child
/// dropped), as `tc -s qdisc` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QdiscStats {
    /// Bytes sent on through the bottleneck since it was created, in bytes (L2 frames).
    pub sent_bytes: u64,
    /// Packets sent on through the bottleneck since it was created, in packets.
    pub sent_packets: u64,
    /// Packets dropped because the queue was full, in packets.
    pub drops: u64,
    /// Times tbf had a packet but no tokens (the rate limit was active), in events.
    pub overlimits: u64,
    /// Packets requeued to the qdisc by the driver, in packets.
    pub requeues: u64,
    /// Bytes waiting in the queue right now, in bytes.
    pub backlog_bytes: u64,
    /// Packets waiting in the queue right now, in packets.
    pub backlog_packets: u64,
}

impl QdiscStats {
    /// Parses the JSON of `tc -s -j qdisc show dev X` and returns the root qdisc's counters,
    /// or `None` if the output has no root qdisc with statistics.
    pub fn from_tc_json(json: &str) -> Result<Option<QdiscStats>, String> {
        let (list, root) = crate::tc::qdiscs_and_root(json)?;
        let Some(root) = root.map(|i| &list[i]) else {
            return Ok(None);
        };
        let num = |key: &str| -> Result<u64, String> {
            root.get(key)
                .and_then(|x| x.as_u64())
                .ok_or_else(|| format!("root qdisc has no numeric {key:?}"))
        };
        Ok(Some(QdiscStats {
            sent_bytes: num("bytes")?,
            sent_packets: num("packets")?,
            drops: num("drops")?,
            overlimits: num("overlimits")?,
            requeues: num("requeues")?,
            backlog_bytes: num("backlog")?,
            backlog_packets: num("qlen")?,
        }))
    }
}

impl fmt::Display for QdiscStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sent {} B / {} pkt, dropped {} pkt, overlimits {}, requeues {}, backlog {} B / {} pkt",
            self.sent_bytes,
            self.sent_packets,
            self.drops,
            self.overlimits,
            self.requeues,
            self.backlog_bytes,
            self.backlog_packets
        )
    }
}

/// A live testbed: sender, router and receiver namespaces joined by veth pairs, with a tbf
/// bottleneck on the router's egress towards the receiver. Dropping it removes the
/// namespaces (best effort).
#[derive(Debug)]
pub struct Testbed {
    spec: PathSpec,
    sender_ns: Vec<String>,
    router_ns: String,
    receiver_ns: String,
    /// Set once the namespaces are gone, so that `Drop` does nothing.
    removed: bool,
}

impl Testbed {
    /// Builds the path described by `spec`; removes leftover namespaces of the same names
    /// first. All or nothing: on error, whatever was created has been removed again.
    ///
    /// Errors: [`TestbedError::InvalidSpec`]; [`TestbedError::NoNetem`] when the spec needs
    /// delay or loss and the running kernel has no sch_netem; a failing `ip`/`tc`/`ethtool`.
    pub fn create(spec: &PathSpec) -> Result<Testbed, TestbedError> {
        spec.validate()?;
        check_tools()?;
        let bed = Testbed {
            spec: spec.clone(),
            sender_ns: (0..spec.senders.len())
                .map(|i| spec.sender_ns_at(i))
                .collect(),
            router_ns: spec.router_ns(),
            receiver_ns: spec.receiver_ns(),
            removed: false,
        };
        for ns in bed.namespaces() {
            if netns_exists(ns) {
                delete_netns(ns)?;
            }
        }
        // From here on, `bed`'s Drop removes whatever exists if a step fails.
        bed.build()?;
        Ok(bed)
    }

    fn namespaces(&self) -> impl Iterator<Item = &String> {
        self.sender_ns
            .iter()
            .chain([&self.router_ns, &self.receiver_ns])
    }

    /// Builds the namespaces, links, addresses, routes and qdiscs. Commands are grouped
    /// into one `ip -batch` / `tc -batch` per namespace (and one `sysctl` per host) because
    /// every exec costs about half a second in the emulated CI VM.
    fn build(&self) -> Result<(), TestbedError> {
        let spec = &self.spec;
        let (rtr, rcv) = (&self.router_ns, &self.receiver_ns);
        let (bdev, rdev) = (spec.bottleneck_dev(), spec.receiver_dev());
        let x = spec.subnet_octet;

        let adds: Vec<String> = self
            .namespaces()
            .map(|ns| format!("netns add {ns}"))
            .collect();
        run_batch(&["ip"], &adds)?;
        if let Some(cc) = &spec.receiver_cc {
            crate::aqm::allow_namespace_default(cc).map_err(|e| {
                TestbedError::InvalidSpec(format!(
                    "cannot allow {cc} as the receiver namespace's congestion control \
                 (net.ipv4.tcp_allowed_congestion_control): {e}"
                ))
            })?;
        }
        let receiver_cc = spec
            .receiver_cc
            .as_ref()
            .map(|cc| format!("net.ipv4.tcp_congestion_control={cc}"));
        for ns in self.sender_ns.iter().chain([rcv]) {
            let mut argv = vec!["ip", "netns", "exec", ns, "sysctl", "-qw"];
            argv.extend(HOST_SYSCTLS);
            // Later settings win: ECN on replaces HOST_SYSCTLS' tcp_ecn=0.
            argv.push(spec.aqm.ecn_sysctl());
            if let (true, Some(cc)) = (ns == rcv, &receiver_cc) {
                argv.push(cc);
            }
            run(&argv)?;
        }
        run_words(&format!(
            "ip netns exec {rtr} sysctl -qw net.ipv4.ip_forward=1"
        ))?;

        // Every veth is created from the router's side, its peer moved into the host's
        // namespace. Receiver side: router <s>b0 10.77.X.254/25 <-> <s>r0 10.77.X.129/25.
        // Senders: <s>s<i> 10.(80+i).X.1/24 <-> router <s>a<i> 10.(80+i).X.254/24.
        let mut r = vec![
            "link set lo up".to_string(),
            format!("link add {bdev} type veth peer name {rdev} netns {rcv}"),
            format!("addr add 10.77.{x}.254/25 dev {bdev}"),
        ];
        for i in 0..spec.senders.len() {
            let (snd, sdev, adev) = (
                &self.sender_ns[i],
                spec.sender_dev_at(i),
                spec.router_access_dev(i),
            );
            r.push(format!(
                "link add {adev} type veth peer name {sdev} netns {snd}"
            ));
            r.push(format!("addr add 10.{}.{x}.254/24 dev {adev}", 80 + i));
        }
        run_batch(&["ip", "-n", rtr], &r)?;

        // Offloads off on both ends of every link (ethtool has no batch mode), then up.
        self.offloads_off(rtr, &bdev)?;
        self.offloads_off(rcv, &rdev)?;
        let mut up = vec![format!("link set {bdev} up")];
        for i in 0..spec.senders.len() {
            let adev = spec.router_access_dev(i);
            self.offloads_off(rtr, &adev)?;
            up.push(format!("link set {adev} up"));
        }
        run_batch(&["ip", "-n", rtr], &up)?;
        run_batch(
            &["ip", "-n", rcv],
            &[
                "link set lo up".to_string(),
                format!("addr add {}/25 dev {rdev}", spec.receiver_addr()),
                format!("link set {rdev} up"),
                format!("route add default via 10.77.{x}.254"),
            ],
        )?;

        let mut rtr_tc = Vec::new();
        for (i, access) in spec.senders.iter().enumerate() {
            let (snd, sdev, adev) = (
                &self.sender_ns[i],
                spec.sender_dev_at(i),
                spec.router_access_dev(i),
            );
            let net = format!("10.{}.{x}", 80 + i);
            self.offloads_off(snd, &sdev)?;
            let mut lines = vec![
                "link set lo up".to_string(),
                format!("addr add {net}.1/24 dev {sdev}"),
                format!("link set {sdev} up"),
                format!("route add default via {net}.254"),
            ];
            if access.loss > 0.0 {
                // TCP hands the qdisc GSO packets of several segments even with offloads
                // off (they are split after it): the loss would drop bursts, at a
                // per-segment rate of p / segments. One segment per packet makes p per
                // segment. (Set before any socket connects: TCP reads it then.)
                lines.push(format!("link set {sdev} gso_max_segs 1"));
            }
            run_batch(&["ip", "-n", snd], &lines)?;
            if access.rtt_ms > 0.0 {
                rtr_tc.push(format!(
                    "qdisc add dev {adev} root netem delay {}us limit {}",
                    (access.rtt_ms * 1000.0).round() as u64,
                    spec.netem_limit(i)
                ));
            }
            if access.loss > 0.0 {
                match access.loss_model {
                    LossModel::Random => self.netem(
                        snd,
                        &[format!(
                            "qdisc add dev {sdev} root netem loss random {}%",
                            fmt_percent(access.loss)
                        )],
                    )?,
                    LossModel::Periodic => self.netem(
                        snd,
                        &[
                            format!("qdisc add dev {sdev} clsact"),
                            format!(
                                "filter add dev {sdev} egress matchall action gact pass random determ drop {}",
                                periodic_every(access.loss)
                            ),
                        ],
                    )?,
                }
            }
        }
        self.netem(rtr, &rtr_tc)?;

        run_batch(&["tc", "-n", rtr], &spec.bottleneck_lines(&bdev))?;
        if let Some(rev) = spec.reverse_rate_mbit {
            let burst = ((rev * 1e6 / 8.0 / 1000.0) as u64).max(2 * u64::from(FRAME_BYTES));
            run_words(&format!(
                "tc -n {rcv} qdisc add dev {rdev} root tbf rate {}kbit burst {burst} latency 1s",
                (rev * 1000.0).round() as u64
            ))?;
        }
        Ok(())
    }

    fn offloads_off(&self, ns: &str, dev: &str) -> Result<(), TestbedError> {
        offloads_off(ns, dev)
    }

    fn netem(&self, ns: &str, lines: &[String]) -> Result<(), TestbedError> {
        add_netem(ns, lines)
    }

    /// The spec this testbed was built from.
    pub fn spec(&self) -> &PathSpec {
        &self.spec
    }

    /// Number of senders.
    pub fn senders(&self) -> usize {
        self.sender_ns.len()
    }

    /// Name of the first sender's network namespace (`<prefix>-snd1`).
    pub fn sender_ns(&self) -> &str {
        &self.sender_ns[0]
    }

    /// Name of sender `i`'s network namespace (0-based). Panics if `i >= senders()`.
    pub fn sender_ns_at(&self, i: usize) -> &str {
        &self.sender_ns[i]
    }

    /// Name of the receiver's network namespace (`<prefix>-rcv`).
    pub fn receiver_ns(&self) -> &str {
        &self.receiver_ns
    }

    /// Name of the router's network namespace (`<prefix>-rtr`), which holds the bottleneck.
    pub fn router_ns(&self) -> &str {
        &self.router_ns
    }

    /// The first sender's IPv4 address.
    pub fn sender_addr(&self) -> Ipv4Addr {
        self.spec.sender_addr()
    }

    /// Sender `i`'s IPv4 address.
    pub fn sender_addr_at(&self, i: usize) -> Ipv4Addr {
        self.spec.sender_addr_at(i)
    }

    /// The receiver's IPv4 address.
    pub fn receiver_addr(&self) -> Ipv4Addr {
        self.spec.receiver_addr()
    }

    /// Random-loss drops netem made on sender `i`'s forward path so far, in packets (0
    /// when that sender has no loss configured).
    pub fn random_drops(&self, i: usize) -> Result<u64, TestbedError> {
        let access = self.spec.senders[i];
        if access.loss <= 0.0 {
            return Ok(0);
        }
        let dev = self.spec.sender_dev_at(i);
        match access.loss_model {
            LossModel::Random => qdisc_stats(&self.sender_ns[i], &dev).map(|q| q.drops),
            LossModel::Periodic => {
                let args = [
                    "tc",
                    "-n",
                    &self.sender_ns[i],
                    "-s",
                    "-j",
                    "filter",
                    "show",
                    "dev",
                    &dev,
                    "egress",
                ];
                let out = run(&args)?;
                action_drops(&out).map_err(|reason| TestbedError::Parse {
                    command: args.join(" "),
                    reason,
                })
            }
        }
    }

    /// Where its packets can be dropped ([`crate::ledger::read`]): its namespaces, the
    /// bottleneck, and the senders' devices that apply random loss.
    pub fn drop_places(&self) -> crate::ledger::Places {
        let mut namespaces = self.sender_ns.clone();
        namespaces.push(self.router_ns.clone());
        namespaces.push(self.receiver_ns.clone());
        crate::ledger::Places {
            namespaces,
            bottlenecks: vec![(self.router_ns.clone(), self.spec.bottleneck_dev())],
            loss_devs: (0..self.sender_ns.len())
                .filter(|&i| self.spec.senders[i].loss > 0.0)
                .map(|i| (self.sender_ns[i].clone(), self.spec.sender_dev_at(i)))
                .collect(),
        }
    }

    /// Where the delay taps go ([`crate::taps`]): both ends of every sender's and the
    /// receiver's access link, and the bottleneck's egress, which packets leave at the
    /// receiver's ingress.
    pub fn tap_plan(&self) -> crate::taps::TapPlan {
        let mut taps: Vec<crate::taps::TapPoint> = (0..self.sender_ns.len())
            .flat_map(|i| {
                crate::taps::TapPoint::host(&self.sender_ns[i], self.spec.sender_dev_at(i))
            })
            .collect();
        taps.extend(crate::taps::TapPoint::host(
            &self.receiver_ns,
            self.spec.receiver_dev(),
        ));
        taps.push(crate::taps::TapPoint::enter(
            &self.router_ns,
            self.spec.bottleneck_dev(),
            1,
        ));
        crate::taps::TapPlan {
            taps,
            hops: vec![(crate::taps::enter_slot(1), crate::taps::TERMINAL)],
        }
    }

    /// Counters of the bottleneck (root tbf on the router's veth towards the receiver), from
    /// `tc -n <rtr> -s -j qdisc show dev <dev>`.
    pub fn bottleneck_stats(&self) -> Result<QdiscStats, TestbedError> {
        qdisc_stats(&self.router_ns, &self.spec.bottleneck_dev())
    }

    /// Removes the namespaces (and with them the veth pairs and their qdiscs). Tries all even
    /// if one fails; returns the first error.
    pub fn destroy(mut self) -> Result<(), TestbedError> {
        self.removed = true;
        let first = self.remove_namespaces();
        first.map_or(Ok(()), Err)
    }

    /// Deletes whichever of the namespaces exist; returns the error, if any.
    fn remove_namespaces(&self) -> Option<TestbedError> {
        delete_existing_netns(self.namespaces())
    }
}

/// Deletes whichever of the namespaces `names` exist (one `ip -batch -force`); returns the
/// error, if any. Shared by the dumbbell and the chain ([`crate::chain`]).
pub(crate) fn delete_existing_netns<'a>(
    names: impl Iterator<Item = &'a String>,
) -> Option<TestbedError> {
    let dels: Vec<String> = names
        .filter(|ns| netns_exists(ns))
        .map(|ns| format!("netns delete {ns}"))
        .collect();
    if dels.is_empty() {
        return None;
    }
    run_batch(&["ip", "-force"], &dels).err()
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if !self.removed {
            self.removed = true;
            let _ = self.remove_namespaces();
        }
    }
}

/// Removes every network namespace whose name starts with `prefix` (leftovers of a crashed
/// run). Returns the names removed, in `ip netns list` order.
pub fn remove_leftovers(prefix: &str) -> Result<Vec<String>, TestbedError> {
    if prefix.is_empty() {
        return Err(TestbedError::InvalidSpec(
            "refusing to remove every network namespace (empty prefix)".into(),
        ));
    }
    let listing = run(&["ip", "netns", "list"])?;
    let mut removed = Vec::new();
    for name in parse_netns_list(&listing) {
        if name.starts_with(prefix) {
            delete_netns(&name)?;
            removed.push(name);
        }
    }
    Ok(removed)
}

/// The period of [`LossModel::Periodic`] loss with probability `p` (in (0, 1)): every
/// `round(1/p)`-th packet is dropped, at least every 2nd.
pub fn periodic_every(p: f64) -> u64 {
    (1.0 / p).round().max(2.0) as u64
}

/// Sum of the `drops` counters of every action in `tc -s -j filter show` output.
fn action_drops(json: &str) -> Result<u64, String> {
    fn walk(v: &serde_json::Value, in_actions: bool, sum: &mut u64) {
        match v {
            serde_json::Value::Object(m) => {
                if in_actions {
                    if let Some(d) = m
                        .get("stats")
                        .and_then(|s| s.get("drops"))
                        .and_then(|d| d.as_u64())
                    {
                        *sum += d;
                    }
                }
                for (k, x) in m {
                    walk(x, in_actions || k == "actions", sum);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, in_actions, sum)),
            _ => {}
        }
    }
    let v: serde_json::Value = serde_json::from_str(json.trim()).map_err(|e| e.to_string())?;
    let mut sum = 0;
    walk(&v, false, &mut sum);
    Ok(sum)
}

/// Root-qdisc counters of `dev` in namespace `ns`, from `tc -n <ns> -s -j qdisc show dev <dev>`.
pub fn qdisc_stats(ns: &str, dev: &str) -> Result<QdiscStats, TestbedError> {
    let args = ["tc", "-n", ns, "-s", "-j", "qdisc", "show", "dev", dev];
    let out = run(&args)?;
    let parse_err = |reason: String| TestbedError::Parse {
        command: args.join(" "),
        reason,
    };
    QdiscStats::from_tc_json(&out)
        .map_err(parse_err)?
        .ok_or_else(|| parse_err("no root qdisc in the output".into()))
}

/// Samples root-qdisc counters of one device through a long-running
/// `tc -n <ns> -s -j -batch -` (one JSON line per `qdisc show`), so that a sample costs
/// no process start: at 10 samples/s a `tc` per sample would take a whole emulated CPU
/// in the CI VM. The child is killed on drop.
pub struct QdiscSampler {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
    command: String,
    dev: String,
}

impl QdiscSampler {
    /// Starts the `tc` process for `dev` in namespace `ns`.
    pub fn start(ns: &str, dev: &str) -> Result<QdiscSampler, TestbedError> {
        let command = format!("tc -n {ns} -s -j -batch -");
        let mut child = Command::new("tc")
            .args(["-n", ns, "-s", "-j", "-batch", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|source| TestbedError::Spawn {
                command: command.clone(),
                source,
            })?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(QdiscSampler {
            child,
            stdin,
            stdout,
            command,
            dev: dev.to_string(),
        })
    }

    /// One sample of the root qdisc's counters.
    pub fn sample(&mut self) -> Result<QdiscStats, TestbedError> {
        let line = self.sample_json()?;
        self.parse_root(&line)
    }

    /// One sample of the root qdisc's counters and of the bottleneck discipline's own
    /// (drops, ECN marks, delay estimate: [`crate::aqm::AqmStats`]), from one `qdisc show`.
    pub fn sample_with_aqm(
        &mut self,
        qdisc: crate::aqm::Qdisc,
    ) -> Result<(QdiscStats, Option<crate::aqm::AqmStats>), TestbedError> {
        let line = self.sample_json()?;
        let root = self.parse_root(&line)?;
        let aqm = crate::aqm::AqmStats::from_tc_json(&line, qdisc).map_err(|reason| {
            TestbedError::Parse {
                command: self.command.clone(),
                reason,
            }
        })?;
        Ok((root, aqm))
    }

    fn parse_root(&self, line: &str) -> Result<QdiscStats, TestbedError> {
        let parse_err = |reason: String| TestbedError::Parse {
            command: self.command.clone(),
            reason,
        };
        QdiscStats::from_tc_json(line)
            .map_err(parse_err)?
            .ok_or_else(|| parse_err("no root qdisc in the output".into()))
    }

    /// The JSON line of one `qdisc show` of the device.
    fn sample_json(&mut self) -> Result<String, TestbedError> {
        use std::io::{BufRead as _, Write as _};
        let parse_err = |reason: String| TestbedError::Parse {
            command: self.command.clone(),
            reason,
        };
        writeln!(self.stdin, "qdisc show dev {}", self.dev)
            .and_then(|_| self.stdin.flush())
            .map_err(|e| parse_err(format!("writing to tc: {e}")))?;
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => return Err(parse_err("tc exited".into())),
            Ok(_) => {}
            Err(e) => return Err(parse_err(format!("reading from tc: {e}"))),
        }
        Ok(line)
    }
}

impl Drop for QdiscSampler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sysctls of benchmarks.md §7.2 set in every sender and receiver namespace.
pub const HOST_SYSCTLS: &[&str] = &[
    "net.ipv4.tcp_no_metrics_save=1",
    "net.ipv4.tcp_sack=1",
    "net.ipv4.tcp_timestamps=1",
    "net.ipv4.tcp_ecn=0",
    "net.ipv4.tcp_slow_start_after_idle=0",
    "net.ipv4.tcp_rmem=4096 131072 67108864",
    "net.ipv4.tcp_wmem=4096 16384 67108864",
];

/// A probability as a netem percentage without exponent (`5e-7` → `0.00005`).
fn fmt_percent(p: f64) -> String {
    let s = format!("{:.10}", p * 100.0);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Whether the running kernel can attach sch_netem (see [`cctl_vm::netem_available`]).
pub fn netem_available() -> bool {
    cctl_vm::netem_available()
}

/// Names from `ip netns list`, whose lines look like `name` or `name (id: 3)`.
fn parse_netns_list(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// A bare network namespace whose only device is `lo` (up, with an optional MTU), for
/// loopback measurements; deleted on drop. A namespace of that name left by a crashed
/// earlier run is removed first.
pub struct LoopbackNetns {
    name: String,
}

impl LoopbackNetns {
    /// Creates namespace `name` with `lo` up, its MTU set to `mtu` bytes if given.
    ///
    /// Errors: a failing `ip` (not root, iproute2 missing), with its stderr.
    pub fn create(name: &str, mtu: Option<u32>) -> Result<LoopbackNetns, TestbedError> {
        if netns_exists(name) {
            delete_netns(name)?;
        }
        run(&["ip", "netns", "add", name])?;
        let ns = LoopbackNetns { name: name.into() };
        let mtu = mtu.map(|m| m.to_string());
        let mut args = vec!["ip", "-n", name, "link", "set", "lo"];
        if let Some(m) = &mtu {
            args.extend(["mtu", m.as_str()]);
        }
        args.push("up");
        run(&args)?;
        Ok(ns)
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Turns the `ethtool -K` features `features` (`tso`, `gso`, `gro`) of its `lo` on or off.
    ///
    /// Errors: ethtool missing or refusing, with its stderr.
    pub fn set_offloads(&self, features: &[&str], on: bool) -> Result<(), TestbedError> {
        let v = if on { "on" } else { "off" };
        let mut args = vec![
            "ip",
            "netns",
            "exec",
            self.name.as_str(),
            "ethtool",
            "-K",
            "lo",
        ];
        for f in features {
            args.extend([*f, v]);
        }
        run(&args).map(drop)
    }
}

impl Drop for LoopbackNetns {
    fn drop(&mut self) {
        let _ = delete_netns(&self.name);
    }
}

/// Turns TSO, GSO and GRO off on `dev` in namespace `ns` (one `ethtool -K`), so that
/// queues hold MTU-sized packets.
pub(crate) fn offloads_off(ns: &str, dev: &str) -> Result<(), TestbedError> {
    run_words(&format!(
        "ip netns exec {ns} ethtool -K {dev} tso off gso off gro off"
    ))
    .map(drop)
}

/// Adds netem qdiscs (`tc` batch lines) in `ns`; a failure on a kernel without
/// sch_netem is [`TestbedError::NoNetem`].
pub(crate) fn add_netem(ns: &str, lines: &[String]) -> Result<(), TestbedError> {
    if lines.is_empty() {
        return Ok(());
    }
    match run_batch(&["tc", "-n", ns], lines) {
        Ok(_) => Ok(()),
        Err(e) if !netem_available() => Err(TestbedError::NoNetem(e.to_string())),
        Err(e) => Err(e),
    }
}

pub(crate) fn delete_netns(name: &str) -> Result<(), TestbedError> {
    run(&["ip", "netns", "delete", name]).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_prefixes_are_used_as_interface_names_unchanged() {
        let spec = PathSpec::new("cctl-demo", 20, 100);
        assert_eq!(spec.sender_dev(), "cctl-demos0");
        assert_eq!(spec.receiver_dev(), "cctl-demor0");
        assert_eq!(spec.sender_ns(), "cctl-demo-snd1");
        assert_eq!(spec.sender_ns_at(2), "cctl-demo-snd3");
        assert_eq!(spec.sender_dev_at(11), "cctl-demos11");
        assert_eq!(spec.router_access_dev(11), "cctl-demoa11");
        assert_eq!(spec.receiver_ns(), "cctl-demo-rcv");
    }

    #[test]
    fn long_prefixes_get_distinct_hashed_names_that_fit_ifnamsiz() {
        let a = PathSpec::new("cctl-bench-fairness-run-1", 20, 100);
        let b = PathSpec::new("cctl-bench-fairness-run-2", 20, 100);
        for dev in [
            a.sender_dev(),
            a.receiver_dev(),
            b.sender_dev(),
            b.receiver_dev(),
        ] {
            assert!(dev.len() <= IFNAME_MAX, "{dev} is too long");
            assert!(dev.starts_with("cctl-b"), "{dev}");
        }
        assert_ne!(a.sender_dev(), b.sender_dev());
        assert_eq!(
            a.sender_dev(),
            PathSpec::new("cctl-bench-fairness-run-1", 1, 1).sender_dev()
        );
        // Exactly 12 bytes still fits as is, with room for `s99`.
        assert_eq!(
            PathSpec::new("abcdefghijkl", 1, 1).sender_dev_at(99),
            "abcdefghijkls99"
        );
    }

    #[test]
    fn addresses_follow_the_subnet_octet() {
        let spec = PathSpec {
            subnet_octet: 9,
            ..PathSpec::new("x", 1, 1)
        };
        assert_eq!(spec.sender_addr(), Ipv4Addr::new(10, 80, 9, 1));
        assert_eq!(spec.sender_addr_at(3), Ipv4Addr::new(10, 83, 9, 1));
        assert_eq!(spec.receiver_addr(), Ipv4Addr::new(10, 77, 9, 129));
        assert_eq!(spec.router_ns(), "x-rtr");
        assert_eq!(spec.bottleneck_dev(), "xb0");
    }

    #[test]
    fn the_tools_the_testbed_runs_are_found_and_a_missing_one_names_its_package() {
        check_tools().expect("ip, tc, ethtool and sysctl are installed here");
        let e = TestbedError::MissingTool {
            tool: "tc",
            package: "iproute2",
        }
        .to_string();
        assert!(
            e.contains("`tc` is not installed") && e.contains("iproute2"),
            "{e}"
        );
        let e = TestbedError::Spawn {
            command: "tc qdisc show".into(),
            source: std::io::ErrorKind::NotFound.into(),
        }
        .to_string();
        assert!(e.contains("Debian package iproute2"), "{e}");
    }

    #[test]
    fn netem_percentages_have_no_exponent_and_limits_cover_the_bdp() {
        assert_eq!(fmt_percent(5e-7), "0.00005");
        assert_eq!(fmt_percent(0.01), "1");
        assert_eq!(fmt_percent(0.015), "1.5");
        let mut spec = PathSpec::new("x", 250, 100);
        spec.senders[0].rtt_ms = 162.0;
        // 250 Mb/s × 162 ms = 3375 packets; 4 × that.
        assert_eq!(spec.netem_limit(0), 13_500);
        spec.senders[0].rtt_ms = 10.0;
        assert_eq!(spec.netem_limit(0), 1000);
        assert!(spec.needs_netem());
        assert!(!PathSpec::new("x", 1, 1).needs_netem());
    }

    #[test]
    fn periodic_loss_period_and_gact_drop_counters() {
        assert_eq!(periodic_every(0.001), 1000);
        assert_eq!(periodic_every(0.003), 333);
        assert_eq!(periodic_every(0.9), 2);
        let json = r#"[{"protocol":"all","pref":49152,"kind":"matchall","chain":0},{"protocol":"all","pref":49152,"kind":"matchall","chain":0,"options":{"handle":1,"in_hw":false,"actions":[{"order":1,"kind":"gact","control_action":{"type":"pass"},"prob":{"random_type":"determ","control_action":{"type":"drop"},"val":1000},"index":1,"ref":1,"bind":1,"stats":{"bytes":3028000,"packets":2000,"drops":2,"overlimits":0,"requeues":0,"backlog":0,"qlen":0}}]}}]"#;
        assert_eq!(action_drops(json), Ok(2));
        assert_eq!(action_drops("[]"), Ok(0));
        assert!(action_drops("not json").is_err());
    }

    #[test]
    fn impossible_delays_and_losses_are_refused() {
        for (rtt_ms, loss) in [(-1.0, 0.0), (f64::NAN, 0.0), (10.0, 1.0), (10.0, -0.1)] {
            let mut spec = PathSpec::new("x", 1, 1);
            spec.senders[0] = AccessSpec {
                rtt_ms,
                loss,
                ..Default::default()
            };
            assert!(spec.validate().is_err(), "{rtt_ms} {loss}");
        }
        let mut spec = PathSpec::new("x", 1, 1);
        spec.senders.clear();
        assert!(spec.validate().is_err());
    }

    #[test]
    fn tbf_burst_is_one_millisecond_but_at_least_two_frames() {
        assert_eq!(PathSpec::new("x", 20, 1).burst_bytes(), 2 * FRAME_BYTES);
        assert_eq!(PathSpec::new("x", 100, 1).burst_bytes(), 12_500);
        assert_eq!(PathSpec::new("x", 1000, 1).burst_bytes(), 125_000);
    }

    #[test]
    fn bad_specs_are_refused_before_anything_is_created() {
        for spec in [
            PathSpec::new("", 20, 100),
            PathSpec::new("a/b", 20, 100),
            PathSpec::new("-x", 20, 100),
            PathSpec::new("a b", 20, 100),
            PathSpec::new("x".repeat(PREFIX_MAX + 1), 20, 100),
            PathSpec::new("ok", 0, 100),
            PathSpec::new("ok", 20, 0),
        ] {
            let err = Testbed::create(&spec).unwrap_err();
            assert!(
                matches!(err, TestbedError::InvalidSpec(_)),
                "{spec:?}: {err}"
            );
        }
    }

    #[test]
    fn tc_json_root_counters_are_parsed() {
        // Captured from `tc -s -j qdisc show dev X` (iproute2 6.1) during a 20 Mbit/s run.
        let json = r#"[{"kind":"tbf","handle":"1:","root":true,"refcnt":3,"options":{"rate":2500000,"burst":3027,"lat":1000000},"bytes":9971560,"packets":6590,"drops":12,"overlimits":7310,"requeues":0,"backlog":151400,"qlen":100},{"kind":"pfifo","handle":"10:","parent":"1:1","options":{"limit":100},"bytes":9971560,"packets":6590,"drops":12,"overlimits":0,"requeues":0,"backlog":151400,"qlen":100}]"#;
        let stats = QdiscStats::from_tc_json(json).unwrap().unwrap();
        assert_eq!(
            stats,
            QdiscStats {
                sent_bytes: 9_971_560,
                sent_packets: 6590,
                drops: 12,
                overlimits: 7310,
                requeues: 0,
                backlog_bytes: 151_400,
                backlog_packets: 100,
            }
        );
    }

    #[test]
    fn tc_json_without_a_root_qdisc_or_garbage_is_reported() {
        assert_eq!(QdiscStats::from_tc_json("[]").unwrap(), None);
        assert!(QdiscStats::from_tc_json("qdisc tbf 1: root").is_err());
        assert!(QdiscStats::from_tc_json(r#"[{"kind":"tbf","root":true}]"#).is_err());
    }

    #[test]
    fn netns_listing_names_are_the_first_word_of_each_line() {
        let listing = "cctl-bt-rcv (id: 1)\ncctl-bt-snd (id: 0)\nother\n\n";
        assert_eq!(
            parse_netns_list(listing),
            ["cctl-bt-rcv", "cctl-bt-snd", "other"]
        );
    }

    #[test]
    fn failed_commands_carry_their_command_line_and_stderr() {
        let err = run(&[
            "sh",
            "-c",
            "echo 'RTNETLINK answers: File exists' >&2; exit 2",
        ])
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("sh -c echo"), "{text}");
        assert!(text.contains("RTNETLINK answers: File exists"), "{text}");
        assert!(matches!(err, TestbedError::Command { ref stderr, .. } if stderr.ends_with('\n')));
    }
}
