//! Which congestion control a run uses: a requested name (`htcp`, `cubic@linux`,
//! `native:cubic`, a kernel name) resolved to a registered algorithm, loading cctl's own
//! for the sweep and unloading each once its last run has ended; the native counterpart
//! a port is compared with.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use cctl_loader::{catalogue, kernel};
use cctl_report::record::ResolvedCc;

/// Registrations the runner made (by requested name), undone on drop.
#[derive(Default)]
pub struct Loaded {
    guards: Vec<(String, LoadGuard)>,
}

impl Loaded {
    /// Unloads what the runner loaded.
    pub fn unload(self) -> Result<()> {
        for (_, g) in self.guards {
            g.unload()?;
        }
        Ok(())
    }

    /// Unloads the algorithm requested as `requested` if the runner loaded it (its last
    /// run has ended); a no-op for names it did not load.
    pub fn release(&mut self, requested: &str) -> Result<()> {
        if let Some(i) = self.guards.iter().position(|(n, _)| n == requested) {
            let (_, g) = self.guards.remove(i);
            g.unload()?;
        }
        Ok(())
    }
}

/// An algorithm name that is neither one of cctl's nor a congestion control of the
/// kernel (registered, or a `tcp_<name>` module on disk).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unknown algorithm '{name}': not one of cctl's ({cctl}) and not registered in the kernel (registered: {registered}) nor a module tcp_{name} of {modules}")]
pub struct UnknownAlgorithm {
    /// The name as given (without `native:`).
    pub name: String,
    /// cctl's algorithm keys, comma-separated.
    pub cctl: String,
    /// The kernel's registered congestion controls, space-separated.
    pub registered: String,
    /// Which kernels' modules were looked at: `this kernel`, or `any kernel in /lib/modules`.
    pub modules: &'static str,
}

/// Which kernel the runs will use, for [`check_algorithms`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKernel {
    /// The running kernel: a kernel name must be registered or a module of it.
    Running,
    /// Possibly another one installed here (the VM boots one, with its modules from the
    /// host's /lib/modules): a module of any kernel in /lib/modules will do too.
    Installed,
}

/// Whether a module `tcp_<name>` exists for any kernel in /lib/modules.
fn module_of_an_installed_kernel(name: &str) -> bool {
    let stem = format!("tcp_{name}.ko");
    let Ok(kernels) = std::fs::read_dir("/lib/modules") else {
        return false;
    };
    kernels.flatten().any(|k| {
        std::fs::read_dir(k.path().join("kernel/net/ipv4"))
            .map(|dir| {
                dir.flatten()
                    .any(|e| e.file_name().to_str().is_some_and(|f| f.starts_with(&stem)))
            })
            .unwrap_or(false)
    })
}

/// Checks algorithm names as [`resolve_algorithms`] takes them, loading and creating
/// nothing: cctl keys and `<key>@<profile>` must exist; other names (and `native:<name>`)
/// must be valid congestion control names, registered in the running kernel or a
/// `tcp_<name>` module of the kernel the runs use (`run_kernel`).
///
/// Errors: [`cctl_loader::Error::UnknownAlgorithm`] (a `<key>@` that is not cctl's),
/// [`cctl_loader::Error::BadParamCombination`] (a profile the algorithm lacks),
/// [`cctl_loader::Error::InvalidName`], [`UnknownAlgorithm`], or an error reading
/// /proc/sys/net/ipv4/tcp_available_congestion_control.
pub fn check_algorithms(names: &[String], run_kernel: RunKernel) -> Result<()> {
    for name in names {
        let native = name.strip_prefix("native:");
        if let Some((key, profile)) = name.split_once('@') {
            catalogue::find(key)?.profile(profile)?;
            continue;
        }
        if native.is_none() && catalogue::find(name).is_ok() {
            continue;
        }
        let kname = native.unwrap_or(name);
        catalogue::validate_cc_name(kname)?;
        let known = kernel::available_ccs()?.iter().any(|n| n == kname)
            || kernel::native_module(kname).is_some()
            || (run_kernel == RunKernel::Installed && module_of_an_installed_kernel(kname));
        if !known {
            return Err(UnknownAlgorithm {
                name: kname.to_string(),
                cctl: catalogue::ALGORITHMS
                    .iter()
                    .map(|a| a.key)
                    .collect::<Vec<_>>()
                    .join(", "),
                registered: kernel::available_ccs()?.join(" "),
                modules: match run_kernel {
                    RunKernel::Running => "this kernel",
                    RunKernel::Installed => "any kernel in /lib/modules",
                },
            }
            .into());
        }
    }
    Ok(())
}

