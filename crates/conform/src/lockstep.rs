//! The lockstep driver: N kernel senders (a port and its module, or two module sockets)
//! in one network namespace, one TUN device standing in for the network, and one thread
//! that reads their segments, writes the scripted receiver's ACKs — ACK k of every sender
//! back to back — reads each sender's `TCP_INFO` right after its ACK was processed, and
//! keeps the senders' buffers full with non-blocking writes.
//!
//! Why one thread: a TUN write is processed synchronously (`tun_get_user` →
//! `netif_receive_skb` with BHs off), so when `write(2)` returns the sender has taken the
//! ACK and transmitted what it allowed — unless a thread of ours held the socket lock, in
//! which case the kernel would defer the ACK to the lock's release. With no other thread
//! touching the sockets, the state read after the write is the state after that ACK.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use socket2::{Domain, Protocol, Socket, Type};

use super::receiver::{Receiver, ReceiverStats};
use super::script::Script;
use super::wire;

/// Address of the senders (the TUN device's own address).
pub const SENDER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);
/// Address of the scripted receiver (routed into the TUN device).
pub const RECEIVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 2);
/// Name of the TUN device in the run's namespace.
pub const TUN_NAME: &str = "cctlcf0";
/// IP MTU of the TUN device, bytes (MSS 1460, 1448 with timestamps).
pub const MTU: u16 = 1500;
/// First sender port; sender i binds `SENDER_PORT0 + i`.
pub const SENDER_PORT0: u16 = 40_001;
/// First receiver port; sender i connects to `RECEIVER_PORT0 + i`.
pub const RECEIVER_PORT0: u16 = 5001;
/// Unsent data a sender may hold (`TCP_NOTSENT_LOWAT`), bytes: enough that the sender
/// is never short of data while the script wants it busy, little enough that an
/// app-limited phase empties it within a few RTTs.
pub const NOTSENT_LOWAT: u32 = 256 * 1024;
/// Send buffer of each sender (`SO_SNDBUFFORCE`), bytes.
pub const SNDBUF: u32 = 32 << 20;
/// ACKs of different senders due within this of each other are written back to back
/// as one step, usec.
pub const PAIR_WINDOW_US: u64 = 1000;
/// Before an ACK's due time the driver polls the TUN device until this much is left,
/// then sleeps to the due time with `clock_nanosleep(TIMER_ABSTIME)`, usec.
const SPIN_MARGIN_US: u64 = 300;
/// A step is moved past a jiffies tick when it would end within this of it, usec (on top
/// of twice the mean step's length): the tick's interrupt comes that late at most.
const TICK_GUARD_US: u64 = 40;
/// Steps between two attempts to find the tick grid when the first failed.
const TICK_RELOCATE_STEPS: u64 = 2000;

/// One sender's state after one ACK (one step).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepState {
    /// When the ACK was written, usec since the run started.
    pub t_us: u64,
    /// Congestion window, segments (`tcpi_snd_cwnd`).
    pub cwnd: u32,
    /// Slow-start threshold, segments (`tcpi_snd_ssthresh`; 2^31−1 while infinite).
    pub ssthresh: u32,
    /// CA state (`tcpi_ca_state`: 0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss).
    pub ca_state: u8,
    /// Smoothed RTT, usec (`tcpi_rtt`).
    pub srtt_us: u32,
    /// Retransmitted segments over the connection's life (`tcpi_total_retrans`).
    pub retrans: u32,
    /// Segments delivered (`tcpi_delivered`).
    pub delivered: u32,
    /// Segments sent and not yet acknowledged (`tcpi_unacked`, packets_out): snd_nxt −
    /// snd_una in segments, every segment being one MSS here.
    pub packets_out: u32,
    /// How late the ACK was written against its due time, usec.
    pub late_us: u32,
}

