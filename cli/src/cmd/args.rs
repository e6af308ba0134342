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

/// `--clock`: the guest's clock, `virtual` or `real` (see [`cctl_vm::Clock`]).
pub fn clock_parser() -> impl clap::builder::TypedValueParser<Value = cctl_vm::Clock> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(cctl_vm::Clock::NAMES)
        .map(|s| s.parse::<cctl_vm::Clock>().expect("one of Clock::NAMES"))
}

/// Refuses a clock that `vm` cannot give (exit 2, [`crate::exit::USAGE`]): the virtual
/// clock without a guest (`--vm never`), or where `$CCTL_VM_ACCEL` forces KVM, which
/// cannot count instructions.
pub fn check_clock(clock: cctl_vm::Clock, vm: VmMode) -> anyhow::Result<()> {
    if clock != cctl_vm::Clock::Virtual {
        return Ok(());
    }
    if vm == VmMode::Never {
        crate::exit::usage!(
            "--clock virtual is the 6.12 guest's clock (QEMU -icount), and --vm never runs \
             no guest: use --vm always (or auto) with --clock virtual, or --clock real to \
             run on this kernel"
        );
    }
    if cctl_vm::forced_accel() == Some(cctl_vm::Accel::Kvm) {
        return Err(crate::exit::Usage(cctl_vm::VmError::ClockNeedsTcg.to_string()).into());
    }
    Ok(())
}

/// `--parts a,b,...` of `bench perf` and `bench calibrate`: each name parsed (an unknown
/// one is refused with exit 2 and the parser's message, which lists the parts), duplicates
/// dropped, in the parts' own order.
pub fn parse_parts<P>(names: &[String]) -> anyhow::Result<Vec<P>>
where
    P: std::str::FromStr<Err = String> + Ord,
{
    let mut parts: Vec<P> = Vec::new();
    for n in names {
        match n.trim().parse::<P>() {
            Ok(p) if !parts.contains(&p) => parts.push(p),
            Ok(_) => {}
            Err(e) => crate::exit::usage!("--parts: {e}"),
        }
    }
    parts.sort();
    Ok(parts)
}

/// `--port N` of every command: a TCP port, 1 to 65535 (0 is refused with exit 2 and
/// clap's message naming the flag and the range; omit the flag for every port).
pub fn port_parser() -> clap::builder::RangedI64ValueParser<u16> {
    clap::value_parser!(u16).range(1..)
}
