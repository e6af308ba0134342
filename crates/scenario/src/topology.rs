//! The `[topology]` table: a chain of bottlenecks (the parking lot of the IRTF TCP
//! evaluation suite, RFC 5166 §4.2 and Andrew et al. 2008 §3.3), and each flow's `path`
//! through it.
//!
//! ```toml
//! [topology]
//! bottlenecks = [                      # 1 to MAX_BOTTLENECKS hops, in chain order
//!   { rate_mbit = 20, rtt_ms = 10 },   # hop 1: its rate and its two-way propagation delay
//!   { rate_mbit = 20, rtt_ms = 10, buffer_pkts = 40 },
//!   {},                                # every key defaults to the point's parameter
//! ]
//!
//! [[flows]]
//! path = [1, 3]                        # enters before hop 1, leaves after hop 3: the long flow
//! [[flows]]
//! path = [2, 2]                        # a cross flow over hop 2 only
//! ```
//!
//! A hop's `rate_mbit` and `rtt_ms` default to the point's (`[defaults]`, profile, sweep), its
//! buffer to the point's buffer key (`buffer_bdp`, `buffer_pkts` or `buffer_ms`; a hop may
//! give its own, one of the three). A flow's RTT is the sum of the `rtt_ms` of the hops it
//! crosses; `buffer_bdp` of a hop is a fraction of that hop's rate × the RTT `bdp_rtt`
//! picks among the flows that cross it (the first, or the smallest). Without `[topology]`
//! a scenario is the dumbbell, a chain of one.

use serde::Deserialize;

pub use cctl_netem::chain::MAX_BOTTLENECKS;

use crate::de::de_at;
use crate::error::FieldError;
use crate::expr::Env;
use crate::model::{
    bdp_pkts, buffer_pkts, BdpRtt, FlowPath, FlowPlan, HopPlan, Profile, TopologyPlan,
    CI_MAX_RATE_MBIT, MAX_RATE_MBIT,
};

/// Scenario keys that have no meaning (or no implementation) on a chain, with why.
const NOT_WITH_TOPOLOGY: &[(&str, &str)] = &[
    (
        "reverse_rate_mbit",
        "the chain's reverse direction carries the ACK-path delay of each hop and is not shaped",
    ),
    (
        "web_sessions",
        "web cross traffic has no place on a chain yet (it needs the dumbbell's single receiver)",
    ),
    (
        "loss",
        "random loss is not implemented on a chain yet (only the dumbbell's senders have it)",
    ),
];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTopology {
    bottlenecks: Vec<toml::Value>,
}

/// One `topology.bottlenecks[k]` table as written: every key optional.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHop {
    rate_mbit: Option<f64>,
    rtt_ms: Option<f64>,
    buffer_bdp: Option<f64>,
    buffer_pkts: Option<u32>,
    buffer_ms: Option<f64>,
}

/// A parsed `[topology]`: the hops in chain order.
#[derive(Debug, Clone)]
pub struct Topology {
    pub(super) hops: Vec<RawHop>,
    /// Each `[[flows]]` table's path, 1-based `(first, last)` (set by
    /// [`Topology::check_paths`]).
    pub(super) paths: Vec<(usize, usize)>,
}

/// Parses the `[topology]` table (`at` = `topology`).
pub(super) fn parse_topology(value: toml::Value, at: &str) -> Result<Topology, FieldError> {
    let raw: RawTopology = de_at(value, at)?;
    let n = raw.bottlenecks.len();
    if !(1..=MAX_BOTTLENECKS).contains(&n) {
        return Err(FieldError::new(
            format!("{at}.bottlenecks"),
            format!("{n} bottlenecks: a chain has 1 to {MAX_BOTTLENECKS} (a parking lot 2 or 3)"),
        ));
    }
    let mut hops = Vec::with_capacity(n);
    for (k, v) in raw.bottlenecks.into_iter().enumerate() {
        let hat = format!("{at}.bottlenecks[{k}]");
        let hop: RawHop = de_at(v, &hat)?;
        let given: Vec<&str> = [
            ("buffer_bdp", hop.buffer_bdp.is_some()),
            ("buffer_pkts", hop.buffer_pkts.is_some()),
            ("buffer_ms", hop.buffer_ms.is_some()),
        ]
        .iter()
        .filter(|(_, set)| *set)
        .map(|(key, _)| *key)
        .collect();
        if given.len() > 1 {
            return Err(FieldError::new(
                format!("{hat}.{}", given[1]),
                format!(
                    "{} is set too: give only one of buffer_bdp, buffer_pkts, buffer_ms",
                    given[0]
                ),
            ));
        }
        let checks = [
            (
                "rate_mbit",
                hop.rate_mbit,
                "a rate must be > 0 Mbit/s",
                false,
            ),
            ("rtt_ms", hop.rtt_ms, "a delay must be ≥ 0 ms", true),
            ("buffer_bdp", hop.buffer_bdp, "a buffer must be > 0", false),
            ("buffer_ms", hop.buffer_ms, "a buffer must be > 0", false),
            (
                "buffer_pkts",
                hop.buffer_pkts.map(f64::from),
                "a buffer must be > 0",
                false,
            ),
        ];
        for (key, value, what, zero_ok) in checks {
            if let Some(x) = value {
                if !x.is_finite() || x < 0.0 || (x == 0.0 && !zero_ok) {
                    return Err(FieldError::new(
                        format!("{hat}.{key}"),
                        format!("{x} is not allowed: {what}"),
                    ));
                }
            }
        }
        hops.push(hop);
    }
    Ok(Topology {
        hops,
        paths: Vec::new(),
    })
}

