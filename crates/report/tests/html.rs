//! The HTML report (`index.html`) of results directories: the fixture of bcd7aa4 with its
//! summary and plots written again, and a committed example that holds only its summary.json
//! and plots. The page holds the tables of summary.md cell for cell, a definition for every
//! metric, every plot by a path that exists, and escaped text only.

use std::path::{Path, PathBuf};

use cctl_report::html;
use cctl_report::record::read_records;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fresh, empty directory under the system's temporary directory.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cctl-html-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A table: its metric name and its rows (header first), cell texts.
type Table = (String, Vec<Vec<String>>);

/// The metric tables of a summary.md: each `## name` section up to `## Expectations`.
fn markdown_tables(md: &str) -> Vec<Table> {
    let mut out: Vec<Table> = Vec::new();
    for line in md.lines() {
        if let Some(name) = line.strip_prefix("## ") {
            if name == "Expectations" {
                break;
            }
            out.push((name.to_string(), Vec::new()));
        } else if let (Some(t), true) = (out.last_mut(), line.starts_with('|')) {
            if !line.starts_with("|---") {
                let cells = line.trim_matches('|').split(" | ");
                t.1.push(cells.map(|c| c.trim().to_string()).collect());
            }
        }
    }
    out
}

/// The text between each `open` and the next `close` in `s`.
fn between<'a>(s: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    s.split(open)
        .skip(1)
        .filter_map(|p| p.split_once(close).map(|(x, _)| x))
        .collect()
}

/// The summary tables of an index.html, cells decoded, and each one's hover text.
fn html_tables(page: &str) -> Vec<(Table, String)> {
    let decode = |s: &str| html_escape::decode_html_entities(s).into_owned();
    between(page, "<table class=\"summary\">", "</table>")
        .into_iter()
        .map(|t| {
            let title = between(t, "<abbr title=\"", "\">")[0];
            let name = between(t, "\">", "</abbr>")[0];
            let rows = between(t, "<tr>", "</tr>")
                .into_iter()
                .map(|r| {
                    r.split("</t")
                        .filter_map(|c| c.rsplit_once('>').map(|(_, x)| decode(x)))
                        .filter(|c| !c.is_empty() || r.contains("<td></td>"))
                        .collect()
                })
                .collect();
            ((decode(name), rows), decode(title))
        })
        .collect()
}

/// Every `src="..."` of an `<img>`, decoded.
fn image_sources(page: &str) -> Vec<String> {
    between(page, "<img src=\"", "\"")
        .into_iter()
        .map(|s| html_escape::decode_html_entities(s).into_owned())
        .collect()
}

/// Checks what every report must hold: the tables of `summary.md` cell for cell with a
/// definition each, a legend per table, the plots by paths that exist, nothing fetched.
fn check_page(dir: &Path, page: &str, plots: usize) {
    assert!(page.starts_with("<!DOCTYPE html>"));
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    let want = markdown_tables(&md);
    let got = html_tables(page);
    assert!(!want.is_empty());
    assert_eq!(
        got.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>(),
        want,
        "the tables differ from summary.md's"
    );
    for ((name, _), hover) in &got {
        let d = cctl_metrics::names::definition(name).expect("every metric is defined");
        assert!(hover.starts_with(d.definition), "{name}: {hover}");
        assert!(
            hover.ends_with(&format!("Unit: {}.", d.unit)),
            "{name}: {hover}"
        );
    }
    assert_eq!(page.matches("<p class=\"legend\"><b>").count(), got.len());
    let srcs = image_sources(page);
    assert_eq!(srcs.len(), plots, "{srcs:?}");
    for s in &srcs {
        assert!(dir.join(s).is_file(), "{s} is not beside index.html");
    }
    for never in ["http://", "https://", "<script", "<link"] {
        assert!(!page.contains(never), "the page holds {never}");
    }
}

#[test]
fn the_report_of_the_bcd7aa4_fixture_holds_its_summary_tables_and_plots() {
    let dir = scratch("fixture");
    copy_tree(
        &repo().join("crates/report/tests/fixtures/results-bcd7aa4"),
        &dir,
    );
    let (meta, records) = read_records(&dir).unwrap();
    let sc = cctl_scenario::find(
        repo()
            .join("tests/scenarios/host-sweep.toml")
            .to_str()
            .unwrap(),
    )
    .unwrap();
    let s = cctl_report::write::write_all(&dir, &meta, &records, &sc, |_| None).unwrap();
    let path = html::write(&dir, &s, &sc).unwrap();
    assert_eq!(path, dir.join("index.html"));
    let page = std::fs::read_to_string(&path).unwrap();
    let pngs = html::plot_files(&dir).unwrap();
    assert!(!pngs.is_empty(), "the cwnd plot is drawn");
    assert!(
        pngs.iter().all(|p| p.image.starts_with("plots/")),
        "{pngs:?}"
    );
    check_page(&dir, &page, pngs.len());
    for fact in [
        "<dt>scenario</dt><dd>host-sweep (X.host)</dd>",
        "<dt>source</dt><dd>cctl tests</dd>",
        "<b>reno</b> (kernel name bpf_reno, cctl, under test)",
        "<dt>profile</dt><dd>ci</dd>",
        "<dt>seed</dt><dd>1</dd>",
        "<dt>kernel</dt><dd>6.18.44-fc-v657</dd>",
        "<b>ci profile</b>",
    ] {
        assert!(page.contains(fact), "no {fact}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The committed T0.2 example has no metadata.json and no runs: the page comes from its
/// summary.json, with the scenario's expectations judged again.
#[test]
fn a_directory_with_only_its_summary_json_gets_a_report_with_its_expectations() {
    let dir = scratch("summary-only");
    copy_tree(&repo().join("docs/results/t0_2-250mbit-200s"), &dir);
    let _ = std::fs::remove_file(dir.join("index.html"));
    let (s, path) = html::write_from_summary(&dir).unwrap();
    let page = std::fs::read_to_string(path).unwrap();
    check_page(&dir, &page, 6);
    assert!(!s.expectations.is_empty(), "T0.2 has [[expect]] tables");
    assert_eq!(
        page.matches("<li class=\"pass\">PASS ").count()
            + page.matches("<li class=\"fail\">FAIL ").count()
            + page.matches("<li class=\"not_run\">NOT RUN ").count(),
        s.expectations.len()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn text_from_the_results_is_escaped() {
    let dir = scratch("escape");
    copy_tree(&repo().join("docs/results/t0_2-250mbit-200s"), &dir);
    let (mut s, _) = html::write_from_summary(&dir).unwrap();
    s.metadata.kernel = "6.12 <script>alert(1)</script> & \"more\"".into();
    for r in &mut s.rows {
        r.algo = format!("{}<i>", r.algo);
    }
    let sc = cctl_scenario::find("rtt-unfairness").unwrap();
    let page = html::render(&s, &sc, &[]);
    assert!(!page.contains("<script>") && !page.contains("<i>"));
    assert!(page.contains("6.12 &lt;script&gt;alert(1)&lt;/script&gt; &amp; \"more\""));
    assert!(page.contains("<th>reno&lt;i&gt;</th>"));
    assert!(page.contains("No plots in this directory."));
    std::fs::remove_dir_all(&dir).unwrap();
}
