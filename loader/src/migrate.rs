//! Moving established TCP flows to another congestion control, and the census of which
//! congestion control (and which loaded version of it) every TCP socket runs.
//!
//! Both run bpf/probe/migrate.bpf.c, an `iter/tcp` program, in the network namespace asked for
//! (a thread joins it with `setns(2)` and creates the iterator there: bpf_iter_tcp walks the
//! namespace of the task that creates it). A migration calls `bpf_setsockopt(TCP_CONGESTION)`
//! on each matching ESTABLISHED socket; cwnd and ssthresh are kept, the new algorithm's
//! `init` runs.
//!
//! Which algorithms a namespace may be given: in the initial network namespace, any
//! registered one; in any other, only those in `net.ipv4.tcp_allowed_congestion_control`
//! unless [`MigrateRequest::allow_restricted`]. This is the kernel's own rule for a
//! namespace's default (`tcp_set_default_congestion_control` refuses a restricted algorithm
//! outside init_net with EPERM) applied to migrations, because `bpf_setsockopt` passes
//! `cap_net_admin = true` and the kernel would not check anything.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Iter, OpenObject, RingBufferBuilder};

use crate::algo::{read_name, write_name};
use crate::catalogue;
use crate::error::{Error, Result};
use crate::kernel;
use crate::skel::migrate::types::mig_rec;
use crate::skel::migrate::{MigrateSkel, MigrateSkelBuilder};

// SAFETY: mig_rec is a plain C struct of integers and byte arrays (bpf/probe/migrate.bpf.c) for
// which every bit pattern is valid.
unsafe impl plain::Plain for mig_rec {}

/// Where `ip netns` keeps named network namespaces.
pub const NETNS_RUN_DIR: &str = "/run/netns";
/// The congestion controls unprivileged sockets may choose (global).
pub const ALLOWED_CC: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;
const TCP_ESTABLISHED: u8 = 1;
/// Bytes one record takes in the ring buffer (record + 8-byte header, rounded up).
const RECORD_BYTES: u64 = 112;

/// Which sockets a census or a migration looks at. Every field narrows; `None` = any.
#[derive(Debug, Clone, Default)]
pub struct SocketFilter {
    /// Local or remote port.
    pub port: Option<u16>,
    /// Local or remote address (IPv4 or IPv6; an IPv4-mapped IPv6 socket has an IPv6 address).
    pub addr: Option<IpAddr>,
    /// Network namespace: a name in /run/netns or a path (`/proc/<pid>/ns/net`);
    /// `None` = the caller's.
    pub netns: Option<String>,
    /// cgroup v2 directory (absolute, or relative to /sys/fs/cgroup): sockets created in
    /// it or in any of its descendants.
    pub cgroup: Option<PathBuf>,
    /// Census only: sockets running this congestion control.
    pub cc: Option<String>,
    /// The socket with this cookie (the collector's [`crate::sample::Sample::cookie`],
    /// [`SocketInfo::cookie`]); cookies are unique per boot, so this picks one socket.
    pub cookie: Option<u64>,
}

/// A migration to perform.
#[derive(Debug, Clone, Default)]
pub struct MigrateRequest {
    /// Congestion control the sockets run now (need not be registered any more).
    pub from: String,
    /// Congestion control to move them to; must be registered.
    pub to: String,
    /// Which sockets (the `cc` field is ignored: `from` decides).
    pub filter: SocketFilter,
    /// Report what would move, change nothing.
    pub dry_run: bool,
    /// Allow a target outside tcp_allowed_congestion_control in a non-initial namespace.
    pub allow_restricted: bool,
}

/// Address family of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// AF_INET.
    Ipv4,
    /// AF_INET6.
    Ipv6,
}

/// One TCP socket of the census.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SocketInfo {
    /// The namespace it lives in (`current`, a /run/netns name, or `pid:<pid>`).
    pub netns: String,
    /// Socket cookie (the collector's `cookie`).
    pub cookie: u64,
    /// Address family.
    pub family: Family,
    /// Local address.
    pub saddr: IpAddr,
    /// Local port.
    pub sport: u16,
    /// Remote address.
    pub daddr: IpAddr,
    /// Remote port.
    pub dport: u16,
    /// TCP state (`ESTABLISHED`, `LISTEN`, `CLOSE_WAIT`, ...).
    pub state: String,
    /// Congestion-control name.
    pub cc: String,
    /// Id of the struct_ops map (loaded version) of a BPF congestion control; `None` for a
    /// native one.
    pub ca_map_id: Option<u32>,
}

/// What a migration did to one matching socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Now runs the target.
    Moved,
    /// `bpf_setsockopt` failed; see the errno.
    Failed,
    /// Would be moved (dry run).
    DryRun,
    /// Runs `from` but is not ESTABLISHED (closing, listening, connecting): left alone.
    SkippedState,
}

/// One matching socket and what happened to it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SocketOutcome {
    /// The socket before the migration.
    #[serde(flatten)]
    pub socket: SocketInfo,
    /// What was done.
    pub action: Action,
    /// errno of a failed `bpf_setsockopt`.
    pub errno: Option<i32>,
    /// Congestion control after the action.
    pub new_cc: String,
    /// Its struct_ops map id (`None` = native).
    pub new_ca_map_id: Option<u32>,
}

