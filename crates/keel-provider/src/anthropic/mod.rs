//! The Anthropic Messages API back end (`POST /v1/messages`, streamed).

mod parse;
mod request;

use std::time::Duration;

use futures::stream::BoxStream;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use tracing::Instrument;

use crate::error::ProviderError;
use crate::http::{HttpTransport, PreparedRequest, endpoint};
use crate::models::ModelList;
use crate::provider::Provider;
use crate::retry::RetryPolicy;
use crate::secret::ApiKey;
use crate::sse::SseDriver;
use crate::stream::StreamEvent;
use crate::types::CompletionRequest;

pub use parse::AnthropicStreamParser;

/// Where the Anthropic API lives unless told otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent.
pub const API_VERSION: &str = "2023-06-01";

/// Talks to Anthropic's Messages API, or anything that speaks it.
///
/// ```no_run
/// use keel_provider::{AnthropicProvider, ApiKey, CompletionRequest, Message, Provider};
///
/// # async fn run() -> Result<(), keel_provider::ProviderError> {
/// let provider = AnthropicProvider::new(ApiKey::new("sk-ant-..."))?;
/// let request = CompletionRequest::new("claude-sonnet-4-5").message(Message::user("Hi"));
/// let reply = provider.tool_use_completion(&request).await?;
/// println!("{}", reply.text());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    transport: HttpTransport,
    url: url::Url,
    /// `GET` here lists the served models: `models` beside `messages`.
    models_url: url::Url,
    betas: Vec<String>,
    /// The key goes in `Authorization: Bearer` (a gateway's token, `ANTHROPIC_AUTH_TOKEN`)
    /// instead of `x-api-key`.
    bearer: bool,
}

impl AnthropicProvider {
    /// A provider for the public API with this key.
    pub fn new(api_key: ApiKey) -> Result<Self, ProviderError> {
        Ok(Self {
            transport: HttpTransport::new(Some(api_key))?,
            url: messages_url(DEFAULT_BASE_URL)?,
            models_url: api_url(DEFAULT_BASE_URL, "models")?,
            betas: Vec::new(),
            bearer: false,
        })
    }

    /// A provider that authenticates with a bearer token, as gateways (LiteLLM, OpenRouter,
    /// corporate proxies) and Claude Code's `ANTHROPIC_AUTH_TOKEN` do: `Authorization: Bearer
    /// <token>` instead of `x-api-key`.
    pub fn with_auth_token(token: ApiKey) -> Result<Self, ProviderError> {
        Ok(Self {
            bearer: true,
            ..Self::new(token)?
        })
    }

    /// A provider configured from `ANTHROPIC_API_KEY` and, if set, `ANTHROPIC_BASE_URL`: the
    /// rules of [`ProviderConfig`](crate::ProviderConfig) for
    /// [`ProviderKind::Anthropic`](crate::ProviderKind).
    pub fn from_env() -> Result<Self, ProviderError> {
        crate::ProviderConfig::new(crate::ProviderKind::Anthropic)
            .anthropic_with(&crate::config::process_env)
            .map(|(provider, _)| provider)
    }

    /// Sends requests to `base_url` instead (`https://host` or `https://host/v1`).
    pub fn with_base_url(mut self, base_url: &str) -> Result<Self, ProviderError> {
        self.url = messages_url(base_url)?;
        self.models_url = api_url(base_url, "models")?;
        Ok(self)
    }

