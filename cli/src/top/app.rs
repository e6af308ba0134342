//! The dashboard's state: flows and their sample history, sorting, filtering, selection,
//! the chart view (window, scroll, pause) and the dialogs; key handling. No I/O here:
//! samples come in through [`App::ingest`], actions go out as [`Action`]s.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::IpAddr;

use cctl_loader::sample::{CaState, Sample};
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// One point of a flow's history (what the charts and the CSV export show).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// CLOCK_MONOTONIC time of the sample, ns.
    pub t_ns: u64,
    /// Congestion window, segments.
    pub cwnd: u32,
    /// Slow-start threshold, segments; `None` while "infinite" (a value above
    /// `TCP_INFINITE_SSTHRESH` is kept, as in [`Sample::ssthresh`]).
    pub ssthresh: Option<u32>,
    /// Kernel srtt, usec.
    pub srtt_us: u32,
    /// Kernel rttvar (mdev), usec.
    pub rttvar_us: u32,
    /// Bytes acknowledged over the connection's life.
    pub bytes_acked: u64,
    /// Throughput up to this point over at least [`CHART_TPUT_SPAN_NS`] (from the newest earlier
    /// point that far back), bit/s; 0 for a flow's first point.
    pub tput_bps: f64,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// CA state.
    pub ca_state: CaState,
}

/// One flow (socket cookie) as the dashboard knows it.
#[derive(Debug, Clone)]
pub struct Flow {
    /// The newest sample.
    pub last: Sample,
    /// Loaded version of a cctl congestion control (`bpf_htcp@v2`), if known.
    pub version: Option<u32>,
    /// Points, oldest first, at most [`App::history_ns`] old.
    pub history: VecDeque<Point>,
    /// Throughput over about the last second, bit/s.
    pub tput_bps: f64,
}

impl Flow {
    /// `addr:port` of the local end.
    pub fn local(&self) -> String {
        endpoint(self.last.saddr, self.last.sport)
    }

    /// `addr:port` of the remote end.
    pub fn remote(&self) -> String {
        endpoint(self.last.daddr, self.last.dport)
    }

    /// CC name with the loaded version of cctl's BPF ones: `bpf_reno@v1`, `cubic`.
    pub fn cc_label(&self) -> String {
        match self.version {
            Some(v) => format!("{}@v{v}", self.last.cc),
            None => self.last.cc.to_string(),
        }
    }

    /// Short label for chart legends: `:40000>:5201 bpf_reno`.
    pub fn short_label(&self) -> String {
        format!(":{}>:{} {}", self.last.sport, self.last.dport, self.last.cc)
    }
}

fn endpoint(a: IpAddr, port: u16) -> String {
    match a {
        IpAddr::V4(_) => format!("{a}:{port}"),
        IpAddr::V6(_) => format!("[{a}]:{port}"),
    }
}

/// Flow-table columns, in display order; each can be the sort key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// Local address and port.
    Local,
    /// Remote address and port.
    Remote,
    /// Congestion control.
    Cc,
    /// CA state.
    State,
    /// cwnd, segments.
    Cwnd,
    /// ssthresh, segments.
    Ssthresh,
    /// srtt, ms.
    Srtt,
    /// rttvar, ms.
    Rttvar,
    /// Throughput, Mbit/s.
    Tput,
    /// Retransmitted segments over the connection's life.
    Retrans,
}

impl Column {
    /// All columns in display order.
    pub const ALL: [Column; 10] = [
        Column::Local,
        Column::Remote,
        Column::Cc,
        Column::State,
        Column::Cwnd,
        Column::Ssthresh,
        Column::Srtt,
        Column::Rttvar,
        Column::Tput,
        Column::Retrans,
    ];

