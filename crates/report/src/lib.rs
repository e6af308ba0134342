//! cctl's results directory: what `cctl bench run` writes and every later command reads
//! (every file and column: docs/reference/results.md).
//!
//! ```text
//! <out>/<scenario>/<timestamp>/
//!   metadata.json                     kernel, algorithms + parameters, scenario, profile, seed, cctl version
//!   request.json                      the run's options (cctl_bench::request::RunRequest)
//!   runs/<algo>/p<point>-r<rep>/      samples.csv (collector), queue.csv (bottleneck), run.json (flows, metrics)
//!   summary.json, summary.md          mean ± standard error over repetitions
//!   summary.csv                       every run's metric values in long format
//!   plots/*.png, plots/*.svg
//!   index.html                        the report as one page (summary tables, plots)
//! ```
//!
//! - [`record`]: the on-disk format of a run and of a directory ([`record::RunRecord`],
//!   [`record::Metadata`]) and reading them back;
//! - [`runs`]: run ids and shards; [`resume`]: which runs of a directory completed, and
//!   whether two directories hold the same sweep;
//! - [`summary`]: per-run metrics and their mean ± standard error; [`plots`] with [`axes`] and
//!   [`scatter`]: the plots; [`write`]: the summary files of a directory; [`long`]: its
//!   `summary.csv`; [`html`]: its `index.html`;
//! - [`compare`]: BPF port against its Linux module; [`check`]: regression gating;
//!   [`expect`]: a scenario's `[[expect]]` judged PASS or FAIL;
//! - [`merge`]: directories of one sweep run in parts, merged; [`diff`]: two directories
//!   compared sample by sample; [`digest`]: a run's result digest, what `diff` compares in
//!   one line; [`canonical`]: a run's files in the form both see them.

pub mod axes;
pub mod canonical;
pub mod check;
pub mod compare;
pub mod diff;
pub mod digest;
pub mod expect;
pub mod html;
pub mod long;
pub mod merge;
pub mod plots;
pub mod record;
pub mod resume;
pub mod runs;
pub mod scatter;
pub mod summary;
pub mod write;
