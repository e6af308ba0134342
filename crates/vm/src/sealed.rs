//! The sealed guest: a guest that does not wait on the host from boot until its script has
//! ended, so that on the virtual clock its run is a function of its inputs alone.
//!
//! Under QEMU's `-icount shift=0,sleep=off` the guest's clock counts the instructions it
//! executes, and when the guest idles the clock jumps to the next timer. A guest whose root
//! file system is the host's (vng's virtiofs) idles whenever it waits for the host, so every
//! file it opens costs guest time in proportion to how slowly the host answered: two runs of
//! one point started 21.6 s of guest time apart after boot and differed 0.076 s into the
//! run (2026-11-28). A sealed guest instead boots QEMU directly (no vng, no virtiofs) from an
//! initramfs that carries everything the script needs:
//! - static busybox (`/bin/busybox`: the shell of `/init`, `mount`, `tar`), bash, kmod as
//!   `modprobe`, and each program the caller names (without its debug information), with
//!   the libraries `ldd` lists (system files, at their paths);
//! - the guest kernel's network modules (`kernel/net/`, veth, ifb, tun; virtio_blk for the
//!   way out) with every module they depend on, and its `/boot/config-*` (libbpf reads it);
//! - the files and directories the caller names ([`Sealed::carry`]), each at the fixed guest
//!   path the caller gives it, and the results directory ([`Sealed::out`]) at [`GUEST_OUT`]
//!   with what it already holds.
//!
//! Nothing of where the caller's files are on the host reaches the guest: not the results
//! directory's path (its length alone changed a run: `X/a` and `X/aa` differed at the first
//! queue sample, 2026-12-08), not the binary's, not the working directory (the script
//! starts in `/`).
//!
//! The script's stdout and stderr go to two serial ports and the kernel's console to a
//! third; QEMU writes each to a file the host follows (writing a port is done by the time the
//! guest's instruction is, so output costs no waiting). A fourth port says when the script
//! started and its exit status. After the script, and only then, the guest loads
//! `virtio_blk` and writes [`Sealed::out`] as a tar archive onto a sparse disk image, which
//! the host unpacks into the same directory once QEMU has exited.
//!
//! Every file in the initramfs has mtime 0, and the guest's wall clock starts at
//! [`RTC_BASE`] on QEMU's virtual clock (`-rtc clock=vm`), so that nothing from the host's
//! clock reaches the guest.
//!
//! The guest reads no disk before its script has ended: its kernel is told not to ask the
//! BIOS about disks (`edd=off`, see [`KERNEL_CMDLINE`]), because QEMU completes a disk read
//! when the host gets to it, which made loaded hosts' runs differ.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use crate::{find_tool, io_err, VmError, VmSpec, ICOUNT_SHIFT};

/// A host file or directory and the path the guest sees it at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried {
    /// Where it is on the host.
    pub host: PathBuf,
    /// Where the guest sees it: an absolute path that does not depend on the host's (a
    /// system file's own path, or one of the caller's fixed paths such as [`GUEST_CCTL`]).
    pub guest: PathBuf,
}

impl Carried {
    /// `host`, seen by the guest at `guest`.
    pub fn at(host: impl Into<PathBuf>, guest: impl Into<PathBuf>) -> Carried {
        Carried {
            host: host.into(),
            guest: guest.into(),
        }
    }

    /// A system file or directory (`/etc/fonts`), seen by the guest at its own path.
    pub fn system(path: impl Into<PathBuf>) -> Carried {
        let p = path.into();
        Carried {
            host: p.clone(),
            guest: p,
        }
    }
}

/// Where a sealed guest sees its results directory ([`Sealed::out`]); the script also
/// starts with it as its working directory's sibling, in `/`.
pub const GUEST_OUT: &str = "/out";

/// Where a sealed guest sees the `cctl` binary its caller carries in.
pub const GUEST_CCTL: &str = "/usr/bin/cctl";

