//! The results format does not change: a directory written by `cctl bench run` at commit
//! bcd7aa4 (before the testbed was split into crates; host-sweep, reno, point 0) reads
//! back, every record and the metadata write out as the same JSON, and its summary is
//! computed again to the same values.

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
    assert_eq!(
        serde_json::to_value(&records[0]).unwrap(),
        json_of(&fixture().join("runs/reno/p0-r0/run.json")),
        "run.json changed shape"
    );
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
