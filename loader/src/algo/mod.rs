//! One module per algorithm, each holding its declaration ([`declare_algorithm!`]:
//! key, stable id, Linux module, tunables, profiles, variables, checks) and, for
//! algorithms with real-valued rules, `model`: a plain f64 model of the spec's
//! equations that unit tests compare with the fixed-point C the BPF program runs
//! (`bpf/algo/<algo>_math.h`, compiled for the host by build.rs, declared in
//! [`crate::math`]). Algorithms without a Linux module also hold `replay`: their
//! per-ACK replay rules against that model, run by the shared machinery of [`replay`]
//! and reached through their declaration.
//!
//! To add an algorithm `x`, write four files: `bpf/algo/x.bpf.c`, `bpf/algo/x_math.h` (its
//! state struct and fixed-point rules), `loader/src/algo/x/mod.rs` (its declaration)
//! and `loader/src/algo/x/model.rs` (and, without a Linux module to compare with,
//! `loader/src/algo/x/replay.rs`: its replay rules). build.rs finds them: the module list and
//! [`ALGORITHMS`] are generated from the declarations present.

use std::sync::Mutex;

use crate::error::{Error, Result};

pub mod replay;

/// One internal variable of an algorithm, decoded from a sample (spec §18.3).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Var {
    /// Name as printed by `cctl trace` (`alpha`, `w_max`, `dwnd`, ...).
    pub name: &'static str,
    /// Value in the unit the algorithm's `vars` function documents.
    pub value: f64,
}

/// Most variables any algorithm decodes from a sample (FAST has 9): [`Vars`]
/// holds them inline, so that decoding a sample allocates nothing. A declaration with more
/// fails to compile.
pub const MAX_VARS: usize = 12;

/// An algorithm's variables in a sample, in the order its module lists them; held inline
/// (at most [`MAX_VARS`]), so a sample allocates nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Vars(arrayvec::ArrayVec<Var, { MAX_VARS }>);

impl Vars {
    /// The value of variable `name`, if the sample has it.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0.iter().find(|v| v.name == name).map(|v| v.value)
    }
}

impl std::ops::Deref for Vars {
    type Target = [Var];

    fn deref(&self) -> &[Var] {
        &self.0
    }
}

impl std::ops::DerefMut for Vars {
    fn deref_mut(&mut self) -> &mut [Var] {
        &mut self.0
    }
}

impl FromIterator<Var> for Vars {
    /// Keeps the first [`MAX_VARS`]; the rest are dropped.
    fn from_iter<I: IntoIterator<Item = Var>>(it: I) -> Vars {
        Vars(it.into_iter().take(MAX_VARS).collect())
    }
}

impl std::fmt::Display for Vars {
    /// `name=value` pairs separated by spaces, values with up to 6 significant decimals.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, v) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            if v.value.fract() == 0.0 && v.value.abs() < 1e15 {
                write!(f, "{}={}", v.name, v.value as i64)?;
            } else {
                write!(f, "{}={:.6}", v.name, v.value)?;
            }
        }
        Ok(())
    }
}

impl serde::Serialize for Vars {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Shorthand for building a [`Var`].
pub(crate) fn var(name: &'static str, value: impl Into<f64>) -> Var {
    Var {
        name,
        value: value.into(),
    }
}

/// Copies `bytes` (a sample's `ca_priv`) into the plain C struct `T`.
pub(crate) fn ca_from_bytes<T: plain::Plain + Default>(bytes: &[u8]) -> Option<T> {
    let mut t = T::default();
    plain::copy_from_bytes(&mut t, bytes).ok()?;
    Some(t)
}

/// Writes a congestion-control name into a C `char[16]` (a struct_ops `name` field, a
/// BPF global): NUL-padded, cut at 15 bytes so that the last byte stays NUL.
pub(crate) fn write_name(dst: &mut [std::os::raw::c_char; 16], name: &str) {
    dst.fill(0);
    for (d, b) in dst.iter_mut().zip(name.bytes().take(15)) {
        *d = b as std::os::raw::c_char;
    }
}

/// Reads a NUL-terminated congestion-control name out of a C `char` array.
pub(crate) fn read_name(raw: &[std::os::raw::c_char]) -> String {
    String::from_utf8_lossy(&name_bytes(raw)).into_owned()
}

/// The bytes of a NUL-terminated name in a C `char` array (at most 16), without allocating.
fn name_bytes(raw: &[std::os::raw::c_char]) -> arrayvec::ArrayVec<u8, 16> {
    raw.iter()
        .take(16)
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect()
}

/// Distinct names are few (the kernel's congestion controls); each is stored once, for the
/// life of the process, so that a sample carries a `&'static str` instead of a `String`.
static NAMES: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

/// A congestion-control name out of a C `char[16]`, interned ([`intern`]). Names that are
/// not UTF-8 are stored lossily converted.
pub fn intern_name(raw: &[std::os::raw::c_char]) -> &'static str {
    intern(&String::from_utf8_lossy(&name_bytes(raw)))
}

