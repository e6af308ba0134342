//! One `cctl bench` per kernel. A sweep removes the previous sweep's leftovers (`cctl-b*`
//! namespaces, orphaned algorithms) before it starts, which would wreck a sweep running
//! next to it; parallel runs come from `--jobs` inside one process instead.
//!
//! The lock is a listening Unix socket bound to an abstract name in the network namespace
//! the process starts in (the host's, for every `cctl bench` on a machine). The kernel
//! frees it when the holder exits, however it exits (SIGKILL included), so it never goes
//! stale, and a refused process learns the holder's PID from the socket's peer credentials.
//! Processes in other network namespaces (containers without host networking) do not
//! see each other's lock: run one such container per node.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};

/// Abstract socket name of the lock.
pub const LOCK_NAME: &str = "cctl-bench.lock";

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error(
        "another cctl bench (PID {pid}) is running on this kernel; runs share the kernel's \
         namespaces and algorithm names, so only one sweep may run at a time (use --jobs N to \
         run N runs at once in one sweep)"
    )]
    Held {
        /// The holder's PID, as the kernel recorded it when it started listening (0 when
        /// it could not be read).
        pid: i32,
    },
    /// The socket could not be created.
    #[error("taking the cctl bench lock (abstract socket @{LOCK_NAME}): {0}")]
    Io(#[from] std::io::Error),
}

/// The held lock; released when dropped or when the process exits.
#[derive(Debug)]
pub struct BenchLock {
    _listener: UnixListener,
}

/// Takes the lock, or names the process that holds it.
///
/// Errors: [`LockError::Held`] with the holder's PID, [`LockError::Io`] when no socket
/// could be made.
pub fn acquire() -> Result<BenchLock, LockError> {
    acquire_named(LOCK_NAME)
}

/// [`acquire`] for the lock with abstract socket name `name` (tests use their own, so
/// that they neither take nor need the machine's).
fn acquire_named(name: &str) -> Result<BenchLock, LockError> {
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    match UnixListener::bind_addr(&addr) {
        Ok(listener) => Ok(BenchLock {
            _listener: listener,
        }),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(LockError::Held {
            pid: holder_pid_named(name).unwrap_or(0),
        }),
        Err(e) => Err(e.into()),
    }
}

/// PID of the process listening on the lock, from the connected socket's SO_PEERCRED.
pub fn holder_pid() -> Option<i32> {
    holder_pid_named(LOCK_NAME)
}

/// [`holder_pid`] for the lock with abstract socket name `name`.
fn holder_pid_named(name: &str) -> Option<i32> {
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).ok()?;
    let stream = UnixStream::connect_addr(&addr).ok()?;
    let cred =
        nix::sys::socket::getsockopt(&stream, nix::sys::socket::sockopt::PeerCredentials).ok()?;
    Some(cred.pid())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid_and_the_lock_frees_on_drop() {
        // A lock of this test's own: the machine's may be held by a real sweep.
        let name = format!("{LOCK_NAME}.test-{}", std::process::id());
        let first = acquire_named(&name).expect("a lock of the test's own is free");
        match acquire_named(&name) {
            Err(LockError::Held { pid }) => {
                assert_eq!(pid, std::process::id() as i32);
                let msg = LockError::Held { pid }.to_string();
                assert!(
                    msg.contains(&format!("PID {pid}")) && msg.contains("--jobs"),
                    "{msg}"
                );
            }
            other => panic!("expected Held, got {other:?}"),
        }
        drop(first);
        assert!(acquire_named(&name).is_ok());
    }
}
