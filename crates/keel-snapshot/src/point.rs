//! The [`Snapshots`] trait and what it records.

use std::path::PathBuf;

use crate::SnapshotError;

/// The id of one snapshot: a lowercase hex string, unique within a workspace's store.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct SnapshotId(pub String);

impl std::fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The tool call a snapshot is taken before.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SnapshotPoint {
    /// The session making the call.
    pub session_id: String,
    /// The call's id, as the model gave it.
    pub call_id: String,
    /// The tool's name, e.g. `run_command`.
    pub tool: String,
    /// One line saying what the call does, e.g. `rm -rf build` or `write src/main.rs`.
    pub summary: String,
    /// The length of the session's history when the run making this call began (before its
    /// prompt was added): rewinding the conversation to this point truncates it there.
    pub history_len: usize,
}

/// One recorded snapshot, as [`Snapshots::list`] gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotInfo {
    /// Its id.
    pub id: SnapshotId,
    /// When it was taken.
    pub time: jiff::Timestamp,
    /// The call it was taken before.
    pub point: SnapshotPoint,
    /// The files (relative to the workspace, `/`-separated) that differ between this snapshot
    /// and the next one (or the workspace now, for the newest): what the call and what followed
    /// it changed, so what restoring this snapshot puts back.
    pub changed: Vec<String>,
}

/// What [`Snapshots::restore`] did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RestoreReport {
    /// The snapshot of the workspace taken just before restoring, so a rewind can itself be
    /// rewound. `None` when nothing differed.
    pub before: Option<SnapshotId>,
    /// Files written back (restored content, mode or link).
    pub restored: Vec<PathBuf>,
    /// Files removed because they did not exist at the snapshot.
    pub removed: Vec<PathBuf>,
}

/// Where snapshots of one workspace are recorded.
///
/// Implementations are blocking (the engine calls [`Snapshots::take`] on a blocking thread)
/// and must be safe to share between threads and between processes working in the same
/// workspace.
pub trait Snapshots: Send + Sync + std::fmt::Debug {
    /// Records the workspace as it is now (tracked and untracked files, not ignored ones),
    /// before the call `point` describes.
    fn take(&self, point: &SnapshotPoint) -> Result<SnapshotId, SnapshotError>;

    /// Every snapshot still kept, oldest first.
    fn list(&self) -> Result<Vec<SnapshotInfo>, SnapshotError>;

    /// Puts the workspace back as it was at snapshot `id` (a full id or a unique prefix):
    /// files changed since are restored, files made since are removed, ignored files are left
    /// alone. The workspace is snapshotted first, so the restore can be undone.
    fn restore(&self, id: &str) -> Result<RestoreReport, SnapshotError>;
}
