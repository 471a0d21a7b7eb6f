//! Errors: those a tool reports to the model, and those that stop a registry being built.

use std::time::Duration;

/// A tool's failure. It is not a Rust error to the loop: dispatch turns it into an error
/// result the model reads, so its text should say what went wrong and what to do instead.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The arguments parsed but make no sense (a line range backwards, an empty pattern).
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool may not do this (outside the workspace, denied by policy).
    #[error("not allowed: {0}")]
    Denied(String),
    /// Something the tool needed was not there.
    #[error("not found: {0}")]
    NotFound(String),
    /// The call was cancelled.
    #[error("interrupted by the user")]
    Cancelled,
    /// The call ran out of time.
    #[error("timed out after {}s", .0.as_secs_f64())]
    Timeout(Duration),
    /// An I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. `reading src/main.rs`.
        context: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Any other failure, said plainly.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// A failure described by `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// An I/O failure while doing `context`.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// Why a tool could not be added to a registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Another tool already has this name.
    #[error("a tool named {0:?} is already registered")]
    Duplicate(String),
    /// The tool's definition breaks a rule the providers impose.
    #[error("tool {name:?} cannot be offered to models: {reason}")]
    InvalidDefinition {
        /// The tool's name.
        name: String,
        /// The rule it breaks.
        reason: String,
    },
}
