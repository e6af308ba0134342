//! One run: one point with one algorithm on one slot's network, the flows traced by the
//! collector and the bottleneck sampled, its raw data and [`RunRecord`] written to its
//! directory (`runs/<algo>/p<point>-r<rep>/`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use cctl_loader::sample::Sample;
use cctl_metrics::{BackoffEvent, FlowPoint, FlowSeries, QueuePoint};
use cctl_netem::flows::{run_bulk_flows, FlowResult, FlowSpec};
use cctl_netem::slot::Slot;
use cctl_netem::testbed::QdiscSampler;
use cctl_report::record::{ClockRecord, ResolvedCc, RunRecord};
use cctl_scenario::{CcRef, RunPoint};

use crate::cost::cpu_times;
use crate::feed::SampleFeed;
use crate::network::NetPlan;
use crate::request::RunRequest;

/// Receiver port of the bulk flows.
pub const PORT: u16 = 5301;

/// The clock that times this machine's runs, for `metadata.json` and every `run.json`: in
/// a guest that [`cctl_vm::run_in_vm`] booted, the guest's (from
/// [`cctl_vm::GUEST_CLOCK_ENV`]); anywhere else the host's real clock.
pub fn current_clock() -> ClockRecord {
    let Ok(line) = std::env::var(cctl_vm::GUEST_CLOCK_ENV) else {
        return ClockRecord::host();
    };
    let mut c = ClockRecord {
        clock: "real".into(),
        icount_shift: None,
        machine: "guest".into(),
        vcpus: None,
        memory_mb: None,
    };
    for (k, v) in line.split_whitespace().filter_map(|kv| kv.split_once('=')) {
        match k {
            "clock" => c.clock = v.to_string(),
            "accel" => c.machine = v.to_string(),
            "icount_shift" => c.icount_shift = v.parse().ok(),
            "vcpus" => c.vcpus = v.parse().ok(),
            "memory_mb" => c.memory_mb = v.parse().ok(),
            _ => {}
        }
    }
    c
}

