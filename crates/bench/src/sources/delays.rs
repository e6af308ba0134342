//! A run's per-packet delays: the delay taps attached to its testbed
//! ([`cctl_netem::taps`], the loader's `delays`), their events matched to the run's flows
//! and reduced ([`cctl_metrics::delay`]), and the timed packets written to `delays.csv`.

use std::path::Path;

use anyhow::{Context, Result};
use cctl_loader::delays::{DelayConfig, DelayCounts, DelayEvent, DelayTaps, Tap};
use cctl_metrics::delay::{DelayRecord, PacketDelay, TapCounts};
use cctl_netem::chain::Bed;
use cctl_netem::flows::FlowResult;
use cctl_netem::taps::{TapPlan, ORIGIN, TERMINAL};
use cctl_report::record::RunRecord;

use super::{End, Running, Source, Start};

/// Attaches the taps of `bed`, timing 1 packet in `sample_every`; `None` when 0 (off).
///
/// Errors: loading or attaching (tcx needs Linux 6.6).
pub fn start(bed: &Bed, sample_every: u32) -> Result<Option<(DelayTaps, TapPlan)>> {
    if sample_every == 0 {
        return Ok(None);
    }
    let plan = bed.tap_plan();
    let cfg = DelayConfig {
        sample_every,
        taps: plan
            .taps
            .iter()
            .map(|t| Tap {
                netns: t.netns.clone(),
                dev: t.dev.clone(),
                ingress: t.ingress,
                slot: t.slot,
                terminal: t.terminal,
            })
            .collect(),
    };
    let taps = DelayTaps::start(cfg).context("attaching the per-packet delay taps")?;
    Ok(Some((taps, plan)))
}

/// The events of the run's flows as packets: a flow's data (from its sender's address and
/// port) is forward, its ACKs (to them) reverse; times from `t0_ns` (CLOCK_MONOTONIC).
/// Events of other traffic (web sessions) are left out.
pub fn packets(
    events: &[DelayEvent],
    plan: &TapPlan,
    flows: &[FlowResult],
    t0_ns: u64,
) -> Vec<PacketDelay> {
    events
        .iter()
        .filter_map(|e| {
            let (flow, forward) = flows.iter().find_map(|f| {
                if e.saddr == f.local_ip && e.sport == f.local_port {
                    Some((f.id, true))
                } else if e.daddr == f.local_ip && e.dport == f.local_port {
                    Some((f.id, false))
                } else {
                    None
                }
            })?;
            Some(PacketDelay {
                t_s: e.t_ns[TERMINAL as usize].saturating_sub(t0_ns) as f64 / 1e9,
                flow,
                forward,
                owd_us: e.between_us(ORIGIN, TERMINAL)?,
                sojourn_us: plan
                    .hops
                    .iter()
                    .map(|&(enter, leave)| e.between_us(enter, leave))
                    .collect(),
            })
        })
        .collect()
}

/// The record of a run's delays.
pub fn record(
    counts: DelayCounts,
    sample_every: u32,
    packets: &[PacketDelay],
    flows: usize,
    plan: &TapPlan,
) -> DelayRecord {
    DelayRecord::from_packets(
        TapCounts {
            sample_every,
            stamped: counts.stamped,
            delivered: counts.delivered,
            unmatched: counts.unmatched,
            events_dropped: counts.events_dropped,
            gso_truncated: counts.gso_truncated,
        },
        packets,
        flows,
        plan.hops.len(),
    )
}

/// Writes `dir/delays.csv`: one line per timed packet of the run's flows: `t_s`, `flow`,
/// `direction` (`forward` data, `reverse` ACKs), `owd_us`, and `sojourn<k>_us` per
/// bottleneck (empty where the packet did not cross it).
///
/// Errors: writing the file.
pub fn write_csv(dir: &Path, packets: &[PacketDelay], hops: usize) -> Result<()> {
    let path = dir.join("delays.csv");
    let mut w =
        csv::Writer::from_path(&path).with_context(|| format!("creating {}", path.display()))?;
    let mut head = vec![
        "t_s".to_string(),
        "flow".into(),
        "direction".into(),
        "owd_us".into(),
    ];
    head.extend((1..=hops).map(|k| format!("sojourn{k}_us")));
    w.write_record(&head)?;
    for p in packets {
        let mut row = vec![
            format!("{:.6}", p.t_s),
            p.flow.to_string(),
            if p.forward { "forward" } else { "reverse" }.into(),
            format!("{:.1}", p.owd_us),
        ];
        row.extend(
            p.sojourn_us
                .iter()
                .map(|s| s.map(|x| format!("{x:.1}")).unwrap_or_default()),
        );
        w.write_record(&row)?;
    }
    w.flush()?;
    Ok(())
}

/// The source of a run's per-packet delays (`delays` of `run.json`, `delays.csv`): taps
/// attached before t0 when `--delay-sample` is not 0.
pub struct Delays;

/// The taps of one run, attached.
struct Attached {
    taps: DelayTaps,
    plan: TapPlan,
}

impl Source for Delays {
    fn before_t0(&self) -> bool {
        true
    }

    fn start(&self, run: &Start) -> Result<Option<Box<dyn Running>>> {
        Ok(start(run.bed, run.req.delay_sample)?
            .map(|(taps, plan)| Box::new(Attached { taps, plan }) as Box<dyn Running>))
    }
}

impl Running for Attached {
    fn finish(self: Box<Self>, end: &End, record: &mut RunRecord) -> Result<()> {
        let Attached { taps, plan } = *self;
        let (events, counts) = taps.finish().context("reading the delay taps")?;
        let packets = packets(&events, &plan, end.flows, end.t0.ns);
        write_csv(end.dir, &packets, plan.hops.len())?;
        record.delays = Some(self::record(
            counts,
            end.req.delay_sample,
            &packets,
            end.flows.len(),
            &plan,
        ));
        Ok(())
    }
}
