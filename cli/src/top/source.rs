//! Where the dashboard's samples come from: the BPF collector ([`LiveSource`]) or, in
//! tests, a synthetic generator ([`FakeSource`]) that needs no root.

use cctl_loader::collector::Trace;
use cctl_loader::sample::Sample;

/// A stream of samples the event loop drains once per frame.
pub trait Source {
    /// Appends the samples received since the last call, without waiting.
    fn drain(&mut self, out: &mut Vec<Sample>);
    /// Samples delivered so far, and samples the kernel dropped (ring buffer full).
    fn counters(&self) -> (u64, u64);
    /// Now on the samples' clock (CLOCK_MONOTONIC), ns.
    fn now_ns(&self) -> u64;
}

/// The BPF collector (`tp_btf/tcp_probe` into a ring buffer).
pub struct LiveSource {
    /// The running trace.
    pub trace: Trace,
}

impl Source for LiveSource {
    fn drain(&mut self, out: &mut Vec<Sample>) {
        out.extend(self.trace.drain_ready());
    }

    fn counters(&self) -> (u64, u64) {
        let c = self.trace.counters();
        (c.samples, c.dropped)
    }

    fn now_ns(&self) -> u64 {
        monotonic_ns()
    }
}

/// CLOCK_MONOTONIC now, ns (the clock of `bpf_ktime_get_ns`).
pub fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// Synthetic flows for tests: `n` flows from 10.0.0.1:(40000+i) to 10.0.0.2:5201 (every
/// fourth to :5202), cycling through a few CC names, each sampled every 100 ms with a
/// Reno-like cwnd sawtooth whose period and height depend on the flow.
#[cfg(test)]
pub struct FakeSource {
    /// Number of flows.
    pub n: usize,
    /// Current time, ns.
    pub now: u64,
    next: u64,
    bytes: Vec<u64>,
    emitted: u64,
}

#[cfg(test)]
impl FakeSource {
    /// CC names the fake flows run, in turn.
    pub const CCS: [&'static str; 3] = ["bpf_htcp", "cubic", "bpf_reno"];

    /// `n` flows starting at t = 1000 s.
    pub fn new(n: usize) -> FakeSource {
        FakeSource {
            n,
            now: 1_000_000_000_000,
            next: 1_000_000_000_000,
            bytes: vec![0; n],
            emitted: 0,
        }
    }

    /// Moves the clock on by `secs`; samples are produced by the next [`Source::drain`].
    pub fn advance(&mut self, secs: f64) {
        self.now += (secs * 1e9) as u64;
    }

    /// The sample flow `i` gives at time `t_ns`.
    pub fn sample(&mut self, i: usize, t_ns: u64) -> Sample {
        use cctl_loader::sample::{CaState, Vars};
        use std::net::{IpAddr, Ipv4Addr};
        let t = (t_ns - 1_000_000_000_000) as f64 / 1e9;
        let period = 5.0 + (i % 7) as f64;
        let phase = (t % period) / period;
        let top = 40.0 + 10.0 * (i % 5) as f64;
        let cwnd = (top / 2.0 + top / 2.0 * phase) as u32 + 2;
        let srtt_us = 20_000 + (phase * 10_000.0) as u32 + i as u32;
        // Throughput: cwnd segments of 1448 B per RTT.
        self.bytes[i] += (f64::from(cwnd) * 1448.0 * 0.1 / (f64::from(srtt_us) / 1e6)) as u64;
        let cc = Self::CCS[i % Self::CCS.len()];
        let ours = cc.starts_with("bpf_");
        Sample {
            ts_ns: t_ns,
            cookie: 1000 + i as u64,
            netns_cookie: 0,
            saddr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            sport: 40000 + i as u16,
            daddr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            dport: if i % 4 == 3 { 5202 } else { 5201 },
            cc,
            ca_state: if phase < 0.02 {
                CaState::Recovery
            } else {
                CaState::Open
            },
            state_change: false,
            first: false,
            cwnd,
            ssthresh: Some((top / 2.0) as u32),
            srtt_us,
            rttvar_us: 1000 + i as u32,
            min_rtt_us: 20_000,
            bytes_acked: self.bytes[i],
            lost_out: 0,
            retrans_out: 0,
            total_retrans: (t / period) as u32,
            cwr_entries: 0,
            recovery_entries: 0,
            loss_entries: 0,
            packets_out: cwnd,
            in_flight: cwnd,
            mss: 1448,
            delivered: (self.bytes[i] / 1448) as u32,
            prior_cwnd: top as u32,
            ca_map_id: ours.then_some(7),
            algo: match cc {
                "bpf_htcp" => Some("htcp"),
                "bpf_reno" => Some("reno"),
                _ => None,
            },
            tmin_us: ours.then_some(20_000),
            tmax_us: ours.then_some(30_000),
            delta_us: ours.then_some((phase * period * 1e6) as u64),
            epoch_tput_bytes_per_s: ours.then_some(2_000_000),
            backoffs: ours.then_some((t / period) as u32),
            last_beta: ours.then_some(0.5),
            vars: if cc == "bpf_htcp" {
                [
                    cctl_loader::algo::Var {
                        name: "alpha",
                        value: 3.0,
                    },
                    cctl_loader::algo::Var {
                        name: "beta",
                        value: 0.5,
                    },
                ]
                .into_iter()
                .collect()
            } else {
                Vars::default()
            },
        }
    }
}

#[cfg(test)]
impl Source for FakeSource {
    fn drain(&mut self, out: &mut Vec<Sample>) {
        while self.next <= self.now {
            let t = self.next;
            for i in 0..self.n {
                let s = self.sample(i, t);
                out.push(s);
                self.emitted += 1;
            }
            self.next += 100_000_000;
        }
    }

    fn counters(&self) -> (u64, u64) {
        (self.emitted, 0)
    }

    fn now_ns(&self) -> u64 {
        self.now
    }
}