/// Parses a flow's `path = [first, last]` (1-based, both whole numbers); its bounds are
/// checked against the chain by [`Topology::check_paths`].
pub(super) fn parse_path(value: &toml::Value, at: &str) -> Result<(i64, i64), FieldError> {
    let bad = || {
        FieldError::new(
            at,
            format!(
                "{value}: expected [first, last], the 1-based bottlenecks the flow enters \
                 before and leaves after (the long flow [1, N], a cross flow [k, k])"
            ),
        )
    };
    let list = value.as_array().ok_or_else(bad)?;
    match list.as_slice() {
        [a, b] => Ok((
            a.as_integer().ok_or_else(bad)?,
            b.as_integer().ok_or_else(bad)?,
        )),
        _ => Err(bad()),
    }
}

impl Topology {
    /// Number of bottlenecks.
    pub fn len(&self) -> usize {
        self.hops.len()
    }

    /// Whether the chain has no hop (never, once parsed).
    pub fn is_empty(&self) -> bool {
        self.hops.is_empty()
    }

    /// Checks each `[[flows]]` table's path (`paths[e]`, `None` if it gave none) against
    /// the chain: every flow has one, inside `1..=N` with first ≤ last, and every hop is
    /// crossed by some flow. Keeps the paths as 1-based `(first, last)`.
    pub(super) fn check_paths(&mut self, paths: &[Option<(i64, i64)>]) -> Result<(), FieldError> {
        let n = self.hops.len() as i64;
        let mut out = Vec::with_capacity(paths.len());
        for (e, p) in paths.iter().enumerate() {
            let at = format!("flows[{e}].path");
            let Some((first, last)) = *p else {
                return Err(FieldError::new(
                    at,
                    format!(
                        "missing: with [topology] every flow needs path = [first, last] \
                         (the chain has bottlenecks 1 to {n})"
                    ),
                ));
            };
            if first < 1 || last > n || first > last {
                return Err(FieldError::new(
                    at,
                    format!(
                        "[{first}, {last}]: no path from sender to receiver: the chain has \
                         bottlenecks 1 to {n}, and a path [first, last] needs \
                         1 ≤ first ≤ last ≤ {n}"
                    ),
                ));
            }
            out.push((first as usize, last as usize));
        }
        for k in 1..=self.hops.len() {
            if !out.iter().any(|&(f, l)| f <= k && k <= l) {
                return Err(FieldError::new(
                    format!("topology.bottlenecks[{}]", k - 1),
                    format!("no flow crosses bottleneck {k}: give a flow a path through it, or remove it"),
                ));
            }
        }
        self.paths = out;
        Ok(())
    }

