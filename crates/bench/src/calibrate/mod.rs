//! `cctl bench calibrate`: the testbed's own acceptance test (issue 25). How far the guest's
//! paths, and the figures measured on them, can be trusted on one clock (virtual or real).
//!
//! Parts ([`Part`]), each a scenario written by [`plan`] and run by `cctl bench run`:
//! 1. [`Part::Ceiling`]: one cubic flow, 100 % BDP buffer, RTT 42 and 162 ms, rates 10
//!    Mbit/s to 1 Gbit/s: goodput utilisation, the guest's CPU busy share in its own time,
//!    wall time per second of traffic. The ceiling is the highest rate (and all below it)
//!    whose utilisation is within 2 % of the host kernel's tbf figure, [`TBF_UTILISATION`].
//! 2. [`Part::Path`]: min RTT against the configured RTT, the tbf rate a saturating flow
//!    gets, netem's achieved loss rate against the configured one, and a rate schedule's
//!    change times against the planned ones.
//! 3. [`Part::Theory`]: one bpf_reno flow under random loss p against Mathis et al.'s
//!    `MSS/RTT · C/sqrt(p)` ([`mathis_bps`]), and Reno's utilisation against buffer size
//!    ([`reno_utilisation`]).
//! 4. [`Part::Repeat`]: one point run several times: each metric's spread.
//! 5. [`Part::Load`]: the same point while two CPU-bound processes keep the host busy.
//! 6. [`Part::Agree`]: at 10 and 20 Mbit/s, runs on this clock against runs on the other.
//!
//! The analysis ([`analyse`]) reads the `cctl bench run` results directories; the report is
//! `calibrate.json` ([`Report`]), `calibrate.md` ([`markdown`]) and plots.

pub mod analyse;
pub mod plan;
pub mod report;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

pub use analyse::analyse;
pub use plan::{plan, Planned};
pub use report::{markdown, plots, Report};

/// Goodput utilisation of one flow through the host kernel's tbf with a 100 % BDP buffer:
/// the ceiling's reference (a 1514-byte frame carries 1448 bytes of payload; measured on
/// the host at 95.5 % by `cctl bench perf --parts ceiling`).
pub const TBF_UTILISATION: f64 = 0.955;

/// How far below [`TBF_UTILISATION`] a rate may fall and stay under the ceiling, as a
/// fraction of it (2 %).
pub const CEILING_TOLERANCE: f64 = 0.02;

/// One part of the calibration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    /// Highest rate the guest keeps up with.
    Ceiling,
    /// The path is what was asked for: RTT, rate, loss, schedule timing.
    Path,
    /// Reno against Mathis et al. and against the buffer-size model.
    Theory,
    /// Run-to-run spread of one point.
    Repeat,
    /// The same point on a busy host.
    Load,
    /// This clock against the other at rates the real-clock guest keeps up with.
    Agree,
}

impl Part {
    /// Every part, in report order.
    pub const ALL: [Part; 6] = [
        Part::Ceiling,
        Part::Path,
        Part::Theory,
        Part::Repeat,
        Part::Load,
        Part::Agree,
    ];

    /// The name used on the command line, in file names and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Part::Ceiling => "ceiling",
            Part::Path => "path",
            Part::Theory => "theory",
            Part::Repeat => "repeat",
            Part::Load => "load",
            Part::Agree => "agree",
        }
    }

    /// Every part's name, comma-separated (for help and errors).
    pub fn names() -> String {
        Part::ALL.map(Part::name).join(",")
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Part {
    type Err = String;
    /// Parses a part's name; the error lists them.
    fn from_str(s: &str) -> Result<Self, String> {
        Part::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("unknown part '{s}'; the parts are {}", Part::names()))
    }
}

/// What a calibration runs: its parts' sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Options {
    /// Short version: fewer points, shorter runs, fewer repetitions.
    pub quick: bool,
    /// Rates of the ceiling part, in Mbit/s, lowest first.
    pub rates: Vec<f64>,
}

