//! BPF port against its Linux module: the per-flow figures issue 4 compares on identical
//! netem scenarios (`native-comparison`, file `v1_native_comparison.toml`), and the table
//! that puts them side by side.
//!
//! Per flow and run: mean throughput (bytes received over the flow's life), the number of
//! backoffs (`FlowSeries::kernel_backoffs`: entries into CWR/Recovery/Loss, and reductions
//! renewed inside them (a new `tp->prior_cwnd`), seen by the collector — counted the same
//! way for both kinds of flow; a port's own reduction counter would also count reductions
//! that begin and end between two samples, which a module's flow cannot show), cwnd just
//! before each backoff (`tp->prior_cwnd`) and the ssthresh it
//! set, so the backoff factor is `ssthresh / cwnd_before` (β, spec §0.2), and the mean and
//! coefficient of variation (std/mean) of cwnd from the first backoff on (slow start left out).
//! Runs of one case and variant are pooled: flows' values are averaged, factors pooled.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::record::{Metadata, RunRecord};
use cctl_metrics::{coefficient_of_variation, FlowSeries};

/// Figures of one flow of one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FlowFigures {
    /// Mean goodput over the flow's life, bit/s.
    pub throughput_bps: f64,
    /// Backoffs (window reductions).
    pub backoffs: usize,
    /// `ssthresh / cwnd_before` of each backoff whose both values are known.
    pub factors: Vec<f64>,
    /// cwnd just before each backoff, segments.
    pub cwnd_before: Vec<f64>,
    /// ssthresh set by each backoff, segments.
    pub cwnd_after: Vec<f64>,
    /// Mean cwnd from the first backoff on, segments.
    pub mean_cwnd: f64,
    /// Coefficient of variation of cwnd from the first backoff on.
    pub cv_cwnd: f64,
}

