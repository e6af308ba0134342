//! Live tunables (spec §18.5): changing an algorithm's bounds, gains and thresholds
//! while it is registered, without a new version (`cctl set NAME KEY=VALUE...`).
//!
//! A program with live tunables keeps them in its `.data` map as two slots of one
//! struct, `cctl_live[2]`, and the index of the slot in force, `cctl_live_slot`
//! (`CCTL_LIVE_PARAMS` in bpf/include/cc_common.bpf.h). Every version's `.data` map is pinned
//! beside its struct_ops map ([`crate::registry::data_pin_path`]) and its path
//! recorded in `/run/cctl/<name>.json`. A change:
//!
//! 1. is checked as `cctl load` checks parameters (key, range, forbidden
//!    combinations, with the version's other values) and refused for a load-time key;
//! 2. reads where the slots are from the BTF the kernel holds for that version (not
//!    from this binary's object: an older cctl or an `--object` upgrade may lay
//!    `.data` out differently);
//! 3. copies the slot in force into the other slot of the mmapped map, writes the new
//!    values there, then flips the index: a callback reads the index once and takes
//!    every value from one slot, so related keys change together or not at all;
//! 4. waits for an RCU grace period (`membarrier(MEMBARRIER_CMD_GLOBAL)`), after which
//!    no callback still reads the old slot, so the next change may write it. One wait
//!    covers every version a `set` changed (each map is written once per set), so old
//!    versions cost a `set` a slot copy each, not a grace period each (21 loaded versions:
//!    3.9 sets/s with a wait per version, see `make bench-set`).
//!
//! Changes of one name are serialized by the name's lock (shared with `cctl upgrade`).

use std::collections::BTreeMap;
use std::os::fd::AsFd as _;
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicU32, Ordering};

use libbpf_rs::btf::types::DataSec;
use libbpf_rs::{Btf, MapCore as _};

use crate::catalogue::{self, Algorithm};
use crate::error::{Error, Result};
use crate::object::{self, LiveLayout};
use crate::registry::{self, LoadedCc, Version};

/// What one `cctl set` did to one loaded version.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct VersionChange {
    /// Version number ([`Version::version`]).
    pub version: u32,
    /// Whether it is the version new connections get.
    pub current: bool,
    /// The keys written, with (old, new) values; empty when skipped.
    pub changed: BTreeMap<String, (u32, u32)>,
    /// Why it was not written (it has none of the keys, or was loaded from an object).
    pub skipped: Option<String>,
}

/// The result of [`set`]: the registered name and what happened to each version.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SetReport {
    /// The registered name.
    pub name: String,
    /// One entry per loaded version, oldest first.
    pub versions: Vec<VersionChange>,
}

/// An opened `.data` map of a loaded version with its live-tunable layout (read from
/// the kernel's copy of the program's BTF).
pub(crate) struct LiveMap {
    pub(crate) map: libbpf_rs::MapHandle,
    pub(crate) layout: LiveLayout,
    pub(crate) value_size: usize,
}

/// Opens the pinned `.data` map of `v` (a version of `name`) and reads its layout.
pub(crate) fn open_live(name: &str, v: &Version) -> Result<Option<LiveMap>> {
    let Some(pin) = &v.data_pin else {
        return Ok(None);
    };
    // The record says where to write; only a pin of this name's version directory is
    // taken (a record edited to point elsewhere is refused, not followed).
    if pin.parent() != Some(registry::versions_dir(name).as_path()) {
        return Err(Error::NoVersion {
            name: name.into(),
            detail: format!(
                "version {}: its record points its live tunables at {}, outside {}; refusing it",
                v.version,
                pin.display(),
                registry::versions_dir(name).display()
            ),
        });
    }
    crate::security::check_pin(pin, &format!("the live tunables' pin of {name}"))?;
    let map = libbpf_rs::MapHandle::from_pinned_path(pin).map_err(|e| Error::NoVersion {
        name: name.into(),
        detail: format!(
            "version {}: its live tunables' pin {} cannot be opened ({e}); was it removed by hand?",
            v.version,
            pin.display()
        ),
    })?;
    let info = map
        .info()
        .map_err(|e| Error::bpf(format!("reading the .data map of {name}"), e))?;
    let btf = map_btf(info.info.btf_id).map_err(|e| {
        Error::bpf(
            format!("reading the BTF of {name} version {}", v.version),
            e,
        )
    })?;
    let sec = btf
        .type_by_id::<DataSec<'_>>(info.info.btf_value_type_id.into())
        .ok_or_else(|| Error::NoVersion {
            name: name.into(),
            detail: format!(
                "version {}: the pinned map {} is not a .data section",
                v.version,
                pin.display()
            ),
        })?;
    let layout = object::live_layout(&btf, &sec).map_err(|reason| Error::BadObject {
        path: pin.clone(),
        reason,
    })?;
    Ok(layout.map(|layout| LiveMap {
        value_size: info.info.value_size as usize,
        map,
        layout,
    }))
}

