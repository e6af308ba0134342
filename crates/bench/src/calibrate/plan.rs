//! The scenarios a calibration runs: each part's points written in the scenario language
//! (so the language's own checks refuse what it does not allow, and the files stay in the
//! report as the record of what ran), with the algorithm, clock and host load to run them
//! under.

use super::{Options, Part};

/// One `cctl bench run` of a calibration.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The part it belongs to.
    pub part: Part,
    /// File stem of the scenario and name of its results directory (`ceiling`,
    /// `path-schedule`, `agree-other-clock`).
    pub name: String,
    /// The algorithm under test (`cubic`, `bpf_reno` as `reno`, `htcp`).
    pub algo: &'static str,
    /// The scenario, in the scenario language (`crates/scenario`), profile `paper`.
    pub toml: String,
    /// Run on the clock other than the calibrated one (the agreement part's reference).
    pub other_clock: bool,
    /// Run while two CPU-bound processes keep the host busy.
    pub loaded: bool,
}

/// RTT of every part but the ceiling's second RTT, in ms ([P0]'s 42 ms).
pub const RTT_MS: f64 = 42.0;

/// The ceiling part's RTTs, in ms (quick: 42 only).
pub fn ceiling_rtts(quick: bool) -> Vec<f64> {
    if quick {
        vec![RTT_MS]
    } else {
        vec![RTT_MS, 162.0]
    }
}

/// Loss probabilities of the Mathis part, 1e-4 to 1e-2 (quick: 1e-3 and 1e-2).
pub fn mathis_losses(quick: bool) -> Vec<f64> {
    if quick {
        vec![1e-3, 1e-2]
    } else {
        vec![1e-4, 3e-4, 1e-3, 3e-3, 1e-2]
    }
}

/// Buffers of the Reno-vs-buffer part, in BDPs.
pub const RENO_BUFFERS_BDP: [f64; 4] = [0.1, 0.25, 0.5, 1.0];

/// The schedule of the path part: `(at s, rate Mbit/s)` after starting at the first rate.
pub const SCHEDULE: [(f64, f64); 2] = [(3.0, 10.0), (6.0, 20.0)];

/// Repetitions of the repeatability, load and agreement parts (5; quick: 3).
pub fn repetitions(quick: bool) -> u32 {
    if quick {
        3
    } else {
        5
    }
}

fn list(v: &[f64]) -> String {
    let items: Vec<String> = v.iter().map(|x| format!("{x}")).collect();
    format!("[{}]", items.join(", "))
}

/// A scenario with one `{algo}` flow per start time, `defaults` and a `paper` profile.
/// The `ci` profile, which the language requires and calibrate does not run, is `profile`
/// with its rates capped at the ci scale.
fn scenario(
    name: &str,
    title: &str,
    metrics: &str,
    defaults: &str,
    starts: &[f64],
    profile: &str,
) -> String {
    let mut s = format!(
        "# Written by `cctl bench calibrate` ({title}); run with --profile paper.\n\
         id = \"C.{name}\"\nname = \"calibrate-{name}\"\ntitle = \"Calibration: {title}\"\n\
         source = \"cctl bench calibrate (issue 25)\"\nmetrics = {metrics}\nplots = [\"cwnd\"]\n\n\
         [defaults]\nweb_sessions = 0\n{defaults}\n"
    );
    for start in starts {
        s += &format!("[[flows]]\ncc = \"{{algo}}\"\nstart_s = {start}\n\n");
    }
    s += &format!(
        "[profiles.paper]\n{profile}\n\n[profiles.ci]\n{}\n",
        ci_profile(profile)
    );
    s
}

