//! Why the host could not do what a front end asked.

/// Why the host could not open a session, run a turn or take an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The settings, the agent or the session could not be made.
    #[error(transparent)]
    Config(#[from] keel_config::Error),
    /// No live session has this id.
    #[error("no live session {0}")]
    NoSession(String),
    /// The session is running a turn; a second one waits until it ends.
    #[error("session {0} is running a turn; wait for it to end, or cancel it")]
    Busy(String),
    /// The question was answered already, or never asked.
    #[error("no open question {0}")]
    NoQuestion(u64),
    /// The subscriber may not answer this question: a watcher, or a protected call that only
    /// the front end owning the session may answer.
    #[error("{0}")]
    NotAllowed(String),
    /// The request names something that is not there, or asks what may not be done (a
    /// snapshot that does not exist, a rewind that would undo another session's edits).
    #[error("{0}")]
    Invalid(String),
    /// Something the host needed failed (a store, a task).
    #[error("{0}")]
    Failed(String),
}

impl HostError {
    /// Whether the request itself was at fault (a bad id, a setting), rather than the run.
    pub fn is_invalid(&self) -> bool {
        match self {
            Self::Config(err) => err.is_invalid(),
            Self::NoSession(_) | Self::NoQuestion(_) | Self::NotAllowed(_) | Self::Invalid(_) => {
                true
            }
            Self::Busy(_) | Self::Failed(_) => false,
        }
    }
}