/// Computes one flow's figures; `None` for a flow without samples.
pub fn flow_figures(f: &FlowSeries) -> Option<FlowFigures> {
    let secs = f.stop_s - f.start_s;
    // The kernel's signals, counted alike for port and module (results written before
    // they were recorded fall back to `backoffs`).
    let backoffs = if f.kernel_backoffs.is_empty() {
        &f.backoffs
    } else {
        &f.kernel_backoffs
    };
    let first_backoff = backoffs.first().map_or(f64::NEG_INFINITY, |b| b.t_s);
    let cwnd: Vec<f64> = f
        .points
        .iter()
        .filter(|p| p.t_s >= first_backoff)
        .map(|p| f64::from(p.cwnd))
        .collect();
    if cwnd.is_empty() {
        return None;
    }
    let mut factors = Vec::new();
    let mut before = Vec::new();
    let mut after = Vec::new();
    for b in backoffs {
        if let Some(a) = b.cwnd_after.filter(|_| b.cwnd_before > 0) {
            factors.push(f64::from(a) / f64::from(b.cwnd_before));
            before.push(f64::from(b.cwnd_before));
            after.push(f64::from(a));
        }
    }
    Some(FlowFigures {
        throughput_bps: if secs > 0.0 {
            f.bytes_received as f64 * 8.0 / secs
        } else {
            0.0
        },
        backoffs: backoffs.len(),
        factors,
        cwnd_before: before,
        cwnd_after: after,
        mean_cwnd: mean(&cwnd),
        cv_cwnd: coefficient_of_variation(&cwnd).unwrap_or(0.0),
    })
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Pooled figures of one variant (algorithm as requested) in one case (scenario point).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CaseFigures {
    /// Scenario point label (`buffer_bdp=0.2,loss=0,n=1`).
    pub case: String,
    /// Algorithm as requested (`cubic`, `cubic@linux`, `native:cubic`).
    pub algo: String,
    /// netem random loss probability of the case.
    pub loss: f64,
    /// Runs pooled.
    pub runs: usize,
    /// Mean per-flow throughput, Mbit/s.
    pub throughput_mbit: f64,
    /// Spread of the per-run means of the per-flow throughput: (max − min) / mean; 0 for one run.
    pub throughput_spread: f64,
    /// Mean backoffs per flow.
    pub backoffs: f64,
    /// Mean backoff factor ssthresh / cwnd_before over every backoff.
    pub factor: f64,
    /// Mean cwnd just before a backoff, segments.
    pub cwnd_before: f64,
    /// Mean ssthresh after a backoff, segments.
    pub cwnd_after: f64,
    /// Mean of the flows' mean cwnd, segments.
    pub mean_cwnd: f64,
    /// Mean of the flows' cwnd coefficient of variation.
    pub cv_cwnd: f64,
}

/// Pools `records` by (point, algorithm).
pub fn case_figures(records: &[RunRecord]) -> Vec<CaseFigures> {
    let mut groups: BTreeMap<(usize, String), Vec<&RunRecord>> = BTreeMap::new();
    for r in records {
        groups.entry((r.point, r.algo.clone())).or_default().push(r);
    }
    let mut out = Vec::new();
    for ((_, algo), runs) in groups {
        let mut flows = Vec::new();
        let mut run_means = Vec::new();
        for r in &runs {
            let figs: Vec<FlowFigures> = r.series.iter().filter_map(flow_figures).collect();
            if !figs.is_empty() {
                run_means.push(mean(
                    &figs.iter().map(|f| f.throughput_bps).collect::<Vec<_>>(),
                ));
            }
            flows.extend(figs);
        }
        if flows.is_empty() {
            continue;
        }
        let pooled = |g: fn(&FlowFigures) -> &Vec<f64>| {
            mean(
                &flows
                    .iter()
                    .flat_map(|f| g(f).iter().copied())
                    .collect::<Vec<_>>(),
            )
        };
        let per_flow = |g: fn(&FlowFigures) -> f64| mean(&flows.iter().map(g).collect::<Vec<_>>());
        let m = mean(&run_means);
        let spread = if run_means.len() > 1 && m > 0.0 {
            let lo = run_means.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = run_means.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (hi - lo) / m
        } else {
            0.0
        };
        out.push(CaseFigures {
            case: runs[0].spec.label(),
            loss: runs[0].spec.loss,
            algo,
            runs: runs.len(),
            throughput_mbit: per_flow(|f| f.throughput_bps) / 1e6,
            throughput_spread: spread,
            backoffs: per_flow(|f| f.backoffs as f64),
            factor: pooled(|f| &f.factors),
            cwnd_before: pooled(|f| &f.cwnd_before),
            cwnd_after: pooled(|f| &f.cwnd_after),
            mean_cwnd: per_flow(|f| f.mean_cwnd),
            cv_cwnd: per_flow(|f| f.cv_cwnd),
        });
    }
    out
}

/// How far a port may be from its native module and still count as matching it, for one
/// kind of case: relative bounds for throughput, backoffs per flow (plus an absolute
/// slack) and mean cwnd, absolute ones for the backoff factor and the cwnd CV.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Bounds {
    /// |port − native| / native for the mean per-flow throughput.
    pub throughput_rel: f64,
    /// |port − native| / native for backoffs per flow (plus `backoffs_abs`).
    pub backoffs_rel: f64,
    /// Absolute slack on backoffs per flow, for cases with few backoffs.
    pub backoffs_abs: f64,
    /// |port − native| for the mean backoff factor.
    pub factor_abs: f64,
    /// |port − native| / native for the mean cwnd.
    pub mean_cwnd_rel: f64,
    /// |port − native| for the cwnd coefficient of variation.
    pub cv_abs: f64,
}

/// The bounds for drop-tail cases and for cases with random loss, derived from the
/// modules' own run-to-run spread (see `default`). Short runs under emulation are noisy,
/// so these catch gross differences (a wrong β, a missing mode, half the throughput);
/// the table itself shows the measured numbers for a closer look.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Tolerances {
    /// Cases without random loss.
    pub drop_tail: Bounds,
    /// Cases with forward-path loss, random or periodic (the shipped scenario's is
    /// periodic since the random case proved too noisy for one run; these bounds still
    /// cover random loss).
    pub random_loss: Bounds,
}

