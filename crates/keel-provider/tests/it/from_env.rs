//! Provider detection and building: `ProviderConfig::detect_with` / `build_with` with a
//! variable lookup given by the test, so no test touches the process environment.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::time::Duration;

use keel_provider::{
    CompletionRequest, Message, NO_PROVIDER, ProviderConfig, ProviderError, ProviderKind,
    ToolUseResponse,
};
use keel_test_support::mock::{serve_anthropic_replies, serve_openai_replies};

/// A lookup over `vars` only.
fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}

fn config_message(err: ProviderError) -> String {
    match err {
        ProviderError::Config { message } => message,
        other => panic!("expected a configuration error, got {other:?}"),
    }
}

fn detected(pairs: &[(&str, &str)]) -> Result<ProviderKind, String> {
    ProviderConfig::detect_with(vars(pairs))
        .map(|config| config.kind)
        .map_err(config_message)
}

fn build_error(config: &ProviderConfig, pairs: &[(&str, &str)]) -> String {
    config_message(config.build_with(vars(pairs)).unwrap_err())
}

fn reply(text: &str) -> ToolUseResponse {
    ToolUseResponse {
        content: vec![keel_provider::ContentBlock::Text { text: text.into() }],
        stop_reason: keel_provider::StopReason::EndTurn,
        usage: keel_provider::Usage::default(),
        model: None,
    }
}

#[test]
fn anthropic_key_wins_then_openai_base_url_or_key() {
    assert_eq!(
        detected(&[("ANTHROPIC_API_KEY", "sk-ant"), ("OPENAI_API_KEY", "sk")]),
        Ok(ProviderKind::Anthropic)
    );
    assert_eq!(
        detected(&[("OPENAI_BASE_URL", "http://localhost:11434/v1")]),
        Ok(ProviderKind::OpenAi)
    );
    assert_eq!(
        detected(&[("OPENAI_API_KEY", "sk")]),
        Ok(ProviderKind::OpenAi)
    );
    assert_eq!(
        detected(&[("KEEL_PROVIDER", "openai"), ("ANTHROPIC_API_KEY", "sk-ant")]),
        Ok(ProviderKind::OpenAi)
    );
}

#[test]
fn nothing_set_or_only_blanks_is_the_no_provider_message() {
    assert_eq!(detected(&[]), Err(NO_PROVIDER.to_owned()));
    assert_eq!(
        detected(&[("ANTHROPIC_API_KEY", "  "), ("OPENAI_BASE_URL", "")]),
        Err(NO_PROVIDER.to_owned())
    );
    assert_eq!(
        NO_PROVIDER,
        "no model provider configured: set ANTHROPIC_API_KEY, or OPENAI_BASE_URL for a local \
         server"
    );
}

#[test]
fn an_unknown_keel_provider_is_named() {
    assert_eq!(
        detected(&[("KEEL_PROVIDER", "gemini"), ("ANTHROPIC_API_KEY", "sk-ant")]),
        Err("unknown provider `gemini` in KEEL_PROVIDER: use one of anthropic, openai, openai-responses".to_owned())
    );
}

#[test]
fn kinds_know_their_names_variables_and_models() {
    for kind in [ProviderKind::Anthropic, ProviderKind::OpenAi] {
        assert_eq!(ProviderKind::from_name(kind.name()), Some(kind));
        let json = serde_json::to_string(&kind).unwrap();
        assert_eq!(json, format!("\"{}\"", kind.name()));
        assert_eq!(serde_json::from_str::<ProviderKind>(&json).unwrap(), kind);
    }
    assert_eq!(ProviderKind::Anthropic.default_model(), "claude-sonnet-4-5");
    assert_eq!(ProviderKind::OpenAi.default_model(), "gpt-4.1");
    assert_eq!(ProviderKind::Anthropic.key_var(), "ANTHROPIC_API_KEY");
    assert_eq!(ProviderKind::OpenAi.base_url_var(), "OPENAI_BASE_URL");
    assert_eq!(ProviderKind::from_name("Anthropic"), None);
}

