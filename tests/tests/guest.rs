//! Every check that needs a netem kernel, after one boot per guest: on these hosts (no
//! sch_netem) the test re-runs itself in guests of Debian's 6.12 kernel on the virtual
//! clock, side by side, each running a share of the parts ([`cctl_tests::guest`]; set
//! `CCTL_TEST_GUESTS` for more guests on a host with more cores, `CCTL_TEST_PARTS` to run
//! some parts only). Where the running kernel has netem the parts run here.
//!
//! - [`netem`]: benchmark scenarios on a netem dumbbell against what the papers describe;
//! - [`delay_models`]: FAST, Compound and Africa's flow-level behaviour;
//! - [`modern`]: AQM and ECN, time-varying links, the parking lot;
//! - [`load`]: every algorithm and profile loads in the guest kernel.

#[path = "guest/delay_models.rs"]
mod delay_models;
#[path = "guest/load.rs"]
mod load;
#[path = "guest/modern.rs"]
mod modern;
#[path = "guest/netem.rs"]
mod netem;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cctl_tests::guest::{in_netem_kernel, Part};
use cctl_tests::{require_root, KERNEL};

/// Where the parts write their results (writable in the guests).
fn results_root() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("guest-results")
}

/// Every part, in the order they run.
fn parts() -> Vec<Part> {
    [
        netem::PARTS,
        delay_models::PARTS,
        modern::PARTS,
        load::PARTS,
    ]
    .concat()
}

/// What needs no kernel: the test scenarios parse, and bad input is refused naming the
/// field (on the host, before a guest boots).
#[test]
fn the_test_scenarios_are_valid_and_bad_input_names_the_field() {
    netem::parse_checks();
    modern::parse_checks();
}

#[test]
fn part_names_are_unique() {
    let mut names: Vec<&str> = parts().iter().map(|p| p.name).collect();
    names.sort_unstable();
    let n = names.len();
    names.dedup();
    assert_eq!(names.len(), n, "{names:?}");
}

#[test]
fn checks_in_a_netem_kernel() {
    let _k = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    require_root();
    in_netem_kernel(
        "checks_in_a_netem_kernel",
        &results_root(),
        Duration::from_secs(60 * 60),
        &parts(),
    );
}
