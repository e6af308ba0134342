//! The inputs of the metrics: what a run records per flow (collector samples, backoffs, the
//! flow's schedule) and at the bottleneck qdisc.

use serde::{Deserialize, Serialize};

/// One periodic sample of one flow (from the BPF collector).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowPoint {
    /// Sample time, in seconds since the run's t0.
    pub t_s: f64,
    /// Bytes acknowledged by the receiver over the connection's life (`tp->bytes_acked`), in bytes.
    pub bytes_acked: u64,
    /// Congestion window, in packets (segments).
    pub cwnd: u32,
    /// Kernel smoothed RTT (unscaled), in microseconds; 0 while unknown.
    pub srtt_us: u32,
    /// Kernel windowed minimum RTT, in microseconds; 0 or `u32::MAX` while unknown.
    pub min_rtt_us: u32,
    /// Retransmitted segments over the connection's life, in segments.
    pub total_retrans: u32,
    /// Segments delivered over the connection's life (`tp->delivered`), in segments.
    pub delivered: u32,
}

/// A window reduction (congestion event) of a flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct BackoffEvent {
    /// Event time, in seconds since the run's t0.
    pub t_s: f64,
    /// Congestion window immediately before the reduction, in packets.
    pub cwnd_before: u32,
    /// Congestion window after the reduction, in packets, if known.
    pub cwnd_after: Option<u32>,
}

/// Everything known about one flow of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowSeries {
    /// The run's identifier for the flow.
    pub id: usize,
    /// Congestion control name (`TCP_CONGESTION`).
    pub cc: String,
    /// Configured (or measured) base round-trip propagation delay, in seconds.
    pub base_rtt_s: f64,
    /// When the flow started, in seconds since the run's t0.
    pub start_s: f64,
    /// When the flow stopped sending, in seconds since the run's t0.
    pub stop_s: f64,
    /// Periodic samples, sorted by `t_s`.
    pub points: Vec<FlowPoint>,
    /// Congestion events, sorted by `t_s` (for a cctl algorithm from its own reduction
    /// counter, exact between samples; else from the kernel's signals).
    pub backoffs: Vec<BackoffEvent>,
    /// Congestion events from the kernel's signals only, for every flow alike
    /// (`cctl_loader::summary::kernel_backoffs`): what port-vs-module comparisons count.
    #[serde(default)]
    pub kernel_backoffs: Vec<BackoffEvent>,
    /// Bytes the receiver read from the flow by its end, in bytes.
    pub bytes_received: u64,
    /// Fixed-size transfers: time from connection start to the last byte received, in seconds.
    pub completion_s: Option<f64>,
    /// Data segments sent over the connection's life (`tcpi_data_segs_out`), in segments.
    pub data_segs_out: Option<u64>,
}

/// One sample of the bottleneck qdisc (every ~10 ms); counters are cumulative.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct QueuePoint {
    /// Sample time, in seconds since the run's t0.
    pub t_s: f64,
    /// Packets waiting in the queue, in packets.
    pub backlog_pkts: u64,
    /// Bytes waiting in the queue, in bytes.
    pub backlog_bytes: u64,
    /// Packets dropped by the qdisc so far, in packets.
    pub drops: u64,
    /// Packets sent on by the qdisc so far, in packets.
    pub sent_pkts: u64,
    /// Bytes sent on by the qdisc so far (L2 frames, as the qdisc counts them), in bytes.
    pub sent_bytes: u64,
}
