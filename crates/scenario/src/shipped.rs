//! The shipped scenario files, embedded in the binary, and finding a scenario by name, test
//! id or path.

use std::path::Path;

use super::error::ScenarioError;
use super::schema::Scenario;

macro_rules! builtin_files {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/", $file)))),*]
    };
}

/// The shipped scenario files (`crates/scenario/scenarios/`), embedded: (file name, contents).
pub const BUILTIN_FILES: &[(&str, &str)] = builtin_files!(
    "t0_1_fairness_same_rtt.toml",
    "t0_2_rtt_unfairness.toml",
    "t0_3_backward_compatibility.toml",
    "t0_4_efficiency_vs_buffer.toml",
    "t0_5_efficiency_vs_rtt.toml",
    "t0_6_response_function.toml",
    "t0_7_convergence_time.toml",
    "t0_8_web_rtt_unfairness.toml",
    "t0_9_long_haul_single_flow.toml",
    "t1_1_static_throughput.toml",
    "t1_2_dynamic_three_flows.toml",
    "t1_3_dynamic_eight_flows.toml",
    "t1_4_overall_random.toml",
    "t2_5_convergence_with_web.toml",
    "t2_6_staggered_completion.toml",
    "t2_7_completion_vs_size.toml",
    "t3_1_effect_of_rtt.toml",
    "t3_2_effect_of_buffer.toml",
    "t3_3_effect_of_loss.toml",
    "t3_4_reno_friendliness.toml",
    "t3_5_rtt_fairness.toml",
    "t3_6_web_background.toml",
    "v1_native_comparison.toml",
    "parking_lot.toml",
    "modern_mix.toml",
    "rrul.toml",
);

/// The shipped scenarios, in test-id order, with `path` = `<builtin>/<file>.toml`.
///
/// # Panics
/// If a shipped file is invalid, which the crate's tests rule out.
pub fn builtin() -> Vec<Scenario> {
    BUILTIN_FILES
        .iter()
        .map(|(file, text)| {
            let path = Path::new("<builtin>").join(file);
            Scenario::parse(text, &path)
                .unwrap_or_else(|e| panic!("shipped scenario is invalid: {e}"))
        })
        .collect()
}

