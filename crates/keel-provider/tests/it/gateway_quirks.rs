//! What OpenRouter and LiteLLM send on the Chat Completions wire beyond OpenAI's own shapes,
//! as their documentation shows it: SSE keep-alive comments, usage with cache writes and
//! cost, errors mid-stream with a numeric or textual status code, `finish_reason: "error"`,
//! tool-call fragments that repeat their id and type, and `stop` after tool calls.
//!
//! Sources: openrouter.ai/docs/api-reference/streaming (comments, errors during streaming),
//! /docs/use-cases/usage-accounting (usage), /docs/api-reference/errors (error shape);
//! docs.litellm.ai/docs/completion/prompt_caching (usage), LiteLLM's proxy error body
//! (`{"error": {"message", "type", "param", "code"}}` with the status as text).

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_provider::{
    ApiKey, CompletionRequest, ContentBlock, Message, OpenAiProvider, Provider, ProviderError,
    RetryPolicy, StopReason, ToolUseResponse, Usage,
};
use keel_test_support::mock::serve_sse;
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn complete(body: &str) -> Result<ToolUseResponse, ProviderError> {
    let server = serve_sse("/api/v1/chat/completions", body.to_owned()).await;
    let provider = OpenAiProvider::new(
        &format!("{}/api/v1", server.uri()),
        Some(ApiKey::new("sk-or-test")),
    )
    .unwrap()
    .with_retry_policy(RetryPolicy::none());
    let request =
        CompletionRequest::new("anthropic/claude-sonnet-4.5").message(Message::user("hi"));
    provider.tool_use_completion(&request).await
}

fn chunk(value: serde_json::Value) -> String {
    format!("data: {value}\n\n")
}

#[tokio::test]
async fn openrouter_comments_are_skipped_and_its_usage_is_split_three_ways() {
    let body = [
        ": OPENROUTER PROCESSING\n\n".to_owned(),
        chunk(json!({"id": "gen-1", "object": "chat.completion.chunk", "model": "anthropic/claude-sonnet-4.5",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": null}]})),
        ": OPENROUTER PROCESSING\n\n".to_owned(),
        chunk(json!({"id": "gen-1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop", "native_finish_reason": "end_turn"}]})),
        chunk(json!({"id": "gen-1", "object": "chat.completion.chunk", "choices": [],
            "usage": {"completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 0},
                "cost": 0.95, "cost_details": {"upstream_inference_cost": 19},
                "prompt_tokens": 194,
                "prompt_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 100, "audio_tokens": 0},
                "total_tokens": 196}})),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let reply = complete(&body).await.unwrap();
    assert_eq!(reply.content, [ContentBlock::text("Hello")]);
    assert_eq!(reply.stop_reason, StopReason::EndTurn);
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 94,
            output_tokens: 2,
            cache_creation_input_tokens: 100,
            cache_read_input_tokens: 0,
        }
    );
}

#[tokio::test]
async fn litellm_usage_for_an_anthropic_model_counts_cache_reads_and_writes_apart() {
    let usage = |usage: serde_json::Value| {
        [
            chunk(json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]})),
            chunk(json!({"id": "chatcmpl-1", "choices": [], "usage": usage})),
            "data: [DONE]\n\n".to_owned(),
        ]
        .concat()
    };
    let documented = usage(json!({
        "prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
        "prompt_tokens_details": {"cached_tokens": 1920},
        "completion_tokens_details": {"reasoning_tokens": 0},
        "cache_creation_input_tokens": 50
    }));
    assert_eq!(
        complete(&documented).await.unwrap().usage,
        Usage {
            input_tokens: 36,
            output_tokens: 300,
            cache_creation_input_tokens: 50,
            cache_read_input_tokens: 1920,
        }
    );
    // No details object, the Anthropic-style fields only; and counts a server did not
    // include in the prompt are capped, never wrapped.
    let bare = usage(json!({
        "prompt_tokens": 100, "completion_tokens": null, "prompt_tokens_details": null,
        "cache_read_input_tokens": 80, "cache_creation_input_tokens": 500
    }));
    assert_eq!(
        complete(&bare).await.unwrap().usage,
        Usage {
            input_tokens: 0,
            output_tokens: 0,
            cache_creation_input_tokens: 20,
            cache_read_input_tokens: 80,
        }
    );
}

