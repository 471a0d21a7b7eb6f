//! [`ModelRouter`]: one [`Provider`] over several, choosing by the request's model, so that a
//! cheap tier can run on a local server while the main loop uses a hosted model.

use std::sync::Arc;

use futures::stream::BoxStream;

use crate::error::ProviderError;
use crate::models::ModelList;
use crate::provider::Provider;
use crate::stream::StreamEvent;
use crate::types::{CompletionRequest, ToolUseResponse};

/// A provider that sends each request to the provider registered for its model, and every
/// other request to the main provider.
///
/// Models are matched by their exact id (surrounding blanks ignored). The router answers to the
/// main provider's [`name`](Provider::name), tool support and model list;
/// [`served_by`](Provider::served_by) gives the name a model's provider was registered under,
/// so usage and cost can be told apart per provider.
///
/// ```
/// use std::sync::Arc;
/// use keel_provider::{ModelRouter, OpenAiProvider, Provider};
///
/// let hosted = Arc::new(OpenAiProvider::new("https://gateway.example/v1", None)?);
/// let local = Arc::new(OpenAiProvider::new("http://localhost:11434/v1", None)?);
/// let router = ModelRouter::new("gateway", hosted).route("qwen3:8b", "local", local);
/// assert_eq!(router.served_by("qwen3:8b"), "local");
/// assert_eq!(router.served_by("gpt-6.2-sol"), "gateway");
/// # Ok::<(), keel_provider::ProviderError>(())
/// ```
#[derive(Clone)]
pub struct ModelRouter {
    main_name: String,
    main: Arc<dyn Provider>,
    routes: Vec<Route>,
}

/// One model served by a provider other than the main one.
#[derive(Clone)]
struct Route {
    model: String,
    name: String,
    provider: Arc<dyn Provider>,
}

impl std::fmt::Debug for ModelRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let routes: Vec<(&str, &str)> = self
            .routes
            .iter()
            .map(|route| (route.model.as_str(), route.name.as_str()))
            .collect();
        f.debug_struct("ModelRouter")
            .field("main", &self.main_name)
            .field("routes", &routes)
            .finish()
    }
}

impl ModelRouter {
    /// A router sending everything to `main`, known as `name` (a config's provider name).
    pub fn new(name: impl Into<String>, main: Arc<dyn Provider>) -> Self {
        Self {
            main_name: name.into(),
            main,
            routes: Vec::new(),
        }
    }

    /// Sends requests for `model` to `provider`, known as `name`; a later route for the same
    /// model replaces an earlier one.
    #[must_use]
    pub fn route(
        mut self,
        model: impl Into<String>,
        name: impl Into<String>,
        provider: Arc<dyn Provider>,
    ) -> Self {
        let model = model.into().trim().to_owned();
        self.routes.retain(|route| route.model != model);
        self.routes.push(Route {
            model,
            name: name.into(),
            provider,
        });
        self
    }

    /// The name and the provider requests for `model` go to.
    pub fn provider_for(&self, model: &str) -> (&str, &Arc<dyn Provider>) {
        let model = model.trim();
        self.routes
            .iter()
            .find(|route| route.model == model)
            .map_or((self.main_name.as_str(), &self.main), |route| {
                (route.name.as_str(), &route.provider)
            })
    }

    /// The models sent elsewhere than the main provider, with the name of the provider each
    /// goes to, in the order they were added.
    pub fn routes(&self) -> impl Iterator<Item = (&str, &str)> {
        self.routes
            .iter()
            .map(|route| (route.model.as_str(), route.name.as_str()))
    }
}

#[async_trait::async_trait]
impl Provider for ModelRouter {
    fn name(&self) -> &str {
        self.main.name()
    }

    fn supports_tool_use(&self) -> bool {
        self.main.supports_tool_use()
    }

    fn stream(&self, req: &CompletionRequest) -> BoxStream<'_, Result<StreamEvent, ProviderError>> {
        let (name, provider) = self.provider_for(&req.model);
        tracing::debug!(model = %req.model, provider = name, "routing the request");
        provider.stream(req)
    }

    async fn list_models(&self) -> Result<ModelList, ProviderError> {
        self.main.list_models().await
    }

    async fn tool_use_completion(
        &self,
        req: &CompletionRequest,
    ) -> Result<ToolUseResponse, ProviderError> {
        let (name, provider) = self.provider_for(&req.model);
        tracing::debug!(model = %req.model, provider = name, "routing the request");
        provider.tool_use_completion(req).await
    }

    async fn served_context(&self, model: &str) -> Option<crate::ServedContext> {
        self.provider_for(model).1.served_context(model).await
    }

    fn served_by(&self, model: &str) -> &str {
        self.provider_for(model).0
    }
}