/// Where a sealed guest sees input files its caller carries in (a scenario file), each
/// under its file name.
pub const GUEST_IN: &str = "/in";

/// What a sealed guest carries in and hands back ([`VmSpec::sealed`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// Files and directories (directories with everything under them) the guest gets at
    /// their guest paths, read-only in effect: what the guest changes there is lost.
    pub carry: Vec<Carried>,
    /// Programs given by path (the `cctl` binary itself), carried at their guest paths
    /// without their debug information, with the libraries they load (at those libraries'
    /// own paths).
    pub programs: Vec<Carried>,
    /// Programs the script runs, found on the host's `PATH` (and in /sbin, /usr/sbin), each
    /// carried with its libraries at its host path (`ip`, `tc`).
    /// `(program, where it comes from)`, as `cctl_netem::tc::TOOLS` gives them.
    pub tools: Vec<(&'static str, &'static str)>,
    /// The directory the script writes its results into, an absolute host path: carried in
    /// at [`GUEST_OUT`] with what it holds, and copied back after the script (what the
    /// guest wrote there replaces the host's files of the same names).
    pub out: PathBuf,
}

/// The guest's wall clock at boot (QEMU's `-rtc base=`): a fixed date, so that dates the
/// guest writes cannot make two runs differ.
pub const RTC_BASE: &str = "2026-01-01T00:00:00";

/// Programs every sealed guest carries, besides [`Sealed::tools`]: busybox (static: `/init`
/// runs before any library is known to load), bash for the script, kmod as `modprobe`.
const CARRIED_TOOLS: &[(&str, &str)] = &[
    ("busybox", "Debian package busybox-static"),
    ("bash", "Debian package bash"),
    ("kmod", "Debian package kmod"),
];

/// Size of the disk the guest writes its results onto, bytes (sparse on the host).
const OUT_DISK_BYTES: u64 = 8 << 30;

/// The guest kernel's command line: the boot console on the first serial port, `/init` from
/// the initramfs, no address-space randomisation (symbols stay where `System.map` says),
/// power off on a panic; two costs a network test does not need: the speculative-
/// execution mitigations (retpolines, usercopy barriers, RSB filling) and the zeroing of
/// every page the kernel allocates (Debian's `init_on_alloc` default); and `edd=off`.
///
/// `edd=off` is what makes a loaded host's runs identical. Without it the kernel's real-mode
/// setup asks the BIOS for the boot disk's EDD data and MBR signature (`query_edd`,
/// `arch/x86/boot/edd.c`), an int 13h read of sector 0 of the results disk. SeaBIOS sends it
/// to the virtio disk and polls the used ring with `usleep(5)` until it completes, and QEMU
/// completes it on its main-loop thread (ioeventfd, then an asynchronous block read), as soon
/// as the host gets to it. So the number of polls, and every guest instruction count after
/// them, depended on the host's load: two loaded runs first went apart at guest instruction
/// 5,830,839, in SeaBIOS's `virtio_blk_op`, after 2 polls in one run and 4 in the other.
/// With `edd=off` two runs on a host at load 5.7 executed the same 3,697,791,861
/// instructions in the same translation blocks (a TCG plugin's rolling hash of every block's
/// address, 2026-12-08; docs/explanation/virtual-clock.md). The disk is not read again until
/// the script has ended.
const KERNEL_CMDLINE: &str =
    "console=ttyS0 rdinit=/init nokaslr panic=-1 mitigations=off init_on_alloc=0 edd=off";

/// What `-icount` gets besides the clock: record mode, into /dev/null. Not for a replay:
/// in record mode the vCPU thread holds QEMU's replay mutex from the start of a slice of
/// guest instructions until they are counted, and the main-loop thread takes it before it
/// moves an idle guest's clock to the next timer. Without it the main loop could do so
/// while the guest had just halted and the last instructions before the `hlt` were not yet
/// counted: the clock then overshot the timer by those instructions (204 and 331 ns were
/// seen), whenever the host's timing put the main loop in that window. Two loaded runs went
/// apart there, and every few-ns difference of the runs measured before was of this kind;
/// with it, runs stayed identical beside a host process waking QEMU's main loop 2,000
/// times a second, which made 5 of 5 runs without it differ (2026-12-08,
/// docs/explanation/virtual-clock.md). It cost no measurable wall time. Record mode allows
/// one vCPU only, which the virtual clock has ([`crate::VIRTUAL_VCPUS`]).
const ICOUNT_RECORD: &str = "rr=record,rrfile=/dev/null";

