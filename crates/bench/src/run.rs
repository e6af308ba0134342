//! One run: one point with one algorithm on one slot's network, the flows traced by the
//! collector and measured by every source ([`crate::sources`]), its raw data and
//! [`RunRecord`] written to its directory (`runs/<algo>/p<point>-r<rep>/`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use cctl_loader::sample::Sample;
use cctl_metrics::{BackoffEvent, FlowPoint, FlowSeries};
use cctl_netem::chain::Bed;
use cctl_netem::flows::{run_bulk_flows, FlowResult, FlowSpec};
use cctl_netem::slot::Slot;
use cctl_report::record::{ClockRecord, ResolvedCc, RunRecord};
use cctl_scenario::{CcRef, RunPoint};

use crate::feed::SampleFeed;
use crate::network::NetPlan;
use crate::request::RunRequest;
use crate::sources::{finish_all, start_all, End, Start, T0};

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
        qemu: None,
    };
    for (k, v) in line.split_whitespace().filter_map(|kv| kv.split_once('=')) {
        match k {
            "qemu" => c.qemu = Some(v.replace('_', " ")),
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

/// Environment variable that gives a guest the digest of the cctl build it runs
/// ([`current_build`]), which the host computed: hashing its own binary would cost the
/// guest seconds of its clock.
pub const BUILD_ENV: &str = "CCTL_BUILD";

/// This cctl build's digest (`sha256:<hex>` of the running binary, `metadata.json`'s
/// `build`): [`BUILD_ENV`] where the host set it, else the binary's own; `None` if the
/// binary cannot be read.
pub fn current_build() -> Option<String> {
    static B: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    B.get_or_init(|| {
        if let Ok(b) = std::env::var(BUILD_ENV) {
            return Some(b);
        }
        cctl_report::digest::of_file(&std::env::current_exe().ok()?).ok()
    })
    .clone()
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
/// `feed`, every source of [`crate::sources::SOURCES`] measuring it; writes `dir/samples.csv`, the
/// sources' raw data and `run.json` (last, by rename, so a run with a `run.json` is whole).
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
    let flows = tcp_flows(point, algo, all);
    let ccs: Vec<String> = flows.iter().map(|f| f.cc.clone()).collect();
    let net = NetPlan::of(point, slot, &ccs);
    let bed = Bed::create(net.chain, &net.path)?;
    let mut start = Start {
        point,
        rep,
        all,
        req,
        bed: &bed,
        stop,
        t0: None,
    };
    let mut running = start_all(&start)?;
    cctl_loader::faults::step("bench.after-testbed")?;
    feed.subscribe(slot.0);
    let counters0 = feed.counters();
    let t0 = T0::now();
    start.t0 = Some(t0);
    running.extend(start_all(&start)?);
    let results = traced_flows(&bed, &flows, stop, feed)?;
    let completed = !stop.load(Ordering::SeqCst);
    // Raw data first, so an interrupted run keeps what it measured.
    let samples = feed.take(slot.0);
    write_samples(dir, &samples)?;
    let (running_late, running) = running.into_iter().partition(|r| r.after_bed());
    let mut record = RunRecord {
        series: flow_series(point, &flows, &results, &samples, t0.ns),
        samples: samples.len() as u64,
        sample_drops: feed.counters().dropped.saturating_sub(counters0.dropped),
        completed,
        bottleneck: Some(net.setup),
        t0_ns: Some(t0.ns),
        t0_utc: Some(t0.utc),
        seed: Some(start.seed()),
        ..unmeasured(point, algo, rep)
    };
    let end = End {
        bed: Some(&bed),
        flows: &results,
        t0,
        req,
        dir,
    };
    finish_all(running, end, &mut record)?;
    bed.destroy().context("removing the testbed")?;
    let end = End {
        bed: None,
        flows: &results,
        t0,
        req,
        dir,
    };
    finish_all(running_late, end, &mut record)?;
    record.flows = results;
    // The digest covers run.json itself (without the host's fields): written once to be
    // hashed, then again with the digest, each time whole by rename.
    write_record(dir, &record)?;
    record.digest = Some(cctl_report::digest::of_run(dir, record.t0_ns)?);
    write_record(dir, &record)?;
    Ok(record)
}

/// Writes `dir/run.json` whole: into a temporary file, then renamed over it.
fn write_record(dir: &Path, record: &RunRecord) -> Result<()> {
    let tmp = dir.join("run.json.part");
    std::fs::write(&tmp, serde_json::to_vec_pretty(record)?)?;
    std::fs::rename(&tmp, dir.join("run.json"))?;
    Ok(())
}

/// The record of a run of `point` with `algo`, repetition `rep`, before anything is
/// measured: what every source leaves empty when the run has nothing of its kind.
fn unmeasured(point: &RunPoint, algo: &ResolvedCc, rep: u32) -> RunRecord {
    RunRecord {
        point: point.index,
        vars: point.vars.clone(),
        algo: algo.requested.clone(),
        rep,
        seed: None,
        spec: point.clone(),
        flows: Vec::new(),
        series: Vec::new(),
        queue: Vec::new(),
        random_drops: 0,
        samples: 0,
        sample_drops: 0,
        digest: None,
        wall_s: 0.0,
        t0_ns: None,
        t0_utc: None,
        web: None,
        cpu_busy: f64::NAN,
        cpus: 0,
        completed: false,
        hops: Vec::new(),
        schedule: None,
        bottleneck: None,
        aqm: Vec::new(),
        clock: Some(current_clock()),
        drops: None,
        invalid: Vec::new(),
        delays: None,
        udp: Vec::new(),
        probes: Vec::new(),
    }
}

/// Runs `flows` on `bed` to their end (or `stop`), pumping the collector's samples in
/// `feed` meanwhile; their results.
///
/// Errors: a flow cannot be set up; the flow runner panicked.
fn traced_flows(
    bed: &Bed,
    flows: &[FlowSpec],
    stop: &Arc<AtomicBool>,
    feed: &SampleFeed,
) -> Result<Vec<FlowResult>> {
    std::thread::scope(|scope| {
        let flows_stop = stop.clone();
        let handle = scope.spawn(|| run_bulk_flows(bed, PORT, flows, flows_stop));
        while !handle.is_finished() {
            feed.pump(Duration::from_millis(100));
        }
        handle
            .join()
            .map_err(|_| anyhow!("the flow runner panicked"))?
    })
}

/// The TCP flows of `point` with `algo` under test (udp-cbr flows are the traffic
/// source's); a flow keeps its `[[flows]]` position as its id and sender either way.
fn tcp_flows(point: &RunPoint, algo: &ResolvedCc, all: &[ResolvedCc]) -> Vec<FlowSpec> {
    point
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
        .collect()
}

/// Prefix of the columns of `samples.csv` that hold the algorithms' variables, one column
/// each (`var.k`, `var.w_max`).
pub const VAR_COLUMN_PREFIX: &str = "var.";

/// Writes `dir/samples.csv`: the collector's samples of the run, with the columns of
/// `cctl trace --csv` but for `vars`, which is split into one column `var.<name>` per
/// variable any sample of the run has (first-seen order; empty where a sample has none).
fn write_samples(dir: &Path, samples: &[Sample]) -> Result<()> {
    let path = dir.join("samples.csv");
    let mut names: Vec<&'static str> = Vec::new();
    for v in samples.iter().flat_map(|s| s.vars.iter()) {
        if !names.contains(&v.name) {
            names.push(v.name);
        }
    }
    let mut w = csv::Writer::from_path(&path)?;
    let mut vars_at = None;
    for (i, s) in samples.iter().enumerate() {
        // The sample as `cctl trace --csv` writes it; the first with the header row.
        let mut one = csv::WriterBuilder::new()
            .has_headers(i == 0)
            .from_writer(Vec::new());
        one.serialize(s)?;
        let bytes = one.into_inner().map_err(|e| anyhow!("{e}"))?;
        let mut rd = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(bytes.as_slice());
        for (k, rec) in rd.records().enumerate() {
            let rec = rec?;
            let header = i == 0 && k == 0;
            if header {
                vars_at = rec.iter().position(|f| f == "vars");
            }
            let mut row: Vec<String> = rec
                .iter()
                .enumerate()
                .filter(|(j, _)| Some(*j) != vars_at)
                .map(|(_, f)| f.to_string())
                .collect();
            if header {
                row.extend(names.iter().map(|n| format!("{VAR_COLUMN_PREFIX}{n}")));
            } else {
                row.extend(
                    names
                        .iter()
                        .map(|n| s.vars.get(n).map(var_text).unwrap_or_default()),
                );
            }
            w.write_record(&row)?;
        }
    }
    w.flush()
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// A variable's value in `samples.csv`: whole numbers without a fraction.
fn var_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
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

#[cfg(test)]
mod samples_csv_tests {
    use super::*;
    use cctl_loader::algo::Var;
    use cctl_loader::sample::CaState;
    use std::net::{IpAddr, Ipv4Addr};

    fn sample(ts_ns: u64, vars: &[(&'static str, f64)]) -> Sample {
        Sample {
            ts_ns,
            cookie: 7,
            netns_cookie: 4096,
            saddr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            sport: 40000,
            daddr: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            dport: PORT,
            cc: "bpf_cubic",
            ca_state: CaState::Open,
            state_change: false,
            first: false,
            cwnd: 10,
            ssthresh: None,
            srtt_us: 20_000,
            rttvar_us: 1000,
            min_rtt_us: 19_000,
            bytes_acked: 0,
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
            ca_map_id: Some(42),
            algo: Some("cubic"),
            tmin_us: None,
            tmax_us: None,
            delta_us: None,
            epoch_tput_bytes_per_s: None,
            backoffs: Some(0),
            last_beta: None,
            vars: vars
                .iter()
                .map(|&(name, value)| Var { name, value })
                .collect(),
        }
    }

    #[test]
    fn samples_csv_has_one_column_per_algorithm_variable() {
        let dir = std::env::temp_dir().join(format!("cctl-samples-csv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let samples = [
            sample(1_000, &[("k", 2.331), ("w_max", 180.0)]),
            sample(2_000, &[("w_max", 170.0), ("origin", 175.0)]),
            sample(3_000, &[]),
        ];
        write_samples(&dir, &samples).unwrap();
        let mut rd = csv::Reader::from_path(dir.join("samples.csv")).unwrap();
        let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
        let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(!header.iter().any(|h| h == "vars"), "{header:?}");
        assert_eq!(header[0], "ts_ns");
        assert!(header.iter().any(|h| h == "ca_map_id"), "{header:?}");
        assert_eq!(
            &header[header.len() - 3..],
            ["var.k", "var.w_max", "var.origin"]
        );
        let col = |name: &str| header.iter().position(|h| h == name).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(&rows[0][col("var.k")], "2.331");
        assert_eq!(&rows[0][col("var.w_max")], "180");
        assert_eq!(&rows[0][col("var.origin")], "");
        assert_eq!(&rows[1][col("var.origin")], "175");
        assert_eq!(&rows[2][col("var.w_max")], "");
        assert_eq!(&rows[1][col("ts_ns")], "2000");
        assert_eq!(&rows[0][col("ca_map_id")], "42");
        assert!(rows.iter().all(|r| r.len() == header.len()));
    }
}
