//! BPF run-time statistics of cctl's own programs: the collector and the struct_ops
//! callbacks of every registered congestion control, with their run count and run time.
//!
//! The kernel counts `run_cnt` and `run_time_ns` per program only while run-time
//! statistics are on ([`StatsGuard`], the `BPF_ENABLE_STATS` command, Linux >= 5.8; or the
//! `kernel.bpf_stats_enabled` sysctl). The counters are cumulative over the program's
//! life: take two readings and use [`ProgStats::since`] for a rate.
//!
//! # Which program is which
//!
//! A congestion control's programs are found through the struct_ops map of each of its
//! loaded versions (the registry keeps their map ids, [`crate::registry::Version::map_id`]).
//! When a struct_ops map is registered, the kernel stores the id of the program behind each
//! function-pointer member in the map value that user space reads back
//! (kernel/bpf/bpf_struct_ops.c: "put prog_id to udata"; that is what `bpftool struct_ops
//! dump` shows). Reading that value and laying the member offsets of
//! `bpf_struct_ops_tcp_congestion_ops` from the kernel's BTF over it gives, exactly,
//! callback name -> program id for each version. The alternatives are weaker: program names
//! are only a per-file prefix convention (`htcp_cong_avoid`, and an object loaded with
//! `cctl upgrade --object` may use anything), and a program's `map_ids` list the maps it
//! uses, not the struct_ops map that calls it. A version whose map disappears while this
//! runs (unloaded meanwhile) is left out.
//!
//! The collector is the `tp_btf` program named `cctl_tcp_probe` (bpf/probe/trace.bpf.c); there is
//! one per running trace (`cctl trace`, `cctl top`, tests), each listed.

use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::OnceLock;

use libbpf_rs::btf::types::Struct;
use libbpf_rs::btf::{Btf, BtfKind, BtfType};
use libbpf_rs::query::ProgInfoIter;
use libbpf_rs::{MapCore, MapFlags, MapHandle, ProgramType};

use crate::error::{Error, Result};
use crate::kernel;
use crate::registry;

/// The sysctl that turns run-time statistics on for everyone (1) or leaves them to
/// `BPF_ENABLE_STATS` holders such as [`StatsGuard`] (0). It shows only its own setting:
/// a guard counts apart from it and never changes it.
pub const STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// Name of the collector's program (bpf/probe/trace.bpf.c).
pub const COLLECTOR_PROG: &str = "cctl_tcp_probe";

/// The `callback` of the collector's entries: the tracepoint it runs on.
pub const COLLECTOR_CALLBACK: &str = "tcp_probe";

/// BPF run-time statistics on for as long as this lives.
///
/// Holds the file descriptor `BPF_ENABLE_STATS(BPF_STATS_RUN_TIME)` returns; dropping it
/// closes it, and the kernel stops counting unless someone else still asks for statistics
/// (another holder, or `kernel.bpf_stats_enabled = 1`, which this leaves as it was).
/// Counting costs two clock reads per program run.
#[derive(Debug)]
pub struct StatsGuard {
    _fd: OwnedFd,
}

