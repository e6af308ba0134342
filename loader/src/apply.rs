//! `cctl apply`: make the kernel match a configuration file ([`crate::config`]),
//! changing only what differs.
//!
//! Three parts: [`observe`] reads the state (what cctl loaded, the default, the policy
//! rules, ...), [`plan`] is a pure function from (file, state) to the steps that make
//! the state the file's, and [`execute`] carries the steps out.
//!
//! # What the file owns
//! Every name cctl loaded (`/sys/fs/bpf/cctl`) and every policy rule: a name the file
//! does not list is unloaded, a rule it does not list is removed. Names loaded by a
//! running process for its own use (`cctl demo`, tests: [`crate::registry::LoadedCc::owner_pid`])
//! are left alone, and the file may not name them. The default is set only when the
//! file has `default`. Congestion controls that cctl did not load (built-ins, modules)
//! are never touched.
//!
//! # A loaded name whose parameters differ
//! gets them live ([`crate::live::set`], as `cctl set`) when every differing parameter
//! is live (spec §18.5): running and new flows see the values at their next ACK, no new
//! version. Otherwise it is upgraded in place ([`crate::upgrade::upgrade`]): new
//! connections get the new version, established ones keep theirs. A name is up to date
//! when its algorithm and every parameter value in force are the file's; the profile is
//! how the file arrives at the values and is not compared. A name loaded with another
//! algorithm than the file's is refused (upgrade changes parameters, not the algorithm):
//! unload it, or use another name. The decision is [`params_step`].
//!
//! # In use
//! A name to unload that established TCP sockets still run is **not** unloaded (as
//! `cctl unload` refuses it): the plan keeps it and says why ([`Plan::kept`]), and the
//! rest is applied. Apply again once those connections have closed, or move them
//! (`cctl unload NAME --migrate-to OTHER`).
//!
//! # Order and the guarantee on failure
//! Steps run in this order: loads, upgrades, the default, policy rules added or
//! replaced, policy rules removed, unloads. Everything a step needs exists before it
//! (a rule's or the default's congestion control is loaded first; a name is unloaded
//! only after the rules naming it are gone). Each step either happens or changes
//! nothing (the loader's operations promise that). If a step before the unloads fails,
//! the steps of this apply already done are undone in reverse order (an upgrade is
//! rolled back to the version that ran, which stays loaded; a load is unloaded; the
//! default and replaced or removed rules are restored; rules' counters restart), so the
//! kernel runs what it ran before; the error names the failed step and what undoing
//! did. Unloads come last and are not undone: when one fails, the file's algorithms,
//! default and rules are in place and that name (and those after it) stay loaded.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::config::{Config, DesiredCc, RuleTarget};
use crate::error::{Error, Result};
use crate::policy::{self, RuleSpec, Target};
use crate::registry::{self, LoadOptions};
use crate::upgrade::{self, UpgradeOptions};
use crate::{kernel, migrate};

/// A name cctl loaded, as [`observe`] found it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObservedCc {
    /// Registered name.
    pub name: String,
    /// Algorithm key of the running version (`?` without metadata).
    pub algo: String,
    /// Profile of the running version, if any.
    pub profile: Option<String>,
    /// Tunables of the running version (as its record has them).
    pub params: BTreeMap<String, u32>,
    /// Whether the running version is a BPF object given by file (`upgrade --object`).
    pub object: bool,
    /// The running version.
    pub version: u32,
    /// The live process that loaded it for its own use, if any (left alone).
    pub owner: Option<u32>,
}

/// A policy rule, as [`observe`] found it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ObservedRule {
    /// What it matches.
    pub target: Target,
    /// The congestion control it sets.
    pub cc: String,
}

/// The state [`plan`] compares the file with.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Observed {
    /// Names cctl loaded, by name.
    pub loaded: Vec<ObservedCc>,
    /// Congestion controls registered in the kernel.
    pub available: Vec<String>,
    /// The default congestion control of this network namespace.
    pub default: String,
    /// The policy rules.
    pub rules: Vec<ObservedRule>,
    /// Names of the file that are native modules on disk (`tcp_<name>.ko`).
    pub native_modules: BTreeSet<String>,
    /// Each `cgroup` of the file's rules: its absolute path and id, or why it cannot be used.
    pub cgroups: BTreeMap<PathBuf, std::result::Result<(PathBuf, u64), String>>,
    /// Names the file would unload that established sockets still run: name → where
    /// (`3 established socket(s): netns current: 3`).
    pub in_use: BTreeMap<String, String>,
}

