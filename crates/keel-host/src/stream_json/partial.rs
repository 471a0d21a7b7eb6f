//! The `stream_event` lines of `--include-partial-messages`: the Anthropic Messages API's
//! stream events (`message_start`, `content_block_start`/`_delta`/`_stop`, `message_delta`,
//! `message_stop`) rebuilt from the engine's events.
//!
//! The engine streams text and thinking as they come ([`AgentEvent::TextDelta`],
//! [`AgentEvent::ThinkingDelta`]); a new block starts where the kind changes. Tool calls are
//! not streamed by the engine: their blocks are sent whole (start, one `input_json_delta`
//! with the full input, stop) once the reply is complete, as are blocks that were not
//! streamed at all (a provider that sends text in one piece still has its text streamed).
//!
//! [`AgentEvent::TextDelta`]: keel::engine::AgentEvent::TextDelta
//! [`AgentEvent::ThinkingDelta`]: keel::engine::AgentEvent::ThinkingDelta

use keel::provider::{ContentBlock, Usage};
use serde_json::{Value, json};

/// The kind of a block streamed so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Streamed {
    Text,
    Thinking,
}

/// What has been streamed of the reply in flight.
#[derive(Debug, Default)]
pub(super) struct PartialReply {
    /// The blocks started, in order; the last is open unless `closed` is set.
    pub(super) blocks: Vec<Streamed>,
    /// Whether the last block was stopped already.
    pub(super) closed: bool,
}

impl PartialReply {
    /// The events for `text` of `kind`: a stop and a start when the kind changes, then the
    /// delta.
    pub(super) fn delta(&mut self, kind: Streamed, text: &str) -> Vec<Value> {
        let mut events = Vec::new();
        if self.blocks.last() != Some(&kind) || self.closed {
            events.extend(self.close());
            let index = self.blocks.len();
            self.blocks.push(kind);
            self.closed = false;
            let block = match kind {
                Streamed::Text => json!({"type": "text", "text": ""}),
                Streamed::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
            };
            events.push(json!({
                "type": "content_block_start",
                "index": index,
                "content_block": block,
            }));
        }
        let delta = match kind {
            Streamed::Text => json!({"type": "text_delta", "text": text}),
            Streamed::Thinking => json!({"type": "thinking_delta", "thinking": text}),
        };
        events.push(json!({
            "type": "content_block_delta",
            "index": self.blocks.len().saturating_sub(1),
            "delta": delta,
        }));
        events
    }

    /// The stop of the open block, if one is open.
    pub(super) fn close(&mut self) -> Option<Value> {
        if self.blocks.is_empty() || self.closed {
            return None;
        }
        self.closed = true;
        Some(json!({"type": "content_block_stop", "index": self.blocks.len() - 1}))
    }

    /// The events that complete block `index` of the finished reply: its signature (a
    /// streamed thinking block), or the whole block (one not streamed), then its stop.
    pub(super) fn finish_block(
        &mut self,
        index: usize,
        block: &Value,
        original: &ContentBlock,
    ) -> Vec<Value> {
        let mut events = Vec::new();
        if index < self.blocks.len() {
            if index + 1 == self.blocks.len() && !self.closed {
                if let ContentBlock::Thinking { signature, .. } = original
                    && !signature.is_empty()
                {
                    events.push(json!({
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "signature_delta", "signature": signature},
                    }));
                }
                events.extend(self.close());
            }
            return events;
        }
        // Not streamed: sent whole.
        events.extend(self.close());
        let (start, delta) = whole_block(block);
        events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        if let Some(delta) = delta {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        self.blocks.push(Streamed::Text);
        self.closed = true;
        events
    }
}

/// A block not streamed, as its start (emptied) and the one delta that fills it.
fn whole_block(block: &Value) -> (Value, Option<Value>) {
    let mut start = block.clone();
    let delta = match block["type"].as_str() {
        Some("text") => {
            start["text"] = json!("");
            Some(json!({"type": "text_delta", "text": block["text"]}))
        }
        Some("thinking") => {
            start["thinking"] = json!("");
            Some(json!({"type": "thinking_delta", "thinking": block["thinking"]}))
        }
        Some("tool_use") => {
            start["input"] = json!({});
            Some(json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}))
        }
        _ => None,
    };
    (start, delta)
}

/// `message_start`: the reply's frame, empty. Its usage is zero: the counts are known when
/// the reply ends, and come with `message_delta`.
pub(super) fn message_start(id: &str, model: &str) -> Value {
    json!({
        "type": "message_start",
        "message": {
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {
                "input_tokens": 0,
                "output_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    })
}

/// `message_delta` (why the reply stopped, its usage) and `message_stop`.
pub(super) fn message_end(stop_reason: Option<&str>, usage: Option<&Usage>) -> [Value; 2] {
    let usage = usage.map_or_else(|| json!({"output_tokens": 0}), super::api_usage);
    [
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": usage,
        }),
        json!({"type": "message_stop"}),
    ]
}
