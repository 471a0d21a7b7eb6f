//! The HTTP side shared by the back ends: sending with retries, reading a streamed body with
//! an idle timeout and a deadline per attempt, and turning HTTP failures (their bodies read up
//! to a cap) into [`ProviderError`]s.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;
use tokio::time::Instant;
use tracing::Span;

use crate::error::{ProviderError, TimeoutLimit};
use crate::models::{
    MAX_MODEL_LIST_BODY, MAX_MODEL_LIST_PAGES, MODEL_LIST_TIMEOUT, ModelList, ModelPage,
};
use crate::retry::{RetryPolicy, server_wait, status_is_retryable};
use crate::secret::{ApiKey, redact_opt};
use crate::stream::StreamEvent;

/// The default time allowed between two pieces of a streamed reply.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The default time one attempt may take from sending the request to the reply's last byte:
/// one hour. The longest reply the built-in models may write is 128,000 tokens; at a slow
/// 40 tokens a second that is 53 minutes, so a legitimate reply is never cut, while a server
/// that only trickles keep-alive pings (which the idle timeout cannot catch) is given up on.
pub const DEFAULT_REQUEST_DEADLINE: Duration = Duration::from_secs(60 * 60);

/// The most of an HTTP error body that is read (64 KiB); the rest is never received: the
/// connection is dropped.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// Longest server message kept in an error.
const MAX_ERROR_MESSAGE: usize = 2000;

/// Turns a back end's wire format into [`StreamEvent`]s.
pub(crate) trait WireParser: Send {
    /// Takes the next chunk of the body.
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), ProviderError>;
    /// The body ended: flush, and fail if the reply is incomplete.
    fn finish(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ProviderError>;
}

/// A request ready to send, as many times as retries need.
#[derive(Debug, Clone)]
pub(crate) struct PreparedRequest {
    pub url: url::Url,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl PreparedRequest {
    /// `body`, JSON, posted to `url` for a streamed (`text/event-stream`) reply, with the back
    /// end's own `headers` besides.
    pub(crate) fn streamed_json(url: url::Url, mut headers: HeaderMap, body: Vec<u8>) -> Self {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        Self {
            url,
            headers,
            body: body.into(),
        }
    }
}

/// The HTTP clients, built on first use and shared by clones of a provider: one for `http://`
/// that never loads certificates, one for `https://` with the system's roots.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    /// For `http://` endpoints: no TLS roots, so no certificate store is read.
    plain: OnceLock<reqwest::Client>,
    /// For `https://` endpoints: the platform verifier, which reads the system's certificate
    /// store when built.
    tls: OnceLock<reqwest::Client>,
}

impl Clients {
    /// The client for `url`'s scheme, built now if it is the first request of that scheme.
    fn for_url(&self, url: &url::Url) -> Result<&reqwest::Client, ProviderError> {
        let plain = url.scheme() == "http";
        let cell = if plain { &self.plain } else { &self.tls };
        if let Some(client) = cell.get() {
            return Ok(client);
        }
        // Gateways and proxies see which program calls them (`keel/<version>`).
        let builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")));
        // An empty root store instead of the platform verifier: nothing is read from disk.
        // Such a client cannot complete a TLS handshake, and is only used for http:// URLs.
        let builder = if plain {
            builder.tls_certs_only(std::iter::empty())
        } else {
            builder
        };
        let client = builder.build().map_err(|err| ProviderError::Config {
            message: format!("cannot build the HTTP client: {err}"),
        })?;
        Ok(cell.get_or_init(|| client))
    }

    /// Whether the `https://` client (and so the certificate store) has been built.
    #[cfg(test)]
    pub(crate) fn tls_built(&self) -> bool {
        self.tls.get().is_some()
    }
}

/// `headers` as a header map of sensitive values; an invalid name or value is a
/// [`ProviderError::Config`] naming the header (never its value).
pub(crate) fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, ProviderError> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header =
            reqwest::header::HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| {
                ProviderError::Config {
                    message: format!("`{name}` is not a valid HTTP header name"),
                }
            })?;
        let mut value = HeaderValue::from_str(value.trim()).map_err(|_| ProviderError::Config {
            message: format!("the value of header `{name}` holds characters a header cannot carry"),
        })?;
        value.set_sensitive(true);
        map.insert(header, value);
    }
    Ok(map)
}

