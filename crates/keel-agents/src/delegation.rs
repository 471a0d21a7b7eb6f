//! What every delegated run shares with the agent that delegates: the provider, the models
//! and the [`Policies`] (approver, permission rules, hooks, sandbox policy, allow-read paths).
//! A delegated run can never do what its parent may not: [`Delegation::new`] takes the
//! parent's whole [`Policies`], and nothing in a [`Delegation`] can loosen them.

use std::path::PathBuf;
use std::sync::Arc;

use keel_engine::{AgentBuilder, Approver, DenyGated, Hooks, PermissionRules};
#[cfg(feature = "delegation")]
use keel_provider::{ModelCatalog, Provider};
use keel_sandbox::SandboxPolicy;
#[cfg(feature = "delegation")]
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

    /// The model a tier or a name stands for: `default`; `small` or `fast`; `strong`;
    /// Claude Code's family aliases `haiku`, `sonnet` and `opus` (with a Claude default model,
    /// the model each names, as [`ModelCatalog::expand_alias`](keel_provider::ModelCatalog::expand_alias)
    /// says; with another provider's, the small, default and strong model: no provider but
    /// Anthropic serves `claude-haiku-5-5`); `gpt` and `codex`, OpenAI's models of those
    /// names; any other text is a model id and is used as given.
    pub fn resolve(&self, tier_or_name: &str) -> String {
        let strong = || self.strong.clone().unwrap_or_else(|| self.default.clone());
        match tier_or_name.trim() {
            "" | "default" => self.default.clone(),
            "small" | "fast" => self.small.clone(),
            "strong" => strong(),
            alias @ ("haiku" | "sonnet" | "opus") if self.default.starts_with("claude") => {
                keel_provider::ModelCatalog::expand_alias(alias).to_owned()
            }
            "haiku" => self.small.clone(),
            "sonnet" => self.default.clone(),
            "opus" => strong(),
            name => keel_provider::ModelCatalog::expand_alias(name).to_owned(),
        }
    }

    /// A sensible cheap model for a provider's default model: the newest Claude Haiku for
    /// Claude models, GPT-6 Luna for OpenAI's, else the default model itself (a local server
    /// may serve only one).
    pub fn small_for(default: &str) -> String {
        if default.starts_with("claude") {
            keel_provider::ModelCatalog::expand_alias("haiku").to_owned()
        } else if default.starts_with("gpt-") || default.starts_with('o') && default.len() <= 8 {
            "gpt-6-luna".into()
        } else {
            default.to_owned()
        }
    }
}

/// Everything that limits what an agent may do: who approves gated calls, the permission
/// rules, the hooks, the sandbox policy of its tools and commands (mode, network, writable
/// roots, protected paths, hidden variables) and the paths its file tools may also read.
///
/// One value, owned by the agent and handed whole to every run it delegates (`code`
/// sessions, sub-agents, team steps, background tasks), so a delegated run is never freer
/// than its parent. [`Policies::new`] starts from the strictest answers: gated calls refused
/// ([`DenyGated`]), no allow rules.
///
/// ```
/// use std::sync::Arc;
/// use keel_agents::Policies;
/// use keel_engine::{AllowAll, PermissionRules};
/// use keel_sandbox::SandboxPolicy;
///
/// let policies = Policies::new(SandboxPolicy::default())
///     .with_permissions(PermissionRules::parse(&[], &["run_command(rm:*)".into()])?)
///     .with_approver(Arc::new(AllowAll));
/// assert!(!policies.sandbox().network);
/// # Ok::<(), keel_engine::PermissionError>(())
/// ```
#[derive(Clone)]
pub struct Policies {
    approver: Arc<dyn Approver>,
    permissions: PermissionRules,
    hooks: Hooks,
    sandbox: SandboxPolicy,
    allow_read: Vec<PathBuf>,
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("permissions", &self.permissions)
            .field("hooks", &self.hooks)
            .field("sandbox", &self.sandbox)
            .field("allow_read", &self.allow_read)
            .finish_non_exhaustive()
    }
}