/// Finds a scenario by CLI name (`fairness-same-rtt`), test id (`T0.1`, any case), built-in
/// file stem (`t0_1_fairness_same_rtt`) or path to a `.toml` file.
pub fn find(name_or_path: &str) -> Result<Scenario, ScenarioError> {
    let all = builtin();
    if let Some(s) = all.iter().find(|s| {
        s.name == name_or_path
            || s.id.eq_ignore_ascii_case(name_or_path)
            || s.path.file_stem().is_some_and(|f| f == name_or_path)
    }) {
        return Ok(s.clone());
    }
    let path = Path::new(name_or_path);
    if name_or_path.ends_with(".toml") || name_or_path.contains('/') || path.is_file() {
        return Scenario::load(path);
    }
    Err(ScenarioError::NotFound {
        name: name_or_path.to_string(),
        known: all
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::test_input::shipped;
    use crate::{bdp_pkts, CcRef, Profile, RunPoint, CI_MAX_RATE_MBIT};

    /// Active flows at time `t` of `point`.
    fn active_at(point: &RunPoint, t: f64) -> usize {
        point
            .flows
            .iter()
            .filter(|f| f.start_s <= t && t < f.stop_s)
            .count()
    }

    #[test]
    fn every_shipped_scenario_parses_and_expands_in_both_profiles() {
        let all = builtin();
        assert_eq!(all.len(), 26);
        for s in &all {
            assert!(s.path.starts_with("<builtin>"), "{}", s.path.display());
            for profile in Profile::ALL {
                let points = s.expand(profile, s.seed(profile)).unwrap();
                assert!(!points.is_empty(), "{} {profile}", s.name);
                for (i, p) in points.iter().enumerate() {
                    assert_eq!(p.index, i);
                    assert!(!p.flows.is_empty(), "{} {profile} {}", s.name, p.label());
                    assert!(p.buffer_pkts >= 1);
                    for f in &p.flows {
                        assert!(
                            0.0 <= f.start_s && f.start_s < f.stop_s && f.stop_s <= p.duration_s
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn every_file_in_the_scenarios_directory_is_built_in() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".toml"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = BUILTIN_FILES.iter().map(|(f, _)| f.to_string()).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
        for (file, _) in BUILTIN_FILES {
            Scenario::load(&dir.join(file)).unwrap();
        }
    }

    #[test]
    fn shipped_scenarios_cover_the_test_list_with_unique_names() {
        let all = builtin();
        let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
        let want = [
            "T0.1", "T0.2", "T0.3", "T0.4", "T0.5", "T0.6", "T0.7", "T0.8", "T0.9", "T1.1", "T1.2",
            "T1.3", "T1.4", "T2.5", "T2.6", "T2.7", "T3.1", "T3.2", "T3.3", "T3.4", "T3.5", "T3.6",
            "V1", "PL1", "MM1", "LUL1",
        ];
        assert_eq!(ids, want);
        let names: BTreeSet<&str> = all.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names.len(), all.len());
        for (s, (file, _)) in all.iter().zip(BUILTIN_FILES) {
            if !s.id.starts_with('T') {
                continue;
            }
            let prefix = s.id.to_lowercase().replace(['t', '.'], "_");
            assert!(
                file.starts_with(&format!("t{}", &prefix[1..])),
                "{file} vs {}",
                s.id
            );
        }
    }

    #[test]
    fn find_accepts_a_name_an_id_in_any_case_or_a_path() {
        assert_eq!(shipped("fairness-same-rtt").id, "T0.1");
        assert_eq!(shipped("t0.1").name, "fairness-same-rtt");
        assert_eq!(shipped("T3.4").name, "reno-friendliness");
        assert_eq!(shipped("t2_7_completion_vs_size").id, "T2.7");
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/t0_2_rtt_unfairness.toml");
        let s = find(path.to_str().unwrap()).unwrap();
        assert_eq!((s.id.as_str(), s.path.as_path()), ("T0.2", path.as_path()));
        let e = find("no-such-test").unwrap_err().to_string();
        assert!(
            e.contains("no-such-test") && e.contains("fairness-same-rtt"),
            "{e}"
        );
        let e = find("/nonexistent/x.toml").unwrap_err().to_string();
        assert!(e.starts_with("/nonexistent/x.toml: "), "{e}");
    }

    #[test]
    fn ci_profiles_stay_at_or_below_50_mbit_and_100_ms_and_take_at_most_three_minutes() {
        let mut total = 0.0;
        println!(
            "{:<6} {:<26} {:>6} {:>7} {:>9}",
            "id", "name", "points", "repeat", "ci time"
        );
        for s in builtin() {
            let points = s.expand(Profile::Ci, s.seed(Profile::Ci)).unwrap();
            let secs = s.total_duration_s(Profile::Ci).unwrap();
            println!(
                "{:<6} {:<26} {:>6} {:>7} {:>8}s",
                s.id,
                s.name,
                points.len(),
                s.repeat(Profile::Ci),
                secs
            );
            total += secs;
            assert!(
                secs <= 180.0,
                "{}: ci profile takes {secs} s per algorithm",
                s.name
            );
            let r = s.repeat(Profile::Ci);
            assert!((1..=2).contains(&r), "{}: repeat {r}", s.name);
            for p in &points {
                assert!(p.rate_mbit <= CI_MAX_RATE_MBIT, "{} {}", s.name, p.label());
                assert!(p.reverse_rate_mbit.is_none_or(|r| r <= CI_MAX_RATE_MBIT));
                assert!(
                    (20.0..=156.0).contains(&p.duration_s),
                    "{} {}",
                    s.name,
                    p.duration_s
                );
                for f in &p.flows {
                    assert!(
                        f.rtt_ms <= 100.0,
                        "{} {}: flow RTT {}",
                        s.name,
                        p.label(),
                        f.rtt_ms
                    );
                }
            }
        }
        println!("all ci profiles: {total} s of emulated time per algorithm");
    }

    #[test]
    fn every_ci_profile_says_it_must_never_be_compared_with_the_papers() {
        for (file, text) in BUILTIN_FILES {
            let ci = &text[text.find("[profiles.ci]").expect("ci profile")..];
            let comment: String = ci
                .lines()
                .filter_map(|l| l.strip_prefix("# "))
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                comment.contains("never be compared with the papers' numbers"),
                "{file}: {comment}"
            );
        }
        for s in builtin() {
            assert!(
                s.note(Profile::Ci)
                    .is_some_and(|n| n.contains("never compare")),
                "{}",
                s.name
            );
            assert_eq!(s.note(Profile::Paper), None, "{}", s.name);
        }
    }

    #[test]
    fn paper_profiles_of_p0_run_600_s_at_least_5_times_and_p3_at_least_3() {
        for s in builtin() {
            let points = s.expand(Profile::Paper, 1).unwrap();
            let r = s.repeat(Profile::Paper);
            if s.id.starts_with("T0.") {
                assert!(r >= 5, "{}", s.name);
                let d = if s.id == "T0.9" { 1200.0 } else { 600.0 };
                assert!(points.iter().all(|p| p.duration_s == d), "{}", s.name);
            }
            if s.id.starts_with("T3.") {
                assert!(
                    r >= 3 && points.iter().all(|p| p.duration_s == 600.0),
                    "{}",
                    s.name
                );
                assert!(
                    points.iter().all(|p| p.init_ssthresh_pkts.is_some()),
                    "{}",
                    s.name
                );
            }
        }
    }

    #[test]
    fn t0_2_paper_profile_is_2_rates_by_5_rtts_with_flow_1_fixed_at_162_ms() {
        let s = shipped("rtt-unfairness");
        let points = s.expand(Profile::Paper, 1).unwrap();
        assert_eq!(points.len(), 10);
        let grid: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.vars["rate_mbit"], p.vars["rtt2_ms"]))
            .collect();
        let mut want = Vec::new();
        for rate in [10.0, 250.0] {
            for rtt in [22.0, 42.0, 82.0, 162.0, 324.0] {
                want.push((rate, rtt));
            }
        }
        assert_eq!(grid, want);
        for p in &points {
            assert_eq!(p.flows.len(), 2);
            assert_eq!(p.flows[0].rtt_ms, 162.0);
            assert_eq!(p.flows[1].rtt_ms, p.vars["rtt2_ms"]);
            assert_eq!((p.flows[0].start_s, p.flows[1].start_s), (0.0, 30.0));
            assert_eq!(p.bdp_rtt_ms, 162.0, "the BDP uses flow 1's RTT");
            assert_eq!(p.buffer_bdp, 0.2);
            assert!(p.flows.iter().all(|f| f.cc == CcRef::UnderTest));
        }
        // The queue stays constant along the flow-2 sweep.
        assert!(points[..5]
            .iter()
            .all(|p| p.buffer_pkts == points[0].buffer_pkts));
        assert_eq!(s.repeat(Profile::Paper), 5);
    }

    #[test]
    fn t0_7_start_times_are_drawn_per_seed_within_the_window() {
        let s = shipped("convergence-time");
        let a = s.expand(Profile::Paper, 1).unwrap();
        assert_eq!(
            a,
            s.expand(Profile::Paper, 1).unwrap(),
            "one seed, one expansion"
        );
        let b = s.expand(Profile::Paper, 2).unwrap();
        let starts = |ps: &[RunPoint]| ps.iter().map(|p| p.flows[1].start_s).collect::<Vec<_>>();
        assert_ne!(starts(&a), starts(&b));
        let mut distinct = BTreeSet::new();
        for seed in 0..25 {
            let p = &s.expand(Profile::Paper, seed).unwrap()[0];
            assert_eq!(p.flows[0].start_s, 0.0);
            assert!(
                (30.0..=200.0).contains(&p.flows[1].start_s),
                "{}",
                p.flows[1].start_s
            );
            distinct.insert(p.flows[1].start_s.to_bits());
        }
        assert!(distinct.len() >= 20);
        assert_eq!(s.repeat(Profile::Paper), 25);
    }

    #[test]
    fn t1_2_and_t1_3_schedules_follow_the_papers_tables() {
        let t12 = &shipped("T1.2").expand(Profile::Paper, 1).unwrap()[0];
        let counts: Vec<usize> = (0..5)
            .map(|k| active_at(t12, k as f64 * 1800.0 + 900.0))
            .collect();
        assert_eq!(counts, [1, 2, 3, 2, 1]);
        let rtts: Vec<f64> = t12.flows.iter().map(|f| f.rtt_ms).collect();
        assert_eq!(rtts, [100.0, 150.0, 200.0]);
        assert_eq!(
            (t12.buffer_pkts, t12.rate_mbit, t12.duration_s),
            (2000, 800.0, 9000.0)
        );

        for profile in Profile::ALL {
            let s = shipped("T1.3");
            let p = &s.expand(profile, 1).unwrap()[0];
            let interval = p.duration_s / 13.0;
            let counts: Vec<usize> = (0..13)
                .map(|k| active_at(p, (k as f64 + 0.5) * interval))
                .collect();
            assert_eq!(counts, [2, 4, 6, 8, 6, 4, 2, 4, 6, 8, 6, 4, 2], "{profile}");
        }
        let ci = &shipped("T1.3").expand(Profile::Ci, 1).unwrap()[0];
        assert_eq!(ci.buffer_pkts, 125);
        assert!(
            (ci.buffer_bdp - 125.0 / bdp_pkts(50.0, 25.0)).abs() < 1e-9,
            "effective fraction"
        );
    }

    #[test]
    fn t1_4_on_off_sources_expand_into_connections_within_the_run() {
        let s = shipped("T1.4");
        let points = s.expand(Profile::Paper, 7).unwrap();
        assert_eq!(
            points.iter().map(|p| p.vars["n"]).collect::<Vec<_>>(),
            [2.0, 4.0, 6.0, 8.0]
        );
        for p in &points {
            let n = p.vars["n"] as usize;
            assert!(p.flows.len() >= n, "at least one on period per source");
            for f in &p.flows {
                assert!([50.0, 100.0, 150.0, 200.0].contains(&f.rtt_ms));
                assert!(f.stop_s <= 9000.0 && f.start_s < f.stop_s);
            }
            // No more than n sources are on at once.
            for k in 0..90 {
                assert!(active_at(p, k as f64 * 100.0 + 1.0) <= n);
            }
        }
        assert_ne!(
            points,
            s.expand(Profile::Paper, 8).unwrap(),
            "a new seed, a new schedule"
        );
    }

    #[test]
    fn t2_7_sweeps_the_union_of_the_wan_and_dsl_paths() {
        let points = shipped("T2.7").expand(Profile::Paper, 1).unwrap();
        assert_eq!(points.len(), 8 + 6);
        let (wan, dsl) = points.split_at(8);
        for p in wan {
            assert_eq!(
                (p.rate_mbit, p.rtt_ms, p.buffer_bdp, p.web_sessions),
                (100.0, 160.0, 1.0, 25)
            );
            assert_eq!(p.reverse_rate_mbit, None);
        }
        for p in dsl {
            assert_eq!(
                (p.rate_mbit, p.reverse_rate_mbit, p.rtt_ms),
                (3.0, Some(0.256), 30.0)
            );
            assert_eq!(p.buffer_pkts, 25, "100 ms worth of 3 Mbit/s");
            assert_eq!(p.web_sessions, 0);
        }
        let sizes: Vec<Option<u64>> = dsl.iter().map(|p| p.flows[1].size_bytes).collect();
        assert_eq!(sizes[0], Some(100_000));
        assert_eq!(sizes[5], Some(5_000_000));
        assert!(points
            .iter()
            .all(|p| p.flows[0].size_bytes.is_none() && p.flows[1].start_s == 5.0));
        let t26 = &shipped("T2.6").expand(Profile::Paper, 1).unwrap()[0];
        let starts: Vec<f64> = t26.flows.iter().map(|f| f.start_s).collect();
        assert_eq!(starts, [0.0, 5.0, 10.0, 15.0]);
        assert!(t26.flows.iter().all(|f| f.size_bytes == Some(200_000_000)));
    }

    #[test]
    fn t3_4_runs_n_reno_flows_and_one_under_test() {
        for p in shipped("T3.4").expand(Profile::Paper, 1).unwrap() {
            let n = p.vars["n"] as usize;
            let reno = p
                .flows
                .iter()
                .filter(|f| f.cc == CcRef::Named("reno".into()))
                .count();
            let x = p.flows.iter().filter(|f| f.cc == CcRef::UnderTest).count();
            assert_eq!((reno, x), (n, 1));
        }
    }

    #[test]
    fn t3_5_sweeps_the_rtt_ratio_and_sizes_the_buffer_from_the_minimum_rtt() {
        let points = shipped("T3.5").expand(Profile::Paper, 1).unwrap();
        let rtt2: Vec<f64> = points.iter().map(|p| p.flows[1].rtt_ms).collect();
        assert_eq!(rtt2, [25.0, 50.0, 100.0, 200.0, 400.0]);
        for p in &points {
            assert_eq!((p.bdp_rtt_ms, p.buffer_pkts), (25.0, 1042));
            assert_eq!(p.init_ssthresh_pkts, Some(521));
            assert_eq!(p.loss, 5e-7);
        }
    }

    #[test]
    fn rrul_runs_four_flows_each_way_and_probes_behind_drop_tail_and_fq_codel() {
        use crate::{Direction, FlowKind};
        for profile in Profile::ALL {
            let s = shipped("rrul");
            let points = s.expand(profile, 1).unwrap();
            let grid: Vec<(f64, &str)> = points
                .iter()
                .map(|p| (p.rtt_ms, p.settings["qdisc"].as_str()))
                .collect();
            let want = [
                (20.0, "pfifo"),
                (20.0, "fq_codel"),
                (80.0, "pfifo"),
                (80.0, "fq_codel"),
            ];
            assert_eq!(grid, want, "{profile}");
            for p in &points {
                let rev = p.flows.iter().filter(|f| f.direction == Direction::Reverse);
                assert_eq!((p.flows.len(), rev.count()), (8, 4), "{profile}");
                assert!(p
                    .flows
                    .iter()
                    .all(|f| f.kind == FlowKind::Tcp && f.cc == CcRef::UnderTest));
                assert_eq!(p.reverse_rate_mbit, Some(p.rate_mbit / 4.0));
                assert_eq!(p.probes.len(), 1);
                assert_eq!(
                    (p.probes[0].interval_ms, p.probes[0].stop_s),
                    (10.0, p.duration_s)
                );
            }
        }
        // Expectations about the testbed only (no unintended drops), none about which
        // algorithm or discipline does better.
        let lul = shipped("LUL1");
        let names: Vec<&str> = lul.expectations.iter().map(|e| e.metric.as_str()).collect();
        assert_eq!(names, ["unintended drops (pkts)"]);
    }
}
