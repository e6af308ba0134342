//! `cctl bench diff`: two results directories compared sample by sample, to the first
//! place they differ.
//!
//! On the virtual clock a run is meant to be a function of its inputs (build, guest
//! kernel, QEMU, scenario, seed), so two runs of the same point should hold the same bytes.
//! This finds where they do not: for each run both directories completed, the rows of
//! `samples.csv` (the collector), `queue.csv` (the bottleneck) and `delays.csv` (the
//! per-packet taps) are compared row by row and field by field, then `close.json` and
//! `run.json` as JSON trees. What is not a property of the run is left out: `run.json`'s
//! host measurements ([`HOST_FIELDS`]: wall-clock length, the host's CPU), the names the
//! kernel gave sockets and objects ([`IDENTITY_FIELDS`]), where the run started on the
//! guest's clock (`ts_ns` is compared since t0), and everything of `metadata.json` and
//! `request.json` (start time, paths, version stamp), which only decide whether the two
//! directories can be compared at all ([`comparable`]).

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::canonical::{canonical_json as read_json, read_rows, Rows, JSON_FILES, SAMPLE_FILES};
pub use crate::canonical::{HOST_FIELDS, IDENTITY_FIELDS};
use crate::record::{ClockRecord, Metadata};
use crate::resume::completed_runs;
use crate::runs::RunId;

/// The first place two runs differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// The file of the run (`samples.csv`, `run.json`, ...).
    pub file: String,
    /// The flow the differing sample belongs to (its `[[flows]]` id), where known.
    pub flow: Option<usize>,
    /// When, in s since the run's t0 where `run.json` records it (else since the run's
    /// first sample), where the place has a time.
    pub t_s: Option<f64>,
    /// Where in the file: `row 12 cwnd` of a CSV, a JSON path such as
    /// `series[1].points[530].cwnd`.
    pub field: String,
    /// The value in the first directory (`(none)`: it has no such row or field).
    pub a: String,
    /// The value in the second directory.
    pub b: String,
}

/// One run of both directories, compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDiff {
    /// The run: algorithm, point, repetition.
    pub run: RunId,
    /// The run's result digest in the first directory, computed from its files
    /// ([`crate::digest::of_run`]).
    pub digest_a: String,
    /// The same in the second directory.
    pub digest_b: String,
    /// The sides (`a`, `b`) whose files no longer give the digest their `run.json`
    /// recorded: a file was changed or cut short after the run.
    pub mismatched: Vec<char>,
    /// Sample rows compared (of the sample files, both sides alike).
    pub samples: u64,
    /// Of those, the rows before the first differing one (all of them when identical).
    pub identical_samples: u64,
    /// The first difference (`None`: identical).
    pub first: Option<Difference>,
}

/// Two directories compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// Each run both directories completed, in run order.
    pub runs: Vec<RunDiff>,
    /// Runs only the first directory completed.
    pub only_in_a: Vec<RunId>,
    /// Runs only the second directory completed.
    pub only_in_b: Vec<RunId>,
}

impl Diff {
    /// Whether nothing differs: the same runs, each identical and each matching its
    /// recorded digest.
    pub fn identical(&self) -> bool {
        self.only_in_a.is_empty()
            && self.only_in_b.is_empty()
            && self
                .runs
                .iter()
                .all(|r| r.first.is_none() && r.mismatched.is_empty())
    }

    /// Sample rows compared over all runs.
    pub fn samples(&self) -> u64 {
        self.runs.iter().map(|r| r.samples).sum()
    }

    /// The first difference of the first run that has one.
    pub fn first(&self) -> Option<(&RunId, &Difference)> {
        self.runs
            .iter()
            .find_map(|r| r.first.as_ref().map(|d| (&r.run, d)))
    }
}

/// Why two directories cannot be compared: the metadata field that differs (`scenario`,
/// `profile`, `clock`, `qemu`, `cctl_version`, `build`, `kernel`) with both values.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field} differs: {a} vs {b}; `bench diff` compares runs of the same scenario, profile, clock, QEMU, cctl build and kernel")]
pub struct NotComparable {
    /// The field.
    pub field: &'static str,
    /// Its value in the first directory.
    pub a: String,
    /// Its value in the second.
    pub b: String,
}

