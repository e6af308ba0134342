//! A BPF object that holds one `tcp_congestion_ops`, read through its own BTF: its
//! struct_ops map and the offset of the `name` member, its `.rodata` globals (offset,
//! size, initial value), its live tunables (the members of `.data`'s `cctl_live`,
//! spec §18.5) and the kernel functions (kfuncs) it calls; and loading it under a
//! registered name with chosen values of those tunables. The carried algorithms (objects
//! embedded in the binary) and `cctl upgrade --object FILE` load through here, so
//! nothing outside the object lists its globals or kfuncs a second time.

use std::collections::BTreeMap;
use std::path::Path;

use libbpf_rs::btf::types::{Array, DataSec, Func, MemberAttr, Struct, Var};
use libbpf_rs::btf::HasSize as _;
use libbpf_rs::{Btf, MapCore as _, ReferencesType as _};

use crate::algo::{self, Registered};
use crate::error::{Error, Result};

/// The name of the struct_ops type a congestion control must be.
pub const TCP_CA_TYPE: &str = "tcp_congestion_ops";

/// One `.rodata` global of an object (a `const volatile` tunable).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Global {
    /// Byte offset in the `.rodata` section.
    pub offset: usize,
    /// Size, bytes (1, 2, 4 or 8 for the integers cctl sets).
    pub size: usize,
    /// Value compiled into the object (the default the BPF file declares).
    pub initial: u64,
}

/// What an object's BTF and sections say about it.
#[derive(Debug, Clone)]
pub struct ObjectInfo {
    /// Its one `tcp_congestion_ops` struct_ops map.
    pub ops: StructOpsVar,
    /// Its `.rodata` globals by name (load-time tunables and `cctl_algo_id`).
    pub globals: BTreeMap<String, Global>,
    /// Its live tunables, if it has any: offsets are within one slot, `initial` is
    /// the compiled-in value (of slot 0).
    pub live: Option<LiveLayout>,
    /// Kernel functions it calls (extern functions of its BTF), sorted.
    pub kfuncs: Vec<String>,
}

/// Name of the `.data` global holding the two slots of live tunables (see
/// `CCTL_LIVE_PARAMS` in bpf/include/cc_common.bpf.h).
pub const LIVE_VAR: &str = "cctl_live";
/// Name of the `.data` global saying which slot is in force (0 or 1).
pub const LIVE_SLOT_VAR: &str = "cctl_live_slot";

/// Where an object keeps its live tunables (spec §18.5) in its `.data` map: two
/// slots of one struct, `cctl_live[2]`, and the index of the slot in force,
/// `cctl_live_slot`, both read through BTF (the object's own, or the kernel's copy of
/// it for a loaded version), so a binary never assumes another's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveLayout {
    /// The section holding them: `.data`, or `.rodata` in a program built with
    /// `-DCCTL_LIVE_CONST` (constants, the baseline of `cctl bench perf --parts live`).
    pub section: String,
    /// Byte offset of `cctl_live` in the section.
    pub base: usize,
    /// Size of one slot, bytes.
    pub slot_size: usize,
    /// Byte offset of `cctl_live_slot` (a `__u32`) in `.data`.
    pub slot_index: usize,
    /// The slot's members by name: offset within the slot, size, and (from the object
    /// file; 0 when read from the kernel) the compiled-in value.
    pub params: BTreeMap<String, Global>,
}

impl LiveLayout {
    /// Byte offset in `.data` of member `g` in slot `slot` (0 or 1).
    pub fn offset(&self, slot: usize, g: &Global) -> usize {
        self.base + slot * self.slot_size + g.offset
    }
}

