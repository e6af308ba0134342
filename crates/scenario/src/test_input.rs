//! Test inputs shared by the submodules: a shipped scenario by name, and a valid scenario
//! for the error tests with the helper that breaks it.

use std::path::Path;

use super::{find, Profile, Scenario};

/// A shipped scenario by name or id; panics with the error if there is none.
pub(super) fn shipped(name: &str) -> Scenario {
    find(name).unwrap_or_else(|e| panic!("{e}"))
}

/// A valid scenario: two flows, a 2 × 3 paper grid and a 3-point ci sweep of `rtt_ms`.
pub(super) const GOOD: &str = r#"
id = "T9.1"
name = "bad-input"
title = "A scenario for error tests"
source = "test"
metrics = ["M1"]
plots = ["cwnd"]
x = "rtt_ms"

[defaults]
rate_mbit = 10
rtt_ms = 42
buffer_bdp = 0.2

[[flows]]
cc = "{algo}"

[[flows]]
cc = "reno"
start_s = 5

[profiles.paper]
sweep = { rate_mbit = [10, 250], rtt_ms = [22, 42, 82] }
duration_s = 600
repeat = 5

[profiles.ci]
sweep = { rtt_ms = [22, 42, 82] }
duration_s = 40
"#;

/// Parses `GOOD` with `from` replaced by `to`, expecting an error about `field` whose
/// message contains every `hint`.
pub(super) fn rejects(from: &str, to: &str, field: &str, hints: &[&str]) {
    assert!(GOOD.contains(from), "{from}");
    let text = GOOD.replacen(from, to, 1);
    let e = Scenario::parse(&text, Path::new("/tmp/cases/bad.toml")).expect_err(to);
    let shown = e.to_string();
    assert!(shown.starts_with("/tmp/cases/bad.toml: "), "{shown}");
    assert_eq!(e.field(), Some(field), "{shown}");
    for h in hints {
        assert!(shown.contains(h), "`{h}` not in: {shown}");
    }
}

#[test]
fn the_error_test_template_is_itself_valid() {
    let s = Scenario::parse(GOOD, Path::new("good.toml")).unwrap();
    assert_eq!(s.expand(Profile::Paper, 1).unwrap().len(), 6);
    assert_eq!(s.expand(Profile::Ci, 1).unwrap().len(), 3);
}
