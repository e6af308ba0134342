//! The configuration parser fuzzed (proptest, see `cctl_fuzz`): random and mutated
//! documents never panic, and every error names its field.

use std::path::Path;

use super::*;
use cctl_fuzz as fuzz;

/// The schema's keys, algorithm keys, profiles, parameter keys and plausible values.
const WORDS: &[&str] = &[
    "default",
    "algorithm",
    "policy",
    "name",
    "algo",
    "profile",
    "params",
    "port",
    "cgroup",
    "cc",
    "htcp",
    "cubic",
    "reno",
    "bic",
    "vegas",
    "westwood",
    "bpf_htcp",
    "linux",
    "beta_min_pct",
    "beta_max_pct",
    "delta_l_ms",
    "use_rtt_scaling",
    "ack_counting",
    "fixed_beta_pct",
    "system.slice/backup.service",
    "/",
    "..",
    "cdg",
    "bpf_cubic_lx",
];

const SEEDS: &[&str] = &[
    "default = \"bpf_htcp\"\n\n[[algorithm]]\nalgo = \"htcp\"\nparams = { beta_min_pct = 60, beta_max_pct = 80 }\n\n[[algorithm]]\nname = \"cubic_lx\"\nalgo = \"cubic\"\nprofile = \"linux\"\n\n[[policy]]\nport = 5201\ncc = \"bpf_htcp\"\n\n[[policy]]\ncgroup = \"system.slice/backup.service\"\ncc = \"reno\"\n",
    "[[algorithm]]\nalgo = \"reno\"\n[[algorithm]]\nalgo = \"vegas\"\n[algorithm.params]\nack_counting = 1\n",
    "default = \"cubic\"\n[[policy]]\nport = 80\ncc = \"cubic\"\n",
];

/// The last segment of a field path (`params.beta_min_pct` → `beta_min_pct`), without
/// its index or quotes.
fn last_segment(field: &str) -> String {
    let last = field.rsplit('.').next().unwrap_or(field);
    let last = last.split('[').next().unwrap_or(last);
    last.trim_matches('"').to_string()
}

fn check(doc: &str) {
    match Config::parse(doc, Path::new("/etc/cctl/cctl.toml")) {
        Ok(c) => {
            for a in &c.algorithms {
                catalogue::validate_cc_name(&a.name).unwrap();
                let algo = catalogue::find(&a.algo).unwrap();
                for p in algo.params {
                    let v = a.params[p.key];
                    assert!(p.min <= v && v <= p.max, "{}: {} = {v}", a.name, p.key);
                }
            }
        }
        Err(Error::ConfigSyntax { message, .. }) => {
            assert!(!message.trim().is_empty(), "an empty syntax error");
        }
        Err(Error::BadConfig { field, message, .. }) => {
            assert!(!field.is_empty(), "an error without field: {message}");
            assert!(!message.is_empty(), "{field}: an empty message");
            let top = field.split(['.', '[']).next().unwrap_or("");
            assert!(
                TOP_KEYS.contains(&top) || message.starts_with("unknown key"),
                "{field}: {message}"
            );
            let seg = last_segment(&field);
            // A missing key is by definition not in the document; an escaped one is
            // written differently (decoded by `unescaped`, or an escape in the name itself).
            if !message.starts_with("missing") && !seg.contains('\\') {
                assert!(
                    doc.contains(&seg) || fuzz::unescaped(doc).contains(&seg),
                    "{field} ({seg}) is not in the document: {message}"
                );
            }
        }
        Err(other) => panic!("an error of another kind: {other:?}"),
    }
}

#[test]
fn the_seeds_are_valid() {
    for s in SEEDS {
        Config::parse(s, Path::new("x")).unwrap_or_else(|e| panic!("{e}\n{s}"));
    }
}

#[test]
fn random_and_mutated_documents_never_panic_and_every_error_names_its_field() {
    let n = fuzz::run(
        "the cctl apply configuration parser",
        || fuzz::documents(SEEDS.iter().map(|s| s.to_string()).collect(), WORDS),
        check,
    );
    assert!(n > 0);
}
