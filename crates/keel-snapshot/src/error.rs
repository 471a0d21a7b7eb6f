//! What can go wrong taking, listing or restoring snapshots.

use std::path::PathBuf;

/// A snapshot could not be taken, listed or restored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// No snapshot has this id (or prefix) in this workspace's store.
    #[error("no snapshot {id} for this workspace (`keel rewind` lists them)")]
    NotFound {
        /// The id as given.
        id: String,
    },
    /// More than one snapshot starts with this prefix.
    #[error("{id} names more than one snapshot; give more of its id")]
    Ambiguous {
        /// The prefix as given.
        id: String,
    },
    /// A file or directory of the store or the workspace could not be read or written.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. `creating the snapshot store`.
        action: String,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The snapshot store itself failed.
    #[error("snapshot store: {message}")]
    Store {
        /// What failed, for a person.
        message: String,
    },
}

impl SnapshotError {
    #[cfg_attr(not(feature = "shadow"), allow(dead_code))]
    pub(crate) fn io(
        action: impl Into<String>,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Self::Io {
            action: action.into(),
            path: path.into(),
            source,
        }
    }

    #[cfg(feature = "shadow")]
    pub(crate) fn git(action: &str, err: git2::Error) -> Self {
        Self::Store {
            message: format!("{action}: {}", err.message()),
        }
    }
}

/// Adds what was being done to a libgit2 error.
#[cfg(feature = "shadow")]
pub(crate) trait GitContext<T> {
    fn ctx(self, action: &str) -> Result<T, SnapshotError>;
}

#[cfg(feature = "shadow")]
impl<T> GitContext<T> for Result<T, git2::Error> {
    fn ctx(self, action: &str) -> Result<T, SnapshotError> {
        self.map_err(|err| SnapshotError::git(action, err))
    }
}
