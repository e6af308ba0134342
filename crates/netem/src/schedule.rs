//! Time-varying links: a schedule's steps (what `cctl-scenario` makes of rate and delay
//! schedules and mahimahi traces) and the driver that applies them to a testbed during a
//! run through one long-running `tc -batch` process.

use std::io::{BufRead as _, Read as _, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::tc::TestbedError;
use crate::testbed::Testbed;

/// One change of a resolved schedule: from `at_s` on, the link has `value`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// When the change is due, in s from the start of the run.
    pub at_s: f64,
    /// The new value: the bottleneck rate in Mbit/s (rate schedules), or the added RTT in ms
    /// (delay schedules).
    pub value: f64,
}

/// What a schedule changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// The bottleneck rate, `rate_mbit` (Mbit/s, > 0).
    Rate,
    /// The RTT added on every access link, `rtt_ms` (ms, ≥ 0).
    Rtt,
}

impl Quantity {
    /// The key of an entry's value.
    pub fn key(self) -> &'static str {
        match self {
            Quantity::Rate => "rate_mbit",
            Quantity::Rtt => "rtt_ms",
        }
    }
}

/// The value a schedule gives at time `t_s` (`initial` before its first step).
pub fn value_at(steps: &[Step], initial: f64, t_s: f64) -> f64 {
    steps
        .iter()
        .take_while(|s| s.at_s <= t_s)
        .last()
        .map_or(initial, |s| s.value)
}

/// Mean of a schedule's value over `[from_s, to_s)`, weighted by time.
pub fn mean_over(steps: &[Step], initial: f64, from_s: f64, to_s: f64) -> f64 {
    let mut edges: Vec<f64> = vec![from_s];
    edges.extend(
        steps
            .iter()
            .map(|s| s.at_s)
            .filter(|t| *t > from_s && *t < to_s),
    );
    edges.push(to_s);
    let sum: f64 = edges
        .windows(2)
        .map(|w| value_at(steps, initial, w[0]) * (w[1] - w[0]))
        .sum();
    sum / (to_s - from_s)
}

/// One change as the driver applied it (times in ms from the start of the run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedChange {
    /// `rate_mbit` or `rtt_ms`.
    pub what: String,
    /// The new value (Mbit/s or ms).
    pub value: f64,
    /// When it was due, in ms.
    pub scheduled_ms: f64,
    /// When its lines were written to `tc`, in ms.
    pub written_ms: f64,
    /// When `tc` had carried them out (its answer to the `qdisc show` that follows them), in ms.
    pub completed_ms: f64,
    /// The root tbf's rate `tc` showed after a rate change, in Mbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_rate_mbit: Option<f64>,
    /// The child qdisc's `limit` `tc` showed after a rate change, in packets (pfifo).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_child_limit: Option<u64>,
}

/// The timing error of applied changes (completion − schedule), in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimingError {
    /// Largest error, in ms.
    pub max_ms: f64,
    /// Median error, in ms.
    pub median_ms: f64,
    /// Mean error, in ms.
    pub mean_ms: f64,
}

/// What the driver did during one run (written to `run.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleLog {
    /// The changes applied, in time order (steps at 0 s are built into the testbed and not
    /// listed).
    pub changes: Vec<AppliedChange>,
    /// Changes not applied because the run ended first.
    pub not_applied: usize,
    /// Summary of `completed_ms − scheduled_ms`; `None` without changes.
    pub error: Option<TimingError>,
}

impl TimingError {
    /// The summary of `changes`' errors; `None` if there are none.
    pub fn of(changes: &[AppliedChange]) -> Option<TimingError> {
        let mut e: Vec<f64> = changes
            .iter()
            .map(|c| c.completed_ms - c.scheduled_ms)
            .collect();
        if e.is_empty() {
            return None;
        }
        e.sort_by(f64::total_cmp);
        let n = e.len();
        let median = if n % 2 == 1 {
            e[n / 2]
        } else {
            (e[n / 2 - 1] + e[n / 2]) / 2.0
        };
        Some(TimingError {
            max_ms: e[n - 1],
            median_ms: median,
            mean_ms: e.iter().sum::<f64>() / n as f64,
        })
    }
}

