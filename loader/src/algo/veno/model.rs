//! A plain f64 model of TCP Veno's rules (spec §19.2; Fu & Liew, IEEE JSAC 21(2),
//! 2003), the reference for bpf/algo/veno_math.h.

/// Veno's tunables (spec §19.2 "Parameters").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VenoParams {
    /// β, packets: the backlog at or above which the network counts as congested.
    pub beta: f64,
    /// The multiplier of cwnd on a random (non-congestive) loss, fraction.
    pub random_loss_factor: f64,
}

impl Default for VenoParams {
    /// The paper's values (spec §19.2): β = 3 packets, random-loss backoff 4/5.
    fn default() -> Self {
        Self {
            beta: 3.0,
            random_loss_factor: 0.8,
        }
    }
}

/// N = cwnd·(RTT − BaseRTT)/RTT, packets: this flow's backlog in the bottleneck
/// queue (spec §19.2; the paper's N = Actual·(RTT − BaseRTT), Actual = cwnd/RTT).
/// `cwnd` in segments, RTTs in any one unit; 0 when RTT <= BaseRTT.
pub fn backlog(cwnd: f64, rtt: f64, base_rtt: f64) -> f64 {
    if rtt <= base_rtt {
        return 0.0;
    }
    cwnd * (rtt - base_rtt) / rtt
}

/// Whether the network is in the congestive state: N >= β (spec §19.2).
pub fn congested(n: f64, p: &VenoParams) -> bool {
    n >= p.beta
}

/// Linux's congestive test (\[LINUX\] tcp_veno.c): N in half packets rounded up,
/// 2w − ⌊2w·BaseRTT/RTT⌋ >= 2β, i.e. N > β − 1/2 for an integer window.
pub fn linux_congested(cwnd: f64, rtt: f64, base_rtt: f64, p: &VenoParams) -> bool {
    2.0 * cwnd - (2.0 * cwnd * base_rtt / rtt).floor() >= 2.0 * p.beta
}

/// ssthresh after a fast-retransmit loss, segments (spec §19.2): congestive
/// (N >= β) -> max(cwnd/2, 2), Reno; random (N < β) -> max(cwnd·4/5, 2).
pub fn ssthresh(cwnd: f64, congested: bool, p: &VenoParams) -> f64 {
    if congested {
        (cwnd / 2.0).max(2.0)
    } else {
        (cwnd * p.random_loss_factor).max(2.0)
    }
}

/// Congestion-avoidance increase per acknowledged segment, segments (spec §19.2):
/// 1/cwnd (Reno, +1 per RTT) when not congested, 1/(2·cwnd) (+1 every other RTT)
/// when congested.
pub fn ca_increment(cwnd: f64, congested: bool) -> f64 {
    if congested {
        0.5 / cwnd
    } else {
        1.0 / cwnd
    }
}

