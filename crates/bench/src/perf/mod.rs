//! `cctl bench perf`: what cctl costs, each figure measured side by side with its
//! reference in one run, reported as ratios (issue 7). Absolute times on a shared 2-core
//! machine are noise; ratios of alternating A/B runs are not.
//!
//! Parts ([`Part`]):
//! - [`ack`]: per-ACK cost of each BPF port against the native module of the same
//!   algorithm on a CPU-bound transfer (throughput and CPU per GB ratios), plus each
//!   callback's BPF run time per call (BPF stats). reno and cubic on the host, the other
//!   modules in the 6.12 guest.
//! - [`live`]: per-ACK cost of live tunables (spec §18.5): each algorithm that has them
//!   against the same program with them as `.rodata` constants (BPF run time per GB and
//!   per call, goodput).
//! - [`collector`]: the highest sample rate without ring-buffer drops, its CPU, the
//!   throughput cost of tracing a saturated flow, and polling `ss -ti` at the same rate.
//! - [`migrate`]: time to move 1,000 and 10,000 established flows.
//! - [`ceiling`]: the highest bottleneck rate at which one flow with a 100 % BDP buffer
//!   reaches ≥ 95 % utilisation (host: tbf without delay; guest: netem at 40 ms).
//! - [`delays`]: throughput and CPU with the per-packet delay taps on (every packet, and
//!   the bench's default sampling) against off (host: 1 and 4 Gbit/s; guest: CPU share).
//!
//! Results: `<out>/<UTC timestamp>/perf.json` ([`PerfReport`]) and `perf.md` ([`markdown`]).

pub mod ack;
pub mod ceiling;
pub mod collector;
pub mod delays;
pub mod live;
pub mod migrate;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// One part of the performance benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// Per-ACK cost: BPF port vs native module.
    Ack,
    /// Per-ACK cost of live tunables: `.data` vs `.rodata` build of the same port.
    Live,
    /// Collector rate, CPU and throughput cost vs `ss -ti` polling.
    Collector,
    /// Live migration of 1,000 and 10,000 flows.
    Migrate,
    /// Testbed ceiling: highest bottleneck rate with ≥ 95 % utilisation.
    Ceiling,
    /// Cost of the per-packet delay taps: on vs off.
    Delays,
}

impl Part {
    /// Every part, in report order.
    pub const ALL: [Part; 6] = [
        Part::Ack,
        Part::Live,
        Part::Collector,
        Part::Migrate,
        Part::Ceiling,
        Part::Delays,
    ];

    /// The name used on the command line and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Part::Ack => "ack",
            Part::Live => "live",
            Part::Collector => "collector",
            Part::Migrate => "migrate",
            Part::Ceiling => "ceiling",
            Part::Delays => "delays",
        }
    }

    /// Whether the part has a half that runs in the 6.12 guest (native modules, netem).
    pub fn has_guest_half(self) -> bool {
        matches!(self, Part::Ack | Part::Live | Part::Ceiling | Part::Delays)
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Part {
    type Err = String;
    /// Parses a part's name ([`Part::name`]); the error lists them.
    fn from_str(s: &str) -> Result<Self, String> {
        Part::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown part '{s}'; the parts are {}",
                    Part::ALL.map(Part::name).join(", ")
                )
            })
    }
}

/// Where a part runs: on the host kernel or inside the 6.12 guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Site {
    /// The running (host) kernel.
    Host,
    /// The netem-capable guest kernel with the native modules (bench/src/vm.rs).
    Guest,
}

impl Site {
    /// `host` or `guest`, as in the report and the progress lines.
    pub fn name(self) -> &'static str {
        match self {
            Site::Host => "host",
            Site::Guest => "guest",
        }
    }
}

/// What every part gets.
#[derive(Debug, Clone)]
pub struct PerfOptions {
    /// Short smoke version (CI): fewer rounds, shorter transfers, smaller flow counts. The
    /// figures are then only a check that the benchmark works.
    pub quick: bool,
    /// Where this process runs.
    pub site: Site,
    /// Directory for the part's raw files (`<run dir>/<part>/`), created by [`run_parts`].
    pub dir: PathBuf,
    /// Set by SIGINT/SIGTERM: a part stops early, cleans up and returns what it has.
    pub stop: Arc<AtomicBool>,
}

