//! Runs shell scripts inside a virtme-ng guest booted from Debian's 6.12 kernel, for netem
//! scenarios on hosts whose running kernel has no `sch_netem`.
//!
//! [`netem_available`] tells whether the running kernel can attach netem; where it cannot,
//! [`run_in_vm`] boots the kernel [`find_guest_kernel`] finds (Debian bookworm-backports'
//! `linux-image-amd64`, generic flavour: it has 9p) with virtme-ng and runs a script there:
//!
//! ```text
//! vng --run=/boot/vmlinuz-6.12.95+deb12-amd64 --disable-kvm --cpus=2 --memory=2048M
//!     --append=modprobe.blacklist=kvm_amd,... --rwdir=/tmp/cctl-vm-<pid>-<n> [--rwdir=DIR...]
//!     --exec=": >/tmp/cctl-vm-<pid>-<n>/started; (dmesg -w >/tmp/cctl-vm-<pid>-<n>/kmsg &); bash '/tmp/cctl-vm-<pid>-<n>/script.sh' </dev/null >>.../stdout 2>>.../stderr; echo $? >'/tmp/cctl-vm-<pid>-<n>/status'"
//! ```
//!
//! `--disable-kvm` is there only when [`choose_accel`] picked [`Accel::Tcg`]. `make vm-deps`
//! (`scripts/install-vm-deps.sh`) installs the kernel, QEMU, busybox-static, zstd and `vng`.
//!
//! A spec with [`VmSpec::sealed`] boots another way: QEMU directly, from an initramfs that
//! carries what the script needs, with no file system shared with the host (see
//! [`Sealed`]); its output, status and results come back the same way to the caller.
//!
//! # How the script runs and how its status comes back
//! The script is written to a fresh per-run directory on the host, shared read-write with
//! the guest (`--rwdir`), and run there by `bash`; the guest writes its exit status to a
//! file in the same directory. (vng passes `--exec` on the kernel command line, base64
//! encoded, which the kernel caps at 2048 bytes in all: a file has no such limit.) vng itself
//! propagates the guest command's exit status too, but answers 255 both for a script that
//! exited 255 and for a guest that died (kernel panic, QEMU failure); the status file tells
//! them apart: no file means the script never finished, reported as [`VmError::NoExitStatus`].
//! The `started` mark tells a guest that died while booting (booted again: the script has
//! not run) from one that died running the script.
//! The script's stdout and stderr go to files in the same directory, which the host follows
//! as they grow (copying them to its own when [`VmSpec::echo`] is set), and come back in
//! [`VmOutput`], followed by what vng printed (QEMU's and vng's own complaints). Not vng's
//! virtio-serial ports: on the virtual clock its init can start the script before udev has
//! made them, and the output is then lost. The guest's
//! kernel log does not go to the console (that is /dev/null): `dmesg -w` copies it into the
//! run directory as it is written, and a guest that dies or times out has its last lines
//! in the error ([`VmError::NoExitStatus`], [`VmError::Timeout`]).
//!
//! vng hands QEMU `/proc/self/fd/1` and `/proc/self/fd/2` as output files, which QEMU
//! reopens with `O_TRUNC`: when the caller's stdout is a regular file, the guest's output
//! overwrites it from offset 0. [`run_in_vm`] captures through pipes, which do not suffer
//! this; a shell user should pipe `vng ... | cat` rather than redirect to a file.
//!
//! # What the guest sees (measured with vng 1.42, QEMU 7.2, Debian kernel 6.12.95)
//! - **The host's root file system, read-only** (9p), with throw-away tmpfs overlays on
//!   `/etc`, `/usr`, `/lib`, `/home`, `/opt`, `/srv`, `/var`, `/tmp` (host files visible,
//!   writes stay in the guest). Host-built binaries run unchanged, e.g.
//!   `/work/main/target/debug/cctl`; writes elsewhere under `/` fail with EROFS, so results
//!   must go to a `--rwdir` ([`VmSpec::rwdirs`]). The guest runs as the calling user (root
//!   for root), in the caller's working directory.
//! - **`/run` is a writable tmpfs**, so `ip netns add` works (it needs `/run/netns`).
//! - **bpffs mounts**: `mount -t bpf bpf /sys/fs/bpf` works; it is not mounted at boot.
//!   `/sys/kernel/btf/vmlinux` is there.
//! - **Modules load**: `modprobe sch_netem tcp_htcp` succeeds (the modules come from the
//!   host's `/lib/modules/6.12.*`, installed with the kernel package); netem attaches to a
//!   veth inside a netns.
//! - **BPF struct_ops loads**: the host-built `cctl load htcp` printed `loaded htcp as
//!   'bpf_htcp' (pinned at /sys/fs/bpf/cctl/bpf_htcp); ...` and
//!   `tcp_available_congestion_control` became `reno cubic htcp bpf_htcp`: the CO-RE object
//!   built against the host's 6.18 BTF registers on 6.12, next to the native `htcp`.
//! - **Boot cost**: under TCG (2 vCPUs, 2 GiB, 2-core host) boot + a trivial script + shutdown
//!   took 18-23 s wall in [`run_in_vm`] (four runs; vng prepares its initramfs in ~3 s of
//!   that), more while other builds load the host. Without [`GUEST_MODULE_BLACKLIST`], udev's
//!   coldplug spent 10-25 s more loading hardware modules under emulation (30-40 s in all).
//! - **KVM**: on these machines `/dev/kvm` opens, but a KVM guest dies at once (QEMU:
//!   "failed to set MSR 0x10a", nested virtualisation), so [`choose_accel`] falls back to TCG
//!   after a 4-7 s probe and remembers that in [`ACCEL_CACHE`] until the next host boot.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

mod sealed;
pub use sealed::{Carried, Sealed, GUEST_CCTL, GUEST_IN, GUEST_OUT, RTC_BASE};

/// QEMU's program, which a sealed guest ([`Sealed`]) runs directly.
const QEMU: &str = "qemu-system-x86_64";

/// Environment variable naming the guest kernel image, overriding [`find_guest_kernel`]'s search.
pub const KERNEL_ENV: &str = "CCTL_VM_KERNEL";

/// Environment variable choosing the accelerator: `kvm`, `tcg` or `auto` (the default).
pub const ACCEL_ENV: &str = "CCTL_VM_ACCEL";

/// QEMU's `-icount shift` of the virtual clock ([`Clock::Virtual`]): 2^shift ns of guest
/// time per guest instruction (0: 1 ns, a 1 GHz machine that does one instruction a cycle).
pub const ICOUNT_SHIFT: u32 = 0;

/// Environment variable [`run_in_vm`] sets for the guest's script: the clock the guest
/// runs on, as `clock=<virtual|real> accel=<tcg|kvm> vcpus=<n> memory_mb=<MiB>`, with
/// ` icount_shift=<k>` on the virtual clock ([`VmSpec::clock_env`]), and ` qemu=<version>`
/// ([`qemu_version`], spaces as `_`). What runs in the
/// guest records it with its results.
pub const GUEST_CLOCK_ENV: &str = "CCTL_GUEST_CLOCK";

/// The clock a guest's time follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// QEMU's virtual clock, TCG only (`-icount shift=`[`ICOUNT_SHIFT`]`,sleep=off`): guest
    /// time advances with the instructions the guest executes and skips its idle time, so
    /// the guest sees a fast machine whose clock never runs ahead of its work, and what it
    /// measures does not depend on how busy the host is. Every vCPU runs round-robin on
    /// one host thread.
    Virtual,
    /// The host's real clock: the guest's work takes the host's time, so an emulated CPU
    /// that cannot keep up (TCG, above about 50 Mbit/s) or a busy host shows in the results.
    Real,
}

impl Clock {
    /// The names of the clocks, as the command line takes them.
    pub const NAMES: [&'static str; 2] = ["virtual", "real"];

    /// `virtual` or `real`.
    pub fn as_str(self) -> &'static str {
        match self {
            Clock::Virtual => Self::NAMES[0],
            Clock::Real => Self::NAMES[1],
        }
    }
}

impl std::str::FromStr for Clock {
    type Err = String;

