//! The drop ledger of a run: every place in the testbed a packet can be dropped, counted
//! apart, so that a run can say whether it lost packets only where the scenario meant it
//! to (the bottleneck's queue, the configured forward-path loss).
//!
//! Read once at the end of a run, before the namespaces go (their counters start at zero
//! with them): the root qdisc of every device in every namespace (`tc -s -j qdisc`), every
//! device's rx/tx drops (`ip -s -j link`: veth, TUN), and each namespace's TCP
//! receive-side drops (its `/proc/net/netstat` TcpExt: TCPRcvQDrop, TCPBacklogDrop,
//! TCPZeroWindowDrop, TCPOFODrop). The collector's ring-buffer drops and the configured
//! loss come from the caller.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::tc::{run, TestbedError};

/// TcpExt counters of `/proc/net/netstat` that count segments a receiving socket dropped.
pub const SOCKET_DROP_COUNTERS: &[&str] = &[
    "TCPRcvQDrop",
    "TCPBacklogDrop",
    "TCPZeroWindowDrop",
    "TCPOFODrop",
];

/// Where a run's drops happened, packets; a map holds only places with drops.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DropLedger {
    /// The bottleneck queue(s): the root qdisc of each bottleneck device (intended).
    pub bottleneck: u64,
    /// The configured forward-path loss (netem random or gact periodic; intended).
    pub configured_loss: u64,
    /// Every other qdisc, by `<namespace>/<device> <kind>`.
    pub other_qdiscs: BTreeMap<String, u64>,
    /// Device drops (rx + tx dropped: veth, TUN), by `<namespace>/<device>`.
    pub devices: BTreeMap<String, u64>,
    /// TCP receive-side drops, by namespace ([`SOCKET_DROP_COUNTERS`] summed).
    pub sockets: BTreeMap<String, u64>,
    /// Collector samples lost to a full ring buffer.
    pub ring_buffer: u64,
}

impl DropLedger {
    /// Every place with drops the scenario did not ask for, with its count, e.g.
    /// `qdisc cctl-b0-snd0/cctl-b0s0 tbf: 12`; empty for a clean run.
    pub fn unintended(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        v.extend(
            self.other_qdiscs
                .iter()
                .map(|(k, n)| format!("qdisc {k}: {n}")),
        );
        v.extend(self.devices.iter().map(|(k, n)| format!("device {k}: {n}")));
        v.extend(
            self.sockets
                .iter()
                .map(|(k, n)| format!("sockets in {k}: {n}")),
        );
        if self.ring_buffer > 0 {
            v.push(format!("collector ring buffer: {}", self.ring_buffer));
        }
        v
    }

    /// Total of [`DropLedger::unintended`]'s counts, packets (samples for the ring buffer).
    pub fn unintended_total(&self) -> u64 {
        self.other_qdiscs.values().sum::<u64>()
            + self.devices.values().sum::<u64>()
            + self.sockets.values().sum::<u64>()
            + self.ring_buffer
    }
}

/// Where to look: the testbed's namespaces, and which of their devices hold the intended
/// drops.
#[derive(Debug, Clone, Default)]
pub struct Places {
    /// Every namespace of the testbed.
    pub namespaces: Vec<String>,
    /// (namespace, device) of each bottleneck.
    pub bottlenecks: Vec<(String, String)>,
    /// (namespace, device) whose root qdisc applies the configured loss.
    pub loss_devs: Vec<(String, String)>,
}