/// The HTTP client and its policies.
#[derive(Clone)]
pub(crate) struct HttpTransport {
    pub(crate) clients: Arc<Clients>,
    pub retry: RetryPolicy,
    pub idle_timeout: Duration,
    pub request_deadline: Duration,
    pub key: Option<ApiKey>,
    /// Headers every request carries besides the back end's own (a gateway's: a config's
    /// `headers`, `ANTHROPIC_CUSTOM_HEADERS`); their values are marked sensitive, kept out of
    /// `Debug` and removed from error messages. The back end's own headers win on a clash.
    pub(crate) extra_headers: HeaderMap,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("retry", &self.retry)
            .field("idle_timeout", &self.idle_timeout)
            .field("request_deadline", &self.request_deadline)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// A failed attempt, and whether another may succeed.
#[derive(Debug)]
struct Failure {
    error: ProviderError,
    retryable: bool,
    server_wait: Option<Duration>,
}

impl Failure {
    fn of(error: ProviderError) -> Self {
        // A rate limit reported inside a stream may say how long to wait.
        let server_wait = match &error {
            ProviderError::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        };
        Self {
            retryable: error.is_retryable(),
            error,
            server_wait,
        }
    }

    /// The connection broke or the body ended early: worth retrying only before content.
    fn cut(message: String) -> Self {
        Self {
            error: ProviderError::Stream { message },
            retryable: true,
            server_wait: None,
        }
    }
}

impl HttpTransport {
    /// A transport; its HTTP client is built at the first request (see [`Clients`]), so
    /// making a provider reads no certificates, and an `http://` one never does.
    pub(crate) fn new(key: Option<ApiKey>) -> Result<Self, ProviderError> {
        Ok(Self {
            clients: Arc::default(),
            retry: RetryPolicy::default(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            request_deadline: DEFAULT_REQUEST_DEADLINE,
            key,
            extra_headers: HeaderMap::new(),
        })
    }

    fn redact(&self, text: &str) -> String {
        let mut text = redact_opt(self.key.as_ref(), text);
        for value in self.extra_headers.values() {
            if let Ok(secret) = value.to_str()
                && secret.len() >= 4
            {
                text = text.replace(secret, "[redacted]");
            }
        }
        text
    }

    /// `own` (the back end's headers) with the extra headers it does not set itself.
    fn with_extra(&self, own: &HeaderMap) -> HeaderMap {
        let mut headers = own.clone();
        for (name, value) in &self.extra_headers {
            if !headers.contains_key(name) {
                headers.insert(name.clone(), value.clone());
            }
        }
        headers
    }

    /// A request that failed to be sent or received, its causes on one line, the key removed.
    fn transport_error(&self, err: &reqwest::Error) -> ProviderError {
        ProviderError::Transport {
            message: self.redact(&error_chain(err)),
        }
    }

    /// `error` with the key removed from its message: what a server echoes in a stream's error
    /// event goes through here before it becomes an error, an event or a log line.
    fn scrub(&self, error: ProviderError) -> ProviderError {
        if self.key.is_none() && self.extra_headers.is_empty() {
            return error;
        }
        error.map_message(|message| self.redact(message))
    }

    /// Runs `fut` until the idle timeout or the attempt's `deadline`, whichever ends first.
    /// A limit too far away to represent is no limit.
    async fn bounded<F: Future>(
        &self,
        deadline: Option<Instant>,
        fut: F,
    ) -> Result<F::Output, ProviderError> {
        let idle_end = Instant::now().checked_add(self.idle_timeout);
        let (end, limit) = match (idle_end, deadline) {
            (Some(idle), Some(deadline)) if deadline <= idle => {
                (Some(deadline), TimeoutLimit::RequestDeadline)
            }
            (None, Some(deadline)) => (Some(deadline), TimeoutLimit::RequestDeadline),
            (idle, _) => (idle, TimeoutLimit::Idle),
        };
        let Some(end) = end else {
            return Ok(fut.await);
        };
        tokio::time::timeout_at(end, fut)
            .await
            .map_err(|_| ProviderError::Timeout {
                after: match limit {
                    TimeoutLimit::RequestDeadline => self.request_deadline,
                    _ => self.idle_timeout,
                },
                limit,
            })
    }

    /// One attempt: a response with a success status, or why not.
    async fn send(
        &self,
        request: &PreparedRequest,
        deadline: Option<Instant>,
    ) -> Result<reqwest::Response, Failure> {
        let send = self
            .request(reqwest::Method::POST, &request.url, &request.headers)
            .map_err(Failure::of)?
            .body(request.body.clone())
            .send();
        let response = match self.bounded(deadline, send).await {
            Err(timeout) => return Err(Failure::of(timeout)),
            Ok(Err(err)) => return Err(Failure::of(self.transport_error(&err))),
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let body = self.error_body(response, deadline).await;
        let wait = server_wait(&headers).map(|wait| wait.min(self.retry.max_server_wait));
        Err(Failure {
            error: error_from_status(status.as_u16(), wait, &self.redact(&body)),
            retryable: status_is_retryable(status, &headers),
            server_wait: wait,
        })
    }

    /// An error response's body, read chunk by chunk up to [`MAX_ERROR_BODY`]: the rest is
    /// never read (the response, and its connection, are dropped). A body that stalls or
    /// breaks gives what arrived.
    async fn error_body(
        &self,
        mut response: reqwest::Response,
        deadline: Option<Instant>,
    ) -> String {
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY {
            match self.bounded(deadline, response.chunk()).await {
                Ok(Ok(Some(chunk))) => {
                    let room = MAX_ERROR_BODY - body.len();
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                }
                Ok(Ok(None)) => break,
                Ok(Err(err)) => {
                    tracing::debug!(error = %error_chain(&err), "error body broke off");
                    break;
                }
                Err(timeout) => {
                    tracing::debug!(error = %timeout, "error body stalled");
                    break;
                }
            }
        }
        String::from_utf8_lossy(&body).into_owned()
    }

    /// Sends `request` and streams the parsed reply, retrying as the policy allows.
    pub(crate) fn stream<'a, P, F>(
        &'a self,
        request: Result<PreparedRequest, ProviderError>,
        span: Span,
        new_parser: F,
    ) -> BoxStream<'a, Result<StreamEvent, ProviderError>>
    where
        P: WireParser + 'a,
        F: Fn() -> P + Send + 'a,
    {
        let events = async_stream::stream! {
            let request = match request {
                Ok(request) => request,
                Err(err) => {
                    yield Err(err);
                    return;
                }
            };
            let mut retries = 0u32;
            let mut sent_start = false;
            let mut sent_content = false;
            let mut events = Vec::new();
            loop {
                // Each attempt has its own deadline, from sending to the reply's last byte.
                let deadline = Instant::now().checked_add(self.request_deadline);
                let failure = match self.send(&request, deadline).await {
                    Err(failure) => failure,
                    Ok(response) => {
                        let mut parser = new_parser();
                        let mut body = response.bytes_stream();
                        loop {
                            let step = match self.bounded(deadline, body.next()).await {
                                Err(timeout) => Err(Failure::of(timeout)),
                                Ok(None) => parser.finish(&mut events).map(|()| true).map_err(|err| match err {
                                    ProviderError::Stream { message } => Failure::cut(message),
                                    other => Failure::of(other),
                                }),
                                Ok(Some(Err(err))) => Err(Failure::cut(format!(
                                    "the connection broke mid-reply: {}",
                                    self.redact(&error_chain(&err))
                                ))),
                                Ok(Some(Ok(chunk))) => parser.feed(&chunk, &mut events).map(|()| false).map_err(Failure::of),
                            };
                            let mut ended = false;
                            for event in events.drain(..) {
                                if matches!(event, StreamEvent::MessageStart { .. }) {
                                    if sent_start {
                                        continue;
                                    }
                                    sent_start = true;
                                }
                                sent_content |= event.is_content();
                                ended |= matches!(event, StreamEvent::MessageEnd { .. });
                                yield Ok(event);
                            }
                            // A whole reply ends the call even if the server keeps the body open.
                            if ended {
                                return;
                            }
                            match step {
                                Ok(true) => return,
                                Ok(false) => {}
                                Err(failure) => break failure,
                            }
                        }
                    }
                };
                // Error events and chunks inside the stream may echo the key, as HTTP error
                // bodies may: nothing leaves this loop (error, retry event, log) unscrubbed.
                let failure = Failure { error: self.scrub(failure.error), ..failure };
                if sent_content || !failure.retryable || retries >= self.retry.max_retries {
                    tracing::debug!(error = %failure.error, retries, "model call failed");
                    yield Err(failure.error);
                    return;
                }
                let wait = self.retry.wait(retries, failure.server_wait.map(|wait| wait.min(self.retry.max_server_wait)));
                retries += 1;
                tracing::warn!(error = %failure.error, attempt = retries, wait_ms = wait.as_millis() as u64, "retrying model call");
                yield Ok(StreamEvent::Retrying { attempt: retries, max_attempts: self.retry.max_retries, wait, error: failure.error });
                tokio::time::sleep(wait).await;
            }
        };
        Box::pin(InSpan {
            span,
            inner: Box::pin(events),
        })
    }
}

impl HttpTransport {
    /// The models listed at `url` with `GET` and `headers`: every page, following Anthropic's
    /// `has_more`/`last_id` cursor (with `limit=1000` when `paged`) up to
    /// [`MAX_MODEL_LIST_PAGES`]. The whole listing has the shorter of [`MODEL_LIST_TIMEOUT`]
    /// and the idle timeout; each page is read up to [`MAX_MODEL_LIST_BODY`]; nothing is
    /// retried.
    pub(crate) async fn list_models(
        &self,
        url: &url::Url,
        headers: HeaderMap,
        paged: bool,
    ) -> Result<ModelList, ProviderError> {
        let limit = MODEL_LIST_TIMEOUT.min(self.idle_timeout);
        let deadline = Instant::now().checked_add(limit);
        let listing = async {
            let mut ids = Vec::new();
            let mut after: Option<String> = None;
            for _ in 0..MAX_MODEL_LIST_PAGES {
                let mut page_url = url.clone();
                if paged {
                    let mut query = page_url.query_pairs_mut();
                    query.append_pair("limit", "1000");
                    if let Some(after) = &after {
                        query.append_pair("after_id", after);
                    }
                }
                let page = ModelPage::parse(&self.get(&page_url, &headers).await?)?;
                after = page.next_after().map(str::to_owned);
                page.take_into(&mut ids);
                if after.is_none() {
                    break;
                }
            }
            Ok(ModelList::new(ids))
        };
        let result = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, listing)
                .await
                .unwrap_or(Err(ProviderError::Timeout {
                    after: limit,
                    limit: TimeoutLimit::RequestDeadline,
                })),
            None => listing.await,
        };
        result.map_err(|error| self.scrub(error))
    }

