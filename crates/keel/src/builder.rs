//! [`CodingAgentBuilder`]: from a provider and a few switches to the whole agent.

use std::path::PathBuf;
use std::sync::Arc;

#[cfg(feature = "delegation")]
use keel_agents::{CodeTool, Delegation, Models};
use keel_agents::{GrantingApprover, Policies, SkillGrants, SkillIndex};
use keel_engine::{
    Agent, Approver, CompactionPolicy, DEFAULT_MAX_ITERATIONS, DenyGated, HookConfig, Hooks,
    JsonlSessionStore, MemoryReport, MemorySources, PermissionRules, RuleContext, SessionStore,
    lean_system_prompt, system_prompt,
};
use keel_provider::{ModelCatalog, Provider, ServedContext};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools, lean_tools};
use keel_tool::{DynTool, Tool, ToolRegistry};

use crate::agent::CodingAgent;
use crate::delegates::Delegates;
use crate::home::Home;
use crate::profile::{self, ToolProfile, WindowOrigin};
use crate::{BuildError, protected};

#[cfg(feature = "tasks")]
use crate::tasks::BackgroundTasks;

/// Builds a [`CodingAgent`]: the agent `keel exec` runs, for any host.
///
/// Defaults: the working directory is the current one; keel's home is `$KEEL_HOME` or
/// `~/.keel` (sessions, snapshots, logs, user skills and agents); the sandbox is
/// [`SandboxPolicy::default`] (writes confined to the workspace, no network); gated calls are
/// refused ([`DenyGated`]); delegation (`code`, `spawn_agent`, `run_team`) and skills are on;
/// snapshots are on (with the `snapshots` feature); background tasks are off until
/// [`background_tasks`](Self::background_tasks) says how to run them; the [`ToolProfile`] is
/// [full](ToolProfile::Full) unless the model's known context window is small
/// ([`tool_profile`](Self::tool_profile)).
pub struct CodingAgentBuilder {
    provider: Arc<dyn Provider>,
    model: Option<String>,
    small_model: Option<String>,
    strong_model: Option<String>,
    catalog: Option<ModelCatalog>,
    context_window: Option<u64>,
    compaction_model: Option<String>,
    cwd: Option<PathBuf>,
    home: Option<PathBuf>,
    /// The user's home (`~`), for `~/.claude/CLAUDE.md` and memory imports; `None`: `$HOME`.
    user_home: Option<PathBuf>,
    claude_home: Option<PathBuf>,
    sandbox: SandboxPolicy,
    approver: Arc<dyn Approver>,
    permissions: PermissionRules,
    hook_configs: Vec<HookConfig>,
    hooks: Hooks,
    local_hooks: Hooks,
    allow_read: Vec<PathBuf>,
    tools: Vec<Arc<dyn DynTool>>,
    max_iterations: u32,
    /// The most one run may spend, in USD.
    cost_budget_usd: Option<f64>,
    /// The model to go on with when the model keeps failing.
    fallback_model: Option<String>,
    /// Sub-agents the host defines, beside the discovered ones.
    #[cfg(feature = "delegation")]
    agents: Vec<keel_agents::AgentDefinition>,
    /// A system prompt that replaces keel's (`None`: keel's, built from the project).
    system_prompt: Option<String>,
    /// Text added at the end of the system prompt.
    append_system_prompt: Option<String>,
    delegation: bool,
    skills: bool,
    /// Whether the project's skills' `allowed-tools` are honoured.
    trust_project_skills: bool,
    session_store: Option<Arc<dyn SessionStore>>,
    #[cfg(feature = "snapshots")]
    snapshots: Option<keel_snapshot::SnapshotLimits>,
    #[cfg(feature = "tasks")]
    tasks: Option<BackgroundTasks>,
    #[cfg(feature = "mcp")]
    mcp_servers: Vec<keel_mcp::McpServer>,
    /// The tool profile the host chose (`None`: by the model's window).
    tool_profile: Option<ToolProfile>,
    /// The window the server says it serves the model with.
    served: Option<ServedContext>,
}

impl std::fmt::Debug for CodingAgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodingAgentBuilder")
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .field("cwd", &self.cwd)
            .field("sandbox", &self.sandbox)
            .finish_non_exhaustive()
    }
}

