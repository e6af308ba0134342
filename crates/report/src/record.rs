//! The on-disk format of a results directory: one [`RunRecord`] per run (`run.json`) and the
//! directory's [`Metadata`] (`metadata.json`), and reading them back. Fields are only ever
//! added, with serde defaults, so directories written by earlier versions still read
//! (a fixture of one is tested).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use cctl_metrics::{FlowSeries, QueuePoint};
use cctl_netem::FlowResult;
use cctl_scenario::RunPoint;
use serde::{Deserialize, Serialize};

use crate::runs::Shard;

/// A congestion control as the runner uses it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResolvedCc {
    /// As given (`htcp`, `cubic`).
    pub requested: String,
    /// Kernel name flows select with TCP_CONGESTION (`bpf_htcp`, `cubic`).
    pub cc_name: String,
    /// `cctl` (a BPF program of this binary), `native` (built-in or module).
    pub kind: String,
    /// Parameters of a cctl algorithm, as loaded.
    pub params: BTreeMap<String, u32>,
}

/// Which clock timed a run's traffic: the 6.12 guest's virtual clock (QEMU icount) or the
/// real one, in a guest or on the host. Results of different clocks are not comparable
/// (`cctl bench merge`, `check` and `--resume` refuse to mix them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockRecord {
    /// `virtual` or `real` (`cctl bench run --clock`).
    pub clock: String,
    /// QEMU's `-icount shift`, virtual clock only: 2^shift ns of guest time per instruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icount_shift: Option<u32>,
    /// Where the traffic ran: `host`, or the guest's accelerator (`tcg`, `kvm`).
    pub machine: String,
    /// The guest's vCPUs (`None`: on the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vcpus: Option<u32>,
    /// The guest's memory, MiB (`None`: on the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u32>,
    /// The QEMU that ran the guest (`7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)`; `None`: on
    /// the host, or recorded before this field existed). Not part of [`Self::describe`]:
    /// `bench diff` and `bench check` compare it on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qemu: Option<String>,
}

impl ClockRecord {
    /// The host's real clock, no guest.
    pub fn host() -> ClockRecord {
        ClockRecord {
            clock: "real".into(),
            icount_shift: None,
            machine: "host".into(),
            vcpus: None,
            memory_mb: None,
            qemu: None,
        }
    }

    /// The clock's name in results that may predate the record: those ran on the real
    /// clock (`real`).
    pub fn name_of(c: Option<&ClockRecord>) -> &str {
        c.map_or("real", |c| c.clock.as_str())
    }

    /// One line for a report's header, e.g. `virtual (icount shift 0), tcg guest, 2 vCPUs,
    /// 2048 MiB`.
    pub fn describe(&self) -> String {
        let mut s = self.clock.clone();
        if let Some(k) = self.icount_shift {
            s += &format!(" (icount shift {k})");
        }
        if self.machine == "host" {
            s += ", on the host";
        } else {
            s += &format!(", {} guest", self.machine);
        }
        if let Some(n) = self.vcpus {
            s += &format!(", {n} vCPU{}", if n == 1 { "" } else { "s" });
        }
        if let Some(m) = self.memory_mb {
            s += &format!(", {m} MiB");
        }
        s
    }
}

