//! Policy for new connections: a congestion control chosen by port or by cgroup
//! (`cctl policy`), applied by the sockops program bpf/probe/policy.bpf.c.
//!
//! Layout (bpffs refuses dots in names), all outside the registry's directories (which treat every entry as a CC):
//! - `/sys/fs/bpf/cctl-policy/port_rules`, `.../cgroup_rules`: the pinned rule maps
//!   (port or cgroup id → CC name and counters), the source of truth;
//! - `/sys/fs/bpf/cctl-policy/port_link`: the port-rule program's link on the cgroup v2
//!   root, present while any port rule exists;
//! - `/sys/fs/bpf/cctl-policy/cgroup_<id>_link`: one program per cgroup rule, on that cgroup;
//! - `/run/cctl-policy/cgroups.json`: the path each cgroup id was given as (for display
//!   and for removing a rule whose cgroup is gone); `/run/cctl-policy/lock` serialises
//!   concurrent `cctl policy` commands.
//!
//! Adding a rule for a port or cgroup that has one **replaces** it (new connections get
//! the new CC at once; counters restart). Precedence when several rules match a new
//! socket: the application's own `setsockopt(TCP_CONGESTION)` > the deepest cgroup rule >
//! its ancestors' cgroup rules > port rules (see the header of bpf/probe/policy.bpf.c).

use std::collections::BTreeMap;
use std::fs::File;
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};

use crate::error::{Error, Result};
use crate::kernel;
use crate::skel::policy::types::policy_rule;
use crate::skel::policy::PolicySkelBuilder;

/// Where the policy's maps and links are pinned.
pub const PIN_DIR: &str = "/sys/fs/bpf/cctl-policy";
/// Where the policy's metadata (cgroup paths) and lock file live.
pub const META_DIR: &str = "/run/cctl-policy";
/// Most rules of each kind (port, cgroup) the maps hold.
pub const MAX_RULES: usize = 1024;
const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

// SAFETY: a C struct of integers and a byte array, for which every bit pattern is valid.
unsafe impl plain::Plain for policy_rule {}

/// What a rule matches.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Target {
    /// New connections to this port (client side: remote port) and connections
    /// accepted on it (server side: local port), in every network namespace.
    Port {
        /// TCP port, 1-65535.
        port: u16,
    },
    /// New connections of sockets created by processes in this cgroup or below it.
    Cgroup {
        /// The cgroup v2 directory (absolute path in the cgroup2 mount).
        path: PathBuf,
        /// The cgroup's id (inode number of its directory).
        id: u64,
        /// Whether the cgroup still exists (a removed cgroup's rule matches nothing).
        exists: bool,
    },
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Port { port } => write!(f, "port {port}"),
            Target::Cgroup { path, .. } => write!(f, "cgroup {}", path.display()),
        }
    }
}

/// A rule as given on the command line, before validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSpec {
    /// `--port N` (validated to 1-65535).
    Port(u32),
    /// `--cgroup PATH`: absolute in the cgroup2 mount, or relative to it
    /// (`/proc/PID/cgroup` notation such as `/system.slice/x.service` works too).
    Cgroup(PathBuf),
}

/// One policy rule with what it did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rule {
    /// What it matches.
    #[serde(flatten)]
    pub target: Target,
    /// The congestion control it sets.
    pub cc: String,
    /// New connections that were given `cc`.
    pub applied: u64,
    /// Matching connections whose CC was already chosen (by the application or a
    /// rule of higher precedence), left alone.
    pub kept: u64,
    /// Matching connections where setting `cc` failed (they keep the default).
    pub failed: u64,
    /// The last failure, e.g. `ENOENT (cc not registered)`.
    pub last_error: Option<String>,
    /// Whether `cc` is registered in the kernel now.
    pub cc_registered: bool,
    /// Whether the rule's program is attached (its link is pinned).
    pub attached: bool,
}