impl PerfOptions {
    /// Whether the run was interrupted.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// A target of issue 7 and whether the figure met it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The target in words (`≤ 1 % slower than native`).
    pub text: String,
    /// Whether it was met.
    pub met: bool,
}

/// One figure of cctl next to its reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// The part that measured it.
    pub part: Part,
    /// Where it was measured.
    pub site: Site,
    /// Kernel release it was measured on.
    pub kernel: String,
    /// What was measured (`cubic: bpf_cubic_l vs cubic`, `collector max rate`).
    pub item: String,
    /// The quantity (`throughput`, `CPU per GB`, `ns per call`).
    pub metric: String,
    /// Unit of `value` and `reference` (`Gbit/s`, `CPU-s/GB`, `samples/s`, `ms`).
    pub unit: String,
    /// cctl's figure (median over rounds where there are rounds).
    pub value: f64,
    /// The reference's figure in the same unit, if there is a reference.
    pub reference: Option<f64>,
    /// What the reference is (`native cubic`, `ss -ti polling`, `collector off`).
    pub reference_name: Option<String>,
    /// `value / reference`.
    pub ratio: Option<f64>,
    /// The target for this figure, if it has one.
    pub target: Option<Target>,
    /// Rounds, spread, anything a reader needs to weigh the figure.
    pub note: String,
}

impl Row {
    /// A row without a reference.
    pub fn single(part: Part, site: Site, item: &str, metric: &str, unit: &str, value: f64) -> Row {
        Row {
            part,
            site,
            kernel: cctl_loader::kernel::release(),
            item: item.into(),
            metric: metric.into(),
            unit: unit.into(),
            value,
            reference: None,
            reference_name: None,
            ratio: None,
            target: None,
            note: String::new(),
        }
    }

    /// A row with a reference; the ratio is `value / reference` (NaN-free: `None` when the
    /// reference is 0 or not finite).
    #[allow(clippy::too_many_arguments)]
    pub fn versus(
        part: Part,
        site: Site,
        item: &str,
        metric: &str,
        unit: &str,
        value: f64,
        reference_name: &str,
        reference: f64,
    ) -> Row {
        let mut r = Row::single(part, site, item, metric, unit, value);
        r.reference = Some(reference);
        r.reference_name = Some(reference_name.into());
        r.ratio = (reference.is_finite() && reference != 0.0).then(|| value / reference);
        r
    }

    /// Adds a target.
    pub fn with_target(mut self, text: &str, met: bool) -> Row {
        self.target = Some(Target {
            text: text.into(),
            met,
        });
        self
    }

    /// Adds a note.
    pub fn with_note(mut self, note: impl Into<String>) -> Row {
        self.note = note.into();
        self
    }
}

/// What one part produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartResult {
    /// Rows for the table.
    pub rows: Vec<Row>,
    /// Everything else worth keeping (per-round figures, sweeps), free-form JSON.
    pub details: serde_json::Value,
    /// What the reader should know (`the guest has no tcp_yeah module`, profiles, ...).
    pub notes: Vec<String>,
}

/// The machine a report comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CPU model (`/proc/cpuinfo` `model name`).
    pub cpu: String,
    /// Online CPUs.
    pub cpus: usize,
    /// Memory, in MiB.
    pub memory_mib: u64,
    /// Host kernel release.
    pub kernel: String,
}

impl Machine {
    /// Reads this machine's description from /proc.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_mib = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024);
        Machine {
            cpu,
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_mib,
            kernel: cctl_loader::kernel::release(),
        }
    }
}

/// The whole benchmark's result (`perf.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfReport {
    /// UTC start (`20261122T101100Z`).
    pub started: String,
    /// Where it ran.
    pub machine: Machine,
    /// The guest kernel's release, when a part ran there.
    pub guest_kernel: Option<String>,
    /// The guest's clock, when a part ran there (`--clock`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_clock: Option<cctl_report::record::ClockRecord>,
    /// Whether this was the `--quick` smoke version.
    pub quick: bool,
    /// Parts run, in order, with what they produced (or the error that stopped them).
    pub parts: Vec<PartOutcome>,
}