/// What one sender did in a run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SideRun {
    /// Congestion control (`TCP_CONGESTION` name).
    pub cc: String,
    /// Socket cookie (matches the collector's samples).
    pub cookie: u64,
    /// Its state after each ACK, step by step.
    pub steps: Vec<StepState>,
    /// CLOCK_MONOTONIC usec just after each step's ACKs were processed; the collector's
    /// sample of the next ACK shows the algorithm's variables after this one.
    #[serde(skip)]
    pub done_us: Vec<u64>,
    /// What its receiver did.
    pub receiver: ReceiverStats,
    /// MSS the sender announced, bytes.
    pub mss: u32,
}

/// Whether a run can be judged (see [`LATE_BOUND_US`]).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Validity {
    /// Packets the TUN device dropped (`tx_dropped`): the senders saw losses the script
    /// did not make.
    pub tun_tx_dropped: u64,
    /// Latest ACK write against its due time, usec.
    pub late_max_us: u64,
    /// 99th percentile of the lateness, usec.
    pub late_p99_us: u64,
    /// The bound the run was held to, usec.
    pub late_bound_us: u64,
    /// Largest gap between the first and the last write of one step, usec.
    pub step_skew_max_us: u64,
    /// Mean time the driver spent per step (writes, `TCP_INFO`, refills, TUN reads), usec:
    /// what bounds the ACK rate this machine can drive.
    pub busy_us_per_step: f64,
    /// Steps moved past a jiffies tick so that every sender of the step saw the same
    /// jiffies ([`Ticks`]); 0 when the tick could not be located.
    #[serde(default)]
    pub tick_waits: u64,
    /// Steps during which a tick still came (the coarse clock moved between the first
    /// and the last write): its senders may have seen different jiffies.
    #[serde(default)]
    pub tick_straddles: u64,
    /// Why the run is invalid; `None` = valid.
    pub invalid: Option<String>,
}

/// Lateness bound of ACK writes: the larger of 2 ms and 20 % of the base RTT. A run is
/// invalid when more than [`LATE_SHARE_MAX`] of its ACKs were written later than that: the
/// RTTs the senders saw were then not the script's. (Lateness delays every sender of a
/// step alike — they stay comparable — but the script's RTT schedule is no longer what ran.)
/// Measured in the 6.12 guest under QEMU TCG on its virtual clock (`-icount`): a step of
/// two senders costs 100-200 usec of guest time, and the latest ACK of most runs is
/// 1.6-2.1 ms late, in the bursts after a recovery or an app-limited pause when a window's
/// worth of ACKs falls due at once. On the 6.18 host (real time, 2 shared cores) a quiet
/// machine stays under 1 ms; a busy one (a compile beside it) does not.
pub fn late_bound_us(rtt_ms: f64) -> u64 {
    (2000.0f64).max(rtt_ms * 1000.0 * 0.20) as u64
}

/// Largest share of ACKs a valid run may write later than [`late_bound_us`]: 5 %. The
/// ACKs of segments a sender emitted back to back fall due together and one driver writes
/// them one after the other (~100 usec a step in the guest), so slow start's doubling
/// bursts make 1-2 % of a slow-start script's ACKs 2-2.5 ms late at 10 ms RTTs.
pub const LATE_SHARE_MAX: f64 = 0.05;

/// One lockstep run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunResult {
    /// Script name.
    pub script: String,
    /// Base RTT, ms.
    pub rtt_ms: f64,
    /// Senders, in the order their ACKs are written.
    pub sides: Vec<SideRun>,
    /// Whether it can be judged.
    pub validity: Validity,
    /// Wall time, s.
    pub seconds: f64,
    /// CLOCK_MONOTONIC usec when the run started (step times count from it).
    pub t0_us: u64,
}

fn now_us() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1000
}

fn sleep_until_us(t: u64) {
    let ts = libc::timespec {
        tv_sec: (t / 1_000_000) as libc::time_t,
        tv_nsec: ((t % 1_000_000) * 1000) as libc::c_long,
    };
    // SAFETY: a valid timespec; a null remainder is allowed with TIMER_ABSTIME.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        );
    }
}

