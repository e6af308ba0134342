//! A run's files in the form `cctl bench diff` compares them and the result digest hashes
//! them: what is not a property of the run left out (`run.json`'s host measurements
//! [`HOST_FIELDS`], the names the kernel gave sockets and objects [`IDENTITY_FIELDS`],
//! `t0_ns` and the digest itself), and every `ts_ns` counted from the run's t0, because
//! where a run starts on the guest's clock depends on what ran before it.

use std::path::Path;

use serde_json::Value;

/// `run.json`'s field holding the run's result digest (left out of what it covers).
pub const DIGEST_FIELD: &str = "digest";

/// Fields of `run.json` that measure the host, not the run: `wall_s` (wall-clock length),
/// `cpu_busy` and `cpus` (the host's CPU while it ran).
pub const HOST_FIELDS: &[&str] = &["wall_s", "cpu_busy", "cpus"];

/// Fields, in every file, that name a socket or a kernel object rather than measure it:
/// socket and namespace cookies, ports (the kernel picks ephemeral ones), BPF map ids.
/// Not compared; the flow a row belongs to is named by its `[[flows]]` id instead.
pub const IDENTITY_FIELDS: &[&str] = &[
    "cookie",
    "netns_cookie",
    "sport",
    "dport",
    "local_port",
    "ca_map_id",
];

/// Timestamps on the kernel's monotonic clock (`ts_ns`) are compared as times since the
/// run's t0 (`t0_ns` of each side's `run.json`), which itself is not compared: where a
/// run starts on the guest's clock depends on what ran before it.
pub const CLOCK_FIELD: &str = "ts_ns";

/// The sample files of a run, compared row by row, in this order, each with its time
/// column: (file, time column, the time column's unit in seconds).
pub const SAMPLE_FILES: &[(&str, &str, f64)] = &[
    ("samples.csv", "ts_ns", 1e-9),
    ("queue.csv", "t_s", 1.0),
    ("delays.csv", "t_s", 1.0),
];

/// The JSON files of a run, compared as trees after the sample files.
pub const JSON_FILES: &[&str] = &["close.json", "run.json"];

/// A CSV file's header and rows as text (`None`: no such file).
pub type Rows = Option<(Vec<String>, Vec<Vec<String>>)>;

/// A sample file as the result digest hashes it: what [`read_rows`] gives without the
/// [`IDENTITY_FIELDS`] columns.
pub fn canonical_rows(path: &Path, t0: Option<u64>) -> anyhow::Result<Rows> {
    let Some((header, rows)) = read_rows(path, t0)? else {
        return Ok(None);
    };
    let keep: Vec<bool> = header
        .iter()
        .map(|h| !IDENTITY_FIELDS.contains(&h.as_str()))
        .collect();
    let strip = |row: &Vec<String>| -> Vec<String> {
        row.iter()
            .enumerate()
            .filter(|(i, _)| keep.get(*i).copied().unwrap_or(true))
            .map(|(_, v)| v.clone())
            .collect()
    };
    let rows = rows.iter().map(strip).collect();
    Ok(Some((strip(&header), rows)))
}

/// A JSON file of a run as the result digest hashes it: what [`read_json`] gives.
pub fn canonical_json(path: &Path, t0: Option<u64>) -> anyhow::Result<Option<Value>> {
    read_json(path, t0)
}

/// Reads a sample file; with `t0`, its `ts_ns` column becomes ns since t0. Rows of
/// another length than the header's (a file cut short) read as they are.
pub fn read_rows(path: &Path, t0: Option<u64>) -> anyhow::Result<Rows> {
    if !path.is_file() {
        return Ok(None);
    }
    let mut r = csv::ReaderBuilder::new()
        .flexible(true)
        .from_path(path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let header: Vec<String> = r.headers()?.iter().map(str::to_string).collect();
    let clock = header.iter().position(|h| h == CLOCK_FIELD);
    let mut rows = Vec::new();
    for rec in r.records() {
        let rec = rec.map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        let mut row: Vec<String> = rec.iter().map(str::to_string).collect();
        if let (Some(c), Some(t0)) = (clock, t0) {
            if let Some(ts) = row.get(c).and_then(|v| v.parse::<u64>().ok()) {
                row[c] = (i128::from(ts) - i128::from(t0)).to_string();
            }
        }
        rows.push(row);
    }
    Ok(Some((header, rows)))
}

/// Reads a JSON file without what is not compared: [`HOST_FIELDS`], `t0_ns` and the
/// digest at the top, [`IDENTITY_FIELDS`] anywhere; with `t0`, every `ts_ns` becomes ns since t0.
pub fn read_json(path: &Path, t0: Option<u64>) -> anyhow::Result<Option<Value>> {
    if !path.is_file() {
        return Ok(None);
    }
    let bytes =
        std::fs::read(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let mut v: Value = serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("parsing {}: {e}", path.display()))?;
    if let Value::Object(m) = &mut v {
        for f in HOST_FIELDS.iter().chain(&["t0_ns", DIGEST_FIELD]) {
            m.remove(*f);
        }
    }
    normalize(&mut v, t0);
    Ok(Some(v))
}

fn normalize(v: &mut Value, t0: Option<u64>) {
    match v {
        Value::Object(m) => {
            for f in IDENTITY_FIELDS {
                m.remove(*f);
            }
            if let (Some(t0), Some(ts)) = (t0, m.get(CLOCK_FIELD).and_then(Value::as_u64)) {
                m.insert(
                    CLOCK_FIELD.into(),
                    (i128::from(ts) - i128::from(t0)).to_string().into(),
                );
            }
            m.values_mut().for_each(|x| normalize(x, t0));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| normalize(x, t0)),
        _ => {}
    }
}
