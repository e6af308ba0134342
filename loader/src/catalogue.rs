//! The algorithms this binary carries: names, summaries, papers and tunables.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use std::path::Path;

use crate::algo::Registered;
use crate::error::{Error, Result};
use crate::object;

/// One tunable of an algorithm: a `const volatile` (`.rodata`) global of its BPF
/// program set at load, or, when `live`, a member of its `.data` struct `cctl_live`
/// that `cctl set` changes while it runs (spec §18.5). Values are unsigned integers in
/// `unit`.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct ParamSpec {
    /// Key used with `--param key=value`; equals the BPF global's name.
    pub key: &'static str,
    /// Default value (the paper's, see the spec section in `Algorithm::spec`).
    pub default: u32,
    /// Smallest allowed value.
    pub min: u32,
    /// Largest allowed value.
    pub max: u32,
    /// Unit of the value (`ms`, `%`, `bool`, ...).
    pub unit: &'static str,
    /// Its symbol in the paper or spec (`Δ_L`, `β`), empty when it has none.
    pub symbol: &'static str,
    /// What it controls.
    pub doc: &'static str,
    /// Whether it may change while the algorithm is registered (spec §18.5): a bound,
    /// gain or threshold may; the size or layout of per-flow state, or a mode that
    /// per-flow state was built for, may not. Must agree with the program (checked by
    /// a unit test against the object's BTF).
    pub live: bool,
}

/// Builds a [`ParamSpec`] (for the algorithms' const tables).
pub const fn p(
    key: &'static str,
    default: u32,
    min: u32,
    max: u32,
    unit: &'static str,
    doc: &'static str,
) -> ParamSpec {
    ParamSpec {
        key,
        default,
        min,
        max,
        unit,
        symbol: "",
        doc,
        live: false,
    }
}

impl ParamSpec {
    /// The same tunable with its paper/spec symbol.
    pub const fn sym(self, symbol: &'static str) -> Self {
        ParamSpec { symbol, ..self }
    }

    /// The same tunable, marked as one that may change while registered (spec §18.5).
    pub const fn live(self) -> Self {
        ParamSpec { live: true, ..self }
    }
}

/// The `ack_counting` tunable every port has (spec §18.2): 0 counts acked packets
/// (Appropriate Byte Counting, [P0]'s method), 1 counts ACK events.
pub const ACK_COUNTING: ParamSpec = p(
    "ack_counting",
    0,
    0,
    1,
    "0=packets,1=events",
    "count acked packets (ABC, [P0]) or ACK events (spec §18.2)",
);

/// Tunable values by key, every tunable of the algorithm present.
pub type Params = BTreeMap<&'static str, u32>;

/// An algorithm's per-ACK replay rules, as its declaration holds them (`replay:` in
/// `loader/src/algo/<key>/mod.rs`): the constructor of its rules in
/// `loader/src/algo/<key>/replay.rs`, type-erased so that the catalogue (which decoding a
/// sample reads) does not depend on the replay machinery (which reads samples);
/// `crate::algo::replay::run` takes it back. Opaque outside the loader; run it with
/// [`crate::model_check::check`].
#[derive(Clone, Copy)]
pub struct Replay(pub(crate) &'static (dyn std::any::Any + Send + Sync));

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Replay(..)")
    }
}

/// A named set of tunable values (spec §18.4), e.g. `linux`: the constants of the
/// Linux module where they differ from the paper's.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Profile {
    /// Name used with `--profile` and in `--algo <key>@<name>`.
    pub name: &'static str,
    /// Suffix of the default registered name: `bpf_<key>_<tag>` (kept short: names
    /// are at most 15 characters).
    pub tag: &'static str,
    /// What it reproduces.
    pub doc: &'static str,
    /// The papers whose tests ran this variant, by their keys in docs/references.md
    /// (one of [`PAPERS`]): a scenario from one of them runs it when `--algo` gives the
    /// plain key. Empty for variants no paper tested (the `linux` profiles: today's
    /// modules). An algorithm whose declaration names no profile for a paper ran as its
    /// default port there.
    pub papers: &'static [&'static str],
    /// Values that differ from the defaults.
    pub values: &'static [(&'static str, u32)],
}

