//! Errors that stop an agent being built or a session being opened.

/// Why the engine could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The agent was built without something it needs.
    #[error("agent configuration: {0}")]
    Config(String),
    /// The session store failed (creating, reading or resuming a session).
    #[error(transparent)]
    Session(#[from] crate::session_store::SessionError),
    /// `resume_latest` found no session for the directory.
    #[error("no session to resume in {0}: start one with a prompt")]
    NoSession(String),
}
