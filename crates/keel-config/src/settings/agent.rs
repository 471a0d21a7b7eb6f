//! From [`Settings`] to the agent and its session: what a caller adds ([`Extras`]), the MCP
//! servers started, the builder given everything the settings say, and the session opened.

use keel::agents::AgentDefinition;
use keel::engine::{
    Agent, Approver, EngineError, HookConfig, Hooks, PermissionRules, RuleTexts, Session,
    SessionStore,
};
use keel::mcp::{ClientOptions, McpServerConfig};
use keel::provider::{ModelCatalog, ProviderKind};
use keel::{BackgroundTasks, BuildError, CodingAgent, CodingAgentBuilder};

use super::{SessionChoice, Settings, env};
use crate::Error;
use crate::files::{self, project};

/// What a caller adds to the agent the flags and config files make: Claude Code's
/// `--system-prompt`, `--append-system-prompt`, `--allowedTools`, `--disallowedTools` and
/// `--session-id`. Rules are in keel's syntax, after the config's (deny rules still win).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Extras {
    /// Replaces keel's system prompt.
    pub system_prompt: Option<String>,
    /// Added at the end of the system prompt.
    pub append_system_prompt: Option<String>,
    /// Allow rules.
    pub allow: Vec<String>,
    /// Deny rules.
    pub deny: Vec<String>,
    /// The id of a new session.
    pub session_id: Option<String>,
    /// The most a run may spend, in USD.
    pub max_budget_usd: Option<f64>,
    /// Whether a resumed session is forked: a new session starting with its history.
    pub fork: bool,
    /// Sub-agents defined inline (`--agents`, the SDKs' `agents`).
    pub agents: Vec<AgentDefinition>,
    /// The model to go on with when the model keeps failing.
    pub fallback_model: Option<String>,
    /// Only the MCP servers `--mcp-config` names (Claude Code's `--strict-mcp-config`).
    pub strict_mcp: bool,
}

/// Sub-agents defined as Claude Code's `--agents` JSON does: `{"name": {"description": …,
/// "prompt": …, "tools": [...], "model": …}}`; `origin` names where they came from.
pub fn inline_agents(
    json: &serde_json::Value,
    origin: &str,
) -> Result<Vec<AgentDefinition>, Error> {
    let agents = json.as_object().ok_or_else(|| {
        Error::Invalid(format!(
            "{origin}: give an object of agents, e.g. {{\"reviewer\": {{\"description\": \"…\", \"prompt\": \"…\"}}}}"
        ))
    })?;
    agents
        .iter()
        .map(|(name, definition)| {
            AgentDefinition::from_claude_json(name, definition, origin)
                .map_err(|err| Error::Invalid(err.to_string()))
        })
        .collect()
}

impl Settings {
    /// Takes `extras` (what Claude Code's headless flags add); with `strict_mcp`, only the
    /// MCP servers `mcp_config` (`--mcp-config`'s files or JSON) names are kept.
    pub fn add(&mut self, extras: Extras, mcp_config: &[String]) -> Result<(), Error> {
        if extras.strict_mcp {
            let lookup = |name: &str| std::env::var(name).ok();
            let mut named = Vec::new();
            for given in mcp_config {
                for server in
                    files::mcp::read_claude_json(given, &lookup).map_err(Error::Invalid)?
                {
                    named.push(server.name().to_owned());
                }
            }
            self.mcp
                .retain(|server| named.iter().any(|name| name == server.name()));
        }
        self.extras = extras;
        Ok(())
    }

    /// Adds `server` to the MCP servers to start, in place of a configured one of the same
    /// name (the servers an ACP client or an SDK program passes).
    pub fn add_mcp_server(&mut self, server: McpServerConfig) {
        self.mcp.retain(|s| s.name() != server.name());
        self.mcp.push(server);
    }

    /// Each MCP server to start, by name, and whether it did: `connected` or `failed`.
    pub fn mcp_status(&self) -> Vec<(&str, &'static str)> {
        self.mcp
            .iter()
            .map(|config| {
                let started = self.mcp_servers.iter().any(|s| s.name() == config.name());
                (config.name(), if started { "connected" } else { "failed" })
            })
            .collect()
    }

