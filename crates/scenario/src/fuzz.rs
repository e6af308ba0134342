//! The scenario parser fuzzed (proptest, through `cctl_fuzz`): random documents
//! under the schema's keys and mutated shipped scenarios never panic, and every error
//! names its field (or, for TOML syntax, its line and column).

use std::path::Path;

use cctl_fuzz as fuzz;

use super::{Scenario, ScenarioError, BUILTIN_FILES, PARAMS};

/// The schema's keys other than its numeric parameters ([`PARAMS`]), and plausible values.
const OTHER_WORDS: &[&str] = &[
    "id",
    "name",
    "title",
    "source",
    "metrics",
    "plots",
    "x",
    "choices",
    "defaults",
    "flows",
    "profiles",
    "paper",
    "ci",
    "bdp_rtt",
    "loss_model",
    "web_model",
    "web_cc",
    "qdisc",
    "ecn",
    "fq_codel",
    "pie",
    "red",
    "dctcp",
    "repeat",
    "seed",
    "note",
    "vars",
    "sweep",
    "cc",
    "start_s",
    "stop_s",
    "count",
    "start_step_s",
    "size_mb",
    "on_s",
    "off_s",
    "uniform",
    "choice",
    "exponential",
    "{algo}",
    "{rtt_ms}",
    "{duration_s}*2",
    "T0.1",
    "M1",
    "M17",
    "cwnd",
    "flow1",
    "min",
    "random",
    "periodic",
    "p0",
    "surge",
    "reno",
    "rate_schedule",
    "delay_schedule",
    "rate_trace",
    "trace_bin_ms",
    "tbf_burst_ms",
    "at_s",
    "ramp_s",
    "topology",
    "bottlenecks",
    "path",
    "probes",
    "interval_ms",
    "size_bytes",
    "dscp",
    "kind",
    "tcp",
    "udp-cbr",
    "direction",
    "forward",
    "reverse",
];

/// The words documents are made of: [`PARAMS`] and [`OTHER_WORDS`].
fn words() -> &'static [&'static str] {
    let all: Vec<&'static str> = PARAMS.iter().chain(OTHER_WORDS).copied().collect();
    Vec::leak(all)
}

/// The last segment of a field path (`flows[1].start_s` → `start_s`), without index.
fn last_segment(field: &str) -> &str {
    let last = field.rsplit('.').next().unwrap_or(field);
    last.split('[').next().unwrap_or(last)
}

fn check(doc: &str) {
    match Scenario::parse(doc, Path::new("/tmp/fuzz.toml")) {
        Ok(_) => {}
        Err(ScenarioError::Syntax { message, .. }) => {
            assert!(!message.trim().is_empty(), "an empty syntax error");
        }
        Err(ScenarioError::Invalid { error, .. }) => {
            assert!(
                !error.field.is_empty(),
                "an error without field: {}",
                error.message
            );
            assert!(
                !error.message.is_empty(),
                "{}: an empty message",
                error.field
            );
            let seg = last_segment(&error.field).trim_matches('`');
            // Missing keys are not in the document; derived names (a sweep case, an
            // expression) are checked to be non-empty only.
            if !error.message.starts_with("missing")
                && seg.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                assert!(
                    doc.contains(seg) || fuzz::unescaped(doc).contains(seg),
                    "{} ({seg}) is not in the document: {}",
                    error.field,
                    error.message
                );
            }
        }
        Err(other) => panic!("an error of another kind: {other}"),
    }
}

#[test]
fn random_and_mutated_scenarios_never_panic_and_every_error_names_its_field() {
    let seeds: Vec<String> = BUILTIN_FILES
        .iter()
        .map(|(_, text)| text.to_string())
        .collect();
    let n = fuzz::run(
        "the scenario parser",
        || fuzz::documents(seeds.clone(), words()),
        check,
    );
    assert!(n > 0);
}