impl Options {
    /// The default rates of the ceiling part, in Mbit/s: 10 Mbit/s to 1 Gbit/s (quick: 10,
    /// 50 and 250).
    pub fn default_rates(quick: bool) -> Vec<f64> {
        if quick {
            vec![10.0, 50.0, 250.0]
        } else {
            vec![10.0, 20.0, 50.0, 100.0, 250.0, 500.0, 1000.0]
        }
    }
}

/// Mathis et al.'s steady-state throughput of one Reno flow under random loss, in bit/s:
/// `MSS/RTT · C/sqrt(p)` with `C = sqrt(3/(2b))` ("The macroscopic behavior of the TCP
/// congestion avoidance algorithm", CCR 1997, eq. 3). `mss_bytes` payload per segment,
/// `rtt_s` the flow's mean RTT in s, `p` the loss probability, `b` data segments per ACK.
pub fn mathis_bps(mss_bytes: f64, rtt_s: f64, p: f64, b: f64) -> f64 {
    let c = (3.0 / (2.0 * b)).sqrt();
    mss_bytes * 8.0 / rtt_s * c / p.sqrt()
}

/// Utilisation of one Reno flow on a drop-tail bottleneck whose buffer is `beta` BDPs (the
/// fluid sawtooth: cwnd grows one segment per RTT from `(1+β)/2` to `1+β` BDPs and halves;
/// the link idles while cwnd is below one BDP, and the RTT grows with the queue above it).
/// 1 for `beta ≥ 1`.
pub fn reno_utilisation(beta: f64) -> f64 {
    if beta >= 1.0 {
        return 1.0;
    }
    // In units of the BDP, x = cwnd / BDP. Below 1: one RTT per unit of x, x sent per RTT.
    // Above 1: x RTTs per unit of x (the queue), one BDP sent per RTT.
    let a = (1.0 + beta) / 2.0;
    let top = 1.0 + beta;
    let below_sent = (1.0 - a * a) / 2.0;
    let below_time = 1.0 - a;
    let above = (top * top - 1.0) / 2.0;
    (below_sent + above) / (below_time + above)
}

/// `(max − min) / |mean|` of `values`, as a fraction; 0 for fewer than two values or a zero
/// mean.
pub fn spread(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let (lo, hi) = values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    if mean == 0.0 {
        0.0
    } else {
        (hi - lo) / mean.abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mathis_with_delayed_acks_is_the_textbook_0_87() {
        // b = 2: C = sqrt(3/4) = 0.866; 1448 bytes, 100 ms, p = 1 %: 0.866 · 115840 / 0.1 bit/s.
        let bps = mathis_bps(1448.0, 0.1, 0.01, 2.0);
        assert!((bps - 1448.0 * 8.0 / 0.1 * 0.75_f64.sqrt() * 10.0).abs() < 1e-6);
        // b = 1 gives the familiar 1.22.
        let c1 = mathis_bps(1.0, 1.0, 1.0, 1.0) / 8.0;
        assert!((c1 - 1.2247).abs() < 1e-4);
    }

    #[test]
    fn reno_fills_the_link_from_one_bdp_and_loses_a_quarter_without_a_buffer() {
        assert_eq!(reno_utilisation(1.0), 1.0);
        assert_eq!(reno_utilisation(2.0), 1.0);
        // β = 0: cwnd from BDP/2 to BDP, always below: mean 3/4.
        assert!((reno_utilisation(0.0) - 0.75).abs() < 1e-12);
        let mut last = 0.0;
        for b in [0.0, 0.1, 0.25, 0.5, 0.75, 0.99] {
            let u = reno_utilisation(b);
            assert!(u > last && u < 1.0, "{b}: {u}");
            last = u;
        }
    }

    #[test]
    fn spread_is_range_over_mean() {
        assert_eq!(spread(&[10.0]), 0.0);
        assert!((spread(&[9.0, 10.0, 11.0]) - 0.2).abs() < 1e-12);
        assert_eq!(spread(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn parts_parse_by_name_and_list_themselves_on_error() {
        for p in Part::ALL {
            assert_eq!(p.name().parse::<Part>(), Ok(p));
        }
        let e = "speed".parse::<Part>().unwrap_err();
        assert!(e.contains("ceiling,path,theory,repeat,load,agree"), "{e}");
    }
}
