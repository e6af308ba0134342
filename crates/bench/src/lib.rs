//! cctl's benchmark runner: a scenario's points run on the emulator (`cctl-netem`) with
//! the BPF collector tracing every flow, their results written in `cctl-report`'s format;
//! and the performance benchmarks (`cctl bench perf`).
//!
//! - [`request`]: what a sweep is asked to run (every run flag; the guest's input);
//! - [`plan`]: the runs of a sweep, pure: points per repetition, shard, slot, resume, unloads;
//! - [`resolve`]: requested names → registered congestion controls (loaded, ref-counted);
//! - [`network`]: a run → the network its slot builds ([`network::NetPlan`]); checks first;
//! - [`run`]: one run; [`sources`]: what it measures besides the collector, one file each;
//! - [`pool`]: the `--jobs` workers; [`execute`]: a sweep of runs;
//! - [`feed`]: one collector for every slot; [`lock`]: one bench per kernel;
//! - [`cost`]: CPU per run; [`speed`]: host time per run on the virtual clock;
//! - [`validity`]: where runs differ from the scenario;
//! - [`perf`]: BPF ports against native modules, the collector, migration, the testbed.
//!
//! Running needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN).

pub mod calibrate;
pub mod cost;
pub mod execute;
pub mod feed;
pub mod lock;
pub mod network;
pub mod perf;
pub mod plan;
pub mod pool;
pub mod request;
pub mod resolve;
pub mod run;
pub mod sources;
pub mod speed;
pub mod validity;
