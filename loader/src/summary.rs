//! Per-flow summaries of collector samples: mean cwnd and srtt, and the window
//! reductions (backoffs) with the β each one used.

use std::collections::BTreeMap;

use crate::sample::Sample;

/// One window reduction seen in a flow's samples.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Backoff {
    /// Time of the first sample that showed it, ns (CLOCK_MONOTONIC).
    pub ts_ns: u64,
    /// β the algorithm applied (cctl algorithms only; `None` when several
    /// reductions fell between two samples and only the last β is known).
    pub beta: Option<f64>,
    /// cwnd just before the reduction, segments: the kernel's `prior_cwnd` from the
    /// first sample in the reduction state, else the cwnd of the last sample before it.
    pub cwnd_before: u32,
    /// ssthresh the reduction set (the window it aims at), segments; from the first
    /// sample in the reduction state, if one was seen.
    pub ssthresh_after: Option<u32>,
}

/// Summary of one flow (one socket cookie).
#[derive(Debug, Clone, serde::Serialize)]
pub struct FlowSummary {
    /// Socket cookie.
    pub cookie: u64,
    /// Local port.
    pub sport: u16,
    /// Remote port.
    pub dport: u16,
    /// Congestion control (of the last sample).
    pub cc: String,
    /// Number of samples.
    pub samples: usize,
    /// Time of the first sample, ns (CLOCK_MONOTONIC).
    pub first_ts_ns: u64,
    /// Time from the first to the last sample, s.
    pub span_s: f64,
    /// Mean cwnd over the periodic samples, segments.
    pub mean_cwnd: f64,
    /// Mean kernel srtt over the periodic samples, usec.
    pub mean_srtt_us: f64,
    /// Throughput from bytes acked between the first and last sample, bit/s.
    pub acked_throughput_bps: f64,
    /// Window reductions in order.
    pub backoffs: Vec<Backoff>,
}

/// Groups samples by flow (cookie) and summarises each; sorted by first sample.
///
/// Reductions come from the algorithm's reduction counter where the flow runs a
/// cctl algorithm (exact even if samples were rate-limited), otherwise from
/// entries into CWR/Recovery/Loss seen in the samples.
pub fn summarize(samples: &[Sample]) -> Vec<FlowSummary> {
    let mut by_flow: BTreeMap<u64, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        by_flow.entry(s.cookie).or_default().push(s);
    }
    let mut out: Vec<FlowSummary> = by_flow.into_values().map(summarize_flow).collect();
    out.sort_by_key(|f| f.first_ts_ns);
    out
}

fn summarize_flow(mut v: Vec<&Sample>) -> FlowSummary {
    v.sort_by_key(|s| s.ts_ns);
    let first = v[0];
    let last = v[v.len() - 1];
    let periodic: Vec<&&Sample> = v.iter().filter(|s| !s.state_change).collect();
    let basis: Vec<&Sample> = if periodic.is_empty() {
        v.clone()
    } else {
        periodic.into_iter().copied().collect()
    };
    let n = basis.len() as f64;
    let mean_cwnd = basis.iter().map(|s| f64::from(s.cwnd)).sum::<f64>() / n;
    let mean_srtt_us = basis.iter().map(|s| f64::from(s.srtt_us)).sum::<f64>() / n;
    let span_ns = last.ts_ns.saturating_sub(first.ts_ns);
    let acked_throughput_bps = if span_ns > 0 {
        last.bytes_acked.saturating_sub(first.bytes_acked) as f64 * 8.0 / (span_ns as f64 / 1e9)
    } else {
        0.0
    };

    let mut backoffs = Vec::new();
    for pair in v.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        // Entering CWR/Recovery/Loss: the kernel's prior_cwnd and the new ssthresh are exact.
        let entered = b.ca_state.is_reduction() && !a.ca_state.is_reduction();
        let before = if entered && b.prior_cwnd > 0 {
            b.prior_cwnd
        } else {
            a.cwnd
        };
        let after = if entered { b.valid_ssthresh() } else { None };
        match (a.backoffs, b.backoffs) {
            (Some(ka), Some(kb)) if kb > ka => {
                let k = kb - ka;
                for i in 0..k {
                    let beta = if i + 1 == k { b.last_beta } else { None };
                    let last = i + 1 == k;
                    backoffs.push(Backoff {
                        ts_ns: b.ts_ns,
                        beta,
                        cwnd_before: if last { before } else { a.cwnd },
                        ssthresh_after: if last { after } else { None },
                    });
                }
            }
            (Some(_), Some(_)) => {}
            _ => {
                if entered {
                    backoffs.push(Backoff {
                        ts_ns: b.ts_ns,
                        beta: None,
                        cwnd_before: before,
                        ssthresh_after: after,
                    });
                }
            }
        }
    }
    // A reduction before the first sample of a cctl flow.
    if let Some(k) = first.backoffs {
        for i in 0..k {
            let beta = if i + 1 == k { first.last_beta } else { None };
            backoffs.insert(
                i as usize,
                Backoff {
                    ts_ns: first.ts_ns,
                    beta,
                    cwnd_before: 0,
                    ssthresh_after: None,
                },
            );
        }
    }

    FlowSummary {
        cookie: first.cookie,
        sport: first.sport,
        dport: first.dport,
        cc: last.cc.to_string(),
        samples: v.len(),
        first_ts_ns: first.ts_ns,
        span_s: span_ns as f64 / 1e9,
        mean_cwnd,
        mean_srtt_us,
        acked_throughput_bps,
        backoffs,
    }
}

