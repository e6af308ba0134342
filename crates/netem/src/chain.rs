//! A parking lot in network namespaces: a chain of routers R1 … RN+1 whose links Rk → Rk+1
//! are the bottlenecks 1 … N, each built like the dumbbell's (tbf over a drop-tail pfifo,
//! [`PathSpec::bottleneck_lines`], so whatever builds the dumbbell's bottleneck builds every
//! hop). A flow with path `[first, last]` has its own sender namespace attached to R_first
//! and its receiver attached to R_last+1 (one receiver namespace per such exit), so it
//! crosses exactly hops first … last (RFC 5166 §4.2; Andrew et al., "Towards a common TCP
//! evaluation suite", PFLDnet 2008, §3.3).
//!
//! ```text
//!  <p>-snd<i+1>  10.(80+i).X.1 <s>s<i> ==== <s>a<i> 10.(80+i).X.254  on R_first of flow i
//!  <p>-rtr<k>    10.(60+k).X.1 <s>b<k> ==== <s>c<k> 10.(60+k).X.2    <p>-rtr<k+1>
//!                egress of <s>b<k>: bottleneck k, tbf rate R_k (1:) -> pfifo limit Q_k (10:)
//!                egress of <s>c<k>: netem delay rtt_k (the hop's ACK direction)
//!  <p>-rcv<j>    10.(70+j).X.1 <s>r<j> ==== <s>e<j> 10.(70+j).X.254  on R_j+1 (flows leaving after hop j)
//! ```
//!
//! Delay is the dumbbell's rule per hop: each hop's two-way propagation delay sits on the
//! reverse direction of its link (only ACKs cross it), away from every bottleneck queue,
//! so a flow's base RTT is the sum over the hops it crosses. Routers route every sender and
//! receiver subnet along the chain; nothing else is connected, so a flow cannot skip a hop.
//! All or nothing: on error whatever was created is removed again, and every namespace is
//! named under the slot's prefix, so [`crate::testbed::remove_leftovers`] finds it.

use std::net::Ipv4Addr;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::flows::Endpoints;
use crate::netns::netns_exists;
use crate::tc::{check_tools, run, run_batch, run_words, TestbedError};
use crate::testbed::{
    add_netem, delete_netns, netem_limit_pkts, offloads_off, qdisc_stats, short_name, PathSpec,
    QdiscStats, Testbed, HOST_SYSCTLS, MAX_SENDERS,
};

/// Most bottlenecks a chain may have: the parking lots of the literature have 2 or 3, and
/// each hop costs the emulated CI guest a router namespace and a shaped link.
pub const MAX_BOTTLENECKS: usize = 4;

/// One bottleneck of a chain as a run uses it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HopPlan {
    /// Its rate (tbf), in Mbit/s.
    pub rate_mbit: f64,
    /// Its share of the propagation delay: the two-way delay it adds to every flow that
    /// crosses it, in ms (netem on the hop's reverse, ACK, direction).
    pub rtt_ms: f64,
    /// Its bandwidth-delay product (rate × the RTT `bdp_rtt` picks among the flows that
    /// cross it), in 1500-byte packets, unrounded.
    pub bdp_pkts: f64,
    /// Its drop-tail queue, in packets.
    pub buffer_pkts: u32,
    /// Whether `buffer_floor_pkts` raised it.
    pub buffer_floored: bool,
}

/// What the chain looks like.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChainSpec {
    /// The dumbbell this point would have had; each hop's bottleneck is built from it with
    /// the hop's rate and buffer ([`ChainSpec::hop_bottleneck`]). Its prefix and subnet
    /// octet name the chain's namespaces and subnets.
    pub template: PathSpec,
    /// The bottlenecks, hop 1 first: rate (Mbit/s), delay (ms), buffer (packets).
    pub hops: Vec<HopPlan>,
    /// Each sender's path, 1-based `(first, last)` hop; sender `i` runs flow `i`.
    pub paths: Vec<(usize, usize)>,
}

impl ChainSpec {
    fn prefix(&self) -> &str {
        &self.template.prefix
    }

    fn x(&self) -> u8 {
        self.template.subnet_octet
    }

    /// Number of bottlenecks.
    pub fn len(&self) -> usize {
        self.hops.len()
    }