impl StatsGuard {
    /// Turns run-time statistics on until the guard is dropped.
    ///
    /// Errors: [`Error::NotPrivileged`] (needs CAP_SYS_ADMIN), [`Error::MissingFeature`]
    /// (kernel without `BPF_ENABLE_STATS`, before 5.8), [`Error::Io`] for any other failure
    /// of the command.
    pub fn enable() -> Result<StatsGuard> {
        const WHAT: &str = "enabling BPF run-time statistics";
        kernel::require_privileges(WHAT)?;
        // SAFETY: BPF_ENABLE_STATS takes only the statistics type; it returns a new file
        // descriptor we then own, or a negative errno.
        let fd = unsafe {
            libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
        };
        if fd < 0 {
            return Err(match -fd {
                libc::EPERM | libc::EACCES => Error::NotPrivileged {
                    action: WHAT.into(),
                },
                libc::EINVAL | libc::ENOSYS => Error::MissingFeature {
                    feature: "BPF_ENABLE_STATS (BPF run-time statistics)".into(),
                    hint: "it needs Linux 5.8 or later; `sysctl -w kernel.bpf_stats_enabled=1` \
                           works on older kernels"
                        .into(),
                },
                e => Error::io(WHAT, "-", std::io::Error::from_raw_os_error(e)),
            });
        }
        // SAFETY: fd is a fresh descriptor nobody else owns.
        Ok(StatsGuard {
            _fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }
}

/// Whether `kernel.bpf_stats_enabled` is set, i.e. run time is counted with or without a
/// [`StatsGuard`] (the kernel does not say whether some other process holds one).
///
/// Errors: [`Error::Io`] when the sysctl cannot be read.
pub fn sysctl_enabled() -> Result<bool> {
    std::fs::read_to_string(STATS_SYSCTL)
        .map(|s| s.trim() == "1")
        .map_err(|e| Error::io("reading", STATS_SYSCTL, e))
}

/// Run-time statistics of one loaded BPF program of cctl.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProgStats {
    /// Kernel program id (`bpftool prog show id N`).
    pub id: u32,
    /// Program name (at most 15 characters): the C function's name.
    pub name: String,
    /// The registered congestion control it implements; `None` for the collector.
    pub cc: Option<String>,
    /// Which loaded version of `cc` ([`crate::registry::Version::version`]); `None` for
    /// the collector.
    pub version: Option<u32>,
    /// That version's struct_ops map id (the samples' `ca_map_id`); `None` for the collector.
    pub map_id: Option<u32>,
    /// The `tcp_congestion_ops` member it fills (`cong_avoid`, `ssthresh`, ...), or
    /// [`COLLECTOR_CALLBACK`] for the collector.
    pub callback: String,
    /// Total time spent running it while statistics were on, ns.
    pub run_time_ns: u64,
    /// Runs counted while statistics were on.
    pub run_cnt: u64,
    /// Runs skipped because it was already running on that CPU (recursion), count.
    pub recursion_misses: u64,
}

impl ProgStats {
    /// Whether this is the collector's program.
    pub fn is_collector(&self) -> bool {
        self.cc.is_none()
    }

    /// Mean run time per call, ns; `None` before the first counted run.
    pub fn ns_per_call(&self) -> Option<f64> {
        (self.run_cnt > 0).then(|| self.run_time_ns as f64 / self.run_cnt as f64)
    }

    /// The runs between an `earlier` reading of the same program and this one (use
    /// [`ProgStats::ns_per_call`] on the result for the recent mean). Saturates at 0.
    pub fn since(&self, earlier: &ProgStats) -> ProgStats {
        ProgStats {
            run_time_ns: self.run_time_ns.saturating_sub(earlier.run_time_ns),
            run_cnt: self.run_cnt.saturating_sub(earlier.run_cnt),
            recursion_misses: self
                .recursion_misses
                .saturating_sub(earlier.recursion_misses),
            ..self.clone()
        }
    }
}

/// Byte offsets of the function-pointer members of `tcp_congestion_ops` inside the value of
/// a struct_ops map (`struct bpf_struct_ops_tcp_congestion_ops`), from the kernel's BTF:
/// (member name, offset). Parsed once per process.
fn callback_offsets() -> Result<&'static [(String, usize)]> {
    static OFFSETS: OnceLock<std::result::Result<Vec<(String, usize)>, String>> = OnceLock::new();
    OFFSETS
        .get_or_init(|| {
            let btf = Btf::from_vmlinux().map_err(|e| format!("reading the kernel's BTF: {e}"))?;
            let value: Struct<'_> = btf
                .type_by_name("bpf_struct_ops_tcp_congestion_ops")
                .ok_or("the kernel's BTF has no bpf_struct_ops_tcp_congestion_ops")?;
            let data = (0..value.len())
                .filter_map(|i| value.get(i))
                .find(|m| m.name.is_some_and(|n| n == "data"))
                .ok_or("bpf_struct_ops_tcp_congestion_ops has no `data` member")?;
            let ops: Struct<'_> = btf
                .type_by_id::<BtfType<'_>>(data.ty)
                .map(|t| t.skip_mods_and_typedefs())
                .and_then(|t| Struct::try_from(t).ok())
                .ok_or("the `data` of bpf_struct_ops_tcp_congestion_ops is not a struct")?;
            let base = bit_offset(data.attr) / 8;
            let mut out = Vec::new();
            for m in (0..ops.len()).filter_map(|i| ops.get(i)) {
                let Some(name) = m.name else { continue };
                let Some(ty) = btf.type_by_id::<BtfType<'_>>(m.ty) else {
                    continue;
                };
                let ty = ty.skip_mods_and_typedefs();
                let is_fn_ptr = ty.kind() == BtfKind::Ptr
                    && ty
                        .next_type()
                        .is_some_and(|t| t.skip_mods_and_typedefs().kind() == BtfKind::FuncProto);
                if is_fn_ptr {
                    out.push((
                        name.to_string_lossy().into_owned(),
                        base + bit_offset(m.attr) / 8,
                    ));
                }
            }
            if out.is_empty() {
                return Err(
                    "tcp_congestion_ops has no function-pointer member in the kernel's BTF".into(),
                );
            }
            Ok(out)
        })
        .as_deref()
        .map_err(|e| Error::MissingFeature {
            feature: "the BTF of tcp_congestion_ops struct_ops maps".into(),
            hint: e.clone(),
        })
}

