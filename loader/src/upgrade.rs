//! Upgrade in place and rollback: replace the implementation behind a registered
//! name atomically, keeping earlier versions loaded.
//!
//! A name's struct_ops link (pinned at `/sys/fs/bpf/cctl/<name>`) is swapped to the
//! struct_ops map of another version with `BPF_LINK_UPDATE`; the kernel replaces
//! the `tcp_congestion_ops` in its list (`tcp_update_congestion_control`: the new
//! one is added before the old one is removed, so the name never disappears). New
//! connections get the new version at once; established ones keep the version they
//! started with (each socket holds a reference on its struct_ops map). Every
//! version's map stays pinned at `/sys/fs/bpf/cctl-versions/<name>/<n>` until the
//! name is unloaded, so `rollback` can swap back to it.
//!
//! libbpf's `bpf_link__update_map` needs libbpf's own struct_ops link object, which
//! a link reopened from bpffs is not; so the new map is made READY by
//! `bpf_map__attach_struct_ops` (whose link creation then fails with EEXIST, the
//! name being registered — the kernel logs "already registered"), and the pinned
//! link is updated with `bpf_link_update`. Every failure before that call leaves
//! the running version untouched.

use std::collections::BTreeMap;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};

use crate::catalogue;
use crate::error::{Error, Result};
use crate::kernel;
use crate::registry::{self, LoadedCc, Version};

/// What `cctl upgrade` loads as the new version.
#[derive(Debug, Default, Clone)]
pub struct UpgradeOptions {
    /// `key=value` tunables, applied over the current version's values.
    pub params: Vec<String>,
    /// Start from this profile's values instead of the current version's.
    pub profile: Option<String>,
    /// Load this BPF object file instead of the carried algorithm (its only
    /// struct_ops map must be a `tcp_congestion_ops`; its `name` is set to the
    /// registered name). Cannot be combined with `params`/`profile`.
    pub object: Option<PathBuf>,
}

/// A completed swap of the version behind a name.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Swap {
    /// The registered name.
    pub name: String,
    /// The version that ran before.
    pub from: Version,
    /// The version new connections get now.
    pub to: Version,
}

/// The record of `name` with its version history, made explicit for metadata of a
/// cctl without versions (the running map becomes version 1, pinned now).
fn current_record(name: &str, link: &libbpf_rs::Link) -> Result<LoadedCc> {
    let mut rec = registry::list_loaded()?
        .into_iter()
        .find(|r| r.name == name)
        .ok_or_else(|| registry::not_loaded(name))?;
    if rec.algo == "?" {
        return Err(Error::NoVersion {
            name: name.into(),
            detail: format!(
                "has no metadata in {} (written by another tool?); `cctl unload {name}` and load it again",
                registry::META_DIR
            ),
        });
    }
    if rec.versions.is_empty() {
        let id = linked_map_id(link, name)?;
        let map = libbpf_rs::MapHandle::from_map_id(id)
            .map_err(|e| Error::bpf(format!("opening the struct_ops map {id} of {name}"), e))?;
        pin_version(&map, name, rec.version)?;
        rec.versions.push(Version {
            version: rec.version,
            map_id: id,
            algo: rec.algo.clone(),
            profile: rec.profile.clone(),
            params: rec.params.clone(),
            object: None,
            data_pin: None,
            loaded_at: rec.loaded_at,
        });
    }
    Ok(rec)
}

/// The id of the struct_ops map a struct_ops link points at.
pub fn linked_map_id(link: &libbpf_rs::Link, name: &str) -> Result<u32> {
    let info = link
        .info()
        .map_err(|e| Error::bpf(format!("reading the link of {name}"), e))?;
    match info.info {
        libbpf_rs::query::LinkTypeInfo::StructOps(s) => Ok(s.map_id),
        other => Err(Error::NotOurs {
            name: name.into(),
            detail: format!("is pinned as a link that is not a struct_ops link ({other:?})"),
        }),
    }
}

/// The id of the struct_ops map the pinned link of `name` points at now (the
/// version new connections get), as the kernel reports it.
///
/// Errors: [`Error::Bpf`] (not pinned, or not readable), [`Error::NotOurs`].
pub fn running_map_id(name: &str) -> Result<u32> {
    linked_map_id(&open_link(name)?, name)
}

