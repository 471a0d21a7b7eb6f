//! Renders replies in the providers' streaming wire formats, shaped like the recordings in
//! `shared/wire/` (same events, same fields, tool input split into fragments), so multi-turn
//! scenarios can be served from wiremock to the real back ends.

use keel_provider::{ContentBlock, StopReason, ToolUseResponse};
use serde_json::{Value, json};

fn anthropic_stop(reason: &StopReason) -> &str {
    match reason {
        StopReason::EndTurn => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::MaxTokens => "max_tokens",
        StopReason::StopSequence => "stop_sequence",
        StopReason::PauseTurn => "pause_turn",
        StopReason::Refusal => "refusal",
        StopReason::ContextWindowExceeded => "model_context_window_exceeded",
        StopReason::Other(other) => other,
    }
}

fn event(out: &mut String, name: &str, data: Value) {
    out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
}

/// Splits `text` into pieces of about `size` characters.
fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

/// `reply` as an Anthropic Messages event stream.
pub fn anthropic_sse(reply: &ToolUseResponse) -> String {
    let mut out = String::new();
    event(
        &mut out,
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_rendered", "type": "message", "role": "assistant", "model": reply.model.clone().unwrap_or_else(|| "claude-sonnet-4-5".into()), "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": reply.usage.input_tokens, "cache_creation_input_tokens": reply.usage.cache_creation_input_tokens, "cache_read_input_tokens": reply.usage.cache_read_input_tokens, "output_tokens": 1}}}),
    );
    event(&mut out, "ping", json!({"type": "ping"}));
    for (index, block) in reply.content.iter().enumerate() {
        match block {
            ContentBlock::Text { text } => {
                event(
                    &mut out,
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
                );
                for piece in pieces(text, 24) {
                    event(
                        &mut out,
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}}),
                    );
                }
            }
            ContentBlock::Thinking {
                thinking,
                signature,
            } => {
                event(
                    &mut out,
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
                );
                for piece in pieces(thinking, 24) {
                    event(
                        &mut out,
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": piece}}),
                    );
                }
                event(
                    &mut out,
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": signature}}),
                );
            }
            ContentBlock::ToolUse {
                id, name, input, ..
            } => {
                event(
                    &mut out,
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
                );
                event(
                    &mut out,
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": ""}}),
                );
                for piece in pieces(&input.to_string(), 7) {
                    event(
                        &mut out,
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
                    );
                }
            }
            _ => continue,
        }
        event(
            &mut out,
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    event(
        &mut out,
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": anthropic_stop(&reply.stop_reason), "stop_sequence": null}, "usage": {"output_tokens": reply.usage.output_tokens}}),
    );
    event(&mut out, "message_stop", json!({"type": "message_stop"}));
    out
}

/// `reply` as an OpenAI Chat Completions chunk stream.
pub fn openai_sse(reply: &ToolUseResponse) -> String {
    let model = reply.model.clone().unwrap_or_else(|| "gpt-4.1".into());
    let chunk = |delta: Value, finish: Option<&str>| {
        format!(
            "data: {}\n\n",
            json!({"id": "chatcmpl-rendered", "object": "chat.completion.chunk", "created": 1727346176, "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
        )
    };
    let mut out = chunk(
        json!({"role": "assistant", "content": null, "refusal": null}),
        None,
    );
    let mut call_index = 0;
    for block in &reply.content {
        match block {
            ContentBlock::Text { text } => {
                for piece in pieces(text, 24) {
                    out.push_str(&chunk(json!({"content": piece}), None));
                }
            }
            ContentBlock::ToolUse {
                id, name, input, ..
            } => {
                out.push_str(&chunk(json!({"tool_calls": [{"index": call_index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}), None));
                for piece in pieces(&input.to_string(), 7) {
                    out.push_str(&chunk(json!({"tool_calls": [{"index": call_index, "function": {"arguments": piece}}]}), None));
                }
                call_index += 1;
            }
            _ => {}
        }
    }
    let finish = match reply.stop_reason {
        StopReason::ToolUse => "tool_calls",
        StopReason::MaxTokens => "length",
        StopReason::Refusal => "content_filter",
        _ => "stop",
    };
    out.push_str(&chunk(json!({}), Some(finish)));
    out.push_str(&format!(
        "data: {}\n\n",
        json!({"id": "chatcmpl-rendered", "object": "chat.completion.chunk", "created": 1727346176, "model": model, "choices": [], "usage": {"prompt_tokens": reply.usage.input_tokens, "completion_tokens": reply.usage.output_tokens, "total_tokens": reply.usage.input_tokens + reply.usage.output_tokens}})
    ));
    out.push_str("data: [DONE]\n\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_provider::{AnthropicStreamParser, OpenAiStreamParser, ResponseAssembler};

    fn sample() -> ToolUseResponse {
        crate::scripted::reply(
            vec![
                ContentBlock::text("Let me look at the file first."),
                ContentBlock::tool_use("toolu_1", "read_file", json!({"path": "src/lib.rs"})),
            ],
            StopReason::ToolUse,
        )
    }

    #[test]
    fn rendered_thinking_parses_back_to_the_reply() {
        let reply = crate::scripted::reply(
            vec![
                ContentBlock::Thinking {
                    thinking: "The answer is in the file, so read it first.".into(),
                    signature: "EqQBCgIYAh".into(),
                },
                ContentBlock::text("Done."),
            ],
            StopReason::EndTurn,
        );
        let mut events = Vec::new();
        let mut parser = AnthropicStreamParser::new();
        parser
            .feed(anthropic_sse(&reply).as_bytes(), &mut events)
            .unwrap();
        parser.finish(&mut events).unwrap();
        let mut assembler = ResponseAssembler::new();
        events.into_iter().for_each(|e| assembler.push(e));
        assert_eq!(assembler.finish().unwrap().content, reply.content);
    }

    #[test]
    fn rendered_streams_parse_back_to_the_reply() {
        let reply = sample();
        let mut events = Vec::new();
        let mut parser = AnthropicStreamParser::new();
        parser
            .feed(anthropic_sse(&reply).as_bytes(), &mut events)
            .unwrap();
        parser.finish(&mut events).unwrap();
        let mut assembler = ResponseAssembler::new();
        events.into_iter().for_each(|e| assembler.push(e));
        let parsed = assembler.finish().unwrap();
        assert_eq!(parsed.content, reply.content);
        assert_eq!(parsed.usage, reply.usage);

        let mut events = Vec::new();
        let mut parser = OpenAiStreamParser::new();
        parser
            .feed(openai_sse(&reply).as_bytes(), &mut events)
            .unwrap();
        parser.finish(&mut events).unwrap();
        let mut assembler = ResponseAssembler::new();
        events.into_iter().for_each(|e| assembler.push(e));
        let parsed = assembler.finish().unwrap();
        assert_eq!(parsed.content, reply.content);
        assert_eq!(parsed.stop_reason, StopReason::ToolUse);
    }
}