    /// Whether the chain has no bottleneck (an invalid spec).
    pub fn is_empty(&self) -> bool {
        self.hops.is_empty()
    }

    /// Router `k`'s namespace (1-based, 1 ..= N+1), `<prefix>-rtr<k>`.
    pub fn router_ns(&self, k: usize) -> String {
        format!("{}-rtr{k}", self.prefix())
    }

    /// Sender `i`'s namespace (0-based), `<prefix>-snd<i+1>` as on the dumbbell.
    pub fn sender_ns(&self, i: usize) -> String {
        self.template.sender_ns_at(i)
    }

    /// The namespace of the receiver of flows leaving after hop `j`, `<prefix>-rcv<j>`.
    pub fn receiver_ns(&self, j: usize) -> String {
        format!("{}-rcv{j}", self.prefix())
    }

    /// Hop `k`'s device on router k; its egress is bottleneck `k`.
    pub fn hop_dev(&self, k: usize) -> String {
        format!("{}b{k}", short_name(self.prefix()))
    }

    /// Hop `k`'s device on router k+1; its egress (the ACK direction) carries the hop's delay.
    pub fn hop_peer_dev(&self, k: usize) -> String {
        format!("{}c{k}", short_name(self.prefix()))
    }

    fn exit_dev(&self, j: usize) -> String {
        format!("{}e{j}", short_name(self.prefix()))
    }

    fn receiver_dev(&self, j: usize) -> String {
        format!("{}r{j}", short_name(self.prefix()))
    }

    /// Sender `i`'s address, `10.(80+i).X.1` as on the dumbbell.
    pub fn sender_addr(&self, i: usize) -> Ipv4Addr {
        self.template.sender_addr_at(i)
    }

    /// Address of the receiver of flows leaving after hop `j`, `10.(70+j).X.1`.
    pub fn receiver_addr(&self, j: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 70 + j as u8, self.x(), 1)
    }

    /// Hops after which some flow leaves (each has a receiver namespace), ascending.
    pub fn exits(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.paths.iter().map(|p| p.1).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The dumbbell bottleneck hop `k` (1-based) is built as: the template with the hop's
    /// rate and buffer.
    pub fn hop_bottleneck(&self, k: usize) -> PathSpec {
        let h = &self.hops[k - 1];
        PathSpec {
            rate_mbit: h.rate_mbit,
            queue_pkts: h.buffer_pkts,
            ..self.template.clone()
        }
    }

    /// Whether building the chain needs sch_netem (a hop with a delay).
    pub fn needs_netem(&self) -> bool {
        self.hops.iter().any(|h| h.rtt_ms > 0.0)
    }

    /// Where the delay taps go ([`crate::taps`]): both ends of every sender's and
    /// receiver's access link; bottleneck `k` from router k's egress to router k+1's
    /// ingress.
    pub fn tap_plan(&self) -> crate::taps::TapPlan {
        use crate::taps::{enter_slot, leave_slot, TapPlan, TapPoint};
        let mut taps: Vec<TapPoint> = (0..self.paths.len())
            .flat_map(|i| TapPoint::host(&self.sender_ns(i), self.template.sender_dev_at(i)))
            .collect();
        for j in self.exits() {
            taps.extend(TapPoint::host(&self.receiver_ns(j), self.receiver_dev(j)));
        }
        for k in 1..=self.len() {
            taps.push(TapPoint::enter(&self.router_ns(k), self.hop_dev(k), k));
            taps.push(TapPoint::leave(
                &self.router_ns(k + 1),
                self.hop_peer_dev(k),
                k,
            ));
        }
        TapPlan {
            taps,
            hops: (1..=self.len())
                .map(|k| (enter_slot(k), leave_slot(k)))
                .collect(),
        }
    }

    /// Checks the spec before anything is created.
    pub fn validate(&self) -> Result<(), TestbedError> {
        let bad = |why: String| Err(TestbedError::InvalidSpec(why));
        self.template.validate()?;
        let n = self.hops.len();
        if !(1..=MAX_BOTTLENECKS).contains(&n) {
            return bad(format!(
                "a chain has 1 to {MAX_BOTTLENECKS} bottlenecks, got {n}"
            ));
        }
        for k in 1..=n {
            self.hop_bottleneck(k).validate()?;
            let rtt = self.hops[k - 1].rtt_ms;
            if !(0.0..=60_000.0).contains(&rtt) {
                return bad(format!(
                    "hop {k}: rtt_ms must be in [0, 60000] ms, got {rtt}"
                ));
            }
        }
        if self.paths.is_empty() || self.paths.len() > MAX_SENDERS {
            return bad(format!(
                "senders must number 1 to {MAX_SENDERS}, got {}",
                self.paths.len()
            ));
        }
        for (i, &(first, last)) in self.paths.iter().enumerate() {
            if !(1 <= first && first <= last && last <= n) {
                return bad(format!(
                    "sender {i}: no path from sender to receiver: [{first}, {last}] on a chain of {n}"
                ));
            }
        }
        Ok(())
    }
}

