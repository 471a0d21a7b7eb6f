//! From flags, environment and config files to a provider, an agent and a session.
//!
//! Precedence: flags, then environment (`KEEL_PROVIDER`, `KEEL_MODEL`, base URLs), then the
//! project's config, then the user's, then defaults.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel::mcp::{ClientOptions, McpError, McpServer, McpServerConfig};
use keel::{BackgroundTasks, CodingAgent};
use keel_engine::{
    Agent, Approver, HookConfig, Hooks, JsonlSessionStore, PermissionRules, RuleTexts, Session,
    SessionStore,
};
use keel_provider::Provider;
use keel_sandbox::{SandboxMode, SandboxPolicy};

use keel_tasks::{TaskApprovals, TaskSettings, load_settings};

use crate::approve::LiveMode;
use crate::cli::Options;
use crate::config::{self, ApprovalMode, Config};
use crate::trouble::ProviderOrigin;

use keel_provider::ProviderKind;

/// Why keel stopped before or during a run; the exit code depends on which.
#[derive(Debug)]
pub(crate) enum CliError {
    /// A bad flag, config or environment: exit 2.
    Usage(String),
    /// The run could not be done: exit 1.
    Run(String),
}

impl CliError {
    /// The process exit code.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Run(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Usage(message) | Self::Run(message) => f.write_str(message),
        }
    }
}

/// Interactive or headless: they differ in the default approvals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The REPL.
    Interactive,
    /// `keel exec`.
    Exec,
    /// `keel agents|teams|skills`: headless like `Exec`, but needing no provider: without
    /// one configured the agent gets a stand-in whose every call fails saying so.
    Listing,
}

/// Which session to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionChoice {
    /// A new one.
    New,
    /// Session ID.
    Resume(String),
    /// The newest in the working directory.
    Latest,
}

/// Everything resolved, before the agent is built.
pub(crate) struct Setup {
    /// The working directory (canonical).
    pub cwd: PathBuf,
    /// `$KEEL_HOME`.
    pub keel_home: PathBuf,
    /// The merged config files.
    pub config: Config,
    /// The provider's name as chosen (`anthropic`, `openai` or a config name).
    pub provider_name: String,
    /// The provider: the main one, with the models `[models.NAME]` tables route elsewhere
    /// sent to their own provider (see [`crate::tiers`]).
    pub provider: Arc<dyn Provider>,
    /// Prices, windows and limits: the built-in catalog with the config's over it.
    pub catalog: keel_provider::ModelCatalog,
    /// The small tier's model a `[models.small]` (or `fast`) table sets.
    pub small_tier: Option<String>,
    /// The strong tier's model a `[models.strong]` table sets.
    pub strong_tier: Option<String>,
    /// The provider's wire format and the base URL its requests go to, for the banner.
    pub provider_endpoint: (ProviderKind, String),
    /// Where its key and base URL came from, for the hint after a failed call.
    pub origin: ProviderOrigin,
    /// The model.
    pub model: String,
    /// Approvals.
    pub approvals: ApprovalMode,
    /// Whether the user trusts the project (recorded, or `--trust-project`), even one that
    /// has no config file: its skills' `allowed-tools` grant only then.
    pub project_trusted: bool,
    /// The approval mode sessions start in: `approvals`, or Claude Code's `defaultMode`
    /// (`acceptEdits`, `plan`) when only a settings file chose it.
    pub live_mode: LiveMode,
    /// The iteration limit.
    pub max_iterations: u32,
    /// The session store.
    pub store: Arc<JsonlSessionStore>,
    /// Paths the file tools may also read.
    pub allow_read: Vec<PathBuf>,
    /// Whether the agent gets the delegation tools.
    pub delegation: bool,
    /// The tool profile `--tools` or the config chose; `None`: by the model's window.
    pub tool_profile: Option<keel::ToolProfile>,
    /// The window the server says it serves the model with ([`Setup::ask_served_context`]).
    pub served: Option<keel_provider::ServedContext>,
    /// What commands may do: the mode, the network, the writable roots (`--add-dir`, then the
    /// config's, canonical), the protected paths and the provider's key variable hidden from
    /// commands and hooks; a task's own run takes the policy recorded with the task. Worked
    /// out once, here.
    pub policy: SandboxPolicy,
    /// Lines for stderr about the configuration (keys an untrusted project may not set).
    pub notices: Vec<String>,
    /// The MCP servers to start: the user's `[mcp_servers]`, a trusted project's
    /// `[mcp_servers]` and `.mcp.json`, then `--mcp-config`'s (a later one of the same name
    /// replaces an earlier one).
    pub mcp: Vec<McpServerConfig>,
    /// The MCP servers started by [`Setup::start_mcp_servers`], for the agent.
    pub mcp_servers: Vec<McpServer>,
    /// One line for each server that did not start.
    pub mcp_failed: Vec<McpError>,
    /// When this is a background task's own run (`KEEL_TASK_ID`): the settings recorded when
    /// it was started, which replace the sandbox, approvals, allow-read paths, rules and hooks
    /// the flags and config files would give.
    pub task: Option<TaskSettings>,
    /// What the caller adds to the configured agent (Claude Code's headless flags).
    pub extras: AgentExtras,
}

