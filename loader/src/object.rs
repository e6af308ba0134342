//! A BPF object that holds one `tcp_congestion_ops`, read through its own BTF: its
//! struct_ops map and the offset of the `name` member, its `.rodata` globals (offset,
//! size, initial value) and the kernel functions (kfuncs) it calls; and loading it
//! under a registered name with chosen globals. The carried algorithms (objects
//! embedded in the binary) and `cctl upgrade --object FILE` load through here, so
//! nothing outside the object lists its globals or kfuncs a second time.

use std::collections::BTreeMap;
use std::path::Path;

use libbpf_rs::btf::types::{DataSec, Func, MemberAttr, Struct, Var};
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
    /// Its `.rodata` globals by name.
    pub globals: BTreeMap<String, Global>,
    /// Kernel functions it calls (extern functions of its BTF), sorted.
    pub kfuncs: Vec<String>,
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
    drop(btf);
    let open = open_object(bytes, origin)?;
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
        kfuncs,
    })
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
    if !globals.is_empty() {
        let mut map = open
            .maps_mut()
            .find(|m| m.name().to_string_lossy().ends_with(".rodata"))
            .ok_or_else(|| bad("it has no .rodata section for its tunables".into()))?;
        let data = map
            .initial_value_mut()
            .ok_or_else(|| bad("its .rodata map has no data".into()))?;
        for (key, value) in globals {
            let &(off, size) = vars
                .get(*key)
                .ok_or_else(|| bad(format!("it has no .rodata global '{key}'")))?;
            let bytes = u64::from(*value).to_ne_bytes();
            if size > 8 || (size < 4 && u64::from(*value) >= 1u64 << (8 * size)) {
                return Err(bad(format!(
                    "its global '{key}' ({size} bytes) cannot hold {value}"
                )));
            }
            data.get_mut(off..off + size)
                .ok_or_else(|| bad(format!("its global '{key}' lies outside .rodata")))?
                .copy_from_slice(&bytes[..size]);
        }
    }
    let mut obj = algo::load_with_log(
        format!("loading {} as {name} (verifier)", origin.display()),
        || open.load(),
    )?;
    let mut map = obj
        .maps_mut()
        .find(|m| m.name().to_string_lossy() == var.map)
        .expect("the map opened above is loaded");
    algo::register(name, &mut map)
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
        let info = inspect(crate::skel::htcp::OBJECT, Path::new("bpf/htcp.bpf.c")).unwrap();
        assert_eq!(info.ops.map, "htcp");
        assert_eq!(info.globals["delta_l_ms"].initial, 1000);
        assert_eq!(info.globals["delta_l_ms"].size, 4);
        assert!(
            info.kfuncs.contains(&"tcp_slow_start".to_string()),
            "{:?}",
            info.kfuncs
        );
    }
}
