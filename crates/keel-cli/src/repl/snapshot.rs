//! What a file held before `write_file` or `patch_file` changed it, so the change can be
//! shown as a diff when the call finishes.
//!
//! A `PreToolUse` hook ([`SnapshotHook`]) reads the file just before the call runs; when the
//! call has finished, [`Snapshots::change`] compares that with the file on disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use keel::engine::{Hook, HookInput, HookOutcome};
use serde_json::Value;

/// The tools whose changes are shown as diffs, as a hook matcher.
pub(super) const WRITE_TOOLS: &str = "write_file|patch_file";
/// Files larger than this are not diffed.
const MAX_BYTES: u64 = 2 * 1024 * 1024;

/// A file's content at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Content {
    /// There was no such file.
    Missing,
    /// Its text.
    Text(String),
    /// Not UTF-8, too large or unreadable: not diffed.
    Unusable,
}

/// Reads `path` as it is now.
fn read(path: &Path) -> Content {
    match std::fs::metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Content::Missing,
        Err(_) => return Content::Unusable,
        Ok(meta) if !meta.is_file() || meta.len() > MAX_BYTES => return Content::Unusable,
        Ok(_) => {}
    }
    match std::fs::read(path).map(String::from_utf8) {
        Ok(Ok(text)) => Content::Text(text),
        Ok(Err(_)) | Err(_) => Content::Unusable,
    }
}

/// The file a write tool's `input` names, under `cwd`.
pub(super) fn target(cwd: &Path, input: &Value) -> Option<PathBuf> {
    let path = input.get("path")?.as_str()?;
    if path.is_empty() {
        return None;
    }
    Some(cwd.join(path))
}

/// A file's change: what it held (`None`: it did not exist) and what it holds now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Change {
    /// Before.
    pub old: Option<String>,
    /// Now.
    pub new: String,
}

/// The files' contents before the calls now running; cheap to clone (clones share).
#[derive(Debug, Clone, Default)]
pub(super) struct Snapshots {
    files: Arc<Mutex<HashMap<PathBuf, Content>>>,
}

impl Snapshots {
    /// The records.
    fn files(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Content>> {
        self.files.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records what `path` holds now.
    fn record(&self, path: PathBuf, content: Content) {
        self.files().insert(path, content);
    }

    /// How `path` changed since it was recorded; the record becomes what it holds now (so a
    /// second write to it in the same reply shows only its own change). `None` when it was
    /// not recorded, or before or after cannot be diffed.
    pub(super) fn change(&self, path: &Path) -> Option<Change> {
        let now = read(path);
        let before = self.files().insert(path.to_path_buf(), now.clone())?;
        let Content::Text(new) = now else {
            return None;
        };
        match before {
            Content::Missing => Some(Change { old: None, new }),
            Content::Text(old) => Some(Change {
                old: Some(old),
                new,
            }),
            Content::Unusable => None,
        }
    }

    /// Forgets everything (at the end of a run).
    pub(super) fn clear(&self) {
        self.files().clear();
    }
}

/// The `PreToolUse` hook that records the file a write tool is about to change. It never
/// blocks or fails a call.
pub(super) struct SnapshotHook {
    snapshots: Snapshots,
}

impl SnapshotHook {
    /// A hook recording into `snapshots`.
    pub(super) fn new(snapshots: Snapshots) -> Self {
        Self { snapshots }
    }
}

#[async_trait::async_trait]
impl Hook for SnapshotHook {
    async fn run(&self, input: &HookInput) -> Result<HookOutcome, String> {
        let Some(path) = input
            .tool_input()
            .and_then(|tool_input| target(input.cwd(), tool_input))
        else {
            return Ok(HookOutcome::Continue);
        };
        let read_path = path.clone();
        let content = tokio::task::spawn_blocking(move || read(&read_path))
            .await
            .unwrap_or(Content::Unusable);
        self.snapshots.record(path, content);
        Ok(HookOutcome::Continue)
    }

    fn name(&self) -> &str {
        "keel diff snapshot"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_write_is_seen_as_a_change_from_the_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        std::fs::write(&file, "old\n").unwrap();
        let snapshots = Snapshots::default();
        let hook = SnapshotHook::new(snapshots.clone());
        let input = HookInput::pre_tool_use(
            "s",
            dir.path(),
            "write_file",
            json!({"path": "a.txt", "content": "new\n"}),
        );
        assert_eq!(hook.run(&input).await.unwrap(), HookOutcome::Continue);
        std::fs::write(&file, "new\n").unwrap();
        let change = snapshots.change(&file).unwrap();
        assert_eq!(change.old.as_deref(), Some("old\n"));
        assert_eq!(change.new, "new\n");
        // The record moved on: a second change is only its own.
        std::fs::write(&file, "newer\n").unwrap();
        assert_eq!(
            snapshots.change(&file).unwrap().old.as_deref(),
            Some("new\n")
        );
        snapshots.clear();
        assert_eq!(snapshots.change(&file), None);
    }

    #[tokio::test]
    async fn a_new_file_has_no_old_content() {
        let dir = tempfile::tempdir().unwrap();
        let snapshots = Snapshots::default();
        let input = HookInput::pre_tool_use("s", dir.path(), "write_file", json!({"path": "n"}));
        SnapshotHook::new(snapshots.clone())
            .run(&input)
            .await
            .unwrap();
        std::fs::write(dir.path().join("n"), "x").unwrap();
        let change = snapshots.change(&dir.path().join("n")).unwrap();
        assert_eq!(change.old, None);
    }
}
