//! Why an agent could not be built.

use std::path::PathBuf;

/// Why [`CodingAgentBuilder::build`](crate::CodingAgentBuilder::build) (or
/// [`CodingAgent::from_env`](crate::CodingAgent::from_env), opening a session, or
/// [`CodingAgent::prompt`](crate::CodingAgent::prompt)) failed. Each message says what is
/// wrong and how to fix it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The environment names no model provider, or the one it names cannot be made (no key,
    /// a bad base URL): [`CodingAgent::from_env`](crate::CodingAgent::from_env).
    #[error(transparent)]
    Provider(#[from] keel_provider::ProviderError),
    /// Neither a home directory was given nor `KEEL_HOME` / `HOME` set.
    #[error(
        "neither KEEL_HOME nor HOME is set: set KEEL_HOME to a directory for keel's config \
         and sessions"
    )]
    NoHome,
    /// The working directory is not an existing directory.
    #[error("working directory {}: {reason}; pass an existing directory", path.display())]
    WorkingDir {
        /// The directory as given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A path the file tools may read does not exist.
    #[error("allow-read path {}: {reason}; name an existing file or directory", path.display())]
    AllowRead {
        /// The path as given.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A permission rule is invalid or names a tool the agent does not have (`Bsah(rm:*)`,
    /// `run_comand`): a misspelt rule would silently match nothing.
    #[error("permission rules: {0}")]
    Permissions(#[from] keel_engine::PermissionError),
    /// The hooks' configuration is invalid.
    #[error("hooks: {0}")]
    Hooks(#[from] keel_engine::HookConfigError),
    /// A tool could not be registered (a duplicate name, an invalid schema).
    #[error("tools: {0}")]
    Tools(#[from] keel_tool::RegistryError),
    /// The built-in tools could not be made.
    #[error("the built-in tools: {0}")]
    Sandbox(#[from] keel_sandbox::SandboxError),
    /// The agent could not be built or a session opened.
    #[error(transparent)]
    Engine(#[from] keel_engine::EngineError),
    /// A run's events ended without its outcome, which a run always ends with: a bug in
    /// keel, to report.
    #[error("the run ended without an outcome: please report this as a bug in keel")]
    NoOutcome,
}
