//! What a tool call returns, and the size policy that keeps huge outputs out of the context.

use std::path::Path;

use keel_provider::{ContentBlock, CostByProvider, ImageData, human_size};
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
    /// Images for the model besides the text, in order (see
    /// [`ContentBlock::ToolResult`]). The registry keeps at most [`MAX_IMAGES_PER_RESULT`]
    /// of them, each at most [`MAX_IMAGE_BASE64_BYTES`], together at most
    /// [`MAX_RESULT_IMAGE_BASE64_BYTES`]; the rest become a note in the text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageData>,
    /// The model calls the tool made on its own behalf (a delegated run: `code`, a
    /// sub-agent, a team), by the provider that served them: the calling session counts them
    /// in its usage, its cost and its cost budget. Not sent to the model.
    #[serde(default, skip_serializing_if = "CostByProvider::is_empty")]
    pub delegated: CostByProvider,
}

impl ToolOutput {
    /// A successful result.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            metadata: Value::Null,
            images: Vec::new(),
            delegated: CostByProvider::default(),
        }
    }

    /// A failed result.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            metadata: Value::Null,
            images: Vec::new(),
            delegated: CostByProvider::default(),
        }
    }

    /// Attaches metadata.
    pub fn with_metadata(mut self, metadata: Value) -> Self {
        self.metadata = metadata;
        self
    }

    /// Records the model calls a delegated run made (see [`delegated`](Self::delegated)).
    pub fn with_delegated(mut self, delegated: CostByProvider) -> Self {
        self.delegated = delegated;
        self
    }

    /// Attaches an image.
    pub fn with_image(mut self, image: ImageData) -> Self {
        self.images.push(image);
        self
    }

    /// Attaches the image `data` (base64) of `media_type`, as a tool may get it from elsewhere
    /// (an MCP server, a screenshot command). One that cannot be sent
    /// ([`ImageData::new`] refuses it: unknown media type, not base64, not an image) is
    /// replaced by a line in the text saying so, e.g.
    /// `[image not shown: unsupported media type "image/svg+xml" (...)]`; never a failure.
    pub fn with_image_base64(mut self, media_type: &str, data: impl Into<String>) -> Self {
        match ImageData::new(media_type, data) {
            Ok(image) => self.images.push(image),
            Err(err) => {
                tracing::debug!(error = %err, "a tool returned an image that cannot be sent");
                self.push_note(&format!("[image not shown: {err}]"));
            }
        }
        self
    }

    /// Appends `note` to the text on a line of its own.
    fn push_note(&mut self, note: &str) {
        if !self.content.is_empty() && !self.content.ends_with('\n') {
            self.content.push('\n');
        }
        self.content.push_str(note);
    }

    /// The `tool_result` block answering call `tool_use_id`, images included.
    pub fn into_block(self, tool_use_id: impl Into<String>) -> ContentBlock {
        ContentBlock::tool_result_with_images(tool_use_id, self.content, self.is_error, self.images)
    }
}

/// The most base64 bytes of one image a result keeps: Anthropic's documented limit of 5 MB
/// per image on the API (which it checks on the base64 text).
pub const MAX_IMAGE_BASE64_BYTES: usize = 5 * 1024 * 1024;

/// The most images one result keeps. The Messages API takes up to 100 images a request, but
/// above 20 it refuses any larger than 2000x2000 px; 20 leaves room for other results.
pub const MAX_IMAGES_PER_RESULT: usize = 20;

/// The most base64 bytes of all the images of one result together: well under the Messages
/// API's 32 MB request size limit, leaving room for the rest of the conversation.
pub const MAX_RESULT_IMAGE_BASE64_BYTES: usize = 20 * 1024 * 1024;

/// Drops the images of `output` beyond the limits ([`MAX_IMAGE_BASE64_BYTES`] each,
/// [`MAX_IMAGES_PER_RESULT`], [`MAX_RESULT_IMAGE_BASE64_BYTES`] together), in order, adding a
/// line to its text for each one dropped that says what it was and why.
pub(crate) fn limit_images(output: &mut ToolOutput) {
    if output.images.is_empty() {
        return;
    }
    let mut kept = Vec::with_capacity(output.images.len().min(MAX_IMAGES_PER_RESULT));
    let mut total = 0usize;
    let mut notes = Vec::new();
    for image in std::mem::take(&mut output.images) {
        let size = image.data().len();
        let why = if size > MAX_IMAGE_BASE64_BYTES {
            Some(format!(
                "it is {} of base64, over the limit of {} per image",
                human_size(size),
                human_size(MAX_IMAGE_BASE64_BYTES)
            ))
        } else if kept.len() >= MAX_IMAGES_PER_RESULT {
            Some(format!(
                "a result keeps at most {MAX_IMAGES_PER_RESULT} images"
            ))
        } else if total.saturating_add(size) > MAX_RESULT_IMAGE_BASE64_BYTES {
            Some(format!(
                "a result's images together may be at most {} of base64",
                human_size(MAX_RESULT_IMAGE_BASE64_BYTES)
            ))
        } else {
            None
        };
        match why {
            Some(why) => notes.push(format!("[image dropped ({}): {why}]", image.describe())),
            None => {
                total += size;
                kept.push(image);
            }
        }
    }
    output.images = kept;
    if !notes.is_empty() {
        tracing::debug!(dropped = notes.len(), "dropped images over the limits");
    }
    for note in notes {
        output.push_note(&note);
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
