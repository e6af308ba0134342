//! What a sweep is asked to run: every flag of `cctl bench run` that changes what is run or
//! measured, in one value that the command line builds, [`crate::execute::run_scenario`]
//! takes, and the host hands to a guest as a file (`cctl bench run --request FILE`), so a
//! flag cannot be lost on the way. A copy is kept in every results directory
//! ([`REQUEST_FILE`]).
//!
//! Flags that decide only where and how the host runs it (`--vm`, `--clock`, `--dry-run`,
//! `--check`, `--strict`, `--json`) are not part of it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cctl_netem::slot::MAX_JOBS;
use cctl_report::runs::Shard;
use cctl_scenario::{Profile, Scenario};
use serde::{Deserialize, Serialize};

/// File name of the request in a results directory (and of the one a guest reads).
pub const REQUEST_FILE: &str = "request.json";

/// The most repetitions per point (`--repeat`; the paper profiles' most is 20).
pub const MAX_REPEAT: u32 = 1000;

/// The longest `--duration-s`, s (a day): the longest shipped point runs 23400 s (T1.3,
/// paper profile).
pub const MAX_DURATION_S: f64 = 86_400.0;

/// The longest collector and queue sampling interval (`--interval-ms`,
/// `--queue-interval-ms`), ms (a minute).
pub const MAX_INTERVAL_MS: u64 = 60_000;

/// The sparsest delay-tap sampling (`--delay-sample`): 1 packet in this many.
pub const MAX_DELAY_SAMPLE: u32 = 1_000_000;

/// Default of [`RunRequest::delay_sample`]: 1 packet in 10. At 20 Mbit/s a 30-s run still
/// gives ~5,000 timed data packets per flow, enough for a p99; every packet costs the
/// emulated guest more than the percentiles gain.
pub const DELAY_SAMPLE_DEFAULT: u32 = 10;

/// Default collector and queue sampling interval, ms ([P0]'s δ = 100 ms).
pub const INTERVAL_MS_DEFAULT: u64 = 100;

/// A sweep to run: the scenario, the algorithms under test, and every option of
/// `cctl bench run` that changes what is run or measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// A shipped scenario's name or id, or the absolute path of a scenario file.
    pub scenario: String,
    /// Algorithms under test (`--algo`): cctl keys (`htcp` → `bpf_htcp`) or kernel names.
    pub algo: Vec<String>,
    /// Scale profile.
    pub profile: Profile,
    /// Repetitions per point, 1..=[`MAX_REPEAT`]; `None` = the profile's.
    pub repeat: Option<u32>,
    /// Only these points of the sweep, by index as `--dry-run` lists them (`None`: every
    /// point). Results keep the original indices, so runs of one point from separate
    /// invocations pool in one report.
    pub points: Option<Vec<usize>>,
    /// Results root; the sweep goes to `<out>/<scenario name>/<timestamp>/` unless
    /// [`RunRequest::resume`] names the directory.
    pub out: PathBuf,
    /// The sweep's seed (repetition r's runs draw from seed + r: start times, web sessions;
    /// the guests boot with it); `None` = the scenario's `seed` (1 where it gives none).
    pub seed: Option<u64>,
    /// Collector sampling interval per flow, ms, 1..=[`MAX_INTERVAL_MS`].
    pub interval_ms: u64,
    /// Bottleneck qdisc sampling interval, ms, 1..=[`MAX_INTERVAL_MS`].
    pub queue_interval_ms: u64,
    /// Per-packet delay taps: 1 TCP packet in this many is timed; 0 = no taps.
    pub delay_sample: u32,
    /// Runs at once, each on its own dumbbell (slot), 1..=[`MAX_JOBS`].
    pub jobs: u32,
    /// Every point's duration, s, replacing the profile's (`--duration-s`), more than 0 up
    /// to [`MAX_DURATION_S`].
    pub duration_s: Option<f64>,
    /// Only this shard of the run list (`--shard K/N`).
    pub shard: Option<Shard>,
    /// Only this guest's part of the shard's list: `--jobs N` on the virtual clock starts N
    /// guests, guest J running slot `J/N` (selected like a shard, after it).
    pub slot: Option<Shard>,
    /// Write into this results directory instead of a new one, skipping the runs it holds
    /// completed (`--resume`); created if missing.
    pub resume: Option<PathBuf>,
}

