//! Unit tests of [`super::plan`]: a file and a made-up state in, steps out (no root).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::config::Config;

fn cfg(text: &str) -> Config {
    Config::parse(text, Path::new("/etc/cctl/cctl.toml")).unwrap_or_else(|e| panic!("{e}"))
}

fn params(algo: &str, args: &[&str]) -> BTreeMap<String, u32> {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    crate::catalogue::find(algo)
        .unwrap()
        .resolve_params(&args)
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}

fn loaded(name: &str, algo: &str, args: &[&str]) -> ObservedCc {
    ObservedCc {
        name: name.into(),
        algo: algo.into(),
        profile: None,
        params: params(algo, args),
        object: false,
        version: 1,
        owner: None,
    }
}

/// A kernel with cubic and reno built in, cubic the default, nothing of cctl's.
fn bare() -> Observed {
    Observed {
        available: vec!["reno".into(), "cubic".into()],
        default: "cubic".into(),
        ..Default::default()
    }
}

/// `bare()` with these of cctl's loaded (and registered).
fn with(names: Vec<ObservedCc>) -> Observed {
    let mut o = bare();
    for l in &names {
        o.available.push(l.name.clone());
    }
    o.loaded = names;
    o
}

fn port_rule(port: u16, cc: &str) -> ObservedRule {
    ObservedRule {
        target: Target::Port { port },
        cc: cc.into(),
    }
}

fn words(p: &Plan) -> Vec<String> {
    p.steps.iter().map(|s| s.to_string()).collect()
}

fn field_of(e: Error) -> (String, String) {
    match e {
        Error::BadConfig { field, message, .. } => (field, message),
        other => panic!("expected a BadConfig, got {other:?}"),
    }
}

const FILE: &str = r#"
default = "bpf_htcp"
[[algorithm]]
algo = "htcp"
params = { beta_min_pct = 60 }
[[policy]]
port = 5201
cc = "bpf_htcp"
"#;

#[test]
fn on_a_bare_kernel_it_loads_then_sets_the_default_then_adds_the_rule() {
    let p = plan(&cfg(FILE), &bare()).unwrap();
    assert_eq!(
        words(&p),
        [
            "load bpf_htcp (htcp, beta_min_pct=60)",
            "default cubic → bpf_htcp",
            "policy port 5201 → bpf_htcp (new rule)",
        ]
    );
    assert!(p.kept.is_empty());
}

#[test]
fn a_kernel_that_matches_the_file_gives_an_empty_plan() {
    let mut o = with(vec![loaded("bpf_htcp", "htcp", &["beta_min_pct=60"])]);
    o.default = "bpf_htcp".into();
    o.rules = vec![port_rule(5201, "bpf_htcp")];
    let p = plan(&cfg(FILE), &o).unwrap();
    assert!(p.is_empty(), "{:?}", words(&p));
}

#[test]
fn a_profile_that_differs_but_gives_the_same_values_changes_nothing() {
    let mut l = loaded("bpf_htcp", "htcp", &["beta_min_pct=60"]);
    l.profile = Some("linux".into());
    let mut o = with(vec![l]);
    o.default = "bpf_htcp".into();
    o.rules = vec![port_rule(5201, "bpf_htcp")];
    assert!(plan(&cfg(FILE), &o).unwrap().is_empty());
}

#[test]
fn changed_live_params_are_set_in_place_and_list_the_changes() {
    let mut o = with(vec![
        loaded("bpf_htcp", "htcp", &["beta_min_pct=50"]),
        loaded("bpf_reno", "reno", &[]),
    ]);
    o.default = "bpf_htcp".into();
    o.rules = vec![port_rule(5201, "bpf_htcp")];
    o.loaded[0].version = 3;
    let text = format!("{FILE}[[algorithm]]\nalgo = \"reno\"\n");
    let p = plan(&cfg(&text), &o).unwrap();
    assert_eq!(words(&p), ["set bpf_htcp (htcp, live): beta_min_pct 50→60"]);
    assert!(matches!(&p.steps[0], Step::Set { name, .. } if name == "bpf_htcp"));
}

