//! Where a testbed's packets are timestamped on their way, as a plan the delay taps
//! (the loader's `delays` module, delay.bpf.c) attach to: one [`TapPoint`] per hook, and
//! which pairs of timestamps make each bottleneck's sojourn time.
//!
//! The slots are fixed: [`ORIGIN`] where a packet enters the testbed (a sender's or a
//! receiver's egress), [`TERMINAL`] where it leaves (their ingress), and for bottleneck
//! `k` (1-based) [`enter_slot`] at its router's egress hook (which runs before the qdisc)
//! and [`leave_slot`] at the ingress of the next namespace. On the dumbbell the next
//! namespace is the receiver's, so its bottleneck leaves at [`TERMINAL`].

use serde::{Deserialize, Serialize};

/// Slot of the packet's origin: the egress of the sender or receiver that sent it.
pub const ORIGIN: u8 = 0;

/// Slot of the packet's destination: the ingress of the host that receives it.
pub const TERMINAL: u8 = 9;

/// Slot where a packet enters bottleneck `k` (1-based, at most
/// [`crate::chain::MAX_BOTTLENECKS`]): its router's egress, before the qdisc.
pub fn enter_slot(k: usize) -> u8 {
    (2 * k - 1) as u8
}

/// Slot where a packet has left bottleneck `k` of a chain: the ingress of the next router.
pub fn leave_slot(k: usize) -> u8 {
    (2 * k) as u8
}

/// One hook that timestamps packets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapPoint {
    /// Network namespace (`/run/netns` name).
    pub netns: String,
    /// Device in it.
    pub dev: String,
    /// Ingress (`true`) or egress hook.
    pub ingress: bool,
    /// Slot it writes.
    pub slot: u8,
    /// Whether packets end their path here.
    pub terminal: bool,
}

impl TapPoint {
    fn new(netns: &str, dev: String, ingress: bool, slot: u8) -> TapPoint {
        TapPoint {
            netns: netns.to_string(),
            dev,
            ingress,
            slot,
            terminal: slot == TERMINAL,
        }
    }

    /// Both ends of a host's access link: its egress is an origin, its ingress a terminal.
    pub(crate) fn host(netns: &str, dev: String) -> [TapPoint; 2] {
        [
            TapPoint::new(netns, dev.clone(), false, ORIGIN),
            TapPoint::new(netns, dev, true, TERMINAL),
        ]
    }

    /// A bottleneck's entry: its router's egress.
    pub(crate) fn enter(netns: &str, dev: String, k: usize) -> TapPoint {
        TapPoint::new(netns, dev, false, enter_slot(k))
    }

    /// A chain bottleneck's exit: the next router's ingress.
    pub(crate) fn leave(netns: &str, dev: String, k: usize) -> TapPoint {
        TapPoint::new(netns, dev, true, leave_slot(k))
    }
}

/// Every tap of a testbed, and each bottleneck's (enter, leave) slots, hop 1 first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapPlan {
    /// The hooks.
    pub taps: Vec<TapPoint>,
    /// Slots whose difference is bottleneck `k`'s sojourn time, at index `k - 1`.
    pub hops: Vec<(u8, u8)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stay_apart_for_the_longest_chain() {
        let n = crate::chain::MAX_BOTTLENECKS;
        let mut all = vec![ORIGIN, TERMINAL];
        for k in 1..=n {
            all.push(enter_slot(k));
            all.push(leave_slot(k));
        }
        let len = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), len, "no two slots alike");
        assert!(all.iter().all(|&s| s <= TERMINAL));
    }
}