/// A request that cannot be run as it is (bad input: the command exits 2).
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A field outside its range.
    #[error("{field} {value}: {allowed}")]
    Invalid {
        /// The flag it comes from (`--jobs`).
        field: &'static str,
        /// The value given.
        value: String,
        /// What is allowed (`allowed 1 to 64`).
        allowed: String,
    },
    /// The request file could not be read.
    #[error("reading the request {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The request file is not a request.
    #[error("the request {} is not a cctl bench request: {source}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

impl RunRequest {
    /// A request for `scenario` with `algo` under test and every other option at its
    /// default (the ci profile, results under `results/`).
    pub fn new(scenario: &str, algo: &[&str]) -> RunRequest {
        RunRequest {
            scenario: scenario.to_string(),
            algo: algo.iter().map(|a| a.to_string()).collect(),
            profile: Profile::Ci,
            repeat: None,
            points: None,
            out: PathBuf::from("results"),
            seed: None,
            interval_ms: INTERVAL_MS_DEFAULT,
            queue_interval_ms: INTERVAL_MS_DEFAULT,
            delay_sample: DELAY_SAMPLE_DEFAULT,
            jobs: 1,
            duration_s: None,
            shard: None,
            slot: None,
            resume: None,
        }
    }

    /// How a request names `sc`: a shipped scenario by name, a file by its absolute path
    /// (a guest sees the host's file system read-only at the same paths).
    pub fn scenario_ref(sc: &Scenario) -> std::io::Result<String> {
        if sc.path.starts_with("<builtin>") {
            Ok(sc.name.clone())
        } else {
            Ok(sc.path.canonicalize()?.display().to_string())
        }
    }

    /// The scenario the request names, with [`RunRequest::duration_s`] applied.
    ///
    /// Errors: no such scenario; a file that does not parse; a duration the scenario
    /// refuses.
    pub fn load_scenario(&self) -> Result<Scenario, cctl_scenario::ScenarioError> {
        let sc = cctl_scenario::find(&self.scenario)?;
        match self.duration_s {
            Some(d) => sc.with_duration(self.profile, d),
            None => Ok(sc),
        }
    }

