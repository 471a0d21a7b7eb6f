//! The Messages API event stream, turned into [`StreamEvent`]s.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::error::ProviderError;
use crate::http::error_from_stream_payload;
use crate::sse::{SseDriver, SseEvent, SseHandler};
use crate::stream::{StreamEvent, parse_tool_input};
use crate::types::{StopReason, Usage};

#[derive(Deserialize)]
struct WireEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: usize,
    #[serde(default, borrow)]
    delta: Option<WireDelta<'a>>,
    #[serde(default, borrow)]
    content_block: Option<WireBlockStart<'a>>,
    #[serde(default)]
    message: Option<WireMessageStart>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireDelta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WireBlockStart<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    id: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    input: Option<Value>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<Cow<'a, str>>,
    #[serde(default)]
    data: Option<String>,
}

#[derive(Deserialize)]
struct WireMessageStart {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Usage figures are cumulative: each one present replaces the previous value.
    fn apply(&self, usage: &mut Usage) {
        let set = |field: &mut u64, value: Option<u64>| {
            if let Some(value) = value {
                *field = value;
            }
        };
        set(&mut usage.input_tokens, self.input_tokens);
        set(&mut usage.output_tokens, self.output_tokens);
        set(
            &mut usage.cache_creation_input_tokens,
            self.cache_creation_input_tokens,
        );
        set(
            &mut usage.cache_read_input_tokens,
            self.cache_read_input_tokens,
        );
    }
}

/// Maps the Messages API's `stop_reason`.
pub(crate) fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "stop_sequence" => StopReason::StopSequence,
        "pause_turn" => StopReason::PauseTurn,
        "refusal" => StopReason::Refusal,
        "model_context_window_exceeded" => StopReason::ContextWindowExceeded,
        other => StopReason::Other(other.to_owned()),
    }
}

/// A tool call whose input is still arriving.
#[derive(Debug)]
struct OpenTool {
    index: usize,
    raw: String,
    initial: Option<Value>,
}

/// Parses an Anthropic Messages stream (`text/event-stream`) incrementally.
///
/// Unknown events and fields are ignored, `ping` is skipped, an `error` event becomes an
/// error, tool input is assembled per block index (empty input becomes `{}`), and usage is
/// taken as cumulative. A tool call the stream never closed is reported invalid.
///
/// ```
/// use keel_provider::StreamEvent;
/// use keel_provider::anthropic::AnthropicStreamParser;
///
/// let mut parser = AnthropicStreamParser::new();
/// let mut events = Vec::new();
/// parser.feed(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n", &mut events)?;
/// assert_eq!(events, vec![StreamEvent::TextDelta { index: 0, text: "Hi".into() }]);
/// # Ok::<(), keel_provider::ProviderError>(())
/// ```
#[derive(Debug, Default)]
pub struct AnthropicStreamParser(SseDriver<AnthropicEvents>);

impl AnthropicStreamParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next chunk of the body; events are appended to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.0.feed(chunk, out)
    }

    /// Ends the stream. Fails with [`ProviderError::Stream`] if it ended before the reply did.
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.0.finish(out)
    }
}

/// The state of one Messages stream.
#[derive(Debug, Default)]
pub(crate) struct AnthropicEvents {
    open_tools: Vec<OpenTool>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    done: bool,
}

impl SseHandler for AnthropicEvents {
    fn end_of_body(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        // Everything but `message_stop` arrived: the reply is whole.
        if self.stop_reason.is_some() {
            return self.end(out);
        }
        Err(ProviderError::Stream {
            message: "the stream ended before the reply was complete (no message_stop)".into(),
        })
    }

