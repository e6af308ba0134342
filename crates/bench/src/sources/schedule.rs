//! A run's schedules: the bottleneck rate and the access links' RTT changed at the times
//! the point gives ([`cctl_netem::schedule`]), from t0; what was applied when goes to
//! `schedule` of `run.json`.

use anyhow::{anyhow, Context, Result};
use cctl_netem::schedule::ScheduleDriver;
use cctl_report::record::RunRecord;

use super::{End, Running, Source, Start};

/// The source of a run's rate and delay schedules (on the dumbbell; a `[topology]` chain
/// refuses schedules when the scenario is parsed).
pub struct Schedule;

impl Source for Schedule {
    fn start(&self, run: &Start) -> Result<Option<Box<dyn Running>>> {
        let Some(dumbbell) = run.bed.dumbbell() else {
            return Ok(None);
        };
        let p = run.point;
        let driver =
            ScheduleDriver::start(dumbbell, &p.rate_schedule, &p.delay_schedule, run.t0().at)
                .context("starting the schedule driver")?;
        Ok(driver.map(|d| Box::new(d) as Box<dyn Running>))
    }
}

impl Running for ScheduleDriver {
    fn finish(self: Box<Self>, _: &End, record: &mut RunRecord) -> Result<()> {
        record.schedule = Some((*self).finish().map_err(|e| anyhow!(e))?);
        Ok(())
    }
}