fn monotonic_ns() -> u64 {
    let ts =
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// The congestion-control name flow `f` uses when `algo` is under test.
fn flow_cc(f: &cctl_scenario::FlowPlan, algo: &ResolvedCc, all: &[ResolvedCc]) -> String {
    match &f.cc {
        CcRef::UnderTest => algo.cc_name.clone(),
        CcRef::Named(n) => all
            .iter()
            .find(|r| &r.requested == n)
            .map(|r| r.cc_name.clone())
            .unwrap_or_else(|| n.clone()),
    }
}

/// Runs one point once with one algorithm on slot `slot`'s dumbbell, its samples from
/// `feed`; writes `dir/{samples.csv,queue.csv,delays.csv,close.json,run.json}` (`run.json`
/// last, by rename, so a run with a `run.json` is whole).
#[allow(clippy::too_many_arguments)]
pub fn run_once(
    point: &RunPoint,
    algo: &ResolvedCc,
    all: &[ResolvedCc],
    rep: u32,
    req: &RunRequest,
    dir: &Path,
    stop: &Arc<AtomicBool>,
    slot: Slot,
    feed: &SampleFeed,
) -> Result<RunRecord> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // TCP flows run here; udp-cbr flows are the traffic module's (crate::traffic). A flow
    // keeps its [[flows]] position as its id and sender either way.
    let flows: Vec<FlowSpec> = point
        .flows
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == cctl_scenario::FlowKind::Tcp)
        .map(|(i, f)| FlowSpec {
            id: i + 1,
            cc: flow_cc(f, algo, all),
            start: Duration::from_secs_f64(f.start_s),
            stop: Duration::from_secs_f64(f.stop_s),
            sender: i,
            size_bytes: f.size_bytes,
            reverse: f.direction == cctl_scenario::Direction::Reverse,
        })
        .collect();
    let ccs: Vec<String> = flows.iter().map(|f| f.cc.clone()).collect();
    let net = NetPlan::of(point, slot, &ccs);
    let bed = cctl_netem::chain::Bed::create(net.chain, &net.path)?;
    let taps = crate::delays::start(&bed, req.delay_sample)?;
    let closing = crate::closing::start(PORT, &bed.drop_places().namespaces)?;
    cctl_loader::faults::step("bench.after-testbed")?;
    feed.subscribe(slot.0);
    let counters0 = feed.counters();

    // Bottleneck sampler.
    let queue: Arc<Mutex<Vec<QueuePoint>>> = Arc::default();
    let aqm_points: Arc<Mutex<Vec<cctl_netem::aqm::AqmPoint>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let web = if point.web_sessions > 0 {
        let web_cc = all
            .iter()
            .find(|r| r.requested == point.web_cc)
            .map_or(point.web_cc.clone(), |r| r.cc_name.clone());
        let sender = point.flows.len();
        let seed = 0x5eed ^ ((point.index as u64) << 8) ^ u64::from(rep);
        let spec = match point.web_model {
            cctl_scenario::WebModel::Surge => {
                cctl_netem::web::WebSpec::surge(point.web_sessions, &web_cc, sender, seed)
            }
            cctl_scenario::WebModel::P0 => {
                cctl_netem::web::WebSpec::p0(point.web_sessions, &web_cc, sender, seed)
            }
        };
        let dumbbell = bed
            .dumbbell()
            .context("web cross traffic needs the dumbbell")?;
        Some(cctl_netem::web::start(dumbbell, &spec).context("starting the web cross traffic")?)
    } else {
        None
    };
    let cpu0 = cpu_times();
    let t0_ns = monotonic_ns();
    let t0 = Instant::now();
    // Schedules are refused with a [topology] chain when the scenario is parsed.
    let schedule = match bed.dumbbell() {
        Some(t) => cctl_netem::schedule::ScheduleDriver::start(
            t,
            &point.rate_schedule,
            &point.delay_schedule,
            t0,
        )
        .context("starting the schedule driver")?,
        None => None,
    };
    let sampler = {
        let (queue, aqm_points, done) = (queue.clone(), aqm_points.clone(), done.clone());
        let (ns, dev) = bed.sampled_queue();
        let every = req.queue_interval();
        let qdisc = point.aqm.qdisc;
        let mut tc = QdiscSampler::start(&ns, &dev).context("starting the queue sampler")?;
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                if let Ok((q, a)) = tc.sample_with_aqm(qdisc) {
                    if let Some(stats) = a {
                        aqm_points
                            .lock()
                            .expect("aqm lock")
                            .push(cctl_netem::aqm::AqmPoint {
                                t_s: t0.elapsed().as_secs_f64(),
                                stats,
                            });
                    }
                    queue.lock().expect("queue lock").push(QueuePoint {
                        t_s: t0.elapsed().as_secs_f64(),
                        backlog_pkts: q.backlog_packets,
                        backlog_bytes: q.backlog_bytes,
                        drops: q.drops,
                        sent_pkts: q.sent_packets,
                        sent_bytes: q.sent_bytes,
                    });
                }
                std::thread::sleep(every);
            }
        })
    };

    let traffic = crate::traffic::start(point, &bed, t0, stop)?;
    let results = std::thread::scope(|scope| {
        let flows_stop = stop.clone();
        let handle = scope.spawn(|| run_bulk_flows(&bed, PORT, &flows, flows_stop));
        while !handle.is_finished() {
            feed.pump(Duration::from_millis(100));
        }
        handle
            .join()
            .map_err(|_| anyhow!("the flow runner panicked"))?
    })?;
    let traffic = traffic.finish().context("finishing the UDP traffic")?;
    let completed = !stop.load(Ordering::SeqCst);
    done.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let schedule = schedule
        .map(cctl_netem::schedule::ScheduleDriver::finish)
        .transpose()
        .map_err(|e| anyhow!(e))?;
    let web = web.map(cctl_netem::web::WebTraffic::finish);
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu_busy = match (cpu0, cpu_times()) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => (b1 - b0) as f64 / (t1 - t0) as f64,
        _ => f64::NAN,
    };
    let samples = feed.take(slot.0);
    let dropped = feed.counters().dropped.saturating_sub(counters0.dropped);
    let random_drops: u64 = (0..cctl_netem::flows::Endpoints::senders(&bed))
        .map(|i| bed.random_drops(i).unwrap_or(0))
        .sum();
    let hops = bed.hop_stats().context("reading the chain's bottlenecks")?;
    let delays = match taps {
        Some((taps, plan)) => {
            let (events, counts) = taps.finish().context("reading the delay taps")?;
            let packets = crate::delays::packets(&events, &plan, &results, t0_ns);
            crate::delays::write_csv(dir, &packets, plan.hops.len())?;
            Some(crate::delays::record(
                counts,
                req.delay_sample,
                &packets,
                results.len(),
                &plan,
            ))
        }
        None => None,
    };
    let drops = cctl_netem::ledger::read(&bed.drop_places(), random_drops, dropped)
        .context("reading the drop ledger")?;
    bed.destroy().context("removing the testbed")?;
    let close = closing.finish()?;
    crate::closing::write(dir, &close)?;

    // Raw data first, so an interrupted run keeps what it measured.
    let mut w = csv::Writer::from_path(dir.join("samples.csv"))?;
    for s in &samples {
        w.serialize(s)?;
    }
    w.flush()?;
    let queue = std::mem::take(&mut *queue.lock().expect("queue lock"));
    let mut w = csv::Writer::from_path(dir.join("queue.csv"))?;
    for q in &queue {
        w.serialize(q)?;
    }
    w.flush()?;

    let series = flow_series(point, &flows, &results, &samples, t0_ns);
    let aqm = std::mem::take(&mut *aqm_points.lock().expect("aqm lock"));
    let record = RunRecord {
        point: point.index,
        vars: point.vars.clone(),
        algo: algo.requested.clone(),
        rep,
        spec: point.clone(),
        flows: results,
        series,
        queue,
        random_drops,
        samples: samples.len() as u64,
        sample_drops: dropped,
        wall_s,
        web,
        cpu_busy,
        cpus: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        completed,
        hops,
        schedule,
        bottleneck: Some(net.setup),
        aqm,
        clock: Some(current_clock()),
        invalid: drops.unintended(),
        drops: Some(drops),
        delays,
        udp: traffic.udp,
        probes: traffic.probes,
    };
    let tmp = dir.join("run.json.part");
    std::fs::write(&tmp, serde_json::to_vec_pretty(&record)?)?;
    std::fs::rename(&tmp, dir.join("run.json"))?;
    Ok(record)
}