    fn from_str(s: &str) -> Result<Clock, String> {
        match s {
            "virtual" => Ok(Clock::Virtual),
            "real" => Ok(Clock::Real),
            _ => Err(format!(
                "unknown clock {s:?}: expected one of {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl fmt::Display for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where [`choose_accel`] remembers its auto-detected verdict for the current host boot
/// (`/run` is a tmpfs, emptied at boot; the file also records the boot id).
pub const ACCEL_CACHE: &str = "/run/cctl/vm-accel";

/// Kernel modules the guest must not auto-load (passed as `modprobe.blacklist=`). udev's
/// coldplug would load them for QEMU's emulated hardware (AHCI, CD-ROM, TCO watchdog, PC
/// speaker, PS/2 mouse, KVM) and for `-cpu max` features (AES-NI, CLMUL, SHA), costing
/// ~25 s of boot under TCG for nothing a network test uses. Only alias-driven loads are
/// blocked; an explicit `modprobe NAME` still works.
pub const GUEST_MODULE_BLACKLIST: &[&str] = &[
    "kvm_amd",
    "kvm_intel",
    "kvm",
    "irqbypass",
    "ccp",
    "sr_mod",
    "cdrom",
    "sg",
    "iTCO_wdt",
    "iTCO_vendor_support",
    "intel_pmc_bxt",
    "lpc_ich",
    "i2c_i801",
    "i2c_smbus",
    "ahci",
    "libahci",
    "libata",
    "crct10dif_pclmul",
    "crc32_pclmul",
    "crc32c_intel",
    "ghash_clmulni_intel",
    "sha1_ssse3",
    "sha256_ssse3",
    "sha512_ssse3",
    "aesni_intel",
    "gf128mul",
    "crypto_simd",
    "cryptd",
    "psmouse",
    "serio_raw",
    "evdev",
    "pcspkr",
    "button",
    "joydev",
    "floppy",
];

/// Guest kernel images [`find_guest_kernel`] looks for: `/boot/<prefix>*<suffix>`.
const KERNEL_DIR: &str = "/boot";
const KERNEL_PREFIX: &str = "vmlinuz-6.12";
const KERNEL_SUFFIX: &str = "-amd64";

/// How long the KVM probe boot may take before KVM is declared unusable.
const KVM_PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// How often [`run_in_vm`] checks whether vng has exited.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Why a VM could not be run, or did not finish its script.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// The caller's cancel flag was raised (Ctrl-C); the VM was killed.
    #[error("interrupted: the VM was stopped")]
    Cancelled {
        /// What the script printed on stdout before it was stopped.
        stdout: String,
        /// What the script, vng and QEMU printed on stderr before they were stopped.
        stderr: String,
    },
    /// A program the VM runner needs is not installed.
    #[error("`{tool}` not found ({package}); run `make vm-deps` (as root) to install it")]
    MissingTool {
        /// The command that was looked for, e.g. `qemu-system-x86_64`.
        tool: &'static str,
        /// Where it comes from, e.g. `Debian package qemu-system-x86`.
        package: &'static str,
    },
    /// No 6.12 guest kernel image in /boot.
    #[error(
        "no guest kernel {KERNEL_DIR}/{KERNEL_PREFIX}*{KERNEL_SUFFIX} (Debian package \
         linux-image-amd64 from bookworm-backports, the generic flavour, not -cloud); run \
         `make vm-deps` (as root), or name a kernel image in {KERNEL_ENV}"
    )]
    NoGuestKernel,
    /// The virtual clock was asked for where `$CCTL_VM_ACCEL` forces KVM.
    #[error(
        "the virtual clock (QEMU -icount) needs TCG, and {ACCEL_ENV}=kvm forces KVM: unset \
         {ACCEL_ENV} (or set it to tcg) for --clock virtual, or use --clock real to run \
         under KVM"
    )]
    ClockNeedsTcg,
    /// `CCTL_VM_KERNEL` names a file that does not exist.
    #[error("{KERNEL_ENV}={} does not exist", .0.display())]
    KernelNotFound(PathBuf),
    /// A directory to share with the guest is unusable.
    #[error("cannot share {} with the guest: {reason}", .path.display())]
    BadRwdir {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The guest did not finish the script within [`VmSpec::timeout`]; QEMU was killed.
    #[error(
        "the VM did not finish within {} s; QEMU was killed{}{}",
        .timeout.as_secs(),
        stderr_tail(.stderr),
        kernel_log_tail(.kernel_log)
    )]
    Timeout {
        /// The limit that was exceeded.
        timeout: Duration,
        /// What the script printed on stdout before it was killed.
        stdout: String,
        /// What the script, vng and QEMU printed on stderr before they were killed.
        stderr: String,
        /// The guest kernel's log as far as it reached the host (`dmesg -w` into the run
        /// directory); empty when none did.
        kernel_log: String,
    },
    /// The VM exited without the script having finished (kernel panic, QEMU or vng failure).
    #[error(
        "the VM exited ({vng_status}) without the script finishing (QEMU, vng or the guest \
         kernel failed){}{}",
        stderr_tail(.stderr),
        kernel_log_tail(.kernel_log)
    )]
    NoExitStatus {
        /// How vng exited, e.g. `vng exit status 255`.
        vng_status: String,
        /// What the script printed on stdout.
        stdout: String,
        /// What the script, vng and QEMU printed on stderr.
        stderr: String,
        /// The guest kernel's log as far as it reached the host (an oops, the OOM killer,
        /// ... before the guest died); empty when none did.
        kernel_log: String,
    },
    /// The guest died before its script started, on every one of [`BOOT_ATTEMPTS`] boots
    /// (QEMU, vng or the guest kernel failed while booting; the last boots show the boot
    /// console on stderr).
    #[error(
        "the guest died before its script started, {attempts} boots in a row ({vng_status}){}",
        stderr_tail(.stderr)
    )]
    BootFailed {
        /// Boots tried.
        attempts: u32,
        /// How vng exited the last time, e.g. `vng exit status 255`.
        vng_status: String,
        /// What vng, QEMU and the boot console printed on stderr, the last time.
        stderr: String,
    },
    /// An I/O error on the host side (starting vng, the per-run directory, ...).
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl VmError {
    /// What the guest printed before the run ended this way (its stdout, then its stderr,
    /// then the guest kernel's log where it reached the host), for a log file; `None` for
    /// the errors raised before a guest ran.
    pub fn output(&self) -> Option<String> {
        match self {
            VmError::Cancelled { stdout, stderr } => Some(format!("{stdout}{stderr}")),
            VmError::BootFailed { stderr, .. } => Some(stderr.clone()),
            VmError::Timeout {
                stdout,
                stderr,
                kernel_log,
                ..
            }
            | VmError::NoExitStatus {
                stdout,
                stderr,
                kernel_log,
                ..
            } => Some(format!(
                "{stdout}{stderr}{}",
                if kernel_log.is_empty() {
                    String::new()
                } else {
                    format!("\n--- the guest kernel's log ---\n{kernel_log}")
                }
            )),
            _ => None,
        }
    }
}

/// The last lines of `stderr`, formatted to end an error message ("" when empty).
fn stderr_tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = &lines[lines.len().saturating_sub(10)..];
    format!("; its stderr ended with:\n{}", tail.join("\n"))
}

/// The last lines of the guest's kernel log, for an error message.
fn kernel_log_tail(log: &str) -> String {
    let lines: Vec<&str> = log.trim_end().lines().collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = &lines[lines.len().saturating_sub(KERNEL_LOG_TAIL)..];
    format!("\nthe guest kernel's log ended with:\n{}", tail.join("\n"))
}

/// Lines of the guest kernel's log shown when the guest died or timed out.
const KERNEL_LOG_TAIL: usize = 40;

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> VmError {
    let what = what.into();
    move |source| VmError::Io { what, source }
}

/// How QEMU runs the guest's CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation through `/dev/kvm`: about 10x faster than TCG, when it works.
    Kvm,
    /// QEMU's own emulation (TCG): slow but works anywhere (`vng --disable-kvm`).
    Tcg,
}

impl Accel {
    fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }

    fn parse(s: &str) -> Option<Accel> {
        match s {
            "kvm" => Some(Accel::Kvm),
            "tcg" => Some(Accel::Tcg),
            _ => None,
        }
    }
}

impl fmt::Display for Accel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// vCPUs of a guest on the virtual clock. QEMU's icount runs every vCPU of a guest on one
/// host thread, so more vCPUs add no speed (a host with more CPUs runs more guests:
/// [`run_in_vms`]); measured on one cubic flow (42 ms, 100 % BDP, 10 s): one vCPU gave the
/// same goodput as two (93.94 vs 93.95 Mbit/s at 100 Mbit/s, 233.5 vs 233.3 at 250) in 19 %
/// and 5 % less host time, at 24 % and 55 % of its own time busy.
pub const VIRTUAL_VCPUS: u32 = 1;

