//! What a tool call is given besides its arguments.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::EditorFiles;

/// One line of progress from a running tool, for a UI to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The tool call it belongs to.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// The line.
    pub line: String,
}

/// The environment of one tool call: where it runs, how to notice cancellation, which
/// session it belongs to, and where to report progress.
///
/// Cheap to clone. Tools must watch [`cancel`](Self::cancel) (or just be awaited: dispatch
/// drops a cancelled call's future) and stop promptly.
#[derive(Debug, Clone)]
pub struct ToolContext {
    cwd: PathBuf,
    session_id: String,
    scratch_dir: PathBuf,
    cancel: CancellationToken,
    progress: Option<UnboundedSender<Progress>>,
    call_id: String,
    tool: String,
    editor: Option<Arc<dyn EditorFiles>>,
}

impl ToolContext {
    /// A context for session `session_id` working in `cwd`, with a fresh cancellation token,
    /// no progress channel, and scratch files under `<system temp>/keel/<session_id>`.
    pub fn new(cwd: impl Into<PathBuf>, session_id: impl Into<String>) -> Self {
        let session_id = session_id.into();
        let scratch_dir = std::env::temp_dir().join("keel").join(&session_id);
        Self {
            cwd: cwd.into(),
            session_id,
            scratch_dir,
            cancel: CancellationToken::new(),
            progress: None,
            call_id: String::new(),
            tool: String::new(),
            editor: None,
        }
    }

    /// Uses `token` for cancellation (so cancelling a run cancels its tools).
    pub fn with_cancel(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }

    /// Sends progress lines to `sender`.
    pub fn with_progress(mut self, sender: UnboundedSender<Progress>) -> Self {
        self.progress = Some(sender);
        self
    }

    /// Has the file tools read and write through an editor's buffers
    /// ([`EditorFiles`]), after their own path checks.
    pub fn with_editor_files(mut self, editor: Arc<dyn EditorFiles>) -> Self {
        self.editor = Some(editor);
        self
    }

    /// The editor the file tools read and write through, if the host gave one.
    pub fn editor_files(&self) -> Option<&Arc<dyn EditorFiles>> {
        self.editor.as_ref()
    }

    /// Keeps large outputs under `dir` instead of the default.
    pub fn with_scratch_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.scratch_dir = dir.into();
        self
    }

    /// The same context, for call `call_id` of `tool`.
    pub(crate) fn for_call(&self, call_id: &str, tool: &str) -> Self {
        let mut ctx = self.clone();
        call_id.clone_into(&mut ctx.call_id);
        tool.clone_into(&mut ctx.tool);
        ctx
    }

    /// The working directory.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The session this call belongs to.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Where large outputs and other scratch files of this session go.
    pub fn scratch_dir(&self) -> &Path {
        &self.scratch_dir
    }

    /// The cancellation token: `cancel.cancelled().await` resolves when the run is cancelled.
    pub fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the run has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The id of the tool call being run (empty outside dispatch).
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Reports a line of progress; dropped if nobody listens.
    pub fn progress(&self, line: impl Into<String>) {
        if let Some(sender) = &self.progress {
            // A closed channel means the UI went away; the tool carries on regardless.
            let _ = sender.send(Progress {
                call_id: self.call_id.clone(),
                tool: self.tool.clone(),
                line: line.into(),
            });
        }
    }
}