#[test]
fn anthropic_needs_a_key_from_its_variable() {
    let config = ProviderConfig::new(ProviderKind::Anthropic);
    assert_eq!(
        build_error(&config, &[("OPENAI_API_KEY", "sk")]),
        "provider `anthropic` needs an API key: set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN \
         for a gateway's bearer token)"
    );
    let custom = ProviderConfig {
        name: Some("work".into()),
        api_key_env: Some("WORK_KEY".into()),
        ..ProviderConfig::new(ProviderKind::Anthropic)
    };
    assert_eq!(
        build_error(&custom, &[("ANTHROPIC_API_KEY", "sk-ant")]),
        "provider `work` needs an API key: set WORK_KEY"
    );
    let built = custom.build_with(vars(&[("WORK_KEY", "sk-work")])).unwrap();
    assert_eq!(built.key_var, "WORK_KEY");
    assert_eq!(built.name, "work");
    assert_eq!(built.base_url, "https://api.anthropic.com");
}

#[test]
fn openai_needs_a_key_only_for_api_openai_com() {
    let config = ProviderConfig::new(ProviderKind::OpenAi);
    assert_eq!(
        build_error(&config, &[]),
        "provider `openai` needs an API key for api.openai.com: set OPENAI_API_KEY, or \
         OPENAI_BASE_URL for a local server"
    );
    let local = config
        .build_with(vars(&[("OPENAI_BASE_URL", "http://localhost:11434/v1")]))
        .unwrap();
    assert_eq!(local.base_url, "http://localhost:11434/v1");
    assert_eq!(local.kind, ProviderKind::OpenAi);
    let public = config
        .build_with(vars(&[("OPENAI_API_KEY", "sk")]))
        .unwrap();
    assert_eq!(public.base_url, "https://api.openai.com/v1");
}

#[test]
fn a_configured_base_url_wins_over_the_variable_and_a_bad_one_is_named() {
    let config = ProviderConfig {
        base_url: Some("http://127.0.0.1:9/v1".into()),
        ..ProviderConfig::new(ProviderKind::OpenAi)
    };
    let built = config
        .build_with(vars(&[("OPENAI_BASE_URL", "http://elsewhere/v1")]))
        .unwrap();
    assert_eq!(built.base_url, "http://127.0.0.1:9/v1");

    let bad = ProviderConfig {
        base_url: Some("localhost:11434".into()),
        ..ProviderConfig::new(ProviderKind::Anthropic)
    };
    let message = build_error(&bad, &[("ANTHROPIC_API_KEY", "sk-ant")]);
    assert!(
        message.starts_with("bad base URL `localhost:11434` for provider `anthropic`: ")
            && message.ends_with("; give one like https://host/v1"),
        "{message}"
    );
}

#[test]
fn a_config_value_reads_back_from_json() {
    let config: ProviderConfig = serde_json::from_value(serde_json::json!({
        "kind": "openai",
        "base_url": "http://localhost:8080/v1",
        "idle_timeout": {"secs": 5, "nanos": 0}
    }))
    .unwrap();
    assert_eq!(config.kind, ProviderKind::OpenAi);
    assert_eq!(config.idle_timeout, Some(Duration::from_secs(5)));
    assert_eq!(config.key_var(), "OPENAI_API_KEY");
}

#[tokio::test]
async fn the_built_anthropic_provider_sends_the_key_to_the_variables_base_url() {
    let server = serve_anthropic_replies(&[reply("hello")]).await;
    let uri = server.uri();
    let built = ProviderConfig::detect_with(vars(&[("ANTHROPIC_API_KEY", "sk-ant-from-env")]))
        .unwrap()
        .build_with(vars(&[
            ("ANTHROPIC_API_KEY", " sk-ant-from-env "),
            ("ANTHROPIC_BASE_URL", &uri),
        ]))
        .unwrap();
    assert_eq!(built.provider.name(), "anthropic");
    let request = CompletionRequest::new("claude-sonnet-4-5").message(Message::user("Hi"));
    let answer = built.provider.tool_use_completion(&request).await.unwrap();
    assert_eq!(answer.text(), "hello");
    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].headers.get("x-api-key").unwrap(),
        "sk-ant-from-env"
    );
}

#[tokio::test]
async fn the_built_openai_provider_talks_to_a_local_server_without_a_key() {
    let server = serve_openai_replies(&[reply("local")]).await;
    let built = ProviderConfig::new(ProviderKind::OpenAi)
        .build_with(vars(&[(
            "OPENAI_BASE_URL",
            &format!("{}/v1", server.uri()),
        )]))
        .unwrap();
    let request = CompletionRequest::new("qwen3:8b").message(Message::user("Hi"));
    let answer = built.provider.tool_use_completion(&request).await.unwrap();
    assert_eq!(answer.text(), "local");
    let received = server.received_requests().await.unwrap();
    assert!(received[0].headers.get("authorization").is_none());
}