/// `name` interned: the first call with a name stores it (one allocation per distinct name
/// for the life of the process; the kernel's congestion controls are few); every later
/// call returns that copy and allocates nothing.
pub fn intern(name: &str) -> &'static str {
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = names.iter().find(|n| **n == name) {
        return n;
    }
    let n: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.push(n);
    n
}

/// Maps a failed `attach_struct_ops` to a typed error.
pub(crate) fn attach_error(name: &str, e: libbpf_rs::Error) -> Error {
    match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => Error::NotPrivileged {
            action: format!("registering {name}"),
        },
        _ => Error::bpf(format!("registering {name} (attaching struct_ops)"), e),
    }
}

/// A loaded (verified) struct_ops map of a `tcp_congestion_ops`, made READY in the
/// kernel, and the link that registered it if its name was free.
#[derive(Debug)]
pub struct Registered {
    /// The struct_ops link, when this load registered the name. `None` when the name
    /// was already registered (EEXIST): the map is then READY, a candidate to replace
    /// the registered version through `BPF_LINK_UPDATE` (see [`crate::upgrade`]).
    pub link: Option<libbpf_rs::Link>,
    /// The struct_ops map (a file descriptor of its own: it outlives the BPF object).
    pub map: libbpf_rs::MapHandle,
    /// The `.data` map holding the live tunables (spec §18.5), when the program has
    /// any (see [`crate::live`]).
    pub data: Option<libbpf_rs::MapHandle>,
}

/// Makes the loaded struct_ops `map` READY and tries to register it under `name`
/// (`bpf_map__attach_struct_ops`: `BPF_MAP_UPDATE_ELEM` with libbpf's kernel value,
/// then `BPF_LINK_CREATE`). A name already registered is not an error here: it
/// returns no link, and the caller decides (a fresh load refuses, an upgrade swaps).
///
/// Errors: [`Error::NotPrivileged`], [`Error::Bpf`].
pub(crate) fn register(name: &str, map: &mut libbpf_rs::MapMut<'_>) -> Result<Registered> {
    let handle = libbpf_rs::MapHandle::try_from(&*map)
        .map_err(|e| Error::bpf(format!("duplicating the struct_ops map fd of {name}"), e))?;
    // Either way libbpf has updated the map (kern_vdata) before it creates the link,
    // so after EEXIST the map is READY; the kernel may log "already registered".
    match map.attach_struct_ops() {
        Ok(link) => Ok(Registered {
            link: Some(link),
            map: handle,
            data: None,
        }),
        Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => Ok(Registered {
            link: None,
            map: handle,
            data: None,
        }),
        Err(e) => Err(attach_error(name, e)),
    }
}

/// Lines of libbpf's output kept in an error: the end of the verifier's log.
pub const LOG_TAIL_LINES: usize = 30;

static LIBBPF_LOG: Mutex<String> = Mutex::new(String::new());
static LIBBPF_LOG_USER: Mutex<()> = Mutex::new(());

fn collect_libbpf_log(_: libbpf_rs::PrintLevel, msg: String) {
    LIBBPF_LOG
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push_str(&msg);
}

