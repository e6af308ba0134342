//! Dashboard tests without root: a fake sample source, ratatui's TestBackend, keys.

use std::collections::HashSet;

use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;

use super::app::{Action, App, Column, Filter, Mode, Scope};
use super::source::{FakeSource, Source};
use super::view::{self, nice_ceiling, series, Metric};

fn feed(app: &mut App, src: &mut FakeSource, secs: f64) {
    src.advance(secs);
    let mut buf = Vec::new();
    src.drain(&mut buf);
    for s in buf {
        let v = s.cc.starts_with("bpf_").then_some(1);
        app.ingest(s, v);
    }
    app.tick(src.now_ns());
}

fn screen(app: &App, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| view::draw(f, app)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..h)
        .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

fn key(app: &mut App, code: KeyCode) -> Option<Action> {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn typed(app: &mut App, text: &str) {
    for c in text.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn dashboard(flows: usize, secs: f64) -> App {
    let mut app = App::new(120.0, 10.0);
    app.targets = vec![
        "reno".into(),
        "cubic".into(),
        "bpf_htcp".into(),
        "bpf_reno".into(),
    ];
    let mut src = FakeSource::new(flows);
    feed(&mut app, &mut src, secs);
    app
}

/// The line of the screen that holds `needle`.
fn line_with<'a>(screen: &'a str, needle: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in\n{screen}"))
}

#[test]
fn an_empty_dashboard_says_it_waits_for_flows_and_draws_every_panel() {
    let app = dashboard(0, 1.0);
    let s = screen(&app, 160, 45);
    assert!(s.contains("cctl top  0 flows"), "{s}");
    assert!(s.contains("waiting for TCP flows"), "{s}");
    for panel in [
        " flows ",
        "cwnd (segments)",
        "srtt (ms)",
        "throughput (Mbit/s)",
        " internals ",
        " sharing ",
    ] {
        assert!(s.contains(panel), "panel {panel:?} missing:\n{s}");
    }
    assert!(s.contains("samples/s 0  drops 0  cpu 0.0%"), "{s}");
    assert!(s.contains("no flow selected"), "{s}");
}

#[test]
fn a_thousand_flows_fill_the_table_with_the_selection_on_the_first_row() {
    let mut app = dashboard(1000, 3.0);
    let s = screen(&app, 200, 50);
    assert!(s.contains("cctl top  1000 flows"), "{s}");
    let header = line_with(&s, "ssthresh");
    for col in Column::ALL {
        assert!(
            header.contains(col.title()),
            "{} not in {header}",
            col.title()
        );
    }
    let rows = app.rows();
    assert_eq!(rows.len(), 1000);
    let page = app.page_rows.get();
    let shown: Vec<&str> = s.lines().filter(|l| l.contains("10.0.0.2:520")).collect();
    assert_eq!(shown.len(), page, "one line per visible row\n{s}");
    // End selects the last row, and the table scrolls to show it.
    key(&mut app, KeyCode::End);
    let s = screen(&app, 200, 50);
    let last = &app.flows[rows.last().unwrap()];
    assert!(
        s.contains(&last.local()),
        "last row {} not shown\n{s}",
        last.local()
    );
}

#[test]
fn sorting_by_any_column_orders_the_rows_and_marks_the_header() {
    let mut app = dashboard(40, 7.3);
    // Default: throughput, descending.
    let tput: Vec<f64> = app.rows().iter().map(|c| app.flows[c].tput_bps).collect();
    assert!(tput.windows(2).all(|w| w[0] >= w[1]), "{tput:?}");
    while app.sort != Column::Cwnd {
        key(&mut app, KeyCode::Char('s'));
    }
    let cwnd: Vec<u32> = app.rows().iter().map(|c| app.flows[c].last.cwnd).collect();
    assert!(cwnd.windows(2).all(|w| w[0] >= w[1]), "{cwnd:?}");
    let s = screen(&app, 200, 50);
    assert!(line_with(&s, "ssthresh").contains("cwnd▼"), "{s}");
    let first = &app.flows[&app.rows()[0]];
    let first_line = s.lines().find(|l| l.contains("10.0.0.2:520")).unwrap();
    assert!(first_line.contains(&first.local()), "{first_line}");
    assert_eq!(first.last.cwnd, *cwnd.iter().max().unwrap());
    key(&mut app, KeyCode::Char('r'));
    let cwnd: Vec<u32> = app.rows().iter().map(|c| app.flows[c].last.cwnd).collect();
    assert!(cwnd.windows(2).all(|w| w[0] <= w[1]), "{cwnd:?}");
    // Every column can be the key and gives a total order (ties broken by cookie).
    for _ in 0..Column::ALL.len() {
        key(&mut app, KeyCode::Char('s'));
        let rows = app.rows();
        assert_eq!(rows.iter().collect::<HashSet<_>>().len(), 40);
    }
}

#[test]
fn filtering_by_port_address_and_cc_keeps_only_matching_flows() {
    let mut app = dashboard(40, 2.0);
    key(&mut app, KeyCode::Char('/'));
    typed(&mut app, "port:5202");
    key(&mut app, KeyCode::Enter);
    let rows = app.rows();
    assert_eq!(rows.len(), 10);
    assert!(rows.iter().all(|c| app.flows[c].last.dport == 5202));
    let s = screen(&app, 200, 50);
    assert!(s.contains("10/40 flows"), "{s}");
    assert!(!s.contains("10.0.0.2:5201 "), "{s}");

    let f = Filter::parse("cc:cubic addr:10.0.0.2").unwrap();
    app.filter = f;
    assert!(app.rows().iter().all(|c| app.flows[c].last.cc == "cubic"));
    assert_eq!(app.rows().len(), 13);
    app.filter = Filter::parse("40007").unwrap();
    assert_eq!(app.rows().len(), 1);
    app.filter = Filter::parse("addr:192.168.").unwrap();
    let s = screen(&app, 200, 50);
    assert!(s.contains("no flow matches the filter"), "{s}");

    // A bad term is refused with what is allowed, and the old filter stays.
    key(&mut app, KeyCode::Char('/'));
    for _ in 0..20 {
        key(&mut app, KeyCode::Backspace);
    }
    typed(&mut app, "port:http");
    key(&mut app, KeyCode::Enter);
    assert!(matches!(app.mode, Mode::Filter(_)));
    assert!(
        app.status.contains("a port is a number 0-65535"),
        "{}",
        app.status
    );
    assert!(app.status.contains("addr:A"), "{}", app.status);
    assert_eq!(app.filter.text(), "addr:192.168.");
    key(&mut app, KeyCode::Esc);
    // An empty filter clears it.
    key(&mut app, KeyCode::Char('/'));
    for _ in 0..20 {
        key(&mut app, KeyCode::Backspace);
    }
    key(&mut app, KeyCode::Enter);
    assert_eq!(app.rows().len(), 40);
}

#[test]
fn charts_scale_to_the_data_and_follow_zoom_scroll_and_pause() {
    assert_eq!(nice_ceiling(0.0), 1.0);
    assert_eq!(nice_ceiling(0.7), 1.0);
    assert_eq!(nice_ceiling(1.3), 2.0);
    assert_eq!(nice_ceiling(44.0), 50.0);
    assert_eq!(nice_ceiling(50.0), 50.0);
    assert_eq!(nice_ceiling(51.0), 100.0);
    assert_eq!(nice_ceiling(7300.0), 10000.0);

    let mut app = dashboard(5, 60.0);
    let rows = app.rows();
    let flows: Vec<_> = rows.iter().map(|c| &app.flows[c]).collect();
    let (start, end) = app.window();
    assert_eq!(end - start, 30_000_000_000);
    let (data, top) = series(&flows, Metric::Cwnd, start, end);
    let max = data.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
    assert!(
        max > 0.0 && top >= max * 1.1 && top <= max * 1.1 * 2.5,
        "{max} {top}"
    );
    for d in &data {
        assert!(
            d.iter().all(|p| (-30.0..=0.0).contains(&p.0)),
            "x outside the window"
        );
        assert!((295..=301).contains(&d.len()), "30 s at 10 Hz: {}", d.len());
    }
    let s = screen(&app, 200, 50);
    assert!(
        s.contains(&format!("{top:.0}")),
        "y-axis top {top} not labelled\n{s}"
    );
    assert!(s.contains("-30s"), "{s}");

    // Zoom in to 15 s, out to 60 s; never below 5 s nor beyond the history.
    key(&mut app, KeyCode::Char('+'));
    assert_eq!(app.view.window_s, 15.0);
    for _ in 0..5 {
        key(&mut app, KeyCode::Char('+'));
    }
    assert_eq!(app.view.window_s, 5.0);
    for _ in 0..10 {
        key(&mut app, KeyCode::Char('-'));
    }
    assert_eq!(app.view.window_s, 120.0);
    key(&mut app, KeyCode::Char('+'));
    key(&mut app, KeyCode::Char('+'));
    assert_eq!(app.view.window_s, 30.0);

    // Pause freezes the window while samples keep arriving; Left scrolls back; 0 = live.
    key(&mut app, KeyCode::Char('p'));
    let frozen = app.window();
    let mut src = FakeSource::new(5);
    src.advance(60.0);
    let mut sink = Vec::new();
    src.drain(&mut sink);
    feed(&mut app, &mut src, 5.0);
    assert_eq!(app.window(), frozen);
    assert!(screen(&app, 200, 50).contains("FROZEN 5.0 s ago"));
    key(&mut app, KeyCode::Left);
    assert_eq!(app.window().1, frozen.1 - 7_500_000_000);
    key(&mut app, KeyCode::Char('0'));
    assert_eq!(app.window().1, app.now_ns);
    assert!(screen(&app, 200, 50).contains("LIVE"));
}

#[test]
fn marked_flows_are_overlaid_with_jains_index_and_their_shares() {
    // The index itself is cctl_metrics::jain_index, tested there.
    let mut app = dashboard(6, 20.0);
    let s = screen(&app, 200, 50);
    assert!(s.contains("mark two or more flows"), "{s}");
    key(&mut app, KeyCode::Char(' '));
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Char(' '));
    assert_eq!(app.marked.len(), 2);
    let s = screen(&app, 200, 50);
    let jain = line_with(&s, "Jain's index");
    let j: f64 = jain
        .split("Jain's index ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((0.5..=1.0).contains(&j), "{jain}");
    let shares: Vec<f64> = s
        .lines()
        .filter(|l| l.contains("% "))
        .filter_map(|l| {
            let before = l.split(" %").next()?;
            before.split_whitespace().last()?.parse().ok()
        })
        .collect();
    assert_eq!(shares.len(), 2, "{s}");
    assert!(
        (shares.iter().sum::<f64>() - 100.0).abs() < 0.2,
        "{shares:?}"
    );
    key(&mut app, KeyCode::Char('c'));
    assert!(app.marked.is_empty());
}

#[test]
fn the_internals_panel_shows_our_algorithms_variables_and_explains_native_ones() {
    let mut app = dashboard(3, 3.0);
    app.sort = Column::Local;
    app.descending = false;
    // Flow 0 runs bpf_htcp (fake version 1), flow 1 cubic.
    let s = screen(&app, 200, 50);
    assert!(
        s.contains("bpf_htcp@v1  Open") || s.contains("bpf_htcp@v1  Recovery"),
        "{s}"
    );
    assert!(s.contains("htcp: Δ"), "{s}");
    assert!(line_with(&s, "alpha").contains('3'), "{s}");
    key(&mut app, KeyCode::Down);
    let s = screen(&app, 200, 50);
    assert!(s.contains("native congestion control"), "{s}");
}

#[test]
fn migrating_from_the_dashboard_asks_for_a_target_and_a_confirmation() {
    let mut app = dashboard(3, 2.0);
    app.sort = Column::Local;
    app.descending = false;
    key(&mut app, KeyCode::Char('m'));
    let s = screen(&app, 200, 50);
    assert!(s.contains(" Migrate "), "{s}");
    assert!(
        s.contains("10.0.0.1:40000 > 10.0.0.2:5201 (bpf_htcp)"),
        "{s}"
    );
    // The flow's own CC is not offered; prefix matches (also after `bpf_`) come first.
    assert!(app.choices("bpf_htcp", "").iter().all(|c| c != "bpf_htcp"));
    assert_eq!(app.choices("bpf_htcp", "reno"), ["reno", "bpf_reno"]);
    assert_eq!(app.choices("reno", "c"), ["cubic", "bpf_htcp"]);
    typed(&mut app, "ren");
    key(&mut app, KeyCode::Down);
    key(&mut app, KeyCode::Enter);
    let Mode::Confirm(a) = app.mode.clone() else {
        panic!("expected a confirmation, got {:?}", app.mode)
    };
    assert_eq!((a.from.as_str(), a.to.as_str()), ("bpf_htcp", "bpf_reno"));
    assert_eq!(
        a.scope,
        Scope::Flow {
            cookie: 1000,
            label: "10.0.0.1:40000 > 10.0.0.2:5201".into()
        }
    );
    let s = screen(&app, 200, 50);
    assert!(s.contains("to bpf_reno? [y/N]"), "{s}");
    // Anything but y cancels.
    assert_eq!(key(&mut app, KeyCode::Char('n')), None);
    assert_eq!(app.status, "migration cancelled");
    // M: every flow of the CC; a typed exact name wins over the list.
    key(&mut app, KeyCode::Char('M'));
    typed(&mut app, "reno");
    key(&mut app, KeyCode::Enter);
    let act = key(&mut app, KeyCode::Char('y'));
    let Some(Action::Migrate(a)) = act else {
        panic!("expected a migration, got {act:?}")
    };
    assert_eq!((a.to.as_str(), &a.scope), ("reno", &Scope::AllOf));
    assert!(app
        .status
        .starts_with("migrating every established bpf_htcp flow"));
    // Esc leaves the dialog without acting.
    key(&mut app, KeyCode::Char('m'));
    assert_eq!(key(&mut app, KeyCode::Esc), None);
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn quit_interrupt_and_help_keys() {
    let mut app = dashboard(1, 1.0);
    assert_eq!(key(&mut app, KeyCode::Char('q')), Some(Action::Quit));
    assert_eq!(
        app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Some(Action::Interrupt)
    );
    key(&mut app, KeyCode::Char('?'));
    let s = screen(&app, 160, 45);
    assert!(s.contains(" keys "), "{s}");
    assert!(s.contains("migrate the flow / every flow of its CC"), "{s}");
    key(&mut app, KeyCode::Char('x'));
    assert_eq!(app.mode, Mode::Normal);
}

#[test]
fn silent_flows_expire_unless_the_view_is_frozen() {
    let mut app = dashboard(4, 1.0);
    assert_eq!(app.flows.len(), 4);
    app.tick(app.now_ns + 5_000_000_000);
    assert_eq!(app.flows.len(), 4);
    key(&mut app, KeyCode::Char('p'));
    app.tick(app.now_ns + 20_000_000_000);
    assert_eq!(app.flows.len(), 4);
    key(&mut app, KeyCode::Char('p'));
    app.tick(app.now_ns + 1);
    assert!(app.flows.is_empty());
}

#[test]
fn history_is_bounded_and_throughput_comes_from_bytes_acked() {
    let mut app = App::new(10.0, 10.0);
    let mut src = FakeSource::new(2);
    feed(&mut app, &mut src, 30.0);
    for f in app.flows.values() {
        let span = f.history.back().unwrap().t_ns - f.history.front().unwrap().t_ns;
        assert!(span <= 10_000_000_000, "{span}");
        assert!((99..=101).contains(&f.history.len()), "{}", f.history.len());
        // The fake sends cwnd * 1448 B per srtt.
        let p = f.history.back().unwrap();
        let expect = f64::from(p.cwnd) * 1448.0 * 8.0 / (f64::from(p.srtt_us) / 1e6);
        assert!(
            (p.tput_bps / expect - 1.0).abs() < 0.01,
            "{} vs {expect}",
            p.tput_bps
        );
        assert!(f.tput_bps > 0.0);
    }
}

#[test]
fn export_writes_the_samples_on_screen_as_csv_and_the_charts_as_svg() {
    let mut app = dashboard(3, 12.0);
    app.filter = Filter::parse("port:5201").unwrap();
    let dir = std::env::temp_dir().join(format!("cctl-top-export-{}", std::process::id()));
    let out = super::export::export(&app, &dir).unwrap();
    let text = std::fs::read_to_string(&out.csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next().unwrap(),
        "t_s,ts_ns,cookie,local,remote,cc,ca_state,cwnd,ssthresh,srtt_us,rttvar_us,bytes_acked,tput_bps,total_retrans"
    );
    // 3 flows, all on port 5201, 12 s at 10 Hz inside the 30-s window.
    assert_eq!(out.rows, lines.count());
    assert!((3 * 120..=3 * 121).contains(&out.rows), "{}", out.rows);
    assert_eq!(out.svgs.len(), 3);
    for svg in &out.svgs {
        let body = std::fs::read_to_string(svg).unwrap();
        assert!(
            body.starts_with("<svg") && body.contains("<polyline"),
            "{}",
            svg.display()
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_state_change_sample_soon_after_a_periodic_one_does_not_spike_the_chart() {
    // 10 Mbit/s = 125,000 B per 100-ms sample; then a sample at a CA state change 2 ms
    // later whose cumulative ACK covers 30,000 B SACKed during recovery. Over those 2 ms
    // alone that is 120 Mbit/s; the chart measures over at least 100 ms.
    let mut app = App::new(120.0, 10.0);
    let mut src = FakeSource::new(1);
    let t0 = 1_000_000_000_000u64;
    let mut acked = 0u64;
    for k in 0..=10u64 {
        let mut s = src.sample(0, t0 + k * 100_000_000);
        s.bytes_acked = acked;
        app.ingest(s, Some(1));
        acked += 125_000;
    }
    acked -= 125_000;
    let mut s = src.sample(0, t0 + 1_002_000_000);
    s.bytes_acked = acked + 30_000;
    s.state_change = true;
    app.ingest(s, Some(1));
    let f = app.flows.values().next().unwrap();
    let p = f.history.back().unwrap();
    let mbps = p.tput_bps / 1e6;
    // (125,000 + 30,000) B over 102 ms.
    assert!(
        (mbps - 155_000.0 * 8.0 / 0.102 / 1e6).abs() < 0.01,
        "{mbps}"
    );
    assert!(mbps < 13.0, "{mbps}");
    // Regular points are still the rate over their own 100 ms.
    let prev = &f.history[f.history.len() - 2];
    assert!(
        (prev.tput_bps / 1e6 - 10.0).abs() < 1e-9,
        "{}",
        prev.tput_bps
    );
}

#[test]
fn an_ssthresh_above_infinite_is_shown_marked_not_as_infinite() {
    let mut app = App::new(120.0, 10.0);
    let mut src = FakeSource::new(1);
    src.advance(2.0);
    let mut buf = Vec::new();
    src.drain(&mut buf);
    let mut s = buf.pop().expect("a sample");
    // What the host kernel of docs/explanation/known-problems.md stores (a stale stack word).
    s.ssthresh = Some(0x8110_4110);
    s.cwnd = 721_775_367;
    app.ingest(s.clone(), None);
    app.tick(src.now_ns());
    let scr = screen(&app, 200, 45);
    let row = line_with(&scr, "721775367");
    assert!(row.contains("!2165326096"), "{scr}");

    // Infinite stays "-", a normal value is shown as is.
    s.ts_ns += 1_000_000;
    s.ssthresh = None;
    s.cwnd = 10;
    app.ingest(s.clone(), None);
    app.tick(src.now_ns());
    let scr = screen(&app, 200, 45);
    assert!(!scr.contains("!2165326096"), "{scr}");
    s.ts_ns += 1_000_000;
    s.ssthresh = Some(7);
    app.ingest(s, None);
    app.tick(src.now_ns());
    let scr = screen(&app, 200, 45);
    assert!(!scr.contains('!'), "{scr}");
}