#[test]
fn a_load_time_change_upgrades_only_that_name_with_every_change() {
    // ack_counting is load-time: the whole difference goes into one new version.
    let mut o = with(vec![loaded("bpf_htcp", "htcp", &["beta_min_pct=50"])]);
    o.default = "bpf_htcp".into();
    o.rules = vec![port_rule(5201, "bpf_htcp")];
    o.loaded[0].version = 3;
    let text = FILE.replace("beta_min_pct = 60", "beta_min_pct = 60, ack_counting = 1");
    let p = plan(&cfg(&text), &o).unwrap();
    assert_eq!(
        words(&p),
        ["upgrade bpf_htcp (htcp): ack_counting 0→1, beta_min_pct 50→60"]
    );
    match &p.steps[0] {
        Step::Upgrade {
            from_version,
            params: to,
            ..
        } => {
            assert_eq!(*from_version, 3);
            assert_eq!(to, &params("htcp", &["beta_min_pct=60", "ack_counting=1"]));
        }
        s => panic!("{s:?}"),
    }
}

#[test]
fn a_running_object_version_is_upgraded_back_to_the_files_params() {
    let mut l = loaded("bpf_htcp", "htcp", &["beta_min_pct=60"]);
    l.object = true;
    let mut o = with(vec![l]);
    o.default = "bpf_htcp".into();
    o.rules = vec![port_rule(5201, "bpf_htcp")];
    let p = plan(&cfg(FILE), &o).unwrap();
    assert_eq!(p.steps.len(), 1);
    assert!(
        matches!(p.steps[0], Step::Upgrade { .. }),
        "{:?}",
        words(&p)
    );
}

#[test]
fn names_the_file_drops_are_unloaded_last_after_their_rules_go() {
    let mut o = with(vec![
        loaded("bpf_htcp", "htcp", &["beta_min_pct=60"]),
        loaded("bpf_old", "reno", &[]),
    ]);
    o.default = "bpf_htcp".into();
    o.rules = vec![port_rule(5201, "bpf_htcp"), port_rule(80, "bpf_old")];
    let p = plan(&cfg(FILE), &o).unwrap();
    assert_eq!(
        words(&p),
        ["remove policy port 80 → bpf_old", "unload bpf_old (reno)"]
    );
}

#[test]
fn an_in_use_name_is_kept_with_the_reason_and_the_rest_applied() {
    let mut o = with(vec![loaded("bpf_old", "reno", &[])]);
    o.in_use.insert(
        "bpf_old".into(),
        "2 established socket(s) (netns current: 2)".into(),
    );
    let p = plan(&cfg(FILE), &o).unwrap();
    assert_eq!(p.steps.len(), 3, "{:?}", words(&p));
    assert!(!p.steps.iter().any(|s| matches!(s, Step::Unload { .. })));
    assert_eq!(p.kept.len(), 1);
    assert!(
        p.kept[0].reason.contains("2 established socket(s)")
            && p.kept[0].reason.contains("--migrate-to")
    );
}

#[test]
fn names_owned_by_a_running_process_are_left_alone_and_may_not_be_claimed() {
    let mut demo = loaded("bpf_demo", "htcp", &[]);
    demo.owner = Some(4242);
    let o = with(vec![demo]);
    let p = plan(&cfg(FILE), &o).unwrap();
    assert!(
        !words(&p).iter().any(|w| w.contains("bpf_demo")),
        "{:?}",
        words(&p)
    );
    let (field, msg) = field_of(
        plan(
            &cfg("[[algorithm]]\nname = \"bpf_demo\"\nalgo = \"htcp\"\n"),
            &o,
        )
        .unwrap_err(),
    );
    assert_eq!(field, "algorithm[0].name");
    assert!(msg.contains("process 4242"), "{msg}");
    // A rule may name it: it is registered and not the file's to unload.
    assert!(plan(&cfg("[[policy]]\nport = 1\ncc = \"bpf_demo\"\n"), &o).is_ok());
}

#[test]
fn another_algorithm_under_a_loaded_name_is_refused() {
    let o = with(vec![loaded("bpf_htcp", "reno", &[])]);
    let (field, msg) = field_of(plan(&cfg(FILE), &o).unwrap_err());
    assert_eq!(field, "algorithm[0].algo");
    assert!(
        msg.contains("running reno") && msg.contains("cctl unload bpf_htcp"),
        "{msg}"
    );
}

