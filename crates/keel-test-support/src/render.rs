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

/// `reply` as an OpenAI Responses API event stream, shaped like the recordings in
/// `shared/wire/openai-responses/`: `response.created`, each block an output item at its
/// position (reasoning with its summary parts and encrypted content, a message with its text
/// deltas, a function call with its argument deltas naming the item by its `fc_` id), then
/// `response.completed` with usage (cached tokens inside `input_tokens`), or
/// `response.incomplete` for a reply cut at the output limit. Every event has its
/// `sequence_number`, and deltas their `obfuscation` padding.
pub fn responses_sse(reply: &ToolUseResponse) -> String {
    let model = reply
        .model
        .clone()
        .unwrap_or_else(|| "gpt-5.3-codex".into());
    let mut out = String::new();
    let mut sequence = 0;
    let mut emit = |out: &mut String, mut data: Value| {
        let name = data["type"].as_str().unwrap_or_default().to_owned();
        data["sequence_number"] = json!(sequence);
        sequence += 1;
        event(out, &name, data);
    };
    let response = |status: &str, output: Value, usage: Value| json!({"id": "resp_rendered", "object": "response", "created_at": 1764777657, "status": status, "error": null, "incomplete_details": null, "model": model, "output": output, "store": false, "usage": usage});
    emit(
        &mut out,
        json!({"type": "response.created", "response": response("in_progress", json!([]), Value::Null)}),
    );
    emit(
        &mut out,
        json!({"type": "response.in_progress", "response": response("in_progress", json!([]), Value::Null)}),
    );
    let mut output = Vec::new();
    for (index, block) in reply.content.iter().enumerate() {
        let item = match block {
            ContentBlock::Reasoning {
                id,
                summary,
                encrypted_content,
            } => {
                emit(
                    &mut out,
                    json!({"type": "response.output_item.added", "output_index": index, "item": {"id": id, "type": "reasoning", "summary": []}}),
                );
                for (part, text) in summary.iter().enumerate() {
                    emit(
                        &mut out,
                        json!({"type": "response.reasoning_summary_part.added", "item_id": id, "output_index": index, "summary_index": part, "part": {"type": "summary_text", "text": ""}}),
                    );
                    for piece in pieces(text, 24) {
                        emit(
                            &mut out,
                            json!({"type": "response.reasoning_summary_text.delta", "item_id": id, "output_index": index, "summary_index": part, "delta": piece, "obfuscation": "Xq3"}),
                        );
                    }
                    emit(
                        &mut out,
                        json!({"type": "response.reasoning_summary_text.done", "item_id": id, "output_index": index, "summary_index": part, "text": text}),
                    );
                    emit(
                        &mut out,
                        json!({"type": "response.reasoning_summary_part.done", "item_id": id, "output_index": index, "summary_index": part, "part": {"type": "summary_text", "text": text}}),
                    );
                }
                let mut item = json!({"id": id, "type": "reasoning", "summary": summary.iter().map(|text| json!({"type": "summary_text", "text": text})).collect::<Vec<_>>()});
                if let Some(encrypted) = encrypted_content {
                    item["encrypted_content"] = json!(encrypted);
                }
                item
            }
            ContentBlock::Text { text } => {
                let id = format!("msg_rendered_{index}");
                emit(
                    &mut out,
                    json!({"type": "response.output_item.added", "output_index": index, "item": {"id": id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}}),
                );
                emit(
                    &mut out,
                    json!({"type": "response.content_part.added", "item_id": id, "output_index": index, "content_index": 0, "part": {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}}),
                );
                for piece in pieces(text, 24) {
                    emit(
                        &mut out,
                        json!({"type": "response.output_text.delta", "item_id": id, "output_index": index, "content_index": 0, "delta": piece, "logprobs": [], "obfuscation": "mg9mj4"}),
                    );
                }
                emit(
                    &mut out,
                    json!({"type": "response.output_text.done", "item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
                );
                let part =
                    json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text});
                emit(
                    &mut out,
                    json!({"type": "response.content_part.done", "item_id": id, "output_index": index, "content_index": 0, "part": part}),
                );
                json!({"id": id, "type": "message", "status": "completed", "content": [part], "role": "assistant"})
            }
            ContentBlock::ToolUse {
                id, name, input, ..
            } => {
                let item_id = format!("fc_rendered_{index}");
                let arguments = input.to_string();
                emit(
                    &mut out,
                    json!({"type": "response.output_item.added", "output_index": index, "item": {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "", "call_id": id, "name": name}}),
                );
                for piece in pieces(&arguments, 7) {
                    emit(
                        &mut out,
                        json!({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": index, "delta": piece, "obfuscation": "glOt23"}),
                    );
                }
                emit(
                    &mut out,
                    json!({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": index, "arguments": arguments}),
                );
                json!({"id": item_id, "type": "function_call", "status": "completed", "arguments": arguments, "call_id": id, "name": name})
            }
            _ => continue,
        };
        emit(
            &mut out,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        );
        output.push(item);
    }
    let usage = json!({
        "input_tokens": reply.usage.input_tokens + reply.usage.cache_read_input_tokens,
        "input_tokens_details": {"cached_tokens": reply.usage.cache_read_input_tokens},
        "output_tokens": reply.usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.usage.input_tokens + reply.usage.cache_read_input_tokens + reply.usage.output_tokens,
    });
    if reply.stop_reason == StopReason::MaxTokens {
        let mut response = response("incomplete", json!(output), usage);
        response["incomplete_details"] = json!({"reason": "max_output_tokens"});
        emit(
            &mut out,
            json!({"type": "response.incomplete", "response": response}),
        );
    } else {
        emit(
            &mut out,
            json!({"type": "response.completed", "response": response("completed", json!(output), usage)}),
        );
    }
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
    fn rendered_responses_parse_back_to_the_reply() {
        let mut reply = crate::scripted::reply(
            vec![
                ContentBlock::Reasoning {
                    id: "rs_1".into(),
                    summary: vec!["Read the file.".into(), "Then fix it.".into()],
                    encrypted_content: Some("gAAAAB-opaque".into()),
                },
                ContentBlock::text("Let me look at the file first."),
                ContentBlock::tool_use("call_1", "read_file", json!({"path": "src/lib.rs"})),
            ],
            StopReason::ToolUse,
        );
        reply.usage.cache_read_input_tokens = 4;
        let mut events = Vec::new();
        let mut parser = keel_provider::ResponsesStreamParser::new();
        parser
            .feed(responses_sse(&reply).as_bytes(), &mut events)
            .unwrap();
        parser.finish(&mut events).unwrap();
        let mut assembler = ResponseAssembler::new();
        events.into_iter().for_each(|e| assembler.push(e));
        let parsed = assembler.finish().unwrap();
        assert_eq!(parsed.content, reply.content);
        assert_eq!(parsed.usage, reply.usage);
        assert_eq!(parsed.stop_reason, StopReason::ToolUse);
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
