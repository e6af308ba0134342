//! The thread that reads one BPF object's ring buffer, shared by the collector
//! ([`crate::collector`]), the close records ([`crate::closerec`]) and the delay taps
//! ([`crate::delays`]): it owns the object (loaded and attached on it), says when it is
//! attached, reads the ring buffer every [`POLL_INTERVAL`] (or when the program wakes it)
//! until stopped, then reads what is left and returns its counters. Dropping the reader
//! stops and joins it, which detaches the programs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use libbpf_rs::RingBuffer;

use crate::error::{Error, Result};

/// How often a reader reads its ring buffer when the program has not woken it: records
/// reach the reader's channel at most this late.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Handed to a reader's body: call [`Ready::attached`] once the programs are attached.
pub struct Ready(Sender<()>);

impl Ready {
    /// The programs are attached: [`Reader::start`] returns.
    pub fn attached(self) {
        let _ = self.0.send(());
    }
}

/// A ring-buffer thread whose body returns `S` (its counters) when stopped.
pub struct Reader<S> {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<S>>>,
}

impl<S: Send + 'static> Reader<S> {
    /// Starts thread `name` running `body(ready, stop)`, and returns once the body has
    /// called [`Ready::attached`]. The body loads and attaches its object, then reads with
    /// [`poll_until_stopped`].
    ///
    /// Errors: the thread cannot start ([`Error::Io`]); the error the body returned before
    /// it was attached.
    pub fn start<F>(name: &str, body: F) -> Result<Reader<S>>
    where
        F: FnOnce(Ready, &AtomicBool) -> Result<S> + Send + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread_stop = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(Ready(ready_tx), &thread_stop))
            .map_err(|e| Error::io(format!("starting the {name} thread"), "-", e))?;
        if ready_rx.recv().is_ok() {
            return Ok(Reader {
                stop,
                thread: Some(thread),
            });
        }
        // The body returned (or panicked) without attaching.
        match thread.join() {
            Ok(Err(e)) => Err(e),
            _ => Err(Error::io(
                format!("{name} thread ended before attaching"),
                "-",
                std::io::Error::other("thread exited"),
            )),
        }
    }

    /// Whether the thread still runs (it ends when stopped or when a read failed).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Asks the thread to stop after its current read (without waiting).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Stops the thread, waits for it, and returns its counters.
    ///
    /// Errors: the body's ([`Error::Bpf`] when a read failed); the thread panicked.
    pub fn finish(mut self) -> Result<S> {
        self.stop();
        self.thread
            .take()
            .expect("joined once")
            .join()
            .unwrap_or_else(|_| {
                Err(Error::io(
                    "ring-buffer thread panicked",
                    "-",
                    std::io::Error::other("panic"),
                ))
            })
    }
}

impl<S> Drop for Reader<S> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Reads `rb` until `stop` is set, calling `after_read` after every read, then reads what
/// is left.
///
/// Errors: [`Error::Bpf`] when a read failed (other than by a signal).
pub fn poll_until_stopped(
    rb: &RingBuffer,
    stop: &AtomicBool,
    mut after_read: impl FnMut(),
) -> Result<()> {
    while !stop.load(Ordering::SeqCst) {
        if let Err(e) = rb.poll(POLL_INTERVAL).and_then(|_| rb.consume()) {
            if e.kind() != libbpf_rs::ErrorKind::Interrupted {
                return Err(Error::bpf("polling the ring buffer", e));
            }
        }
        after_read();
    }
    let _ = rb.consume();
    after_read();
    Ok(())
}
