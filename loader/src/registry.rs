//! Loading, pinning, listing and unloading cctl's congestion controls.
//!
//! A loaded algorithm is a struct_ops link pinned at `/sys/fs/bpf/cctl/<name>`:
//! it stays registered after `cctl` exits and disappears when the pin is removed.
//! Its metadata (algorithm, parameters, who loaded it, its versions) is kept in
//! `/run/cctl/<name>.json`; both live in memory and vanish on reboot together.
//!
//! Every loaded *version* of a name (the first load, then each `cctl upgrade`) keeps
//! its struct_ops map pinned at `/sys/fs/bpf/cctl-versions/<name>/<n>`, so that a
//! previous version stays loaded for `cctl rollback` while the link points at a
//! newer one (see [`crate::upgrade`]). Unloading removes all of a name's pins.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::catalogue::{self, Algorithm};
use crate::error::{Error, Result};
use crate::kernel;
use crate::security;

/// Directory of cctl's pinned struct_ops links.
pub const PIN_DIR: &str = "/sys/fs/bpf/cctl";
/// Directory of cctl's metadata files.
pub const META_DIR: &str = "/run/cctl";
/// Directory of the pinned struct_ops maps of every version: `<dir>/<name>/<n>`
/// (outside [`PIN_DIR`], whose every entry is a registered name).
pub const VERSION_DIR: &str = "/sys/fs/bpf/cctl-versions";

/// One loaded version of a registered name: what was loaded, and the id of its
/// struct_ops map (the `ca_map_id` of the trace samples of sockets running it).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Version {
    /// Version number: 1 for the first load, +1 per upgrade.
    pub version: u32,
    /// Kernel id of its struct_ops map (`bpftool map show id N`).
    pub map_id: u32,
    /// Algorithm key (`htcp`), or `object` for a BPF object given by file.
    pub algo: String,
    /// Profile the parameters started from, if any.
    #[serde(default)]
    pub profile: Option<String>,
    /// Every tunable with its value (empty for an object).
    #[serde(default)]
    pub params: BTreeMap<String, u32>,
    /// The BPF object file it was loaded from (`cctl upgrade --object`), if any.
    #[serde(default)]
    pub object: Option<PathBuf>,
    /// Where its `.data` map, holding its live tunables (spec §18.5, `cctl set`), is
    /// pinned: `/sys/fs/bpf/cctl-versions/<name>/<n>_data`; `None` for a program
    /// without live tunables (or a version loaded by a cctl without them).
    #[serde(default)]
    pub data_pin: Option<PathBuf>,
    /// Seconds since the Unix epoch when it was loaded.
    pub loaded_at: u64,
}

fn first_version() -> u32 {
    1
}

/// A congestion control registered by cctl.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LoadedCc {
    /// Registered name (as in tcp_available_congestion_control).
    pub name: String,
    /// Algorithm key (`htcp`), see [`catalogue::ALGORITHMS`].
    pub algo: String,
    /// Profile the parameters started from, if any.
    #[serde(default)]
    pub profile: Option<String>,
    /// Every tunable with the value it was loaded with.
    pub params: BTreeMap<String, u32>,
    /// Seconds since the Unix epoch when it was loaded.
    pub loaded_at: u64,
    /// `uname -r` at load time.
    pub kernel: String,
    /// cctl version that loaded it.
    pub cctl_version: String,
    /// Process that loaded it for its own use (e.g. `cctl demo`), which unloads it
    /// on exit; a record whose owner died is an orphan of a crashed run.
    pub owner_pid: Option<u32>,
    /// The version the link points at (new connections get it); `algo`, `profile`
    /// and `params` above are this version's.
    #[serde(default = "first_version")]
    pub version: u32,
    /// Every version still loaded (pinned), oldest first. Empty in metadata written
    /// by a cctl without versions.
    #[serde(default)]
    pub versions: Vec<Version>,
}

/// How to load an algorithm.
#[derive(Debug, Default, Clone)]
pub struct LoadOptions {
    /// Name to register under; default `bpf_<algo>`.
    pub name: Option<String>,
    /// Named parameter set to start from (`linux`), see [`catalogue::Profile`].
    pub profile: Option<String>,
    /// `key=value` tunables (applied over the profile's values).
    pub params: Vec<String>,
    /// Mark the registration as owned by this process (see [`LoadedCc::owner_pid`]).
    pub owned: bool,
}