/// QEMU's CPU model: TCG's `max` without ERMS and FSRM. With them the kernel copies and
/// clears memory with `rep movsb`/`rep stosb`, which TCG executes one byte per iteration
/// (each counted as an instruction on the virtual clock); without them it uses
/// `rep movsq`/`rep stosq`, eight bytes per iteration. One 250 Mbit/s flow took 22 % less
/// wall time for the same traffic (docs/explanation/virtual-clock.md).
const CPU_MODEL: &str = "max,-erms,-fsrm";

/// Files under a run directory: the initramfs, the results disk, what the ports write.
pub(crate) const INITRAMFS: &str = "initramfs.cpio";
pub(crate) const OUT_DISK: &str = "out.img";
pub(crate) const CONTROL: &str = "control";

/// Builds the initramfs for running `script` (bash; `env` is exported first) in the sealed
/// guest `spec` describes, and the results disk, in `run_dir`; returns QEMU's arguments.
/// The script's stdout and stderr go to `run_dir/stdout` and `run_dir/stderr`, the kernel's
/// log to `run_dir/kmsg`, and the start mark and exit status to `run_dir/control`.
///
/// Errors: a tool or library not found, the guest kernel's modules or config missing
/// (`/lib/modules/<release>`, `/boot/config-<release>`), or a file that cannot be read or
/// written.
pub(crate) fn prepare(
    spec: &VmSpec,
    sealed: &Sealed,
    script: &str,
    run_dir: &Path,
) -> Result<Vec<OsString>, VmError> {
    let release = kernel_release(&spec.kernel)?;
    let mut tree = Tree::default();
    let mut found = BTreeMap::new();
    for &(tool, package) in CARRIED_TOOLS.iter().chain(&sealed.tools) {
        let path = find_tool(tool).ok_or(VmError::MissingTool { tool, package })?;
        tree.add_program(&path)?;
        found.insert(tool, path);
    }
    tree.symlink("/sbin/modprobe", &found["kmod"]);
    for (i, p) in sealed.programs.iter().enumerate() {
        let stripped = run_dir.join(format!("program-{i}"));
        strip_debug(&p.host, &stripped)?;
        tree.add_at(&stripped, &p.guest)?;
        tree.add_libraries(&p.host)?;
    }
    for m in modules(&release)? {
        tree.add(&m, false)?;
    }
    let mod_dir = Path::new("/lib/modules").join(&release);
    for index in fs::read_dir(&mod_dir).map_err(io_err(format!("reading {}", mod_dir.display())))? {
        let p = index
            .map_err(io_err(format!("reading {}", mod_dir.display())))?
            .path();
        if p.is_file() {
            tree.add(&p, false)?;
        }
    }
    tree.add(&Path::new("/boot").join(format!("config-{release}")), false)?;
    for c in &sealed.carry {
        if c.host == c.guest {
            tree.add(&c.host, true)?;
        } else {
            tree.add_at(&c.host, &c.guest)?;
        }
    }
    tree.add_at(&sealed.out, Path::new(GUEST_OUT))?;
    tree.data("/script.sh", script.as_bytes().to_vec(), 0o644);
    tree.data("/init", init_script(&found["busybox"]).into_bytes(), 0o755);

    let cpio = run_dir.join(INITRAMFS);
    tree.write_cpio(&cpio)?;
    let disk = run_dir.join(OUT_DISK);
    File::create(&disk)
        .and_then(|f| f.set_len(OUT_DISK_BYTES))
        .map_err(io_err(format!("creating {}", disk.display())))?;
    Ok(qemu_args(spec, &cpio, &disk, run_dir))
}

