//! Conformance scripts: what the scripted receiver does to a sender — the RTT schedule,
//! the ACK policy, which segments are lost or CE-marked, stalls, app-limited phases and
//! the receive window — declared in TOML files (`crates/conform/scripts/*.toml`, embedded).
//!
//! Times are in base RTTs of the variant being run (`rtt_ms`), so one script reads the
//! same at 10 ms and at 100 ms; segments are counted from 0 in sequence space
//! (segment n covers bytes [n·MSS, (n+1)·MSS) of the stream), first transmissions only.
//!
//! Segment numbers, the receive window and `min_cwnd` are written for the longest RTT of
//! the script and scaled by `rtt / longest rtt` for the shorter ones
//! ([`Script::window_scale`]): the windows then scale with the RTT, so every variant runs
//! at the same packet rate — the rate the machine can drive (QEMU TCG carries about 1,000
//! ACK steps per second in real time). A large-window script sets `scale_windows = false`:
//! its windows are the same at every RTT, and it states the window its runs must reach
//! (`min_cwnd`), which is checked when it is parsed and when it has run.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A malformed or unknown script, naming the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// No shipped script has this name and it is not a readable `.toml` file.
    #[error(
        "unknown conformance script '{name}' (shipped: {known}; or give a path to a .toml file)"
    )]
    NotFound {
        /// What was asked for.
        name: String,
        /// The shipped scripts' names.
        known: String,
    },
    /// The file could not be read.
    #[error("reading conformance script {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML for a script (unknown key, wrong type).
    #[error("conformance script {}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// toml's message, which names the key and line.
        message: String,
    },
    /// A field has a value outside what it allows.
    #[error("conformance script {}: field `{field}`: {why}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Dotted field name (`loss.every`).
        field: String,
        /// What is wrong and what is allowed.
        why: String,
    },
}

/// When the receiver ACKs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AckPolicy {
    /// One ACK per arriving segment.
    Every,
    /// One ACK per two full in-order segments, or after `delack_timeout_ms` for a lone
    /// one (RFC 1122 §4.2.3.2); out-of-order and duplicate segments are ACKed at once.
    Delayed,
}

/// Segments chosen by index (first transmissions).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentSet {
    /// These segment indices.
    #[serde(default)]
    pub segments: Vec<u64>,
    /// Every `every`-th segment (n ≡ every−1 mod every) at or after `from_segment`;
    /// 0 = none.
    #[serde(default)]
    pub every: u64,
    /// First segment `every` applies to.
    #[serde(default)]
    pub from_segment: u64,
    /// Last segment `every` applies to (exclusive); 0 = no end.
    #[serde(default)]
    pub until_segment: u64,
}

impl SegmentSet {
    /// Whether segment `n` is in the set.
    pub fn contains(&self, n: u64) -> bool {
        if self.segments.contains(&n) {
            return true;
        }
        self.every > 0
            && n >= self.from_segment
            && (self.until_segment == 0 || n < self.until_segment)
            && (n - self.from_segment) % self.every == self.every - 1
    }

    /// The set with every segment index scaled by `f` (rounded; `every` at least 1).
    pub fn scaled(&self, f: f64) -> SegmentSet {
        let sc = |n: u64| (n as f64 * f).round() as u64;
        SegmentSet {
            segments: self.segments.iter().map(|&n| sc(n)).collect(),
            every: if self.every == 0 {
                0
            } else {
                sc(self.every).max(1)
            },
            from_segment: sc(self.from_segment),
            until_segment: sc(self.until_segment),
        }
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty() && self.every == 0
    }
}

/// One change of the RTT: a step (`ramp_rtts = 0`) or a linear ramp to `factor` × the
/// base RTT.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct RttChange {
    /// When it starts, base RTTs from the start.
    pub at_rtts: f64,
    /// RTT afterwards, as a multiple of the base RTT (> 0).
    pub factor: f64,
    /// Duration of a linear ramp, base RTTs; 0 = a step.
    #[serde(default)]
    pub ramp_rtts: f64,
}

/// A window of time, in base RTTs.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Phase {
    /// Start, base RTTs from the start.
    pub at_rtts: f64,
    /// Length, base RTTs.
    pub for_rtts: f64,
}