    /// Header text.
    pub fn title(self) -> &'static str {
        match self {
            Column::Local => "Local",
            Column::Remote => "Remote",
            Column::Cc => "CC",
            Column::State => "State",
            Column::Cwnd => "cwnd",
            Column::Ssthresh => "ssthresh",
            Column::Srtt => "srtt ms",
            Column::Rttvar => "rttvar ms",
            Column::Tput => "Mbit/s",
            Column::Retrans => "retrans",
        }
    }

    fn compare(self, a: &Flow, b: &Flow) -> std::cmp::Ordering {
        let (x, y) = (&a.last, &b.last);
        match self {
            Column::Local => (x.saddr, x.sport).cmp(&(y.saddr, y.sport)),
            Column::Remote => (x.daddr, x.dport).cmp(&(y.daddr, y.dport)),
            Column::Cc => x.cc.cmp(y.cc).then(a.version.cmp(&b.version)),
            Column::State => (x.ca_state as u8).cmp(&(y.ca_state as u8)),
            Column::Cwnd => x.cwnd.cmp(&y.cwnd),
            Column::Ssthresh => x
                .ssthresh
                .unwrap_or(u32::MAX)
                .cmp(&y.ssthresh.unwrap_or(u32::MAX)),
            Column::Srtt => x.srtt_us.cmp(&y.srtt_us),
            Column::Rttvar => x.rttvar_us.cmp(&y.rttvar_us),
            Column::Tput => a.tput_bps.total_cmp(&b.tput_bps),
            Column::Retrans => x.total_retrans.cmp(&y.total_retrans),
        }
    }
}

/// A parsed flow filter: every term must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    terms: Vec<Term>,
    text: String,
}

#[derive(Debug, Clone, PartialEq)]
enum Term {
    Port(u16),
    Addr(String),
    Cc(String),
    Word(String),
}

/// What the filter prompt accepts (shown in errors and help).
pub const FILTER_SYNTAX: &str =
    "terms: port:N (local or remote), addr:A (prefix of either address), cc:NAME (substring), \
     or a bare word (substring of address, port or CC); all terms must match";

impl Filter {
    /// Parses `port:5201 cc:htcp 10.0.0.2`.
    ///
    /// Errors: a message naming the bad term and what is allowed.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let mut terms = Vec::new();
        for w in text.split_whitespace() {
            let term =
                match w.split_once(':') {
                    Some(("port", v)) => Term::Port(v.parse().map_err(|_| {
                        format!("`{w}`: a port is a number 0-65535; {FILTER_SYNTAX}")
                    })?),
                    Some(("addr", v)) if !v.is_empty() => Term::Addr(v.to_string()),
                    Some(("cc", v)) if !v.is_empty() => Term::Cc(v.to_string()),
                    Some((k @ ("addr" | "cc"), _)) => {
                        return Err(format!("`{w}`: {k}: needs a value; {FILTER_SYNTAX}"))
                    }
                    _ => Term::Word(w.to_string()),
                };
            terms.push(term);
        }
        Ok(Filter {
            terms,
            text: text.trim().to_string(),
        })
    }

    /// The text it was parsed from.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether `f` passes every term.
    pub fn matches(&self, f: &Flow) -> bool {
        let s = &f.last;
        self.terms.iter().all(|t| match t {
            Term::Port(p) => s.sport == *p || s.dport == *p,
            Term::Addr(a) => {
                s.saddr.to_string().starts_with(a.as_str())
                    || s.daddr.to_string().starts_with(a.as_str())
            }
            Term::Cc(c) => s.cc.contains(c.as_str()),
            Term::Word(w) => {
                f.local().contains(w.as_str())
                    || f.remote().contains(w.as_str())
                    || s.cc.contains(w.as_str())
            }
        })
    }
}

/// Which flows a migration moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One flow, by socket cookie.
    Flow {
        /// Socket cookie.
        cookie: u64,
        /// `local > remote` for the confirmation text.
        label: String,
    },
    /// Every established flow running the CC, in every namespace.
    AllOf,
}

/// A migration the user confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateAction {
    /// Congestion control the flows run now.
    pub from: String,
    /// Target congestion control.
    pub to: String,
    /// Which flows.
    pub scope: Scope,
}

/// What the event loop must do after a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Leave the dashboard (`q`): exit 0.
    Quit,
    /// Ctrl-C: leave the dashboard, exit 130.
    Interrupt,
    /// Run a migration (in the background) and report it with [`App::set_status`].
    Migrate(MigrateAction),
    /// Export the samples and the chart of what is on screen.
    Export,
}

/// The input mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Browsing.
    Normal,
    /// Typing a filter.
    Filter(String),
    /// Choosing a migration target.
    Migrate {
        /// Source CC.
        from: String,
        /// Which flows.
        scope: Scope,
        /// Typed target name.
        input: String,
        /// Index into the matching choices.
        pick: usize,
    },
    /// Waiting for `y` to run a migration.
    Confirm(MigrateAction),
    /// The key help.
    Help,
}

