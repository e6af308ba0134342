//! The per-run scalar metrics of a results `summary.json` (`rows[].metrics`) and the
//! numbered metric families M1–M17 they belong to, each with its unit and definition: the
//! one place that says what a metric name means. Names are templates: `{N}` stands for a
//! flow number (1, 2, ...) or a hop of a chain. The summary writes them; a scenario's
//! `[[expect]]` names one of them; `cctl bench metrics` and the HTML report show the
//! definitions, and a test of the summary checks that every name it writes is listed here.

/// A numbered metric family of the benchmark suite (`M1` ... `M17`): what it measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// `M1` ... `M17`, as a scenario's `metrics = [...]` names it.
    pub id: &'static str,
    /// A few words: `Average throughput`.
    pub title: &'static str,
    /// What it measures, one sentence.
    pub measures: &'static str,
    /// How it is computed, in words.
    pub formula: &'static str,
    /// Unit of its values (`Mbit/s`, `s`, `ratio`, ...).
    pub unit: &'static str,
    /// What it is when it is not a value of summary.json (a series, a plot), else empty.
    pub shown_as: &'static str,
}

/// One summary metric name template with its unit and definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// The name template, units in the name; `{N}` is a flow or hop number.
    pub name: &'static str,
    /// Unit of its values: `Mbit/s`, `s`, `ms`, `pkts`, `%`, `ratio` (dimensionless) or
    /// `count`.
    pub unit: &'static str,
    /// What it is and how it is computed, one line.
    pub definition: &'static str,
}

impl Metric {
    /// The family a name starting with `M<k> ` belongs to; `None` for the unnumbered ones.
    pub fn family(&self) -> Option<&'static Family> {
        family_of(self.name)
    }
}

/// The family of a metric name (`M3 R_rtt` → M3): the one whose id is the name's first
/// word. `None` for unnumbered names.
pub fn family_of(name: &str) -> Option<&'static Family> {
    let first = name.split(' ').next()?;
    FAMILIES.iter().find(|f| f.id == first)
}

/// The definition of a concrete metric name (`M1 flow2 (Mbit/s)`): the template of
/// [`METRICS`] it matches; `None` if it matches none.
pub fn definition(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| matches_template(m.name, name))
}