/// Turns the collector's samples into per-flow series for the metrics (matched by the
/// sender's address and port).
pub fn flow_series(
    point: &RunPoint,
    flows: &[FlowSpec],
    results: &[FlowResult],
    samples: &[Sample],
    t0_ns: u64,
) -> Vec<FlowSeries> {
    results
        .iter()
        .zip(flows)
        .map(|(r, spec)| {
            let plan = &point.flows[spec.id - 1];
            let mine: Vec<Sample> = samples
                .iter()
                .filter(|s| {
                    s.sport == r.local_port
                        && s.dport == PORT
                        && s.saddr == std::net::IpAddr::V4(r.local_ip)
                })
                .cloned()
                .collect();
            let t = |ns: u64| ns.saturating_sub(t0_ns) as f64 / 1e9;
            let points = mine
                .iter()
                .map(|s| FlowPoint {
                    t_s: t(s.ts_ns),
                    bytes_acked: s.bytes_acked,
                    cwnd: s.cwnd,
                    srtt_us: s.srtt_us,
                    min_rtt_us: s.min_rtt_us,
                    total_retrans: s.total_retrans,
                    delivered: s.delivered,
                })
                .collect();
            let summary = cctl_loader::summary::summarize(&mine);
            let backoffs = summary
                .first()
                .map(|f| {
                    f.backoffs
                        .iter()
                        .map(|b| BackoffEvent {
                            t_s: t(b.ts_ns),
                            cwnd_before: b.cwnd_before,
                            cwnd_after: b.ssthresh_after,
                        })
                        .collect()
                })
                .unwrap_or_default();
            let mut ordered = mine.clone();
            ordered.sort_by_key(|s| s.ts_ns);
            let kernel_backoffs = cctl_loader::summary::kernel_backoffs(&ordered)
                .iter()
                .map(|b| BackoffEvent {
                    t_s: t(b.ts_ns),
                    cwnd_before: b.cwnd_before,
                    cwnd_after: b.ssthresh_after,
                })
                .collect();
            FlowSeries {
                id: spec.id,
                cc: spec.cc.clone(),
                base_rtt_s: plan.rtt_ms / 1000.0,
                start_s: r.started.as_secs_f64(),
                stop_s: r.ended.as_secs_f64(),
                points,
                backoffs,
                kernel_backoffs,
                bytes_received: r.bytes,
                completion_s: spec
                    .size_bytes
                    .map(|_| r.ended.saturating_sub(r.started).as_secs_f64()),
                data_segs_out: None,
            }
        })
        .collect()
}