/// Host memory one guest takes, MiB: [`VmSpec::detect`]'s 2048 and QEMU's own.
pub const GUEST_FOOTPRINT_MB: u64 = 2560;

/// How many guests on the virtual clock this host runs side by side: one per host CPU (each
/// keeps one host thread busy, [`VIRTUAL_VCPUS`]), at most one per [`GUEST_FOOTPRINT_MB`] of
/// available memory (`MemAvailable` in /proc/meminfo), at least 1.
pub fn guests_that_fit() -> u32 {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    let mem_mb = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or(u64::MAX, |kb| kb / 1024);
    u32::try_from(cpus.min(mem_mb / GUEST_FOOTPRINT_MB).max(1)).unwrap_or(1)
}

/// The guest to boot for [`run_in_vm`].
#[derive(Debug, Clone)]
pub struct VmSpec {
    /// Kernel image to boot (its modules must be in the host's `/lib/modules`).
    pub kernel: PathBuf,
    /// Virtual CPUs.
    pub cpus: u32,
    /// Guest memory, in MiB.
    pub memory_mb: u32,
    /// Host directories the guest may write to, at the same paths (results that must come
    /// back go here; everything else the guest writes is thrown away).
    pub rwdirs: Vec<PathBuf>,
    /// KVM or TCG.
    pub accel: Accel,
    /// Wall-clock limit for boot + script + shutdown; QEMU is killed when it is reached.
    pub timeout: Duration,
    /// Also copy the guest's output to this process's stdout/stderr as it comes (progress
    /// of long runs); it is captured in [`VmOutput`] either way.
    pub echo: bool,
    /// When raised (e.g. by a SIGINT handler), the VM is killed and [`run_in_vm`] returns
    /// [`VmError::Cancelled`]; what the guest wrote to its rwdirs stays.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// The guest's clock. [`Clock::Virtual`] needs TCG (ignored under KVM): set it with
    /// [`VmSpec::set_clock`], which picks TCG. A program that must act at exact times (the
    /// `cctl conform` driver) is never late on it.
    pub clock: Clock,
    /// Write the VM's process group id (vng, virtme-run and QEMU) to this file while it
    /// runs (removed once the group is gone), so that a later `cctl bench run --resume`
    /// can end a VM whose `cctl` was killed ([`end_recorded_vm`]).
    pub pgid_file: Option<PathBuf>,
    /// QEMU's `-seed`: the guest's pseudo-random numbers (what TCG's RDRAND returns, which
    /// seeds the guest kernel's random state: TCP ISNs, hash secrets, port offsets) come
    /// from this seed instead of the host's entropy (`None`: the host's).
    pub seed: Option<u64>,
    /// Boot sealed ([`sealed`]): QEMU without vng, from an initramfs carrying what the
    /// script needs, so that the guest never waits on the host until the script has ended
    /// (`None`: vng's guest, which shares the host's file system). Only on the virtual
    /// clock ([`VmSpec::set_clock`]); [`VmSpec::rwdirs`] are not shared then: results
    /// come back through [`Sealed::out`].
    pub sealed: Option<Sealed>,
}

/// With this environment variable naming a directory, every VM whose spec records no
/// [`VmSpec::pgid_file`] records its process group in `<dir>/<pid>-<n>/vm.pgid` (`pid`: the
/// process that started it) while it runs, so that a VM outliving a killed process can be
/// found and ended ([`end_orphaned_vms`]). The tests set it (cctl-tests' `require_root`).
pub const PGID_DIR_ENV: &str = "CCTL_VM_PGID_DIR";

/// Ends every VM recorded under `root` (see [`PGID_DIR_ENV`]) whose starting process is no
/// longer running (killed before it could end its VM), removing its record; records of
/// running processes are left alone. Returns one message per VM ended.
///
/// Errors: a group that survives SIGKILL ([`end_recorded_vm`]).
pub fn end_orphaned_vms(root: &Path) -> Result<Vec<String>, VmError> {
    let mut ended = Vec::new();
    for entry in fs::read_dir(root).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.split('-').next().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
            && !fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .rsplit_once(')')
                .is_some_and(|(_, t)| t.trim_start().starts_with('Z'));
        if alive {
            continue;
        }
        if let Some(msg) = end_recorded_vm(&entry.path())? {
            ended.push(format!("{msg}; its starter, process {pid}, had died"));
        }
        let _ = fs::remove_dir_all(entry.path());
    }
    Ok(ended)
}

/// Name of the file, in a results directory, that holds the process group of the VM
/// writing into it and the host's boot id (see [`VmSpec::pgid_file`]).
pub const PGID_FILE: &str = "vm.pgid";

/// Ends the VM process group recorded in `dir`'s [`PGID_FILE`], if it still runs (SIGTERM,
/// then SIGKILL after 5 s), and removes the file. A group whose processes are not vng,
/// virtme or QEMU (the id was reused) is left alone. Returns what was done, `None` when
/// there was nothing to end.
///
/// Errors: the group survives SIGKILL for 5 s.
pub fn end_recorded_vm(dir: &Path) -> Result<Option<String>, VmError> {
    let path = dir.join(PGID_FILE);
    let Ok(content) = fs::read_to_string(&path) else {
        return Ok(None);
    };
    let mut words = content.split_whitespace();
    let Some(pgid) = words.next().and_then(|w| w.parse::<i32>().ok()) else {
        return Ok(None);
    };
    // Written on another boot or machine (e.g. read by the guest the VM runs): not ours to
    // judge, and the file stays for the host.
    if words.next().is_some_and(|b| b != boot_id()) {
        return Ok(None);
    }
    let members = group_members(pgid);
    let ours = members
        .iter()
        .any(|c| c.contains("qemu") || c.contains("vng") || c.contains("virtme"));
    let msg = if members.is_empty() || !ours {
        None
    } else {
        let pg = nix::unistd::Pid::from_raw(pgid);
        let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGTERM);
        let gone = |secs| {
            let end = Instant::now() + Duration::from_secs(secs);
            while Instant::now() < end {
                if group_members(pgid).is_empty() {
                    return true;
                }
                thread::sleep(Duration::from_millis(100));
            }
            false
        };
        if !gone(5) {
            let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
            if !gone(5) {
                return Err(VmError::Io {
                    what: format!(
                        "ending the VM process group {pgid} recorded in {}",
                        path.display()
                    ),
                    source: io::Error::other("still running 5 s after SIGKILL"),
                });
            }
        }
        Some(format!(
            "ended the VM left running by an earlier cctl (process group {pgid}: {})",
            members.join(", ")
        ))
    };
    let _ = fs::remove_file(&path);
    Ok(msg)
}

/// This boot's id (`/proc/sys/kernel/random/boot_id`), empty if unreadable.
fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Command names of the processes in process group `pgid` (from /proc/<pid>/stat).
fn group_members(pgid: i32) -> Vec<String> {
    let Ok(procs) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    procs
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| {
            let stat = fs::read_to_string(e.path().join("stat")).ok()?;
            let (head, tail) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1.to_string();
            // After the command: state, ppid, pgrp.
            let pgrp: i32 = tail.split_whitespace().nth(2)?.parse().ok()?;
            (pgrp == pgid).then_some(comm)
        })
        .collect()
}

impl VmSpec {
    /// The usual guest: the newest 6.12 kernel ([`find_guest_kernel`]), 2 vCPUs, 2048 MiB,
    /// no shared directories, the accelerator [`choose_accel`] picks (which may cost one
    /// probe boot per host boot, see there), and a 10-minute timeout.
    pub fn detect() -> Result<VmSpec, VmError> {
        Ok(VmSpec {
            kernel: find_guest_kernel()?,
            cpus: 2,
            memory_mb: 2048,
            rwdirs: Vec::new(),
            accel: choose_accel(),
            timeout: Duration::from_secs(600),
            echo: false,
            cancel: None,
            clock: Clock::Real,
            pgid_file: None,
            seed: None,
            sealed: None,
        })
    }

