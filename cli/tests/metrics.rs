//! The metric reference against the code: docs/reference/metrics.md is what `make docs`
//! generates from crates/metrics/src/names.rs (`cctl bench metrics --markdown`), and
//! `cctl bench metrics --json` lists every family and metric name once.

mod common;

#[test]
fn the_metric_reference_is_what_make_docs_generates() {
    let o = common::cctl(&["bench", "metrics", "--markdown"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    let generated = String::from_utf8(o.stdout).expect("the page is UTF-8");
    common::assert_generated("docs/reference/metrics.md", &generated);
    for k in 1..=17 {
        assert!(
            generated.contains(&format!("\n## M{k} ")),
            "no section for M{k}"
        );
    }
    for name in cctl_metrics::names::SUMMARY_METRICS {
        assert!(
            generated.contains(&format!("| `{name}` |")),
            "no row for {name}"
        );
    }
}

#[test]
fn metrics_json_has_one_line_per_family_and_per_name() {
    let o = common::cctl(&["bench", "metrics", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    let lines: Vec<serde_json::Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is a JSON object"))
        .collect();
    let families = lines
        .iter()
        .filter(|l| l.get("family").is_some() && l.get("name").is_none());
    assert_eq!(families.count(), cctl_metrics::names::FAMILIES.len());
    let names: Vec<&str> = lines.iter().filter_map(|l| l["name"].as_str()).collect();
    assert_eq!(names, cctl_metrics::names::SUMMARY_METRICS);
    let m5 = lines
        .iter()
        .find(|l| l["family"] == "M5" && l.get("name").is_none())
        .unwrap();
    assert!(
        m5["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "T0.7 convergence-time"),
        "{m5}"
    );
}
