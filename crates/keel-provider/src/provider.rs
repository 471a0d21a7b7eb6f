//! The one trait every model back end implements.

use futures::stream::BoxStream;

use crate::error::ProviderError;
use crate::models::ModelList;
use crate::served::ServedContext;
use crate::stream::{StreamEvent, collect_response};
use crate::types::{CompletionRequest, ToolUseResponse};

/// A model behind some API. Object safe: hold it as `Arc<dyn Provider>`.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// A short name for logs and errors, e.g. `anthropic`.
    fn name(&self) -> &str;

    /// Whether the back end can call tools.
    fn supports_tool_use(&self) -> bool {
        true
    }

    /// Streams the reply to `req`. The request is encoded before this returns, so the stream
    /// borrows only the provider. Retries happen inside; each shows as a
    /// [`StreamEvent::Retrying`]. The stream ends after [`StreamEvent::MessageEnd`] or the
    /// first error.
    fn stream(&self, req: &CompletionRequest) -> BoxStream<'_, Result<StreamEvent, ProviderError>>;

    /// The models this provider serves, as its API lists them (Anthropic's `GET /v1/models`,
    /// an OpenAI-compatible `GET {base}/models`): one bounded attempt of at most
    /// [`MODEL_LIST_TIMEOUT`](crate::MODEL_LIST_TIMEOUT), never retried. A back end with no
    /// listing answers [`ProviderError::Unsupported`], which is the default.
    async fn list_models(&self) -> Result<ModelList, ProviderError> {
        Err(ProviderError::Unsupported {
            message: format!("{} has no model list", self.name()),
        })
    }

    /// The context window the server serves `model` with, when it says so: a local
    /// OpenAI-compatible server (Ollama, llama.cpp, vLLM) is asked, within
    /// [`SERVED_CONTEXT_TIMEOUT`](crate::SERVED_CONTEXT_TIMEOUT), never retried. `None` when
    /// unknown, which is the default: a hosted API's window is the model's, in the
    /// [catalog](crate::ModelCatalog).
    async fn served_context(&self, _model: &str) -> Option<ServedContext> {
        None
    }

    /// The name of the provider that serves `model`, for telling usage and cost apart per
    /// provider: this provider's [`name`](Self::name), unless it routes models to others (a
    /// [`ModelRouter`](crate::ModelRouter) gives the name each was registered under). A
    /// provider wrapping another forwards this as it forwards [`stream`](Self::stream).
    fn served_by(&self, model: &str) -> &str {
        let _ = model;
        self.name()
    }

    /// The whole reply to `req`, assembled from [`stream`](Self::stream).
    async fn tool_use_completion(
        &self,
        req: &CompletionRequest,
    ) -> Result<ToolUseResponse, ProviderError> {
        collect_response(self.stream(req)).await
    }
}