/// What [`add`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Added {
    /// The rule as it now stands.
    pub target: Target,
    /// The congestion control it sets.
    pub cc: String,
    /// The CC of the rule it replaced, if there was one for the same target.
    pub replaced: Option<String>,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct Meta {
    /// cgroup id → path it was added as.
    cgroups: BTreeMap<u64, PathBuf>,
}

fn pin(name: &str) -> PathBuf {
    Path::new(PIN_DIR).join(name)
}

fn port_map_pin() -> PathBuf {
    pin("port_rules")
}

fn cgroup_map_pin() -> PathBuf {
    pin("cgroup_rules")
}

fn port_link_pin() -> PathBuf {
    pin("port_link")
}

fn cgroup_link_pin(id: u64) -> PathBuf {
    pin(&format!("cgroup_{id}_link"))
}

fn meta_path() -> PathBuf {
    Path::new(META_DIR).join("cgroups.json")
}

/// The mount point of the cgroup v2 hierarchy (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on hybrid systems), from /proc/self/mountinfo.
///
/// Errors: [`Error::MissingFeature`] when no cgroup2 file system is mounted.
pub fn cgroup2_mount() -> Result<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Error::io("reading mounts", "/proc/self/mountinfo", e))?;
    let mut found: Option<PathBuf> = None;
    for line in info.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        if right.split_whitespace().next() != Some("cgroup2") {
            continue;
        }
        if let Some(mp) = left.split_whitespace().nth(4) {
            let mp = PathBuf::from(mp.replace("\\040", " "));
            // Prefer the shortest (the standard /sys/fs/cgroup over bind mounts).
            if found
                .as_ref()
                .is_none_or(|f| mp.as_os_str().len() < f.as_os_str().len())
            {
                found = Some(mp);
            }
        }
    }
    found.ok_or_else(|| Error::MissingFeature {
        feature: "a cgroup v2 file system".into(),
        hint: "mount one (`mount -t cgroup2 none /sys/fs/cgroup`); policies attach to cgroup v2"
            .into(),
    })
}

fn is_cgroup2_dir(p: &Path) -> bool {
    #[allow(clippy::unnecessary_cast)]
    let magic_ok = nix::sys::statfs::statfs(p)
        .map(|s| s.filesystem_type().0 as i64 == CGROUP2_SUPER_MAGIC)
        .unwrap_or(false);
    magic_ok && p.is_dir()
}

/// The absolute path `arg` names in the cgroup2 mount `root`, without touching the file
/// system: an absolute path inside `root` as is, anything else relative to `root`.
fn cgroup_candidate(root: &Path, arg: &Path) -> PathBuf {
    if arg.is_absolute() && arg.starts_with(root) {
        arg.to_path_buf()
    } else {
        let rel = arg.strip_prefix("/").unwrap_or(arg);
        root.join(rel)
    }
}

/// Resolves a `--cgroup` argument to an existing cgroup v2 directory and its id.
///
/// Errors: [`Error::PolicyBadRule`] when it does not exist, is not a cgroup v2
/// directory, or is the root (port rules live there; the default CC covers the rest).
pub fn resolve_cgroup(arg: &Path) -> Result<(PathBuf, u64)> {
    let root = cgroup2_mount()?;
    let allowed = format!(
        "give a cgroup v2 directory below {} (absolute, or relative to it)",
        root.display()
    );
    // An existing absolute path outside the mount is judged as it is (a cgroup v1
    // directory, say); anything else is looked up in the cgroup2 mount.
    let cand = if arg.is_absolute() && !arg.starts_with(&root) && arg.exists() {
        arg.to_path_buf()
    } else {
        cgroup_candidate(&root, arg)
    };
    let canon = cand.canonicalize().map_err(|e| Error::PolicyBadRule {
        what: format!(
            "cgroup '{}' does not exist (looked for {}: {e})",
            arg.display(),
            cand.display()
        ),
        allowed: allowed.clone(),
    })?;
    if !is_cgroup2_dir(&canon) {
        return Err(Error::PolicyBadRule {
            what: format!(
                "'{}' is not a cgroup v2 directory (cgroup v1 hierarchies have no BPF programs)",
                canon.display()
            ),
            allowed,
        });
    }
    if canon == root.canonicalize().unwrap_or(root.clone()) {
        return Err(Error::PolicyBadRule {
            what: "a cgroup rule for the root cgroup would apply to every connection".into(),
            allowed: "set the default instead (`cctl default NAME`, per network namespace), \
                      or give a cgroup below the root"
                .into(),
        });
    }
    let id = std::fs::metadata(&canon)
        .map_err(|e| Error::io("reading cgroup", &canon, e))?
        .ino();
    Ok((canon, id))
}

