//! `ModelRouter`: each request goes to the provider registered for its model, on the wire
//! that provider speaks; everything else to the main provider, whose name, tool support and
//! model list the router answers with.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use futures::StreamExt;
use keel_provider::{
    AnthropicProvider, ApiKey, CompletionRequest, Message, ModelRouter, OpenAiProvider, Provider,
    StreamEvent,
};
use keel_test_support::mock::{request_bodies, serve_anthropic_replies, serve_openai_replies};
use keel_test_support::scripted::{ScriptedProvider, text_reply};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn anthropic(server: &MockServer) -> Arc<dyn Provider> {
    Arc::new(
        AnthropicProvider::new(ApiKey::new("sk-ant-test"))
            .unwrap()
            .with_base_url(&server.uri())
            .unwrap(),
    )
}

fn local(server: &MockServer) -> Arc<dyn Provider> {
    Arc::new(OpenAiProvider::new(&format!("{}/v1", server.uri()), None).unwrap())
}

fn request(model: &str) -> CompletionRequest {
    CompletionRequest::new(model).message(Message::user("Hi"))
}

#[tokio::test]
async fn each_model_reaches_its_own_server_on_its_own_wire() {
    let hosted = serve_anthropic_replies(&[text_reply("From Claude."), text_reply("Again.")]).await;
    let ollama = serve_openai_replies(&[text_reply("From qwen."), text_reply("Streamed.")]).await;
    let router = ModelRouter::new("anthropic", anthropic(&hosted)).route(
        " qwen3:8b ",
        "local",
        local(&ollama),
    );

    let small = router
        .tool_use_completion(&request("qwen3:8b"))
        .await
        .unwrap();
    assert_eq!(small.text(), "From qwen.");
    let main = router
        .tool_use_completion(&request("claude-sonnet-5-5"))
        .await
        .unwrap();
    assert_eq!(main.text(), "From Claude.");
    // Streaming is routed the same way.
    let events: Vec<_> = router.stream(&request("qwen3:8b")).collect().await;
    assert!(
        events.iter().any(
            |event| matches!(event, Ok(StreamEvent::TextDelta { text, .. }) if text == "Streamed.")
        ),
        "{events:?}"
    );
    // An unknown model goes to the main provider.
    let other = router
        .tool_use_completion(&request("qwen3:32b"))
        .await
        .unwrap();
    assert_eq!(other.text(), "Again.");

    let local_models: Vec<_> = request_bodies(&ollama)
        .await
        .iter()
        .map(|body| body["model"].clone())
        .collect();
    assert_eq!(local_models, ["qwen3:8b", "qwen3:8b"]);
    let hosted_models: Vec<_> = request_bodies(&hosted)
        .await
        .iter()
        .map(|body| body["model"].clone())
        .collect();
    assert_eq!(hosted_models, ["claude-sonnet-5-5", "qwen3:32b"]);
}

#[tokio::test]
async fn the_router_answers_as_its_main_provider_and_names_who_serves_a_model() {
    let hosted = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "data": [{"type": "model", "id": "claude-sonnet-5-5", "display_name": "Sonnet",
                      "created_at": "2026-09-01T00:00:00Z"}],
            "has_more": false,
        })))
        .mount(&hosted)
        .await;
    let ollama = MockServer::start().await;
    let router = ModelRouter::new("work-gateway", anthropic(&hosted))
        .route("qwen3:8b", "local", local(&ollama))
        .route("gpt-6-luna", "openai", local(&ollama))
        .route("gpt-6-luna", "cheap", local(&ollama));
    assert_eq!(router.name(), "anthropic");
    assert!(router.supports_tool_use());
    assert_eq!(router.served_by("qwen3:8b"), "local");
    assert_eq!(
        router.served_by("gpt-6-luna"),
        "cheap",
        "the later route wins"
    );
    assert_eq!(router.served_by("claude-sonnet-5-5"), "work-gateway");
    assert_eq!(
        router.routes().collect::<Vec<_>>(),
        [("qwen3:8b", "local"), ("gpt-6-luna", "cheap")]
    );
    // The model list is the main provider's.
    let listed = router.list_models().await.unwrap();
    assert!(listed.serves("claude-sonnet-5-5"));
    assert!(
        ollama.received_requests().await.unwrap().is_empty(),
        "the local server is never asked for its list"
    );
    // A provider that routes nothing serves every model under its own name.
    let plain = ScriptedProvider::new();
    assert_eq!(plain.served_by("anything"), plain.name());
    // Debug shows the routing, nothing else.
    let debug = format!("{router:?}");
    assert!(
        debug.contains("qwen3:8b") && debug.contains("work-gateway"),
        "{debug}"
    );
    assert!(!debug.contains("sk-ant-test"), "{debug}");
}

#[tokio::test]
async fn routers_nest_and_a_failing_route_fails_alone() {
    let hosted = serve_anthropic_replies(&[text_reply("Still here.")]).await;
    let down = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(serde_json::json!({
            "error": {"message": "model not found", "type": "invalid_request_error"}
        })))
        .mount(&down)
        .await;
    let inner =
        ModelRouter::new("anthropic", anthropic(&hosted)).route("qwen3:8b", "local", local(&down));
    let outer = ModelRouter::new("anthropic", Arc::new(inner));
    let failed = outer.tool_use_completion(&request("qwen3:8b")).await;
    assert!(failed.is_err(), "{failed:?}");
    let ok = outer
        .tool_use_completion(&request("claude-haiku-5-5"))
        .await
        .unwrap();
    assert_eq!(ok.text(), "Still here.");
}

#[tokio::test]
async fn the_served_window_is_asked_of_the_model_s_own_provider() {
    // The local server serves qwen3:8b with 8192 tokens (Ollama's `/api/show` with num_ctx).
    let local_server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/show"))
        .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "parameters": "num_ctx 8192",
            "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960},
        })))
        .mount(&local_server)
        .await;
    let hosted = MockServer::start().await;
    let router = ModelRouter::new("anthropic", anthropic(&hosted)).route(
        "qwen3:8b",
        "local",
        local(&local_server),
    );
    let served = router.served_context("qwen3:8b").await.unwrap();
    assert_eq!(served.tokens, 8192);
    // The main (hosted) provider is never probed.
    assert_eq!(router.served_context("claude-sonnet-4-5").await, None);
    assert!(hosted.received_requests().await.unwrap().is_empty());
}