impl Default for Tolerances {
    /// Measured: two runs of each of the nine modules (htcp, scalable, highspeed, bic,
    /// cubic, vegas, yeah, illinois, westwood) in each case of `native-comparison` (ci
    /// profile, 20-s runs, 6.12 guest under TCG). Each bound is the larger of 3 × the
    /// root-mean-square difference between the two runs and the largest difference seen,
    /// over the 27 drop-tail and the 9 random-loss pairs, rounded up to 0.05. Drop-tail
    /// RMS (max): throughput 12 % (47 %, Scalable at 20 % BDP), backoffs 25 % (100 %),
    /// factor 0.042 (0.188, YeAH), mean cwnd 12 % (42 %), CV 0.042 (0.086); random loss:
    /// 14 % (32 %), 19 % (36 %), 0.011 (0.029), 26 % (56 %), 0.126 (0.244). A third run
    /// of Illinois with random loss (in the test) widened the loss bounds on backoffs and
    /// the factor: its delay-driven β and loss count varied over 10, 14 and 22 backoffs
    /// and β 0.709, 0.770 and 0.799, hence 120 % + 2 and ±0.10. The throughput bound under
    /// loss stays 45 %: when bic's port ran +49 % above its module with periodic loss, the
    /// cause was the port (a fractional δ where Linux's is whole segments, now the
    /// `whole_delta` tunable of the `linux` profile), not noise.
    fn default() -> Self {
        Tolerances {
            drop_tail: Bounds {
                throughput_rel: 0.50,
                backoffs_rel: 1.0,
                backoffs_abs: 2.0,
                factor_abs: 0.20,
                mean_cwnd_rel: 0.45,
                cv_abs: 0.15,
            },
            random_loss: Bounds {
                throughput_rel: 0.45,
                backoffs_rel: 1.2,
                backoffs_abs: 2.0,
                factor_abs: 0.10,
                mean_cwnd_rel: 0.80,
                cv_abs: 0.40,
            },
        }
    }
}

impl Tolerances {
    /// The bounds for a case with random loss probability `loss`.
    pub fn for_loss(&self, loss: f64) -> &Bounds {
        if loss > 0.0 {
            &self.random_loss
        } else {
            &self.drop_tail
        }
    }
}

/// The differences of `port` from `native` that exceed `tol`, one line each (empty: matches).
pub fn violations(port: &CaseFigures, native: &CaseFigures, tol: &Tolerances) -> Vec<String> {
    let tol = tol.for_loss(native.loss);
    let mut v = Vec::new();
    let rel = |a: f64, b: f64| (a - b).abs() / b.abs().max(1e-9);
    let mut check = |what: &str, ok: bool, a: f64, b: f64, bound: String| {
        if !ok {
            v.push(format!(
                "{} vs {} [{}]: {what} {a:.3} vs {b:.3} (allowed {bound})",
                port.algo, native.algo, port.case
            ));
        }
    };
    let (a, b) = (port.throughput_mbit, native.throughput_mbit);
    check(
        "throughput Mbit/s",
        rel(a, b) <= tol.throughput_rel,
        a,
        b,
        format!("±{:.0} %", tol.throughput_rel * 100.0),
    );
    let (a, b) = (port.backoffs, native.backoffs);
    check(
        "backoffs per flow",
        (a - b).abs() <= tol.backoffs_rel * b + tol.backoffs_abs,
        a,
        b,
        format!(
            "±({:.0} % + {})",
            tol.backoffs_rel * 100.0,
            tol.backoffs_abs
        ),
    );
    let (a, b) = (port.factor, native.factor);
    if a.is_finite() && b.is_finite() {
        check(
            "backoff factor",
            (a - b).abs() <= tol.factor_abs,
            a,
            b,
            format!("±{}", tol.factor_abs),
        );
    } else if a.is_finite() != b.is_finite() {
        // One side never backed off. That is within the noise when the other side backed
        // off no more often than the backoff count's absolute slack (e.g. whether a delay-
        // based slow start overshoots once or not at all); beyond it, the side without a
        // backoff is missing the algorithm's response to loss.
        let other = if a.is_finite() {
            port.backoffs
        } else {
            native.backoffs
        };
        check(
            "backoff factor known",
            other <= tol.backoffs_abs,
            a,
            b,
            format!(
                "on one side only if the other backed off at most {} times per flow",
                tol.backoffs_abs
            ),
        );
    }
    let (a, b) = (port.mean_cwnd, native.mean_cwnd);
    check(
        "mean cwnd",
        rel(a, b) <= tol.mean_cwnd_rel,
        a,
        b,
        format!("±{:.0} %", tol.mean_cwnd_rel * 100.0),
    );
    let (a, b) = (port.cv_cwnd, native.cv_cwnd);
    check(
        "cwnd CV",
        (a - b).abs() <= tol.cv_abs,
        a,
        b,
        format!("±{}", tol.cv_abs),
    );
    v
}