/// The numbered families, M1 to M17, in order.
pub const FAMILIES: &[Family] = &[
    Family {
        id: "M1",
        title: "Average throughput",
        measures: "How fast one flow delivered data over a window of the run.",
        formula: "Bytes the receiver acknowledged at the window's end minus at its start, \
                  times 8, over the window's length: retransmissions do not count (goodput).",
        unit: "Mbit/s",
        shown_as: "",
    },
    Family {
        id: "M2",
        title: "Short-term throughput",
        measures: "A flow's throughput as it changes, smoothed over about 100 RTTs.",
        formula: "Every 0.1 s, the estimate moves a fraction λ = min(1, 0.1 s / (100 × RTT)) \
                  of the way from its previous value to the rate of the last 0.1 s.",
        unit: "Mbit/s",
        shown_as: "a time series, from which M5 reads the convergence times",
    },
    Family {
        id: "M3",
        title: "Throughput ratio",
        measures: "How evenly two flows (flows 1 and 2) shared the path.",
        formula: "The two flows' M1 over the window both were active, divided: the smaller \
                  by the larger (R_minmax, 1 = equal), flow 2's by flow 1's, or the \
                  longer-RTT flow's by the shorter-RTT flow's (R_rtt).",
        unit: "ratio",
        shown_as: "",
    },
    Family {
        id: "M4",
        title: "Jain's fairness index",
        measures: "How evenly all flows shared the path.",
        formula: "With x_i each flow's M1: (Σ x_i)² / (n · Σ x_i²); 1 when all are equal, \
                  1/n when one flow has everything.",
        unit: "ratio",
        shown_as: "",
    },
    Family {
        id: "M5",
        title: "Convergence time",
        measures: "How long a flow that starts later takes to reach its share.",
        formula: "Time from flow 2's start until its M2 first reaches 0.8 of a reference: \
                  A, the fair share (mean of both flows' M1 over the run's second half); \
                  B, flow 1's M2 at the same instant; C, flow 2's own M1 from its start to \
                  the end. NC (not converged) when that never happens.",
        unit: "s",
        shown_as: "",
    },
    Family {
        id: "M6",
        title: "Responsiveness index R1",
        measures: "How long flows take to settle after the set of flows changes.",
        formula: "Over the longest stretch with a fixed set of flows, cut into 5-s periods: \
                  the last period at which a flow's running mean of its 5-s throughputs is \
                  still more than 10 % away from its mean over the stretch, in seconds \
                  (0 if none is).",
        unit: "s",
        shown_as: "",
    },
    Family {
        id: "M7",
        title: "Stability index S",
        measures: "How much flows' throughputs oscillate once the set of flows is fixed.",
        formula: "Per flow, the standard deviation of its 5-s throughputs over that stretch \
                  divided by their mean (coefficient of variation); averaged over the flows.",
        unit: "ratio",
        shown_as: "",
    },
    Family {
        id: "M8",
        title: "Aggregate throughput and utilisation",
        measures: "How much of the bottleneck the flows used together.",
        formula: "The sum of the forward flows' goodput; divided by the bottleneck's \
                  capacity (goodput utilisation), or the bits the bottleneck queue sent \
                  over the run divided by capacity × duration (wire utilisation).",
        unit: "Mbit/s, ratio",
        shown_as: "",
    },
    Family {
        id: "M9",
        title: "Loss",
        measures: "How many packets the flows lost, and how many they sent again.",
        formula: "Bottleneck drops over (packets enqueued + drops), from the queue's \
                  counters; the senders' retransmitted segments over their data segments \
                  sent; the packets the path dropped at random on purpose, counted apart.",
        unit: "ratio, pkts",
        shown_as: "",
    },
    Family {
        id: "M10",
        title: "Response function",
        measures: "The throughput one flow reaches at a given random loss probability p.",
        formula: "M1 of a single flow at each p, on log–log axes beside the models' windows \
                  (1.2/√p for Reno, 0.12/p^0.835 for HighSpeed, 0.08/p for Scalable, in \
                  segments) times segment size over RTT.",
        unit: "Mbit/s",
        shown_as: "the response plot, whose points are M1 values",
    },
    Family {
        id: "M11",
        title: "Fair-to-Reno factor",
        measures: "How much an algorithm takes from the Reno flows it shares a path with.",
        formula: "The goodput of the Reno flows beside one Reno flow under test, divided by \
                  their goodput beside one flow of the algorithm, at the same point; 1 = it \
                  takes what a Reno flow would, above 1 = more.",
        unit: "ratio",
        shown_as: "",
    },
    Family {
        id: "M12",
        title: "Normalised queue length",
        measures: "How full the flows kept the bottleneck queue.",
        formula: "The bottleneck backlog in packets averaged over time, divided by the \
                  buffer size in packets.",
        unit: "ratio",
        shown_as: "",
    },
    Family {
        id: "M13",
        title: "Queueing delay",
        measures: "How long packets waited in queues.",
        formula: "Per flow, the mean over its samples of smoothed RTT minus the smallest RTT \
                  it has seen; where the per-packet delay taps run, the measured time each \
                  packet spent in a bottleneck (sojourn); where the queue reports one, its \
                  own delay figure.",
        unit: "ms",
        shown_as: "",
    },
    Family {
        id: "M14",
        title: "cwnd at backoff",
        measures: "How spread out the windows are at which flows back off.",
        formula: "The congestion window just before each congestion event, pooled over the \
                  run's flows: its mean, and its standard deviation over the mean \
                  (coefficient of variation).",
        unit: "pkts, ratio",
        shown_as: "",
    },
    Family {
        id: "M15",
        title: "Completion time",
        measures: "How long a transfer of a given size took.",
        formula: "Time from a transfer's start until its last byte was acknowledged.",
        unit: "s",
        shown_as: "",
    },
    Family {
        id: "M16",
        title: "Congestion epoch",
        measures: "How often a flow backs off.",
        formula: "The mean time between a flow's consecutive congestion events (window \
                  reductions); needs two of them.",
        unit: "s",
        shown_as: "",
    },
    Family {
        id: "M17",
        title: "Reference RTT-unfairness curves",
        measures: "What the throughput ratio of two flows with different RTTs should be in \
                   theory, as a check of the testbed.",
        formula: "R_rtt proportional to (RTT_short / RTT_long)² for standard TCP, and to \
                  RTT_short / RTT_long for an increase scaled by RTT, drawn beside the \
                  measured M3 R_rtt.",
        unit: "ratio",
        shown_as: "model curves on the ratio_vs_rtt plot",
    },
];