    /// Sets the guest's clock; [`Clock::Virtual`] also sets the accelerator to TCG (KVM
    /// cannot count instructions), even where [`choose_accel`] found KVM, and the vCPUs to
    /// [`VIRTUAL_VCPUS`].
    ///
    /// Errors: [`VmError::ClockNeedsTcg`] for the virtual clock when `$CCTL_VM_ACCEL`
    /// forces KVM.
    pub fn set_clock(&mut self, clock: Clock) -> Result<(), VmError> {
        if clock == Clock::Virtual {
            if forced_accel() == Some(Accel::Kvm) {
                return Err(VmError::ClockNeedsTcg);
            }
            self.accel = Accel::Tcg;
            self.cpus = VIRTUAL_VCPUS;
        }
        self.clock = clock;
        Ok(())
    }

    /// The guest's clock as [`GUEST_CLOCK_ENV`] gives it: the virtual clock only under TCG.
    pub fn clock_env(&self) -> String {
        let virt = self.clock == Clock::Virtual && self.accel == Accel::Tcg;
        let mut s = format!(
            "clock={} accel={} vcpus={} memory_mb={}",
            if virt { Clock::Virtual } else { Clock::Real },
            self.accel,
            self.cpus,
            self.memory_mb
        );
        if virt {
            s += &format!(" icount_shift={ICOUNT_SHIFT}");
        }
        s
    }

    /// The arguments [`run_in_vm`] gives `vng` to run `exec` (a shell command line) in this
    /// guest; `rwdirs` come after the spec's own [`VmSpec::rwdirs`].
    pub fn vng_args(&self, rwdirs: &[&Path], exec: &str) -> Vec<OsString> {
        let mut args = vec![flag("--run=", self.kernel.as_os_str())];
        let mut qemu = Vec::new();
        if self.accel == Accel::Tcg {
            args.push("--disable-kvm".into());
            if self.clock == Clock::Virtual {
                qemu.push(format!("-icount shift={ICOUNT_SHIFT},sleep=off"));
            }
        }
        if let Some(seed) = self.seed {
            qemu.push(format!("-seed {seed}"));
        }
        if !qemu.is_empty() {
            args.push(format!("--qemu-opts={}", qemu.join(" ")).into());
        }
        args.push(format!("--cpus={}", self.cpus).into());
        args.push(format!("--memory={}M", self.memory_mb).into());
        args.push(
            format!(
                "--append=modprobe.blacklist={}",
                GUEST_MODULE_BLACKLIST.join(",")
            )
            .into(),
        );
        for dir in self
            .rwdirs
            .iter()
            .map(PathBuf::as_path)
            .chain(rwdirs.iter().copied())
        {
            args.push(flag("--rwdir=", dir.as_os_str()));
        }
        args.push(format!("--exec={exec}").into());
        args
    }
}

fn flag(name: &str, value: &std::ffi::OsStr) -> OsString {
    let mut s = OsString::from(name);
    s.push(value);
    s
}

/// What a script run by [`run_in_vm`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmOutput {
    /// The script's exit status (bash's `$?`: 128 + N when killed by signal N).
    pub status: i32,
    /// What the script printed on stdout.
    pub stdout: String,
    /// What the script printed on stderr, with any messages from vng and QEMU.
    pub stderr: String,
    /// Wall-clock time of the whole run: initramfs, boot, script, shutdown.
    pub elapsed: Duration,
}

impl VmOutput {
    /// Whether the script exited with status 0.
    pub fn success(&self) -> bool {
        self.status == 0
    }
}

/// Whether the running kernel can attach `sch_netem`, found by trying: in a throw-away
/// network namespace `cctl-probe-<pid>` holding a veth pair, `tc qdisc add ... netem delay
/// 1ms`. The namespace is deleted afterwards, also on failure. `modprobe -q sch_netem` is
/// tried first where `modprobe` exists. Needs root; without it the answer is `false`.
pub fn netem_available() -> bool {
    // One probe at a time per process: they share the namespace name.
    static PROBE: Mutex<()> = Mutex::new(());
    let _guard = PROBE.lock().unwrap_or_else(|e| e.into_inner());

    if find_tool("modprobe").is_some() {
        let _ = quiet(Command::new("modprobe").args(["-q", "sch_netem"]));
    }
    let ns = format!("cctl-probe-{}", std::process::id());
    // A namespace left by an earlier process with the same pid would make `add` fail.
    let _ = quiet(Command::new("ip").args(["netns", "del", &ns]));
    if !quiet(Command::new("ip").args(["netns", "add", &ns])) {
        return false;
    }
    let ok = quiet(Command::new("ip").args([
        "-n", &ns, "link", "add", "cprobe0", "type", "veth", "peer", "name", "cprobe1",
    ])) && quiet(Command::new("tc").args([
        "-n", &ns, "qdisc", "add", "dev", "cprobe0", "root", "netem", "delay", "1ms",
    ]));
    let _ = quiet(Command::new("ip").args(["netns", "del", &ns]));
    ok
}

/// Runs a command with all output discarded; true when it ran and exited 0.
fn quiet(cmd: &mut Command) -> bool {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether this machine's CPUs are emulated by QEMU's TCG (as in the guest [`run_in_vm`]
/// boots without KVM), whose CPU model names itself `QEMU`: every packet costs tens of
/// times more CPU there than on hardware.
pub fn emulated_cpu() -> bool {
    fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| {
        c.lines()
            .filter(|l| l.starts_with("model name"))
            .any(|l| l.contains("QEMU") || l.contains("TCG"))
    })
}

/// The guest kernel image: `$CCTL_VM_KERNEL` if set, else the newest
/// `/boot/vmlinuz-6.12*-amd64` (by version, numerically).
pub fn find_guest_kernel() -> Result<PathBuf, VmError> {
    if let Some(k) = std::env::var_os(KERNEL_ENV).filter(|k| !k.is_empty()) {
        let k = PathBuf::from(k);
        return if k.is_file() {
            Ok(k)
        } else {
            Err(VmError::KernelNotFound(k))
        };
    }
    let names = fs::read_dir(KERNEL_DIR)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    newest_kernel(&names)
        .map(|n| Path::new(KERNEL_DIR).join(n))
        .ok_or(VmError::NoGuestKernel)
}

/// The newest of `names` matching `vmlinuz-6.12*-amd64`.
fn newest_kernel(names: &[String]) -> Option<&String> {
    names
        .iter()
        .filter(|n| n.starts_with(KERNEL_PREFIX) && n.ends_with(KERNEL_SUFFIX))
        .max_by(|a, b| version_key(a).cmp(&version_key(b)))
}

/// Sort key comparing digit runs as numbers: `6.12.9` < `6.12.10`.
fn version_key(s: &str) -> Vec<(u64, String)> {
    let mut key = Vec::new();
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let (num, tail) = rest.split_at(digits);
        let text = tail.len() - tail.trim_start_matches(|c: char| !c.is_ascii_digit()).len();
        let (txt, tail) = tail.split_at(text);
        key.push((num.parse().unwrap_or(0), txt.to_string()));
        rest = tail;
    }
    key
}

/// The accelerator for guests: `$CCTL_VM_ACCEL` = `kvm` or `tcg` forces one; `auto` (the
/// default) picks KVM only if `/dev/kvm` opens read-write AND a short probe boot with KVM
/// (`vng ... --exec true`, 1 vCPU, at most 60 s) succeeds. The auto verdict is kept for the
/// process and in [`ACCEL_CACHE`] for the rest of the host's boot, so the probe runs once
/// per boot. Nested virtualisation often has a `/dev/kvm` whose guests crash: then TCG.
/// An unknown value of `$CCTL_VM_ACCEL` is reported on stderr and treated as `auto`.
pub fn choose_accel() -> Accel {
    static AUTO: OnceLock<Accel> = OnceLock::new();
    forced_accel().unwrap_or_else(|| *AUTO.get_or_init(detect_accel))
}

/// The accelerator `$CCTL_VM_ACCEL` forces (`kvm` or `tcg`); `None` for `auto`, unset or an
/// unknown value (reported on stderr).
pub fn forced_accel() -> Option<Accel> {
    let var = std::env::var(ACCEL_ENV).unwrap_or_default();
    match var.as_str() {
        "" | "auto" => None,
        v => Accel::parse(v).or_else(|| {
            eprintln!("cctl: ignoring {ACCEL_ENV}={v} (expected kvm, tcg or auto)");
            None
        }),
    }
}

