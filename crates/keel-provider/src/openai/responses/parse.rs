//! The Responses API event stream, turned into [`StreamEvent`]s.
//!
//! Each output item becomes the block at its `output_index`: a `message` item a text block,
//! a `function_call` item a tool call (its `call_id` is the call's id; the deltas name the
//! item by its own `fc_…` id or its index), a `reasoning` item thinking while its summary
//! streams, then a [`StreamEvent::Reasoning`] carrying the whole item. Items keel does not
//! call (a server's own tools: `mcp_call`, `web_search_call`, …) and events it does not need
//! (`content_part.*`, `*.done` echoes, annotations) are skipped. The reply ends at
//! `response.completed` or `response.incomplete`; `response.failed` and `error` end it with
//! an error.

use std::borrow::Cow;
use std::time::Duration;

use serde::Deserialize;

use crate::error::ProviderError;
use crate::http::error_from_stream_payload;
use crate::sse::{SseEvent, SseHandler};
use crate::stream::{StreamEvent, parse_tool_input};
use crate::types::{StopReason, Usage};

/// One event's JSON; each kind of event fills the fields it has.
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    output_index: Option<usize>,
    #[serde(default, borrow)]
    item_id: Option<Cow<'a, str>>,
    #[serde(default)]
    summary_index: Option<usize>,
    #[serde(default, borrow)]
    delta: Option<Cow<'a, str>>,
    #[serde(default)]
    item: Option<Item>,
    #[serde(default)]
    response: Option<Response>,
    /// An `error` event's own fields.
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default)]
    message: Option<String>,
    /// An `error` event in the shape the other APIs use (`{"error": {…}}`).
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct Item {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    summary: Vec<Part>,
    #[serde(default)]
    content: Vec<Part>,
    #[serde(default)]
    encrypted_content: Option<String>,
}

/// A part of a message's content or of a reasoning item's summary.
#[derive(Deserialize)]
struct Part {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    code: Option<serde_json::Value>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

/// `usage` as the Responses API reports it: cached tokens are counted inside `input_tokens`.
#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl WireUsage {
    fn to_usage(&self) -> Usage {
        let input = self.input_tokens.unwrap_or(0);
        let cached = self
            .input_tokens_details
            .as_ref()
            .and_then(|details| details.cached_tokens)
            .unwrap_or(0)
            .min(input);
        Usage {
            input_tokens: input - cached,
            output_tokens: self.output_tokens.unwrap_or(0),
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: cached,
        }
    }
}

/// What is known of the item at an output index.
#[derive(Debug)]
enum ItemState {
    /// A message: whether any of its text has streamed.
    Message { streamed: bool },
    /// A function call.
    Call {
        item_id: Option<String>,
        raw: String,
        closed: bool,
    },
    /// A reasoning item: the summary part streaming, if any.
    Reasoning { part: Option<usize> },
    /// An item keel does not act on.
    Other,
}

/// The state of one Responses stream.
#[derive(Debug, Default)]
pub(crate) struct ResponsesEvents {
    started: bool,
    /// Items by output index, in the order they arrived.
    items: Vec<(usize, ItemState)>,
    /// How many function calls the reply holds.
    calls: usize,
    refused: bool,
    done: bool,
}

