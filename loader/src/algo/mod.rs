//! One module per algorithm: its tunables, how to load its skeleton, and how to
//! decode its variables out of a sample's `icsk_ca_priv` bytes. Algorithms with
//! real-valued rules also carry `model`, a plain f64 model of the spec's equations
//! that unit tests compare with the fixed-point C the BPF program runs (compiled
//! on the host from `bpf/<algo>_math.h` through `loader/csrc/<algo>_shim.c`).
//!
//! To add an algorithm `x`: `bpf/x.bpf.c` (+ `bpf/x_math.h` for its state struct
//! and fixed-point rules), `loader/csrc/x_shim.c`, `loader/src/algo/x/`, an id in
//! `bpf/cctl.h`, and one entry in [`crate::algos::ALGORITHMS`].

use crate::error::Error;

pub mod africa;
pub mod bic;
pub mod compound;
pub mod cubic;
pub mod fast;
pub mod highspeed;
pub mod htcp;
pub mod illinois;
pub mod reno;
pub mod scalable;
pub mod vegas;
pub mod westwood;
pub mod yeah;

/// One internal variable of an algorithm, decoded from a sample (spec §18.3).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Var {
    /// Name as printed by `cctl trace` (`alpha`, `w_max`, `dwnd`, ...).
    pub name: &'static str,
    /// Value in the unit the algorithm's `vars` function documents.
    pub value: f64,
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

/// Writes a congestion-control name into a struct_ops `name` field (NUL-padded).
pub(crate) fn write_name(dst: &mut [std::os::raw::c_char; 16], name: &str) {
    dst.fill(0);
    for (d, b) in dst.iter_mut().zip(name.bytes()) {
        *d = b as std::os::raw::c_char;
    }
}

/// Maps a failed `attach_struct_ops` to a typed error.
pub(crate) fn attach_error(name: &str, e: libbpf_rs::Error) -> Error {
    match e.kind() {
        libbpf_rs::ErrorKind::AlreadyExists => Error::NameTaken {
            name: name.into(),
            detail: "was registered by someone else while cctl was loading it (EEXIST)".into(),
        },
        libbpf_rs::ErrorKind::PermissionDenied => Error::NotPrivileged {
            action: format!("registering {name}"),
        },
        _ => Error::bpf(format!("registering {name} (attaching struct_ops)"), e),
    }
}

/// Opens skeleton `$skel` (module of [`crate::skel`]), sets the struct_ops name and
/// the listed `.rodata` tunables (all `u32`, named like the BPF globals) from a
/// parameter map, loads it (verifier) and registers it through a struct_ops link.
///
/// `load_struct_ops!(name, params, htcp::HtcpSkelBuilder, htcp / htcp_mut, [delta_l_ms, ...])`
/// evaluates to `Result<libbpf_rs::Link>`.
macro_rules! load_struct_ops {
    ($name:expr, $params:expr, $skel:ident :: $builder:ident, $map:ident / $map_mut:ident,
     [$($field:ident),* $(,)?]) => {{
        use libbpf_rs::skel::{OpenSkel as _, SkelBuilder as _};
        let name: &str = $name;
        let mut storage = std::mem::MaybeUninit::uninit();
        let mut open = $crate::skel::$skel::$builder::default()
            .open(&mut storage)
            .map_err(|e| $crate::Error::bpf(concat!("opening the ", stringify!($skel), " BPF object"), e))?;
        $crate::algo::write_name(&mut open.struct_ops.$map_mut().name, name);
        #[allow(unused_variables)]
        let params: &$crate::algos::Params = $params;
        $(
            {
                let ro = open
                    .maps
                    .rodata_data
                    .as_deref_mut()
                    .expect(concat!(stringify!($skel), " .rodata is memory-mapped"));
                ro.$field = params[stringify!($field)];
            }
        )*
        debug_assert!(params.keys().all(|k| [$(stringify!($field)),*].contains(k)),
            "a parameter of {} has no BPF global", stringify!($skel));
        let mut skel = open
            .load()
            .map_err(|e| $crate::Error::bpf(format!("loading {name} (verifier)"), e))?;
        skel.maps
            .$map
            .attach_struct_ops()
            .map_err(|e| $crate::algo::attach_error(name, e))
    }};
}
pub(crate) use load_struct_ops;

/// Marks skeleton C structs as plain old data for decoding from bytes.
macro_rules! impl_plain {
    ($($t:ty),* $(,)?) => {
        $(
            // SAFETY: a C struct of integers and byte arrays generated from bpf/*.h,
            // for which every bit pattern is valid.
            unsafe impl plain::Plain for $t {}
        )*
    };
}
pub(crate) use impl_plain;
