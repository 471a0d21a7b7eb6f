//! The Chat Completions chunk stream, turned into [`StreamEvent`]s.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use crate::error::ProviderError;
use crate::http::error_from_stream_payload;
use crate::sse::{SseDriver, SseEvent, SseHandler};
use crate::stream::{StreamEvent, parse_tool_input};
use crate::types::{StopReason, Usage};

/// Block index of reasoning text, when a server streams it.
const THINKING_INDEX: usize = 0;
/// Block index of the reply text.
const TEXT_INDEX: usize = 1;
/// Block index of the first tool call.
const FIRST_TOOL_INDEX: usize = 2;

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    refusal: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Vec<ToolCallFragment>,
}

#[derive(Deserialize)]
struct ToolCallFragment {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionFragment>,
}

#[derive(Deserialize)]
struct FunctionFragment {
    #[serde(default)]
    name: Option<String>,
    /// A string fragment as OpenAI sends; some servers send the whole object.
    #[serde(default)]
    arguments: Option<Value>,
}

/// A usage object as OpenAI sends it, with what gateways add: OpenRouter's
/// `prompt_tokens_details.cache_write_tokens`, LiteLLM's `cache_creation_input_tokens` and
/// `cache_read_input_tokens` beside `prompt_tokens` (for Anthropic models behind it). Any
/// field may be missing or `null`.
#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    cache_write_tokens: Option<u64>,
}

impl WireUsage {
    /// OpenAI, OpenRouter and LiteLLM all count cached and cache-written tokens inside
    /// `prompt_tokens`; keel counts the three apart. A count larger than the prompt (a server
    /// that does not include it) is capped, never wrapped.
    fn to_usage(&self) -> Usage {
        let prompt = self.prompt_tokens.unwrap_or(0);
        let details = self.prompt_tokens_details.as_ref();
        let read = details
            .and_then(|d| d.cached_tokens)
            .filter(|n| *n > 0)
            .or(self.cache_read_input_tokens)
            .unwrap_or(0)
            .min(prompt);
        let written = details
            .and_then(|d| d.cache_write_tokens)
            .filter(|n| *n > 0)
            .or(self.cache_creation_input_tokens)
            .unwrap_or(0)
            .min(prompt - read);
        Usage {
            input_tokens: prompt - read - written,
            output_tokens: self.completion_tokens.unwrap_or(0),
            cache_creation_input_tokens: written,
            cache_read_input_tokens: read,
        }
    }
}

/// Maps Chat Completions' `finish_reason`.
pub(crate) fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "stop" => StopReason::EndTurn,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        other => StopReason::Other(other.to_owned()),
    }
}

#[derive(Debug)]
struct Call {
    /// The `index` the server gave the call.
    wire_index: usize,
    /// Its block index in the reply.
    block: usize,
    id: String,
    raw: String,
    closed: bool,
}

/// Parses an OpenAI Chat Completions stream incrementally.
///
/// Tool-call fragments are assembled by `index` (id and name come only on the first); whole
/// calls in one delta, as Ollama sends them, are accepted too, as are arguments sent as an
/// object. The usage chunk with empty `choices` and the closing `[DONE]` are handled.
/// Reasoning text (`reasoning_content` or `reasoning`) becomes thinking block 0, the reply
/// text block 1, tool calls blocks 2 and on.
///
/// ```
/// use keel_provider::StreamEvent;
/// use keel_provider::openai::OpenAiStreamParser;
///
/// let mut parser = OpenAiStreamParser::new();
/// let mut events = Vec::new();
/// parser.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n", &mut events)?;
/// assert!(events.contains(&StreamEvent::TextDelta { index: 1, text: "Hi".into() }));
/// # Ok::<(), keel_provider::ProviderError>(())
/// ```
#[derive(Debug, Default)]
pub struct OpenAiStreamParser(SseDriver<OpenAiEvents>);

impl OpenAiStreamParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next chunk of the body; events are appended to `out`.
    pub fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.0.feed(chunk, out)
    }

    /// Ends the stream. A stream that gave a `finish_reason` is complete even without
    /// `[DONE]`; one that did not fails with [`ProviderError::Stream`].
    pub fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.0.finish(out)
    }
}

/// The state of one Chat Completions stream.
#[derive(Debug, Default)]
pub(crate) struct OpenAiEvents {
    started: bool,
    calls: Vec<Call>,
    refused: bool,
    stop_reason: Option<StopReason>,
    done: bool,
}

impl SseHandler for OpenAiEvents {
    fn end_of_body(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        if self.stop_reason.is_some() {
            return self.end(out);
        }
        Err(ProviderError::Stream {
            message: "the stream ended before the reply was complete (no finish_reason)".into(),
        })
    }

