//! The agent: a provider, a model, tools and policies, from which sessions are made.

mod config;

use std::path::PathBuf;
use std::sync::Arc;

use keel_provider::{ModelCatalog, Provider};
use keel_snapshot::Snapshots;
use keel_tool::ToolRegistry;

use crate::approval::{Approver, DenyGated};
use crate::compaction::CompactionPolicy;
use crate::error::EngineError;
use crate::history::canonicalize;
use crate::hooks::Hooks;
use crate::notify::Notifier;
use crate::permissions::PermissionRules;
use crate::session::{Origin, Session};
use crate::session_store::{SessionMeta, SessionRecord, SessionStore};
pub(crate) use config::AgentConfig;

/// The default iteration limit of a run.
pub const DEFAULT_MAX_ITERATIONS: u32 = 25;
/// The default output token limit of one model call.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;
/// How many times, by default, a reply cut off mid-stream is asked for again.
pub const DEFAULT_STREAM_RETRIES: u32 = 3;

/// Everything a session needs: its configuration, shared; cheap to clone.
#[derive(Clone)]
pub struct Agent {
    config: Arc<AgentConfig>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("provider", &self.config.provider().name())
            .field("model", &self.config.model())
            .field("tools", &self.config.tools().names())
            .field("max_iterations", &self.config.max_iterations())
            .field("max_tokens", &self.config.max_tokens())
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
            store: None,
            snapshots: None,
            stream_retries: DEFAULT_STREAM_RETRIES,
            hooks: Hooks::new(),
            permissions: PermissionRules::default(),
            compaction: CompactionPolicy::default(),
            output_token_budget: None,
            cost_budget_usd: None,
            fallback_model: None,
            notifier: None,
        }
    }

    /// A new session working in `cwd`, with an empty history. With a session store, its file
    /// is created now (the error says why it could not be).
    pub fn session(&self, cwd: impl Into<PathBuf>) -> Result<Session, EngineError> {
        let cwd = cwd.into();
        let meta = SessionMeta::new(&cwd, self.config.provider().name(), self.config.model());
        self.start(cwd, meta)
    }

    /// A new session as [`session`](Self::session) makes, with the id the host chose
    /// (Claude Code's `--session-id`). The id must be a valid session id (a UUID is) and not
    /// already taken in the store.
    pub fn session_with_id(
        &self,
        cwd: impl Into<PathBuf>,
        id: &str,
    ) -> Result<Session, EngineError> {
        crate::session_store::validate_id(id)?;
        let cwd = cwd.into();
        let mut meta = SessionMeta::new(&cwd, self.config.provider().name(), self.config.model());
        meta.id = id.to_owned();
        self.start(cwd, meta)
    }

    /// A new session with the header `meta`, its file created in the store if there is one.
    fn start(&self, cwd: PathBuf, meta: SessionMeta) -> Result<Session, EngineError> {
        let log = match self.config.store() {
            Some(store) => Some(store.create(&meta)?),
            None => None,
        };
        Ok(Session::with_history(
            self.config.clone(),
            cwd,
            meta.id,
            Vec::new(),
            log,
            Origin::New,
        ))
    }

    /// A new session that starts with session `id`'s history, in its directory (Claude Code's
    /// `--fork-session`): the history is copied into the new session's file, so the two go
    /// on apart. The new session's id is `new_id` if given (checked as
    /// [`session_with_id`](Self::session_with_id) checks it), else a fresh one.
    pub fn fork(&self, id: &str, new_id: Option<&str>) -> Result<Session, EngineError> {
        let store = self.config.store().ok_or_else(|| {
            EngineError::Config("forking needs a session store: call .session_store(..)".into())
        })?;
        let loaded = store.load(id)?;
        let mut history = loaded.messages;
        canonicalize(&mut history);
        let cwd = loaded.meta.cwd;
        let mut meta = SessionMeta::new(&cwd, self.config.provider().name(), self.config.model());
        if let Some(new_id) = new_id {
            crate::session_store::validate_id(new_id)?;
            new_id.clone_into(&mut meta.id);
        }
        let mut log = store.create(&meta)?;
        for message in &history {
            log.append(&SessionRecord::Message {
                message: message.clone(),
            })?;
        }
        Ok(Session::with_history(
            self.config.clone(),
            cwd,
            meta.id,
            history,
            Some(log),
            Origin::Resumed,
        ))
    }

    /// Reopens session `id` from the session store: its history as saved, in canonical form
    /// ([`canonicalize`]: calls a crash left without a result are answered
    /// [`STOPPED`](crate::history::STOPPED), never run again), its cwd; the next prompt
    /// continues it.
    pub fn resume(&self, id: &str) -> Result<Session, EngineError> {
        let store = self.config.store().ok_or_else(|| {
            EngineError::Config("resuming needs a session store: call .session_store(..)".into())
        })?;
        let (loaded, log) = store.open(id)?;
        for warning in &loaded.warnings {
            tracing::warn!(session = id, "{warning}");
        }
        let mut history = loaded.messages;
        canonicalize(&mut history);
        Ok(Session::with_history(
            self.config.clone(),
            loaded.meta.cwd,
            loaded.meta.id,
            history,
            Some(log),
            Origin::Resumed,
        ))
    }

    /// Reopens the newest session started in `cwd`.
    pub fn resume_latest(&self, cwd: &std::path::Path) -> Result<Session, EngineError> {
        let store = self.config.store().ok_or_else(|| {
            EngineError::Config("resuming needs a session store: call .session_store(..)".into())
        })?;
        let meta = store
            .latest_for_cwd(cwd)?
            .ok_or_else(|| EngineError::NoSession(cwd.display().to_string()))?;
        self.resume(&meta.id)
    }

    /// The model's id.
    pub fn model(&self) -> &str {
        self.config.model()
    }

    /// The tools.
    pub fn tools(&self) -> &ToolRegistry {
        self.config.tools()
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
    store: Option<Arc<dyn SessionStore>>,
    snapshots: Option<Arc<dyn Snapshots>>,
    stream_retries: u32,
    hooks: Hooks,
    permissions: PermissionRules,
    compaction: CompactionPolicy,
    output_token_budget: Option<u64>,
    cost_budget_usd: Option<f64>,
    fallback_model: Option<String>,
    notifier: Option<Arc<dyn Notifier>>,
}

