//! Why settings could not be made.

/// Why the settings, the agent or the session could not be made. The two kinds differ in who
/// acts: the person fixes an [`Invalid`](Error::Invalid) flag, file or variable (keel's CLI
/// exits 2); a [`Failed`](Error::Failed) step is the run's (exit 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A flag, a config file or the environment says something keel cannot use; the message
    /// names it and how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// Something needed could not be done (a store, a file, the session).
    #[error("{0}")]
    Failed(String),
}

impl Error {
    /// Whether the person's input is at fault (a usage error) rather than the run.
    pub fn is_invalid(&self) -> bool {
        matches!(self, Self::Invalid(_))
    }
}