/// The ids of [`FAMILIES`], in order (`M1` ... `M17`): what a scenario's `metrics = [...]`
/// may name.
pub const FAMILY_IDS: [&str; FAMILIES.len()] = {
    let mut ids = [""; FAMILIES.len()];
    let mut i = 0;
    while i < FAMILIES.len() {
        ids[i] = FAMILIES[i].id;
        i += 1;
    }
    ids
};

/// Every summary metric, units in the name; `{N}` is a flow or hop number. Flows are numbered
/// in the scenario's `[[flows]]` order from 1; "the shared window" is the time both flows 1
/// and 2 were active; "steady state" starts at 60 s or 20 % of the run, whichever is later.
pub const METRICS: &[Metric] = &[
    m("M1 flow{N} (Mbit/s)", "Mbit/s", "Flow N's goodput over its whole life: acknowledged bytes × 8 / time."),
    m("M1 flow{N} steady (Mbit/s)", "Mbit/s", "Flow N's goodput over the steady state only."),
    m("M3 R_minmax", "ratio", "The smaller of flows 1 and 2's goodputs over the larger, in the shared window; 1 = equal."),
    m("M3 R_minmax whole run", "ratio", "R_minmax from each flow's goodput over its whole life (flow 1's time alone counts)."),
    m("M3 R_minmax last 50 %", "ratio", "R_minmax from the two flows' goodputs over the run's second half."),
    m("M3 flow2/flow1", "ratio", "Flow 2's goodput over flow 1's in the shared window; above 1, flow 2 got more."),
    m("M3 flow2/flow1 whole run", "ratio", "Flow 2's goodput over flow 1's, each over its whole life."),
    m("M3 R_rtt", "ratio", "The longer-RTT flow's goodput over the shorter-RTT flow's in the shared window (flow 2 over flow 1 at equal RTTs)."),
    m("M3 R_rtt whole run", "ratio", "R_rtt from each flow's goodput over its whole life."),
    m("M4 Jain", "ratio", "Jain's index (Σx)²/(n·Σx²) of every flow's goodput in the window all were active; 1 = equal shares."),
    m("M4 Jain whole run", "ratio", "Jain's index of every flow's goodput over its whole life."),
    m("M5 A (s)", "s", "Time from flow 2's start until its short-term throughput reaches 0.8 × the fair share (both flows' mean goodput over the second half); NC if never."),
    m("M5 B (s)", "s", "Time from flow 2's start until its short-term throughput reaches 0.8 × flow 1's at that instant; NC if never."),
    m("M5 C (s)", "s", "Time from flow 2's start until its short-term throughput reaches 0.8 × its own goodput from start to end; NC if never."),
    m("M6 R1 (s)", "s", "Over the longest stretch with a fixed set of flows: the last 5-s period in which a flow's running mean is more than 10 % off its stretch mean, × 5 s."),
    m("M7 S", "ratio", "Mean over flows of the coefficient of variation (std / mean) of each flow's 5-s throughputs over that stretch."),
    m("M8 goodput (Mbit/s)", "Mbit/s", "Sum of the forward flows' goodput over the run."),
    m("M8 utilisation (goodput)", "ratio", "Aggregate goodput over the bottleneck's capacity."),
    m("M8 utilisation (wire)", "ratio", "Bits the bottleneck queue sent (headers included) over capacity × duration."),
    m("M9 drop rate", "ratio", "Bottleneck queue drops over (packets enqueued + drops), from its counters."),
    m("M9 retransmission ratio", "ratio", "All flows' retransmitted segments over their data segments sent."),
    m("M9 random drops (pkts)", "pkts", "Packets the path dropped at random on purpose (the scenario's loss), all senders."),
    m("M11 FtR", "ratio", "Goodput of the Reno flows beside a Reno flow under test over their goodput beside this algorithm, same point; above 1 = it takes more than Reno."),
    m("M12 Q_norm", "ratio", "Time-average bottleneck backlog in packets over the buffer size in packets."),
    m("M13 flow{N} mean qdelay (ms)", "ms", "Mean of flow N's smoothed RTT minus its minimum RTT over its samples."),
    m("M13 mean qdelay all flows (ms)", "ms", "Mean over flows of their mean queueing delay (smoothed RTT − minimum RTT)."),
    m("M13 qdisc-reported delay (ms)", "ms", "Mean of the delay the bottleneck queue discipline reports itself (PIE, cake)."),
    m("M13 qdisc-reported peak delay (ms)", "ms", "Largest peak delay the bottleneck queue discipline reported (cake)."),
    m("M13 flow{N} mean sojourn (ms)", "ms", "Mean time flow N's packets spent in the bottleneck queue, timed per packet by the delay taps."),
    m("M13 hop{N} mean sojourn (ms)", "ms", "Mean time packets spent in bottleneck N of a chain, timed per packet by the delay taps."),
    m("hop{N} sojourn p50 (ms)", "ms", "Median time packets spent in bottleneck N (delay taps)."),
    m("hop{N} sojourn p95 (ms)", "ms", "95th percentile of the time packets spent in bottleneck N (delay taps)."),
    m("hop{N} sojourn p99 (ms)", "ms", "99th percentile of the time packets spent in bottleneck N (delay taps)."),
    m("flow{N} one-way delay p50 (ms)", "ms", "Median sender-to-receiver delay of flow N's data packets (delay taps)."),
    m("flow{N} one-way delay p95 (ms)", "ms", "95th percentile of flow N's sender-to-receiver packet delay (delay taps)."),
    m("flow{N} one-way delay p99 (ms)", "ms", "99th percentile of flow N's sender-to-receiver packet delay (delay taps)."),
    m("flow{N} reverse one-way delay p50 (ms)", "ms", "Median receiver-to-sender delay of flow N's ACKs (delay taps)."),
    m("probe{N} RTT p50 (ms)", "ms", "Median round trip of latency probe stream N (`[[probes]]`) under load."),
    m("probe{N} RTT p95 (ms)", "ms", "95th percentile of probe stream N's round trips."),
    m("probe{N} RTT p99 (ms)", "ms", "99th percentile of probe stream N's round trips."),
    m("probe{N} one-way delay p50 (ms)", "ms", "Median forward one-way delay of probe stream N."),
    m("probe{N} one-way delay p99 (ms)", "ms", "99th percentile of probe stream N's forward one-way delay."),
    m("probe{N} reverse one-way delay p50 (ms)", "ms", "Median reverse one-way delay of probe stream N."),
    m("probe{N} loss", "ratio", "Probes of stream N that did not come back, over those sent."),
    m("udp flow{N} received (Mbit/s)", "Mbit/s", "Rate at which UDP flow N's packets arrived, from the start of sending to the last arrival."),
    m("udp flow{N} loss", "ratio", "UDP flow N's datagrams not received, over those sent."),
    m("M14 cwnd-at-backoff CoV", "ratio", "Standard deviation over mean of the cwnd just before each congestion event, all flows pooled."),
    m("M14 mean cwnd at backoff (pkts)", "pkts", "Mean cwnd just before each congestion event, all flows pooled."),
    m("M15 flow{N} completion (s)", "s", "Time from flow N's start until the last byte of its transfer was acknowledged."),
    m("M16 flow{N} mean epoch (s)", "s", "Mean time between flow N's consecutive congestion events (needs two)."),
    m("backoffs flow{N}", "count", "Congestion events (cwnd reductions) of flow N."),
    m("flow{N} min RTT / base RTT", "ratio", "The smallest RTT flow N measured over its configured base RTT; near 1 when the path is as built."),
    m("bottleneck drops (pkts)", "pkts", "Packets the bottleneck queue discipline dropped, from its counter at the end of the run."),
    m("unintended drops (pkts)", "pkts", "Packets dropped anywhere the scenario did not ask for; above 0 marks the run invalid."),
    m("bottleneck ECN marks (pkts)", "pkts", "Packets the bottleneck queue discipline marked with ECN, from its counter at the end."),
    m("hop{N} sent (Mbit/s)", "Mbit/s", "Bits bottleneck N of a chain sent (link layer) over the run's duration."),
    m("hop{N} drops (pkts)", "pkts", "Packets bottleneck N of a chain dropped."),
    m("web load forward (Mbit/s)", "Mbit/s", "Rate of the web cross traffic that crossed the bottleneck forward."),
    m("web pages", "count", "Web pages the web sessions completed."),
    m("CPU busy (%)", "%", "Share of the machine's CPU time (all CPUs) that was busy during the run."),
];

