//! The errors of loading a scenario: [`FieldError`] names one field and what is wrong with
//! it; [`ScenarioError`] adds the file (or says the file could not be read or found).

use std::path::PathBuf;

use thiserror::Error;

/// What is wrong with one field of a scenario, before the file it is in is known.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// Dotted path of the field, e.g. `flows[1].start_s` or `profiles.ci.sweep.rtt_ms[2]`.
    pub field: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl FieldError {
    /// An error about `field` saying `message`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An error in a scenario file, or a scenario that cannot be found.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Line, column and what the TOML parser said.
        message: String,
    },
    /// A field is missing, unknown, of the wrong type or out of range.
    #[error("{}: {error}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The field and what is wrong with it.
        error: FieldError,
    },
    /// No built-in scenario has that name or id, and it is not a readable file.
    #[error("no scenario `{name}`: give a name ({known}), a test id such as T0.1, or a path to a .toml file")]
    NotFound {
        /// What was asked for.
        name: String,
        /// The built-in names, comma-separated.
        known: String,
    },
}

impl ScenarioError {
    /// The offending field's dotted path, for [`ScenarioError::Invalid`].
    pub fn field(&self) -> Option<&str> {
        match self {
            ScenarioError::Invalid { error, .. } => Some(&error.field),
            _ => None,
        }
    }
}