fn check_port(port: u32) -> Result<u16> {
    if (1..=65535).contains(&port) {
        Ok(port as u16)
    } else {
        Err(Error::PolicyBadRule {
            what: format!("port {port} is out of range"),
            allowed: "ports are 1-65535".into(),
        })
    }
}

/// Refuses a CC name the kernel has not registered (the error lists what is).
fn check_cc(cc: &str) -> Result<()> {
    let available = kernel::available_ccs()?;
    if cc == "cdg" {
        return Err(Error::PolicyBadRule {
            what: "'cdg' cannot be set from BPF (the kernel refuses it: ENOTSUPP)".into(),
            allowed: format!("registered: {}", available.join(", ")),
        });
    }
    if !available.iter().any(|n| n == cc) {
        return Err(Error::PolicyUnknownCc {
            name: cc.into(),
            registered: available.join(", "),
        });
    }
    Ok(())
}

/// An exclusive lock on the policy state, held for one command.
struct Lock(#[allow(dead_code)] nix::fcntl::Flock<File>);

fn lock() -> Result<Lock> {
    std::fs::create_dir_all(META_DIR)
        .map_err(|e| Error::io("creating policy directory", META_DIR, e))?;
    let path = Path::new(META_DIR).join("lock");
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io("opening lock", &path, e))?;
    let l = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| Error::io("locking", &path, e.into()))?;
    Ok(Lock(l))
}

/// Refuses the policy's state directories (`/run/cctl-policy`,
/// `/sys/fs/bpf/cctl-policy`) when anyone but root could have planted or changed what is
/// in them ([`crate::security::check_trusted_dir`]); missing ones pass.
///
/// Errors: [`Error::Untrusted`] with its fix; [`Error::Io`].
pub fn check_trusted_state() -> Result<()> {
    crate::security::check_trusted_dir(Path::new(META_DIR), "the policy's metadata directory")?;
    crate::security::check_trusted_dir(Path::new(PIN_DIR), "the policy's pin directory")
}

/// The cgroup paths recorded for the rules (empty when none are), read through the trust
/// check ([`crate::security::read_record`]).
///
/// Errors: [`Error::Untrusted`], [`Error::Io`].
fn read_meta() -> Result<Meta> {
    Ok(
        crate::security::read_record(&meta_path(), "the policy's record of cgroup paths")?
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default(),
    )
}

fn write_meta(meta: &Meta) -> Result<()> {
    let path = meta_path();
    if meta.cgroups.is_empty() {
        let _ = std::fs::remove_file(&path);
        return Ok(());
    }
    let json = serde_json::to_vec_pretty(meta).expect("Meta serializes");
    std::fs::write(&path, json).map_err(|e| Error::io("writing policy metadata", path, e))
}

fn name_bytes(cc: &str) -> [i8; 16] {
    let mut out = [0i8; 16];
    crate::algo::write_name(&mut out, cc);
    out
}

fn rule_bytes(cc: &str) -> Vec<u8> {
    let r = policy_rule {
        cc: name_bytes(cc),
        ..Default::default()
    };
    // SAFETY: policy_rule is plain old data (impl above).
    unsafe { plain::as_bytes(&r) }.to_vec()
}

fn decode(bytes: &[u8]) -> Option<policy_rule> {
    let mut r = policy_rule::default();
    plain::copy_from_bytes(&mut r, bytes).ok()?;
    Some(r)
}