/// The keys of the four source papers (docs/references.md): [P0] Li, Leith, Shorten 2007;
/// [P1] Jin, Wei, Low 2004; [P2] the Hamilton Institute's open-issues paper; [P3]
/// Baiocchi, Castellani, Vacirca 2007.
pub const PAPERS: &[&str] = &["P0", "P1", "P2", "P3"];

/// A congestion control carried by this binary as a BPF struct_ops program.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Algorithm {
    /// Short key used on the command line (`cctl load htcp`).
    pub key: &'static str,
    /// Name it registers under by default (`bpf_<key>`), as seen in
    /// /proc/sys/net/ipv4/tcp_available_congestion_control.
    pub cc_name: &'static str,
    /// Stable id, stored in the shared measurement layer of every sample (the program
    /// gets it in its `.rodata` global `cctl_algo_id` at load). Never reused or
    /// renumbered, so that samples of older binaries still decode.
    pub id: u8,
    /// One-line summary.
    pub summary: &'static str,
    /// Paper(s) and section it implements.
    pub paper: &'static str,
    /// Section of shared/spec/algorithms.md.
    pub spec: &'static str,
    /// Name of the Linux module it is compared with (`cubic` for tcp_cubic), if any.
    pub native: Option<&'static str>,
    /// Whether its rules read the clock or RTT samples (Δ, RTT-driven α/β, cubic's t,
    /// queueing delay): such a port is checked against its module's own run-to-run
    /// spread, one whose rules do not is checked for exact equality (`cctl conform`).
    pub clocked: bool,
    /// Load-time tunables.
    pub params: &'static [ParamSpec],
    /// Named parameter sets.
    pub profiles: &'static [Profile],
    /// The variables `vars` decodes: (name, "unit: meaning").
    pub var_docs: &'static [(&'static str, &'static str)],
    /// Refuses forbidden combinations of (individually valid) tunables, saying why.
    #[serde(skip)]
    pub check: fn(&Params) -> std::result::Result<(), String>,
    /// The compiled BPF object (`bpf/algo/<key>.bpf.c`), embedded in the binary.
    #[serde(skip)]
    pub object: &'static [u8],
    /// The same program with its live tunables as `.rodata` constants (built with
    /// `-DCCTL_LIVE_CONST`), when it has live tunables: the baseline of
    /// `cctl bench perf --parts live`.
    #[serde(skip)]
    pub object_const: Option<&'static [u8]>,
    /// The program's source text, `bpf/algo/<key>.bpf.c` (its header names the paper, the
    /// differences from the Linux module and any conformance tolerance).
    #[serde(skip)]
    pub program: &'static str,
    /// Decodes the algorithm's variables from a sample's raw `icsk_ca_priv`.
    #[serde(skip)]
    pub vars: fn(&[u8]) -> crate::algo::Vars,
    /// Its per-ACK replay rules (`loader/src/algo/<key>/replay.rs`), when it has no Linux
    /// module to be compared with: `cctl conform` then checks the port's recorded
    /// trajectory ACK by ACK against its f64 model ([`crate::model_check::check`]).
    #[serde(skip)]
    pub replay: Option<Replay>,
}

/// No forbidden combinations.
pub fn no_check(_: &Params) -> std::result::Result<(), String> {
    Ok(())
}

/// The `linux_exact` switch of a port (cubic, htcp, westwood): with it on, the port runs
/// its Linux module's clock and arithmetic with the module's own constants, so every
/// tunable but `linux_exact` and those in `free` must keep its default (the defaults are
/// the module's values).
///
/// Errors: the first tunable of `key` that differs from its default, naming it and what
/// may change.
pub fn linux_exact_keeps_defaults(
    key: &str,
    v: &Params,
    free: &[&str],
) -> std::result::Result<(), String> {
    if v.get("linux_exact").copied() != Some(1) {
        return Ok(());
    }
    let algo = find(key).map_err(|e| e.to_string())?;
    for spec in algo.params {
        if spec.key == "linux_exact" || free.contains(&spec.key) {
            continue;
        }
        let got = v.get(spec.key).copied().unwrap_or(spec.default);
        if got != spec.default {
            return Err(format!(
                "linux_exact=1 runs the Linux module's constants: {} must keep its default {} \
                 (got {got}); {}",
                spec.key,
                spec.default,
                if free.is_empty() {
                    "no other tunable may change".to_string()
                } else {
                    format!("only {} may change", free.join(", "))
                }
            ));
        }
    }
    Ok(())
}

