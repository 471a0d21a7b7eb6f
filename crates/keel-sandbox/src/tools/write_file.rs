//! `write_file`: creates a file or replaces its whole content, atomically.

use std::path::PathBuf;
use std::sync::Arc;

use keel_tool::{Effect, Tool, ToolContext, ToolError, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::editor::{blocking, checked_file, write_through};
use super::read_file::{plural, thousands};
use crate::path::{Access, PathSandbox};
use crate::protect::write_effect;

/// The arguments of `write_file`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// The file to write: relative to the workspace root, or absolute (inside the workspace).
    pub path: String,
    /// The file's whole new content.
    pub content: String,
}

/// The `write_file` tool: writes a whole file, creating missing directories.
#[derive(Debug, Clone)]
pub struct WriteFile {
    sandbox: Arc<PathSandbox>,
    protected_paths: Vec<PathBuf>,
}

impl WriteFile {
    /// A `write_file` writing through `sandbox`.
    pub fn new(sandbox: Arc<PathSandbox>) -> Self {
        Self {
            sandbox,
            protected_paths: Vec::new(),
        }
    }

    /// Also treats `paths` as protected (the policy's
    /// [`protected_paths`](crate::SandboxPolicy::protected_paths)): writing them, or below
    /// them, needs the person's approval.
    pub fn with_protected_paths(mut self, paths: Vec<PathBuf>) -> Self {
        self.protected_paths = paths;
        self
    }
}

const DESCRIPTION: &str = "Writes a file with exactly the content given, replacing all of it \
if it exists, and creating missing parent directories. The write is atomic (readers see the \
old file or the new one, never half of it) and an existing file keeps its permissions. Only \
paths inside the workspace can be written, never inside .git/. Use it to create new files or \
to rewrite small ones whole; to change part of an existing file use patch_file, which is \
safer and cheaper.";

impl Tool for WriteFile {
    type Args = WriteFileArgs;
    const NAME: &'static str = "write_file";

    fn description(&self) -> &str {
        DESCRIPTION
    }

    /// [`Effect::Protected`] for a protected path (resolved: a symlink to one counts),
    /// else [`Effect::Mutating`].
    fn effect(&self, args: &WriteFileArgs) -> Effect {
        write_effect(&self.sandbox, &self.protected_paths, &args.path)
    }

    /// Writes the disk atomically; where the host is an editor that writes
    /// ([`ToolContext::editor_files`]), an existing file is written through the editor
    /// instead (after the same path checks), so it shows the change in the file's buffer. A
    /// new file is always made on disk, with its missing directories.
    async fn call(&self, args: WriteFileArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let sandbox = Arc::clone(&self.sandbox);
        if let Some(editor) = ctx.editor_files().filter(|editor| editor.writes()) {
            let given = args.path.clone();
            let resolved = blocking(Self::NAME, move || {
                checked_file(&sandbox, &given, Access::Write)
            })
            .await?;
            if resolved.exists() {
                let shown_path = self.sandbox.display(resolved.absolute());
                write_through(editor.as_ref(), &resolved, &args.content, &shown_path).await?;
                return Ok(written(&shown_path, args.content.len(), false));
            }
        }
        let sandbox = Arc::clone(&self.sandbox);
        let report = blocking(Self::NAME, move || {
            Ok(sandbox.write_atomic(&args.path, args.content.as_bytes())?)
        })
        .await?;
        let shown_path = self.sandbox.display(report.path.absolute());
        Ok(written(&shown_path, report.bytes, report.created))
    }
}

/// What the model reads after a write of `bytes` bytes.
fn written(shown_path: &str, bytes: usize, created: bool) -> ToolOutput {
    let what = if created {
        "new file"
    } else {
        "replaced the old content"
    };
    tracing::debug!(path = %shown_path, bytes, created, "write_file");
    ToolOutput::text(format!(
        "wrote {} byte{} to {shown_path} ({what})",
        thousands(bytes as u64),
        plural(bytes as u64),
    ))
    .with_metadata(json!({
        "path": shown_path,
        "bytes": bytes,
        "created": created,
    }))
}
