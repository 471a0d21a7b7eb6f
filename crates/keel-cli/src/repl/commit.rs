//! What the question about a `git_commit` shows first: the files the commit would stage
//! (keel-sandbox's own view of what `git_commit` stages), untracked files marked, and the
//! message's body when it has one; wrapped on words at the terminal's width.

use std::path::Path;

use keel::sandbox::{StagedChange, commit_preview};
use serde_json::Value;

use super::view::{Style, printable};
use crate::wrap::wrap_words;

/// How many files the preview lists before "… and N more".
const FILES_SHOWN: usize = 40;

/// The lines shown before the question about a `git_commit` with `input` in the repository
/// holding `cwd`, at most `width` columns wide.
pub(super) fn preview_lines(style: Style, cwd: &Path, input: &Value, width: usize) -> Vec<String> {
    let preview = match commit_preview(cwd) {
        Ok(preview) => preview,
        Err(err) => {
            return vec![style.yellow(&format!("cannot list what would be committed: {err}"))];
        }
    };
    let untracked = preview
        .files
        .iter()
        .filter(|(_, change)| *change == StagedChange::Untracked)
        .count();
    let count = preview.files.len();
    let mut head = format!(
        "git_commit would stage and commit {count} file{}",
        if count == 1 { "" } else { "s" }
    );
    if untracked > 0 {
        head.push_str(&format!(
            ", {untracked} of them untracked (not in git yet: swept in)"
        ));
    }
    head.push(':');
    let mut lines = wrap_words(&head, width, "  ");
    for (path, change) in preview.files.iter().take(FILES_SHOWN) {
        let path = printable(path);
        let line = match change {
            StagedChange::Untracked => style.yellow(&format!("  ? {path}  (untracked)")),
            StagedChange::Added => style.green(&format!("  A {path}")),
            StagedChange::Deleted => style.red(&format!("  D {path}")),
            _ => format!("  M {path}"),
        };
        lines.push(line);
    }
    if count > FILES_SHOWN {
        lines.push(format!("  … and {} more", count - FILES_SHOWN));
    }
    if !preview.left_out.is_empty() {
        let left_out: Vec<String> = preview.left_out.iter().map(|p| printable(p)).collect();
        lines.extend(wrap_words(
            &format!(
                "left out (git repositories of their own): {}",
                left_out.join(", ")
            ),
            width,
            "  ",
        ));
    }
    // The summary is in the question; a body is shown here, once.
    let message = input
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some((_, body)) = message.trim().split_once('\n')
        && !body.trim().is_empty()
    {
        lines.push("message body:".to_owned());
        for paragraph in printable(body.trim()).lines() {
            for line in wrap_words(paragraph, width.saturating_sub(2), "") {
                lines.push(format!("  {line}"));
            }
        }
    }
    lines
}
