//! Chart rendering for the benchmark reports: line, point, dashed (theory) and error-bar series on
//! linear or logarithmic axes, drawn with `plotters` to a PNG and an SVG side by side.
//!
//! A [`Chart`] is plain data; [`render`] prepares it (drops points an axis cannot show, picks axis
//! ranges, clips to them, downsamples long lines) and then draws the same picture on both backends.
//! The legend sits in its own panel to the right of the plot so that it never covers data.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Width of the rendered images, in pixels.
pub const WIDTH_PX: u32 = 1024;
/// Height of the rendered images, in pixels.
pub const HEIGHT_PX: u32 = 640;
/// The most points a [`SeriesStyle::Line`] or [`SeriesStyle::Dashed`] series is drawn with; longer
/// series are reduced by min/max bucketing, which keeps every peak and trough visible.
pub const MAX_LINE_POINTS: usize = 4000;

const FONT: &str = "sans-serif";
/// Tableau 10: distinct, colour-blind-friendly; series beyond ten fall back to `Palette99`.
const COLOURS: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// One series of a chart: a label for the legend, its points in the chart's axis units, and how
/// to draw them.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text; an empty label leaves the series out of the legend.
    pub label: String,
    /// `(x, y)` points in the chart's axis units (see [`Chart::x_label`], [`Chart::y_label`]).
    /// Lines join them in the order given; non-finite points break a line.
    pub points: Vec<(f64, f64)>,
    /// How the points are drawn.
    pub style: SeriesStyle,
}

/// How a [`Series`] is drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum SeriesStyle {
    /// A solid line through the points (measured time series, e.g. cwnd histories).
    Line,
    /// A marker at each point, no line (e.g. one measurement per RTT).
    Points,
    /// A dashed line: reference and theory curves (e.g. `1.22/sqrt(p)` in a response function).
    Dashed,
    /// A marker at each point with a vertical bar of `± e` around it, `e` in y-axis units; one
    /// value per point, so the vector must be as long as [`Series::points`].
    ErrorBars(Vec<f64>),
}

/// A chart: titles, axes, series and small notes, in the units named by the axis labels.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Chart {
    /// Title printed at the top.
    pub title: String,
    /// X-axis description, with its unit (e.g. `"RTT (ms)"`).
    pub x_label: String,
    /// Y-axis description, with its unit (e.g. `"throughput (Mbit/s)"`).
    pub y_label: String,
    /// Logarithmic x axis (base 10); points with `x <= 0` are dropped and a note says so.
    pub log_x: bool,
    /// Logarithmic y axis (base 10); points with `y <= 0` are dropped and a note says so.
    pub log_y: bool,
    /// The series, drawn in order (later ones on top) and coloured in order.
    pub series: Vec<Series>,
    /// Small text lines printed under the title, e.g. `"ci profile: not comparable with the
    /// papers"` or `"NC = not converged"`.
    pub notes: Vec<String>,
    /// Fixed x-axis range `(min, max)` in x units; `None` picks one from the data with a margin.
    /// Data outside it is clipped.
    pub x_range: Option<(f64, f64)>,
    /// Fixed y-axis range `(min, max)` in y units; `None` picks one from the data in the x range
    /// with a margin. Data outside it is clipped.
    pub y_range: Option<(f64, f64)>,
}

/// Renders `chart` to `<stem>.png` (1024x640 pixels) and `<stem>.svg` (same size), creating the
/// parent directory if needed, and returns both paths `(png, svg)`.
///
/// The extensions are appended, so a stem such as `out/rtt-1.5` gives `out/rtt-1.5.png`.
/// Fails if an error-bar series has a different number of errors than points, if a fixed axis
/// range is empty, non-finite or (on a log axis) not positive, or if a file cannot be written
/// (including when no font is found: plotters needs fontconfig and a sans-serif font).
pub fn render(chart: &Chart, stem: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let prepared = prepare(chart)?;
    let png = with_suffix(stem, ".png");
    let svg = with_suffix(stem, ".svg");
    if let Some(dir) = stem.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        draw(&root, &prepared).with_context(|| format!("drawing {}", png.display()))?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        draw(&root, &prepared).with_context(|| format!("drawing {}", svg.display()))?;
        root.present()
            .map_err(|e| anyhow!("writing {}: {e}", svg.display()))?;
    }
    Ok((png, svg))
}

/// Convenience: a chart of congestion window (segments) against time (s), one line per flow.
///
/// `flows` holds `(label, points)` with points `(t_s, cwnd_segments)`; `notes` are copied to
/// [`Chart::notes`]. Axes are linear and ranged from the data.
pub fn cwnd_history(title: &str, flows: &[(String, Vec<(f64, f64)>)], notes: &[String]) -> Chart {
    Chart {
        title: title.to_owned(),
        x_label: "time (s)".to_owned(),
        y_label: "cwnd (segments)".to_owned(),
        series: flows
            .iter()
            .map(|(label, points)| Series {
                label: label.clone(),
                points: points.clone(),
                style: SeriesStyle::Line,
            })
            .collect(),
        notes: notes.to_vec(),
        ..Chart::default()
    }
}

