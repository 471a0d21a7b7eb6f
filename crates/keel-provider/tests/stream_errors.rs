//! Error events inside a stream that began with HTTP 200 (Anthropic's `event: error`, OpenAI's
//! error chunks) whose message echoes the API key: the key is scrubbed before the error
//! becomes a retry event or the error that ends the call, on both back ends.
//!
//! No real capture of a stream error event exists (see `../shared/wire/README.md`), so the
//! events are written in the shapes the providers document.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use futures::StreamExt;
use keel_provider::{
    AnthropicProvider, ApiKey, CompletionRequest, Message, OpenAiProvider, Provider, ProviderError,
    RetryPolicy, StreamEvent,
};
use keel_test_support::raw_http::{Ending, RawHttpServer, RawResponse};
use keel_test_support::wire::wire_bytes;

const KEY: &str = "sk-ant-api03-SECRET-KEY-1234567890abcdef";

/// One retry, with millisecond backoff.
fn one_retry() -> RetryPolicy {
    RetryPolicy::default()
        .with_max_retries(1)
        .with_backoff(Duration::from_millis(5), Duration::from_millis(10))
}

fn anthropic(server: &RawHttpServer) -> AnthropicProvider {
    AnthropicProvider::new(ApiKey::new(KEY))
        .unwrap()
        .with_base_url(&server.url())
        .unwrap()
        .with_retry_policy(one_retry())
}

fn openai(server: &RawHttpServer) -> OpenAiProvider {
    OpenAiProvider::new(&format!("{}/v1", server.url()), Some(ApiKey::new(KEY)))
        .unwrap()
        .with_retry_policy(one_retry())
}

/// Runs the stream to its end: the events and the error it ended with, if any.
async fn drain(provider: &dyn Provider) -> (Vec<StreamEvent>, Option<ProviderError>) {
    let request = CompletionRequest::new("m").message(Message::user("hi"));
    let mut stream = provider.stream(&request);
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(error) => return (events, Some(error)),
        }
    }
    (events, None)
}

/// Every error the call reported: those in retry events, then the final one.
fn reported(events: &[StreamEvent], error: Option<ProviderError>) -> Vec<ProviderError> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Retrying { error, .. } => Some(error.clone()),
            _ => None,
        })
        .chain(error)
        .collect()
}

/// Neither the text nor the debug form of any error holds the key, and each says where it
/// was.
fn assert_scrubbed(errors: &[ProviderError]) {
    assert!(!errors.is_empty());
    for error in errors {
        for shown in [error.to_string(), format!("{error:?}")] {
            assert!(!shown.contains(KEY), "the key leaked: {shown}");
            assert!(
                !shown.contains("SECRET-KEY"),
                "part of the key leaked: {shown}"
            );
            assert!(shown.contains("[redacted]"), "{shown}");
        }
    }
}

fn sse(event: &str, data: &str) -> Vec<u8> {
    format!("event: {event}\ndata: {data}\n\n").into_bytes()
}

fn data(data: &str) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

/// The basic Anthropic recording split into its events.
fn anthropic_events() -> Vec<Vec<u8>> {
    let text = String::from_utf8(wire_bytes("anthropic/basic_response.sse")).unwrap();
    text.split("\n\n")
        .map(|event| format!("{event}\n\n").into_bytes())
        .collect()
}

/// The single-tool-call OpenAI recording split into its chunks.
fn openai_chunks() -> Vec<Vec<u8>> {
    let text = String::from_utf8(wire_bytes("openai-chat/single_tool_call.sse")).unwrap();
    text.split("\n\n")
        .map(|chunk| format!("{chunk}\n\n").into_bytes())
        .collect()
}

