//! The file tools' way through an editor's buffers ([`keel_tool::EditorFiles`]): the same
//! path checks as on disk first, so the editor is only ever asked about a path the sandbox
//! allows.

use keel_tool::{EditorFiles, ToolError};

use super::read_file::{BINARY_PROBE_BYTES, binary_error, check_regular};
use crate::path::{Access, PathSandbox, ResolvedPath};

/// `given` resolved and checked for `access` (symlinks followed; for a write, inside the
/// workspace and never under `.git`) and, when it exists, a regular file: the absolute path
/// an editor may be asked to read or write.
pub(crate) fn checked_file(
    sandbox: &PathSandbox,
    given: &str,
    access: Access,
) -> Result<ResolvedPath, ToolError> {
    let resolved = sandbox.resolve(given, access)?;
    if let Ok(meta) = std::fs::metadata(resolved.absolute()) {
        check_regular(sandbox, &resolved, &meta)?;
    }
    Ok(resolved)
}

/// The text an editor gave for `shown_path`, refused as the disk's would be when it looks
/// binary (a NUL in its first 8 KiB).
pub(crate) fn editor_text(text: String, shown_path: &str, tool: &str) -> Result<String, ToolError> {
    let head = &text.as_bytes()[..text.len().min(BINARY_PROBE_BYTES)];
    if head.contains(&0) {
        return Err(binary_error(shown_path, tool));
    }
    Ok(text)
}

/// Writes `text` to the checked file `resolved` through `editor`; its failure is the call's
/// error, naming the file as the model knows it (`shown_path`).
pub(crate) async fn write_through(
    editor: &dyn EditorFiles,
    resolved: &ResolvedPath,
    text: &str,
    shown_path: &str,
) -> Result<(), ToolError> {
    editor
        .write_text(resolved.absolute(), text)
        .await
        .map_err(|err| ToolError::failed(format!("the editor could not write {shown_path}: {err}")))
}

/// Runs blocking file work off the async threads; a panic in it is `tool`'s error.
pub(crate) async fn blocking<T: Send + 'static>(
    tool: &str,
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| ToolError::failed(format!("{tool} failed internally: {err}")))?
}
