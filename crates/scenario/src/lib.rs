//! Declarative benchmark scenarios: one TOML file per test of `benchmarks.md`, parsed,
//! validated and expanded into the concrete runs `cctl bench` executes.
//!
//! A scenario file describes one test (T0.1, T3.4, ...) twice: a `paper` profile with the
//! papers' grid exactly as `benchmarks.md` gives it (including its \[CHOICE\]s), for real hosts,
//! and a `ci` profile (`benchmarks.md` §7.4) scaled down for the CI VM: capacities at most
//! [`CI_MAX_RATE_MBIT`], fewer sweep points, short runs. CI-scale results exercise different
//! regimes of the high-speed algorithms and must never be compared with the papers' numbers.
//!
//! The shipped files live in `crates/scenario/scenarios/` and are compiled into the binary
//! ([`builtin`]), so `cctl` works outside the repository; [`find`] also accepts a path to a
//! file of one's own. Everything is validated when a file is loaded, before any namespace,
//! qdisc or socket exists, and every error names the file, the field (`flows[1].start_s`,
//! `profiles.ci.sweep.rtt_ms[2]`) and what is allowed.
//!
//! # Schema
//!
//! ```toml
//! id = "T0.2"                      # test id of benchmarks.md: "T<suite>.<n>"
//! name = "rtt-unfairness"          # CLI name, [a-z0-9-]: `cctl bench run rtt-unfairness` (or `t0.2`)
//! title = "Fairness, different RTTs (RTT unfairness)"
//! source = "[P0] §III-C(ii), §V-B, Fig. 10"
//! metrics = ["M3", "M17"]          # metrics of benchmarks.md §1 reported (M1..M17)
//! plots = ["ratio_vs_rtt"]         # see PLOTS
//! x = "rtt2_ms"                    # optional: the variable reports plot against
//! choices = ["flow 2 starts at 30 s [CHOICE]"]   # optional: recorded with every result
//!
//! [defaults]                       # shared by both profiles; a profile overrides any key
//! rate_mbit = 10                   # bottleneck capacity, Mbit/s (> 0)
//! reverse_rate_mbit = 0.256        # optional: capacity of the ACK (reverse) path, Mbit/s
//! rtt_ms = 162                     # base RTT (two-way propagation), ms (> 0); flows default to it
//! buffer_bdp = 0.2                 # drop-tail buffer: ONE of buffer_bdp (fraction of BDP),
//!                                  #   buffer_pkts (packets) or buffer_ms (ms worth of rate)
//! buffer_floor_pkts = 2            # [CHOICE] the buffer is never below this (default 2); flagged
//! bdp_rtt = "flow1"                # "flow1" (default) | "min": the RTT that defines the BDP
//! loss = 0.0                       # loss probability on the forward path, [0, 1)
//! loss_model = "random"            # "random" (netem, default) | "periodic": every round(1/loss)-th
//!                                  #   packet (tc gact determ), the same packets in every run
//! init_ssthresh_bdp = 0.5          # optional: initial ssthresh as a fraction of BDP ([P3])
//! web_sessions = 0                 # web cross-traffic sessions (default 0)
//! web_model = "p0"                 # "p0" (T0.0, bidirectional) | "surge" (T3.6); default "p0"
//! web_cc = "reno"                  # CC of the web flows (default "reno")
//! duration_s = 600                 # run length, s; a deadline for fixed-size transfers
//! repeat = 5                       # repetitions of every point (default 1)
//! seed = 1                         # base seed of random draws (default 1)
//! vars = { rtt2_ms = 162 }         # user variables for "{var}" references in [[flows]]
//! rate_schedule = [{ at_s = 5, rate_mbit = 5 }, { at_s = 10, rate_mbit = 20, ramp_s = 2 }]
//!                                  # optional: rate changes (steps, or linear ramps reaching the
//!                                  #   value at at_s + ramp_s); see crate::schedule
//! delay_schedule = [{ at_s = 8, rtt_ms = 80 }]   # optional: every sender's added RTT changes
//! rate_trace = "traces/lte_synthetic.mm"        # optional, instead of rate_schedule: a mahimahi
//!                                  #   trace (relative to this file), binned into rates
//! trace_bin_ms = 100               # bin width of rate_trace, ms (default 100)
//! tbf_burst_ms = 1                 # tbf bucket at the bottleneck, ms of the rate (default 1)
//!
//! [[flows]]                        # at least one; each flow gets its own sender namespace
//! cc = "{algo}"                    # "{algo}" (default) = the algorithm under test, or a fixed name
//! rtt_ms = "{rtt2_ms}"             # default "{rtt_ms}"
//! start_s = 30                     # default 0
//! stop_s = "{duration_s}"          # default: the end of the run
//! count = 1                        # identical copies (default 1), e.g. "{n}"
//! start_step_s = 0                 # copy k starts k·start_step_s later (default 0)
//! size_mb = 200                    # optional fixed-size transfer, MB = 10^6 bytes
//! on_s = { exponential = 1800 }    # optional on/off source: on periods ...
//! off_s = { exponential = 1800 }   # ... separated by off periods, each a new connection
//!
//! path = [1, 2]                    # only with [topology]: bottlenecks entered before and left after
//! kind = "tcp"                     # "tcp" (default) | "udp-cbr": unresponsive constant-bit-rate UDP
//! rate_mbit = 5                    # udp-cbr only, required there: Mbit/s of IPv4 packets
//! direction = "forward"            # "forward" (default) | "reverse" (TCP only, not with [topology]):
//!                                  #   data from the receiver side to this flow's sender namespace
//!
//! [[probes]]                       # optional, repeatable, not with [topology]: irtt-style UDP probes
//! interval_ms = 10                 # 1..=1000 (default 10)
//! size_bytes = 32                  # payload, 32 (the header, default) ..= 1472
//! dscp = 0                         # 0..=63 (default 0), IP_TOS = dscp << 2
//! start_s = 0                      # default 0; stop_s defaults to the end of the run
//!
//! [[expect]]                       # optional, repeatable: what the results must show
//! metric = "M8 utilisation (goodput)"   # a summary.json metric; see crate::expect
//! where = { algo = "*", point = "*" }
//! min = 0.9
//!
//! [topology]                       # optional: a chain of 1..=4 bottlenecks (a parking lot)
//! bottlenecks = [{}, { rate_mbit = 5, rtt_ms = 20, buffer_pkts = 40 }]  # default: the point's
//!
//! [profiles.paper]                 # both profiles are required
//! sweep = { rate_mbit = [10, 250], rtt2_ms = [22, 42, 82, 162, 324] }
//! duration_s = 600
//! repeat = 5
//!
//! [profiles.ci]
//! # CI scale: a smoke/regression test, never to be compared with the papers' numbers.
//! note = "CI scale: never compare with the papers' numbers"
//! sweep = { rate_mbit = [10, 50], rtt2_ms = [22, 82] }
//! duration_s = 40
//! repeat = 1
//! ```
//!
//! **Values in `[[flows]]`** are a number; a string that is a product of numbers and
//! `{var}` references (`"{rtt_ms}"`, `"{interval_s}*4"`, `"{rtt_ms}*{rtt_ratio}"`); or a
//! random draw made with the run's seed: `{ uniform = [a, b] }` or `{ choice = [a, b, ...] }`
//! (any numeric field but `count`, `start_step_s` and `size_mb`), `{ exponential = mean }`
//! (only `on_s`/`off_s`). The operands may be expressions too. Variables are the numeric
//! parameters above (`rate_mbit`, `rtt_ms`, `duration_s`, ...), the `vars` and the sweep
//! keys. Every user variable must be used by a flow or by `x` (this catches typos).
//!
//! **Sweeps** are a table of lists (their cartesian product, keys in alphabetical order, the
//! last varying fastest) or an array of such tables (the union of their products, e.g. T2.7's
//! two paths). A sweep key is a numeric parameter or a user variable. Precedence, most
//! specific first: sweep, profile, defaults, built-in default; the most specific layer that
//! sets any `buffer_*` key decides the buffer, so `sweep.buffer_bdp` replaces a profile's
//! `buffer_pkts`. A profile without `sweep` inherits the one of `[defaults]`, if any.
//!
//! **Arithmetic** (`benchmarks.md` §0): `BDP_pkts = C·RTT / (1500·8)`, with RTT the first
//! flow's (`bdp_rtt = "flow1"`, \[P0\] \[CHOICE\]) or the smallest (`"min"`, \[P3\]). The buffer is
//! rounded to the nearest packet and raised to `buffer_floor_pkts` if below it, in which case
//! [`RunPoint::buffer_floored`] is set (1 Mbit/s × 22 ms × 20 % → 2 packets).
//!
//! **Seeds.** [`Scenario::expand`] draws every random value from its `seed` argument and the
//! point's index, so one seed always gives the same runs. A runner passes
//! [`Scenario::seed`] plus the repetition index, so every repetition draws afresh (T0.7's
//! start times, T1.4's schedules).

mod de;
mod error;
mod expand;
pub mod expect;
mod expr;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod keys;
mod model;
pub(crate) mod rng;
pub mod schedule;
mod schema;
mod shipped;
mod sweep;
#[cfg(test)]
mod test_input;
mod topology;
mod traffic;

pub use error::{FieldError, ScenarioError};
pub use expand::select_points;
pub use model::{
    bdp_pkts, buffer_pkts, is_dctcp, BdpRtt, CcRef, FlowPath, FlowPlan, HopPlan, LossModel,
    Profile, RunPoint, TopologyPlan, WebModel, CI_MAX_RATE_MBIT, DEFAULT_BUFFER_FLOOR_PKTS,
    MAX_FLOWS_PER_POINT, MAX_RATE_MBIT, METRICS, PACKET_BYTES, PARAMS, PLOTS,
};
pub use schema::Scenario;
pub use shipped::{builtin, find, BUILTIN_FILES};
pub use topology::{Topology, MAX_BOTTLENECKS};
pub use traffic::{Direction, FlowKind, ProbePlan, DEFAULT_PROBE_INTERVAL_MS, PROBE_INTERVAL_MS};