/// Chart view: what part of the history the charts show.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View {
    /// Width of the chart window, s.
    pub window_s: f64,
    /// Frozen end of the window (CLOCK_MONOTONIC ns); `None` = live.
    pub frozen_end_ns: Option<u64>,
}

/// Chart window limits, s.
pub const MIN_WINDOW_S: f64 = 5.0;
/// Most chart flows drawn at once (overlay); more marked flows are listed, not drawn.
pub const MAX_CHART_FLOWS: usize = 8;

/// The whole dashboard state.
pub struct App {
    /// Flows by socket cookie.
    pub flows: HashMap<u64, Flow>,
    /// Sort column.
    pub sort: Column,
    /// Descending order.
    pub descending: bool,
    /// Active filter.
    pub filter: Filter,
    /// Selected flow (cookie).
    pub selected: Option<u64>,
    /// Flows marked for the chart overlay.
    pub marked: BTreeSet<u64>,
    /// Chart view.
    pub view: View,
    /// Input mode.
    pub mode: Mode,
    /// Result of the last action, shown above the footer.
    pub status: String,
    /// Newest time known (CLOCK_MONOTONIC ns): the live end of the charts.
    pub now_ns: u64,
    /// History kept per flow, ns.
    pub history_ns: u64,
    /// Flows with no sample for this long are dropped, ns.
    pub expire_ns: u64,
    /// Congestion controls a migration may target (the kernel's available list).
    pub targets: Vec<String>,
    /// First table row shown (kept by the renderer so the selection stays visible).
    pub table_offset: std::cell::Cell<usize>,
    /// Rows that fit in the table (set by the renderer), for PgUp/PgDn.
    pub page_rows: std::cell::Cell<usize>,
    /// Footer figures.
    pub footer: Footer,
}

/// Figures of the footer, refreshed about once a second by the event loop.
#[derive(Debug, Clone, Default)]
pub struct Footer {
    /// Samples delivered per second over the last refresh.
    pub samples_per_s: f64,
    /// Ring-buffer drops since start.
    pub drops: u64,
    /// The dashboard's own CPU use, % of one core.
    pub cpu_pct: f64,
    /// The collector program's run time: (ns per call, calls per s).
    pub bpf_collector: Option<(f64, f64)>,
    /// Run time of each loaded cctl congestion control's callbacks.
    pub bpf_cc: Vec<BpfCc>,
    /// Why BPF stats are missing, if they are.
    pub bpf_note: Option<String>,
}

/// BPF run time of one loaded cctl congestion control (BPF stats over the last refresh).
#[derive(Debug, Clone, Default)]
pub struct BpfCc {
    /// CC name with version, as in the table (`bpf_htcp@v2`).
    pub label: String,
    /// Mean run time per callback invocation, ns.
    pub ns_per_call: f64,
    /// Callback invocations per second.
    pub calls_per_s: f64,
    /// Per callback (`cong_avoid`, ...): (name, ns per call, calls per s).
    pub callbacks: Vec<(String, f64, f64)>,
}

impl App {
    /// An empty dashboard keeping `history_s` of samples per flow and dropping flows silent
    /// for `expire_s`.
    pub fn new(history_s: f64, expire_s: f64) -> App {
        App {
            flows: HashMap::new(),
            sort: Column::Tput,
            descending: true,
            filter: Filter::default(),
            selected: None,
            marked: BTreeSet::new(),
            view: View {
                window_s: history_s.clamp(MIN_WINDOW_S, 30.0),
                frozen_end_ns: None,
            },
            mode: Mode::Normal,
            status: String::new(),
            now_ns: 0,
            history_ns: (history_s * 1e9) as u64,
            expire_ns: (expire_s * 1e9) as u64,
            targets: Vec::new(),
            table_offset: std::cell::Cell::new(0),
            page_rows: std::cell::Cell::new(10),
            footer: Footer::default(),
        }
    }