    fn event(&mut self, sse: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        if sse.event == "error" {
            return Err(error_from_stream_payload(&sse.data));
        }
        let event: WireEvent<'_> =
            serde_json::from_str(&sse.data).map_err(|err| ProviderError::Stream {
                message: format!("malformed {:?} event: {err}", sse.event),
            })?;
        let index = event.index;
        match &*event.kind {
            "message_start" => {
                let message = event.message.unwrap_or(WireMessageStart {
                    id: None,
                    model: None,
                    usage: None,
                });
                out.push(StreamEvent::MessageStart {
                    id: message.id,
                    model: message.model,
                });
                if let Some(usage) = message.usage {
                    usage.apply(&mut self.usage);
                    out.push(StreamEvent::Usage(self.usage));
                }
            }
            "content_block_start" => {
                if let Some(block) = event.content_block {
                    self.block_start(index, block, out);
                }
            }
            "content_block_delta" => {
                if let Some(delta) = event.delta {
                    self.delta(index, delta, out);
                }
            }
            "content_block_stop" => {
                if let Some(pos) = self.open_tools.iter().position(|t| t.index == index) {
                    let tool = self.open_tools.remove(pos);
                    out.push(close_tool(tool, true));
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.and_then(|d| d.stop_reason) {
                    self.stop_reason = Some(stop_reason(&reason));
                }
                if let Some(usage) = event.usage {
                    usage.apply(&mut self.usage);
                    out.push(StreamEvent::Usage(self.usage));
                }
            }
            "message_stop" => {
                if self.stop_reason.is_none() {
                    return Err(ProviderError::Stream {
                        message: "message_stop arrived without a stop_reason".into(),
                    });
                }
                self.end(out)?;
            }
            "error" => return Err(error_from_stream_payload(&sse.data)),
            // `ping` and events this version does not know.
            _ => {}
        }
        Ok(())
    }
}

impl AnthropicEvents {
    fn block_start(&mut self, index: usize, block: WireBlockStart<'_>, out: &mut Vec<StreamEvent>) {
        match &*block.kind {
            "text" => {
                if let Some(text) = block.text.filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta {
                        index,
                        text: text.into_owned(),
                    });
                }
            }
            "tool_use" => {
                out.push(StreamEvent::ToolUseStart {
                    index,
                    id: block.id,
                    name: block.name,
                });
                self.open_tools.push(OpenTool {
                    index,
                    raw: String::new(),
                    initial: block
                        .input
                        .filter(|v| v.as_object().is_some_and(|o| !o.is_empty())),
                });
            }
            "thinking" => {
                out.push(StreamEvent::ThinkingDelta {
                    index,
                    thinking: block.thinking.map(Cow::into_owned).unwrap_or_default(),
                });
                if let Some(signature) = block.signature.filter(|s| !s.is_empty()) {
                    out.push(StreamEvent::ThinkingSignature {
                        index,
                        signature: signature.into_owned(),
                    });
                }
            }
            "redacted_thinking" => out.push(StreamEvent::RedactedThinking {
                index,
                data: block.data.unwrap_or_default(),
            }),
            _ => {}
        }
    }

    fn delta(&mut self, index: usize, delta: WireDelta<'_>, out: &mut Vec<StreamEvent>) {
        match delta.kind.as_deref() {
            Some("text_delta") => {
                if let Some(text) = delta.text {
                    out.push(StreamEvent::TextDelta {
                        index,
                        text: text.into_owned(),
                    });
                }
            }
            Some("input_json_delta") => {
                let Some(json) = delta.partial_json.filter(|j| !j.is_empty()) else {
                    return;
                };
                if let Some(tool) = self.open_tools.iter_mut().find(|t| t.index == index) {
                    tool.raw.push_str(&json);
                }
                out.push(StreamEvent::ToolInputDelta {
                    index,
                    partial_json: json.into_owned(),
                });
            }
            Some("thinking_delta") => {
                if let Some(thinking) = delta.thinking {
                    out.push(StreamEvent::ThinkingDelta {
                        index,
                        thinking: thinking.into_owned(),
                    });
                }
            }
            Some("signature_delta") => {
                if let Some(signature) = delta.signature {
                    out.push(StreamEvent::ThinkingSignature {
                        index,
                        signature: signature.into_owned(),
                    });
                }
            }
            _ => {}
        }
    }

    /// Closes the reply: tool calls still open were cut off.
    fn end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        for tool in self.open_tools.drain(..) {
            out.push(close_tool(tool, false));
        }
        let stop_reason = self
            .stop_reason
            .clone()
            .ok_or_else(|| ProviderError::Stream {
                message: "the reply ended without a stop_reason".into(),
            })?;
        out.push(StreamEvent::MessageEnd { stop_reason });
        self.done = true;
        Ok(())
    }
}

fn close_tool(tool: OpenTool, complete: bool) -> StreamEvent {
    let (input, invalid) = match tool.initial {
        Some(initial) if tool.raw.is_empty() && complete => (initial, None),
        _ => parse_tool_input(&tool.raw, complete),
    };
    StreamEvent::ToolUseEnd {
        index: tool.index,
        input,
        invalid,
    }
}