/// A conformance script (see the module docs).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Name used with `--script`.
    pub name: String,
    /// What it exercises.
    pub doc: String,
    /// Base RTTs of the variants, ms: the first is the short one CI runs.
    pub rtt_ms: Vec<f64>,
    /// Length of a run, base RTTs.
    pub duration_rtts: f64,
    /// ACK policy.
    #[serde(default = "every")]
    pub ack: AckPolicy,
    /// Delayed-ACK timeout for a lone segment, ms (with `ack = "delayed"`).
    #[serde(default = "delack_ms")]
    pub delack_timeout_ms: f64,
    /// The receiver offers SACK (SACK-permitted on the SYN-ACK, SACK blocks on dupACKs).
    #[serde(default = "yes")]
    pub sack: bool,
    /// The receiver reports duplicate segments with a D-SACK block (RFC 2883), which lets
    /// the sender undo a spurious reduction.
    #[serde(default = "yes")]
    pub dsack: bool,
    /// The receiver uses TCP timestamps (RFC 7323), echoing TS.Recent.
    #[serde(default = "yes")]
    pub timestamps: bool,
    /// ECN: the sender's namespace gets `tcp_ecn=1`, the SYN-ACK carries ECE, and CE
    /// marks (`[ce]`) are echoed as ECE until a segment with CWR arrives.
    #[serde(default)]
    pub ecn: bool,
    /// Receive window the receiver advertises, segments; 0 = 65,535 << 7 bytes.
    #[serde(default)]
    pub rwnd_segments: u32,
    /// Lost segments (first transmissions).
    #[serde(default)]
    pub loss: SegmentSet,
    /// CE-marked segments (with `ecn`).
    #[serde(default)]
    pub ce: SegmentSet,
    /// RTT schedule, in order of `at_rtts`.
    #[serde(default)]
    pub rtt: Vec<RttChange>,
    /// Silences: every segment arriving in the window is lost (long enough for an RTO).
    #[serde(default)]
    pub stall: Vec<Phase>,
    /// Phases in which the sending application writes nothing.
    #[serde(default)]
    pub app_limited: Vec<Phase>,
    /// Rate of a bottleneck in front of the receiver, Mbit/s (0 = none: every segment
    /// arrives the moment it is sent): segments queue behind it without limit and arrive
    /// spaced by their length at this rate, so ACKs come back spaced as on a real path
    /// (and a window above the BDP builds a queue) instead of in the bursts the sender
    /// emits. The large-window scripts set it to what the guest's driver can answer.
    #[serde(default)]
    pub rate_mbit: f64,
    /// Whether segment numbers, the receive window and `min_cwnd` scale with the RTT (see
    /// the module docs); `false` keeps them as written at every RTT.
    #[serde(default = "yes")]
    pub scale_windows: bool,
    /// Window every run must reach, segments (0 = none): a run whose reference sender's
    /// cwnd stays below it is invalid, not a match.
    #[serde(default)]
    pub min_cwnd: u32,
    /// Where it was read from (`<builtin>/x.toml` for shipped ones).
    #[serde(skip)]
    pub path: PathBuf,
}

/// Smallest `min_cwnd` of a large-window script, segments ([`Script::is_large`]).
pub const LARGE_WINDOW: u32 = 1000;

/// MSS the receive-window limit is counted in, bytes (1448: an Ethernet MTU with TCP
/// timestamps).
pub const ASSUMED_MSS: u32 = 1448;

fn every() -> AckPolicy {
    AckPolicy::Every
}
fn delack_ms() -> f64 {
    40.0
}
fn yes() -> bool {
    true
}

impl Script {
    /// Parses and validates `text`, read from `path` (named in errors).
    ///
    /// Errors: [`ScriptError::Parse`] (TOML, unknown keys), [`ScriptError::Invalid`].
    pub fn parse(text: &str, path: &Path) -> Result<Script, ScriptError> {
        let mut s: Script = toml::from_str(text).map_err(|e| ScriptError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        s.path = path.to_path_buf();
        s.validate()?;
        Ok(s)
    }

    /// Reads and parses the file `path`.
    ///
    /// Errors: [`ScriptError::Read`] and those of [`Script::parse`].
    pub fn load(path: &Path) -> Result<Script, ScriptError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Script::parse(&text, path)
    }

