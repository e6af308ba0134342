//! The testbed of a modern CC evaluation (spec: issue 19): AQM bottlenecks and ECN
//! ([`aqm`]), time-varying links and mahimahi traces ([`schedule`]), the parking lot
//! ([`parking`]).

#[path = "modern/aqm.rs"]
mod aqm;
#[path = "modern/parking.rs"]
mod parking;
#[path = "modern/schedule.rs"]
mod schedule;

use std::path::PathBuf;

use cctl_tests::guest::Part;

/// The parts, in the order they run.
pub const PARTS: &[Part] = &[
    Part {
        name: "modern-aqm",
        guest_s: 82,
        run: || aqm::checks(&results_root().join("aqm")),
    },
    Part {
        name: "modern-schedule",
        guest_s: 47,
        run: || schedule::checks(&results_root().join("schedule")),
    },
    Part {
        name: "modern-parking",
        guest_s: 48,
        run: || parking::checks(&results_root().join("parking")),
    },
];

fn results_root() -> PathBuf {
    super::results_root().join("modern")
}

/// What needs no kernel: the test scenarios parse, and bad input is refused naming the
/// field (on the host, before a guest boots).
pub fn parse_checks() {
    aqm::parse_checks();
    schedule::parse_checks();
    parking::parse_checks();
}
