//! The agent: a provider, a model, tools and policies, from which sessions are made.

use std::path::PathBuf;
use std::sync::Arc;

use keel_provider::{ModelCatalog, Provider};
use keel_tool::ToolRegistry;

use crate::approval::{Approver, DenyGated};
use crate::error::EngineError;
use crate::session::Session;

/// The default iteration limit of a run.
pub const DEFAULT_MAX_ITERATIONS: u32 = 25;
/// The default output token limit of one model call.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// Everything a session needs; cheap to clone.
#[derive(Clone)]
pub struct Agent {
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) model: String,
    pub(crate) system_prompt: Option<String>,
    pub(crate) tools: ToolRegistry,
    pub(crate) max_iterations: u32,
    pub(crate) max_tokens: u32,
    pub(crate) approver: Arc<dyn Approver>,
    pub(crate) catalog: Arc<ModelCatalog>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .field("tools", &self.tools.names())
            .field("max_iterations", &self.max_iterations)
            .field("max_tokens", &self.max_tokens)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts building an agent that talks to `provider`.
    pub fn builder(provider: Arc<dyn Provider>) -> AgentBuilder {
        AgentBuilder {
            provider,
            model: None,
            system_prompt: None,
            tools: ToolRegistry::new(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            max_tokens: DEFAULT_MAX_TOKENS,
            approver: Arc::new(DenyGated),
            catalog: Arc::new(ModelCatalog::built_in()),
        }
    }

    /// A new session working in `cwd`, with an empty history.
    pub fn session(&self, cwd: impl Into<PathBuf>) -> Session {
        Session::new(self.clone(), cwd.into())
    }

    /// The model's id.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    provider: Arc<dyn Provider>,
    model: Option<String>,
    system_prompt: Option<String>,
    tools: ToolRegistry,
    max_iterations: u32,
    max_tokens: u32,
    approver: Arc<dyn Approver>,
    catalog: Arc<ModelCatalog>,
}

impl AgentBuilder {
    /// The model to use (required).
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The system prompt.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// The tools the model may call.
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// The most model calls in one run (default 25).
    pub fn max_iterations(mut self, limit: u32) -> Self {
        self.max_iterations = limit;
        self
    }

    /// The output token limit of each model call (default 8192).
    pub fn max_tokens(mut self, limit: u32) -> Self {
        self.max_tokens = limit;
        self
    }

    /// Who approves gated calls (default [`DenyGated`]).
    pub fn approver(mut self, approver: impl Approver + 'static) -> Self {
        self.approver = Arc::new(approver);
        self
    }

    /// Prices and context windows (default: the built-in catalog).
    pub fn catalog(mut self, catalog: ModelCatalog) -> Self {
        self.catalog = Arc::new(catalog);
        self
    }

    /// The agent. Fails without a model or with a zero limit.
    pub fn build(self) -> Result<Agent, EngineError> {
        let model = self
            .model
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| EngineError::Config("no model given: call .model(\"...\")".into()))?;
        if self.max_iterations == 0 {
            return Err(EngineError::Config(
                "max_iterations must be at least 1".into(),
            ));
        }
        if self.max_tokens == 0 {
            return Err(EngineError::Config("max_tokens must be at least 1".into()));
        }
        Ok(Agent {
            provider: self.provider,
            model,
            system_prompt: self.system_prompt,
            tools: self.tools,
            max_iterations: self.max_iterations,
            max_tokens: self.max_tokens,
            approver: self.approver,
            catalog: self.catalog,
        })
    }
}
