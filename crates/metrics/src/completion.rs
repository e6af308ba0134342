//! M15 completion times of fixed-size transfers, grouped by start order.

use serde::{Deserialize, Serialize};

use super::inputs::FlowSeries;
use super::stats::mean_and_stderr;

/// M15 completion times of the flows started k-th in each run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionSummary {
    /// Start order within a run, 1 = the first flow started.
    pub start_rank: usize,
    /// Completion times of the runs' k-th flows that completed, in run order, in seconds.
    pub values_s: Vec<f64>,
    /// Runs whose k-th flow did not complete (no `completion_s`).
    pub not_completed: usize,
    /// Mean of `values_s`, in seconds.
    pub mean_s: Option<f64>,
    /// Standard error of that mean, in seconds (0 for one value).
    pub stderr_s: Option<f64>,
}

/// M15 completion times (\[P2\] §III) grouped by start order: flows of each run are ranked by
/// `start_s` (ties by id), and rank k collects `completion_s` of every run's k-th flow.
/// Flows with a non-finite start are ranked last.
pub fn completion_times_by_start_order(runs: &[&[FlowSeries]]) -> Vec<CompletionSummary> {
    let mut out: Vec<CompletionSummary> = Vec::new();
    for run in runs {
        let mut order: Vec<&FlowSeries> = run.iter().collect();
        order.sort_by(|a, b| {
            let key = |f: &FlowSeries| {
                if f.start_s.is_finite() {
                    f.start_s
                } else {
                    f64::INFINITY
                }
            };
            key(a).total_cmp(&key(b)).then(a.id.cmp(&b.id))
        });
        for (i, f) in order.iter().enumerate() {
            if out.len() <= i {
                out.push(CompletionSummary {
                    start_rank: i + 1,
                    values_s: Vec::new(),
                    not_completed: 0,
                    mean_s: None,
                    stderr_s: None,
                });
            }
            match f.completion_s.filter(|c| c.is_finite()) {
                Some(c) => out[i].values_s.push(c),
                None => out[i].not_completed += 1,
            }
        }
    }
    for s in &mut out {
        if let Some((m, se)) = mean_and_stderr(&s.values_s) {
            s.mean_s = Some(m);
            s.stderr_s = Some(se);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::assert_some_close;

    #[test]
    fn completion_times_are_grouped_by_start_order() {
        let flow = |id: usize, start_s: f64, completion_s: Option<f64>| FlowSeries {
            id,
            start_s,
            completion_s,
            ..Default::default()
        };
        let run1 = vec![flow(0, 0.0, Some(10.0)), flow(1, 5.0, Some(12.0))];
        let run2 = vec![flow(0, 5.0, None), flow(1, 0.0, Some(14.0))];
        let s = completion_times_by_start_order(&[&run1, &run2]);
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].start_rank, s[0].values_s.clone()),
            (1, vec![10.0, 14.0])
        );
        assert_some_close(s[0].mean_s, 12.0);
        assert_some_close(s[0].stderr_s, 2.0); // std √8 over √2
        assert_eq!(
            (s[1].start_rank, s[1].values_s.clone(), s[1].not_completed),
            (2, vec![12.0], 1)
        );
        assert_some_close(s[1].stderr_s, 0.0);
        assert!(completion_times_by_start_order(&[]).is_empty());
    }
}
