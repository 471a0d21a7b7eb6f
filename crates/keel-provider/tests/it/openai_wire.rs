//! The OpenAI-compatible back end against streams recorded from the real API, served
//! verbatim, and against the shapes compatible servers send.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_provider::{
    ApiKey, CompletionRequest, ContentBlock, Message, OpenAiProvider, OpenAiStreamParser, Provider,
    StopReason, StreamEvent, ToolUseResponse, Usage,
};
use keel_test_support::events::assemble;
use keel_test_support::mock::serve_sse;
use keel_test_support::wire::{wire_bytes, wire_files};
use serde_json::json;

async fn complete_body(body: Vec<u8>) -> ToolUseResponse {
    let server = serve_sse("/v1/chat/completions", body).await;
    let provider = OpenAiProvider::new(
        &format!("{}/v1", server.uri()),
        Some(ApiKey::new("sk-test")),
    )
    .unwrap();
    let request = CompletionRequest::new("gpt-4o").message(Message::user("hi"));
    provider.tool_use_completion(&request).await.unwrap()
}

async fn complete(recording: &str) -> ToolUseResponse {
    complete_body(wire_bytes(recording)).await
}

fn parse(bytes: &[u8], size: usize) -> Result<Vec<StreamEvent>, keel_provider::ProviderError> {
    let mut parser = OpenAiStreamParser::new();
    let mut events = Vec::new();
    for chunk in bytes.chunks(size) {
        parser.feed(chunk, &mut events)?;
    }
    parser.finish(&mut events)?;
    Ok(events)
}

#[tokio::test]
async fn single_tool_call() {
    let reply = complete("openai-chat/single_tool_call.sse").await;
    assert_eq!(
        reply.content,
        vec![ContentBlock::tool_use(
            "call_c91SqDXlYFuETYv8mUHzz6pp",
            "GetWeatherArgs",
            json!({"city": "Edinburgh", "country": "UK", "units": "c"})
        )]
    );
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 76,
            output_tokens: 24,
            ..Usage::default()
        }
    );
    assert_eq!(reply.model.as_deref(), Some("gpt-4o-2024-08-06"));
}

#[tokio::test]
async fn two_parallel_tool_calls() {
    let reply = complete("openai-chat/two_parallel_tool_calls.sse").await;
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::tool_use(
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                json!({"city": "Edinburgh", "country": "GB", "units": "c"})
            ),
            ContentBlock::tool_use(
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                json!({"ticker": "AAPL", "exchange": "NASDAQ"})
            ),
        ]
    );
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(reply.usage.input_tokens, 149);
    assert_eq!(reply.usage.output_tokens, 60);
}

#[tokio::test]
async fn finish_length() {
    let reply = complete("openai-chat/finish_length.sse").await;
    assert_eq!(reply.text(), "{\"");
    assert_eq!(reply.stop_reason, StopReason::MaxTokens);
    assert_eq!(reply.usage.input_tokens, 79);
    assert_eq!(reply.usage.output_tokens, 1);
}

#[test]
fn every_recording_parses_the_same_in_any_chunking() {
    let files = wire_files("openai-chat");
    assert!(files.len() >= 3, "recordings missing: {files:?}");
    for file in files {
        let bytes = wire_bytes(&file);
        let whole = parse(&bytes, bytes.len()).unwrap();
        assert!(
            matches!(whole.last(), Some(StreamEvent::MessageEnd { .. })),
            "{file}: no MessageEnd"
        );
        for size in [1, 2, 5, 64, 777] {
            assert_eq!(
                parse(&bytes, size).unwrap(),
                whole,
                "{file} in {size}-byte chunks"
            );
        }
    }
}

fn chunk(delta: serde_json::Value, finish: Option<&str>) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "x", "model": "llama3.1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    )
}

#[test]
fn whole_calls_in_one_delta_as_ollama_sends_them() {
    let body = [
        chunk(
            json!({"role": "assistant", "content": "", "tool_calls": [
                {"id": "call_a", "index": 0, "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}},
                {"id": "call_b", "index": 0, "type": "function", "function": {"name": "read_file", "arguments": {"path": "b.rs"}}}
            ]}),
            None,
        ),
        chunk(json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let reply = assemble(parse(body.as_bytes(), 4096).unwrap());
    assert_eq!(
        reply.content,
        vec![
            ContentBlock::tool_use("call_a", "read_file", json!({"path": "a.rs"})),
            ContentBlock::tool_use("call_b", "read_file", json!({"path": "b.rs"})),
        ]
    );
}

#[test]
fn a_call_cut_by_the_length_limit_is_invalid() {
    let body = [
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "write_file", "arguments": "{\"path\": \"a"}}]}),
            None,
        ),
        chunk(json!({}), Some("length")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let reply = assemble(parse(body.as_bytes(), 13).unwrap());
    assert_eq!(reply.stop_reason, StopReason::MaxTokens);
    let calls = reply.tool_calls();
    assert_eq!(calls.len(), 1);
    assert!(!calls[0].is_valid());
}

#[test]
fn text_reasoning_and_cached_usage() {
    let body = [
        chunk(json!({"role": "assistant", "reasoning_content": "hmm"}), None),
        chunk(json!({"content": "Hello"}), None),
        chunk(json!({"content": " world"}), Some("stop")),
        format!(
            "data: {}\n\n",
            json!({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 60}}})
        ),
    ]
    .concat();
    // No [DONE]: a finish_reason followed by the end of the body is a whole reply.
    let reply = assemble(parse(body.as_bytes(), 9).unwrap());
    assert_eq!(reply.text(), "Hello world");
    assert_eq!(
        reply.content[0],
        ContentBlock::Thinking {
            thinking: "hmm".into(),
            signature: String::new()
        }
    );
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 40,
            output_tokens: 7,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 60,
        }
    );
}

#[test]
fn content_filter_is_a_refusal_and_a_body_without_finish_is_an_error() {
    let filtered = [chunk(json!({"content": "I"}), Some("content_filter"))].concat();
    let reply = assemble(parse(filtered.as_bytes(), 100).unwrap());
    assert_eq!(reply.stop_reason, StopReason::Refusal);

    let cut = chunk(json!({"content": "I"}), None);
    let err = parse(cut.as_bytes(), 100).unwrap_err();
    assert!(
        matches!(err, keel_provider::ProviderError::Stream { .. }),
        "{err:?}"
    );
}

#[test]
fn an_error_chunk_is_an_error() {
    let body = "data: {\"error\":{\"message\":\"model overloaded\",\"type\":\"server_error\"}}\n\n";
    let err = parse(body.as_bytes(), 100).unwrap_err();
    assert!(
        matches!(err, keel_provider::ProviderError::Server { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn keyless_local_servers_work() {
    let server = serve_sse(
        "/v1/chat/completions",
        wire_bytes("openai-chat/finish_length.sse"),
    )
    .await;
    let provider = OpenAiProvider::new(&format!("{}/v1", server.uri()), None).unwrap();
    let request = CompletionRequest::new("llama3.1").message(Message::user("hi"));
    provider.tool_use_completion(&request).await.unwrap();
    let received = server.received_requests().await.unwrap();
    assert!(received[0].headers.get("authorization").is_none());
}