fn pin_version(map: &libbpf_rs::MapHandle, name: &str, n: u32) -> Result<PathBuf> {
    let path = registry::version_pin(name, n);
    let mut map = libbpf_rs::MapHandle::try_from(map)
        .map_err(|e| Error::bpf(format!("duplicating the map fd of {name}"), e))?;
    map.pin(&path)
        .map_err(|e| Error::bpf(format!("pinning version {n} at {}", path.display()), e))?;
    Ok(path)
}

fn open_link(name: &str) -> Result<libbpf_rs::Link> {
    let pin = Path::new(registry::PIN_DIR).join(name);
    crate::security::check_pin(&pin, &format!("the link pin of {name}"))?;
    libbpf_rs::Link::open(&pin)
        .map_err(|e| Error::bpf(format!("opening the pinned link {}", pin.display()), e))
}

/// Points the struct_ops link at `map` (`BPF_LINK_UPDATE`); the kernel checks that
/// the map is a READY `tcp_congestion_ops` of the same name and swaps atomically.
fn update_link(link: &libbpf_rs::Link, map: &libbpf_rs::MapHandle, name: &str) -> Result<()> {
    // SAFETY: both descriptors are open and owned by `link` and `map`, which outlive
    // the call; a NULL opts pointer is allowed (no BPF_F_REPLACE check). The call
    // only reads its arguments.
    let ret = unsafe {
        libbpf_rs::libbpf_sys::bpf_link_update(
            link.as_fd().as_raw_fd(),
            map.as_fd().as_raw_fd(),
            std::ptr::null(),
        )
    };
    if ret < 0 {
        return Err(Error::io(
            format!("pointing the link of {name} at the new struct_ops map (BPF_LINK_UPDATE)"),
            Path::new(registry::PIN_DIR).join(name),
            std::io::Error::from_raw_os_error(-ret),
        ));
    }
    Ok(())
}

/// The record of `rec`'s running version. Errors: [`Error::NoVersion`] when the metadata
/// has no entry for it.
fn current_version(name: &str, rec: &LoadedCc) -> Result<Version> {
    rec.versions
        .iter()
        .find(|v| v.version == rec.version)
        .cloned()
        .ok_or_else(|| Error::NoVersion {
            name: name.to_string(),
            detail: format!("has no record of its current version v{}", rec.version),
        })
}