/// A parameter whose value changes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ParamChange {
    /// Its key.
    pub key: String,
    /// The running value (none: the running version lacks it).
    pub from: Option<u32>,
    /// The file's value (none: the file's algorithm lacks it).
    pub to: Option<u32>,
}

/// One change [`execute`] makes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// Register a name (`cctl load`).
    Load {
        /// Name to register.
        name: String,
        /// Algorithm key.
        algo: String,
        /// Profile, if any.
        profile: Option<String>,
        /// The tunables the file gives.
        given: BTreeMap<String, u32>,
        /// Every tunable's value.
        params: BTreeMap<String, u32>,
    },
    /// Load a new version of a name with other parameters and swap it in (`cctl upgrade`).
    Upgrade {
        /// The registered name.
        name: String,
        /// Algorithm key.
        algo: String,
        /// The file's profile, if any.
        profile: Option<String>,
        /// Every tunable's value in the new version.
        params: BTreeMap<String, u32>,
        /// What differs from the running version.
        changes: Vec<ParamChange>,
        /// The version running now (undoing rolls back to it).
        from_version: u32,
    },
    /// Change live parameters of a loaded name in place (`cctl set`, spec §18.5).
    Set {
        /// The registered name.
        name: String,
        /// Algorithm key.
        algo: String,
        /// What differs from the values in force (every key live).
        changes: Vec<ParamChange>,
    },
    /// Set the default congestion control (`cctl default`).
    Default {
        /// The default now.
        from: String,
        /// The file's.
        to: String,
    },
    /// Add a policy rule, or replace the one for the same target (`cctl policy add`).
    AddRule {
        /// What it matches.
        target: Target,
        /// The congestion control it sets.
        cc: String,
        /// The congestion control of the rule it replaces, if any.
        replaces: Option<String>,
    },
    /// Remove a policy rule the file does not have (`cctl policy remove`).
    RemoveRule {
        /// What it matches.
        target: Target,
        /// The congestion control it sets.
        cc: String,
    },
    /// Unregister a name cctl loaded that the file does not list (`cctl unload`).
    Unload {
        /// The name.
        name: String,
        /// Its algorithm key.
        algo: String,
    },
}

/// `key from→to, ...` (`-` for a value one side lacks).
fn changes_text(changes: &[ParamChange]) -> String {
    let show = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
    changes
        .iter()
        .map(|c| format!("{} {}→{}", c.key, show(c.from), show(c.to)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn kv(m: &BTreeMap<String, u32>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Load {
                name,
                algo,
                profile,
                given,
                ..
            } => {
                write!(f, "load {name} ({algo}")?;
                if let Some(p) = profile {
                    write!(f, ", profile {p}")?;
                }
                if !given.is_empty() {
                    write!(f, ", {}", kv(given))?;
                }
                write!(f, ")")
            }
            Step::Upgrade {
                name,
                algo,
                changes,
                ..
            } => {
                write!(f, "upgrade {name} ({algo}): {}", changes_text(changes))
            }
            Step::Set {
                name,
                algo,
                changes,
            } => {
                write!(f, "set {name} ({algo}, live): {}", changes_text(changes))
            }
            Step::Default { from, to } => write!(f, "default {from} → {to}"),
            Step::AddRule {
                target,
                cc,
                replaces,
            } => match replaces {
                Some(old) => write!(f, "policy {target} → {cc} (was {old})"),
                None => write!(f, "policy {target} → {cc} (new rule)"),
            },
            Step::RemoveRule { target, cc } => write!(f, "remove policy {target} → {cc}"),
            Step::Unload { name, algo } => write!(f, "unload {name} ({algo})"),
        }
    }
}

/// Something the file would change that is left as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Kept {
    /// The registered name.
    pub name: String,
    /// Why it stays, and what to do.
    pub reason: String,
}

/// The steps that make the state the file's, in the order they run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    /// The changes, in order (empty: the kernel already matches the file).
    pub steps: Vec<Step>,
    /// Names the file does not list that stay loaded (in use).
    pub kept: Vec<Kept>,
}

