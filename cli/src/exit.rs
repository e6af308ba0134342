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
    /// A runtime failure: the kernel, a file or a command failed.
    pub const FAILURE: i32 = 1;
    /// Bad input: unknown algorithm, invalid name or parameter, a name that is not loaded, a
    /// missing file or directory named on the command line (clap uses 2 as well).
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
/// docs/commands.md), built from [`ALL`].
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

/// The message for an error chain: its causes joined with ": ", leaving out a cause
/// whose text the one before already ends with (an error that prints its own source,
/// such as a loader `Io` error's OS error, would otherwise say it twice).
pub fn message(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
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
        // A scenario name, id or file given on the command line that is not there or not
        // valid; a file that exists but cannot be read is a runtime failure.
        if let Some(e) = cause.downcast_ref::<cctl_scenario::ScenarioError>() {
            use cctl_scenario::ScenarioError;
            return match e {
                ScenarioError::Read { error, .. }
                    if error.kind() != std::io::ErrorKind::NotFound =>
                {
                    FAILURE
                }
                _ => USAGE,
            };
        }
        // A summary or tolerance file named on the command line that is not there or not
        // valid; one that exists but cannot be read is a runtime failure.
        if let Some(e) = cause.downcast_ref::<cctl_report::check::CheckError>() {
            return if e.is_bad_input() { USAGE } else { FAILURE };
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
