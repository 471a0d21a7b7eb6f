//! Temporary directories, removed when dropped.

pub use tempfile::TempDir;

/// A fresh empty directory.
pub fn temp_dir() -> TempDir {
    tempfile::Builder::new()
        .prefix("keel-test-")
        .tempdir()
        .unwrap()
}
