//! cctl's benchmark building blocks: a network-namespace testbed and a bulk TCP flow generator.
//!
//! [`testbed`] builds a sender → router → receiver veth path whose router egress is a `tbf`
//! rate limiter with a drop-tail `pfifo` queue (the bottleneck); [`flows`] runs bulk TCP flows across it
//! on threads that have joined the namespaces, with a chosen congestion control per flow.
//! Both need root (CAP_NET_ADMIN + CAP_SYS_ADMIN).

pub mod aqm;
pub mod chain;
pub mod check;
pub mod compare;
pub mod conform;
pub mod feed;
pub mod flows;
pub mod lock;
pub mod merge;
pub mod metrics;
pub mod perf;
pub mod plot;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod schedule;
pub mod sweep;
pub mod testbed;
pub mod vm;
pub mod web;

pub use flows::{run_bulk_flows, run_bulk_flows_observed, spawn_in_netns, FlowResult, FlowSpec};
pub use testbed::{remove_leftovers, PathSpec, QdiscStats, Testbed, TestbedError};