pub use crate::algo::ALGORITHMS;

/// Looks an algorithm up by key (`htcp`) or default kernel name (`bpf_htcp`).
pub fn find(name: &str) -> Result<&'static Algorithm> {
    ALGORITHMS
        .iter()
        .find(|a| a.key == name || a.cc_name == name)
        .ok_or_else(|| Error::UnknownAlgorithm {
            name: name.to_string(),
            available: ALGORITHMS
                .iter()
                .map(|a| a.key)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Looks an algorithm up by its stable id ([`Algorithm::id`]).
pub fn by_id(id: u8) -> Option<&'static Algorithm> {
    ALGORITHMS.iter().find(|a| a.id == id)
}

impl Algorithm {
    /// Where its program comes from, for messages: `bpf/algo/<key>.bpf.c`.
    pub fn source(&self) -> String {
        format!("bpf/algo/{}.bpf.c", self.key)
    }

    /// What its object's BTF says: `.rodata` globals with their compiled-in defaults,
    /// the struct_ops map, and the kernel functions (kfuncs) it calls.
    ///
    /// Errors: [`Error::BadObject`] (only for a broken build).
    pub fn object_info(&self) -> Result<object::ObjectInfo> {
        object::inspect(self.object, Path::new(&self.source()))
    }

    /// Kernel functions (kfuncs) the program calls, from its object's BTF; checked in
    /// the kernel's BTF before loading so that a missing one is named.
    pub fn kfuncs(&self) -> Result<Vec<String>> {
        Ok(self.object_info()?.kfuncs)
    }

    /// Loads its program with these tunables (every key a `.rodata` global of the
    /// program or a live tunable, plus `cctl_algo_id` = [`Algorithm::id`]) and registers it as `name`,
    /// or leaves it READY when the name is taken (see [`crate::algo::register`]).
    ///
    /// Errors: as [`object::load`].
    pub fn load(&self, name: &str, params: &Params) -> Result<Registered> {
        let mut globals: Vec<(&str, u32)> = params.iter().map(|(k, v)| (*k, *v)).collect();
        globals.push(("cctl_algo_id", u32::from(self.id)));
        object::load(self.object, Path::new(&self.source()), name, &globals)
    }

    /// Human-readable table of the parameters: key, unit, range, default, `live:` for
    /// one `cctl set` may change while registered (spec §18.5), doc.
    pub fn params_help(&self) -> String {
        if self.params.is_empty() {
            return format!("  ({} has no parameters)", self.key);
        }
        let mut s = String::new();
        for p in self.params {
            let _ = writeln!(
                s,
                "  {:<22} {:<18} [{}..={}] default {} {} {}",
                p.key,
                p.unit,
                p.min,
                p.max,
                p.default,
                if p.live { " live:" } else { "" },
                p.doc
            );
        }
        s.pop();
        s
    }

    /// Looks up a profile by name; the error lists the ones there are.
    pub fn profile(&self, name: &str) -> Result<&'static Profile> {
        self.profiles
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| Error::BadParamCombination {
                algo: self.key.into(),
                reason: if self.profiles.is_empty() {
                    format!("there is no profile '{name}': {} has no profiles", self.key)
                } else {
                    format!(
                        "there is no profile '{name}'; profiles: {}",
                        self.profiles
                            .iter()
                            .map(|p| p.name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
            })
    }

    /// The profile that reproduces what `paper` (a key of [`PAPERS`]) tested, if it tested
    /// something other than the default port.
    pub fn variant_for(&self, paper: &str) -> Option<&'static Profile> {
        self.profiles.iter().find(|p| p.papers.contains(&paper))
    }

    /// The registered name for a profile: `bpf_<key>` without, `bpf_<key>_<tag>` with.
    pub fn default_name(&self, profile: Option<&str>) -> Result<String> {
        match profile {
            None => Ok(self.cc_name.to_string()),
            Some(p) => Ok(format!("{}_{}", self.cc_name, self.profile(p)?.tag)),
        }
    }

    /// Parses `key=value` strings into a full parameter map (defaults filled in),
    /// refusing unknown keys, values out of range and forbidden combinations.
    pub fn resolve_params(&self, args: &[String]) -> Result<Params> {
        self.resolve_params_with(None, args)
    }

    /// As [`Algorithm::resolve_params`], starting from a profile's values instead of
    /// the defaults (explicit `key=value`s still win).
    pub fn resolve_params_with(&self, profile: Option<&str>, args: &[String]) -> Result<Params> {
        let mut values: Params = self.params.iter().map(|p| (p.key, p.default)).collect();
        if let Some(name) = profile {
            for (k, v) in self.profile(name)?.values {
                let spec = self
                    .params
                    .iter()
                    .find(|p| p.key == *k)
                    .expect("profile values name tunables");
                values.insert(spec.key, *v);
            }
        }
        for arg in args {
            let (key, value) = arg.split_once('=').ok_or_else(|| Error::BadParamValue {
                algo: self.key.into(),
                key: arg.clone(),
                reason: "missing '='".into(),
                expected: "key=value".into(),
            })?;
            let spec = self
                .params
                .iter()
                .find(|p| p.key == key.trim())
                .ok_or_else(|| Error::UnknownParam {
                    algo: self.key.into(),
                    key: key.into(),
                    valid: self.params_help(),
                })?;
            let expected = format!("an integer in [{}, {}] {}", spec.min, spec.max, spec.unit);
            let v: u32 = value.trim().parse().map_err(|_| Error::BadParamValue {
                algo: self.key.into(),
                key: spec.key.into(),
                reason: format!("'{value}' is not a non-negative integer"),
                expected: expected.clone(),
            })?;
            if v < spec.min || v > spec.max {
                return Err(Error::BadParamValue {
                    algo: self.key.into(),
                    key: spec.key.into(),
                    reason: format!("{v} is out of range"),
                    expected,
                });
            }
            values.insert(spec.key, v);
        }
        (self.check)(&values).map_err(|reason| Error::BadParamCombination {
            algo: self.key.into(),
            reason,
        })?;
        Ok(values)
    }
}

/// The `--algo` list that compares every port with a Linux module against it on the
/// same paths (`make compare`): per such algorithm its port, its `linux` profile where
/// it has one, and the module (`native:<module>`), in catalogue order.
pub fn ports_and_modules() -> Vec<String> {
    let mut v = Vec::new();
    for a in ALGORITHMS {
        let Some(module) = a.native else { continue };
        v.push(a.key.to_string());
        if a.profiles.iter().any(|p| p.name == "linux") {
            v.push(format!("{}@linux", a.key));
        }
        v.push(format!("native:{module}"));
    }
    v
}

/// Checks a congestion-control name the way the kernel limits it (TCP_CA_NAME_MAX
/// is 16 bytes with the NUL) and restricts it to `[A-Za-z0-9_]` (the name is also the
/// pin's file name, and bpffs refuses '.'), before anything touches the kernel.
pub fn validate_cc_name(name: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(Error::InvalidName {
            name: name.into(),
            reason: reason.into(),
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > 15 {
        return bad(&format!("it is {} characters long", name.len()));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
    {
        return bad(&format!("it contains '{c}'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_is_consistent() {
        let mut ids = std::collections::BTreeSet::new();
        for a in ALGORITHMS {
            assert_eq!(a.cc_name, format!("bpf_{}", a.key), "{}", a.key);
            assert!(
                a.id != 0 && ids.insert(a.id),
                "{}: id {} reused",
                a.key,
                a.id
            );
            assert_eq!(by_id(a.id).unwrap().key, a.key);
            for p in a.params {
                assert!(
                    p.min <= p.default && p.default <= p.max,
                    "{}.{}",
                    a.key,
                    p.key
                );
                assert!(
                    !p.unit.is_empty() && !p.doc.is_empty(),
                    "{}.{}",
                    a.key,
                    p.key
                );
            }
            let defaults = a
                .resolve_params(&[])
                .unwrap_or_else(|e| panic!("{}: {e}", a.key));
            assert_eq!(defaults.len(), a.params.len());
            for prof in a.profiles {
                for (k, v) in prof.values {
                    let p = a.params.iter().find(|p| p.key == *k);
                    let p = p.unwrap_or_else(|| panic!("{} profile {}: no {k}", a.key, prof.name));
                    assert!(
                        p.min <= *v && *v <= p.max,
                        "{} profile {}: {k}",
                        a.key,
                        prof.name
                    );
                }
                a.resolve_params_with(Some(prof.name), &[])
                    .unwrap_or_else(|e| panic!("{} profile {}: {e}", a.key, prof.name));
                for paper in prof.papers {
                    assert!(
                        PAPERS.contains(paper),
                        "{} profile {}: {paper}",
                        a.key,
                        prof.name
                    );
                    let n = a
                        .profiles
                        .iter()
                        .filter(|q| q.papers.contains(paper))
                        .count();
                    assert_eq!(n, 1, "{}: {n} profiles for {paper}", a.key);
                }
                validate_cc_name(&a.default_name(Some(prof.name)).unwrap()).unwrap();
            }
            let names: Vec<&str> = (a.vars)(&[0u8; 104]).iter().map(|v| v.name).collect();
            let docs: Vec<&str> = a.var_docs.iter().map(|(n, _)| *n).collect();
            assert_eq!(names, docs, "{}: vars and var_docs differ", a.key);
        }
    }

    #[test]
    fn declared_defaults_are_the_programs_globals_and_kfuncs_come_from_the_object() {
        for a in ALGORITHMS {
            let info = a.object_info().unwrap_or_else(|e| panic!("{}: {e}", a.key));
            assert_eq!(
                info.ops.map, a.key,
                "{}: struct_ops map named after the key",
                a.key
            );
            for p in a.params {
                let live = info.live.as_ref().and_then(|l| l.params.get(p.key));
                assert_eq!(
                    p.live,
                    live.is_some(),
                    "{}.{}: declared live = {}, but the program has it in {}",
                    a.key,
                    p.key,
                    p.live,
                    if live.is_some() {
                        ".data's cctl_live"
                    } else {
                        ".rodata"
                    }
                );
                let g = live
                    .or(info.globals.get(p.key))
                    .unwrap_or_else(|| panic!("{}: parameter {} has no global", a.key, p.key));
                assert_eq!(
                    g.initial,
                    u64::from(p.default),
                    "{}.{}: the declaration's default differs from the BPF global's",
                    a.key,
                    p.key
                );
            }
            if let Some(l) = &info.live {
                for k in l.params.keys() {
                    assert!(
                        a.params.iter().any(|p| p.key == k),
                        "{}: live tunable {k} is not declared",
                        a.key
                    );
                }
            }
            assert_eq!(
                info.globals.get("cctl_algo_id").map(|g| g.size),
                Some(4),
                "{}: cctl_algo_id",
                a.key
            );
            assert!(
                info.kfuncs.iter().any(|f| f.starts_with("tcp_")),
                "{}: kfuncs {:?}",
                a.key,
                info.kfuncs
            );
        }
    }

    #[test]
    fn the_algorithms_reference_lists_the_catalogue() {
        let doc = include_str!("../../docs/reference/algorithms.md");
        let section = doc
            .split("\n| key |")
            .nth(1)
            .and_then(|s| s.split("\n\n").next())
            .expect("docs/reference/algorithms.md has the algorithms table");
        let rows: Vec<Vec<&str>> = section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        let keys: Vec<String> = rows.iter().map(|r| r[0].trim_matches('`').into()).collect();
        let cat: Vec<&str> = ALGORITHMS.iter().map(|a| a.key).collect();
        assert_eq!(
            keys, cat,
            "docs/reference/algorithms.md's table against the catalogue"
        );
        for (r, a) in rows.iter().zip(ALGORITHMS) {
            assert_eq!(r[1], a.paper, "{}: source", a.key);
            let module = match a.native {
                None => "none".to_string(),
                Some("reno") => "`reno`".to_string(),
                Some(m) => format!("`tcp_{m}`"),
            };
            assert_eq!(r[2], module, "{}: native module", a.key);
            for prof in a.profiles {
                let named = format!("`{}`", prof.name);
                assert!(
                    r[3].contains(&named),
                    "{}: profile {named} not in {}",
                    a.key,
                    r[3]
                );
                for paper in prof.papers {
                    let tagged = format!("`{}` ([{paper}])", prof.name);
                    let own = format!("`{}`", paper.to_lowercase());
                    assert!(
                        r[3].contains(&tagged) || named == own,
                        "{}: {named} for [{paper}]",
                        a.key
                    );
                }
            }
            if a.profiles.is_empty() {
                assert_eq!(r[3], "–", "{}: no profiles", a.key);
            }
            let vars: Vec<String> = a.var_docs.iter().map(|(n, _)| format!("`{n}`")).collect();
            if !vars.is_empty() {
                assert_eq!(r[4], vars.join(" "), "{}: traced variables", a.key);
            }
        }
    }

    #[test]
    fn names_longer_than_15_or_with_odd_characters_are_refused() {
        assert!(validate_cc_name("bpf_htcp").is_ok());
        assert!(validate_cc_name("ab_C9").is_ok());
        assert!(validate_cc_name("123456789012345").is_ok());
        for bad in [
            "",
            "1234567890123456",
            "bpf-htcp",
            "a/b",
            "..",
            "a.b",
            "é",
            "a b",
        ] {
            let e = validate_cc_name(bad).unwrap_err().to_string();
            assert!(e.contains("[A-Za-z0-9_]"), "{bad}: {e}");
        }
    }

    #[test]
    fn unknown_algorithm_lists_the_available_ones() {
        let e = find("vegas2").unwrap_err().to_string();
        assert!(e.contains("reno") && e.contains("htcp"), "{e}");
        assert_eq!(find("bpf_htcp").unwrap().key, "htcp");
    }

    #[test]
    fn params_default_to_the_paper_values() {
        let htcp = find("htcp").unwrap();
        let v = htcp.resolve_params(&[]).unwrap();
        assert_eq!(v["delta_l_ms"], 1000);
        assert_eq!(v["delta_b_pct"], 20);
        assert_eq!((v["beta_min_pct"], v["beta_max_pct"]), (50, 80));
        assert_eq!(v["use_rtt_scaling"], 1);
    }

    #[test]
    fn unknown_param_lists_valid_keys_with_units_and_ranges() {
        let htcp = find("htcp").unwrap();
        let e = htcp
            .resolve_params(&["delta_x=3".into()])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("delta_l_ms") && e.contains("ms") && e.contains("[1..=60000]"),
            "{e}"
        );
    }

    #[test]
    fn out_of_range_and_malformed_values_are_refused() {
        let htcp = find("htcp").unwrap();
        for (arg, needle) in [
            ("beta_max_pct=101", "out of range"),
            ("delta_l_ms=-1", "not a non-negative integer"),
            ("delta_l_ms", "missing '='"),
            ("use_rtt_scaling=2", "[0, 1] bool"),
        ] {
            let e = htcp.resolve_params(&[arg.into()]).unwrap_err().to_string();
            assert!(e.contains(needle), "{arg}: {e}");
        }
        let e = htcp
            .resolve_params(&["beta_min_pct=90".into(), "beta_max_pct=60".into()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("must not exceed"), "{e}");
        let v = htcp.resolve_params(&["fixed_beta_pct=80".into()]).unwrap();
        assert_eq!(v["fixed_beta_pct"], 80);
    }

    #[test]
    fn reno_has_no_params_and_refuses_any() {
        let reno = find("reno").unwrap();
        assert!(reno.resolve_params(&[]).unwrap().is_empty());
        assert!(reno.resolve_params(&["x=1".into()]).is_err());
    }
}
