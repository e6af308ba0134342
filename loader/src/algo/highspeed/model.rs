//! A plain f64 model of HighSpeed TCP's rules (spec §4, RFC 3649), the reference for
//! bpf/algo/highspeed_math.h (also used by TCP Africa's fast mode).

/// RFC 3649's response-function parameters in real units (spec §4 "Parameters"); the BPF
/// tunables hold them in segments, per 10⁹ and per mille.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HstcpParams {
    /// W_L (Low_Window), segments: Reno at and below it (\[P0\] Table II: 31; RFC 3649: 38).
    pub low_window: f64,
    /// W_H (High_Window), segments (RFC 3649, \[P0\]: 83 000).
    pub high_window: f64,
    /// P_H (High_P), loss probability at W_H (RFC 3649, \[P0\]: 1e-7).
    pub high_p: f64,
    /// b_H (High_Decrease), decrease fraction at W_H (RFC 3649: 0.1).
    pub high_decrease: f64,
}

impl Default for HstcpParams {
    /// \[P0\] Table II: W_L = 31, the rest RFC 3649's.
    fn default() -> Self {
        Self {
            low_window: 31.0,
            ..Self::rfc3649()
        }
    }
}

impl HstcpParams {
    /// RFC 3649's own values (W_L = 38), those of its Appendix B table and of Linux.
    pub fn rfc3649() -> Self {
        Self {
            low_window: 38.0,
            high_window: 83_000.0,
            high_p: 1e-7,
            high_decrease: 0.1,
        }
    }

    /// P_L = 1.5 / W_L², the loss rate at which Reno's window is W_L (spec §4).
    pub fn low_p(&self) -> f64 {
        1.5 / (self.low_window * self.low_window)
    }

    /// t(w) = ln(w/W_L) / ln(W_H/W_L) ∈ [0, 1], with w capped at W_H (beyond it a and b
    /// stay at their W_H values, as the last row of Linux's table does).
    fn t(&self, w: f64) -> f64 {
        let w = w.min(self.high_window);
        (w / self.low_window).ln() / (self.high_window / self.low_window).ln()
    }
}

/// b(w), the decrease fraction (spec §4, RFC 3649 §5):
/// `b(w) = (b_H − 0.5)·(ln w − ln W_L)/(ln W_H − ln W_L) + 0.5` for w > W_L, else 0.5.
pub fn b(w: f64, p: &HstcpParams) -> f64 {
    if w <= p.low_window {
        return 0.5;
    }
    (p.high_decrease - 0.5) * p.t(w) + 0.5
}

/// p(w), the loss rate at which HSTCP's average window is w (spec §4, RFC 3649 §5):
/// `exp(t·(ln P_H − ln P_L) + ln P_L)`, for w > W_L (Reno's 1.5/w² below).
pub fn loss_rate(w: f64, p: &HstcpParams) -> f64 {
    if w <= p.low_window {
        return 1.5 / (w * w);
    }
    (p.t(w) * (p.high_p.ln() - p.low_p().ln()) + p.low_p().ln()).exp()
}

/// a(w), the increase per RTT, segments (spec §4, RFC 3649 §5):
/// `a(w) = w²·p(w)·2·b(w)/(2 − b(w))` for w > W_L, else 1. Beyond W_H, the W_H value.
pub fn a(w: f64, p: &HstcpParams) -> f64 {
    if w <= p.low_window {
        return 1.0;
    }
    let wc = w.min(p.high_window);
    let bw = b(wc, p);
    wc * wc * loss_rate(wc, p) * 2.0 * bw / (2.0 - bw)
}

/// Table mode (spec §4 "Linux tcp_highspeed"): row `row` of RFC 3649 Appendix B gives
/// `a = row + 1` (segments per RTT) and `b = md/256`.
pub fn table_ab(row: u32, md: u32) -> (f64, f64) {
    (f64::from(row + 1), f64::from(md) / 256.0)
}

/// Congestion avoidance for one ACK of `acked` packets: `w += a(w)/w` per acked packet
/// (spec §4 "ACK"), segments.
pub fn on_ack(w: f64, acked: u32, p: &HstcpParams) -> f64 {
    (0..acked).fold(w, |w, _| w + a(w, p) / w)
}

