//! An agent's configuration: one shared value that [`Agent`](crate::Agent) and every
//! [`Session`](crate::Session) made from it hold, read through methods.

use std::sync::Arc;

use keel_provider::{ModelCatalog, Provider};
use keel_snapshot::Snapshots;
use keel_tool::ToolRegistry;

use crate::approval::Approver;
use crate::compaction::CompactionPolicy;
use crate::hooks::Hooks;
use crate::notify::Notifier;
use crate::permissions::PermissionRules;
use crate::session_store::SessionStore;

/// What [`AgentBuilder::build`](crate::AgentBuilder::build) checked and put together.
#[derive(Clone)]
pub(crate) struct AgentConfig {
    pub(super) provider: Arc<dyn Provider>,
    pub(super) model: String,
    pub(super) system_prompt: Option<String>,
    pub(super) tools: ToolRegistry,
    pub(super) max_iterations: u32,
    pub(super) max_tokens: u32,
    pub(super) approver: Arc<dyn Approver>,
    pub(super) catalog: Arc<ModelCatalog>,
    pub(super) store: Option<Arc<dyn SessionStore>>,
    pub(super) snapshots: Option<Arc<dyn Snapshots>>,
    pub(super) stream_retries: u32,
    pub(super) hooks: Hooks,
    pub(super) permissions: PermissionRules,
    pub(super) compaction: CompactionPolicy,
    pub(super) output_token_budget: Option<u64>,
    pub(super) cost_budget_usd: Option<f64>,
    pub(super) fallback_model: Option<String>,
    pub(super) notifier: Option<Arc<dyn Notifier>>,
}

impl AgentConfig {
    /// The model provider.
    pub(crate) fn provider(&self) -> &dyn Provider {
        self.provider.as_ref()
    }

    /// The model's id.
    pub(crate) fn model(&self) -> &str {
        &self.model
    }

    /// The same configuration calling `model`.
    pub(crate) fn set_model(&mut self, model: String) {
        self.model = model;
    }

    /// The system prompt, if any.
    pub(crate) fn system_prompt(&self) -> Option<&str> {
        self.system_prompt.as_deref()
    }

    /// The tools.
    pub(crate) fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The most model calls in one run.
    pub(crate) fn max_iterations(&self) -> u32 {
        self.max_iterations
    }

    /// The output token limit of each model call.
    pub(crate) fn max_tokens(&self) -> u32 {
        self.max_tokens
    }

    /// Who approves gated calls.
    pub(crate) fn approver(&self) -> &dyn Approver {
        self.approver.as_ref()
    }

    /// Prices and context windows.
    pub(crate) fn catalog(&self) -> &ModelCatalog {
        &self.catalog
    }

    /// Where sessions are saved, if anywhere.
    pub(crate) fn store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.store.as_ref()
    }

    /// Where the workspace is snapshotted before changes, if anywhere.
    pub(crate) fn snapshots(&self) -> Option<&Arc<dyn Snapshots>> {
        self.snapshots.as_ref()
    }

    /// How many times a reply cut off mid-stream is asked for again.
    pub(crate) fn stream_retries(&self) -> u32 {
        self.stream_retries
    }

    /// The hooks.
    pub(crate) fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    /// The allow and deny rules.
    pub(crate) fn permissions(&self) -> &PermissionRules {
        &self.permissions
    }

    /// When the history is compacted.
    pub(crate) fn compaction(&self) -> &CompactionPolicy {
        &self.compaction
    }

    /// The most output tokens one run may write, if limited.
    pub(crate) fn output_token_budget(&self) -> Option<u64> {
        self.output_token_budget
    }

    pub(crate) fn cost_budget_usd(&self) -> Option<f64> {
        self.cost_budget_usd
    }

    pub(crate) fn fallback_model(&self) -> Option<&str> {
        self.fallback_model.as_deref()
    }

    /// Where notices from outside the conversation come from, if anywhere.
    pub(crate) fn notifier(&self) -> Option<&Arc<dyn Notifier>> {
        self.notifier.as_ref()
    }
}
