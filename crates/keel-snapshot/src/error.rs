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
