//! The socket-filter flags shared by `cctl sockets` and `cctl migrate`.

use std::net::IpAddr;
use std::path::PathBuf;

use cctl_loader::migrate::SocketFilter;

/// Which sockets a command looks at: by port, address, cookie, namespace and cgroup.
#[derive(Debug, Clone, clap::Args)]
pub struct FilterArgs {
    /// Only sockets with this local or remote port; allowed 1 to 65535.
    #[arg(long, value_parser = crate::cmd::args::port_parser())]
    pub port: Option<u16>,
    /// Only sockets with this local or remote address (IPv4 or IPv6).
    #[arg(long, value_parser = |s: &str| s.parse::<IpAddr>().map_err(|_| {
        "not an IP address; give an IPv4 or IPv6 address (10.0.0.2, fd00::2)"
    }))]
    pub addr: Option<IpAddr>,
    /// Only the socket with this cookie (`cctl sockets`, the `cookie` of `cctl trace
    /// --json`); allowed 1 to 18446744073709551615 (the kernel counts cookies from 1).
    #[arg(long, value_parser = crate::cmd::args::whole::<u64>(1, Some(u64::MAX.into()), ""))]
    pub cookie: Option<u64>,
    /// Network namespace: a name from `ip netns list` or a path (/proc/<pid>/ns/net);
    /// default: cctl's own.
    #[arg(long, conflicts_with = "all_netns")]
    pub netns: Option<String>,
    /// Every namespace: cctl's, those in /run/netns, and those of running processes.
    #[arg(long)]
    pub all_netns: bool,
    /// Only sockets created in this cgroup v2 or a descendant (absolute, or relative to
    /// /sys/fs/cgroup).
    #[arg(long)]
    pub cgroup: Option<PathBuf>,
}

impl FilterArgs {
    /// The loader's filter for these flags, with `cc` as its congestion control filter
    /// (`--all-netns` is the caller's to act on).
    pub fn to_filter(&self, cc: Option<String>) -> SocketFilter {
        SocketFilter {
            port: self.port,
            addr: self.addr,
            netns: self.netns.clone(),
            cgroup: self.cgroup.clone(),
            cc,
            cookie: self.cookie,
        }
    }
}

/// The cookie of `--netns NAME` (a name from `ip netns list` or a path such as
/// /proc/<pid>/ns/net) for the collector's in-kernel filter; `None` without the flag.
///
/// Errors: a namespace that does not exist or is not a network namespace (bad input,
/// naming what is allowed).
pub fn netns_cookie(netns: Option<&str>) -> anyhow::Result<Option<u64>> {
    match netns {
        None => Ok(None),
        Some(n) => {
            let ns = cctl_loader::migrate::resolve_netns(Some(n))?;
            Ok(Some(ns.cookie()?))
        }
    }
}