/// Reads the live-tunable layout from a `.data` section's BTF (`sec`), if it declares
/// `cctl_live` (an array of two structs of integer members) and `cctl_live_slot`.
///
/// Errors (as text): a `cctl_live` of another shape.
pub fn live_layout(
    btf: &Btf<'_>,
    sec: &DataSec<'_>,
) -> std::result::Result<Option<LiveLayout>, String> {
    let mut live = None;
    let mut slot_index = None;
    for info in sec.iter() {
        let Some(var) = btf.type_by_id::<Var<'_>>(info.ty) else {
            continue;
        };
        match var
            .name()
            .map(|n| n.to_string_lossy().into_owned())
            .as_deref()
        {
            Some(LIVE_VAR) => live = Some((info.offset as usize, var)),
            Some(LIVE_SLOT_VAR) => slot_index = Some(info.offset as usize),
            _ => {}
        }
    }
    let Some((base, var)) = live else {
        return Ok(None);
    };
    let slot_index =
        slot_index.ok_or_else(|| format!("it has {LIVE_VAR} but no {LIVE_SLOT_VAR}"))?;
    let arr = Array::try_from(var.referenced_type().skip_mods_and_typedefs())
        .map_err(|_| format!("{LIVE_VAR} is not an array"))?;
    if arr.capacity() != 2 {
        return Err(format!("{LIVE_VAR} has {} slots, not 2", arr.capacity()));
    }
    let elem = arr.contained_type().skip_mods_and_typedefs();
    let st = Struct::try_from(elem).map_err(|_| format!("{LIVE_VAR}'s slots are not structs"))?;
    let slot_size = st.size();
    let mut params = BTreeMap::new();
    for m in st.iter() {
        let Some(name) = m.name.map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        let MemberAttr::Normal { offset } = m.attr else {
            return Err(format!("{LIVE_VAR}.{name} is a bit field"));
        };
        let size = btf
            .type_by_id::<libbpf_rs::btf::BtfType<'_>>(m.ty)
            .map(|t| t.skip_mods_and_typedefs())
            .and_then(|t| libbpf_rs::btf::types::Int::try_from(t).ok())
            .map(|i| usize::from(i.bits) / 8)
            .ok_or_else(|| format!("{LIVE_VAR}.{name} is not an integer"))?;
        params.insert(
            name,
            Global {
                offset: offset as usize / 8,
                size,
                initial: 0,
            },
        );
    }
    Ok(Some(LiveLayout {
        section: sec
            .name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        base,
        slot_size,
        slot_index,
        params,
    }))
}

/// One struct_ops variable of a BPF object: map name, struct type name, and the
/// byte offset of its `name` member (if the type has one).
#[derive(Debug, Clone, PartialEq)]
pub struct StructOpsVar {
    /// Map (variable) name.
    pub map: String,
    /// Name of its struct type.
    pub ty: String,
    /// Byte offset of the struct's `name` member, if it has one.
    pub name_offset: Option<usize>,
}

/// The struct_ops maps declared in an object's BTF (variables of its
/// `.struct_ops` / `.struct_ops.link` sections).
fn struct_ops_vars(btf: &Btf<'_>) -> Vec<StructOpsVar> {
    let mut out = Vec::new();
    for sec in btf.type_by_kind::<DataSec<'_>>() {
        let sec_name = sec.name().map(|n| n.to_string_lossy().into_owned());
        if !sec_name.is_some_and(|n| n.starts_with(".struct_ops")) {
            continue;
        }
        for info in sec.iter() {
            let Some(var) = btf.type_by_id::<Var<'_>>(info.ty) else {
                continue;
            };
            let map = var
                .name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let ty = var.referenced_type().skip_mods_and_typedefs();
            let ty_name = ty
                .name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "(anonymous)".into());
            let name_offset = Struct::try_from(ty).ok().and_then(|s| {
                s.iter()
                    .find(|m| m.name.is_some_and(|n| n == "name"))
                    .and_then(|m| match m.attr {
                        MemberAttr::Normal { offset } => Some(offset as usize / 8),
                        MemberAttr::BitField { .. } => None,
                    })
            });
            out.push(StructOpsVar {
                map,
                ty: ty_name,
                name_offset,
            });
        }
    }
    out
}