/// The BTF the kernel holds under `btf_id` (a program object's BTF, shared by its
/// programs and maps), through a program that carries it.
fn map_btf(btf_id: u32) -> libbpf_rs::Result<Btf<'static>> {
    let prog = libbpf_rs::query::ProgInfoIter::default()
        .find(|p| p.btf_id == btf_id)
        .ok_or_else(|| {
            libbpf_rs::Error::from(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no loaded program carries BTF {btf_id}"),
            ))
        })?;
    Btf::from_prog_id(prog.id)
}

fn read_u32(data: &[u8], off: usize, size: usize) -> u32 {
    let mut b = [0u8; 8];
    b[..size].copy_from_slice(&data[off..off + size]);
    u64::from_ne_bytes(b) as u32
}

impl LiveMap {
    /// The values of the slot in force.
    fn values(&self) -> Result<BTreeMap<String, u32>> {
        let data = self
            .map
            .lookup(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
            .map_err(|e| Error::bpf("reading live tunables", e))?
            .unwrap_or_default();
        if data.len() < self.value_size {
            return Ok(BTreeMap::new());
        }
        let slot = (read_u32(&data, self.layout.slot_index, 4) & 1) as usize;
        Ok(self
            .layout
            .params
            .iter()
            .map(|(k, g)| {
                (
                    k.clone(),
                    read_u32(&data, self.layout.offset(slot, g), g.size),
                )
            })
            .collect())
    }

    /// Writes `values` into the slot not in force (a copy of the one in force) and flips
    /// the index. The caller waits for a grace period ([`grace_period`]) before this map is
    /// written again, so that no callback can still read the old slot.
    fn write(&self, values: &BTreeMap<String, u32>) -> Result<()> {
        let file = std::fs::File::from(
            self.map
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| Error::io("duplicating the .data map fd", PathBuf::new(), e))?,
        );
        // SAFETY: the map is an mmap-able array (libbpf creates global-data maps with
        // BPF_F_MMAPABLE) of `value_size` bytes; BPF programs write nothing in the
        // live slots, so the only concurrent accesses are their reads, which the slot
        // protocol below keeps off the bytes written here.
        let mut mem = unsafe {
            memmap2::MmapOptions::new()
                .len(self.value_size)
                .map_mut(&file)
                .map_err(|e| Error::io("mmapping the .data map", PathBuf::new(), e))?
        };
        let l = &self.layout;
        // SAFETY: slot_index is a 4-byte aligned __u32 inside the mapping (from BTF).
        let index = unsafe { &*(mem.as_mut_ptr().add(l.slot_index) as *const AtomicU32) };
        let cur = (index.load(Ordering::Acquire) & 1) as usize;
        let next = 1 - cur;
        let (src, dst) = (l.base + cur * l.slot_size, l.base + next * l.slot_size);
        mem.copy_within(src..src + l.slot_size, dst);
        for (k, v) in values {
            let g = &l.params[k];
            let off = l.offset(next, g);
            mem[off..off + g.size].copy_from_slice(&u64::from(*v).to_ne_bytes()[..g.size]);
        }
        fence(Ordering::SeqCst);
        crate::faults::step("set.after-slot-write")?;
        index.store(next as u32, Ordering::Release);
        drop(mem);
        Ok(())
    }
}