fn pin_path(name: &str) -> PathBuf {
    Path::new(PIN_DIR).join(name)
}

pub(crate) fn meta_path(name: &str) -> PathBuf {
    Path::new(META_DIR).join(format!("{name}.json"))
}

/// Directory of the version pins of `name`.
pub fn versions_dir(name: &str) -> PathBuf {
    Path::new(VERSION_DIR).join(name)
}

/// Holds an exclusive `flock` on a name's version directory: one load, unload, upgrade,
/// rollback or set of a name at a time, so that they do not interleave their pins and
/// records.
pub struct NameLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

/// Takes `name`'s lock ([`NameLock`]), creating its version directory; waits while
/// another process holds it. Released when dropped (or when the process dies).
///
/// Errors: [`Error::Io`] (the directory cannot be made, opened or locked).
pub fn lock_name(name: &str) -> Result<NameLock> {
    let dir = versions_dir(name);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io("creating version pin directory", &dir, e))?;
    let file = std::fs::File::open(&dir).map_err(|e| Error::io("opening", &dir, e))?;
    let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| Error::io("locking", &dir, e.into()))?;
    Ok(NameLock { _lock: lock })
}

/// Whether another process holds `name`'s lock ([`lock_name`]) right now: a load,
/// unload, upgrade, rollback or set of it is under way. `false` when it has no version
/// directory.
pub(crate) fn name_busy(name: &str) -> bool {
    let Ok(file) = std::fs::File::open(versions_dir(name)) else {
        return false;
    };
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err()
}

/// Where version `n` of `name` keeps its struct_ops map pinned.
pub fn version_pin(name: &str, n: u32) -> PathBuf {
    versions_dir(name).join(n.to_string())
}

/// Where version `n` of `name` keeps its `.data` map (its live tunables) pinned
/// (bpffs refuses '.' in names, hence `_data`).
pub fn data_pin_path(name: &str, n: u32) -> PathBuf {
    versions_dir(name).join(format!("{n}_data"))
}

/// Pins the `.data` map of a freshly loaded version `n` of `name`, if the program has
/// live tunables; returns the pin's path.
///
/// Errors: [`Error::Bpf`] (pinning failed).
pub(crate) fn pin_data(
    reg: &crate::algo::Registered,
    name: &str,
    n: u32,
) -> Result<Option<PathBuf>> {
    let Some(data) = &reg.data else {
        return Ok(None);
    };
    let path = data_pin_path(name, n);
    let mut map = libbpf_rs::MapHandle::try_from(data)
        .map_err(|e| Error::bpf(format!("duplicating the .data map fd of {name}"), e))?;
    map.pin(&path).map_err(|e| {
        Error::bpf(
            format!("pinning the live tunables at {}", path.display()),
            e,
        )
    })?;
    Ok(Some(path))
}

/// Writes a record to its metadata file (atomically: a temporary file renamed).
pub(crate) fn write_meta(record: &LoadedCc) -> Result<()> {
    let meta = meta_path(&record.name);
    let tmp = meta.with_extension("json.tmp");
    let json = serde_json::to_vec_pretty(record).expect("LoadedCc serializes");
    std::fs::write(&tmp, json).map_err(|e| Error::io("writing metadata", &tmp, e))?;
    std::fs::rename(&tmp, &meta).map_err(|e| Error::io("writing metadata", &meta, e))
}

/// Seconds since the Unix epoch.
pub(crate) fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Removes the version pins inside `name`'s version directory, keeping the directory
/// (whose lock the caller holds).
fn clear_version_pins(name: &str) -> Result<()> {
    let dir = versions_dir(name);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        match std::fs::remove_file(e.path()) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(Error::io("removing a leftover version pin", e.path(), err)),
        }
    }
    Ok(())
}

/// Removes the version pins of `name` (all of them).
fn remove_version_pins(name: &str) -> Result<()> {
    let dir = versions_dir(name);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io("removing version pins", dir, e)),
    }
}