    /// Adds one sample, with the loaded version of its CC when known.
    pub fn ingest(&mut self, s: Sample, version: Option<u32>) {
        self.now_ns = self.now_ns.max(s.ts_ns);
        let history_ns = self.history_ns;
        let flow = self.flows.entry(s.cookie).or_insert_with(|| Flow {
            last: s.clone(),
            version,
            history: VecDeque::new(),
            tput_bps: 0.0,
        });
        flow.history.push_back(Point {
            t_ns: s.ts_ns,
            cwnd: s.cwnd,
            ssthresh: s.ssthresh,
            srtt_us: s.srtt_us,
            rttvar_us: s.rttvar_us,
            bytes_acked: s.bytes_acked,
            tput_bps: 0.0,
            total_retrans: s.total_retrans,
            ca_state: s.ca_state,
        });
        while flow
            .history
            .front()
            .is_some_and(|p| s.ts_ns.saturating_sub(p.t_ns) > history_ns)
        {
            flow.history.pop_front();
        }
        // The chart's point: throughput over at least CHART_TPUT_SPAN_NS, so a sample taken
        // at a CA state change a few ms after the previous one does not turn a cumulative
        // ACK after recovery into a spike far above the bottleneck rate.
        let point_tput = rate_over(&flow.history, CHART_TPUT_SPAN_NS);
        flow.history.back_mut().expect("just pushed").tput_bps = point_tput;
        // The table's figure: throughput over about the last second.
        flow.tput_bps = rate_over(&flow.history, 1_000_000_000);
        flow.version = version.or(if flow.last.cc == s.cc {
            flow.version
        } else {
            None
        });
        flow.last = s;
    }

    /// Advances the live clock to `now_ns` and drops flows silent for longer than the
    /// expiry (unless the view is frozen: a frozen screen keeps what it shows).
    pub fn tick(&mut self, now_ns: u64) {
        self.now_ns = self.now_ns.max(now_ns);
        if self.view.frozen_end_ns.is_some() {
            return;
        }
        let (now, expire) = (self.now_ns, self.expire_ns);
        self.flows
            .retain(|_, f| now.saturating_sub(f.last.ts_ns) <= expire);
        self.marked.retain(|c| self.flows.contains_key(c));
    }

    /// Cookies of the flows that pass the filter, in table order.
    pub fn rows(&self) -> Vec<u64> {
        let mut v: Vec<&Flow> = self
            .flows
            .values()
            .filter(|f| self.filter.matches(f))
            .collect();
        let col = self.sort;
        v.sort_by(|a, b| {
            let o = col.compare(a, b);
            let o = if self.descending { o.reverse() } else { o };
            o.then(a.last.cookie.cmp(&b.last.cookie))
        });
        v.into_iter().map(|f| f.last.cookie).collect()
    }

    /// The selected flow if it is in `rows`, else the first row.
    pub fn selected_in(&self, rows: &[u64]) -> Option<u64> {
        match self.selected {
            Some(c) if rows.contains(&c) => Some(c),
            _ => rows.first().copied(),
        }
    }

    /// Flows the charts show: the marked ones that pass the filter (at most
    /// [`MAX_CHART_FLOWS`]), else the selected one.
    pub fn chart_flows(&self, rows: &[u64]) -> Vec<u64> {
        let marked: Vec<u64> = rows
            .iter()
            .copied()
            .filter(|c| self.marked.contains(c))
            .take(MAX_CHART_FLOWS)
            .collect();
        if marked.is_empty() {
            self.selected_in(rows).into_iter().collect()
        } else {
            marked
        }
    }

    /// The chart window `[start, end]`, CLOCK_MONOTONIC ns.
    pub fn window(&self) -> (u64, u64) {
        let end = self.view.frozen_end_ns.unwrap_or(self.now_ns);
        let w = (self.view.window_s * 1e9) as u64;
        (end.saturating_sub(w), end)
    }

    /// Shows `msg` in the status line.
    pub fn set_status(&mut self, msg: impl Into<String>) {
        self.status = msg.into();
    }

    /// Targets offered in the migrate dialog: the kernel's CCs except `from` that contain
    /// the typed text, best matches first.
    pub fn choices(&self, from: &str, input: &str) -> Vec<String> {
        // Exact name first, then names (or cctl names without `bpf_`) that start with the
        // text, then the rest that contain it; kernel order within each group.
        let rank = |t: &str| {
            if t == input {
                0
            } else if t.starts_with(input)
                || t.strip_prefix("bpf_").is_some_and(|k| k.starts_with(input))
            {
                1
            } else {
                2
            }
        };
        let mut v: Vec<&String> = self
            .targets
            .iter()
            .filter(|t| t.as_str() != from && t.contains(input))
            .collect();
        v.sort_by_key(|t| rank(t));
        v.into_iter().cloned().collect()
    }

