//! Part `migrate` of `cctl bench perf`: how long [`cctl_loader::migrate::migrate`] takes to
//! move 1,000 and 10,000 established TCP flows (issue 7, item 3; target: 10,000 in < 50 ms).
//!
//! The flows are idle loopback connections in a private network namespace ([`NETNS`]), both
//! ends held by this process; they move back and forth between the built-in cubic and
//! bpf_htcp registered under the private name [`CC`] (loaded here, unloaded on the way out).
//! Each call is timed from outside (the wall time a caller of `migrate` sees: checks,
//! iterator load and attach, the walk, the report) and broken down with the report's own
//! figures: [`MigrateReport::setup_us`] (loading the iterator if needed, its ring buffer)
//! and [`MigrateReport::elapsed_us`] (the walk with its `bpf_setsockopt` calls). Host only:
//! nothing here depends on the guest's modules or netem.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use cctl_loader::migrate::{self, MigrateReport, MigrateRequest, SocketFilter};
use cctl_loader::registry::{self, LoadGuard, LoadOptions};
use nix::sched::CloneFlags;
use serde::Serialize;
use socket2::{Domain, Socket, Type};

use super::{median, Part, PartResult, PerfOptions, Row, Site};
use cctl_netem::netns::NETNS_RUN_DIR;
use cctl_netem::testbed::LoopbackNetns;

/// The private network namespace the flows live in (created and removed here).
pub const NETNS: &str = "pm-mig";
/// The name bpf_htcp is registered under for the part (loaded and unloaded here).
pub const CC: &str = "pm_htcp";
/// The loopback port the flows connect to.
const PORT: u16 = 5431;
/// The target for 10,000 flows, in ms.
pub const TARGET_MS: f64 = 50.0;

/// One timed migration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Round {
    /// Whether the call had to load the iterator first (as every `cctl migrate` does);
    /// otherwise it reused the one an earlier call of the process loaded.
    pub cold: bool,
    /// Source congestion control.
    pub from: String,
    /// Target congestion control.
    pub to: String,
    /// Wall time of the `migrate` call, in ms.
    pub total_ms: f64,
    /// Of that, opening, loading and attaching the iterator and its ring buffer, in ms.
    pub setup_ms: f64,
    /// Of that, the walk with its `bpf_setsockopt` calls, in ms.
    pub iter_ms: f64,
    /// Of that, everything else (checks, namespace, reading the records, the report), in ms.
    pub other_ms: f64,
    /// Sockets moved.
    pub moved: u64,
    /// Full TCP sockets the iterator walked.
    pub seen: u64,
}

impl Round {
    fn of(cold: bool, from: &str, to: &str, total_ms: f64, r: &MigrateReport) -> Round {
        let setup_ms = r.setup_us as f64 / 1e3;
        let iter_ms = r.elapsed_us as f64 / 1e3;
        Round {
            cold,
            from: from.into(),
            to: to.into(),
            total_ms,
            setup_ms,
            iter_ms,
            other_ms: (total_ms - setup_ms - iter_ms).max(0.0),
            moved: r.moved,
            seen: r.sockets_seen,
        }
    }
}

/// The medians of one kind of call (cold or warm) for one flow count.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Established flows moved per call (each has two sockets in the namespace; the
    /// client ends are the ones that run the source CC).
    pub flows: usize,
    /// Whether these are cold calls (iterator loaded by the call).
    pub cold: bool,
    /// Median wall time, in ms.
    pub total_ms: f64,
    /// Median setup time, in ms.
    pub setup_ms: f64,
    /// Median walk time, in ms.
    pub iter_ms: f64,
    /// Median of the rest, in ms.
    pub other_ms: f64,
    /// Every round.
    pub rounds: Vec<Round>,
}

impl Summary {
    /// Medians of the rounds with `cold` as given.
    pub fn of(flows: usize, cold: bool, rounds: &[Round]) -> Summary {
        let rounds: Vec<Round> = rounds.iter().filter(|r| r.cold == cold).cloned().collect();
        let m = |f: fn(&Round) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
        Summary {
            flows,
            cold,
            total_ms: m(|r| r.total_ms),
            setup_ms: m(|r| r.setup_ms),
            iter_ms: m(|r| r.iter_ms),
            other_ms: m(|r| r.other_ms),
            rounds,
        }
    }