/// Counters of one bottleneck of a chain at the end of a run (root tbf, including its
/// pfifo's drops), from `tc -s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HopStats {
    /// The hop, 1-based.
    pub hop: usize,
    /// Packets sent on through it, in packets.
    pub sent_packets: u64,
    /// Bytes sent on through it, in bytes (L2 frames).
    pub sent_bytes: u64,
    /// Packets its queue dropped, in packets.
    pub drops: u64,
    /// Times tbf had a packet but no tokens, in events.
    pub overlimits: u64,
    /// Packets still queued, in packets.
    pub backlog_packets: u64,
}

impl HopStats {
    fn new(hop: usize, q: QdiscStats) -> HopStats {
        HopStats {
            hop,
            sent_packets: q.sent_packets,
            sent_bytes: q.sent_bytes,
            drops: q.drops,
            overlimits: q.overlimits,
            backlog_packets: q.backlog_packets,
        }
    }
}

/// A live chain; dropping it removes its namespaces (best effort).
#[derive(Debug)]
pub struct Chain {
    spec: ChainSpec,
    namespaces: Vec<String>,
    removed: bool,
}

impl Chain {
    /// Builds the chain of `spec`; removes leftover namespaces of the same names first. All
    /// or nothing: on error, whatever was created has been removed again.
    ///
    /// Errors: [`TestbedError::InvalidSpec`]; [`TestbedError::NoNetem`] when a hop has a
    /// delay and the kernel has no sch_netem; a failing `ip`/`tc`/`ethtool`.
    pub fn create(spec: &ChainSpec) -> Result<Chain, TestbedError> {
        spec.validate()?;
        check_tools()?;
        let n = spec.len();
        let mut namespaces: Vec<String> = (1..=n + 1).map(|k| spec.router_ns(k)).collect();
        namespaces.extend((0..spec.paths.len()).map(|i| spec.sender_ns(i)));
        namespaces.extend(spec.exits().into_iter().map(|j| spec.receiver_ns(j)));
        let chain = Chain {
            spec: spec.clone(),
            namespaces,
            removed: false,
        };
        for ns in &chain.namespaces {
            if netns_exists(ns) {
                delete_netns(ns)?;
            }
        }
        // From here on, `chain`'s Drop removes whatever exists if a step fails.
        chain.build()?;
        Ok(chain)
    }