fn with_suffix(stem: &Path, suffix: &str) -> PathBuf {
    let mut s = OsString::from(stem.as_os_str());
    s.push(suffix);
    PathBuf::from(s)
}

// ---------------------------------------------------------------------------------------------
// Preparation: everything that does not need a backend, so that it can be tested directly.

/// What is drawn for one series, already filtered, clipped and downsampled.
#[derive(Debug)]
struct Prepared {
    title: String,
    x_label: String,
    y_label: String,
    log_x: bool,
    log_y: bool,
    x: (f64, f64),
    y: (f64, f64),
    notes: Vec<String>,
    series: Vec<PreparedSeries>,
}

#[derive(Debug)]
struct PreparedSeries {
    label: String,
    colour: RGBColor,
    style: Kind,
    /// Polylines for `Line`/`Dashed`; one-point "segments" are not used.
    lines: Vec<Vec<(f64, f64)>>,
    /// Markers for `Points`/`ErrorBars`.
    markers: Vec<(f64, f64)>,
    /// `(x, low, high)` for `ErrorBars`.
    bars: Vec<(f64, f64, f64)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Line,
    Points,
    Dashed,
    ErrorBars,
}

/// An axis: maps data values to a space where straight lines stay straight (log10 for log axes).
#[derive(Debug, Clone, Copy)]
struct Axis {
    log: bool,
}

impl Axis {
    fn accepts(self, v: f64) -> bool {
        v.is_finite() && (!self.log || v > 0.0)
    }
    fn transform(self, v: f64) -> f64 {
        if self.log {
            v.log10()
        } else {
            v
        }
    }
    fn untransform(self, t: f64) -> f64 {
        if self.log {
            10f64.powf(t)
        } else {
            t
        }
    }
}

fn colour(i: usize) -> RGBColor {
    match COLOURS.get(i) {
        Some(&(r, g, b)) => RGBColor(r, g, b),
        None => {
            let c = Palette99::pick(i).to_rgba();
            RGBColor(c.0, c.1, c.2)
        }
    }
}

fn prepare(chart: &Chart) -> anyhow::Result<Prepared> {
    let ax = Axis { log: chart.log_x };
    let ay = Axis { log: chart.log_y };
    let mut notes = chart.notes.clone();
    check(chart, ax, ay)?;
    let valid = showable(chart, ax, ay, &mut notes);
    let total_valid: usize = valid.iter().map(|pts| pts.iter().flatten().count()).sum();

    // Axis ranges: fixed, or from the data with a margin (y from the data inside the x range).
    let x = match chart.x_range {
        Some(r) => r,
        None => auto_range(valid.iter().flatten().flatten().map(|p| p.0), ax),
    };
    let y = match chart.y_range {
        Some(r) => r,
        None => y_range(chart, &valid, x, ay),
    };

    // Clip to the ranges and downsample.
    let mut series = Vec::with_capacity(chart.series.len());
    let mut drawn = 0usize;
    for (i, (s, pts)) in chart.series.iter().zip(&valid).enumerate() {
        let (p, n) = clip(i, s, pts, (x, y), (ax, ay));
        drawn += n;
        series.push(p);
    }
    if total_valid == 0 {
        notes.push("no data".to_owned());
    } else if drawn == 0 {
        notes.push("no data inside the axis ranges".to_owned());
    }

    Ok(Prepared {
        title: chart.title.clone(),
        x_label: chart.x_label.clone(),
        y_label: chart.y_label.clone(),
        log_x: chart.log_x,
        log_y: chart.log_y,
        x,
        y,
        notes,
        series,
    })
}

/// Refuses error bars that do not match their points, and fixed ranges an axis cannot show.
fn check(chart: &Chart, ax: Axis, ay: Axis) -> anyhow::Result<()> {
    for s in &chart.series {
        if let SeriesStyle::ErrorBars(e) = &s.style {
            if e.len() != s.points.len() {
                bail!(
                    "series {:?}: {} error values for {} points",
                    s.label,
                    e.len(),
                    s.points.len()
                );
            }
        }
    }
    for (name, range, axis) in [("x", chart.x_range, ax), ("y", chart.y_range, ay)] {
        if let Some((lo, hi)) = range {
            if !(axis.accepts(lo) && axis.accepts(hi) && lo < hi) {
                let need = if axis.log { "positive, " } else { "" };
                bail!("{name} range ({lo}, {hi}) must be {need}finite and increasing");
            }
        }
    }

    Ok(())
}

