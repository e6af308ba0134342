//! cctl's benchmark runner: a scenario's points run on the emulator (`cctl-netem`) with
//! the BPF collector tracing every flow, their results written in `cctl-report`'s format;
//! and the performance benchmarks (`cctl bench perf`).
//!
//! - [`resolve`]: requested names → registered congestion controls (loaded, ref-counted);
//! - [`network`]: a point → the network a slot builds for it; checks before building;
//! - [`run`]: one run; [`execute`]: a sweep of runs (`--jobs`, `--shard`, `--resume`);
//! - [`feed`]: one collector for every slot; [`lock`]: one bench per kernel;
//! - [`cost`]: CPU per run; [`validity`]: where runs differ from the scenario;
//! - [`perf`]: BPF ports against native modules, the collector, migration, the testbed.
//!
//! Running needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN).

pub mod calibrate;
pub mod closing;
pub mod cost;
pub mod delays;
pub mod execute;
pub mod feed;
pub mod lock;
pub mod network;
pub mod perf;
pub mod resolve;
pub mod run;
pub mod traffic;
pub mod validity;
