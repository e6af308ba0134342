//! The Pantheon-style throughput vs queueing-delay scatter (`delay_throughput` plot; Yan et
//! al., "Pantheon: the training ground for Internet congestion control research", USENIX
//! ATC 2018, Fig. 2): one point per flow per run, x its mean queueing delay (M13: srtt − min
//! RTT, in ms), y its throughput (M1 over its whole life, in Mbit/s), one colour per
//! algorithm, with each algorithm's mean and 1-σ ellipse from the covariance of its points.
//! Pantheon draws the delay axis reversed ("better" is up and to the right); so does this.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::record::RunRecord;
use cctl_metrics::{self as metrics, MetricParams};

/// One flow of one run: its algorithm, mean queueing delay (ms) and throughput (Mbit/s).
#[derive(Debug, Clone, PartialEq)]
pub struct FlowDot {
    /// The flow's algorithm: the requested name under test, or the named flow's algorithm.
    pub algo: String,
    /// Mean queueing delay of the flow (M13), in ms.
    pub delay_ms: f64,
    /// Throughput of the flow over its life (M1), in Mbit/s.
    pub mbit: f64,
}

/// The dots of every flow of every run that has both numbers.
pub fn flow_dots(records: &[RunRecord], p: &MetricParams) -> Vec<FlowDot> {
    let mut out = Vec::new();
    for r in records {
        let end = r.spec.duration_s;
        for f in &r.series {
            let algo = r.flow_algo(f).to_string();
            let tp = metrics::flow_throughput(f, end, &p.steady_state).whole_run_bps;
            let q = metrics::queueing_delay(f, 0.0, end);
            if let (Some(tp), Some(q)) = (tp, q) {
                out.push(FlowDot {
                    algo,
                    delay_ms: q.mean_s * 1e3,
                    mbit: tp / 1e6,
                });
            }
        }
    }
    out
}

/// The mean and 1-σ ellipse of a cloud of points.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ellipse {
    /// Mean, `(x, y)`.
    pub centre: (f64, f64),
    /// Semi-axis along the major direction: √ of the covariance's larger eigenvalue.
    pub major: f64,
    /// Semi-axis across it: √ of the smaller eigenvalue.
    pub minor: f64,
    /// Angle of the major axis from the x axis, in radians, in (−π/2, π/2].
    pub angle: f64,
}

/// Mean and 1-σ ellipse of `points` from their sample covariance (n − 1); `None` for fewer
/// than two points. The ellipse is the set `μ + R(angle)·(major·cos φ, minor·sin φ)`.
pub fn ellipse(points: &[(f64, f64)]) -> Option<Ellipse> {
    let n = points.len();
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let my = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let (mut sxx, mut syy, mut sxy) = (0.0, 0.0, 0.0);
    for &(x, y) in points {
        sxx += (x - mx) * (x - mx);
        syy += (y - my) * (y - my);
        sxy += (x - mx) * (y - my);
    }
    let d = nf - 1.0;
    let (sxx, syy, sxy) = (sxx / d, syy / d, sxy / d);
    let half = (sxx + syy) / 2.0;
    let r = (((sxx - syy) / 2.0).powi(2) + sxy * sxy).sqrt();
    let angle = 0.5 * (2.0 * sxy).atan2(sxx - syy);
    Some(Ellipse {
        centre: (mx, my),
        major: (half + r).max(0.0).sqrt(),
        minor: (half - r).max(0.0).sqrt(),
        angle,
    })
}

impl Ellipse {
    /// `k` points around the ellipse (closed: the first is repeated at the end).
    pub fn outline(&self, k: usize) -> Vec<(f64, f64)> {
        let (c, s) = (self.angle.cos(), self.angle.sin());
        (0..=k)
            .map(|i| {
                let phi = 2.0 * std::f64::consts::PI * i as f64 / k as f64;
                let (u, v) = (self.major * phi.cos(), self.minor * phi.sin());
                (self.centre.0 + c * u - s * v, self.centre.1 + s * u + c * v)
            })
            .collect()
    }
}

const COLOURS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Renders the scatter of `dots` to `<stem>.png` and `<stem>.svg`; returns the PNG's path.
pub fn render(dots: &[FlowDot], title: &str, notes: &[String], stem: &Path) -> Result<PathBuf> {
    let mut by_algo: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for d in dots {
        by_algo
            .entry(&d.algo)
            .or_default()
            .push((d.delay_ms, d.mbit));
    }
    let groups: Vec<Group<'_>> = by_algo
        .into_iter()
        .map(|(a, pts)| {
            let e = ellipse(&pts);
            (a, pts, e)
        })
        .collect();
    let mut xs: Vec<f64> = dots.iter().map(|d| d.delay_ms).collect();
    let mut ys: Vec<f64> = dots.iter().map(|d| d.mbit).collect();
    for (_, _, e) in &groups {
        if let Some(e) = e {
            for (x, y) in e.outline(64) {
                xs.push(x);
                ys.push(y);
            }
        }
    }
    let max = |v: &[f64]| v.iter().copied().fold(0.0_f64, f64::max);
    let min = |v: &[f64]| v.iter().copied().fold(0.0_f64, f64::min);
    // From 0 (or below, where an ellipse reaches) to 10 % above the largest value.
    let x = (min(&xs), (max(&xs) * 1.1).max(1.0));
    let y = (min(&ys), (max(&ys) * 1.1).max(1.0));
    let png = stem.with_extension("png");
    let svg = stem.with_extension("svg");
    if let Some(dir) = stem.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let size = (cctl_plot::WIDTH_PX, cctl_plot::HEIGHT_PX);
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        draw(&root, &groups, title, notes, x, y)?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        draw(&root, &groups, title, notes, x, y)?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e}", svg.display()))?;
    }
    Ok(png)
}