impl CodingAgentBuilder {
    pub(crate) fn new(provider: Arc<dyn Provider>) -> Self {
        Self {
            provider,
            model: None,
            small_model: None,
            strong_model: None,
            catalog: None,
            context_window: None,
            compaction_model: None,
            cwd: None,
            home: None,
            user_home: None,
            claude_home: None,
            sandbox: SandboxPolicy::default(),
            approver: Arc::new(DenyGated),
            permissions: PermissionRules::default(),
            hook_configs: Vec::new(),
            hooks: Hooks::new(),
            local_hooks: Hooks::new(),
            allow_read: Vec::new(),
            tools: Vec::new(),
            max_iterations: DEFAULT_MAX_ITERATIONS,
            cost_budget_usd: None,
            fallback_model: None,
            #[cfg(feature = "delegation")]
            agents: Vec::new(),
            system_prompt: None,
            append_system_prompt: None,
            delegation: true,
            skills: true,
            trust_project_skills: false,
            session_store: None,
            #[cfg(feature = "snapshots")]
            snapshots: Some(keel_snapshot::SnapshotLimits::default()),
            #[cfg(feature = "tasks")]
            tasks: None,
            #[cfg(feature = "mcp")]
            mcp_servers: Vec::new(),
            tool_profile: None,
            served: None,
        }
    }