    fn event(&mut self, sse: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        let data = sse.data.trim();
        if data == "[DONE]" {
            if self.stop_reason.is_none() {
                return Err(ProviderError::Stream {
                    message: "[DONE] arrived before any finish_reason".into(),
                });
            }
            return self.end(out);
        }
        if sse.event == "error" {
            return Err(error_from_stream_payload(data));
        }
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|err| ProviderError::Stream {
            message: format!("malformed chunk: {err}"),
        })?;
        if chunk.error.is_some() {
            return Err(error_from_stream_payload(data));
        }
        if !self.started {
            self.started = true;
            out.push(StreamEvent::MessageStart {
                id: chunk.id,
                model: chunk.model,
            });
        }
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                self.delta(delta, out);
            }
            if let Some(reason) = choice.finish_reason {
                if reason == "error" {
                    // OpenRouter: the upstream model failed mid-reply (with no `error`
                    // object, which is handled above).
                    return Err(ProviderError::Server {
                        status: 502,
                        message: "the model failed mid-reply (finish_reason \"error\")".into(),
                    });
                }
                self.close_calls(out);
                self.stop_reason = Some(if self.refused {
                    StopReason::Refusal
                } else if !self.calls.is_empty() && matches!(&*reason, "stop" | "end_turn") {
                    // Servers that say `stop` after tool calls (Ollama, some gateways): the
                    // calls are what the reply asks for.
                    StopReason::ToolUse
                } else {
                    stop_reason(&reason)
                });
            }
        }
        if let Some(usage) = chunk.usage {
            out.push(StreamEvent::Usage(usage.to_usage()));
        }
        Ok(())
    }
}

impl OpenAiEvents {
    fn delta(&mut self, delta: Delta<'_>, out: &mut Vec<StreamEvent>) {
        if let Some(thinking) = delta.reasoning_content.or(delta.reasoning)
            && !thinking.is_empty()
        {
            out.push(StreamEvent::ThinkingDelta {
                index: THINKING_INDEX,
                thinking: thinking.into_owned(),
            });
        }
        if let Some(refusal) = delta.refusal.filter(|r| !r.is_empty()) {
            self.refused = true;
            out.push(StreamEvent::TextDelta {
                index: TEXT_INDEX,
                text: refusal.into_owned(),
            });
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            out.push(StreamEvent::TextDelta {
                index: TEXT_INDEX,
                text: text.into_owned(),
            });
        }
        for (position, fragment) in delta.tool_calls.into_iter().enumerate() {
            self.fragment(position, fragment, out);
        }
    }

    fn fragment(
        &mut self,
        position: usize,
        fragment: ToolCallFragment,
        out: &mut Vec<StreamEvent>,
    ) {
        let wire_index = fragment.index.unwrap_or(position);
        let id = fragment.id.filter(|id| !id.is_empty());
        let existing = self
            .calls
            .iter()
            .rposition(|c| c.wire_index == wire_index && !c.closed);
        // A new id at a known index is a new call (servers that send every call whole at
        // index 0).
        let pos = match (existing, &id) {
            (Some(pos), Some(id))
                if !self.calls[pos].id.is_empty() && self.calls[pos].id != *id =>
            {
                None
            }
            (existing, _) => existing,
        };
        let function = fragment.function;
        let pos = match pos {
            Some(pos) => pos,
            None => {
                let block = FIRST_TOOL_INDEX + self.calls.len();
                let id = id.unwrap_or_else(|| format!("call_{}", self.calls.len()));
                let name = function
                    .as_ref()
                    .and_then(|f| f.name.clone())
                    .unwrap_or_default();
                out.push(StreamEvent::ToolUseStart {
                    index: block,
                    id: id.clone(),
                    name,
                });
                self.calls.push(Call {
                    wire_index,
                    block,
                    id,
                    raw: String::new(),
                    closed: false,
                });
                self.calls.len() - 1
            }
        };
        let arguments = match function.and_then(|f| f.arguments) {
            Some(Value::String(text)) => text,
            Some(Value::Null) | None => return,
            Some(object) => object.to_string(),
        };
        if arguments.is_empty() {
            return;
        }
        let call = &mut self.calls[pos];
        call.raw.push_str(&arguments);
        out.push(StreamEvent::ToolInputDelta {
            index: call.block,
            partial_json: arguments,
        });
    }

    fn close_calls(&mut self, out: &mut Vec<StreamEvent>) {
        for call in self.calls.iter_mut().filter(|c| !c.closed) {
            call.closed = true;
            let (input, invalid) = parse_tool_input(&call.raw, true);
            out.push(StreamEvent::ToolUseEnd {
                index: call.block,
                input,
                invalid,
            });
        }
    }

    fn end(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        self.close_calls(out);
        let stop_reason = self
            .stop_reason
            .clone()
            .ok_or_else(|| ProviderError::Stream {
                message: "the reply ended without a finish_reason".into(),
            })?;
        out.push(StreamEvent::MessageEnd { stop_reason });
        self.done = true;
        Ok(())
    }
}