impl SseHandler for ResponsesEvents {
    fn event(&mut self, sse: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        if self.done {
            return Ok(());
        }
        let data = sse.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(());
        }
        let event: Event<'_> = serde_json::from_str(data).map_err(|err| ProviderError::Stream {
            message: format!("malformed Responses event: {err}"),
        })?;
        match &*event.kind {
            "response.created" | "response.in_progress" | "response.queued" => {
                let response = event.response.as_ref();
                self.start(
                    response.and_then(|r| r.id.clone()),
                    response.and_then(|r| r.model.clone()),
                    out,
                );
            }
            "response.output_item.added" => {
                self.start(None, None, out);
                if let (Some(index), Some(item)) = (event.output_index, event.item) {
                    self.item_added(index, item, out);
                }
            }
            "response.output_text.delta" | "response.refusal.delta" => {
                self.start(None, None, out);
                if event.kind == "response.refusal.delta" {
                    self.refused = true;
                }
                if let (Some(index), Some(text)) = (event.output_index, event.delta)
                    && !text.is_empty()
                {
                    if let Some(ItemState::Message { streamed }) = self.item_mut(index) {
                        *streamed = true;
                    }
                    out.push(StreamEvent::TextDelta {
                        index,
                        text: text.into_owned(),
                    });
                }
            }
            "response.function_call_arguments.delta" => {
                let index = self.call_index(event.output_index, event.item_id.as_deref());
                if let (Some(index), Some(delta)) = (index, event.delta)
                    && !delta.is_empty()
                    && let Some(ItemState::Call { raw, .. }) = self.item_mut(index)
                {
                    raw.push_str(&delta);
                    out.push(StreamEvent::ToolInputDelta {
                        index,
                        partial_json: delta.into_owned(),
                    });
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let (Some(index), Some(delta)) = (event.output_index, event.delta) {
                    self.thinking(index, event.summary_index, &delta, out);
                }
            }
            "response.output_item.done" => {
                self.start(None, None, out);
                if let (Some(index), Some(item)) = (event.output_index, event.item) {
                    self.item_done(index, item, out);
                }
            }
            "response.completed" => {
                self.start(None, None, out);
                self.close_calls(true, out);
                let stop_reason = if self.refused {
                    StopReason::Refusal
                } else if self.calls > 0 {
                    StopReason::ToolUse
                } else {
                    StopReason::EndTurn
                };
                self.end(event.response, stop_reason, out);
            }
            "response.incomplete" => {
                self.start(None, None, out);
                // A call the output limit cut must never run.
                self.close_calls(false, out);
                let reason = event
                    .response
                    .as_ref()
                    .and_then(|r| r.incomplete_details.as_ref())
                    .and_then(|d| d.reason.clone());
                let stop_reason = match reason.as_deref() {
                    Some("max_output_tokens") | None => StopReason::MaxTokens,
                    Some("content_filter") => StopReason::Refusal,
                    Some(other) => StopReason::Other(other.to_owned()),
                };
                self.end(event.response, stop_reason, out);
            }
            "response.failed" => {
                let error = event.response.and_then(|r| r.error);
                return Err(match error {
                    Some(error) => error_for(&error, data),
                    None => ProviderError::Server {
                        status: 500,
                        message: "the response failed and the server said no more".into(),
                    },
                });
            }
            "error" => {
                let error = event.error.unwrap_or(WireError {
                    code: event.code,
                    kind: None,
                    message: event.message,
                });
                return Err(error_for(&error, data));
            }
            _ => {}
        }
        Ok(())
    }

    fn end_of_body(&mut self, _out: &mut Vec<StreamEvent>) -> Result<(), ProviderError> {
        if self.done {
            Ok(())
        } else {
            Err(ProviderError::Stream {
                message: "the stream ended before the response was complete \
                          (no response.completed)"
                    .into(),
            })
        }
    }
}

impl ResponsesEvents {
    fn start(&mut self, id: Option<String>, model: Option<String>, out: &mut Vec<StreamEvent>) {
        if !self.started {
            self.started = true;
            out.push(StreamEvent::MessageStart { id, model });
        }
    }

    fn item_mut(&mut self, index: usize) -> Option<&mut ItemState> {
        self.items
            .iter_mut()
            .rev()
            .find(|(i, _)| *i == index)
            .map(|(_, state)| state)
    }

    /// The output index of the call a delta names: by its index, else by its item id.
    fn call_index(&self, index: Option<usize>, item_id: Option<&str>) -> Option<usize> {
        index.or_else(|| {
            self.items.iter().find_map(|(i, state)| match state {
                ItemState::Call {
                    item_id: Some(id), ..
                } if Some(id.as_str()) == item_id => Some(*i),
                _ => None,
            })
        })
    }

