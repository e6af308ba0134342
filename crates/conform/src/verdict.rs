//! Step-by-step comparison of two senders' trajectories and the verdict rules of a
//! conformance check.

use super::lockstep::{SideRun, StepState};

/// Where two trajectories first differ.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Divergence {
    /// Step (ACK index, from 0).
    pub step: usize,
    /// Time of the step, ms since the run started.
    pub t_ms: f64,
    /// The first sender's state there (`None`: it got no ACK k).
    pub a: Option<StepState>,
    /// The second sender's state there.
    pub b: Option<StepState>,
    /// The first sender's algorithm variables after that step (ports only), `name=value`.
    pub vars: Option<String>,
}

/// Two trajectories compared step by step.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Comparison {
    /// Steps compared: ACKs written to both senders, count.
    pub steps: usize,
    /// Share of those steps with identical cwnd and ssthresh, %.
    pub identical_pct: f64,
    /// Largest |cwnd_a − cwnd_b| over those steps, segments.
    pub max_abs_cwnd_diff: u32,
    /// First step with a different cwnd, ssthresh or CA state, or where only one sender
    /// got an ACK; `None` = none.
    pub first_divergence: Option<Divergence>,
}

/// Compares `a` with `b` step by step (see [`Comparison`]).
pub fn compare(a: &SideRun, b: &SideRun) -> Comparison {
    compare_with(a, b, 2)
}

/// Compares two senders of different runs: runs end at a fixed time, so one may have got
/// a few more ACKs than the other in its last window; only their states are compared.
pub fn compare_across_runs(a: &SideRun, b: &SideRun) -> Comparison {
    compare_with(a, b, usize::MAX)
}

/// [`compare`], with more than `tail_slack` extra steps on one side counted as a divergence.
fn compare_with(a: &SideRun, b: &SideRun, tail_slack: usize) -> Comparison {
    let n = a.steps.len().min(b.steps.len());
    let mut same = 0usize;
    let mut max_diff = 0u32;
    let mut first = None;
    for k in 0..n {
        let (x, y) = (&a.steps[k], &b.steps[k]);
        if x.cwnd == y.cwnd && x.ssthresh == y.ssthresh {
            same += 1;
        }
        max_diff = max_diff.max(x.cwnd.abs_diff(y.cwnd));
        if first.is_none() && (x.cwnd, x.ssthresh, x.ca_state) != (y.cwnd, y.ssthresh, y.ca_state) {
            first = Some(Divergence {
                step: k,
                t_ms: x.t_us as f64 / 1000.0,
                a: Some(*x),
                b: Some(*y),
                vars: None,
            });
        }
    }
    if first.is_none() && a.steps.len().abs_diff(b.steps.len()) > tail_slack {
        // One sender got ACKs the other did not: they sent differently. (A step or two at
        // the very end is the run stopping between two senders' ACKs, not a difference.)
        let longer = if a.steps.len() > b.steps.len() { a } else { b };
        first = Some(Divergence {
            step: n,
            t_ms: longer.steps[n].t_us as f64 / 1000.0,
            a: a.steps.get(n).copied(),
            b: b.steps.get(n).copied(),
            vars: None,
        });
    }
    Comparison {
        steps: n,
        identical_pct: if n == 0 {
            0.0
        } else {
            100.0 * same as f64 / n as f64
        },
        max_abs_cwnd_diff: max_diff,
        first_divergence: first,
    }
}

/// A port's tolerance against its module, declared with its reason in the port's
/// "differences from the Linux module" header as a line
/// `conform tolerance: <N> segments: <reason>`: the port may first diverge earlier than
/// the module from itself, if at that step cwnd and ssthresh differ by at most N segments
/// and the CA state is the same. What follows a first divergence is for reading, not for
/// the verdict: the two senders then get different ACK streams.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Tolerance {
    /// |Δcwnd| and |Δssthresh| allowed at the first divergence, segments.
    pub cwnd_segments: u32,
    /// Why, as written in the header.
    pub reason: String,
}

/// The tolerance a port's program header declares (see [`Tolerance`]), if any.
pub fn header_tolerance(source: &str) -> Option<Tolerance> {
    let line = source
        .lines()
        .take_while(|l| !l.starts_with("#include"))
        .find_map(|l| l.split_once("conform tolerance:"))?
        .1;
    let (n, reason) = line.split_once("segments:")?;
    Some(Tolerance {
        cwnd_segments: n.trim().parse().ok()?,
        reason: reason.trim().to_string(),
    })
}

/// How a port is judged.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "rule")]
pub enum Rule {
    /// Rules that do not read the clock: identical at every step.
    Exact,
    /// Clock- or RTT-driven rules: no earlier first divergence and no larger |Δcwnd| than
    /// the module against itself (plus a declared tolerance).
    Baseline {
        /// Earliest first divergence of the module against itself over the baseline runs
        /// (`None`: the module never diverged from itself).
        module_first_divergence: Option<usize>,
        /// Largest |Δcwnd| of the module against itself, segments.
        module_max_abs_cwnd_diff: u32,
        /// The declared tolerance, if any.
        tolerance: Option<Tolerance>,
    },
}