/// One part's outcome on one site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartOutcome {
    /// Which part.
    pub part: Part,
    /// Where.
    pub site: Site,
    /// Wall time the part took, in s.
    pub seconds: f64,
    /// What it produced; empty when it failed.
    pub result: PartResult,
    /// The error that stopped it, if any (the other parts still run).
    pub error: Option<String>,
}

impl PerfReport {
    /// Every row of every part.
    pub fn rows(&self) -> impl Iterator<Item = &Row> {
        self.parts.iter().flat_map(|p| p.result.rows.iter())
    }

    /// Whether any part failed.
    pub fn failed(&self) -> bool {
        self.parts.iter().any(|p| p.error.is_some())
    }
}

/// Runs `parts` on `site`, each in `<dir>/<part>/`, one after the other; a failing part is
/// recorded with its error and the others still run. Stops between parts when `stop` is set.
///
/// Errors: only if a part's directory cannot be created.
pub fn run_parts(
    parts: &[Part],
    quick: bool,
    site: Site,
    dir: &Path,
    stop: Arc<AtomicBool>,
) -> Result<Vec<PartOutcome>> {
    let mut out = Vec::new();
    for &part in parts {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        if site == Site::Guest && !part.has_guest_half() {
            continue;
        }
        let pdir = dir.join(match site {
            Site::Host => part.name().to_string(),
            Site::Guest => format!("{}-guest", part.name()),
        });
        std::fs::create_dir_all(&pdir).with_context(|| format!("creating {}", pdir.display()))?;
        let opts = PerfOptions {
            quick,
            site,
            dir: pdir,
            stop: stop.clone(),
        };
        let where_ = site.name();
        // Progress on stderr: a run that hangs or is killed shows which part it was in.
        eprintln!("cctl bench perf: {} ({where_}) ...", part.name());
        let t0 = std::time::Instant::now();
        let res = match part {
            Part::Ack => ack::run(&opts),
            Part::Live => live::run(&opts),
            Part::Collector => collector::run(&opts),
            Part::Migrate => migrate::run(&opts),
            Part::Ceiling => ceiling::run(&opts),
            Part::Delays => delays::run(&opts),
        };
        let seconds = t0.elapsed().as_secs_f64();
        match &res {
            Ok(_) => eprintln!(
                "cctl bench perf: {} ({where_}) done in {seconds:.0} s",
                part.name()
            ),
            Err(e) => eprintln!(
                "cctl bench perf: {} ({where_}) FAILED after {seconds:.0} s: {e:#}",
                part.name()
            ),
        }
        out.push(match res {
            Ok(result) => PartOutcome {
                part,
                site,
                seconds,
                result,
                error: None,
            },
            Err(e) => PartOutcome {
                part,
                site,
                seconds,
                result: PartResult::default(),
                error: Some(format!("{e:#}")),
            },
        });
    }
    Ok(out)
}

/// Writes `perf.json` and `perf.md` into `dir`.
///
/// Errors: the files cannot be written.
pub fn write(dir: &Path, report: &PerfReport) -> Result<()> {
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("perf.json"), json + "\n")
        .with_context(|| format!("writing {}", dir.join("perf.json").display()))?;
    std::fs::write(dir.join("perf.md"), markdown(report))
        .with_context(|| format!("writing {}", dir.join("perf.md").display()))?;
    Ok(())
}