/// Result of [`migrate`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct MigrateReport {
    /// Source congestion control.
    pub from: String,
    /// Target congestion control.
    pub to: String,
    /// Namespace the migration ran in.
    pub netns: String,
    /// Nothing was changed.
    pub dry_run: bool,
    /// ESTABLISHED sockets that matched the filter.
    pub matched: u64,
    /// Of those, moved to `to`.
    pub moved: u64,
    /// Of those, failed (see `failures`).
    pub failed: u64,
    /// Failures by reason (`EBUSY: the target is being unregistered`), counts.
    pub failures: BTreeMap<String, u64>,
    /// Sockets running `from` that matched the filter but are not ESTABLISHED (left alone).
    pub skipped_not_established: u64,
    /// Sockets whose record did not fit the ring buffer (outcome unknown; counted as failed).
    pub unreported: u64,
    /// Full TCP sockets the iterator walked in the namespace.
    pub sockets_seen: u64,
    /// Time the iterator ran (walk + setsockopt), in microseconds.
    pub elapsed_us: u64,
    /// Time spent preparing the walk, in microseconds: loading and attaching the iterator
    /// when this call was the process's first (or needed a bigger ring buffer), setting up
    /// the ring-buffer reader. Shared by every namespace of one call, so each of their
    /// reports carries the same figure.
    pub setup_us: u64,
    /// Every matching socket with its outcome.
    pub sockets: Vec<SocketOutcome>,
}

/// A network namespace to run the iterator in.
#[derive(Debug)]
pub struct Netns {
    /// How it is shown: `current`, the /run/netns name, or `pid:<pid>`.
    pub label: String,
    /// Open namespace file to `setns` into; `None` = the calling thread's namespace.
    file: Option<File>,
    /// Whether it is the initial network namespace (that of pid 1).
    pub initial: bool,
}

impl Netns {
    /// The namespace's cookie, as `bpf_get_netns_cookie` and the collector's samples
    /// (`Sample::netns_cookie`) give it: `getsockopt(SO_NETNS_COOKIE)` of a UDP socket
    /// made there (in a thread that joins the namespace; the caller's stays where it is).
    ///
    /// Errors: [`Error::Io`] when the namespace cannot be joined or the kernel (before
    /// 5.14) has no namespace cookies.
    pub fn cookie(&self) -> Result<u64> {
        self.within(|| {
            let sock = std::net::UdpSocket::bind("127.0.0.1:0")
                .or_else(|_| std::net::UdpSocket::bind("[::1]:0"))
                .map_err(|e| {
                    Error::io(
                        format!("making a socket in network namespace {}", self.label),
                        "-",
                        e,
                    )
                })?;
            let mut cookie: u64 = 0;
            let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
            // SAFETY: getsockopt writes at most `len` bytes into `cookie`, a u64 of that size.
            let rc = unsafe {
                libc::getsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_NETNS_COOKIE,
                    (&mut cookie as *mut u64).cast(),
                    &mut len,
                )
            };
            if rc != 0 {
                return Err(Error::io(
                    format!("reading the cookie of network namespace {}", self.label),
                    "-",
                    std::io::Error::last_os_error(),
                ));
            }
            Ok(cookie)
        })
    }

    /// Runs `f` inside the namespace: on a thread that joins it (the caller's thread stays
    /// where it is), or on the calling thread for the calling thread's own namespace.
    ///
    /// Errors: [`Error::Io`] when the namespace cannot be joined; `f`'s own.
    pub fn within<T: Send>(&self, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
        let Some(file) = &self.file else {
            return f();
        };
        std::thread::scope(|s| {
            s.spawn(|| {
                nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
                    Error::io(
                        format!("joining network namespace {}", self.label),
                        "-",
                        e.into(),
                    )
                })?;
                f()
            })
            .join()
            .unwrap_or_else(|_| {
                Err(Error::io(
                    "namespace thread panicked",
                    "-",
                    std::io::Error::other("panic"),
                ))
            })
        })
    }
}

