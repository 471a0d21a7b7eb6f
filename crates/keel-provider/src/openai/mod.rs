//! The OpenAI back end: Chat Completions (`POST {base_url}/chat/completions`, streamed), for
//! OpenAI itself and for compatible servers (Ollama, vLLM, llama.cpp, OpenRouter), and the
//! Responses API (`POST {base_url}/responses`) for the models only it serves.

mod parse;
pub(crate) mod request;
mod responses;

use std::time::Duration;

use futures::stream::BoxStream;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
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

pub use parse::OpenAiStreamParser;
pub use request::MaxTokensField;
pub use responses::{ResponsesStreamParser, needs_responses};

/// Which of OpenAI's APIs a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpenAiApi {
    /// Chat Completions for every model: what compatible servers speak.
    ChatCompletions,
    /// The Responses API for every model (a config's `kind = "openai-responses"`).
    Responses,
    /// Chat Completions, except for the models only the Responses API serves
    /// ([`needs_responses`]): the default for OpenAI's own API.
    Auto,
}

/// OpenAI's own API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Talks to an OpenAI-compatible Chat Completions API.
///
/// ```no_run
/// use keel_provider::{CompletionRequest, Message, OpenAiProvider, Provider};
///
/// # async fn run() -> Result<(), keel_provider::ProviderError> {
/// // A local Ollama needs no key.
/// let provider = OpenAiProvider::new("http://localhost:11434/v1", None)?;
/// let request = CompletionRequest::new("qwen3:8b").message(Message::user("Hi"));
/// let reply = provider.tool_use_completion(&request).await?;
/// println!("{}", reply.text());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    transport: HttpTransport,
    url: url::Url,
    /// `{base}/responses`, for the models the Responses API serves.
    responses_url: url::Url,
    /// `{base}/models`, where the served models are listed.
    models_url: url::Url,
    max_tokens_field: MaxTokensField,
    api: OpenAiApi,
}

impl OpenAiProvider {
    /// A provider for the server at `base_url` (the part before `/chat/completions`, e.g.
    /// `https://api.openai.com/v1`). The key is optional: local servers take none. OpenAI's
    /// own API is spoken with [`OpenAiApi::Auto`] (the Responses API for the models only it
    /// serves), every other server with [`OpenAiApi::ChatCompletions`].
    pub fn new(base_url: &str, api_key: Option<ApiKey>) -> Result<Self, ProviderError> {
        let url = endpoint(base_url, "chat/completions")?;
        let openai = is_openai(&url);
        Ok(Self {
            responses_url: endpoint(base_url, "responses")?,
            models_url: endpoint(base_url, "models")?,
            max_tokens_field: if openai {
                MaxTokensField::MaxCompletionTokens
            } else {
                MaxTokensField::MaxTokens
            },
            api: if openai {
                OpenAiApi::Auto
            } else {
                OpenAiApi::ChatCompletions
            },
            transport: HttpTransport::new(api_key)?,
            url,
        })
    }

    /// Chooses the API spoken (see [`new`](Self::new) for the default).
    pub fn with_api(mut self, api: OpenAiApi) -> Self {
        self.api = api;
        self
    }

    /// The API spoken.
    pub fn api(&self) -> OpenAiApi {
        self.api
    }

    /// Whether a request for `model` goes to the Responses API.
    pub fn uses_responses(&self, model: &str) -> bool {
        match self.api {
            OpenAiApi::ChatCompletions => false,
            OpenAiApi::Responses => true,
            OpenAiApi::Auto => needs_responses(model),
        }
    }

    /// A provider configured from `OPENAI_BASE_URL` (default OpenAI's API) and
    /// `OPENAI_API_KEY` (required for OpenAI's API, optional elsewhere): the rules of
    /// [`ProviderConfig`](crate::ProviderConfig) for [`ProviderKind::OpenAi`](crate::ProviderKind).
    pub fn from_env() -> Result<Self, ProviderError> {
        crate::ProviderConfig::new(crate::ProviderKind::OpenAi)
            .openai_with(&crate::config::process_env)
            .map(|(provider, _)| provider)
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

    /// Chooses the field that carries the output limit. The default is
    /// `max_completion_tokens` for api.openai.com and `max_tokens` for everything else.
    pub fn with_max_tokens_field(mut self, field: MaxTokensField) -> Self {
        self.max_tokens_field = field;
        self
    }

    /// The Chat Completions endpoint.
    pub fn url(&self) -> &url::Url {
        &self.url
    }

    /// The endpoint a request for `model` goes to: Chat Completions' or the Responses API's.
    pub fn url_for(&self, model: &str) -> &url::Url {
        if self.uses_responses(model) {
            &self.responses_url
        } else {
            &self.url
        }
    }

    /// The exact JSON body sent for `req`, in the API its model is spoken with.
    pub fn request_body(&self, req: &CompletionRequest) -> Result<Vec<u8>, ProviderError> {
        let encoded = if self.uses_responses(&req.model) {
            serde_json::to_vec(&responses::request::body(req))
        } else {
            serde_json::to_vec(&request::body(req, self.max_tokens_field))
        };
        encoded.map_err(|err| ProviderError::InvalidRequest {
            message: format!("cannot encode the request: {err}"),
        })
    }

    fn prepare(&self, req: &CompletionRequest) -> Result<PreparedRequest, ProviderError> {
        Ok(PreparedRequest::streamed_json(
            self.url_for(&req.model).clone(),
            self.api_headers()?,
            self.request_body(req)?,
        ))
    }

    /// The headers every request carries: the key as a bearer token, if there is one.
    fn api_headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.transport.key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                    ProviderError::Config {
                        message: "the OpenAI API key contains characters a header cannot carry"
                            .into(),
                    }
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Ok(headers)
    }
}

/// Whether `url` is OpenAI's own API.
fn is_openai(url: &url::Url) -> bool {
    url.host_str() == Some("api.openai.com")
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        match self.api {
            OpenAiApi::Responses => "openai-responses",
            _ => "openai",
        }
    }

    fn stream(&self, req: &CompletionRequest) -> BoxStream<'_, Result<StreamEvent, ProviderError>> {
        if self.uses_responses(&req.model) {
            let span = tracing::info_span!("model_call", provider = "openai", api = "responses", model = %req.model);
            self.transport.stream(
                self.prepare(req),
                span,
                SseDriver::<responses::parse::ResponsesEvents>::default,
            )
        } else {
            let span = tracing::info_span!("model_call", provider = "openai", model = %req.model);
            self.transport.stream(
                self.prepare(req),
                span,
                SseDriver::<parse::OpenAiEvents>::default,
            )
        }
    }

    /// A local or private server is asked what it serves `model` with: Ollama's
    /// `/api/show` and `/api/ps`, llama-server's `/props`, vLLM's `{base}/models`; a public
    /// host (api.openai.com among them) never is.
    async fn served_context(&self, model: &str) -> Option<crate::ServedContext> {
        let span = tracing::info_span!("served_context", provider = "openai", %model);
        crate::served::probe(
            &self.transport,
            &self.models_url,
            &self.api_headers().ok()?,
            model,
        )
        .instrument(span)
        .await
    }

    /// `GET {base}/models` beside the chat endpoint (OpenAI, Ollama, vLLM, llama.cpp and
    /// OpenRouter all serve it).
    async fn list_models(&self) -> Result<ModelList, ProviderError> {
        let span = tracing::info_span!("model_list", provider = "openai");
        self.transport
            .list_models(&self.models_url, self.api_headers()?, false)
            .instrument(span)
            .await
    }
}
