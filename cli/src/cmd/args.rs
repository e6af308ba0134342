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

/// `--port N` of every command: a TCP port, 1 to 65535 (0 is refused with exit 2, naming
/// the flag and the range; omit the flag for every port).
pub fn port_parser() -> impl clap::builder::TypedValueParser<Value = u16> {
    whole::<u16>(1, Some(65_535), "")
}

/// The longest `--duration-s` of `bench run` and `trace`, s: `bench run`'s
/// ([`cctl_bench::request::MAX_DURATION_S`]).
pub const MAX_DURATION_S: f64 = cctl_bench::request::MAX_DURATION_S;

/// The longest `--interval-ms` (and `--queue-interval-ms`) of every command, ms: `bench
/// run`'s ([`cctl_bench::request::MAX_INTERVAL_MS`]).
pub const MAX_INTERVAL_MS: i128 = cctl_bench::request::MAX_INTERVAL_MS as i128;

/// Every numeric option takes its real range in its parser, so that clap refuses a value
/// outside it (exit 2) before anything runs, with a message naming the option, the value
/// and the range (`cctl: --rate-mbit 0: allowed 1 to 10000 Mbit/s`), and no command needs
/// a check of its own. The option's doc comment ends with the same words (`allowed 1 to
/// 10000`): cli/tests/contract.rs reads them from the reference and tries a value below
/// and one above each range.
///
/// A whole number from `lo` to `hi` (`lo` or more without `hi`, up to `T`'s largest);
/// `unit` follows the range in the message.
pub fn whole<T>(
    lo: i128,
    hi: Option<i128>,
    unit: &'static str,
) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: TryFrom<i128> + Clone + Send + Sync + 'static,
{
    let allowed = format!(
        "allowed {}{}",
        match hi {
            Some(hi) => format!("{lo} to {hi}"),
            None => format!("{lo} or more"),
        },
        if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        }
    );
    move |s: &str| -> Result<T, String> {
        let Ok(v) = s.trim().parse::<i128>() else {
            return Err(format!("not a whole number; {allowed}"));
        };
        if v < lo || hi.is_some_and(|hi| v > hi) {
            return Err(allowed.clone());
        }
        // Past `T`'s largest (only without `hi`).
        T::try_from(v).map_err(|_| format!("too large; {allowed}"))
    }
}

/// A number (decimals and exponents allowed) from `lo` to `hi`, or more than `lo` when
/// `lo_open` (a duration of 0 s is none); NaN and infinities are refused. See [`whole`].
pub fn real(
    lo: f64,
    lo_open: bool,
    hi: f64,
    unit: &'static str,
) -> impl clap::builder::TypedValueParser<Value = f64> {
    let allowed = format!(
        "allowed {}{}",
        if lo_open {
            format!("more than {lo} up to {hi}")
        } else {
            format!("{lo} to {hi}")
        },
        if unit.is_empty() {
            String::new()
        } else {
            format!(" {unit}")
        }
    );
    move |s: &str| -> Result<f64, String> {
        let v = match s.trim().parse::<f64>() {
            Ok(v) if v.is_finite() => v,
            _ => return Err(format!("not a number; {allowed}")),
        };
        if v < lo || (lo_open && v == lo) || v > hi {
            return Err(allowed.clone());
        }
        Ok(v)
    }
}