fn open_pinned(path: &Path) -> Result<Option<MapHandle>> {
    crate::security::check_pin(path, "a policy pin")?;
    if !path.exists() {
        return Ok(None);
    }
    MapHandle::from_pinned_path(path)
        .map(Some)
        .map_err(|e| Error::bpf(format!("opening pinned map {}", path.display()), e))
}

/// Whether the link pinned at `pin` still attaches a program to the cgroup with inode
/// `cgroup_id`: a cgroup link whose cgroup went away, or that `bpftool link detach` cut,
/// stays pinned but reports cgroup id 0 and attaches nothing. `false` also when the pin
/// is missing or not a cgroup link.
fn link_live(pin: &Path, cgroup_id: u64) -> bool {
    let Some(info) = kernel::pinned_link_info(pin) else {
        return false;
    };
    if info.type_ != libbpf_rs::libbpf_sys::BPF_LINK_TYPE_CGROUP {
        return false;
    }
    // SAFETY: a cgroup link's info fills the union's `cgroup` member.
    let attached_to = unsafe { info.__bindgen_anon_1.cgroup.cgroup_id };
    attached_to != 0 && attached_to == cgroup_id
}

/// The cgroup a rule's program attaches to, by inode (the cgroup id): the cgroup v2 root
/// for port rules.
fn attach_cgroup_id(dir: &Path) -> u64 {
    std::fs::metadata(dir).map_or(0, |m| m.ino())
}

fn key_port(port: u16) -> Vec<u8> {
    u32::from(port).to_ne_bytes().to_vec()
}

fn key_cgroup(id: u64) -> Vec<u8> {
    id.to_ne_bytes().to_vec()
}

/// Loads one program instance (`cgroup_id` 0 = port rules), reusing the pinned maps
/// or creating and pinning them, writes the rule (`key` in the instance's map),
/// attaches it to `cgroup_dir` and pins the link at `link_pin`. On any failure,
/// everything this call created (rule, maps, link) is removed again.
fn attach_instance(
    cgroup_id: u64,
    cgroup_dir: &Path,
    link_pin: &Path,
    key: &[u8],
    value: &[u8],
) -> Result<()> {
    let mut storage = MaybeUninit::uninit();
    let mut open = PolicySkelBuilder::default()
        .open(&mut storage)
        .map_err(|e| Error::bpf("opening the policy BPF object", e))?;
    open.maps
        .rodata_data
        .as_deref_mut()
        .expect("policy .rodata is memory-mapped")
        .rule_cgroup_id = cgroup_id;
    let (port_pin, cg_pin) = (port_map_pin(), cgroup_map_pin());
    let reuse_port = port_pin.exists();
    let reuse_cg = cg_pin.exists();
    if reuse_port {
        open.maps
            .port_rules
            .reuse_pinned_map(&port_pin)
            .map_err(|e| Error::bpf(format!("reusing {}", port_pin.display()), e))?;
    }
    if reuse_cg {
        open.maps
            .cgroup_rules
            .reuse_pinned_map(&cg_pin)
            .map_err(|e| Error::bpf(format!("reusing {}", cg_pin.display()), e))?;
    }
    let mut skel = open
        .load()
        .map_err(|e| Error::bpf("loading the policy program (verifier)", e))?;

    let mut pinned: Vec<PathBuf> = Vec::new();
    let undo = |pinned: &[PathBuf]| {
        for p in pinned {
            let _ = std::fs::remove_file(p);
        }
    };
    if !reuse_port {
        if let Err(e) = skel.maps.port_rules.pin(&port_pin) {
            return Err(Error::bpf(format!("pinning {}", port_pin.display()), e));
        }
        pinned.push(port_pin.clone());
    }
    if !reuse_cg {
        if let Err(e) = skel.maps.cgroup_rules.pin(&cg_pin) {
            undo(&pinned);
            return Err(Error::bpf(format!("pinning {}", cg_pin.display()), e));
        }
        pinned.push(cg_pin.clone());
    }
    let map = if cgroup_id == 0 {
        &skel.maps.port_rules
    } else {
        &skel.maps.cgroup_rules
    };
    if let Err(e) = map.update(key, value, MapFlags::ANY) {
        undo(&pinned);
        return Err(Error::bpf("writing the rule", e));
    }
    let result = (|| {
        let cg = File::open(cgroup_dir).map_err(|e| Error::io("opening cgroup", cgroup_dir, e))?;
        let mut link = skel
            .progs
            .cctl_policy
            .attach_cgroup(cg.as_raw_fd())
            .map_err(|e| {
                Error::bpf(
                    format!("attaching the policy program to {}", cgroup_dir.display()),
                    e,
                )
            })?;
        // Dropping `link` unpinned (on error) detaches the program again.
        link.pin(link_pin)
            .map_err(|e| Error::bpf(format!("pinning the link at {}", link_pin.display()), e))
    })();
    if let Err(e) = result {
        let _ = map.delete(key);
        undo(&pinned);
        return Err(e);
    }
    Ok(())
}