    fn item_added(&mut self, index: usize, item: Item, out: &mut Vec<StreamEvent>) {
        if self.item_mut(index).is_some() {
            return;
        }
        let state = match item.kind.as_str() {
            "message" => ItemState::Message { streamed: false },
            "function_call" => self.call_started(index, &item, out),
            "reasoning" => ItemState::Reasoning { part: None },
            _ => ItemState::Other,
        };
        self.items.push((index, state));
    }

    /// A function call begins at `index`: its start, and any arguments that came with it.
    fn call_started(&mut self, index: usize, item: &Item, out: &mut Vec<StreamEvent>) -> ItemState {
        let id = item
            .call_id
            .clone()
            .or_else(|| item.id.clone())
            .filter(|id| !id.is_empty())
            .unwrap_or_else(|| format!("call_{}", self.calls));
        self.calls += 1;
        out.push(StreamEvent::ToolUseStart {
            index,
            id,
            name: item.name.clone().unwrap_or_default(),
        });
        let raw = item.arguments.clone().unwrap_or_default();
        if !raw.is_empty() {
            out.push(StreamEvent::ToolInputDelta {
                index,
                partial_json: raw.clone(),
            });
        }
        ItemState::Call {
            item_id: item.id.clone(),
            raw,
            closed: false,
        }
    }

    fn thinking(
        &mut self,
        index: usize,
        summary_index: Option<usize>,
        delta: &str,
        out: &mut Vec<StreamEvent>,
    ) {
        if delta.is_empty() {
            return;
        }
        if self.item_mut(index).is_none() {
            self.items
                .push((index, ItemState::Reasoning { part: None }));
        }
        if let Some(ItemState::Reasoning { part }) = self.item_mut(index) {
            // The summary's parts read as paragraphs.
            let separate = part.is_some() && *part != summary_index;
            *part = summary_index.or(Some(0));
            if separate {
                out.push(StreamEvent::ThinkingDelta {
                    index,
                    thinking: "\n\n".into(),
                });
            }
        }
        out.push(StreamEvent::ThinkingDelta {
            index,
            thinking: delta.to_owned(),
        });
    }

    fn item_done(&mut self, index: usize, item: Item, out: &mut Vec<StreamEvent>) {
        if self.item_mut(index).is_none() {
            // A server that sends items only whole.
            self.item_added(
                index,
                Item {
                    arguments: None,
                    summary: Vec::new(),
                    content: Vec::new(),
                    encrypted_content: None,
                    kind: item.kind.clone(),
                    id: item.id.clone(),
                    call_id: item.call_id.clone(),
                    name: item.name.clone(),
                },
                out,
            );
        }
        match item.kind.as_str() {
            "function_call" => {
                if let Some(ItemState::Call { raw, closed, .. }) = self.item_mut(index)
                    && !*closed
                {
                    // The item's arguments are the whole input; the deltas were its pieces.
                    let arguments = item.arguments.unwrap_or_else(|| raw.clone());
                    if raw.is_empty() && !arguments.is_empty() {
                        out.push(StreamEvent::ToolInputDelta {
                            index,
                            partial_json: arguments.clone(),
                        });
                    }
                    *closed = true;
                    let (input, invalid) = parse_tool_input(&arguments, true);
                    out.push(StreamEvent::ToolUseEnd {
                        index,
                        input,
                        invalid,
                    });
                }
            }
            "message" => {
                if let Some(ItemState::Message { streamed: false }) = self.item_mut(index) {
                    // A server that sent the text only whole.
                    for part in item.content {
                        let text = match part.kind.as_str() {
                            "refusal" => {
                                self.refused = true;
                                part.refusal
                            }
                            _ => part.text,
                        };
                        if let Some(text) = text.filter(|t| !t.is_empty()) {
                            out.push(StreamEvent::TextDelta { index, text });
                        }
                    }
                }
            }
            "reasoning" => self.reasoning_done(index, item, out),
            _ => {}
        }
    }