/// Loads a new version of a registered name and swaps it in atomically: new
/// connections get it at once, established ones keep the version they run.
/// `arg` is the registered name or the key of an algorithm loaded under its
/// default name.
///
/// Parameters start from the current version's values (or `opts.profile`'s) and
/// `opts.params` is validated as for `load`. With `opts.object`, that BPF object is
/// loaded instead (see [`UpgradeOptions::object`]).
///
/// Errors: [`Error::NotOurs`] (not loaded by cctl), [`Error::UnknownParam`],
/// [`Error::BadParamValue`], [`Error::BadParamCombination`], [`Error::BadObject`],
/// [`Error::Rejected`] (verifier, with its log), [`Error::NotPrivileged`],
/// [`Error::Bpf`], [`Error::Io`]. After any of them the running version is unchanged.
pub fn upgrade(arg: &str, opts: &UpgradeOptions) -> Result<Swap> {
    let name = registry::resolve_loaded(arg)?;
    kernel::require_privileges(&format!("upgrading {name}"))?;
    // Leftovers of crashed runs go with every change of state, best effort.
    let _ = registry::clean_leftovers();
    let _lock = registry::lock_name(&name)?;
    let link = open_link(&name)?;
    let mut rec = current_record(&name, &link)?;
    let from = current_version(&name, &rec)?;
    let n = rec.versions.iter().map(|v| v.version).max().unwrap_or(0) + 1;

    let (mut reg, mut to) = match &opts.object {
        Some(path) => {
            if !opts.params.is_empty() || opts.profile.is_some() {
                return Err(Error::BadParamCombination {
                    algo: "object".into(),
                    reason: "--param and --profile set tunables of cctl's algorithms; they \
                             cannot be combined with --object"
                        .into(),
                });
            }
            let bytes =
                std::fs::read(path).map_err(|e| Error::io("reading the BPF object", path, e))?;
            let reg = crate::object::load(&bytes, path, &name, &[])?;
            let version = Version {
                version: n,
                map_id: 0,
                algo: "object".into(),
                profile: None,
                params: BTreeMap::new(),
                object: Some(path.canonicalize().unwrap_or_else(|_| path.clone())),
                data_pin: None,
                loaded_at: registry::now_s(),
            };
            (reg, version)
        }
        None => {
            // The algorithm of the newest version that came from one (the current
            // one unless it was an object).
            let base = rec
                .versions
                .iter()
                .rev()
                .find(|v| v.version == rec.version && v.object.is_none())
                .or_else(|| rec.versions.iter().rev().find(|v| v.object.is_none()))
                .cloned()
                .unwrap_or_else(|| from.clone());
            let algorithm = catalogue::find(&rec.algo)?;
            let (profile, args) = match &opts.profile {
                Some(p) => (Some(p.clone()), opts.params.clone()),
                None => {
                    let mut args: Vec<String> = base
                        .params
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect();
                    args.extend(opts.params.iter().cloned());
                    (base.profile.clone(), args)
                }
            };
            let params = match &opts.profile {
                Some(p) => algorithm.resolve_params_with(Some(p), &args)?,
                None => algorithm.resolve_params(&args)?,
            };
            kernel::require_kfuncs(algorithm.key, &algorithm.kfuncs()?)?;
            let reg = algorithm.load(&name, &params)?;
            let version = Version {
                version: n,
                map_id: 0,
                algo: algorithm.key.into(),
                profile,
                params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                object: None,
                data_pin: None,
                loaded_at: registry::now_s(),
            };
            (reg, version)
        }
    };
    if reg.link.take().is_some() {
        // Dropping the new link unregisters the name again.
        return Err(Error::NoVersion {
            name: name.clone(),
            detail: "was no longer registered (its link was detached); nothing was changed: \
                     `cctl unload` it and load it again"
                .into(),
        });
    }
    to.map_id = registry::map_id(&reg.map, &name)?;
    let vpin = pin_version(&reg.map, &name, n)?;
    let remove_pins = |data: &Option<PathBuf>| {
        let _ = std::fs::remove_file(&vpin);
        if let Some(d) = data {
            let _ = std::fs::remove_file(d);
        }
    };
    to.data_pin = match registry::pin_data(&reg, &name, n) {
        Ok(p) => p,
        Err(e) => {
            remove_pins(&None);
            return Err(e);
        }
    };
    // The record names the new version before the link is switched (the commit): a
    // crash in between leaves a record whose current version the kernel does not run,
    // which every reader corrects from the link ([`LoadedCc::follow_kernel`]), and the
    // new version loaded for a later rollback or upgrade.
    let before = rec.clone();
    rec.version = n;
    if to.object.is_none() {
        rec.algo = to.algo.clone();
    }
    rec.profile = to.profile.clone();
    rec.params = to.params.clone();
    rec.versions.push(to.clone());
    if let Err(e) =
        registry::write_meta(&rec).and_then(|()| crate::faults::step("upgrade.after-version-pin"))
    {
        let _ = registry::write_meta(&before);
        remove_pins(&to.data_pin);
        return Err(e);
    }
    let outcome = match update_link(&link, &reg.map, &name) {
        Err(e) => Err((e, false)),
        Ok(()) => crate::faults::step("upgrade.after-link-update").map_err(|e| (e, true)),
    };
    if let Err((e, switched)) = outcome {
        // Back to the version that ran, in the kernel and in the record.
        if switched {
            if let Ok(old) =
                libbpf_rs::MapHandle::from_pinned_path(registry::version_pin(&name, from.version))
            {
                let _ = update_link(&link, &old, &name);
            }
        }
        let _ = registry::write_meta(&before);
        remove_pins(&to.data_pin);
        return Err(e);
    }
    Ok(Swap { name, from, to })
}