    /// Starts the configured MCP servers, all at once; one line for each that did not start
    /// and for each tool one left out, for stderr. The session goes on without them.
    pub async fn start_mcp_servers(&mut self) -> Vec<String> {
        if self.mcp.is_empty() {
            return Vec::new();
        }
        let mut options = ClientOptions::new(&self.cwd);
        options.hidden_env = self.policy.hidden_env.clone();
        let started = keel::mcp::start_servers(self.mcp.clone(), &options).await;
        let mut lines: Vec<String> = started.failures.iter().map(ToString::to_string).collect();
        self.mcp_failed = started.failures;
        for server in &started.servers {
            lines.extend(server.warnings());
        }
        self.mcp_servers = started.servers;
        lines
    }

    /// Asks the provider what context window its server serves the model with (a local
    /// OpenAI-compatible server answers; elsewhere nothing is asked): it chooses the tool
    /// profile when none is given, and measures the first request. Bounded by
    /// [`keel::provider::SERVED_CONTEXT_TIMEOUT`].
    pub async fn ask_served_context(&mut self) {
        self.served = self.provider.served_context(&self.model).await;
    }

    /// The agent ([`CodingAgent`]): everything the overrides, environment and config files
    /// say, handed to the builder; `approver` decides gated calls and `local_hooks` watch the
    /// main agent alone (the REPL's diffs).
    pub fn agent(
        &self,
        approver: impl Approver + 'static,
        local_hooks: Hooks,
    ) -> Result<CodingAgent, Error> {
        let (rules, hook_configs) = self.rules_and_hooks()?;
        let builder = CodingAgent::builder(self.provider.clone())
            .model(&self.model)
            .small_model(self.small_model())
            .catalog(self.catalog.clone())
            .cwd(&self.cwd)
            .home(&self.keel_home)
            .sandbox(self.policy.clone())
            .approver(approver)
            .permissions(rules)
            .hook_configs(hook_configs)
            .local_hooks(local_hooks)
            .allow_read(self.allow_read.clone())
            .max_iterations(self.max_iterations)
            .delegation(self.delegation)
            .session_store(self.store.clone())
            .snapshots(
                self.config
                    .snapshots
                    .enabled()
                    .then(|| self.config.snapshots.limits()),
            )
            .background_tasks(Some(self.background_tasks()?))
            .mcp_servers(self.mcp_servers.iter().cloned())
            // A project's skills grant their `allowed-tools` only when the user trusts it.
            .trust_project_skills(self.project_trusted);
        let builder = self.with_models_and_prompt(builder)?;
        builder.build().map_err(|err| self.build_error(err))
    }