/// Runs `f` (a libbpf load) with libbpf's messages captured instead of printed, and
/// returns its result with what libbpf said (e.g. the verifier's log on rejection).
/// Captures are serialized; libbpf's previous print callback is restored after.
pub(crate) fn with_libbpf_log<T>(f: impl FnOnce() -> T) -> (T, String) {
    let _one = LIBBPF_LOG_USER.lock().unwrap_or_else(|e| e.into_inner());
    LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let prev = libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Info, collect_libbpf_log)));
    let out = f();
    libbpf_rs::set_print(prev);
    let log = std::mem::take(&mut *LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner()));
    (out, log)
}

/// The relevant end of a captured libbpf log: the last [`LOG_TAIL_LINES`] lines of
/// the verifier's log of the first program it rejected (between libbpf's
/// `-- BEGIN PROG LOAD LOG --` and `-- END PROG LOAD LOG --`), after libbpf's own
/// message naming the program; without a verifier log, the end of libbpf's output.
pub fn log_tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    let begin = lines
        .iter()
        .position(|l| l.contains("-- BEGIN PROG LOAD LOG --"));
    let picked: Vec<&str> = match begin {
        Some(b) => {
            let end = lines[b..]
                .iter()
                .position(|l| l.contains("-- END PROG LOAD LOG --"))
                .map_or(lines.len(), |e| b + e + 1);
            let body = &lines[b..end];
            let skip = body.len().saturating_sub(LOG_TAIL_LINES);
            let mut v: Vec<&str> = lines[..b].iter().rev().take(1).copied().collect();
            if skip > 0 {
                v.push("...");
            }
            v.extend(&body[skip..]);
            v
        }
        None => {
            let skip = lines.len().saturating_sub(LOG_TAIL_LINES);
            lines[skip..].to_vec()
        }
    };
    picked.join("\n")
}

/// Loads an opened BPF object (`load` is its `load()`), capturing libbpf's output so
/// that a rejection carries the verifier's log: [`Error::Rejected`].
pub(crate) fn load_with_log<T>(
    context: String,
    load: impl FnOnce() -> libbpf_rs::Result<T>,
) -> Result<T> {
    let (res, log) = with_libbpf_log(load);
    res.map_err(|source| Error::Rejected {
        context,
        log: log_tail(&log),
        source,
    })
}