/// Whether runs of `a` and `b` can be compared sample by sample: the same scenario,
/// profile, clock (with its icount shift and machine), QEMU, cctl version and build, and
/// kernel. Seeds, algorithms and repetitions may differ (their runs then differ, which is
/// the answer). A QEMU or build that one side did not record (older directories) is not
/// held against it.
///
/// Errors: the first field that differs.
pub fn comparable(a: &Metadata, b: &Metadata) -> Result<(), NotComparable> {
    let clock = |m: &Metadata| {
        m.clock
            .as_ref()
            .map_or_else(|| ClockRecord::host().describe(), ClockRecord::describe)
    };
    let qemu = |m: &Metadata| m.clock.as_ref().and_then(|c| c.qemu.clone());
    let both = |x: Option<String>, y: Option<String>| match (x, y) {
        (Some(x), Some(y)) => (x, y),
        _ => (String::new(), String::new()),
    };
    let (qa, qb) = both(qemu(a), qemu(b));
    let (ba, bb) = both(a.build.clone(), b.build.clone());
    let checks: [(&'static str, String, String); 7] = [
        ("scenario", a.scenario.clone(), b.scenario.clone()),
        ("profile", a.profile.clone(), b.profile.clone()),
        ("clock", clock(a), clock(b)),
        ("qemu", qa, qb),
        (
            "cctl_version",
            a.cctl_version.clone(),
            b.cctl_version.clone(),
        ),
        ("build", ba, bb),
        ("kernel", a.kernel.clone(), b.kernel.clone()),
    ];
    for (field, a, b) in checks {
        if a != b {
            return Err(NotComparable { field, a, b });
        }
    }
    Ok(())
}

/// Compares the completed runs of two results directories (whose metadata
/// [`comparable`] accepted).
///
/// Errors: a run's file cannot be read or parsed.
pub fn diff(a: &Path, b: &Path) -> anyhow::Result<Diff> {
    let runs_a = completed_runs(a);
    let runs_b = completed_runs(b);
    let mut out = Diff {
        runs: Vec::new(),
        only_in_a: runs_a
            .keys()
            .filter(|r| !runs_b.contains_key(*r))
            .cloned()
            .collect(),
        only_in_b: runs_b
            .keys()
            .filter(|r| !runs_a.contains_key(*r))
            .cloned()
            .collect(),
    };
    for (id, rec) in &runs_a {
        if let Some(rec_b) = runs_b.get(id) {
            let t0_ns = rec.t0_ns.zip(rec_b.t0_ns);
            let flows: Vec<(std::net::IpAddr, u16, usize)> = rec
                .flows
                .iter()
                .map(|f| (std::net::IpAddr::V4(f.local_ip), f.local_port, f.id))
                .collect();
            let (dir_a, dir_b) = (id.dir(a), id.dir(b));
            let digest_a = crate::digest::of_run(&dir_a, rec.t0_ns)?;
            let digest_b = crate::digest::of_run(&dir_b, rec_b.t0_ns)?;
            let mut mismatched = Vec::new();
            for (side, r, d) in [('a', rec, &digest_a), ('b', rec_b, &digest_b)] {
                if r.digest.as_ref().is_some_and(|recorded| recorded != d) {
                    mismatched.push(side);
                }
            }
            // The digests first: equal ones need no row by row comparison.
            let mut run = if digest_a == digest_b {
                RunDiff {
                    run: id.clone(),
                    digest_a: String::new(),
                    digest_b: String::new(),
                    mismatched: Vec::new(),
                    samples: sample_rows(&dir_a)?,
                    identical_samples: 0,
                    first: None,
                }
            } else {
                diff_run(id, &dir_a, &dir_b, t0_ns, &flows)?
            };
            if run.first.is_none() {
                run.identical_samples = run.samples;
            }
            run.digest_a = digest_a;
            run.digest_b = digest_b;
            run.mismatched = mismatched;
            out.runs.push(run);
        }
    }
    Ok(out)
}

/// Compares one run's files in `a` and `b`. `t0_ns` (a's, b's; `None` unless both
/// recorded it) places each side's `ts_ns` in its run; `flows` maps a sender's (address,
/// port) in `a` to its flow id.
fn diff_run(
    id: &RunId,
    a: &Path,
    b: &Path,
    t0_ns: Option<(u64, u64)>,
    flows: &[(std::net::IpAddr, u16, usize)],
) -> anyhow::Result<RunDiff> {
    let mut samples = 0;
    let mut identical = 0;
    let mut firsts: Vec<Difference> = Vec::new();
    for &(file, time_col, unit) in SAMPLE_FILES {
        let (t0a, t0b) = (t0_ns.map(|t| t.0), t0_ns.map(|t| t.1));
        let (ra, rb) = (
            read_rows(&a.join(file), t0a)?,
            read_rows(&b.join(file), t0b)?,
        );
        let cmp = compare_rows(&ra, &rb);
        samples += cmp.rows;
        identical += cmp.identical;
        if let Some((row, col)) = cmp.first {
            firsts.push(csv_difference(
                file,
                &ra,
                &rb,
                row,
                col,
                time_col,
                unit,
                t0_ns.is_some(),
                flows,
            ));
        }
    }
    if firsts.is_empty() {
        for file in JSON_FILES {
            let (va, vb) = (
                read_json(&a.join(file), t0_ns.map(|t| t.0))?,
                read_json(&b.join(file), t0_ns.map(|t| t.1))?,
            );
            if let Some(d) = first_json_difference(file, &va, &vb) {
                firsts.push(d);
                break;
            }
        }
    }
    // The earliest in the run; a place without a time after every place with one.
    let first = firsts.into_iter().min_by(|x, y| {
        let key = |d: &Difference| d.t_s.unwrap_or(f64::INFINITY);
        key(x).total_cmp(&key(y))
    });
    Ok(RunDiff {
        run: id.clone(),
        digest_a: String::new(),
        digest_b: String::new(),
        mismatched: Vec::new(),
        samples,
        identical_samples: identical,
        first,
    })
}

/// The rows of a run's sample files (`samples.csv`, `queue.csv`, `delays.csv`).
fn sample_rows(run_dir: &Path) -> anyhow::Result<u64> {
    let mut n = 0;
    for &(file, _, _) in SAMPLE_FILES {
        if let Some((_, rows)) = read_rows(&run_dir.join(file), None)? {
            n += rows.len() as u64;
        }
    }
    Ok(n)
}

/// Rows compared, rows before the first difference, and the first difference's (row,
/// column) (column `None`: the row or the file exists on one side only, or the headers
/// differ, then row 0).
struct RowCmp {
    rows: u64,
    identical: u64,
    first: Option<(usize, Option<usize>)>,
}

fn compare_rows(a: &Rows, b: &Rows) -> RowCmp {
    let (ha, ra, hb, rb) = match (a, b) {
        (None, None) => {
            return RowCmp {
                rows: 0,
                identical: 0,
                first: None,
            }
        }
        (Some((ha, ra)), Some((hb, rb))) => (ha, ra, hb, rb),
        (Some((_, r)), None) | (None, Some((_, r))) => {
            return RowCmp {
                rows: r.len() as u64,
                identical: 0,
                first: Some((0, None)),
            }
        }
    };
    let rows = ra.len().max(rb.len()) as u64;
    if ha != hb {
        return RowCmp {
            rows,
            identical: 0,
            first: Some((0, None)),
        };
    }
    let compared: Vec<bool> = ha
        .iter()
        .map(|h| !IDENTITY_FIELDS.contains(&h.as_str()))
        .collect();
    let first = (0..ra.len().max(rb.len())).find_map(|i| match (ra.get(i), rb.get(i)) {
        (Some(x), Some(y)) => (0..x.len().max(y.len()))
            .find(|&c| compared.get(c).copied().unwrap_or(true) && x.get(c) != y.get(c))
            .map(|c| (i, Some(c))),
        _ => Some((i, None)),
    });
    RowCmp {
        rows,
        identical: first.map_or(rows, |(i, _)| i as u64),
        first,
    }
}

/// The [`Difference`] at (`row`, `col`) of a sample file.
#[allow(clippy::too_many_arguments)]
fn csv_difference(
    file: &str,
    a: &Rows,
    b: &Rows,
    row: usize,
    col: Option<usize>,
    time_col: &str,
    unit: f64,
    since_t0: bool,
    flows: &[(std::net::IpAddr, u16, usize)],
) -> Difference {
    let header = a
        .as_ref()
        .or(b.as_ref())
        .map(|(h, _)| h.clone())
        .unwrap_or_default();
    let cell = |side: &Rows, c: usize| -> String {
        side.as_ref()
            .and_then(|(_, r)| r.get(row))
            .and_then(|r| r.get(c))
            .cloned()
            .unwrap_or_else(|| "(none)".into())
    };
    let headers_differ = matches!((a, b), (Some((ha, _)), Some((hb, _))) if ha != hb);
    let whole = |side: &Rows| -> String {
        match side {
            None => "(no file)".into(),
            Some((h, _)) if headers_differ => h.join(","),
            Some((_, r)) => r
                .get(row)
                .map_or_else(|| "(no row)".into(), |r| r.join(",")),
        }
    };
    // Where the row is in time and whose it is, from the side that has it.
    let any_row = a
        .as_ref()
        .and_then(|(_, r)| r.get(row))
        .or_else(|| b.as_ref().and_then(|(_, r)| r.get(row)));
    let col_of = |name: &str| header.iter().position(|h| h == name);
    let t_s = any_row.and_then(|r| {
        let raw: f64 = r.get(col_of(time_col)?)?.parse().ok()?;
        Some(if time_col == "ts_ns" {
            let base = since_t0.then_some(0.0).or_else(|| {
                let first = a.as_ref().or(b.as_ref())?.1.first()?;
                first.get(col_of(time_col)?)?.parse().ok()
            })?;
            (raw - base) * unit
        } else {
            raw * unit
        })
    });
    let flow = any_row.and_then(|r| {
        if let Some(c) = col_of("flow") {
            return r.get(c)?.parse().ok();
        }
        let addr: std::net::IpAddr = r.get(col_of("saddr")?)?.parse().ok()?;
        let port: u16 = r.get(col_of("sport")?)?.parse().ok()?;
        flows
            .iter()
            .find(|(a, p, _)| *a == addr && *p == port)
            .map(|f| f.2)
    });
    match col {
        Some(c) => Difference {
            file: file.into(),
            flow,
            t_s,
            field: format!("row {} {}", row + 1, header.get(c).map_or("?", |s| s)),
            a: cell(a, c),
            b: cell(b, c),
        },
        None => Difference {
            file: file.into(),
            flow,
            t_s,
            field: if headers_differ {
                "header".into()
            } else {
                format!("row {}", row + 1)
            },
            a: whole(a),
            b: whole(b),
        },
    }
}

/// The first place two JSON files differ, depth first in key order, with the nearest
/// enclosing `t_s` and flow id (`id` of an element of `flows` or `series`).
fn first_json_difference(file: &str, a: &Option<Value>, b: &Option<Value>) -> Option<Difference> {
    let show = |v: Option<&Value>| v.map_or_else(|| "(none)".into(), Value::to_string);
    let present = |v: &Option<Value>| if v.is_some() { "present" } else { "(no file)" };
    match (a, b) {
        (None, None) => None,
        (Some(x), Some(y)) => walk(x, y, String::new(), Ctx::default()).map(|f| Difference {
            file: file.into(),
            flow: f.ctx.flow,
            t_s: f.ctx.t_s,
            field: f.path,
            a: show(f.a),
            b: show(f.b),
        }),
        _ => Some(Difference {
            file: file.into(),
            flow: None,
            t_s: None,
            field: "(file)".into(),
            a: present(a).into(),
            b: present(b).into(),
        }),
    }
}

/// What encloses the place being compared.
#[derive(Default, Clone, Copy)]
struct Ctx {
    flow: Option<usize>,
    t_s: Option<f64>,
}

/// A place two JSON trees differ: its path, both values (`None`: absent), what encloses it.
struct Found<'v> {
    path: String,
    a: Option<&'v Value>,
    b: Option<&'v Value>,
    ctx: Ctx,
}