type Group<'a> = (&'a str, Vec<(f64, f64)>, Option<Ellipse>);

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    groups: &[Group<'_>],
    title: &str,
    notes: &[String],
    x: (f64, f64),
    y: (f64, f64),
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e:?}");
    root.fill(&WHITE).map_err(err)?;
    let body = root.titled(title, ("sans-serif", 18)).map_err(err)?;
    body.draw_text(
        &notes.join("; "),
        &("sans-serif", 12).into_text_style(&body),
        (12, 0),
    )
    .map_err(err)?;
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .margin_top(20)
        .x_label_area_size(40)
        .y_label_area_size(56)
        // Pantheon's orientation: delay grows to the left.
        .build_cartesian_2d(x.1..x.0, y.0..y.1)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("mean queueing delay of the flow, srtt − min RTT (ms; axis reversed)")
        .y_desc("throughput of the flow (Mbit/s)")
        .draw()
        .map_err(err)?;
    for (i, (algo, pts, e)) in groups.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.mix(0.6).filled())))
            .map_err(err)?
            .label(format!("{algo} ({} flows)", pts.len()))
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, c.filled()));
        if let Some(e) = e {
            chart
                .draw_series(LineSeries::new(e.outline(64), c.stroke_width(2)))
                .map_err(err)?;
            chart
                .draw_series([Cross::new(e.centre, 8, c.stroke_width(3))])
                .map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ellipse_of_axis_aligned_points_has_their_standard_deviations() {
        // x: ±1 → var 2/3; y: ±2 → var 8/3; no covariance: major along y.
        let e = ellipse(&[(1.0, 0.0), (-1.0, 0.0), (0.0, 2.0), (0.0, -2.0)]).unwrap();
        assert_eq!(e.centre, (0.0, 0.0));
        assert!((e.major - (8.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((e.minor - (2.0f64 / 3.0).sqrt()).abs() < 1e-12);
        assert!((e.angle.abs() - std::f64::consts::FRAC_PI_2).abs() < 1e-12);
        // Shifted: the same shape around the mean.
        let s = ellipse(&[(11.0, 5.0), (9.0, 5.0), (10.0, 7.0), (10.0, 3.0)]).unwrap();
        assert_eq!(s.centre, (10.0, 5.0));
        assert!((s.major - e.major).abs() < 1e-12);
    }

    #[test]
    fn correlated_points_tilt_the_ellipse_and_the_outline_is_at_one_sigma() {
        // Points on y = x: all variance along 45°, none across.
        let pts = [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (3.0, 3.0)];
        let e = ellipse(&pts).unwrap();
        assert!((e.angle - std::f64::consts::FRAC_PI_4).abs() < 1e-12);
        assert!(e.minor.abs() < 1e-9);
        // var(x) = var(y) = 5/3, so the variance along the diagonal is 10/3.
        assert!((e.major - (10.0f64 / 3.0).sqrt()).abs() < 1e-12);
        let o = e.outline(4);
        assert_eq!(o.len(), 5);
        let d = ((o[0].0 - 1.5).powi(2) + (o[0].1 - 1.5).powi(2)).sqrt();
        assert!((d - e.major).abs() < 1e-12);
        assert!(ellipse(&[(1.0, 1.0)]).is_none());
    }

    #[test]
    fn a_scatter_renders_with_one_group_per_algorithm() {
        let dots: Vec<FlowDot> = [
            ("cubic", 30.0, 9.0),
            ("cubic", 35.0, 10.0),
            ("bbr", 5.0, 12.0),
            ("bbr", 8.0, 11.0),
            ("bbr", 6.0, 13.0),
        ]
        .iter()
        .map(|&(a, d, m)| FlowDot {
            algo: a.into(),
            delay_ms: d,
            mbit: m,
        })
        .collect();
        let dir = std::env::temp_dir().join(format!("cctl-scatter-{}", std::process::id()));
        let png = render(&dots, "test", &["note".into()], &dir.join("s")).unwrap();
        assert!(std::fs::metadata(&png).unwrap().len() > 1000);
        assert!(dir.join("s.svg").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