    /// Handles one key; returns what the event loop must do.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Some(Action::Interrupt);
        }
        match std::mem::replace(&mut self.mode, Mode::Normal) {
            Mode::Normal => self.on_normal_key(key),
            Mode::Help => None,
            Mode::Filter(mut text) => {
                match key.code {
                    KeyCode::Enter => match Filter::parse(&text) {
                        Ok(f) => {
                            self.set_status(if f.text().is_empty() {
                                "filter cleared".to_string()
                            } else {
                                format!("filter: {}", f.text())
                            });
                            self.filter = f;
                        }
                        Err(e) => {
                            self.set_status(format!("filter not applied: {e}"));
                            self.mode = Mode::Filter(text);
                        }
                    },
                    KeyCode::Esc => {}
                    KeyCode::Backspace => {
                        text.pop();
                        self.mode = Mode::Filter(text);
                    }
                    KeyCode::Char(c) => {
                        text.push(c);
                        self.mode = Mode::Filter(text);
                    }
                    _ => self.mode = Mode::Filter(text),
                }
                None
            }
            Mode::Migrate {
                from,
                scope,
                mut input,
                mut pick,
            } => {
                let choices = self.choices(&from, &input);
                match key.code {
                    KeyCode::Esc => {
                        self.set_status("migration cancelled");
                        return None;
                    }
                    KeyCode::Enter => {
                        let to = if choices.contains(&input) || choices.is_empty() {
                            input.trim().to_string()
                        } else {
                            choices[pick.min(choices.len() - 1)].clone()
                        };
                        if to.is_empty() {
                            self.set_status(
                                "migration: type or pick a target congestion control (Esc cancels)",
                            );
                        } else {
                            self.mode = Mode::Confirm(MigrateAction { from, to, scope });
                            return None;
                        }
                    }
                    KeyCode::Up => pick = pick.saturating_sub(1),
                    KeyCode::Down => pick = (pick + 1).min(choices.len().saturating_sub(1)),
                    KeyCode::Backspace => {
                        input.pop();
                        pick = 0;
                    }
                    KeyCode::Char(c) => {
                        input.push(c);
                        pick = 0;
                    }
                    _ => {}
                }
                self.mode = Mode::Migrate {
                    from,
                    scope,
                    input,
                    pick,
                };
                None
            }
            Mode::Confirm(action) => {
                if matches!(key.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                    self.set_status(format!(
                        "migrating {} to {}...",
                        describe_scope(&action),
                        action.to
                    ));
                    Some(Action::Migrate(action))
                } else {
                    self.set_status("migration cancelled");
                    None
                }
            }
        }
    }

    fn on_normal_key(&mut self, key: KeyEvent) -> Option<Action> {
        let rows = self.rows();
        let cur = self
            .selected_in(&rows)
            .and_then(|c| rows.iter().position(|r| *r == c));
        let select = |app: &mut App, i: usize| {
            if !rows.is_empty() {
                app.selected = Some(rows[i.min(rows.len() - 1)]);
            }
        };
        let page = self.page_rows.get().max(1);
        match key.code {
            KeyCode::Char('q') => return Some(Action::Quit),
            KeyCode::Char('?') => self.mode = Mode::Help,
            KeyCode::Up | KeyCode::Char('k') => select(self, cur.unwrap_or(0).saturating_sub(1)),
            KeyCode::Down | KeyCode::Char('j') => select(self, cur.map_or(0, |i| i + 1)),
            KeyCode::PageUp => select(self, cur.unwrap_or(0).saturating_sub(page)),
            KeyCode::PageDown => select(self, cur.unwrap_or(0) + page),
            KeyCode::Home => select(self, 0),
            KeyCode::End => select(self, usize::MAX),
            KeyCode::Char('s') => {
                let i = Column::ALL
                    .iter()
                    .position(|c| *c == self.sort)
                    .unwrap_or(0);
                self.sort = Column::ALL[(i + 1) % Column::ALL.len()];
                self.set_status(format!("sorted by {}", self.sort.title()));
            }
            KeyCode::Char('r') => self.descending = !self.descending,
            KeyCode::Char('/') => self.mode = Mode::Filter(self.filter.text().to_string()),
            KeyCode::Char(' ') => {
                if let Some(c) = cur.map(|i| rows[i]) {
                    if !self.marked.remove(&c) {
                        self.marked.insert(c);
                    }
                }
            }
            KeyCode::Char('c') => self.marked.clear(),
            KeyCode::Char('p') => {
                self.view.frozen_end_ns = match self.view.frozen_end_ns {
                    Some(_) => None,
                    None => Some(self.now_ns),
                };
            }
            KeyCode::Left | KeyCode::Right => {
                let end = self.view.frozen_end_ns.unwrap_or(self.now_ns);
                let step = (self.view.window_s * 0.25 * 1e9) as u64;
                let oldest = self
                    .flows
                    .values()
                    .filter_map(|f| f.history.front().map(|p| p.t_ns))
                    .min()
                    .unwrap_or(end);
                let end = if key.code == KeyCode::Left {
                    end.saturating_sub(step).max(oldest)
                } else {
                    (end + step).min(self.now_ns)
                };
                self.view.frozen_end_ns = Some(end);
            }
            KeyCode::Char('+') | KeyCode::Char('=') => {
                self.view.window_s = (self.view.window_s / 2.0).max(MIN_WINDOW_S);
            }
            KeyCode::Char('-') => {
                self.view.window_s = (self.view.window_s * 2.0).min(self.history_ns as f64 / 1e9);
            }
            KeyCode::Char('0') => self.view.frozen_end_ns = None,
            KeyCode::Char('e') => return Some(Action::Export),
            KeyCode::Char(k @ ('m' | 'M')) => {
                let Some(f) = cur.and_then(|i| self.flows.get(&rows[i])) else {
                    self.set_status("migration: no flow selected");
                    return None;
                };
                let scope = if k == 'm' {
                    Scope::Flow {
                        cookie: f.last.cookie,
                        label: format!("{} > {}", f.local(), f.remote()),
                    }
                } else {
                    Scope::AllOf
                };
                self.mode = Mode::Migrate {
                    from: f.last.cc.to_string(),
                    scope,
                    input: String::new(),
                    pick: 0,
                };
            }
            #[cfg(debug_assertions)]
            KeyCode::F(12) => panic!("F12 pressed: deliberate panic (debug builds only)"),
            _ => {}
        }
        None
    }
}

