//! An editor's files: where the file tools read and write when the host is an editor that
//! offers its buffers (an ACP client's `fs/read_text_file` and `fs/write_text_file`).

use std::path::Path;

/// The files an editor holds. Given to a call through
/// [`ToolContext::with_editor_files`](crate::ToolContext::with_editor_files), it lets the
/// file tools read what the person sees, unsaved changes included, and write so that the
/// editor shows the edits.
///
/// It only ever sees paths the tools have already checked: an absolute path, symlinks
/// resolved, inside the workspace's roots (for a write: inside the workspace, never under
/// `.git`). A path the sandbox refuses is never passed on, so an editor cannot widen what
/// the tools may touch.
#[async_trait::async_trait]
pub trait EditorFiles: Send + Sync + std::fmt::Debug {
    /// Whether reads go through the editor.
    fn reads(&self) -> bool;

    /// Whether writes go through the editor.
    fn writes(&self) -> bool;

    /// The text of `path` as the editor has it. An error (the editor has no such file, or
    /// could not be asked) makes the tool read the disk instead.
    async fn read_text(&self, path: &Path) -> Result<String, String>;

    /// Writes `text` as the whole content of `path`. An error is the call's error: the
    /// model reads it.
    async fn write_text(&self, path: &Path, text: &str) -> Result<(), String>;
}