/// Adds a rule (or replaces the rule for the same port or cgroup): new connections
/// that match get congestion control `cc`.
///
/// Everything is checked before anything changes: `cc` must be registered in the kernel
/// (the error lists what is), a port must be 1-65535, a cgroup must be an existing cgroup
/// v2 directory below the root. If attaching fails, no rule, map or link is left.
///
/// Errors: [`Error::PolicyBadRule`], [`Error::PolicyUnknownCc`], [`Error::NotPrivileged`],
/// [`Error::MissingFeature`], [`Error::Untrusted`] ([`check_trusted_state`]),
/// [`Error::Bpf`] (verifier, attach), [`Error::Io`].
pub fn add(spec: &RuleSpec, cc: &str) -> Result<Added> {
    let target = match spec {
        RuleSpec::Port(p) => Target::Port {
            port: check_port(*p)?,
        },
        RuleSpec::Cgroup(arg) => {
            let (path, id) = resolve_cgroup(arg)?;
            Target::Cgroup {
                path,
                id,
                exists: true,
            }
        }
    };
    crate::catalogue::validate_cc_name(cc).map_err(|_| Error::PolicyUnknownCc {
        name: cc.into(),
        registered: kernel::available_ccs().unwrap_or_default().join(", "),
    })?;
    check_cc(cc)?;
    kernel::require_privileges(&format!("adding a policy for {target}"))?;
    kernel::require_btf()?;
    kernel::ensure_bpffs()?;
    check_trusted_state()?;
    let _lock = lock()?;
    std::fs::create_dir_all(PIN_DIR)
        .map_err(|e| Error::io("creating pin directory", PIN_DIR, e))?;

    let value = rule_bytes(cc);
    let (key, map_pin, link_pin, cgroup_dir, cgroup_id) = match &target {
        Target::Port { port } => (
            key_port(*port),
            port_map_pin(),
            port_link_pin(),
            cgroup2_mount()?,
            0,
        ),
        Target::Cgroup { path, id, .. } => (
            key_cgroup(*id),
            cgroup_map_pin(),
            cgroup_link_pin(*id),
            path.clone(),
            *id,
        ),
    };
    let mut replaced = None;
    // A pinned link that attaches nothing any more (its cgroup went away, or it was
    // detached) is replaced: writing the rule into the map alone would do nothing.
    let live = link_live(&link_pin, attach_cgroup_id(&cgroup_dir));
    if !live && link_pin.exists() {
        std::fs::remove_file(&link_pin)
            .map_err(|e| Error::io("removing the stale policy link pin", &link_pin, e))?;
    }
    match open_pinned(&map_pin)? {
        Some(map) if live => {
            if let Some(old) = map
                .lookup(&key, MapFlags::ANY)
                .map_err(|e| Error::bpf("reading the rule map", e))?
            {
                replaced = decode(&old).map(|r| crate::algo::read_name(&r.cc));
            }
            map.update(&key, &value, MapFlags::ANY).map_err(|e| {
                let full = map.keys().count() >= MAX_RULES;
                Error::bpf(
                    if full {
                        format!("writing the rule (the map holds at most {MAX_RULES} rules)")
                    } else {
                        "writing the rule".into()
                    },
                    e,
                )
            })?;
        }
        _ => {
            let result = attach_instance(cgroup_id, &cgroup_dir, &link_pin, &key, &value);
            if let Err(e) = result {
                cleanup_if_empty();
                return Err(e);
            }
        }
    }
    if let Err(e) = crate::faults::step("policy.add.after-attach") {
        if replaced.is_none() {
            let _ = remove_locked(&target);
        }
        return Err(e);
    }
    if let Target::Cgroup { path, id, .. } = &target {
        let mut meta = read_meta()?;
        meta.cgroups.insert(*id, path.clone());
        if let Err(e) = write_meta(&meta) {
            if replaced.is_none() {
                let _ = remove_locked(&target);
            }
            return Err(e);
        }
    }
    Ok(Added {
        target,
        cc: cc.into(),
        replaced,
    })
}

