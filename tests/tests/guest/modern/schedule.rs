//! Part `schedule` of the modern testbed test (see modern.rs): rate schedules and mahimahi
//! traces. A rate step 20 → 5 → 20 Mbit/s lands on time and the link follows it; a shipped
//! trace replays at its mean rate; bad schedules and traces are refused naming the field.

use std::path::{Path, PathBuf};

use cctl_report::record::{read_records, RunRecord};
use cctl_scenario::schedule::{self, Step, Trace, BUILTIN_TRACES};
use cctl_scenario::{Profile, Scenario, ScenarioError};
use cctl_tests::bench::run_ci;

/// Duration of each guest run, s.
const DURATION_S: f64 = 15.0;
/// tbf bucket, in ms of the rate: with the default 1 ms, the emulated guest on a loaded
/// host woke tbf too late and lost tokens (12 of 20 Mbit/s with a standing queue).
const BURST_MS: f64 = 10.0;
/// Drop-tail buffer of the step run, in packets (fixed, so it must stay after each change).
const STEP_BUFFER_PKTS: u32 = 40;

/// A one-flow scenario (cubic under test) at 20 ms RTT, `keys` added to `[defaults]`
/// (`duration_s` 15 unless they set it).
fn scenario_text(name: &str, keys: &str) -> String {
    let keys = if keys.contains("duration_s") {
        keys.to_string()
    } else {
        format!("duration_s = {DURATION_S}\n{keys}")
    };
    format!(
        "id = \"X.{name}\"\nname = \"{name}\"\ntitle = \"{name}\"\nsource = \"cctl test\"\n\
         metrics = [\"M1\"]\n[defaults]\nrtt_ms = 20\n\
         tbf_burst_ms = {BURST_MS}\n{keys}\n\
         [[flows]]\ncc = \"{{algo}}\"\n[profiles.paper]\n[profiles.ci]\n"
    )
}

fn parse_at(name: &str, keys: &str, path: &Path) -> Result<Scenario, ScenarioError> {
    Scenario::parse(&scenario_text(name, keys), path)
}

fn parse(name: &str, keys: &str) -> Scenario {
    parse_at(name, keys, Path::new(&format!("<test>/{name}.toml")))
        .unwrap_or_else(|e| panic!("{e}"))
}

const STEP_KEYS: &str = "rate_mbit = 20\nbuffer_pkts = 40\nduration_s = 15\n\
    rate_schedule = [{ at_s = 5, rate_mbit = 5 }, { at_s = 10, rate_mbit = 20 }]";

const TRACE_KEYS: &str =
    "buffer_pkts = 100\nduration_s = 15\nrate_trace = \"traces/lte_synthetic.mm\"";

/// 10 Mbit/s, 20 packets (≤ 24 ms of queue), the added RTT 20 → 60 ms at 3 s, back at 6 s.
const DELAY_KEYS: &str = "rate_mbit = 10\nbuffer_pkts = 20\nduration_s = 9\n\
    delay_schedule = [{ at_s = 3, rtt_ms = 60 }, { at_s = 6, rtt_ms = 20 }]";

fn delay_scenario() -> Scenario {
    parse("delay-step", DELAY_KEYS)
}

fn step_scenario() -> Scenario {
    parse("rate-step", STEP_KEYS)
}

fn trace_scenario() -> Scenario {
    parse("rate-trace", TRACE_KEYS)
}

/// Expects `keys` to be refused naming `field`, the message holding every hint.
fn refused(keys: &str, path: &Path, field: &str, hints: &[&str]) {
    let e = parse_at("bad-schedule", keys, path).expect_err(keys);
    let shown = e.to_string();
    assert_eq!(e.field(), Some(field), "{shown}");
    for h in hints {
        assert!(shown.contains(h), "`{h}` not in: {shown}");
    }
    eprintln!("schedule: refused as expected: {shown}");
}

fn scratch() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("modern-schedule-input");
    std::fs::create_dir_all(d.join("traces")).unwrap();
    d
}

