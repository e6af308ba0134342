//! A run's drop ledger ([`cctl_netem::ledger`]): where every packet the run lost was dropped
//! (bottleneck, configured random loss, elsewhere), read from the testbed's counters at the
//! end, with the counters of each bottleneck of a `[topology]` chain (`drops`, `invalid`,
//! `random_drops`, `hops` of `run.json`).

use anyhow::{Context, Result};
use cctl_netem::flows::Endpoints;
use cctl_report::record::RunRecord;

use super::{End, Running, Source, Start};

/// The source of a run's drop ledger.
pub struct Ledger;

/// Nothing to start: the testbed counts from its creation.
struct Counting;

impl Source for Ledger {
    fn start(&self, _: &Start) -> Result<Option<Box<dyn Running>>> {
        Ok(Some(Box::new(Counting)))
    }
}

impl Running for Counting {
    fn finish(self: Box<Self>, end: &End, record: &mut RunRecord) -> Result<()> {
        let bed = end.bed()?;
        let random_drops: u64 = (0..Endpoints::senders(bed))
            .map(|i| bed.random_drops(i).unwrap_or(0))
            .sum();
        record.hops = bed.hop_stats().context("reading the chain's bottlenecks")?;
        // The collector's ring-buffer drops are the ledger's too (filled before sources end).
        let drops = cctl_netem::ledger::read(&bed.drop_places(), random_drops, record.sample_drops)
            .context("reading the drop ledger")?;
        record.random_drops = random_drops;
        record.invalid = drops.unintended();
        record.drops = Some(drops);
        Ok(())
    }
}
