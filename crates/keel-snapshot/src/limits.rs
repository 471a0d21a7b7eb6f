//! How much a workspace's snapshot store keeps.

use std::time::Duration;

/// Limits on a workspace's snapshots. Past them, the oldest snapshots are dropped and their
/// space freed (the newest is always kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotLimits {
    /// Snapshots older than this are dropped (default 30 days, as Claude Code's
    /// `cleanupPeriodDays`).
    pub max_age: Duration,
    /// The store is kept under this many bytes on disk, oldest snapshots dropped first
    /// (default 2 GiB).
    pub max_bytes: u64,
    /// Files larger than this are not recorded; a snapshot lists them as skipped and a restore
    /// leaves them alone (default 64 MiB).
    pub max_file_bytes: u64,
}

impl SnapshotLimits {
    /// 30 days.
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30 * 24 * 60 * 60);
    /// 2 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;
    /// 64 MiB.
    pub const DEFAULT_MAX_FILE_BYTES: u64 = 64 << 20;
}

impl Default for SnapshotLimits {
    fn default() -> Self {
        Self {
            max_age: Self::DEFAULT_MAX_AGE,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_file_bytes: Self::DEFAULT_MAX_FILE_BYTES,
        }
    }
}
