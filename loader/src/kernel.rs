//! Kernel feature probes and the TCP congestion-control sysctls.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Where the kernel lists registered congestion controls.
pub const AVAILABLE_CC: &str = "/proc/sys/net/ipv4/tcp_available_congestion_control";
/// Where the kernel keeps the default congestion control of this network namespace.
pub const DEFAULT_CC: &str = "/proc/sys/net/ipv4/tcp_congestion_control";
/// The BPF file system mount point.
pub const BPFFS: &str = "/sys/fs/bpf";
const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";
/// Overrides where the kernel's BTF is looked for (tests use it to play a kernel
/// without BTF).
pub const BTF_PATH_ENV: &str = "CCTL_VMLINUX_BTF";

fn vmlinux_btf() -> PathBuf {
    std::env::var_os(BTF_PATH_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(VMLINUX_BTF))
}
const BPF_FS_MAGIC: i64 = 0xcafe4a11;

const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;
const CAP_BPF: u32 = 39;

fn effective_caps() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Fails with [`Error::NotPrivileged`] unless the process may load and register
/// BPF congestion controls (CAP_BPF or CAP_SYS_ADMIN, plus CAP_NET_ADMIN).
pub fn require_privileges(action: &str) -> Result<()> {
    let caps = effective_caps();
    let has = |c: u32| caps & (1u64 << c) != 0;
    if (has(CAP_BPF) || has(CAP_SYS_ADMIN)) && has(CAP_NET_ADMIN) {
        Ok(())
    } else {
        Err(Error::NotPrivileged {
            action: action.into(),
        })
    }
}

/// Fails unless the kernel exposes its BTF (CONFIG_DEBUG_INFO_BTF), which
/// struct_ops, tp_btf and CO-RE all need.
pub fn require_btf() -> Result<()> {
    let path = vmlinux_btf();
    if path.exists() {
        Ok(())
    } else {
        Err(Error::MissingFeature {
            feature: format!("BTF ({})", path.display()),
            hint: "rebuild the kernel with CONFIG_DEBUG_INFO_BTF=y".into(),
        })
    }
}

/// Fails unless the kernel supports BPF `tcp_congestion_ops` registered through
/// struct_ops links (Linux >= 6.4), probed in the kernel's BTF.
pub fn require_struct_ops_links() -> Result<()> {
    require_btf()?;
    let path = vmlinux_btf();
    let btf = libbpf_rs::btf::Btf::from_path(&path)
        .map_err(|e| Error::bpf(format!("reading {}", path.display()), e))?;
    let has = |name: &str| {
        btf.type_by_name::<libbpf_rs::btf::types::Struct<'_>>(name)
            .is_some()
    };
    if !has("bpf_struct_ops_tcp_congestion_ops") && !has("tcp_congestion_ops") {
        return Err(Error::MissingFeature {
            feature: "tcp_congestion_ops struct_ops".into(),
            hint: "needs CONFIG_BPF_JIT and CONFIG_INET with BPF struct_ops (Linux >= 5.6)".into(),
        });
    }
    if !has("bpf_struct_ops_link") {
        return Err(Error::MissingFeature {
            feature: "struct_ops links (bpf_struct_ops_link)".into(),
            hint: "cctl registers algorithms through links, which need Linux >= 6.4".into(),
        });
    }
    Ok(())
}

