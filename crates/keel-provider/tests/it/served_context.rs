//! `Provider::served_context`: the window a local server serves a model with, asked of
//! loopback servers speaking each server's documented shape, and bounded against hostile ones
//! (garbage, a huge answer, a server that never answers): no panic, no number invented.
//!
//! The shapes are the documented ones:
//! - Ollama: docs/api.md "Show Model Information" and docs/openapi.yaml `ShowResponse`
//!   (`parameters: "temperature 0.7\nnum_ctx 2048"`, `model_info` with
//!   `gemma4.context_length: 131072`), `PsResponse` (`context_length: 4096`).
//! - llama.cpp: tools/server/README.md "GET /props" (`default_generation_settings.n_ctx`).
//! - vLLM: vllm/entrypoints/openai/models/serving.py `show_available_models` (each base
//!   model's card with `max_model_len`).

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use keel_provider::{
    AnthropicProvider, ApiKey, ContextSource, MAX_SERVED_CONTEXT_BODY, OpenAiProvider, Provider,
    ServedContext,
};
use serde_json::{Value, json};
use wiremock::matchers::{body_json, header, method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Ollama's documented `/api/show` answer for gemma4, with `parameters` as given.
fn ollama_show(parameters: &str) -> Value {
    json!({
        "parameters": parameters,
        "license": "Gemma Terms of Use \n\nLast modified: February 21, 2024...",
        "capabilities": ["completion", "vision"],
        "modified_at": "2025-08-14T15:49:43.634137516-07:00",
        "details": {
            "parent_model": "", "format": "gguf", "family": "gemma4", "families": ["gemma4"],
            "parameter_size": "8.0B", "quantization_level": "Q4_K_M"
        },
        "model_info": {
            "gemma4.attention.head_count": 8,
            "gemma4.block_count": 42,
            "gemma4.context_length": 131072,
            "gemma4.embedding_length": 2560,
            "general.architecture": "gemma4",
            "general.file_type": 15,
            "general.quantization_version": 2
        }
    })
}

/// Ollama's documented `/api/ps` answer: gemma4 loaded with a 4,096-token context.
fn ollama_ps() -> Value {
    json!({"models": [{
        "name": "gemma4", "model": "gemma4", "size": 6591830464_u64,
        "digest": "c6eb396dbd5992bbe3f5cdb947e8bbc0ee413d7c17e2beaae69f5d569cf982eb",
        "details": {"parent_model": "", "format": "gguf", "family": "gemma4",
                    "families": ["gemma4"], "parameter_size": "8.0B",
                    "quantization_level": "Q4_K_M"},
        "expires_at": "2025-10-17T16:47:07.93355-07:00",
        "size_vram": 5333539264_u64,
        "context_length": 4096
    }]})
}

fn provider(server: &MockServer) -> OpenAiProvider {
    OpenAiProvider::new(&format!("{}/v1", server.uri()), None).unwrap()
}

async fn show(server: &MockServer, model: &str, answer: ResponseTemplate) {
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .and(body_json(json!({"model": model})))
        .respond_with(answer)
        .expect(1)
        .mount(server)
        .await;
}

#[tokio::test]
async fn ollama_s_num_ctx_is_what_it_serves() {
    let server = MockServer::start().await;
    show(
        &server,
        "gemma4",
        ResponseTemplate::new(200).set_body_json(ollama_show("temperature 0.7\nnum_ctx 2048")),
    )
    .await;
    let served = provider(&server).served_context("gemma4").await;
    assert_eq!(
        served,
        Some(ServedContext {
            tokens: 2048,
            source: ContextSource::OllamaNumCtx
        })
    );
}

#[tokio::test]
async fn ollama_never_serves_more_than_the_model_was_trained_for() {
    let server = MockServer::start().await;
    show(
        &server,
        "gemma4",
        ResponseTemplate::new(200).set_body_json(ollama_show("num_ctx 1000000")),
    )
    .await;
    let served = provider(&server).served_context("gemma4").await.unwrap();
    assert_eq!(served.tokens, 131072);
}

#[tokio::test]
async fn without_num_ctx_a_loaded_model_s_context_counts_else_its_trained_length() {
    let server = MockServer::start().await;
    show(
        &server,
        "gemma4:latest",
        ResponseTemplate::new(200).set_body_json(ollama_show("temperature 0.7")),
    )
    .await;
    Mock::given(method("GET"))
        .and(path("/api/ps"))
        .respond_with(ResponseTemplate::new(200).set_body_json(ollama_ps()))
        .expect(1)
        .mount(&server)
        .await;
    let served = provider(&server).served_context("gemma4:latest").await;
    assert_eq!(
        served,
        Some(ServedContext {
            tokens: 4096,
            source: ContextSource::OllamaLoaded
        })
    );

    // Not loaded: only the trained length is known, the most Ollama can serve.
    let server = MockServer::start().await;
    show(
        &server,
        "qwen3:8b",
        ResponseTemplate::new(200).set_body_json(ollama_show("")),
    )
    .await;
    Mock::given(method("GET"))
        .and(path("/api/ps"))
        .respond_with(ResponseTemplate::new(200).set_body_json(ollama_ps()))
        .mount(&server)
        .await;
    let served = provider(&server).served_context("qwen3:8b").await;
    assert_eq!(
        served,
        Some(ServedContext {
            tokens: 131072,
            source: ContextSource::OllamaTrained
        })
    );
}

#[tokio::test]
async fn llama_cpp_s_slot_context_is_read_from_props() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/props"))
        .and(query_param("model", "qwen3-8b"))
        .and(query_param("autoload", "false"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "default_generation_settings": {
                "id": 0, "id_task": -1, "n_ctx": 1024, "speculative": false,
                "is_processing": false, "params": {"n_predict": -1, "temperature": 0.8}
            },
            "total_slots": 1,
            "model_path": "../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
            "chat_template": "...",
            "modalities": {"vision": false},
            "build_info": "b(build number)-(build commit hash)"
        })))
        .expect(1)
        .mount(&server)
        .await;
    let served = provider(&server).served_context("qwen3-8b").await;
    assert_eq!(
        served,
        Some(ServedContext {
            tokens: 1024,
            source: ContextSource::LlamaCpp
        })
    );
}