fn ns_identity(path: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

fn initial_ns() -> Option<(u64, u64)> {
    ns_identity(Path::new("/proc/1/ns/net"))
}

/// Inode of the initial network namespace, fixed since Linux 6.18 (PROC_NET_INIT_INO in
/// include/linux/proc_ns.h); earlier kernels number it like any other.
const PROC_NET_INIT_INO: u64 = 0xEFFF_FFF9;

/// Whether the namespace `id` (device, inode) is the initial one: that of pid 1, or, where
/// /proc/1/ns/net cannot be read (a sandbox hiding pid 1), the fixed inode of 6.18+.
/// Unknown counts as not initial (the stricter rule applies).
fn is_initial(id: Option<(u64, u64)>) -> bool {
    match initial_ns() {
        Some(init) => id == Some(init),
        None => id.is_some_and(|(_, ino)| ino == PROC_NET_INIT_INO),
    }
}

/// Resolves `--netns`: a name in /run/netns, or a path to a namespace file
/// (`/proc/<pid>/ns/net`); `None` = the calling thread's namespace.
///
/// Errors: [`Error::BadFilter`] when it does not exist or is not a network namespace.
pub fn resolve_netns(arg: Option<&str>) -> Result<Netns> {
    let Some(arg) = arg else {
        return Ok(Netns {
            label: "current".into(),
            file: None,
            initial: is_initial(ns_identity(Path::new("/proc/thread-self/ns/net"))),
        });
    };
    let bad = |reason: String| Error::BadFilter {
        what: format!("--netns {arg}"),
        reason,
    };
    let path = if arg.contains('/') {
        PathBuf::from(arg)
    } else {
        if arg.is_empty() || arg == "." || arg == ".." {
            return Err(bad("not a namespace name".into()));
        }
        Path::new(NETNS_RUN_DIR).join(arg)
    };
    let file = File::open(&path).map_err(|e| {
        let names = named_namespaces();
        bad(format!(
            "cannot open {}: {e}; give a name from `ip netns list` ({}) or a path such as /proc/<pid>/ns/net",
            path.display(),
            if names.is_empty() { "none".into() } else { names.join(", ") }
        ))
    })?;
    // SAFETY: NS_GET_NSTYPE takes no argument and only returns the type of the namespace
    // the descriptor refers to (or fails with ENOTTY for a file that is not one).
    let kind = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE) };
    if kind != libc::CLONE_NEWNET {
        return Err(bad(format!(
            "{} is not a network namespace",
            path.display()
        )));
    }
    Ok(Netns {
        label: arg.to_string(),
        initial: is_initial(ns_identity(&path)),
        file: Some(file),
    })
}

/// `_IO(0xb7, 0x3)` from linux/nsfs.h.
const NS_GET_NSTYPE: libc::c_ulong = 0xb703;