fn detect_accel() -> Accel {
    let kvm_opens = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    if !kvm_opens {
        return Accel::Tcg;
    }
    let boot_id = boot_id();
    if let Some(a) = fs::read_to_string(ACCEL_CACHE)
        .ok()
        .and_then(|c| parse_accel_cache(&c, &boot_id))
    {
        return a;
    }
    match probe_kvm() {
        Some(verdict) => {
            let _ = fs::create_dir_all(Path::new(ACCEL_CACHE).parent().unwrap_or(Path::new("/")))
                .and_then(|()| fs::write(ACCEL_CACHE, accel_cache_line(verdict, &boot_id)));
            verdict
        }
        // The guest could not even be attempted (VM deps missing): no verdict to keep.
        None => Accel::Tcg,
    }
}

fn accel_cache_line(accel: Accel, boot_id: &str) -> String {
    format!("{accel} boot_id={boot_id}\n")
}

/// The cached verdict, if it was written during the boot `boot_id`.
fn parse_accel_cache(content: &str, boot_id: &str) -> Option<Accel> {
    let mut words = content.split_whitespace();
    let accel = Accel::parse(words.next()?)?;
    let cached_boot = words.next()?.strip_prefix("boot_id=")?;
    (!boot_id.is_empty() && cached_boot == boot_id).then_some(accel)
}

/// Boots the guest once with KVM: `Some(Kvm)` if it ran `true`, `Some(Tcg)` if it failed or
/// hung, `None` if it could not be tried.
fn probe_kvm() -> Option<Accel> {
    let spec = VmSpec {
        kernel: find_guest_kernel().ok()?,
        cpus: 1,
        memory_mb: 512,
        rwdirs: Vec::new(),
        accel: Accel::Kvm,
        timeout: KVM_PROBE_TIMEOUT,
        echo: false,
        cancel: None,
        clock: Clock::Real,
        pgid_file: None,
        seed: None,
        sealed: None,
    };
    // One boot: a KVM guest that cannot run here dies at once, every time.
    match run_attempt(&spec, "true", false).0 {
        Ok(out) if out.success() => Some(Accel::Kvm),
        Ok(_) | Err(VmError::Timeout { .. } | VmError::NoExitStatus { .. }) => Some(Accel::Tcg),
        Err(_) => None,
    }
}

/// Programs the VM runner needs, with where they come from.
const TOOLS: &[(&str, &[&str], &str)] = &[
    (
        "vng",
        &["vng"],
        "pip package virtme-ng: `pip install virtme-ng`",
    ),
    (
        "qemu-system-x86_64",
        &["qemu-system-x86_64"],
        "Debian package qemu-system-x86",
    ),
    (
        "busybox",
        &["busybox-static", "busybox.static", "busybox"],
        "Debian package busybox-static",
    ),
];

/// The version of the QEMU that boots guests, as `qemu-system-x86_64 --version` gives it
/// after "QEMU emulator version " (`7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)`); `None`
/// when QEMU is missing or says something else. One of the inputs a virtual-clock run is a
/// function of: runs under two QEMU versions are not expected to be identical.
pub fn qemu_version() -> Option<String> {
    static V: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    V.get_or_init(|| {
        let out = Command::new(find_tool(QEMU)?)
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let v = text
            .lines()
            .next()?
            .strip_prefix("QEMU emulator version ")?;
        Some(v.trim().to_string())
    })
    .clone()
}

/// Looks for `name` on `$PATH`, then in the usual bin directories (where vng and virtme-ng
/// look too: pip's console scripts may not be on every root `$PATH`).
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(
            [
                "/usr/local/bin",
                "/usr/local/sbin",
                "/usr/bin",
                "/usr/sbin",
                "/bin",
                "/sbin",
            ]
            .map(PathBuf::from),
        )
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Checks that everything [`run_in_vm`] needs is installed: `vng`, `qemu-system-x86_64`,
/// a busybox and a 6.12 guest kernel. The error names the first thing missing, where it comes
/// from, and says to run `make vm-deps`.
pub fn check_vm_deps() -> Result<(), VmError> {
    vng_path()?;
    find_guest_kernel()?;
    Ok(())
}

/// Checks the tools and returns the path of `vng`.
fn vng_path() -> Result<PathBuf, VmError> {
    let mut vng = None;
    for &(tool, names, package) in TOOLS {
        let found = names.iter().find_map(|n| find_tool(n));
        match found {
            Some(p) if tool == "vng" => vng = Some(p),
            Some(_) => {}
            None => return Err(VmError::MissingTool { tool, package }),
        }
    }
    Ok(vng.expect("vng is in TOOLS"))
}

/// Runs each `(spec, script)` of `runs` in a guest of its own, all at once (a thread
/// each: on the virtual clock a guest keeps one host CPU busy), and returns when every
/// guest is gone, with each one's [`run_in_vm`] result in the order of `runs`. Raising
/// one spec's `cancel` stops that guest only: give them the same flag to stop them all.
pub fn run_in_vms(runs: &[(VmSpec, String)]) -> Vec<Result<VmOutput, VmError>> {
    thread::scope(|s| {
        let handles: Vec<_> = runs
            .iter()
            .map(|(spec, script)| s.spawn(move || run_in_vm(spec, script)))
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                h.join().unwrap_or_else(|_| {
                    Err(VmError::Io {
                        what: format!("running guest {} of {}", i + 1, runs.len()),
                        source: std::io::Error::other("its thread panicked"),
                    })
                })
            })
            .collect()
    })
}

/// Boots the guest `spec` describes and runs `script` there with `bash`, as root when the
/// caller is root, in the caller's working directory; see the module docs for what the
/// guest sees. Returns once the script has finished and the VM is gone.
///
/// `Ok` means the script ran to completion, whatever its exit status: check
/// [`VmOutput::success`] (a failing script is `Ok` with a non-zero `status`). The script
/// not finishing is an error: [`VmError::Timeout`] when `spec.timeout` passed (vng, QEMU
/// and everything else in their process group are killed), [`VmError::NoExitStatus`] when
/// the VM exited after the script started and before it ended. A guest that dies before
/// the script starts is booted again, up to [`BOOT_ATTEMPTS`] boots in all, saying so on
/// stderr ([`VmError::BootFailed`] after the last). Missing tools or kernel give [`VmError::MissingTool`] /
/// [`VmError::KernelNotFound`] before anything starts.
pub fn run_in_vm(spec: &VmSpec, script: &str) -> Result<VmOutput, VmError> {
    let mut attempt = 1;
    loop {
        // The boot console goes to stderr from the second boot on, so that a guest that
        // dies again while booting says why.
        let (res, started) = run_attempt(spec, script, attempt > 1);
        match res {
            Err(VmError::NoExitStatus {
                vng_status, stderr, ..
            }) if !started => {
                if attempt == BOOT_ATTEMPTS {
                    return Err(VmError::BootFailed {
                        attempts: attempt,
                        vng_status,
                        stderr,
                    });
                }
                eprintln!(
                    "cctl-vm: the guest died before its script started ({vng_status}){}; \
                     booting it again ({} of {BOOT_ATTEMPTS}), with its boot console on stderr",
                    stderr_tail(&stderr),
                    attempt + 1
                );
                attempt += 1;
            }
            other => return other,
        }
    }
}

/// Boots a guest gets when it dies before its script starts ([`run_in_vm`]): the script
/// has not run, so booting again changes nothing it would have done. Under TCG on these
/// hosts a boot now and then dies so, with nothing on stderr (the guest half of `bench
/// perf --quick` in one CI run of `make test`, 2026-11-28).
pub const BOOT_ATTEMPTS: u32 = 3;

/// One boot of [`run_in_vm`], with the boot console on stderr when `boot_console`; also
/// whether the guest started the script (its first command leaves a mark on the host).
fn run_attempt(
    spec: &VmSpec,
    script: &str,
    boot_console: bool,
) -> (Result<VmOutput, VmError>, bool) {
    let mut started = false;
    let res = run_attempt_inner(spec, script, boot_console, "", &mut started);
    (res, started)
}