impl Policies {
    /// `sandbox` for tools and commands; gated calls refused ([`DenyGated`]), no rules, no
    /// hooks, no extra readable paths.
    pub fn new(sandbox: SandboxPolicy) -> Self {
        Self {
            approver: Arc::new(DenyGated),
            permissions: PermissionRules::default(),
            hooks: Hooks::new(),
            sandbox,
            allow_read: Vec::new(),
        }
    }

    /// Who approves gated calls.
    #[must_use]
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = approver;
        self
    }

    /// The permission rules.
    #[must_use]
    pub fn with_permissions(mut self, rules: PermissionRules) -> Self {
        self.permissions = rules;
        self
    }

    /// The hooks. The sandbox policy's hidden variables are hidden from their commands too.
    #[must_use]
    pub fn with_hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// Paths the file tools may also read (never write).
    #[must_use]
    pub fn with_allow_read(mut self, paths: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        self.allow_read = paths.into_iter().map(Into::into).collect();
        self
    }

    /// The approver.
    pub fn approver(&self) -> &Arc<dyn Approver> {
        &self.approver
    }

    /// The permission rules.
    pub fn permissions(&self) -> &PermissionRules {
        &self.permissions
    }

    /// The hooks, with the sandbox policy's hidden variables hidden from their commands.
    pub fn hooks(&self) -> Hooks {
        self.hooks.clone().hide_env(self.sandbox.hidden_env.clone())
    }

    /// The sandbox policy.
    pub fn sandbox(&self) -> &SandboxPolicy {
        &self.sandbox
    }

    /// The paths the file tools may also read.
    pub fn allow_read(&self) -> &[PathBuf] {
        &self.allow_read
    }

    /// `builder` with this approver, these rules and hooks: how an agent, and each of its
    /// delegated runs, takes them.
    pub fn apply(&self, builder: AgentBuilder) -> AgentBuilder {
        builder
            .approver(self.approver.clone())
            .permissions(self.permissions.clone())
            .hooks(self.hooks())
    }
}

/// The parent's side of every delegated run; cheap to clone.
#[cfg(feature = "delegation")]
#[derive(Clone)]
pub struct Delegation {
    provider: Arc<dyn Provider>,
    models: Models,
    policies: Policies,
    catalog: Arc<ModelCatalog>,
    snapshots: Option<Arc<dyn Snapshots>>,
    summary_model: Option<String>,
}

#[cfg(feature = "delegation")]
impl std::fmt::Debug for Delegation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegation")
            .field("provider", &self.provider.name())
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "delegation")]
impl Delegation {
    /// Delegation to `provider` with `models`, under the parent's `policies`: every delegated
    /// run takes them whole.
    pub fn new(provider: Arc<dyn Provider>, models: Models, policies: Policies) -> Self {
        Self {
            provider,
            models,
            policies,
            catalog: Arc::new(ModelCatalog::built_in()),
            snapshots: None,
            summary_model: None,
        }
    }

    /// The parent's snapshot store: delegated runs snapshot the workspace before each of
    /// their own calls that may change it, as the parent does (sub-agents and teams run in
    /// parallel, so the parent cannot do it for them).
    pub fn snapshots(mut self, snapshots: Arc<dyn Snapshots>) -> Self {
        self.snapshots = Some(snapshots);
        self
    }

    /// The parent's policies, which every delegated run takes.
    pub fn policies(&self) -> &Policies {
        &self.policies
    }

    /// Prices and context windows (default: the built-in catalog): delegated runs price
    /// their calls and size their windows with it, as the parent does.
    pub fn catalog(mut self, catalog: ModelCatalog) -> Self {
        self.catalog = Arc::new(catalog);
        self
    }