/// Copies the program `from` to `to` without its debug information (`objcopy
/// --strip-debug`; the symbol table stays, so backtraces and profiles still name
/// functions). The guest unpacks every byte of its initramfs, and the debug information is
/// most of a cctl binary (a release build: 122 MB, 28 MB without it); it also names the
/// directories the build was made in.
///
/// Errors: objcopy missing ([`VmError::MissingTool`]) or failing.
fn strip_debug(from: &Path, to: &Path) -> Result<(), VmError> {
    let objcopy = find_tool("objcopy").ok_or(VmError::MissingTool {
        tool: "objcopy",
        package: "Debian package binutils",
    })?;
    let out = Command::new(objcopy)
        .arg("--strip-debug")
        .arg(from)
        .arg(to)
        .output()
        .map_err(io_err("running objcopy (package binutils)"))?;
    if !out.status.success() {
        return Err(VmError::Io {
            what: format!("stripping {} for the guest", from.display()),
            source: io::Error::other(String::from_utf8_lossy(&out.stderr).trim().to_string()),
        });
    }
    Ok(())
}

/// QEMU's command line for the sealed guest: TCG on the virtual clock, one machine, no
/// default devices, four serial ports to files in `run_dir`, the results disk.
pub(crate) fn qemu_args(spec: &VmSpec, cpio: &Path, disk: &Path, run_dir: &Path) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |s: &str| a.push(s.into());
    for s in [
        "-machine",
        "pc,accel=tcg",
        "-nodefaults",
        "-display",
        "none",
        "-no-reboot",
    ] {
        push(s);
    }
    push("-cpu");
    push(CPU_MODEL);
    push("-m");
    push(&spec.memory_mb.to_string());
    push("-smp");
    push(&spec.cpus.to_string());
    push("-icount");
    push(&format!("shift={ICOUNT_SHIFT},sleep=off,{ICOUNT_RECORD}"));
    if let Some(seed) = spec.seed {
        push("-seed");
        push(&seed.to_string());
    }
    push("-rtc");
    push(&format!("base={RTC_BASE},clock=vm"));
    push("-append");
    push(KERNEL_CMDLINE);
    for (i, name) in ["kmsg", "stdout", "stderr", CONTROL].iter().enumerate() {
        a.push("-chardev".into());
        let mut c = OsString::from(format!("file,id=s{i},path="));
        c.push(run_dir.join(name).as_os_str());
        a.push(c);
        a.push("-serial".into());
        a.push(format!("chardev:s{i}").into());
    }
    a.push("-kernel".into());
    a.push(spec.kernel.clone().into());
    a.push("-initrd".into());
    a.push(cpio.into());
    a.push("-drive".into());
    let mut d = OsString::from("format=raw,if=virtio,file=");
    d.push(disk.as_os_str());
    a.push(d);
    a
}

/// `/init`: mounts what a network test needs, runs the script in `/` with its output on
/// ttyS1 and ttyS2 and its marks on ttyS3, writes [`GUEST_OUT`] onto the results disk,
/// powers off.
fn init_script(busybox: &Path) -> String {
    format!(
        r#"#!{bb} sh
{bb} mkdir -p /proc /sys /dev /run /tmp /bin /sbin /usr/bin /usr/sbin /root
{bb} mount -t proc proc /proc
{bb} --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t bpf bpf /sys/fs/bpf
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
echo started >/dev/ttyS3
cd /
bash /script.sh </dev/null >/dev/ttyS1 2>/dev/ttyS2
echo "status $?" >/dev/ttyS3
modprobe virtio_blk
i=0; while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
cd {GUEST_OUT} && tar -cf /dev/vda . && sync && echo written >/dev/ttyS3
echo o >/proc/sysrq-trigger
sleep 60
"#,
        bb = busybox.display(),
    )
}