#[test]
fn a_name_the_kernel_has_from_elsewhere_or_a_native_modules_name_is_refused() {
    let text = "[[algorithm]]\nname = \"cubic\"\nalgo = \"cubic\"\n";
    let (field, msg) = field_of(plan(&cfg(text), &bare()).unwrap_err());
    assert_eq!(field, "algorithm[0].name");
    assert!(msg.contains("not by cctl"), "{msg}");
    let mut o = bare();
    o.native_modules.insert("htcp".into());
    let text = "[[algorithm]]\nname = \"htcp\"\nalgo = \"htcp\"\n";
    let (field, msg) = field_of(plan(&cfg(text), &o).unwrap_err());
    assert_eq!(field, "algorithm[0].name");
    assert!(msg.contains("tcp_htcp.ko"), "{msg}");
}

#[test]
fn a_default_or_rule_naming_an_unknown_cc_lists_what_is_allowed() {
    let (field, msg) = field_of(plan(&cfg("default = \"bbr\"\n"), &bare()).unwrap_err());
    assert_eq!(field, "default");
    assert!(
        msg.contains("'bbr'") && msg.contains("cubic") && msg.contains("reno"),
        "{msg}"
    );
    let (field, msg) =
        field_of(plan(&cfg("[[policy]]\nport = 1\ncc = \"bbr\"\n"), &bare()).unwrap_err());
    assert_eq!(field, "policy[0].cc");
    assert!(msg.contains("neither"), "{msg}");
    let mut o = bare();
    o.available.push("cdg".into());
    let (field, msg) =
        field_of(plan(&cfg("[[policy]]\nport = 1\ncc = \"cdg\"\n"), &o).unwrap_err());
    assert!(msg.contains("ENOTSUPP"), "{msg}");
    assert_eq!(field, "policy[0].cc");
}

#[test]
fn a_default_or_rule_naming_a_cctl_name_the_file_drops_is_refused() {
    let o = with(vec![loaded("bpf_old", "reno", &[])]);
    let (field, msg) = field_of(plan(&cfg("default = \"bpf_old\"\n"), &o).unwrap_err());
    assert_eq!(field, "default");
    assert!(msg.contains("unloads it"), "{msg}");
    let (field, _) =
        field_of(plan(&cfg("[[policy]]\nport = 9\ncc = \"bpf_old\"\n"), &o).unwrap_err());
    assert_eq!(field, "policy[0].cc");
}

#[test]
fn dropping_the_current_default_without_a_new_one_is_refused() {
    let mut o = with(vec![loaded("bpf_old", "reno", &[])]);
    o.default = "bpf_old".into();
    let (field, msg) = field_of(plan(&cfg(""), &o).unwrap_err());
    assert_eq!(field, "default");
    assert!(msg.contains("set `default`"), "{msg}");
    // With a default, it is switched first and unloaded last.
    let p = plan(&cfg("default = \"cubic\"\n"), &o).unwrap();
    assert_eq!(
        words(&p),
        ["default bpf_old → cubic", "unload bpf_old (reno)"]
    );
}

#[test]
fn a_rule_for_another_cc_is_replaced_and_says_what_it_was() {
    let mut o = with(vec![loaded("bpf_htcp", "htcp", &["beta_min_pct=60"])]);
    o.default = "bpf_htcp".into();
    o.rules = vec![port_rule(5201, "reno")];
    let p = plan(&cfg(FILE), &o).unwrap();
    assert_eq!(words(&p), ["policy port 5201 → bpf_htcp (was reno)"]);
}

#[test]
fn cgroup_rules_match_by_cgroup_id_and_report_lookup_failures_at_the_field() {
    let text = "[[policy]]\ncgroup = \"system.slice/a.service\"\ncc = \"reno\"\n";
    let mut o = bare();
    let abs = PathBuf::from("/sys/fs/cgroup/system.slice/a.service");
    o.cgroups
        .insert("system.slice/a.service".into(), Ok((abs.clone(), 77)));
    let p = plan(&cfg(text), &o).unwrap();
    assert_eq!(
        words(&p),
        ["policy cgroup /sys/fs/cgroup/system.slice/a.service → reno (new rule)"]
    );
    o.rules = vec![ObservedRule {
        target: Target::Cgroup {
            path: abs,
            id: 77,
            exists: true,
        },
        cc: "reno".into(),
    }];
    assert!(plan(&cfg(text), &o).unwrap().is_empty());
    o.cgroups.insert(
        "system.slice/a.service".into(),
        Err("cgroup 'x' does not exist".into()),
    );
    let (field, msg) = field_of(plan(&cfg(text), &o).unwrap_err());
    assert_eq!(field, "policy[0].cgroup");
    assert!(msg.contains("does not exist"), "{msg}");
}

