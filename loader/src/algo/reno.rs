//! Reno / NewReno (spec §2): bpf/reno.bpf.c, no tunables, no variables beyond the
//! shared measurement layer.

use crate::algos::Params;
use crate::Result;

use super::{load_struct_ops, Var};

/// Loads bpf/reno.bpf.c and registers it as `name`.
pub fn load(name: &str, params: &Params) -> Result<crate::algo::Registered> {
    load_struct_ops!(name, params, reno::RenoSkelBuilder, reno / reno_mut, [])
}

/// Reno has no variables of its own.
pub fn vars(_ca_priv: &[u8]) -> Vec<Var> {
    Vec::new()
}