    /// The model (default: the provider's usual one, `claude-sonnet-4-5` or `gpt-4.1`).
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.model = Some(model.into());
        self
    }

    /// The cheap model delegated runs may pick (`small`, `fast`; default: one of the same
    /// family). With a [`ModelRouter`](keel_provider::ModelRouter) as the provider it may be
    /// served by another provider (a local server).
    #[must_use]
    pub fn small_model(mut self, model: impl Into<String>) -> Self {
        self.small_model = Some(model.into());
        self
    }

    /// The strong model delegated runs may pick (`strong`, `opus` with a provider other than
    /// Anthropic; default: the model itself).
    #[must_use]
    pub fn strong_model(mut self, model: impl Into<String>) -> Self {
        self.strong_model = Some(model.into());
        self
    }

    /// Prices, context windows and output limits (default: the built-in catalog, see
    /// [`keel_provider::PRICES_CHECKED`]), for the agent and every run it delegates: costs,
    /// the cost budget and when to compact follow it.
    #[must_use]
    pub fn catalog(mut self, catalog: ModelCatalog) -> Self {
        self.catalog = Some(catalog);
        self
    }

    /// The main model's context window in tokens, over the catalog's (a model the catalog
    /// does not know, or one served with less; default: the catalog's window for the model,
    /// and none for a model it does not know). With
    /// [`served_context`](Self::served_context) the smaller counts. Compaction works to it
    /// ([`CompactionPolicy::context_window`](keel_engine::CompactionPolicy::context_window)),
    /// it chooses the tool profile when none is given, and
    /// [`CodingAgent::context_overflow`] measures the first request against it.
    #[must_use]
    pub fn context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// The model that writes compaction summaries, for the agent and its delegated runs: a
    /// tier (`small`, `fast`, `strong`, `default`) or a model id
    /// ([`CompactionPolicy::summary_model`](keel_engine::CompactionPolicy::summary_model);
    /// default: each session's own model).
    #[must_use]
    pub fn compaction_model(mut self, tier_or_model: impl Into<String>) -> Self {
        self.compaction_model = Some(tier_or_model.into());
        self
    }

    /// The directory the agent works in (default: the current one).
    #[must_use]
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// keel's home (default `$KEEL_HOME`, else `~/.keel`).
    #[must_use]
    pub fn home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.home = Some(dir.into());
        self
    }

    /// The user's home directory (default `$HOME`): where `~/.claude/CLAUDE.md`, the user's
    /// memory file loaded before the project's, is looked for, and what `@~/` imports in the
    /// user's memory files mean. `$KEEL_HOME/AGENTS.md` is loaded after it
    /// ([`user_memory_files`](crate::user_memory_files)).
    #[must_use]
    pub fn user_home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.user_home = Some(dir.into());
        self
    }

    /// What the tools and commands may do: mode, network, writable roots, protected paths,
    /// hidden variables. keel adds its own protected paths (its config, the home directory's
    /// start-up files and the `PATH` directories, where a writable root holds them).
    #[must_use]
    pub fn sandbox(mut self, policy: SandboxPolicy) -> Self {
        self.sandbox = policy;
        self
    }

    /// Who approves gated calls (default [`DenyGated`]: refused).
    #[must_use]
    pub fn approver(mut self, approver: impl Approver + 'static) -> Self {
        self.approver = Arc::new(approver);
        self
    }

    /// Allow and deny rules (deny wins).
    #[must_use]
    pub fn permissions(mut self, rules: PermissionRules) -> Self {
        self.permissions = rules;
        self
    }

    /// Command hooks with Claude Code's contract, run after the hooks of
    /// [`hooks`](Self::hooks). Background tasks run them too.
    #[must_use]
    pub fn hook_configs(mut self, configs: Vec<HookConfig>) -> Self {
        self.hook_configs = configs;
        self
    }

    /// Hooks (Rust hooks too) that hold for this agent and every run it delegates. Rust
    /// hooks cannot reach a background task's own process, so with any, tasks are off.
    #[must_use]
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.hooks = hooks;
        self
    }

    /// Hooks for this agent alone, not its delegated runs: for what a host watches (a
    /// display's diffs), never for what it forbids (use [`hooks`](Self::hooks)).
    #[must_use]
    pub fn local_hooks(mut self, hooks: Hooks) -> Self {
        self.local_hooks = hooks;
        self
    }

    /// Paths the file tools may also read, never write.
    #[must_use]
    pub fn allow_read(mut self, paths: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        self.allow_read = paths.into_iter().map(Into::into).collect();
        self
    }

    /// Adds a tool of the host's own, after keel's.
    #[must_use]
    pub fn tool<T: Tool>(mut self, tool: T) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// The most model calls of one run (default 25).
    #[must_use]
    pub fn max_iterations(mut self, limit: u32) -> Self {
        self.max_iterations = limit;
        self
    }

    /// The most one run may spend on model calls, in USD (Claude Code's `--max-budget-usd`):
    /// [`AgentBuilder::cost_budget_usd`](keel_engine::AgentBuilder::cost_budget_usd). Sub-agents
    /// keep their own runs' limits.
    #[must_use]
    pub fn cost_budget_usd(mut self, budget_usd: f64) -> Self {
        self.cost_budget_usd = Some(budget_usd);
        self
    }

    /// The model a session goes on with when its own keeps failing past the provider's
    /// retries (Claude Code's `--fallback-model`):
    /// [`AgentBuilder::fallback_model`](keel_engine::AgentBuilder::fallback_model).
    #[must_use]
    pub fn fallback_model(mut self, model: impl Into<String>) -> Self {
        self.fallback_model = Some(model.into());
        self
    }

    /// Sub-agents defined by the host (Claude Code's `--agents`), offered beside those of the
    /// project's and the user's agent directories; one replaces a discovered one of the same
    /// name.
    #[cfg(feature = "delegation")]
    #[must_use]
    pub fn agents(mut self, agents: Vec<keel_agents::AgentDefinition>) -> Self {
        self.agents = agents;
        self
    }

    /// Replaces keel's system prompt (its instructions, the project's context and AGENTS.md,
    /// the skills index) with `prompt` (Claude Code's `--system-prompt`). Tools are offered
    /// all the same.
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Adds `text` at the end of the system prompt, keel's or the one given to
    /// [`system_prompt`](Self::system_prompt) (Claude Code's `--append-system-prompt`).
    #[must_use]
    pub fn append_system_prompt(mut self, text: impl Into<String>) -> Self {
        self.append_system_prompt = Some(text.into());
        self
    }

    /// Whether the agent may delegate: `code`, `spawn_agent`, `run_team` (default on). Off,
    /// skills and background tasks are off too.
    #[cfg(feature = "delegation")]
    #[must_use]
    pub fn delegation(mut self, on: bool) -> Self {
        self.delegation = on;
        self
    }

    /// Claude Code's user folder (`~/.claude`; [`keel_agents::claude_user_dir`] finds it),
    /// whose `agents` and `skills` are read after the project's and keel's home's (the
    /// project's override the user's of the same name). Default: none, only keel's folders.
    #[must_use]
    pub fn claude_home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.claude_home = Some(dir.into());
        self
    }

    /// Whether skills are offered (`use_skill` and their index in the prompt; default on;
    /// only with delegation on, when the `delegation` feature is built).
    #[must_use]
    pub fn skills(mut self, on: bool) -> Self {
        self.skills = on;
        self
    }

    /// Whether the `allowed-tools` of the project's skills (`.keel/skills`, `.claude/skills`
    /// in the repository) are honoured: say `true` only when the person trusts the project
    /// (default `false`). Skills grant their `allowed-tools` to the session that uses them,
    /// for the rest of it: calls those rules cover run without asking (see
    /// [`keel_agents::SkillGrants`]); deny and ask rules, hooks, protected paths and read-only
    /// modes still win. The user's own skills (`$KEEL_HOME/skills`, `~/.claude/skills`) are
    /// always honoured; an untrusted project's skills grant nothing, with a warning naming
    /// them in [`CodingAgent::warnings`].
    #[must_use]
    pub fn trust_project_skills(mut self, trusted: bool) -> Self {
        self.trust_project_skills = trusted;
        self
    }

    /// Where sessions are saved (default: JSONL files under `<home>/sessions`).
    #[must_use]
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.session_store = Some(store);
        self
    }

    /// Snapshots of the workspace before every change, within `limits`; `None` turns them off
    /// (default on).
    #[cfg(feature = "snapshots")]
    #[must_use]
    pub fn snapshots(mut self, limits: Option<keel_snapshot::SnapshotLimits>) -> Self {
        self.snapshots = limits;
        self
    }

    /// Background tasks (`start_task`, `task_status`, `cancel_task`), run as `tasks` says
    /// (default off; only with delegation).
    #[cfg(feature = "tasks")]
    #[must_use]
    pub fn background_tasks(mut self, tasks: Option<BackgroundTasks>) -> Self {
        self.tasks = tasks;
        self
    }

    /// Tools from connected MCP servers (see [`keel_mcp::start_servers`]): each server's
    /// tools are offered to the main agent as `mcp__<server>__<tool>`, as they are before each
    /// model request, after keel's own and the host's. Delegated runs do not get them.
    #[cfg(feature = "mcp")]
    #[must_use]
    pub fn mcp_servers(mut self, servers: impl IntoIterator<Item = keel_mcp::McpServer>) -> Self {
        self.mcp_servers.extend(servers);
        self
    }

    /// Which of keel's tools, and which system prompt, the agent gets. Without it: the
    /// [lean](ToolProfile::Lean) profile when the model's context window is known to be at
    /// most [`SMALL_CONTEXT_WINDOW`](crate::SMALL_CONTEXT_WINDOW) tokens (from
    /// [`context_window`](Self::context_window), the catalog, or
    /// [`served_context`](Self::served_context)), else the full one;
    /// [`CodingAgent::profile_choice`] says which happened.
    #[must_use]
    pub fn tool_profile(mut self, profile: ToolProfile) -> Self {
        self.tool_profile = Some(profile);
        self
    }

    /// The window the server serves the model with, as
    /// [`Provider::served_context`](keel_provider::Provider::served_context) answered (ask
    /// it before building: a local server's answer takes a loopback round trip, an unknown
    /// one at most [`SERVED_CONTEXT_TIMEOUT`](keel_provider::SERVED_CONTEXT_TIMEOUT)). Used
    /// as [`context_window`](Self::context_window) is.
    #[must_use]
    pub fn served_context(mut self, served: ServedContext) -> Self {
        self.served = Some(served);
        self
    }

    /// Builds the agent. Problems that leave a part out (a definition file skipped, snapshots
    /// that cannot be opened, tasks whose store cannot be opened) do not fail the build: they
    /// are in [`CodingAgent::warnings`].
    pub fn build(self) -> Result<CodingAgent, BuildError> {
        let given = match &self.cwd {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().map_err(|err| BuildError::WorkingDir {
                path: ".".into(),
                reason: err.to_string(),
            })?,
        };
        let cwd = std::fs::canonicalize(&given)
            .map_err(|err| err.to_string())
            .and_then(|dir| {
                if dir.is_dir() {
                    Ok(dir)
                } else {
                    Err("not a directory".to_owned())
                }
            })
            .map_err(|reason| BuildError::WorkingDir {
                path: given.clone(),
                reason,
            })?;
        let home = match &self.home {
            Some(home) => home.clone(),
            None => crate::home_dir()?,
        };
        // Everything is read on this thread: the project's context (instruction files,
        // libgit2's status) and the snapshot store. A thread beside the build for the context
        // was tried: on a two-core VM its start, its own malloc arena and the wake-ups cost
        // more than the overlap saved (benches/startup.sh, 0.1-0.5 ms slower). The task store
        // (SQLite, with recovery) opens at its first use, which a new session's first model
        // request is not (it does not ask the notifier).
        let root = keel_agents::project_root(&cwd);
        let mut warnings = Vec::new();
        let mut allow_read = Vec::new();
        for path in &self.allow_read {
            let full = std::fs::canonicalize(path).map_err(|err| BuildError::AllowRead {
                path: path.clone(),
                reason: err.to_string(),
            })?;
            allow_read.push(full);
        }
        let mut policy = self.sandbox;
        for path in protected::default_protected(&cwd, &home, &policy.writable_roots) {
            if !policy.protected_paths.contains(&path) {
                policy.protected_paths.push(path);
            }
        }
        if protected::home_is_writable(&cwd, &home, &policy.writable_roots) {
            warnings.push(format!(
                "KEEL_HOME ({}) lies where commands may write: they could change keel's \
                 sessions and task records (only its config.toml is protected); set KEEL_HOME \
                 to a directory outside the workspace",
                home.display()
            ));
        }

        // The file tools: the workspace, the allow-read paths, the writable roots, and with
        // skills the user's skills folder (skills may point at files beside them).
        let mut sandbox = PathSandbox::new(&cwd)?;
        for path in allow_read.iter().chain(&policy.writable_roots) {
            sandbox = sandbox.allow_read(path)?;
        }
        let user_skills = Home(&home).skills();
        let model = self
            .model
            .unwrap_or_else(|| default_model(self.provider.name()).to_owned());
        let catalog = self.catalog.unwrap_or_else(ModelCatalog::built_in);
        let window = profile::known_window(&catalog, &model, self.context_window, self.served);
        let (tool_profile, profile_choice) = profile::choose(self.tool_profile, window);
        // The lean profile has no delegation, skills or tasks. (Without the `delegation`
        // feature there is no switch: `delegation` stays on but for the lean profile.)
        let delegation = self.delegation && tool_profile == ToolProfile::Full;
        let skills = delegation && self.skills;
        if skills && user_skills.is_dir() {
            sandbox = sandbox.allow_read(&user_skills)?;
        }
        let claude_skills = self.claude_home.as_ref().map(|dir| dir.join("skills"));
        if skills && let Some(claude_skills) = claude_skills.filter(|dir| dir.is_dir()) {
            sandbox = sandbox.allow_read(&claude_skills)?;
        }
        let base = match tool_profile {
            ToolProfile::Lean => lean_tools(&sandbox, &policy)?,
            _ => default_tools(&sandbox, &policy)?,
        };

        let mut hooks = self.hooks;
        hooks.extend(Hooks::from_config(
            &self.hook_configs,
            Arc::new(keel_sandbox::ProcessGroupRunner),
        )?);
        // Skills' allowed-tools: the user's skills folders are trusted, the project's only
        // when the host says the project is.
        let mut trusted_skills = vec![Home(&home).skills()];
        trusted_skills.extend(self.claude_home.as_ref().map(|dir| dir.join("skills")));
        if self.trust_project_skills {
            trusted_skills.extend(SkillIndex::standard_dirs(&root, None));
        }
        let user_home = self.user_home.clone().or_else(crate::user_home_dir);
        let grants = Arc::new(SkillGrants::new(
            &trusted_skills,
            RuleContext {
                cwd: cwd.clone(),
                project_root: root.clone(),
                home: user_home.clone(),
            },
        ));
        let approver: Arc<dyn Approver> =
            Arc::new(GrantingApprover::new(self.approver, grants.clone()));
        let policies = Policies::new(policy)
            .with_approver(approver)
            .with_permissions(self.permissions)
            .with_hooks(hooks)
            .with_allow_read(allow_read);

        #[cfg(feature = "delegation")]
        let models = Models {
            strong: self.strong_model,
            ..Models::new(
                &model,
                self.small_model
                    .unwrap_or_else(|| Models::small_for(&model)),
            )
        };
        #[cfg(feature = "delegation")]
        let summary_model = self
            .compaction_model
            .as_deref()
            .map(|name| models.resolve(name));
        #[cfg(not(feature = "delegation"))]
        let summary_model = self
            .compaction_model
            .as_deref()
            .map(|name| ModelCatalog::expand_alias(name.trim()).to_owned());
        #[cfg(feature = "snapshots")]
        let snapshots = open_snapshots(self.snapshots, &home, &cwd).unwrap_or_else(|warning| {
            warnings.push(warning);
            None
        });

        let user_memory = crate::user_memory_files(&home, user_home.as_deref());
        let context = keel_agents::project_context_from(&MemorySources {
            user_files: user_memory.clone(),
            user_home: user_home.clone(),
            root: root.clone(),
            cwd: cwd.clone(),
            extra_readable: policies.allow_read().to_vec(),
        });
        // A replaced prompt holds no memory files: none are reported.
        let memory = match self.system_prompt {
            Some(_) => MemoryReport::default(),
            None => context.memory_report(),
        };
        warnings.extend(memory.refusals());
        let mut prompt = match tool_profile {
            ToolProfile::Lean => lean_system_prompt(&context),
            _ => system_prompt(&context),
        };
        #[cfg(feature = "tasks")]
        let task_store = (delegation && self.tasks.is_some())
            .then(|| crate::tasks::OpeningTaskStore::new(&home));
        #[cfg(feature = "tasks")]
        let tasks = match (&self.tasks, task_store) {
            (Some(options), Some(store)) => {
                open_tasks(options, Arc::new(store), &cwd, &home, &policies)
                    .map_err(|err| warnings.push(format!("background tasks are off: {err}")))
                    .ok()
            }
            _ => None,
        };

        #[cfg(not(feature = "delegation"))]
        let (tools, delegates) = {
            let delegates = Delegates::discover(
                &root,
                &home,
                self.claude_home.as_deref(),
                skills,
                grants,
                &mut warnings,
            );
            (delegates.register(base)?, Some(Arc::new(delegates)))
        };
        #[cfg(feature = "delegation")]
        let (tools, delegates) = if delegation {
            #[allow(unused_mut)]
            let mut delegation = Delegation::new(self.provider.clone(), models, policies.clone())
                .catalog(catalog.clone())
                .compaction_model(self.compaction_model.as_deref());
            #[cfg(feature = "snapshots")]
            if let Some(snapshots) = &snapshots {
                delegation = delegation.snapshots(snapshots.clone());
            }
            let code = CodeTool::new(delegation.clone(), &cwd, Home(&home).logs())
                .max_iterations(self.max_iterations)
                .user_memory(user_memory, user_home);
            let delegates = Delegates::discover(
                &root,
                &home,
                self.claude_home.as_deref(),
                &base,
                delegation,
                skills,
                grants,
                #[cfg(feature = "tasks")]
                tasks,
                self.agents,
                &mut warnings,
            );
            (delegates.register(base, code)?, Some(Arc::new(delegates)))
        } else {
            (base, None)
        };
        if skills
            && let Some(section) = delegates.as_ref().and_then(|d| d.skills().prompt_section())
        {
            prompt.push_str("\n\n");
            prompt.push_str(&section);
        }
        if let Some(replacement) = self.system_prompt {
            prompt = replacement;
        }
        if let Some(text) = self.append_system_prompt.filter(|text| !text.is_empty()) {
            if !prompt.is_empty() {
                prompt.push_str("\n\n");
            }
            prompt.push_str(&text);
        }
        let mut tools: ToolRegistry = tools;
        for tool in self.tools {
            tools.register_dyn(tool)?;
        }
        #[cfg(feature = "mcp")]
        for server in self.mcp_servers {
            tools.add_source(Arc::new(server));
        }
        // The first request's fixed part: system prompt and tools (the prompt's is added per
        // request, in CodingAgent::first_request_tokens).
        let base_tokens = keel_engine::compaction::estimate_tokens(
            Some(&prompt),
            &tools.definitions(),
            &[],
            None,
        );
        // Every rule and hook matcher must name a tool there is: a misspelt one (`Bsah(rm:*)`)
        // would silently forbid nothing. MCP tools (`mcp__…`) come and go with their servers:
        // any passes; so do keel's own tools this agent leaves out (`--no-delegation`).
        let mut known = tools.names();
        known.extend(keel_agents::KEEL_TOOLS);
        policies.permissions().validate(&known)?;
        for config in &self.hook_configs {
            config.check_tools(&known)?;
        }
        warnings.extend(inert_rule_warnings(policies.permissions()));

        let store: Arc<dyn SessionStore> = match self.session_store {
            Some(store) => store,
            None => Arc::new(JsonlSessionStore::new(Home(&home).sessions())),
        };
        // The agent's own hooks: the host's local ones first, then the policies'.
        let mut agent_hooks = self.local_hooks;
        agent_hooks.extend(policies.hooks());
        #[allow(unused_mut)] // without the snapshots and tasks features nothing is added
        let mut builder = Agent::builder(self.provider.clone())
            .model(&model)
            .catalog(catalog)
            .compaction(CompactionPolicy {
                // A window the host or the server stated (the catalog's the engine knows
                // itself).
                context_window: window
                    .filter(|window| window.origin != WindowOrigin::Catalog)
                    .map(|window| window.tokens),
                summary_model,
                ..CompactionPolicy::default()
            })
            .system_prompt(prompt)
            .tools(tools)
            .max_iterations(self.max_iterations)
            .approver(policies.approver().clone())
            .permissions(policies.permissions().clone())
            .hooks(agent_hooks)
            .session_store(store);
        if let Some(budget_usd) = self.cost_budget_usd {
            builder = builder.cost_budget_usd(budget_usd);
        }
        if let Some(model) = self.fallback_model {
            builder = builder.fallback_model(model);
        }
        #[cfg(feature = "snapshots")]
        if let Some(snapshots) = &snapshots {
            builder = builder.snapshots(snapshots.clone());
        }
        #[cfg(feature = "tasks")]
        if let Some(launcher) = delegates.as_ref().and_then(|d| d.tasks()) {
            builder = builder.notifier(Arc::new(crate::tasks::TaskNotifier::new(
                launcher.store().clone(),
            )));
        }
        let agent = builder.build()?;
        Ok(CodingAgent::new(crate::agent::Parts {
            agent,
            cwd,
            home,
            model,
            policies,
            paths: sandbox,
            delegates,
            warnings,
            memory,
            #[cfg(feature = "snapshots")]
            snapshots,
            tool_profile,
            profile_choice,
            window,
            base_tokens,
        }))
    }
}

