//! The lock around everything that changes a store: two keel processes (or threads) working in
//! the same workspace take turns.

use std::fs::{File, OpenOptions};
use std::path::Path;

use crate::SnapshotError;

/// An exclusive `flock` on the store's lock file, released when dropped.
#[derive(Debug)]
pub(crate) struct StoreLock {
    _file: File,
}

impl StoreLock {
    /// Waits for the lock on `<git_dir>/keel.lock`. Each call opens the file afresh, so the lock
    /// also excludes other threads of this process.
    pub(crate) fn acquire(git_dir: &Path) -> Result<Self, SnapshotError> {
        let path = git_dir.join("keel.lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| SnapshotError::io("opening the snapshot lock", &path, source))?;
        loop {
            match rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive) {
                Ok(()) => break,
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => {
                    return Err(SnapshotError::io(
                        "locking the snapshot store",
                        &path,
                        err.into(),
                    ));
                }
            }
        }
        Ok(Self { _file: file })
    }
}