/// Host-side checks: scenarios parse, bad input is refused naming the field.
pub fn parse_checks() {
    let p = step_scenario().expand(Profile::Ci, 1).unwrap().remove(0);
    assert_eq!(
        p.rate_schedule,
        [
            Step {
                at_s: 5.0,
                value: 5.0
            },
            Step {
                at_s: 10.0,
                value: 20.0
            }
        ]
    );
    assert_eq!(p.buffer_pkts, STEP_BUFFER_PKTS);
    let d = delay_scenario().expand(Profile::Ci, 1).unwrap().remove(0);
    assert_eq!(d.delay_schedule.len(), 2);
    let t = trace_scenario().expand(Profile::Ci, 1).unwrap().remove(0);
    let used = t.rate_trace.as_ref().expect("the trace is recorded");
    assert_eq!(used.bin_ms, 100);
    assert!(
        (t.rate_mbit - used.mean_mbit).abs() < 1e-9,
        "rate_mbit defaults to the mean"
    );
    assert_eq!(t.rate_schedule[0].at_s, 0.0);

    let nowhere = Path::new("<test>/bad.toml");
    refused(
        "rate_mbit = 20\nbuffer_pkts = 40\n\
         rate_schedule = [{ at_s = 5, rate_mbit = 5 }, { at_s = 4, rate_mbit = 20 }]",
        nowhere,
        "defaults.rate_schedule[1].at_s",
        &["time order", "defaults.rate_schedule[0]"],
    );
    refused(
        "rate_mbit = 20\nbuffer_pkts = 40\nrate_schedule = [{ at_s = 5, rate_mbit = 0 }]",
        nowhere,
        "defaults.rate_schedule[0].rate_mbit",
        &["> 0 Mbit/s"],
    );
    refused(
        "rate_mbit = 20\nbuffer_pkts = 40\nrate_schedule = [{ at_s = 16, rate_mbit = 5 }]",
        nowhere,
        "defaults.rate_schedule[0].at_s",
        &["duration_s = 15"],
    );
    refused(
        "rate_mbit = 20\nbuffer_pkts = 40\ndelay_schedule = [{ at_s = 2, rtt_ms = -1 }]",
        nowhere,
        "defaults.delay_schedule[0].rtt_ms",
        &["≥ 0 ms"],
    );
    refused(
        "buffer_pkts = 40\nrate_schedule = [{ at_s = 5, rate_mbit = 5 }]\n\
         rate_trace = \"traces/step_down_up.mm\"",
        nowhere,
        "defaults.rate_trace",
        &["give one of rate_schedule, rate_trace"],
    );
    // A trace the test writes, next to a scenario file that names it relatively.
    let dir = scratch();
    let file = dir.join("bad.toml");
    std::fs::write(dir.join("traces/bad.mm"), "1\n2\n3.5\n4\n").unwrap();
    std::fs::write(dir.join("traces/empty.mm"), "").unwrap();
    std::fs::write(dir.join("traces/ok.mm"), "1\n2\n3\n4\n").unwrap();
    refused(
        "buffer_pkts = 40\nrate_trace = \"traces/bad.mm\"",
        &file,
        "defaults.rate_trace",
        &["traces/bad.mm line 3", "\"3.5\""],
    );
    refused(
        "buffer_pkts = 40\nrate_trace = \"traces/empty.mm\"",
        &file,
        "defaults.rate_trace",
        &["empty"],
    );
    refused(
        "buffer_pkts = 40\nrate_trace = \"traces/none.mm\"",
        &file,
        "defaults.rate_trace",
        &["no trace file"],
    );
    // 4 packets per 4 ms = 12 Mbit/s, read from the scenario's directory.
    let ok = parse_at(
        "ok-trace",
        "buffer_pkts = 40\nrate_trace = \"traces/ok.mm\"",
        &file,
    )
    .unwrap()
    .expand(Profile::Ci, 1)
    .unwrap()
    .remove(0);
    assert!((ok.rate_mbit - 12.0).abs() < 1e-9, "{}", ok.rate_mbit);

    // The shipped traces parse and bin to their mean rates.
    for (name, text) in BUILTIN_TRACES {
        let t = Trace::parse(text, name).unwrap();
        let period_s = t.period_ms() as f64 / 1000.0;
        let steps = t.bin(100, period_s);
        let binned = schedule::mean_over(&steps, 0.0, 0.0, period_s);
        eprintln!(
            "schedule: {name}: {} opportunities over {period_s} s, mean {:.3} Mbit/s, \
             binned (100 ms) {binned:.3} Mbit/s in {} steps",
            t.opportunities_ms.len(),
            t.mean_mbit(),
            steps.len()
        );
        assert!((binned - t.mean_mbit()).abs() / t.mean_mbit() < 0.01);
    }
    let step = Trace::parse(BUILTIN_TRACES[1].1, "step").unwrap();
    let s = step.bin(100, 15.0);
    for (from, want) in [(0.0, 20.0), (5.0, 5.0), (10.0, 20.0)] {
        let got = schedule::mean_over(&s, 0.0, from, from + 5.0);
        assert!(
            (got - want).abs() / want < 0.01,
            "step trace {from} s: {got}"
        );
    }
}

