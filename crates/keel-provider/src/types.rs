//! Conversation types shared by every back end: messages, content blocks, tool definitions,
//! requests and responses.
//!
//! These are keel's own types, serialized (for session files) in keel's own format; each back
//! end translates them to and from its wire format.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::image::ImageData;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user, or the agent loop speaking for the user (tool results).
    User,
    /// The model.
    Assistant,
}

/// One message of a conversation: a role and its content blocks, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// What it says, in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// An assistant message holding one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// A message with the given role and blocks.
    pub fn new(role: Role, content: Vec<ContentBlock>) -> Self {
        Self { role, content }
    }

    /// The text blocks of this message, joined without separators.
    pub fn text(&self) -> String {
        join_text(&self.content)
    }
}

/// Why a tool call's input could not be used; the call must not be run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidToolInput {
    /// The input text exactly as the model produced it.
    pub raw: String,
    /// What is wrong with it, e.g. `EOF while parsing a string at line 7 column 14`.
    pub reason: String,
}

/// One block of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image the person gave with their prompt (a screenshot, a diagram), in a user
    /// message. Sent as an image block (Anthropic) or an `image_url` part (Chat Completions).
    Image {
        /// The image.
        image: ImageData,
    },
    /// The model asks for a tool to be run.
    ToolUse {
        /// The provider's id for this call; the result must name it.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments. When `invalid` is set this is an empty object, kept so the history
        /// stays well-formed on the wire.
        input: Value,
        /// Set when the model's input was cut off or is not a JSON object: the call must never
        /// be executed; answer it with an error result instead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        invalid: Option<InvalidToolInput>,
    },
    /// The result of running a tool, sent back in a user message.
    ToolResult {
        /// The id of the `ToolUse` this answers.
        tool_use_id: String,
        /// What the tool printed or returned.
        content: String,
        /// Whether the tool failed.
        #[serde(default)]
        is_error: bool,
        /// Images the tool returned besides its text, in order. Sent as image blocks where
        /// the provider takes them (Anthropic); elsewhere the text says how many were left
        /// out. Absent from the serialized form when empty, so text-only results look as they
        /// always did.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageData>,
    },
    /// The model's visible reasoning. Providers that return it require it sent back unchanged,
    /// signature included, in the same assistant turn.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The provider's signature over it.
        #[serde(default)]
        signature: String,
    },
    /// Reasoning the provider returned encrypted; sent back unchanged.
    RedactedThinking {
        /// The opaque payload.
        data: String,
    },
    /// A reasoning item of OpenAI's Responses API: the summary the model wrote of its
    /// reasoning (shown as thinking) and the reasoning itself, encrypted, which the API needs
    /// back unchanged in later requests (keel asks with `store: false`, so the server keeps
    /// nothing). Only the Responses back end sends it back; the other back ends leave it out,
    /// as the Responses back end leaves out Anthropic's thinking blocks.
    Reasoning {
        /// The item's id (`rs_…`), kept for the record. Never sent back: with `store: false`
        /// the API knows no item ids.
        id: String,
        /// The summary's parts, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        summary: Vec<String>,
        /// The encrypted reasoning, sent back unchanged; `None` when the API sent none (it
        /// was not asked for), and then the item is not sent back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        encrypted_content: Option<String>,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// An image block, for a user message.
    pub fn image(image: ImageData) -> Self {
        Self::Image { image }
    }

    /// A valid tool call block.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        Self::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
            invalid: None,
        }
    }

    /// A tool result block.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self::tool_result_with_images(tool_use_id, content, is_error, Vec::new())
    }

    /// A tool result block carrying `images` besides its text.
    pub fn tool_result_with_images(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
        images: Vec<ImageData>,
    ) -> Self {
        Self::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error,
            images,
        }
    }
}

/// The text blocks of `blocks`, joined without separators.
pub(crate) fn join_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for block in blocks {
        if let ContentBlock::Text { text } = block {
            out.push_str(text);
        }
    }
    out
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDefinition {
    /// The name the model calls it by (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments; `type: object` at the top.
    pub input_schema: Value,
}

/// Whether and which tool the model must call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// The model must call some tool.
    Any,
    /// The model must call this tool.
    Tool(String),
    /// The model must not call a tool.
    None,
}

/// Where prompt-cache breakpoints go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CachePolicy {
    /// Breakpoints on the last tool, the end of the system prompt and the latest message
    /// (where the provider supports explicit breakpoints; others cache automatically).
    #[default]
    Auto,
    /// No breakpoints.
    Disabled,
}

/// One request to a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// The model's id, e.g. `claude-sonnet-4-5` or `gpt-4.1`.
    pub model: String,
    /// The system prompt; `None` for none.
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call, in a stable order.
    pub tools: Vec<ToolDefinition>,
    /// Whether and which tool the model must call.
    pub tool_choice: ToolChoice,
    /// The most tokens the model may write.
    pub max_tokens: u32,
    /// Sampling temperature; `None` for the provider's default.
    pub temperature: Option<f32>,
    /// Strings that end the reply.
    pub stop_sequences: Vec<String>,
    /// Prompt caching.
    pub cache: CachePolicy,
}

