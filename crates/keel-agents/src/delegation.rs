//! What every delegated run shares with the agent that delegates: the provider, the models,
//! the approver, the permission rules and the hooks. A delegated run can never do what its
//! parent may not.

use std::sync::Arc;

use keel_engine::{AgentBuilder, Approver, DenyGated, Hooks, PermissionRules};
use keel_provider::{ModelCatalog, Provider};
use keel_snapshot::Snapshots;

/// The models delegation chooses from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Models {
    /// The configured model (`default`).
    pub default: String,
    /// The cheap model (`small`, `fast`).
    pub small: String,
    /// The strong model (`strong`); the default model when unset.
    pub strong: Option<String>,
}

impl Models {
    /// `default` and `small`, no separate strong model.
    pub fn new(default: impl Into<String>, small: impl Into<String>) -> Self {
        Self {
            default: default.into(),
            small: small.into(),
            strong: None,
        }
    }

    /// The model a tier or a name stands for: `default`; `small` or `fast`; `strong`; any
    /// other text is a model name and is used as given.
    pub fn resolve(&self, tier_or_name: &str) -> String {
        match tier_or_name.trim() {
            "" | "default" => self.default.clone(),
            "small" | "fast" => self.small.clone(),
            "strong" => self.strong.clone().unwrap_or_else(|| self.default.clone()),
            name => name.to_owned(),
        }
    }

    /// A sensible cheap model for a provider's default model: Claude Haiku for Claude models,
    /// GPT-4.1 mini for OpenAI's, else the default model itself (a local server may serve
    /// only one).
    pub fn small_for(default: &str) -> String {
        if default.starts_with("claude") {
            "claude-haiku-4-5".into()
        } else if default.starts_with("gpt-") || default.starts_with('o') && default.len() <= 8 {
            "gpt-4.1-mini".into()
        } else {
            default.to_owned()
        }
    }
}

/// The parent's side of every delegated run; cheap to clone.
#[derive(Clone)]
pub struct Delegation {
    provider: Arc<dyn Provider>,
    models: Models,
    approver: Arc<dyn Approver>,
    permissions: PermissionRules,
    hooks: Hooks,
    catalog: Arc<ModelCatalog>,
    snapshots: Option<Arc<dyn Snapshots>>,
}

impl std::fmt::Debug for Delegation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegation")
            .field("provider", &self.provider.name())
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

impl Delegation {
    /// Delegation to `provider` with `models`; gated calls are refused ([`DenyGated`]) until
    /// [`Delegation::approver`] says otherwise.
    pub fn new(provider: Arc<dyn Provider>, models: Models) -> Self {
        Self {
            provider,
            models,
            approver: Arc::new(DenyGated),
            permissions: PermissionRules::default(),
            hooks: Hooks::new(),
            catalog: Arc::new(ModelCatalog::built_in()),
            snapshots: None,
        }
    }

    /// The parent's snapshot store: delegated runs snapshot the workspace before each of
    /// their own calls that may change it, as the parent does (sub-agents and teams run in
    /// parallel, so the parent cannot do it for them).
    pub fn snapshots(mut self, snapshots: Arc<dyn Snapshots>) -> Self {
        self.snapshots = Some(snapshots);
        self
    }

    /// Who approves the delegated runs' gated calls: give the parent's approver.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = approver;
        self
    }

    /// The parent's permission rules, checked in delegated runs too.
    pub fn permissions(mut self, rules: PermissionRules) -> Self {
        self.permissions = rules;
        self
    }

    /// The parent's hooks, run in delegated runs too.
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// Prices and context windows (default: the built-in catalog).
    pub fn catalog(mut self, catalog: ModelCatalog) -> Self {
        self.catalog = Arc::new(catalog);
        self
    }

    /// The models.
    pub fn models(&self) -> &Models {
        &self.models
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The context window of `model`, if the catalog knows it.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.catalog.get(model).map(|info| info.context_window)
    }

    /// An agent builder for a delegated run on `model`: this provider, approver, rules, hooks
    /// and snapshot store; no session store (the parent's session records the call).
    /// The caller adds the tools, the system prompt and the limits.
    pub fn agent_builder(&self, model: &str) -> AgentBuilder {
        let builder = keel_engine::Agent::builder(self.provider.clone())
            .model(model)
            .approver(self.approver.clone())
            .permissions(self.permissions.clone())
            .hooks(self.hooks.clone())
            .catalog((*self.catalog).clone());
        match &self.snapshots {
            Some(snapshots) => builder.snapshots(snapshots.clone()),
            None => builder,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_resolve_to_models_and_names_pass_through() {
        let models = Models::new("claude-sonnet-4-5", "claude-haiku-4-5");
        assert_eq!(models.resolve("default"), "claude-sonnet-4-5");
        assert_eq!(models.resolve("small"), "claude-haiku-4-5");
        assert_eq!(models.resolve("fast"), "claude-haiku-4-5");
        assert_eq!(models.resolve("strong"), "claude-sonnet-4-5");
        assert_eq!(models.resolve("claude-opus-4-1"), "claude-opus-4-1");
        assert_eq!(Models::small_for("claude-sonnet-4-5"), "claude-haiku-4-5");
        assert_eq!(Models::small_for("gpt-4.1"), "gpt-4.1-mini");
        assert_eq!(Models::small_for("qwen3:8b"), "qwen3:8b");
    }
}
