//! A provider that replays scripted replies, for testing what sits above the provider.

use std::collections::VecDeque;
use std::sync::Mutex;

use futures::stream::{self, BoxStream};
use keel_provider::{
    CompletionRequest, ContentBlock, Provider, ProviderError, StopReason, StreamEvent,
    ToolUseResponse, Usage,
};
use serde_json::Value;

/// One scripted turn.
#[derive(Debug, Clone)]
pub enum Turn {
    /// A whole reply, streamed as the events a real back end would send.
    Reply(ToolUseResponse),
    /// Exactly these events (to script cut or odd streams).
    Events(Vec<Result<StreamEvent, ProviderError>>),
}

/// Replays turns in order and records each request. A request after the script is used up
/// fails with [`ProviderError::InvalidRequest`], so a test notices an unexpected call.
#[derive(Debug, Default)]
pub struct ScriptedProvider {
    turns: Mutex<VecDeque<Turn>>,
    requests: Mutex<Vec<CompletionRequest>>,
}

impl ScriptedProvider {
    /// A provider with an empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a turn.
    pub fn then(self, turn: Turn) -> Self {
        self.turns.lock().unwrap().push_back(turn);
        self
    }

    /// Appends a reply that says `text` and ends the turn.
    pub fn then_text(self, text: &str) -> Self {
        self.then(Turn::Reply(reply(
            vec![ContentBlock::text(text)],
            StopReason::EndTurn,
        )))
    }

    /// Appends a reply that calls one tool.
    pub fn then_tool_call(self, id: &str, name: &str, input: Value) -> Self {
        self.then(Turn::Reply(reply(
            vec![ContentBlock::tool_use(id, name, input)],
            StopReason::ToolUse,
        )))
    }

    /// Appends a failure.
    pub fn then_error(self, error: ProviderError) -> Self {
        self.then(Turn::Events(vec![Err(error)]))
    }

    /// Appends a reply cut off mid-stream: the first `keep` events [`reply_events`] would
    /// stream for `reply` (text and tool-input deltas included), then `error` (e.g. the
    /// `ProviderError::Stream` a dropped connection gives).
    pub fn then_cut(self, reply: &ToolUseResponse, keep: usize, error: ProviderError) -> Self {
        let mut events: Vec<Result<StreamEvent, ProviderError>> =
            reply_events(reply).into_iter().take(keep).map(Ok).collect();
        events.push(Err(error));
        self.then(Turn::Events(events))
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<CompletionRequest> {
        self.requests.lock().unwrap().clone()
    }

    /// How many scripted turns are left.
    pub fn remaining(&self) -> usize {
        self.turns.lock().unwrap().len()
    }
}

/// A reply with `content`, `stop_reason` and a small fixed usage.
pub fn reply(content: Vec<ContentBlock>, stop_reason: StopReason) -> ToolUseResponse {
    ToolUseResponse {
        content,
        stop_reason,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        },
        model: Some("scripted".into()),
    }
}

/// The events a back end would stream for `reply`.
pub fn reply_events(reply: &ToolUseResponse) -> Vec<StreamEvent> {
    let mut events = vec![StreamEvent::MessageStart {
        id: Some("msg_scripted".into()),
        model: reply.model.clone(),
    }];
    for (index, block) in reply.content.iter().enumerate() {
        match block {
            ContentBlock::Text { text } => events.push(StreamEvent::TextDelta {
                index,
                text: text.clone(),
            }),
            ContentBlock::ToolUse {
                id,
                name,
                input,
                invalid,
            } => {
                events.push(StreamEvent::ToolUseStart {
                    index,
                    id: id.clone(),
                    name: name.clone(),
                });
                events.push(StreamEvent::ToolInputDelta {
                    index,
                    partial_json: invalid
                        .as_ref()
                        .map_or_else(|| input.to_string(), |bad| bad.raw.clone()),
                });
                events.push(StreamEvent::ToolUseEnd {
                    index,
                    input: input.clone(),
                    invalid: invalid.clone(),
                });
            }
            ContentBlock::Thinking {
                thinking,
                signature,
            } => {
                events.push(StreamEvent::ThinkingDelta {
                    index,
                    thinking: thinking.clone(),
                });
                events.push(StreamEvent::ThinkingSignature {
                    index,
                    signature: signature.clone(),
                });
            }
            ContentBlock::RedactedThinking { data } => {
                events.push(StreamEvent::RedactedThinking {
                    index,
                    data: data.clone(),
                });
            }
            ContentBlock::Reasoning {
                id,
                summary,
                encrypted_content,
            } => {
                events.push(StreamEvent::ThinkingDelta {
                    index,
                    thinking: summary.join("\n\n"),
                });
                events.push(StreamEvent::Reasoning {
                    index,
                    id: id.clone(),
                    summary: summary.clone(),
                    encrypted_content: encrypted_content.clone(),
                });
            }
            _ => {}
        }
    }
    events.push(StreamEvent::Usage(reply.usage));
    events.push(StreamEvent::MessageEnd {
        stop_reason: reply.stop_reason.clone(),
    });
    events
}

#[async_trait::async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn stream(&self, req: &CompletionRequest) -> BoxStream<'_, Result<StreamEvent, ProviderError>> {
        self.requests.lock().unwrap().push(req.clone());
        let events = match self.turns.lock().unwrap().pop_front() {
            Some(Turn::Reply(reply)) => reply_events(&reply).into_iter().map(Ok).collect(),
            Some(Turn::Events(events)) => events,
            None => vec![Err(ProviderError::InvalidRequest {
                message: "the scripted provider has no more replies".into(),
            })],
        };
        Box::pin(stream::iter(events))
    }
}

/// The `(content, is_error)` of every tool result in `history`, in order.
pub fn tool_results(history: &[keel_provider::Message]) -> Vec<(String, bool)> {
    history
        .iter()
        .flat_map(|message| message.content.iter())
        .filter_map(|block| match block {
            ContentBlock::ToolResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

/// The usage every reply made by [`text_reply`] and [`tool_reply`] reports: 100 tokens in,
/// 20 out, so tests can count tokens and costs.
pub const REPLY_USAGE: Usage = Usage {
    input_tokens: 100,
    output_tokens: 20,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0,
};

/// A reply saying `text` and ending the turn, with [`REPLY_USAGE`].
pub fn text_reply(text: &str) -> ToolUseResponse {
    let mut reply = reply(vec![ContentBlock::text(text)], StopReason::EndTurn);
    reply.usage = REPLY_USAGE;
    reply
}

/// A reply calling one tool, with [`REPLY_USAGE`].
pub fn tool_reply(id: &str, name: &str, input: Value) -> ToolUseResponse {
    let mut reply = reply(
        vec![ContentBlock::tool_use(id, name, input)],
        StopReason::ToolUse,
    );
    reply.usage = REPLY_USAGE;
    reply
}
