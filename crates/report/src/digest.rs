//! A run's result digest: one SHA-256 over what the run measured, so that two people who ran
//! the same request compare one line instead of two directories.
//!
//! The digest covers, in this order, a run directory's `samples.csv`, `queue.csv`,
//! `delays.csv` (row by row), then `close.json` and `run.json` (as JSON trees), each in the
//! form `cctl bench diff` compares ([`crate::diff`]): without the host's measurements
//! ([`crate::canonical::HOST_FIELDS`]), the names the kernel gave sockets and objects
//! ([`crate::canonical::IDENTITY_FIELDS`]), `t0_ns`, and the digest itself, and with every
//! `ts_ns` counted from the run's t0. So two runs have the same digest exactly when `bench
//! diff` finds them identical. The bytes hashed are, per file, a line `file <name>`, then
//! `absent` for a missing file, or the CSV header and rows (fields joined by `,`) one per
//! line, or the JSON tree compact with its keys sorted, on one line.

use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::canonical::{canonical_json, canonical_rows, JSON_FILES, SAMPLE_FILES};

/// `run.json`'s field holding the digest.
pub use crate::canonical::DIGEST_FIELD as FIELD;

/// The digest of the run in `run_dir`, as `sha256:<64 hex digits>`; `t0_ns` is the run's
/// t0 (`run.json`'s; `None` for runs written before it was recorded).
///
/// Errors: a file that exists but cannot be read, or a JSON file that does not parse (a
/// truncated CSV file reads as far as it goes and changes the digest instead).
pub fn of_run(run_dir: &Path, t0_ns: Option<u64>) -> anyhow::Result<String> {
    let mut h = Sha256::new();
    for &(file, _, _) in SAMPLE_FILES {
        h.update(format!("file {file}\n"));
        match canonical_rows(&run_dir.join(file), t0_ns)? {
            None => h.update("absent\n"),
            Some((header, rows)) => {
                for row in std::iter::once(&header).chain(&rows) {
                    h.update(row.join(","));
                    h.update("\n");
                }
            }
        }
    }
    for file in JSON_FILES {
        h.update(format!("file {file}\n"));
        match canonical_json(&run_dir.join(file), t0_ns)? {
            None => h.update("absent\n"),
            Some(v) => {
                h.update(serde_json::to_string(&v)?);
                h.update("\n");
            }
        }
    }
    Ok(format!("sha256:{:x}", h.finalize()))
}

/// The SHA-256 of a file's bytes, as `sha256:<64 hex digits>` (the `build` of
/// `metadata.json`: the cctl binary that ran the runs).
///
/// Errors: the file cannot be read.
pub fn of_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    std::io::copy(&mut f, &mut h)?;
    Ok(format!("sha256:{:x}", h.finalize()))
}

/// A digest shortened for a table: its first 12 hex digits.
pub fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    &hex[..hex.len().min(12)]
}
