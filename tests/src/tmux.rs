//! A tmux driver for the end-to-end tests and benchmarks of `cctl top`: one session on a
//! private tmux server, read back with `capture-pane`, killed on drop (also when a test fails).

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Name of the session inside the private server (there is only one).
const SESSION: &str = "top";

/// How often [`Tmux::wait_for`] reads the screen back, in milliseconds.
const POLL_MS: u64 = 100;

/// Sessions started by this process, to give each its own server socket.
static STARTED: AtomicU32 = AtomicU32::new(0);

/// A command running in a detached tmux session of a given size on a private server
/// (`tmux -L <socket>`), with `remain-on-exit on` so that its exit status and last screen
/// can be read after it exits. Dropping it kills the server (and so the command, by SIGHUP).
#[derive(Debug)]
pub struct Tmux {
    socket: String,
    /// The server's socket file, removed on drop (kill-server leaves it).
    socket_path: Option<PathBuf>,
}

impl Tmux {
    /// Starts `cmd` (program and arguments, run without a shell) in a `width` x `height`
    /// (columns x lines) pane on the server socket `<prefix><pid>-<n>`.
    ///
    /// Errors: tmux missing (`make deps` installs it) or failing to start the session.
    pub fn start(prefix: &str, cmd: &[&str], width: u16, height: u16) -> Result<Tmux> {
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let mut t = Tmux {
            socket: format!("{prefix}{}-{n}", std::process::id()),
            socket_path: None,
        };
        // Options first, in the same tmux invocation, so that a command exiting at once
        // still leaves its pane (and exit status) behind.
        let (w, h) = (width.to_string(), height.to_string());
        let mut args = vec![
            "-f",
            "/dev/null",
            "start-server",
            ";",
            "set-option",
            "-g",
            "remain-on-exit",
            "on",
            ";",
            "new-session",
            "-d",
            "-s",
            SESSION,
            "-x",
            &w,
            "-y",
            &h,
            "--",
        ];
        args.extend_from_slice(cmd);
        t.tmux(&args).context("starting the tmux session")?;
        t.socket_path = t.display("#{socket_path}").ok().map(PathBuf::from);
        Ok(t)
    }

    /// [`Tmux::start`] through `sh`, which prints `[exited with status N]` when `cmd` exits
    /// and then keeps the pane open: tmux 3.3 sometimes never reaps a full-screen program
    /// that exits (it stays a zombie and `#{pane_dead_status}` stays empty), so
    /// [`Tmux::wait_exit`] reads the status from the screen; and a live pane still reports
    /// the terminal state the command left (tmux hides the cursor of a dead pane).
    /// [`Tmux::command_pid`] is the pid of `cmd`.
    pub fn start_reporting(prefix: &str, cmd: &[&str], width: u16, height: u16) -> Result<Tmux> {
        let mut wrapped = vec![
            "sh",
            "-c",
            "\"$0\" \"$@\"; s=$?; echo \"[exited with status $s]\"; exec sleep 3600",
        ];
        wrapped.extend_from_slice(cmd);
        Tmux::start(prefix, &wrapped, width, height)
    }

    /// The status in the `[exited with status N]` line of [`Tmux::start_reporting`], if shown.
    pub fn reported_status(&self) -> Result<Option<i32>> {
        let text = self.transcript(200)?;
        Ok(text.lines().rev().find_map(|l| {
            l.trim()
                .strip_prefix("[exited with status ")?
                .strip_suffix(']')?
                .parse()
                .ok()
        }))
    }

