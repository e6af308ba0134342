//! Rendering of the dashboard: one pure function of [`App`] onto a ratatui frame (title,
//! flow table, charts, internals and sharing panels, status line, footer, dialogs).

use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Cell, Chart, Clear, Dataset, GraphType, Paragraph, Row, Table, Wrap,
};
use ratatui::Frame;

use cctl_metrics::jain_index;

use super::app::{describe_scope, mean_tput_in, App, Column, Flow, Mode, FILTER_SYNTAX};

/// Colours of the chart series, in the order of the chart flows.
pub const PALETTE: [Color; 8] = [
    Color::Cyan,
    Color::Yellow,
    Color::Magenta,
    Color::Green,
    Color::Red,
    Color::Blue,
    Color::LightCyan,
    Color::LightYellow,
];

/// A chart's metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// cwnd, segments.
    Cwnd,
    /// Kernel srtt, ms.
    Rtt,
    /// Throughput, Mbit/s.
    Tput,
}

impl Metric {
    /// Chart title with unit.
    pub fn title(self) -> &'static str {
        match self {
            Metric::Cwnd => "cwnd (segments)",
            Metric::Rtt => "srtt (ms)",
            Metric::Tput => "throughput (Mbit/s)",
        }
    }

    fn value(self, p: &super::app::Point) -> f64 {
        match self {
            Metric::Cwnd => f64::from(p.cwnd),
            Metric::Rtt => f64::from(p.srtt_us) / 1e3,
            Metric::Tput => p.tput_bps / 1e6,
        }
    }
}

/// Points of `flows` in the window `[start, end]` as (s relative to `end` (≤ 0), value),
/// and the y-axis top: the largest value plus 10 %, rounded up to a "nice" number
/// (1, 2 or 5 × 10^k); 1 when there is nothing to show.
pub fn series(
    flows: &[&Flow],
    metric: Metric,
    start: u64,
    end: u64,
) -> (Vec<Vec<(f64, f64)>>, f64) {
    let mut top: f64 = 0.0;
    let data: Vec<Vec<(f64, f64)>> = flows
        .iter()
        .map(|f| {
            f.history
                .iter()
                .filter(|p| p.t_ns >= start && p.t_ns <= end)
                .map(|p| {
                    let v = metric.value(p);
                    top = top.max(v);
                    (-((end - p.t_ns) as f64) / 1e9, v)
                })
                .collect()
        })
        .collect();
    (data, nice_ceiling(top * 1.1))
}

/// Smallest of 1, 2, 5 × 10^k that is ≥ `v` (1 for v ≤ 0).
pub fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 || !v.is_finite() {
        return 1.0;
    }
    let exp = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * exp >= v * (1.0 - 1e-12) {
            return m * exp;
        }
    }
    10.0 * exp
}

fn fmt_axis(v: f64) -> String {
    if v >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Draws the whole dashboard.
pub fn draw(f: &mut Frame, app: &App) {
    let rows = app.rows();
    let area = f.area();
    // The table takes what its rows need, at most 40 % of the screen.
    let table_h =
        (rows.len() + 3).clamp(5, ((area.height as usize).saturating_sub(4) * 2 / 5).max(5)) as u16;
    let chunks = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Length(table_h),
            Constraint::Min(6),
            Constraint::Length(1),
            Constraint::Length(1),
        ])
        .split(area);
    draw_title(f, app, &rows, chunks[0]);
    draw_table(f, app, &rows, chunks[1]);
    let middle = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(68), Constraint::Percentage(32)])
        .split(chunks[2]);
    draw_charts(f, app, &rows, middle[0]);
    let side = Layout::default()
        .direction(Direction::Vertical)
        .constraints([Constraint::Percentage(60), Constraint::Percentage(40)])
        .split(middle[1]);
    draw_internals(f, app, &rows, side[0]);
    draw_sharing(f, app, &rows, side[1]);
    draw_status(f, app, chunks[3]);
    draw_footer(f, app, chunks[4]);
    match &app.mode {
        Mode::Migrate { .. } => draw_migrate(f, app, area),
        Mode::Help => draw_help(f, area),
        _ => {}
    }
}

