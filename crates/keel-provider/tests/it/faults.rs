//! Faults real services produce: rate limits, overloads, bad keys, cut and stalled streams.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use keel_provider::{
    AnthropicProvider, ApiKey, CompletionRequest, Message, OpenAiProvider, Provider, ProviderError,
    RetryPolicy, StreamEvent, TimeoutLimit,
};
use keel_test_support::mock::{error_response, sse_response};
use keel_test_support::raw_http::{Ending, RawHttpServer, RawResponse};
use keel_test_support::wire::wire_bytes;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const KEY: &str = "sk-ant-api03-SECRET-KEY-1234567890";

fn request() -> CompletionRequest {
    CompletionRequest::new("claude-sonnet-4-5").message(Message::user("hi"))
}

fn anthropic(base: &str) -> AnthropicProvider {
    AnthropicProvider::new(ApiKey::new(KEY))
        .unwrap()
        .with_base_url(base)
        .unwrap()
}

/// Fast backoff, so that tests of backoff retries take milliseconds.
fn quick_retries() -> RetryPolicy {
    RetryPolicy::default().with_backoff(Duration::from_millis(10), Duration::from_millis(40))
}

/// Runs the stream to its end, returning the events and the error it ended with, if any.
async fn drain(provider: &dyn Provider) -> (Vec<StreamEvent>, Option<ProviderError>) {
    keel_test_support::events::drain(provider, &request()).await
}

fn retries(events: &[StreamEvent]) -> Vec<(u32, Duration)> {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying { attempt, wait, .. } => Some((*attempt, *wait)),
            _ => None,
        })
        .collect()
}