/// What one run produced (also written to `run.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Index of the scenario point.
    pub point: usize,
    /// Swept values of the point.
    pub vars: BTreeMap<String, f64>,
    /// Algorithm under test (requested name).
    pub algo: String,
    /// Repetition, 0-based.
    pub rep: u32,
    /// The run's seed: the sweep's (`metadata.json`'s `seed`) plus the repetition; every
    /// random choice of the run comes from it (start times, web sessions) and the guest
    /// booted with the sweep's. `None` in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The point as run (rate, buffer, loss, flows).
    pub spec: RunPoint,
    /// Per-flow outcome of the traffic generator.
    pub flows: Vec<FlowResult>,
    /// Per-flow series for the metrics.
    pub series: Vec<FlowSeries>,
    /// Bottleneck samples.
    pub queue: Vec<QueuePoint>,
    /// Forward-path loss drops (netem random or gact periodic; all senders), packets.
    pub random_drops: u64,
    /// Collector counters.
    pub samples: u64,
    /// Ring-buffer drops of the collector.
    pub sample_drops: u64,
    /// The run's result digest, `sha256:<hex>` over its sample files, close records and this
    /// record without the host's measurements ([`crate::digest`]): two runs with the same
    /// digest are identical to `cctl bench diff`. `None` in files written before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Wall-clock length of the run, s.
    pub wall_s: f64,
    /// The run's t0 on the monotonic clock of the kernel that ran it (`samples.csv`'s
    /// `ts_ns` clock), ns; every `t_s` of the run and the flows' `started_s`/`ended_s`
    /// count from it: a sample is at `(ts_ns - t0_ns) / 1e9` s of the series. `None` in
    /// files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_ns: Option<u64>,
    /// The same instant on the wall clock of the machine that ran it (UTC, RFC 3339 with
    /// ns, e.g. `2026-12-02T00:41:07.123456789Z`; a guest's clock on the virtual clock).
    /// `None` in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_utc: Option<chrono::DateTime<chrono::Utc>>,
    /// What the web cross traffic did (none without web sessions).
    #[serde(default)]
    pub web: Option<cctl_netem::web::WebStats>,
    /// Share of the machine's CPU time that was busy during the run (all CPUs), 0..1.
    #[serde(default)]
    pub cpu_busy: f64,
    /// CPUs of the machine (for the CPU a run needs: `cpu_busy × cpus`, with one slot).
    #[serde(default)]
    pub cpus: u32,
    /// The run went to its end (false: cut short by an interrupt; `--resume` redoes it).
    /// Files written before this field existed were written only at a run's end.
    #[serde(default = "yes")]
    pub completed: bool,
    /// Counters of each bottleneck of a `[topology]` chain at the end of the run (empty on
    /// the dumbbell, whose bottleneck is in `queue`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<cctl_netem::chain::HopStats>,
    /// The rate/delay changes applied during the run, with their timing (none without a
    /// schedule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<cctl_netem::schedule::ScheduleLog>,
    /// How the bottleneck was built (qdisc, its tc lines as applied, ECN sysctl, receiver
    /// congestion control); `None` in files written before it was recorded (drop-tail).
    #[serde(default)]
    pub bottleneck: Option<cctl_netem::aqm::BottleneckSetup>,
    /// Samples of the bottleneck discipline's own counters (drops, ECN marks, its delay
    /// estimate), taken with the queue samples.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aqm: Vec<cctl_netem::aqm::AqmPoint>,
    /// The clock that timed the run (`None` in files written before it was recorded: the
    /// real clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockRecord>,
    /// Where the run dropped packets ([`cctl_netem::ledger`]); `None` in files written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drops: Option<cctl_netem::ledger::DropLedger>,
    /// Why the run is invalid: each place it dropped packets the scenario did not ask for
    /// (empty: valid).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
    /// Per-packet one-way delays and sojourn times ([`cctl_metrics::delay`]); `None` with
    /// the taps off (`--delay-sample 0`) and in files written before they existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delays: Option<cctl_metrics::delay::DelayRecord>,
    /// The `udp-cbr` flows' streams ([`cctl_netem::udp`]), in `[[flows]]` order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub udp: Vec<cctl_netem::udp::CbrResult>,
    /// The `[[probes]]`' results ([`cctl_netem::probes`]), per probe and counted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<cctl_netem::probes::ProbeResult>,
}

impl RunRecord {
    /// The congestion control flow `f` of this run runs, by the name it was requested
    /// under: the algorithm under test (`highspeed@p0`) for its flows, a fixed flow's own
    /// name (`reno` in T0.3), the kernel's name for a flow without a plan.
    pub fn flow_algo<'a>(&'a self, f: &'a FlowSeries) -> &'a str {
        match self.spec.flows.get(f.id.wrapping_sub(1)).map(|p| &p.cc) {
            Some(cctl_scenario::CcRef::UnderTest) => &self.algo,
            Some(cctl_scenario::CcRef::Named(n)) => n,
            None => &f.cc,
        }
    }
}

fn yes() -> bool {
    true
}