fn coarse_us() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC_COARSE)
        .expect("CLOCK_MONOTONIC_COARSE");
    t.tv_sec() as u64 * 1_000_000 + t.tv_nsec() as u64 / 1000
}

/// The kernel's jiffies ticks as the driver sees them. Rules that read jiffies (CUBIC's,
/// H-TCP's and Westwood's clocks in Linux) give two senders of a step different answers
/// when a tick falls between their ACKs, and the port takes longer per ACK than its module,
/// so that would happen more often in a port-against-module run than in a module-against-
/// itself one. The ticks lie on a fixed grid (`CLOCK_MONOTONIC_COARSE`'s resolution apart,
/// the tick period); the driver finds its phase at the start of a run by watching the
/// coarse clock move while it spins, then writes no step across a tick: a step that would
/// end within twice the mean step's length (plus [`TICK_GUARD_US`]) of the next tick waits
/// until just after it.
struct Ticks {
    /// The tick period, usec.
    period_us: u64,
    /// A tick's time modulo the period, usec.
    phase_us: u64,
}

impl Ticks {
    /// Spins up to three tick periods watching the coarse clock; `None` when its
    /// resolution is not a tick (high-resolution coarse clocks) or no move was seen
    /// between two close polls (a descheduled driver).
    fn locate() -> Option<Ticks> {
        let res = nix::time::clock_getres(nix::time::ClockId::CLOCK_MONOTONIC_COARSE).ok()?;
        let period_us = res.tv_sec() as u64 * 1_000_000 + res.tv_nsec() as u64 / 1000;
        if !(1000..=10_000).contains(&period_us) {
            return None;
        }
        let start = now_us();
        let (mut last_coarse, mut last_poll) = (coarse_us(), now_us());
        while now_us() < start + 3 * period_us {
            let (c, t) = (coarse_us(), now_us());
            // Moved between two polls at most 20 us apart, while this thread ran (so not
            // a catch-up after idle, which happens on the way out of it): a tick, at
            // their midpoint.
            if c != last_coarse && t - last_poll <= 20 {
                return Some(Ticks {
                    period_us,
                    phase_us: ((t + last_poll) / 2) % period_us,
                });
            }
            last_coarse = c;
            last_poll = t;
        }
        None
    }

    /// The first tick after `now_us`.
    fn next_after(&self, now_us: u64) -> u64 {
        let since = (now_us + self.period_us - self.phase_us) % self.period_us;
        now_us - since + self.period_us
    }
}

fn tcp_info(sock: &Socket) -> Result<libc::tcp_info> {
    cctl_netem::flows::tcp_info(sock).context("getsockopt(TCP_INFO)")
}

fn setsockopt_u32(sock: &Socket, level: i32, opt: i32, v: u32, what: &str) -> Result<()> {
    // SAFETY: a u32 option value of the right size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            opt,
            (&v as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error()).with_context(|| format!("setsockopt({what})"));
    }
    Ok(())
}

fn cookie(sock: &Socket) -> u64 {
    let mut v: u64 = 0;
    let mut len = 8 as libc::socklen_t;
    // SAFETY: SO_COOKIE writes a u64.
    unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_COOKIE,
            (&mut v as *mut u64).cast(),
            &mut len,
        )
    };
    v
}

struct Sender {
    sock: Socket,
    rx: Receiver,
    run: SideRun,
    connected: bool,
    /// Unsent bytes at the last `TCP_INFO`.
    notsent: u32,
}

