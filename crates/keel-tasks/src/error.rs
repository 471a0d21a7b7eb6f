//! Why a task could not be recorded, started or found.

use std::path::PathBuf;

/// A task store or launcher failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TaskError {
    /// The database failed.
    #[error("task store {}: {message}", .path.display())]
    Store {
        /// The database file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// No task has this id.
    #[error("no task {id:?}; `keel tasks` lists them")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The task cannot be started.
    #[error("{0}")]
    Refused(String),
    /// A file or process could not be handled.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