/// Waits until every BPF callback that may have read the old slot has returned: BPF
/// programs run inside an RCU read-side section, and `membarrier(GLOBAL)` returns
/// after an RCU grace period. Where the kernel refuses it (nohz_full CPUs), waits
/// 100 ms instead, far longer than any congestion-control callback runs.
fn grace_period() {
    const MEMBARRIER_CMD_GLOBAL: libc::c_long = 1;
    // SAFETY: membarrier takes (cmd, flags, cpu_id) and touches no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) };
    if r != 0 {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The live values in force of version `v` of `name`, read from the kernel; empty
/// for a version without live tunables.
///
/// Errors: [`Error::NoVersion`] (its pin is gone), [`Error::Bpf`].
pub fn values(name: &str, v: &Version) -> Result<BTreeMap<String, u32>> {
    match open_live(name, v)? {
        Some(m) => m.values(),
        None => Ok(BTreeMap::new()),
    }
}

/// Replaces the recorded values of live tunables in `rec` (every version, and the
/// record's own `params` from the current version) with the values in force in the
/// kernel, so that what is shown is what runs. A version whose map cannot be read
/// keeps its recorded values.
pub fn refresh(rec: &mut LoadedCc) {
    let name = rec.name.clone();
    for v in &mut rec.versions {
        if let Ok(vals) = values(&name, v) {
            v.params.extend(vals);
        }
    }
    if let Some(cur) = rec.versions.iter().find(|v| v.version == rec.version) {
        let vals: Vec<(String, u32)> = cur
            .params
            .iter()
            .filter(|(k, _)| rec.params.contains_key(*k))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        rec.params.extend(vals);
    }
}

/// The keys of `algorithm` that may change live, for messages.
fn live_keys(a: &Algorithm) -> String {
    let keys: Vec<&str> = a.params.iter().filter(|p| p.live).map(|p| p.key).collect();
    if keys.is_empty() {
        format!("{} has no live parameters", a.key)
    } else {
        format!("live parameters of {}: {}", a.key, keys.join(", "))
    }
}

/// Parses `key=value` assignments (syntax only; values are checked per version).
fn parse_assignments(algo: &str, assignments: &[String]) -> Result<Vec<(String, String)>> {
    if assignments.is_empty() {
        return Err(Error::BadParamValue {
            algo: algo.into(),
            key: String::new(),
            reason: "no assignment given".into(),
            expected: "at least one key=value".into(),
        });
    }
    assignments
        .iter()
        .map(|a| {
            a.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| Error::BadParamValue {
                    algo: algo.into(),
                    key: a.clone(),
                    reason: "missing '='".into(),
                    expected: "key=value".into(),
                })
        })
        .collect()
}

/// Checks `assignments` against `algorithm` and a version's values: every key known
/// and live, every value in range, no forbidden combination with the version's other
/// values. Returns the full resolved values.
///
/// Errors: [`Error::UnknownParam`], [`Error::NotLive`], [`Error::BadParamValue`],
/// [`Error::BadParamCombination`].
pub fn check(
    algorithm: &Algorithm,
    current: &BTreeMap<String, u32>,
    assignments: &[(String, String)],
) -> Result<catalogue::Params> {
    for (k, _) in assignments {
        let spec = algorithm
            .params
            .iter()
            .find(|p| p.key == k)
            .ok_or_else(|| Error::UnknownParam {
                algo: algorithm.key.into(),
                key: k.clone(),
                valid: algorithm.params_help(),
            })?;
        if !spec.live {
            return Err(Error::NotLive {
                algo: algorithm.key.into(),
                key: k.clone(),
                live: live_keys(algorithm),
            });
        }
    }
    let mut args: Vec<String> = current
        .iter()
        .filter(|(k, _)| algorithm.params.iter().any(|p| p.key == k.as_str()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    args.extend(assignments.iter().map(|(k, v)| format!("{k}={v}")));
    algorithm.resolve_params(&args)
}

/// Sets live tunables of the congestion control `arg` (registered name, or key of an
/// algorithm whose default name cctl loaded) in every loaded version that has them;
/// established and new flows see the values at their next ACK. Everything is checked
/// for every version before anything is written; the record in `/run/cctl` is
/// updated after.
///
/// Errors: [`Error::NotOurs`] (not loaded by cctl), [`Error::UnknownParam`],
/// [`Error::NotLive`] (a load-time key: `cctl upgrade` changes those),
/// [`Error::BadParamValue`], [`Error::BadParamCombination`], [`Error::NoVersion`] (no
/// loaded version has the keys), [`Error::Untrusted`] (/run/cctl writable by others),
/// [`Error::NotPrivileged`], [`Error::Bpf`], [`Error::Io`].
pub fn set(arg: &str, assignments: &[String]) -> Result<SetReport> {
    let name = registry::resolve_loaded(arg)?;
    crate::kernel::require_privileges(&format!("setting live tunables of {name}"))?;
    registry::check_trusted_state()?;
    let _lock = registry::lock_name(&name)?;
    let mut rec: LoadedCc = registry::list_loaded()?
        .into_iter()
        .find(|r| r.name == name)
        .ok_or_else(|| registry::not_loaded(&name))?;
    let assigned = parse_assignments(&rec.algo, assignments)?;
    let keys: Vec<&str> = assigned.iter().map(|(k, _)| k.as_str()).collect();

    // Check everything first.
    let mut plan = Vec::new();
    let mut report = Vec::new();
    for v in &rec.versions {
        let current = v.version == rec.version;
        let skip = |why: String| VersionChange {
            version: v.version,
            current,
            changed: BTreeMap::new(),
            skipped: Some(why),
        };
        if v.object.is_some() {
            report.push(skip(
                "loaded from an object file: cctl knows no ranges for its tunables".into(),
            ));
            continue;
        }
        let algorithm = catalogue::find(&v.algo)?;
        let resolved = check(algorithm, &v.params, &assigned)?;
        let Some(live) = open_live(&name, v)? else {
            report.push(skip(
                "its program has no live tunables (loaded by an older cctl)".into(),
            ));
            continue;
        };
        let missing: Vec<&str> = keys
            .iter()
            .copied()
            .filter(|k| !live.layout.params.contains_key(*k))
            .collect();
        if !missing.is_empty() {
            report.push(skip(format!(
                "its program has no live {}",
                missing.join(", ")
            )));
            continue;
        }
        let before = live.values()?;
        let new: BTreeMap<String, u32> =
            keys.iter().map(|k| (k.to_string(), resolved[*k])).collect();
        let changed = new
            .iter()
            .map(|(k, v)| (k.clone(), (before.get(k).copied().unwrap_or(0), *v)))
            .collect();
        plan.push((v.version, live, new));
        report.push(VersionChange {
            version: v.version,
            current,
            changed,
            skipped: None,
        });
    }
    if plan.is_empty() {
        return Err(Error::NoVersion {
            name: name.clone(),
            detail: format!(
                "has no loaded version with live {}: {}",
                keys.join(", "),
                report
                    .iter()
                    .map(|r| format!(
                        "version {}: {}",
                        r.version,
                        r.skipped.as_deref().unwrap_or("")
                    ))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
    }

    // Then write, every version, and wait once: until the grace period has passed no
    // callback may still read a slot written before the flip (the next set, which waits for
    // this one's lock, writes those slots).
    let written = plan.iter().try_for_each(|(n, live, new)| {
        live.write(new)?;
        if let Some(v) = rec.versions.iter_mut().find(|v| v.version == *n) {
            v.params.extend(new.iter().map(|(k, v)| (k.clone(), *v)));
        }
        if *n == rec.version {
            rec.params.extend(new.iter().map(|(k, v)| (k.clone(), *v)));
        }
        Ok(())
    });
    grace_period();
    written?;
    crate::faults::step("set.after-flip")?;
    registry::write_meta(&rec)?;
    Ok(SetReport {
        name,
        versions: report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assigned(kv: &[(&str, &str)]) -> Vec<(String, String)> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_live_change_is_checked_as_load_checks_it() {
        let htcp = catalogue::find("htcp").unwrap();
        let cur: BTreeMap<String, u32> = htcp
            .resolve_params(&[])
            .unwrap()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let v = check(
            htcp,
            &cur,
            &assigned(&[("beta_min_pct", "60"), ("beta_max_pct", "70")]),
        )
        .unwrap();
        assert_eq!((v["beta_min_pct"], v["beta_max_pct"]), (60, 70));
        let e = check(htcp, &cur, &assigned(&[("beta_max_pct", "101")])).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        // Valid alone, forbidden with the running beta_max_pct = 80.
        let e = check(htcp, &cur, &assigned(&[("beta_min_pct", "90")])).unwrap_err();
        assert!(e.to_string().contains("must not exceed"), "{e}");
        let e = check(htcp, &cur, &assigned(&[("ack_counting", "1")])).unwrap_err();
        let msg = e.to_string();
        assert!(
            matches!(e, Error::NotLive { .. })
                && msg.contains("beta_min_pct")
                && msg.contains("upgrade"),
            "{msg}"
        );
        let e = check(htcp, &cur, &assigned(&[("nosuch", "1")])).unwrap_err();
        assert!(matches!(e, Error::UnknownParam { .. }), "{e}");
    }

    #[test]
    fn assignments_need_an_equals_sign() {
        let e = parse_assignments("htcp", &["beta_min_pct".into()]).unwrap_err();
        assert!(e.to_string().contains("missing '='"), "{e}");
        assert!(parse_assignments("htcp", &[]).is_err());
    }

    #[test]
    fn the_live_layout_of_a_carried_object_comes_from_its_btf() {
        let htcp = catalogue::find("htcp").unwrap();
        let info = htcp.object_info().unwrap();
        let l = info.live.expect("htcp has live tunables");
        assert_eq!(l.params["beta_min_pct"].initial, 50);
        assert_eq!(l.params["beta_max_pct"].size, 4);
        assert!(l.slot_size >= 4 * l.params.len());
        // The two slots and the index do not overlap.
        assert!(l.slot_index >= l.base + 2 * l.slot_size || l.slot_index + 4 <= l.base);
    }
}