/// Runs `script` at base RTT `rtt_ms` with one sender per congestion control in `ccs`,
/// on the calling thread, which must be in a namespace of its own (the TUN device and
/// the sockets are created in the caller's namespace). `stop` ends the run early.
///
/// Errors: creating the device or the sockets, a congestion control the kernel does not
/// have, a handshake that does not complete within 3 s.
pub fn run_here(
    script: &Script,
    rtt_ms: f64,
    ccs: &[String],
    stop: &std::sync::atomic::AtomicBool,
) -> Result<RunResult> {
    let started = std::time::Instant::now();
    let dev = tun_rs::DeviceBuilder::new()
        .name(TUN_NAME)
        .ipv4(SENDER_ADDR, 24, None)
        .mtu(MTU)
        .packet_information(false)
        .tx_queue_len(10_000)
        .build_sync()
        .with_context(|| format!("creating TUN device {TUN_NAME} (is /dev/net/tun there?)"))?;
    dev.set_nonblocking(true).context("TUN: non-blocking")?;
    // One segment per packet: a GSO packet of several segments would reach the receiver
    // as one, and a drop on the device would lose several.
    let out = std::process::Command::new("ip")
        .args(["link", "set", TUN_NAME, "gso_max_segs", "1", "up"])
        .output()
        .context("running ip")?;
    if !out.status.success() {
        bail!(
            "`ip link set {TUN_NAME} gso_max_segs 1 up` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }

    // Sockets first (TCP_CONGESTION may load a module, which takes a while), then the clock
    // starts and they connect back to back.
    let mut socks = Vec::new();
    for (i, cc) in ccs.iter().enumerate() {
        let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
        sock.set_tcp_congestion(cc.as_bytes())
            .with_context(|| format!("setsockopt(TCP_CONGESTION, {cc}): is it registered?"))?;
        setsockopt_u32(
            &sock,
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            SNDBUF,
            "SO_SNDBUFFORCE",
        )?;
        setsockopt_u32(
            &sock,
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            NOTSENT_LOWAT,
            "TCP_NOTSENT_LOWAT",
        )?;
        sock.set_nodelay(true)?;
        // The next run binds the same ports; this run's sockets end with a RST (linger 0).
        sock.set_reuse_address(true)?;
        sock.set_linger(Some(Duration::ZERO))?;
        sock.bind(&SocketAddrV4::new(SENDER_ADDR, SENDER_PORT0 + i as u16).into())
            .context("binding a sender")?;
        sock.set_nonblocking(true)?;
        socks.push(sock);
    }
    let t0 = now_us();
    let mut senders = Vec::new();
    let clock = super::receiver::ScriptClock::default();
    for (i, (sock, cc)) in socks.into_iter().zip(ccs).enumerate() {
        let to = SocketAddrV4::new(RECEIVER_ADDR, RECEIVER_PORT0 + i as u16);
        match sock.connect(&to.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e).context("connecting a sender"),
        }
        let rx = Receiver::new(
            script,
            rtt_ms,
            (RECEIVER_ADDR, to.port()),
            (SENDER_ADDR, SENDER_PORT0 + i as u16),
            t0,
        )
        .sharing(clock.clone());
        let c = cookie(&sock);
        senders.push(Sender {
            sock,
            rx,
            run: SideRun {
                cc: cc.clone(),
                cookie: c,
                steps: Vec::new(),
                done_us: Vec::new(),
                receiver: ReceiverStats::default(),
                mss: 0,
            },
            connected: false,
            notsent: 0,
        });
    }

    let base_us = rtt_ms * 1000.0;
    let end_us = t0 + (script.duration_rtts * base_us) as u64;
    let bound = late_bound_us(rtt_ms);
    let mut buf = vec![0u8; 65_536];
    let chunk = vec![0x5au8; 65_536];
    let mut lates: Vec<u64> = Vec::new();
    let mut skew_max = 0u64;
    // One sender alone (a model check) has no other to disagree with. A grid not found
    // at the start (the kernel busy tearing down the previous run's sockets) is looked
    // for again every TICK_RELOCATE_STEPS steps.
    let mut ticks = if ccs.len() > 1 { Ticks::locate() } else { None };
    let mut relocate_at = TICK_RELOCATE_STEPS;
    let (mut tick_waits, mut tick_straddles) = (0u64, 0u64);
    // Mean length of a step's writes, usec (first write to the last one's return).
    let mut step_us = 100.0f64;
    let mut busy_us = 0u64;
    let mut steps = 0u64;
    loop {
        let loop_start = now_us();
        // The sender's segments: whatever its last ACK, write or timer released.
        loop {
            match dev.recv(&mut buf) {
                Ok(n) => {
                    let now = now_us();
                    if let Some(seg) = wire::parse(&buf[..n]) {
                        if let Some(s) = senders.iter_mut().find(|s| s.rx.peer_port() == seg.src.1)
                        {
                            s.rx.on_segment(&seg, now);
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e).context("reading the TUN device"),
            }
        }
        let now = now_us();
        // Delayed-ACK timers fire together, like the ACKs they produce: a sender whose timer
        // is due within the pairing window of the first fires with it, so no segment
        // slips into one sender's delayed ACK and not into the other's.
        if let Some(first) = senders.iter().filter_map(|s| s.rx.delack_deadline()).min() {
            if first <= now {
                for s in senders.iter_mut() {
                    if s.rx
                        .delack_deadline()
                        .is_some_and(|d| d <= first + PAIR_WINDOW_US)
                    {
                        s.rx.fire_delack(now);
                    }
                }
            }
        }
        if now >= end_us || stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        // Due ACKs: one per sender whose head is due, written back to back (one step).
        let first_due = senders
            .iter()
            .filter_map(|s| s.rx.pending.front().map(|a| a.due_us))
            .min();
        if let Some(due) = first_due.filter(|&d| d <= now) {
            if ticks.is_none() && ccs.len() > 1 && steps >= relocate_at {
                ticks = Ticks::locate();
                relocate_at = steps + TICK_RELOCATE_STEPS;
            }
            if let Some(tk) = &ticks {
                let t = now_us();
                let tick = tk.next_after(t);
                if t + 2 * step_us as u64 + TICK_GUARD_US >= tick {
                    sleep_until_us(tick + TICK_GUARD_US);
                    tick_waits += 1;
                }
            }
            let coarse_before = coarse_us();
            let mut written = Vec::new();
            let mut first_write = 0;
            for (i, s) in senders.iter_mut().enumerate() {
                if s.rx
                    .pending
                    .front()
                    .is_none_or(|a| a.due_us > due + PAIR_WINDOW_US)
                {
                    continue;
                }
                let ack = s.rx.pending.pop_front().expect("checked");
                let pkt = ack.reply.build();
                let w = now_us();
                if written.is_empty() {
                    first_write = w;
                }
                let late = w.saturating_sub(ack.due_us);
                dev.send(&pkt)
                    .context("writing an ACK into the TUN device")?;
                if !ack.reply.syn {
                    written.push((i, w, late));
                } else {
                    s.connected = true;
                }
            }
            let last = now_us();
            if coarse_us() != coarse_before && written.len() > 1 {
                tick_straddles += 1;
            }
            if !written.is_empty() {
                step_us = 0.95 * step_us + 0.05 * (last - first_write) as f64;
            }
            if written.len() > 1 {
                skew_max = skew_max.max(written.last().unwrap().1 - first_write);
            }
            for (i, w, late) in written {
                let s = &mut senders[i];
                let info = tcp_info(&s.sock)?;
                s.run.steps.push(StepState {
                    t_us: w - t0,
                    cwnd: info.tcpi_snd_cwnd,
                    ssthresh: info.tcpi_snd_ssthresh,
                    ca_state: info.tcpi_ca_state,
                    srtt_us: info.tcpi_rtt,
                    retrans: info.tcpi_total_retrans,
                    delivered: info.tcpi_delivered,
                    packets_out: info.tcpi_unacked,
                    late_us: late.min(u64::from(u32::MAX)) as u32,
                });
                s.run.done_us.push(last);
                s.notsent = info.tcpi_notsent_bytes;
                lates.push(late);
            }
            // Keep the senders busy unless the script pauses the application.
            let t_rtts = (now_us() - t0) as f64 / base_us;
            let paused = Script::in_phase(&script.app_limited, t_rtts);
            if !paused {
                // One write per sender tops the unsent data up to TCP_NOTSENT_LOWAT; it is
                // needed only once half of that is gone (a syscall less per ACK).
                for s in senders
                    .iter_mut()
                    .filter(|s| s.connected && s.notsent < NOTSENT_LOWAT / 2)
                {
                    let _ = s.sock.send(&chunk);
                    s.notsent = NOTSENT_LOWAT;
                }
            }
            steps += 1;
            busy_us += now_us() - loop_start;
            continue;
        }
        // Nothing due: wait for the next due ACK or delayed-ACK timer, watching the device
        // for segments a kernel timer (RTO, TLP) releases meanwhile.
        let next = senders
            .iter()
            .flat_map(|s| {
                [
                    s.rx.pending.front().map(|a| a.due_us),
                    s.rx.delack_deadline(),
                ]
            })
            .flatten()
            .min()
            .unwrap_or(end_us)
            .min(end_us);
        let now = now_us();
        if next > now + SPIN_MARGIN_US {
            let timeout_ms = ((next - now - SPIN_MARGIN_US) / 1000) as i32;
            let mut pfd = libc::pollfd {
                fd: dev.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            if timeout_ms > 0 {
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut pfd, 1, timeout_ms.min(50)) };
                continue;
            }
        }
        sleep_until_us(next);
        if senders.iter().any(|s| !s.connected)
            && now_us() - t0 > 3_000_000 + (3.0 * base_us) as u64
        {
            bail!("a sender did not complete its handshake within 3 s of the RTT");
        }
    }

    for s in senders.iter_mut() {
        s.run.receiver = s.rx.stats;
        s.run.mss = s.rx.mss();
    }
    let tun_tx_dropped = tun_tx_dropped();
    lates.sort_unstable();
    let late_max = lates.last().copied().unwrap_or(0);
    let late_p99 = lates.get(lates.len() * 99 / 100).copied().unwrap_or(0);
    let invalid = if tun_tx_dropped > 0 {
        Some(format!("the TUN device dropped {tun_tx_dropped} packet(s)"))
    } else if (lates.iter().filter(|&&l| l > bound).count() as f64)
        > LATE_SHARE_MAX * lates.len() as f64
    {
        let n = lates.iter().filter(|&&l| l > bound).count();
        Some(format!(
            "{n} of {} ACKs written later than {bound} us after their due time (more than {} %; latest {late_max} us): this machine did not keep up with the script's rate",
            lates.len(),
            LATE_SHARE_MAX * 100.0
        ))
    } else {
        None
    };
    drop(dev);
    Ok(RunResult {
        script: script.name.clone(),
        rtt_ms,
        sides: senders.into_iter().map(|s| s.run).collect(),
        validity: Validity {
            tun_tx_dropped,
            late_max_us: late_max,
            late_p99_us: late_p99,
            late_bound_us: bound,
            step_skew_max_us: skew_max,
            busy_us_per_step: if steps == 0 {
                0.0
            } else {
                busy_us as f64 / steps as f64
            },
            tick_waits,
            tick_straddles,
            invalid,
        },
        seconds: started.elapsed().as_secs_f64(),
        t0_us: t0,
    })
}

/// `tx_dropped` of the TUN device in the calling thread's namespace, from
/// `/proc/thread-self/net/dev` (the thread's namespace; no `ip` process, which costs half
/// a second under TCG). Unreadable counts as 0 dropped.
fn tun_tx_dropped() -> u64 {
    let text = std::fs::read_to_string("/proc/thread-self/net/dev").unwrap_or_default();
    text.lines()
        .find_map(|l| {
            let (name, rest) = l.split_once(':')?;
            (name.trim() == TUN_NAME).then(|| rest.split_whitespace().nth(11)?.parse().ok())?
        })
        .unwrap_or(0)
}