    fn build(&self) -> Result<(), TestbedError> {
        let spec = &self.spec;
        let n = spec.len();
        let x = spec.x();
        let exits = spec.exits();
        let adds: Vec<String> = self
            .namespaces
            .iter()
            .map(|ns| format!("netns add {ns}"))
            .collect();
        run_batch(&["ip"], &adds)?;
        for i in 0..spec.paths.len() {
            host_sysctls(&spec.sender_ns(i))?;
        }
        for &j in &exits {
            host_sysctls(&spec.receiver_ns(j))?;
        }

        // Links, created from the router's side in chain order (so that hop k-1's peer end
        // already sits in router k when router k addresses it).
        for k in 1..=n + 1 {
            run_batch(
                &["ip", "-n", &spec.router_ns(k)],
                &self.link_lines(k, &exits),
            )?;
        }

        // Offloads off on both ends of every link, then up, then the routes along the chain.
        for k in 1..=n + 1 {
            let rtr = spec.router_ns(k);
            let devs = self.router_devs(k);
            for d in &devs {
                offloads_off(&rtr, d)?;
            }
            let mut lines: Vec<String> = devs.iter().map(|d| format!("link set {d} up")).collect();
            // Towards router k-1 (hop k-1) or k+1 (hop k).
            let back = format!("10.{}.{x}.1", 60 + k.saturating_sub(1));
            let ahead = format!("10.{}.{x}.2", 60 + k);
            for (i, &(first, _)) in spec.paths.iter().enumerate() {
                if first != k {
                    let via = if first < k { &back } else { &ahead };
                    lines.push(format!("route add 10.{}.{x}.0/24 via {via}", 80 + i));
                }
            }
            for &j in &exits {
                if j + 1 != k {
                    let via = if j + 1 < k { &back } else { &ahead };
                    lines.push(format!("route add 10.{}.{x}.0/24 via {via}", 70 + j));
                }
            }
            run_batch(&["ip", "-n", &rtr], &lines)?;
            run_words(&format!(
                "ip netns exec {rtr} sysctl -qw net.ipv4.ip_forward=1"
            ))?;
        }
        for i in 0..spec.paths.len() {
            let (ns, dev) = (spec.sender_ns(i), spec.template.sender_dev_at(i));
            offloads_off(&ns, &dev)?;
            run_batch(
                &["ip", "-n", &ns],
                &[
                    "link set lo up".to_string(),
                    format!("addr add {}/24 dev {dev}", spec.sender_addr(i)),
                    format!("link set {dev} up"),
                    format!("route add default via 10.{}.{x}.254", 80 + i),
                ],
            )?;
        }
        for &j in &exits {
            let (ns, dev) = (spec.receiver_ns(j), spec.receiver_dev(j));
            offloads_off(&ns, &dev)?;
            run_batch(
                &["ip", "-n", &ns],
                &[
                    "link set lo up".to_string(),
                    format!("addr add {}/24 dev {dev}", spec.receiver_addr(j)),
                    format!("link set {dev} up"),
                    format!("route add default via 10.{}.{x}.254", 70 + j),
                ],
            )?;
        }

        self.add_qdiscs()
    }

    /// The `ip -n <router k>` lines that create router `k`'s links (its hop to k+1, the
    /// access links of the flows entering at k, the exit link of flows leaving after hop
    /// k-1) and address its ends (`exits`: [`ChainSpec::exits`]).
    fn link_lines(&self, k: usize, exits: &[usize]) -> Vec<String> {
        let spec = &self.spec;
        let (n, x) = (spec.len(), spec.x());
        let mut lines = vec!["link set lo up".to_string()];
        if k <= n {
            let (b, c) = (spec.hop_dev(k), spec.hop_peer_dev(k));
            lines.push(format!(
                "link add {b} type veth peer name {c} netns {}",
                spec.router_ns(k + 1)
            ));
            lines.push(format!("addr add 10.{}.{x}.1/24 dev {b}", 60 + k));
        }
        if k >= 2 {
            lines.push(format!(
                "addr add 10.{}.{x}.2/24 dev {}",
                60 + k - 1,
                spec.hop_peer_dev(k - 1)
            ));
        }
        for (i, &(first, _)) in spec.paths.iter().enumerate() {
            if first == k {
                let (a, s) = (
                    spec.template.router_access_dev(i),
                    spec.template.sender_dev_at(i),
                );
                lines.push(format!(
                    "link add {a} type veth peer name {s} netns {}",
                    spec.sender_ns(i)
                ));
                lines.push(format!("addr add 10.{}.{x}.254/24 dev {a}", 80 + i));
            }
        }
        if k >= 2 && exits.contains(&(k - 1)) {
            let j = k - 1;
            lines.push(format!(
                "link add {} type veth peer name {} netns {}",
                spec.exit_dev(j),
                spec.receiver_dev(j),
                spec.receiver_ns(j)
            ));
            lines.push(format!(
                "addr add 10.{}.{x}.254/24 dev {}",
                70 + j,
                spec.exit_dev(j)
            ));
        }
        lines
    }