    /// The table row: median wall time, breakdown in the note; cold calls of 10,000 flows
    /// carry the 50 ms target (a `cctl migrate` is always a cold call).
    pub fn row(&self, site: Site) -> Row {
        let (kind, setup) = if self.cold {
            (
                "one-shot call (loads the iterator, as `cctl migrate` does)",
                "setup (open, CO-RE relocation, verifier, attach, ring buffer)",
            )
        } else {
            (
                "later call in the same process (iterator reused)",
                "setup (ring buffer)",
            )
        };
        let row = Row::single(
            Part::Migrate,
            site,
            &format!("migrate {} established flows", thousands(self.flows)),
            &format!("time per {kind}"),
            "ms",
            self.total_ms,
        )
        .with_note(format!(
            "median of {}, cubic <-> bpf_htcp ({CC}), loopback in a netns; of which iterator walk {:.1} ms \
             ({:.2} us/flow), {setup} {:.1} ms, rest (checks, records, report) {:.1} ms",
            self.rounds.len(),
            self.iter_ms,
            self.iter_ms * 1e3 / self.flows.max(1) as f64,
            self.setup_ms,
            self.other_ms,
        ));
        if self.flows == 10_000 && self.cold {
            row.with_target("10,000 flows in < 50 ms", self.total_ms < TARGET_MS)
        } else {
            row
        }
    }
}

/// `10000` as `10,000`.
fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Flow counts and repeats of a run: quick = 1,000 flows twice; full = 1,000 and 10,000
/// flows, five times each.
pub fn plan(quick: bool) -> (Vec<usize>, usize) {
    if quick {
        (vec![1_000], 2)
    } else {
        (vec![1_000, 10_000], 5)
    }
}

