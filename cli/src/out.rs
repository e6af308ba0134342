//! Standard output of the printing commands, and a closed pipe (`cctl list | head -1`).
//!
//! Rust ignores SIGPIPE, so writing to a pipe whose reader has gone fails with EPIPE, and
//! `println!` panics on it. Commands print with [`outln!`]/[`out!`] instead, which return
//! the error; a closed standard output becomes [`StdoutClosed`], which `main` turns into a
//! quiet exit 0 after the command's guards (namespaces, loaded algorithms) have been
//! dropped on the way out. SIGPIPE is not reset to its default: that would kill the
//! process without running those guards.

use std::io;

/// Standard output was closed by its reader (EPIPE): the output is no longer wanted.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("standard output was closed by its reader (broken pipe)")
    }
}

impl std::error::Error for StdoutClosed {}

/// Whether `e` is EPIPE.
fn is_broken_pipe(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}

/// The result of a write to standard output: EPIPE becomes [`StdoutClosed`], any other
/// error stays what it is.
pub fn stdout_result(r: io::Result<()>) -> anyhow::Result<()> {
    match r {
        Ok(()) => Ok(()),
        Err(e) if is_broken_pipe(&e) => Err(anyhow::Error::new(StdoutClosed)),
        Err(e) => Err(anyhow::Error::new(e).context("writing to standard output")),
    }
}

/// An error from a writer over standard output (a CSV writer, a flush): EPIPE anywhere in
/// its chain becomes [`StdoutClosed`].
pub fn stdout_error(e: anyhow::Error) -> anyhow::Error {
    let closed = e
        .chain()
        .any(|c| c.downcast_ref::<io::Error>().is_some_and(is_broken_pipe));
    if closed {
        anyhow::Error::new(StdoutClosed)
    } else {
        e
    }
}

/// Whether an error chain says standard output was closed (see [`StdoutClosed`]).
pub fn is_stdout_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<StdoutClosed>())
}

/// `println!` that returns an `anyhow::Result<()>` instead of panicking: a closed
/// standard output is [`StdoutClosed`].
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        $crate::out::stdout_result(writeln!(std::io::stdout().lock(), $($arg)*))
    }};
}
pub(crate) use outln;

/// `print!` that returns an `anyhow::Result<()>` instead of panicking: a closed
/// standard output is [`StdoutClosed`].
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        $crate::out::stdout_result(write!(std::io::stdout().lock(), $($arg)*))
    }};
}
pub(crate) use out;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epipe_becomes_stdout_closed_and_other_errors_stay() {
        let e = stdout_result(Err(io::Error::from(io::ErrorKind::BrokenPipe))).unwrap_err();
        assert!(is_stdout_closed(&e));
        let e = stdout_result(Err(io::Error::from(io::ErrorKind::StorageFull))).unwrap_err();
        assert!(!is_stdout_closed(&e));
        let wrapped = anyhow::Error::new(io::Error::from(io::ErrorKind::BrokenPipe)).context("csv");
        assert!(is_stdout_closed(&stdout_error(wrapped)));
        assert!(!is_stdout_closed(&stdout_error(anyhow::anyhow!("other"))));
    }
}