impl AgentBuilder {
    /// Where notices from outside the conversation come from (e.g. finished background
    /// tasks): before each model request (but a new session's first, see [`Notifier`]), the
    /// session takes its notices and adds them to the conversation as a user message.
    pub fn notifier(mut self, notifier: Arc<dyn Notifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// The most output tokens one run may write (default: no budget). Checked before each
    /// model call: once the run has written this many, it ends with [`Stop::TokenBudget`]
    /// (the calls of the last reply are still answered).
    ///
    /// [`Stop::TokenBudget`]: crate::Stop::TokenBudget
    pub fn output_token_budget(mut self, budget: u64) -> Self {
        self.output_token_budget = Some(budget);
        self
    }

    /// The most one run may spend on model calls, in USD (default: no limit; Claude Code's
    /// `--max-budget-usd`). Checked before each model call: once the run's calls cost this
    /// much, it ends with [`Stop::CostBudget`]. Only a model whose price the catalog knows
    /// can be held to it; for another the limit never stops the run, so a host checks the
    /// price first ([`ModelCatalog::get`](keel_provider::ModelCatalog::get)).
    ///
    /// [`Stop::CostBudget`]: crate::Stop::CostBudget
    pub fn cost_budget_usd(mut self, budget_usd: f64) -> Self {
        self.cost_budget_usd = Some(budget_usd);
        self
    }

    /// The model a session goes on with when its own keeps failing past the provider's
    /// retries (overloaded, server errors, timeouts; Claude Code's `--fallback-model`): the
    /// turn's request is sent again to it, a [`AgentEvent::Warning`](crate::AgentEvent::Warning)
    /// says so, and the session keeps it from then on.
    pub fn fallback_model(mut self, model: impl Into<String>) -> Self {
        self.fallback_model = Some(model.into());
        self
    }

    /// When the history is compacted (default: at 85 % of the model's context window, as the
    /// catalog knows it; never for a model it does not know unless a window is set here).
    pub fn compaction(mut self, policy: CompactionPolicy) -> Self {
        self.compaction = policy;
        self
    }

    /// Hooks, with Claude Code's contract: at session start, before each prompt, around tool
    /// calls, at approvals, when the model stops, before compactions and at the session's end
    /// (see [`hooks`](crate::hooks)).
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// Allow and deny rules, checked before approvals: deny, then allow, then ask by effect.
    pub fn permissions(mut self, rules: PermissionRules) -> Self {
        self.permissions = rules;
        self
    }

    /// Where sessions are saved (default: nowhere; sessions live in memory only).
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Where the workspace is snapshotted before every tool call that may change it (default:
    /// nowhere). Before each call whose effect is not read-only — after its approval, right
    /// before it runs; never for a denied or blocked call — the session calls
    /// [`Snapshots::take`] on a blocking thread and reports
    /// [`AgentEvent::SnapshotTaken`](crate::AgentEvent::SnapshotTaken). A snapshot that fails
    /// is reported as an [`AgentEvent::Warning`](crate::AgentEvent::Warning) and the call
    /// still runs: snapshots make a change undoable, they never block it.
    pub fn snapshots(mut self, snapshots: Arc<dyn Snapshots>) -> Self {
        self.snapshots = Some(snapshots);
        self
    }

    /// How many times a reply cut off mid-stream (a dropped connection or a stall after the
    /// reply began) is discarded and asked for again, before the run fails with the error
    /// (default 3; 0 never retries). Each discarded reply is reported as
    /// [`AgentEvent::ReplyDiscarded`](crate::AgentEvent::ReplyDiscarded).
    pub fn stream_retries(mut self, retries: u32) -> Self {
        self.stream_retries = retries;
        self
    }

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
            config: Arc::new(AgentConfig {
                provider: self.provider,
                model,
                system_prompt: self.system_prompt,
                tools: self.tools,
                max_iterations: self.max_iterations,
                max_tokens: self.max_tokens,
                approver: self.approver,
                catalog: self.catalog,
                store: self.store,
                snapshots: self.snapshots,
                stream_retries: self.stream_retries,
                hooks: self.hooks,
                permissions: self.permissions,
                compaction: self.compaction,
                output_token_budget: self.output_token_budget,
                cost_budget_usd: self.cost_budget_usd,
                fallback_model: self.fallback_model,
                notifier: self.notifier,
            }),
        })
    }
}