/// `profile` with its `rate_mbit` (a number or a list) capped at the ci scale.
fn ci_profile(profile: &str) -> String {
    let key = "rate_mbit = ";
    let Some(start) = profile.find(key) else {
        return profile.to_string();
    };
    let from = start + key.len();
    let rest = &profile[from..];
    let end = from
        + if rest.starts_with('[') {
            rest.find(']').map_or(rest.len(), |i| i + 1)
        } else {
            rest.find([',', '\n', ' ', '}']).unwrap_or(rest.len())
        };
    let mut rates: Vec<f64> = profile[from..end]
        .trim_matches(['[', ']'])
        .split(',')
        .filter_map(|x| x.trim().parse::<f64>().ok())
        .map(|r| r.min(cctl_scenario::CI_MAX_RATE_MBIT))
        .collect();
    rates.dedup();
    let value = if profile[from..].starts_with('[') {
        list(&rates)
    } else {
        rates.first().map_or(String::new(), |r| format!("{r}"))
    };
    format!("{}{key}{value}{}", &profile[..start], &profile[end..])
}

/// Every `cctl bench run` of the calibration's `parts`, in order.
pub fn plan(parts: &[Part], o: &Options) -> Vec<Planned> {
    let q = o.quick;
    let reps = repetitions(q);
    let mut out = Vec::new();
    for &part in parts {
        // (name, algorithm, scenario, on the other clock, under load)
        let runs: Vec<(&str, &'static str, String, bool, bool)> = match part {
            Part::Ceiling => vec![("ceiling", "cubic", ceiling(o), false, false)],
            Part::Path => vec![
                ("path", "cubic", path(q), false, false),
                ("path-schedule", "cubic", path_schedule(), false, false),
            ],
            Part::Theory => vec![
                ("theory-mathis", "reno", theory_mathis(q), false, false),
                ("theory-buffer", "reno", theory_buffer(q), false, false),
            ],
            Part::Repeat => vec![("repeat", "htcp", shared(q, &[20.0], reps), false, false)],
            Part::Load => vec![("load", "htcp", shared(q, &[20.0], reps), false, true)],
            Part::Agree => {
                let t = shared(q, &[10.0, 20.0], reps);
                vec![
                    ("agree", "htcp", t.clone(), false, false),
                    ("agree-other-clock", "htcp", t, true, false),
                ]
            }
        };
        out.extend(
            runs.into_iter()
                .map(|(name, algo, toml, other_clock, loaded)| Planned {
                    part,
                    name: name.to_string(),
                    algo,
                    toml,
                    other_clock,
                    loaded,
                }),
        );
    }
    out
}

/// Two flows of H-TCP sharing a 20 % BDP drop-tail buffer, the second 5 s later, at
/// `rates`, `reps` times: a point with backoffs, queueing and competition, for the
/// run-to-run parts.
fn shared(q: bool, rates: &[f64], reps: u32) -> String {
    scenario(
        "repeat",
        "two H-TCP flows, 20 % BDP",
        "[\"M1\", \"M2\", \"M3\", \"M8\", \"M9\"]",
        &format!(
            "rtt_ms = {RTT_MS}\nbuffer_bdp = 0.2\nbdp_rtt = \"flow1\"\nloss = 0.0\nduration_s = {}\n",
            if q { 15 } else { 30 }
        ),
        &[0.0, 5.0],
        &format!("sweep = {{ rate_mbit = {} }}\nrepeat = {reps}", list(rates)),
    )
}

/// Part 1: one cubic flow at 100 % BDP over `o.rates` and the ceiling's RTTs.
fn ceiling(o: &Options) -> String {
    let q = o.quick;
    scenario(
        "ceiling",
        "ceiling, one cubic flow, 100 % BDP",
        "[\"M1\", \"M8\"]",
        &format!(
            "buffer_bdp = 1.0\nbdp_rtt = \"flow1\"\nloss = 0.0\nduration_s = {}\n",
            if q { 10 } else { 30 }
        ),
        &[0.0],
        &format!(
            "sweep = {{ rate_mbit = {}, rtt_ms = {} }}\nrepeat = 1",
            list(&o.rates),
            list(&ceiling_rtts(q))
        ),
    )
}

/// Part 2: RTT, rate and loss as configured.
fn path(q: bool) -> String {
    scenario(
        "path",
        "RTT, rate and loss as configured",
        "[\"M1\", \"M8\", \"M9\"]",
        &format!(
            "rate_mbit = 20\nbuffer_bdp = 1.0\nbdp_rtt = \"flow1\"\nduration_s = {}\n",
            if q { 10 } else { 30 }
        ),
        &[0.0],
        "sweep = { rtt_ms = [42, 162], loss = [0.0, 0.01] }\nrepeat = 1",
    )
}