fn bit_offset(attr: libbpf_rs::btf::types::MemberAttr) -> usize {
    match attr {
        libbpf_rs::btf::types::MemberAttr::Normal { offset } => offset as usize,
        libbpf_rs::btf::types::MemberAttr::BitField { offset, .. } => offset as usize,
    }
}

/// (callback, program id) of every filled member of the struct_ops map `map_id`.
fn struct_ops_progs(map_id: u32, offsets: &[(String, usize)]) -> Result<Vec<(String, u32)>> {
    let ctx = || format!("reading the struct_ops map {map_id}");
    let map = MapHandle::from_map_id(map_id).map_err(|e| Error::bpf(ctx(), e))?;
    let value = map
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| Error::bpf(ctx(), e))?
        .unwrap_or_default();
    Ok(decode_value(&value, offsets))
}

/// The program ids the kernel wrote into a struct_ops map value (as `unsigned long`s at the
/// function-pointer members); members without a program (0) are left out.
fn decode_value(value: &[u8], offsets: &[(String, usize)]) -> Vec<(String, u32)> {
    const W: usize = std::mem::size_of::<libc::c_ulong>();
    offsets
        .iter()
        .filter_map(|(name, off)| {
            let raw = value.get(*off..off + W)?;
            let id = libc::c_ulong::from_ne_bytes(raw.try_into().ok()?);
            (id != 0).then(|| (name.clone(), id as u32))
        })
        .collect()
}

/// Every loaded BPF program of cctl with its run-time statistics: the collector's (one per
/// running trace) first, then the struct_ops callbacks of each registered congestion
/// control ([`registry::list_loaded`]), every loaded version, by name, version and
/// callback. The counters stay 0 unless statistics are on ([`StatsGuard`]).
///
/// Errors: [`Error::NotPrivileged`], [`Error::MissingFeature`] (no usable kernel BTF),
/// [`Error::Io`] (registry).
pub fn cctl_programs() -> Result<Vec<ProgStats>> {
    kernel::require_privileges("reading BPF program statistics")?;
    let loaded = registry::list_loaded()?;
    let mut wanted: HashMap<u32, Vec<(String, u32, u32, String)>> = HashMap::new();
    if !loaded.is_empty() {
        let offsets = callback_offsets()?;
        for cc in &loaded {
            for v in &cc.versions {
                // A version unloaded meanwhile has no map any more: nothing to show.
                let Ok(progs) = struct_ops_progs(v.map_id, offsets) else {
                    continue;
                };
                for (callback, id) in progs {
                    wanted.entry(id).or_default().push((
                        cc.name.clone(),
                        v.version,
                        v.map_id,
                        callback,
                    ));
                }
            }
        }
    }
    let mut out = Vec::new();
    for info in ProgInfoIter::default() {
        let name = info.name.to_string_lossy().into_owned();
        let base = ProgStats {
            id: info.id,
            name,
            cc: None,
            version: None,
            map_id: None,
            callback: COLLECTOR_CALLBACK.into(),
            run_time_ns: info.run_time_ns,
            run_cnt: info.run_cnt,
            recursion_misses: info.recursion_misses,
        };
        if let Some(uses) = wanted.get(&info.id) {
            for (cc, version, map_id, callback) in uses {
                out.push(ProgStats {
                    cc: Some(cc.clone()),
                    version: Some(*version),
                    map_id: Some(*map_id),
                    callback: callback.clone(),
                    ..base.clone()
                });
            }
        } else if info.ty == ProgramType::Tracing && base.name == COLLECTOR_PROG {
            out.push(base);
        }
    }
    out.sort_by(|a, b| {
        (a.cc.is_some(), &a.cc, a.version, &a.callback, a.id).cmp(&(
            b.cc.is_some(),
            &b.cc,
            b.version,
            &b.callback,
            b.id,
        ))
    });
    Ok(out)
}