    /// The chain of one point: each hop's values from its own keys or the point's `env`;
    /// sets each flow's `rtt_ms` to the sum over its path.
    ///
    /// Errors: a key of `env` that makes no sense with a topology ([`NOT_WITH_TOPOLOGY`]),
    /// a hop above the ci cap, a buffer below one packet.
    pub(super) fn plan(
        &self,
        env: &Env,
        flows: &mut [FlowPlan],
        bdp_rtt: BdpRtt,
        floor: f64,
        profile: Profile,
        ctx: &str,
    ) -> Result<TopologyPlan, FieldError> {
        for (key, why) in NOT_WITH_TOPOLOGY {
            if let Some(s) = env.get(*key) {
                if s.value != 0.0 {
                    return Err(FieldError::new(
                        &s.field,
                        format!("{key} = {} makes no sense with [topology]: {why}", s.value),
                    ));
                }
            }
        }
        let point = |key: &str| env.get(key).map(|s| s.value);
        let hop_rtts: Vec<f64> = self
            .hops
            .iter()
            .map(|h| h.rtt_ms.or(point("rtt_ms")).unwrap_or(0.0))
            .collect();
        let mut plan_paths = Vec::with_capacity(flows.len());
        for f in flows.iter_mut() {
            let (first, last) = self.paths[f.entry];
            let rtt_ms: f64 = hop_rtts[first - 1..last].iter().sum();
            f.rtt_ms = rtt_ms;
            plan_paths.push(FlowPath {
                first,
                last,
                rtt_ms,
            });
        }
        let mut hops = Vec::with_capacity(self.hops.len());
        for (i, h) in self.hops.iter().enumerate() {
            let k = i + 1;
            let hat = format!("topology.bottlenecks[{i}]");
            let rate = match h.rate_mbit {
                Some(r) => r,
                None => point("rate_mbit").ok_or_else(|| {
                    FieldError::new(
                        format!("{hat}.rate_mbit"),
                        "missing: set it here or rate_mbit in [defaults] or the profile",
                    )
                })?,
            };
            if rate > MAX_RATE_MBIT || (profile == Profile::Ci && rate > CI_MAX_RATE_MBIT) {
                let cap = if rate > MAX_RATE_MBIT {
                    format!("the highest capacity a scenario may use, {MAX_RATE_MBIT} Mbit/s")
                } else {
                    format!("the ci profile's cap of {CI_MAX_RATE_MBIT} Mbit/s")
                };
                let field = if h.rate_mbit.is_some() {
                    format!("{hat}.rate_mbit")
                } else {
                    env["rate_mbit"].field.clone()
                };
                return Err(FieldError::new(
                    field,
                    format!("bottleneck {k}: {rate} Mbit/s is above {cap} {ctx}"),
                ));
            }
            let across: Vec<f64> = plan_paths
                .iter()
                .filter(|p| p.first <= k && k <= p.last)
                .map(|p| p.rtt_ms)
                .collect();
            let rtt = match bdp_rtt {
                BdpRtt::Flow1 => across.first().copied(),
                BdpRtt::Min => across.iter().copied().reduce(f64::min),
            }
            .unwrap_or(hop_rtts[i]);
            let bdp = bdp_pkts(rate, rtt);
            let (raw, field) = if let Some(b) = h.buffer_bdp {
                (b * bdp, format!("{hat}.buffer_bdp"))
            } else if let Some(p) = h.buffer_pkts {
                (f64::from(p), format!("{hat}.buffer_pkts"))
            } else if let Some(ms) = h.buffer_ms {
                (bdp_pkts(rate, ms), format!("{hat}.buffer_ms"))
            } else if let Some(s) = env.get("buffer_bdp") {
                (s.value * bdp, s.field.clone())
            } else if let Some(s) = env.get("buffer_pkts") {
                (s.value, s.field.clone())
            } else if let Some(s) = env.get("buffer_ms") {
                (bdp_pkts(rate, s.value), s.field.clone())
            } else {
                return Err(FieldError::new(
                    format!("{hat}.buffer_bdp"),
                    "missing: set one of buffer_bdp, buffer_pkts, buffer_ms here or in [defaults]",
                ));
            };
            let (pkts, floored) = buffer_pkts(raw, floor);
            if !(1.0..=f64::from(u32::MAX)).contains(&pkts) {
                return Err(FieldError::new(
                    field,
                    format!("bottleneck {k}: the buffer is {pkts} packets; a drop-tail queue needs 1 to {} {ctx}", u32::MAX),
                ));
            }
            hops.push(HopPlan {
                rate_mbit: rate,
                rtt_ms: hop_rtts[i],
                bdp_pkts: bdp,
                buffer_pkts: pkts as u32,
                buffer_floored: floored,
            });
        }
        Ok(TopologyPlan {
            hops,
            paths: plan_paths,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::{Profile, Scenario};

    /// A 3-hop parking lot: one long flow and one cross flow per hop.
    pub(crate) const PARKING: &str = r#"
id = "P9"
name = "parking"
title = "A parking lot"
source = "test"
metrics = ["M1"]

[defaults]
rate_mbit = 20
rtt_ms = 10
buffer_bdp = 1

[topology]
bottlenecks = [{}, { rtt_ms = 20, buffer_pkts = 50 }, { rate_mbit = 10 }]

[[flows]]
path = [1, 3]
[[flows]]
path = [1, 1]
[[flows]]
path = [2, 2]
[[flows]]
cc = "reno"
path = [3, 3]

[profiles.paper]
duration_s = 60
[profiles.ci]
duration_s = 20
"#;

    fn rejects(from: &str, to: &str, field: &str, hint: &str) {
        assert!(PARKING.contains(from), "{from}");
        let text = PARKING.replacen(from, to, 1);
        let e = Scenario::parse(&text, Path::new("p.toml")).expect_err(to);
        assert_eq!(e.field(), Some(field), "{e}");
        assert!(e.to_string().contains(hint), "`{hint}` not in {e}");
    }

    #[test]
    fn a_three_hop_parking_lot_plans_each_hop_and_path() {
        let s = Scenario::parse(PARKING, Path::new("p.toml")).unwrap();
        let p = &s.expand(Profile::Ci, 1).unwrap()[0];
        let t = p.topology.as_ref().expect("a topology");
        let rates: Vec<f64> = t.hops.iter().map(|h| h.rate_mbit).collect();
        assert_eq!(rates, [20.0, 20.0, 10.0]);
        let rtts: Vec<f64> = t.hops.iter().map(|h| h.rtt_ms).collect();
        assert_eq!(rtts, [10.0, 20.0, 10.0]);
        // The long flow (first) defines each hop's BDP: 40 ms.
        assert_eq!(p.flows[0].rtt_ms, 40.0);
        assert_eq!(t.hops[0].buffer_pkts, 67); // 20 Mbit/s × 40 ms = 66.7 packets
        assert_eq!(t.hops[1].buffer_pkts, 50);
        assert_eq!(t.hops[2].buffer_pkts, 33);
        let paths: Vec<(usize, usize, f64)> = t
            .paths
            .iter()
            .map(|f| (f.first, f.last, f.rtt_ms))
            .collect();
        assert_eq!(
            paths,
            [(1, 3, 40.0), (1, 1, 10.0), (2, 2, 20.0), (3, 3, 10.0)]
        );
        let rtt_of_flows: Vec<f64> = p.flows.iter().map(|f| f.rtt_ms).collect();
        assert_eq!(rtt_of_flows, [40.0, 10.0, 20.0, 10.0]);
        assert_eq!(t.flows_across(2), [0, 2]);
    }

    #[test]
    fn a_path_outside_the_chain_has_no_path_from_sender_to_receiver() {
        for bad in ["[0, 1]", "[1, 4]", "[3, 2]"] {
            rejects(
                "path = [1, 1]",
                &format!("path = {bad}"),
                "flows[1].path",
                "no path from sender to receiver",
            );
        }
        rejects(
            "path = [1, 1]",
            "path = [1]",
            "flows[1].path",
            "expected [first, last]",
        );
        rejects(
            "path = [1, 1]\n",
            "\n",
            "flows[1].path",
            "every flow needs path",
        );
        rejects(
            "[topology]\nbottlenecks = [{}, { rtt_ms = 20, buffer_pkts = 50 }, { rate_mbit = 10 }]",
            "",
            "flows[0].path",
            "needs a [topology]",
        );
    }

    #[test]
    fn chains_and_keys_that_make_no_sense_are_refused() {
        rejects(
            "bottlenecks = [{}, { rtt_ms = 20, buffer_pkts = 50 }, { rate_mbit = 10 }]",
            "bottlenecks = []",
            "topology.bottlenecks",
            "1 to 4",
        );
        rejects(
            "bottlenecks = [{}, ",
            "bottlenecks = [{}, {}, {}, ",
            "topology.bottlenecks",
            "1 to 4",
        );
        rejects(
            "{ rate_mbit = 10 }",
            "{ rate_mbit = 10, queue = 3 }",
            "topology.bottlenecks[2].queue",
            "allowed keys",
        );
        rejects(
            "{ rate_mbit = 10 }",
            "{ rate_mbit = 10, buffer_ms = 5, buffer_pkts = 3 }",
            "topology.bottlenecks[2].buffer_ms",
            "only one of",
        );
        rejects(
            "{ rate_mbit = 10 }",
            "{ rate_mbit = 0 }",
            "topology.bottlenecks[2].rate_mbit",
            "> 0",
        );
        rejects(
            "{ rate_mbit = 10 }",
            "{ rate_mbit = 100 }",
            "topology.bottlenecks[2].rate_mbit",
            "ci profile's cap",
        );
        rejects(
            "buffer_bdp = 1\n",
            "buffer_bdp = 1\nloss = 0.01\n",
            "defaults.loss",
            "makes no sense with [topology]",
        );
        rejects(
            "buffer_bdp = 1\n",
            "buffer_bdp = 1\nreverse_rate_mbit = 1\n",
            "defaults.reverse_rate_mbit",
            "makes no sense with [topology]",
        );
        rejects(
            "path = [1, 3]",
            "path = [1, 3]\nrtt_ms = 30",
            "flows[0].rtt_ms",
            "sum of the rtt_ms of the hops",
        );
        rejects(
            "bottlenecks = [{}, ",
            "bottlenecks = [{}, {}, ",
            "topology.bottlenecks[3]",
            "no flow crosses bottleneck 4",
        );
    }
}