fn errno_text(err: i64) -> String {
    let errno = nix::errno::Errno::from_raw((-err) as i32);
    let hint = match errno {
        nix::errno::Errno::ENOENT => " (cc not registered)",
        nix::errno::Errno::EPERM => " (route locks the CC: `ip route ... congctl lock`)",
        _ => "",
    };
    format!("{errno:?}: {}{hint}", errno.desc())
}

fn to_rule(target: Target, r: &policy_rule, available: &[String], attached: bool) -> Rule {
    let cc = crate::algo::read_name(&r.cc);
    Rule {
        cc_registered: available.contains(&cc),
        target,
        cc,
        applied: r.applied,
        kept: r.kept,
        failed: r.failed,
        last_error: (r.last_err != 0).then(|| errno_text(r.last_err)),
        attached,
    }
}

/// Every rule, port rules first (by port), then cgroup rules (by path), with counters.
///
/// Errors: [`Error::Untrusted`] ([`check_trusted_state`], a planted pin or record),
/// [`Error::Bpf`] when a pinned map cannot be read (not root: [`Error::NotPrivileged`]).
pub fn list() -> Result<Vec<Rule>> {
    check_trusted_state()?;
    if !Path::new(PIN_DIR).exists() {
        return Ok(Vec::new());
    }
    kernel::require_privileges("reading the policy maps")?;
    let available = kernel::available_ccs().unwrap_or_default();
    let mut out = Vec::new();
    if let Some(map) = open_pinned(&port_map_pin())? {
        let attached = cgroup2_mount()
            .map(|root| link_live(&port_link_pin(), attach_cgroup_id(&root)))
            .unwrap_or(false);
        for key in map.keys() {
            let Ok(kb) = <[u8; 4]>::try_from(key.as_slice()) else {
                continue;
            };
            let port = u32::from_ne_bytes(kb) as u16;
            if let Some(r) = map
                .lookup(&key, MapFlags::ANY)
                .map_err(|e| Error::bpf("reading port_rules", e))?
                .and_then(|v| decode(&v))
            {
                out.push(to_rule(Target::Port { port }, &r, &available, attached));
            }
        }
    }
    let meta = read_meta()?;
    if let Some(map) = open_pinned(&cgroup_map_pin())? {
        for key in map.keys() {
            let Ok(kb) = <[u8; 8]>::try_from(key.as_slice()) else {
                continue;
            };
            let id = u64::from_ne_bytes(kb);
            let path = meta
                .cgroups
                .get(&id)
                .cloned()
                .unwrap_or_else(|| PathBuf::from(format!("?(cgroup id {id})")));
            let exists = std::fs::metadata(&path).is_ok_and(|m| m.ino() == id);
            if let Some(r) = map
                .lookup(&key, MapFlags::ANY)
                .map_err(|e| Error::bpf("reading cgroup_rules", e))?
                .and_then(|v| decode(&v))
            {
                let attached = link_live(&cgroup_link_pin(id), id);
                out.push(to_rule(
                    Target::Cgroup { path, id, exists },
                    &r,
                    &available,
                    attached,
                ));
            }
        }
    }
    out.sort_by(|a, b| match (&a.target, &b.target) {
        (Target::Port { port: x }, Target::Port { port: y }) => x.cmp(y),
        (Target::Port { .. }, _) => std::cmp::Ordering::Less,
        (_, Target::Port { .. }) => std::cmp::Ordering::Greater,
        (Target::Cgroup { path: x, .. }, Target::Cgroup { path: y, .. }) => x.cmp(y),
    });
    Ok(out)
}