impl Plan {
    /// Whether there is nothing to change.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

fn config_error(cfg: &Config, field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::BadConfig {
        path: cfg.path.clone(),
        field: field.into(),
        message: message.into(),
    }
}

/// How a loaded name's parameters become the file's: `None` when they already are,
/// else the step that changes them: [`Step::Set`] when the algorithm is the file's and
/// every differing parameter is live (`ParamSpec::live`, spec §18.5), else
/// [`Step::Upgrade`] (a new version loaded and swapped in).
pub fn params_step(current: &ObservedCc, desired: &DesiredCc) -> Option<Step> {
    if !current.object && current.params == desired.params {
        return None;
    }
    let keys: BTreeSet<&String> = current.params.keys().chain(desired.params.keys()).collect();
    let changes = keys
        .into_iter()
        .filter_map(|k| {
            let (from, to) = (
                current.params.get(k).copied(),
                desired.params.get(k).copied(),
            );
            (from != to || current.object).then(|| ParamChange {
                key: k.clone(),
                from: if current.object { None } else { from },
                to,
            })
        })
        .collect::<Vec<ParamChange>>();
    let all_live = !current.object
        && current.algo == desired.algo
        && crate::catalogue::find(&desired.algo).is_ok_and(|a| {
            changes.iter().all(|c| {
                c.from.is_some()
                    && c.to.is_some()
                    && a.params.iter().any(|p| p.key == c.key && p.live)
            })
        });
    if all_live {
        return Some(Step::Set {
            name: desired.name.clone(),
            algo: desired.algo.clone(),
            changes,
        });
    }
    Some(Step::Upgrade {
        name: desired.name.clone(),
        algo: desired.algo.clone(),
        profile: desired.profile.clone(),
        params: desired.params.clone(),
        changes,
        from_version: current.version,
    })
}

fn same_target(a: &Target, b: &Target) -> bool {
    match (a, b) {
        (Target::Port { port: x }, Target::Port { port: y }) => x == y,
        (Target::Cgroup { id: x, .. }, Target::Cgroup { id: y, .. }) => x == y,
        _ => false,
    }
}

/// The steps that make `obs` the state `cfg` describes, in the order they must run (see
/// the module's documentation), or why the file cannot be applied to this state. Pure:
/// reads nothing but its arguments.
///
/// Errors: [`Error::BadConfig`] naming the field: a name the kernel has from someone
/// else, a native module's name, a name a running process owns, a name loaded with
/// another algorithm, a default or rule naming a congestion control that neither the
/// file nor the kernel (after the apply) has, a cgroup that cannot be used, a default
/// the file would unload.
pub fn plan(cfg: &Config, obs: &Observed) -> Result<Plan> {
    let loaded: BTreeMap<&str, &ObservedCc> =
        obs.loaded.iter().map(|l| (l.name.as_str(), l)).collect();
    let managed = |name: &str| loaded.get(name).is_some_and(|l| l.owner.is_none());
    let mut loads = Vec::new();
    let mut upgrades = Vec::new();
    for a in &cfg.algorithms {
        let field = |k: &str| format!("algorithm[{}].{k}", a.index);
        match loaded.get(a.name.as_str()) {
            Some(l) if l.owner.is_some() => {
                return Err(config_error(
                    cfg,
                    field("name"),
                    format!(
                        "'{}' is loaded by process {} for its own use (e.g. `cctl demo`), which \
                         unloads it when it ends; pick another name",
                        a.name,
                        l.owner.unwrap_or_default()
                    ),
                ))
            }
            Some(l) if l.algo == "?" => {
                return Err(config_error(
                    cfg,
                    field("name"),
                    format!(
                        "'{}' is pinned by cctl but has no metadata in {}; `cctl unload {}` it first",
                        a.name,
                        registry::META_DIR,
                        a.name
                    ),
                ))
            }
            Some(l) if l.algo != a.algo => {
                return Err(config_error(
                    cfg,
                    field("algo"),
                    format!(
                        "'{}' is loaded running {}, the file says {}; an upgrade changes parameters, \
                         not the algorithm: unload it first (`cctl unload {}`) or give another `name`",
                        a.name, l.algo, a.algo, a.name
                    ),
                ))
            }
            Some(l) => upgrades.extend(params_step(l, a)),
            None => {
                if obs.available.contains(&a.name) {
                    return Err(config_error(
                        cfg,
                        field("name"),
                        format!(
                            "'{}' is registered in the kernel, not by cctl (built-in, module or \
                             another loader); give another `name`",
                            a.name
                        ),
                    ));
                }
                if obs.native_modules.contains(&a.name) {
                    return Err(config_error(
                        cfg,
                        field("name"),
                        format!(
                            "'{}' is the name of a native module on disk (tcp_{}.ko); registering \
                             it would make that module fail to load; give another `name`",
                            a.name, a.name
                        ),
                    ));
                }
                loads.push(Step::Load {
                    name: a.name.clone(),
                    algo: a.algo.clone(),
                    profile: a.profile.clone(),
                    given: a.given.clone(),
                    params: a.params.clone(),
                });
            }
        }
    }

    // Names of cctl that go, and the congestion controls there are after the apply.
    let leaving: Vec<&ObservedCc> = obs
        .loaded
        .iter()
        .filter(|l| l.owner.is_none() && cfg.algorithm(&l.name).is_none())
        .collect();
    let usable = |name: &str| {
        cfg.algorithm(name).is_some() || (obs.available.iter().any(|n| n == name) && !managed(name))
    };
    let why_not = |name: &str| {
        if managed(name) {
            format!(
                "'{name}' is loaded by cctl but not listed in this file, so apply unloads it; \
                 add an [[algorithm]] with name = \"{name}\", or name another"
            )
        } else {
            let mut have: Vec<String> = cfg.algorithms.iter().map(|a| a.name.clone()).collect();
            have.extend(obs.available.iter().filter(|n| !managed(n)).cloned());
            format!(
                "'{name}' is neither an [[algorithm]] of this file nor registered in the kernel; \
                 allowed: {}",
                have.join(", ")
            )
        }
    };

    let mut default = Vec::new();
    match &cfg.default {
        Some(d) => {
            if !usable(d) {
                return Err(config_error(cfg, "default", why_not(d)));
            }
            if *d != obs.default {
                default.push(Step::Default {
                    from: obs.default.clone(),
                    to: d.clone(),
                });
            }
        }
        None => {
            if leaving.iter().any(|l| l.name == obs.default) {
                return Err(config_error(
                    cfg,
                    "default",
                    format!(
                        "the default congestion control is '{}', which is not in this file, so \
                         apply would unload it; set `default` (e.g. \"cubic\") or list it",
                        obs.default
                    ),
                ));
            }
        }
    }

    let mut adds = Vec::new();
    let mut wanted: Vec<Target> = Vec::new();
    for r in &cfg.policy {
        let at = format!("policy[{}]", r.index);
        if !usable(&r.cc) {
            return Err(config_error(cfg, format!("{at}.cc"), why_not(&r.cc)));
        }
        if r.cc == "cdg" {
            return Err(config_error(
                cfg,
                format!("{at}.cc"),
                "'cdg' cannot be set from BPF (the kernel refuses it: ENOTSUPP)",
            ));
        }
        let target = match &r.target {
            RuleTarget::Port(port) => Target::Port { port: *port },
            RuleTarget::Cgroup(arg) => match obs.cgroups.get(arg) {
                Some(Ok((path, id))) => Target::Cgroup {
                    path: path.clone(),
                    id: *id,
                    exists: true,
                },
                Some(Err(why)) => {
                    return Err(config_error(cfg, format!("{at}.cgroup"), why.clone()))
                }
                None => {
                    return Err(config_error(
                        cfg,
                        format!("{at}.cgroup"),
                        "the cgroup was not looked up (internal error)",
                    ))
                }
            },
        };
        if let Some(prev) = wanted.iter().position(|t| same_target(t, &target)) {
            return Err(config_error(
                cfg,
                format!("{at}.cgroup"),
                format!(
                    "{target} is the same cgroup as policy[{}]'s; one rule per cgroup",
                    cfg.policy[prev].index
                ),
            ));
        }
        wanted.push(target.clone());
        let existing = obs.rules.iter().find(|o| same_target(&o.target, &target));
        match existing {
            Some(o) if o.cc == r.cc => {}
            Some(o) => adds.push(Step::AddRule {
                target,
                cc: r.cc.clone(),
                replaces: Some(o.cc.clone()),
            }),
            None => adds.push(Step::AddRule {
                target,
                cc: r.cc.clone(),
                replaces: None,
            }),
        }
    }
    let removes: Vec<Step> = obs
        .rules
        .iter()
        .filter(|o| !wanted.iter().any(|t| same_target(t, &o.target)))
        .map(|o| Step::RemoveRule {
            target: o.target.clone(),
            cc: o.cc.clone(),
        })
        .collect();

    let mut unloads = Vec::new();
    let mut kept = Vec::new();
    for l in leaving {
        match obs.in_use.get(&l.name) {
            Some(detail) => kept.push(Kept {
                name: l.name.clone(),
                reason: format!(
                    "not unloaded: still used by {detail}; apply again once they have closed, or \
                     move them (`cctl unload {} --migrate-to cubic`)",
                    l.name
                ),
            }),
            None => unloads.push(Step::Unload {
                name: l.name.clone(),
                algo: l.algo.clone(),
            }),
        }
    }
    let steps = loads
        .into_iter()
        .chain(upgrades)
        .chain(default)
        .chain(adds)
        .chain(removes)
        .chain(unloads)
        .collect();
    Ok(Plan { steps, kept })
}

/// Reads the state [`plan`] needs: cctl's loaded names (after checking that cctl's
/// metadata directories are trusted, [`registry::check_trusted_state`], [`policy::check_trusted_state`]), the registered
/// congestion controls, the default, the policy rules, the file's cgroups, native
/// modules named like the file's algorithms, and the established users of the names the
/// file would unload. Reads only.
///
/// Errors: [`Error::Untrusted`] (a metadata directory or record someone but root could
/// write), [`Error::NotPrivileged`] (reading policy maps, walking namespaces), [`Error::Io`],
/// [`Error::Bpf`].
pub fn observe(cfg: &Config) -> Result<Observed> {
    registry::check_trusted_state()?;
    policy::check_trusted_state()?;
    let mut records = registry::list_loaded()?;
    // Live tunables as they are in the kernel (`cctl set` by hand included).
    records.iter_mut().for_each(crate::live::refresh);
    let loaded: Vec<ObservedCc> = records
        .iter()
        .map(|r| {
            let current = r.versions.iter().find(|v| v.version == r.version);
            ObservedCc {
                name: r.name.clone(),
                algo: r.algo.clone(),
                profile: r.profile.clone(),
                params: r.params.clone(),
                object: current.is_some_and(|v| v.object.is_some()),
                version: r.version,
                owner: r.owner_pid.filter(|_| !r.is_orphan()),
            }
        })
        .collect();
    let rules = policy::list()?
        .into_iter()
        .map(|r| ObservedRule {
            target: r.target,
            cc: r.cc,
        })
        .collect();
    let native_modules = cfg
        .algorithms
        .iter()
        .filter(|a| {
            !loaded.iter().any(|l| l.name == a.name) && kernel::native_module(&a.name).is_some()
        })
        .map(|a| a.name.clone())
        .collect();
    let cgroups = cfg
        .policy
        .iter()
        .filter_map(|r| match &r.target {
            RuleTarget::Cgroup(arg) => Some((
                arg.clone(),
                policy::resolve_cgroup(arg).map_err(|e| e.to_string()),
            )),
            RuleTarget::Port(_) => None,
        })
        .collect();
    let mut in_use = BTreeMap::new();
    for l in &loaded {
        if l.owner.is_none() && cfg.algorithm(&l.name).is_none() {
            let users = migrate::established_users(&l.name)?;
            if !users.is_empty() {
                let where_: Vec<String> = users
                    .iter()
                    .map(|(ns, n)| format!("netns {ns}: {n}"))
                    .collect();
                in_use.insert(
                    l.name.clone(),
                    format!(
                        "{} established socket(s) ({})",
                        users.values().sum::<u64>(),
                        where_.join(", ")
                    ),
                );
            }
        }
    }
    Ok(Observed {
        loaded,
        available: kernel::available_ccs()?,
        default: kernel::default_cc()?,
        rules,
        native_modules,
        cgroups,
        in_use,
    })
}

/// Holds the apply lock: one `cctl apply` at a time (an exclusive `flock` on cctl's
/// metadata directory).
#[derive(Debug)]
pub struct ApplyLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// Takes the apply lock, waiting for another `cctl apply` to finish; creates cctl's
/// metadata directory if needed.
///
/// Errors: [`Error::Io`].
pub fn lock() -> Result<ApplyLock> {
    let dir = registry::META_DIR;
    std::fs::create_dir_all(dir).map_err(|e| Error::io("creating metadata directory", dir, e))?;
    let file = std::fs::File::open(dir).map_err(|e| Error::io("opening", dir, e))?;
    let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| Error::io("locking (another cctl apply runs?)", dir, e.into()))?;
    Ok(ApplyLock { _lock: lock })
}

