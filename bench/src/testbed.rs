//! A sender → router → receiver veth path whose router egress towards the receiver is a
//! tbf rate limiter over a drop-tail pfifo: the papers' dumbbell with one sender.
//!
//! ```text
//!   netns <prefix>-snd          netns <prefix>-rtr                       netns <prefix>-rcv
//!   10.77.X.1/25 <s>s0 ==== <s>a0 10.77.X.126/25
//!                               10.77.X.254/25 <s>b0 ==== <s>r0 10.77.X.129/25
//!                                 egress of <s>b0: tbf rate R (1:) -> pfifo limit Q (10:)
//! ```
//!
//! The bottleneck sits in its own namespace, not on the sender's egress, on purpose: a
//! packet queued in the sender's own qdisc still counts against its socket's TCP Small
//! Queues budget, which throttles a flow to a couple of packets in the queue once another
//! flow fills it (seen: a second H-TCP flow stuck at 1.3 Mbit/s of 20). Crossing into the
//! router namespace orphans the packet, as a real router's queue does.
//!
//! Everything is built with iproute2 (`ip`, `tc`) and `ethtool`, as Mininet and flent do; a
//! failing command is reported with its full command line and its stderr verbatim.
//! Offloads (TSO, GSO, GRO) are turned off on both veth ends so that the bottleneck queue holds
//! MTU-sized packets and `queue_pkts` means what it says.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;

use serde::Serialize;

/// Where `ip netns` keeps its named network namespaces (bind mounts of `/proc/<pid>/ns/net`).
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// Largest interface name the kernel accepts (IFNAMSIZ - 1), in bytes.
pub const IFNAME_MAX: usize = 15;

/// Longest accepted [`PathSpec::prefix`], in bytes.
pub const PREFIX_MAX: usize = 64;

/// Size of one full frame on the bottleneck: 1500-byte IP MTU plus the 14-byte Ethernet
/// header, in bytes (what `tc` counts per packet once offloads are off).
pub const FRAME_BYTES: u32 = 1514;

/// What the bottleneck path looks like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathSpec {
    /// Name prefix: the namespaces are `<prefix>-snd`, `<prefix>-rtr` and `<prefix>-rcv`. Up to
    /// [`PREFIX_MAX`] characters of `[A-Za-z0-9._-]`, not starting with `-` or `.`.
    pub prefix: String,
    /// Bottleneck rate (the tbf token rate), in Mbit/s (10^6 bit/s).
    pub rate_mbit: u32,
    /// Drop-tail queue length at the bottleneck, in packets (the child `pfifo limit`).
    pub queue_pkts: u32,
    /// Third octet of the path's subnet `10.77.<subnet_octet>.0/24`: the sender is `.1`, the
    /// receiver `.129`, the router `.126` and `.254`. Give concurrent testbeds different octets.
    pub subnet_octet: u8,
}

impl PathSpec {
    /// A spec with subnet `10.77.0.0/24`; rate in Mbit/s, queue in packets.
    pub fn new(prefix: impl Into<String>, rate_mbit: u32, queue_pkts: u32) -> PathSpec {
        PathSpec {
            prefix: prefix.into(),
            rate_mbit,
            queue_pkts,
            subnet_octet: 0,
        }
    }

    /// Name of the sender's network namespace, `<prefix>-snd`.
    pub fn sender_ns(&self) -> String {
        format!("{}-snd", self.prefix)
    }

    /// Name of the receiver's network namespace, `<prefix>-rcv`.
    pub fn receiver_ns(&self) -> String {
        format!("{}-rcv", self.prefix)
    }

    /// Name of the router's network namespace (the bottleneck), `<prefix>-rtr`.
    pub fn router_ns(&self) -> String {
        format!("{}-rtr", self.prefix)
    }

    /// Router's veth end towards the sender.
    pub fn router_sender_side_dev(&self) -> String {
        format!("{}a0", short_name(&self.prefix))
    }

    /// Router's veth end towards the receiver; its egress is the bottleneck.
    pub fn bottleneck_dev(&self) -> String {
        format!("{}b0", short_name(&self.prefix))
    }

