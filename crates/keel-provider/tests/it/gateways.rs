//! Gateways (LiteLLM, OpenRouter, corporate proxies): Claude Code's `ANTHROPIC_AUTH_TOKEN`
//! (a bearer token) and `ANTHROPIC_CUSTOM_HEADERS`, a provider's `headers` with `${VAR}`
//! values, and Codex's `env_key`; the secrets never in errors or `Debug`.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashMap};

use keel_provider::{
    CompletionRequest, Message, ProviderConfig, ProviderError, ProviderKind, ToolUseResponse,
};
use keel_test_support::mock::{serve_anthropic_replies, serve_openai_replies};

fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn reply(text: &str) -> ToolUseResponse {
    ToolUseResponse {
        content: vec![keel_provider::ContentBlock::Text { text: text.into() }],
        stop_reason: keel_provider::StopReason::EndTurn,
        usage: keel_provider::Usage::default(),
        model: None,
    }
}

fn request() -> CompletionRequest {
    CompletionRequest::new("claude-sonnet-4-5").message(Message::user("Hi"))
}

#[tokio::test]
async fn an_auth_token_is_sent_as_a_bearer_token_and_custom_headers_ride_along() {
    let server = serve_anthropic_replies(&[reply("via gateway")]).await;
    let uri = server.uri();
    let env = [
        ("ANTHROPIC_AUTH_TOKEN", "gw-token-0123456789"),
        ("ANTHROPIC_BASE_URL", uri.as_str()),
        (
            "ANTHROPIC_CUSTOM_HEADERS",
            "X-Team: platform\nX-Route-Key: route-secret-42\n",
        ),
    ];
    // The token alone picks Anthropic, as in Claude Code.
    let config = ProviderConfig::detect_with(vars(&env)).unwrap();
    assert_eq!(config.kind, ProviderKind::Anthropic);
    let built = config.build_with(vars(&env)).unwrap();
    assert_eq!(built.key_var, "ANTHROPIC_AUTH_TOKEN");
    assert_eq!(built.secret_vars, ["ANTHROPIC_CUSTOM_HEADERS"]);
    let answer = built
        .provider
        .tool_use_completion(&request())
        .await
        .unwrap();
    assert_eq!(answer.text(), "via gateway");
    let received = server.received_requests().await.unwrap();
    let headers = &received[0].headers;
    assert_eq!(
        headers.get("authorization").unwrap(),
        "Bearer gw-token-0123456789"
    );
    assert!(headers.get("x-api-key").is_none());
    assert_eq!(headers.get("x-team").unwrap(), "platform");
    assert_eq!(headers.get("x-route-key").unwrap(), "route-secret-42");
    assert!(
        headers
            .get("user-agent")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("keel/")
    );
    let shown = format!("{built:?}");
    assert!(
        !shown.contains("gw-token") && !shown.contains("route-secret"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_provider_s_headers_read_their_values_from_the_environment() {
    let server = serve_openai_replies(&[reply("ok")]).await;
    let config: ProviderConfig = serde_json::from_value(serde_json::json!({
        "kind": "openai",
        "base_url": format!("{}/v1", server.uri()),
        "env_key": "ROUTER_KEY",
        "headers": {"HTTP-Referer": "https://example.org", "X-Org": "org-${ORG_ID}"}
    }))
    .unwrap();
    assert_eq!(config.api_key_env.as_deref(), Some("ROUTER_KEY"));
    let env = [("ROUTER_KEY", "or-key-0123456789"), ("ORG_ID", "777")];
    let built = config.build_with(vars(&env)).unwrap();
    assert_eq!(built.key_var, "ROUTER_KEY");
    assert_eq!(built.secret_vars, ["ORG_ID"]);
    built
        .provider
        .tool_use_completion(&request())
        .await
        .unwrap();
    let received = server.received_requests().await.unwrap();
    let headers = &received[0].headers;
    assert_eq!(headers.get("x-org").unwrap(), "org-777");
    assert_eq!(headers.get("http-referer").unwrap(), "https://example.org");
    assert_eq!(
        headers.get("authorization").unwrap(),
        "Bearer or-key-0123456789"
    );
}

#[test]
fn an_unset_header_variable_or_a_bad_header_is_named_without_its_value() {
    let config = ProviderConfig {
        name: Some("router".into()),
        headers: BTreeMap::from([("X-Org".to_owned(), "${ORG_ID}".to_owned())]),
        ..ProviderConfig::new(ProviderKind::OpenAi)
    };
    let error = config
        .build_with(vars(&[("OPENAI_BASE_URL", "http://localhost:1/v1")]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("X-Org") && error.contains("ORG_ID"),
        "{error}"
    );
    let bad = ProviderConfig {
        headers: BTreeMap::from([("X-Org".to_owned(), "line\nbreak-secret".to_owned())]),
        ..ProviderConfig::new(ProviderKind::OpenAi)
    };
    let error = bad
        .build_with(vars(&[("OPENAI_BASE_URL", "http://localhost:1/v1")]))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("X-Org") && !error.contains("break-secret"),
        "{error}"
    );
    let custom = ProviderConfig::new(ProviderKind::Anthropic)
        .build_with(vars(&[
            ("ANTHROPIC_API_KEY", "sk-ant-x"),
            ("ANTHROPIC_CUSTOM_HEADERS", "no colon here"),
        ]))
        .unwrap_err();
    assert!(matches!(custom, ProviderError::Config { .. }));
    assert!(custom.to_string().contains("ANTHROPIC_CUSTOM_HEADERS"));
}

#[tokio::test]
async fn a_header_value_a_server_echoes_is_removed_from_the_error() {
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(
            wiremock::ResponseTemplate::new(400).set_body_string(
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad route route-secret-42"}}"#,
            ),
        )
        .mount(&server)
        .await;
    let uri = server.uri();
    let built = ProviderConfig::new(ProviderKind::Anthropic)
        .build_with(vars(&[
            ("ANTHROPIC_API_KEY", "sk-ant-x0123456789"),
            ("ANTHROPIC_BASE_URL", uri.as_str()),
            ("ANTHROPIC_CUSTOM_HEADERS", "X-Route-Key: route-secret-42"),
        ]))
        .unwrap();
    let error = built
        .provider
        .tool_use_completion(&request())
        .await
        .unwrap_err()
        .to_string();
    assert!(!error.contains("route-secret-42"), "{error}");
    assert!(error.contains("bad route"), "{error}");
}
