//! The testbed of a modern CC evaluation (spec: issue 19), in one boot of the 6.12 guest
//! where the host kernel lacks netem: AQM bottlenecks and ECN ([`aqm`]), time-varying links
//! and mahimahi traces ([`schedule`]), the parking lot ([`parking`]).
//!
//! `CCTL_TEST_MODERN=aqm,schedule` runs only those parts (the variable follows the test
//! into the guest); unset runs all.

#[path = "modern/aqm.rs"]
mod aqm;
#[path = "modern/parking.rs"]
mod parking;
#[path = "modern/schedule.rs"]
mod schedule;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cctl_tests::{in_netem_kernel, require_root, KERNEL};

/// A part: its name and what it runs in the netem kernel (results under the path).
type Part = (&'static str, fn(&Path));

/// The parts, in the order they run.
const PARTS: &[Part] = &[
    ("aqm", aqm::checks),
    ("schedule", schedule::checks),
    ("parking", parking::checks),
];

fn results_root() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("modern-results")
}

fn selected() -> Vec<Part> {
    let want = std::env::var("CCTL_TEST_MODERN").unwrap_or_default();
    let want: Vec<&str> = want.split(',').filter(|s| !s.is_empty()).collect();
    for w in &want {
        assert!(
            PARTS.iter().any(|(n, _)| n == w),
            "CCTL_TEST_MODERN: unknown part `{w}`; parts: aqm, schedule, parking"
        );
    }
    PARTS
        .iter()
        .filter(|(n, _)| want.is_empty() || want.contains(n))
        .copied()
        .collect()
}

/// What needs no kernel: the test scenarios parse, and bad input is refused naming the
/// field (on the host, before a guest boots).
#[test]
fn scenarios_parse_and_bad_input_names_the_field() {
    aqm::parse_checks();
    schedule::parse_checks();
    parking::parse_checks();
}

#[test]
fn modern_testbed_in_a_netem_kernel() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    let root = results_root();
    in_netem_kernel(
        "modern_testbed_in_a_netem_kernel",
        &root,
        Duration::from_secs(20 * 60),
        || {
            for (name, part) in selected() {
                let t = std::time::Instant::now();
                part(&root.join(name));
                eprintln!("modern: part {name} passed in {:.0?}", t.elapsed());
            }
        },
    );
}