/// What the guest's control port says: whether the script started, and its exit status.
pub(crate) fn control(run_dir: &Path) -> (bool, Option<i32>) {
    let text = fs::read_to_string(run_dir.join(CONTROL)).unwrap_or_default();
    let started = text.lines().any(|l| l == "started");
    let status = text
        .lines()
        .find_map(|l| l.strip_prefix("status "))
        .and_then(|s| s.trim().parse().ok());
    (started, status)
}

/// Unpacks what the guest wrote onto the results disk into `out`.
///
/// Errors: the disk holds no archive (the guest did not get that far), or unpacking fails.
pub(crate) fn collect(run_dir: &Path, out: &Path) -> Result<(), VmError> {
    let disk = run_dir.join(OUT_DISK);
    let written = fs::read_to_string(run_dir.join(CONTROL))
        .unwrap_or_default()
        .lines()
        .any(|l| l == "written");
    if !written {
        return Err(VmError::Io {
            what: format!("copying the guest's {} back", out.display()),
            source: io::Error::other("the guest did not write its results disk"),
        });
    }
    let f = File::open(&disk).map_err(io_err(format!("opening {}", disk.display())))?;
    tar::Archive::new(f).unpack(out).map_err(io_err(format!(
        "unpacking the guest's results into {}",
        out.display()
    )))
}

/// The release of a kernel image named `vmlinuz-<release>`.
fn kernel_release(kernel: &Path) -> Result<String, VmError> {
    kernel
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("vmlinuz-"))
        .map(str::to_string)
        .ok_or_else(|| VmError::Io {
            what: format!("reading the release of {}", kernel.display()),
            source: io::Error::other("a sealed guest needs a kernel image named vmlinuz-<release>"),
        })
}

/// Whether a module (its path under `/lib/modules/<release>/`) is one the guest carries:
/// the network stack's, the links and devices of the dumbbell, the TUN device (for a
/// `cctl conform` run in a sealed guest; conform itself still boots vng's), and the results
/// disk.
fn wanted_module(m: &str) -> bool {
    m.starts_with("kernel/net/")
        || ["veth", "ifb", "tun"]
            .iter()
            .any(|n| m.starts_with(&format!("kernel/drivers/net/{n}.ko")))
        || m.starts_with("kernel/drivers/block/virtio_blk.ko")
}

/// The modules a sealed guest carries ([`wanted_module`] and what they depend on, from
/// `modules.dep`), as host paths.
fn modules(release: &str) -> Result<Vec<PathBuf>, VmError> {
    let dir = Path::new("/lib/modules").join(release);
    let dep = dir.join("modules.dep");
    let text = fs::read_to_string(&dep).map_err(io_err(format!(
        "reading {} (the guest kernel's modules)",
        dep.display()
    )))?;
    let mut all = std::collections::BTreeSet::new();
    for line in text.lines() {
        let Some((m, deps)) = line.split_once(':') else {
            continue;
        };
        if wanted_module(m) {
            all.insert(m.to_string());
            all.extend(deps.split_whitespace().map(str::to_string));
        }
    }
    Ok(all.into_iter().map(|m| dir.join(m)).collect())
}

/// One entry of the initramfs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    /// A host file, copied with its permission bits.
    File(PathBuf),
    Symlink(PathBuf),
    /// Contents and permission bits.
    Data(Vec<u8>, u32),
}

/// The initramfs being built: guest path → entry (sorted, so parents come first).
#[derive(Debug, Default)]
struct Tree {
    entries: BTreeMap<PathBuf, Entry>,
}

impl Tree {
    /// Adds `p` at its host path, with every directory and symlink on the way to it (a
    /// symlink is kept as one, and what it points to is added too); a directory with what
    /// is under it when `recurse`.
    fn add(&mut self, p: &Path, recurse: bool) -> Result<(), VmError> {
        let real = self
            .add_components(p, 0)
            .map_err(io_err(format!("carrying {} into the guest", p.display())))?;
        let md = fs::metadata(&real).map_err(io_err(format!("reading {}", real.display())))?;
        if md.is_file() {
            self.entries.insert(real.clone(), Entry::File(real));
        } else if md.is_dir() && recurse {
            let children =
                fs::read_dir(&real).map_err(io_err(format!("reading {}", real.display())))?;
            for c in children {
                let c = c.map_err(io_err(format!("reading {}", real.display())))?;
                self.add(&c.path(), true)?;
            }
        }
        Ok(())
    }