/// The discrete every-other-RTT rule: over `rtts` completed RTTs in the congestive
/// state, starting with the toggle `inc` (true: the next RTT adds a segment), the
/// segments added and the toggle afterwards (spec §19.2; \[LINUX\] `inc`).
pub fn congested_rtts(rtts: u32, inc: bool) -> (u32, bool) {
    ((rtts + u32::from(inc)) / 2, inc ^ (rtts % 2 == 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::{veno_ai, veno_params};

    fn params(p: &VenoParams, linux: bool) -> veno_params {
        veno_params {
            beta_pkts: p.beta as u32,
            loss_factor_pct: (p.random_loss_factor * 100.0).round() as u32,
            linux_compat: linux.into(),
        }
    }

    fn c_congested(cwnd: u32, rtt: u32, base: u32, p: &VenoParams, linux: bool) -> bool {
        let cp = params(p, linux);
        // SAFETY: a pure function reading the params struct it is given.
        unsafe { crate::math::veno_is_congested(cwnd, rtt, base, &cp) != 0 }
    }

    fn c_backlog(cwnd: u32, rtt: u32, base: u32) -> f64 {
        // SAFETY: a pure function of integers.
        f64::from(unsafe { crate::math::veno_backlog_fp(cwnd, rtt, base) }) / 1024.0
    }

    fn c_ssthresh(cwnd: u32, congested: bool, p: &VenoParams) -> u32 {
        let cp = params(p, false);
        // SAFETY: a pure function reading the params struct it is given.
        unsafe { crate::math::veno_ssthresh_segs(cwnd, congested.into(), &cp) }
    }

    /// The C's every-other-RTT step: (cwnd, snd_cwnd_cnt, inc) after `acked`.
    fn c_ai(cwnd: u32, cnt: u32, inc: bool, acked: u32, linux: bool) -> (u32, u32, bool) {
        let mut s = veno_ai {
            cwnd,
            cwnd_cnt: cnt,
            clamp: u32::MAX,
            acked,
            inc: inc.into(),
            _pad: [0; 3],
        };
        let cp = params(&VenoParams::default(), linux);
        // SAFETY: `s` and `cp` are live structs of the C layout; the call only reads cp
        // and reads/writes s.
        unsafe { crate::math::veno_congested_ai(&mut s, &cp) };
        (s.cwnd, s.cwnd_cnt, s.inc != 0)
    }

    #[test]
    fn backoff_is_four_fifths_below_beta_and_half_at_or_above() {
        let p = VenoParams::default();
        // w = 100, BaseRTT 100 ms, RTT 102 ms: N = 200/102 = 1.96 < 3 -> random loss
        let n = backlog(100.0, 102.0, 100.0);
        assert!((n - 200.0 / 102.0).abs() < 1e-12);
        assert!(!congested(n, &p));
        assert_eq!(ssthresh(100.0, congested(n, &p), &p), 80.0);
        // RTT 110 ms: N = 9.09 >= 3 -> congestive loss, Reno's half
        let n = backlog(100.0, 110.0, 100.0);
        assert!(congested(n, &p));
        assert_eq!(ssthresh(100.0, congested(n, &p), &p), 50.0);
        // N = β exactly is congested (N < β is the random-loss test)
        assert_eq!(backlog(20.0, 20.0, 17.0), 3.0);
        assert!(congested(backlog(20.0, 20.0, 17.0), &p));
        assert!(c_congested(20, 20, 17, &p, false));
        assert_eq!(ssthresh(2.0, false, &p), 2.0);
        assert_eq!(ssthresh(3.0, true, &p), 2.0);
        // the C
        assert_eq!(c_ssthresh(100, false, &p), 80);
        assert_eq!(c_ssthresh(100, true, &p), 50);
        assert!(!c_congested(100, 102_000, 100_000, &p, false));
        assert!(c_congested(100, 110_000, 100_000, &p, false));
    }

    #[test]
    fn congested_state_adds_a_segment_every_other_rtt() {
        assert_eq!(congested_rtts(1, true), (1, false));
        assert_eq!(congested_rtts(2, true), (1, true));
        assert_eq!(congested_rtts(4, false), (2, false));
        assert_eq!(congested_rtts(5, false), (2, true));
        // fluid: 2w acks of 1/(2w) add one segment; not congested, w acks do
        let w = 40.0;
        assert!((2.0 * w * ca_increment(w, true) - 1.0).abs() < 1e-12);
        assert!((w * ca_increment(w, false) - 1.0).abs() < 1e-12);
    }

    /// C, default: an RTT is w acked packets; +1 on the 1st, 3rd, ... RTT (toggle
    /// starting at "increase"), as `congested_rtts`.
    #[test]
    fn c_counts_every_other_rtt_as_the_model() {
        // one RTT at a time
        let (w, cnt, inc) = c_ai(10, 0, true, 10, false);
        assert_eq!((w, cnt, inc), (11, 0, false));
        let (w, cnt, inc) = c_ai(w, cnt, inc, 11, false);
        assert_eq!((w, cnt, inc), (11, 0, true));
        let (w, cnt, inc) = c_ai(w, cnt, inc, 11, false);
        assert_eq!((w, cnt, inc), (12, 0, false));
        // several RTTs and a remainder in one call: 5 RTTs of 20 + 7
        let (rtts, acked) = (5u32, 5 * 20 + 7);
        for inc in [false, true] {
            let (add, inc2) = congested_rtts(rtts, inc);
            assert_eq!(c_ai(20, 0, inc, acked, false), (20 + add, 7, inc2));
        }
        // one packet per ACK: w grows like the fluid model, w² ≈ w0² + acks (dw/da = 1/(2w))
        let (mut w, mut cnt, mut inc) = (50u32, 0u32, true);
        for a in 1..=30_000u32 {
            (w, cnt, inc) = c_ai(w, cnt, inc, 1, false);
            let fluid = (2500.0 + f64::from(a)).sqrt();
            assert!(
                (f64::from(w) - fluid).abs() <= 1.5,
                "ack {a}: C {w} fluid {fluid}"
            );
        }
    }

    /// linux_compat: Linux's count, the ACK of the call that completes an RTT not
    /// counted: w + 1 calls of one packet per RTT.
    #[test]
    fn c_linux_compat_counts_as_the_module() {
        let (mut w, mut cnt, mut inc) = (10u32, 0u32, true);
        let mut calls = 0;
        while w == 10 {
            (w, cnt, inc) = c_ai(w, cnt, inc, 1, true);
            calls += 1;
        }
        assert_eq!((calls, w, cnt, inc), (11, 11, 0, false));
    }

    fn grid() -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        for base in [1u32, 7, 100, 999, 10_000, 33_333, 100_000, 400_000] {
            for k in 0..=300u64 {
                v.push((base, (u64::from(base) * (100 + k) / 100) as u32));
            }
            // exact ties N = β for w = 20, 30: rtt = w·base/(w − 3)
            for w in [20u64, 30] {
                if u64::from(base) * w % (w - 3) == 0 {
                    v.push((base, (u64::from(base) * w / (w - 3)) as u32));
                }
            }
        }
        v.push((0x7fff_ffff, 0x7fff_ffff));
        v.sort_unstable();
        v.dedup();
        v
    }

    /*
     * The C's decisions are exact integer comparisons: equal to the model's at every
     * point (a non-tie N differs from an integer β by at least 1/rtt >= 2.5e-9 relative,
     * far above the f64 error; a tie is computed exactly). Linux's form likewise.
     * Traced N: rounded down to 1/1024, so 0 <= model − C < 1/1024.
     */
    #[test]
    fn c_decisions_equal_the_model_over_a_grid() {
        let mut n = [0usize; 2];
        for beta in [1.0, 3.0, 5.0, 100.0] {
            let p = VenoParams {
                beta,
                ..VenoParams::default()
            };
            for &(base, rtt) in &grid() {
                for cwnd in [2u32, 3, 5, 10, 20, 30, 37, 100, 1000, 65_535] {
                    let (wf, rf, bf) = (f64::from(cwnd), f64::from(rtt), f64::from(base));
                    let m = backlog(wf, rf, bf);
                    let d = m - c_backlog(cwnd, rtt, base);
                    assert!(
                        (-1e-9..1.0 / 1024.0 + 1e-9).contains(&d),
                        "N w {cwnd} rtt {rtt} base {base}: model {m} C {}",
                        m - d
                    );
                    let mc = congested(m, &p);
                    assert_eq!(
                        c_congested(cwnd, rtt, base, &p, false),
                        mc,
                        "w {cwnd} rtt {rtt} base {base} β {beta}"
                    );
                    assert_eq!(
                        c_congested(cwnd, rtt, base, &p, true),
                        linux_congested(wf, rf, bf, &p),
                        "linux w {cwnd} rtt {rtt} base {base} β {beta}"
                    );
                    n[usize::from(mc)] += 1;
                }
            }
        }
        assert!(n.iter().all(|&k| k > 1000), "{n:?}");
    }

    /// Linux's half-packet N: congested already at N > β − 1/2 (w = 20, BaseRTT
    /// 100 ms, RTT 115 ms: N = 2.61, Linux congested, the exact rule not).
    #[test]
    fn linux_half_packets_call_congestion_half_a_packet_early() {
        let p = VenoParams::default();
        let n = backlog(20.0, 115.0, 100.0);
        assert!(n > 2.5 && n < 3.0);
        assert!(!congested(n, &p));
        assert!(linux_congested(20.0, 115.0, 100.0, &p));
        assert!(!c_congested(20, 115_000, 100_000, &p, false));
        assert!(c_congested(20, 115_000, 100_000, &p, true));
        // no RTT sample since the last ACK: Linux's rtt 0x7fffffff looks congested
        assert!(c_congested(20, 0x7fff_ffff, 100_000, &p, true));
    }

    /// ssthresh: the C rounds w·pct/100 down (Linux's w·4/5), so 0 <= model − C < 1,
    /// and w/2 likewise; never below 2.
    #[test]
    fn c_ssthresh_is_the_model_rounded_down() {
        for pct in [50u32, 70, 80, 100] {
            let p = VenoParams {
                random_loss_factor: f64::from(pct) / 100.0,
                ..VenoParams::default()
            };
            for cwnd in (1..2000u32).chain([65_535, 1 << 20, u32::MAX]) {
                for cong in [false, true] {
                    let m = ssthresh(f64::from(cwnd), cong, &p);
                    let c = c_ssthresh(cwnd, cong, &p);
                    assert!(c >= 2);
                    let err = m - f64::from(c);
                    assert!(
                        (-1e-6..1.0).contains(&err) || (m < 2.0 && c == 2),
                        "w {cwnd} pct {pct} cong {cong}: model {m} C {c}"
                    );
                }
            }
            let cp = params(&p, false);
            // SAFETY: a pure function reading the params struct it is given.
            let (b0, b1) = unsafe {
                (
                    crate::math::veno_beta_fp(0, &cp),
                    crate::math::veno_beta_fp(1, &cp),
                )
            };
            assert_eq!(b0, pct * 1024 / 100);
            assert_eq!(b1, 512);
        }
    }
}