/// A change the driver will make.
struct Planned {
    what: Quantity,
    step: Step,
    lines: Vec<String>,
    /// The `qdisc show` whose answer marks completion.
    marker: String,
}

/// Applies a run's schedules: one `tc -n <router> -j -batch -` process, fed each change's
/// lines at its time from a thread, each followed by a `qdisc show` whose one-line JSON
/// answer marks (and timestamps) completion — iproute2 6.1's tc has no `-OK`. A new `tc`
/// per change would cost ~0.5 s in the emulated CI VM.
pub struct ScheduleDriver {
    thread: JoinHandle<(Vec<AppliedChange>, usize, Option<String>)>,
    done: Arc<AtomicBool>,
}

impl ScheduleDriver {
    /// Starts applying `rate` (Mbit/s) and `delay` (ms) steps on `bed` with times relative
    /// to `t0`; steps at 0 s are left out (the testbed was built with them). `None` when
    /// there is nothing to apply.
    ///
    /// Errors: `tc` cannot be started.
    pub fn start(
        bed: &Testbed,
        rate: &[Step],
        delay: &[Step],
        t0: Instant,
    ) -> Result<Option<ScheduleDriver>, TestbedError> {
        let spec = bed.spec();
        let mut plan: Vec<Planned> = Vec::new();
        for s in rate.iter().filter(|s| s.at_s > 0.0) {
            plan.push(Planned {
                what: Quantity::Rate,
                step: *s,
                lines: spec.rate_change_lines(s.value),
                marker: format!("qdisc show dev {}", spec.bottleneck_dev()),
            });
        }
        for s in delay.iter().filter(|s| s.at_s > 0.0) {
            plan.push(Planned {
                what: Quantity::Rtt,
                step: *s,
                lines: spec.delay_change_lines(s.value),
                marker: format!("qdisc show dev {}", spec.router_access_dev(0)),
            });
        }
        if plan.is_empty() {
            return Ok(None);
        }
        plan.sort_by(|a, b| a.step.at_s.total_cmp(&b.step.at_s));
        // Warm-up at the start: the first change through a fresh `tc` took 23–43 ms in the
        // emulated guest, later ones ~3 ms (code run for the first time is translated by
        // QEMU TCG, in tc and in the kernel). So the rate lines run once at the start with
        // the initial rate (which the testbed already has), and each marker once.
        let mut warm: Vec<String> = Vec::new();
        if plan.iter().any(|p| p.what == Quantity::Rate) {
            warm.extend(spec.rate_change_lines(spec.rate_mbit));
        }
        for p in &plan {
            if !warm.contains(&p.marker) {
                warm.push(p.marker.clone());
            }
        }
        let command = format!("tc -n {} -j -batch -", bed.router_ns());
        let mut child = Command::new("tc")
            .args(["-n", bed.router_ns(), "-j", "-batch", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| TestbedError::Spawn { command, source })?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || drive(child, stdin, stdout, warm, plan, t0, &stop));
        Ok(Some(ScheduleDriver { thread, done }))
    }

    /// Stops (changes not yet due are left out) and returns what was applied.
    ///
    /// Errors: a change `tc` refused or could not carry out, with its stderr.
    pub fn finish(self) -> Result<ScheduleLog, String> {
        self.done.store(true, Ordering::Relaxed);
        let (changes, not_applied, failure) = self
            .thread
            .join()
            .map_err(|_| "the schedule driver panicked".to_string())?;
        if let Some(f) = failure {
            return Err(f);
        }
        Ok(ScheduleLog {
            error: TimingError::of(&changes),
            changes,
            not_applied,
        })
    }
}

fn ms_since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1000.0
}

