//! What a tool call returns, and the size policy that keeps huge outputs out of the context.

use std::path::Path;

use keel_provider::ContentBlock;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::HeadTail;

/// The result of a tool call, as the model will read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The text the model reads.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// Structured facts for the host (exit code, files changed, ...); not sent to the model.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub metadata: Value,
}

impl ToolOutput {
    /// A successful result.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            metadata: Value::Null,
        }
    }

    /// A failed result.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            metadata: Value::Null,
        }
    }

    /// Attaches metadata.
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }

    /// The `tool_result` block answering call `tool_use_id`.
    pub fn into_block(self, tool_use_id: impl Into<String>) -> ContentBlock {
        ContentBlock::tool_result(tool_use_id, self.content, self.is_error)
    }
}

/// The default most characters of one result the model sees.
pub const DEFAULT_OUTPUT_LIMIT: usize = 30_000;

/// Cuts `content` to at most about `limit` characters: its head and tail, with a marker in
/// between saying how much was left out and where the whole text was saved. The full text is
/// written to `<scratch_dir>/<file_stem>.txt`; if that fails the marker says so.
pub(crate) fn limit_output(
    content: &mut String,
    limit: usize,
    scratch_dir: &Path,
    file_stem: &str,
) {
    let total = content.chars().count();
    if total <= limit {
        return;
    }
    let saved = save_full_output(content, scratch_dir, file_stem);
    let head_chars = limit / 2;
    let tail_chars = limit - head_chars;
    // The head and tail in bytes, each cut between lines by `HeadTail`.
    let head_bytes = byte_at_char(content, head_chars);
    let tail_bytes = content.len() - byte_at_char(content, total - tail_chars);
    let mut kept = HeadTail::new(head_bytes, tail_bytes);
    kept.push(content.as_bytes());
    let cut = kept.cut();
    let head_end = cut.head.len();
    let tail_start = content.len() - cut.tail.len();
    let omitted = content
        .get(head_end..tail_start)
        .map_or(0, |between| between.chars().count());
    let where_ = match saved {
        Ok(path) => format!(
            "the full output ({total} characters) is in {path}; read it in parts if you need more"
        ),
        Err(err) => format!("the full output ({total} characters) could not be saved: {err}"),
    };
    let marker = format!("\n\n[... {omitted} characters omitted; {where_} ...]\n\n");
    let mut cut = String::with_capacity(head_end + marker.len() + content.len() - tail_start);
    cut.push_str(content.get(..head_end).unwrap_or_default());
    cut.push_str(&marker);
    cut.push_str(content.get(tail_start..).unwrap_or_default());
    *content = cut;
}

fn save_full_output(content: &str, dir: &Path, file_stem: &str) -> Result<String, String> {
    std::fs::create_dir_all(dir)
        .map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    let safe: String = file_stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{safe}.txt"));
    std::fs::write(&path, content)
        .map_err(|err| format!("cannot write {}: {err}", path.display()))?;
    Ok(path.display().to_string())
}

/// The byte offset of character `n`.
fn byte_at_char(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_untouched() {
        let dir = std::env::temp_dir().join("keel-output-test-untouched");
        let mut text = "short".to_owned();
        limit_output(&mut text, 10, &dir, "x");
        assert_eq!(text, "short");
        assert!(!dir.join("x.txt").exists());
    }

    #[test]
    fn long_output_keeps_head_and_tail_on_line_boundaries() {
        let dir = std::env::temp_dir().join(format!("keel-output-test-{}", std::process::id()));
        let full: String = (0..1000).map(|i| format!("line {i:04} ✓\n")).collect();
        let mut text = full.clone();
        limit_output(&mut text, 1000, &dir, "call/1");
        assert!(text.starts_with("line 0000 ✓\n"));
        assert!(text.ends_with("line 0999 ✓\n"));
        assert!(text.chars().count() < 1300, "{}", text.chars().count());
        let saved = dir.join("call_1.txt");
        assert_eq!(std::fs::read_to_string(&saved).unwrap(), full);
        assert!(text.contains(&saved.display().to_string()), "{text}");
        // Each kept line is whole.
        for line in text.lines().filter(|l| l.starts_with("line")) {
            assert_eq!(line.chars().count(), 11, "{line:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