/// The points of each series each axis can show, keeping `None` where a line must break;
/// a note in `notes` for a series with points a log axis cannot show.
fn showable(
    chart: &Chart,
    ax: Axis,
    ay: Axis,
    notes: &mut Vec<String>,
) -> Vec<Vec<Option<(f64, f64)>>> {
    let mut valid: Vec<Vec<Option<(f64, f64)>>> = Vec::with_capacity(chart.series.len());
    for s in &chart.series {
        let mut non_positive = 0usize;
        let pts: Vec<Option<(f64, f64)>> = s
            .points
            .iter()
            .map(|&(x, y)| {
                if ax.accepts(x) && ay.accepts(y) {
                    Some((x, y))
                } else {
                    if x.is_finite() && y.is_finite() {
                        non_positive += 1;
                    }
                    None
                }
            })
            .collect();
        if non_positive > 0 {
            let axes = match (chart.log_x, chart.log_y) {
                (true, true) => "log-log axes",
                (true, false) => "log x axis",
                _ => "log y axis",
            };
            notes.push(format!(
                "{:?}: {non_positive} non-positive point(s) not shown ({axes})",
                s.label
            ));
        }
        valid.push(pts);
    }

    valid
}

/// The y range of the points (and error bars) inside the x range `x`, with a margin.
fn y_range(
    chart: &Chart,
    valid: &[Vec<Option<(f64, f64)>>],
    x: (f64, f64),
    ay: Axis,
) -> (f64, f64) {
    let in_x = |v: f64| v >= x.0 && v <= x.1;
    let mut ys = Vec::new();
    for (s, pts) in chart.series.iter().zip(valid) {
        for (i, p) in pts.iter().enumerate() {
            let Some((px, py)) = *p else { continue };
            if !in_x(px) {
                continue;
            }
            ys.push(py);
            if let SeriesStyle::ErrorBars(e) = &s.style {
                let e = e[i].abs();
                if e.is_finite() {
                    ys.extend([py - e, py + e].into_iter().filter(|&v| ay.accepts(v)));
                }
            }
        }
    }
    auto_range(ys.into_iter(), ay)
}

/// Series `i` clipped to the ranges `(x, y)` and downsampled; with the number of points it
/// draws.
fn clip(
    i: usize,
    s: &Series,
    pts: &[Option<(f64, f64)>],
    (x, y): ((f64, f64), (f64, f64)),
    (ax, ay): (Axis, Axis),
) -> (PreparedSeries, usize) {
    let in_x = |v: f64| v >= x.0 && v <= x.1;
    let mut p = PreparedSeries {
        label: s.label.clone(),
        colour: colour(i),
        style: match s.style {
            SeriesStyle::Line => Kind::Line,
            SeriesStyle::Points => Kind::Points,
            SeriesStyle::Dashed => Kind::Dashed,
            SeriesStyle::ErrorBars(_) => Kind::ErrorBars,
        },
        lines: Vec::new(),
        markers: Vec::new(),
        bars: Vec::new(),
    };
    let inside = |(px, py): (f64, f64)| in_x(px) && py >= y.0 && py <= y.1;
    let drawn = match &s.style {
        SeriesStyle::Line | SeriesStyle::Dashed => {
            let clipped = clip_polyline(pts, x, y, ax, ay);
            p.lines = downsample(clipped, MAX_LINE_POINTS);
            p.lines.iter().map(Vec::len).sum::<usize>()
        }
        SeriesStyle::Points => {
            p.markers = pts
                .iter()
                .flatten()
                .copied()
                .filter(|&q| inside(q))
                .collect();
            p.markers.len()
        }
        SeriesStyle::ErrorBars(e) => {
            for (q, &e) in pts.iter().zip(e) {
                let Some(q) = *q else { continue };
                if !inside(q) {
                    continue;
                }
                p.markers.push(q);
                let e = if e.is_finite() { e.abs() } else { 0.0 };
                let lo = if ay.accepts(q.1 - e) { q.1 - e } else { y.0 };
                p.bars.push((q.0, lo.max(y.0), (q.1 + e).min(y.1)));
            }
            p.markers.len()
        }
    };
    (p, drawn)
}

/// An axis range covering `values` (all acceptable to `axis`) with a 5 % margin on each side.
/// Linear ranges of non-negative data start no lower than 0; log ranges that would hold fewer
/// than two powers of ten are widened to whole decades so that the axis has labels.
fn auto_range(values: impl Iterator<Item = f64>, axis: Axis) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if lo > hi {
        return if axis.log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if axis.log {
        let (tlo, thi) = (lo.log10(), hi.log10());
        let pad = if thi > tlo { 0.05 * (thi - tlo) } else { 0.3 };
        let (tlo, thi) = (tlo - pad, thi + pad);
        if thi.floor() - tlo.ceil() < 1.0 {
            (10f64.powf(tlo.floor()), 10f64.powf(thi.ceil()))
        } else {
            (10f64.powf(tlo), 10f64.powf(thi))
        }
    } else {
        let pad = if hi > lo {
            0.05 * (hi - lo)
        } else {
            (0.1 * lo.abs()).max(1.0)
        };
        let start = if lo >= 0.0 {
            (lo - pad).max(0.0)
        } else {
            lo - pad
        };
        (start, hi + pad)
    }
}

