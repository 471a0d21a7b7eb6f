//! An MCP tool result as the model reads it: text, images (as images), embedded resources,
//! resource links and structured content in one [`ToolOutput`], `isError` as an error
//! result.

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde_json::Value;

use keel_tool::ToolOutput;

/// `result` of a call of `tool` as a [`ToolOutput`]. Text blocks are joined by blank lines;
/// a resource link or an embedded resource becomes a few lines naming it (an embedded text
/// resource with its text); audio and binary resources a line saying what was left out;
/// `structuredContent` is the text when there is no text block (servers repeat it as text),
/// and kept whole in the output's metadata.
pub(crate) fn tool_output(result: CallToolResult) -> ToolOutput {
    let mut parts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(text) => parts.push(text.text.clone()),
            ContentBlock::Image(image) => {
                images.push((image.mime_type.clone(), image.data.clone()));
            }
            ContentBlock::Audio(audio) => parts.push(format!(
                "[audio ({}, {} bytes of base64) not shown: keel passes no audio to the model]",
                audio.mime_type,
                audio.data.len()
            )),
            ContentBlock::Resource(embedded) => parts.push(match &embedded.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("Resource {uri}:\n{text}")
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => format!(
                    "[resource {uri} ({}, {} bytes of base64) not shown: binary]",
                    mime_type.as_deref().unwrap_or("unknown type"),
                    blob.len()
                ),
                _ => "[an embedded resource of a kind keel does not know, not shown]".to_owned(),
            }),
            ContentBlock::ResourceLink(link) => {
                let mut line = format!("Resource link: {} <{}>", link.name, link.uri);
                if let Some(mime) = &link.mime_type {
                    line.push_str(&format!(" ({mime})"));
                }
                if let Some(description) = &link.description {
                    line.push_str(&format!(": {description}"));
                }
                parts.push(line);
            }
            _ => parts.push("[content of a kind keel does not know, not shown]".to_owned()),
        }
    }
    let mut metadata = Value::Null;
    if let Some(structured) = result.structured_content {
        // Servers are asked to repeat structured content as text; only when they did not
        // (no text at all) is it what the model reads.
        let has_text = result
            .content
            .iter()
            .any(|block| matches!(block, ContentBlock::Text(_)));
        if !has_text {
            parts.push(structured.to_string());
        }
        metadata = serde_json::json!({ "structured_content": structured });
    }
    let text = parts.join("\n\n");
    let output = if result.is_error == Some(true) {
        ToolOutput::error(if text.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            text
        })
    } else {
        ToolOutput::text(text)
    };
    // Images go to the model as image blocks where the provider takes them (a bad or
    // oversized one becomes a line saying so).
    images
        .into_iter()
        .fold(output, |output, (mime, data)| {
            output.with_image_base64(&mime, data)
        })
        .with_metadata(metadata)
}