    /// Refuses a field outside its range, naming the flag and the range: the command
    /// line's parsers refuse the same, so this guards requests read from files.
    ///
    /// Errors: [`RequestError::Invalid`].
    pub fn validate(&self) -> Result<(), RequestError> {
        let bad = |field: &'static str, value: String, allowed: String| {
            Err(RequestError::Invalid {
                field,
                value,
                allowed,
            })
        };
        if self.algo.is_empty() {
            return bad("--algo", String::new(), "give one algorithm or more".into());
        }
        for (i, a) in self.algo.iter().enumerate() {
            if self.algo[..i].contains(a) {
                return bad("--algo", a.clone(), "give each algorithm once".into());
            }
        }
        if let Some(r) = self.repeat {
            if !(1..=MAX_REPEAT).contains(&r) {
                return bad(
                    "--repeat",
                    r.to_string(),
                    format!("allowed 1 to {MAX_REPEAT}"),
                );
            }
        }
        for (field, v) in [
            ("--interval-ms", self.interval_ms),
            ("--queue-interval-ms", self.queue_interval_ms),
        ] {
            if !(1..=MAX_INTERVAL_MS).contains(&v) {
                return bad(
                    field,
                    v.to_string(),
                    format!("allowed 1 to {MAX_INTERVAL_MS} ms"),
                );
            }
        }
        if self.delay_sample > MAX_DELAY_SAMPLE {
            return bad(
                "--delay-sample",
                self.delay_sample.to_string(),
                format!("allowed 0 to {MAX_DELAY_SAMPLE}"),
            );
        }
        if self.jobs == 0 || self.jobs > MAX_JOBS {
            return bad(
                "--jobs",
                self.jobs.to_string(),
                format!("allowed 1 to {MAX_JOBS} runs at once"),
            );
        }
        if let Some(d) = self.duration_s {
            if !(d.is_finite() && d > 0.0 && d <= MAX_DURATION_S) {
                return bad(
                    "--duration-s",
                    d.to_string(),
                    format!("allowed more than 0 up to {MAX_DURATION_S} s"),
                );
            }
        }
        for (field, s) in [("--shard", self.shard), ("--slot", self.slot)] {
            if let Some(s) = s {
                if s.k == 0 || s.k > s.n {
                    return bad(field, s.to_string(), "give K/N with 1 <= K <= N".into());
                }
            }
        }
        Ok(())
    }

    /// The collector's sampling interval per flow.
    pub fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }

    /// The bottleneck qdisc's sampling interval.
    pub fn queue_interval(&self) -> Duration {
        Duration::from_millis(self.queue_interval_ms)
    }

    /// The base seed of the sweep of `sc`: the request's, or the scenario's.
    pub fn seed_of(&self, sc: &Scenario) -> u64 {
        self.seed.unwrap_or_else(|| sc.seed(self.profile))
    }

    /// Repetitions per point of `sc`: the request's, or the profile's (at least 1).
    pub fn repeat_of(&self, sc: &Scenario) -> u32 {
        self.repeat
            .unwrap_or_else(|| sc.repeat(self.profile))
            .max(1)
    }

    /// Writes the request to `dir`/[`REQUEST_FILE`] (pretty JSON); returns the file.
    ///
    /// Errors: the write.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        let path = dir.join(REQUEST_FILE);
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(&path, json)?;
        Ok(path)
    }

    /// Reads and validates the request in `path`.
    ///
    /// Errors: [`RequestError`].
    pub fn read(path: &Path) -> Result<RunRequest, RequestError> {
        let bytes = std::fs::read(path).map_err(|source| RequestError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let r: RunRequest =
            serde_json::from_slice(&bytes).map_err(|source| RequestError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        r.validate()?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test, removed when the guard is dropped.
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

    fn scratch(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("cctl-request-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Scratch(d)
    }

    /// A request with every field away from its default.
    fn every_field_set() -> RunRequest {
        RunRequest {
            scenario: "/tmp/a scenario/with 'quotes'.toml".into(),
            algo: vec!["htcp".into(), "cubic@linux".into(), "native:reno".into()],
            profile: Profile::Paper,
            repeat: Some(7),
            points: Some(vec![0, 3, 5]),
            out: PathBuf::from("/tmp/out dir"),
            seed: Some(u64::MAX),
            interval_ms: 25,
            queue_interval_ms: 50,
            delay_sample: 0,
            jobs: 3,
            duration_s: Some(199.5),
            shard: Some(Shard { k: 2, n: 5 }),
            slot: Some(Shard { k: 1, n: 3 }),
            resume: Some(PathBuf::from("/tmp/results/x")),
        }
    }

    #[test]
    fn a_request_written_by_the_host_reads_back_the_same_in_the_guest() {
        let dir = scratch("round-trip");
        for r in [every_field_set(), RunRequest::new("t0.1", &["reno"])] {
            let path = r.write(&dir).unwrap();
            assert_eq!(path, dir.join(REQUEST_FILE));
            assert_eq!(RunRequest::read(&path).unwrap(), r);
        }
        // Every field is in the file, so none is lost on the way (an Option as null).
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(REQUEST_FILE)).unwrap()).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 15, "{json}");
    }

    #[test]
    fn a_bad_request_file_is_refused_naming_the_field_and_its_range() {
        let dir = scratch("bad");
        let err = |r: RunRequest| {
            let p = r.write(&dir).unwrap();
            RunRequest::read(&p).unwrap_err().to_string()
        };
        let mut r = every_field_set();
        r.jobs = 0;
        assert_eq!(
            err(r),
            format!("--jobs 0: allowed 1 to {MAX_JOBS} runs at once")
        );
        let mut r = every_field_set();
        r.algo.push("htcp".into());
        assert_eq!(err(r), "--algo htcp: give each algorithm once");
        let mut r = every_field_set();
        r.duration_s = Some(1e12);
        assert_eq!(
            err(r),
            "--duration-s 1000000000000: allowed more than 0 up to 86400 s"
        );
        let mut r = every_field_set();
        r.interval_ms = 0;
        assert_eq!(err(r), "--interval-ms 0: allowed 1 to 60000 ms");
        std::fs::write(dir.join("x.json"), r#"{"scenario": "t0.1", "speed": 1}"#).unwrap();
        let e = RunRequest::read(&dir.join("x.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is not a cctl bench request: unknown field `speed`"),
            "{e}"
        );
    }
}
