//! Streaming events, and assembling them into a complete [`ToolUseResponse`].

use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::error::ProviderError;
use crate::types::{ContentBlock, InvalidToolInput, StopReason, ToolUseResponse, Usage};

/// One event of a streamed reply. `index` is the content block's position in the reply.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// The reply began.
    MessageStart {
        /// The provider's message id, if it sent one.
        id: Option<String>,
        /// The model that answers, as the provider reported it.
        model: Option<String>,
    },
    /// More text for block `index`.
    TextDelta {
        /// The block.
        index: usize,
        /// The new text.
        text: String,
    },
    /// Block `index` is a tool call.
    ToolUseStart {
        /// The block.
        index: usize,
        /// The call's id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's input JSON, raw.
    ToolInputDelta {
        /// The block.
        index: usize,
        /// The next fragment of the input's JSON text.
        partial_json: String,
    },
    /// A tool call is complete; its input has been parsed.
    ToolUseEnd {
        /// The block.
        index: usize,
        /// The parsed input (an empty object when `invalid` is set).
        input: Value,
        /// Set when the input was cut off or is not a JSON object: never run this call.
        invalid: Option<InvalidToolInput>,
    },
    /// More reasoning text for block `index`.
    ThinkingDelta {
        /// The block.
        index: usize,
        /// The new reasoning text.
        thinking: String,
    },
    /// The signature over thinking block `index`, to be sent back with it.
    ThinkingSignature {
        /// The block.
        index: usize,
        /// The signature.
        signature: String,
    },
    /// Block `index` is encrypted reasoning, sent back unchanged.
    RedactedThinking {
        /// The block.
        index: usize,
        /// The opaque payload.
        data: String,
    },
    /// Block `index` is a complete reasoning item of OpenAI's Responses API (its summary
    /// came before as [`ThinkingDelta`](Self::ThinkingDelta)s): it replaces the thinking
    /// gathered at `index` with a [`ContentBlock::Reasoning`].
    Reasoning {
        /// The block.
        index: usize,
        /// The item's id.
        id: String,
        /// The summary's parts, in order.
        summary: Vec<String>,
        /// The encrypted reasoning, if the API sent it.
        encrypted_content: Option<String>,
    },
    /// Token usage so far. Each event carries the running total, not an increment.
    Usage(Usage),
    /// The request failed in a way worth retrying and is about to be sent again.
    Retrying {
        /// Which retry this is (1 for the first).
        attempt: u32,
        /// The most retries this request gets (the retry policy's `max_retries`).
        max_attempts: u32,
        /// How long we wait before it.
        wait: Duration,
        /// What failed.
        error: ProviderError,
    },
    /// The reply is complete.
    MessageEnd {
        /// Why the model stopped.
        stop_reason: StopReason,
    },
}

impl StreamEvent {
    /// Whether this event carries model output (so a retry would duplicate it).
    pub fn is_content(&self) -> bool {
        matches!(
            self,
            Self::TextDelta { .. }
                | Self::ToolUseStart { .. }
                | Self::ToolInputDelta { .. }
                | Self::ToolUseEnd { .. }
                | Self::ThinkingDelta { .. }
                | Self::ThinkingSignature { .. }
                | Self::RedactedThinking { .. }
                | Self::Reasoning { .. }
        )
    }
}

/// Parses a tool call's accumulated input text.
///
/// Empty input means `{}`. Input that is not complete JSON, or not an object, is returned as
/// invalid with the raw text kept; so is any input when `complete` is false (the stream ended
/// before the provider closed the call).
pub fn parse_tool_input(raw: &str, complete: bool) -> (Value, Option<InvalidToolInput>) {
    let invalid = |reason: String| {
        (
            Value::Object(serde_json::Map::new()),
            Some(InvalidToolInput {
                raw: raw.to_owned(),
                reason,
            }),
        )
    };
    if !complete {
        return invalid("the reply ended before this tool call was complete".to_owned());
    }
    if raw.trim().is_empty() {
        return (Value::Object(serde_json::Map::new()), None);
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => (value, None),
        Ok(other) => invalid(format!(
            "tool input must be a JSON object, got {}",
            json_kind(&other)
        )),
        Err(err) => invalid(format!("the input is not valid JSON: {err}")),
    }
}

/// How a JSON value's type reads in an error message: `null`, `a string`, `an object`, ...
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A block being assembled.
#[derive(Debug)]
enum PartialBlock {
    Text(String),
    Tool {
        id: String,
        name: String,
        raw: String,
        done: Option<(Value, Option<InvalidToolInput>)>,
    },
    Thinking {
        thinking: String,
        signature: String,
    },
    Redacted(String),
    Reasoning {
        id: String,
        summary: Vec<String>,
        encrypted_content: Option<String>,
    },
}

/// Folds [`StreamEvent`]s into a [`ToolUseResponse`].
#[derive(Debug, Default)]
pub struct ResponseAssembler {
    blocks: Vec<(usize, PartialBlock)>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    model: Option<String>,
}