#[tokio::test]
async fn litellm_tool_call_fragments_repeating_id_and_type_make_one_call() {
    let body = [
        chunk(json!({"id": "chatcmpl-2", "model": "claude-sonnet-4-5", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "toolu_01", "type": "function", "index": 0, "function": {"name": "read_file", "arguments": ""}}]}}]})),
        chunk(json!({"id": "chatcmpl-2", "choices": [{"index": 0, "delta": {
            "tool_calls": [{"id": null, "type": "function", "index": 0, "function": {"name": null, "arguments": "{\"path\": "}}]}}]})),
        chunk(json!({"id": "chatcmpl-2", "choices": [{"index": 0, "delta": {
            "tool_calls": [{"id": "toolu_01", "type": "function", "index": 0, "function": {"arguments": "\"a.rs\"}"}}]},
            "finish_reason": "tool_calls"}]})),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let reply = complete(&body).await.unwrap();
    assert_eq!(
        reply.content,
        [ContentBlock::tool_use(
            "toolu_01",
            "read_file",
            json!({"path": "a.rs"})
        )]
    );
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
}

#[tokio::test]
async fn stop_after_tool_calls_means_the_calls_are_wanted() {
    // Ollama and some gateways end a reply of tool calls with `stop`.
    let body = [
        chunk(json!({"id": "chatcmpl-3", "choices": [{"index": 0, "delta": {"role": "assistant",
            "tool_calls": [{"id": "call_1", "index": 0, "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]}}]})),
        chunk(json!({"id": "chatcmpl-3", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let reply = complete(&body).await.unwrap();
    assert_eq!(reply.stop_reason, StopReason::ToolUse);
    assert_eq!(reply.tool_calls().len(), 1);
}

/// What an error must be.
type Expected = fn(&ProviderError) -> bool;

#[tokio::test]
async fn errors_mid_stream_are_typed_by_their_code() {
    let started =
        chunk(json!({"id": "gen-4", "choices": [{"index": 0, "delta": {"content": "Partial"}}]}));
    let cases: Vec<(&str, String, Expected)> = vec![
        (
            "OpenRouter: an error object with a named code and finish_reason error",
            chunk(json!({"id": "gen-4", "object": "chat.completion.chunk",
                "error": {"code": "server_error", "message": "Provider disconnected unexpectedly"},
                "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}]})),
            |e| matches!(e, ProviderError::Server { message, .. } if message.contains("Provider disconnected")),
        ),
        (
            "OpenRouter: a numeric code is the status",
            chunk(json!({"error": {"code": 502, "message": "Your chosen model is down"}})),
            |e| matches!(e, ProviderError::Server { status: 502, .. }),
        ),
        (
            "OpenRouter: finish_reason error alone",
            chunk(
                json!({"id": "gen-4", "choices": [{"index": 0, "delta": {}, "finish_reason": "error"}]}),
            ),
            |e| matches!(e, ProviderError::Server { status: 502, .. }),
        ),
        (
            "LiteLLM: the status as text, type None",
            chunk(
                json!({"error": {"message": "litellm.RateLimitError: too many requests", "type": "None", "param": "None", "code": "429"}}),
            ),
            |e| matches!(e, ProviderError::RateLimited { message, .. } if message.contains("RateLimitError")),
        ),
        (
            "LiteLLM: an authentication failure",
            chunk(
                json!({"error": {"message": "Authentication Error, invalid key", "type": "auth_error", "param": "None", "code": "401"}}),
            ),
            |e| matches!(e, ProviderError::Auth { .. }),
        ),
    ];
    for (case, error, expected) in cases {
        let body = format!("{started}{error}");
        let err = complete(&body).await.unwrap_err();
        assert!(expected(&err), "{case}: {err:?}");
        assert!(
            err.is_retryable() == !matches!(err, ProviderError::Auth { .. }),
            "{case}: {err:?}"
        );
    }
}

#[tokio::test]
async fn openrouter_out_of_credits_is_one_clear_error_and_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(402).set_body_json(json!({
            "error": {"code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/credits",
                "metadata": {}}
        })))
        .mount(&server)
        .await;
    let provider = OpenAiProvider::new(
        &format!("{}/api/v1", server.uri()),
        Some(ApiKey::new("sk-or-test")),
    )
    .unwrap();
    let request = CompletionRequest::new("openai/gpt-5").message(Message::user("hi"));
    let err = provider.tool_use_completion(&request).await.unwrap_err();
    assert!(
        matches!(&err, ProviderError::InvalidRequest { message } if message.starts_with("Insufficient credits")),
        "{err:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}