fn walk<'v>(a: &'v Value, b: &'v Value, path: String, mut ctx: Ctx) -> Option<Found<'v>> {
    let found = |path, a, b, ctx| Some(Found { path, a, b, ctx });
    match (a, b) {
        (Value::Object(ma), Value::Object(mb)) => {
            if let Some(t) = ma.get("t_s").and_then(Value::as_f64) {
                ctx.t_s = Some(t);
            }
            if path.starts_with("flows[") || path.starts_with("series[") {
                if let Some(id) = ma.get("id").and_then(Value::as_u64) {
                    ctx.flow = Some(id as usize);
                }
            }
            let keys: std::collections::BTreeSet<&String> = ma.keys().chain(mb.keys()).collect();
            keys.into_iter().find_map(|k| {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match (ma.get(k), mb.get(k)) {
                    (Some(x), Some(y)) => walk(x, y, p, ctx),
                    (x, y) => found(p, x, y, ctx),
                }
            })
        }
        (Value::Array(va), Value::Array(vb)) => (0..va.len().max(vb.len())).find_map(|i| {
            let p = format!("{path}[{i}]");
            match (va.get(i), vb.get(i)) {
                (Some(x), Some(y)) => walk(x, y, p, ctx),
                (x, y) => found(p, x, y, ctx),
            }
        }),
        _ if a == b => None,
        _ => found(path, Some(a), Some(b), ctx),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh directory under the system's temporary directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl std::ops::Deref for Scratch {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    /// A copy of the report crate's results fixture (host-sweep, reno, point 0; flow 1
    /// from 10.80.0.1:34180) with a `samples.csv` of three rows, in a fresh directory.
    fn results(name: &str) -> Scratch {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/results-bcd7aa4");
        let dst = std::env::temp_dir().join(format!("cctl-diff-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dst);
        let run = dst.join("runs/reno/p0-r0");
        std::fs::create_dir_all(&run).unwrap();
        std::fs::copy(src.join("metadata.json"), dst.join("metadata.json")).unwrap();
        std::fs::copy(src.join("runs/reno/p0-r0/run.json"), run.join("run.json")).unwrap();
        std::fs::write(
            run.join("samples.csv"),
            "ts_ns,saddr,sport,cwnd,srtt_us\n\
             1000000000,10.80.0.1,34180,10,60\n\
             1100000000,10.80.0.1,34180,94,51644\n\
             1250000000,10.80.0.1,34180,120,52000\n",
        )
        .unwrap();
        Scratch(dst)
    }

    fn edit(dir: &Path, file: &str, f: impl FnOnce(String) -> String) {
        let p = dir.join("runs/reno/p0-r0").join(file);
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, f(text)).unwrap();
    }

    #[test]
    fn copies_are_identical_and_host_fields_are_no_difference() {
        let (a, b) = (results("same-a"), results("same-b"));
        edit(&b, "run.json", |t| {
            let mut v: Value = serde_json::from_str(&t).unwrap();
            v["wall_s"] = 99.5.into();
            v["cpu_busy"] = 0.75.into();
            v.to_string()
        });
        let d = diff(&a, &b).unwrap();
        assert!(d.identical(), "{d:?}");
        assert_eq!((d.runs.len(), d.samples()), (1, 3));
        assert_eq!(d.runs[0].identical_samples, 3);
    }

    #[test]
    fn where_a_run_starts_on_the_clock_and_which_port_it_got_are_no_difference() {
        let (a, b) = (results("shift-a"), results("shift-b"));
        let t0 = |dir: &Path, t0: u64| {
            edit(dir, "run.json", |t| {
                let mut v: Value = serde_json::from_str(&t).unwrap();
                v["t0_ns"] = t0.into();
                v["flows"][0]["local_port"] = (t0 % 60000).into();
                v.to_string()
            })
        };
        t0(&a, 900_000_000);
        t0(&b, 5_900_000_000);
        // B ran 5 s later on its guest's clock, from another port.
        edit(&b, "samples.csv", |t| {
            t.replace(",34180,", ",40000,")
                .replace("1000000000,", "6000000000,")
                .replace("1100000000,", "6100000000,")
                .replace("1250000000,", "6250000000,")
        });
        let d = diff(&a, &b).unwrap();
        assert!(d.identical(), "{d:?}");
        // A change within the run still shows, timed from t0.
        edit(&b, "samples.csv", |t| {
            t.replace("6250000000,", "6250000001,")
        });
        let (_, x) = diff(&a, &b)
            .unwrap()
            .first()
            .map(|(r, x)| (r.clone(), x.clone()))
            .unwrap();
        assert_eq!(
            (x.field.as_str(), x.a.as_str(), x.b.as_str()),
            ("row 3 ts_ns", "350000000", "350000001")
        );
        assert!((x.t_s.unwrap() - 0.35).abs() < 1e-9, "{x:?}");
    }

    #[test]
    fn the_first_differing_sample_is_named_by_flow_time_field_and_values() {
        let (a, b) = (results("cwnd-a"), results("cwnd-b"));
        edit(&b, "samples.csv", |t| t.replace(",120,", ",121,"));
        let d = diff(&a, &b).unwrap();
        assert!(!d.identical());
        let (run, x) = d.first().unwrap();
        assert_eq!(run.to_string(), "reno p0 r0");
        assert_eq!(
            (
                x.file.as_str(),
                x.flow,
                x.field.as_str(),
                x.a.as_str(),
                x.b.as_str()
            ),
            ("samples.csv", Some(1), "row 3 cwnd", "120", "121")
        );
        // No t0 in this old run.json: the time counts from the run's first sample.
        assert!((x.t_s.unwrap() - 0.25).abs() < 1e-9, "{x:?}");
        assert_eq!((d.runs[0].identical_samples, d.runs[0].samples), (2, 3));
    }

    #[test]
    fn a_difference_in_run_json_gives_its_path_flow_and_time() {
        let (a, b) = (results("json-a"), results("json-b"));
        edit(&b, "run.json", |t| {
            let mut v: Value = serde_json::from_str(&t).unwrap();
            v["series"][0]["points"][1]["cwnd"] = 95.into();
            v["t0_ns"] = 5.into(); // later in key order: not the first difference
            v.to_string()
        });
        let (_, x) = diff(&a, &b)
            .unwrap()
            .first()
            .map(|(r, x)| (r.clone(), x.clone()))
            .unwrap();
        assert_eq!(
            (
                x.file.as_str(),
                x.flow,
                x.field.as_str(),
                x.a.as_str(),
                x.b.as_str()
            ),
            ("run.json", Some(1), "series[0].points[1].cwnd", "94", "95")
        );
        assert_eq!(x.t_s, Some(0.102264545));
    }

    #[test]
    fn a_missing_row_a_missing_file_and_a_run_of_one_side_are_differences() {
        let (a, b) = (results("rows-a"), results("rows-b"));
        edit(&b, "samples.csv", |t| {
            t.lines().take(3).map(|l| format!("{l}\n")).collect()
        });
        let x = diff(&a, &b).unwrap().runs[0].first.clone().unwrap();
        assert_eq!((x.field.as_str(), x.b.as_str()), ("row 3", "(no row)"));

        std::fs::remove_file(b.join("runs/reno/p0-r0/samples.csv")).unwrap();
        let x = diff(&a, &b).unwrap().runs[0].first.clone().unwrap();
        assert_eq!(
            (x.file.as_str(), x.b.as_str()),
            ("samples.csv", "(no file)")
        );

        std::fs::remove_dir_all(b.join("runs")).unwrap();
        let d = diff(&a, &b).unwrap();
        assert!(!d.identical() && d.runs.is_empty());
        assert_eq!(d.only_in_a.len(), 1);
    }

    #[test]
    fn directories_of_another_scenario_clock_or_build_are_not_comparable() {
        let dir = results("meta");
        let m: Metadata =
            serde_json::from_slice(&std::fs::read(dir.join("metadata.json")).unwrap()).unwrap();
        assert_eq!(comparable(&m, &m), Ok(()));
        let mut other = m.clone();
        other.seed += 1;
        assert_eq!(
            comparable(&m, &other),
            Ok(()),
            "another seed is another run, not bad input"
        );
        let mut other = m.clone();
        other.scenario = "convergence".into();
        assert_eq!(comparable(&m, &other).unwrap_err().field, "scenario");
        let mut other = m.clone();
        other.clock = Some(ClockRecord {
            clock: "virtual".into(),
            icount_shift: Some(0),
            machine: "tcg".into(),
            vcpus: Some(1),
            memory_mb: Some(2048),
            qemu: None,
        });
        let e = comparable(&m, &other).unwrap_err();
        assert_eq!(e.field, "clock");
        assert!(e.to_string().contains("virtual"), "{e}");
        let mut other = m.clone();
        other.cctl_version = "0.1.0 (0dafd1754a08)".into();
        assert_eq!(comparable(&m, &other).unwrap_err().field, "cctl_version");
    }

    #[test]
    fn another_qemu_or_build_is_not_comparable_and_one_not_recorded_is_not_held_against_it() {
        let dir = results("qemu");
        let m: Metadata =
            serde_json::from_slice(&std::fs::read(dir.join("metadata.json")).unwrap()).unwrap();
        let virt = |qemu: &str, build: &str| {
            let mut x = m.clone();
            x.clock = Some(ClockRecord {
                clock: "virtual".into(),
                icount_shift: Some(0),
                machine: "tcg".into(),
                vcpus: Some(1),
                memory_mb: Some(2048),
                qemu: Some(qemu.into()),
            });
            x.build = Some(build.into());
            x
        };
        let a = virt("7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)", "sha256:aa");
        assert_eq!(comparable(&a, &a), Ok(()));
        let e = comparable(&a, &virt("10.0.2 (Debian 1:10.0.2+ds-2)", "sha256:aa")).unwrap_err();
        assert_eq!(e.field, "qemu");
        assert!(
            e.to_string().contains("7.2.22") && e.to_string().contains("10.0.2"),
            "{e}"
        );
        let e = comparable(
            &a,
            &virt("7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)", "sha256:bb"),
        )
        .unwrap_err();
        assert_eq!(
            (e.field, e.a.as_str(), e.b.as_str()),
            ("build", "sha256:aa", "sha256:bb")
        );
        let mut old = a.clone();
        old.build = None;
        old.clock.as_mut().unwrap().qemu = None;
        assert_eq!(comparable(&a, &old), Ok(()));
    }

    /// Sets run.json's digest to what the run's files give, as `cctl bench run` does.
    fn seal(dir: &Path) {
        let run = dir.join("runs/reno/p0-r0");
        let d = crate::digest::of_run(&run, None).unwrap();
        edit(dir, "run.json", |t| {
            let mut v: Value = serde_json::from_str(&t).unwrap();
            v["digest"] = d.into();
            v.to_string()
        });
    }

    #[test]
    fn identical_runs_have_one_digest_and_host_fields_do_not_change_it() {
        let (a, b) = (results("dig-a"), results("dig-b"));
        seal(&a);
        seal(&b);
        edit(&b, "run.json", |t| {
            let mut v: Value = serde_json::from_str(&t).unwrap();
            v["wall_s"] = 99.5.into();
            v.to_string()
        });
        let d = diff(&a, &b).unwrap();
        assert!(d.identical(), "{d:?}");
        let r = &d.runs[0];
        assert_eq!(r.digest_a, r.digest_b);
        assert!(r.digest_a.starts_with("sha256:") && r.digest_a.len() == 7 + 64);
        assert_eq!((r.samples, r.identical_samples), (3, 3));
    }

    #[test]
    fn a_changed_or_truncated_samples_file_is_a_digest_mismatch_with_its_first_differing_row() {
        let (a, b) = (results("tamper-a"), results("tamper-b"));
        seal(&a);
        seal(&b);
        // Changed after the run: B's files no longer give B's recorded digest.
        edit(&b, "samples.csv", |t| t.replace(",120,", ",121,"));
        let d = diff(&a, &b).unwrap();
        assert!(!d.identical());
        let r = &d.runs[0];
        assert_eq!(r.mismatched, vec!['b']);
        assert_ne!(r.digest_a, r.digest_b);
        let x = r.first.as_ref().unwrap();
        assert_eq!(
            (x.field.as_str(), x.a.as_str(), x.b.as_str()),
            ("row 3 cwnd", "120", "121")
        );
        // Cut short in the middle of its last row: read as far as it goes, never an error.
        edit(&b, "samples.csv", |t| {
            t.replace(",121,", ",120,").trim_end()[..t.trim_end().len() - 4].to_string()
        });
        let d = diff(&a, &b).unwrap();
        let r = &d.runs[0];
        assert_eq!(r.mismatched, vec!['b']);
        let x = r.first.as_ref().unwrap();
        assert_eq!(x.field, "row 3 srtt_us", "{x:?}");
        // Tampered so that it equals the other side again: still not its recorded digest.
        edit(&b, "samples.csv", |_| {
            std::fs::read_to_string(a.join("runs/reno/p0-r0/samples.csv")).unwrap()
        });
        edit(&b, "run.json", |t| {
            let mut v: Value = serde_json::from_str(&t).unwrap();
            v["digest"] = "sha256:0000".into();
            v.to_string()
        });
        let d = diff(&a, &b).unwrap();
        assert!(d.runs[0].first.is_none());
        assert_eq!(d.runs[0].mismatched, vec!['b']);
        assert!(!d.identical());
    }
}