#[test]
fn two_spellings_of_one_cgroup_are_one_rule_too_many() {
    let text =
        "[[policy]]\ncgroup = \"a\"\ncc = \"reno\"\n[[policy]]\ncgroup = \"/a\"\ncc = \"cubic\"\n";
    let mut o = bare();
    o.cgroups
        .insert("a".into(), Ok(("/sys/fs/cgroup/a".into(), 5)));
    o.cgroups
        .insert("/a".into(), Ok(("/sys/fs/cgroup/a".into(), 5)));
    let (field, msg) = field_of(plan(&cfg(text), &o).unwrap_err());
    assert_eq!(field, "policy[1].cgroup");
    assert!(msg.contains("policy[0]"), "{msg}");
}

#[test]
fn the_default_is_left_alone_when_the_file_has_none() {
    let o = with(vec![loaded("bpf_htcp", "htcp", &[])]);
    let p = plan(&cfg("[[algorithm]]\nalgo = \"htcp\"\n"), &o).unwrap();
    assert!(p.is_empty(), "{:?}", words(&p));
}

#[test]
fn steps_serialize_with_their_kind() {
    let p = plan(&cfg(FILE), &bare()).unwrap();
    let j = serde_json::to_value(&p).unwrap();
    assert_eq!(j["steps"][0]["step"], "load");
    assert_eq!(j["steps"][0]["given"]["beta_min_pct"], 60);
    assert_eq!(j["steps"][1]["step"], "default");
    assert_eq!(j["steps"][2]["step"], "add_rule");
    assert_eq!(j["steps"][2]["target"]["kind"], "port");
}

#[test]
fn a_plan_applied_to_its_own_result_is_empty() {
    // Model `execute` on the observed state: the second plan of the same file is empty.
    let text = format!("{FILE}[[algorithm]]\nname = \"two\"\nalgo = \"reno\"\n[[policy]]\nport = 80\ncc = \"two\"\n");
    let c = cfg(&text);
    let mut o = with(vec![
        loaded("bpf_htcp", "htcp", &[]),
        loaded("gone", "reno", &[]),
    ]);
    o.rules = vec![port_rule(80, "gone"), port_rule(22, "reno")];
    let p = plan(&c, &o).unwrap();
    for s in &p.steps {
        match s {
            Step::Load {
                name, algo, params, ..
            } => {
                o.available.push(name.clone());
                o.loaded.push(ObservedCc {
                    name: name.clone(),
                    algo: algo.clone(),
                    profile: None,
                    params: params.clone(),
                    object: false,
                    version: 1,
                    owner: None,
                });
            }
            Step::Upgrade { name, params, .. } => {
                let l = o.loaded.iter_mut().find(|l| &l.name == name).unwrap();
                l.params = params.clone();
                l.version += 1;
            }
            Step::Set { name, changes, .. } => {
                let l = o.loaded.iter_mut().find(|l| &l.name == name).unwrap();
                for c in changes {
                    l.params.insert(c.key.clone(), c.to.unwrap());
                }
            }
            Step::Default { to, .. } => o.default = to.clone(),
            Step::AddRule { target, cc, .. } => {
                o.rules.retain(|r| !same_target(&r.target, target));
                o.rules.push(ObservedRule {
                    target: target.clone(),
                    cc: cc.clone(),
                });
            }
            Step::RemoveRule { target, .. } => o.rules.retain(|r| !same_target(&r.target, target)),
            Step::Unload { name, .. } => {
                o.loaded.retain(|l| &l.name != name);
                o.available.retain(|n| n != name);
            }
        }
    }
    assert_eq!(
        words(&p),
        [
            "load two (reno)",
            "set bpf_htcp (htcp, live): beta_min_pct 50→60",
            "default cubic → bpf_htcp",
            "policy port 5201 → bpf_htcp (new rule)",
            "policy port 80 → two (was gone)",
            "remove policy port 22 → reno",
            "unload gone (reno)",
        ]
    );
    let again = plan(&c, &o).unwrap();
    assert!(again.is_empty(), "{:?}", words(&again));
}