/// The driver thread: returns the applied changes, how many were left out, and a failure.
fn drive(
    mut child: Child,
    mut stdin: ChildStdin,
    mut stdout: std::io::BufReader<ChildStdout>,
    warm: Vec<String>,
    plan: Vec<Planned>,
    t0: Instant,
    stop: &AtomicBool,
) -> (Vec<AppliedChange>, usize, Option<String>) {
    let mut applied = Vec::new();
    let total = plan.len();
    let mut failure = None;
    let markers = warm.iter().filter(|l| l.starts_with("qdisc show")).count();
    let mut text = warm.join("\n");
    text.push('\n');
    let mut warmed = stdin.write_all(text.as_bytes()).and_then(|_| stdin.flush());
    for _ in 0..markers {
        let mut line = String::new();
        warmed = warmed.and_then(|_| match stdout.read_line(&mut line) {
            Ok(0) => Err(std::io::Error::other("tc exited")),
            r => r.map(drop),
        });
    }
    if let Err(e) = warmed {
        drop(stdin);
        let _ = child.wait();
        let mut err = String::new();
        if let Some(mut s) = child.stderr.take() {
            let _ = s.read_to_string(&mut err);
        }
        failure = Some(format!(
            "warming up `tc -batch` ({}): {e}: {}",
            warm.join("; "),
            err.trim_end()
        ));
        return (applied, total, failure);
    }
    'changes: for p in plan {
        let due = t0 + Duration::from_secs_f64(p.step.at_s);
        // Sleep to within 2 ms of the time, then yield until it (a sleep alone woke up to
        // 8 ms late in the emulated guest).
        loop {
            let now = Instant::now();
            if now >= due {
                break;
            }
            if stop.load(Ordering::Relaxed) {
                break 'changes;
            }
            let left = due - now;
            if left > Duration::from_millis(2) {
                std::thread::sleep(
                    (left - Duration::from_millis(2)).min(Duration::from_millis(50)),
                );
            } else {
                std::thread::yield_now();
            }
        }
        let mut text = p.lines.join("\n");
        text.push('\n');
        text.push_str(&p.marker);
        text.push('\n');
        let written_ms = ms_since(t0);
        let mut line = String::new();
        let ok = stdin
            .write_all(text.as_bytes())
            .and_then(|_| stdin.flush())
            .and_then(|_| stdout.read_line(&mut line));
        let completed_ms = ms_since(t0);
        if !matches!(ok, Ok(n) if n > 0) {
            drop(stdin);
            let _ = child.wait();
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            failure = Some(format!(
                "applying {} = {} at {} s with `tc -batch` ({}): {}",
                p.what.key(),
                p.step.value,
                p.step.at_s,
                p.lines.join("; "),
                err.trim_end()
            ));
            return (applied, total, failure);
        }
        let (read_rate_mbit, read_child_limit) = match p.what {
            Quantity::Rate => read_back(&line),
            Quantity::Rtt => (None, None),
        };
        applied.push(AppliedChange {
            what: p.what.key().to_string(),
            value: p.step.value,
            scheduled_ms: p.step.at_s * 1000.0,
            written_ms,
            completed_ms,
            read_rate_mbit,
            read_child_limit,
        });
    }
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    let left = total - applied.len();
    (applied, left, failure)
}

/// The root tbf's rate (Mbit/s) and its child's `limit` from `tc -j qdisc show` JSON.
pub fn read_back(json: &str) -> (Option<f64>, Option<u64>) {
    let Ok(serde_json::Value::Array(list)) = serde_json::from_str(json.trim()) else {
        return (None, None);
    };
    let root = list
        .iter()
        .find(|q| q.get("root").and_then(|r| r.as_bool()) == Some(true));
    let rate = root
        .filter(|q| q.get("kind").and_then(|k| k.as_str()) == Some("tbf"))
        .and_then(|q| q.pointer("/options/rate"))
        .and_then(|r| r.as_f64())
        .map(|bytes_per_s| bytes_per_s * 8.0 / 1e6);
    let limit = list
        .iter()
        .find(|q| q.get("parent").and_then(|p| p.as_str()) == Some("1:1"))
        .and_then(|q| q.pointer("/options/limit"))
        .and_then(|l| l.as_u64());
    (rate, limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tbf_json_reads_back_rate_and_child_limit() {
        let json = r#"[{"kind":"tbf","handle":"1:","root":true,"refcnt":3,"options":{"rate":625000,"burst":3027,"lat":1000000}},{"kind":"pfifo","handle":"10:","parent":"1:1","options":{"limit":50}}]"#;
        assert_eq!(read_back(json), (Some(5.0), Some(50)));
    }
}