    /// Adds the directories and symlinks on the way to `p`; returns where it really is.
    fn add_components(&mut self, p: &Path, depth: u32) -> io::Result<PathBuf> {
        if depth > 40 {
            return Err(io::Error::other("too many levels of symbolic links"));
        }
        let mut cur = PathBuf::from("/");
        for comp in p.components() {
            match comp {
                Component::Normal(c) => {
                    let next = cur.join(c);
                    let md = fs::symlink_metadata(&next)?;
                    if md.file_type().is_symlink() {
                        let target = fs::read_link(&next)?;
                        self.entries
                            .insert(next.clone(), Entry::Symlink(target.clone()));
                        cur = self.add_components(&cur.join(target), depth + 1)?;
                    } else {
                        if md.is_dir() {
                            self.entries.entry(next.clone()).or_insert(Entry::Dir);
                        }
                        cur = next;
                    }
                }
                Component::ParentDir => {
                    cur.pop();
                }
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        Ok(cur)
    }

    /// Adds the host file or directory `host` (a directory with everything under it,
    /// symlinks followed) at the guest path `guest`, with the directories on the way.
    fn add_at(&mut self, host: &Path, guest: &Path) -> Result<(), VmError> {
        let md = fs::metadata(host).map_err(io_err(format!("reading {}", host.display())))?;
        if let Some(parent) = guest.parent() {
            self.dir(parent);
        }
        if md.is_file() {
            self.entries
                .insert(guest.to_path_buf(), Entry::File(host.to_path_buf()));
        } else if md.is_dir() {
            self.entries.insert(guest.to_path_buf(), Entry::Dir);
            let children =
                fs::read_dir(host).map_err(io_err(format!("reading {}", host.display())))?;
            for c in children {
                let c = c.map_err(io_err(format!("reading {}", host.display())))?;
                self.add_at(&c.path(), &guest.join(c.file_name()))?;
            }
        }
        Ok(())
    }

    /// Adds the program at `path` and the shared libraries `ldd` says it loads.
    fn add_program(&mut self, path: &Path) -> Result<(), VmError> {
        self.add(path, false)?;
        self.add_libraries(path)
    }

    /// Adds the shared libraries `ldd` says the program at `path` loads, at their paths.
    fn add_libraries(&mut self, path: &Path) -> Result<(), VmError> {
        let out = Command::new("ldd")
            .arg(path)
            .output()
            .map_err(io_err("running ldd (package libc-bin)"))?;
        // A static program: ldd says "not a dynamic executable" and exits 1.
        if !out.status.success() {
            return Ok(());
        }
        for lib in String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter(|w| w.starts_with('/'))
        {
            self.add(Path::new(lib), false)?;
        }
        Ok(())
    }

    fn symlink(&mut self, at: &str, target: &Path) {
        self.entries
            .insert(PathBuf::from(at), Entry::Symlink(target.to_path_buf()));
    }

    fn dir(&mut self, p: &Path) {
        let mut cur = PathBuf::from("/");
        for c in p.components() {
            if let Component::Normal(c) = c {
                cur.push(c);
                self.entries.entry(cur.clone()).or_insert(Entry::Dir);
            }
        }
    }

    fn data(&mut self, at: &str, bytes: Vec<u8>, mode: u32) {
        self.entries
            .insert(PathBuf::from(at), Entry::Data(bytes, mode));
    }

    /// Writes the tree as a newc archive (what the kernel unpacks as an initramfs), with
    /// owner root and mtime 0 throughout.
    fn write_cpio(&self, path: &Path) -> Result<(), VmError> {
        let err = io_err(format!("writing {}", path.display()));
        let f = File::create(path).map_err(io_err(format!("creating {}", path.display())))?;
        let mut w = BufWriter::new(f);
        for (i, (p, e)) in self.entries.iter().enumerate() {
            let name = p.to_string_lossy();
            let name = name.trim_start_matches('/');
            let b = cpio::NewcBuilder::new(name)
                .ino(i as u32 + 1)
                .nlink(1)
                .mtime(0);
            let (mode, bytes): (u32, Vec<u8>) = match e {
                Entry::Dir => (0o040_755, Vec::new()),
                Entry::Symlink(t) => (0o120_777, t.as_os_str().as_bytes().to_vec()),
                Entry::Data(d, m) => (0o100_000 | m, d.clone()),
                Entry::File(src) => {
                    let mut bytes = Vec::new();
                    let mut f =
                        File::open(src).map_err(io_err(format!("reading {}", src.display())))?;
                    f.read_to_end(&mut bytes)
                        .map_err(io_err(format!("reading {}", src.display())))?;
                    let perm = f
                        .metadata()
                        .map_err(io_err(format!("reading {}", src.display())))?
                        .permissions()
                        .mode();
                    // Executable or not, nothing more: the host's umask must not reach
                    // the guest.
                    let mode = if perm & 0o111 != 0 { 0o755 } else { 0o644 };
                    (0o100_000 | mode, bytes)
                }
            };
            let mut fw = b.mode(mode).write(&mut w, bytes.len() as u32);
            fw.write_all(&bytes)
                .map_err(io_err(format!("writing {}", path.display())))?;
            fw.finish()
                .map_err(io_err(format!("writing {}", path.display())))?;
        }
        cpio::newc::trailer(&mut w).map_err(io_err(format!("writing {}", path.display())))?;
        w.flush().map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_carried_are_the_network_stack_the_dumbbell_links_and_the_results_disk() {
        assert!(wanted_module("kernel/net/sched/sch_netem.ko.xz"));
        assert!(wanted_module("kernel/net/ipv4/tcp_htcp.ko.xz"));
        assert!(wanted_module("kernel/drivers/net/veth.ko.xz"));
        assert!(wanted_module("kernel/drivers/net/ifb.ko"));
        assert!(wanted_module("kernel/drivers/net/tun.ko.xz"));
        assert!(wanted_module("kernel/drivers/block/virtio_blk.ko.xz"));
        assert!(!wanted_module("kernel/drivers/net/vxlan/vxlan.ko.xz"));
        assert!(!wanted_module("kernel/drivers/net/veth_other.ko.xz"));
        assert!(!wanted_module("kernel/sound/core/snd.ko.xz"));
    }

    #[test]
    fn the_control_port_gives_the_start_and_the_status() {
        let dir = std::env::temp_dir().join(format!("cctl-sealed-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(CONTROL), "").unwrap();
        assert_eq!(control(&dir), (false, None));
        fs::write(dir.join(CONTROL), "started\n").unwrap();
        assert_eq!(control(&dir), (true, None));
        fs::write(dir.join(CONTROL), "started\nstatus 3\nwritten\n").unwrap();
        assert_eq!(control(&dir), (true, Some(3)));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_command_line_is_the_virtual_clock_the_seed_a_fixed_date_and_four_ports() {
        let mut spec = crate::tests::spec(crate::Accel::Tcg);
        spec.seed = Some(9);
        let a: Vec<String> = qemu_args(
            &spec,
            Path::new("/r/i.cpio"),
            Path::new("/r/o.img"),
            Path::new("/r"),
        )
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
        let has = |pair: [&str; 2]| a.windows(2).any(|w| w[0] == pair[0] && w[1] == pair[1]);
        assert!(
            has(["-icount", "shift=0,sleep=off,rr=record,rrfile=/dev/null"]),
            "{a:?}"
        );
        assert!(has(["-seed", "9"]));
        assert!(has(["-rtc", "base=2026-01-01T00:00:00,clock=vm"]));
        assert!(has(["-initrd", "/r/i.cpio"]));
        assert!(has(["-chardev", "file,id=s1,path=/r/stdout"]));
        assert!(has(["-chardev", "file,id=s3,path=/r/control"]));
        assert_eq!(a.iter().filter(|s| *s == "-serial").count(), 4);
        // No virtiofs, no network: nothing the guest could wait on.
        assert!(!a
            .iter()
            .any(|s| s.contains("virtiofs") || s.contains("netdev")));
    }

    #[test]
    fn results_directories_at_paths_of_other_lengths_and_modes_give_the_same_initramfs() {
        let base = std::env::temp_dir().join(format!("cctl-sealed-paths-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let cpio = |out: &Path, exe_mode: u32| {
            fs::create_dir_all(out.join("runs/reno")).unwrap();
            fs::write(out.join("request.json"), b"{}").unwrap();
            fs::write(out.join("runs/reno/x"), b"x").unwrap();
            let exe = out.with_extension("bin");
            fs::write(&exe, b"\x7fELF").unwrap();
            fs::set_permissions(&exe, fs::Permissions::from_mode(exe_mode)).unwrap();
            let mut t = Tree::default();
            t.add_at(&exe, Path::new(GUEST_CCTL)).unwrap();
            t.add_at(out, Path::new(GUEST_OUT)).unwrap();
            assert!(
                t.entries.keys().all(|p| !p.starts_with(&base)),
                "no host path in the guest: {:?}",
                t.entries.keys().collect::<Vec<_>>()
            );
            let file = out.with_extension("cpio");
            t.write_cpio(&file).unwrap();
            fs::read(file).unwrap()
        };
        let a = cpio(&base.join("X/a"), 0o755);
        let b = cpio(
            &base.join("X/a-much-longer-results-directory/20261208T031500Z"),
            0o775,
        );
        assert!(
            a == b,
            "the initramfs depends on where the results are on the host"
        );
        fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_kernel_asks_the_bios_about_no_disk() {
        // The BIOS's disk read completes when QEMU's main loop gets to it: with it, loaded
        // hosts' runs differed from instruction 5,830,839 of the boot on.
        assert!(KERNEL_CMDLINE.split(' ').any(|w| w == "edd=off"));
        let spec = crate::tests::spec(crate::Accel::Tcg);
        let a = qemu_args(&spec, Path::new("/r/i"), Path::new("/r/o"), Path::new("/r"));
        assert!(a
            .windows(2)
            .any(|w| w[0] == "-append" && w[1] == KERNEL_CMDLINE));
    }

    #[test]
    fn the_tree_keeps_symlinks_on_the_way_and_adds_what_they_point_to() {
        let dir = std::env::temp_dir().join(format!("cctl-sealed-tree-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("usr/lib")).unwrap();
        fs::write(dir.join("usr/lib/libx.so.1"), b"x").unwrap();
        std::os::unix::fs::symlink("usr/lib", dir.join("lib")).unwrap();
        let mut t = Tree::default();
        t.add(&dir.join("lib/libx.so.1"), false).unwrap();
        assert_eq!(
            t.entries.get(&dir.join("lib")),
            Some(&Entry::Symlink("usr/lib".into()))
        );
        assert_eq!(
            t.entries.get(&dir.join("usr/lib/libx.so.1")),
            Some(&Entry::File(dir.join("usr/lib/libx.so.1")))
        );
        assert_eq!(t.entries.get(&dir.join("usr/lib")), Some(&Entry::Dir));
        let cpio = dir.join("t.cpio");
        t.write_cpio(&cpio).unwrap();
        let bytes = fs::read(&cpio).unwrap();
        assert!(bytes.starts_with(b"070701"));
        assert!(bytes.windows(10).any(|w| w == b"TRAILER!!!"));
        fs::remove_dir_all(&dir).unwrap();
    }
}
