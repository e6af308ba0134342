//! What `cctl conform` asks of the catalogue for the algorithms without a Linux module:
//! whether one has replay rules, and its port's trajectory replayed through them
//! ([`crate::algo::replay`]), with the declaration's defaults for tunables not given.

use crate::algo::replay::{self, ModelCheck, ReplayError};
use crate::catalogue::{self, Params, ALGORITHMS};
use crate::sample::Sample;

use replay::Result;

/// Whether the algorithm `key` (its catalogue key) has replay rules, i.e. an f64 model
/// that `cctl conform` checks its port against ACK by ACK: true exactly when its
/// declaration carries them ([`crate::catalogue::Algorithm::replay`]); false for an
/// unknown key.
pub fn has_model(key: &str) -> bool {
    catalogue::find(key).is_ok_and(|a| a.replay.is_some())
}

/// Keys of the algorithms with replay rules, comma-separated, in id order.
fn models() -> String {
    ALGORITHMS
        .iter()
        .filter(|a| a.replay.is_some())
        .map(|a| a.key)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Replays `samples` of the port of `key` through its model, with `params` over the
/// declaration's defaults (see [`replay::run`]).
///
/// Errors: [`ReplayError::NoRules`] (`key` has no replay rules), and those of [`replay::run`].
pub fn check(key: &str, params: &Params, samples: &[Sample], t0_ns: u64) -> Result<ModelCheck> {
    let Some((algo, rules)) = catalogue::find(key)
        .ok()
        .and_then(|a| a.replay.map(|r| (a, r)))
    else {
        return Err(ReplayError::NoRules {
            key: key.to_string(),
            models: models(),
        });
    };
    let mut p: Params = algo.params.iter().map(|s| (s.key, s.default)).collect();
    for (k, v) in params {
        p.insert(k, *v);
    }
    replay::run(key, rules, &p, samples, t0_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_model_is_exactly_a_declaration_with_replay_rules() {
        for a in ALGORITHMS {
            assert_eq!(has_model(a.key), a.replay.is_some(), "{}", a.key);
            assert_eq!(has_model(a.cc_name), a.replay.is_some(), "{}", a.cc_name);
        }
        assert!(!has_model("nosuch"));
    }

    #[test]
    fn refuses_algorithms_without_replay_rules_naming_those_with() {
        let models = models();
        for a in ALGORITHMS.iter().filter(|a| a.replay.is_none()) {
            let e = check(a.key, &Params::new(), &[], 0).unwrap_err();
            assert_eq!(
                e,
                ReplayError::NoRules {
                    key: a.key.to_string(),
                    models: models.clone()
                }
            );
        }
        let e = check("nosuch", &Params::new(), &[], 0).unwrap_err();
        assert!(e.to_string().contains("no f64 model"), "{e}");
    }
}