    /// The files the config was read from, for messages.
    fn config_files(&self) -> String {
        self.config
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The permission rules and hooks: a task's recorded ones, else the config's with the
    /// extras' rules after them (Claude Code's `/path` rules start at the project's directory).
    fn rules_and_hooks(&self) -> Result<(PermissionRules, Vec<HookConfig>), Error> {
        if let Some(task) = &self.task {
            let rules = task
                .permission_rules()
                .map_err(|err| Error::Failed(format!("the task's rules: {err}")))?;
            return Ok((rules, task.hooks.clone()));
        }
        self.config
            .permission_rules()
            .map_err(|err| Error::Invalid(format!("{}: {err}", self.config_files())))?;
        PermissionRules::parse(&self.extras.allow, &self.extras.deny)
            .map_err(|err| Error::Invalid(format!("--allowedTools / --disallowedTools: {err}")))?;
        let permissions = &self.config.permissions;
        let texts = RuleTexts {
            allow: [&permissions.allow[..], &self.extras.allow].concat(),
            ask: permissions.ask.clone(),
            deny: [&permissions.deny[..], &self.extras.deny].concat(),
        };
        let rules = PermissionRules::from_texts(&texts)
            .map_err(|err| Error::Invalid(err.to_string()))?
            .with_project_root(project::locate(&self.cwd));
        Ok((rules, self.config.hooks.clone()))
    }

    /// The builder with the tool profile, the served window, Claude Code's user folder, the
    /// extras' prompt, models, agents and budget, and the config's windows and compaction
    /// model.
    fn with_models_and_prompt(
        &self,
        mut builder: CodingAgentBuilder,
    ) -> Result<CodingAgentBuilder, Error> {
        if let Some(profile) = self.tool_profile {
            builder = builder.tool_profile(profile);
        }
        if let Some(served) = self.served {
            builder = builder.served_context(served);
        }
        // Claude Code's user folder: its agents and skills (`~/.claude/CLAUDE.md` is read
        // from the user's home, $HOME by default).
        if let Some(claude) = keel::agents::claude_user_dir() {
            builder = builder.claude_home(claude);
        }
        if let Some(prompt) = &self.extras.system_prompt {
            builder = builder.system_prompt(prompt);
        }
        if let Some(text) = &self.extras.append_system_prompt {
            builder = builder.append_system_prompt(text);
        }
        if let Some(model) = &self.strong_tier {
            builder = builder.strong_model(ModelCatalog::expand_alias(model));
        }
        if let Some(tokens) = self.config.context_window {
            builder = builder.context_window(tokens);
        }
        if let Some(model) = &self.config.compaction_model {
            builder = builder.compaction_model(model.trim());
        }
        if let Some(model) = &self.extras.fallback_model {
            builder = builder.fallback_model(ModelCatalog::expand_alias(model));
        }
        if !self.extras.agents.is_empty() {
            builder = builder.agents(self.extras.agents.clone());
        }
        if let Some(budget_usd) = self.extras.max_budget_usd {
            if self
                .catalog
                .get(&self.model)
                .and_then(|info| info.pricing)
                .is_none()
            {
                return Err(Error::Invalid(format!(
                    "--max-budget-usd: keel knows no price for {}, so it cannot keep a run to a \
                     budget; choose a model it has a price for, or leave the flag out",
                    self.model
                )));
            }
            builder = builder.cost_budget_usd(budget_usd);
        }
        Ok(builder)
    }

    /// A builder's error, naming the config files where they are at fault.
    fn build_error(&self, err: BuildError) -> Error {
        match err {
            BuildError::Hooks(err) => {
                Error::Invalid(format!("{}: hooks: {err}", self.config_files()))
            }
            BuildError::Permissions(err) => Error::Invalid(format!(
                "{}, flags: permissions: {err}",
                self.config_files()
            )),
            BuildError::WorkingDir { .. } | BuildError::AllowRead { .. } => {
                Error::Invalid(err.to_string())
            }
            err => Error::Failed(err.to_string()),
        }
    }

    /// How background tasks run: detached `keel task-run <id>` supervisors of the running
    /// program (keel's binary), the config's runners and limits, the sub-agents it lets
    /// start tasks.
    fn background_tasks(&self) -> Result<BackgroundTasks, Error> {
        let exe = std::env::current_exe()
            .map_err(|err| Error::Failed(format!("cannot find the keel binary: {err}")))?;
        let tasks = &self.config.tasks;
        let mut options = BackgroundTasks::detached(exe)
            .limits(
                tasks.max_running,
                tasks.timeout_secs.map(std::time::Duration::from_secs),
            )
            .allowed_agents(tasks.allowed_agents.clone());
        for (name, runner) in &tasks.runners {
            options = options.runner(name, runner.command.clone());
        }
        Ok(options)
    }

    /// The cheap model delegation may pick: a `[models.small]` table's (which may name its
    /// own provider), else Claude Code's `ANTHROPIC_SMALL_FAST_MODEL`, else `small_model`,
    /// else one of the same provider.
    fn small_model(&self) -> String {
        // Claude Code's variable, for a provider speaking Anthropic's API.
        let from_env = (self.provider_endpoint.0 == ProviderKind::Anthropic)
            .then(|| env("ANTHROPIC_SMALL_FAST_MODEL"))
            .flatten();
        self.small_tier
            .clone()
            .or(from_env)
            .or_else(|| self.config.small_model.clone())
            .map(|model| ModelCatalog::expand_alias(&model).to_owned())
            .unwrap_or_else(|| keel::agents::Models::small_for(&self.model))
    }

    /// Opens the session `choice` names: a new one (with the extras' id), a resumed one, or
    /// one forked from it when the extras say so.
    pub fn session(&self, agent: &Agent, choice: &SessionChoice) -> Result<Session, Error> {
        let new_id = self.extras.session_id.as_deref();
        let result = match choice {
            SessionChoice::New => match new_id {
                Some(id) => agent.session_with_id(&self.cwd, id),
                None => agent.session(&self.cwd),
            },
            SessionChoice::Resume(id) if self.extras.fork => agent.fork(id, new_id),
            SessionChoice::Latest if self.extras.fork => self
                .store
                .latest_for_cwd(&self.cwd)
                .map_err(EngineError::from)
                .and_then(|latest| {
                    latest.ok_or_else(|| EngineError::NoSession(self.cwd.display().to_string()))
                })
                .and_then(|latest| agent.fork(&latest.id, new_id)),
            SessionChoice::Resume(id) => agent.resume(id),
            SessionChoice::Latest => agent.resume_latest(&self.cwd),
        };
        result.map_err(|err| match choice {
            SessionChoice::New => Error::Failed(format!("cannot start a session: {err}")),
            _ => Error::Invalid(format!("cannot resume: {err}")),
        })
    }
}