#[tokio::test]
async fn anthropic_error_events_echoing_the_key_are_scrubbed_in_retries_and_the_final_error() {
    let overloaded = sse(
        "error",
        &format!(
            r#"{{"type":"error","error":{{"type":"overloaded_error","message":"Overloaded (request by key {KEY})"}}}}"#
        ),
    );
    let server =
        RawHttpServer::start(vec![RawResponse::sse(vec![overloaded], Ending::Complete)]).await;
    let (events, error) = drain(&anthropic(&server)).await;
    assert!(
        matches!(error, Some(ProviderError::Overloaded { .. })),
        "{error:?}"
    );
    let errors = reported(&events, error);
    assert_eq!(errors.len(), 2, "one retry, then the error: {errors:?}");
    assert_scrubbed(&errors);
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn an_anthropic_error_event_after_content_is_scrubbed() {
    let mut chunks = anthropic_events()[..4].to_vec();
    chunks.push(sse(
        "error",
        &format!(
            r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key: {KEY}"}}}}"#
        ),
    ));
    let server = RawHttpServer::start(vec![RawResponse::sse(chunks, Ending::Complete)]).await;
    let (events, error) = drain(&anthropic(&server)).await;
    assert!(
        matches!(error, Some(ProviderError::Auth { .. })),
        "{error:?}"
    );
    assert_scrubbed(&reported(&events, error));
}

#[tokio::test]
async fn openai_error_chunks_echoing_the_key_are_scrubbed_in_retries_and_the_final_error() {
    // The error chunk shape of OpenAI-compatible servers.
    let chunk = data(&format!(
        r#"{{"error":{{"message":"The server had an error processing the request for key {KEY}","type":"server_error","param":null,"code":null}}}}"#
    ));
    let server = RawHttpServer::start(vec![RawResponse::sse(
        vec![chunk.clone()],
        Ending::Complete,
    )])
    .await;
    let (events, error) = drain(&openai(&server)).await;
    assert!(
        matches!(error, Some(ProviderError::Server { .. })),
        "{error:?}"
    );
    let errors = reported(&events, error);
    assert_eq!(errors.len(), 2, "one retry, then the error: {errors:?}");
    assert_scrubbed(&errors);

    // After content (the recording's first chunks), the same chunk ends the call.
    let mut chunks = openai_chunks()[..2].to_vec();
    chunks.push(chunk);
    let server = RawHttpServer::start(vec![RawResponse::sse(chunks, Ending::Complete)]).await;
    let (events, error) = drain(&openai(&server)).await;
    assert!(
        events
            .iter()
            .any(|event| matches!(event, StreamEvent::ToolUseStart { .. })),
        "{events:?}"
    );
    let errors = reported(&events, error);
    assert_eq!(errors.len(), 1, "no retry after content: {errors:?}");
    assert_scrubbed(&errors);
}

#[tokio::test]
async fn an_openai_error_event_echoing_the_key_is_scrubbed() {
    let event = sse(
        "error",
        &format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {KEY}.","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
        ),
    );
    let server = RawHttpServer::start(vec![RawResponse::sse(vec![event], Ending::Complete)]).await;
    let (events, error) = drain(&openai(&server)).await;
    assert!(
        matches!(error, Some(ProviderError::InvalidRequest { .. })),
        "{error:?}"
    );
    assert_scrubbed(&reported(&events, error));
}

#[tokio::test]
async fn a_key_cut_in_half_by_a_shortened_message_is_scrubbed() {
    // Server messages are kept up to 2000 bytes: this one is cut inside the key.
    let message = format!("{}{KEY} and more", "x".repeat(1990));
    let event = sse(
        "error",
        &format!(
            r#"{{"type":"error","error":{{"type":"invalid_request_error","message":"{message}"}}}}"#
        ),
    );
    let server = RawHttpServer::start(vec![RawResponse::sse(vec![event], Ending::Complete)]).await;
    let (events, error) = drain(&anthropic(&server)).await;
    let errors = reported(&events, error);
    assert_scrubbed(&errors);
    assert!(
        errors[0].to_string().ends_with("x[redacted]…"),
        "{}",
        errors[0]
    );
}
