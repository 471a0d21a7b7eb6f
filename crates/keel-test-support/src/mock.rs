//! wiremock servers serving SSE bodies on loopback.

use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A `200 text/event-stream` response with `body`, verbatim.
pub fn sse_response(body: impl Into<Vec<u8>>) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_raw(body.into(), "text/event-stream")
}

/// A JSON error response in the shape both APIs use.
pub fn error_response(status: u16, kind: &str, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(serde_json::json!({
        "type": "error",
        "error": {"type": kind, "message": message}
    }))
}

/// Starts a server that answers every `POST route` with `body` as an event stream.
pub async fn serve_sse(route: &str, body: impl Into<Vec<u8>>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(sse_response(body))
        .mount(&server)
        .await;
    server
}

/// Every model request `server` received, in order: each `POST` to a path ending in
/// `/messages`, `/chat/completions` or `/responses` (not a `GET` such as a model listing, nor
/// a local server's `POST /api/show`, asked for its context window).
pub async fn model_requests(server: &MockServer) -> Vec<wiremock::Request> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .into_iter()
        .filter(|request| {
            let path = request.url.path();
            request.method.as_str() == "POST"
                && ["/messages", "/chat/completions", "/responses"]
                    .iter()
                    .any(|end| path.ends_with(end))
        })
        .collect()
}

/// The JSON bodies of every model request `server` received, in order (see
/// [`model_requests`]).
pub async fn request_bodies(server: &MockServer) -> Vec<serde_json::Value> {
    model_requests(server)
        .await
        .iter()
        .map(|request| serde_json::from_slice(&request.body).unwrap())
        .collect()
}

/// Starts a server that answers successive `POST route` requests with `bodies`, one each, in
/// order (as a model answers turn after turn); a request past the end gets a 500.
pub async fn serve_turns(route: &str, bodies: Vec<String>) -> MockServer {
    let server = MockServer::start().await;
    for body in bodies {
        Mock::given(method("POST"))
            .and(path(route))
            .respond_with(sse_response(body))
            .up_to_n_times(1)
            .mount(&server)
            .await;
    }
    server
}

/// Starts a server that answers successive Anthropic Messages requests with `replies`,
/// rendered as Anthropic event streams.
pub async fn serve_anthropic_replies(replies: &[keel_provider::ToolUseResponse]) -> MockServer {
    serve_turns(
        "/v1/messages",
        replies.iter().map(crate::render::anthropic_sse).collect(),
    )
    .await
}

/// Starts a server that answers successive Chat Completions requests with `replies`,
/// rendered as OpenAI event streams.
pub async fn serve_openai_replies(replies: &[keel_provider::ToolUseResponse]) -> MockServer {
    serve_turns(
        "/v1/chat/completions",
        replies.iter().map(crate::render::openai_sse).collect(),
    )
    .await
}

/// Starts a server that answers successive OpenAI Responses API requests (`POST
/// /v1/responses`) with `replies`, rendered as Responses event streams.
pub async fn serve_responses_replies(replies: &[keel_provider::ToolUseResponse]) -> MockServer {
    serve_turns(
        "/v1/responses",
        replies.iter().map(crate::render::responses_sse).collect(),
    )
    .await
}