/// Fails with [`Error::MissingFeature`] naming the first of `kfuncs` (functions a
/// BPF congestion control of `algo` calls) that the running kernel's BTF lacks.
pub fn require_kfuncs(algo: &str, kfuncs: &[String]) -> Result<()> {
    require_btf()?;
    let path = vmlinux_btf();
    let btf = libbpf_rs::btf::Btf::from_path(&path)
        .map_err(|e| Error::bpf(format!("reading {}", path.display()), e))?;
    let missing: Vec<&str> = kfuncs
        .iter()
        .map(String::as_str)
        .filter(|f| {
            btf.type_by_name::<libbpf_rs::btf::types::Func<'_>>(f)
                .is_none()
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::MissingFeature {
        feature: format!("the kfunc(s) {} that {algo} calls", missing.join(", ")),
        hint: "they are exported to BPF congestion controls by net/ipv4/bpf_tcp_ca.c \
               (Linux >= 5.13 for the Reno helpers); use a newer kernel or another algorithm"
            .into(),
    })
}

/// Makes sure a BPF file system is mounted at [`BPFFS`], mounting one if not.
///
/// Mounts one only in the mount namespace of PID 1: one mounted in another (a service's
/// private namespace, `unshare -m`) would vanish with that namespace and take every pin
/// in it along, unregistering what cctl loaded the moment the namespace ends.
///
/// Errors: [`Error::MissingFeature`] (none mounted, and this is not PID 1's mount
/// namespace: what to mount where); [`Error::Io`] (the mount failed).
pub fn ensure_bpffs() -> Result<()> {
    // f_type is i64 on x86_64 glibc but narrower elsewhere.
    #[allow(clippy::unnecessary_cast)]
    let is_bpffs = nix::sys::statfs::statfs(BPFFS)
        .map(|s| s.filesystem_type().0 as i64 == BPF_FS_MAGIC)
        .unwrap_or(false);
    if is_bpffs {
        return Ok(());
    }
    if !in_init_mount_namespace() {
        return Err(Error::MissingFeature {
            feature: format!("a BPF file system at {BPFFS} in this mount namespace"),
            hint: "one cctl mounted here would vanish with the namespace and unregister what \
                   it pinned; mount it where it outlives cctl (`mount -t bpf bpf /sys/fs/bpf` \
                   in the host's mount namespace, a hostPath volume in a container)"
                .into(),
        });
    }
    std::fs::create_dir_all(BPFFS)
        .map_err(|e| Error::io("creating bpffs mount point", BPFFS, e))?;
    nix::mount::mount(
        Some("bpf"),
        BPFFS,
        Some("bpf"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|e| Error::io("mounting bpffs", BPFFS, e.into()))
}

/// Whether this process shares PID 1's mount namespace: the same namespace inode, or
/// where PID 1's namespace link may not be read (a sandbox), the same mount at `/` (a
/// mount belongs to one namespace; a copied namespace gets new mount IDs). True when
/// neither can be read.
fn in_init_mount_namespace() -> bool {
    use std::os::unix::fs::MetadataExt;
    let ns = |p: &str| std::fs::metadata(p).map(|m| (m.dev(), m.ino())).ok();
    if let (Some(me), Some(init)) = (ns("/proc/self/ns/mnt"), ns("/proc/1/ns/mnt")) {
        return me == init;
    }
    let root_mount_id = |p: &str| {
        std::fs::read_to_string(p).ok().and_then(|t| {
            t.lines()
                .map(|l| l.split(' ').collect::<Vec<_>>())
                .find(|f| f.get(4) == Some(&"/"))
                .and_then(|f| f.first().map(|id| id.to_string()))
        })
    };
    match (
        root_mount_id("/proc/self/mountinfo"),
        root_mount_id("/proc/1/mountinfo"),
    ) {
        (Some(me), Some(init)) => me == init,
        _ => true,
    }
}

fn read_trimmed(path: &str) -> Result<String> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| Error::io("reading", path, e))
}

/// Congestion controls registered in the kernel, in its order.
pub fn available_ccs() -> Result<Vec<String>> {
    Ok(read_trimmed(AVAILABLE_CC)?
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// The default congestion control of the calling thread's network namespace.
pub fn default_cc() -> Result<String> {
    read_trimmed(DEFAULT_CC)
}

/// Sets the default congestion control of the calling thread's network namespace.
/// The name must be registered.
pub fn set_default_cc(name: &str) -> Result<()> {
    std::fs::write(DEFAULT_CC, name)
        .map_err(|e| Error::io(format!("setting default to '{name}'"), DEFAULT_CC, e))
}

/// Path of a native module `tcp_<name>` for the running kernel, if one is on disk
/// (registering a BPF algorithm under its name would make `modprobe` fail later).
pub fn native_module(name: &str) -> Option<PathBuf> {
    let release = nix::sys::utsname::uname()
        .ok()?
        .release()
        .to_string_lossy()
        .into_owned();
    let dir = PathBuf::from("/lib/modules")
        .join(release)
        .join("kernel/net/ipv4");
    let stem = format!("tcp_{name}.ko");
    std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(&stem))
        })
}

/// The running kernel's release string (`uname -r`).
pub fn release() -> String {
    nix::sys::utsname::uname()
        .map(|u| u.release().to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into())
}

/// The kernel's information about the BPF link pinned at `pin` (`bpf_link_get_info_by_fd`):
/// its type and, in the union, what it attaches (a cgroup link's cgroup id, a struct_ops
/// link's map id). `None` when the pin is missing, not a link, or cannot be read.
pub fn pinned_link_info(pin: &Path) -> Option<libbpf_rs::libbpf_sys::bpf_link_info> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let c = std::ffi::CString::new(pin.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: `c` is a valid NUL-terminated path for the call.
    let fd = unsafe { libbpf_rs::libbpf_sys::bpf_obj_get(c.as_ptr()) };
    if fd < 0 {
        return None;
    }
    // SAFETY: bpf_obj_get returned a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut info = libbpf_rs::libbpf_sys::bpf_link_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is a bpf_link_info of `len` bytes the kernel fills.
    let rc = unsafe {
        libbpf_rs::libbpf_sys::bpf_link_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len)
    };
    (rc == 0).then_some(info)
}
