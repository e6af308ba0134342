//! Threats to validity: where the runs of a scenario differ from what it asks for, and
//! why, recorded in `metadata.json` and printed with the summary.

use cctl_scenario::RunPoint;

/// Scenario settings the runner records as deviations instead of applying.
pub fn deviations(points: &[RunPoint]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(p) = points.iter().find(|p| p.init_ssthresh_pkts.is_some()) {
        out.push(format!(
            "initial ssthresh preset ([P3]: 50 % BDP, e.g. {} packets) not applied: Linux has no \
             per-connection setter that works for every congestion control and its route-metric \
             path is ignored with tcp_no_ssthresh_metrics_save; flows start with ssthresh = infinity",
            p.init_ssthresh_pkts.unwrap_or(0)
        ));
    }
    if points
        .iter()
        .any(|p| !p.rate_schedule.is_empty() || !p.delay_schedule.is_empty())
    {
        out.push(
            "time-varying link: changes applied through one tc -batch per run (timing in each \
             run.json's `schedule`); tbf refills its bucket at every rate change; a trace is \
             replayed as piecewise-constant rates per trace_bin_ms bin"
                .into(),
        );
    }
    if let Some(p) = points.iter().find(|p| p.aqm.ecn) {
        out.push(format!(
            "ECN on ({} at point {}): net.ipv4.tcp_ecn=1 in every sender and receiver \
             namespace; with a dctcp flow the receiver namespace runs dctcp (dctcp is added to \
             the kernel's tcp_allowed_congestion_control for that)",
            p.aqm.qdisc, p.index
        ));
    }
    out.push(
        "bottleneck queue sampled every queue_interval_ms (the papers' tests ask for 10 ms); \
         tbf rather than htb; delay on the ACK path; loss at each sender's egress \
         (netem random, or gact every N-th packet where the scenario asks for periodic loss)"
            .into(),
    );
    if points.iter().any(|p| p.topology.is_some()) {
        out.push(
            "[topology] chain: each hop's delay on its link's reverse (ACK) direction, so a \
             flow's RTT is the sum over its hops; queue.csv samples hop 1 only, run.json has \
             every hop's final counters"
                .into(),
        );
    }
    out
}