/// [`run_attempt`], with `pre_exec` (shell code ending in `; `, or nothing) run in the
/// guest before the script (a test takes the script's output ports away with it).
fn run_attempt_inner(
    spec: &VmSpec,
    script: &str,
    boot_console: bool,
    pre_exec: &str,
    started: &mut bool,
) -> Result<VmOutput, VmError> {
    let program = if spec.sealed.is_some() {
        find_tool(QEMU).ok_or(VmError::MissingTool {
            tool: QEMU,
            package: "Debian package qemu-system-x86",
        })?
    } else {
        vng_path()?
    };
    if !spec.kernel.is_file() {
        return Err(VmError::KernelNotFound(spec.kernel.clone()));
    }
    for dir in &spec.rwdirs {
        check_rwdir(dir)?;
    }
    let run_dir = RunDir::create()?;
    let script_path = run_dir.path.join("script.sh");
    let status_path = run_dir.path.join("status");
    let kmsg_path = run_dir.path.join("kmsg");
    let started_path = run_dir.path.join("started");
    // The QEMU version travels with the clock (spaces as `_`, one word of the line).
    let mut clock = spec.clock_env();
    if let Some(v) = qemu_version() {
        clock += &format!(" qemu={}", v.replace(' ', "_"));
    }
    let script = format!(
        "export {GUEST_CLOCK_ENV}={}\n{script}",
        sh_quote(Path::new(&clock))
    );
    fs::write(&script_path, &script)
        .map_err(io_err(format!("writing {}", script_path.display())))?;
    // The guest's kernel log follows into the run directory as it is written, so that an
    // oops or the OOM killer before a guest dies reaches the host.
    // The script's stdout and stderr go to files in the run directory, which the host
    // follows, not to vng's virtio-serial ports: on the virtual clock, where the guest's
    // idle time passes at once, virtme-ng-init's `udevadm settle --timeout=300` can give up
    // before udev has made the ports' links, and the script then writes to the console,
    // which is /dev/null (2 of 6 runs of the sweep VM resume test printed nothing and
    // exited 0, 2026-11-28).
    let out_path = run_dir.path.join("stdout");
    let err_path = run_dir.path.join("stderr");
    for p in [&out_path, &err_path] {
        fs::write(p, "").map_err(io_err(format!("writing {}", p.display())))?;
    }
    let exec = format!(
        ": >{}; (dmesg -w >{} 2>&1 &); {pre_exec}bash {} </dev/null >>{} 2>>{}; echo $? >{}",
        sh_quote(&started_path),
        sh_quote(&kmsg_path),
        sh_quote(&script_path),
        sh_quote(&out_path),
        sh_quote(&err_path),
        sh_quote(&status_path)
    );

    let start = Instant::now();
    let args = match &spec.sealed {
        Some(sealed) => sealed::prepare(spec, sealed, &script, &run_dir.path)?,
        None => {
            let mut args = spec.vng_args(&[&run_dir.path], &exec);
            if boot_console {
                args.insert(0, "--verbose".into());
            }
            args
        }
    };
    let mut child = Command::new(&program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Its own process group, so that a timeout kills vng, virtme-run and QEMU together.
        .process_group(0)
        .spawn()
        .map_err(io_err(format!("starting {}", program.display())))?;
    let pgid_file = spec.pgid_file.clone().or_else(registry_pgid_file);
    // The registry's per-VM directory goes with its file.
    let _registry_dir = RemoveDirOnDrop(
        pgid_file
            .as_ref()
            .filter(|_| spec.pgid_file.is_none())
            .and_then(|f| f.parent().map(Path::to_path_buf)),
    );
    if let Some(f) = &pgid_file {
        if let Err(e) = fs::write(f, format!("{} {}\n", child.id(), boot_id())) {
            kill_group(&child);
            let _ = child.wait();
            return Err(io_err(format!("writing {}", f.display()))(e));
        }
    }
    // Removed on every return below, each after the group is killed; not after a SIGKILL
    // of this process, which is when it is needed.
    let _pgid_file = RemoveOnDrop(pgid_file.clone());
    let output = Output::start(&mut child, &out_path, &err_path, spec.echo);

    let cancelled = || {
        spec.cancel
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst))
    };
    let timed_out = loop {
        match exited_unreaped(&child) {
            Ok(true) => break false,
            Ok(false) if cancelled() => {
                kill_group(&child);
                let _ = child.wait();
                let (stdout, stderr) = output.finish();
                return Err(VmError::Cancelled { stdout, stderr });
            }
            Ok(false) if start.elapsed() >= spec.timeout => break true,
            Ok(false) => thread::sleep(POLL_INTERVAL),
            Err(e) => {
                kill_group(&child);
                let _ = child.wait();
                let _ = output.finish();
                return Err(VmError::Io {
                    what: "waiting for vng".into(),
                    source: e,
                });
            }
        }
    };
    // vng is exited but not reaped (or still running), so its pid, which is the group id,
    // cannot have been reused: killing the group reaches only what vng left behind.
    kill_group(&child);
    let exit = child.wait().map_err(io_err("waiting for vng"))?;
    let (stdout, stderr) = output.finish();
    let elapsed = start.elapsed();
    if let Some(sealed) = &spec.sealed {
        let (began, status) = sealed::control(&run_dir.path);
        if began {
            fs::write(&started_path, "")
                .map_err(io_err(format!("writing {}", started_path.display())))?;
        }
        if let Some(status) = status {
            fs::write(&status_path, status.to_string())
                .map_err(io_err(format!("writing {}", status_path.display())))?;
            if !timed_out {
                sealed::collect(&run_dir.path, &sealed.out)?;
            }
        }
    }
    *started = started_path.exists();
    let kernel_log = || fs::read_to_string(&kmsg_path).unwrap_or_default();

    if timed_out {
        return Err(VmError::Timeout {
            timeout: spec.timeout,
            stdout,
            stderr,
            kernel_log: kernel_log(),
        });
    }
    match fs::read_to_string(&status_path)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok())
    {
        Some(status) => Ok(VmOutput {
            status,
            stdout,
            stderr,
            elapsed,
        }),
        None => Err(VmError::NoExitStatus {
            vng_status: match exit.code() {
                Some(c) => format!("vng exit status {c}"),
                None => format!("vng {exit}"),
            },
            stdout,
            stderr,
            kernel_log: kernel_log(),
        }),
    }
}

/// What a guest prints: the script's stdout and stderr, followed in their files in the run
/// directory, and vng's own (vng's, QEMU's messages, the boot console).
struct Output {
    /// Raised once the VM is gone: the followers read what is left and end.
    stop: Arc<AtomicBool>,
    vng_out: thread::JoinHandle<String>,
    vng_err: thread::JoinHandle<String>,
    script_out: thread::JoinHandle<String>,
    script_err: thread::JoinHandle<String>,
}

impl Output {
    /// Starts reading vng's pipes and following the script's output files `out` and
    /// `err`, copying all of it to this process's when `echo`.
    fn start(child: &mut Child, out: &Path, err: &Path, echo: bool) -> Output {
        let stop = Arc::new(AtomicBool::new(false));
        let (o, e) = (echo.then_some(Echo::Stdout), echo.then_some(Echo::Stderr));
        Output {
            vng_out: drain(child.stdout.take(), o),
            vng_err: drain(child.stderr.take(), e),
            script_out: follow(out.to_path_buf(), o, stop.clone()),
            script_err: follow(err.to_path_buf(), e, stop.clone()),
            stop,
        }
    }

    /// Everything printed, once the VM is gone: (stdout, stderr), the script's first.
    fn finish(self) -> (String, String) {
        self.stop.store(true, Ordering::SeqCst);
        let join = |h: thread::JoinHandle<String>| h.join().unwrap_or_default();
        (
            join(self.script_out) + &join(self.vng_out),
            join(self.script_err) + &join(self.vng_err),
        )
    }
}