/// What a caller adds to the agent the flags and config files make: Claude Code's
/// `--system-prompt`, `--append-system-prompt`, `--allowedTools`, `--disallowedTools` and
/// `--session-id`. Rules are in keel's syntax, after the config's (deny rules still win).
#[derive(Debug, Clone, Default)]
pub(crate) struct AgentExtras {
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
    pub agents: Vec<keel_agents::AgentDefinition>,
    /// The model to go on with when the model keeps failing.
    pub fallback_model: Option<String>,
    /// Only the MCP servers `--mcp-config` names (Claude Code's `--strict-mcp-config`).
    pub strict_mcp: bool,
}

/// Sub-agents defined as Claude Code's `--agents` JSON does: `{"name": {"description": …,
/// "prompt": …, "tools": [...], "model": …}}`; `origin` names where they came from.
pub(crate) fn inline_agents(
    json: &serde_json::Value,
    origin: &str,
) -> Result<Vec<keel_agents::AgentDefinition>, CliError> {
    let agents = json.as_object().ok_or_else(|| {
        CliError::Usage(format!(
            "{origin}: give an object of agents, e.g. {{\"reviewer\": {{\"description\": \"…\", \"prompt\": \"…\"}}}}"
        ))
    })?;
    agents
        .iter()
        .map(|(name, definition)| {
            keel_agents::AgentDefinition::from_claude_json(name, definition, origin)
                .map_err(|err| CliError::Usage(err.to_string()))
        })
        .collect()
}

/// keel's home (`$KEEL_HOME`, else `~/.keel`): [`keel::home_dir`].
pub(crate) fn keel_home() -> Result<PathBuf, CliError> {
    keel::home_dir().map_err(|err| CliError::Usage(err.to_string()))
}

/// The session store under `$KEEL_HOME/sessions`.
pub(crate) fn session_store(keel_home: &Path) -> Arc<JsonlSessionStore> {
    Arc::new(JsonlSessionStore::new(keel::Home(keel_home).sessions()))
}

