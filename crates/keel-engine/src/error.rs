//! Errors that stop an agent being built or a session being opened.

/// Why the engine could not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The agent was built without something it needs.
    #[error("agent configuration: {0}")]
    Config(String),
}