/// Kernel id of a struct_ops map.
pub fn map_id(map: &libbpf_rs::MapHandle, name: &str) -> Result<u32> {
    use libbpf_rs::MapCore as _;
    map.info()
        .map(|i| i.info.id)
        .map_err(|e| Error::bpf(format!("reading the struct_ops map id of {name}"), e))
}

/// Refuses a name that is taken: by cctl, by the kernel, or by a native module on disk.
fn check_name_free(name: &str) -> Result<()> {
    if pin_path(name).exists() {
        return Err(Error::NameTaken {
            name: name.into(),
            detail: format!(
                "is already loaded by cctl; unload it first (`cctl unload {name}`) or pick another --name"
            ),
        });
    }
    if kernel::available_ccs()?.iter().any(|n| n == name) {
        if std::fs::symlink_metadata(meta_path(name)).is_ok() {
            return Err(Error::NameTaken {
                name: name.into(),
                detail: unreachable_detail(),
            });
        }
        return Err(Error::NameTaken {
            name: name.into(),
            detail: "is already registered in the kernel (built-in, module or another loader); \
                     pick another --name"
                .into(),
        });
    }
    if let Some(module) = kernel::native_module(name) {
        return Err(Error::NameTaken {
            name: name.into(),
            detail: format!(
                "is the name of the native module {}; registering it would make that module \
                 fail to load; pick another --name",
                module.display()
            ),
        });
    }
    Ok(())
}

/// Loads algorithm `algo` (key or default name) into the kernel and registers it,
/// pinned so that it outlives this process.
///
/// Everything that can be checked without the kernel (algorithm, name, parameters)
/// is checked first; after a failure nothing stays registered or pinned.
///
/// Errors: [`Error::UnknownAlgorithm`], [`Error::InvalidName`], [`Error::UnknownParam`],
/// [`Error::BadParamValue`], [`Error::BadParamCombination`], [`Error::NotPrivileged`],
/// [`Error::MissingFeature`], [`Error::NameTaken`], [`Error::Rejected`] (verifier, with its
/// log), [`Error::Bpf`], [`Error::Io`].
pub fn load(algo: &str, opts: &LoadOptions) -> Result<LoadedCc> {
    let algorithm: &Algorithm = catalogue::find(algo)?;
    let name = match &opts.name {
        Some(n) => n.clone(),
        None => algorithm.default_name(opts.profile.as_deref())?,
    };
    catalogue::validate_cc_name(&name)?;
    let params = algorithm.resolve_params_with(opts.profile.as_deref(), &opts.params)?;

    kernel::require_privileges(&format!("loading {name}"))?;
    kernel::require_struct_ops_links()?;
    kernel::require_kfuncs(algorithm.key, &algorithm.kfuncs()?)?;
    kernel::ensure_bpffs()?;
    std::fs::create_dir_all(PIN_DIR)
        .map_err(|e| Error::io("creating pin directory", PIN_DIR, e))?;
    std::fs::create_dir_all(META_DIR)
        .map_err(|e| Error::io("creating metadata directory", META_DIR, e))?;
    check_trusted_state()?;
    // One command at a time per name (load, unload, upgrade, rollback, set), and a
    // name being loaded is not a leftover to another command's clean-up.
    let _lock = lock_name(&name)?;
    check_name_free(&name)?;
    // Version pins of a name without link pin are leftovers of a crashed run: this
    // name's must go; the others' go too, best effort (a state-changing command).
    clear_version_pins(&name)?;
    let _ = clean_leftovers();

    let mut reg = algorithm.load(&name, &params)?;
    let Some(mut link) = reg.link.take() else {
        return Err(Error::NameTaken {
            name: name.clone(),
            detail: "was registered by someone else while cctl was loading it (EEXIST)".into(),
        });
    };
    let map_id = map_id(&reg.map, &name)?;
    // Pinning the link is the commit: the version pins and the record are written first,
    // so a crash before it leaves only leftovers without a link pin (removed by the next
    // change of state) and the name unregistered (the link dies with this process); a
    // crash after it leaves everything consistent.
    let undo = || {
        let _ = std::fs::remove_file(meta_path(&name));
        let _ = remove_version_pins(&name);
    };
    let vpin = version_pin(&name, 1);
    let data_pin = match std::fs::create_dir_all(versions_dir(&name))
        .map_err(|e| Error::io("creating version pin directory", versions_dir(&name), e))
        .and_then(|()| {
            reg.map
                .pin(&vpin)
                .map_err(|e| Error::bpf(format!("pinning the map at {}", vpin.display()), e))
        })
        .and_then(|()| pin_data(&reg, &name, 1))
    {
        Ok(p) => p,
        Err(e) => {
            undo();
            return Err(e);
        }
    };

    let params: BTreeMap<String, u32> = params.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    let loaded_at = now_s();
    let record = LoadedCc {
        name: name.clone(),
        algo: algorithm.key.into(),
        profile: opts.profile.clone(),
        params: params.clone(),
        loaded_at,
        kernel: kernel::release(),
        cctl_version: crate::version().into(),
        owner_pid: opts.owned.then(std::process::id),
        version: 1,
        versions: vec![Version {
            version: 1,
            map_id,
            algo: algorithm.key.into(),
            profile: opts.profile.clone(),
            params,
            object: None,
            data_pin,
            loaded_at,
        }],
    };
    if let Err(e) = write_meta(&record).and_then(|()| crate::faults::step("load.before-link-pin")) {
        undo();
        return Err(e);
    }
    let pin = pin_path(&name);
    // Dropping `link` on an error below unregisters the algorithm again.
    if let Err(e) = link
        .pin(&pin)
        .map_err(|e| Error::bpf(format!("pinning the link at {}", pin.display()), e))
        .and_then(|()| crate::faults::step("load.after-link-pin"))
    {
        let _ = link.unpin();
        undo();
        return Err(e);
    }
    Ok(record)
}