fn draw_title(f: &mut Frame, app: &App, rows: &[u64], area: Rect) {
    let count = if app.filter.text().is_empty() {
        format!("{} flows", rows.len())
    } else {
        format!("{}/{} flows", rows.len(), app.flows.len())
    };
    let mode = match app.view.frozen_end_ns {
        Some(end) if end < app.now_ns => {
            format!("FROZEN {:.1} s ago", (app.now_ns - end) as f64 / 1e9)
        }
        Some(_) => "PAUSED".to_string(),
        None => "LIVE".to_string(),
    };
    let mut spans = vec![
        Span::styled("cctl top", Style::default().add_modifier(Modifier::BOLD)),
        Span::raw(format!("  {count}  ")),
        Span::raw(format!(
            "sort {} {}  ",
            app.sort.title(),
            if app.descending { "desc" } else { "asc" }
        )),
        Span::styled(
            mode,
            Style::default().fg(if app.view.frozen_end_ns.is_some() {
                Color::Yellow
            } else {
                Color::Green
            }),
        ),
        Span::raw(format!("  window {:.0} s", app.view.window_s)),
    ];
    if !app.filter.text().is_empty() {
        spans.push(Span::raw(format!("  filter: {}", app.filter.text())));
    }
    if !app.marked.is_empty() {
        spans.push(Span::raw(format!("  marked {}", app.marked.len())));
    }
    spans.push(Span::styled(
        "  ? help",
        Style::default().fg(Color::DarkGray),
    ));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn cell_text(flow: &Flow, col: Column) -> String {
    let s = &flow.last;
    match col {
        Column::Local => flow.local(),
        Column::Remote => flow.remote(),
        Column::Cc => flow.cc_label(),
        Column::State => format!("{:?}", s.ca_state),
        Column::Cwnd => s.cwnd.to_string(),
        Column::Ssthresh => s.ssthresh_text(),
        Column::Srtt => format!("{:.2}", f64::from(s.srtt_us) / 1e3),
        Column::Rttvar => format!("{:.2}", f64::from(s.rttvar_us) / 1e3),
        Column::Tput => format!("{:.2}", flow.tput_bps / 1e6),
        Column::Retrans => s.total_retrans.to_string(),
    }
}

fn draw_table(f: &mut Frame, app: &App, rows: &[u64], area: Rect) {
    let block = Block::default().borders(Borders::ALL).title(" flows ");
    let visible = (area.height as usize).saturating_sub(3).max(1);
    app.page_rows.set(visible);
    let selected = app
        .selected_in(rows)
        .and_then(|c| rows.iter().position(|r| *r == c));
    let mut offset = app.table_offset.get().min(rows.len().saturating_sub(1));
    if let Some(i) = selected {
        if i < offset {
            offset = i;
        } else if i >= offset + visible {
            offset = i + 1 - visible;
        }
    }
    app.table_offset.set(offset);
    let header = Row::new(Column::ALL.iter().map(|c| {
        let mut t = c.title().to_string();
        if *c == app.sort {
            t.push(if app.descending { '▼' } else { '▲' });
        }
        Cell::from(t)
    }))
    .style(Style::default().add_modifier(Modifier::BOLD));
    let body: Vec<Row> = rows
        .iter()
        .enumerate()
        .skip(offset)
        .take(visible)
        .filter_map(|(i, c)| app.flows.get(c).map(|fl| (i, fl)))
        .map(|(i, fl)| {
            let mark = if app.marked.contains(&fl.last.cookie) {
                "*"
            } else {
                " "
            };
            let cells = Column::ALL.iter().map(|c| {
                let t = cell_text(fl, *c);
                if *c == Column::Local {
                    Cell::from(format!("{mark}{t}"))
                } else {
                    Cell::from(t)
                }
            });
            let mut style = Style::default();
            if fl.last.ca_state.is_reduction() {
                style = style.fg(Color::Yellow);
            }
            if Some(i) == selected {
                style = style.add_modifier(Modifier::REVERSED);
            }
            Row::new(cells).style(style)
        })
        .collect();
    // Address columns as wide as the widest visible endpoint (IPv6 up to 47 characters).
    let addr_w = rows
        .iter()
        .skip(offset)
        .take(visible)
        .filter_map(|c| app.flows.get(c))
        .map(|fl| fl.local().len().max(fl.remote().len()) + 1)
        .max()
        .unwrap_or(16)
        .clamp(16, 48) as u16;
    let widths = [
        Constraint::Length(addr_w + 1),
        Constraint::Length(addr_w),
        Constraint::Length(16),
        Constraint::Length(9),
        // cwnd and ssthresh: room for the 10-digit values of a kernel fault.
        Constraint::Length(10),
        Constraint::Length(11),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(8),
    ];
    let empty = rows.is_empty();
    f.render_widget(Table::new(body, widths).header(header).block(block), area);
    if empty {
        let msg = if app.flows.is_empty() {
            "waiting for TCP flows (a flow shows up when it receives ACKs)"
        } else {
            "no flow matches the filter (/ to change it)"
        };
        let inner = Rect {
            x: area.x + 2,
            y: area.y + 2,
            width: area.width.saturating_sub(4),
            height: 1,
        };
        f.render_widget(
            Paragraph::new(msg).style(Style::default().fg(Color::DarkGray)),
            inner,
        );
    }
}

fn draw_charts(f: &mut Frame, app: &App, rows: &[u64], area: Rect) {
    let cookies = app.chart_flows(rows);
    let flows: Vec<&Flow> = cookies.iter().filter_map(|c| app.flows.get(c)).collect();
    let (start, end) = app.window();
    let parts = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Ratio(1, 3),
            Constraint::Ratio(1, 3),
            Constraint::Ratio(1, 3),
        ])
        .split(area);
    let names: Vec<String> = flows.iter().map(|f| f.short_label()).collect();
    for (metric, part) in [Metric::Cwnd, Metric::Rtt, Metric::Tput]
        .into_iter()
        .zip(parts.iter())
    {
        let (data, top) = series(&flows, metric, start, end);
        let datasets: Vec<Dataset> = data
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let mut ds = Dataset::default()
                    .marker(Marker::Braille)
                    .graph_type(GraphType::Line)
                    .style(Style::default().fg(PALETTE[i % PALETTE.len()]))
                    .data(d);
                if metric == Metric::Cwnd && flows.len() > 1 {
                    ds = ds.name(names[i].clone());
                }
                ds
            })
            .collect();
        let w = app.view.window_s;
        let chart = Chart::new(datasets)
            .block(Block::default().borders(Borders::ALL).title(format!(
                " {} {}",
                metric.title(),
                if flows.len() == 1 {
                    format!("— {} ", flows[0].short_label())
                } else {
                    String::new()
                }
            )))
            .x_axis(Axis::default().bounds([-w, 0.0]).labels([
                format!("-{w:.0}s"),
                format!("-{:.0}s", w / 2.0),
                "0".into(),
            ]))
            .y_axis(Axis::default().bounds([0.0, top]).labels([
                "0".to_string(),
                fmt_axis(top / 2.0),
                fmt_axis(top),
            ]));
        f.render_widget(chart, *part);
    }
}

