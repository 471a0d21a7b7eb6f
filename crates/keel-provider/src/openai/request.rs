//! The Chat Completions request body.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::image::ImageData;
use crate::types::{CompletionRequest, ContentBlock, Role, ToolChoice};

/// Prefixed to a failed tool's output, since Chat Completions has no error flag.
const TOOL_ERROR_PREFIX: &str = "ERROR: ";

/// Which field carries the output token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_tokens`: what Ollama, vLLM, llama.cpp and most compatible servers read.
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's own API requires for its current models.
    MaxCompletionTokens,
}

#[derive(Serialize)]
pub(crate) struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop: &'a [String],
    stream: bool,
    stream_options: StreamOptions,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireToolCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

/// A user message's `content`: a plain string when it is text only (as it always was), else
/// an array of its text part (if there is text) followed by its images.
#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<UserPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum UserPart<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl },
}

/// An image as Chat Completions takes it: a `data:` URL.
#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunctionCall<'a>,
}

#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: String,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// The text blocks of `blocks` joined by newlines, borrowed when there is just one.
pub(crate) fn joined_text(blocks: &[ContentBlock]) -> Cow<'_, str> {
    let mut texts = blocks.iter().filter_map(|block| match block {
        ContentBlock::Text { text } if !text.is_empty() => Some(text.as_str()),
        _ => None,
    });
    let Some(first) = texts.next() else {
        return Cow::Borrowed("");
    };
    let mut rest = texts.peekable();
    if rest.peek().is_none() {
        return Cow::Borrowed(first);
    }
    let mut out = first.to_owned();
    for text in rest {
        out.push('\n');
        out.push_str(text);
    }
    Cow::Owned(out)
}

/// `content` followed by a line saying which images were left out and why, if there were any:
/// `role: tool` messages take text only, and the model must not think it saw them.
fn with_images_note<'a>(content: Cow<'a, str>, images: &[ImageData]) -> Cow<'a, str> {
    if images.is_empty() {
        return content;
    }
    let mut types: Vec<&str> = Vec::new();
    for image in images {
        if !types.contains(&image.media_type()) {
            types.push(image.media_type());
        }
    }
    let count = images.len();
    let note = format!(
        "[{count} image{} ({}) not shown: this provider takes no images in tool results]",
        if count == 1 { "" } else { "s" },
        types.join(", ")
    );
    let mut out = content.into_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&note);
    Cow::Owned(out)
}

/// A tool result's text as OpenAI's APIs take it: they have no error flag, so a failure says
/// so in its first word.
pub(crate) fn result_text(content: &str, is_error: bool) -> Cow<'_, str> {
    if is_error {
        Cow::Owned(format!("{TOOL_ERROR_PREFIX}{content}"))
    } else {
        Cow::Borrowed(content)
    }
}

fn push_user<'a>(out: &mut Vec<WireMessage<'a>>, blocks: &'a [ContentBlock]) {
    // Tool results must directly follow the assistant message that asked for them.
    for block in blocks {
        if let ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
            images,
        } = block
        {
            let content = result_text(content, *is_error);
            out.push(WireMessage::Tool {
                tool_call_id: tool_use_id,
                content: with_images_note(content, images),
            });
        }
    }
    let text = joined_text(blocks);
    let images: Vec<UserPart<'a>> = blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Image { image } => Some(UserPart::ImageUrl {
                image_url: ImageUrl {
                    url: image.data_url(),
                },
            }),
            _ => None,
        })
        .collect();
    if images.is_empty() {
        if !text.is_empty() {
            out.push(WireMessage::User {
                content: UserContent::Text(text),
            });
        }
        return;
    }
    let text = (!text.is_empty()).then_some(UserPart::Text { text });
    out.push(WireMessage::User {
        content: UserContent::Parts(text.into_iter().chain(images).collect()),
    });
}

fn push_assistant<'a>(out: &mut Vec<WireMessage<'a>>, blocks: &'a [ContentBlock]) {
    let tool_calls: Vec<WireToolCall<'a>> = blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::ToolUse {
                id, name, input, ..
            } => Some(WireToolCall {
                id,
                kind: "function",
                function: WireFunctionCall {
                    name,
                    arguments: input.to_string(),
                },
            }),
            _ => None,
        })
        .collect();
    let text = joined_text(blocks);
    // Thinking blocks are dropped: Chat Completions takes no reasoning back.
    let content = if text.is_empty() && !tool_calls.is_empty() {
        None
    } else {
        Some(text)
    };
    out.push(WireMessage::Assistant {
        content,
        tool_calls,
    });
}

pub(crate) fn body(req: &CompletionRequest, max_tokens_field: MaxTokensField) -> Body<'_> {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = req.system.as_deref().filter(|s| !s.is_empty()) {
        messages.push(WireMessage::System { content: system });
    }
    for message in &req.messages {
        match message.role {
            Role::User => push_user(&mut messages, &message.content),
            Role::Assistant => push_assistant(&mut messages, &message.content),
        }
    }
    let tools = req
        .tools
        .iter()
        .map(|tool| WireTool {
            kind: "function",
            function: WireFunction {
                name: &tool.name,
                description: &tool.description,
                parameters: &tool.input_schema,
            },
        })
        .collect();
    let tool_choice = (!req.tools.is_empty()).then(|| match &req.tool_choice {
        ToolChoice::Auto => Value::from("auto"),
        ToolChoice::Any => Value::from("required"),
        ToolChoice::None => Value::from("none"),
        ToolChoice::Tool(name) => {
            serde_json::json!({"type": "function", "function": {"name": name}})
        }
    });
    let (max_tokens, max_completion_tokens) = match max_tokens_field {
        MaxTokensField::MaxTokens => (Some(req.max_tokens), None),
        MaxTokensField::MaxCompletionTokens => (None, Some(req.max_tokens)),
    };
    Body {
        model: &req.model,
        messages,
        tools,
        tool_choice,
        max_tokens,
        max_completion_tokens,
        temperature: req.temperature,
        stop: &req.stop_sequences,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
    }
}
