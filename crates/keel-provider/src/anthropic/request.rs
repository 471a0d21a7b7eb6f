//! The Messages API request body.

use serde::Serialize;
use serde_json::Value;

use crate::image::ImageData;
use crate::types::{CachePolicy, CompletionRequest, ContentBlock, Role, ToolChoice};

#[derive(Serialize)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: Option<CacheControl> = Some(CacheControl { kind: "ephemeral" });

#[derive(Serialize)]
pub(crate) struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<WireBlock<'a>>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    stream: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<WireBlock<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock<'a> {
    Text {
        text: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: ResultContent<'a>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
}

/// A tool result's `content`: a plain string when it is text only (as it always was), else
/// an array of its text block (if there is text) followed by its image blocks.
#[derive(Serialize)]
#[serde(untagged)]
enum ResultContent<'a> {
    Text(&'a str),
    Parts(Vec<ResultPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ResultPart<'a> {
    Text { text: &'a str },
    Image { source: ImageSource<'a> },
}

#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

impl<'a> ImageSource<'a> {
    fn of(image: &'a ImageData) -> Self {
        Self {
            kind: "base64",
            media_type: image.media_type(),
            data: image.data(),
        }
    }
}

fn result_content<'a>(text: &'a str, images: &'a [ImageData]) -> ResultContent<'a> {
    if images.is_empty() {
        return ResultContent::Text(text);
    }
    let text = (!text.is_empty()).then_some(ResultPart::Text { text });
    let images = images.iter().map(|image| ResultPart::Image {
        source: ImageSource::of(image),
    });
    ResultContent::Parts(text.into_iter().chain(images).collect())
}

impl WireBlock<'_> {
    /// Marks this block as a cache breakpoint; false for blocks that cannot carry one.
    fn mark_cached(&mut self) -> bool {
        match self {
            Self::Text { cache_control, .. }
            | Self::Image { cache_control, .. }
            | Self::ToolUse { cache_control, .. }
            | Self::ToolResult { cache_control, .. } => {
                *cache_control = EPHEMERAL;
                true
            }
            Self::Thinking { .. } | Self::RedactedThinking { .. } => false,
        }
    }
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireToolChoice<'a> {
    Auto,
    Any,
    Tool { name: &'a str },
    None,
}

fn wire_block(block: &ContentBlock) -> Option<WireBlock<'_>> {
    Some(match block {
        // The API rejects empty text blocks.
        ContentBlock::Text { text } if text.is_empty() => return None,
        ContentBlock::Text { text } => WireBlock::Text {
            text,
            cache_control: None,
        },
        ContentBlock::Image { image } => WireBlock::Image {
            source: ImageSource::of(image),
            cache_control: None,
        },
        ContentBlock::ToolUse {
            id, name, input, ..
        } => WireBlock::ToolUse {
            id,
            name,
            input,
            cache_control: None,
        },
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
            images,
        } => WireBlock::ToolResult {
            tool_use_id,
            content: result_content(content, images),
            is_error: *is_error,
            cache_control: None,
        },
        ContentBlock::Thinking {
            thinking,
            signature,
        } => WireBlock::Thinking {
            thinking,
            signature,
        },
        ContentBlock::RedactedThinking { data } => WireBlock::RedactedThinking { data },
        // OpenAI's reasoning: Anthropic cannot read it back.
        ContentBlock::Reasoning { .. } => return None,
    })
}

/// Builds the body. With [`CachePolicy::Auto`], cache breakpoints go on the last tool, the
/// end of the system prompt and the last block of the latest message: three of the four the
/// API allows.
pub(crate) fn body(req: &CompletionRequest) -> Body<'_> {
    let cache = req.cache == CachePolicy::Auto;
    let system = req
        .system
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(|text| WireBlock::Text {
            text,
            cache_control: if cache { EPHEMERAL } else { None },
        })
        .into_iter()
        .collect();
    let mut messages: Vec<WireMessage<'_>> = req
        .messages
        .iter()
        .map(|message| WireMessage {
            role: match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            },
            content: message.content.iter().filter_map(wire_block).collect(),
        })
        .collect();
    if cache && let Some(last) = messages.last_mut() {
        for block in last.content.iter_mut().rev() {
            if block.mark_cached() {
                break;
            }
        }
    }
    let tool_count = req.tools.len();
    let tools = req
        .tools
        .iter()
        .enumerate()
        .map(|(i, tool)| WireTool {
            name: &tool.name,
            description: &tool.description,
            input_schema: &tool.input_schema,
            cache_control: if cache && i + 1 == tool_count {
                EPHEMERAL
            } else {
                None
            },
        })
        .collect();
    let tool_choice = (!req.tools.is_empty()).then(|| match &req.tool_choice {
        ToolChoice::Auto => WireToolChoice::Auto,
        ToolChoice::Any => WireToolChoice::Any,
        ToolChoice::Tool(name) => WireToolChoice::Tool { name },
        ToolChoice::None => WireToolChoice::None,
    });
    Body {
        model: &req.model,
        max_tokens: req.max_tokens,
        system,
        messages,
        tools,
        tool_choice,
        temperature: req.temperature,
        stop_sequences: &req.stop_sequences,
        stream: true,
    }
}
