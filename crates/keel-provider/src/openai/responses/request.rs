//! The Responses API request body (`POST {base}/responses`).
//!
//! keel sends the whole history every time and asks with `store: false`: the API keeps
//! nothing, so no `previous_response_id` is needed and no item id is ever sent back. A
//! reasoning model's reasoning comes back encrypted (`include: ["reasoning.encrypted_content"]`)
//! and goes into the next request unchanged, before the calls it led to.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use crate::openai::request::{joined_text, result_text};
use crate::types::{CompletionRequest, ContentBlock, Role, ToolChoice};

#[derive(Serialize)]
pub(crate) struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<&'a str>,
    input: Vec<Item<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    max_output_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning>,
    #[serde(skip_serializing_if = "<[&str]>::is_empty")]
    include: &'static [&'static str],
    store: bool,
    stream: bool,
}

/// `reasoning`: a summary of the reasoning, to show as thinking.
#[derive(Serialize)]
struct Reasoning {
    summary: &'static str,
}

/// One item of `input`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item<'a> {
    Message {
        role: &'static str,
        content: Vec<Part<'a>>,
    },
    Reasoning {
        summary: Vec<SummaryText<'a>>,
        encrypted_content: &'a str,
    },
    FunctionCall {
        call_id: &'a str,
        name: &'a str,
        arguments: String,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: Output<'a>,
    },
}

/// A part of a message's `content`.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    InputText { text: Cow<'a, str> },
    InputImage { image_url: String },
    OutputText { text: Cow<'a, str> },
}

#[derive(Serialize)]
#[serde(tag = "type", rename = "summary_text")]
struct SummaryText<'a> {
    text: &'a str,
}

/// A function call's `output`: its text, or its text and images as input parts when it
/// returned images (the API takes them there, unlike Chat Completions' `role: tool`).
#[derive(Serialize)]
#[serde(untagged)]
enum Output<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<Part<'a>>),
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    /// keel's schemas are not written for strict mode (every property required, no extra
    /// keys), so arguments are checked by the tool, as with the other back ends.
    strict: bool,
}

/// Whether `model` reasons (OpenAI's o-series and GPT-5 family, Codex models): such a model
/// is asked for a summary of its reasoning and for the reasoning itself, encrypted, to send
/// back. Other models reject both.
pub(crate) fn is_reasoning_model(model: &str) -> bool {
    let model = model.rsplit_once('/').map_or(model, |(_, name)| name);
    let o_series = model.strip_prefix('o').is_some_and(|rest| {
        rest.starts_with(|c: char| c.is_ascii_digit()) && !model.starts_with("omni")
    });
    let gpt5_up = model
        .strip_prefix("gpt-")
        .and_then(|rest| rest.split(['.', '-']).next())
        .and_then(|major| major.parse::<u32>().ok())
        .is_some_and(|major| major >= 5);
    (o_series || gpt5_up || model.contains("codex")) && !model.contains("-chat")
}

fn push_user<'a>(out: &mut Vec<Item<'a>>, blocks: &'a [ContentBlock]) {
    // The outputs answer the calls of the message before: they come first.
    for block in blocks {
        if let ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
            images,
        } = block
        {
            let text = result_text(content, *is_error);
            let output = if images.is_empty() {
                Output::Text(text)
            } else {
                let text = (!text.is_empty()).then_some(Part::InputText { text });
                Output::Parts(
                    text.into_iter()
                        .chain(images.iter().map(|image| Part::InputImage {
                            image_url: image.data_url(),
                        }))
                        .collect(),
                )
            };
            out.push(Item::FunctionCallOutput {
                call_id: tool_use_id,
                output,
            });
        }
    }
    let text = joined_text(blocks);
    let text = (!text.is_empty()).then_some(Part::InputText { text });
    let content: Vec<Part<'a>> = text
        .into_iter()
        .chain(blocks.iter().filter_map(|block| match block {
            ContentBlock::Image { image } => Some(Part::InputImage {
                image_url: image.data_url(),
            }),
            _ => None,
        }))
        .collect();
    if !content.is_empty() {
        out.push(Item::Message {
            role: "user",
            content,
        });
    }
}

fn push_assistant<'a>(out: &mut Vec<Item<'a>>, blocks: &'a [ContentBlock]) {
    // In the order the model wrote them: a reasoning item before the calls it led to.
    for block in blocks {
        match block {
            ContentBlock::Text { text } if !text.is_empty() => out.push(Item::Message {
                role: "assistant",
                content: vec![Part::OutputText {
                    text: Cow::Borrowed(text),
                }],
            }),
            ContentBlock::ToolUse {
                id, name, input, ..
            } => out.push(Item::FunctionCall {
                call_id: id,
                name,
                arguments: input.to_string(),
            }),
            ContentBlock::Reasoning {
                summary,
                encrypted_content: Some(encrypted),
                ..
            } => out.push(Item::Reasoning {
                summary: summary.iter().map(|text| SummaryText { text }).collect(),
                encrypted_content: encrypted,
            }),
            // Anthropic's thinking cannot be read back here; a reasoning item without its
            // encrypted content means nothing to a server that stored nothing.
            _ => {}
        }
    }
}

pub(crate) fn body(req: &CompletionRequest) -> Body<'_> {
    let mut input = Vec::with_capacity(req.messages.len());
    for message in &req.messages {
        match message.role {
            Role::User => push_user(&mut input, &message.content),
            Role::Assistant => push_assistant(&mut input, &message.content),
        }
    }
    let tools = req
        .tools
        .iter()
        .map(|tool| WireTool {
            kind: "function",
            name: &tool.name,
            description: &tool.description,
            parameters: &tool.input_schema,
            strict: false,
        })
        .collect();
    let tool_choice = (!req.tools.is_empty()).then(|| match &req.tool_choice {
        ToolChoice::Auto => Value::from("auto"),
        ToolChoice::Any => Value::from("required"),
        ToolChoice::None => Value::from("none"),
        ToolChoice::Tool(name) => serde_json::json!({"type": "function", "name": name}),
    });
    let reasoning = is_reasoning_model(&req.model);
    Body {
        model: &req.model,
        instructions: req.system.as_deref().filter(|s| !s.is_empty()),
        input,
        tools,
        tool_choice,
        max_output_tokens: req.max_tokens,
        temperature: req.temperature,
        reasoning: reasoning.then_some(Reasoning { summary: "auto" }),
        include: if reasoning {
            &["reasoning.encrypted_content"]
        } else {
            &[]
        },
        store: false,
        stream: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_models_are_told_apart() {
        for model in [
            "o3",
            "o4-mini",
            "o1-pro",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.1",
            "gpt-5.3-codex",
            "gpt-6",
            "codex-mini-latest",
            "openai/gpt-5",
        ] {
            assert!(is_reasoning_model(model), "{model}");
        }
        for model in [
            "gpt-4.1",
            "gpt-4o-mini",
            "gpt-5-chat-latest",
            "omni-moderation-latest",
            "qwen3:8b",
            "gpt-",
            "o",
        ] {
            assert!(!is_reasoning_model(model), "{model}");
        }
    }
}
