//! One module per `cctl` subcommand.

pub mod apply;
pub mod args;
pub mod bench;
pub mod close_records;
pub mod conform;
pub mod default;
pub mod demo;
pub mod exporter;
pub mod filter;
pub mod list;
pub mod load;
pub mod migrate;
pub mod policy;
pub mod rollback;
pub mod set;
pub mod sockets;
pub mod trace;
pub mod unload;
pub mod upgrade;