/// Reads the ledger of `places`; `configured_loss` and `ring_buffer` as the caller
/// counted them.
///
/// Errors: a failing or unparsable `tc`/`ip`/netstat read.
pub fn read(
    places: &Places,
    configured_loss: u64,
    ring_buffer: u64,
) -> Result<DropLedger, TestbedError> {
    let bottlenecks: BTreeSet<&(String, String)> = places.bottlenecks.iter().collect();
    let loss: BTreeSet<&(String, String)> = places.loss_devs.iter().collect();
    let mut l = DropLedger {
        configured_loss,
        ring_buffer,
        ..DropLedger::default()
    };
    let parse_err = |command: &[&str], reason: String| TestbedError::Parse {
        command: command.join(" "),
        reason,
    };
    for ns in &places.namespaces {
        let argv = ["tc", "-n", ns, "-s", "-j", "qdisc", "show"];
        let qdiscs: Vec<serde_json::Value> =
            serde_json::from_str(&run(&argv)?).map_err(|e| parse_err(&argv, e.to_string()))?;
        for q in qdiscs
            .iter()
            .filter(|q| q.get("root").and_then(|r| r.as_bool()) == Some(true))
        {
            let dev = q["dev"].as_str().unwrap_or("?").to_string();
            let drops = q["drops"].as_u64().unwrap_or(0);
            let at = (ns.clone(), dev.clone());
            if bottlenecks.contains(&at) {
                l.bottleneck += drops;
            } else if loss.contains(&at) {
                // The caller's configured_loss counts them (netem's own counter).
            } else if drops > 0 {
                let kind = q["kind"].as_str().unwrap_or("?");
                *l.other_qdiscs
                    .entry(format!("{ns}/{dev} {kind}"))
                    .or_default() += drops;
            }
        }
        let argv = ["ip", "-n", ns, "-s", "-j", "link", "show"];
        let links: Vec<serde_json::Value> =
            serde_json::from_str(&run(&argv)?).map_err(|e| parse_err(&argv, e.to_string()))?;
        for d in &links {
            let s = &d["stats64"];
            let drops =
                s["rx"]["dropped"].as_u64().unwrap_or(0) + s["tx"]["dropped"].as_u64().unwrap_or(0);
            if drops > 0 {
                let dev = d["ifname"].as_str().unwrap_or("?");
                l.devices.insert(format!("{ns}/{dev}"), drops);
            }
        }
        // In a thread that joins the namespace (no `ip netns exec` process: a fork and two
        // execs per namespace and run cost ~0.1 s each in the TCG guest).
        let what = format!("{ns}: /proc/thread-self/net/netstat");
        let text = crate::netns::spawn_in_netns(ns, || {
            std::fs::read_to_string("/proc/thread-self/net/netstat")
        })
        .and_then(|h| {
            h.join()
                .map_err(|_| std::io::Error::other("thread panicked"))?
        })
        .and_then(|r| r)
        .map_err(|e| parse_err(&[what.as_str()], e.to_string()))?;
        let n = socket_drops(&text).map_err(|r| parse_err(&[what.as_str()], r))?;
        if n > 0 {
            l.sockets.insert(ns.clone(), n);
        }
    }
    Ok(l)
}

/// The sum of [`SOCKET_DROP_COUNTERS`] in the text of `/proc/net/netstat` (pairs of a
/// header line and a value line per group; TcpExt is the one read).
pub fn socket_drops(netstat: &str) -> Result<u64, String> {
    let lines: Vec<&str> = netstat.lines().collect();
    for pair in lines.chunks(2) {
        let [head, vals] = pair else { continue };
        let (Some(h), Some(v)) = (head.strip_prefix("TcpExt:"), vals.strip_prefix("TcpExt:"))
        else {
            continue;
        };
        let names: Vec<&str> = h.split_whitespace().collect();
        let values: Vec<&str> = v.split_whitespace().collect();
        if names.len() != values.len() {
            return Err(format!(
                "TcpExt has {} names and {} values",
                names.len(),
                values.len()
            ));
        }
        let mut sum = 0;
        for (n, x) in names.iter().zip(&values) {
            if SOCKET_DROP_COUNTERS.contains(n) {
                sum += x
                    .parse::<u64>()
                    .map_err(|e| format!("TcpExt {n} = {x:?}: {e}"))?;
            }
        }
        return Ok(sum);
    }
    Err("no TcpExt lines".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_drops_sum_the_receive_side_counters() {
        let text = "TcpExt: SyncookiesSent TCPRcvQDrop TCPBacklogDrop TCPOFODrop TCPZeroWindowDrop ListenDrops\n\
                    TcpExt: 1 2 3 4 5 100\n\
                    IpExt: InNoRoutes\nIpExt: 7\n";
        assert_eq!(socket_drops(text), Ok(14));
        assert!(socket_drops("IpExt: A\nIpExt: 1\n").is_err());
        assert!(socket_drops("TcpExt: A B\nTcpExt: 1\n").is_err());
    }

    #[test]
    fn unintended_names_every_place_but_the_intended_ones() {
        let mut l = DropLedger {
            bottleneck: 50,
            configured_loss: 9,
            ..DropLedger::default()
        };
        assert!(l.unintended().is_empty() && l.unintended_total() == 0);
        l.other_qdiscs.insert("snd0/veth0 tbf".into(), 12);
        l.devices.insert("rtr/veth1".into(), 2);
        l.sockets.insert("rcv".into(), 1);
        l.ring_buffer = 3;
        assert_eq!(
            l.unintended(),
            [
                "qdisc snd0/veth0 tbf: 12",
                "device rtr/veth1: 2",
                "sockets in rcv: 1",
                "collector ring buffer: 3"
            ]
        );
        assert_eq!(l.unintended_total(), 18);
    }
}
