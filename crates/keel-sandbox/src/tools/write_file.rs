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
                let sandbox = Arc::clone(&self.sandbox);
                let given = args.path.clone();
                let original =
                    blocking(Self::NAME, move || Ok(original_text(&sandbox, &given))).await?;
                write_through(editor.as_ref(), &resolved, &args.content, &shown_path).await?;
                let facts = Written {
                    bytes: args.content.len(),
                    created: false,
                    original,
                };
                return Ok(written(&shown_path, resolved.absolute(), facts));
            }
        }
        let sandbox = Arc::clone(&self.sandbox);
        let (report, original) = blocking(Self::NAME, move || {
            let original = original_text(&sandbox, &args.path);
            Ok((
                sandbox.write_atomic(&args.path, args.content.as_bytes())?,
                original,
            ))
        })
        .await?;
        let shown_path = self.sandbox.display(report.path.absolute());
        let facts = Written {
            bytes: report.bytes,
            created: report.created,
            original,
        };
        Ok(written(&shown_path, report.path.absolute(), facts))
    }
}

/// The most bytes of a file's old content `write_file` keeps in its result's metadata
/// (`original`, for Claude Code's `originalFile`); a larger file's is left out.
const MAX_ORIGINAL_BYTES: u64 = 1024 * 1024;

/// The text of the file `given` before it is written, when it is a readable UTF-8 file of at
/// most [`MAX_ORIGINAL_BYTES`]; `None` otherwise (a new file, a large or binary one).
fn original_text(sandbox: &PathSandbox, given: &str) -> Option<String> {
    use std::io::Read as _;
    let (_, file) = sandbox.open_read(given).ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_ORIGINAL_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(MAX_ORIGINAL_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// What a write did.
struct Written {
    bytes: usize,
    created: bool,
    original: Option<String>,
}

/// What the model reads after a write, and its facts in the metadata: `path` (as shown),
/// `file_path` (absolute), `bytes`, `created`, and `original` (the old text, see
/// [`original_text`]).
fn written(shown_path: &str, absolute: &std::path::Path, facts: Written) -> ToolOutput {
    let Written {
        bytes,
        created,
        original,
    } = facts;
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
        "file_path": absolute.display().to_string(),
        "bytes": bytes,
        "created": created,
        "original": original,
    }))
}