/// Splits `pts` into polylines at `None`s and clips each segment to the rectangle `x` by `y`
/// (in transformed space, so that clipping agrees with what the axes draw).
fn clip_polyline(
    pts: &[Option<(f64, f64)>],
    x: (f64, f64),
    y: (f64, f64),
    ax: Axis,
    ay: Axis,
) -> Vec<Vec<(f64, f64)>> {
    let rect = (
        ax.transform(x.0),
        ax.transform(x.1),
        ay.transform(y.0),
        ay.transform(y.1),
    );
    let inside = |(px, py): (f64, f64)| px >= x.0 && px <= x.1 && py >= y.0 && py <= y.1;
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    let mut flush = |cur: &mut Vec<(f64, f64)>| {
        if !cur.is_empty() {
            out.push(std::mem::take(cur));
        }
    };
    let mut prev: Option<(f64, f64)> = None;
    for p in pts {
        match (prev, *p) {
            (_, None) => {
                flush(&mut cur);
                prev = None;
            }
            (None, Some(q)) => {
                if inside(q) {
                    cur.push(q);
                }
                prev = Some(q);
            }
            (Some(a), Some(b)) => {
                let ta = (ax.transform(a.0), ay.transform(a.1));
                let tb = (ax.transform(b.0), ay.transform(b.1));
                match liang_barsky(ta, tb, rect) {
                    None => flush(&mut cur),
                    Some((t0, t1)) => {
                        let at = |t: f64, orig: (f64, f64)| {
                            if t == 0.0 {
                                a
                            } else if t == 1.0 {
                                orig
                            } else {
                                (
                                    ax.untransform(ta.0 + t * (tb.0 - ta.0)),
                                    ay.untransform(ta.1 + t * (tb.1 - ta.1)),
                                )
                            }
                        };
                        if t0 > 0.0 {
                            // The segment enters the rectangle: a new polyline starts here.
                            flush(&mut cur);
                            cur.push(at(t0, b));
                        } else if cur.is_empty() {
                            cur.push(a);
                        }
                        cur.push(at(t1, b));
                        if t1 < 1.0 {
                            flush(&mut cur);
                        }
                    }
                }
                prev = Some(b);
            }
        }
    }
    flush(&mut cur);
    out
}

/// The parameter interval `[t0, t1]` of the segment `a + t (b - a)` inside `rect`
/// (`xmin, xmax, ymin, ymax`), or `None` if it misses.
fn liang_barsky(a: (f64, f64), b: (f64, f64), rect: (f64, f64, f64, f64)) -> Option<(f64, f64)> {
    let (dx, dy) = (b.0 - a.0, b.1 - a.1);
    let (mut t0, mut t1) = (0.0f64, 1.0f64);
    for (p, q) in [
        (-dx, a.0 - rect.0),
        (dx, rect.1 - a.0),
        (-dy, a.1 - rect.2),
        (dy, rect.3 - a.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return None;
            }
        } else {
            let r = q / p;
            if p < 0.0 {
                t0 = t0.max(r);
            } else {
                t1 = t1.min(r);
            }
        }
    }
    (t0 <= t1).then_some((t0, t1))
}

