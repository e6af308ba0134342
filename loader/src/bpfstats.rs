//! TEMP STUB (replaced by helper A's module at merge)
use crate::error::Result;
pub struct StatsGuard;
impl StatsGuard {
    pub fn enable() -> Result<StatsGuard> {
        Ok(StatsGuard)
    }
}
#[derive(Debug, Clone)]
pub struct ProgStats {
    pub id: u32,
    pub name: String,
    pub cc: Option<String>,
    pub version: Option<u32>,
    pub callback: String,
    pub run_time_ns: u64,
    pub run_cnt: u64,
}
pub fn cctl_programs() -> Result<Vec<ProgStats>> {
    Ok(vec![])
}
