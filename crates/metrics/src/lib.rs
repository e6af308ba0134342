//! Derived-metric engine: metrics M1–M17 of `spec/benchmarks.md` §1 as pure functions of a run's raw series.
//!
//! Inputs are what a run records: per-flow periodic samples ([`FlowPoint`]) and congestion
//! events ([`BackoffEvent`]) from the collector, gathered with the flow's schedule into a
//! [`FlowSeries`], and bottleneck qdisc samples ([`QueuePoint`]). Every function is pure, never
//! panics and never returns NaN or ±∞: where a value cannot be computed (no samples, an
//! empty window, a zero denominator) it returns `None` or an empty `Vec`, as documented per item.
//!
//! Units, everywhere unless a name says otherwise: times in seconds since the run's t0 (`f64`),
//! throughputs in bit/s (`f64`), windows and queues in packets, byte counts in bytes.
//!
//! Every **\[CHOICE\]** of the spec is a named parameter with the spec's default: the `*_DEFAULT`
//! constants and the `Default` impls of the parameter structs. [`MetricParams`] gathers them so
//! a run can record the values it used with its results (benchmarks.md §6 item 6).
//!
//! Conventions shared by the flow functions:
//! - `U(t)`, the bytes a flow has had acknowledged by time t, is `bytes_acked` interpolated
//!   linearly between samples and held at the first/last sample outside them. Samples must be
//!   sorted by time; unsorted input gives unspecified (but finite, non-panicking) results.
//! - Qdisc counters are read at the first and last [`QueuePoint`] inside a window (no
//!   interpolation: drops and backlogs are not linear in time); at the default 10 ms sampling
//!   this moves a window's edges by at most 10 ms. A counter that goes backwards (qdisc
//!   re-created) contributes 0.

mod backoff;
mod completion;
mod convergence;
pub mod delay;
mod fairness;
mod inputs;
mod loss;
pub mod names;
mod params;
mod queue;
mod response;
mod series;
mod stability;
mod stats;
#[cfg(test)]
mod test_util;
mod throughput;
mod utilisation;

pub use backoff::*;
pub use completion::*;
pub use convergence::*;
pub use fairness::*;
pub use inputs::*;
pub use loss::*;
pub use params::*;
pub use queue::*;
pub use response::*;
pub use stability::*;
pub use stats::*;
pub use throughput::*;
pub use utilisation::*;