/// Checks that an object holds exactly one struct_ops map, a `tcp_congestion_ops`
/// with a `name` member, and returns it.
fn the_tcp_ca_var(path: &Path, vars: Vec<StructOpsVar>) -> Result<StructOpsVar> {
    let bad = |reason: String| Error::BadObject {
        path: path.into(),
        reason,
    };
    let expected = format!(
        "expected exactly one SEC(\".struct_ops.link\") variable of type struct {TCP_CA_TYPE}"
    );
    match vars.len() {
        0 => Err(bad(format!("it declares no struct_ops map; {expected}"))),
        1 => {
            let v = vars.into_iter().next().expect("one");
            if v.ty != TCP_CA_TYPE {
                return Err(bad(format!(
                    "its struct_ops map '{}' is a struct {}, not a struct {TCP_CA_TYPE}; {expected}",
                    v.map, v.ty
                )));
            }
            if v.name_offset.is_none() {
                return Err(bad(format!(
                    "its struct {TCP_CA_TYPE} has no 'name' member in the object's BTF"
                )));
            }
            Ok(v)
        }
        n => Err(bad(format!(
            "it declares {n} struct_ops maps ({}); {expected}",
            vars.iter()
                .map(|v| format!("'{}': struct {}", v.map, v.ty))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The BTF of an object's ELF bytes; `origin` names the object in errors.
fn object_btf<'a>(bytes: &'a [u8], origin: &Path) -> Result<Btf<'a>> {
    let (btf, log) = algo::with_libbpf_log(|| Btf::from_raw("object", bytes));
    btf.map_err(|e| Error::BadObject {
        path: origin.into(),
        reason: format!(
            "it is not a BPF ELF object with BTF ({e}: {})",
            log.trim().trim_start_matches("libbpf: ")
        ),
    })?
    .ok_or_else(|| Error::BadObject {
        path: origin.into(),
        reason: "it has no BTF; compile it with `clang -g -O2 -target bpf`".into(),
    })
}

/// The `.rodata` variables of `btf`: name -> (offset, size).
fn rodata_vars(btf: &Btf<'_>) -> BTreeMap<String, (usize, usize)> {
    let mut out = BTreeMap::new();
    for sec in btf.type_by_kind::<DataSec<'_>>() {
        if sec.name().is_none_or(|n| n != ".rodata") {
            continue;
        }
        for info in sec.iter() {
            if let Some(name) = btf
                .type_by_id::<Var<'_>>(info.ty)
                .and_then(|v| v.name().map(|n| n.to_string_lossy().into_owned()))
            {
                out.insert(name, (info.offset as usize, info.size));
            }
        }
    }
    out
}

/// Names of the kernel functions an object calls: its undefined global ELF symbols
/// that its BTF knows as functions (`__ksym` externs; libbpf rewrites their BTF
/// linkage at open, so the symbol table is what still says they are external).
fn extern_funcs(bytes: &[u8], btf: &Btf<'_>) -> Vec<String> {
    use object::{Object as _, ObjectSymbol as _};
    let Ok(elf) = object::File::parse(bytes) else {
        return Vec::new();
    };
    let mut v: Vec<String> = elf
        .symbols()
        .filter(|s| s.is_undefined() && s.is_global())
        .filter_map(|s| s.name().ok().map(str::to_string))
        .filter(|n| btf.type_by_name::<Func<'_>>(n).is_some())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Reads an unsigned little-/native-endian integer of `size` bytes at `offset`.
fn read_uint(data: &[u8], offset: usize, size: usize) -> Option<u64> {
    let b = data.get(offset..offset + size)?;
    let mut buf = [0u8; 8];
    buf[..size].copy_from_slice(b);
    Some(u64::from_ne_bytes(buf))
}

/// Opens `bytes` (no kernel involved) and tells its struct_ops map, `.rodata` globals
/// with their compiled-in values, and kfuncs.
///
/// Errors: [`Error::BadObject`] (no BTF, not exactly one `tcp_congestion_ops`).
pub fn inspect(bytes: &[u8], origin: &Path) -> Result<ObjectInfo> {
    let btf = object_btf(bytes, origin)?;
    let ops = the_tcp_ca_var(origin, struct_ops_vars(&btf))?;
    let vars = rodata_vars(&btf);
    let kfuncs = extern_funcs(bytes, &btf);
    let live = data_live_layout(&btf, origin)?;
    drop(btf);
    let open = open_object(bytes, origin)?;
    let live = live.map(|mut l| {
        let data: Vec<u8> = open
            .maps()
            .find(|m| m.name().to_string_lossy().ends_with(l.section.as_str()))
            .and_then(|m| m.initial_value().map(<[u8]>::to_vec))
            .unwrap_or_default();
        for g in l.params.values_mut() {
            g.initial = read_uint(&data, l.base + g.offset, g.size).unwrap_or(0);
        }
        l
    });
    let data: Vec<u8> = open
        .maps()
        .find(|m| m.name().to_string_lossy().ends_with(".rodata"))
        .and_then(|m| m.initial_value().map(<[u8]>::to_vec))
        .unwrap_or_default();
    let globals = vars
        .into_iter()
        .filter(|(_, (_, size))| matches!(size, 1 | 2 | 4 | 8))
        .filter_map(|(name, (offset, size))| {
            read_uint(&data, offset, size).map(|initial| {
                (
                    name,
                    Global {
                        offset,
                        size,
                        initial,
                    },
                )
            })
        })
        .collect();
    Ok(ObjectInfo {
        ops,
        globals,
        live,
        kfuncs,
    })
}

/// The live-tunable layout of an object file: in its `.data` section, or in
/// `.rodata` for a build with `-DCCTL_LIVE_CONST`.
fn data_live_layout(btf: &Btf<'_>, origin: &Path) -> Result<Option<LiveLayout>> {
    for name in [".data", ".rodata"] {
        for sec in btf.type_by_kind::<DataSec<'_>>() {
            if sec.name().is_some_and(|n| n == name) {
                let layout = live_layout(btf, &sec).map_err(|reason| Error::BadObject {
                    path: origin.into(),
                    reason,
                })?;
                if layout.is_some() {
                    return Ok(layout);
                }
            }
        }
    }
    Ok(None)
}

fn open_object(bytes: &[u8], origin: &Path) -> Result<libbpf_rs::OpenObject> {
    libbpf_rs::ObjectBuilder::default()
        .open_memory(bytes)
        .map_err(|e| Error::BadObject {
            path: origin.into(),
            reason: format!("libbpf cannot open it: {e}"),
        })
}

/// Loads `bytes` (a BPF object, `origin` names it in messages) as a version of `name`:
/// its one struct_ops map must be a `tcp_congestion_ops`; its `name` member is set to
/// `name` (the kernel only swaps implementations of one name) and it is made a
/// link-based struct_ops (`BPF_F_LINK`) if it was declared in plain `.struct_ops`. Each
/// of `globals` (name, value) is written into its `.rodata` global before the verifier
/// sees the program, so the verifier folds it as a constant.
///
/// Errors: [`Error::BadObject`] (no BTF, no such global, a global wider than its value
/// allows), [`Error::Rejected`] (the verifier's log), [`Error::Bpf`],
/// [`Error::NotPrivileged`].
pub fn load(
    bytes: &[u8],
    origin: &Path,
    name: &str,
    globals: &[(&str, u32)],
) -> Result<Registered> {
    let btf = object_btf(bytes, origin)?;
    let var = the_tcp_ca_var(origin, struct_ops_vars(&btf))?;
    let vars = rodata_vars(&btf);
    let live = data_live_layout(&btf, origin)?;
    drop(btf);
    let offset = var.name_offset.expect("checked");
    let bad = |reason: String| Error::BadObject {
        path: origin.into(),
        reason,
    };

    let mut open = open_object(bytes, origin)?;
    {
        let mut map = open
            .maps_mut()
            .find(|m| m.name().to_string_lossy() == var.map)
            .ok_or_else(|| bad(format!("libbpf found no map '{}' in it", var.map)))?;
        let flags = map.map_flags();
        let link_flag = libbpf_rs::libbpf_sys::BPF_F_LINK;
        if flags & link_flag == 0 {
            map.set_map_flags(flags | link_flag)
                .map_err(|e| Error::bpf(format!("making {} a struct_ops link map", var.map), e))?;
        }
        let data = map
            .initial_value_mut()
            .ok_or_else(|| bad(format!("its struct_ops map '{}' has no data", var.map)))?;
        let field = data.get_mut(offset..offset + 16).ok_or_else(|| {
            bad(format!(
                "the 'name' member of '{}' lies outside its data",
                var.map
            ))
        })?;
        field.fill(0);
        field[..name.len()].copy_from_slice(name.as_bytes());
    }
    // Each value goes to its .rodata global, or, for a live tunable, into both slots
    // of .data's cctl_live.
    let (live_values, rodata_values): (Vec<_>, Vec<_>) = globals.iter().partition(|(k, _)| {
        !vars.contains_key(*k) && live.as_ref().is_some_and(|l| l.params.contains_key(*k))
    });
    let check_fits = |key: &str, size: usize, value: u32| {
        if size > 8 || (size < 4 && u64::from(value) >= 1u64 << (8 * size)) {
            return Err(bad(format!(
                "its global '{key}' ({size} bytes) cannot hold {value}"
            )));
        }
        Ok(u64::from(value).to_ne_bytes())
    };
    if !rodata_values.is_empty() {
        let mut map = open
            .maps_mut()
            .find(|m| m.name().to_string_lossy().ends_with(".rodata"))
            .ok_or_else(|| bad("it has no .rodata section for its tunables".into()))?;
        let data = map
            .initial_value_mut()
            .ok_or_else(|| bad("its .rodata map has no data".into()))?;
        for &&(key, value) in &rodata_values {
            let &(off, size) = vars
                .get(key)
                .ok_or_else(|| bad(format!("it has no .rodata global or live tunable '{key}'")))?;
            let bytes = check_fits(key, size, value)?;
            data.get_mut(off..off + size)
                .ok_or_else(|| bad(format!("its global '{key}' lies outside .rodata")))?
                .copy_from_slice(&bytes[..size]);
        }
    }
    if let (Some(layout), false) = (&live, live_values.is_empty()) {
        let mut map = open
            .maps_mut()
            .find(|m| {
                m.name()
                    .to_string_lossy()
                    .ends_with(layout.section.as_str())
            })
            .ok_or_else(|| {
                bad(format!(
                    "it has no {} map for its live tunables",
                    layout.section
                ))
            })?;
        let data = map
            .initial_value_mut()
            .ok_or_else(|| bad(format!("its {} map has no data", layout.section)))?;
        for &&(key, value) in &live_values {
            let g = &layout.params[key];
            let bytes = check_fits(key, g.size, value)?;
            for slot in 0..2 {
                let off = layout.offset(slot, g);
                data.get_mut(off..off + g.size)
                    .ok_or_else(|| bad(format!("its live tunable '{key}' lies outside .data")))?
                    .copy_from_slice(&bytes[..g.size]);
            }
        }
    }
    let mut obj = algo::load_with_log(
        format!("loading {} as {name} (verifier)", origin.display()),
        || open.load(),
    )?;
    let data =
        match live {
            Some(l) if l.section == ".data" => {
                let map = obj
                    .maps()
                    .find(|m| m.name().to_string_lossy().ends_with(".data"))
                    .ok_or_else(|| bad("libbpf found no .data map in it".into()))?;
                Some(libbpf_rs::MapHandle::try_from(&map).map_err(|e| {
                    Error::bpf(format!("duplicating the .data map fd of {name}"), e)
                })?)
            }
            _ => None,
        };
    let mut map = obj
        .maps_mut()
        .find(|m| m.name().to_string_lossy() == var.map)
        .expect("the map opened above is loaded");
    let mut reg = algo::register(name, &mut map)?;
    reg.data = data;
    Ok(reg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn var(map: &str, ty: &str) -> StructOpsVar {
        StructOpsVar {
            map: map.into(),
            ty: ty.into(),
            name_offset: Some(8),
        }
    }

    #[test]
    fn an_object_must_hold_exactly_one_tcp_congestion_ops() {
        let p = Path::new("x.bpf.o");
        let e = the_tcp_ca_var(p, vec![]).unwrap_err().to_string();
        assert!(
            e.contains("no struct_ops map") && e.contains(TCP_CA_TYPE),
            "{e}"
        );
        let e = the_tcp_ca_var(p, vec![var("dummy", "bpf_dummy_ops")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("'dummy' is a struct bpf_dummy_ops, not a struct tcp_congestion_ops"),
            "{e}"
        );
        let e = the_tcp_ca_var(p, vec![var("a", TCP_CA_TYPE), var("b", TCP_CA_TYPE)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 struct_ops maps") && e.contains("'b'"), "{e}");
        assert_eq!(
            the_tcp_ca_var(p, vec![var("a", TCP_CA_TYPE)]).unwrap().map,
            "a"
        );
    }

    #[test]
    fn every_carried_object_is_read_from_its_btf() {
        let info = inspect(crate::skel::htcp::OBJECT, Path::new("bpf/algo/htcp.bpf.c")).unwrap();
        assert_eq!(info.ops.map, "htcp");
        assert_eq!(info.globals["ack_counting"].initial, 0);
        assert_eq!(info.globals["ack_counting"].size, 4);
        let live = info.live.expect("htcp has live tunables");
        assert_eq!(live.section, ".data");
        assert_eq!(live.params["delta_l_ms"].initial, 1000);
        assert!(
            info.kfuncs.contains(&"tcp_slow_start".to_string()),
            "{:?}",
            info.kfuncs
        );
    }
}