/// Whether `port` (a comparison against the module) matches under `rule`; with the
/// reason when it does not.
pub fn judge(port: &Comparison, rule: &Rule) -> (bool, Option<String>) {
    match rule {
        Rule::Exact => match &port.first_divergence {
            None => (true, None),
            Some(d) => (
                false,
                Some(format!("diverges at step {} (an exact rule)", d.step)),
            ),
        },
        Rule::Baseline {
            module_first_divergence,
            module_max_abs_cwnd_diff,
            tolerance,
        } => {
            let port_first = port.first_divergence.as_ref().map(|d| d.step);
            let early = match (port_first, module_first_divergence) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(p), Some(m)) => p < *m,
            };
            let bigger = port.max_abs_cwnd_diff > *module_max_abs_cwnd_diff;
            if !early && !bigger {
                return (true, None);
            }
            if let (Some(t), Some(d)) = (tolerance, &port.first_divergence) {
                if let (Some(a), Some(b)) = (d.a, d.b) {
                    if a.ca_state == b.ca_state
                        && a.ssthresh.abs_diff(b.ssthresh) <= t.cwnd_segments
                        && a.cwnd.abs_diff(b.cwnd) <= t.cwnd_segments
                    {
                        return (true, None);
                    }
                }
            }
            (
                false,
                Some(format!(
                    "first divergence at step {} against the module's own {}, max |Δcwnd| {} against {}{}",
                    port_first.map_or("none".into(), |s| s.to_string()),
                    module_first_divergence.map_or("none".into(), |s| s.to_string()),
                    port.max_abs_cwnd_diff,
                    module_max_abs_cwnd_diff,
                    tolerance.as_ref().map_or(String::new(), |t| format!(
                        "; beyond the declared tolerance of {} segment(s) at the first divergence",
                        t.cwnd_segments
                    ))
                )),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(cwnds: &[u32]) -> SideRun {
        SideRun {
            cc: "x".into(),
            cookie: 0,
            steps: cwnds
                .iter()
                .enumerate()
                .map(|(i, &c)| StepState {
                    t_us: i as u64 * 1000,
                    cwnd: c,
                    ssthresh: 100,
                    ..Default::default()
                })
                .collect(),
            done_us: Vec::new(),
            receiver: Default::default(),
            mss: 1448,
        }
    }

    #[test]
    fn identical_trajectories_do_not_diverge() {
        let c = compare(&side(&[10, 11, 12]), &side(&[10, 11, 12]));
        assert_eq!(
            (c.steps, c.identical_pct, c.max_abs_cwnd_diff),
            (3, 100.0, 0)
        );
        assert!(c.first_divergence.is_none());
        assert!(judge(&c, &Rule::Exact).0);
    }

    #[test]
    fn the_first_differing_step_is_reported() {
        let c = compare(&side(&[10, 11, 12, 13]), &side(&[10, 11, 14, 13]));
        assert_eq!(c.first_divergence.as_ref().unwrap().step, 2);
        assert_eq!((c.identical_pct, c.max_abs_cwnd_diff), (75.0, 2));
        assert!(!judge(&c, &Rule::Exact).0);
    }

    #[test]
    fn a_missing_step_is_a_divergence() {
        let c = compare(&side(&[10, 11, 12, 13, 14]), &side(&[10, 11]));
        assert_eq!(c.first_divergence.unwrap().step, 2);
    }

    #[test]
    fn baseline_rule_compares_with_the_modules_own_spread() {
        let c = compare(&side(&[10, 11, 12, 13]), &side(&[10, 11, 14, 13]));
        let rule = |first, diff| Rule::Baseline {
            module_first_divergence: first,
            module_max_abs_cwnd_diff: diff,
            tolerance: None,
        };
        assert!(judge(&c, &rule(Some(1), 3)).0);
        assert!(
            !judge(&c, &rule(Some(3), 3)).0,
            "earlier than the module's own"
        );
        assert!(
            !judge(&c, &rule(Some(1), 1)).0,
            "larger than the module's own"
        );
        assert!(
            !judge(&c, &rule(None, 5)).0,
            "the module never diverged from itself"
        );
    }

    #[test]
    fn a_header_tolerance_is_read_with_its_reason() {
        let src = "/* x\n *   - conform tolerance: 2 segments: usec clock against jiffies\n */\n#include \"a.h\"\n";
        let t = header_tolerance(src).unwrap();
        assert_eq!(t.cwnd_segments, 2);
        assert_eq!(t.reason, "usec clock against jiffies");
        assert!(header_tolerance("/* none */\n#include \"a.h\"\n").is_none());
    }
}