/// Refuses cctl's state directories (`/run/cctl`, `/sys/fs/bpf/cctl`,
/// `/sys/fs/bpf/cctl-versions`) when anyone but root could have planted or changed
/// what is in them ([`security::check_trusted_dir`]); missing ones pass.
///
/// Errors: [`Error::Untrusted`] with its fix; [`Error::Io`].
pub fn check_trusted_state() -> Result<()> {
    security::check_trusted_dir(Path::new(META_DIR), "cctl's metadata directory")?;
    security::check_trusted_dir(Path::new(PIN_DIR), "cctl's pin directory")?;
    security::check_trusted_dir(Path::new(VERSION_DIR), "cctl's version pin directory")
}

/// The congestion controls cctl has loaded (pinned), with their metadata, sorted by
/// name. Reads only: leftovers of crashed runs stay (see [`leftovers`]). A caller who
/// may not read bpffs (an unprivileged `cctl list`) sees none.
///
/// Errors: [`Error::Untrusted`] (a state directory, pin or record someone but root could
/// have planted or changed: [`check_trusted_state`], [`security::read_record`]);
/// [`Error::Io`].
pub fn list_loaded() -> Result<Vec<LoadedCc>> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(PIN_DIR) else {
        return Ok(out);
    };
    check_trusted_state()?;
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let record = security::read_record(&meta_path(&name), &format!("the record of {name}"))?
            .and_then(|b| serde_json::from_slice::<LoadedCc>(&b).ok())
            .unwrap_or_else(|| LoadedCc {
                name: name.clone(),
                algo: "?".into(),
                profile: None,
                params: BTreeMap::new(),
                loaded_at: 0,
                kernel: String::new(),
                cctl_version: String::new(),
                owner_pid: None,
                version: 1,
                versions: Vec::new(),
            });
        let mut record = record;
        record.follow_kernel();
        out.push(record);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Leftovers of crashed runs: metadata files (`/run/cctl/<name>.json`) and version pin