/// Part 2: a rate schedule's change times ([`SCHEDULE`]).
fn path_schedule() -> String {
    let steps: Vec<String> = SCHEDULE
        .iter()
        .map(|(at, r)| format!("{{ at_s = {at}, rate_mbit = {r} }}"))
        .collect();
    scenario(
        "path-schedule",
        "a rate schedule's change times",
        "[\"M1\", \"M8\"]",
        &format!(
            "rate_mbit = 20\nrtt_ms = {RTT_MS}\nbuffer_bdp = 1.0\nbdp_rtt = \"flow1\"\nloss = 0.0\nduration_s = 9\nrate_schedule = [{}]\n",
            steps.join(", ")
        ),
        &[0.0],
        "repeat = 1",
    )
}

/// Part 3: one Reno flow under random loss (against Mathis et al.).
fn theory_mathis(q: bool) -> String {
    scenario(
        "theory-mathis",
        "one Reno flow under random loss",
        "[\"M1\", \"M9\"]",
        &format!(
            "rtt_ms = {RTT_MS}\nbuffer_bdp = 1.0\nbdp_rtt = \"flow1\"\nduration_s = {}\n",
            if q { 30 } else { 120 }
        ),
        &[0.0],
        &format!(
            "rate_mbit = {}\nsweep = {{ loss = {} }}\nrepeat = 1",
            if q { 50 } else { 100 },
            list(&mathis_losses(q))
        ),
    )
}

/// Part 3: one Reno flow against buffer size (against the fluid sawtooth).
fn theory_buffer(q: bool) -> String {
    scenario(
        "theory-buffer",
        "one Reno flow against buffer size",
        "[\"M1\", \"M8\"]",
        &format!(
            "rtt_ms = {RTT_MS}\nbdp_rtt = \"flow1\"\nbuffer_floor_pkts = 2\nloss = 0.0\nduration_s = {}\n",
            if q { 20 } else { 60 }
        ),
        &[0.0],
        &format!(
            "rate_mbit = {}\nsweep = {{ buffer_bdp = {} }}\nrepeat = 1",
            if q { 20 } else { 50 },
            list(&RENO_BUFFERS_BDP)
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use cctl_scenario::{Profile, Scenario};
    use std::path::Path;

    #[test]
    fn every_planned_scenario_parses_and_expands_in_the_paper_profile() {
        for quick in [true, false] {
            let o = Options {
                quick,
                rates: Options::default_rates(quick),
            };
            for p in plan(&Part::ALL, &o) {
                let sc = Scenario::parse(&p.toml, Path::new(&format!("{}.toml", p.name)))
                    .unwrap_or_else(|e| panic!("{}: {e}\n{}", p.name, p.toml));
                let points = sc
                    .expand(Profile::Paper, 1)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.name));
                assert!(!points.is_empty(), "{}", p.name);
            }
        }
    }

    #[test]
    fn the_ci_profile_caps_rates_at_the_ci_scale() {
        assert_eq!(
            ci_profile("sweep = { rate_mbit = [10, 50, 250], rtt_ms = [42] }\nrepeat = 1"),
            "sweep = { rate_mbit = [10, 50], rtt_ms = [42] }\nrepeat = 1"
        );
        assert_eq!(
            ci_profile("rate_mbit = 100\nrepeat = 1"),
            "rate_mbit = 50\nrepeat = 1"
        );
        assert_eq!(ci_profile("repeat = 1"), "repeat = 1");
    }

    #[test]
    fn a_rate_above_the_language_limit_is_refused_by_the_language() {
        let o = Options {
            quick: true,
            rates: vec![10.0, 20_000.0],
        };
        let p = &plan(&[Part::Ceiling], &o)[0];
        let e = Scenario::parse(&p.toml, Path::new("ceiling.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("20000 Mbit/s") && e.contains("10000"), "{e}");
    }
}