impl ResponseAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    fn block(&mut self, index: usize, make: impl FnOnce() -> PartialBlock) -> &mut PartialBlock {
        // Blocks nearly always arrive in order, so the last one is the usual match.
        let pos = match self.blocks.iter().rposition(|(i, _)| *i == index) {
            Some(pos) => pos,
            None => {
                let pos = self
                    .blocks
                    .iter()
                    .position(|(i, _)| *i > index)
                    .unwrap_or(self.blocks.len());
                self.blocks.insert(pos, (index, make()));
                pos
            }
        };
        &mut self.blocks[pos].1
    }

    /// Takes one event into account.
    pub fn push(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::MessageStart { model, .. } => {
                if model.is_some() {
                    self.model = model;
                }
            }
            StreamEvent::TextDelta { index, text } => {
                if let PartialBlock::Text(buf) =
                    self.block(index, || PartialBlock::Text(String::new()))
                {
                    buf.push_str(&text);
                }
            }
            StreamEvent::ToolUseStart { index, id, name } => {
                self.block(index, || PartialBlock::Tool {
                    id,
                    name,
                    raw: String::new(),
                    done: None,
                });
            }
            StreamEvent::ToolInputDelta {
                index,
                partial_json,
            } => {
                if let PartialBlock::Tool { raw, .. } = self.block(index, || PartialBlock::Tool {
                    id: String::new(),
                    name: String::new(),
                    raw: String::new(),
                    done: None,
                }) {
                    raw.push_str(&partial_json);
                }
            }
            StreamEvent::ToolUseEnd {
                index,
                input,
                invalid,
            } => {
                if let PartialBlock::Tool { done, .. } = self.block(index, || PartialBlock::Tool {
                    id: String::new(),
                    name: String::new(),
                    raw: String::new(),
                    done: None,
                }) {
                    *done = Some((input, invalid));
                }
            }
            StreamEvent::ThinkingDelta { index, thinking } => {
                if let PartialBlock::Thinking { thinking: buf, .. } =
                    self.block(index, || PartialBlock::Thinking {
                        thinking: String::new(),
                        signature: String::new(),
                    })
                {
                    buf.push_str(&thinking);
                }
            }
            StreamEvent::ThinkingSignature { index, signature } => {
                if let PartialBlock::Thinking { signature: sig, .. } =
                    self.block(index, || PartialBlock::Thinking {
                        thinking: String::new(),
                        signature: String::new(),
                    })
                {
                    sig.push_str(&signature);
                }
            }
            StreamEvent::RedactedThinking { index, data } => {
                self.block(index, || PartialBlock::Redacted(data));
            }
            StreamEvent::Reasoning {
                index,
                id,
                summary,
                encrypted_content,
            } => {
                // The summary streamed as thinking at this index: the whole item replaces it.
                *self.block(index, || PartialBlock::Text(String::new())) =
                    PartialBlock::Reasoning {
                        id,
                        summary,
                        encrypted_content,
                    };
            }
            StreamEvent::Usage(usage) => self.usage = usage,
            StreamEvent::Retrying { .. } => {}
            StreamEvent::MessageEnd { stop_reason } => self.stop_reason = Some(stop_reason),
        }
    }

    /// Whether a `MessageEnd` has been seen.
    pub fn is_complete(&self) -> bool {
        self.stop_reason.is_some()
    }

    /// The response. Fails with [`ProviderError::Stream`] if no `MessageEnd` arrived. A tool
    /// call that never got its `ToolUseEnd` is returned invalid, never runnable.
    pub fn finish(self) -> Result<ToolUseResponse, ProviderError> {
        let Some(stop_reason) = self.stop_reason else {
            return Err(ProviderError::Stream {
                message: "the stream ended before the reply was complete".to_owned(),
            });
        };
        let content = self
            .blocks
            .into_iter()
            .filter_map(|(_, block)| match block {
                PartialBlock::Text(text) if text.is_empty() => None,
                PartialBlock::Text(text) => Some(ContentBlock::Text { text }),
                PartialBlock::Tool {
                    id,
                    name,
                    raw,
                    done,
                } => {
                    let (input, invalid) = done.unwrap_or_else(|| parse_tool_input(&raw, false));
                    Some(ContentBlock::ToolUse {
                        id,
                        name,
                        input,
                        invalid,
                    })
                }
                PartialBlock::Thinking {
                    thinking,
                    signature,
                } => Some(ContentBlock::Thinking {
                    thinking,
                    signature,
                }),
                PartialBlock::Redacted(data) => Some(ContentBlock::RedactedThinking { data }),
                PartialBlock::Reasoning {
                    id,
                    summary,
                    encrypted_content,
                } => Some(ContentBlock::Reasoning {
                    id,
                    summary,
                    encrypted_content,
                }),
            })
            .collect();
        Ok(ToolUseResponse {
            content,
            stop_reason,
            usage: self.usage,
            model: self.model,
        })
    }
}

/// Drains a stream of events into a complete response; the first error ends it.
pub async fn collect_response<S>(stream: S) -> Result<ToolUseResponse, ProviderError>
where
    S: Stream<Item = Result<StreamEvent, ProviderError>>,
{
    let mut stream = std::pin::pin!(stream);
    let mut assembler = ResponseAssembler::new();
    while let Some(event) = stream.next().await {
        assembler.push(event?);
    }
    assembler.finish()
}