/// The rules that set congestion control `cc_name` (so that `cctl unload` can refuse
/// to unload a CC a policy still names, or name the rules to remove first).
///
/// Errors: as [`list`].
pub fn rules_using(cc_name: &str) -> Result<Vec<Rule>> {
    Ok(list()?.into_iter().filter(|r| r.cc == cc_name).collect())
}

fn rules_summary(rules: &[Rule]) -> String {
    if rules.is_empty() {
        "there are no policy rules".into()
    } else {
        let items: Vec<String> = rules
            .iter()
            .map(|r| format!("{} → {}", r.target, r.cc))
            .collect();
        format!("rules: {}", items.join(", "))
    }
}

/// Removes pins and metadata once no rule is left (the programs are detached when
/// their link pins go).
fn cleanup_if_empty() {
    let count = |p: PathBuf| {
        open_pinned(&p)
            .ok()
            .flatten()
            .map(|m| m.keys().count())
            .unwrap_or(0)
    };
    if count(port_map_pin()) == 0 {
        let _ = std::fs::remove_file(port_link_pin());
    }
    if count(port_map_pin()) == 0 && count(cgroup_map_pin()) == 0 {
        if let Ok(dir) = std::fs::read_dir(PIN_DIR) {
            for e in dir.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
        let _ = std::fs::remove_dir(PIN_DIR);
        let _ = std::fs::remove_file(meta_path());
    }
}

/// Removes one rule; the caller holds the lock. Returns false if there was none.
fn remove_locked(target: &Target) -> Result<bool> {
    let (map_pin, key) = match target {
        Target::Port { port } => (port_map_pin(), key_port(*port)),
        Target::Cgroup { id, .. } => (cgroup_map_pin(), key_cgroup(*id)),
    };
    let Some(map) = open_pinned(&map_pin)? else {
        return Ok(false);
    };
    let present = map
        .lookup(&key, MapFlags::ANY)
        .map_err(|e| Error::bpf("reading the rule map", e))?
        .is_some();
    if !present {
        return Ok(false);
    }
    if let Target::Cgroup { id, .. } = target {
        let link = cgroup_link_pin(*id);
        if link.exists() {
            std::fs::remove_file(&link).map_err(|e| Error::io("removing pinned link", &link, e))?;
        }
        let mut meta = read_meta()?;
        meta.cgroups.remove(id);
        write_meta(&meta)?;
    }
    crate::faults::step("policy.remove.after-unpin")?;
    map.delete(&key)
        .map_err(|e| Error::bpf("deleting the rule", e))?;
    cleanup_if_empty();
    Ok(true)
}

/// Removes the rule for a port or cgroup; when the last rule goes, every program is
/// detached and the pins are removed.
///
/// Errors: [`Error::PolicyNoSuchRule`] (listing the rules) when there is no such rule,
/// [`Error::PolicyBadRule`] for a port out of range, [`Error::NotPrivileged`],
/// [`Error::Bpf`], [`Error::Io`].
pub fn remove(spec: &RuleSpec) -> Result<Rule> {
    kernel::require_privileges("removing a policy rule")?;
    let rules = list()?;
    let found = match spec {
        RuleSpec::Port(p) => {
            let port = check_port(*p)?;
            rules
                .iter()
                .find(|r| r.target == Target::Port { port })
                .cloned()
        }
        RuleSpec::Cgroup(arg) => {
            let by_id = resolve_cgroup(arg).ok().map(|(_, id)| id);
            let text = cgroup2_mount()
                .map(|root| cgroup_candidate(&root, arg))
                .ok();
            rules
                .iter()
                .find(|r| match &r.target {
                    Target::Cgroup { path, id, .. } => {
                        Some(*id) == by_id || Some(path) == text.as_ref()
                    }
                    _ => false,
                })
                .cloned()
        }
    };
    let what = match spec {
        RuleSpec::Port(p) => format!("port {p}"),
        RuleSpec::Cgroup(p) => format!("cgroup {}", p.display()),
    };
    let Some(rule) = found else {
        return Err(Error::PolicyNoSuchRule {
            what,
            rules: rules_summary(&rules),
        });
    };
    let _lock = lock()?;
    if !remove_locked(&rule.target)? {
        return Err(Error::PolicyNoSuchRule {
            what,
            rules: rules_summary(&list()?),
        });
    }
    Ok(rule)
}

/// Removes every rule, detaches every policy program and removes all pins and
/// metadata (also what a crashed command may have left half-made).
///
/// Errors: [`Error::NotPrivileged`], [`Error::Bpf`], [`Error::Io`].
pub fn remove_all() -> Result<Vec<Rule>> {
    kernel::require_privileges("removing the policy rules")?;
    let rules = list()?;
    let _lock = lock()?;
    if let Ok(dir) = std::fs::read_dir(PIN_DIR) {
        for e in dir.flatten() {
            std::fs::remove_file(e.path())
                .map_err(|err| Error::io("removing pin", e.path(), err))?;
        }
    }
    if Path::new(PIN_DIR).exists() {
        std::fs::remove_dir(PIN_DIR).map_err(|e| Error::io("removing", PIN_DIR, e))?;
    }
    let _ = std::fs::remove_file(meta_path());
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_outside_1_to_65535_are_refused() {
        assert!(check_port(0).is_err());
        assert!(check_port(70000).is_err());
        assert_eq!(check_port(1).unwrap(), 1);
        assert_eq!(check_port(65535).unwrap(), 65535);
        let msg = check_port(0).unwrap_err().to_string();
        assert!(msg.contains("1-65535"), "{msg}");
    }

    #[test]
    fn cgroup_arguments_are_taken_relative_to_the_mount_unless_inside_it() {
        let root = Path::new("/sys/fs/cgroup");
        assert_eq!(
            cgroup_candidate(root, Path::new("/sys/fs/cgroup/a/b")),
            PathBuf::from("/sys/fs/cgroup/a/b")
        );
        assert_eq!(
            cgroup_candidate(root, Path::new("/system.slice/x.service")),
            PathBuf::from("/sys/fs/cgroup/system.slice/x.service")
        );
        assert_eq!(
            cgroup_candidate(root, Path::new("a/b")),
            PathBuf::from("/sys/fs/cgroup/a/b")
        );
    }

    #[test]
    fn a_rule_value_round_trips_its_name() {
        let bytes = rule_bytes("bpf_htcp");
        assert_eq!(bytes.len(), std::mem::size_of::<policy_rule>());
        let r = decode(&bytes).unwrap();
        assert_eq!(crate::algo::read_name(&r.cc), "bpf_htcp");
        assert_eq!((r.applied, r.kept, r.failed, r.last_err), (0, 0, 0, 0));
        // 15 characters is the kernel's limit; the 16th byte stays NUL.
        let long = rule_bytes("abcdefghijklmnop");
        assert_eq!(
            crate::algo::read_name(&decode(&long).unwrap().cc),
            "abcdefghijklmno"
        );
    }

    #[test]
    fn the_rule_struct_is_the_size_the_bpf_program_uses() {
        // char[16] + 4 × 8-byte counters, no padding.
        assert_eq!(std::mem::size_of::<policy_rule>(), 16 + 4 * 8);
    }

    #[test]
    fn errors_name_enoent_as_an_unregistered_cc() {
        let t = errno_text(-2);
        assert!(t.starts_with("ENOENT"), "{t}");
        assert!(t.contains("not registered"), "{t}");
    }
}