/// Swaps a registered name back to an earlier version that is still loaded:
/// `to`, or the highest version below the current one.
///
/// Errors: [`Error::NotOurs`] (not loaded by cctl), [`Error::NoVersion`] (no such
/// version, or none before the current one), [`Error::NotPrivileged`],
/// [`Error::Bpf`], [`Error::Io`]. After any of them the running version is unchanged.
pub fn rollback(arg: &str, to: Option<u32>) -> Result<Swap> {
    let name = registry::resolve_loaded(arg)?;
    kernel::require_privileges(&format!("rolling back {name}"))?;
    // Leftovers of crashed runs go with every change of state, best effort.
    let _ = registry::clean_leftovers();
    let _lock = registry::lock_name(&name)?;
    let link = open_link(&name)?;
    let mut rec = current_record(&name, &link)?;
    let listing = versions_summary(&rec);
    let from = current_version(&name, &rec)?;
    let target = match to {
        Some(n) if n == rec.version => {
            return Err(Error::NoVersion {
                name: name.clone(),
                detail: format!("already runs v{n}; loaded versions: {listing}"),
            })
        }
        Some(n) => rec
            .versions
            .iter()
            .find(|v| v.version == n)
            .cloned()
            .ok_or_else(|| Error::NoVersion {
                name: name.clone(),
                detail: format!("has no version v{n} loaded; loaded versions: {listing}"),
            })?,
        None => rec
            .versions
            .iter()
            .filter(|v| v.version < rec.version)
            .max_by_key(|v| v.version)
            .cloned()
            .ok_or_else(|| Error::NoVersion {
                name: name.clone(),
                detail: format!(
                    "has no version before v{} to roll back to; loaded versions: {listing}",
                    rec.version
                ),
            })?,
    };
    let pin = registry::version_pin(&name, target.version);
    crate::security::check_pin(&pin, &format!("v{}'s map pin of {name}", target.version))?;
    let map = libbpf_rs::MapHandle::from_pinned_path(&pin).map_err(|e| Error::NoVersion {
        name: name.clone(),
        detail: format!(
            "v{}'s struct_ops map is not pinned at {} any more ({e})",
            target.version,
            pin.display()
        ),
    })?;
    let id = registry::map_id(&map, &name)?;
    if id != target.map_id {
        return Err(Error::NoVersion {
            name: name.clone(),
            detail: format!(
                "v{}'s pin holds map {id}, not the recorded {}; `cctl unload {name}` and load again",
                target.version, target.map_id
            ),
        });
    }
    update_link(&link, &map, &name)?;
    rec.version = target.version;
    if target.object.is_none() {
        rec.algo = target.algo.clone();
    }
    rec.profile = target.profile.clone();
    rec.params = target.params.clone();
    if let Err(e) =
        crate::faults::step("rollback.after-link-update").and_then(|()| registry::write_meta(&rec))
    {
        if let Ok(old) =
            libbpf_rs::MapHandle::from_pinned_path(registry::version_pin(&name, from.version))
        {
            let _ = update_link(&link, &old, &name);
        }
        return Err(e);
    }
    Ok(Swap {
        name,
        from,
        to: target,
    })
}

