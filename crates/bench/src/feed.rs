//! One collector for every slot of a sweep: the BPF collector traces the bench port on
//! the whole kernel, and [`SampleFeed`] hands each sample to the slot whose dumbbell
//! the flow is in. Slot `s` numbers its subnets `10.a.s.b` (the testbed's
//! [`subnet_octet`](cctl_netem::testbed::PathSpec::subnet_octet)), so the third octet of a
//! sample's address names its slot.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};
use cctl_loader::collector::{LiveCounters, Trace, TraceConfig, TraceStats};
use cctl_loader::sample::Sample;

/// A running collector shared by the slots of a sweep.
pub struct SampleFeed {
    trace: Mutex<Trace>,
    /// Samples per subscribed slot (subnet octet), waiting to be taken.
    subs: Mutex<HashMap<u8, Vec<Sample>>>,
}

/// The slot a sample with these local and remote addresses belongs to: the third octet
/// of its IPv4 address in 10.0.0.0/8 (local first, then remote); `None` for others.
pub fn slot_of(saddr: IpAddr, daddr: IpAddr) -> Option<u8> {
    [saddr, daddr].into_iter().find_map(|a| match a {
        IpAddr::V4(v4) if v4.octets()[0] == 10 => Some(v4.octets()[2]),
        _ => None,
    })
}

impl SampleFeed {
    /// Starts the collector for flows to or from `port`, sampled at most every `interval`
    /// per flow.
    ///
    /// Errors: the collector's (privileges, BTF, verifier).
    pub fn start(port: u16, interval: Duration) -> Result<SampleFeed> {
        let trace = Trace::start(TraceConfig {
            interval,
            port: Some(port),
            cc: None,
            netns_cookie: None,
        })
        .context("starting the collector")?;
        Ok(SampleFeed {
            trace: Mutex::new(trace),
            subs: Mutex::new(HashMap::new()),
        })
    }

    /// Starts keeping the samples of slot `octet` (dropping any left from before).
    pub fn subscribe(&self, octet: u8) {
        self.subs
            .lock()
            .expect("feed lock")
            .insert(octet, Vec::new());
    }

    fn route(&self, samples: Vec<Sample>) {
        if samples.is_empty() {
            return;
        }
        let mut subs = self.subs.lock().expect("feed lock");
        for s in samples {
            if let Some(v) = slot_of(s.saddr, s.daddr).and_then(|o| subs.get_mut(&o)) {
                v.push(s);
            }
        }
    }

    /// Moves what the collector has delivered to the subscribed slots, waiting at most
    /// `wait` for a first sample. Any slot may call it; it serves all of them.
    pub fn pump(&self, wait: Duration) {
        let got = {
            let mut trace = self.trace.lock().expect("trace lock");
            let mut got: Vec<Sample> = trace.recv_timeout(wait).into_iter().collect();
            got.extend(trace.drain_ready());
            got
        };
        self.route(got);
    }

    /// Ends slot `octet`'s subscription and returns its samples: everything the kernel
    /// emitted for it before the call ([`Trace::drain`]).
    pub fn take(&self, octet: u8) -> Vec<Sample> {
        let got = self.trace.lock().expect("trace lock").drain();
        self.route(got);
        self.subs
            .lock()
            .expect("feed lock")
            .remove(&octet)
            .unwrap_or_default()
    }

    /// The collector's counters since it started (ring-buffer drops are not per slot).
    pub fn counters(&self) -> LiveCounters {
        self.trace.lock().expect("trace lock").counters()
    }

    /// Stops the collector.
    ///
    /// Errors: the collector thread's.
    pub fn finish(self) -> Result<TraceStats> {
        Ok(self.trace.into_inner().expect("trace lock").finish()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn samples_go_to_the_slot_in_their_third_octet() {
        let v4 = |a, b, c, d| IpAddr::V4(Ipv4Addr::new(a, b, c, d));
        assert_eq!(slot_of(v4(10, 81, 3, 1), v4(10, 77, 3, 129)), Some(3));
        assert_eq!(slot_of(v4(10, 77, 0, 129), v4(10, 80, 0, 1)), Some(0));
        assert_eq!(slot_of(v4(192, 168, 0, 1), v4(10, 77, 3, 129)), Some(3));
        assert_eq!(slot_of(v4(192, 168, 0, 1), v4(127, 0, 0, 1)), None);
    }
}
