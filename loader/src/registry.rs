//! Loading, pinning, listing and unloading cctl's congestion controls.
//!
//! A loaded algorithm is a struct_ops link pinned at `/sys/fs/bpf/cctl/<name>`:
//! it stays registered after `cctl` exits and disappears when the pin is removed.
//! Its metadata (algorithm, parameters, who loaded it) is kept in
//! `/run/cctl/<name>.json`; both live in memory and vanish on reboot together.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::algos::{self, Algorithm};
use crate::error::{Error, Result};
use crate::kernel;

/// Directory of cctl's pinned struct_ops links.
pub const PIN_DIR: &str = "/sys/fs/bpf/cctl";
/// Directory of cctl's metadata files.
pub const META_DIR: &str = "/run/cctl";

/// A congestion control registered by cctl.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LoadedCc {
    /// Registered name (as in tcp_available_congestion_control).
    pub name: String,
    /// Algorithm key (`htcp`), see [`algos::ALGORITHMS`].
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
}

/// How to load an algorithm.
#[derive(Debug, Default, Clone)]
pub struct LoadOptions {
    /// Name to register under; default `bpf_<algo>`.
    pub name: Option<String>,
    /// Named parameter set to start from (`linux`), see [`algos::Profile`].
    pub profile: Option<String>,
    /// `key=value` tunables (applied over the profile's values).
    pub params: Vec<String>,
    /// Mark the registration as owned by this process (see [`LoadedCc::owner_pid`]).
    pub owned: bool,
}

/// Where the link of the congestion control `name` is pinned. bpffs refuses names
/// with a '.' (EPERM: "reserved for future use"), which profile names
/// (`bpf_bic.l`) have, so the pin's file name spells '.' as '@', a character
/// that congestion-control names cannot contain (see [`algos::validate_cc_name`]).
pub fn pin_path(name: &str) -> PathBuf {
    Path::new(PIN_DIR).join(name.replace('.', "@"))
}

/// The congestion-control name of a pin's file name (inverse of [`pin_path`]).
fn name_of_pin(file_name: &str) -> String {
    file_name.replace('@', ".")
}

fn meta_path(name: &str) -> PathBuf {
    Path::new(META_DIR).join(format!("{name}.json"))
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
/// [`Error::MissingFeature`], [`Error::NameTaken`], [`Error::Bpf`] (verifier), [`Error::Io`].
pub fn load(algo: &str, opts: &LoadOptions) -> Result<LoadedCc> {
    let algorithm: &Algorithm = algos::find(algo)?;
    let name = match &opts.name {
        Some(n) => n.clone(),
        None => algorithm.default_name(opts.profile.as_deref())?,
    };
    algos::validate_cc_name(&name)?;
    let params = algorithm.resolve_params_with(opts.profile.as_deref(), &opts.params)?;

    kernel::require_privileges(&format!("loading {name}"))?;
    kernel::require_struct_ops_links()?;
    kernel::require_kfuncs(algorithm.key, algorithm.kfuncs)?;
    kernel::ensure_bpffs()?;
    check_name_free(&name)?;
    std::fs::create_dir_all(PIN_DIR)
        .map_err(|e| Error::io("creating pin directory", PIN_DIR, e))?;
    std::fs::create_dir_all(META_DIR)
        .map_err(|e| Error::io("creating metadata directory", META_DIR, e))?;

    let mut link = (algorithm.load)(&name, &params)?;
    let pin = pin_path(&name);
    // Dropping `link` on any error below unregisters the algorithm again.
    link.pin(&pin)
        .map_err(|e| Error::bpf(format!("pinning the link at {}", pin.display()), e))?;

    let record = LoadedCc {
        name: name.clone(),
        algo: algorithm.key.into(),
        profile: opts.profile.clone(),
        params: params.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        loaded_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        kernel: kernel::release(),
        cctl_version: env!("CARGO_PKG_VERSION").into(),
        owner_pid: opts.owned.then(std::process::id),
    };
    let meta = meta_path(&name);
    let json = serde_json::to_vec_pretty(&record).expect("LoadedCc serializes");
    if let Err(e) = std::fs::write(&meta, json) {
        let _ = link.unpin();
        return Err(Error::io("writing metadata", meta, e));
    }
    Ok(record)
}

/// The congestion controls cctl has loaded (pinned), with their metadata.
/// Metadata files left without a pin are removed.
pub fn list_loaded() -> Result<Vec<LoadedCc>> {
    let mut out = Vec::new();
    if let Ok(dir) = std::fs::read_dir(PIN_DIR) {
        for entry in dir.flatten() {
            let name = name_of_pin(&entry.file_name().to_string_lossy());
            let record = std::fs::read(meta_path(&name))
                .ok()
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
                });
            out.push(record);
        }
    }
    if let Ok(dir) = std::fs::read_dir(META_DIR) {
        for entry in dir.flatten() {
            let path = entry.path();
            let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
            if let Some(stem) = stem {
                if !pin_path(&stem).exists() {
                    let _ = std::fs::remove_file(&path);
                }
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Resolves what `cctl unload ARG` means: a name cctl pinned, or an algorithm key
/// whose default name cctl pinned.
fn resolve_loaded(arg: &str) -> Result<String> {
    if algos::validate_cc_name(arg).is_ok() && pin_path(arg).exists() {
        return Ok(arg.to_string());
    }
    if let Ok(a) = algos::find(arg) {
        if pin_path(a.cc_name).exists() {
            return Ok(a.cc_name.to_string());
        }
    }
    let registered = kernel::available_ccs()
        .unwrap_or_default()
        .iter()
        .any(|n| n == arg);
    Err(Error::NotOurs {
        name: arg.into(),
        detail: if registered {
            "is registered in the kernel but was not loaded by cctl (built-in, module or another \
             loader); cctl only unloads what it loaded"
                .into()
        } else {
            "is not loaded; `cctl list` shows what is".into()
        },
    })
}

/// Unregisters a congestion control cctl loaded (by name or algorithm key) and
/// waits (up to 2 s) until the kernel no longer lists it.
///
/// Refuses names cctl did not load and the namespace's current default.
/// Sockets still using it keep running it until they close.
pub fn unload(arg: &str) -> Result<LoadedCc> {
    let name = resolve_loaded(arg)?;
    kernel::require_privileges(&format!("unloading {name}"))?;
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
    std::fs::remove_file(&pin).map_err(|e| Error::io("removing pinned link", &pin, e))?;
    let _ = std::fs::remove_file(meta_path(&name));
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

fn process_alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

impl LoadedCc {
    /// Whether the process that loaded it for its own use is gone (a crashed run).
    pub fn is_orphan(&self) -> bool {
        self.owner_pid.is_some_and(|p| !process_alive(p))
    }
}

/// Unloads registrations whose owning process is gone (a crashed `cctl demo` or
/// test). Returns their names.
pub fn remove_orphans() -> Result<Vec<String>> {
    let mut removed = Vec::new();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_names_have_no_dots_and_map_back_to_the_cc_name() {
        for name in ["bpf_htcp", "bpf_bic.l", "a.b.c"] {
            let pin = pin_path(name);
            let file = pin.file_name().unwrap().to_str().unwrap();
            assert!(!file.contains('.'), "{file}");
            assert_eq!(name_of_pin(file), name);
            assert_eq!(pin.parent().unwrap(), Path::new(PIN_DIR));
        }
    }
}
