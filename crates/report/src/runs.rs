//! The run list of a sweep and how it is cut: every run is a point × algorithm ×
//! repetition ([`RunId`]); `--shard K/N` keeps a deterministic 1/N of the list
//! ([`Shard`]). Which runs of a directory completed is `crate::resume`'s.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use cctl_scenario::RunPoint;

/// One run of a sweep.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RunId {
    /// Index of the scenario point (as `cctl bench run --dry-run` lists them).
    pub point: usize,
    /// Algorithm under test, as requested (`htcp`, `cubic@linux`, `native:htcp`).
    pub algo: String,
    /// Repetition, 0-based.
    pub rep: u32,
}

impl RunId {
    /// The run's directory under a results directory: `runs/<algo>/p<point>-r<rep>`.
    pub fn dir(&self, results: &Path) -> PathBuf {
        results
            .join("runs")
            .join(&self.algo)
            .join(format!("p{}-r{}", self.point, self.rep))
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} p{} r{}", self.algo, self.point, self.rep)
    }
}

/// The runs of a sweep in the order a lone `cctl bench run` does them: repetition, then
/// point, then algorithm. `points` are the selected points of the sweep (their indices),
/// `algos` the algorithms under test as requested.
pub fn run_list(points: &[usize], algos: &[String], repeat: u32) -> Vec<RunId> {
    let mut out = Vec::with_capacity(points.len() * algos.len() * repeat as usize);
    for rep in 0..repeat {
        for &point in points {
            for algo in algos {
                out.push(RunId {
                    point,
                    algo: algo.clone(),
                    rep,
                });
            }
        }
    }
    out
}

/// `--shard K/N`: the K-th (1-based) of N disjoint parts of a run list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Which part, 1..=n.
    pub k: u32,
    /// How many parts.
    pub n: u32,
}

impl Shard {
    /// The runs of `list` in this shard: every n-th run starting at the k-th, so each
    /// shard gets a similar mix of points (and of run lengths). The same list and shard
    /// always give the same runs; the n shards together give every run once.
    pub fn select(&self, list: Vec<RunId>) -> Vec<RunId> {
        list.into_iter()
            .enumerate()
            .filter(|(i, _)| *i as u64 % u64::from(self.n) == u64::from(self.k - 1))
            .map(|(_, r)| r)
            .collect()
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// Parses `K/N` with 1 ≤ K ≤ N.
    fn from_str(s: &str) -> Result<Shard, String> {
        let syntax = || format!("{s:?} is not K/N: give the shard K (1-based) of N, e.g. 2/3");
        let (k, n) = s.split_once('/').ok_or_else(syntax)?;
        let k: u32 = k.trim().parse().map_err(|_| syntax())?;
        let n: u32 = n.trim().parse().map_err(|_| syntax())?;
        if n == 0 {
            return Err(format!("{s}: N must be at least 1"));
        }
        if k == 0 || k > n {
            return Err(format!(
                "{s}: K must be between 1 and N ({n}); K is 1-based"
            ));
        }
        Ok(Shard { k, n })
    }
}

/// Indices of `points`.
pub fn point_indices(points: &[RunPoint]) -> Vec<usize> {
    points.iter().map(|p| p.index).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn algos(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("a{i}")).collect()
    }

    #[test]
    fn shards_partition_the_run_list_and_are_deterministic() {
        let list = run_list(&[0, 1, 2, 5], &algos(3), 2);
        assert_eq!(list.len(), 24);
        assert_eq!(
            list[0],
            RunId {
                point: 0,
                algo: "a0".into(),
                rep: 0
            }
        );
        assert_eq!(
            list[3],
            RunId {
                point: 1,
                algo: "a0".into(),
                rep: 0
            }
        );
        for n in 1..=7 {
            let mut all: Vec<RunId> = Vec::new();
            for k in 1..=n {
                let s = Shard { k, n };
                let part = s.select(list.clone());
                assert_eq!(part, s.select(list.clone()));
                let (lo, hi) = (list.len() / n as usize, list.len().div_ceil(n as usize));
                assert!(part.len() >= lo && part.len() <= hi, "{s}: {}", part.len());
                all.extend(part);
            }
            all.sort();
            let mut want = list.clone();
            want.sort();
            assert_eq!(all, want, "n = {n}");
        }
    }

    #[test]
    fn shard_syntax_and_range_are_checked() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { k: 2, n: 3 }));
        assert_eq!("1/1".parse::<Shard>(), Ok(Shard { k: 1, n: 1 }));
        for (bad, says) in [
            ("4/3", "between 1 and N (3)"),
            ("0/3", "1-based"),
            ("1/0", "N must be at least 1"),
            ("2", "not K/N"),
            ("a/3", "not K/N"),
            ("-1/3", "not K/N"),
        ] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn run_dirs_follow_the_results_layout() {
        let id = RunId {
            point: 3,
            algo: "cubic@linux".into(),
            rep: 1,
        };
        assert_eq!(
            id.dir(Path::new("/r")),
            PathBuf::from("/r/runs/cubic@linux/p3-r1")
        );
        assert_eq!(id.to_string(), "cubic@linux p3 r1");
    }
}