fn text(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TextDelta { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

async fn mount_failures(server: &MockServer, response: ResponseTemplate, times: u64) {
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(response)
        .up_to_n_times(times)
        .with_priority(1)
        .mount(server)
        .await;
}

async fn mount_success(server: &MockServer) {
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(sse_response(wire_bytes("anthropic/basic_response.sse")))
        .with_priority(2)
        .mount(server)
        .await;
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    let server = MockServer::start().await;
    mount_failures(
        &server,
        error_response(429, "rate_limit_error", "Number of requests exceeded")
            .insert_header("retry-after", "1"),
        1,
    )
    .await;
    mount_success(&server).await;

    let provider = anthropic(&server.uri());
    let started = Instant::now();
    let (events, error) = drain(&provider).await;
    let elapsed = started.elapsed();

    assert_eq!(error, None);
    assert_eq!(text(&events), "Hello there!");
    assert_eq!(retries(&events), [(1, Duration::from_secs(1))]);
    assert!(elapsed >= Duration::from_secs(1), "waited only {elapsed:?}");
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn overloaded_twice_then_succeeds() {
    let server = MockServer::start().await;
    mount_failures(
        &server,
        error_response(529, "overloaded_error", "Overloaded"),
        2,
    )
    .await;
    mount_success(&server).await;

    let provider = anthropic(&server.uri()).with_retry_policy(quick_retries());
    let (events, error) = drain(&provider).await;

    assert_eq!(error, None);
    assert_eq!(text(&events), "Hello there!");
    let attempts: Vec<u32> = retries(&events).iter().map(|r| r.0).collect();
    assert_eq!(attempts, [1, 2]);
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_never_shows_the_key() {
    let server = MockServer::start().await;
    // A server that echoes the key back must not get it into our error.
    mount_failures(
        &server,
        error_response(
            401,
            "authentication_error",
            &format!("invalid x-api-key {KEY}"),
        ),
        5,
    )
    .await;

    let provider = anthropic(&server.uri()).with_retry_policy(quick_retries());
    let (events, error) = drain(&provider).await;

    let error = error.expect("a 401 fails");
    assert!(matches!(error, ProviderError::Auth { .. }), "{error:?}");
    assert!(retries(&events).is_empty());
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    assert!(!error.to_string().contains(KEY), "{error}");
    assert!(!format!("{error:?}").contains(KEY), "{error:?}");
    assert!(error.to_string().contains("[redacted]"), "{error}");
}

#[tokio::test]
async fn retries_give_up_after_the_limit() {
    let server = MockServer::start().await;
    mount_failures(&server, error_response(500, "api_error", "boom"), 10).await;

    let provider = anthropic(&server.uri()).with_retry_policy(quick_retries().with_max_retries(2));
    let (events, error) = drain(&provider).await;

    assert_eq!(
        error,
        Some(ProviderError::Server {
            status: 500,
            message: "boom".into()
        })
    );
    assert_eq!(retries(&events).len(), 2);
    // Each retry says the most there will be, so a UI can show "1/2", "2/2".
    let maxima: Vec<u32> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retrying { max_attempts, .. } => Some(*max_attempts),
            _ => None,
        })
        .collect();
    assert_eq!(maxima, [2, 2]);
    assert_eq!(server.received_requests().await.unwrap().len(), 3);
}

#[tokio::test]
async fn x_should_retry_false_stops_retries() {
    let server = MockServer::start().await;
    mount_failures(
        &server,
        error_response(503, "api_error", "down").insert_header("x-should-retry", "false"),
        10,
    )
    .await;
    let provider = anthropic(&server.uri()).with_retry_policy(quick_retries());
    let (_, error) = drain(&provider).await;
    assert!(matches!(
        error,
        Some(ProviderError::Server { status: 503, .. })
    ));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn bad_requests_are_not_retried() {
    let server = MockServer::start().await;
    mount_failures(
        &server,
        error_response(
            400,
            "invalid_request_error",
            "prompt is too long: 250000 tokens > 200000 maximum",
        ),
        10,
    )
    .await;
    let provider = anthropic(&server.uri()).with_retry_policy(quick_retries());
    let (_, error) = drain(&provider).await;
    assert!(
        matches!(error, Some(ProviderError::ContextLengthExceeded { .. })),
        "{error:?}"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

/// The basic recording split into its events, for raw servers to send one by one.
fn recorded_events() -> Vec<Vec<u8>> {
    let text = String::from_utf8(wire_bytes("anthropic/basic_response.sse")).unwrap();
    text.split("\n\n")
        .map(|event| format!("{event}\n\n").into_bytes())
        .collect()
}

#[tokio::test]
async fn a_stream_dropped_after_text_is_a_stream_error_without_duplicates() {
    let events = recorded_events();
    // message_start, block start, ping, "Hello", " there" — then the connection drops.
    let server =
        RawHttpServer::start(vec![RawResponse::sse(events[..5].to_vec(), Ending::Cut)]).await;
    let provider = anthropic(&server.url()).with_retry_policy(quick_retries());
    let (events, error) = drain(&provider).await;

    assert!(
        matches!(error, Some(ProviderError::Stream { .. })),
        "{error:?}"
    );
    assert_eq!(text(&events), "Hello there", "output is not duplicated");
    assert!(retries(&events).is_empty(), "no retry after content");
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn a_stream_cut_before_content_is_retried() {
    let events = recorded_events();
    let server = RawHttpServer::start(vec![
        // message_start only, then the connection drops.
        RawResponse::sse(events[..1].to_vec(), Ending::Cut),
        RawResponse::sse(events.clone(), Ending::Complete),
    ])
    .await;
    let provider = anthropic(&server.url()).with_retry_policy(quick_retries());
    let (events, error) = drain(&provider).await;

    assert_eq!(error, None);
    assert_eq!(text(&events), "Hello there!");
    assert_eq!(retries(&events).len(), 1);
    let starts = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::MessageStart { .. }))
        .count();
    assert_eq!(starts, 1, "message_start is not repeated");
    assert_eq!(server.requests(), 2);
}

#[tokio::test]
async fn a_server_that_stops_sending_times_out() {
    let events = recorded_events();
    let server =
        RawHttpServer::start(vec![RawResponse::sse(events[..4].to_vec(), Ending::Hang)]).await;
    let provider = anthropic(&server.url())
        .with_retry_policy(quick_retries())
        .with_idle_timeout(Duration::from_millis(300));
    let (events, error) = drain(&provider).await;

    assert_eq!(
        error,
        Some(ProviderError::Timeout {
            after: Duration::from_millis(300),
            limit: TimeoutLimit::Idle,
        })
    );
    assert_eq!(text(&events), "Hello");
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn an_error_event_after_http_200_is_an_error_and_retried_before_content() {
    let overloaded = b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n".to_vec();
    let server = RawHttpServer::start(vec![
        RawResponse::sse(vec![overloaded.clone()], Ending::Complete),
        RawResponse::sse(recorded_events(), Ending::Complete),
    ])
    .await;
    let provider = anthropic(&server.url()).with_retry_policy(quick_retries());
    let (events, error) = drain(&provider).await;
    assert_eq!(error, None);
    assert_eq!(text(&events), "Hello there!");
    let StreamEvent::Retrying { error, .. } = &events[0] else {
        panic!("first event is the retry: {events:?}");
    };
    assert!(matches!(error, ProviderError::Overloaded { .. }));

    // After content, the same event ends the stream.
    let mut after_text = recorded_events()[..4].to_vec();
    after_text.push(overloaded);
    let server = RawHttpServer::start(vec![RawResponse::sse(after_text, Ending::Complete)]).await;
    let provider = anthropic(&server.url()).with_retry_policy(quick_retries());
    let (events, error) = drain(&provider).await;
    assert!(matches!(error, Some(ProviderError::Overloaded { .. })));
    assert_eq!(text(&events), "Hello");
    assert_eq!(server.requests(), 1);
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    // Bind then drop a listener to get a port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let provider = OpenAiProvider::new(&format!("http://127.0.0.1:{port}/v1"), None)
        .unwrap()
        .with_retry_policy(quick_retries().with_max_retries(1));
    let (events, error) = drain(&provider).await;
    assert!(
        matches!(error, Some(ProviderError::Transport { .. })),
        "{error:?}"
    );
    assert_eq!(retries(&events).len(), 1);
}

#[tokio::test]
async fn a_whole_reply_ends_the_call_even_if_the_body_stays_open() {
    let server =
        RawHttpServer::start(vec![RawResponse::sse(recorded_events(), Ending::Hang)]).await;
    let provider = anthropic(&server.url()).with_idle_timeout(Duration::from_secs(30));
    let started = Instant::now();
    let (events, error) = drain(&provider).await;
    assert_eq!(error, None);
    assert_eq!(text(&events), "Hello there!");
    assert!(matches!(
        events.last(),
        Some(StreamEvent::MessageEnd { .. })
    ));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "it waited for the idle timeout"
    );
}

// Error events inside a stream that began with HTTP 200 (Anthropic's `event: error`, OpenAI's
// error chunks) whose message echoes the key. No real capture of such an event exists (see
// `../shared/wire/README.md`), so they are written in the shapes the providers document.

#[derive(Debug, Clone, Copy)]
enum Backend {
    Anthropic,
    OpenAi,
}

/// Serves `chunks` (every connection) to `backend` with one quick retry, and returns the
/// events and every error reported: those in retry events, then the final one.
async fn stream_errors(
    backend: Backend,
    chunks: Vec<Vec<u8>>,
) -> (Vec<StreamEvent>, Vec<ProviderError>) {
    let server = RawHttpServer::start(vec![RawResponse::sse(chunks, Ending::Complete)]).await;
    let policy = quick_retries().with_max_retries(1);
    let (events, error) = match backend {
        Backend::Anthropic => drain(&anthropic(&server.url()).with_retry_policy(policy)).await,
        Backend::OpenAi => {
            let provider =
                OpenAiProvider::new(&format!("{}/v1", server.url()), Some(ApiKey::new(KEY)))
                    .unwrap()
                    .with_retry_policy(policy);
            drain(&provider).await
        }
    };
    let errors = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::Retrying { error, .. } => Some(error.clone()),
            _ => None,
        })
        .chain(error)
        .collect();
    (events, errors)
}

/// `count` errors were reported, the last of a kind `last_is` accepts, and neither the text
/// nor the debug form of any holds the key: each says where it was.
fn assert_scrubbed(
    backend: Backend,
    errors: &[ProviderError],
    count: usize,
    last_is: fn(&ProviderError) -> bool,
) {
    assert_eq!(errors.len(), count, "{backend:?}: {errors:?}");
    assert!(
        errors.last().is_some_and(last_is),
        "{backend:?}: {errors:?}"
    );
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

fn error_event(data: &str) -> Vec<u8> {
    format!("event: error\ndata: {data}\n\n").into_bytes()
}

fn error_chunk(data: &str) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

#[tokio::test]
async fn error_events_echoing_the_key_are_scrubbed_in_retries_and_final_errors() {
    let overloaded = error_event(&format!(
        r#"{{"type":"error","error":{{"type":"overloaded_error","message":"Overloaded (request by key {KEY})"}}}}"#
    ));
    let server_error = error_chunk(&format!(
        r#"{{"error":{{"message":"The server had an error processing the request for key {KEY}","type":"server_error","param":null,"code":null}}}}"#
    ));
    for (backend, chunk) in [
        (Backend::Anthropic, overloaded),
        (Backend::OpenAi, server_error),
    ] {
        let (_, errors) = stream_errors(backend, vec![chunk]).await;
        // One retry, then the error.
        assert_scrubbed(backend, &errors, 2, |error| {
            matches!(
                error,
                ProviderError::Overloaded { .. } | ProviderError::Server { .. }
            )
        });
    }
}

#[tokio::test]
async fn error_events_echoing_the_key_after_content_are_scrubbed() {
    let openai_recording = String::from_utf8(wire_bytes("openai-chat/single_tool_call.sse"))
        .unwrap()
        .split("\n\n")
        .take(2)
        .map(|chunk| format!("{chunk}\n\n").into_bytes())
        .collect::<Vec<_>>();
    let mut anthropic_chunks = recorded_events()[..4].to_vec();
    anthropic_chunks.push(error_event(&format!(
        r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key: {KEY}"}}}}"#
    )));
    let mut openai_chunks = openai_recording;
    // OpenAI-compatible servers send errors both as a plain chunk and as an `error` event.
    openai_chunks.push(error_event(&format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {KEY}.","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
    )));
    for (backend, chunks) in [
        (Backend::Anthropic, anthropic_chunks),
        (Backend::OpenAi, openai_chunks),
    ] {
        let (events, errors) = stream_errors(backend, chunks).await;
        assert!(
            events.iter().any(StreamEvent::is_content),
            "{backend:?}: content came first: {events:?}"
        );
        // No retry after content.
        assert_scrubbed(backend, &errors, 1, |error| {
            matches!(
                error,
                ProviderError::Auth { .. } | ProviderError::InvalidRequest { .. }
            )
        });
    }
}

#[tokio::test]
async fn a_key_cut_in_half_by_a_shortened_message_is_scrubbed() {
    // Server messages are kept up to 2000 bytes: this one is cut inside the key.
    let message = format!("{}{KEY} and more", "x".repeat(1990));
    let event = error_event(&format!(
        r#"{{"type":"error","error":{{"type":"invalid_request_error","message":"{message}"}}}}"#
    ));
    let (_, errors) = stream_errors(Backend::Anthropic, vec![event]).await;
    assert_scrubbed(Backend::Anthropic, &errors, 1, |error| {
        matches!(error, ProviderError::InvalidRequest { .. })
    });
    assert!(
        errors[0].to_string().ends_with("x[redacted]…"),
        "{}",
        errors[0]
    );
}