/// Resolves algorithm names before anything is created: cctl keys (`htcp`) are loaded
/// (unless already loaded), `<key>@<profile>` (`cubic@linux`) with that parameter profile
/// under `bpf_<key>_<tag>`; other names, and names written `native:<name>` (the kernel's
/// own `htcp`, not cctl's), must be registered or loadable as `tcp_<name>` modules.
///
/// Errors list what is available.
pub fn resolve_algorithms(names: &[String]) -> Result<(Vec<ResolvedCc>, Loaded)> {
    // First check every name, so that a bad one is refused before anything is loaded.
    check_algorithms(names, RunKernel::Running)?;
    let mut out = Vec::new();
    let mut loaded = Loaded { guards: Vec::new() };
    for name in names {
        if out.iter().any(|r: &ResolvedCc| &r.requested == name) {
            continue;
        }
        let native = name.strip_prefix("native:");
        let (key, profile) = match name.split_once('@') {
            Some((k, p)) => (k, Some(p.to_string())),
            None => (name.as_str(), None),
        };
        let cctl = if native.is_none() {
            catalogue::find(key).ok()
        } else {
            None
        };
        if let Some(a) = cctl {
            let cc_name = a.default_name(profile.as_deref())?;
            let existing = registry::list_loaded()?
                .into_iter()
                .find(|l| l.name == cc_name && l.profile == profile);
            let rec = match existing {
                Some(rec) => rec,
                None => {
                    let rec = registry::load(
                        a.key,
                        &LoadOptions {
                            owned: true,
                            profile: profile.clone(),
                            ..Default::default()
                        },
                    )
                    .with_context(|| format!("loading {}", a.key))?;
                    loaded
                        .guards
                        .push((name.clone(), LoadGuard::new(rec.name.clone())));
                    rec
                }
            };
            out.push(ResolvedCc {
                requested: name.clone(),
                cc_name: rec.name,
                kind: "cctl".into(),
                params: rec.params,
            });
            continue;
        }
        let kname = native.unwrap_or(name).to_string();
        catalogue::validate_cc_name(&kname)?;
        if !kernel::available_ccs()?.contains(&kname) {
            let _ = std::process::Command::new("modprobe")
                .args(["-q", &format!("tcp_{kname}")])
                .status();
        }
        if !kernel::available_ccs()?.contains(&kname) {
            let name = &kname;
            bail!(
                "unknown algorithm '{name}': not one of cctl's ({}) and not registered in the kernel \
                 (registered: {}; no module tcp_{name} could be loaded)",
                catalogue::ALGORITHMS.iter().map(|a| a.key).collect::<Vec<_>>().join(", "),
                kernel::available_ccs()?.join(" ")
            );
        }
        out.push(ResolvedCc {
            requested: name.clone(),
            cc_name: kname,
            kind: "native".into(),
            params: BTreeMap::new(),
        });
    }
    Ok((out, loaded))
}

