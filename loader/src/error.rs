//! Typed errors of the loader: each says what was wrong and what is allowed.

use std::path::PathBuf;

/// Everything the loader can refuse or fail at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The caller lacks the privileges BPF struct_ops needs.
    #[error("{action} needs root (or CAP_BPF + CAP_NET_ADMIN + CAP_SYS_ADMIN); run with sudo")]
    NotPrivileged {
        /// What was attempted (`loading bpf_htcp`).
        action: String,
    },

    /// A kernel feature cctl relies on is missing.
    #[error("the running kernel lacks {feature}: {hint}")]
    MissingFeature {
        /// The feature (`BTF (/sys/kernel/btf/vmlinux)`).
        feature: String,
        /// What provides it.
        hint: String,
    },

    /// `cctl load X` with an X this binary does not carry.
    #[error("unknown algorithm '{name}'; available: {available}")]
    UnknownAlgorithm {
        /// What was asked for.
        name: String,
        /// Comma-separated keys of the carried algorithms.
        available: String,
    },

    /// A congestion-control name the kernel would reject or that is unsafe.
    #[error("invalid congestion-control name '{name}': {reason} (allowed: 1-15 characters of [A-Za-z0-9_])")]
    InvalidName {
        /// The refused name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The name is already registered in the kernel, by cctl or by someone else.
    #[error("congestion control '{name}' {detail}")]
    NameTaken {
        /// The name.
        name: String,
        /// By whom it is taken and what to do.
        detail: String,
    },

    /// `cctl unload|upgrade|rollback|set X` for an X that is not registered at all (bad
    /// input: a typo or a name already gone; exit 2), with what is loaded.
    #[error("'{name}' is not loaded; {loaded}")]
    NotLoaded {
        /// The name or algorithm key given.
        name: String,
        /// What cctl has loaded, as a sentence (`cctl list` shows more).
        loaded: String,
    },

    /// `cctl unload X` for an X that is registered but not cctl's (built-in, a module,
    /// another loader), or that is the namespace's default (a conflict; exit 5).
    #[error("'{name}' {detail}")]
    NotOurs {
        /// The name.
        name: String,
        /// Why it cannot be unloaded, and what to do.
        detail: String,
    },

    /// An unknown `--param` key.
    #[error("unknown parameter '{key}' for {algo}; valid parameters:\n{valid}")]
    UnknownParam {
        /// Algorithm key.
        algo: String,
        /// The unknown key.
        key: String,
        /// Table of valid keys with units, ranges and defaults.
        valid: String,
    },

    /// A `--param` value that does not parse or is out of range.
    #[error("parameter '{key}' of {algo}: {reason}; expected {expected}")]
    BadParamValue {
        /// Algorithm key.
        algo: String,
        /// Parameter key.
        key: String,
        /// What is wrong with the value.
        reason: String,
        /// The allowed values with unit.
        expected: String,
    },

    /// A combination of parameters the algorithm forbids.
    #[error("parameters of {algo}: {reason}")]
    BadParamCombination {
        /// Algorithm key.
        algo: String,
        /// Which parameters conflict, and how.
        reason: String,
    },

    /// A `cctl policy` rule with a bad target (port out of range, not a cgroup v2
    /// directory, the root cgroup).
    #[error("{what}; {allowed}")]
    PolicyBadRule {
        /// What is wrong.
        what: String,
        /// What is allowed.
        allowed: String,
    },

    /// A `cctl policy add` naming a congestion control the kernel has not registered.
    #[error("congestion control '{name}' is not registered in the kernel; registered: {registered} (cctl's algorithms are registered with `cctl load`)")]
    PolicyUnknownCc {
        /// The name asked for.
        name: String,
        /// Comma-separated names in tcp_available_congestion_control.
        registered: String,
    },

    /// `cctl policy remove` of a rule that does not exist.
    #[error("no policy rule for {what}; {rules}")]
    PolicyNoSuchRule {
        /// The port or cgroup asked for.
        what: String,
        /// The rules there are.
        rules: String,
    },

    /// A libbpf operation failed.
    #[error("{context}: {source}")]
    Bpf {
        /// What cctl was doing.
        context: String,
        /// libbpf's error (the verifier log is printed by libbpf before it).
        #[source]
        source: libbpf_rs::Error,
    },

    /// The verifier (or libbpf) rejected a BPF object; `log` is the end of its log.
    #[error("{context}: {source}; the verifier's log ends with:\n{log}")]
    Rejected {
        /// What cctl was doing (`loading bpf_htcp (verifier)`).
        context: String,
        /// The relevant end of libbpf's output, with the verifier's message.
        log: String,
        /// libbpf's error.
        #[source]
        source: libbpf_rs::Error,
    },

    /// A BPF object (`cctl upgrade --object FILE`) that cannot be a version of a
    /// congestion control.
    #[error("{path}: {reason}")]
    BadObject {
        /// The object file.
        path: PathBuf,
        /// What is wrong with it, and what is expected.
        reason: String,
    },

    /// `cctl set` of a parameter that may only change at load (spec §18.5).
    #[error("parameter '{key}' of {algo} is load-time only: changing it would break an invariant of running flows (it sets the size, layout or mode of their state); change it with `cctl upgrade NAME --param {key}=VALUE` (new connections get it). {live}")]
    NotLive {
        /// Algorithm key.
        algo: String,
        /// The refused key.
        key: String,
        /// The keys that may change live.
        live: String,
    },

    /// A version of a loaded congestion control that is not (or no longer) loaded.
    #[error("'{name}' {detail}")]
    NoVersion {
        /// The registered name.
        name: String,
        /// Which version is missing, and which there are.
        detail: String,
    },

    /// A file-system or system-call operation failed.
    #[error("{context} ({path}): {source}")]
    Io {
        /// What cctl was doing.
        context: String,
        /// The file involved.
        path: PathBuf,
        /// The system error.
        #[source]
        source: std::io::Error,
    },

    /// A socket filter, namespace or cgroup argument of `migrate`/`sockets` that cannot be used.
    #[error("{what}: {reason}")]
    BadFilter {
        /// The argument (`--netns foo`).
        what: String,
        /// What is wrong with it and what is allowed.
        reason: String,
    },

    /// A migration target that the kernel does not have registered.
    #[error("cannot migrate to '{name}': it is not registered in the kernel (registered: {registered}){hint}")]
    NotRegistered {
        /// The target name.
        name: String,
        /// Space-separated tcp_available_congestion_control.
        registered: String,
        /// How to register it, if cctl knows (`; load it with `cctl load htcp``).
        hint: String,
    },

    /// A migration target that the namespace's sockets may not use.
    #[error("cannot migrate to '{name}' in {netns}: {reason}")]
    NotAllowed {
        /// The target name.
        name: String,
        /// The namespace (`netns cctl-ma-a`).
        netns: String,
        /// Why, and how to allow it.
        reason: String,
    },

    /// A migration whose filter matched no established socket; nothing was changed.
    #[error("no established TCP socket matches {filter}; nothing was changed{census}")]
    NoMatch {
        /// The filter in words (`--from cubic --port 5001 in netns x`).
        filter: String,
        /// What the namespace's established sockets do run (`; established sockets there: bbr 3`).
        census: String,
    },

    /// An algorithm that a `cctl policy` rule still names (unload refused).
    #[error("'{name}' is named by policy rules ({rules}); not unloaded: remove those rules first (`cctl policy remove --port N | --cgroup PATH`)")]
    NamedByPolicy {
        /// The congestion-control name.
        name: String,
        /// The rules (`port 5201 → bpf_htcp`).
        rules: String,
    },

    /// An algorithm that established sockets still use (unload refused or migration incomplete).
    #[error("'{name}' is still used by {count} established TCP socket(s) ({detail}); {hint}")]
    InUse {
        /// The congestion-control name.
        name: String,
        /// Number of established sockets using it, in all namespaces checked.
        count: u64,
        /// Where they are (`netns a: 3, current: 1`).
        detail: String,
        /// What to do.
        hint: String,
    },

    /// A file or directory cctl makes decisions from that someone other than root could
    /// have written (see [`crate::security`]); it is not used.
    #[error("refusing to use {path}: {reason}; fix it with `{fix}`")]
    Untrusted {
        /// The file or directory at fault.
        path: PathBuf,
        /// Who could write it, and how.
        reason: String,
        /// The command that fixes it (`chmod go-w /etc/cctl/cctl.toml`).
        fix: String,
    },

    /// A `cctl apply` configuration file that is not valid TOML.
    #[error("{path}: {message}")]
    ConfigSyntax {
        /// The file.
        path: PathBuf,
        /// Line, column and what the TOML parser said.
        message: String,
    },

    /// A `cctl apply` configuration that is valid TOML but not a valid configuration
    /// (or that cannot be made to hold on this kernel); nothing was changed.
    #[error("{path}: {field}: {message}")]
    BadConfig {
        /// The file.
        path: PathBuf,
        /// Dotted path of the field (`algorithm[1].params.beta_min_pct`).
        field: String,
        /// What is wrong and what is allowed.
        message: String,
    },

    /// A step of `cctl apply` failed; the steps before it were undone as far as
    /// `undone` says.
    #[error("step {index}/{total} ({step}) failed: {cause}; {undone}")]
    StepFailed {
        /// 1-based number of the failed step.
        index: usize,
        /// Number of steps of the plan.
        total: usize,
        /// The step in words (`upgrade bpf_htcp: beta_min_pct 50→60`).
        step: String,
        /// What undoing the earlier steps did (`undone: 2 earlier steps; the kernel is
        /// as before`), or why nothing needed undoing.
        undone: String,
        /// Why the step failed (part of the message, so not repeated as a source).
        cause: Box<Error>,
    },
}

/// Result alias of the loader.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(
        context: impl Into<String>,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            context: context.into(),
            path: path.into(),
            source,
        }
    }

    pub(crate) fn bpf(context: impl Into<String>, source: libbpf_rs::Error) -> Self {
        Error::Bpf {
            context: context.into(),
            source,
        }
    }
}