    /// Sender's veth end (in the sender namespace), at most [`IFNAME_MAX`] bytes.
    pub fn sender_dev(&self) -> String {
        format!("{}s0", short_name(&self.prefix))
    }

    /// Receiver's veth end (in the receiver namespace), at most [`IFNAME_MAX`] bytes.
    pub fn receiver_dev(&self) -> String {
        format!("{}r0", short_name(&self.prefix))
    }

    /// Sender's address, `10.77.<subnet_octet>.1`.
    pub fn sender_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.subnet_octet, 1)
    }

    /// Receiver's address, `10.77.<subnet_octet>.129`.
    pub fn receiver_addr(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 77, self.subnet_octet, 129)
    }

    /// tbf bucket size, in bytes: one millisecond at the bottleneck rate, but at least two
    /// full frames (a bucket smaller than one frame would drop every full-size packet).
    ///
    /// Small on purpose: a bigger bucket lets a burst through at veth speed after an idle
    /// spell, which the papers' dummynet bottleneck never did. One millisecond keeps tbf's
    /// hrtimer wake-ups from losing tokens on a busy host at high rates.
    pub fn burst_bytes(&self) -> u32 {
        let per_ms = u64::from(self.rate_mbit) * 1_000_000 / 8 / 1000;
        per_ms
            .max(2 * u64::from(FRAME_BYTES))
            .min(u64::from(u32::MAX)) as u32
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
        if self.rate_mbit == 0 {
            return bad("rate_mbit must be at least 1 Mbit/s".into());
        }
        if self.queue_pkts == 0 {
            return bad("queue_pkts must be at least 1 packet".into());
        }
        Ok(())
    }
}

