//! The JSON-lines outputs of `cctl list --json` and `cctl bench list --json` carry the
//! format version and exactly the fields docs/reference/json.md lists for them.

use std::collections::BTreeSet;

mod common;
use common::{cctl, root, text};

/// The fields docs/reference/json.md lists in the table under `heading`.
fn documented(heading: &str) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("docs/reference/json.md")).unwrap();
    let fields: BTreeSet<String> = text
        .lines()
        .skip_while(|l| *l != heading)
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('`').nth(1).expect("| `field` | ...").to_string())
        .collect();
    assert!(!fields.is_empty(), "no table under {heading:?}");
    fields
}

/// The lines of `cctl args`, parsed.
fn lines(args: &[&str]) -> Vec<serde_json::Value> {
    let o = cctl(args);
    assert!(o.status.success(), "cctl {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn keys(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_object().expect("an object").keys().cloned().collect()
}

#[test]
fn list_json_lines_have_the_format_version_and_the_documented_fields() {
    let all = lines(&["list", "--json"]);
    for kind in ["algorithm", "registered"] {
        let want = documented(&format!("### kind `{kind}`"));
        let of_kind: Vec<_> = all.iter().filter(|v| v["kind"] == kind).collect();
        assert!(!of_kind.is_empty(), "no {kind} line");
        for v in of_kind {
            assert_eq!(v["format"], cctl_loader::JSON_FORMAT, "{v}");
            assert_eq!(keys(v), want, "{v}");
        }
    }
    let other = documented("### kind `leftover` and `unreachable`");
    for v in all
        .iter()
        .filter(|v| v["kind"] == "leftover" || v["kind"] == "unreachable")
    {
        assert_eq!(v["format"], cctl_loader::JSON_FORMAT, "{v}");
        assert!(keys(v).is_subset(&other), "{v}");
    }
}

#[test]
fn bench_list_json_lines_have_the_format_version_and_the_documented_fields() {
    let want = documented("## `cctl bench list --json`");
    let all = lines(&["bench", "list", "--json"]);
    assert!(all.len() > 20);
    for v in &all {
        assert_eq!(v["format"], 1, "{v}");
        assert_eq!(keys(v), want, "{v}");
    }
}
