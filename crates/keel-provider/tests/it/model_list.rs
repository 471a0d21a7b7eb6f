//! `Provider::list_models` against loopback servers in each API's shape: paging, headers,
//! bounds on time, size and pages, errors with the key scrubbed, and no retries.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use keel_provider::{
    AnthropicProvider, ApiKey, MAX_MODEL_LIST_BODY, OpenAiProvider, Provider, ProviderError,
};
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;
use wiremock::matchers::{header, method, path, query_param, query_param_is_missing};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-ant-api03-SECRET-KEY-1234567890";

fn anthropic(base: &str) -> AnthropicProvider {
    AnthropicProvider::new(ApiKey::new(KEY))
        .unwrap()
        .with_base_url(base)
        .unwrap()
}

/// A page in Anthropic's shape.
fn anthropic_page(ids: &[&str], has_more: bool) -> serde_json::Value {
    let data: Vec<_> = ids
        .iter()
        .map(|id| {
            json!({"type": "model", "id": id, "display_name": id, "created_at": "2026-02-04T00:00:00Z"})
        })
        .collect();
    json!({"data": data, "has_more": has_more, "first_id": ids.first(), "last_id": ids.last()})
}

#[tokio::test]
async fn anthropic_lists_every_page_with_its_headers() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("x-api-key", KEY))
        .and(header("anthropic-version", "2023-06-01"))
        .and(query_param("limit", "1000"))
        .and(query_param_is_missing("after_id"))
        .respond_with(ResponseTemplate::new(200).set_body_json(anthropic_page(
            &["claude-opus-4-6", "claude-sonnet-4-5-20250929"],
            true,
        )))
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(query_param("after_id", "claude-sonnet-4-5-20250929"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(anthropic_page(&["claude-3-5-haiku-20241022"], false)),
        )
        .expect(1)
        .mount(&server)
        .await;

    let list = anthropic(&server.uri()).list_models().await.unwrap();
    assert_eq!(
        list.ids(),
        [
            "claude-opus-4-6",
            "claude-sonnet-4-5-20250929",
            "claude-3-5-haiku-20241022"
        ]
    );
    assert!(list.serves("claude-sonnet-4-5"));
    assert!(list.serves("claude-3-5-haiku"));
    assert!(!list.serves("gpt-nonsense-9"));
}

#[tokio::test]
async fn a_base_url_with_a_path_keeps_it() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/anthropic/v1/models"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(anthropic_page(&["MiniMax-M3"], false)),
        )
        .expect(1)
        .mount(&server)
        .await;
    let provider = anthropic(&format!("{}/anthropic/v1", server.uri()));
    assert_eq!(provider.list_models().await.unwrap().ids(), ["MiniMax-M3"]);
}

#[tokio::test]
async fn openai_compatible_servers_list_beside_chat_completions() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .and(header("authorization", "Bearer sk-proj-KEY"))
        .and(query_param_is_missing("limit"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": [
                {"id": "gpt-4o", "object": "model", "created": 1715367049, "owned_by": "system"},
                {"id": "qwen3:8b", "object": "model", "created": 1715367050, "owned_by": "library"}
            ]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let provider = OpenAiProvider::new(
        &format!("{}/v1", server.uri()),
        Some(ApiKey::new("sk-proj-KEY")),
    )
    .unwrap();
    let list = provider.list_models().await.unwrap();
    assert_eq!(list.ids(), ["gpt-4o", "qwen3:8b"]);
    assert_eq!(list.len(), 2);
}

#[tokio::test]
async fn a_refusal_is_the_error_it_means_with_the_key_scrubbed_and_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({
            "type": "error",
            "error": {"type": "authentication_error", "message": format!("invalid x-api-key {KEY}")}
        })))
        .expect(1)
        .mount(&server)
        .await;
    let error = anthropic(&server.uri()).list_models().await.unwrap_err();
    assert!(matches!(error, ProviderError::Auth { .. }), "{error:?}");
    assert!(!error.to_string().contains("SECRET"), "{error}");

    let busy = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(529).set_body_json(json!({
            "type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}
        })))
        .expect(1)
        .mount(&busy)
        .await;
    let error = anthropic(&busy.uri()).list_models().await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Overloaded { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_slow_listing_ends_at_the_idle_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(anthropic_page(&["claude-opus-4-6"], false))
                .set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
    let provider = anthropic(&server.uri()).with_idle_timeout(Duration::from_millis(200));
    let error = provider.list_models().await.unwrap_err();
    assert!(matches!(error, ProviderError::Timeout { .. }), "{error:?}");
}

#[tokio::test]
async fn hostile_listings_are_bounded() {
    // A cursor that never ends: ten pages, then the ids gathered so far.
    let endless = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(anthropic_page(&["claude-opus-4-6"], true)),
        )
        .expect(10)
        .mount(&endless)
        .await;
    let list = anthropic(&endless.uri()).list_models().await.unwrap();
    assert_eq!(list.len(), 10);

    // A page longer than the cap is refused.
    let huge = MockServer::start().await;
    let padding = "x".repeat(MAX_MODEL_LIST_BODY);
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"data": [{"id": padding}], "has_more": false})),
        )
        .mount(&huge)
        .await;
    let error = anthropic(&huge.uri()).list_models().await.unwrap_err();
    assert!(
        matches!(&error, ProviderError::Stream { message } if message.contains("longer than 8 MiB")),
        "{error:?}"
    );

    // Not a listing at all: a login page from a proxy, or ids that are not strings.
    for body in [
        "<html>sign in</html>",
        r#"{"data": [{"id": 7}]}"#,
        r#"{"data": null}"#,
    ] {
        let odd = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_string(body))
            .mount(&odd)
            .await;
        let error = anthropic(&odd.uri()).list_models().await.unwrap_err();
        assert!(
            matches!(&error, ProviderError::Stream { message } if message.contains("model list")),
            "{body}: {error:?}"
        );
    }
}

#[tokio::test]
async fn a_provider_without_a_listing_says_so() {
    let error = ScriptedProvider::new().list_models().await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Unsupported { .. }),
        "{error:?}"
    );
    assert_eq!(error.to_string(), "scripted has no model list");
}