/// Metadata of a results directory.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Metadata {
    /// Scenario name and id.
    pub scenario: String,
    /// Test id of benchmarks.md.
    pub id: String,
    /// Where the scenario came from.
    pub scenario_path: String,
    /// Profile (`ci`, `paper`).
    pub profile: String,
    /// Repetitions per point.
    pub repeat: u32,
    /// The sweep's seed (`cctl bench run --seed`; each run's is this + its repetition).
    pub seed: u64,
    /// `uname -r`.
    pub kernel: String,
    /// cctl version.
    pub cctl_version: String,
    /// The cctl binary that ran the runs, `sha256:<hex>` of its file ([`crate::digest::of_file`]):
    /// two builds of one commit are the same build when this agrees. `None` in directories
    /// written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<String>,
    /// Algorithms with their parameters.
    pub algorithms: Vec<ResolvedCc>,
    /// Collector interval, ms.
    pub interval_ms: u64,
    /// Bottleneck sampling interval, ms.
    pub queue_interval_ms: u64,
    /// Unix time of the start, s.
    pub started_unix: u64,
    /// Runs completed.
    pub runs_done: usize,
    /// Runs planned.
    pub runs_planned: usize,
    /// Whether the run was interrupted.
    pub interrupted: bool,
    /// Where the runs differ from the scenario, and why (threats to validity).
    #[serde(default)]
    pub deviations: Vec<String>,
    /// Algorithms under test, as requested (`--algo`); [`Metadata::algorithms`] also holds
    /// those the scenario's flows name.
    #[serde(default)]
    pub under_test: Vec<String>,
    /// The points selected with `--points` (`None`: all).
    #[serde(default)]
    pub points: Option<Vec<usize>>,
    /// The shard of the run list this directory holds (`None`: all of it).
    #[serde(default)]
    pub shard: Option<Shard>,
    /// The guest's part of the shard's run list when `--jobs N` on the virtual clock runs
    /// one guest per slot (`J/N`, each guest writes `slots/J/`; `None`: not a slot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<Shard>,
    /// Every point's duration when `--duration-s` replaced the profile's, in s (`None`: the
    /// profile's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Runs run at once (`--jobs`).
    #[serde(default = "one")]
    pub jobs: u32,
    /// Directories merged into this one by `cctl bench merge`.
    #[serde(default)]
    pub merged_from: Vec<String>,
    /// The `[topology]` chain of each point (by index) of a scenario that has one: hops
    /// (rate, delay, buffer) and each flow's path and RTT.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topology: BTreeMap<usize, cctl_scenario::TopologyPlan>,
    /// The bottleneck of each point (by index) as slot 0 builds it: qdisc, parameters, tc
    /// lines, ECN sysctl; the receiver's congestion control when a named flow runs dctcp
    /// (a run's `run.json` has what it applied, also for dctcp under test).
    #[serde(default)]
    pub bottleneck: BTreeMap<usize, cctl_netem::aqm::BottleneckSetup>,
    /// The clock that timed the runs (`None` in directories written before it was
    /// recorded: the real clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockRecord>,
}

fn one() -> u32 {
    1
}

/// UTC time as `YYYYMMDDTHHMMSSZ` (for directory names).
pub fn timestamp() -> String {
    chrono::Utc::now().format("%Y%m%dT%H%M%SZ").to_string()
}

/// Reads the run records of a results directory (for `cctl bench report`).
pub fn read_records(dir: &Path) -> Result<(Metadata, Vec<RunRecord>)> {
    let meta: Metadata = serde_json::from_slice(
        &std::fs::read(dir.join("metadata.json"))
            .with_context(|| format!("reading {}/metadata.json", dir.display()))?,
    )
    .with_context(|| format!("parsing {}/metadata.json", dir.display()))?;
    let mut records = Vec::new();
    let runs = dir.join("runs");
    if runs.is_dir() {
        for algo in std::fs::read_dir(&runs)? {
            for run in std::fs::read_dir(algo?.path())? {
                let path = run?.path().join("run.json");
                if let Ok(bytes) = std::fs::read(&path) {
                    records.push(
                        serde_json::from_slice(&bytes)
                            .with_context(|| format!("parsing {}", path.display()))?,
                    );
                }
            }
        }
    }
    records.sort_by(|a: &RunRecord, b: &RunRecord| {
        (a.point, &a.algo, a.rep).cmp(&(b.point, &b.algo, b.rep))
    });
    Ok((meta, records))
}