/// Reduces polylines to at most about `max` points in all by min/max bucketing: each polyline
/// keeps its first and last point and, from each run of `chunk` consecutive points, the lowest
/// and the highest (in their original order), so peaks and troughs survive.
fn downsample(lines: Vec<Vec<(f64, f64)>>, max: usize) -> Vec<Vec<(f64, f64)>> {
    let total: usize = lines.iter().map(Vec::len).sum();
    if total <= max {
        return lines;
    }
    let chunk = total.div_ceil((max / 2).saturating_sub(1).max(1));
    lines
        .into_iter()
        .map(|line| {
            let mut keep: Vec<usize> = Vec::with_capacity(2 * line.len() / chunk + 4);
            keep.push(0);
            for start in (0..line.len()).step_by(chunk) {
                let end = (start + chunk).min(line.len());
                let (mut lo, mut hi) = (start, start);
                for i in start..end {
                    if line[i].1 < line[lo].1 {
                        lo = i;
                    }
                    if line[i].1 > line[hi].1 {
                        hi = i;
                    }
                }
                keep.extend(if lo <= hi { [lo, hi] } else { [hi, lo] });
            }
            keep.push(line.len() - 1);
            keep.dedup();
            keep.into_iter().map(|i| line[i]).collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Drawing: the same code for both backends.

const TITLE_PX: u32 = 22;
const NOTE_PX: u32 = 14;
const LABEL_PX: u32 = 16;
const TICK_PX: u32 = 13;
const LEGEND_PX: u32 = 14;
const LEGEND_ROW_PX: i32 = 22;
const LEGEND_SAMPLE_PX: i32 = 28;
const LEGEND_MAX_W_PX: u32 = 300;
const MARGIN_PX: u32 = 12;

fn err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("{e}")
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, p: &Prepared) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(err)?;

    // Header: title and notes, centred.
    let header_h = MARGIN_PX + TITLE_PX + 8 + (NOTE_PX + 4) * p.notes.len() as u32 + 4;
    let (header, body) = root.split_vertically(header_h);
    let centre = (root.dim_in_pixel().0 / 2) as i32;
    let centred = Pos::new(HPos::Center, VPos::Top);
    header
        .draw(&Text::new(
            p.title.clone(),
            (centre, MARGIN_PX as i32),
            TextStyle::from((FONT, TITLE_PX).into_font().style(FontStyle::Bold)).pos(centred),
        ))
        .map_err(err)?;
    let note_style = (FONT, NOTE_PX)
        .into_font()
        .color(&RGBColor(80, 80, 80))
        .pos(centred);
    for (i, note) in p.notes.iter().enumerate() {
        let y = (MARGIN_PX + TITLE_PX + 8 + i as u32 * (NOTE_PX + 4)) as i32;
        header
            .draw(&Text::new(note.clone(), (centre, y), note_style.clone()))
            .map_err(err)?;
    }

    // Legend panel on the right, sized to the longest label.
    let legend_font = TextStyle::from((FONT, LEGEND_PX).into_font());
    let labelled: Vec<&PreparedSeries> = p.series.iter().filter(|s| !s.label.is_empty()).collect();
    let mut labels = Vec::with_capacity(labelled.len());
    let mut widest = 0u32;
    for s in &labelled {
        let label = fit_text(&body, &s.label, &legend_font, LEGEND_MAX_W_PX)?;
        widest = widest.max(
            body.estimate_text_size(&label, &legend_font)
                .map_err(err)?
                .0,
        );
        labels.push(label);
    }
    let (plot_area, legend_area) = if labelled.is_empty() {
        (body.clone(), None)
    } else {
        let w = LEGEND_SAMPLE_PX as u32 + 8 + widest + 2 * MARGIN_PX;
        let (l, r) = body.split_horizontally(body.dim_in_pixel().0.saturating_sub(w));
        (l, Some(r))
    };

    let (x, y) = (p.x.0..p.x.1, p.y.0..p.y.1);
    match (p.log_x, p.log_y) {
        (false, false) => draw_plot(&plot_area, p, x, y)?,
        (true, false) => draw_plot(&plot_area, p, x.log_scale(), y)?,
        (false, true) => draw_plot(&plot_area, p, x, y.log_scale())?,
        (true, true) => draw_plot(&plot_area, p, x.log_scale(), y.log_scale())?,
    }

    if let Some(area) = legend_area {
        let rows = ((area.dim_in_pixel().1 as i32 - 2 * MARGIN_PX as i32) / LEGEND_ROW_PX).max(1);
        let text_style = legend_font.pos(Pos::new(HPos::Left, VPos::Center));
        let shown = labelled.len().min(rows as usize);
        for (row, (s, label)) in labelled.iter().zip(&labels).take(shown).enumerate() {
            let cy = MARGIN_PX as i32 + 10 + row as i32 * LEGEND_ROW_PX;
            let x0 = MARGIN_PX as i32 / 2;
            let label = if row + 1 == shown && shown < labelled.len() {
                format!("… {} more", labelled.len() - shown + 1)
            } else {
                label.clone()
            };
            draw_legend_sample(&area, s, (x0, cy))?;
            area.draw(&Text::new(
                label,
                (x0 + LEGEND_SAMPLE_PX + 8, cy),
                text_style.clone(),
            ))
            .map_err(err)?;
        }
    }
    Ok(())
}

/// `text`, shortened with an ellipsis until it is at most `max_w` pixels wide in `font`.
fn fit_text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    font: &TextStyle,
    max_w: u32,
) -> anyhow::Result<String> {
    let mut chars: Vec<char> = text.chars().collect();
    let mut out = text.to_owned();
    while area.estimate_text_size(&out, font).map_err(err)?.0 > max_w && chars.len() > 1 {
        chars.pop();
        out = chars.iter().collect::<String>() + "…";
    }
    Ok(out)
}

fn draw_legend_sample<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    s: &PreparedSeries,
    (x0, cy): (i32, i32),
) -> anyhow::Result<()> {
    let line = s.colour.stroke_width(2);
    let mid = x0 + LEGEND_SAMPLE_PX / 2;
    match s.style {
        Kind::Line => area
            .draw(&PathElement::new(
                vec![(x0, cy), (x0 + LEGEND_SAMPLE_PX, cy)],
                line,
            ))
            .map_err(err),
        Kind::Dashed => area
            .draw(&DashedPathElement::new(
                vec![(x0, cy), (x0 + LEGEND_SAMPLE_PX, cy)],
                7,
                4,
                line,
            ))
            .map_err(err),
        Kind::Points => area
            .draw(&Circle::new((mid, cy), 4, s.colour.filled()))
            .map_err(err),
        Kind::ErrorBars => {
            area.draw(&PathElement::new(
                vec![(mid, cy - 7), (mid, cy + 7)],
                s.colour.stroke_width(1),
            ))
            .map_err(err)?;
            for dy in [-7, 7] {
                area.draw(&PathElement::new(
                    vec![(mid - 4, cy + dy), (mid + 4, cy + dy)],
                    s.colour.stroke_width(1),
                ))
                .map_err(err)?;
            }
            area.draw(&Circle::new((mid, cy), 4, s.colour.filled()))
                .map_err(err)
        }
    }
}