    /// Runs `tmux -L <socket> args...`; fails with tmux's stderr when it fails.
    fn tmux(&self, args: &[&str]) -> Result<Output> {
        let out = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .context("running tmux (install it: `make deps`)")?;
        if !out.status.success() {
            bail!(
                "tmux {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(out)
    }

    /// Expands a tmux format (`#{pane_pid}`) for the pane.
    fn display(&self, format: &str) -> Result<String> {
        let out = self.tmux(&["display-message", "-p", "-t", SESSION, format])?;
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }

    /// The visible screen, one line per row (trailing blanks trimmed by tmux).
    pub fn screen(&self) -> Result<String> {
        let out = self.tmux(&["capture-pane", "-p", "-t", SESSION])?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The visible screen and up to `lines` lines of scroll-back above it: what a program
    /// printed just before it exited may have scrolled off when tmux wrote "Pane is dead".
    pub fn transcript(&self, lines: u32) -> Result<String> {
        let start = format!("-{lines}");
        let out = self.tmux(&["capture-pane", "-p", "-S", &start, "-t", SESSION])?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Sends keys by tmux name: `q`, `Enter`, `Escape`, `C-c`, `F12`, `Down`, `Home`...
    pub fn keys(&self, keys: &[&str]) -> Result<()> {
        let mut args = vec!["send-keys", "-t", SESSION];
        args.extend_from_slice(keys);
        self.tmux(&args).map(|_| ())
    }

    /// Types `text` literally, character by character.
    pub fn type_text(&self, text: &str) -> Result<()> {
        self.tmux(&["send-keys", "-t", SESSION, "-l", text])
            .map(|_| ())
    }

    /// Reads the screen every 100 ms until `pred` holds for it and returns that screen.
    ///
    /// Panics after `timeout` with `what`, whether the command exited (and its status) and
    /// the last screen read, so a failing test shows what the dashboard showed.
    pub fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            let screen = self
                .screen()
                .unwrap_or_else(|e| panic!("waiting for {what}: {e:#}"));
            if pred(&screen) {
                return screen;
            }
            // A command that exited will not change the screen any more.
            let dead =
                self.dead().unwrap_or(false) || self.reported_status().is_ok_and(|s| s.is_some());
            if dead || t0.elapsed() >= timeout {
                let status = match (dead, self.reported_status()) {
                    (_, Ok(Some(s))) => format!("the command exited with status {s}"),
                    (true, _) => "the command exited".to_string(),
                    (false, _) => "the command is still running".to_string(),
                };
                let waited = t0.elapsed().as_secs_f64();
                panic!(
                    "waited {waited:.1} s for {what}; {status}; last screen:\n{}",
                    screen.trim_end()
                );
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
    }

    /// Whether the command has exited.
    pub fn dead(&self) -> Result<bool> {
        Ok(self.display("#{pane_dead}")? == "1")
    }

    /// `None` while the command runs and until tmux has its exit status (it may see the
    /// terminal close a moment before it reaps the process); then the exit status (128 +
    /// the signal number when a signal killed it).
    pub fn pane_dead_status(&self) -> Result<Option<i32>> {
        let s = self.display("#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}")?;
        let mut it = s.split(':');
        if it.next() != Some("1") {
            return Ok(None);
        }
        let status = it.next().unwrap_or("");
        let signal = it.next().unwrap_or("");
        Ok(match (status.parse::<i32>(), signal.parse::<i32>()) {
            (Ok(c), _) => Some(c),
            (_, Ok(sig)) => Some(128 + sig),
            _ => None,
        })
    }

    /// Waits up to `timeout` for the command to exit and returns its status; panics with the
    /// last screen if it does not exit.
    pub fn wait_exit(&self, timeout: Duration) -> i32 {
        let t0 = Instant::now();
        loop {
            match (self.pane_dead_status(), self.reported_status()) {
                (Ok(Some(code)), _) | (_, Ok(Some(code))) => return code,
                (Ok(None), Ok(None)) => {}
                (Err(e), _) | (_, Err(e)) => panic!("reading the pane's status: {e:#}"),
            }
            if t0.elapsed() >= timeout {
                let what = if self.dead().unwrap_or(false) {
                    // tmux loses the status of a command that exits while it is still
                    // setting up the pane (within a few ms of the start).
                    "exited, but tmux recorded no exit status"
                } else {
                    "did not exit"
                };
                panic!(
                    "the command {what} within {timeout:?}; last screen:\n{}",
                    self.screen().unwrap_or_default().trim_end()
                );
            }
            std::thread::sleep(Duration::from_millis(POLL_MS));
        }
    }

    /// Whether the pane shows its alternate screen (a full-screen program that did not
    /// restore the terminal leaves it on).
    pub fn alternate_on(&self) -> Result<bool> {
        Ok(self.display("#{alternate_on}")? == "1")
    }

    /// Whether the pane's cursor is visible (a full-screen program hides it while it runs).
    pub fn cursor_visible(&self) -> Result<bool> {
        Ok(self.display("#{cursor_flag}")? == "1")
    }

    /// Whether the pane's terminal is in cooked mode (canonical input and echo on, as a
    /// shell expects; a program that left raw mode on leaves them off), from `stty -a`.
    pub fn tty_cooked(&self) -> Result<bool> {
        let tty = self.display("#{pane_tty}")?;
        let out = Command::new("stty")
            .args(["-a", "-F", &tty])
            .output()
            .context("running stty")?;
        if !out.status.success() {
            bail!(
                "stty -a -F {tty}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let flags = String::from_utf8_lossy(&out.stdout);
        let words: Vec<&str> = flags.split_whitespace().collect();
        Ok(words.contains(&"icanon") && words.contains(&"echo"))
    }

    /// Process id of the pane's process (tmux runs the command without a shell).
    pub fn pane_pid(&self) -> Result<u32> {
        let s = self.display("#{pane_pid}")?;
        s.parse()
            .with_context(|| format!("tmux gave a pane pid {s:?}"))
    }

    /// Process id of the command of [`Tmux::start_reporting`] (the child of its `sh`).
    pub fn command_pid(&self) -> Result<u32> {
        let sh = self.pane_pid()?;
        let path = format!("/proc/{sh}/task/{sh}/children");
        let t0 = Instant::now();
        loop {
            let children =
                std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
            if let Some(pid) = children.split_whitespace().next() {
                return pid.parse().with_context(|| format!("{path}: {children:?}"));
            }
            if t0.elapsed() > Duration::from_secs(5) {
                bail!("the pane's shell {sh} started no command");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
        if let Some(p) = &self.socket_path {
            let _ = std::fs::remove_file(p);
        }
    }
}
