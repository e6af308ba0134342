//! Value types of the command line that several subcommands share (so that no command
//! imports another).

/// Where a scenario runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VmMode {
    /// In a VM only when the running kernel has no sch_netem and the scenario needs it.
    Auto,
    /// Always in the VM (e.g. to compare with the guest's native modules).
    Always,
    /// Never; fail if netem is needed and missing.
    Never,
}