fn draw_plot<DB, X, Y>(
    area: &DrawingArea<DB, Shift>,
    p: &Prepared,
    x_spec: X,
    y_spec: Y,
) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
    Y: AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
    Y::CoordDescType: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(MARGIN_PX)
        .x_label_area_size(48)
        .y_label_area_size(78)
        .build_cartesian_2d(x_spec, y_spec)
        .map_err(err)?;
    let fmt = |v: &f64| tick_label(*v);
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .axis_desc_style((FONT, LABEL_PX))
        .label_style((FONT, TICK_PX))
        .x_label_formatter(&fmt)
        .y_label_formatter(&fmt)
        .light_line_style(RGBColor(235, 235, 235))
        .bold_line_style(RGBColor(205, 205, 205))
        .draw()
        .map_err(err)?;

    for s in &p.series {
        let c = s.colour;
        match s.style {
            Kind::Line | Kind::Dashed => {
                let pieces = s
                    .lines
                    .iter()
                    .flat_map(|line| split_sharp_turns(line, |q| chart.backend_coord(q)))
                    .collect::<Vec<_>>();
                for piece in pieces {
                    let pts = piece.iter().copied();
                    if s.style == Kind::Line {
                        chart.draw_series(LineSeries::new(pts, c.stroke_width(2)))
                    } else {
                        chart.draw_series(DashedLineSeries::new(pts, 7, 4, c.stroke_width(2)))
                    }
                    .map_err(err)?;
                }
            }
            Kind::Points => {
                chart
                    .draw_series(s.markers.iter().map(|&q| Circle::new(q, 4, c.filled())))
                    .map_err(err)?;
            }
            Kind::ErrorBars => {
                chart
                    .draw_series(
                        s.bars
                            .iter()
                            .zip(&s.markers)
                            .map(|(&(bx, lo, hi), &(_, by))| {
                                ErrorBar::new_vertical(bx, lo, by, hi, c.stroke_width(1), 8)
                            }),
                    )
                    .map_err(err)?;
                chart
                    .draw_series(s.markers.iter().map(|&q| Circle::new(q, 4, c.filled())))
                    .map_err(err)?;
            }
        }
    }
    Ok(())
}

/// Splits a polyline at its hairpin turns (interior angle under 45 degrees, measured in pixels
/// `to_px` maps points to), the pieces sharing the turning point.
///
/// plotters draws lines wider than one pixel as one polygon whose inner corner at a hairpin lies
/// far from the line (about `width / (2 sin(angle / 2))` pixels), which paints long spikes across
/// the image; min/max-bucketed data is full of hairpins. Pieces have no joins at those points.
fn split_sharp_turns<T>(line: &[T], to_px: impl Fn(&T) -> (i32, i32)) -> Vec<&[T]> {
    const MIN_COS: f64 = -std::f64::consts::FRAC_1_SQRT_2; // cos(180 - 45 degrees)
    let mut pieces = Vec::new();
    let mut start = 0;
    // The last two distinct pixels, each with the last index that maps to it.
    let mut prev: Option<((i32, i32), usize)> = None;
    let mut cur: Option<((i32, i32), usize)> = None;
    for (i, q) in line.iter().enumerate() {
        let px = to_px(q);
        match cur {
            Some((c, _)) if c == px => cur = Some((c, i)),
            _ => {
                if let (Some((a, _)), Some((b, j))) = (prev, cur) {
                    let v1 = (f64::from(b.0 - a.0), f64::from(b.1 - a.1));
                    let v2 = (f64::from(px.0 - b.0), f64::from(px.1 - b.1));
                    let cos = (v1.0 * v2.0 + v1.1 * v2.1) / (v1.0.hypot(v1.1) * v2.0.hypot(v2.1));
                    if cos < MIN_COS {
                        pieces.push(&line[start..=j]);
                        start = j;
                    }
                }
                prev = cur;
                cur = Some((px, i));
            }
        }
    }
    if start + 1 < line.len() || pieces.is_empty() {
        pieces.push(&line[start..]);
    }
    pieces
}

