//! Names and subnets of the testbeds of one sweep: slot `s` builds namespaces `cctl-b<s>-*`
//! with subnets `10.a.s.b`, so the runs of different slots never share a name or an address.

/// Prefix of every namespace a bench run creates (removed at exit and at the next start).
pub const PREFIX: &str = "cctl-b";

/// Most runs one sweep runs at once (`--jobs`): slot `s` numbers its subnets `10.a.s.b`, and
/// each slot holds up to [`crate::testbed::MAX_SENDERS`] senders.
pub const MAX_JOBS: u32 = 64;

/// One of the testbeds of a sweep, numbered from 0 (its subnets' third octet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(pub u8);

impl Slot {
    /// Name prefix of the slot's namespaces and devices, `cctl-b<s>`.
    pub fn prefix(&self) -> String {
        format!("{PREFIX}{}", self.0)
    }
}
