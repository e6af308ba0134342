//! One module per algorithm: its tunables, how to load its skeleton, and how to
//! decode its variables out of a sample's `icsk_ca_priv` bytes. Algorithms with
//! real-valued rules also carry `model`, a plain f64 model of the spec's equations
//! that unit tests compare with the fixed-point C the BPF program runs (compiled
//! on the host from `bpf/<algo>_math.h` through `loader/csrc/<algo>_shim.c`).
//!
//! To add an algorithm `x`: `bpf/x.bpf.c` (+ `bpf/x_math.h` for its state struct
//! and fixed-point rules), `loader/csrc/x_shim.c`, `loader/src/algo/x/`, an id in
//! `bpf/cctl.h`, and one entry in [`crate::algos::ALGORITHMS`].

use std::sync::Mutex;

use crate::error::{Error, Result};

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
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
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
        }),
        Err(e) if e.kind() == libbpf_rs::ErrorKind::AlreadyExists => Ok(Registered {
            link: None,
            map: handle,
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

/// Opens skeleton `$skel` (module of [`crate::skel`]), sets the struct_ops name and
/// the listed `.rodata` tunables (all `u32`, named like the BPF globals) from a
/// parameter map, loads it (verifier; its log goes into [`Error::Rejected`]) and
/// registers it through a struct_ops link, or leaves it READY when the name is
/// taken (see [`register`]).
///
/// `load_struct_ops!(name, params, htcp::HtcpSkelBuilder, htcp / htcp_mut, [delta_l_ms, ...])`
/// evaluates to `Result<Registered>`.
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
        let mut skel =
            $crate::algo::load_with_log(format!("loading {name} (verifier)"), || open.load())?;
        $crate::algo::register(name, &mut skel.maps.$map)
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
