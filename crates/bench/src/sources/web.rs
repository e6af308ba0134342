//! A run's web cross traffic ([`cctl_netem::web`]): `web_sessions` sessions of the point's
//! model from a host of their own on the senders' side, started before t0; their counters
//! go to `web` of `run.json`.

use anyhow::{Context, Result};
use cctl_netem::web::{WebSpec, WebTraffic};
use cctl_report::record::RunRecord;
use cctl_scenario::WebModel;

use super::{End, Running, Source, Start};

/// The source of a run's web sessions.
pub struct Web;

impl Source for Web {
    fn before_t0(&self) -> bool {
        true
    }

    fn start(&self, run: &Start) -> Result<Option<Box<dyn Running>>> {
        let point = run.point;
        if point.web_sessions == 0 {
            return Ok(None);
        }
        let cc = run
            .all
            .iter()
            .find(|r| r.requested == point.web_cc)
            .map_or(point.web_cc.clone(), |r| r.cc_name.clone());
        // The web host is the sender after the flows'; each run draws its own sessions, from
        // the run's seed (the sweep's + the repetition) and the point.
        let sender = point.flows.len();
        let seed = run.seed() ^ ((point.index as u64) << 32);
        let spec = match point.web_model {
            WebModel::Surge => WebSpec::surge(point.web_sessions, &cc, sender, seed),
            WebModel::P0 => WebSpec::p0(point.web_sessions, &cc, sender, seed),
        };
        let dumbbell = run
            .bed
            .dumbbell()
            .context("web cross traffic needs the dumbbell")?;
        let web =
            cctl_netem::web::start(dumbbell, &spec).context("starting the web cross traffic")?;
        Ok(Some(Box::new(web)))
    }
}

impl Running for WebTraffic {
    fn finish(self: Box<Self>, _: &End, record: &mut RunRecord) -> Result<()> {
        record.web = Some((*self).finish());
        Ok(())
    }
}