/// Refuses (exit 2) an algorithm given twice in one list (`--algo reno,reno`, or `htcp`
/// and its registered name `bpf_htcp`), naming it: each would be planned twice.
/// `option` names the list in the message (`--algo`).
pub fn unique_algos(option: &str, names: &[String]) -> anyhow::Result<()> {
    // What a name plans: a cctl key (by key or registered name, with its profile), or the
    // kernel's own name.
    let canonical = |n: &str| -> String {
        let n = n.trim();
        if n.starts_with("native:") {
            return n.to_string();
        }
        let (key, profile) = match n.split_once('@') {
            Some((k, p)) => (k, Some(p)),
            None => (n, None),
        };
        match (cctl_loader::catalogue::find(key), profile) {
            (Ok(a), Some(p)) => format!("{}@{p}", a.key),
            (Ok(a), None) => a.key.to_string(),
            (Err(_), _) => n.to_string(),
        }
    };
    for (i, n) in names.iter().enumerate() {
        if let Some(first) = names[..i].iter().find(|m| canonical(m) == canonical(n)) {
            if first.trim() == n.trim() {
                crate::exit::usage!(
                    "{option}: {} is given twice; give each algorithm once",
                    n.trim()
                );
            }
            crate::exit::usage!(
                "{option}: {} and {} are the same algorithm; give each algorithm once",
                first.trim(),
                n.trim()
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::builder::TypedValueParser;

    fn parse<P: TypedValueParser>(p: &P, s: &str) -> Result<P::Value, String> {
        let cmd = clap::Command::new("t");
        p.parse_ref(&cmd, None, std::ffi::OsStr::new(s))
            .map_err(|e| std::error::Error::source(&e).map_or(e.to_string(), |s| s.to_string()))
    }

    #[test]
    fn whole_numbers_are_refused_outside_their_range_saying_it() {
        let p = whole::<u32>(1, Some(10_000), "Mbit/s");
        assert_eq!(parse(&p, "1"), Ok(1));
        assert_eq!(parse(&p, "10000"), Ok(10_000));
        assert_eq!(parse(&p, "0"), Err("allowed 1 to 10000 Mbit/s".into()));
        assert_eq!(parse(&p, "-1"), Err("allowed 1 to 10000 Mbit/s".into()));
        assert_eq!(parse(&p, "10001"), Err("allowed 1 to 10000 Mbit/s".into()));
        assert_eq!(
            parse(&p, "1.5"),
            Err("not a whole number; allowed 1 to 10000 Mbit/s".into())
        );
        let open = whole::<u32>(1, None, "");
        assert_eq!(parse(&open, "4294967295"), Ok(u32::MAX));
        assert_eq!(
            parse(&open, "4294967296"),
            Err("too large; allowed 1 or more".into())
        );
    }

    #[test]
    fn real_numbers_are_refused_outside_their_range_and_when_not_finite() {
        let p = real(0.0, true, 86_400.0, "s");
        assert_eq!(parse(&p, "0.5"), Ok(0.5));
        assert_eq!(parse(&p, "86400"), Ok(86_400.0));
        for bad in ["0", "-0", "-1", "86400.5", "1e12"] {
            assert_eq!(
                parse(&p, bad),
                Err("allowed more than 0 up to 86400 s".into()),
                "{bad}"
            );
        }
        for bad in ["nan", "inf", "-inf", "x"] {
            assert!(
                parse(&p, bad).unwrap_err().starts_with("not a number"),
                "{bad}"
            );
        }
        let closed = real(10.0, false, 3600.0, "s");
        assert_eq!(parse(&closed, "10"), Ok(10.0));
        assert_eq!(parse(&closed, "9.9"), Err("allowed 10 to 3600 s".into()));
    }

    #[test]
    fn an_algorithm_given_twice_is_refused_naming_it() {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(unique_algos("--algo", &v(&["reno", "htcp", "cubic@linux", "cubic"])).is_ok());
        assert!(unique_algos("--algo", &v(&["htcp", "native:htcp"])).is_ok());
        let e = unique_algos("--algo", &v(&["reno", "htcp", "reno"])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--algo: reno is given twice; give each algorithm once"
        );
        let e = unique_algos("--algo", &v(&["htcp", "bpf_htcp"])).unwrap_err();
        assert!(
            e.to_string().contains("htcp and bpf_htcp are the same"),
            "{e}"
        );
        assert!(unique_algos("--algo", &v(&["cubic@linux", "bpf_cubic@linux"])).is_err());
    }
}
