//! A scenario point as a network: the dumbbell (or the `[topology]` chain) slot `s` builds
//! for it, with its schedules' values at 0 s, its bottleneck discipline and the receivers'
//! congestion control; and the checks that refuse, before anything is built, what the
//! emulator cannot give a point.

use anyhow::{bail, Result};
use cctl_netem::aqm::BottleneckSetup;
use cctl_netem::chain::ChainSpec;
use cctl_netem::schedule::value_at;
use cctl_netem::slot::Slot;
use cctl_netem::testbed::{AccessSpec, PathSpec};
use cctl_scenario::{RunPoint, Scenario};

/// Builds the testbed of one point in slot 0: one sender per flow with its RTT, the
/// scenario's loss.
pub fn path_for(point: &RunPoint) -> PathSpec {
    path_in_slot(point, Slot(0))
}

/// [`path_for`] in slot `slot`: its names and subnets.
pub fn path_in_slot(point: &RunPoint, slot: Slot) -> PathSpec {
    let mut spec = PathSpec::new(slot.prefix(), point.rate_mbit, point.buffer_pkts.max(1));
    spec.subnet_octet = slot.0;
    spec.aqm = point.aqm.clone();
    spec.reverse_rate_mbit = point.reverse_rate_mbit;
    spec.senders = point
        .flows
        .iter()
        .map(|f| AccessSpec {
            rtt_ms: f.rtt_ms,
            loss: point.loss,
            loss_model: point.loss_model,
        })
        .collect();
    if point.web_sessions > 0 {
        // The web host on the senders' side, at the scenario's RTT.
        spec.senders.push(AccessSpec {
            rtt_ms: point.rtt_ms,
            loss: point.loss,
            loss_model: point.loss_model,
        });
    }
    initial_path(point, &mut spec);
    spec
}

/// Builds the schedules' values at 0 s into `path` (the testbed of `point`): the rate, and
/// the RTT of every sender's access link; and the point's tbf bucket (`tbf_burst_ms`).
pub fn initial_path(point: &RunPoint, path: &mut PathSpec) {
    path.rate_mbit = value_at(&point.rate_schedule, path.rate_mbit, 0.0);
    if let Some(b) = point.tbf_burst_ms {
        path.burst_ms = b;
    }
    if let Some(first) = point.delay_schedule.first().filter(|s| s.at_s <= 0.0) {
        for a in &mut path.senders {
            a.rtt_ms = first.value;
        }
    }
}

/// The network one run of a point builds, computed once: the dumbbell's (or the chain
/// template's) path with its receivers' congestion control, the `[topology]` chain if the
/// point has one, and the bottleneck setup `run.json` records.
#[derive(Debug, Clone)]
pub struct NetPlan {
    /// The dumbbell (or, with a chain, the template of its hosts) in the run's slot.
    pub path: PathSpec,
    /// The `[topology]` chain; `None` on the dumbbell.
    pub chain: Option<ChainSpec>,
    /// The bottleneck as built: qdisc, tc lines, ECN sysctl, receivers' congestion control.
    pub setup: BottleneckSetup,
}

impl NetPlan {
    /// The network of `point` in `slot` for a run whose TCP flows use the congestion
    /// controls `flow_ccs` (see [`receiver_cc`] for what they decide).
    pub fn of(point: &RunPoint, slot: Slot, flow_ccs: &[String]) -> NetPlan {
        let mut path = path_in_slot(point, slot);
        path.receiver_cc = receiver_cc(flow_ccs);
        let setup = BottleneckSetup {
            aqm: point.aqm.clone(),
            tc: path.bottleneck_tc_lines(),
            ecn_sysctl: point.aqm.ecn_sysctl().into(),
            receiver_cc: path.receiver_cc.clone(),
        };
        let chain = point.topology.as_ref().map(|t| ChainSpec {
            template: path.clone(),
            hops: t.hops.clone(),
            paths: t.paths.iter().map(|p| (p.first, p.last)).collect(),
        });
        NetPlan { path, chain, setup }
    }

    /// The bottleneck of `point` as every run of it builds it whatever the algorithm under
    /// test, for `metadata.json`: the receivers run dctcp only when a TCP flow names it (a
    /// run's `run.json` has what that run applied, dctcp under test included).
    pub fn of_point(point: &RunPoint) -> NetPlan {
        let named: Vec<String> = point
            .flows
            .iter()
            .filter(|f| f.kind == cctl_scenario::FlowKind::Tcp)
            .filter_map(|f| match &f.cc {
                cctl_scenario::CcRef::Named(n) => Some(n.clone()),
                cctl_scenario::CcRef::UnderTest => None,
            })
            .collect();
        NetPlan::of(point, Slot(0), &named)
    }
}

