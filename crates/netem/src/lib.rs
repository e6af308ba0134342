//! cctl's network emulator: dumbbells and parking lots of veth links in network namespaces,
//! with a tbf/netem/AQM bottleneck, schedules that change a link while it runs, and the TCP
//! traffic (bulk and web) that crosses them. No TOML here: the scenario language (crate
//! `cctl-scenario`) describes a network in these value types; a runner builds it.
//!
//! Layers, each depending only on those above it in this list:
//! - [`slot`]: names and subnets of the concurrent testbeds of one sweep;
//! - [`netns`]: named network namespaces, and threads that run inside one;
//! - [`tc`]: running `ip`/`tc` (one command, or a batch), the host tools they need;
//! - [`aqm`]: the bottleneck's queue discipline (pfifo, fq_codel, PIE, RED, CAKE) and its counters;
//! - [`ledger`]: where a run's packets were dropped, counted from every place that can drop one;
//! - [`taps`]: where packets are timestamped (slots, hooks), as a plan;
//! - [`testbed`]: the dumbbell (`PathSpec`, `Testbed`), qdisc statistics and their sampler;
//! - [`chain`]: the parking lot (`ChainSpec`, `Chain`) and [`chain::Bed`], one type over both;
//! - [`schedule`]: rate/delay steps and the driver that applies them during a run;
//! - [`flows`], [`web`]: bulk TCP flows and web cross traffic across a testbed;
//! - [`probes`], [`udp`]: latency under load (irtt-style UDP probes, one-way delays) and
//!   unresponsive constant-bit-rate UDP cross traffic, between any two namespaces.
//!
//! Everything that builds or changes a network needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN).

pub mod aqm;
pub mod chain;
pub mod flows;
pub mod ledger;
pub mod netns;
pub mod probes;
pub mod schedule;
pub mod slot;
pub mod taps;
pub mod tc;
pub mod testbed;
pub mod udp;
pub mod web;

pub use flows::{run_bulk_flows, run_bulk_flows_observed, FlowResult, FlowSpec};
pub use netns::spawn_in_netns;
pub use testbed::{remove_leftovers, PathSpec, QdiscStats, Testbed, TestbedError};
