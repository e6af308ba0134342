//! A run's close records: one per TCP connection of its flows when it ends, in the spirit
//! of RFC 4898's tcpEStats (the loader's `closerec`, close.bpf.c), written to the run's
//! `close.json`. Both ends of each flow get one: the sender's (cwnd, srtt, CA states,
//! retransmissions) and the receiver's (bytes and segments in).

use std::path::Path;

use anyhow::{Context, Result};
use cctl_loader::closerec::{CloseConfig, CloseRecord, CloseRecords};
use cctl_loader::migrate::resolve_netns;
use cctl_loader::upgrade::VersionCache;
use cctl_report::record::RunRecord;

use super::{End, Running, Source, Start};
use crate::run::PORT;

/// Close records being written for one run: the program and the cookies of the run's
/// namespaces (others' records are left out: runs of other slots use the same port).
pub struct RunCloseRecords {
    records: CloseRecords,
    cookies: Vec<u64>,
}

/// Starts writing close records for the connections to or from `port` in `namespaces`.
///
/// Errors: loading or attaching close.bpf.c; a namespace's cookie cannot be read.
pub fn start(port: u16, namespaces: &[String]) -> Result<RunCloseRecords> {
    let cookies = namespaces
        .iter()
        .map(|ns| resolve_netns(Some(ns))?.cookie())
        .collect::<cctl_loader::error::Result<Vec<u64>>>()
        .context("reading the testbed's namespace cookies")?;
    let records = CloseRecords::start(CloseConfig {
        port: Some(port),
        netns_cookie: None,
    })
    .context("starting the close records")?;
    Ok(RunCloseRecords { records, cookies })
}

impl RunCloseRecords {
    /// Stops, and returns the records of the run's connections (not its listening
    /// sockets), annotated with their
    /// algorithm's version and parameters, oldest first.
    ///
    /// Errors: polling the ring buffer failed.
    pub fn finish(self) -> Result<Vec<CloseRecord>> {
        let mut out: Vec<CloseRecord> = self
            .records
            .drain()
            .into_iter()
            .filter(|r| self.cookies.contains(&r.netns_cookie) && r.dport != 0)
            .collect();
        self.records
            .finish()
            .context("stopping the close records")?;
        let mut versions = VersionCache::new();
        for r in &mut out {
            r.annotate(&mut versions);
        }
        out.sort_by_key(|r| r.ts_ns);
        Ok(out)
    }
}

/// Writes `dir/close.json`: the records as a JSON array.
///
/// Errors: writing the file.
pub fn write(dir: &Path, records: &[CloseRecord]) -> Result<()> {
    let path = dir.join("close.json");
    std::fs::write(&path, serde_json::to_vec_pretty(records)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// The source of a run's close records (`close.json`): loaded before t0, read after the
/// testbed is removed, which closes the sockets still in TIME_WAIT.
pub struct Closing;

impl Source for Closing {
    fn before_t0(&self) -> bool {
        true
    }

    fn start(&self, run: &Start) -> Result<Option<Box<dyn Running>>> {
        Ok(Some(Box::new(start(
            PORT,
            &run.bed.drop_places().namespaces,
        )?)))
    }
}

impl Running for RunCloseRecords {
    fn after_bed(&self) -> bool {
        true
    }

    fn finish(self: Box<Self>, end: &End, _: &mut RunRecord) -> Result<()> {
        let records = (*self).finish()?;
        write(end.dir, &records)
    }
}
