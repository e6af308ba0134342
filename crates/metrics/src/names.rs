//! The names of the per-run scalar metrics in a results `summary.json` (`rows[].metrics`),
//! as templates: `{N}` stands for a flow number (1, 2, ...) or a hop of a chain. The
//! summary writes them; a scenario's `[[expect]]` names one of them, and a test of the
//! summary checks that every name it writes is one of these.

/// Every summary metric name, units in the name; `{N}` is a flow or hop number.
pub const SUMMARY_METRICS: &[&str] = &[
    "M1 flow{N} (Mbit/s)",
    "M1 flow{N} steady (Mbit/s)",
    "M3 R_minmax",
    "M3 R_minmax whole run",
    "M3 R_minmax last 50 %",
    "M3 flow2/flow1",
    "M3 flow2/flow1 whole run",
    "M3 R_rtt",
    "M3 R_rtt whole run",
    "M4 Jain",
    "M4 Jain whole run",
    "M5 A (s)",
    "M5 B (s)",
    "M5 C (s)",
    "M6 R1 (s)",
    "M7 S",
    "M8 goodput (Mbit/s)",
    "M8 utilisation (goodput)",
    "M8 utilisation (wire)",
    "M9 drop rate",
    "M9 retransmission ratio",
    "M9 random drops (pkts)",
    "M11 FtR",
    "M12 Q_norm",
    "M13 flow{N} mean qdelay (ms)",
    "M13 mean qdelay all flows (ms)",
    "M13 qdisc-reported delay (ms)",
    "M13 qdisc-reported peak delay (ms)",
    "M13 flow{N} mean sojourn (ms)",
    "M13 hop{N} mean sojourn (ms)",
    "hop{N} sojourn p50 (ms)",
    "hop{N} sojourn p95 (ms)",
    "hop{N} sojourn p99 (ms)",
    "flow{N} one-way delay p50 (ms)",
    "flow{N} one-way delay p95 (ms)",
    "flow{N} one-way delay p99 (ms)",
    "flow{N} reverse one-way delay p50 (ms)",
    "probe{N} RTT p50 (ms)",
    "probe{N} RTT p95 (ms)",
    "probe{N} RTT p99 (ms)",
    "probe{N} one-way delay p50 (ms)",
    "probe{N} one-way delay p99 (ms)",
    "probe{N} reverse one-way delay p50 (ms)",
    "probe{N} loss",
    "udp flow{N} received (Mbit/s)",
    "udp flow{N} loss",
    "M14 cwnd-at-backoff CoV",
    "M14 mean cwnd at backoff (pkts)",
    "M15 flow{N} completion (s)",
    "M16 flow{N} mean epoch (s)",
    "backoffs flow{N}",
    "flow{N} min RTT / base RTT",
    "bottleneck drops (pkts)",
    "unintended drops (pkts)",
    "bottleneck ECN marks (pkts)",
    "hop{N} sent (Mbit/s)",
    "hop{N} drops (pkts)",
    "web load forward (Mbit/s)",
    "web pages",
    "CPU busy (%)",
];

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
}