/// directories (`/sys/fs/bpf/cctl-versions/<name>`) of names without a link pin, sorted.
/// Reads only; [`clean_leftovers`] removes them.
///
/// Errors: [`Error::Untrusted`] ([`check_trusted_state`]).
pub fn leftovers() -> Result<Vec<PathBuf>> {
    check_trusted_state()?;
    // A name the kernel still has is not a leftover even without a pin here: its pins are
    // in a BPF file system this mount namespace does not see ([`unreachable`]).
    let registered = kernel::available_ccs().unwrap_or_default();
    let pinned = |n: &str| {
        std::fs::symlink_metadata(pin_path(n)).is_ok() || registered.iter().any(|r| r == n)
    };
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir(META_DIR) {
        for entry in dir.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            // `<name>.json`, or `<name>.json.tmp` of a write that was cut short.
            let name = file
                .strip_suffix(".json")
                .or_else(|| file.strip_suffix(".json.tmp"));
            if name.is_some_and(|n| !pinned(n)) {
                out.push(entry.path());
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir(VERSION_DIR) {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !pinned(&name) {
                out.push(entry.path());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Names cctl recorded (`/run/cctl/<name>.json`) that the kernel still has registered
/// but whose link pin is not in `/sys/fs/bpf/cctl` as this process sees it: the BPF file
/// system they were pinned in is not mounted here (unmounted while the pins' last user
/// kept the links alive, or another mount namespace's). cctl cannot change them from
/// here; their records are kept. Sorted.
///
/// Errors: [`Error::Untrusted`] ([`check_trusted_state`]).
pub fn unreachable() -> Result<Vec<String>> {
    check_trusted_state()?;
    let registered = kernel::available_ccs().unwrap_or_default();
    let mut out: Vec<String> = std::fs::read_dir(META_DIR)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .strip_suffix(".json")
                        .map(str::to_string)
                })
                .filter(|n| {
                    std::fs::symlink_metadata(pin_path(n)).is_err() && registered.contains(n)
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    Ok(out)
}

/// Why a name of [`unreachable`] (recorded, registered, no pin here) cannot be changed
/// from here, as a sentence that follows the name.
pub fn unreachable_detail() -> String {
    format!(
        "is registered in the kernel and recorded in {META_DIR}, but its link pin is not in \
         {PIN_DIR}: the BPF file system it was pinned in is not mounted in this mount \
         namespace (unmounted, or another namespace's); run cctl where that file system is \
         mounted"
    )
}

/// Removes the leftovers of crashed runs ([`leftovers`]): metadata files and version
/// pins of names without a link pin. Registrations are not touched (a crashed owner's
/// registration is [`remove_orphans`]' business). Called by the operations that change
/// cctl's state ([`load`], [`unload`], [`crate::upgrade::upgrade`],
/// [`crate::upgrade::rollback`], [`remove_orphans`]), never by the ones that read it.
///
/// Returns the paths removed; a path that vanished meanwhile is not an error.
///
/// Errors: [`Error::Untrusted`] (nothing is removed from a directory someone but root
/// could have planted things in); [`Error::Io`] for a path that could not be removed
/// (the others still are).
pub fn clean_leftovers() -> Result<Vec<PathBuf>> {
    clean_leftovers_of(|_| true)
}

/// The name a leftover path belongs to: `<META_DIR>/<name>.json[.tmp]` or
/// `<VERSION_DIR>/<name>`.
fn leftover_name(path: &Path) -> String {
    path.file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .map(|f| {
            f.trim_end_matches(".json.tmp")
                .trim_end_matches(".json")
                .to_string()
        })
        .unwrap_or_default()
}

/// [`clean_leftovers`] of the names `keep` accepts.
fn clean_leftovers_of(keep: impl Fn(&str) -> bool) -> Result<Vec<PathBuf>> {
    let mut removed = Vec::new();
    let mut first_error = None;
    for path in leftovers()? {
        if !keep(&leftover_name(&path)) {
            continue;
        }
        // A name another command is loading or unloading right now is not a leftover.
        if name_busy(&leftover_name(&path)) {
            continue;
        }
        let r = if path.starts_with(VERSION_DIR) {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match r {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                first_error.get_or_insert(Error::io(
                    "removing a leftover of a crashed run",
                    &path,
                    e,
                ));
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// Resolves what `cctl unload ARG` means: a name cctl pinned, or an algorithm key
/// whose default name cctl pinned.
///
/// Errors: [`Error::InvalidName`] (neither a valid name nor an algorithm key);
/// [`Error::NotOurs`] (registered, but not by cctl); [`Error::NotLoaded`] (not registered).
pub(crate) fn resolve_loaded(arg: &str) -> Result<String> {
    let valid = catalogue::validate_cc_name(arg);
    let pinned = |n: &str| std::fs::symlink_metadata(pin_path(n)).is_ok();
    if valid.is_ok() && pinned(arg) {
        return Ok(arg.to_string());
    }
    if let Ok(a) = catalogue::find(arg) {
        if pinned(a.cc_name) {
            return Ok(a.cc_name.to_string());
        }
    } else {
        valid?;
    }
    let registered = kernel::available_ccs()
        .unwrap_or_default()
        .iter()
        .any(|n| n == arg);
    if registered && std::fs::symlink_metadata(meta_path(arg)).is_ok() {
        return Err(Error::NotOurs {
            name: arg.into(),
            detail: unreachable_detail(),
        });
    }
    if registered {
        return Err(Error::NotOurs {
            name: arg.into(),
            detail: "is registered in the kernel but was not loaded by cctl (built-in, module or \
                     another loader); cctl only changes what it loaded"
                .into(),
        });
    }
    Err(not_loaded(arg))
}

/// [`Error::NotLoaded`] for `arg`, listing what cctl has loaded.
pub(crate) fn not_loaded(arg: &str) -> Error {
    let names: Vec<String> = std::fs::read_dir(PIN_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut names = names;
    names.sort();
    Error::NotLoaded {
        name: arg.into(),
        loaded: if names.is_empty() {
            "cctl has loaded nothing (`cctl load ALGO` loads one)".into()
        } else {
            format!(
                "cctl has loaded: {} (`cctl list` shows them)",
                names.join(", ")
            )
        },
    }
}

/// What [`unload_or_finish`] did.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unloaded {
    /// The name was registered by cctl; it is unregistered now. Its record.
    Now(LoadedCc),
    /// An earlier unload of the name unregistered it (unpinning the link is its commit) and
    /// was cut short before it removed the name's record and version pins: they are removed
    /// now.
    Finished {
        /// The registered name.
        name: String,
        /// What the cut unload left and this one removed (record, version pins).
        removed: Vec<PathBuf>,
    },
}

/// [`unload`], or the end of an earlier unload of `arg` (a name, or an algorithm key for
/// its default name) that was cut short after its commit: then the name is no longer
/// registered, and what that unload left of it is removed and returned, instead of
/// [`Error::NotLoaded`].
///
/// Errors: those of [`unload`]; [`Error::Io`] when a leftover cannot be removed.
pub fn unload_or_finish(arg: &str) -> Result<Unloaded> {
    if nix::unistd::geteuid().is_root() {
        let name = match crate::catalogue::find(arg) {
            Ok(a) if catalogue::validate_cc_name(arg).is_err() || !pinned_or_recorded(arg) => {
                a.cc_name.to_string()
            }
            _ => arg.to_string(),
        };
        // Leftovers are only of names neither pinned nor registered, and a name another
        // command is changing right now is skipped (clean_leftovers_of).
        let removed = clean_leftovers_of(|n| n == name)?;
        if !removed.is_empty() {
            return Ok(Unloaded::Finished { name, removed });
        }
    }
    unload(arg).map(Unloaded::Now)
}

/// Whether cctl has a link pin or a record of `name`.
fn pinned_or_recorded(name: &str) -> bool {
    std::fs::symlink_metadata(pin_path(name)).is_ok() || meta_path(name).exists()
}

/// Unregisters a congestion control cctl loaded (by name or algorithm key), with
/// all its versions, and waits (up to 2 s) until the kernel no longer lists it.
///
/// Refuses names cctl did not load and the namespace's current default.
/// Sockets still using it keep running it until they close.
pub fn unload(arg: &str) -> Result<LoadedCc> {
    // What a crashed earlier unload left (its link was unpinned) goes first, also when
    // the name turns out to be gone already.
    if nix::unistd::geteuid().is_root() {
        let _ = clean_leftovers();
    }
    let name = resolve_loaded(arg)?;
    kernel::require_privileges(&format!("unloading {name}"))?;
    let _lock = lock_name(&name)?;
    if kernel::default_cc().ok().as_deref() == Some(name.as_str()) {
        return Err(Error::NotOurs {
            name: name.clone(),
            detail: "is the default congestion control of this network namespace; set another \
                     default first (e.g. `cctl default cubic`)"
                .into(),
        });
    }
    let record = list_loaded()?
        .into_iter()
        .find(|r| r.name == name)
        .expect("pinned entry listed");
    let pin = pin_path(&name);
    // Unpinning the link is the commit (the name unregisters); what follows left behind
    // by a crash is a leftover the next change of state removes.
    std::fs::remove_file(&pin).map_err(|e| Error::io("removing pinned link", &pin, e))?;
    crate::faults::step("unload.after-link-unpin")?;
    let _ = std::fs::remove_file(meta_path(&name));
    remove_version_pins(&name)?;
    // Other names' leftovers of crashed runs, best effort.
    let _ = clean_leftovers();
    // The link is released asynchronously once its last reference is gone.
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if !kernel::available_ccs()?.contains(&name) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(record)
}

/// Whether process `pid` runs: it has a /proc entry and is not a zombie (a killed owner
/// whose parent has not reaped it yet is gone for our purposes).
fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")) {
        Ok(stat) => !matches!(
            stat.rsplit_once(')')
                .and_then(|(_, tail)| tail.split_whitespace().next()),
            Some("Z" | "X")
        ),
        Err(_) => false,
    }
}

impl LoadedCc {
    /// Makes the record say which version the kernel runs: the struct_ops map its pinned
    /// link points at now. A crash between writing the record and switching the link
    /// (`cctl upgrade`, `cctl rollback`) leaves a record whose current version is not the
    /// one running; readers correct it here (the record on disk is rewritten by the next
    /// change). Unchanged when the link cannot be read or runs a map no version records.
    pub fn follow_kernel(&mut self) {
        let Some(info) = kernel::pinned_link_info(&pin_path(&self.name)) else {
            return;
        };
        if info.type_ != libbpf_rs::libbpf_sys::BPF_LINK_TYPE_STRUCT_OPS {
            return;
        }
        // SAFETY: a struct_ops link's info fills the union's `struct_ops` member.
        let running = unsafe { info.__bindgen_anon_1.struct_ops.map_id };
        let Some(v) = self.versions.iter().find(|v| v.map_id == running) else {
            return;
        };
        if v.version != self.version {
            let v = v.clone();
            self.version = v.version;
            if v.object.is_none() {
                self.algo = v.algo;
            }
            self.profile = v.profile;
            self.params = v.params;
        }
    }

    /// Whether the process that loaded it for its own use is gone (a crashed run).
    pub fn is_orphan(&self) -> bool {
        self.owner_pid.is_some_and(|p| !process_alive(p))
    }
}

/// Unloads registrations whose owning process is gone (a crashed `cctl demo` or
/// test), and removes version pins and metadata without a link pin
/// ([`clean_leftovers`]). Returns the names unloaded.
pub fn remove_orphans() -> Result<Vec<String>> {
    let mut removed = Vec::new();
    clean_leftovers()?;
    for r in list_loaded()? {
        if let Some(pid) = r.owner_pid {
            if !process_alive(pid) {
                unload(&r.name)?;
                removed.push(r.name);
            }
        }
    }
    Ok(removed)
}

/// Unloads on drop: for callers that load an algorithm for their own use.
#[derive(Debug)]
pub struct LoadGuard {
    name: Option<String>,
}

impl LoadGuard {
    /// Guards the registration `name`.
    pub fn new(name: impl Into<String>) -> Self {
        LoadGuard {
            name: Some(name.into()),
        }
    }

    /// The guarded name.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// Unloads now and reports the result.
    pub fn unload(mut self) -> Result<()> {
        match self.name.take() {
            Some(n) => unload(&n).map(|_| ()),
            None => Ok(()),
        }
    }
}

impl Drop for LoadGuard {
    fn drop(&mut self) {
        if let Some(n) = self.name.take() {
            let _ = unload(&n);
        }
    }
}