/// The callbacks of one struct_ops map (`map_id`, registered as `cc`) with their
/// run-time statistics, whether or not cctl's registry knows it (e.g. a program
/// `cctl bench perf` registered for one measurement).
///
/// Errors: [`Error::NotPrivileged`], [`Error::MissingFeature`], [`Error::Bpf`].
pub fn map_programs(cc: &str, map_id: u32) -> Result<Vec<ProgStats>> {
    kernel::require_privileges("reading BPF program statistics")?;
    let progs = struct_ops_progs(map_id, callback_offsets()?)?;
    Ok(ProgInfoIter::default()
        .filter_map(|info| {
            let (callback, _) = progs.iter().find(|(_, id)| *id == info.id)?;
            Some(ProgStats {
                id: info.id,
                name: info.name.to_string_lossy().into_owned(),
                cc: Some(cc.into()),
                version: None,
                map_id: Some(map_id),
                callback: callback.clone(),
                run_time_ns: info.run_time_ns,
                run_cnt: info.run_cnt,
                recursion_misses: info.recursion_misses,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(run_cnt: u64, run_time_ns: u64) -> ProgStats {
        ProgStats {
            id: 7,
            name: "vegas_cong_avo".into(),
            cc: Some("bpf_vegas".into()),
            version: Some(1),
            map_id: Some(42),
            callback: "cong_avoid".into(),
            run_time_ns,
            run_cnt,
            recursion_misses: 0,
        }
    }

    #[test]
    fn ns_per_call_is_the_mean_and_none_before_the_first_run() {
        assert_eq!(prog(0, 0).ns_per_call(), None);
        assert_eq!(prog(4, 1000).ns_per_call(), Some(250.0));
    }

    #[test]
    fn since_gives_the_runs_between_two_readings() {
        let d = prog(10, 5000).since(&prog(6, 1000));
        assert_eq!((d.run_cnt, d.run_time_ns), (4, 4000));
        assert_eq!(d.ns_per_call(), Some(1000.0));
        assert_eq!(prog(1, 1).since(&prog(6, 1000)).run_cnt, 0);
    }

    #[test]
    fn a_struct_ops_value_decodes_into_callbacks_and_program_ids() {
        let offsets = vec![
            ("ssthresh".to_string(), 8),
            ("cong_avoid".to_string(), 16),
            ("undo_cwnd".to_string(), 24),
            ("beyond_the_end".to_string(), 64),
        ];
        let mut value = vec![0u8; 32];
        value[8..16].copy_from_slice(&(11 as libc::c_ulong).to_ne_bytes());
        value[16..24].copy_from_slice(&(12 as libc::c_ulong).to_ne_bytes());
        assert_eq!(
            decode_value(&value, &offsets),
            vec![("ssthresh".to_string(), 11), ("cong_avoid".to_string(), 12)]
        );
    }

    #[test]
    fn the_kernel_btf_lays_out_the_callbacks_of_tcp_congestion_ops() {
        let offsets = callback_offsets().expect("the host kernel has BTF");
        let names: Vec<&str> = offsets.iter().map(|(n, _)| n.as_str()).collect();
        for cb in ["ssthresh", "cong_avoid", "init", "undo_cwnd", "pkts_acked"] {
            assert!(names.contains(&cb), "{cb} missing from {names:?}");
        }
        assert!(
            !names.contains(&"name") && !names.contains(&"owner"),
            "{names:?}"
        );
        let mut offs: Vec<usize> = offsets.iter().map(|(_, o)| *o).collect();
        offs.dedup();
        assert_eq!(offs.len(), offsets.len(), "two callbacks at one offset");
        assert!(offs.iter().all(|o| o % 8 == 0), "{offsets:?}");
    }
}