/// The one run of `sc` (cubic) and its record.
fn run_one(sc: &Scenario, root: &Path) -> RunRecord {
    let (dir, _) = run_ci(sc, &["cubic"], root);
    let (_, mut records) = read_records(&dir).expect("run records");
    assert_eq!(records.len(), 1);
    records.remove(0)
}

/// Bytes the bottleneck had sent at `t` s, interpolated between queue samples.
fn sent_at(r: &RunRecord, t: f64) -> f64 {
    let q = &r.queue;
    let i = q.partition_point(|p| p.t_s < t);
    if i == 0 || i == q.len() {
        return f64::NAN;
    }
    let (a, b) = (&q[i - 1], &q[i]);
    let f = (t - a.t_s) / (b.t_s - a.t_s);
    a.sent_bytes as f64 + f * (b.sent_bytes as f64 - a.sent_bytes as f64)
}

/// Achieved rate over `[from, to)` s at the bottleneck (L2 bytes, as tbf counts), Mbit/s.
fn achieved(r: &RunRecord, from: f64, to: f64) -> f64 {
    (sent_at(r, to) - sent_at(r, from)) * 8.0 / 1e6 / (to - from)
}

/// Runs in the netem kernel; results under `root`.
pub fn checks(root: &Path) {
    // (a) A rate step 20 -> 5 -> 20 Mbit/s at 5 s and 10 s.
    let r = run_one(&step_scenario(), root);
    let log = r.schedule.as_ref().expect("the run records its schedule");
    assert_eq!(log.changes.len(), 2, "{log:?}");
    let err = log.error.expect("timing error");
    eprintln!(
        "schedule: step run: timing error (completion - schedule) max {:.1} ms, median {:.1} ms",
        err.max_ms, err.median_ms
    );
    for c in &log.changes {
        eprintln!(
            "schedule:   {} = {} due {:.0} ms, written {:.1} ms, completed {:.1} ms; \
             tc then showed rate {:?} Mbit/s, child limit {:?} packets",
            c.what,
            c.value,
            c.scheduled_ms,
            c.written_ms,
            c.completed_ms,
            c.read_rate_mbit,
            c.read_child_limit
        );
        let late = c.completed_ms - c.scheduled_ms;
        assert!(
            (0.0..50.0).contains(&late),
            "change at {} ms completed {late:.1} ms off",
            c.scheduled_ms
        );
        assert_eq!(c.read_rate_mbit, Some(c.value), "{c:?}");
        assert_eq!(
            c.read_child_limit,
            Some(u64::from(STEP_BUFFER_PKTS)),
            "the pfifo limit must stay the scenario's after a tbf change: {c:?}"
        );
    }
    let p = &r.spec;
    let last = r.queue.last().map_or(0.0, |q| q.t_s);
    let mut checked = 0;
    let mut off = Vec::new();
    for k in 0..(DURATION_S as usize) {
        let (from, to) = (k as f64, k as f64 + 1.0);
        let got = achieved(&r, from, to);
        let want = schedule::value_at(&p.rate_schedule, p.rate_mbit, from);
        let since_change = [0.0, 5.0, 10.0]
            .iter()
            .filter(|c| **c <= from)
            .map(|c| from - c)
            .fold(f64::INFINITY, f64::min);
        // From the second second after each change on; after the start, from the third
        // (the flow starts a little after the run's t0, then slow start).
        let judged = since_change >= if from < 5.0 { 2.0 } else { 1.0 } && to <= last;
        eprintln!(
            "schedule:   [{from:>2}, {to:>2}) s: {got:6.2} Mbit/s, schedule {want:5.2}{}",
            if judged { "" } else { " (not judged)" }
        );
        if judged {
            if (got - want).abs() / want > 0.10 {
                off.push(format!("[{from}, {to}) s: {got:.2} Mbit/s"));
            }
            checked += 1;
        }
    }
    assert!(
        off.is_empty(),
        "achieved rate more than 10 % off the schedule: {off:?}"
    );
    assert!(checked >= 10, "only {checked} seconds judged");

    // (c) A delay step 20 -> 60 -> 20 ms: the flow's RTT follows it.
    let r = run_one(&delay_scenario(), root);
    let log = r.schedule.as_ref().expect("the run records its schedule");
    let err = log.error.expect("timing error");
    eprintln!(
        "schedule: delay run: {} changes, timing error max {:.1} ms, median {:.1} ms",
        log.changes.len(),
        err.max_ms,
        err.median_ms
    );
    assert_eq!(log.changes.len(), 2);
    assert!(err.max_ms < 50.0, "{log:?}");
    let srtt_ms = |from: f64, to: f64| -> f64 {
        r.series[0]
            .points
            .iter()
            .filter(|p| p.t_s >= from && p.t_s < to && p.srtt_us > 0)
            .map(|p| f64::from(p.srtt_us) / 1000.0)
            .fold(f64::INFINITY, f64::min)
    };
    let (before, during, after) = (srtt_ms(1.5, 3.0), srtt_ms(4.0, 6.0), srtt_ms(7.5, 9.0));
    eprintln!(
        "schedule:   smallest srtt: {before:.1} ms in [1.5, 3) s (20 ms added), \
         {during:.1} ms in [4, 6) s (60 ms), {after:.1} ms in [7.5, 9) s (20 ms)"
    );
    // The queue adds at most 20 packets at 10 Mbit/s = 24 ms.
    assert!(
        before < 20.0 + 30.0 && after < 20.0 + 30.0,
        "{before} {after}"
    );
    assert!((58.0..60.0 + 30.0).contains(&during), "{during}");

    // (b) The shipped LTE-like trace, binned at 100 ms, replays at its mean rate.
    let r = run_one(&trace_scenario(), root);
    let log = r.schedule.as_ref().expect("the run records its schedule");
    let err = log.error.expect("timing error");
    let p = &r.spec;
    let (from, to) = (
        2.0,
        (DURATION_S - 1.0).min(r.queue.last().map_or(0.0, |q| q.t_s)),
    );
    let want = schedule::mean_over(&p.rate_schedule, p.rate_mbit, from, to);
    let got = achieved(&r, from, to);
    eprintln!(
        "schedule: trace run: {} changes applied ({} not), timing error max {:.1} ms, \
         median {:.1} ms; over [{from}, {to:.1}) s achieved {got:.2} Mbit/s, trace (binned) \
         {want:.2} Mbit/s ({:+.1} %)",
        log.changes.len(),
        log.not_applied,
        err.max_ms,
        err.median_ms,
        (got - want) / want * 100.0
    );
    for k in 0..(DURATION_S as usize) {
        let (a, b) = (k as f64, k as f64 + 1.0);
        eprintln!(
            "schedule:   [{a:>2}, {b:>2}) s: {:6.2} Mbit/s, trace {:5.2}",
            achieved(&r, a, b),
            schedule::mean_over(&p.rate_schedule, p.rate_mbit, a, b)
        );
    }
    assert!(
        (got - want).abs() / want <= 0.10,
        "the trace replayed at {got:.2} Mbit/s, its mean is {want:.2} Mbit/s"
    );
    assert!(
        log.changes
            .iter()
            .all(|c| c.read_child_limit == Some(u64::from(p.buffer_pkts))),
        "the pfifo limit changed during the trace"
    );
}