    /// The model that writes delegated runs' compaction summaries (a tier or a model id, as
    /// [`Models::resolve`] takes it), as the parent's
    /// [`CompactionPolicy::summary_model`](keel_engine::CompactionPolicy::summary_model)
    /// does; `None` (the default): each run's own model.
    pub fn compaction_model(mut self, model: Option<&str>) -> Self {
        self.summary_model = model.map(|name| self.models.resolve(name));
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

    /// The model a delegated run asks for as `asked` runs on, when the agent delegating runs
    /// on `parent`: `None`, empty or `inherit` is `parent`; anything else as
    /// [`Models::resolve`] says (tiers, Claude Code's `haiku`/`sonnet`/`opus`, model ids as
    /// they are).
    pub fn resolve_model(&self, asked: Option<&str>, parent: &str) -> String {
        match asked.map(str::trim) {
            None | Some("" | "inherit") => parent.to_owned(),
            Some(name) => self.models.resolve(name),
        }
    }

    /// This delegation with every change refused (`reason` is what the model reads): the
    /// parent's approver, rules and hooks still decide everything else. Never loosens.
    pub(crate) fn read_only(&self, reason: &str) -> Self {
        let approver: Arc<dyn Approver> = Arc::new(ReadOnly {
            inner: self.policies.approver().clone(),
            reason: reason.to_owned(),
        });
        Self {
            policies: self.policies.clone().with_approver(approver),
            ..self.clone()
        }
    }

    /// The context window of `model`, if the catalog knows it.
    pub fn context_window(&self, model: &str) -> Option<u64> {
        self.catalog.context_window(model)
    }

    /// An agent builder for a delegated run on `model`: this provider, the parent's policies,
    /// catalog, compaction model and snapshot store; no session store (the parent's session
    /// records the call). The caller adds the tools, the system prompt and the limits.
    pub fn agent_builder(&self, model: &str) -> AgentBuilder {
        let builder = self.policies.apply(
            keel_engine::Agent::builder(self.provider.clone())
                .model(model)
                .catalog((*self.catalog).clone())
                .compaction(keel_engine::CompactionPolicy {
                    summary_model: self.summary_model.clone(),
                    ..keel_engine::CompactionPolicy::default()
                }),
        );
        match &self.snapshots {
            Some(snapshots) => builder.snapshots(snapshots.clone()),
            None => builder,
        }
    }
}

/// An approver that refuses every change and otherwise asks the one it wraps: a sub-agent in
/// Claude Code's `plan` mode.
#[cfg(feature = "delegation")]
struct ReadOnly {
    inner: Arc<dyn Approver>,
    reason: String,
}

#[cfg(feature = "delegation")]
#[async_trait::async_trait]
impl Approver for ReadOnly {
    async fn approve(&self, request: &keel_engine::ApprovalRequest) -> keel_engine::Decision {
        self.inner.approve(request).await
    }

    async fn continue_after_warning(&self, used: u32, limit: u32) -> bool {
        self.inner.continue_after_warning(used, limit).await
    }

    fn allows_unattended(&self) -> bool {
        self.inner.allows_unattended()
    }

    fn refuses_changes(&self) -> Option<String> {
        Some(
            self.inner
                .refuses_changes()
                .unwrap_or_else(|| self.reason.clone()),
        )
    }

    fn asks_about_changes(&self) -> bool {
        self.inner.asks_about_changes()
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
        assert_eq!(models.resolve("haiku"), "claude-haiku-5-5");
        assert_eq!(models.resolve(" opus "), "claude-opus-5-5");
        assert_eq!(models.resolve("codex"), "gpt-5.3-codex");
        assert_eq!(models.resolve("gpt"), "gpt-6.2-astra");
        let openai = Models {
            strong: Some("o3".into()),
            ..Models::new("gpt-4.1", "gpt-4.1-mini")
        };
        assert_eq!(openai.resolve("haiku"), "gpt-4.1-mini");
        assert_eq!(openai.resolve("sonnet"), "gpt-4.1");
        assert_eq!(openai.resolve("opus"), "o3");
        assert_eq!(Models::small_for("claude-sonnet-4-5"), "claude-haiku-5-5");
        assert_eq!(Models::small_for("gpt-4.1"), "gpt-6-luna");
        assert_eq!(Models::small_for("qwen3:8b"), "qwen3:8b");
    }
}