#[tokio::test]
async fn vllm_s_max_model_len_is_read_from_the_listing_with_the_key() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("authorization", "Bearer local-vllm-key-123"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [
                {"id": "Qwen/Qwen3-8B", "object": "model", "created": 1735142223,
                 "owned_by": "vllm", "root": "Qwen/Qwen3-8B", "parent": null,
                 "max_model_len": 8192, "permission": [{}]},
                {"id": "my-lora", "object": "model", "owned_by": "vllm",
                 "root": "/loras/mine", "parent": "Qwen/Qwen3-8B", "permission": [{}]}
            ]
        })))
        .expect(2)
        .mount(&server)
        .await;
    let provider = OpenAiProvider::new(
        &format!("{}/v1", server.uri()),
        Some(ApiKey::new("local-vllm-key-123")),
    )
    .unwrap();
    assert_eq!(
        provider.served_context("Qwen/Qwen3-8B").await,
        Some(ServedContext {
            tokens: 8192,
            source: ContextSource::Vllm
        })
    );
    // An adapter's card carries no length: unknown, not guessed.
    assert_eq!(provider.served_context("my-lora").await, None);
}

#[tokio::test]
async fn hostile_servers_give_no_number() {
    // Garbage with a success status on every endpoint.
    let garbage = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(b"\x00\xff<html>{\"n_ctx\":".to_vec(), "text/html"),
        )
        .mount(&garbage)
        .await;
    assert_eq!(provider(&garbage).served_context("m").await, None);

    // A huge answer in the right shape: read up to the cap, then given up.
    let huge = MockServer::start().await;
    let padding = "x".repeat(MAX_SERVED_CONTEXT_BODY);
    let mut answer = ollama_show("num_ctx 2048");
    answer["license"] = Value::String(padding);
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer))
        .mount(&huge)
        .await;
    assert_eq!(provider(&huge).served_context("gemma4").await, None);

    // Errors everywhere: nothing.
    let failing = MockServer::start().await;
    Mock::given(wiremock::matchers::any())
        .respond_with(ResponseTemplate::new(500).set_body_string("boom"))
        .mount(&failing)
        .await;
    assert_eq!(provider(&failing).served_context("m").await, None);

    // Numbers that are not windows.
    let silly = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/props"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"default_generation_settings": {"n_ctx": -4096}})),
        )
        .mount(&silly)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"id": "m", "max_model_len": 0}]})),
        )
        .mount(&silly)
        .await;
    assert_eq!(provider(&silly).served_context("m").await, None);
}

#[tokio::test]
async fn a_server_that_takes_its_time_is_not_waited_for() {
    // A correct answer, 20 s late: the probe has given up long before (its limit is 1 s).
    let slow = MockServer::start().await;
    show(
        &slow,
        "gemma4",
        ResponseTemplate::new(200)
            .set_body_json(ollama_show("num_ctx 2048"))
            .set_delay(Duration::from_secs(20)),
    )
    .await;
    let asked = tokio::time::timeout(
        Duration::from_secs(10),
        provider(&slow).served_context("gemma4"),
    )
    .await;
    assert_eq!(asked, Ok(None));
}

#[tokio::test]
async fn a_hosted_api_is_never_asked() {
    // Anthropic's back end has no such question: the default answer.
    let server = MockServer::start().await;
    let anthropic = AnthropicProvider::new(ApiKey::new("sk-ant-x"))
        .unwrap()
        .with_base_url(&server.uri())
        .unwrap();
    assert_eq!(anthropic.served_context("claude-sonnet-4-5").await, None);
    assert!(server.received_requests().await.unwrap().is_empty());
}