impl CompletionRequest {
    /// A request for `model` with no messages, no tools, 8192 output tokens and caching on.
    pub fn new(model: impl Into<String>) -> Self {
        Self {
            model: model.into(),
            system: None,
            messages: Vec::new(),
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            max_tokens: 8192,
            temperature: None,
            stop_sequences: Vec::new(),
            cache: CachePolicy::Auto,
        }
    }

    /// Sets the system prompt.
    pub fn system(mut self, system: impl Into<String>) -> Self {
        self.system = Some(system.into());
        self
    }

    /// Appends a message.
    pub fn message(mut self, message: Message) -> Self {
        self.messages.push(message);
        self
    }

    /// Appends a tool.
    pub fn tool(mut self, tool: ToolDefinition) -> Self {
        self.tools.push(tool);
        self
    }

    /// Sets the output token limit.
    pub fn max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It wants tools run.
    ToolUse,
    /// It hit the output token limit.
    MaxTokens,
    /// It wrote a stop sequence.
    StopSequence,
    /// A long-running turn was paused; send the conversation back to let it continue.
    PauseTurn,
    /// It declined (a safety refusal or content filter).
    Refusal,
    /// The conversation no longer fits the model's context window.
    ContextWindowExceeded,
    /// A reason this version of keel does not know, as the provider spelled it.
    Other(String),
}

/// Tokens used by one request.
///
/// `input_tokens` excludes cached tokens: the whole prompt is
/// `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens read neither from nor into the cache.
    pub input_tokens: u64,
    /// Tokens the model wrote.
    pub output_tokens: u64,
    /// Prompt tokens written to the cache.
    pub cache_creation_input_tokens: u64,
    /// Prompt tokens read from the cache.
    pub cache_read_input_tokens: u64,
}

impl Usage {
    /// Adds `other` to `self`, field by field (for totals over several requests). Each field
    /// saturates at `u64::MAX` rather than wrapping around to a small count.
    pub fn add(&mut self, other: &Usage) {
        *self = self.saturating_add(other);
    }

    /// The field-by-field sum of `self` and `other`, each saturating at `u64::MAX`.
    #[must_use]
    pub fn saturating_add(&self, other: &Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
            cache_creation_input_tokens: self
                .cache_creation_input_tokens
                .saturating_add(other.cache_creation_input_tokens),
            cache_read_input_tokens: self
                .cache_read_input_tokens
                .saturating_add(other.cache_read_input_tokens),
        }
    }

    /// Every prompt token, cached or not (saturating at `u64::MAX`).
    pub fn total_input_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;

    /// The saturating sum (see [`Usage::saturating_add`]).
    fn add(self, other: Usage) -> Usage {
        self.saturating_add(&other)
    }
}

impl std::ops::AddAssign for Usage {
    /// Adds saturating (see [`Usage::saturating_add`]).
    fn add_assign(&mut self, other: Usage) {
        *self = self.saturating_add(&other);
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), |total, usage| {
            total.saturating_add(&usage)
        })
    }
}

/// The input of a tool call, valid or not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ToolInput<'a> {
    /// A JSON object the tool can be run with.
    Valid(&'a Value),
    /// Input that was cut off or malformed: do not run the call.
    Invalid(&'a InvalidToolInput),
}

/// A view of one tool call in a response.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToolCall<'a> {
    /// The provider's id for the call.
    pub id: &'a str,
    /// The tool's name.
    pub name: &'a str,
    /// Its input.
    pub input: ToolInput<'a>,
}

impl ToolCall<'_> {
    /// Whether the call may be executed.
    pub fn is_valid(&self) -> bool {
        matches!(self.input, ToolInput::Valid(_))
    }
}

/// A complete model reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUseResponse {
    /// What the model wrote, in order.
    pub content: Vec<ContentBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Tokens used.
    pub usage: Usage,
    /// The model that answered, as the provider reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl ToolUseResponse {
    /// The text blocks, joined without separators.
    pub fn text(&self) -> String {
        join_text(&self.content)
    }

    /// The tool calls, in order, valid or not.
    pub fn tool_calls(&self) -> Vec<ToolCall<'_>> {
        self.content
            .iter()
            .filter_map(|block| match block {
                ContentBlock::ToolUse {
                    id,
                    name,
                    input,
                    invalid,
                } => Some(ToolCall {
                    id,
                    name,
                    input: match invalid {
                        Some(bad) => ToolInput::Invalid(bad),
                        None => ToolInput::Valid(input),
                    },
                }),
                _ => None,
            })
            .collect()
    }

    /// The reply as an assistant message, for appending to the history.
    pub fn to_message(&self) -> Message {
        Message::new(Role::Assistant, self.content.clone())
    }
}
