//! `cctl bench report DIR --html` on a directory that holds only a summary.json and its
//! plots (a committed example): it writes DIR/index.html from the summary alone and leaves
//! the rest as it was; without `--html` such a directory is refused as bad input.

use std::path::PathBuf;

mod common;
use common::root;

/// A copy of the committed T0.2 example in a fresh temporary directory.
fn example() -> PathBuf {
    let d = std::env::temp_dir().join(format!("cctl-report-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let from = root().join("docs/results/t0_2-250mbit-200s");
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_name() != "index.html" {
            std::fs::copy(e.path(), d.join(e.file_name())).unwrap();
        }
    }
    d
}

#[test]
fn report_html_writes_index_html_from_a_summary_json_alone() {
    let dir = example();
    let d = dir.to_str().unwrap();
    let before = std::fs::read(dir.join("summary.md")).unwrap();

    let o = common::cctl(&["bench", "report", d]);
    assert_eq!(o.status.code(), Some(2), "{}", common::text(&o));
    assert!(common::text(&o).contains("has no metadata.json"));

    let o = common::cctl(&["bench", "report", d, "--html"]);
    assert_eq!(o.status.code(), Some(0), "{}", common::text(&o));
    assert!(common::text(&o).contains(&format!("html: {d}/index.html")));
    let page = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(page.contains("<h1>rtt-unfairness (T0.2) — Fairness, different RTTs"));
    assert_eq!(page.matches("<img src=\"cwnd-").count(), 6);
    assert_eq!(std::fs::read(dir.join("summary.md")).unwrap(), before);
    std::fs::remove_dir_all(&dir).unwrap();
}