/// A deterministic stem for interface names, at most `IFNAME_MAX - 2` bytes, so that
/// `<stem>s0` and `<stem>r0` fit the kernel's limit.
///
/// A prefix that fits is used as is; a longer one keeps its first 7 bytes and appends 6 hex
/// digits of its FNV-1a hash, so different long prefixes still get different names.
fn short_name(prefix: &str) -> String {
    const STEM_MAX: usize = IFNAME_MAX - 2;
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

/// Why a testbed operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    /// The [`PathSpec`] cannot describe a testbed.
    #[error("invalid path spec: {0}")]
    InvalidSpec(String),
    /// A tool could not be started at all (not installed, not executable).
    #[error("running `{command}`: {source}")]
    Spawn {
        /// The full command line.
        command: String,
        /// Why it did not start.
        source: std::io::Error,
    },
    /// A tool ran and exited unsuccessfully.
    #[error("`{command}` failed ({status}): {}", stderr.trim_end())]
    Command {
        /// The full command line.
        command: String,
        /// How it exited (`exit status: 2`, ...).
        status: String,
        /// Its stderr, verbatim.
        stderr: String,
    },
    /// A tool's output could not be understood.
    #[error("parsing the output of `{command}`: {reason}")]
    Parse {
        /// The full command line.
        command: String,
        /// What was wrong with the output.
        reason: String,
    },
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
        let v: serde_json::Value = serde_json::from_str(json).map_err(|e| e.to_string())?;
        let list = v.as_array().ok_or("expected a JSON array of qdiscs")?;
        let Some(root) = list
            .iter()
            .find(|q| q.get("root").and_then(|r| r.as_bool()) == Some(true))
        else {
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
    sender_ns: String,
    router_ns: String,
    receiver_ns: String,
    sender_dev: String,
    receiver_dev: String,
    /// Set once the namespaces are gone, so that `Drop` does nothing.
    removed: bool,
}

impl Testbed {
    /// Builds the path described by `spec`; removes leftover namespaces of the same names
    /// first. All or nothing: on error, whatever was created has been removed again.
    pub fn create(spec: &PathSpec) -> Result<Testbed, TestbedError> {
        spec.validate()?;
        let bed = Testbed {
            spec: spec.clone(),
            sender_ns: spec.sender_ns(),
            router_ns: spec.router_ns(),
            receiver_ns: spec.receiver_ns(),
            sender_dev: spec.sender_dev(),
            receiver_dev: spec.receiver_dev(),
            removed: false,
        };
        for ns in [&bed.sender_ns, &bed.router_ns, &bed.receiver_ns] {
            if netns_exists(ns) {
                delete_netns(ns)?;
            }
        }
        // From here on, `bed`'s Drop removes whatever exists if a step fails.
        bed.build()?;
        Ok(bed)
    }

    fn build(&self) -> Result<(), TestbedError> {
        let (snd, rtr, rcv) = (&self.sender_ns, &self.router_ns, &self.receiver_ns);
        let (sdev, rdev) = (&self.sender_dev, &self.receiver_dev);
        let (adev, bdev) = (
            self.spec.router_sender_side_dev(),
            self.spec.bottleneck_dev(),
        );
        let (saddr, raddr) = (self.spec.sender_addr(), self.spec.receiver_addr());
        let x = self.spec.subnet_octet;
        let (gw_s, gw_r) = (format!("10.77.{x}.126"), format!("10.77.{x}.254"));
        let (rate, queue) = (self.spec.rate_mbit, self.spec.queue_pkts);
        let burst = self.spec.burst_bytes();
        // Names are validated to [A-Za-z0-9._-], so splitting these lines on spaces is exact.
        for ns in [snd, rtr, rcv] {
            run_words(&format!("ip netns add {ns}"))?;
        }
        // Create the pairs inside the namespaces directly: their names never touch the host's.
        run_words(&format!(
            "ip -n {snd} link add {sdev} type veth peer name {adev} netns {rtr}"
        ))?;
        run_words(&format!(
            "ip -n {rtr} link add {bdev} type veth peer name {rdev} netns {rcv}"
        ))?;
        run_words(&format!("ip -n {snd} addr add {saddr}/25 dev {sdev}"))?;
        run_words(&format!("ip -n {rtr} addr add {gw_s}/25 dev {adev}"))?;
        run_words(&format!("ip -n {rtr} addr add {gw_r}/25 dev {bdev}"))?;
        run_words(&format!("ip -n {rcv} addr add {raddr}/25 dev {rdev}"))?;
        for (ns, dev) in [
            (snd, sdev.as_str()),
            (rtr, adev.as_str()),
            (rtr, bdev.as_str()),
            (rcv, rdev.as_str()),
        ] {
            run_words(&format!(
                "ip netns exec {ns} ethtool -K {dev} tso off gso off gro off"
            ))?;
            run_words(&format!("ip -n {ns} link set {dev} up"))?;
        }
        for ns in [snd, rtr, rcv] {
            run_words(&format!("ip -n {ns} link set lo up"))?;
        }
        run_words(&format!("ip -n {snd} route add default via {gw_s}"))?;
        run_words(&format!("ip -n {rcv} route add default via {gw_r}"))?;
        run_words(&format!(
            "ip netns exec {rtr} sysctl -qw net.ipv4.ip_forward=1"
        ))?;
        // `latency` only sizes tbf's default bfifo child, which the pfifo below replaces.
        run_words(&format!(
            "tc -n {rtr} qdisc add dev {bdev} root handle 1: tbf rate {rate}mbit burst {burst} \
             latency 1s"
        ))?;
        run_words(&format!(
            "tc -n {rtr} qdisc add dev {bdev} parent 1:1 handle 10: pfifo limit {queue}"
        ))?;
        Ok(())
    }

    /// The spec this testbed was built from.
    pub fn spec(&self) -> &PathSpec {
        &self.spec
    }

    /// Name of the sender's network namespace (`<prefix>-snd`).
    pub fn sender_ns(&self) -> &str {
        &self.sender_ns
    }

    /// Name of the receiver's network namespace (`<prefix>-rcv`).
    pub fn receiver_ns(&self) -> &str {
        &self.receiver_ns
    }

    /// Name of the router's network namespace (`<prefix>-rtr`), which holds the bottleneck.
    pub fn router_ns(&self) -> &str {
        &self.router_ns
    }

    /// The sender's veth end.
    pub fn sender_dev(&self) -> &str {
        &self.sender_dev
    }

    /// The receiver's veth end.
    pub fn receiver_dev(&self) -> &str {
        &self.receiver_dev
    }

    /// The sender's IPv4 address.
    pub fn sender_addr(&self) -> Ipv4Addr {
        self.spec.sender_addr()
    }

    /// The receiver's IPv4 address.
    pub fn receiver_addr(&self) -> Ipv4Addr {
        self.spec.receiver_addr()
    }

    /// Counters of the bottleneck (root tbf on the router's veth towards the receiver), from
    /// `tc -n <rtr> -s -j qdisc show dev <dev>`.
    pub fn bottleneck_stats(&self) -> Result<QdiscStats, TestbedError> {
        let dev = self.spec.bottleneck_dev();
        let args = [
            "tc",
            "-n",
            &self.router_ns,
            "-s",
            "-j",
            "qdisc",
            "show",
            "dev",
            &dev,
        ];
        let out = run(&args)?;
        let parse_err = |reason: String| TestbedError::Parse {
            command: args.join(" "),
            reason,
        };
        QdiscStats::from_tc_json(&out)
            .map_err(parse_err)?
            .ok_or_else(|| parse_err("no root qdisc in the output".into()))
    }

    /// Removes the namespaces (and with them the veth pairs and their qdiscs). Tries all even
    /// if one fails; returns the first error.
    pub fn destroy(mut self) -> Result<(), TestbedError> {
        self.removed = true;
        let first = self.remove_namespaces();
        first.map_or(Ok(()), Err)
    }

    /// Deletes whichever of the namespaces exist; returns the first error, if any.
    fn remove_namespaces(&self) -> Option<TestbedError> {
        let mut first = None;
        for ns in [&self.sender_ns, &self.router_ns, &self.receiver_ns] {
            if netns_exists(ns) {
                if let Err(e) = delete_netns(ns) {
                    first.get_or_insert(e);
                }
            }
        }
        first
    }
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

/// Names from `ip netns list`, whose lines look like `name` or `name (id: 3)`.
fn parse_netns_list(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// Whether the named network namespace exists (its bind mount under [`NETNS_RUN_DIR`]).
pub fn netns_exists(name: &str) -> bool {
    Path::new(NETNS_RUN_DIR).join(name).exists()
}

fn delete_netns(name: &str) -> Result<(), TestbedError> {
    run(&["ip", "netns", "delete", name]).map(drop)
}

/// Runs a command line given as space-separated words (none of which contains a space).
fn run_words(line: &str) -> Result<String, TestbedError> {
    run(&line.split_whitespace().collect::<Vec<_>>())
}

/// Runs `argv` (program first), returning its stdout; a failure carries the command line and
/// its stderr verbatim.
fn run(argv: &[&str]) -> Result<String, TestbedError> {
    let command = argv.join(" ");
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|source| TestbedError::Spawn {
            command: command.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(TestbedError::Command {
            command,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_prefixes_are_used_as_interface_names_unchanged() {
        let spec = PathSpec::new("cctl-demo", 20, 100);
        assert_eq!(spec.sender_dev(), "cctl-demos0");
        assert_eq!(spec.receiver_dev(), "cctl-demor0");
        assert_eq!(spec.sender_ns(), "cctl-demo-snd");
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
            assert!(dev.starts_with("cctl-be"), "{dev}");
        }
        assert_ne!(a.sender_dev(), b.sender_dev());
        assert_eq!(
            a.sender_dev(),
            PathSpec::new("cctl-bench-fairness-run-1", 1, 1).sender_dev()
        );
        // Exactly 13 bytes still fits as is.
        assert_eq!(
            PathSpec::new("abcdefghijklm", 1, 1).sender_dev(),
            "abcdefghijklms0"
        );
    }

    #[test]
    fn addresses_follow_the_subnet_octet() {
        let spec = PathSpec {
            subnet_octet: 9,
            ..PathSpec::new("x", 1, 1)
        };
        assert_eq!(spec.sender_addr(), Ipv4Addr::new(10, 77, 9, 1));
        assert_eq!(spec.receiver_addr(), Ipv4Addr::new(10, 77, 9, 129));
        assert_eq!(spec.router_ns(), "x-rtr");
        assert_eq!(spec.bottleneck_dev(), "xb0");
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