/// Reads what is appended to the file `path` on a thread, every 100 ms, until `stop` is
/// raised (then what is left), copying it as `echo` says.
fn follow(path: PathBuf, echo: Option<Echo>, stop: Arc<AtomicBool>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        let mut file = None;
        loop {
            // Read before the last look, so that nothing written before `stop` is missed.
            let last = stop.load(Ordering::SeqCst);
            if file.is_none() {
                file = fs::File::open(&path).ok();
            }
            if let Some(f) = file.as_mut() {
                let mut chunk = Vec::new();
                if f.read_to_end(&mut chunk).is_ok() && !chunk.is_empty() {
                    copy_out(echo, &chunk);
                    buf.extend_from_slice(&chunk);
                }
            }
            if last {
                break;
            }
            thread::sleep(Duration::from_millis(100));
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Copies `chunk` to this process's stdout or stderr, as `echo` says.
fn copy_out(echo: Option<Echo>, chunk: &[u8]) {
    match echo {
        Some(Echo::Stdout) => {
            let mut o = io::stdout().lock();
            let _ = o.write_all(chunk);
            let _ = o.flush();
        }
        Some(Echo::Stderr) => {
            let _ = io::stderr().lock().write_all(chunk);
        }
        None => {}
    }
}

/// Reads a pipe to the end on a thread.
/// Where [`drain`] copies what it reads.
#[derive(Clone, Copy)]
enum Echo {
    Stdout,
    Stderr,
}

fn drain(
    pipe: Option<impl Read + Send + 'static>,
    echo: Option<Echo>,
) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let mut chunk = [0u8; 4096];
            loop {
                match p.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        buf.extend_from_slice(&chunk[..n]);
                        copy_out(echo, &chunk[..n]);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Whether `child` has exited, leaving it a zombie (not reaped), so that its pid stays ours.
fn exited_unreaped(child: &Child) -> io::Result<bool> {
    // SAFETY: siginfo_t is plain data for which all-zero bytes are a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid only writes into `info`, which lives across the call; WNOWAIT leaves
    // the child waitable, so std's Child::wait still reaps it later.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            child.id(),
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: waitid filled `info` (or left it zeroed when nothing has exited: si_pid 0).
    Ok(unsafe { info.si_pid() } != 0)
}

/// SIGKILL to the process group led by `child` (gone already: nothing happens).
/// Removes a file when dropped.
/// `<$CCTL_VM_PGID_DIR>/<pid>-<n>/vm.pgid` for the next VM of this process, its directory
/// created; `None` without the variable or when the directory cannot be made.
fn registry_pgid_file() -> Option<PathBuf> {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let root = PathBuf::from(std::env::var_os(PGID_DIR_ENV)?);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = root.join(format!("{}-{n}", std::process::id()));
    fs::create_dir_all(&dir).ok()?;
    Some(dir.join(PGID_FILE))
}

/// Removes a directory tree when dropped.
struct RemoveDirOnDrop(Option<PathBuf>);

impl Drop for RemoveDirOnDrop {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = fs::remove_dir_all(p);
        }
    }
}

struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = fs::remove_file(p);
        }
    }
}

fn kill_group(child: &Child) {
    let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
}

fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

fn check_rwdir(dir: &Path) -> Result<(), VmError> {
    let bad = |reason| {
        Err(VmError::BadRwdir {
            path: dir.to_path_buf(),
            reason,
        })
    };
    if !dir.is_absolute() {
        return bad("not an absolute path");
    }
    if dir.as_os_str().to_string_lossy().contains(['=', ',']) {
        return bad("vng cannot share a path containing '=' or ','");
    }
    if !dir.is_dir() {
        return bad("not a directory on the host");
    }
    Ok(())
}

/// A fresh host directory shared with the guest for the script and its exit status;
/// removed on drop.
struct RunDir {
    path: PathBuf,
}