/// How to undo a step that was done.
#[derive(Debug)]
enum Undo {
    Unload(String),
    Rollback { name: String, to: u32 },
    Set { name: String, values: Vec<String> },
    Default(String),
    AddRule { spec: RuleSpec, cc: String },
    RemoveRule(RuleSpec),
}

fn spec_of(target: &Target) -> RuleSpec {
    match target {
        Target::Port { port } => RuleSpec::Port(u32::from(*port)),
        Target::Cgroup { path, .. } => RuleSpec::Cgroup(path.clone()),
    }
}

impl Undo {
    fn run(&self) -> Result<()> {
        match self {
            Undo::Unload(name) => registry::unload(name).map(|_| ()),
            Undo::Rollback { name, to } => upgrade::rollback(name, Some(*to)).map(|_| ()),
            Undo::Set { name, values } => crate::live::set(name, values).map(|_| ()),
            Undo::Default(name) => kernel::set_default_cc(name),
            Undo::AddRule { spec, cc } => policy::add(spec, cc).map(|_| ()),
            Undo::RemoveRule(spec) => policy::remove(spec).map(|_| ()),
        }
    }
}

impl std::fmt::Display for Undo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let spec = |s: &RuleSpec| match s {
            RuleSpec::Port(p) => format!("port {p}"),
            RuleSpec::Cgroup(c) => format!("cgroup {}", c.display()),
        };
        match self {
            Undo::Unload(n) => write!(f, "unload {n}"),
            Undo::Rollback { name, to } => write!(f, "roll {name} back to v{to}"),
            Undo::Set { name, values } => write!(f, "set {name} {} again", values.join(" ")),
            Undo::Default(d) => write!(f, "default back to {d}"),
            Undo::AddRule { spec: s, cc } => write!(f, "policy {} → {cc} again", spec(s)),
            Undo::RemoveRule(s) => write!(f, "remove policy {}", spec(s)),
        }
    }
}