/// The receivers' congestion control of a run whose flows use `flow_ccs`: dctcp when one of
/// them is dctcp, since dctcp's receiver echoes every CE mark (not classic ECN's latched
/// ECE), which is what the sender's marked fraction α is computed from; else the default.
pub fn receiver_cc(flow_ccs: &[String]) -> Option<String> {
    flow_ccs
        .iter()
        .any(|c| cctl_scenario::is_dctcp(c))
        .then(|| "dctcp".to_string())
}

/// `--algo dctcp` at a point whose bottleneck does not mark ECN (bad input: exit 2).
#[derive(Debug, thiserror::Error)]
#[error(
    "--algo dctcp needs ECN marking at the bottleneck, but point {index} ({label}) has qdisc = \
     {qdisc}, ecn = {ecn}: set ecn = true and a marking qdisc (red with red_min_pkts = \
     red_max_pkts = K and red_probability = 1, or fq_codel with ce_threshold_ms)"
)]
pub struct DctcpWithoutEcn {
    /// The point's index.
    pub index: usize,
    /// The point's label (`rate_mbit=10,rtt_ms=42`).
    pub label: String,
    /// Its bottleneck qdisc.
    pub qdisc: String,
    /// Whether it has ECN on.
    pub ecn: bool,
}

/// Refuses dctcp under test (`algos`) at a point whose bottleneck does not mark ECN: dctcp
/// reacts only to CE marks, and behind a drop-tail queue without ECN it is not the algorithm
/// its papers describe. (Named dctcp flows are refused when the scenario is parsed.)
///
/// Errors: [`DctcpWithoutEcn`].
pub fn check_dctcp(
    algos: &[String],
    points: &[cctl_scenario::RunPoint],
) -> Result<(), DctcpWithoutEcn> {
    if !algos.iter().any(|a| cctl_scenario::is_dctcp(a)) {
        return Ok(());
    }
    if let Some(p) = points.iter().find(|p| !p.aqm.marks()) {
        return Err(DctcpWithoutEcn {
            index: p.index,
            label: p.label(),
            qdisc: p.aqm.qdisc.to_string(),
            ecn: p.aqm.ecn,
        });
    }
    Ok(())
}

/// Refuses, before anything is created, scenario features this runner does not implement
/// yet (named, so the user knows what is missing).
pub fn check_supported(sc: &Scenario, points: &[RunPoint]) -> Result<()> {
    for p in points {
        let missing = if p.flows.len() + 1 > cctl_netem::testbed::MAX_SENDERS {
            Some(format!(
                "{} flows (at most {})",
                p.flows.len(),
                cctl_netem::testbed::MAX_SENDERS
            ))
        } else {
            None
        };
        if let Some(m) = missing {
            bail!(
                "scenario {} ({}) point {} needs {m}, which `cctl bench` does not implement yet; \
                 nothing was run",
                sc.name,
                sc.path.display(),
                p.label()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dctcp_point() -> RunPoint {
        let sc = cctl_scenario::find("fairness-same-rtt").unwrap();
        sc.expand(cctl_scenario::Profile::Ci, 1).unwrap().remove(0)
    }

    #[test]
    fn the_receivers_run_dctcp_in_the_runs_of_dctcp_only() {
        let point = dctcp_point();
        let ccs = |cc: &str| vec![cc.to_string(); point.flows.len()];
        let dctcp = NetPlan::of(&point, Slot(0), &ccs("dctcp"));
        assert_eq!(dctcp.setup.receiver_cc.as_deref(), Some("dctcp"));
        assert_eq!(dctcp.path.receiver_cc.as_deref(), Some("dctcp"));
        let reno = NetPlan::of(&point, Slot(0), &ccs("reno"));
        assert_eq!(reno.setup.receiver_cc, None);
        // The metadata's record of the point holds for the runs of every algorithm.
        assert_eq!(NetPlan::of_point(&point).setup.receiver_cc, None);
        let mut named = point.clone();
        named.flows[0].cc = cctl_scenario::CcRef::Named("dctcp".into());
        assert_eq!(
            NetPlan::of_point(&named).setup.receiver_cc.as_deref(),
            Some("dctcp")
        );
    }

    #[test]
    fn a_zero_rtt_point_needs_no_netem() {
        let sc = cctl_scenario::find("fairness-same-rtt").unwrap();
        let mut point = sc.expand(cctl_scenario::Profile::Ci, 1).unwrap().remove(0);
        assert!(path_for(&point).needs_netem());
        point.rtt_ms = 0.0;
        for f in &mut point.flows {
            f.rtt_ms = 0.0;
        }
        point.delay_schedule.clear();
        assert!(point.loss == 0.0, "the scenario has no loss");
        assert!(!path_for(&point).needs_netem());
    }
}