/// Declares an algorithm in its module (`loader/src/algo/<key>/mod.rs`), once: the
/// catalogue entry `ALGORITHM` and the `PARAMS`, `PROFILES`, `VAR_DOCS` and `vars`
/// derived from it. `key` is also the name of its BPF program (`bpf/algo/<key>.bpf.c`),
/// skeleton and struct_ops map; each parameter's key is the name of a `.rodata`
/// global of that program, set by name through the object's BTF at load (so no list
/// repeats them), and its default is checked against the global's compiled-in value
/// by a test. `id` is stable (build.rs refuses a reused one). `vars(x: T) { name
/// ("unit: meaning") = expression of x, ... }` decodes the algorithm's variables from
/// its state struct `T` (of bpf/algo/<key>_math.h). `check` defaults to
/// [`crate::catalogue::no_check`]. `replay` (optional, for algorithms without a Linux
/// module) names the constructor of its per-ACK replay rules (`replay::rules` of
/// `loader/src/algo/<key>/replay.rs`, a `replay::Rules` against its model); without it
/// the algorithm has none ([`crate::model_check::has_model`] is false).
macro_rules! declare_algorithm {
    (
        key: $key:ident,
        id: $id:literal,
        summary: $summary:expr,
        paper: $paper:expr,
        spec: $spec:expr,
        native: $native:expr,
        clocked: $clocked:expr,
        params: [$($param:expr),* $(,)?],
        profiles: [$($profile:expr),* $(,)?],
        $(check: $check:expr,)?
        $(replay: $replay:expr,)?
        vars($ca:ident: $ca_ty:ident) {
            $($var:ident ($vdoc:expr) = $vexpr:expr),* $(,)?
        } $(,)?
    ) => {
        use $crate::skel::$key::types::$ca_ty;
        $crate::algo::impl_plain!($ca_ty);
        $crate::algo::declare_algorithm!(@common $key, $id, $summary, $paper, $spec, $native,
            $clocked, [$($param),*], [$($profile),*], [$($check)?], [$($replay)?], vars);

        /// Variables decoded by [`vars`]: (name, "unit: meaning").
        pub const VAR_DOCS: &[(&str, &str)] = &[$((stringify!($var), $vdoc)),*];

        const _: () = assert!(VAR_DOCS.len() <= $crate::algo::MAX_VARS, "raise algo::MAX_VARS");

        /// Decodes the variables of [`VAR_DOCS`] from a sample's `icsk_ca_priv` bytes
        /// (empty if they are too short). Allocates nothing.
        pub fn vars(ca_priv: &[u8]) -> $crate::algo::Vars {
            let Some($ca) = $crate::algo::ca_from_bytes::<$ca_ty>(ca_priv) else {
                return $crate::algo::Vars::default();
            };
            [$($crate::algo::var(stringify!($var), $vexpr)),*].into_iter().collect()
        }
    };
    (
        key: $key:ident,
        id: $id:literal,
        summary: $summary:expr,
        paper: $paper:expr,
        spec: $spec:expr,
        native: $native:expr,
        clocked: $clocked:expr,
        params: [$($param:expr),* $(,)?],
        profiles: [$($profile:expr),* $(,)?],
        $(check: $check:expr,)?
        $(replay: $replay:expr,)?
    ) => {
        $crate::algo::declare_algorithm!(@common $key, $id, $summary, $paper, $spec, $native,
            $clocked, [$($param),*], [$($profile),*], [$($check)?], [$($replay)?], vars);

        /// Variables decoded by [`vars`]: none beyond the shared measurement layer.
        pub const VAR_DOCS: &[(&str, &str)] = &[];

        /// This algorithm has no variables of its own.
        pub fn vars(_ca_priv: &[u8]) -> $crate::algo::Vars {
            $crate::algo::Vars::default()
        }
    };
    (@common $key:ident, $id:literal, $summary:expr, $paper:expr, $spec:expr, $native:expr,
     $clocked:expr, [$($param:expr),*], [$($profile:expr),*], [$($check:expr)?],
     [$($replay:expr)?], $vars:ident) => {
        /// Tunables: `.rodata` globals of the program, with the defaults it declares
        /// (its header names the paper and section they come from).
        pub const PARAMS: &[$crate::catalogue::ParamSpec] = &[$($param),*];

        /// Named parameter sets (spec §18.4).
        pub const PROFILES: &[$crate::catalogue::Profile] = &[$($profile),*];

        /// The catalogue entry.
        pub const ALGORITHM: $crate::catalogue::Algorithm = $crate::catalogue::Algorithm {
            key: stringify!($key),
            cc_name: concat!("bpf_", stringify!($key)),
            id: $id,
            summary: $summary,
            paper: $paper,
            spec: $spec,
            native: $native,
            clocked: $clocked,
            params: PARAMS,
            profiles: PROFILES,
            var_docs: VAR_DOCS,
            check: $crate::algo::declare_algorithm!(@check $($check)?),
            object: $crate::skel::$key::OBJECT,
            object_const: $crate::skel::$key::OBJECT_CONST,
            program: $crate::skel::$key::SOURCE,
            vars: $vars,
            replay: $crate::algo::declare_algorithm!(@replay $($replay)?),
        };
    };
    (@check $check:expr) => { $check };
    (@check) => { $crate::catalogue::no_check };
    (@replay $replay:expr) => {
        Some($crate::catalogue::Replay(&($replay as $crate::algo::replay::NewRules)))
    };
    (@replay) => { None };
}
pub(crate) use declare_algorithm;

/// Marks skeleton C structs as plain old data for decoding from bytes.
macro_rules! impl_plain {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: a C struct of integers and byte arrays generated from bpf/algo/*_math.h,
            // for which every bit pattern is valid.
            unsafe impl plain::Plain for $t {}
        )*
    };
}
pub(crate) use impl_plain;

// The algorithm modules and `ALGORITHMS`, generated by build.rs from the declarations
// present (after the macros they use).
include!(concat!(env!("OUT_DIR"), "/catalogue.rs"));