    fn validate(&self) -> Result<(), ScriptError> {
        let bad = |field: &str, why: String| {
            Err(ScriptError::Invalid {
                path: self.path.clone(),
                field: field.into(),
                why,
            })
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return bad(
                "name",
                format!("'{}': use [A-Za-z0-9_-], not empty", self.name),
            );
        }
        if self.rtt_ms.is_empty() {
            return bad(
                "rtt_ms",
                "give at least one base RTT, e.g. [10, 100]".into(),
            );
        }
        for r in &self.rtt_ms {
            if !(1.0..=1000.0).contains(r) {
                return bad("rtt_ms", format!("{r} ms: allowed 1 to 1000 ms"));
            }
        }
        if !(self.duration_rtts >= 1.0 && self.duration_rtts <= 100_000.0) {
            return bad(
                "duration_rtts",
                format!("{}: allowed 1 to 100000 base RTTs", self.duration_rtts),
            );
        }
        if !(1.0..=500.0).contains(&self.delack_timeout_ms) {
            return bad(
                "delack_timeout_ms",
                format!("{}: allowed 1 to 500 ms", self.delack_timeout_ms),
            );
        }
        if self.rwnd_segments != 0 && !(4..=100_000).contains(&self.rwnd_segments) {
            return bad(
                "rwnd_segments",
                format!(
                    "{}: allowed 0 (no limit) or 4 to 100000",
                    self.rwnd_segments
                ),
            );
        }
        if !(self.rate_mbit >= 0.0 && self.rate_mbit <= 10_000.0) {
            return bad(
                "rate_mbit",
                format!(
                    "{}: allowed 0 (no bottleneck) to 10000 Mbit/s",
                    self.rate_mbit
                ),
            );
        }
        if self.min_cwnd > 0 {
            let rwnd = self.rwnd_limit_segments();
            if self.min_cwnd > rwnd {
                return bad(
                    "min_cwnd",
                    format!(
                        "{} segments: more than the receiver can buffer ({rwnd} segments{}); \
                         the sender cannot use a window above it: lower min_cwnd or raise \
                         rwnd_segments (up to 100000)",
                        self.min_cwnd,
                        if self.rwnd_segments == 0 {
                            ", 65535 << 7 bytes, its default"
                        } else {
                            ", rwnd_segments"
                        }
                    ),
                );
            }
            if let Some(g) = self.longest_loss_free() {
                if 2 * g < u64::from(self.min_cwnd) {
                    return bad(
                        "loss.every",
                        format!(
                            "{}: the longest stretch without a loss is {g} segments, and a \
                             window grows by at most one segment per segment acknowledged \
                             (slow start), so it reaches about 2 × {g} before a loss is \
                             detected, below min_cwnd = {}; make the losses rarer \
                             (every >= {}) or lower min_cwnd",
                            self.loss.every,
                            self.min_cwnd,
                            self.min_cwnd.div_ceil(2) + 1
                        ),
                    );
                }
            }
        }
        if !self.ce.is_empty() && !self.ecn {
            return bad("ce", "CE marks need `ecn = true`".into());
        }
        for (name, set) in [("loss", &self.loss), ("ce", &self.ce)] {
            if set.until_segment != 0 && set.until_segment <= set.from_segment {
                return bad(
                    &format!("{name}.until_segment"),
                    format!(
                        "{} is not after from_segment {}",
                        set.until_segment, set.from_segment
                    ),
                );
            }
        }
        let mut last = 0.0;
        for (i, c) in self.rtt.iter().enumerate() {
            if !(c.factor > 0.0 && c.factor <= 20.0) {
                return bad(
                    &format!("rtt[{i}].factor"),
                    format!("{}: allowed (0, 20] × the base RTT", c.factor),
                );
            }
            if !(c.at_rtts >= last && c.ramp_rtts >= 0.0) {
                return bad(
                    &format!("rtt[{i}].at_rtts"),
                    format!(
                        "{} (ramp {}): changes must be in time order, after the previous one ends, with ramp_rtts >= 0",
                        c.at_rtts, c.ramp_rtts
                    ),
                );
            }
            last = c.at_rtts + c.ramp_rtts;
        }
        for (field, phases) in [("stall", &self.stall), ("app_limited", &self.app_limited)] {
            for (i, p) in phases.iter().enumerate() {
                if !(p.at_rtts >= 0.0 && p.for_rtts > 0.0) {
                    return bad(
                        &format!("{field}[{i}]"),
                        format!(
                            "at_rtts {} for_rtts {}: at_rtts >= 0 and for_rtts > 0",
                            p.at_rtts, p.for_rtts
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    /// Factor on segment numbers, the receive window and `min_cwnd` at base RTT `rtt_ms`:
    /// `rtt_ms / longest rtt_ms`, or 1 with `scale_windows = false` (see the module docs).
    pub fn window_scale(&self, rtt_ms: f64) -> f64 {
        let longest = self.rtt_ms.iter().copied().fold(0.0, f64::max);
        if longest <= 0.0 || !self.scale_windows {
            1.0
        } else {
            rtt_ms / longest
        }
    }

    /// RTT at `t_rtts` base RTTs from the start, as a multiple of the base RTT.
    pub fn rtt_factor(&self, t_rtts: f64) -> f64 {
        let mut f = 1.0;
        for c in &self.rtt {
            if t_rtts < c.at_rtts {
                break;
            }
            if c.ramp_rtts > 0.0 && t_rtts < c.at_rtts + c.ramp_rtts {
                let x = (t_rtts - c.at_rtts) / c.ramp_rtts;
                return f + (c.factor - f) * x;
            }
            f = c.factor;
        }
        f
    }

    /// Whether it is a large-window script (it states a `min_cwnd` of at least
    /// [`LARGE_WINDOW`] segments): `cctl conform --short` leaves those out unless named.
    pub fn is_large(&self) -> bool {
        self.min_cwnd >= LARGE_WINDOW
    }

    /// The window a run at base RTT `rtt_ms` must reach, segments (0 = none).
    pub fn min_cwnd_at(&self, rtt_ms: f64) -> u32 {
        (f64::from(self.min_cwnd) * self.window_scale(rtt_ms)).round() as u32
    }

    /// The receive window the receiver offers, segments (`rwnd_segments`, or 65,535 << 7
    /// bytes in segments of [`ASSUMED_MSS`] bytes when it is 0).
    pub fn rwnd_limit_segments(&self) -> u32 {
        if self.rwnd_segments == 0 {
            ((65_535u64 << 7) / u64::from(ASSUMED_MSS)) as u32
        } else {
            self.rwnd_segments
        }
    }

    /// The longest stretch of consecutive segment numbers without a scripted loss, when
    /// losses recur forever (`loss.every` without `until_segment`); `None` when the losses
    /// end, so the stretch after the last one is unbounded.
    pub fn longest_loss_free(&self) -> Option<u64> {
        let l = &self.loss;
        if l.every == 0 || l.until_segment != 0 {
            return None;
        }
        let mut lost: Vec<u64> = l
            .segments
            .iter()
            .copied()
            .filter(|&n| n < l.from_segment + l.every)
            .collect();
        lost.push(l.from_segment + l.every - 1);
        lost.sort_unstable();
        lost.dedup();
        let mut longest = l.every - 1;
        let mut prev: Option<u64> = None;
        for n in lost {
            let gap = match prev {
                None => n,
                Some(p) => n - p - 1,
            };
            longest = longest.max(gap);
            prev = Some(n);
        }
        Some(longest)
    }

    /// Whether `t_rtts` falls in one of `phases`.
    pub fn in_phase(phases: &[Phase], t_rtts: f64) -> bool {
        phases
            .iter()
            .any(|p| t_rtts >= p.at_rtts && t_rtts < p.at_rtts + p.for_rtts)
    }
}

macro_rules! builtin_scripts {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/", $file)))),*]
    };
}

/// The shipped scripts (`crates/conform/scripts/`), embedded: (file name, contents).
pub const BUILTIN_FILES: &[(&str, &str)] = builtin_scripts!(
    "slow_start.toml",
    "avoidance.toml",
    "periodic_loss.toml",
    "burst_loss.toml",
    "rto.toml",
    "rtt_steps.toml",
    "delayed_acks.toml",
    "app_limited.toml",
    "ecn.toml",
    "large_backoff.toml",
    "large_avoidance.toml",
    "large_periodic_loss.toml",
    "large_burst_loss.toml",
    "large_rto.toml",
    "large_app_limited.toml",
    "large_rtt_steps.toml",
);

/// The shipped scripts, in file order.
///
/// # Panics
/// If a shipped file is invalid, which the crate's tests rule out.
pub fn builtin() -> Vec<Script> {
    BUILTIN_FILES
        .iter()
        .map(|(file, text)| {
            Script::parse(text, &Path::new("<builtin>").join(file))
                .unwrap_or_else(|e| panic!("shipped conformance script is invalid: {e}"))
        })
        .collect()
}

/// A shipped script by name or file stem, or a `.toml` file by path.
///
/// Errors: [`ScriptError::NotFound`] and those of [`Script::load`].
pub fn find(name_or_path: &str) -> Result<Script, ScriptError> {
    let all = builtin();
    if let Some(s) = all
        .iter()
        .find(|s| s.name == name_or_path || s.path.file_stem().is_some_and(|f| f == name_or_path))
    {
        return Ok(s.clone());
    }
    let path = Path::new(name_or_path);
    if name_or_path.ends_with(".toml") || name_or_path.contains('/') || path.is_file() {
        return Script::load(path);
    }
    Err(ScriptError::NotFound {
        name: name_or_path.into(),
        known: all
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_script_parses() {
        let all = builtin();
        assert_eq!(all.len(), BUILTIN_FILES.len());
        for s in &all {
            if s.is_large() {
                assert!(
                    s.min_cwnd >= 1500
                        && !s.scale_windows
                        && s.rate_mbit > 0.0
                        && s.rtt_ms.iter().all(|&r| r >= 100.0),
                    "{}: a large-window script reaches 1,500 segments or more at RTTs of \
                     100 ms or more, behind a bottleneck",
                    s.name
                );
            } else {
                assert!(s.rtt_ms.len() == 2, "{}: a short and a long RTT", s.name);
            }
        }
    }

    #[test]
    fn a_bad_field_is_named_with_the_file() {
        let text = "name = \"x\"\ndoc = \"\"\nrtt_ms = [10]\nduration_rtts = 10\n[loss]\nevery = 5\nfrom_segment = 10\nuntil_segment = 3\n";
        let e = Script::parse(text, Path::new("bad.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bad.toml") && e.contains("loss.until_segment"),
            "{e}"
        );
        let e = Script::parse("name = \"x\"\nrtt = 3\n", Path::new("b.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("b.toml"), "{e}");
        let e = Script::parse(
            "name = \"x\"\ndoc = \"\"\nrtt_ms = [10]\nduration_rtts = 10\nwhatever = 1\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("whatever"), "{e}");
    }

    #[test]
    fn rtt_factor_follows_steps_and_ramps() {
        let s = Script {
            rtt: vec![
                RttChange {
                    at_rtts: 10.0,
                    factor: 2.0,
                    ramp_rtts: 0.0,
                },
                RttChange {
                    at_rtts: 20.0,
                    factor: 0.5,
                    ramp_rtts: 10.0,
                },
            ],
            ..Script::parse(
                "name = \"x\"\ndoc = \"\"\nrtt_ms = [10]\nduration_rtts = 10\n",
                Path::new("x"),
            )
            .unwrap()
        };
        assert_eq!(s.rtt_factor(5.0), 1.0);
        assert_eq!(s.rtt_factor(15.0), 2.0);
        assert!((s.rtt_factor(25.0) - 1.25).abs() < 1e-9);
        assert_eq!(s.rtt_factor(40.0), 0.5);
    }

    #[test]
    fn a_large_window_the_script_cannot_reach_is_refused_at_parse_time() {
        let head =
            "name = \"x\"\ndoc = \"\"\nrtt_ms = [324]\nduration_rtts = 10\nscale_windows = false\n";
        let e = Script::parse(
            &format!("{head}min_cwnd = 3000\nrwnd_segments = 2000\n"),
            Path::new("w.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("w.toml") && e.contains("`min_cwnd`") && e.contains("2000 segments"),
            "{e}"
        );
        // The default receive window is 65,535 << 7 bytes: 5,793 segments of 1,448 bytes.
        let e = Script::parse(&format!("{head}min_cwnd = 6000\n"), Path::new("w.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("5793 segments") && e.contains("its default"),
            "{e}"
        );
        let e = Script::parse(
            &format!("{head}min_cwnd = 2000\n[loss]\nsegments = [500]\nevery = 800\nfrom_segment = 600\n"),
            Path::new("l.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`loss.every`") && e.contains("898 segments") && e.contains("every >= 1001"),
            "{e}"
        );
        // Losses that end leave an unbounded stretch after them.
        let s = Script::parse(
            &format!("{head}min_cwnd = 2000\n[loss]\nevery = 800\nuntil_segment = 5000\n"),
            Path::new("ok.toml"),
        )
        .unwrap();
        assert_eq!(
            (
                s.longest_loss_free(),
                s.min_cwnd_at(324.0),
                s.window_scale(10.0)
            ),
            (None, 2000, 1.0)
        );
        // A long loss-free prefix reaches it before the periodic losses start.
        let s = Script::parse(
            &format!("{head}min_cwnd = 2000\n[loss]\nevery = 800\nfrom_segment = 1500\n"),
            Path::new("ok.toml"),
        )
        .unwrap();
        assert_eq!(s.longest_loss_free(), Some(2299));
    }

    #[test]
    fn segment_sets_pick_every_nth_in_range() {
        let s = SegmentSet {
            segments: vec![3],
            every: 10,
            from_segment: 100,
            until_segment: 130,
        };
        let picked: Vec<u64> = (0..200).filter(|&n| s.contains(n)).collect();
        assert_eq!(picked, vec![3, 109, 119, 129]);
    }
}