/// The algorithm names a scenario runs for `--algo`'s: a plain cctl key becomes
/// `<key>@<variant>` when the scenario names a `variant` (every such key must have it) or,
/// without one, when the algorithm has a profile for the scenario's paper
/// ([`catalogue::Algorithm::variant_for`]: `highspeed` in a [P0] test runs `highspeed@p0`).
/// Names with a profile already, `native:` names, kernel names and `port_defaults` leave
/// the names as given.
///
/// Errors: the scenario's `variant` is not a profile of one of the algorithms
/// ([`cctl_loader::Error::BadParamCombination`], naming the profiles it has; exit 2).
pub fn scenario_variants(
    sc: &cctl_scenario::Scenario,
    algos: &[String],
    port_defaults: bool,
) -> Result<Vec<String>> {
    algos
        .iter()
        .map(|name| {
            let plain = !port_defaults && !name.contains('@') && !name.starts_with("native:");
            let Some(a) = catalogue::find(name).ok().filter(|_| plain) else {
                return Ok(name.clone());
            };
            let variant = match &sc.variant {
                Some(v) => Some(
                    a.profile(v)
                        .with_context(|| format!("{}: variant = \"{v}\"", sc.path.display()))?,
                ),
                None => sc.paper().and_then(|p| a.variant_for(p)),
            };
            Ok(variant.map_or_else(|| name.clone(), |v| format!("{name}@{}", v.name)))
        })
        .collect()
}

/// The native counterpart a requested algorithm is compared with: `cubic` and
/// `cubic@linux` → `cubic` (from the algorithm's `native`); `None` for natives themselves
/// and for ports without a Linux module.
pub fn native_of(requested: &str) -> Option<&'static str> {
    if requested.starts_with("native:") {
        return None;
    }
    let key = requested.split('@').next().unwrap_or(requested);
    cctl_loader::catalogue::find(key).ok()?.native
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(source: &str, variant: Option<&str>) -> cctl_scenario::Scenario {
        let mut sc = cctl_scenario::find("fairness-same-rtt").unwrap();
        sc.source = source.into();
        sc.variant = variant.map(String::from);
        sc
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_papers_scenario_runs_the_variants_that_paper_tested() {
        let algos = names(&[
            "reno",
            "highspeed",
            "fast",
            "htcp",
            "cubic@linux",
            "native:htcp",
        ]);
        let got = scenario_variants(&scenario("[P0] §III", None), &algos, false).unwrap();
        assert_eq!(
            got,
            names(&[
                "reno",
                "highspeed@p0",
                "fast@p0",
                "htcp",
                "cubic@linux",
                "native:htcp"
            ])
        );
        let p2 = scenario_variants(&scenario("[P2] §III", None), &algos, false).unwrap();
        assert_eq!(p2[3], "htcp@p2");
        let p1 = scenario_variants(&scenario("[P1] §V", None), &algos, false).unwrap();
        assert_eq!(p1[2], "fast@p1");
        assert_eq!(
            scenario_variants(&scenario("cctl", None), &algos, false).unwrap(),
            algos
        );
        assert_eq!(
            scenario_variants(&scenario("[P0]", None), &algos, true).unwrap(),
            algos
        );
    }

    #[test]
    fn a_scenario_variant_its_algorithm_lacks_is_refused_naming_what_exists() {
        let sc = scenario("[P0]", Some("linux"));
        assert_eq!(
            scenario_variants(&sc, &names(&["htcp"]), false).unwrap(),
            names(&["htcp@linux"])
        );
        let e = scenario_variants(&sc, &names(&["fast"]), false).unwrap_err();
        let msg = format!("{e:#}");
        assert!(
            msg.contains("variant = \"linux\"") && msg.contains("profiles: p0, p1"),
            "{msg}"
        );
        let e = scenario_variants(&sc, &names(&["reno"]), false).unwrap_err();
        assert!(format!("{e:#}").contains("reno has no profiles"), "{e:#}");
    }

    #[test]
    fn ports_pair_with_their_module() {
        assert_eq!(native_of("htcp"), Some("htcp"));
        assert_eq!(native_of("native:htcp"), None);
        assert_eq!(native_of("reno"), Some("reno"));
    }
}