/// One warning for each rule naming a tool of Claude Code's that keel does not have
/// (`WebFetch(domain:x.com)`): understood, but it matches nothing.
fn inert_rule_warnings(rules: &PermissionRules) -> Vec<String> {
    let lists = [
        ("deny", &rules.deny, "it forbids nothing"),
        ("ask", &rules.ask, "it asks about nothing"),
        ("allow", &rules.allow, "it allows nothing"),
    ];
    lists
        .into_iter()
        .flat_map(|(kind, list, effect)| {
            list.iter().filter(|rule| rule.is_inert()).map(move |rule| {
                format!(
                    "permission {kind} rule {rule} names {}, a Claude Code tool keel does \
                     not have: it matches nothing ({effect}); remove it or name a keel tool",
                    rule.tool
                )
            })
        })
        .collect()
}

/// The snapshot store of `cwd` under `home` (`None` when snapshots are off), or the warning
/// saying why it could not be opened.
#[cfg(feature = "snapshots")]
fn open_snapshots(
    limits: Option<keel_snapshot::SnapshotLimits>,
    home: &std::path::Path,
    cwd: &std::path::Path,
) -> Result<Option<Arc<keel_snapshot::ShadowSnapshots>>, String> {
    let Some(limits) = limits else {
        return Ok(None);
    };
    keel_snapshot::ShadowSnapshots::open(Home(home).snapshots(), cwd, limits)
        .map(|snapshots| Some(Arc::new(snapshots)))
        .map_err(|err| {
            format!(
                "no snapshots, so changes cannot be rewound: snapshots of {}: {err}",
                cwd.display()
            )
        })
}

/// The task launcher for `options` on `store`, every task under `policies`, and the
/// sub-agents that may start tasks.
#[cfg(feature = "tasks")]
fn open_tasks(
    options: &BackgroundTasks,
    store: Arc<dyn keel_tasks::TaskStore>,
    cwd: &std::path::Path,
    home: &std::path::Path,
    policies: &Policies,
) -> Result<(crate::tasks::TaskLauncher, Vec<String>), String> {
    let settings =
        keel_tasks::TaskSettings::from_policies(cwd, policies).map_err(|err| err.to_string())?;
    let launcher = options.launcher(home, store, settings)?;
    Ok((launcher, options.allowed().to_vec()))
}

/// The usual model of a provider named `name` (a [`keel_provider::ProviderKind`]'s name;
/// any other, Anthropic's).
fn default_model(name: &str) -> &'static str {
    keel_provider::ProviderKind::from_name(name)
        .unwrap_or_default()
        .default_model()
}
