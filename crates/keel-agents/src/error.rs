//! What can go wrong when delegation is set up. Failures while a delegated run happens are
//! never errors: they are results the calling model reads.

use std::path::PathBuf;

/// Why delegation could not be set up or a definition could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentsError {
    /// Reading a file or directory failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A definition file (agent, team or skill) cannot be used.
    #[error("{}: {reason}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// No agent, team or skill has this name.
    #[error("no {kind} named `{name}`; known: {known}")]
    NotFound {
        /// `agent`, `team` or `skill`.
        kind: &'static str,
        /// The name asked for.
        name: String,
        /// The names that exist, comma-separated (or `none`).
        known: String,
    },
    /// Building an agent or its tools failed.
    #[error(transparent)]
    Engine(#[from] keel_engine::EngineError),
    /// A tool could not be registered.
    #[error(transparent)]
    Registry(#[from] keel_tool::RegistryError),
    /// The sandbox for a directory could not be made.
    #[error(transparent)]
    Sandbox(#[from] keel_sandbox::SandboxError),
}

impl AgentsError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn not_found<'a>(
        kind: &'static str,
        name: &str,
        known: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let known: Vec<&str> = known.into_iter().collect();
        Self::NotFound {
            kind,
            name: name.to_owned(),
            known: if known.is_empty() {
                "none".into()
            } else {
                known.join(", ")
            },
        }
    }
}
