//! What a run cost the machine it ran on: wall time from t0 to the end of its traffic, the
//! busy share of all CPUs over it (/proc/stat, [`crate::cost::cpu_times`]) and the number of
//! CPUs (`wall_s`, `cpu_busy`, `cpus` of `run.json`).

use anyhow::Result;
use cctl_report::record::RunRecord;

use super::{End, Running, Source, Start};
use crate::cost::cpu_times;

/// The source of a run's wall time and CPU use.
pub struct HostCost;

/// CPU jiffies (busy, total) at t0.
struct Since(Option<(u64, u64)>);

impl Source for HostCost {
    fn start(&self, _: &Start) -> Result<Option<Box<dyn Running>>> {
        Ok(Some(Box::new(Since(cpu_times()))))
    }
}

impl Running for Since {
    fn finish(self: Box<Self>, end: &End, record: &mut RunRecord) -> Result<()> {
        record.wall_s = end.t0.at.elapsed().as_secs_f64();
        record.cpu_busy = match (self.0, cpu_times()) {
            (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => (b1 - b0) as f64 / (t1 - t0) as f64,
            _ => f64::NAN,
        };
        record.cpus = std::thread::available_parallelism().map_or(0, |n| n.get() as u32);
        Ok(())
    }
}
