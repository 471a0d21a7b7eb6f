//! The limits that keep a model call from running away: the request deadline against a
//! trickle of pings, the cap on error bodies, absurd `retry-after` values, and which errors
//! tell the caller a reply was cut.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use keel_provider::{
    AnthropicProvider, ApiKey, CompletionRequest, DEFAULT_IDLE_TIMEOUT, DEFAULT_REQUEST_DEADLINE,
    MAX_ERROR_BODY, Message, OpenAiProvider, Provider, ProviderError, RetryPolicy, StreamEvent,
    TimeoutLimit,
};
use keel_test_support::mock::{error_response, sse_response};
use keel_test_support::raw_http::{Ending, RawHttpServer, RawResponse};
use keel_test_support::wire::wire_bytes;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

fn request() -> CompletionRequest {
    CompletionRequest::new("claude-sonnet-4-5").message(Message::user("hi"))
}

fn anthropic(base: &str) -> AnthropicProvider {
    AnthropicProvider::new(ApiKey::new("sk-ant-test"))
        .unwrap()
        .with_base_url(base)
        .unwrap()
}

fn openai(base: &str) -> OpenAiProvider {
    OpenAiProvider::new(&format!("{base}/v1"), Some(ApiKey::new("sk-test"))).unwrap()
}

/// Runs the stream to its end; a call still running after 20 s fails the test rather than
/// hanging it (what a missing limit would do).
async fn drain(provider: &dyn Provider) -> (Vec<StreamEvent>, Option<ProviderError>) {
    let request = request();
    tokio::time::timeout(
        Duration::from_secs(20),
        keel_test_support::events::drain(provider, &request),
    )
    .await
    .expect("the call is still running after 20 s")
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

fn recorded_events() -> Vec<Vec<u8>> {
    let text = String::from_utf8(wire_bytes("anthropic/basic_response.sse")).unwrap();
    text.split("\n\n")
        .map(|event| format!("{event}\n\n").into_bytes())
        .collect()
}

#[test]
fn the_defaults_are_what_the_docs_say() {
    let provider = anthropic("http://127.0.0.1:9");
    assert_eq!(provider.idle_timeout(), DEFAULT_IDLE_TIMEOUT);
    assert_eq!(provider.request_deadline(), DEFAULT_REQUEST_DEADLINE);
    assert_eq!(DEFAULT_REQUEST_DEADLINE, Duration::from_secs(3600));
    let provider = openai("http://127.0.0.1:9")
        .with_idle_timeout(Duration::from_secs(7))
        .with_request_deadline(Duration::from_secs(9));
    assert_eq!(provider.idle_timeout(), Duration::from_secs(7));
    assert_eq!(provider.request_deadline(), Duration::from_secs(9));
}

/// A server that sends the reply's start, then only keep-alive pings (a comment and an
/// Anthropic `ping` event, every few milliseconds): the idle timeout never fires, the
/// deadline does.
#[tokio::test]
async fn a_trickle_of_pings_after_content_ends_at_the_request_deadline() {
    let mut chunks = recorded_events()[..4].to_vec();
    chunks.push(b": ping\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n".to_vec());
    let server = RawHttpServer::start(vec![RawResponse::sse(chunks, Ending::RepeatLast)]).await;
    let provider = anthropic(&server.url())
        .with_retry_policy(
            RetryPolicy::default()
                .with_backoff(Duration::from_millis(10), Duration::from_millis(10)),
        )
        .with_idle_timeout(Duration::from_millis(200))
        .with_request_deadline(Duration::from_millis(600));
    let (events, error) = drain(&provider).await;

    let error = error.expect("the trickle must end in an error");
    assert_eq!(
        error,
        ProviderError::Timeout {
            after: Duration::from_millis(600),
            limit: TimeoutLimit::RequestDeadline,
        }
    );
    assert!(error.to_string().contains("request deadline"), "{error}");
    assert!(error.is_cut_mid_reply());
    assert_eq!(text(&events), "Hello");
    // Content had arrived: not retried by the provider (the caller retries the turn).
    assert_eq!(server.requests(), 1);
}

/// Only pings, never content: each attempt ends at its own deadline, and the provider retries
/// as for any timeout before content.
#[tokio::test]
async fn a_trickle_of_pings_before_content_is_retried_per_attempt_then_reported() {
    let start = recorded_events()[0].clone();
    let server = RawHttpServer::start(vec![RawResponse::sse(
        vec![start, b": ping\n\n".to_vec()],
        Ending::RepeatLast,
    )])
    .await;
    let provider = openai_or_anthropic_retrying(&server.url(), 1)
        .with_idle_timeout(Duration::from_secs(30))
        .with_request_deadline(Duration::from_millis(300));
    let started = Instant::now();
    let (events, error) = drain(&provider).await;

    assert!(
        matches!(
            error,
            Some(ProviderError::Timeout {
                limit: TimeoutLimit::RequestDeadline,
                ..
            })
        ),
        "{error:?}"
    );
    assert_eq!(
        server.requests(),
        2,
        "one retry, each with its own deadline"
    );
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert!(text(&events).is_empty());
}

fn openai_or_anthropic_retrying(base: &str, retries: u32) -> AnthropicProvider {
    anthropic(base).with_retry_policy(
        RetryPolicy::default()
            .with_max_retries(retries)
            .with_backoff(Duration::from_millis(5), Duration::from_millis(5)),
    )
}

#[tokio::test]
async fn a_stalled_stream_says_it_was_the_idle_timeout() {
    let server = RawHttpServer::start(vec![RawResponse::sse(
        recorded_events()[..4].to_vec(),
        Ending::Hang,
    )])
    .await;
    let provider = anthropic(&server.url())
        .with_retry_policy(RetryPolicy::none())
        .with_idle_timeout(Duration::from_millis(200));
    let (_, error) = drain(&provider).await;
    let error = error.unwrap();
    assert_eq!(
        error,
        ProviderError::Timeout {
            after: Duration::from_millis(200),
            limit: TimeoutLimit::Idle,
        }
    );
    assert!(error.to_string().contains("idle timeout"), "{error}");
}

/// A 500 whose body never ends: the call returns with the start of the body as its message,
/// having read no more than the cap (the old code buffered all of it until the idle timeout).
#[tokio::test]
async fn an_endless_error_body_is_read_up_to_the_cap_only() {
    let mut piece = b"{\"error\": {\"message\": \"".to_vec();
    piece.extend(std::iter::repeat_n(b'x', 64 * 1024));
    let server = RawHttpServer::start(vec![RawResponse {
        status: 500,
        chunks: vec![piece, vec![b'y'; 64 * 1024]],
        ending: Ending::RepeatLast,
    }])
    .await;
    let provider = anthropic(&server.url())
        .with_retry_policy(RetryPolicy::none())
        .with_idle_timeout(Duration::from_secs(2));
    let started = Instant::now();
    let (_, error) = drain(&provider).await;
    let elapsed = started.elapsed();

    let Some(ProviderError::Server { status, message }) = error else {
        panic!("expected a server error, got {error:?}");
    };
    assert_eq!(status, 500);
    assert!(
        message.starts_with("{\"error\": {\"message\": \"xxxx"),
        "{}",
        &message[..80.min(message.len())]
    );
    assert!(message.len() < MAX_ERROR_BODY, "{}", message.len());
    assert!(elapsed < Duration::from_secs(2), "took {elapsed:?}");
}

/// A large but finite error body: the message is its truncated start, and the whole body was
/// not waited for (it arrives over about 5 s, 64 KiB every 5 ms).
#[tokio::test]
async fn a_large_error_body_gives_its_truncated_start() {
    let chunks = (0..1000)
        .map(|i| format!("{i:08} ").repeat(64 * 1024 / 9).into_bytes())
        .collect();
    let server = RawHttpServer::start(vec![RawResponse {
        status: 400,
        chunks,
        ending: Ending::Complete,
    }])
    .await;
    let provider = openai(&server.url()).with_retry_policy(RetryPolicy::none());
    let started = Instant::now();
    let (_, error) = drain(&provider).await;
    let Some(ProviderError::InvalidRequest { message }) = error else {
        panic!("expected an invalid request, got {error:?}");
    };
    assert!(
        message.starts_with("00000000 00000000"),
        "{}",
        &message[..40]
    );
    assert!(message.ends_with('…'));
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn absurd_retry_after_values_are_clamped_not_a_panic() {
    for (header, value) in [
        ("retry-after", "1e30"),
        ("retry-after-ms", "1e300"),
        ("retry-after", "inf"),
        ("retry-after", "18446744073709551616"),
        ("retry-after", "Fri, 31 Dec 99999 23:59:59 GMT"),
        ("retry-after", "-5"),
        ("retry-after", "NaN"),
    ] {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(
                error_response(429, "rate_limit_error", "slow down").insert_header(header, value),
            )
            .up_to_n_times(1)
            .with_priority(1)
            .mount(&server)
            .await;
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(sse_response(wire_bytes("anthropic/basic_response.sse")))
            .with_priority(2)
            .mount(&server)
            .await;
        let mut policy =
            RetryPolicy::default().with_backoff(Duration::from_millis(5), Duration::from_millis(5));
        policy.max_server_wait = Duration::from_millis(50);
        let provider = anthropic(&server.uri()).with_retry_policy(policy);
        let (events, error) = drain(&provider).await;
        assert_eq!(error, None, "{header}: {value}");
        assert_eq!(text(&events), "Hello there!");
        let waits: Vec<Duration> = events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::Retrying { wait, error, .. } => {
                    if let ProviderError::RateLimited {
                        retry_after: Some(after),
                        ..
                    } = error
                    {
                        assert!(*after <= Duration::from_millis(50), "{header}: {value}");
                    }
                    Some(*wait)
                }
                _ => None,
            })
            .collect();
        assert_eq!(waits.len(), 1, "{header}: {value}");
        assert!(
            waits[0] <= Duration::from_millis(50),
            "{header}: {value}: {waits:?}"
        );
    }
}