/// How a results directory's reader finds the native counterpart of a requested algorithm
/// (`cubic`, `cubic@linux` → `cubic`; `None` for natives and ports without a Linux module).
/// The algorithm catalogue knows it; the runner passes `cctl_bench::resolve::native_of`.
pub type NativeOf = fn(&str) -> Option<&'static str>;

/// The kernel name of a requested native (`native:cubic` → `cubic`), `None` for cctl's.
pub fn native_name(requested: &str, meta: &Metadata) -> Option<String> {
    if let Some(n) = requested.strip_prefix("native:") {
        return Some(n.to_string());
    }
    meta.algorithms
        .iter()
        .find(|a| a.requested == requested && a.kind == "native")
        .map(|a| a.cc_name.clone())
}

/// Pairs every port with the native run of the same case, as (port, native).
pub fn pairs<'a>(
    figs: &'a [CaseFigures],
    meta: &Metadata,
    native_of: NativeOf,
) -> Vec<(&'a CaseFigures, &'a CaseFigures)> {
    let mut out = Vec::new();
    for port in figs {
        let Some(want) = native_of(&port.algo) else {
            continue;
        };
        if let Some(native) = figs
            .iter()
            .find(|n| n.case == port.case && native_name(&n.algo, meta).as_deref() == Some(want))
        {
            out.push((port, native));
        }
    }
    out
}