/// A short tick label: plain decimals for moderate magnitudes, `1e-4` style otherwise.
fn tick_label(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if (1e-3..1e6).contains(&a) {
        let s = format!("{v:.4}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        s.to_owned()
    } else {
        let s = format!("{v:.2e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = m.trim_end_matches('0').trim_end_matches('.');
        format!("{m}e{e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    /// A fresh directory under the system temp dir, unique to this process and call, removed
    /// when dropped unless `CCTL_KEEP_PLOTS` is set (to look at the pictures).
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let dir = std::env::temp_dir().join(format!(
                "cctl-plot-{}-{}-{name}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            if std::env::var_os("CCTL_KEEP_PLOTS").is_none() {
                let _ = std::fs::remove_dir_all(&self.0);
            } else {
                eprintln!("kept {}", self.0.display());
            }
        }
    }

    /// Renders `chart` and checks both files look like what they claim to be; returns the SVG.
    fn render_and_check(chart: &Chart, name: &str) -> String {
        let dir = Scratch::new(name);
        let (png, svg) = render(chart, &dir.0.join(name)).unwrap();
        assert_eq!(png, dir.0.join(format!("{name}.png")));
        assert_eq!(svg, dir.0.join(format!("{name}.svg")));
        let bytes = std::fs::read(&png).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{} is not a PNG",
            png.display()
        );
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("<svg"), "{} is not an SVG", svg.display());
        for s in chart.series.iter().filter(|s| !s.label.is_empty()) {
            assert!(
                text.contains(&s.label),
                "legend label {:?} missing from the SVG",
                s.label
            );
        }
        text
    }

    fn series(label: &str, points: Vec<(f64, f64)>, style: SeriesStyle) -> Series {
        Series {
            label: label.to_owned(),
            points,
            style,
        }
    }

    #[test]
    fn a_cwnd_history_renders_to_png_and_svg_with_every_flow_in_the_legend() {
        let flows: Vec<(String, Vec<(f64, f64)>)> = (0..3)
            .map(|f| {
                let pts = (0..600)
                    .map(|i| {
                        let t = i as f64 * 0.1;
                        (t, 10.0 + ((t * (1.0 + f as f64 * 0.3)) % 8.0) * 12.0)
                    })
                    .collect();
                (format!("flow {f} (htcp)"), pts)
            })
            .collect();
        let chart = cwnd_history(
            "cwnd, 3 flows",
            &flows,
            &["ci profile: not comparable".into()],
        );
        let svg = render_and_check(&chart, "cwnd");
        assert!(svg.contains("time (s)") && svg.contains("cwnd (segments)"));
        assert!(svg.contains("ci profile: not comparable"));
    }

    #[test]
    fn a_log_log_response_function_renders_with_a_dashed_theory_curve() {
        let loss: Vec<f64> = (0..30)
            .map(|i| 10f64.powf(-6.0 + i as f64 * 0.15))
            .collect();
        let theory: Vec<(f64, f64)> = loss.iter().map(|&p| (p, 1.22 / p.sqrt())).collect();
        let mut measured: Vec<(f64, f64)> = loss.iter().map(|&p| (p, 1.0 / p.sqrt())).collect();
        measured.push((0.0, 5.0)); // cannot be shown on a log axis
        let chart = Chart {
            title: "response function".into(),
            x_label: "loss rate p".into(),
            y_label: "throughput (segments/RTT)".into(),
            log_x: true,
            log_y: true,
            series: vec![
                series("measured", measured, SeriesStyle::Points),
                series("1.22/sqrt(p)", theory, SeriesStyle::Dashed),
            ],
            ..Chart::default()
        };
        let svg = render_and_check(&chart, "response");
        assert!(
            svg.contains("non-positive"),
            "the dropped point is not noted"
        );
        let p = prepare(&chart).unwrap();
        assert!(p.x.0 > 0.0 && p.x.0 <= 1e-6 && p.x.1 >= loss[29]);
        assert_eq!(p.series[0].markers.len(), loss.len());
    }

    #[test]
    fn error_bars_render_and_must_match_the_points_in_number() {
        let pts: Vec<(f64, f64)> = (1..=8).map(|i| (i as f64 * 20.0, 1.0 / i as f64)).collect();
        let errs: Vec<f64> = (1..=8).map(|i| 0.05 + 0.01 * i as f64).collect();
        let chart = Chart {
            title: "throughput ratio against RTT".into(),
            x_label: "RTT (ms)".into(),
            y_label: "throughput ratio".into(),
            series: vec![
                series("htcp", pts.clone(), SeriesStyle::ErrorBars(errs.clone())),
                series("1/RTT ratio", pts.clone(), SeriesStyle::Dashed),
            ],
            ..Chart::default()
        };
        render_and_check(&chart, "errorbars");
        let p = prepare(&chart).unwrap();
        assert_eq!(p.series[0].bars.len(), 8);
        assert!(
            p.y.1 >= 1.0 + errs[0],
            "the y range must include the error bars"
        );

        let mut bad = chart.clone();
        bad.series[0].style = SeriesStyle::ErrorBars(vec![0.1]);
        let e = render(&bad, &Scratch::new("bad").0.join("bad")).unwrap_err();
        assert!(e.to_string().contains("1 error values for 8 points"), "{e}");
    }

    #[test]
    fn an_empty_chart_renders_with_a_no_data_note() {
        let chart = Chart {
            title: "nothing measured".into(),
            x_label: "buffer (packets)".into(),
            y_label: "throughput (Mbit/s)".into(),
            series: vec![series("htcp", vec![], SeriesStyle::Line)],
            ..Chart::default()
        };
        let svg = render_and_check(&chart, "empty");
        assert!(svg.contains("no data"));
        let svg = render_and_check(&Chart::default(), "default");
        assert!(svg.contains("no data"));
        let log = Chart {
            log_x: true,
            log_y: true,
            ..chart
        };
        render_and_check(&log, "empty-log");
    }

    #[test]
    fn a_100k_point_cwnd_history_renders_in_a_few_seconds() {
        let flows: Vec<(String, Vec<(f64, f64)>)> = (0..2)
            .map(|f| {
                let pts = (0..100_000)
                    .map(|i| {
                        let t = i as f64 * 0.001;
                        (t, 20.0 + ((t + f as f64) % 3.0) * 400.0 + (i % 7) as f64)
                    })
                    .collect();
                (format!("flow {f}"), pts)
            })
            .collect();
        let chart = cwnd_history("100k points per flow", &flows, &[]);
        let start = Instant::now();
        render_and_check(&chart, "big");
        let took = start.elapsed();
        assert!(took.as_secs_f64() < 5.0, "rendering took {took:?}");
        let p = prepare(&chart).unwrap();
        for s in &p.series {
            let n: usize = s.lines.iter().map(Vec::len).sum();
            assert!(n <= MAX_LINE_POINTS && n > 1000, "{n} points drawn");
        }
    }

    #[test]
    fn downsampling_keeps_the_extremes_of_every_bucket() {
        let mut line: Vec<(f64, f64)> = (0..50_000).map(|i| (i as f64, 1.0)).collect();
        line[12_345].1 = 99.0;
        line[40_000].1 = -5.0;
        let out = downsample(vec![line], MAX_LINE_POINTS);
        assert!(out[0].len() <= MAX_LINE_POINTS);
        assert!(out[0].contains(&(12_345.0, 99.0)) && out[0].contains(&(40_000.0, -5.0)));
        assert_eq!(out[0].first(), Some(&(0.0, 1.0)));
        assert_eq!(out[0].last(), Some(&(49_999.0, 1.0)));
        assert!(out[0].windows(2).all(|w| w[0].0 < w[1].0), "order is kept");
    }

    #[test]
    fn automatic_ranges_ignore_non_finite_values_and_keep_a_margin() {
        let chart = Chart {
            series: vec![series(
                "a",
                vec![
                    (1.0, 10.0),
                    (f64::NAN, 3.0),
                    (2.0, f64::INFINITY),
                    (3.0, 20.0),
                ],
                SeriesStyle::Line,
            )],
            ..Chart::default()
        };
        let p = prepare(&chart).unwrap();
        assert!(p.x.0 < 1.0 && p.x.1 > 3.0 && p.x.1 < 4.0, "{:?}", p.x);
        assert!(p.y.0 < 10.0 && p.y.1 > 20.0 && p.y.1 < 22.0, "{:?}", p.y);
        // The NaN breaks the line.
        assert_eq!(
            p.series[0].lines,
            vec![vec![(1.0, 10.0)], vec![(3.0, 20.0)]]
        );
    }

    #[test]
    fn fixed_ranges_clip_lines_at_the_edges() {
        let chart = Chart {
            series: vec![series(
                "a",
                vec![(0.0, 0.0), (10.0, 10.0)],
                SeriesStyle::Line,
            )],
            x_range: Some((2.0, 8.0)),
            y_range: Some((0.0, 5.0)),
            ..Chart::default()
        };
        let p = prepare(&chart).unwrap();
        assert_eq!(p.series[0].lines, vec![vec![(2.0, 2.0), (5.0, 5.0)]]);
        let bad = Chart {
            log_x: true,
            x_range: Some((0.0, 1.0)),
            ..chart
        };
        assert!(prepare(&bad).is_err());
    }

    #[test]
    fn lines_are_split_at_hairpin_turns_but_not_at_right_angles() {
        let px = |q: &(f64, f64)| (q.0 as i32, q.1 as i32);
        let hairpin = [(0.0, 0.0), (10.0, 0.0), (10.0, 0.0), (0.0, 1.0), (0.0, 9.0)];
        assert_eq!(
            split_sharp_turns(&hairpin, px),
            vec![&hairpin[..3], &hairpin[2..]],
            "the pieces share the turning point"
        );
        let corner = [(0.0, 0.0), (10.0, 0.0), (10.0, 10.0)];
        assert_eq!(split_sharp_turns(&corner, px), vec![&corner[..]]);
        assert_eq!(
            split_sharp_turns(&[(1.0, 1.0)], px),
            vec![&[(1.0, 1.0)][..]]
        );
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(tick_label(0.0), "0");
        assert_eq!(tick_label(2.5), "2.5");
        assert_eq!(tick_label(1000.0), "1000");
        assert_eq!(tick_label(1e-4), "1e-4");
        assert_eq!(tick_label(2.5e7), "2.5e7");
    }
}