#[test]
fn cut_mid_reply_is_told_apart_from_errors_a_retry_cannot_fix() {
    let message = || "m".to_owned();
    for error in [
        ProviderError::Stream { message: message() },
        ProviderError::Timeout {
            after: Duration::from_secs(1),
            limit: TimeoutLimit::Idle,
        },
        ProviderError::Timeout {
            after: Duration::from_secs(1),
            limit: TimeoutLimit::RequestDeadline,
        },
        ProviderError::Overloaded { message: message() },
        ProviderError::Server {
            status: 500,
            message: message(),
        },
        ProviderError::RateLimited {
            retry_after: None,
            message: message(),
        },
        ProviderError::Transport { message: message() },
    ] {
        assert!(error.is_cut_mid_reply(), "{error:?}");
    }
    for error in [
        ProviderError::Auth { message: message() },
        ProviderError::InvalidRequest { message: message() },
        ProviderError::ContextLengthExceeded { message: message() },
        ProviderError::Config { message: message() },
    ] {
        assert!(!error.is_cut_mid_reply(), "{error:?}");
    }
}

/// Anthropic's `overloaded_error` event after text has arrived: the provider does not retry
/// (that would duplicate the text), and the error says a new request may succeed.
#[tokio::test]
async fn an_overloaded_event_mid_reply_is_a_cut_the_caller_may_retry() {
    let mut chunks = recorded_events()[..4].to_vec();
    chunks.push(b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n".to_vec());
    let server = RawHttpServer::start(vec![RawResponse::sse(chunks, Ending::Complete)]).await;
    let provider = anthropic(&server.url());
    let (events, error) = drain(&provider).await;
    let error = error.unwrap();
    assert!(
        matches!(error, ProviderError::Overloaded { .. }),
        "{error:?}"
    );
    assert!(error.is_cut_mid_reply());
    assert_eq!(text(&events), "Hello");
    assert_eq!(server.requests(), 1);
}
