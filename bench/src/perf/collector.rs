//! Part `collector` of `cctl bench perf` (see the module docs of [`super`]).

use anyhow::Result;

use super::{PartResult, PerfOptions};

/// Runs the part on `opts.site`.
///
/// Errors: whatever stops the measurement (privileges, a missing module, a failed flow).
pub fn run(opts: &PerfOptions) -> Result<PartResult> {
    let _ = opts;
    anyhow::bail!("not written yet")
}