fn named_namespaces() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(NETNS_RUN_DIR)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every network namespace that can hold sockets of interest: the caller's, each one
/// named in /run/netns, and each other one some process is in (`/proc/<pid>/ns/net`),
/// once each. Namespaces that only sockets keep alive (no process, no name) are missed.
pub fn all_namespaces() -> Result<Vec<Netns>> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    if let Some(id) = ns_identity(Path::new("/proc/thread-self/ns/net")) {
        seen.insert(id);
    }
    out.push(resolve_netns(None)?);
    for name in named_namespaces() {
        let path = Path::new(NETNS_RUN_DIR).join(&name);
        if let Some(id) = ns_identity(&path) {
            if seen.insert(id) {
                if let Ok(ns) = resolve_netns(Some(&name)) {
                    out.push(ns);
                }
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let path = e.path().join("ns/net");
            if let Some(id) = ns_identity(&path) {
                if seen.insert(id) {
                    if let Ok(mut ns) = resolve_netns(Some(&path.to_string_lossy())) {
                        ns.label = format!("pid:{name}");
                        out.push(ns);
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Resolves `--cgroup` into (cgroup id, depth below the root).
fn resolve_cgroup(arg: &Path) -> Result<(u64, i32)> {
    let bad = |reason: String| Error::BadFilter {
        what: format!("--cgroup {}", arg.display()),
        reason,
    };
    let Ok(root) = crate::policy::cgroup2_mount() else {
        return Err(bad(
            "no cgroup v2 hierarchy is mounted (cgroup v1 is not supported; usually at /sys/fs/cgroup)".into(),
        ));
    };
    let root = root.as_path();
    let candidate = if arg.starts_with(root) {
        arg.to_path_buf()
    } else {
        root.join(arg.strip_prefix("/").unwrap_or(arg))
    };
    let canon = candidate.canonicalize().map_err(|e| {
        bad(format!(
            "{}: {e}; give a cgroup v2 directory, absolute or relative to {}",
            candidate.display(),
            root.display()
        ))
    })?;
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let rel = canon.strip_prefix(&root).map_err(|_| {
        bad(format!(
            "{} is outside the cgroup v2 hierarchy {}",
            canon.display(),
            root.display()
        ))
    })?;
    let meta = std::fs::metadata(&canon).map_err(|e| bad(format!("{}: {e}", canon.display())))?;
    if !meta.is_dir() || !canon.join("cgroup.procs").exists() {
        return Err(bad(format!(
            "{} is not a cgroup directory",
            canon.display()
        )));
    }
    Ok((meta.ino(), rel.components().count() as i32))
}

/// What the BPF program is configured with.
#[derive(Debug, Clone, Default)]
struct IterConfig {
    census: bool,
    dry_run: bool,
    from: Option<String>,
    to: String,
    port: Option<u16>,
    addr: Option<IpAddr>,
    cgroup: Option<(u64, i32)>,
    cookie: Option<u64>,
}

/// Records of one namespace's walk.
struct NsRun {
    records: Vec<mig_rec>,
    seen: u64,
    dropped: u64,
    elapsed: Duration,
    setup: Duration,
}

/// TCP socket count of the whole host (`TCP: ... alloc N` of /proc/net/sockstat is global).
fn tcp_sockets_allocated() -> u64 {
    std::fs::read_to_string("/proc/net/sockstat")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("TCP:"))?;
            let words: Vec<&str> = line.split_whitespace().collect();
            let i = words.iter().position(|w| *w == "alloc")?;
            words.get(i + 1)?.parse().ok()
        })
        .unwrap_or(65_536)
}

/// The iter/tcp program, loaded and attached once per process and reused by every census
/// and migration (see [`run_iter`]); its configuration lives in writable globals.
struct Loaded {
    link: libbpf_rs::Link,
    skel: MigrateSkel<'static>,
    /// Size of its record ring buffer, in bytes.
    ring_bytes: u32,
}

/// The process's loaded iterator; the lock also serialises walks, which share its
/// configuration.
static LOADED: Mutex<Option<Loaded>> = Mutex::new(None);

/// Unloads the process's iterator (the next census or migration loads it again): frees its
/// ring buffer, sized for every TCP socket of the host, and lets a benchmark time a cold call
/// as a one-shot `cctl migrate` makes it.
pub fn release_iterator() {
    *LOADED.lock().unwrap_or_else(|e| e.into_inner()) = None;
}

/// Opens, loads (CO-RE relocation against the kernel's BTF, verifier) and attaches the
/// iterator with a record ring buffer of `ring_bytes`.
fn load_iter(ring_bytes: u32) -> Result<Loaded> {
    // The skeleton borrows its object storage for as long as it lives: for the process,
    // or until a bigger ring buffer is needed (a few bytes leaked per reload).
    let storage: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
    let mut open = MigrateSkelBuilder::default()
        .open(storage)
        .map_err(|e| Error::bpf("opening the migrate BPF object", e))?;
    open.maps
        .records
        .set_max_entries(ring_bytes)
        .map_err(|e| Error::bpf("sizing the record ring buffer", e))?;
    let skel = open
        .load()
        .map_err(|e| Error::bpf("loading the iter/tcp program (verifier)", e))?;
    let link = skel
        .progs
        .cctl_migrate
        .attach()
        .map_err(|e| Error::bpf("attaching the iter/tcp program", e))?;
    Ok(Loaded {
        link,
        skel,
        ring_bytes,
    })
}

/// Writes `cfg` into the program's globals (every field, so nothing of an earlier walk
/// stays).
fn configure(b: &mut crate::skel::migrate::types::bss, cfg: &IterConfig) {
    b.census = cfg.census;
    b.dry_run = cfg.dry_run;
    b.from_cc = Default::default();
    if let Some(from) = &cfg.from {
        write_name(&mut b.from_cc, from);
    }
    b.to_cc = Default::default();
    write_name(&mut b.to_cc, &cfg.to);
    b.filter_port = cfg.port.unwrap_or(0);
    b.filter_family = 0;
    b.filter_addr = Default::default();
    match cfg.addr {
        Some(IpAddr::V4(a)) => {
            b.filter_family = AF_INET;
            b.filter_addr[..4].copy_from_slice(&a.octets());
        }
        Some(IpAddr::V6(a)) => {
            b.filter_family = AF_INET6;
            b.filter_addr.copy_from_slice(&a.octets());
        }
        None => {}
    }
    let (id, level) = cfg.cgroup.unwrap_or((0, 0));
    b.filter_cgroup_id = id;
    b.filter_cgroup_level = level;
    b.filter_cookie = cfg.cookie.unwrap_or(0);
}

/// Walks each namespace in turn with the process's iterator, loading it on first use
/// (and again only when the host has grown more TCP sockets than its ring buffer holds).
///
/// Loading costs 10-20 ms on a 2-core machine (libbpf's CO-RE relocation scans the
/// kernel's BTF once per relocated type, after parsing it; then the verifier), more than
/// walking 10,000 sockets: a process that runs a census and then a migration
/// (`migrate --all-netns`, `unload --migrate-to`) or several migrations pays it once.
fn run_iter(cfg: &IterConfig, targets: &[Netns]) -> Result<Vec<NsRun>> {
    let setup_started = Instant::now();
    let mut guard = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    // Room for every TCP socket of the host, twice over (sockets opened during the walk).
    let want = (tcp_sockets_allocated() * 2 + 1024) * RECORD_BYTES;
    let ring = want.next_power_of_two().clamp(1 << 18, 1 << 28) as u32;
    if guard.as_ref().is_none_or(|l| l.ring_bytes < ring) {
        // Drop the old one first: its ring buffer may be large.
        *guard = None;
        *guard = Some(load_iter(ring)?);
    }
    let loaded = guard.as_mut().expect("loaded just above");
    configure(
        loaded
            .skel
            .maps
            .bss_data
            .as_deref_mut()
            .expect("migrate .bss is memory-mapped"),
        cfg,
    );
    let (skel, link) = (&loaded.skel, &loaded.link);

    let records: RefCell<Vec<mig_rec>> = RefCell::new(Vec::new());
    let mut builder = RingBufferBuilder::new();
    builder
        .add(&skel.maps.records, |data: &[u8]| {
            let mut r = mig_rec::default();
            if plain::copy_from_bytes(&mut r, data).is_ok() {
                records.borrow_mut().push(r);
            }
            0
        })
        .map_err(|e| Error::bpf("setting up the record ring buffer", e))?;
    let rb = builder
        .build()
        .map_err(|e| Error::bpf("setting up the record ring buffer", e))?;
    let setup = setup_started.elapsed();

    let bss = || {
        let b = skel
            .maps
            .bss_data
            .as_deref()
            .expect("migrate .bss is memory-mapped");
        (b.seen, b.records_dropped)
    };
    let mut out = Vec::new();
    for (i, ns) in targets.iter().enumerate() {
        let (seen0, dropped0) = bss();
        let walk = || -> Result<Duration> {
            if let Some(f) = &ns.file {
                nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).map_err(|e| {
                    Error::io(
                        format!("joining network namespace {}", ns.label),
                        "-",
                        e.into(),
                    )
                })?;
            }
            let started = Instant::now();
            let mut it = Iter::new(link).map_err(|e| Error::bpf("creating the TCP iterator", e))?;
            let mut sink = Vec::new();
            // A read(2) of a BPF iterator visits at most 1M objects; one that wrote nothing
            // by then fails with EAGAIN, and the next read goes on from there (bpf_seq_read).
            loop {
                match it.read_to_end(&mut sink) {
                    Ok(_) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    Err(e) => return Err(Error::io("walking the TCP sockets", "-", e)),
                }
            }
            Ok(started.elapsed())
        };
        let elapsed = if ns.file.is_some() {
            std::thread::scope(|s| {
                std::thread::Builder::new()
                    .name(format!("netns {}", ns.label))
                    .spawn_scoped(s, walk)
                    .map_err(|e| Error::io("starting the namespace thread", "-", e))?
                    .join()
                    .unwrap_or_else(|_| {
                        Err(Error::io(
                            "namespace thread panicked",
                            "-",
                            std::io::Error::other("panic"),
                        ))
                    })
            })?
        } else {
            walk()?
        };
        rb.consume()
            .map_err(|e| Error::bpf("reading the record ring buffer", e))?;
        let (seen1, dropped1) = bss();
        out.push(NsRun {
            records: std::mem::take(&mut *records.borrow_mut()),
            seen: seen1 - seen0,
            dropped: dropped1 - dropped0,
            elapsed,
            setup,
        });
        if i == 0 && targets.len() > 1 && !cfg.census && !cfg.dry_run {
            crate::faults::step("migrate.after-first-netns")?;
        }
    }
    Ok(out)
}

fn state_name(s: u8) -> &'static str {
    match s {
        1 => "ESTABLISHED",
        2 => "SYN_SENT",
        3 => "SYN_RECV",
        4 => "FIN_WAIT1",
        5 => "FIN_WAIT2",
        6 => "TIME_WAIT",
        7 => "CLOSE",
        8 => "CLOSE_WAIT",
        9 => "LAST_ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW_SYN_RECV",
        13 => "BOUND_INACTIVE",
        _ => "UNKNOWN",
    }
}

fn addr_of(family: u16, raw: &[u8; 16]) -> IpAddr {
    if family == AF_INET6 {
        IpAddr::V6(Ipv6Addr::from(*raw))
    } else {
        IpAddr::V4(Ipv4Addr::new(raw[0], raw[1], raw[2], raw[3]))
    }
}

fn socket_info(netns: &str, r: &mig_rec) -> SocketInfo {
    SocketInfo {
        netns: netns.to_string(),
        cookie: r.cookie,
        family: if r.family == AF_INET6 {
            Family::Ipv6
        } else {
            Family::Ipv4
        },
        saddr: addr_of(r.family, &r.saddr),
        sport: r.sport,
        daddr: addr_of(r.family, &r.daddr),
        dport: r.dport,
        state: state_name(r.state).into(),
        cc: read_name(&r.cc),
        ca_map_id: (r.ca_map_id != 0).then_some(r.ca_map_id),
    }
}

/// Human meaning of an errno `bpf_setsockopt(TCP_CONGESTION)` returns
/// (net/ipv4/tcp_cong.c: tcp_set_congestion_control).
pub fn errno_reason(errno: i32) -> String {
    let why = match errno {
        libc::ENOENT => "the target is not registered (unloaded during the migration?)",
        libc::EBUSY => "the target is being unregistered (no reference could be taken)",
        libc::EPERM => "the target is restricted for this socket",
        libc::EINVAL => "the kernel refused the name",
        _ => "",
    };
    let name = std::io::Error::from_raw_os_error(errno).to_string();
    let name = name.split(" (os error").next().unwrap_or(&name).to_string();
    if why.is_empty() {
        format!("errno {errno}: {name}")
    } else {
        format!("errno {errno} ({name}): {why}")
    }
}

fn validate_filter(filter: &SocketFilter) -> Result<Option<(u64, i32)>> {
    if filter.port == Some(0) {
        return Err(Error::BadFilter {
            what: "--port 0".into(),
            reason: "a port is 1 to 65535".into(),
        });
    }
    if filter.cookie == Some(0) {
        return Err(Error::BadFilter {
            what: "--cookie 0".into(),
            reason: "socket cookies start at 1 (see `cctl sockets` or the `cookie` of `cctl trace --json`)"
                .into(),
        });
    }
    if let Some(cc) = &filter.cc {
        catalogue::validate_cc_name(cc)?;
    }
    filter.cgroup.as_deref().map(resolve_cgroup).transpose()
}

/// The TCP sockets (full sockets in any state; not time-wait or request sockets) of the
/// namespace `filter.netns` that pass the filter, with their congestion control and
/// loaded version.
///
/// Errors: [`Error::BadFilter`] (namespace, cgroup, port), [`Error::InvalidName`] (cc),
/// [`Error::NotPrivileged`], [`Error::Bpf`] (verifier, iterator), [`Error::Io`].
pub fn sockets(filter: &SocketFilter) -> Result<Vec<SocketInfo>> {
    let ns = resolve_netns(filter.netns.as_deref())?;
    census(filter, &[ns])
}

/// [`sockets`] in every namespace of [`all_namespaces`] (`filter.netns` is ignored).
pub fn sockets_all_namespaces(filter: &SocketFilter) -> Result<Vec<SocketInfo>> {
    let mut f = filter.clone();
    f.netns = None;
    let targets = all_namespaces()?;
    census(&f, &targets)
}

fn census(filter: &SocketFilter, targets: &[Netns]) -> Result<Vec<SocketInfo>> {
    let cgroup = validate_filter(filter)?;
    kernel::require_privileges("listing TCP sockets with a BPF iterator")?;
    kernel::require_btf()?;
    let cfg = IterConfig {
        census: true,
        from: filter.cc.clone(),
        port: filter.port,
        addr: filter.addr,
        cgroup,
        cookie: filter.cookie,
        ..Default::default()
    };
    let runs = run_iter(&cfg, targets)?;
    let mut out = Vec::new();
    for (ns, run) in targets.iter().zip(runs) {
        if run.dropped > 0 {
            return Err(Error::io(
                format!(
                    "listing the sockets of {}: {} records did not fit the ring buffer",
                    ns.label, run.dropped
                ),
                "-",
                std::io::Error::other("ring buffer full"),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        for r in &run.records {
            if seen.insert(r.cookie) {
                out.push(socket_info(&ns.label, r));
            }
        }
    }
    Ok(out)
}

fn describe(req: &MigrateRequest, ns: &str) -> String {
    let mut s = format!("--from {}", req.from);
    if let Some(c) = req.filter.cookie {
        s += &format!(" --cookie {c}");
    }
    if let Some(p) = req.filter.port {
        s += &format!(" --port {p}");
    }
    if let Some(a) = req.filter.addr {
        s += &format!(" --addr {a}");
    }
    if let Some(c) = &req.filter.cgroup {
        s += &format!(" --cgroup {}", c.display());
    }
    s + &format!(" in {ns}")
}

/// That `req.to` is registered in the kernel (global: the same in every namespace).
fn check_registered(req: &MigrateRequest) -> Result<()> {
    let available = kernel::available_ccs()?;
    if !available.contains(&req.to) {
        let hint = if let Ok(a) = catalogue::find(&req.to) {
            format!("; `cctl load {}` registers it as {}", a.key, a.cc_name)
        } else if kernel::native_module(&req.to).is_some() {
            format!(
                "; its module tcp_{} is on disk but not loaded, and BPF cannot load modules: \
                 `modprobe tcp_{}` first",
                req.to, req.to
            )
        } else {
            String::new()
        };
        return Err(Error::NotRegistered {
            name: req.to.clone(),
            registered: available.join(" "),
            hint,
        });
    }
    Ok(())
}

/// That namespace `ns` may be given `req.to` (see the module docs).
fn check_target(req: &MigrateRequest, ns: &Netns) -> Result<()> {
    if ns.initial || req.allow_restricted {
        return Ok(());
    }
    let allowed: Vec<String> = std::fs::read_to_string(ALLOWED_CC)
        .map_err(|e| Error::io("reading", ALLOWED_CC, e))?
        .split_whitespace()
        .map(str::to_string)
        .collect();
    if allowed.contains(&req.to) {
        return Ok(());
    }
    let list = allowed.join(" ");
    Err(Error::NotAllowed {
        name: req.to.clone(),
        netns: format!("netns {}", ns.label),
        reason: format!(
            "it is restricted (not in net.ipv4.tcp_allowed_congestion_control = \"{list}\"), and \
             only the initial network namespace may be given restricted congestion controls (the \
             kernel's rule for a namespace's default); allow it with `sysctl -w \
             net.ipv4.tcp_allowed_congestion_control=\"{list} {}\"` or pass --allow-restricted",
            req.to
        ),
    })
}

/// Checks what does not depend on a namespace: names, `from != to`, the filter (port,
/// cookie, cgroup), privileges, BTF, that the target is registered. Returns the filter to use (`cc` cleared: `from`
/// decides) and the resolved cgroup.
fn check_request(req: &MigrateRequest) -> Result<(SocketFilter, Option<(u64, i32)>)> {
    catalogue::validate_cc_name(&req.from)?;
    catalogue::validate_cc_name(&req.to)?;
    if req.from == req.to {
        return Err(Error::BadFilter {
            what: format!("--from {} --to {}", req.from, req.to),
            reason: "source and target are the same congestion control: nothing to move".into(),
        });
    }
    let mut filter = req.filter.clone();
    filter.cc = None;
    let cgroup = validate_filter(&filter)?;
    kernel::require_privileges(&format!("migrating sockets to {}", req.to))?;
    kernel::require_btf()?;
    check_registered(req)?;
    Ok((filter, cgroup))
}

/// The per-namespace core of [`migrate`] and [`migrate_all_namespaces`]: runs the
/// migration (already checked) in each of `targets`, one report each.
fn migrate_in(
    req: &MigrateRequest,
    filter: &SocketFilter,
    cgroup: Option<(u64, i32)>,
    targets: &[Netns],
) -> Result<Vec<MigrateReport>> {
    let cfg = IterConfig {
        census: false,
        dry_run: req.dry_run,
        from: Some(req.from.clone()),
        to: req.to.clone(),
        port: filter.port,
        addr: filter.addr,
        cgroup,
        cookie: filter.cookie,
    };
    let runs = run_iter(&cfg, targets)?;
    Ok(targets
        .iter()
        .zip(runs)
        .map(|(ns, run)| report_of(req, ns, run))
        .collect())
}

/// Turns one namespace's records into its report.
fn report_of(req: &MigrateRequest, ns: &Netns, run: NsRun) -> MigrateReport {
    let mut report = MigrateReport {
        from: req.from.clone(),
        to: req.to.clone(),
        netns: ns.label.clone(),
        dry_run: req.dry_run,
        matched: 0,
        moved: 0,
        failed: 0,
        failures: BTreeMap::new(),
        skipped_not_established: 0,
        unreported: run.dropped,
        sockets_seen: run.seen,
        elapsed_us: run.elapsed.as_micros() as u64,
        setup_us: run.setup.as_micros() as u64,
        sockets: Vec::new(),
    };
    let mut seen = std::collections::HashSet::new();
    for r in &run.records {
        if !seen.insert(r.cookie) {
            continue;
        }
        let action = match r.action {
            1 => Action::DryRun,
            2 => Action::Moved,
            3 => Action::Failed,
            _ => Action::SkippedState,
        };
        match action {
            Action::SkippedState => report.skipped_not_established += 1,
            Action::Moved => report.moved += 1,
            Action::DryRun => {}
            Action::Failed => {
                report.failed += 1;
                *report.failures.entry(errno_reason(r.err)).or_default() += 1;
            }
        }
        if r.state == TCP_ESTABLISHED {
            report.matched += 1;
        }
        report.sockets.push(SocketOutcome {
            socket: socket_info(&ns.label, r),
            action,
            errno: (action == Action::Failed).then_some(r.err),
            new_cc: read_name(&r.new_cc),
            new_ca_map_id: (r.new_ca_map_id != 0).then_some(r.new_ca_map_id),
        });
    }
    if run.dropped > 0 {
        report.failed += run.dropped;
        report.matched += run.dropped;
        *report
            .failures
            .entry("record lost (ring buffer full): outcome unknown".into())
            .or_default() += run.dropped;
    }
    report
}

/// The [`Error::NoMatch`] of a migration that matched nothing in `targets` (all
/// namespaces with `all_ns`, else the one), with what their established sockets run instead.
fn no_match(req: &MigrateRequest, targets: &[Netns], all_ns: bool, skipped: u64) -> Error {
    let place = if all_ns {
        "any network namespace".to_string()
    } else {
        targets
            .first()
            .map(|ns| format!("netns {}", ns.label))
            .unwrap_or_default()
    };
    let census_text = census(&SocketFilter::default(), targets)
        .map(|all| {
            let mut by_cc: BTreeMap<String, u64> = BTreeMap::new();
            for s in all.iter().filter(|s| s.state == "ESTABLISHED") {
                *by_cc.entry(s.cc.clone()).or_default() += 1;
            }
            let none = if all_ns {
                "no namespace has an established TCP socket"
            } else {
                "the namespace has no established TCP socket"
            };
            if by_cc.is_empty() {
                format!("; {none}")
            } else {
                format!(
                    "; established sockets there run: {}",
                    by_cc
                        .iter()
                        .map(|(c, n)| format!("{c} ({n})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        })
        .unwrap_or_default();
    let skipped = if skipped > 0 {
        format!(" ({skipped} matching socket(s) are not ESTABLISHED and are never moved)")
    } else {
        String::new()
    };
    Error::NoMatch {
        filter: describe(req, &place) + &skipped,
        census: census_text,
    }
}

/// Moves the ESTABLISHED TCP sockets of one namespace that run `req.from` and pass the
/// filter to `req.to`, and reports what happened to each.
///
/// Everything is checked before any socket is touched: names, `from != to`, the filter
/// (port, cookie, cgroup, namespace), privileges, that `to` is registered and that the
/// namespace may use it (see the module docs). A filter that matches no established socket
/// is an error ([`Error::NoMatch`]) and changes nothing. Sockets for which
/// `bpf_setsockopt` fails are counted by reason in the report, which is still `Ok`.
///
/// Errors: [`Error::InvalidName`], [`Error::BadFilter`], [`Error::NotPrivileged`],
/// [`Error::MissingFeature`], [`Error::NotRegistered`], [`Error::NotAllowed`],
/// [`Error::NoMatch`], [`Error::Bpf`], [`Error::Io`].
pub fn migrate(req: &MigrateRequest) -> Result<MigrateReport> {
    let (filter, cgroup) = check_request(req)?;
    let ns = resolve_netns(filter.netns.as_deref())?;
    check_target(req, &ns)?;
    let targets = [ns];
    let report = migrate_in(req, &filter, cgroup, &targets)?
        .pop()
        .expect("one namespace, one report");
    if report.matched == 0 {
        return Err(no_match(
            req,
            &targets,
            false,
            report.skipped_not_established,
        ));
    }
    Ok(report)
}

/// [`migrate`] in every namespace of [`all_namespaces`] at once (`req.filter.netns` is
/// ignored): one report per namespace that had matching established sockets, in the
/// order of [`all_namespaces`].
///
/// A census over all namespaces finds where matching established sockets are first; then
/// everything is checked before any socket is touched, as for [`migrate`], including that
/// *each* of those namespaces may use `to`: one namespace that may not makes the whole
/// call fail ([`Error::NotAllowed`]) with nothing moved anywhere. Nothing matching in any
/// namespace is [`Error::NoMatch`]. A socket opened between the census and the migration
/// in a namespace that had none is not moved.
///
/// Errors: as [`migrate`].
pub fn migrate_all_namespaces(req: &MigrateRequest) -> Result<Vec<MigrateReport>> {
    let (mut filter, cgroup) = check_request(req)?;
    filter.netns = None;
    let all = all_namespaces()?;
    let found = census(
        &SocketFilter {
            cc: Some(req.from.clone()),
            ..filter.clone()
        },
        &all,
    )?;
    let (with, without): (Vec<Netns>, Vec<Netns>) = all.into_iter().partition(|ns| {
        found
            .iter()
            .any(|s| s.netns == ns.label && s.state == "ESTABLISHED")
    });
    if with.is_empty() {
        let skipped = found.len() as u64;
        let mut every = without;
        every.extend(with);
        return Err(no_match(req, &every, true, skipped));
    }
    for ns in &with {
        check_target(req, ns)?;
    }
    let reports: Vec<MigrateReport> = migrate_in(req, &filter, cgroup, &with)?
        .into_iter()
        .filter(|r| r.matched > 0)
        .collect();
    if reports.is_empty() {
        // Every matching socket closed between the census and the migration.
        return Err(no_match(req, &with, true, 0));
    }
    Ok(reports)
}

/// Established sockets per namespace label that run `cc`, in every namespace of
/// [`all_namespaces`]: what `cctl unload` checks.
///
/// Errors: as [`sockets`].
pub fn established_users(cc: &str) -> Result<BTreeMap<String, u64>> {
    let filter = SocketFilter {
        cc: Some(cc.to_string()),
        ..Default::default()
    };
    let mut out = BTreeMap::new();
    for s in sockets_all_namespaces(&filter)? {
        if s.state == "ESTABLISHED" {
            *out.entry(s.netns).or_default() += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_layout_matches_the_ring_buffer_budget() {
        assert!(std::mem::size_of::<mig_rec>() as u64 + 8 <= RECORD_BYTES);
    }

    #[test]
    fn errno_reasons_name_the_errno_and_the_meaning() {
        let r = errno_reason(libc::EBUSY);
        assert!(r.starts_with("errno 16"), "{r}");
        assert!(r.contains("being unregistered"), "{r}");
        assert!(errno_reason(999).starts_with("errno 999"));
    }

    #[test]
    fn names_round_trip_through_the_c_arrays() {
        let mut raw = [0i8; 16];
        write_name(&mut raw, "bpf_htcp");
        assert_eq!(read_name(&raw), "bpf_htcp");
        write_name(&mut raw, "0123456789abcdefXYZ");
        assert_eq!(raw[15], 0, "the last byte stays NUL");
    }

    #[test]
    fn a_missing_namespace_is_a_clear_error() {
        let e = resolve_netns(Some("cctl-ma-no-such-ns")).unwrap_err();
        assert!(matches!(e, Error::BadFilter { .. }));
        assert!(e.to_string().contains("ip netns list"), "{e}");
    }

    #[test]
    fn a_file_that_is_not_a_namespace_is_refused() {
        let e = resolve_netns(Some("/proc/self/status")).unwrap_err();
        assert!(e.to_string().contains("not a network namespace"), "{e}");
    }

    #[test]
    fn port_zero_and_a_missing_cgroup_are_refused() {
        let f = SocketFilter {
            port: Some(0),
            ..Default::default()
        };
        assert!(validate_filter(&f).is_err());
        let f = SocketFilter {
            cgroup: Some("/cctl-ma-no-such-cgroup".into()),
            ..Default::default()
        };
        let e = validate_filter(&f).unwrap_err();
        assert!(e.to_string().contains("--cgroup"), "{e}");
    }

    #[test]
    fn states_have_their_kernel_names() {
        assert_eq!(state_name(1), "ESTABLISHED");
        assert_eq!(state_name(10), "LISTEN");
    }
}
