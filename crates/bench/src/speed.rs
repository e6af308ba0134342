//! How long a sweep takes on the virtual clock on this host: host seconds per second of
//! traffic by bottleneck rate, measured by `cctl bench calibrate --clock virtual` (its
//! ceiling part, one sealed guest per rate) and kept in [`STORE`]; a default table measured on
//! this project's 2-core machines when it has not run. `cctl bench run --dry-run` prints the
//! estimate.

use std::path::Path;

use cctl_scenario::RunPoint;
use serde::{Deserialize, Serialize};

/// Name of the file, in each run directory of a sealed guest's slot, that holds the host's
/// wall time of that guest (the run's own times are the guest's virtual ones).
pub const HOST_FILE: &str = "host.json";

/// Where `cctl bench calibrate --clock virtual` keeps this host's figures.
pub const STORE: &str = "/var/lib/cctl/virtual-speed.json";

/// Host seconds a sealed guest costs besides its traffic: boot, setup before the first
/// packet, the report and the power-off. `make bench-speed` on this project's 2-core
/// machines (2026-11-29): 13.1-17.5 s per run.
pub const FIXED_S: f64 = 15.0;

/// The default table, (rate Mbit/s, host s per traffic s), from `make bench-speed` on this
/// project's 2-core machines (2026-11-29; two H-TCP flows, 42 ms, 20 % BDP, two guests at a
/// time): 0.25 at 10 Mbit/s, 2.38 at 250.
const DEFAULT_PER_RATE: [(f64, f64); 2] = [(10.0, 0.25), (250.0, 2.38)];

/// Host time per traffic second on the virtual clock, by rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VirtualSpeed {
    /// When it was measured (UTC timestamp of the calibration), `None` for the default.
    pub measured: Option<String>,
    /// Host seconds per run besides its traffic.
    pub fixed_s: f64,
    /// (bottleneck rate Mbit/s, host seconds per traffic second), by rate.
    pub per_rate: Vec<(f64, f64)>,
}

impl Default for VirtualSpeed {
    fn default() -> VirtualSpeed {
        VirtualSpeed {
            measured: None,
            fixed_s: FIXED_S,
            per_rate: DEFAULT_PER_RATE.to_vec(),
        }
    }
}

impl VirtualSpeed {
    /// This host's figures from `store` ([`STORE`]), or the default when the file is
    /// missing or unreadable.
    pub fn load(store: &Path) -> VirtualSpeed {
        std::fs::read_to_string(store)
            .ok()
            .and_then(|t| serde_json::from_str::<VirtualSpeed>(&t).ok())
            .filter(|s| !s.per_rate.is_empty())
            .unwrap_or_default()
    }

    /// Writes the figures to `store`, creating its directory.
    ///
    /// Errors: the directory or the file cannot be written.
    pub fn save(&self, store: &Path) -> std::io::Result<()> {
        if let Some(d) = store.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(store, serde_json::to_string_pretty(self)? + "\n")
    }

    /// The figures of a calibration's ceiling runs: each (rate Mbit/s, traffic s, host
    /// wall s of its guest), with the fixed part taken off; `None` when none is usable.
    pub fn from_runs(measured: &str, runs: &[(f64, f64, f64)]) -> Option<VirtualSpeed> {
        let mut per_rate: Vec<(f64, f64)> = runs
            .iter()
            .filter(|(r, t, w)| r.is_finite() && *t > 0.0 && w.is_finite())
            .map(|&(r, t, w)| (r, ((w - FIXED_S) / t).max(0.01)))
            .collect();
        per_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
        per_rate.dedup_by(|a, b| a.0 == b.0);
        (!per_rate.is_empty()).then(|| VirtualSpeed {
            measured: Some(measured.into()),
            fixed_s: FIXED_S,
            per_rate,
        })
    }

    /// Host seconds per traffic second at `rate_mbit`: linear between the two measured
    /// rates around it, the nearest one's outside them.
    pub fn per_traffic_s(&self, rate_mbit: f64) -> f64 {
        let t = &self.per_rate;
        let (Some(first), Some(last)) = (t.first(), t.last()) else {
            return 1.0;
        };
        if rate_mbit <= first.0 {
            return first.1;
        }
        if rate_mbit >= last.0 {
            return last.1 * (rate_mbit / last.0).max(1.0);
        }
        let i = t.partition_point(|p| p.0 < rate_mbit).max(1);
        let (a, b) = (t[i - 1], t[i]);
        a.1 + (b.1 - a.1) * (rate_mbit - a.0) / (b.0 - a.0)
    }

    /// Host seconds for `runs_per_point` runs of each of `points` (one sealed guest each),
    /// `jobs` guests at a time.
    pub fn estimate_s(&self, points: &[RunPoint], runs_per_point: usize, jobs: u32) -> f64 {
        let one: f64 = points
            .iter()
            .map(|p| self.fixed_s + p.duration_s * self.per_traffic_s(p.rate_mbit))
            .sum();
        let runs = points.len() * runs_per_point;
        one * runs_per_point as f64 / f64::from(jobs.clamp(1, runs.max(1) as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn speed() -> VirtualSpeed {
        VirtualSpeed {
            measured: None,
            fixed_s: 10.0,
            per_rate: vec![(10.0, 0.5), (250.0, 2.9)],
        }
    }

    #[test]
    fn per_traffic_s_interpolates_between_rates_and_holds_below_and_scales_above() {
        let s = speed();
        assert_eq!(s.per_traffic_s(5.0), 0.5);
        assert!((s.per_traffic_s(130.0) - 1.7).abs() < 1e-9);
        assert_eq!(s.per_traffic_s(250.0), 2.9);
        assert!((s.per_traffic_s(500.0) - 5.8).abs() < 1e-9);
    }

    #[test]
    fn from_runs_takes_off_the_fixed_part_and_keeps_one_figure_per_rate() {
        let s = VirtualSpeed::from_runs(
            "t",
            &[(250.0, 30.0, FIXED_S + 60.0), (10.0, 30.0, f64::NAN)],
        )
        .unwrap();
        assert_eq!(s.per_rate, vec![(250.0, 2.0)]);
        assert!(VirtualSpeed::from_runs("t", &[]).is_none());
    }

    #[test]
    fn a_missing_or_broken_store_gives_the_default_and_a_saved_one_reads_back() {
        let dir = std::env::temp_dir().join(format!("cctl-speed-{}", std::process::id()));
        let file = dir.join("s.json");
        assert_eq!(VirtualSpeed::load(&file), VirtualSpeed::default());
        let s = speed();
        s.save(&file).unwrap();
        assert_eq!(VirtualSpeed::load(&file), s);
        std::fs::write(&file, "{").unwrap();
        assert_eq!(VirtualSpeed::load(&file), VirtualSpeed::default());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