    /// Bottleneck k on router k's egress towards k+1; hop k's delay on router k+1's
    /// egress back towards k (one tc batch per router).
    fn add_qdiscs(&self) -> Result<(), TestbedError> {
        let spec = &self.spec;
        let n = spec.len();
        for k in 1..=n + 1 {
            let rtr = spec.router_ns(k);
            let mut lines = Vec::new();
            if k <= n {
                lines.extend(spec.hop_bottleneck(k).bottleneck_lines(&spec.hop_dev(k)));
            }
            let mut delay = false;
            if k >= 2 {
                let h = &spec.hops[k - 2];
                if h.rtt_ms > 0.0 {
                    delay = true;
                    lines.push(format!(
                        "qdisc add dev {} root netem delay {}us limit {}",
                        spec.hop_peer_dev(k - 1),
                        (h.rtt_ms * 1000.0).round() as u64,
                        netem_limit_pkts(h.rate_mbit, h.rtt_ms)
                    ));
                }
            }
            if delay {
                add_netem(&rtr, &lines)?;
            } else if !lines.is_empty() {
                run_batch(&["tc", "-n", &rtr], &lines)?;
            }
        }
        Ok(())
    }

    /// Devices of router `k`: its hop ends, access links and exit link.
    fn router_devs(&self, k: usize) -> Vec<String> {
        let spec = &self.spec;
        let mut devs = Vec::new();
        if k <= spec.len() {
            devs.push(spec.hop_dev(k));
        }
        if k >= 2 {
            devs.push(spec.hop_peer_dev(k - 1));
        }
        for (i, &(first, _)) in spec.paths.iter().enumerate() {
            if first == k {
                devs.push(spec.template.router_access_dev(i));
            }
        }
        if k >= 2 && spec.exits().contains(&(k - 1)) {
            devs.push(spec.exit_dev(k - 1));
        }
        devs
    }

    /// The spec this chain was built from.
    pub fn spec(&self) -> &ChainSpec {
        &self.spec
    }

    /// Counters of bottleneck `k` (1-based).
    pub fn hop_stats(&self, k: usize) -> Result<HopStats, TestbedError> {
        let q = qdisc_stats(&self.spec.router_ns(k), &self.spec.hop_dev(k))?;
        Ok(HopStats::new(k, q))
    }

    /// Removes the namespaces; tries all even if one fails, returns the first error.
    pub fn destroy(mut self) -> Result<(), TestbedError> {
        self.removed = true;
        self.remove_namespaces().map_or(Ok(()), Err)
    }

    fn remove_namespaces(&self) -> Option<TestbedError> {
        crate::testbed::delete_existing_netns(self.namespaces.iter())
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        if !self.removed {
            self.removed = true;
            let _ = self.remove_namespaces();
        }
    }
}

/// Sets [`HOST_SYSCTLS`] in the host namespace `ns`.
fn host_sysctls(ns: &str) -> Result<(), TestbedError> {
    let mut argv = vec!["ip", "netns", "exec", ns, "sysctl", "-qw"];
    argv.extend(HOST_SYSCTLS);
    run(&argv).map(drop)
}

/// The network a run uses: the dumbbell, or a chain for a point with a topology.
#[derive(Debug)]
pub enum Bed {
    /// The dumbbell (no `[topology]`).
    Dumbbell(Testbed),
    /// A chain of bottlenecks.
    Chain(Chain),
}

impl Bed {
    /// Builds a run's network: the chain `chain` when the point has a `[topology]`, else the
    /// dumbbell `path` (which also carries the bottleneck's discipline and the receiver's
    /// congestion control).
    ///
    /// Errors: ECN (or a dctcp receiver) on a chain (its hosts' sysctls are not set yet); a
    /// failing build.
    pub fn create(chain: Option<ChainSpec>, path: &PathSpec) -> anyhow::Result<Bed> {
        Ok(match chain {
            Some(_) if path.aqm.ecn || path.receiver_cc.is_some() => anyhow::bail!(
                "ECN (and dctcp) on a [topology] chain is not implemented yet: its hosts keep \
                 net.ipv4.tcp_ecn=0; use the dumbbell"
            ),
            Some(spec) => Bed::Chain(Chain::create(&spec).context("building the chain")?),
            None => Bed::Dumbbell(Testbed::create(path).context("building the dumbbell")?),
        })
    }

    /// The dumbbell, if this is one (web traffic and forward-path loss need it).
    pub fn dumbbell(&self) -> Option<&Testbed> {
        match self {
            Bed::Dumbbell(t) => Some(t),
            Bed::Chain(_) => None,
        }
    }

