//! Exit codes of `cctl`, in one place.

use cctl_loader::Error;

/// Declares the exit codes, each with its doc comment, and [`ALL`]: the same codes,
/// names and docs as data, from which the reference's table is built (one fact, one place).
macro_rules! exit_codes {
    ($($(#[doc = $doc:literal])+ pub const $name:ident: i32 = $code:literal;)+) => {
        $($(#[doc = $doc])+ pub const $name: i32 = $code;)+
        /// Every exit code: (code, name, meaning), in the order declared.
        pub const ALL: &[(i32, &str, &str)] = &[$(($code, stringify!($name), concat!($($doc, " "),+))),+];
    };
}

exit_codes! {
    /// Success.
    pub const OK: i32 = 0;
    /// A runtime failure: the kernel, a file or a command failed; `cctl bench diff`: the two
    /// results directories differ.
    pub const FAILURE: i32 = 1;
    /// Bad input: unknown algorithm, invalid name or parameter, a name that is not loaded, a
    /// number outside its option's range, an algorithm given twice, a missing file or
    /// directory named on the command line or a directory where a file belongs.
    pub const USAGE: i32 = 2;
    /// Not root / missing capabilities.
    pub const NOT_PRIVILEGED: i32 = 3;
    /// The running kernel lacks a feature cctl needs.
    pub const MISSING_FEATURE: i32 = 4;
    /// A name conflict: already registered, or not cctl's to unload; or another `cctl bench`
    /// holds the kernel; or the exporter's listen address is in use.
    pub const CONFLICT: i32 = 5;
    /// Established sockets still use the algorithm (`cctl unload` refused, or a migration left
    /// some behind).
    pub const IN_USE: i32 = 6;
    /// A migration filter matched no established socket; nothing was changed.
    pub const NO_MATCH: i32 = 7;
    /// `cctl bench check` (or `cctl bench run --check`): a metric is outside its tolerance of
    /// the baseline, or a baseline point or metric is missing from the results; `bench run
    /// --strict` and `bench report --strict`: a scenario's expectation failed.
    pub const REGRESSION: i32 = 8;
    /// A file or directory cctl decides from (the `cctl apply` configuration, /run/cctl) is
    /// writable by someone other than root; it was not used.
    pub const UNTRUSTED: i32 = 9;
    /// Stopped by SIGINT/SIGTERM.
    pub const INTERRUPTED: i32 = 130;
}

/// The exit codes as a markdown table (`cctl --help` shows it; `make docs` puts it in
/// docs/reference/commands.md), built from [`ALL`].
pub fn table() -> String {
    let mut t = String::from(
        "Exit codes (cli/src/exit.rs):\n\n| code | name | meaning |\n|---:|---|---|\n",
    );
    for (code, name, doc) in ALL {
        let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
        t.push_str(&format!("| {code} | `{name}` | {doc} |\n"));
    }
    t
}

/// Bad command-line input found by `cctl` itself (exit code [`USAGE`]).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// Fails with a [`Usage`] error.
macro_rules! usage {
    ($($arg:tt)*) => {
        return Err(anyhow::Error::new($crate::exit::Usage(format!($($arg)*))))
    };
}
pub(crate) use usage;

/// Whether an I/O error on a path the user named on the command line (a scenario, a
/// summary, a tolerance file, a script) is bad input, and what to say then instead of the
/// OS's words: a path that is not there, a directory where a file belongs, or a file where
/// a directory is in the path. The one place that decides it: [`code_for`] and [`message`]
/// ask it for every command's path errors (`ScenarioError::Read`, `CheckError::Read`, and
/// any `io::Error` in a chain), so that no command can treat them differently. Anything
/// else (permissions, I/O errors) is a runtime failure.
pub fn bad_path(error: &std::io::Error) -> Option<&'static str> {
    use std::io::ErrorKind;
    match error.kind() {
        // The OS's words say it ("No such file or directory") and are kept.
        ErrorKind::NotFound => Some(""),
        ErrorKind::IsADirectory => Some("is a directory; give a file"),
        ErrorKind::NotADirectory => Some(
            "a part of the path before the last is a file, not a directory; give the path of \
             a file",
        ),
        _ => None,
    }
}

/// The path and OS error of a read of a path named on the command line, where the error
/// type holds them as fields (not as its source): scenario files, summaries and tolerances.
fn path_read_error<'a>(
    cause: &'a (dyn std::error::Error + 'static),
) -> Option<(&'a std::path::Path, &'a std::io::Error)> {
    if let Some(cctl_scenario::ScenarioError::Read { path, error }) = cause.downcast_ref() {
        return Some((path, error));
    }
    if let Some(cctl_report::check::CheckError::Read { path, error }) = cause.downcast_ref() {
        return Some((path, error));
    }
    None
}

/// The message for an error chain: its causes joined with ": ", leaving out a cause
/// whose text the one before already ends with (an error that prints its own source,
/// such as a loader `Io` error's OS error, would otherwise say it twice). A bad path
/// ([`bad_path`]) says what is allowed instead of the OS's words (`/tmp: is a directory;
/// give a file`).
pub fn message(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let mut text = cause.to_string();
        if let Some((path, error)) = path_read_error(cause) {
            if let Some(why) = bad_path(error).filter(|w| !w.is_empty()) {
                text = format!("{}: {why}", path.display());
            }
        } else if let Some(error) = cause.downcast_ref::<std::io::Error>() {
            if let Some(why) = bad_path(error).filter(|w| !w.is_empty()) {
                // The cause before may end with the OS's words: replace them.
                if let Some(kept) = out.strip_suffix(&text) {
                    out = kept.trim_end_matches([' ', ':']).to_string();
                }
                text = why.to_string();
            }
        }
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// The exit code for an error chain: the first loader error in it decides.
pub fn code_for(err: &anyhow::Error) -> i32 {
    for cause in err.chain() {
        if cause.downcast_ref::<Usage>().is_some()
            || cause
                .downcast_ref::<cctl_report::resume::Mismatch>()
                .is_some()
        {
            return USAGE;
        }
        if cause
            .downcast_ref::<cctl_bench::resolve::UnknownAlgorithm>()
            .is_some()
            || cause
                .downcast_ref::<cctl_bench::network::DctcpWithoutEcn>()
                .is_some()
        {
            return USAGE;
        }
        // A scenario, summary or tolerance file named on the command line: bad input when
        // it is not there or a directory (bad_path decides); one that exists but cannot be
        // read is a runtime failure.
        if let Some((_, error)) = path_read_error(cause) {
            return if bad_path(error).is_some() {
                USAGE
            } else {
                FAILURE
            };
        }
        // A scenario name or id that is not there, or a file that is not valid.
        if cause
            .downcast_ref::<cctl_scenario::ScenarioError>()
            .is_some()
        {
            return USAGE;
        }
        // A summary or tolerance file that is not valid.
        if let Some(e) = cause.downcast_ref::<cctl_report::check::CheckError>() {
            return if e.is_bad_input() { USAGE } else { FAILURE };
        }
        // Any other path a command could not open because it is a directory, or has a file
        // where a directory belongs (bad_path), is one the user named.
        if let Some(error) = cause.downcast_ref::<std::io::Error>() {
            if error.kind() != std::io::ErrorKind::NotFound && bad_path(error).is_some() {
                return USAGE;
            }
        }
        if let Some(cctl_bench::lock::LockError::Held { .. }) = cause.downcast_ref() {
            return CONFLICT;
        }
        if let Some(e) = cause.downcast_ref::<crate::exporter::server::ListenError>() {
            use crate::exporter::server::ListenError;
            return match e {
                ListenError::InUse(_) => CONFLICT,
                ListenError::NotLocal(_) => USAGE,
                ListenError::Denied(_) => NOT_PRIVILEGED,
                ListenError::Other(..) => FAILURE,
            };
        }
        if let Some(e) = cause.downcast_ref::<Error>() {
            return match e {
                Error::NotPrivileged { .. } => NOT_PRIVILEGED,
                Error::MissingFeature { .. } => MISSING_FEATURE,
                Error::UnknownAlgorithm { .. }
                | Error::InvalidName { .. }
                | Error::UnknownParam { .. }
                | Error::BadParamValue { .. }
                | Error::BadParamCombination { .. }
                | Error::NotLive { .. } => USAGE,
                Error::PolicyBadRule { .. }
                | Error::PolicyUnknownCc { .. }
                | Error::PolicyNoSuchRule { .. } => USAGE,
                Error::NameTaken { .. } | Error::NotOurs { .. } => CONFLICT,
                Error::NotLoaded { .. } => USAGE,
                Error::Bpf { .. } | Error::Io { .. } => FAILURE,
                Error::Rejected { .. } => FAILURE,
                Error::BadObject { .. } | Error::NoVersion { .. } => USAGE,
                Error::BadFilter { .. } | Error::NotRegistered { .. } => USAGE,
                Error::NotAllowed { .. } => CONFLICT,
                Error::NoMatch { .. } => NO_MATCH,
                Error::InUse { .. } | Error::NamedByPolicy { .. } => IN_USE,
                Error::ConfigSyntax { .. } | Error::BadConfig { .. } => USAGE,
                Error::Untrusted { .. } => UNTRUSTED,
                Error::StepFailed { .. } => FAILURE,
            };
        }
    }
    FAILURE
}

/// clap's refusal of a command line in the form of every other refusal (docs/reference/cli-contract.md, "The
/// command-line contract"): `<what>: <why>` on the first line (without the `cctl: ` that
/// main prints before it), naming the option and the value that was wrong and what is
/// allowed (`--rate-mbit 0: allowed 1 to 10000 Mbit/s`); then clap's tips, usage line and
/// pointer to `--help`, each on a line of its own.
pub fn clap_message(e: &clap::Error) -> String {
    use clap::error::{ContextKind as K, ContextValue as V, ErrorKind};
    let one = |k: K| match e.get(k) {
        Some(V::String(s)) => Some(s.clone()),
        _ => None,
    };
    let many = |k: K| match e.get(k) {
        Some(V::Strings(v)) => v.clone(),
        Some(V::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    // `--rate-mbit <RATE_MBIT>` is named `--rate-mbit`; a positional `<SCENARIO>` as is.
    let name = |a: &str| -> String {
        if a.starts_with('-') {
            a.split([' ', '=']).next().unwrap_or(a).to_string()
        } else {
            a.to_string()
        }
    };
    let arg = one(K::InvalidArg).map(|a| name(&a));
    let value = one(K::InvalidValue).map(|v| {
        if v.is_empty() || v.contains(char::is_whitespace) {
            format!("'{v}'")
        } else {
            v
        }
    });
    let arg_value = [arg.clone(), value.clone()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    // clap's own text: its first paragraph says what is wrong, the others are the tips,
    // the usage and the pointer to --help.
    let rendered = e.render().to_string();
    let rendered = rendered.strip_prefix("error: ").unwrap_or(&rendered);
    let (head, tail) = rendered.split_once("\n\n").unwrap_or((rendered, ""));
    let head = head.split_whitespace().collect::<Vec<_>>().join(" ");
    let quoted = |v: &[String]| {
        v.iter()
            .map(|s| format!("'{s}'"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (what, why) = match e.kind() {
        ErrorKind::ValueValidation => (
            arg_value,
            std::error::Error::source(e).map_or(head.clone(), |s| s.to_string()),
        ),
        ErrorKind::InvalidValue if one(K::InvalidValue).is_some_and(|v| v.is_empty()) => (
            arg.unwrap_or_default(),
            match many(K::ValidValue) {
                v if v.is_empty() => "needs a value".to_string(),
                v => format!("needs a value, one of {}", v.join(", ")),
            },
        ),
        ErrorKind::InvalidValue => (
            arg_value,
            format!("not one of {}", many(K::ValidValue).join(", ")),
        ),
        ErrorKind::UnknownArgument => {
            let a = arg.unwrap_or_default();
            let why = if a.starts_with('-') {
                "unknown option (`--help` lists the options)"
            } else {
                "unexpected argument (`--help` lists the arguments)"
            };
            (a, why.to_string())
        }
        ErrorKind::InvalidSubcommand => (
            one(K::InvalidSubcommand).unwrap_or_default(),
            "unknown subcommand (`--help` lists the subcommands)".to_string(),
        ),
        ErrorKind::MissingSubcommand => (
            one(K::InvalidSubcommand).unwrap_or_default(),
            format!(
                "needs a subcommand, one of {}",
                many(K::ValidSubcommand).join(", ")
            ),
        ),
        ErrorKind::MissingRequiredArgument => (
            many(K::InvalidArg)
                .iter()
                .map(|a| name(a))
                .collect::<Vec<_>>()
                .join(", "),
            "required, and not given".to_string(),
        ),
        ErrorKind::ArgumentConflict => {
            let prior: Vec<String> = many(K::PriorArg).iter().map(|a| name(a)).collect();
            let a = arg.unwrap_or_default();
            if prior.is_empty() || prior == [a.clone()] {
                (a, "given more than once; give it once".to_string())
            } else {
                (a, format!("cannot be used with {}", quoted(&prior)))
            }
        }
        ErrorKind::TooManyValues => (
            arg.unwrap_or_default(),
            format!(
                "takes no more values; {} is one too many",
                value.unwrap_or_default()
            ),
        ),
        ErrorKind::NoEquals => (
            arg.unwrap_or_default(),
            "give its value after an equals sign (OPTION=VALUE)".to_string(),
        ),
        ErrorKind::InvalidUtf8 => (
            arg.unwrap_or_default(),
            "not valid UTF-8; give text".to_string(),
        ),
        _ => (arg.unwrap_or_default(), head.clone()),
    };
    let mut out = if what.is_empty() {
        why
    } else {
        format!("{what}: {why}")
    };
    for line in tail.lines().map(str::trim).filter(|l| !l.is_empty()) {
        out.push('\n');
        out.push_str(line);
    }
    out
}