fn draw_internals(f: &mut Frame, app: &App, rows: &[u64], area: Rect) {
    let block = Block::default().borders(Borders::ALL).title(" internals ");
    let Some(fl) = app.selected_in(rows).and_then(|c| app.flows.get(&c)) else {
        f.render_widget(Paragraph::new("no flow selected").block(block), area);
        return;
    };
    let s = &fl.last;
    let ms = |us: u32| format!("{:.2} ms", f64::from(us) / 1e3);
    let mut lines = vec![
        Line::from(Span::styled(
            format!("{}  {:?}", fl.cc_label(), s.ca_state),
            Style::default().add_modifier(Modifier::BOLD),
        )),
        Line::from(format!(
            "minrtt {}  mss {} B  in flight {}  lost {}",
            ms(s.min_rtt_us),
            s.mss,
            s.in_flight,
            s.lost_out
        )),
    ];
    match s.algo {
        Some(algo) => {
            lines.push(Line::from(format!(
                "{algo}: Δ {:.3} s  backoffs {}  last β {}",
                s.delta_us.unwrap_or(0) as f64 / 1e6,
                s.backoffs.unwrap_or(0),
                s.last_beta
                    .filter(|_| s.backoffs.unwrap_or(0) > 0)
                    .map_or("-".into(), |b| format!("{b:.3}"))
            )));
            lines.push(Line::from(format!(
                "Tmin {}  Tmax {}  last epoch {}",
                s.tmin_us.map_or("-".into(), ms),
                s.tmax_us.map_or("-".into(), ms),
                s.epoch_tput_bytes_per_s
                    .filter(|b| *b > 0)
                    .map_or("-".into(), |b| format!(
                        "{:.2} Mbit/s",
                        b as f64 * 8.0 / 1e6
                    ))
            )));
            for v in s.vars.iter() {
                lines.push(Line::from(format!("  {:<14} {}", v.name, fmt_var(v.value))));
            }
        }
        None => lines.push(Line::from(Span::styled(
            "native congestion control: its internal state is not visible \
             (cctl's BPF algorithms expose theirs)",
            Style::default().fg(Color::DarkGray),
        ))),
    }
    let label = fl.cc_label();
    if let Some(cc) = app.footer.bpf_cc.iter().find(|c| c.label == label) {
        lines.push(Line::from("BPF run time (ns/call, calls/s):"));
        for (name, ns, rate) in &cc.callbacks {
            lines.push(Line::from(format!("  {name:<14} {ns:>6.0} {rate:>9.0}")));
        }
    }
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

fn fmt_var(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}

fn draw_sharing(f: &mut Frame, app: &App, rows: &[u64], area: Rect) {
    let block = Block::default().borders(Borders::ALL).title(" sharing ");
    let cookies = app.chart_flows(rows);
    let flows: Vec<&Flow> = cookies.iter().filter_map(|c| app.flows.get(c)).collect();
    if flows.len() < 2 {
        f.render_widget(
            Paragraph::new("mark two or more flows (Space) to overlay them and see their shares")
                .style(Style::default().fg(Color::DarkGray))
                .block(block)
                .wrap(Wrap { trim: true }),
            area,
        );
        return;
    }
    let (start, end) = app.window();
    let x: Vec<f64> = flows
        .iter()
        .map(|fl| mean_tput_in(fl, start, end))
        .collect();
    let total: f64 = x.iter().sum();
    let mut lines = vec![Line::from(format!(
        "Jain's index {}   total {:.2} Mbit/s",
        jain_index(&x).map_or("-".into(), |j| format!("{j:.3}")),
        total / 1e6
    ))];
    for (i, (fl, v)) in flows.iter().zip(&x).enumerate() {
        let share = if total > 0.0 { v / total * 100.0 } else { 0.0 };
        lines.push(Line::from(vec![
            Span::styled("■ ", Style::default().fg(PALETTE[i % PALETTE.len()])),
            Span::raw(format!(
                "{:<24} {:>5.1} %  {:>8.2} Mbit/s",
                fl.short_label(),
                share,
                v / 1e6
            )),
        ]));
    }
    f.render_widget(Paragraph::new(lines).block(block), area);
}

fn draw_status(f: &mut Frame, app: &App, area: Rect) {
    let line = match &app.mode {
        Mode::Filter(text) => Line::from(vec![
            Span::styled("filter> ", Style::default().fg(Color::Cyan)),
            Span::raw(format!("{text}_")),
            Span::styled(
                format!("   Enter apply, Esc cancel; {FILTER_SYNTAX}"),
                Style::default().fg(Color::DarkGray),
            ),
        ]),
        Mode::Confirm(a) => Line::from(Span::styled(
            format!("Move {} to {}? [y/N]", describe_scope(a), a.to),
            Style::default()
                .fg(Color::Yellow)
                .add_modifier(Modifier::BOLD),
        )),
        _ => Line::from(app.status.clone()),
    };
    f.render_widget(Paragraph::new(line), area);
}

fn draw_footer(f: &mut Frame, app: &App, area: Rect) {
    let ft = &app.footer;
    let mut text = format!(
        "samples/s {:.0}  drops {}  cpu {:.1}%",
        ft.samples_per_s, ft.drops, ft.cpu_pct
    );
    if let Some(note) = &ft.bpf_note {
        text += &format!("  bpf: {note}");
    } else {
        if let Some((ns, rate)) = ft.bpf_collector {
            text += &format!("  bpf: cctl_tcp_probe {ns:.0} ns/call x {rate:.0}/s");
        }
        for cc in ft.bpf_cc.iter().filter(|c| c.calls_per_s > 0.0) {
            text += &format!(
                "  {} {:.0} ns/call x {:.0}/s",
                cc.label, cc.ns_per_call, cc.calls_per_s
            );
        }
    }
    f.render_widget(
        Paragraph::new(text).style(Style::default().fg(Color::Black).bg(Color::Gray)),
        area,
    );
}

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

fn draw_migrate(f: &mut Frame, app: &App, area: Rect) {
    let Mode::Migrate {
        from,
        scope,
        input,
        pick,
    } = &app.mode
    else {
        return;
    };
    let choices = app.choices(from, input);
    let what = describe_scope(&super::app::MigrateAction {
        from: from.clone(),
        to: String::new(),
        scope: scope.clone(),
    });
    let mut lines = vec![
        Line::from(format!("Move {what}")),
        Line::from(vec![
            Span::raw("to: "),
            Span::styled(
                format!("{input}_"),
                Style::default().add_modifier(Modifier::BOLD),
            ),
        ]),
        Line::from(""),
    ];
    if choices.is_empty() {
        lines.push(Line::from(Span::styled(
            "no registered congestion control matches (Enter tries the typed name)",
            Style::default().fg(Color::DarkGray),
        )));
    }
    for (i, c) in choices.iter().enumerate().take(12) {
        let style = if i == *pick {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        };
        lines.push(Line::from(Span::styled(format!("  {c}"), style)));
    }
    lines.push(Line::from(""));
    lines.push(Line::from(Span::styled(
        "type to filter, Up/Down pick, Enter choose, Esc cancel",
        Style::default().fg(Color::DarkGray),
    )));
    let h = lines.len() as u16 + 2;
    let r = centered(area, 72, h);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" Migrate ")),
        r,
    );
}

/// Key help, one entry per line.
pub const HELP: &[(&str, &str)] = &[
    ("q / Ctrl-C", "quit"),
    ("Up/Down PgUp/PgDn Home/End", "select a flow"),
    ("s / r", "next sort column / reverse order"),
    ("/", "filter: port:N addr:A cc:NAME or a word"),
    ("Space / c", "mark a flow for the overlay / clear marks"),
    ("p", "pause (freeze the charts); p again = live"),
    ("Left/Right", "scroll the history (freezes)"),
    ("+ / -", "zoom in / out (chart window)"),
    ("0", "back to live"),
    ("m / M", "migrate the flow / every flow of its CC"),
    ("e", "export CSV of the samples and SVG of the charts"),
    ("?", "this help (any key closes it)"),
];

fn draw_help(f: &mut Frame, area: Rect) {
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(k, v)| Line::from(format!("{k:<28} {v}")))
        .collect();
    let r = centered(area, 76, lines.len() as u16 + 2);
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" keys ")),
        r,
    );
}
