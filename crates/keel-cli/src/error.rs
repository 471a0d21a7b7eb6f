//! Why keel stopped before or during a run; the exit code depends on which.

use std::fmt;

/// Why keel stopped before or during a run.
#[derive(Debug)]
pub(crate) enum CliError {
    /// A bad flag, config or environment: exit 2.
    Usage(String),
    /// The run could not be done: exit 1.
    Run(String),
}

impl CliError {
    /// The process exit code.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Run(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(message) | Self::Run(message) => f.write_str(message),
        }
    }
}

impl From<keel_config::Error> for CliError {
    fn from(err: keel_config::Error) -> Self {
        if err.is_invalid() {
            Self::Usage(err.to_string())
        } else {
            Self::Run(err.to_string())
        }
    }
}

impl From<keel_host::HostError> for CliError {
    fn from(err: keel_host::HostError) -> Self {
        if err.is_invalid() {
            Self::Usage(err.to_string())
        } else {
            Self::Run(err.to_string())
        }
    }
}