    /// One `GET`: the body of a success, read up to [`MAX_MODEL_LIST_BODY`], or the error its
    /// status and body mean.
    async fn get(&self, url: &url::Url, headers: &HeaderMap) -> Result<Vec<u8>, ProviderError> {
        let request = self.request(reqwest::Method::GET, url, headers)?;
        let too_long = format!(
            "the model list is longer than {} MiB",
            MAX_MODEL_LIST_BODY / (1024 * 1024)
        );
        self.bounded_body(request, MAX_MODEL_LIST_BODY, &too_long)
            .await
    }

    /// Sends `request` once (no retry) and reads the body of a success up to `limit` bytes:
    /// a longer one is the error `too_long`, and the rest of it is never received. A failure
    /// status is the error its status and body mean (the body read up to [`MAX_ERROR_BODY`]),
    /// scrubbed of the key and the extra headers' values, as transport errors are.
    pub(crate) async fn bounded_body(
        &self,
        request: reqwest::RequestBuilder,
        limit: usize,
        too_long: &str,
    ) -> Result<Vec<u8>, ProviderError> {
        let mut response = request
            .send()
            .await
            .map_err(|err| self.transport_error(&err))?;
        let status = response.status();
        if !status.is_success() {
            let body = self.error_body(response, None).await;
            return Err(error_from_status(
                status.as_u16(),
                None,
                &self.redact(&body),
            ));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| self.transport_error(&err))?
        {
            if body.len() + chunk.len() > limit {
                return Err(ProviderError::Stream {
                    message: too_long.to_owned(),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The client for `url` with the extra headers beside `headers` (the back end's own win).
    pub(crate) fn request(
        &self,
        method: reqwest::Method,
        url: &url::Url,
        headers: &HeaderMap,
    ) -> Result<reqwest::RequestBuilder, ProviderError> {
        let client = self.clients.for_url(url)?;
        Ok(client
            .request(method, url.clone())
            .headers(self.with_extra(headers)))
    }
}

/// A stream polled inside a tracing span.
struct InSpan<S> {
    span: Span,
    inner: Pin<Box<S>>,
}

impl<S: Stream> Stream for InSpan<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let this = &mut *self;
        let _entered = this.span.enter();
        this.inner.as_mut().poll_next(cx)
    }
}

/// An error and its causes, on one line.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// The `(type, message)` in an error body, in Anthropic's, OpenAI's or Ollama's shape.
pub(crate) fn error_details(body: &str) -> (Option<String>, String) {
    let fallback = || truncate(body.trim());
    let Ok(json) = serde_json::from_str::<Value>(body) else {
        return (None, fallback());
    };
    let error = json.get("error").unwrap_or(&json);
    if let Some(text) = error.as_str() {
        return (None, truncate(text));
    }
    // LiteLLM writes Python's `None` for a missing type, and a status as the code ("429").
    let kind = ["type", "code"]
        .iter()
        .filter_map(|key| error.get(*key).and_then(Value::as_str))
        .find(|kind| {
            *kind != "error" && *kind != "None" && !kind.bytes().all(|b| b.is_ascii_digit())
        })
        .map(str::to_owned);
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .map(truncate)
        .unwrap_or_else(fallback);
    (kind, message)
}

fn truncate(text: &str) -> String {
    if text.len() <= MAX_ERROR_MESSAGE {
        return text.to_owned();
    }
    let mut end = MAX_ERROR_MESSAGE;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn mentions_context_length(kind: Option<&str>, message: &str) -> bool {
    if kind == Some("context_length_exceeded") {
        return true;
    }
    let lower = message.to_ascii_lowercase();
    [
        "prompt is too long",
        "context length",
        "context window",
        "maximum context",
        "context_length_exceeded",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The error for an HTTP failure status and its body.
pub(crate) fn error_from_status(
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
) -> ProviderError {
    let (kind, message) = error_details(body);
    let message = if message.is_empty() {
        format!("HTTP {status}")
    } else {
        message
    };
    match status {
        401 | 403 => ProviderError::Auth { message },
        429 => ProviderError::RateLimited {
            retry_after,
            message,
        },
        529 => ProviderError::Overloaded { message },
        _ if kind.as_deref() == Some("overloaded_error") => ProviderError::Overloaded { message },
        408 | 409 => ProviderError::Server { status, message },
        _ if status >= 500 => ProviderError::Server { status, message },
        _ if mentions_context_length(kind.as_deref(), &message) => {
            ProviderError::ContextLengthExceeded { message }
        }
        _ => ProviderError::InvalidRequest { message },
    }
}

/// The HTTP status an error body names as its `code`: OpenRouter's number (`"code": 502`),
/// LiteLLM's text (`"code": "429"`).
fn status_in_body(body: &str) -> Option<u16> {
    let json: Value = serde_json::from_str(body).ok()?;
    let code = json.get("error")?.get("code")?;
    let status = match code {
        Value::Number(number) => number.as_u64()?,
        Value::String(text) => text.parse().ok()?,
        _ => return None,
    };
    u16::try_from(status)
        .ok()
        .filter(|status| (400..=599).contains(status))
}

/// The error for an error event inside a stream that began with HTTP 200.
pub(crate) fn error_from_stream_payload(body: &str) -> ProviderError {
    let (kind, message) = error_details(body);
    match kind.as_deref() {
        Some("overloaded_error") => ProviderError::Overloaded { message },
        Some("rate_limit_error") => ProviderError::RateLimited {
            retry_after: None,
            message,
        },
        Some("authentication_error" | "permission_error") => ProviderError::Auth { message },
        Some("api_error" | "server_error") => ProviderError::Server {
            status: 500,
            message,
        },
        Some("timeout_error") => ProviderError::Server {
            status: 504,
            message,
        },
        kind if mentions_context_length(kind, &message) => {
            ProviderError::ContextLengthExceeded { message }
        }
        Some("invalid_request_error" | "not_found_error" | "request_too_large") => {
            ProviderError::InvalidRequest { message }
        }
        // A kind keel does not know, or none: a gateway's error names the status the request
        // would have had.
        _ => match status_in_body(body) {
            Some(status) => error_from_status(status, None, body),
            None => ProviderError::Stream {
                message: format!("the server reported an error mid-stream: {message}"),
            },
        },
    }
}

/// Joins a base URL and an endpoint path, keeping the base's own path.
pub(crate) fn endpoint(base_url: &str, path: &str) -> Result<url::Url, ProviderError> {
    let base = base_url.trim_end_matches('/');
    let url = format!("{base}/{}", path.trim_start_matches('/'));
    let parsed = url::Url::parse(&url).map_err(|err| ProviderError::Config {
        message: format!(
            "base URL {base_url:?} is not a valid URL ({err}); give one like https://api.example.com/v1"
        ),
    })?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed),
        other => Err(ProviderError::Config {
            message: format!("base URL {base_url:?} uses {other}:, expected http: or https:"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_errors() {
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(
            error_from_status(529, None, anthropic),
            ProviderError::Overloaded {
                message: "Overloaded".into()
            }
        );
        let openai = r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","code":"context_length_exceeded"}}"#;
        assert!(matches!(
            error_from_status(400, None, openai),
            ProviderError::ContextLengthExceeded { .. }
        ));
        let too_long = r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#;
        assert!(matches!(
            error_from_status(400, None, too_long),
            ProviderError::ContextLengthExceeded { .. }
        ));
        assert_eq!(
            error_from_status(404, None, r#"{"error":"model 'x' not found"}"#),
            ProviderError::InvalidRequest {
                message: "model 'x' not found".into()
            }
        );
        assert!(matches!(
            error_from_status(401, None, "nope"),
            ProviderError::Auth { .. }
        ));
        assert_eq!(
            error_from_status(503, None, ""),
            ProviderError::Server {
                status: 503,
                message: "HTTP 503".into()
            }
        );
    }

    #[test]
    fn endpoints_keep_the_base_path() {
        assert_eq!(
            endpoint("http://localhost:11434/v1/", "/chat/completions")
                .unwrap()
                .as_str(),
            "http://localhost:11434/v1/chat/completions"
        );
        assert!(matches!(
            endpoint("localhost:11434", "x"),
            Err(ProviderError::Config { .. })
        ));
        assert!(matches!(
            endpoint("not a url", "x"),
            Err(ProviderError::Config { .. })
        ));
    }
}

#[cfg(test)]
mod client_tests {
    use super::*;

    /// Answers one HTTP request with a 500 and returns; the response only has to arrive.
    async fn answer_once(listener: tokio::net::TcpListener) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        if let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = vec![0u8; 4096];
            let _ = socket.read(&mut buf).await;
            let _ = socket
                .write_all(b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n")
                .await;
        }
    }

    #[tokio::test]
    async fn an_http_endpoint_never_builds_the_tls_client() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = endpoint(&format!("http://{}", listener.local_addr().unwrap()), "v1").unwrap();
        let server = tokio::spawn(answer_once(listener));
        let transport = HttpTransport::new(None).unwrap();
        assert!(!transport.clients.tls_built(), "built before any request");
        let request = PreparedRequest {
            url,
            headers: HeaderMap::new(),
            body: Bytes::new(),
        };
        let failure = transport.send(&request, None).await.unwrap_err();
        assert!(
            matches!(failure.error, ProviderError::Server { status: 500, .. }),
            "{:?}",
            failure.error
        );
        server.await.unwrap();
        assert!(
            !transport.clients.tls_built(),
            "an http:// request built the TLS client"
        );
        assert!(transport.clients.plain.get().is_some());
    }

    #[test]
    fn an_https_endpoint_builds_the_tls_client() {
        let clients = Clients::default();
        let url = url::Url::parse("https://api.example.com/v1").unwrap();
        clients.for_url(&url).unwrap();
        assert!(clients.tls_built());
        assert!(clients.plain.get().is_none());
    }
}