    /// The namespace and device of the queue the run samples over time: the dumbbell's
    /// bottleneck, or a chain's first hop.
    pub fn sampled_queue(&self) -> (String, String) {
        match self {
            Bed::Dumbbell(t) => (t.router_ns().to_string(), t.spec().bottleneck_dev()),
            Bed::Chain(c) => (c.spec.router_ns(1), c.spec.hop_dev(1)),
        }
    }

    /// Forward-path loss drops of sender `i` (none on a chain), in packets.
    pub fn random_drops(&self, i: usize) -> Result<u64, TestbedError> {
        match self {
            Bed::Dumbbell(t) => t.random_drops(i),
            Bed::Chain(_) => Ok(0),
        }
    }

    /// Counters of every hop of a chain (empty for the dumbbell).
    pub fn hop_stats(&self) -> Result<Vec<HopStats>, TestbedError> {
        match self {
            Bed::Dumbbell(_) => Ok(Vec::new()),
            Bed::Chain(c) => (1..=c.spec.len()).map(|k| c.hop_stats(k)).collect(),
        }
    }

    /// Where its packets can be dropped ([`crate::ledger::read`]).
    pub fn drop_places(&self) -> crate::ledger::Places {
        match self {
            Bed::Dumbbell(t) => t.drop_places(),
            Bed::Chain(c) => crate::ledger::Places {
                namespaces: c.namespaces.clone(),
                bottlenecks: (1..=c.spec.len())
                    .map(|k| (c.spec.router_ns(k), c.spec.hop_dev(k)))
                    .collect(),
                loss_devs: Vec::new(),
            },
        }
    }

    /// Where the delay taps go ([`crate::taps`]).
    pub fn tap_plan(&self) -> crate::taps::TapPlan {
        match self {
            Bed::Dumbbell(t) => t.tap_plan(),
            Bed::Chain(c) => c.spec.tap_plan(),
        }
    }

    /// Removes the network.
    pub fn destroy(self) -> Result<(), TestbedError> {
        match self {
            Bed::Dumbbell(t) => t.destroy(),
            Bed::Chain(c) => c.destroy(),
        }
    }
}

impl Endpoints for Bed {
    fn senders(&self) -> usize {
        match self {
            Bed::Dumbbell(t) => t.senders(),
            Bed::Chain(c) => c.spec.paths.len(),
        }
    }

    fn sender_ns_at(&self, i: usize) -> &str {
        match self {
            Bed::Dumbbell(t) => t.sender_ns_at(i),
            Bed::Chain(c) => &c.namespaces[c.spec.len() + 1 + i],
        }
    }