/// The configuration files of `cwd`'s project and the user's, as `options` say to read them.
pub(crate) fn load_config(
    options: &Options,
    keel_home: &Path,
    cwd: &Path,
) -> Result<Config, CliError> {
    let claude_home = keel_agents::claude_user_dir();
    Config::load(&config::Sources {
        keel_home: Some(keel_home),
        claude_home: claude_home.as_deref(),
        cwd,
        trust_project: options.trust_project,
        claude_files: options.claude_settings.sources,
        settings: options.claude_settings.settings.as_deref(),
    })
    .map_err(|err| CliError::Usage(err.to_string()))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Setup {
    /// Resolves flags, environment and config. `session` decides the working directory when
    /// resuming (a session goes on where it started).
    pub(crate) fn resolve(
        options: &Options,
        mode: Mode,
        session: &SessionChoice,
    ) -> Result<Self, CliError> {
        let keel_home = keel_home()?;
        crate::usage::check_writable_home(&keel_home)?;
        crate::usage::check_model_name(options.model.as_deref())?;
        let store = session_store(&keel_home);
        let cwd = working_dir(options, session, &store)?;
        let config = load_config(options, &keel_home, &cwd)?;
        let chosen = match provider(options, &config) {
            Ok(chosen) => chosen,
            Err(CliError::Usage(message)) if mode == Mode::Listing => unconfigured(message),
            Err(err) => return Err(err),
        };
        let model = options
            .model
            .clone()
            .or_else(|| env("KEEL_MODEL"))
            // Claude Code's variable, for a provider speaking Anthropic's API.
            .or_else(|| {
                (chosen.kind == ProviderKind::Anthropic)
                    .then(|| env("ANTHROPIC_MODEL"))
                    .flatten()
            })
            .or_else(|| config.model.clone())
            .unwrap_or_else(|| chosen.kind.default_model().to_owned());
        // The names people use (`sonnet`, `opus`, `haiku`, `gpt`, `codex`) name a model.
        let model = keel_provider::ModelCatalog::expand_alias(&model).to_owned();
        let tiers = crate::tiers::Tiers::resolve(
            &config,
            &chosen.name,
            chosen.provider.clone(),
            &model,
            mode == Mode::Listing,
        )?;
        let approvals = if options.yes {
            ApprovalMode::Allow
        } else {
            options
                .approvals
                .or(config.approvals)
                .unwrap_or(match mode {
                    Mode::Interactive => ApprovalMode::Ask,
                    Mode::Exec | Mode::Listing => ApprovalMode::Deny,
                })
        };

        let sandbox = options
            .sandbox
            .map(SandboxMode::from)
            .or(config.sandbox)
            .unwrap_or_default();
        let max_iterations = options
            .max_iterations
            .or(config.max_iterations)
            .unwrap_or(keel_engine::DEFAULT_MAX_ITERATIONS);
        let mut allow_read = Vec::new();
        for path in &options.allow_read {
            let full = std::fs::canonicalize(path).map_err(|err| {
                CliError::Usage(format!(
                    "--allow-read {}: {err}; name an existing file or directory",
                    path.display()
                ))
            })?;
            allow_read.push(full);
        }
        let mut writable_roots = Vec::new();
        for dir in &options.add_dir {
            writable_roots.push(existing_dir(dir, "--add-dir ")?);
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        for root in &config.writable_roots {
            let path = match (root.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => home.join(rest),
                _ => PathBuf::from(root),
            };
            // A missing directory is skipped, as the sandbox skips it.
            if let Ok(full) = std::fs::canonicalize(&path) {
                writable_roots.push(full);
            }
        }
        let task = match (mode, env("KEEL_TASK_ID")) {
            (Mode::Exec, Some(id)) => Some(task_settings(&keel_home, &id)?),
            _ => None,
        };
        let (approvals, policy, allow_read) = match &task {
            Some(settings) => (
                match settings.approvals {
                    TaskApprovals::Allow => ApprovalMode::Allow,
                    TaskApprovals::Deny => ApprovalMode::Deny,
                },
                settings.policy.clone(),
                settings.allow_read.clone(),
            ),
            None => {
                let mut policy = SandboxPolicy::with_mode(sandbox);
                if let Some(secs) = config.tools.run_command_max_timeout_secs {
                    policy.max_command_timeout = Duration::from_secs(secs);
                }
                policy.network = options.network || config.network.unwrap_or(false);
                policy.protected_paths = project_scripts(&config, &cwd);
                policy.writable_roots = writable_roots;
                policy.hidden_env = [
                    &[chosen.key_var.clone()][..],
                    &chosen.secret_vars,
                    &tiers.secret_vars,
                ]
                .concat();
                policy.env = config.command_env.clone();
                (approvals, policy, allow_read)
            }
        };
        // Claude Code's `defaultMode` when neither a flag, keel's `approvals` key nor a task
        // chooses.
        let chosen_elsewhere = options.yes
            || options.approvals.is_some()
            || config.approvals.is_some()
            || task.is_some();
        let live_mode = match config.default_mode {
            Some(default) if !chosen_elsewhere => default,
            _ => LiveMode::of(approvals),
        };
        let project_trusted = options.trust_project
            || match &config.project {
                Some(project) => project.trust.grants(),
                None => {
                    let dir = config::project::locate(&cwd);
                    let hash = config::project::config_hash(&dir);
                    config::Trust::of(&dir, &hash, &config.projects).grants()
                }
            };
        let notices: Vec<String> = config
            .project
            .as_ref()
            .and_then(config::Project::notice)
            .into_iter()
            .collect();
        let mut notices = notices;
        let mcp = match mode {
            Mode::Listing => Vec::new(),
            _ => mcp_configs(&config, options, &policy.hidden_env, &mut notices)
                .map_err(CliError::Usage)?,
        };
        let tool_profile = tool_profile(options, &config)?;
        Ok(Self {
            cwd,
            keel_home,
            config,
            provider_name: chosen.name,
            provider: tiers.provider,
            catalog: tiers.catalog,
            small_tier: tiers.small,
            strong_tier: tiers.strong,
            provider_endpoint: (chosen.kind, chosen.origin.base_url.clone()),
            origin: chosen.origin,
            model,
            approvals,
            live_mode,
            project_trusted,
            max_iterations,
            store,
            allow_read,
            delegation: !options.no_delegation,
            tool_profile,
            served: None,
            policy,
            notices,
            mcp,
            mcp_servers: Vec::new(),
            mcp_failed: Vec::new(),
            task,
            extras: AgentExtras::default(),
        })
    }

    /// Takes `extras` (what Claude Code's headless flags add); with `strict_mcp`, only the
    /// MCP servers `options`' `--mcp-config` names are kept.
    pub(crate) fn add(&mut self, extras: AgentExtras, options: &Options) -> Result<(), CliError> {
        if extras.strict_mcp {
            let lookup = |name: &str| std::env::var(name).ok();
            let mut named = Vec::new();
            for given in &options.mcp_config {
                for server in
                    config::mcp::read_claude_json(given, &lookup).map_err(CliError::Usage)?
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
    pub(crate) fn add_mcp_server(&mut self, server: McpServerConfig) {
        self.mcp.retain(|s| s.name() != server.name());
        self.mcp.push(server);
    }

    /// Each MCP server to start, by name, and whether it did: `connected` or `failed`.
    pub(crate) fn mcp_status(&self) -> Vec<(&str, &'static str)> {
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
    pub(crate) async fn start_mcp_servers(&mut self) -> Vec<String> {
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
    /// [`keel_provider::SERVED_CONTEXT_TIMEOUT`].
    pub(crate) async fn ask_served_context(&mut self) {
        self.served = self.provider.served_context(&self.model).await;
    }

    /// The agent ([`CodingAgent`]): everything the flags, environment and config files say,
    /// handed to the builder; `approver` decides gated calls and `local_hooks` watch the main
    /// agent alone (the REPL's diffs).
    pub(crate) fn agent(
        &self,
        approver: impl Approver + 'static,
        local_hooks: Hooks,
    ) -> Result<CodingAgent, CliError> {
        let usage = |message: String| CliError::Usage(message);
        let config_file = || {
            self.config
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (rules, hook_configs): (PermissionRules, Vec<HookConfig>) = match &self.task {
            Some(task) => (
                task.permission_rules()
                    .map_err(|err| CliError::Run(format!("the task's rules: {err}")))?,
                task.hooks.clone(),
            ),
            None => {
                self.config
                    .permission_rules()
                    .map_err(|err| usage(format!("{}: {err}", config_file())))?;
                PermissionRules::parse(&self.extras.allow, &self.extras.deny)
                    .map_err(|err| usage(format!("--allowedTools / --disallowedTools: {err}")))?;
                let permissions = &self.config.permissions;
                let texts = RuleTexts {
                    allow: [&permissions.allow[..], &self.extras.allow].concat(),
                    ask: permissions.ask.clone(),
                    deny: [&permissions.deny[..], &self.extras.deny].concat(),
                };
                let rules = PermissionRules::from_texts(&texts)
                    .map_err(|err| usage(err.to_string()))?
                    // Claude Code's `/path` rules start at the project's directory.
                    .with_project_root(config::project::locate(&self.cwd));
                (rules, self.config.hooks.clone())
            }
        };
        let mut builder = CodingAgent::builder(self.provider.clone())
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
            .mcp_servers(self.mcp_servers.iter().cloned());
        // A project's skills grant their `allowed-tools` only when the user trusts it.
        builder = builder.trust_project_skills(self.project_trusted);
        if let Some(profile) = self.tool_profile {
            builder = builder.tool_profile(profile);
        }
        if let Some(served) = self.served {
            builder = builder.served_context(served);
        }
        // Claude Code's user folder: its agents and skills (`~/.claude/CLAUDE.md` is read
        // from the user's home, $HOME by default).
        if let Some(claude) = keel_agents::claude_user_dir() {
            builder = builder.claude_home(claude);
        }
        if let Some(prompt) = &self.extras.system_prompt {
            builder = builder.system_prompt(prompt);
        }
        if let Some(text) = &self.extras.append_system_prompt {
            builder = builder.append_system_prompt(text);
        }
        if let Some(model) = &self.strong_tier {
            builder = builder.strong_model(keel_provider::ModelCatalog::expand_alias(model));
        }
        if let Some(tokens) = self.config.context_window {
            builder = builder.context_window(tokens);
        }
        if let Some(model) = &self.config.compaction_model {
            builder = builder.compaction_model(model.trim());
        }
        if let Some(model) = &self.extras.fallback_model {
            builder = builder.fallback_model(keel_provider::ModelCatalog::expand_alias(model));
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
                return Err(usage(format!(
                    "--max-budget-usd: keel knows no price for {}, so it cannot keep a run to a \
                     budget; choose a model it has a price for, or leave the flag out",
                    self.model
                )));
            }
            builder = builder.cost_budget_usd(budget_usd);
        }
        builder.build().map_err(|err| match err {
            keel::BuildError::Hooks(err) => usage(format!("{}: hooks: {err}", config_file())),
            keel::BuildError::Permissions(err) => {
                usage(format!("{}, flags: permissions: {err}", config_file()))
            }
            keel::BuildError::WorkingDir { .. } | keel::BuildError::AllowRead { .. } => {
                usage(err.to_string())
            }
            err => CliError::Run(err.to_string()),
        })
    }

    /// How background tasks run: detached `keel task-run <id>` supervisors of this binary,
    /// the config's runners and limits, the sub-agents it lets start tasks.
    fn background_tasks(&self) -> Result<BackgroundTasks, CliError> {
        let exe = std::env::current_exe()
            .map_err(|err| CliError::Run(format!("cannot find the keel binary: {err}")))?;
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
            .map(|model| keel_provider::ModelCatalog::expand_alias(&model).to_owned())
            .unwrap_or_else(|| keel_agents::Models::small_for(&self.model))
    }

    /// Opens the session `choice` names.
    pub(crate) fn session(
        &self,
        agent: &Agent,
        choice: &SessionChoice,
    ) -> Result<Session, CliError> {
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
                .map_err(keel_engine::EngineError::from)
                .and_then(|latest| {
                    latest.ok_or_else(|| {
                        keel_engine::EngineError::NoSession(self.cwd.display().to_string())
                    })
                })
                .and_then(|latest| agent.fork(&latest.id, new_id)),
            choice => self.open(agent, choice),
        };
        result.map_err(|err| match choice {
            SessionChoice::New => CliError::Run(format!("cannot start a session: {err}")),
            _ => CliError::Usage(format!("cannot resume: {err}")),
        })
    }

    /// The session `choice` names.
    fn open(
        &self,
        agent: &Agent,
        choice: &SessionChoice,
    ) -> Result<Session, keel_engine::EngineError> {
        match choice {
            SessionChoice::New => agent.session(&self.cwd),
            SessionChoice::Resume(id) => agent.resume(id),
            SessionChoice::Latest => agent.resume_latest(&self.cwd),
        }
    }
}

/// The tool profile `--tools` names, else the config's `[tools] profile`; `None` when neither
/// chooses. A name that is no profile is a one-line usage error.
pub(crate) fn tool_profile(
    options: &Options,
    config: &Config,
) -> Result<Option<keel::ToolProfile>, CliError> {
    match &options.tools {
        Some(name) => keel::ToolProfile::from_name(name).map(Some).ok_or_else(|| {
            let given = if name.is_empty() {
                "--tools needs a tool set".to_owned()
            } else {
                format!("--tools {name}: no such tool set")
            };
            CliError::Usage(format!(
                "{given}; use lean (six tools, for small models) or full (every tool)"
            ))
        }),
        None => Ok(config.tools.profile.map(config::ToolsProfile::profile)),
    }
}

/// `dir` resolved, if it is an existing directory; else a usage error naming it after
/// `what` (a flag, or nothing).
pub(crate) fn existing_dir(dir: &Path, what: &str) -> Result<PathBuf, CliError> {
    std::fs::canonicalize(dir)
        .ok()
        .filter(|full| full.is_dir())
        .ok_or_else(|| {
            CliError::Usage(format!(
                "{what}{}: not an existing directory; name one that exists",
                dir.display()
            ))
        })
}

/// The scripts a trusted project's hooks and runners run: commands and the write tools may
/// not change them without the person's approval (keel adds its own protected paths: its
/// config, the home directory's start-up files, the `PATH` directories).
fn project_scripts(config: &Config, cwd: &Path) -> Vec<PathBuf> {
    match &config.project {
        Some(project) if project.trust.grants() => {
            config::project::referenced_files(&project.dir, &[cwd, &project.dir], &project.commands)
        }
        _ => Vec::new(),
    }
}

/// The settings recorded with background task `id`, for its own `keel exec`.
fn task_settings(keel_home: &Path, id: &str) -> Result<TaskSettings, CliError> {
    let store = crate::tasks::open_store(keel_home)?;
    load_settings(store.as_ref(), id).map_err(|err| {
        CliError::Run(format!(
            "KEEL_TASK_ID={id}: {err}; a task's run takes its settings from the task"
        ))
    })
}

/// The directory `-C` names, else the current one.
pub(crate) fn given_dir(options: &Options) -> Result<PathBuf, CliError> {
    match &options.cwd {
        Some(dir) => Ok(dir.clone()),
        None => std::env::current_dir()
            .map_err(|err| CliError::Usage(format!("the current directory: {err}"))),
    }
}

/// The working directory: the resumed session's, else `-C`, else the current one.
fn working_dir(
    options: &Options,
    session: &SessionChoice,
    store: &JsonlSessionStore,
) -> Result<PathBuf, CliError> {
    let given = given_dir(options)?;
    let dir = match session {
        SessionChoice::Resume(id) => {
            let loaded = store
                .load(id)
                .map_err(|err| CliError::Usage(format!("cannot resume: {err}")))?;
            loaded.meta.cwd
        }
        _ => given,
    };
    let canonical = std::fs::canonicalize(&dir).map_err(|err| {
        CliError::Usage(format!(
            "working directory {}: {err}; pass an existing directory with -C",
            dir.display()
        ))
    })?;
    if !canonical.is_dir() {
        return Err(CliError::Usage(format!(
            "working directory {} is not a directory",
            dir.display()
        )));
    }
    Ok(canonical)
}

/// The provider chosen, and the variable holding its key.
struct Chosen {
    name: String,
    kind: ProviderKind,
    provider: Arc<dyn Provider>,
    key_var: String,
    /// Other variables its secrets came from (its headers').
    secret_vars: Vec<String>,
    origin: ProviderOrigin,
}

/// For a listing with no provider configured: a stand-in whose every call fails with
/// `message` (why there is no provider); a listing never calls it.
fn unconfigured(message: String) -> Chosen {
    let kind = ProviderKind::Anthropic;
    Chosen {
        name: "none".into(),
        kind,
        provider: Arc::new(Unconfigured { message }),
        key_var: kind.key_var().into(),
        secret_vars: Vec::new(),
        origin: ProviderOrigin {
            key_var: kind.key_var().into(),
            base_url: String::new(),
            url_from: None,
            url_var: kind.base_url_var(),
        },
    }
}

/// The provider of a run that has none configured: every call fails with why.
struct Unconfigured {
    /// Why there is no provider, and how to configure one.
    message: String,
}

impl Provider for Unconfigured {
    fn name(&self) -> &str {
        "none"
    }

    fn stream(
        &self,
        _req: &keel_provider::CompletionRequest,
    ) -> futures::stream::BoxStream<
        '_,
        Result<keel_provider::StreamEvent, keel_provider::ProviderError>,
    > {
        let error = keel_provider::ProviderError::Config {
            message: self.message.clone(),
        };
        Box::pin(futures::stream::once(std::future::ready(Err(error))))
    }
}

/// `message` of a provider's configuration error as a usage line pointing at `--help`.
fn provider_usage(err: keel_provider::ProviderError) -> CliError {
    match err {
        keel_provider::ProviderError::Config { message } => {
            CliError::Usage(format!("{message} (see keel --help)"))
        }
        err => CliError::Usage(err.to_string()),
    }
}

/// The provider the flags, environment and config name, built by
/// [`keel_provider::ProviderConfig`] (the one provider detection).
///
/// A built-in name (`anthropic`, `openai`) is never redirected by a project: the config only
/// holds the user's tables for them (see `Config::load`), and its base URL comes from
/// `--base-url`, else the environment, else the user's config. A name defined in a config
/// takes its base URL from `--base-url`, else its table, else the environment.
fn provider(options: &Options, config: &Config) -> Result<Chosen, CliError> {
    let named = options
        .provider
        .clone()
        .or_else(|| env("KEEL_PROVIDER"))
        .or_else(|| config.provider.clone());
    let (name, kind, table) = match named {
        Some(name) => {
            let (kind, table) = lookup_provider(&name, config)?;
            (name, kind, table)
        }
        None => {
            let kind = keel_provider::ProviderConfig::detect()
                .map_err(provider_usage)?
                .kind;
            (kind.name().to_owned(), kind, None)
        }
    };
    let flag_url = options
        .base_url
        .clone()
        .map(|url| (url, "--base-url".to_owned()));
    let (built, url_from) = build_provider(&name, kind, table, flag_url, config)?;
    Ok(Chosen {
        origin: ProviderOrigin {
            key_var: built.key_var.clone(),
            base_url: built.base_url,
            url_from,
            url_var: kind.base_url_var(),
        },
        name,
        kind,
        provider: built.provider,
        key_var: built.key_var,
        secret_vars: built.secret_vars,
    })
}

/// The wire format and the `[providers.NAME]` table (if any) of the provider called `name`: a
/// built-in one (`anthropic`, `openai`, which the user's config may adjust) or one the config
/// defines; else a usage error listing the names there are.
fn lookup_provider<'c>(
    name: &str,
    config: &'c Config,
) -> Result<(ProviderKind, Option<&'c config::ProviderConfig>), CliError> {
    match (ProviderKind::from_name(name), config.providers.get(name)) {
        (Some(kind), table) => Ok((table.map_or(kind, |t| t.kind), table)),
        (None, Some(table)) => Ok((table.kind, Some(table))),
        (None, None) => {
            let mut known: Vec<String> = ProviderKind::ALL
                .iter()
                .map(|kind| kind.name().to_owned())
                .collect();
            known.extend(config.providers.keys().cloned());
            Err(CliError::Usage(format!(
                "unknown provider `{name}`: use one of {}, or define [providers.{name}] in the \
                 config",
                known.join(", ")
            )))
        }
    }
}

/// Builds the provider called `name` ([`keel_provider::ProviderConfig`], the one provider
/// detection), and says what set its base URL. The base URL is `flag_url`, else for a built-in
/// name the environment's, then the table's; for a configured name the table's, then the
/// environment's. The variables its secrets come from are redacted from the log.
fn build_provider(
    name: &str,
    kind: ProviderKind,
    table: Option<&config::ProviderConfig>,
    flag_url: Option<(String, String)>,
    config: &Config,
) -> Result<(keel_provider::BuiltProvider, Option<String>), CliError> {
    // Each candidate base URL with what set it, for the hint after a failed call.
    let env_url = || env(kind.base_url_var()).map(|url| (url, kind.base_url_var().to_owned()));
    let table_url = || {
        table
            .and_then(|t| t.base_url.clone())
            .map(|url| (url, format!("base_url in [providers.{name}] of the config")))
    };
    let (base_url, url_from) = if ProviderKind::from_name(name).is_some() {
        flag_url.or_else(env_url).or_else(table_url)
    } else {
        flag_url.or_else(table_url).or_else(env_url)
    }
    .unzip();
    let secs = std::time::Duration::from_secs;
    let built = keel_provider::ProviderConfig {
        kind,
        name: Some(name.to_owned()),
        base_url,
        api_key_env: table.and_then(|t| t.api_key_env.clone()),
        headers: table.map(|t| t.headers.clone()).unwrap_or_default(),
        idle_timeout: config.idle_timeout_secs.map(secs),
        request_timeout: config.request_timeout_secs.map(secs),
    }
    .build()
    .map_err(provider_usage)?;
    // A config may keep the key in a variable of any name: the log never shows its value.
    crate::logging::redact_var(&built.key_var);
    for var in &built.secret_vars {
        crate::logging::redact_var(var);
    }
    Ok((built, url_from))
}

/// The provider a `[models.NAME]` table names, built as the main one is (no `--base-url`: that
/// flag moves the main provider only).
pub(crate) fn named_provider(
    name: &str,
    config: &Config,
) -> Result<keel_provider::BuiltProvider, CliError> {
    let (kind, table) = lookup_provider(name, config)?;
    build_provider(name, kind, table, None, config).map(|(built, _)| built)
}

/// The MCP servers the configuration and `--mcp-config` name, in that order; a later server of
/// the same name replaces an earlier one. One line naming the place of an unusable one. A
/// project's server that would pass on a credential of keel's environment (its value in an
/// argument, a variable or a header, or its name in `env_vars`) is left out, with a line in
/// `notices`: only the user's own config and flags may hand credentials to a program.
pub(crate) fn mcp_configs(
    config: &Config,
    options: &Options,
    hidden: &[String],
    notices: &mut Vec<String>,
) -> Result<Vec<McpServerConfig>, String> {
    let lookup = |name: &str| std::env::var(name).ok();
    let files = || {
        config
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Each server with the project file it came from, if it came from the project.
    let mut found: Vec<(McpServerConfig, Option<String>)> = Vec::new();
    for (name, table) in &config.mcp_servers {
        if let Some(server) = table
            .to_config(name, &lookup)
            .map_err(|err| format!("{}: {err}", files()))?
        {
            let origin = config
                .project_mcp_names
                .contains(name)
                .then(|| "the project's .keel/config.toml".to_owned());
            found.push((server, origin));
        }
    }
    if let Some(json) = &config.project_mcp_json {
        let text = std::fs::read_to_string(json)
            .map_err(|err| format!("{}: cannot read it: {err}", json.display()))?;
        let origin = json.display().to_string();
        for server in
            keel::mcp::parse_mcp_json(&text, &origin, &lookup).map_err(|e| e.to_string())?
        {
            found.push((server, Some(origin.clone())));
        }
    }
    for given in &options.mcp_config {
        for server in config::mcp::read_claude_json(given, &lookup)? {
            found.push((server, None));
        }
    }
    let mut servers: Vec<McpServerConfig> = Vec::new();
    for (server, origin) in found {
        if let Some(origin) = origin
            && let Some(variable) = passed_credential(&server, hidden)
        {
            notices.push(format!(
                "{origin}: MCP server {} left out: it would pass on {variable} from your \
                 environment; only your own config (or --mcp-config) may give a program \
                 credentials",
                server.name()
            ));
            continue;
        }
        servers.retain(|s| s.name() != server.name());
        servers.push(server);
    }
    Ok(servers)
}

/// The credential-like variable of keel's environment whose value `server`'s configuration
/// holds (or whose name it passes through `env_vars`), if any.
fn passed_credential(server: &McpServerConfig, hidden: &[String]) -> Option<String> {
    let secrets: Vec<(String, String)> = std::env::vars()
        .filter(|(name, value)| value.len() >= 8 && keel_sandbox::is_hidden_var(name, hidden))
        .collect();
    let holds = |text: &str| {
        secrets
            .iter()
            .find(|(_, value)| text.contains(value.as_str()))
            .map(|(name, _)| name.clone())
    };
    match &server.transport {
        keel::mcp::McpTransport::Stdio(stdio) => stdio
            .env_vars
            .iter()
            .find(|name| keel_sandbox::is_hidden_var(name.as_str(), hidden))
            .cloned()
            .or_else(|| {
                std::iter::once(&stdio.command)
                    .chain(&stdio.args)
                    .chain(stdio.env.values())
                    .find_map(|text| holds(text))
            }),
        keel::mcp::McpTransport::Http(http) => std::iter::once(&http.url)
            .chain(http.headers.values())
            .chain(&http.bearer_token)
            .find_map(|text| holds(text)),
        _ => None,
    }
}
