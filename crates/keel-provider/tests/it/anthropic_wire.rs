//! The Anthropic back end against streams recorded from the real API, served verbatim.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use futures::StreamExt;
use keel_provider::{
    AnthropicProvider, AnthropicStreamParser, ApiKey, CompletionRequest, ContentBlock, Message,
    Provider, ResponseAssembler, StopReason, StreamEvent, ToolInput, ToolUseResponse, Usage,
};
use keel_test_support::mock::serve_sse;
use keel_test_support::wire::{wire_bytes, wire_files};
use serde_json::json;

async fn complete(recording: &str) -> ToolUseResponse {
    let server = serve_sse("/v1/messages", wire_bytes(recording)).await;
    let provider = AnthropicProvider::new(ApiKey::new("sk-ant-test"))
        .unwrap()
        .with_base_url(&server.uri())
        .unwrap();
    let request = CompletionRequest::new("claude-sonnet-4-5").message(Message::user("hi"));
    provider.tool_use_completion(&request).await.unwrap()
}

/// Parses `bytes` fed in chunks of `size` bytes.
fn parse_in_chunks(bytes: &[u8], size: usize) -> Vec<StreamEvent> {
    let mut parser = AnthropicStreamParser::new();
    let mut events = Vec::new();
    for chunk in bytes.chunks(size) {
        parser.feed(chunk, &mut events).unwrap();
    }
    parser.finish(&mut events).unwrap();
    events
}

#[tokio::test]
async fn basic_response() {
    let reply = complete("anthropic/basic_response.sse").await;
    assert_eq!(reply.text(), "Hello there!");
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 11,
            output_tokens: 6,
            ..Usage::default()
        }
    );
    assert_eq!(reply.model.as_deref(), Some("claude-3-opus-latest"));
    assert!(reply.tool_calls().is_empty());
}

#[tokio::test]
async fn tool_use_response() {
    let reply = complete("anthropic/tool_use_response.sse").await;
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::text("I'll check the current weather in Paris for you."),
            ContentBlock::tool_use(
                "toolu_01NRLabsLyVHZPKxbKvkfSMn",
                "get_weather",
                json!({"location": "Paris"})
            ),
        ]
    );
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 377,
            output_tokens: 65,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
        }
    );
    let calls = reply.tool_calls();
    assert_eq!(calls.len(), 1);
    assert!(calls[0].is_valid());
}

#[tokio::test]
async fn incomplete_partial_json_is_an_invalid_call_that_keeps_the_raw_text() {
    let reply = complete("anthropic/incomplete_partial_json_response.sse").await;
    assert_eq!(reply.stop_reason, StopReason::MaxTokens);
    assert_eq!(
        reply.text(),
        "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a \
         file called taxes.txt. Let me do that for you now."
    );
    assert_eq!(reply.usage.input_tokens, 450);
    assert_eq!(reply.usage.output_tokens, 124);
    let calls = reply.tool_calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].id, "toolu_01EKqbqmZrGRXy18eN7m9kvY");
    assert_eq!(calls[0].name, "make_file");
    assert!(!calls[0].is_valid());
    let ToolInput::Invalid(bad) = calls[0].input else {
        panic!("the cut call must be invalid");
    };
    assert_eq!(
        bad.raw,
        "{\"filename\": \"taxes.txt\", \"lines_of_text\": [\n\"# COMPREHENSIVE TAX GUIDE FOR \
         INDIVIDUALS WITH MULTIPLE W-2s\",\n\"\",\n\"## INTRODUCTION\",\n\"\",\n\"Filing taxes"
    );
    assert!(!bad.reason.is_empty());
    // On the wire the invalid call still carries an object, so the history stays valid.
    let ContentBlock::ToolUse { input, .. } = &reply.content[1] else {
        panic!("second block is the tool call");
    };
    assert_eq!(input, &json!({}));
}

#[tokio::test]
async fn refusal_response() {
    let reply = complete("anthropic/refusal_response.sse").await;
    assert_eq!(reply.stop_reason, StopReason::Refusal);
    assert!(reply.content.is_empty());
    assert_eq!(reply.usage.input_tokens, 20);
    assert_eq!(reply.usage.output_tokens, 0);
}

#[test]
fn every_recording_parses_the_same_in_any_chunking() {
    let files = wire_files("anthropic");
    assert!(files.len() >= 4, "recordings missing: {files:?}");
    for file in files {
        let bytes = wire_bytes(&file);
        let whole = parse_in_chunks(&bytes, bytes.len());
        assert!(
            matches!(whole.last(), Some(StreamEvent::MessageEnd { .. })),
            "{file}: no MessageEnd"
        );
        for size in [1, 2, 3, 7, 64, 500] {
            assert_eq!(
                parse_in_chunks(&bytes, size),
                whole,
                "{file} in {size}-byte chunks"
            );
        }
    }
}

#[test]
fn events_carry_deltas_in_order() {
    let events = parse_in_chunks(&wire_bytes("anthropic/tool_use_response.sse"), 4096);
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolInputDelta { partial_json, .. } => Some(partial_json.as_str()),
            _ => None,
        })
        .collect();
    // The first, empty fragment carries nothing and is dropped.
    assert_eq!(deltas, ["{\"locati", "on\": \"P", "ar", "is\"}"]);
    assert!(events.contains(&StreamEvent::ToolUseStart {
        index: 1,
        id: "toolu_01NRLabsLyVHZPKxbKvkfSMn".into(),
        name: "get_weather".into()
    }));
    let usage: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Usage(u) => Some(u.output_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(usage, [1, 65], "usage is cumulative, not summed");
}

#[tokio::test]
async fn streaming_yields_the_same_reply_as_completion() {
    let server = serve_sse(
        "/v1/messages",
        wire_bytes("anthropic/tool_use_response.sse"),
    )
    .await;
    let provider = AnthropicProvider::new(ApiKey::new("sk-ant-test"))
        .unwrap()
        .with_base_url(&server.uri())
        .unwrap();
    let request = CompletionRequest::new("claude-sonnet-4-5").message(Message::user("hi"));
    let mut assembler = ResponseAssembler::new();
    let mut stream = provider.stream(&request);
    while let Some(event) = stream.next().await {
        assembler.push(event.unwrap());
    }
    drop(stream);
    let streamed = assembler.finish().unwrap();
    assert_eq!(
        streamed,
        provider.tool_use_completion(&request).await.unwrap()
    );
}

#[test]
fn thinking_blocks_are_kept_with_their_signature() {
    let wire = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Let me think.\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBCgIYAhIM\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"opaque\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"ls\",\"input\":{}}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: some_future_event\ndata: {\"type\":\"some_future_event\"}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":9}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    let mut assembler = ResponseAssembler::new();
    for event in parse_in_chunks(wire.as_bytes(), 1000) {
        assembler.push(event);
    }
    let reply = assembler.finish().unwrap();
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::Thinking {
                thinking: "Let me think.".into(),
                signature: "EqQBCgIYAhIM".into()
            },
            ContentBlock::RedactedThinking {
                data: "opaque".into()
            },
            // A call with no input fragments has the empty object as its input.
            ContentBlock::tool_use("t", "ls", json!({})),
        ]
    );
}