    fn receiver_of(&self, i: usize) -> (&str, Ipv4Addr) {
        match self {
            Bed::Dumbbell(t) => (t.receiver_ns(), t.receiver_addr()),
            Bed::Chain(c) => {
                let j = c.spec.paths[i].1;
                let at = c
                    .spec
                    .exits()
                    .iter()
                    .position(|&e| e == j)
                    .expect("an exit");
                (
                    &c.namespaces[c.spec.len() + 1 + c.spec.paths.len() + at],
                    c.spec.receiver_addr(j),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(paths: &[(usize, usize)]) -> ChainSpec {
        let hop = HopPlan {
            rate_mbit: 20.0,
            rtt_ms: 10.0,
            bdp_pkts: 33.3,
            buffer_pkts: 33,
            buffer_floored: false,
        };
        let mut template = PathSpec::new("cctl-pk", 20, 33);
        template.subnet_octet = 7;
        ChainSpec {
            template,
            hops: vec![hop.clone(), hop],
            paths: paths.to_vec(),
        }
    }

    #[test]
    fn names_and_addresses_follow_the_hops() {
        let s = spec(&[(1, 2), (1, 1), (2, 2)]);
        assert_eq!(s.router_ns(3), "cctl-pk-rtr3");
        assert_eq!(s.receiver_ns(2), "cctl-pk-rcv2");
        assert_eq!(s.sender_ns(0), "cctl-pk-snd1");
        assert_eq!(s.hop_dev(2), "cctl-pkb2");
        assert_eq!(s.hop_peer_dev(1), "cctl-pkc1");
        assert_eq!(s.receiver_addr(1), Ipv4Addr::new(10, 71, 7, 1));
        assert_eq!(s.sender_addr(2), Ipv4Addr::new(10, 82, 7, 1));
        assert_eq!(s.exits(), [1, 2]);
        let b = s.hop_bottleneck(2);
        assert_eq!((b.rate_mbit, b.queue_pkts), (20.0, 33));
        assert_eq!(
            b.bottleneck_lines("d")[1],
            "qdisc add dev d parent 1:1 handle 10: pfifo limit 33"
        );
        s.validate().unwrap();
    }

    #[test]
    fn a_path_outside_the_chain_is_refused_before_anything_is_created() {
        for p in [(0, 1), (1, 3), (2, 1)] {
            let e = Chain::create(&spec(&[(1, 2), p])).unwrap_err().to_string();
            assert!(e.contains("no path from sender to receiver"), "{e}");
        }
        let mut s = spec(&[(1, 1)]);
        s.hops.clear();
        assert!(matches!(s.validate(), Err(TestbedError::InvalidSpec(_))));
    }

    /// Needs root: all or nothing. On a kernel without sch_netem a chain with delay fails
    /// at its last step (the qdiscs) and leaves no namespace behind; with netem it builds,
    /// and `destroy` removes every namespace.
    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn a_failed_build_leaves_nothing_behind() {
        let mut s = spec(&[(1, 2), (2, 2)]);
        s.template.prefix = "cctl-pkf".into();
        let names: Vec<String> = (1..=3)
            .map(|k| s.router_ns(k))
            .chain([s.sender_ns(0), s.sender_ns(1), s.receiver_ns(2)])
            .collect();
        match Chain::create(&s) {
            Err(TestbedError::NoNetem(e)) => {
                assert!(!crate::testbed::netem_available(), "{e}");
            }
            Err(e) => panic!("{e}"),
            Ok(c) => {
                assert!(names.iter().all(|n| netns_exists(n)));
                c.destroy().unwrap();
            }
        }
        for n in &names {
            assert!(!netns_exists(n), "{n} left behind");
        }
    }

    /// Needs root: a 2-hop chain without delay (no netem), a long flow and two cross flows
    /// for 4 s; each hop carries exactly the flows whose path crosses it.
    #[test]
    #[ignore = "root: builds network namespaces; `make test` runs it serially"]
    fn flows_cross_exactly_the_hops_of_their_path() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        use std::time::Duration;
        let mut s = spec(&[(1, 2), (1, 1), (2, 2)]);
        s.template.prefix = "cctl-pkt".into();
        for h in &mut s.hops {
            h.rtt_ms = 0.0;
        }
        let bed = Bed::Chain(Chain::create(&s).expect("building the chain"));
        let flows: Vec<crate::flows::FlowSpec> = (0..3)
            .map(|i| crate::flows::FlowSpec {
                id: i + 1,
                cc: "reno".into(),
                start: Duration::ZERO,
                stop: Duration::from_secs(4),
                sender: i,
                size_bytes: None,
                reverse: false,
            })
            .collect();
        let out =
            crate::flows::run_bulk_flows(&bed, 5399, &flows, Arc::new(AtomicBool::new(false)))
                .unwrap();
        let hops = bed.hop_stats().unwrap();
        let names: Vec<String> = match &bed {
            Bed::Chain(c) => c.namespaces.clone(),
            Bed::Dumbbell(_) => unreachable!(),
        };
        bed.destroy().unwrap();
        assert!(names.iter().all(|n| !netns_exists(n)));
        let mbit: Vec<f64> = out.iter().map(|r| r.mean_throughput_bps() / 1e6).collect();
        eprintln!("throughputs {mbit:?} Mbit/s; hops {hops:?}");
        for r in &out {
            assert!(r.error.is_none(), "{r:?}");
        }
        // Each hop carried (about) the bytes of the flows across it: long + one cross flow.
        for (k, cross) in [(1, 1), (2, 2)] {
            let want = out[0].bytes + out[cross].bytes;
            let got = hops[k - 1].sent_bytes;
            assert!(
                got >= want && (got as f64) < want as f64 * 1.1,
                "hop {k}: {got} vs {want}"
            );
        }
    }
}