impl RunDir {
    /// A new run directory under the temporary directory, after removing those a killed
    /// process left there ([`remove_dead_run_dirs`]).
    fn create() -> Result<RunDir, VmError> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let base = std::env::temp_dir();
        remove_dead_run_dirs(&base);
        loop {
            let n = SEQ.fetch_add(1, Ordering::Relaxed);
            let path = base.join(format!("cctl-vm-{}-{n}", std::process::id()));
            match fs::create_dir(&path) {
                Ok(()) => {
                    check_rwdir(&path)?;
                    return Ok(RunDir { path });
                }
                // Left behind by a killed process that had the same pid.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err(format!("creating {}", path.display()))(e)),
            }
        }
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Removes the run directories (`cctl-vm-<pid>-<n>`) under `base` whose process is gone: a
/// process killed while its VM ran cannot remove its own (a sealed guest's holds its
/// initramfs, ~100 MB). A directory whose process still runs, or may (the pid answers, or
/// belongs to another user), is left alone. Errors are ignored: this is tidying.
fn remove_dead_run_dirs(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("cctl-vm-"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u32>().ok().and(pid.parse::<i32>().ok()))
        else {
            continue;
        };
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::ESRCH);
        if pid > 0 && gone {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_dirs_of_dead_processes_are_removed_and_others_kept() {
        let base = std::env::temp_dir().join(format!("cctl-vm-tidy-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        fs::create_dir_all(&base).unwrap();
        // A pid that has exited (and been reaped): the process is gone.
        let mut child = Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let mine = std::process::id();
        for name in [
            format!("cctl-vm-{dead}-0"),
            format!("cctl-vm-{mine}-0"),
            "cctl-vm-x-0".to_string(),
            format!("cctl-other-{dead}-0"),
        ] {
            fs::create_dir_all(base.join(name).join("inside")).unwrap();
        }
        remove_dead_run_dirs(&base);
        assert!(!base.join(format!("cctl-vm-{dead}-0")).exists());
        assert!(base.join(format!("cctl-vm-{mine}-0")).exists());
        assert!(base.join("cctl-vm-x-0").exists());
        assert!(base.join(format!("cctl-other-{dead}-0")).exists());
        fs::remove_dir_all(&base).unwrap();
    }

    pub(crate) fn spec(accel: Accel) -> VmSpec {
        VmSpec {
            kernel: "/boot/vmlinuz-6.12.95+deb12-amd64".into(),
            cpus: 2,
            memory_mb: 2048,
            rwdirs: vec!["/srv/results".into()],
            accel,
            timeout: Duration::from_secs(60),
            echo: false,
            cancel: None,
            clock: Clock::Real,
            pgid_file: None,
            seed: None,
            sealed: None,
        }
    }

    #[test]
    fn vng_command_line_names_kernel_cpus_memory_rwdirs_and_disables_kvm_only_for_tcg() {
        let args = spec(Accel::Tcg).vng_args(&[Path::new("/tmp/cctl-vm-1-0")], "bash x; echo $?");
        let blacklist = format!(
            "--append=modprobe.blacklist={}",
            GUEST_MODULE_BLACKLIST.join(",")
        );
        let expected: Vec<OsString> = [
            "--run=/boot/vmlinuz-6.12.95+deb12-amd64",
            "--disable-kvm",
            "--cpus=2",
            "--memory=2048M",
            &blacklist,
            "--rwdir=/srv/results",
            "--rwdir=/tmp/cctl-vm-1-0",
            "--exec=bash x; echo $?",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        assert_eq!(args, expected);

        let kvm = spec(Accel::Kvm).vng_args(&[], "true");
        assert!(!kvm.contains(&OsString::from("--disable-kvm")), "{kvm:?}");
        assert_eq!(kvm.last(), Some(&OsString::from("--exec=true")));
    }

    #[test]
    fn the_virtual_clock_is_icount_under_tcg_and_what_the_guest_is_told() {
        let mut s = spec(Accel::Kvm);
        assert_eq!(s.clock_env(), "clock=real accel=kvm vcpus=2 memory_mb=2048");
        // Under KVM a virtual clock set by hand is not there: the guest is told so.
        s.clock = Clock::Virtual;
        assert!(!s
            .vng_args(&[], "true")
            .iter()
            .any(|a| a.to_string_lossy().contains("icount")));
        assert!(s.clock_env().starts_with("clock=real accel=kvm"));
        // set_clock picks TCG (unless CCTL_VM_ACCEL forces KVM, refused: cli/tests/check.rs).
        if forced_accel().is_none() {
            let mut s = spec(Accel::Kvm);
            s.set_clock(Clock::Virtual).unwrap();
            assert_eq!(s.accel, Accel::Tcg);
            let args = s.vng_args(&[], "true");
            assert!(
                args.contains(&OsString::from("--qemu-opts=-icount shift=0,sleep=off")),
                "{args:?}"
            );
            // One vCPU: every vCPU of an icount guest runs on one host thread.
            assert_eq!(s.cpus, VIRTUAL_VCPUS);
            // A seed goes to QEMU beside the clock, in the same option.
            s.seed = Some(7);
            let args = s.vng_args(&[], "true");
            assert!(
                args.contains(&OsString::from(
                    "--qemu-opts=-icount shift=0,sleep=off -seed 7"
                )),
                "{args:?}"
            );
            s.seed = None;
            assert_eq!(
                s.clock_env(),
                "clock=virtual accel=tcg vcpus=1 memory_mb=2048 icount_shift=0"
            );
        }
        assert_eq!("virtual".parse::<Clock>(), Ok(Clock::Virtual));
        let e = "wall".parse::<Clock>().unwrap_err();
        assert!(e.contains("expected one of virtual, real"), "{e}");
    }

    #[test]
    fn the_module_blacklist_never_blocks_what_network_tests_load() {
        for m in [
            "sch_netem",
            "sch_tbf",
            "sch_fq",
            "veth",
            "tcp_htcp",
            "ifb",
            "9p",
            "overlay",
        ] {
            assert!(!GUEST_MODULE_BLACKLIST.contains(&m), "{m}");
        }
    }

    #[test]
    fn the_newest_6_12_kernel_wins_numerically_and_other_flavours_are_ignored() {
        let names: Vec<String> = [
            "vmlinuz-6.12.9+bpo-amd64",
            "vmlinuz-6.12.10+bpo-amd64",
            "vmlinuz-6.12.95+deb12-cloud-amd64x",
            "vmlinuz-6.1.0-28-amd64",
            "vmlinuz-6.18.1-amd64",
            "config-6.12.99+deb12-amd64",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(newest_kernel(&names).unwrap(), "vmlinuz-6.12.10+bpo-amd64");
        assert_eq!(newest_kernel(&names[3..]), None);
    }

    #[test]
    fn a_cached_accel_verdict_counts_only_for_the_boot_that_wrote_it() {
        let line = accel_cache_line(Accel::Tcg, "b1");
        assert_eq!(parse_accel_cache(&line, "b1"), Some(Accel::Tcg));
        assert_eq!(parse_accel_cache(&line, "b2"), None);
        assert_eq!(parse_accel_cache(&line, ""), None);
        assert_eq!(parse_accel_cache("bogus boot_id=b1", "b1"), None);
    }

    #[test]
    fn shell_quoting_survives_single_quotes() {
        assert_eq!(sh_quote(Path::new("/tmp/a'b")), r"'/tmp/a'\''b'");
    }

    /// The spec of a test that boots the 6.12 guest (5-minute limit); fails, never
    /// skips, without root or the VM deps. `what` says what the test does there.
    fn guest_test_spec(what: &str) -> VmSpec {
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test boots a VM as the calling user and {what}, so it needs root; run it \
             as root, as CI does"
        );
        if let Err(e) = check_vm_deps() {
            panic!("this test boots a 6.12 guest with virtme-ng: {e}");
        }
        VmSpec {
            timeout: Duration::from_secs(300),
            ..VmSpec::detect().unwrap_or_else(|e| panic!("{e}"))
        }
    }

    /// Needs root and the VM deps (`make vm-deps`): 6.12 guests, two side by side (~30 s
    /// each under TCG; none touches the host's state): one checking netem and the native
    /// modules, then one whose script starts without its output ports; one crashing its
    /// kernel, then one that cannot boot. A failure in any fails the test.
    #[test]
    #[ignore = "root and the VM: boots two 6.12 guests; `make test` runs it serially"]
    fn guests_side_by_side_have_netem_report_a_crash_and_a_failed_boot() {
        std::thread::scope(|sc| {
            let a = sc.spawn(|| {
                guest_kernel_has_netem_and_native_htcp();
                a_script_started_without_its_output_ports_gets_them();
            });
            let b = sc.spawn(|| {
                a_guest_that_dies_is_reported_with_its_kernel_log();
                a_guest_that_dies_booting_is_booted_again();
            });
            let (a, b) = (a.join(), b.join());
            assert!(
                a.is_ok() && b.is_ok(),
                "netem and native modules: {}; a crashed guest, a failed boot: {} (the panic \
                 is above)",
                if a.is_ok() { "ok" } else { "FAILED" },
                if b.is_ok() { "ok" } else { "FAILED" }
            );
        });
    }

    /// A script the guest's init started without its output ports (as when udev settles
    /// late on the virtual clock; here they are closed and the output sent to /dev/null
    /// before the script) still has its stdout and stderr reach the host.
    fn a_script_started_without_its_output_ports_gets_them() {
        let spec = guest_test_spec("closes its script's output ports");
        let mut started = false;
        let out = run_attempt_inner(
            &spec,
            "echo on-stdout; echo on-stderr >&2",
            false,
            "exec 3>&- 4>&- 5>&- >/dev/null 2>/dev/null; ",
            &mut started,
        )
        .unwrap_or_else(|e| panic!("running the guest: {e}"));
        assert!(started && out.success(), "{out:?}");
        assert!(out.stdout.contains("on-stdout"), "{out:?}");
        assert!(out.stderr.contains("on-stderr"), "{out:?}");
    }

    /// A guest that dies before its script starts (here: 48 MiB, too little for the
    /// kernel and initramfs, which dies in ~4 s with nothing on stderr, as a TCG boot now
    /// and then does) is booted again, and after the last boot reported as such.
    fn a_guest_that_dies_booting_is_booted_again() {
        let spec = VmSpec {
            memory_mb: 48,
            ..guest_test_spec("boots a guest with too little memory")
        };
        let t = Instant::now();
        match run_in_vm(&spec, "echo the-script-ran") {
            Err(e @ VmError::BootFailed { attempts, .. }) => {
                assert_eq!(attempts, BOOT_ATTEMPTS);
                let shown = e.to_string();
                assert!(
                    shown.contains(&format!("{BOOT_ATTEMPTS} boots in a row")),
                    "{shown}"
                );
                eprintln!("a guest that cannot boot, {:.0?}: {shown}", t.elapsed());
            }
            other => panic!("a guest that cannot boot must give BootFailed, got {other:?}"),
        }
    }

    /// Boots the 6.12 guest: a netns, netem and the native H-TCP module work there, and a
    /// script's exit status comes back.
    fn guest_kernel_has_netem_and_native_htcp() {
        let spec = guest_test_spec("loads modules and builds a netns in its guest");
        let script = "\
            set -e
            echo \"kernel $(uname -r)\"
            modprobe sch_netem
            modprobe tcp_htcp
            echo \"ccs $(cat /proc/sys/net/ipv4/tcp_available_congestion_control)\"
            ip netns add cctl-vmt
            ip -n cctl-vmt link add vmt0 type veth peer name vmt1
            ip -n cctl-vmt link set vmt0 up
            tc -n cctl-vmt qdisc add dev vmt0 root netem delay 10ms
            echo \"qdisc $(tc -n cctl-vmt qdisc show dev vmt0)\"
            ip netns del cctl-vmt
            exit 7
        ";
        let out = run_in_vm(&spec, script).unwrap_or_else(|e| panic!("running the guest: {e}"));
        let ctx = format!(
            "accel {}\nstdout:\n{}\nstderr:\n{}",
            spec.accel, out.stdout, out.stderr
        );
        // The trailing `exit 7` proves a failing guest command comes back as such.
        assert_eq!(out.status, 7, "the script failed before its end\n{ctx}");
        let line = |tag: &str| {
            out.stdout
                .lines()
                .find_map(|l| l.strip_prefix(tag))
                .unwrap_or_else(|| panic!("no {tag:?} line\n{ctx}"))
                .to_string()
        };
        assert!(line("kernel ").starts_with("6.12"), "{ctx}");
        assert!(
            line("ccs ").split_whitespace().any(|cc| cc == "htcp"),
            "{ctx}"
        );
        let qdisc = line("qdisc ");
        assert!(
            qdisc.contains("netem") && qdisc.contains("delay 10ms"),
            "{ctx}"
        );
        eprintln!(
            "guest boot + script took {:.1} s ({})",
            out.elapsed.as_secs_f64(),
            spec.accel
        );
    }

    /// A guest whose kernel dies mid-script is reported as such, with the kernel's last
    /// words.
    fn a_guest_that_dies_is_reported_with_its_kernel_log() {
        let spec = guest_test_spec("crashes its guest's kernel");
        let script = "\
            echo cctl-marker-before-crash >/dev/kmsg
            # `dmesg -w` starts beside the script; under TCG its start can take seconds
            # (more on a busy host): wait for it, then give it time to write the marker.
            for i in $(seq 150); do pgrep -x dmesg >/dev/null && break; sleep 0.2; done
            sleep 3
            echo c >/proc/sysrq-trigger
            echo still-alive
        ";
        match run_in_vm(&spec, script) {
            Err(e @ VmError::NoExitStatus { .. }) => {
                let VmError::NoExitStatus {
                    ref kernel_log,
                    ref stdout,
                    ..
                } = e
                else {
                    unreachable!()
                };
                assert!(
                    kernel_log.contains("cctl-marker-before-crash"),
                    "the guest's kernel log did not reach the host:\n{kernel_log}"
                );
                assert!(!stdout.contains("still-alive"), "{stdout}");
                let shown = e.to_string();
                assert!(
                    shown.contains("without the script finishing")
                        && shown.contains("cctl-marker-before-crash"),
                    "{shown}"
                );
            }
            other => panic!("a crashed guest must give NoExitStatus, got {other:?}"),
        }
    }
}
