//! The results format only grows: a directory written by `cctl bench run` at commit
//! bcd7aa4 (before the testbed was split into crates; host-sweep, reno, point 0) reads
//! back, every record and the metadata write out as the same JSON (but for the flows'
//! times, now seconds after t0), its summary is computed again to the same values, and
//! its `summary.csv` holds every value of the summary.

use std::path::Path;

use cctl_metrics::MetricParams;
use cctl_report::record::read_records;
use cctl_report::summary::summarize;
use serde_json::Value;

fn fixture() -> &'static Path {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/results-bcd7aa4"
    ))
}

fn json_of(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn a_results_directory_of_bcd7aa4_reads_and_writes_back_the_same_json() {
    let (meta, records) = read_records(fixture()).expect("the fixture reads");
    assert_eq!(records.len(), 1);
    assert_eq!(
        serde_json::to_value(&meta).unwrap(),
        json_of(&fixture().join("metadata.json")),
        "metadata.json changed shape"
    );
    // The flows' times were `{secs, nanos}` and are written as seconds after t0 now
    // (`started_s`, `ended_s`); everything else writes back as it was read.
    let mut old = json_of(&fixture().join("runs/reno/p0-r0/run.json"));
    for f in old["flows"].as_array_mut().unwrap() {
        let f = f.as_object_mut().unwrap();
        for (from, to) in [("started", "started_s"), ("ended", "ended_s")] {
            let t = f.remove(from).unwrap();
            let s = t["secs"].as_u64().unwrap() as f64 + t["nanos"].as_u64().unwrap() as f64 / 1e9;
            f.insert(to.into(), s.into());
        }
    }
    assert_eq!(
        serde_json::to_value(&records[0]).unwrap(),
        old,
        "run.json changed shape"
    );
}

/// A flow's start and end read from the `{secs, nanos}` of old files and from the seconds
/// after t0 of new ones, and write as seconds.
#[test]
fn flow_times_read_in_the_old_and_the_new_form_and_write_as_seconds_after_t0() {
    let (_, records) = read_records(fixture()).unwrap();
    let f = &records[0].flows[0];
    assert_eq!(f.started, std::time::Duration::new(0, 361_878));
    assert_eq!(f.ended, std::time::Duration::new(4, 219_491_348));
    let v = serde_json::to_value(f).unwrap();
    assert_eq!(v["started_s"], 0.000361878);
    assert_eq!(v["ended_s"], 4.219491348);
    assert!(
        v.get("started").is_none() && v.get("ended").is_none(),
        "{v}"
    );
    let back: cctl_netem::FlowResult = serde_json::from_value(v).unwrap();
    assert_eq!(&back, f);
    let mut bad = serde_json::to_value(f).unwrap();
    bad["ended_s"] = (-1.0).into();
    let e = serde_json::from_value::<cctl_netem::FlowResult>(bad).unwrap_err();
    assert!(e.to_string().contains("expected seconds, 0 or more"), "{e}");
}

/// The run's t0 is recorded on both clocks: `t0_ns` (CLOCK_MONOTONIC, the samples'
/// `ts_ns`) and `t0_utc` (RFC 3339); files without them read as `None`.
#[test]
fn t0_utc_writes_as_rfc3339_and_old_files_have_none() {
    let (_, records) = read_records(fixture()).unwrap();
    let mut r = records[0].clone();
    assert_eq!((r.t0_ns, r.t0_utc), (None, None));
    r.t0_ns = Some(5_000_000_000);
    r.t0_utc = Some("2026-12-02T00:41:07.123456789Z".parse().unwrap());
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["t0_utc"], "2026-12-02T00:41:07.123456789Z");
    assert_eq!(v["t0_ns"], 5_000_000_000u64);
    let back: cctl_report::record::RunRecord = serde_json::from_value(v).unwrap();
    assert_eq!(back.t0_utc, r.t0_utc);
}

/// `summary.csv` has the documented columns and one row per value of `summary.json`'s
/// `runs[].values`, with the flow and unit taken from the metric's name.
#[test]
fn summary_csv_has_one_row_per_run_metric_value() {
    let (meta, records) = read_records(fixture()).unwrap();
    let s = summarize(&meta, &records, &MetricParams::default());
    let dir = std::env::temp_dir().join(format!("cctl-summary-csv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    cctl_report::long::write(&dir, &s).unwrap();
    let mut rd = csv::Reader::from_path(dir.join("summary.csv")).unwrap();
    let header: Vec<String> = rd.headers().unwrap().iter().map(String::from).collect();
    assert_eq!(header, cctl_report::long::COLUMNS);
    let rows: Vec<csv::StringRecord> = rd.records().map(Result::unwrap).collect();
    std::fs::remove_dir_all(&dir).unwrap();
    let values: usize = s.runs.iter().map(|r| r.values.len()).sum();
    assert!(values > 10);
    assert_eq!(rows.len(), values);
    let find = |metric: &str| {
        rows.iter()
            .find(|r| &r[4] == metric)
            .unwrap_or_else(|| panic!("no {metric} in {rows:?}"))
    };
    let m1 = find("M1 flow{N}");
    assert_eq!(
        m1.iter().take(6).collect::<Vec<_>>(),
        ["runs/reno/p0-r0", "0", "reno", "1", "M1 flow{N}", "Mbit/s"]
    );
    let want = s.runs[0].values["M1 flow1 (Mbit/s)"];
    assert_eq!(m1[6].parse::<f64>().unwrap(), want);
    let jain = find("M8 goodput");
    assert_eq!((&jain[3], &jain[5]), ("", "Mbit/s"), "run-level: no flow");
}

#[test]
fn the_summary_of_a_bcd7aa4_directory_is_computed_again_to_the_same_values() {
    let (meta, records) = read_records(fixture()).unwrap();
    let s = summarize(&meta, &records, &MetricParams::default());
    assert_eq!(
        serde_json::to_value(&s).unwrap(),
        json_of(&fixture().join("summary.json"))
    );
}

/// A directory written before clocks were recorded ran on the real clock: it resumes and
/// merges with a real-clock one, and a virtual-clock one is refused, naming the field.
#[test]
fn directories_of_different_clocks_are_not_merged() {
    use cctl_report::record::ClockRecord;
    use cctl_report::resume::check_compatible;
    let (old, _) = read_records(fixture()).unwrap();
    assert_eq!(old.clock, None);
    let mut real = old.clone();
    real.clock = Some(ClockRecord::host());
    assert!(check_compatible(&old, &real, "merging", "merged").is_ok());
    let mut virt = old.clone();
    virt.clock = Some(ClockRecord {
        clock: "virtual".into(),
        icount_shift: Some(0),
        machine: "tcg".into(),
        vcpus: Some(1),
        memory_mb: Some(2048),
        qemu: None,
    });
    let e = check_compatible(&old, &virt, "merging", "merged").unwrap_err();
    assert_eq!(
        (e.field, e.left.as_str(), e.right.as_str()),
        ("clock", "real", "virtual")
    );
    assert!(
        e.to_string().contains("clock differs: real vs virtual"),
        "{e}"
    );
}

/// Every metric name the summary writes is one a scenario's `[[expect]]` may name.
#[test]
fn every_summary_metric_name_is_a_known_name() {
    let (meta, records) = read_records(fixture()).unwrap();
    let s = summarize(&meta, &records, &MetricParams::default());
    let names: Vec<&String> = s.rows.iter().flat_map(|r| r.metrics.keys()).collect();
    assert!(names.len() > 10, "{names:?}");
    for n in names {
        assert!(cctl_metrics::names::is_summary_metric(n), "{n:?}");
    }
}