    /// Sets the retry policy.
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.transport.retry = policy;
        self
    }

    /// Adds `headers` to every request (a gateway's: an organisation id, a routing key), besides
    /// the back end's own, which win on a clash. Values are marked sensitive: never in `Debug`,
    /// removed from error messages.
    pub fn with_headers(mut self, headers: &[(String, String)]) -> Result<Self, ProviderError> {
        self.transport.extra_headers = crate::http::header_map(headers)?;
        Ok(self)
    }

    /// Sets the longest wait for the response to start and for each next piece of a streamed
    /// reply (default [`DEFAULT_IDLE_TIMEOUT`](crate::DEFAULT_IDLE_TIMEOUT), 120 s). Running
    /// out is [`ProviderError::Timeout`] with [`TimeoutLimit::Idle`](crate::TimeoutLimit).
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.transport.idle_timeout = timeout;
        self
    }

    /// Sets the longest time one attempt may take, from sending the request to the reply's
    /// last byte (default [`DEFAULT_REQUEST_DEADLINE`](crate::DEFAULT_REQUEST_DEADLINE), one
    /// hour). Each retry has its own. It ends a reply that never finishes although data keeps
    /// arriving (a trickle of pings) with
    /// [`ProviderError::Timeout`] and [`TimeoutLimit::RequestDeadline`](crate::TimeoutLimit).
    /// A duration too long to represent as a point in time means no deadline.
    pub fn with_request_deadline(mut self, deadline: Duration) -> Self {
        self.transport.request_deadline = deadline;
        self
    }

    /// The longest wait for the next piece of a streamed reply.
    pub fn idle_timeout(&self) -> Duration {
        self.transport.idle_timeout
    }

    /// The longest time one attempt may take.
    pub fn request_deadline(&self) -> Duration {
        self.transport.request_deadline
    }

    /// Adds an `anthropic-beta` flag.
    pub fn with_beta(mut self, beta: impl Into<String>) -> Self {
        self.betas.push(beta.into());
        self
    }

    /// The endpoint requests go to.
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    /// The exact JSON body sent for `req`.
    pub fn request_body(&self, req: &CompletionRequest) -> Result<Vec<u8>, ProviderError> {
        serde_json::to_vec(&request::body(req)).map_err(|err| ProviderError::InvalidRequest {
            message: format!("cannot encode the request: {err}"),
        })
    }

    fn prepare(&self, req: &CompletionRequest) -> Result<PreparedRequest, ProviderError> {
        Ok(PreparedRequest::streamed_json(
            self.url.clone(),
            self.api_headers()?,
            self.request_body(req)?,
        ))
    }

    /// The headers every request carries: the API version, the key, the beta flags.
    fn api_headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = &self.transport.key {
            let (name, text) = if self.bearer {
                (AUTHORIZATION, format!("Bearer {}", key.expose()))
            } else {
                (
                    HeaderName::from_static("x-api-key"),
                    key.expose().to_owned(),
                )
            };
            let mut value = HeaderValue::from_str(&text).map_err(|_| ProviderError::Config {
                message: "the Anthropic API key contains characters a header cannot carry".into(),
            })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        if !self.betas.is_empty() {
            let value = HeaderValue::from_str(&self.betas.join(",")).map_err(|_| {
                ProviderError::Config {
                    message: format!("invalid anthropic-beta flags {:?}", self.betas),
                }
            })?;
            headers.insert(HeaderName::from_static("anthropic-beta"), value);
        }
        Ok(headers)
    }
}

fn messages_url(base_url: &str) -> Result<url::Url, ProviderError> {
    api_url(base_url, "messages")
}

/// `base_url` (`https://host` or `https://host/v1`) joined with `v1/{path}`.
fn api_url(base_url: &str, path: &str) -> Result<url::Url, ProviderError> {
    let base = base_url.trim_end_matches('/');
    if base.ends_with("/v1") {
        endpoint(base, path)
    } else {
        endpoint(base, &format!("v1/{path}"))
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn stream(&self, req: &CompletionRequest) -> BoxStream<'_, Result<StreamEvent, ProviderError>> {
        let span = tracing::info_span!("model_call", provider = "anthropic", model = %req.model);
        self.transport.stream(
            self.prepare(req),
            span,
            SseDriver::<parse::AnthropicEvents>::default,
        )
    }

    /// `GET /v1/models` beside the messages endpoint, every page.
    async fn list_models(&self) -> Result<ModelList, ProviderError> {
        let span = tracing::info_span!("model_list", provider = "anthropic");
        self.transport
            .list_models(&self.models_url, self.api_headers()?, true)
            .instrument(span)
            .await
    }
}