fn versions_summary(rec: &LoadedCc) -> String {
    rec.versions
        .iter()
        .map(|v| {
            let cur = if v.version == rec.version {
                " (current)"
            } else {
                ""
            };
            format!("v{} map {}{cur}", v.version, v.map_id)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The registered name and version whose struct_ops map has id `map_id` (a
/// sample's `ca_map_id`), among cctl's records.
pub fn version_of_map(records: &[LoadedCc], map_id: u32) -> Option<(&str, u32)> {
    records.iter().find_map(|r| {
        r.versions
            .iter()
            .find(|v| v.map_id == map_id)
            .map(|v| (r.name.as_str(), v.version))
    })
}

/// Established sockets per (registered name, version).
pub type SocketCounts = BTreeMap<(String, u32), usize>;

/// Counts sockets per (name, version) of cctl's `records` from the `(cc, ca_map_id)`
/// pairs of a socket census; a socket whose map is no recorded version of its
/// congestion control's name is not counted.
pub fn socket_counts<'a>(
    records: &[LoadedCc],
    sockets: impl IntoIterator<Item = (&'a str, Option<u32>)>,
) -> SocketCounts {
    let mut counts = SocketCounts::new();
    for (cc, map_id) in sockets {
        if let Some((name, v)) = map_id.and_then(|id| version_of_map(records, id)) {
            if name == cc {
                *counts.entry((name.to_string(), v)).or_default() += 1;
            }
        }
    }
    counts
}

/// Maps a sample's `ca_map_id` to the version of one of cctl's names (`cctl trace`, `cctl
/// top`), re-reading the registry's records (at most once a second) when a map is unknown,
/// e.g. after an upgrade.
pub struct VersionCache {
    records: Vec<LoadedCc>,
    read_at: std::time::Instant,
}

impl VersionCache {
    /// A cache holding the records of the names loaded now (none if they cannot be read).
    pub fn new() -> Self {
        VersionCache {
            records: registry::list_loaded().unwrap_or_default(),
            read_at: std::time::Instant::now(),
        }
    }

    /// The version of `s`'s congestion control, when it is one of cctl's names.
    pub fn of(&mut self, s: &crate::sample::Sample) -> Option<u32> {
        self.loaded(s.cc, s.ca_map_id).map(|v| v.version)
    }

    /// The loaded version (its number, algorithm key and parameters) of congestion
    /// control `cc` implemented by struct_ops map `ca_map_id`, when it is one of cctl's.
    pub fn loaded(&mut self, cc: &str, ca_map_id: Option<u32>) -> Option<registry::Version> {
        let id = ca_map_id?;
        let find = |records: &[LoadedCc]| {
            records
                .iter()
                .filter(|r| r.name == cc)
                .find_map(|r| r.versions.iter().find(|v| v.map_id == id).cloned())
        };
        if let Some(v) = find(&self.records) {
            return Some(v);
        }
        if self.read_at.elapsed() >= std::time::Duration::from_secs(1) {
            self.records = registry::list_loaded().unwrap_or_default();
            self.read_at = std::time::Instant::now();
            return find(&self.records);
        }
        None
    }
}

impl Default for VersionCache {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verifier_log_is_cut_to_its_end_after_libbpfs_message() {
        let mut log = String::from("libbpf: loading object\nlibbpf: prog 'x_init': BPF program load failed: -EACCES\nlibbpf: prog 'x_init': -- BEGIN PROG LOAD LOG --\n");
        for i in 0..100 {
            log += &format!("{i}: (61) r1 = *(u32 *)(r1 +0)\n");
        }
        log += "access beyond struct sock at off 100000 size 4\n-- END PROG LOAD LOG --\nlibbpf: failed to load object\n";
        let tail = crate::algo::log_tail(&log);
        assert!(
            tail.starts_with("libbpf: prog 'x_init': BPF program load failed"),
            "{tail}"
        );
        assert!(tail.contains("access beyond struct sock"), "{tail}");
        assert!(!tail.contains("\n5: "), "{tail}");
        assert!(tail.lines().count() <= crate::algo::LOG_TAIL_LINES + 2);
    }

    #[test]
    fn version_of_map_finds_name_and_version() {
        let rec: LoadedCc = serde_json::from_value(serde_json::json!({
            "name": "bpf_htcp", "algo": "htcp", "params": {}, "loaded_at": 0, "kernel": "",
            "cctl_version": "", "owner_pid": null, "version": 2,
            "versions": [
                {"version": 1, "map_id": 10, "algo": "htcp", "params": {}, "loaded_at": 0},
                {"version": 2, "map_id": 12, "algo": "htcp", "params": {}, "loaded_at": 0}
            ]
        }))
        .unwrap();
        let recs = [rec];
        assert_eq!(version_of_map(&recs, 12), Some(("bpf_htcp", 2)));
        assert_eq!(version_of_map(&recs, 10), Some(("bpf_htcp", 1)));
        assert_eq!(version_of_map(&recs, 11), None);
        let counts = socket_counts(
            &recs,
            [
                ("bpf_htcp", Some(12)),
                ("bpf_htcp", Some(12)),
                ("bpf_htcp", Some(10)),
                ("cubic", None),
                ("other", Some(12)),
            ],
        );
        assert_eq!(counts.len(), 2);
        assert_eq!(counts[&("bpf_htcp".to_string(), 2)], 2);
        assert_eq!(counts[&("bpf_htcp".to_string(), 1)], 1);
    }

    #[test]
    fn metadata_without_versions_still_reads() {
        let rec: LoadedCc = serde_json::from_value(serde_json::json!({
            "name": "bpf_htcp", "algo": "htcp", "params": {"a": 1}, "loaded_at": 0,
            "kernel": "", "cctl_version": "", "owner_pid": null
        }))
        .unwrap();
        assert_eq!(rec.version, 1);
        assert!(rec.versions.is_empty());
    }
}