const fn m(name: &'static str, unit: &'static str, definition: &'static str) -> Metric {
    Metric {
        name,
        unit,
        definition,
    }
}

/// Every summary metric name ([`METRICS`]' templates), in order.
pub const SUMMARY_METRICS: &[&str] = &{
    let mut names = [""; METRICS.len()];
    let mut i = 0;
    while i < METRICS.len() {
        names[i] = METRICS[i].name;
        i += 1;
    }
    names
};

/// Whether `name` is a summary metric: one of [`SUMMARY_METRICS`] with each `{N}` replaced
/// by a number from 1 up (no leading zero).
pub fn is_summary_metric(name: &str) -> bool {
    SUMMARY_METRICS.iter().any(|t| matches_template(t, name))
}

fn matches_template(template: &str, name: &str) -> bool {
    match template.split_once("{N}") {
        None => template == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            digits > 0 && !rest.starts_with('0') && matches_template(tail, &rest[digits..])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_numbered_names_only() {
        assert!(is_summary_metric("M8 utilisation (goodput)"));
        assert!(is_summary_metric("M1 flow12 (Mbit/s)"));
        assert!(is_summary_metric("hop2 drops (pkts)"));
        for bad in [
            "M8 utilisation",
            "M1 flow (Mbit/s)",
            "M1 flow0 (Mbit/s)",
            "M1 flow01 (Mbit/s)",
            "M1 flowx (Mbit/s)",
            "m4 jain",
            "",
        ] {
            assert!(!is_summary_metric(bad), "{bad:?}");
        }
    }

    #[test]
    fn families_run_from_m1_to_m17_and_each_is_a_scalar_or_says_where_it_shows() {
        let want: Vec<String> = (1..=17).map(|k| format!("M{k}")).collect();
        assert_eq!(FAMILY_IDS.to_vec(), want);
        for f in FAMILIES {
            let scalars = METRICS.iter().filter(|m| m.family() == Some(f)).count();
            assert!(
                (scalars > 0) == f.shown_as.is_empty(),
                "{}: {scalars} summary metrics, shown as {:?}",
                f.id,
                f.shown_as
            );
            for text in [f.title, f.measures, f.formula, f.unit] {
                assert!(
                    !text.is_empty() && !text.contains('\n'),
                    "{}: {text:?}",
                    f.id
                );
            }
        }
    }

    #[test]
    fn every_metric_has_a_unit_a_one_line_definition_and_a_known_family() {
        assert_eq!(SUMMARY_METRICS.len(), METRICS.len());
        for m in METRICS {
            assert!(!m.unit.is_empty() && !m.definition.is_empty(), "{}", m.name);
            assert!(!m.definition.contains('\n'), "{}", m.name);
            let numbered = m.name.starts_with('M') && m.name.as_bytes()[1].is_ascii_digit();
            assert_eq!(numbered, m.family().is_some(), "{}", m.name);
        }
        let d = definition("M1 flow2 (Mbit/s)").unwrap();
        assert_eq!((d.name, d.unit), ("M1 flow{N} (Mbit/s)", "Mbit/s"));
        assert_eq!(definition("M3 R_rtt").unwrap().family().unwrap().id, "M3");
        assert!(definition("M3 R_rtt sideways").is_none());
    }
}