/// One side of the flows (client or server ends), held by a thread with its own descriptor
/// table: 10,000 flows are 20,000 sockets, more than one table may hold here
/// (RLIMIT_NOFILE 20,000, and raising the hard limit needs CAP_SYS_RESOURCE), and the
/// iterator needs no descriptor. The thread closes its sockets when told to or dropped.
struct Holder {
    release: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Holder {
    /// Starts a thread in namespace `ns` with a private copy of the descriptor table, which
    /// runs `open` and then holds what it returned; `ready` gets `open`'s outcome.
    fn spawn<T: 'static>(
        ns: &str,
        ready: mpsc::Sender<std::io::Result<()>>,
        open: impl FnOnce() -> std::io::Result<T> + Send + 'static,
    ) -> Result<Holder> {
        let path = std::path::Path::new(NETNS_RUN_DIR).join(ns);
        let file = std::fs::File::open(&path)
            .with_context(|| format!("opening network namespace {}", path.display()))?;
        let (release, released) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(format!("flows {ns}"))
            .spawn(move || {
                let joined = nix::sched::setns(&file, CloneFlags::CLONE_NEWNET);
                // Closed in the shared table before this thread gets a table of its own.
                drop(file);
                let held = joined
                    .and_then(|()| nix::sched::unshare(CloneFlags::CLONE_FILES))
                    .map_err(std::io::Error::from)
                    .and_then(|()| open());
                match held {
                    Ok(held) => {
                        let _ = ready.send(Ok(()));
                        let _ = released.recv();
                        drop(held);
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                }
            })
            .context("starting a flow-holding thread")?;
        Ok(Holder {
            release: Some(release),
            thread: Some(thread),
        })
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Longest time [`open_flows`] waits for all its connections to be accepted.
const OPEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
/// Longest time one client connect of [`open_flows`] may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// `n` idle loopback connections in a namespace: client ends (cubic) held by one thread,
/// server ends by another. Dropping it closes them.
pub struct Flows {
    // Clients first: they close before the servers.
    _clients: Holder,
    _servers: Holder,
}

/// Opens `n` idle loopback connections to `127.0.0.1:port` in namespace `ns` whose client
/// ends run cubic.
///
/// Errors: the namespace cannot be joined, a socket cannot be created, connected or
/// accepted.
pub fn open_flows(ns: &str, n: usize, port: u16) -> Result<Flows> {
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let wait = |rx: &mpsc::Receiver<std::io::Result<()>>, what: &str| -> Result<()> {
        rx.recv_timeout(OPEN_TIMEOUT + std::time::Duration::from_secs(5))
            .map_err(|_| {
                anyhow::anyhow!("{what}: no answer within {} s", OPEN_TIMEOUT.as_secs() + 5)
            })?
            .with_context(|| format!("{what} ({n} loopback connections in netns {ns})"))
    };
    // The server thread listens, says so, then accepts all n.
    let (listening_tx, listening) = mpsc::channel();
    let (accepted_tx, accepted) = mpsc::channel();
    let servers = Holder::spawn(ns, accepted_tx, move || {
        let l = Socket::new(Domain::IPV4, Type::STREAM, None)?;
        l.set_reuse_address(true)?;
        l.bind(&SocketAddr::V4(addr).into())?;
        // Room for connects that run ahead of the accepts (net.core.somaxconn caps it).
        l.listen(4096)?;
        let _ = listening_tx.send(Ok(()));
        let l = TcpListener::from(l);
        // Non-blocking with a deadline: when the clients fail, this thread must still end
        // (dropping the Holder joins it).
        l.set_nonblocking(true)?;
        let deadline = std::time::Instant::now() + OPEN_TIMEOUT;
        let mut held = Vec::with_capacity(n);
        while held.len() < n {
            match l.accept() {
                Ok((s, _)) => held.push(s),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if std::time::Instant::now() > deadline {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!(
                                "accepted {} of {n} connections in {} s",
                                held.len(),
                                OPEN_TIMEOUT.as_secs()
                            ),
                        ));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(held)
    })?;
    wait(&listening, "listening")?;
    let (connected_tx, connected) = mpsc::channel();
    let clients = Holder::spawn(ns, connected_tx, move || {
        (0..n)
            .map(|_| {
                let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
                s.set_tcp_congestion(b"cubic")?;
                s.connect_timeout(&SocketAddr::V4(addr).into(), CONNECT_TIMEOUT)?;
                Ok(TcpStream::from(s))
            })
            .collect::<std::io::Result<Vec<TcpStream>>>()
    })?;
    wait(&connected, "connecting")?;
    wait(&accepted, "accepting")?;
    Ok(Flows {
        _clients: clients,
        _servers: servers,
    })
}

/// Times `repeats` cold migrations (each after [`migrate::release_iterator`]) and
/// `repeats` warm ones (iterator reused) of the `n` flows on `port` in namespace `ns`,
/// alternating cubic → `cc` and back, each checked to move exactly `n` sockets with no
/// failure.
///
/// Errors: a migration fails or moves a different number of sockets.
pub fn time_rounds(
    ns: &str,
    cc: &str,
    n: usize,
    port: u16,
    repeats: usize,
    opts: &PerfOptions,
) -> Result<Vec<Round>> {
    let mut rounds = Vec::new();
    for i in 0..2 * repeats {
        if opts.stopped() {
            break;
        }
        let cold = i < repeats;
        if cold {
            migrate::release_iterator();
        }
        let (from, to) = if i % 2 == 0 {
            ("cubic", cc)
        } else {
            (cc, "cubic")
        };
        let req = MigrateRequest {
            from: from.into(),
            to: to.into(),
            filter: SocketFilter {
                netns: Some(ns.into()),
                port: Some(port),
                ..Default::default()
            },
            dry_run: false,
            allow_restricted: true,
        };
        let t = Instant::now();
        let r = migrate::migrate(&req).with_context(|| format!("migrating {n} flows"))?;
        let total_ms = t.elapsed().as_secs_f64() * 1e3;
        if r.moved as usize != n || r.failed != 0 {
            bail!(
                "{n} flows {from} -> {to}: moved {}, failed {} ({:?})",
                r.moved,
                r.failed,
                r.failures
            );
        }
        rounds.push(Round::of(cold, from, to, total_ms, &r));
    }
    Ok(rounds)
}

/// Runs the part (host only; `run_parts` skips it in the guest).
///
/// Errors: not root, bpf_htcp cannot be loaded, the namespace or the flows cannot be set
/// up, a migration fails.
pub fn run(opts: &PerfOptions) -> Result<PartResult> {
    if opts.site != Site::Host {
        bail!("the migrate part runs on the host only");
    }
    let (counts, repeats) = plan(opts.quick);
    if registry::list_loaded()?.iter().any(|l| l.name == CC) {
        // A crashed earlier run's.
        registry::unload(CC)?;
    }
    let rec = registry::load(
        "htcp",
        &LoadOptions {
            name: Some(CC.into()),
            owned: true,
            ..Default::default()
        },
    )
    .with_context(|| format!("loading bpf_htcp as {CC}"))?;
    let guard = LoadGuard::new(rec.name);
    let netns = LoopbackNetns::create(NETNS, None)?;

    let mut res = PartResult::default();
    let mut summaries = Vec::new();
    for (k, &n) in counts.iter().enumerate() {
        if opts.stopped() {
            break;
        }
        let port = PORT + k as u16;
        let t = Instant::now();
        let flows = open_flows(NETNS, n, port)?;
        let open_s = t.elapsed().as_secs_f64();
        let rounds = time_rounds(NETNS, CC, n, port, repeats, opts);
        drop(flows);
        let rounds = rounds?;
        if rounds.is_empty() {
            break;
        }
        for cold in [true, false] {
            let s = Summary::of(n, cold, &rounds);
            if s.rounds.is_empty() {
                continue;
            }
            eprintln!(
                "  migrate: {n} flows (opened in {open_s:.1} s), {} calls: {:.1} ms (iterator {:.1}, setup {:.1}, rest {:.1})",
                if cold { "cold" } else { "warm" },
                s.total_ms,
                s.iter_ms,
                s.setup_ms,
                s.other_ms
            );
            res.rows.push(s.row(opts.site));
            summaries.push(s);
        }
    }
    migrate::release_iterator();
    if opts.quick {
        res.notes.push(
            "--quick: 1,000 flows, 2 cold and 2 warm calls; 10,000 flows only in the full run"
                .into(),
        );
    }
    res.notes.push(format!(
        "Wall time of one `migrate` call, idle loopback flows in netns {NETNS}. Cold: the call \
         loads the iter/tcp program (what every `cctl migrate` pays); warm: a later call of the \
         same process reuses it (census + migration of `migrate --all-netns`, `unload --migrate-to`, \
         library users). The 'iterator walk' is the read of the iter/tcp link (walk + \
         bpf_setsockopt per socket)."
    ));
    res.details = serde_json::json!({ "netns": NETNS, "cc": CC, "summaries": summaries });
    drop(netns);
    guard.unload().with_context(|| format!("unloading {CC}"))?;
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(total: f64, setup: f64, iter: f64) -> Round {
        Round {
            cold: true,
            from: "cubic".into(),
            to: CC.into(),
            total_ms: total,
            setup_ms: setup,
            iter_ms: iter,
            other_ms: total - setup - iter,
            moved: 10_000,
            seen: 20_000,
        }
    }

    #[test]
    fn the_target_row_is_the_ten_thousand_flow_one_and_uses_the_median() {
        let mut warm = round(20.0, 0.5, 18.0);
        warm.cold = false;
        let all = vec![
            round(60.0, 5.0, 27.0),
            round(40.0, 4.0, 26.0),
            warm.clone(),
            round(45.0, 4.0, 25.0),
        ];
        let s = Summary::of(10_000, true, &all);
        assert_eq!(s.total_ms, 45.0);
        assert_eq!(s.iter_ms, 26.0);
        let row = s.row(Site::Host);
        assert_eq!(row.item, "migrate 10,000 established flows");
        assert!(row.target.as_ref().unwrap().met);
        assert!(row.note.contains("iterator walk 26.0 ms"), "{}", row.note);
        let slow = Summary::of(10_000, true, &[round(58.9, 20.0, 27.2)]).row(Site::Host);
        assert!(!slow.target.unwrap().met);
        assert!(Summary::of(1_000, true, &[round(5.0, 1.0, 2.0)])
            .row(Site::Host)
            .target
            .is_none());
        let w = Summary::of(10_000, false, &all);
        assert_eq!((w.rounds.len(), w.total_ms), (1, 20.0));
        assert!(
            w.row(Site::Host).target.is_none(),
            "the target is judged on cold calls"
        );
    }

    #[test]
    fn quick_runs_only_the_small_count() {
        assert_eq!(plan(true), (vec![1_000], 2));
        assert_eq!(plan(false).0, vec![1_000, 10_000]);
        assert_eq!(thousands(10_000), "10,000");
        assert_eq!(thousands(100), "100");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