/// Markdown table of every variant in every case, each port followed by its difference
/// from the native module in the same case; empty when the results hold no pair.
pub fn markdown(
    figs: &[CaseFigures],
    meta: &Metadata,
    tol: &Tolerances,
    native_of: NativeOf,
) -> String {
    let pairs = pairs(figs, meta, native_of);
    if pairs.is_empty() {
        return String::new();
    }
    let mut s = String::new();
    let _ = writeln!(s, "## BPF port vs native module\n");
    let bounds = |b: &Bounds| {
        format!(
            "throughput ±{:.0} %, backoffs ±({:.0} % + {}), β ±{}, mean cwnd ±{:.0} %, CV ±{}",
            b.throughput_rel * 100.0,
            b.backoffs_rel * 100.0,
            b.backoffs_abs,
            b.factor_abs,
            b.mean_cwnd_rel * 100.0,
            b.cv_abs
        )
    };
    let _ = writeln!(
        s,
        "Per flow: mean throughput, backoffs, backoff factor ssthresh/cwnd_before (β), cwnd \
         before/after a backoff, mean and CV of cwnd after slow start. Pooled over {} run(s) \
         per case. A port row's last column lists what is outside the tolerances (drop-tail \
         cases: {}; random loss: {}).\n",
        figs.iter().map(|f| f.runs).max().unwrap_or(0),
        bounds(&tol.drop_tail),
        bounds(&tol.random_loss)
    );
    let _ = writeln!(
        s,
        "| case | variant | Mbit/s | spread | backoffs | β | cwnd before | after | mean cwnd | CV | vs native |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    let mut cases: Vec<&str> = figs.iter().map(|f| f.case.as_str()).collect();
    cases.dedup();
    let mut seen = std::collections::BTreeSet::new();
    for case in cases {
        if !seen.insert(case) {
            continue;
        }
        let mut rows: Vec<&CaseFigures> = figs.iter().filter(|f| f.case == case).collect();
        rows.sort_by_key(|f| (f.algo.starts_with("native:"), f.algo.clone()));
        for f in rows {
            let verdict = match pairs.iter().find(|(p, _)| std::ptr::eq(*p, f)) {
                Some((p, n)) => {
                    let v = violations(p, n, tol);
                    if v.is_empty() {
                        "within".to_string()
                    } else {
                        v.iter()
                            .map(|l| l.split("]: ").nth(1).unwrap_or(l).to_string())
                            .collect::<Vec<_>>()
                            .join("; ")
                    }
                }
                None => String::new(),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {:.2} | {:.0} % | {:.1} | {:.3} | {:.1} | {:.1} | {:.1} | {:.3} | {} |",
                f.case,
                f.algo,
                f.throughput_mbit,
                f.throughput_spread * 100.0,
                f.backoffs,
                f.factor,
                f.cwnd_before,
                f.cwnd_after,
                f.mean_cwnd,
                f.cv_cwnd,
                verdict
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use cctl_metrics::{BackoffEvent, FlowPoint};

    fn series(cwnds: &[u32], backoffs: &[(f64, u32, u32)], bytes: u64) -> FlowSeries {
        FlowSeries {
            id: 1,
            cc: "x".into(),
            base_rtt_s: 0.04,
            start_s: 0.0,
            stop_s: 10.0,
            points: cwnds
                .iter()
                .enumerate()
                .map(|(i, &c)| FlowPoint {
                    t_s: i as f64,
                    cwnd: c,
                    ..Default::default()
                })
                .collect(),
            backoffs: backoffs
                .iter()
                .map(|&(t, b, a)| BackoffEvent {
                    t_s: t,
                    cwnd_before: b,
                    cwnd_after: Some(a),
                })
                .collect(),
            bytes_received: bytes,
            ..Default::default()
        }
    }

    #[test]
    fn figures_leave_slow_start_out_and_take_beta_from_ssthresh() {
        // slow start 2, 4, 8; backoff at t=3 from 10 to 7; then 7, 8, 9, 10.
        let f = series(
            &[2, 4, 8, 7, 8, 9, 10],
            &[(3.0, 10, 7), (6.5, 10, 5)],
            12_500_000,
        );
        let g = flow_figures(&f).unwrap();
        assert_eq!(g.backoffs, 2);
        assert_eq!(g.factors, vec![0.7, 0.5]);
        // The kernel's signals win over a port's own counter when recorded.
        let mut k = f.clone();
        k.kernel_backoffs = vec![BackoffEvent {
            t_s: 3.0,
            cwnd_before: 10,
            cwnd_after: Some(8),
        }];
        let kg = flow_figures(&k).unwrap();
        assert_eq!((kg.backoffs, kg.factors.clone()), (1, vec![0.8]));
        assert!((g.mean_cwnd - 8.5).abs() < 1e-12);
        let sd = (((7.0f64 - 8.5).powi(2) + 0.25 + 0.25 + 1.5f64.powi(2)) / 4.0).sqrt();
        assert!((g.cv_cwnd - sd / 8.5).abs() < 1e-12);
        assert!((g.throughput_bps - 10e6).abs() < 1e-6);
    }

    fn case(algo: &str, tput: f64, backoffs: f64, factor: f64) -> CaseFigures {
        CaseFigures {
            case: "n=1".into(),
            loss: 0.0,
            algo: algo.into(),
            runs: 1,
            throughput_mbit: tput,
            throughput_spread: 0.0,
            backoffs,
            factor,
            cwnd_before: 100.0,
            cwnd_after: 100.0 * factor,
            mean_cwnd: 80.0,
            cv_cwnd: 0.2,
        }
    }

    #[test]
    fn violations_name_the_figure_and_the_bound() {
        let tol = Tolerances::default();
        let n = case("native:cubic", 10.0, 10.0, 0.7);
        assert!(violations(&case("cubic@linux", 9.0, 12.0, 0.72), &n, &tol).is_empty());
        let v = violations(&case("cubic", 4.0, 30.0, 0.95), &n, &tol);
        assert_eq!(v.len(), 3, "{v:?}");
        assert!(
            v[0].contains("throughput") && v[0].contains("±50 %"),
            "{v:?}"
        );
        assert!(v[1].contains("backoffs"), "{v:?}");
        assert!(v[2].contains("backoff factor 0.950 vs 0.700"), "{v:?}");
        // Random loss: the factor is held to ±0.1.
        let mut n = n;
        n.loss = 0.001;
        let mut p = case("cubic", 10.0, 10.0, 0.85);
        p.loss = 0.001;
        let v = violations(&p, &n, &tol);
        assert!(v.len() == 1 && v[0].contains("±0.1"), "{v:?}");
    }

    #[test]
    fn a_side_without_backoffs_passes_only_against_a_few() {
        let tol = Tolerances::default();
        // Vegas at 100 % BDP: its slow start overshot twice in the module's run and not at
        // all in the port's (a CI run).
        let n = case("native:vegas", 18.4, 2.0, 0.499);
        let p = case("vegas@linux", 18.5, 0.0, f64::NAN);
        assert!(violations(&p, &n, &tol).is_empty());
        assert!(violations(&n, &p, &tol).is_empty());
        // A port that never backs off where the module did five times.
        let n = case("native:vegas", 18.4, 5.0, 0.499);
        let v = violations(&p, &n, &tol);
        assert!(
            v.len() == 1 && v[0].contains("backoff factor known") && v[0].contains("at most 2"),
            "{v:?}"
        );
    }
}