/// The window reductions of ONE flow as the kernel's own signals show them, whatever
/// runs the flow: each sample in CWR/Recovery/Loss that follows a sample outside them, or
/// that carries a new `prior_cwnd` (the kernel sets it when a reduction begins, so a
/// reduction that began without a sample in Open between is still seen). The cwnd before
/// is `prior_cwnd`, the ssthresh after the sample's. Unlike [`summarize`], a cctl
/// algorithm's own reduction counter is not used, so a BPF port and a native module are
/// counted alike (reductions that begin and end between two samples are missed for both).
/// `samples` must be one flow's, in time order.
pub fn kernel_backoffs(samples: &[Sample]) -> Vec<Backoff> {
    samples
        .windows(2)
        .filter_map(|w| {
            let (a, b) = (&w[0], &w[1]);
            if !b.ca_state.is_reduction() {
                return None;
            }
            let entered = !a.ca_state.is_reduction();
            let renewed = b.prior_cwnd > 0 && b.prior_cwnd != a.prior_cwnd;
            (entered || renewed).then_some(Backoff {
                ts_ns: b.ts_ns,
                beta: None,
                cwnd_before: if b.prior_cwnd > 0 {
                    b.prior_cwnd
                } else {
                    a.cwnd
                },
                ssthresh_after: b.valid_ssthresh(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::CaState;
    use std::net::{IpAddr, Ipv4Addr};

    fn sample(
        cookie: u64,
        t_ms: u64,
        cwnd: u32,
        state: CaState,
        backoffs: Option<u32>,
        beta: f64,
    ) -> Sample {
        Sample {
            ts_ns: t_ms * 1_000_000,
            cookie,
            netns_cookie: 0,
            saddr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            sport: 40000 + cookie as u16,
            daddr: IpAddr::V4(Ipv4Addr::LOCALHOST),
            dport: 5201,
            cc: "bpf_htcp",
            ca_state: state,
            state_change: false,
            first: false,
            cwnd,
            ssthresh: None,
            srtt_us: 1000 * cwnd,
            rttvar_us: 0,
            min_rtt_us: 0,
            bytes_acked: t_ms * 1000,
            lost_out: 0,
            retrans_out: 0,
            total_retrans: 0,
            cwr_entries: 0,
            recovery_entries: 0,
            loss_entries: 0,
            packets_out: 0,
            in_flight: 0,
            mss: 1448,
            delivered: 0,
            prior_cwnd: 0,
            ca_map_id: None,
            algo: backoffs.map(|_| "htcp"),
            tmin_us: None,
            tmax_us: None,
            delta_us: None,
            epoch_tput_bytes_per_s: None,
            backoffs,
            last_beta: backoffs.map(|_| beta),
            vars: Default::default(),
        }
    }

    #[test]
    fn kernel_backoffs_count_entries_and_renewed_reductions_not_the_counter() {
        let at = |t: u64, cwnd: u32, st: CaState, prior: u32, ssth: u32, counter: u32| {
            let mut x = sample(1, t, cwnd, st, Some(counter), 0.7);
            x.prior_cwnd = prior;
            x.ssthresh = Some(ssth);
            x
        };
        // Open -> Recovery (prior 400), a second reduction inside Recovery (prior 300,
        // never seen in Open), Open, CWR; the port's counter says 7: not used here.
        let s = vec![
            at(0, 400, CaState::Open, 0, u32::MAX, 0),
            at(10, 390, CaState::Recovery, 400, 350, 1),
            at(20, 330, CaState::Recovery, 400, 350, 1),
            at(30, 300, CaState::Recovery, 300, 260, 5),
            at(40, 260, CaState::Open, 300, 260, 5),
            at(50, 270, CaState::Cwr, 270, 240, 7),
        ];
        let b = kernel_backoffs(&s);
        let got: Vec<(u64, u32, Option<u32>)> = b
            .iter()
            .map(|b| (b.ts_ns / 1_000_000, b.cwnd_before, b.ssthresh_after))
            .collect();
        assert_eq!(
            got,
            vec![
                (10, 400, Some(350)),
                (30, 300, Some(260)),
                (50, 270, Some(240))
            ]
        );
        assert!(b.iter().all(|b| b.beta.is_none()));
        assert_eq!(
            summarize(&s)[0].backoffs.len(),
            7,
            "summarize uses the counter"
        );
    }

    #[test]
    fn means_and_throughput_of_one_flow() {
        let s = vec![
            sample(1, 0, 10, CaState::Open, Some(0), 0.5),
            sample(1, 1000, 20, CaState::Open, Some(0), 0.5),
            sample(1, 2000, 30, CaState::Open, Some(0), 0.5),
        ];
        let f = &summarize(&s)[0];
        assert_eq!(f.samples, 3);
        assert!((f.mean_cwnd - 20.0).abs() < 1e-9);
        assert!((f.mean_srtt_us - 20_000.0).abs() < 1e-9);
        // 2000 ms * 1000 B/ms over 2 s = 1 MB/s = 8 Mbit/s
        assert!((f.acked_throughput_bps - 8e6).abs() < 1.0);
        assert!(f.backoffs.is_empty());
    }

    #[test]
    fn backoffs_come_from_the_reduction_counter_with_their_beta() {
        let s = vec![
            sample(1, 0, 100, CaState::Open, Some(0), 1.0),
            sample(1, 100, 60, CaState::Recovery, Some(1), 0.6),
            sample(1, 200, 70, CaState::Open, Some(1), 0.6),
            sample(1, 300, 40, CaState::Open, Some(3), 0.55),
        ];
        let f = &summarize(&s)[0];
        assert_eq!(f.backoffs.len(), 3);
        assert_eq!(f.backoffs[0].beta, Some(0.6));
        assert_eq!(f.backoffs[0].cwnd_before, 100);
        assert_eq!(
            f.backoffs[1].beta, None,
            "β of a reduction between samples is unknown"
        );
        assert_eq!(f.backoffs[2].beta, Some(0.55));
    }

    #[test]
    fn native_flows_count_entries_into_recovery() {
        let mut s = vec![
            sample(2, 0, 100, CaState::Open, None, 0.0),
            sample(2, 100, 50, CaState::Recovery, None, 0.0),
            sample(2, 150, 50, CaState::Recovery, None, 0.0),
            sample(2, 200, 55, CaState::Open, None, 0.0),
            sample(2, 300, 20, CaState::Loss, None, 0.0),
        ];
        for x in &mut s {
            x.cc = "cubic";
        }
        let f = &summarize(&s)[0];
        assert_eq!(f.backoffs.len(), 2);
        assert!(f.backoffs.iter().all(|b| b.beta.is_none()));
    }

    #[test]
    fn flows_are_kept_apart_by_cookie() {
        let s = vec![
            sample(1, 0, 10, CaState::Open, Some(0), 0.5),
            sample(2, 0, 50, CaState::Open, Some(0), 0.5),
            sample(1, 100, 10, CaState::Open, Some(0), 0.5),
        ];
        let f = summarize(&s);
        assert_eq!(f.len(), 2);
        assert_eq!(f.iter().map(|x| x.samples).sum::<usize>(), 3);
    }
}