/// Changes the parameters of a loaded name as [`params_step`] decided: today by
/// upgrading (a new version with every parameter the file's). Returns what the new
/// version is, and how to go back.
fn change_params(
    name: &str,
    profile: &Option<String>,
    params: &BTreeMap<String, u32>,
) -> Result<(String, Undo)> {
    let opts = UpgradeOptions {
        params: params.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        profile: profile.clone(),
        object: None,
    };
    let swap = upgrade::upgrade(name, &opts)?;
    Ok((
        format!(
            "v{} → v{} (map {})",
            swap.from.version, swap.to.version, swap.to.map_id
        ),
        Undo::Rollback {
            name: name.into(),
            to: swap.from.version,
        },
    ))
}

fn run_step(step: &Step) -> Result<(String, Option<Undo>)> {
    match step {
        Step::Load {
            name,
            algo,
            profile,
            given,
            ..
        } => {
            let opts = LoadOptions {
                name: Some(name.clone()),
                profile: profile.clone(),
                params: given.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                owned: false,
            };
            let rec = registry::load(algo, &opts)?;
            let map = rec.versions.first().map_or(0, |v| v.map_id);
            Ok((
                format!("loaded (map {map})"),
                Some(Undo::Unload(name.clone())),
            ))
        }
        Step::Upgrade {
            name,
            profile,
            params,
            ..
        } => {
            let (what, undo) = change_params(name, profile, params)?;
            Ok((what, Some(undo)))
        }
        Step::Set { name, changes, .. } => {
            let kv = |pick: fn(&ParamChange) -> Option<u32>| -> Vec<String> {
                changes
                    .iter()
                    .filter_map(|c| pick(c).map(|v| format!("{}={v}", c.key)))
                    .collect()
            };
            let report = crate::live::set(name, &kv(|c| c.to))?;
            let written: Vec<String> = report
                .versions
                .iter()
                .filter(|v| v.skipped.is_none())
                .map(|v| format!("v{}", v.version))
                .collect();
            Ok((
                format!("set live in {}", written.join(", ")),
                Some(Undo::Set {
                    name: name.clone(),
                    values: kv(|c| c.from),
                }),
            ))
        }
        Step::Default { from, to } => {
            kernel::set_default_cc(to)?;
            Ok(("set".into(), Some(Undo::Default(from.clone()))))
        }
        Step::AddRule {
            target,
            cc,
            replaces,
        } => {
            let spec = spec_of(target);
            policy::add(&spec, cc)?;
            let undo = match replaces {
                Some(old) => Undo::AddRule {
                    spec,
                    cc: old.clone(),
                },
                None => Undo::RemoveRule(spec),
            };
            Ok(("added".into(), Some(undo)))
        }
        Step::RemoveRule { target, cc } => {
            let spec = spec_of(target);
            policy::remove(&spec)?;
            Ok((
                "removed".into(),
                Some(Undo::AddRule {
                    spec,
                    cc: cc.clone(),
                }),
            ))
        }
        Step::Unload { name, .. } => {
            // The plan removes the rules naming it first; check again in case a rule
            // was added meanwhile (the unload would leave it failing).
            let rules = policy::rules_using(name)?;
            if !rules.is_empty() {
                return Err(Error::NamedByPolicy {
                    name: name.clone(),
                    rules: rules
                        .iter()
                        .map(|r| format!("{} → {}", r.target, r.cc))
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
            registry::unload(name)?;
            Ok(("unloaded".into(), None))
        }
    }
}

/// What [`execute`] did with one step.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Done {
    /// 1-based number of the step in the plan.
    pub index: usize,
    /// The step.
    #[serde(flatten)]
    pub step: Step,
    /// What happened (`loaded (map 123)`, `v1 → v2 (map 130)`).
    pub result: String,
}

/// Carries out the plan's steps in order, calling `progress` after each. On a failed
/// step, undoes the steps already done (see the module's documentation for the exact
/// guarantee). The caller holds [`lock`] and checked privileges.
///
/// Errors: [`Error::StepFailed`] naming the step, with its cause and what undoing did.
pub fn execute(plan: &Plan, progress: &mut dyn FnMut(&Done)) -> Result<Vec<Done>> {
    let total = plan.steps.len();
    let mut done = Vec::new();
    let mut undo: Vec<Undo> = Vec::new();
    for (i, step) in plan.steps.iter().enumerate() {
        let ran = if i == 1 {
            crate::faults::step("apply.after-first-step").and_then(|()| run_step(step))
        } else {
            run_step(step)
        };
        match ran {
            Ok((result, u)) => {
                undo.extend(u);
                let d = Done {
                    index: i + 1,
                    step: step.clone(),
                    result,
                };
                progress(&d);
                done.push(d);
            }
            Err(source) => {
                let undone = if matches!(step, Step::Unload { .. }) {
                    format!(
                        "nothing undone: the file's algorithms, default and rules are in place; \
                         '{}' and the names after it stay loaded",
                        match step {
                            Step::Unload { name, .. } => name.as_str(),
                            _ => "",
                        }
                    )
                } else if undo.is_empty() {
                    "nothing had changed before it; the kernel is as it was".to_string()
                } else {
                    let mut failed = Vec::new();
                    let n = undo.len();
                    for u in undo.iter().rev() {
                        if let Err(e) = u.run() {
                            failed.push(format!("{u}: {e}"));
                        }
                    }
                    if failed.is_empty() {
                        format!("the {n} earlier change(s) were undone; the kernel runs what it ran before")
                    } else {
                        format!(
                            "undoing the {n} earlier change(s) failed for: {}; check `cctl list` and `cctl policy list`",
                            failed.join("; ")
                        )
                    }
                };
                return Err(Error::StepFailed {
                    index: i + 1,
                    total,
                    step: step.to_string(),
                    undone,
                    cause: Box::new(source),
                });
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests;