/// ssthresh after a loss, segments: `max((1 − b)·w, 2)` (spec §4 "Loss").
pub fn ssthresh(w: f64, b: f64) -> f64 {
    ((1.0 - b) * w).max(2.0)
}

/// RFC 3649's approximate response function `w = 0.12 / p^0.835` (spec §4, §17).
pub fn response_window(loss_p: f64) -> f64 {
    0.12 / loss_p.powf(0.835)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::cctl_highspeed_ca;

    // The C under test is bpf/algo/highspeed_math.h, unchanged, compiled for the host by build.rs.

    const Q16: f64 = 65536.0;
    const ROWS: u32 = 72;

    pub(crate) fn c_table_index(cwnd: u32) -> u32 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::hstcp_table_index(cwnd) }
    }

    pub(crate) fn c_table_ab(idx: u32) -> (u32, u32) {
        let (mut a, mut b) = (0, 0);
        // SAFETY: `a` and `b` are live, exclusively borrowed u32s for the call.
        unsafe { crate::math::hstcp_table_ab(idx, &mut a, &mut b) };
        (a, b)
    }

    /// Row `idx` of the C table: (upper cwnd bound, md << 8).
    fn c_row(idx: u32) -> (u32, u32) {
        let mut md = 0;
        // SAFETY: `md` is a live, exclusively borrowed u32 for the call.
        let w = unsafe { crate::math::hstcp_table_row(idx, &mut md) };
        (w, md)
    }

    fn c_log2(x: u64) -> f64 {
        // SAFETY: a pure function of integers.
        f64::from(unsafe { crate::math::hstcp_log2_q16(x) }) / Q16
    }

    fn c_exp2(x_q16: i64) -> u32 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::hstcp_exp2_q16(x_q16) }
    }

    /// (a << 16, b << 16) from the C formulas with tunables in BPF units.
    pub(crate) fn c_formula(w: u32, lo: u32, hi: u32, p_ppb: u32, bh_pm: u32) -> (u32, u32) {
        let p = crate::math::highspeed_params {
            low_window: lo,
            high_window: hi,
            high_p_ppb: p_ppb,
            high_decrease_per_mille: bh_pm,
        };
        let (mut a, mut b) = (0, 0);
        // SAFETY: `p` is a live, initialised struct the function only reads; `a` and `b`
        // are live, exclusively borrowed u32s for the call.
        unsafe { crate::math::hstcp_formula_ab(w, &p, &mut a, &mut b) };
        (a, b)
    }

    pub(crate) fn c_ai_step(cwnd: &mut u32, cnt: &mut u32, n: u32, a_q16: u32, clamp: u32) {
        // SAFETY: `cwnd` and `cnt` are live, exclusively borrowed u32s for the call.
        unsafe { crate::math::hstcp_ai_step(cwnd, cnt, n, a_q16, clamp) }
    }

    pub(crate) fn c_ssthresh(cwnd: u32, b_q16: u32) -> u32 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::hstcp_ssthresh_segs(cwnd, b_q16) }
    }

    fn c_lss(cwnd: u32, max_ss: u32) -> u32 {
        // SAFETY: a pure function of integers.
        unsafe { crate::math::hstcp_limited_ss_a_q16(cwnd, max_ss) }
    }

    /// The tunables of `p` in BPF units: (W_L, W_H, P_H per 10⁹, b_H per mille).
    fn units(p: &HstcpParams) -> (u32, u32, u32, u32) {
        (
            p.low_window as u32,
            p.high_window as u32,
            (p.high_p * 1e9).round() as u32,
            (p.high_decrease * 1000.0).round() as u32,
        )
    }

    #[test]
    fn skeleton_type_has_the_c_size_and_fits_icsk_ca_priv() {
        // SAFETY: no arguments, returns a constant.
        let c = std::mem::size_of::<crate::math::cctl_highspeed_ca>() as u32;
        assert_eq!(std::mem::size_of::<cctl_highspeed_ca>() as u32, c);
        assert!(c <= 104);
    }

    /// Spec §4's reference values (W_L = 38, and W_L = 31 for \[P0\]), to the digits shown.
    #[test]
    fn formulas_give_the_spec_reference_values() {
        let rfc = HstcpParams::rfc3649();
        for (w, pw, bw, aw) in [
            (38.0, 1.04e-3, 0.50, 1.0),
            (100.0, 3.24e-4, 0.45, 1.9),
            (1000.0, 2.03e-5, 0.33, 8.0),
            (10_000.0, 1.27e-6, 0.21, 29.9),
            (83_000.0, 1.0e-7, 0.10, 72.5),
        ] {
            assert!((loss_rate(w, &rfc) / pw - 1.0).abs() < 0.01, "p({w})");
            assert!((b(w, &rfc) - bw).abs() < 0.005, "b({w}) = {}", b(w, &rfc));
            assert!((a(w, &rfc) - aw).abs() < 0.05, "a({w}) = {}", a(w, &rfc));
        }
        let p0 = HstcpParams::default();
        for (w, aw, bw) in [
            (100.0, 2.1, 0.44),
            (1000.0, 8.6, 0.32),
            (10_000.0, 30.8, 0.21),
        ] {
            assert!((a(w, &p0) - aw).abs() < 0.05, "a({w}) = {}", a(w, &p0));
            assert!((b(w, &p0) - bw).abs() < 0.005, "b({w}) = {}", b(w, &p0));
        }
        // Reno below W_L; a and b stop at W_H
        assert_eq!((a(20.0, &p0), b(20.0, &p0)), (1.0, 0.5));
        assert_eq!(a(200_000.0, &rfc), a(83_000.0, &rfc));
        // the response function: w·p^0.835 ≈ 0.12 in the HSTCP range (within 10 %)
        for w in [1000.0, 10_000.0, 83_000.0] {
            let pw = loss_rate(w, &rfc);
            assert!((response_window(pw) / w - 1.0).abs() < 0.1, "w {w}");
        }
    }

    /*
     * RFC 3649 Appendix B against the formulas (W_L 38): at each row's upper bound the
     * formula's b is within 0.007 of md/256 (md has 1/256 steps), and the row's integer
     * a = row + 1 is never above the formula and lags it by at most min(5 %, 1.75) (4.7 %
     * at row 1, 1.73 at row 69: the RFC's rows drift below the formula as w grows; rows past
     * W_H = 83000 are excluded).
     */
    #[test]
    fn rfc_table_rows_follow_the_formulas() {
        let rfc = HstcpParams::rfc3649();
        let mut prev = 0;
        for row in 0..ROWS {
            let (w, md) = c_row(row);
            assert!(w > prev, "rows increase");
            prev = w;
            let (ta, tb) = table_ab(row, md);
            assert!((b(f64::from(w), &rfc) - tb).abs() < 0.007, "row {row}");
            if w <= 83_000 {
                let fa = a(f64::from(w), &rfc);
                assert!(
                    fa >= ta - 1e-9 && fa - ta <= (0.05 * ta).min(1.75),
                    "row {row}: {fa} vs {ta}"
                );
            }
            // the C's table mode hands out the same numbers
            let (a_q16, b_q16) = c_table_ab(row);
            assert_eq!((f64::from(a_q16) / Q16, f64::from(b_q16) / Q16), (ta, tb));
        }
        assert_eq!(c_row(0), (38, 128));
        assert_eq!(c_row(ROWS - 1), (89_053, 24));
    }

    /// The lookup gives the nearest entry: rows[i−1] < w ≤ rows[i] (the last row beyond),
    /// the one row Linux's up/down search reaches from any previous row.
    #[test]
    fn table_index_is_the_nearest_entry() {
        let bounds: Vec<u32> = (0..ROWS).map(|r| c_row(r).0).collect();
        let want = |w: u32| bounds.iter().position(|&b| w <= b).unwrap_or(71) as u32;
        let mut ws: Vec<u32> = (0..=100_000).step_by(7).collect();
        ws.extend(bounds.iter().flat_map(|&b| [b - 1, b, b + 1]));
        ws.extend([u32::MAX, 1_000_000]);
        for &w in &ws {
            assert_eq!(c_table_index(w), want(w), "w {w}");
        }
    }

    /*
     * log2 (Q16) truncates the mantissa at each of its 16 squarings: the result is below
     * log2(x) by less than 2 units (2/65536), never above. exp2 (Q16 out) multiplies up to
     * 16 constants rounded to the nearest 2^-30 (so either way) and truncates: relative
     * error below 6e-8 plus one unit of the output.
     */
    #[test]
    fn log2_and_exp2_are_within_two_units() {
        let mut xs: Vec<u64> = (1..=200_000).collect();
        xs.extend((0..64).map(|s| 1u64 << s));
        xs.extend((0..64).map(|s| (1u64 << s).wrapping_mul(3) | 1));
        xs.push(u64::MAX);
        let mut max_l = 0f64;
        for &x in &xs {
            let err = (x as f64).log2() - c_log2(x);
            assert!((-1e-9..2.0 / Q16).contains(&err), "log2({x}): {err}");
            max_l = max_l.max(err);
        }
        let mut max_e = 0f64;
        for x in (-20 * 65536i64..=31 * 65536).step_by(97) {
            let m = (x as f64 / Q16).exp2() * Q16;
            let got = f64::from(c_exp2(x));
            if m >= 4_294_967_295.0 {
                assert_eq!(got, 4_294_967_295.0, "saturates at {x}");
                continue;
            }
            let err = m - got;
            assert!(err.abs() <= m * 6e-8 + 1.0, "exp2({x}): {got} vs {m}");
            if m >= Q16 {
                max_e = max_e.max(err.abs() / m);
            }
        }
        eprintln!(
            "log2 max error {:.2} units, exp2 max relative error {max_e:.2e} (for 2^x >= 1)",
            max_l * Q16
        );
    }

    /*
     * a(w), b(w) of the C formulas against the model over w = W_L−5 .. 3·W_H for four
     * parameter sets. b: t is a quotient of two log2 differences, each within 2/65536, so
     * |Δt| < 2·(2/65536)/log2(W_H/W_L) and |Δb| ≤ 0.4·|Δt| + 2 units: bound 3e-5.
     * a: its exponent 2 log2 w + log2 P_L + t·(log2 P_H − log2 P_L) is off by < 8 units
     * (2·2 + 2·2 from the logs, ~|log2 P_H/P_L|·|Δt| ≈ 1 from t), i.e. 8·ln2/65536 ≈ 1e-4
     * relative, exp2 adds 1e-7, and 2b/(2−b) carries Δb (≤ 3e-5/0.1 = 3e-4 relative at
     * b_H); plus the Q16 truncation. Bound: 5e-4 relative + 2 units.
     */
    #[test]
    fn formula_mode_matches_the_model_over_a_grid_of_windows() {
        let sets = [
            HstcpParams::default(),
            HstcpParams::rfc3649(),
            HstcpParams {
                low_window: 16.0,
                high_window: 10_000.0,
                high_p: 1e-6,
                high_decrease: 0.2,
            },
            HstcpParams {
                low_window: 100.0,
                high_window: 1_000_000.0,
                high_p: 1e-8,
                high_decrease: 0.05,
            },
        ];
        let (mut max_a, mut max_b, mut n) = (0f64, 0f64, 0usize);
        for p in &sets {
            let (lo, hi, pp, bh) = units(p);
            let mut ws: Vec<u32> = (lo.saturating_sub(5).max(1)..=lo + 3000).collect();
            ws.extend((0..400).map(|k| (f64::from(lo) * 1.03f64.powi(k)) as u32));
            ws.extend([hi - 1, hi, hi + 1, 3 * hi]);
            for &w in &ws {
                let (ca, cb) = c_formula(w, lo, hi, pp, bh);
                let (ma, mb) = (a(f64::from(w), p), b(f64::from(w), p));
                let (ga, gb) = (f64::from(ca) / Q16, f64::from(cb) / Q16);
                let ea = (ga - ma).abs();
                assert!(
                    ea <= 5e-4 * ma + 2.0 / Q16,
                    "a({w}) {p:?}: C {ga}, model {ma}"
                );
                assert!((gb - mb).abs() <= 3e-5, "b({w}) {p:?}: C {gb}, model {mb}");
                max_a = max_a.max(ea / ma);
                max_b = max_b.max((gb - mb).abs());
                n += 1;
            }
        }
        eprintln!(
            "formula mode: {n} windows, a max relative error {max_a:.2e}, b max error {max_b:.2e}"
        );
        assert!(n > 10_000);
    }

    /*
     * ssthresh = w − ⌊w·b⌋ (b << 16) = ⌈(1 − b)·w⌉: exactly the model rounded up to a whole
     * segment (floored at 2), and in table mode Linux's cwnd − ((cwnd·md) >> 8).
     */
    #[test]
    fn ssthresh_is_one_minus_b_times_cwnd_rounded_up() {
        let mut cwnds: Vec<u32> = (0..=3000).collect();
        cwnds.extend((0..30).map(|k| (1.6f64.powi(k) * 3001.0) as u32));
        for b_q16 in (0..=32768u32).step_by(37).chain([32768]) {
            for &w in &cwnds {
                let m = ssthresh(f64::from(w), f64::from(b_q16) / Q16);
                assert_eq!(
                    f64::from(c_ssthresh(w, b_q16)),
                    m.ceil().max(2.0),
                    "w {w} b {b_q16}"
                );
            }
        }
        for row in 0..ROWS {
            let md = c_row(row).1;
            let (_, b_q16) = c_table_ab(row);
            for w in (0..200_000u32).step_by(13) {
                let linux = (w - ((w * md) >> 8)).max(2);
                assert_eq!(c_ssthresh(w, b_q16), linux, "w {w} row {row}");
            }
        }
    }

    /// What Linux's tcp_highspeed does on one cong_avoid call in CA (written from its
    /// documented behaviour): move the row, then `cnt += row + 1`, one segment per cwnd.
    fn linux_ca(cwnd: &mut u32, cnt: &mut u32, row: &mut u32, bounds: &[u32]) {
        while *cwnd > bounds[*row as usize] && *row < ROWS - 1 {
            *row += 1;
        }
        while *row > 0 && *cwnd <= bounds[*row as usize - 1] {
            *row -= 1;
        }
        *cnt += *row + 1;
        if *cnt >= *cwnd {
            *cnt -= *cwnd;
            *cwnd += 1;
        }
    }

    /*
     * The `linux` profile (table, event counting, b from the last CA row) against
     * tcp_highspeed: the C's counter is Linux's × 1024, and cwnd, row and ssthresh agree
     * exactly over 300 000 ACK events with losses, including losses right after "slow
     * start" (a jump in cwnd without CA updates), where both use the stale row.
     */
    #[test]
    fn linux_profile_is_bit_exact_with_tcp_highspeed() {
        let bounds: Vec<u32> = (0..ROWS).map(|r| c_row(r).0).collect();
        let (mut c, mut c_cnt) = (40u32, 0u32);
        let (mut l, mut l_cnt, mut l_row) = (40u32, 0u32, 0u32);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let (mut losses, mut max_row) = (0, 0);
        for i in 0..300_000 {
            let c_row_ = c_table_index(c);
            let (a_q16, _) = c_table_ab(c_row_);
            c_ai_step(&mut c, &mut c_cnt, 1, a_q16, u32::MAX);
            linux_ca(&mut l, &mut l_cnt, &mut l_row, &bounds);
            assert_eq!((c, c_cnt, c_row_), (l, l_cnt * 1024, l_row), "event {i}");
            max_row = max_row.max(l_row);
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(4000) {
                let (_, b_q16) = c_table_ab(c_row_);
                c = c_ssthresh(c, b_q16);
                let md = c_row(l_row).1;
                l = (l - ((l * md) >> 8)).max(2);
                assert_eq!(c, l);
                (c_cnt, l_cnt) = (0, 0);
                losses += 1;
                if x.is_multiple_of(3) {
                    // a slow-start-like jump: cwnd doubles with no CA update of the row
                    (c, l) = (2 * c, 2 * l);
                }
            }
        }
        eprintln!("linux profile: {losses} losses, rows up to {max_row}");
        assert!(losses > 30 && max_row > 3);
    }

    /*
     * Congestion avoidance in formula mode against the model: the C's window
     * cwnd + cnt/(1024·cwnd) after each ACK vs the model's w += a(w)/w per packet. The C
     * evaluates a at the integer cwnd (a grows slowly, < 1 % per segment above W_L),
     * truncates a to 1/1024 and counts whole segments against the integer cwnd (the
     * Reno-counter effect, < 1 segment, see the Scalable tests). Bound: 1.5 segments
     * + 0.1 % of w, from w = 40 to w ≈ 20 000.
     */
    #[test]
    fn congestion_avoidance_follows_the_model() {
        let p = HstcpParams::default();
        let (lo, hi, pp, bh) = units(&p);
        let (mut cwnd, mut cnt) = (40u32, 0u32);
        let mut w = 40.0;
        let mut max_err = 0f64;
        let mut k = 0u32;
        while cwnd < 20_000 {
            k += 1;
            let acked = 1 + k % 3;
            let (a_q16, _) = c_formula(cwnd, lo, hi, pp, bh);
            c_ai_step(&mut cwnd, &mut cnt, acked, a_q16, u32::MAX);
            w = on_ack(w, acked, &p);
            let c_real = f64::from(cwnd) + f64::from(cnt) / (1024.0 * f64::from(cwnd));
            let err = (c_real - w).abs();
            assert!(err <= 1.5 + 1e-3 * w, "ACK {k}: C {c_real}, model {w}");
            max_err = max_err.max(err);
        }
        eprintln!("formula CA: {k} ACKs to w = {w:.0}, max error {max_err:.3} segments");
    }

    /// RFC 3742: above max_ssthresh, w += 1/K per packet with K = ⌊w/(max_ssthresh/2)⌋,
    /// i.e. about max_ssthresh/2 per RTT. The model steps the same rule in f64 (K from the
    /// integer part of w); the C's counter keeps whole segments: within 2 segments.
    #[test]
    fn limited_slow_start_adds_half_max_ssthresh_per_rtt() {
        for (w0, max_ss) in [(1000u32, 100u32), (5000, 100), (400, 300), (150, 100)] {
            let (mut cwnd, mut cnt) = (w0, 0u32);
            let mut w = f64::from(w0);
            for _ in 0..w0 {
                let a_q16 = c_lss(cwnd, max_ss);
                c_ai_step(&mut cwnd, &mut cnt, 1, a_q16, u32::MAX);
                let k = (w.floor() / f64::from(max_ss / 2)).floor().max(1.0);
                w += 1.0 / k;
            }
            assert!(
                (f64::from(cwnd) - w).abs() <= 2.0,
                "{w0}/{max_ss}: {cwnd} vs {w}"
            );
            // about max_ssthresh/2 per RTT (w0 packets ≈ one RTT)
            let per_rtt = w - f64::from(w0);
            assert!(per_rtt <= f64::from(max_ss) / 2.0 + 1.0 && per_rtt > f64::from(max_ss) / 4.0);
        }
    }

    #[test]
    fn growth_stops_at_the_clamp() {
        let (mut cwnd, mut cnt) = (1000u32, 0u32);
        for _ in 0..100_000 {
            c_ai_step(&mut cwnd, &mut cnt, 4, 70 << 16, 1200);
        }
        assert_eq!(cwnd, 1200);
    }

    /// `highspeed@p0` ([P0]'s altAIMD): RFC 3649's rows with the nearest-entry lookup, a(w)
    /// counted per acked packet (ABC). Under delayed ACKs (2 packets per ACK) one window
    /// of ACKs adds a(row) = row + 1 segments, twice what the `linux` profile's per-event
    /// counting adds from the same row; the decrease is b(w) of the cwnd at the loss.
    #[test]
    fn p0_profile_adds_the_rows_a_per_window_of_acked_packets() {
        let a = crate::catalogue::find("highspeed").unwrap();
        let v = a.resolve_params_with(Some("p0"), &[]).unwrap();
        assert_eq!((v["hstcp_mode"], v["ack_counting"], v["linux_md_index"]), (0, 0, 0));
        let bounds: Vec<u32> = (0..ROWS).map(|r| c_row(r).0).collect();
        for w0 in [100u32, 1_000, 5_000, 20_000] {
            let row = c_table_index(w0);
            assert!(row > 0 && bounds[row as usize - 1] < w0 && w0 <= bounds[row as usize]);
            let (a_q16, b_q16) = c_table_ab(row);
            let per_window = |per_ack: u32| {
                let (mut w, mut cnt) = (w0, 0u32);
                for _ in 0..w0 / 2 {
                    c_ai_step(&mut w, &mut cnt, per_ack, a_q16, u32::MAX);
                }
                w - w0
            };
            let (abc, events) = (per_window(2), per_window(1));
            assert!(abc.abs_diff(row + 1) <= 1, "w {w0} row {row}: +{abc}");
            assert!(abc.abs_diff(2 * events) <= 2, "w {w0}: ABC +{abc}, events +{events}");
            let md = c_row(row).1;
            assert_eq!(c_ssthresh(w0, b_q16), (w0 - ((w0 * md) >> 8)).max(2), "w {w0}");
        }
    }
}