/// Reads a `perf.json`.
///
/// Errors: missing or malformed file.
pub fn read(path: &Path) -> Result<PerfReport> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// A figure with 3–4 significant digits.
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    if a >= 10_000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The report as a markdown table: one row per figure, reference and ratio beside it, the
/// target and whether it was met, then each part's notes and errors.
pub fn markdown(r: &PerfReport) -> String {
    let mut s = String::new();
    s += &format!(
        "## cctl performance ({}{})\n\nMachine: {}, {} CPUs, {} MiB; host kernel {}{}. Ratios are cctl / reference, measured side by side in one run.\n\n",
        r.started,
        if r.quick { ", --quick smoke run: figures not meaningful" } else { "" },
        r.machine.cpu,
        r.machine.cpus,
        r.machine.memory_mib,
        r.machine.kernel,
        r.guest_kernel
            .as_ref()
            .map(|k| format!(
                ", guest kernel {k} (QEMU{})",
                r.guest_clock
                    .as_ref()
                    .map(|c| format!(", clock {}", c.describe()))
                    .unwrap_or_default()
            ))
            .unwrap_or_default(),
    );
    s += "| part | where | item | metric | cctl | reference | ratio | target | note |\n";
    s += "|---|---|---|---|---:|---:|---:|---|---|\n";
    for p in &r.parts {
        for row in &p.result.rows {
            let reference = match (&row.reference_name, row.reference) {
                (Some(n), Some(v)) => format!("{} ({n})", fmt_num(v)),
                _ => "".into(),
            };
            let target = match &row.target {
                Some(t) => format!("{} {}", if t.met { "met:" } else { "MISSED:" }, t.text),
                None => String::new(),
            };
            s += &format!(
                "| {} | {} {} | {} | {} ({}) | {} | {} | {} | {} | {} |\n",
                row.part,
                row.site.name(),
                row.kernel,
                row.item,
                row.metric,
                row.unit,
                fmt_num(row.value),
                reference,
                row.ratio.map(|x| format!("{x:.3}")).unwrap_or_default(),
                target,
                row.note.replace('|', "/"),
            );
        }
    }
    for p in &r.parts {
        if p.result.notes.is_empty() && p.error.is_none() {
            continue;
        }
        s += &format!("\n**{} ({:?}, {:.0} s)**\n", p.part, p.site, p.seconds);
        if let Some(e) = &p.error {
            s += &format!("- FAILED: {e}\n");
        }
        for n in &p.result.notes {
            s += &format!("- {n}\n");
        }
    }
    s
}

/// Median of `xs` (NaN for none).
pub fn median(xs: &[f64]) -> f64 {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_parse_and_refuse_unknown_names() {
        assert_eq!("ack".parse::<Part>().unwrap(), Part::Ack);
        let e = "acks".parse::<Part>().unwrap_err();
        assert!(e.contains("ack, live, collector, migrate, ceiling"), "{e}");
    }

    #[test]
    fn ratio_is_value_over_reference_and_none_for_zero() {
        let r = Row::versus(
            Part::Ack,
            Site::Host,
            "x",
            "throughput",
            "Gbit/s",
            9.9,
            "native",
            10.0,
        );
        assert!((r.ratio.unwrap() - 0.99).abs() < 1e-12);
        let z = Row::versus(
            Part::Ack,
            Site::Host,
            "x",
            "throughput",
            "Gbit/s",
            1.0,
            "native",
            0.0,
        );
        assert_eq!(z.ratio, None);
    }

    #[test]
    fn markdown_shows_rows_targets_and_errors() {
        let rep = PerfReport {
            started: "20261122T000000Z".into(),
            machine: Machine {
                cpu: "cpu".into(),
                cpus: 2,
                memory_mib: 1,
                kernel: "6.18".into(),
            },
            guest_kernel: None,
            guest_clock: None,
            quick: false,
            parts: vec![
                PartOutcome {
                    part: Part::Migrate,
                    site: Site::Host,
                    seconds: 1.0,
                    result: PartResult {
                        rows: vec![Row::single(
                            Part::Migrate,
                            Site::Host,
                            "10000 flows",
                            "time",
                            "ms",
                            42.0,
                        )
                        .with_target("< 50 ms", true)],
                        ..Default::default()
                    },
                    error: None,
                },
                PartOutcome {
                    part: Part::Ceiling,
                    site: Site::Host,
                    seconds: 2.0,
                    result: PartResult::default(),
                    error: Some("no tbf".into()),
                },
            ],
        };
        let md = markdown(&rep);
        assert!(md.contains("| migrate | host"), "{md}");
        assert!(md.contains("met: < 50 ms"), "{md}");
        assert!(md.contains("FAILED: no tbf"), "{md}");
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
