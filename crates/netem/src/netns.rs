//! Network namespaces by name (`ip netns`'s bind mounts under [`NETNS_RUN_DIR`]): whether one
//! exists, and a thread that runs inside one.

use std::fs::File;
use std::io;
use std::path::Path;
use std::thread::{self, JoinHandle};

use nix::sched::CloneFlags;

/// Where `ip netns` keeps its named network namespaces (bind mounts of `/proc/<pid>/ns/net`).
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// Whether the named network namespace exists (its bind mount under [`NETNS_RUN_DIR`]).
pub fn netns_exists(name: &str) -> bool {
    Path::new(NETNS_RUN_DIR).join(name).exists()
}

/// Runs `f` on a new OS thread that has joined network namespace `ns` (`/run/netns/<ns>`).
///
/// The namespace file is opened before the thread starts, so a missing namespace is reported
/// by this call; failing to join it (not root) is reported through the join handle.
pub fn spawn_in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<io::Result<T>>> {
    let path = Path::new(NETNS_RUN_DIR).join(ns);
    let file = File::open(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("opening network namespace {}: {e}", path.display()),
        )
    })?;
    let ns = ns.to_string();
    thread::Builder::new()
        .name(format!("netns {ns}"))
        .spawn(move || {
            nix::sched::setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| {
                io::Error::new(
                    io::Error::from(e).kind(),
                    format!("joining network namespace {ns}: {e}"),
                )
            })?;
            drop(file);
            Ok(f())
        })
}

/// A UDP socket made in network namespace `ns` (on a thread that joins it): `IP_TOS` set
/// to `tos`, bound to `bind`, connected to `peer` if given, reads timing out after
/// `read_timeout`. The probes and the constant-bit-rate streams both use it.
///
/// Errors: the namespace cannot be joined, or the socket calls fail (with `bind` and `ns`).
pub fn udp_socket_in(
    ns: &str,
    bind: std::net::SocketAddrV4,
    peer: Option<std::net::SocketAddrV4>,
    tos: u32,
    read_timeout: std::time::Duration,
) -> anyhow::Result<std::net::UdpSocket> {
    use anyhow::Context as _;
    use socket2::{Domain, Protocol, Socket, Type};
    let make = move || -> io::Result<std::net::UdpSocket> {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        s.set_tos(tos)?;
        s.bind(&std::net::SocketAddr::V4(bind).into())?;
        if let Some(p) = peer {
            s.connect(&std::net::SocketAddr::V4(p).into())?;
        }
        let s: std::net::UdpSocket = s.into();
        s.set_read_timeout(Some(read_timeout))?;
        Ok(s)
    };
    spawn_in_netns(ns, make)
        .and_then(|h| {
            h.join()
                .unwrap_or_else(|_| Err(io::Error::other("the thread panicked")))
        })
        .and_then(|s| s)
        .with_context(|| format!("UDP socket on {bind} in network namespace {ns}"))
}