    /// A reasoning item is complete: the whole item, with its encrypted content, to send
    /// back. An item with neither summary nor encrypted content holds nothing to keep.
    fn reasoning_done(&mut self, index: usize, item: Item, out: &mut Vec<StreamEvent>) {
        let summary: Vec<String> = item
            .summary
            .into_iter()
            .filter_map(|part| part.text)
            .collect();
        let encrypted_content = item.encrypted_content.filter(|e| !e.is_empty());
        if summary.is_empty() && encrypted_content.is_none() {
            return;
        }
        if let Some(ItemState::Reasoning { part: None }) = self.item_mut(index)
            && !summary.is_empty()
        {
            // Not streamed: shown whole.
            out.push(StreamEvent::ThinkingDelta {
                index,
                thinking: summary.join("\n\n"),
            });
        }
        out.push(StreamEvent::Reasoning {
            index,
            id: item.id.unwrap_or_default(),
            summary,
            encrypted_content,
        });
    }

    /// Closes the calls still open; `complete` says whether the reply finished normally (a
    /// call left open by a cut reply is never runnable).
    fn close_calls(&mut self, complete: bool, out: &mut Vec<StreamEvent>) {
        for (index, state) in &mut self.items {
            if let ItemState::Call { raw, closed, .. } = state
                && !*closed
            {
                *closed = true;
                let (input, invalid) = parse_tool_input(raw, complete);
                out.push(StreamEvent::ToolUseEnd {
                    index: *index,
                    input,
                    invalid,
                });
            }
        }
    }

    fn end(
        &mut self,
        response: Option<Response>,
        stop_reason: StopReason,
        out: &mut Vec<StreamEvent>,
    ) {
        if let Some(usage) = response.and_then(|r| r.usage) {
            out.push(StreamEvent::Usage(usage.to_usage()));
        }
        out.push(StreamEvent::MessageEnd { stop_reason });
        self.done = true;
    }
}

/// The error a failed response or an `error` event reports, by the Responses API's codes;
/// codes it does not name are read as the other APIs' error kinds (and a gateway's status).
fn error_for(error: &WireError, raw: &str) -> ProviderError {
    let code = match &error.code {
        Some(serde_json::Value::String(code)) => Some(code.as_str()),
        _ => error.kind.as_deref(),
    };
    let message = error
        .message
        .clone()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| code.unwrap_or("the server reported an error").to_owned());
    match code {
        Some("rate_limit_exceeded") => ProviderError::RateLimited {
            retry_after: retry_after_in(&message),
            message,
        },
        Some("server_error" | "internal_error") => ProviderError::Server {
            status: 500,
            message,
        },
        Some("vector_store_timeout") => ProviderError::Server {
            status: 504,
            message,
        },
        Some("context_length_exceeded") => ProviderError::ContextLengthExceeded { message },
        Some("invalid_api_key") => ProviderError::Auth { message },
        Some("insufficient_quota" | "invalid_prompt" | "invalid_image" | "usage_not_included") => {
            ProviderError::InvalidRequest { message }
        }
        _ => error_from_stream_payload(raw),
    }
}

/// The wait a rate-limit message asks for ("Please try again in 1.5s", "… in 20ms").
fn retry_after_in(message: &str) -> Option<Duration> {
    let rest = &message[message.find("try again in ")? + "try again in ".len()..];
    let number_end = rest
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(rest.len());
    let value: f64 = rest[..number_end].parse().ok()?;
    let unit = &rest[number_end..];
    let secs = if unit.starts_with("ms") {
        value / 1000.0
    } else if unit.starts_with('s') {
        value
    } else {
        return None;
    };
    Duration::try_from_secs_f64(secs).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_messages_give_their_wait() {
        assert_eq!(
            retry_after_in("Rate limit reached for gpt-5 on tokens. Please try again in 1.5s."),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retry_after_in("Please try again in 20ms."),
            Some(Duration::from_millis(20))
        );
        assert_eq!(retry_after_in("Please try again in a while."), None);
        assert_eq!(retry_after_in("try again in 1e999999s"), None);
        assert_eq!(retry_after_in("slow down"), None);
    }
}