/// `flow 10.0.0.1:40000 > 10.0.0.2:5201 (bpf_reno)` or `every bpf_reno flow`.
pub fn describe_scope(a: &MigrateAction) -> String {
    match &a.scope {
        Scope::Flow { label, .. } => format!("flow {label} ({})", a.from),
        Scope::AllOf => format!("every established {} flow (all namespaces)", a.from),
    }
}

/// Shortest span the chart's throughput points are measured over, ns (100 ms, the collector's
/// default sampling interval).
pub const CHART_TPUT_SPAN_NS: u64 = 100_000_000;

/// Throughput up to the newest point of `history`, bit/s: bytes acked since the newest earlier
/// point at least `span_ns` older (or since the first point while the history is shorter), over
/// the time between them; 0 with a single point.
fn rate_over(history: &VecDeque<Point>, span_ns: u64) -> f64 {
    let Some(newest) = history.back() else {
        return 0.0;
    };
    let base = history
        .iter()
        .rev()
        .find(|p| newest.t_ns.saturating_sub(p.t_ns) >= span_ns)
        .or(history.front())
        .expect("not empty");
    if newest.t_ns > base.t_ns {
        newest.bytes_acked.saturating_sub(base.bytes_acked) as f64 * 8e9
            / (newest.t_ns - base.t_ns) as f64
    } else {
        0.0
    }
}

/// Mean throughput of `f` over `[start, end]`, bit/s, from bytes acked between its first
/// and last point in the window.
pub fn mean_tput_in(f: &Flow, start: u64, end: u64) -> f64 {
    let inside = |p: &&Point| p.t_ns >= start && p.t_ns <= end;
    let (Some(first), Some(last)) = (
        f.history.iter().find(inside),
        f.history.iter().rfind(inside),
    ) else {
        return 0.0;
    };
    if last.t_ns > first.t_ns {
        last.bytes_acked.saturating_sub(first.bytes_acked) as f64 * 8e9
            / (last.t_ns - first.t_ns) as f64
    } else {
        0.0
    }
}
