//! [`CodingAgentBuilder`]: from a provider and a few switches to the whole agent.

use std::path::PathBuf;
use std::sync::Arc;

#[cfg(feature = "delegation")]
use keel_agents::{CodeTool, Delegation, Models};
use keel_agents::{GrantingApprover, Policies, SkillGrants, SkillIndex};
use keel_engine::{
    Agent, Approver, CompactionPolicy, DEFAULT_MAX_ITERATIONS, DenyGated, HookConfig, Hooks,
    JsonlSessionStore, MemoryReport, MemorySources, PermissionRules, ProjectContext, RuleContext,
    SessionStore, lean_system_prompt, system_prompt,
};
use keel_provider::{ModelCatalog, Provider, ServedContext};
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools, lean_tools};
use keel_tool::{DynTool, Tool, ToolRegistry};

use crate::agent::CodingAgent;
use crate::delegates::Delegates;
use crate::home::Home;
use crate::profile::{self, ContextWindow, ProfileChoice, ToolProfile, WindowOrigin};
use crate::{BuildError, protected};

#[cfg(feature = "tasks")]
use crate::background::BackgroundTasks;

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
    places: Places,
    models: ModelSettings,
    rules: RuleSettings,
    parts: PartSettings,
    prompt: PromptSettings,
    engine: EngineSettings,
}

/// Where the agent works, and what else its file tools read.
#[derive(Default)]
struct Places {
    cwd: Option<PathBuf>,
    home: Option<PathBuf>,
    /// The user's home (`~`), for `~/.claude/CLAUDE.md` and memory imports; `None`: `$HOME`.
    user_home: Option<PathBuf>,
    claude_home: Option<PathBuf>,
    allow_read: Vec<PathBuf>,
}

/// The models, and what tells the main model's context window.
#[derive(Default)]
struct ModelSettings {
    model: Option<String>,
    small_model: Option<String>,
    strong_model: Option<String>,
    compaction_model: Option<String>,
    catalog: Option<ModelCatalog>,
    context_window: Option<u64>,
    /// The window the server says it serves the model with.
    served: Option<ServedContext>,
    /// The tool profile the host chose (`None`: by the model's window).
    tool_profile: Option<ToolProfile>,
}

/// What the [`Policies`] are made of: the sandbox, the approver, permission rules, hooks.
struct RuleSettings {
    sandbox: SandboxPolicy,
    approver: Arc<dyn Approver>,
    permissions: PermissionRules,
    hook_configs: Vec<HookConfig>,
    hooks: Hooks,
}

/// Which of keel's parts the agent gets, and the tools the host adds.
struct PartSettings {
    delegation: bool,
    skills: bool,
    /// Whether the project's skills' `allowed-tools` are honoured.
    trust_project_skills: bool,
    /// Sub-agents the host defines, beside the discovered ones.
    #[cfg(feature = "delegation")]
    agents: Vec<keel_agents::AgentDefinition>,
    #[cfg(feature = "snapshots")]
    snapshots: Option<keel_snapshot::SnapshotLimits>,
    #[cfg(feature = "tasks")]
    tasks: Option<BackgroundTasks>,
    /// The host's own tools.
    tools: Vec<Arc<dyn DynTool>>,
    #[cfg(feature = "mcp")]
    mcp_servers: Vec<keel_mcp::McpServer>,
}

/// What the host does to keel's system prompt.
#[derive(Default)]
struct PromptSettings {
    /// A system prompt that replaces keel's (`None`: keel's, built from the project).
    system_prompt: Option<String>,
    /// Text added at the end of the system prompt.
    append_system_prompt: Option<String>,
}

/// The engine agent's own settings: its runs' limits, its local hooks, its session store.
struct EngineSettings {
    max_iterations: u32,
    /// The most one run may spend, in USD.
    cost_budget_usd: Option<f64>,
    /// The model to go on with when the model keeps failing.
    fallback_model: Option<String>,
    local_hooks: Hooks,
    session_store: Option<Arc<dyn SessionStore>>,
}

impl std::fmt::Debug for CodingAgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodingAgentBuilder")
            .field("provider", &self.provider.name())
            .field("model", &self.models.model)
            .field("cwd", &self.places.cwd)
            .field("sandbox", &self.rules.sandbox)
            .finish_non_exhaustive()
    }
}

impl CodingAgentBuilder {
    pub(crate) fn new(provider: Arc<dyn Provider>) -> Self {
        Self {
            provider,
            places: Places::default(),
            models: ModelSettings::default(),
            rules: RuleSettings {
                sandbox: SandboxPolicy::default(),
                approver: Arc::new(DenyGated),
                permissions: PermissionRules::default(),
                hook_configs: Vec::new(),
                hooks: Hooks::new(),
            },
            parts: PartSettings {
                delegation: true,
                skills: true,
                trust_project_skills: false,
                #[cfg(feature = "delegation")]
                agents: Vec::new(),
                #[cfg(feature = "snapshots")]
                snapshots: Some(keel_snapshot::SnapshotLimits::default()),
                #[cfg(feature = "tasks")]
                tasks: None,
                tools: Vec::new(),
                #[cfg(feature = "mcp")]
                mcp_servers: Vec::new(),
            },
            prompt: PromptSettings::default(),
            engine: EngineSettings {
                max_iterations: DEFAULT_MAX_ITERATIONS,
                cost_budget_usd: None,
                fallback_model: None,
                local_hooks: Hooks::new(),
                session_store: None,
            },
        }
    }
    /// The model (default: the provider's usual one, `claude-sonnet-4-5` or `gpt-4.1`).
    #[must_use]
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.models.model = Some(model.into());
        self
    }

    /// The cheap model delegated runs may pick (`small`, `fast`; default: one of the same
    /// family). With a [`ModelRouter`](keel_provider::ModelRouter) as the provider it may be
    /// served by another provider (a local server).
    #[must_use]
    pub fn small_model(mut self, model: impl Into<String>) -> Self {
        self.models.small_model = Some(model.into());
        self
    }

    /// The strong model delegated runs may pick (`strong`, `opus` with a provider other than
    /// Anthropic; default: the model itself).
    #[must_use]
    pub fn strong_model(mut self, model: impl Into<String>) -> Self {
        self.models.strong_model = Some(model.into());
        self
    }

    /// Prices, context windows and output limits (default: the built-in catalog, see
    /// [`keel_provider::PRICES_CHECKED`]), for the agent and every run it delegates: costs,
    /// the cost budget and when to compact follow it.
    #[must_use]
    pub fn catalog(mut self, catalog: ModelCatalog) -> Self {
        self.models.catalog = Some(catalog);
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
        self.models.context_window = Some(tokens);
        self
    }

    /// The model that writes compaction summaries, for the agent and its delegated runs: a
    /// tier (`small`, `fast`, `strong`, `default`) or a model id
    /// ([`CompactionPolicy::summary_model`](keel_engine::CompactionPolicy::summary_model);
    /// default: each session's own model).
    #[must_use]
    pub fn compaction_model(mut self, tier_or_model: impl Into<String>) -> Self {
        self.models.compaction_model = Some(tier_or_model.into());
        self
    }

    /// The directory the agent works in (default: the current one).
    #[must_use]
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.places.cwd = Some(dir.into());
        self
    }

    /// keel's home (default `$KEEL_HOME`, else `~/.keel`).
    #[must_use]
    pub fn home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.places.home = Some(dir.into());
        self
    }

    /// The user's home directory (default `$HOME`): where `~/.claude/CLAUDE.md`, the user's
    /// memory file loaded before the project's, is looked for, and what `@~/` imports in the
    /// user's memory files mean. `$KEEL_HOME/AGENTS.md` is loaded after it
    /// ([`user_memory_files`](crate::user_memory_files)).
    #[must_use]
    pub fn user_home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.places.user_home = Some(dir.into());
        self
    }

    /// What the tools and commands may do: mode, network, writable roots, protected paths,
    /// hidden variables. keel adds its own protected paths (its config, the home directory's
    /// start-up files and the `PATH` directories, where a writable root holds them).
    #[must_use]
    pub fn sandbox(mut self, policy: SandboxPolicy) -> Self {
        self.rules.sandbox = policy;
        self
    }

    /// Who approves gated calls (default [`DenyGated`]: refused).
    #[must_use]
    pub fn approver(mut self, approver: impl Approver + 'static) -> Self {
        self.rules.approver = Arc::new(approver);
        self
    }

    /// Allow and deny rules (deny wins).
    #[must_use]
    pub fn permissions(mut self, rules: PermissionRules) -> Self {
        self.rules.permissions = rules;
        self
    }

    /// Command hooks with Claude Code's contract, run after the hooks of
    /// [`hooks`](Self::hooks). Background tasks run them too.
    #[must_use]
    pub fn hook_configs(mut self, configs: Vec<HookConfig>) -> Self {
        self.rules.hook_configs = configs;
        self
    }

    /// Hooks (Rust hooks too) that hold for this agent and every run it delegates. Rust
    /// hooks cannot reach a background task's own process, so with any, tasks are off.
    #[must_use]
    pub fn hooks(mut self, hooks: Hooks) -> Self {
        self.rules.hooks = hooks;
        self
    }

    /// Hooks for this agent alone, not its delegated runs: for what a host watches (a
    /// display's diffs), never for what it forbids (use [`hooks`](Self::hooks)).
    #[must_use]
    pub fn local_hooks(mut self, hooks: Hooks) -> Self {
        self.engine.local_hooks = hooks;
        self
    }

    /// Paths the file tools may also read, never write.
    #[must_use]
    pub fn allow_read(mut self, paths: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        self.places.allow_read = paths.into_iter().map(Into::into).collect();
        self
    }

    /// Adds a tool of the host's own, after keel's.
    #[must_use]
    pub fn tool<T: Tool>(mut self, tool: T) -> Self {
        self.parts.tools.push(Arc::new(tool));
        self
    }

    /// The most model calls of one run (default 25).
    #[must_use]
    pub fn max_iterations(mut self, limit: u32) -> Self {
        self.engine.max_iterations = limit;
        self
    }

    /// The most one run may spend on model calls, in USD (Claude Code's `--max-budget-usd`):
    /// [`AgentBuilder::cost_budget_usd`](keel_engine::AgentBuilder::cost_budget_usd). Sub-agents
    /// keep their own runs' limits.
    #[must_use]
    pub fn cost_budget_usd(mut self, budget_usd: f64) -> Self {
        self.engine.cost_budget_usd = Some(budget_usd);
        self
    }

    /// The model a session goes on with when its own keeps failing past the provider's
    /// retries (Claude Code's `--fallback-model`):
    /// [`AgentBuilder::fallback_model`](keel_engine::AgentBuilder::fallback_model).
    #[must_use]
    pub fn fallback_model(mut self, model: impl Into<String>) -> Self {
        self.engine.fallback_model = Some(model.into());
        self
    }

    /// Sub-agents defined by the host (Claude Code's `--agents`), offered beside those of the
    /// project's and the user's agent directories; one replaces a discovered one of the same
    /// name.
    #[cfg(feature = "delegation")]
    #[must_use]
    pub fn agents(mut self, agents: Vec<keel_agents::AgentDefinition>) -> Self {
        self.parts.agents = agents;
        self
    }

    /// Replaces keel's system prompt (its instructions, the project's context and AGENTS.md,
    /// the skills index) with `prompt` (Claude Code's `--system-prompt`). Tools are offered
    /// all the same.
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.prompt.system_prompt = Some(prompt.into());
        self
    }

    /// Adds `text` at the end of the system prompt, keel's or the one given to
    /// [`system_prompt`](Self::system_prompt) (Claude Code's `--append-system-prompt`).
    #[must_use]
    pub fn append_system_prompt(mut self, text: impl Into<String>) -> Self {
        self.prompt.append_system_prompt = Some(text.into());
        self
    }

    /// Whether the agent may delegate: `code`, `spawn_agent`, `run_team` (default on). Off,
    /// skills and background tasks are off too.
    #[cfg(feature = "delegation")]
    #[must_use]
    pub fn delegation(mut self, on: bool) -> Self {
        self.parts.delegation = on;
        self
    }

    /// Claude Code's user folder (`~/.claude`; [`keel_agents::claude_user_dir`] finds it),
    /// whose `agents` and `skills` are read after the project's and keel's home's (the
    /// project's override the user's of the same name). Default: none, only keel's folders.
    #[must_use]
    pub fn claude_home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.places.claude_home = Some(dir.into());
        self
    }

    /// Whether skills are offered (`use_skill` and their index in the prompt; default on;
    /// only with delegation on, when the `delegation` feature is built).
    #[must_use]
    pub fn skills(mut self, on: bool) -> Self {
        self.parts.skills = on;
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
        self.parts.trust_project_skills = trusted;
        self
    }

    /// Where sessions are saved (default: JSONL files under `<home>/sessions`).
    #[must_use]
    pub fn session_store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.engine.session_store = Some(store);
        self
    }

    /// Snapshots of the workspace before every change, within `limits`; `None` turns them off
    /// (default on).
    #[cfg(feature = "snapshots")]
    #[must_use]
    pub fn snapshots(mut self, limits: Option<keel_snapshot::SnapshotLimits>) -> Self {
        self.parts.snapshots = limits;
        self
    }

    /// Background tasks (`start_task`, `task_status`, `cancel_task`), run as `tasks` says
    /// (default off; only with delegation).
    #[cfg(feature = "tasks")]
    #[must_use]
    pub fn background_tasks(mut self, tasks: Option<BackgroundTasks>) -> Self {
        self.parts.tasks = tasks;
        self
    }

    /// Tools from connected MCP servers (see [`keel_mcp::start_servers`]): each server's
    /// tools are offered to the main agent as `mcp__<server>__<tool>`, as they are before each
    /// model request, after keel's own and the host's. Delegated runs do not get them.
    #[cfg(feature = "mcp")]
    #[must_use]
    pub fn mcp_servers(mut self, servers: impl IntoIterator<Item = keel_mcp::McpServer>) -> Self {
        self.parts.mcp_servers.extend(servers);
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
        self.models.tool_profile = Some(profile);
        self
    }

    /// The window the server serves the model with, as
    /// [`Provider::served_context`](keel_provider::Provider::served_context) answered (ask
    /// it before building: a local server's answer takes a loopback round trip, an unknown
    /// one at most [`SERVED_CONTEXT_TIMEOUT`](keel_provider::SERVED_CONTEXT_TIMEOUT)). Used
    /// as [`context_window`](Self::context_window) is.
    #[must_use]
    pub fn served_context(mut self, served: ServedContext) -> Self {
        self.models.served = Some(served);
        self
    }

    /// Builds the agent. Problems that leave a part out (a definition file skipped, snapshots
    /// that cannot be opened, tasks whose store cannot be opened) do not fail the build: they
    /// are in [`CodingAgent::warnings`].
    pub fn build(self) -> Result<CodingAgent, BuildError> {
        let Self {
            provider,
            places,
            models,
            mut rules,
            parts,
            prompt,
            engine,
        } = self;
        // The phases, in order: resolve (places, models, window, profile), policies,
        // snapshots, the project's context, tools, system prompt, the rules checked against
        // the tools, the engine's agent (finish). Everything is read on this thread: the
        // project's context (instruction files, libgit2's status) and the snapshot store. A
        // thread beside the build for the context was tried: on a two-core VM its start, its
        // own malloc arena and the wake-ups cost more than the overlap saved
        // (benches/startup.sh, 0.1-0.5 ms slower). The task store (SQLite, with recovery)
        // opens at its first use, which a new session's first model request is not (it does
        // not ask the notifier).
        let mut warnings = Vec::new();
        let resolved = Resolved::new(
            provider.name(),
            places,
            models,
            &parts,
            &mut rules.sandbox,
            &mut warnings,
        )?;
        let mut assembly = Assembly::new(
            provider,
            resolved,
            rules,
            parts.trust_project_skills,
            warnings,
        )?;
        #[cfg(feature = "snapshots")]
        assembly.open_snapshots(parts.snapshots);
        let (context, memory) = assembly.project_context(prompt.system_prompt.is_some());
        let (tools, delegates) = assembly.tools(parts, engine.max_iterations)?;
        let skills_section = delegates
            .as_ref()
            .filter(|_| assembly.resolved.skills)
            .and_then(|delegates| delegates.skills().prompt_section());
        let system_prompt =
            prompt.system_prompt(&context, assembly.resolved.tool_profile, skills_section);
        assembly.check_rules(&tools)?;
        assembly.finish(engine, system_prompt, tools, delegates, memory)
    }
}

/// The first phase of a build: the builder's places, models and switches resolved, before
/// anything is made.
struct Resolved {
    /// The working directory, canonical.
    cwd: PathBuf,
    home: PathBuf,
    /// The project's root: the repository's top, else `cwd`.
    root: PathBuf,
    user_home: Option<PathBuf>,
    claude_home: Option<PathBuf>,
    /// The allow-read paths, canonical.
    allow_read: Vec<PathBuf>,
    /// The file tools' sandbox: the workspace and every root they may read.
    paths: PathSandbox,
    model: String,
    catalog: ModelCatalog,
    window: Option<ContextWindow>,
    tool_profile: ToolProfile,
    profile_choice: ProfileChoice,
    /// Whether the agent delegates (never with the lean profile).
    #[cfg(feature = "delegation")]
    delegation: bool,
    /// Whether skills are offered (only with delegation).
    skills: bool,
    /// The model that writes compaction summaries, a tier resolved to a model.
    summary_model: Option<String>,
    /// The model tiers delegated runs pick from.
    #[cfg(feature = "delegation")]
    tiers: Models,
    /// The compaction model as the host named it (a tier or a model), for delegated runs.
    #[cfg(feature = "delegation")]
    compaction_model: Option<String>,
}

impl Resolved {
    /// Resolves the places (the working directory, keel's home, the allow-read paths) and
    /// the models (the model, its window, the tool profile that follows, the tiers). Adds
    /// keel's protected paths to `sandbox`, with a warning when keel's home lies where
    /// commands may write.
    fn new(
        provider: &str,
        places: Places,
        models: ModelSettings,
        parts: &PartSettings,
        sandbox: &mut SandboxPolicy,
        warnings: &mut Vec<String>,
    ) -> Result<Self, BuildError> {
        let cwd = working_dir(places.cwd)?;
        let home = match places.home {
            Some(home) => home,
            None => crate::home_dir()?,
        };
        let root = keel_agents::project_root(&cwd);
        let allow_read = canonical_allow_read(places.allow_read)?;
        protect_keel(sandbox, &cwd, &home, warnings);
        let model = models
            .model
            .unwrap_or_else(|| default_model(provider).to_owned());
        let catalog = models.catalog.unwrap_or_else(ModelCatalog::built_in);
        let window = profile::known_window(&catalog, &model, models.context_window, models.served);
        let (tool_profile, profile_choice) = profile::choose(models.tool_profile, window);
        // The lean profile has no delegation, skills or tasks. (Without the `delegation`
        // feature there is no switch: `delegation` stays on but for the lean profile.)
        let delegation = parts.delegation && tool_profile == ToolProfile::Full;
        let skills = delegation && parts.skills;
        let skill_dirs = skills.then(|| {
            [Home(&home).skills()]
                .into_iter()
                .chain(places.claude_home.as_ref().map(|dir| dir.join("skills")))
        });
        let paths = path_sandbox(&cwd, &allow_read, sandbox, skill_dirs.into_iter().flatten())?;
        #[cfg(feature = "delegation")]
        let tiers = model_tiers(&model, models.small_model, models.strong_model);
        #[cfg(feature = "delegation")]
        let summary_model = models
            .compaction_model
            .as_deref()
            .map(|name| tiers.resolve(name));
        #[cfg(not(feature = "delegation"))]
        let summary_model = models
            .compaction_model
            .as_deref()
            .map(|name| ModelCatalog::expand_alias(name.trim()).to_owned());
        Ok(Self {
            cwd,
            home,
            root,
            user_home: places.user_home.or_else(crate::user_home_dir),
            claude_home: places.claude_home,
            allow_read,
            paths,
            model,
            catalog,
            window,
            tool_profile,
            profile_choice,
            #[cfg(feature = "delegation")]
            delegation,
            skills,
            summary_model,
            #[cfg(feature = "delegation")]
            tiers,
            #[cfg(feature = "delegation")]
            compaction_model: models.compaction_model,
        })
    }

    /// The user-level memory files, loaded before the project's.
    fn user_memory(&self) -> Vec<PathBuf> {
        crate::user_memory_files(&self.home, self.user_home.as_deref())
    }
}

/// The working directory: `given` (else the current one), canonical, and a directory.
fn working_dir(given: Option<PathBuf>) -> Result<PathBuf, BuildError> {
    let given = match given {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|err| BuildError::WorkingDir {
            path: ".".into(),
            reason: err.to_string(),
        })?,
    };
    std::fs::canonicalize(&given)
        .map_err(|err| err.to_string())
        .and_then(|dir| {
            if dir.is_dir() {
                Ok(dir)
            } else {
                Err("not a directory".to_owned())
            }
        })
        .map_err(|reason| BuildError::WorkingDir {
            path: given,
            reason,
        })
}

/// The allow-read `paths`, canonical: each must exist.
fn canonical_allow_read(paths: Vec<PathBuf>) -> Result<Vec<PathBuf>, BuildError> {
    paths
        .into_iter()
        .map(|path| match std::fs::canonicalize(&path) {
            Ok(full) => Ok(full),
            Err(err) => Err(BuildError::AllowRead {
                path,
                reason: err.to_string(),
            }),
        })
        .collect()
}

/// The model tiers delegated runs pick from: `model` itself, `small` (default: one of the
/// same family) and `strong` (default: the model itself).
#[cfg(feature = "delegation")]
fn model_tiers(model: &str, small: Option<String>, strong: Option<String>) -> Models {
    Models {
        strong,
        ..Models::new(model, small.unwrap_or_else(|| Models::small_for(model)))
    }
}

/// Adds keel's own protected paths to `policy` (its config, the home directory's start-up
/// files, the `PATH` directories, where a writable root holds them), and a warning to
/// `warnings` when keel's home lies where commands may write.
fn protect_keel(
    policy: &mut SandboxPolicy,
    cwd: &std::path::Path,
    home: &std::path::Path,
    warnings: &mut Vec<String>,
) {
    for path in protected::default_protected(cwd, home, &policy.writable_roots) {
        if !policy.protected_paths.contains(&path) {
            policy.protected_paths.push(path);
        }
    }
    if protected::home_is_writable(cwd, home, &policy.writable_roots) {
        warnings.push(format!(
            "KEEL_HOME ({}) lies where commands may write: they could change keel's \
             sessions and task records (only its config.toml is protected); set KEEL_HOME \
             to a directory outside the workspace",
            home.display()
        ));
    }
}

/// The file tools' sandbox: the workspace, the allow-read paths, the writable roots, and the
/// skills folders that exist (skills may point at files beside them).
fn path_sandbox(
    cwd: &std::path::Path,
    allow_read: &[PathBuf],
    policy: &SandboxPolicy,
    skill_dirs: impl Iterator<Item = PathBuf>,
) -> Result<PathSandbox, BuildError> {
    let mut sandbox = PathSandbox::new(cwd)?;
    for path in allow_read.iter().chain(&policy.writable_roots) {
        sandbox = sandbox.allow_read(path)?;
    }
    for dir in skill_dirs.filter(|dir| dir.is_dir()) {
        sandbox = sandbox.allow_read(&dir)?;
    }
    Ok(sandbox)
}

/// A build after its first phase: the settings resolved, the policies every run keeps, the
/// snapshot store, and the warnings so far. Its methods are the later phases, in order.
struct Assembly {
    provider: Arc<dyn Provider>,
    resolved: Resolved,
    policies: Policies,
    /// The rules each session's skills granted it, which the approver consults.
    grants: Arc<SkillGrants>,
    /// The command hooks' configurations, checked against the tools once they are known.
    hook_configs: Vec<HookConfig>,
    #[cfg(feature = "snapshots")]
    snapshots: Option<Arc<keel_snapshot::ShadowSnapshots>>,
    warnings: Vec<String>,
}

impl Assembly {
    /// The policies phase: the host's hooks then the command hooks, the approver behind the
    /// skills' grants (the user's skills are trusted, the project's only when the host says
    /// the project is), the permission rules, the sandbox and the allow-read paths.
    fn new(
        provider: Arc<dyn Provider>,
        resolved: Resolved,
        rules: RuleSettings,
        trust_project_skills: bool,
        warnings: Vec<String>,
    ) -> Result<Self, BuildError> {
        let mut hooks = rules.hooks;
        hooks.extend(Hooks::from_config(
            &rules.hook_configs,
            Arc::new(keel_sandbox::ProcessGroupRunner),
        )?);
        let mut trusted_skills = vec![Home(&resolved.home).skills()];
        trusted_skills.extend(resolved.claude_home.as_ref().map(|dir| dir.join("skills")));
        if trust_project_skills {
            trusted_skills.extend(SkillIndex::standard_dirs(&resolved.root, None));
        }
        let grants = Arc::new(SkillGrants::new(
            &trusted_skills,
            RuleContext {
                cwd: resolved.cwd.clone(),
                project_root: resolved.root.clone(),
                home: resolved.user_home.clone(),
            },
        ));
        let approver: Arc<dyn Approver> =
            Arc::new(GrantingApprover::new(rules.approver, grants.clone()));
        let policies = Policies::new(rules.sandbox)
            .with_approver(approver)
            .with_permissions(rules.permissions)
            .with_hooks(hooks)
            .with_allow_read(resolved.allow_read.iter().cloned());
        Ok(Self {
            provider,
            resolved,
            policies,
            grants,
            hook_configs: rules.hook_configs,
            #[cfg(feature = "snapshots")]
            snapshots: None,
            warnings,
        })
    }

    /// Opens the workspace's snapshot store within `limits` (`None`: snapshots off); one
    /// that cannot be opened leaves snapshots off, with a warning.
    #[cfg(feature = "snapshots")]
    fn open_snapshots(&mut self, limits: Option<keel_snapshot::SnapshotLimits>) {
        self.snapshots = open_snapshots(limits, &self.resolved.home, &self.resolved.cwd)
            .unwrap_or_else(|warning| {
                self.warnings.push(warning);
                None
            });
    }

    /// The project's context for the system prompt (its memory files, the repository's
    /// state), and the report of its memory files: empty when the host `replaced` keel's
    /// prompt, since the replacement holds none. Memory files refused are warnings too.
    fn project_context(&mut self, replaced: bool) -> (ProjectContext, MemoryReport) {
        let resolved = &self.resolved;
        let context = keel_agents::project_context_from(&MemorySources {
            user_files: resolved.user_memory(),
            user_home: resolved.user_home.clone(),
            root: resolved.root.clone(),
            cwd: resolved.cwd.clone(),
            extra_readable: self.policies.allow_read().to_vec(),
        });
        let memory = if replaced {
            MemoryReport::default()
        } else {
            context.memory_report()
        };
        self.warnings.extend(memory.refusals());
        (context, memory)
    }

    /// The tools phase: keel's tools for the profile; with delegation the delegating ones
    /// and the delegates they run (sub-agents, teams, skills, background tasks); then the
    /// host's tools and the MCP servers'.
    fn tools(
        &mut self,
        parts: PartSettings,
        max_iterations: u32,
    ) -> Result<(ToolRegistry, Option<Arc<Delegates>>), BuildError> {
        let base = match self.resolved.tool_profile {
            ToolProfile::Lean => lean_tools(&self.resolved.paths, self.policies.sandbox())?,
            _ => default_tools(&self.resolved.paths, self.policies.sandbox())?,
        };
        #[cfg(feature = "tasks")]
        let tasks = self.open_tasks(parts.tasks.as_ref());
        #[cfg(not(feature = "delegation"))]
        let (mut tools, delegates) = {
            let _ = max_iterations;
            let delegates = Delegates::discover(
                &self.resolved.root,
                &self.resolved.home,
                self.resolved.claude_home.as_deref(),
                self.resolved.skills,
                self.grants.clone(),
                &mut self.warnings,
            );
            (delegates.register(base)?, Some(Arc::new(delegates)))
        };
        #[cfg(feature = "delegation")]
        let (mut tools, delegates) = if self.resolved.delegation {
            let delegation = self.delegation();
            let code = self.code_tool(delegation.clone(), max_iterations);
            let delegates = self.delegates(
                &base,
                delegation,
                parts.agents,
                #[cfg(feature = "tasks")]
                tasks,
            );
            (delegates.register(base, code)?, Some(Arc::new(delegates)))
        } else {
            (base, None)
        };
        for tool in parts.tools {
            tools.register_dyn(tool)?;
        }
        #[cfg(feature = "mcp")]
        for server in parts.mcp_servers {
            tools.add_source(Arc::new(server));
        }
        Ok((tools, delegates))
    }

    /// How delegated runs are made: the provider, the model tiers, the policies, the
    /// catalog, the compaction model and the snapshots.
    #[cfg(feature = "delegation")]
    fn delegation(&self) -> Delegation {
        let resolved = &self.resolved;
        let delegation = Delegation::new(
            self.provider.clone(),
            resolved.tiers.clone(),
            self.policies.clone(),
        )
        .catalog(resolved.catalog.clone())
        .compaction_model(resolved.compaction_model.as_deref());
        #[cfg(feature = "snapshots")]
        if let Some(snapshots) = &self.snapshots {
            return delegation.snapshots(snapshots.clone());
        }
        delegation
    }

    /// The `code` tool: delegated coding runs in the working directory, their logs under
    /// keel's home, with the user's memory files.
    #[cfg(feature = "delegation")]
    fn code_tool(&self, delegation: Delegation, max_iterations: u32) -> CodeTool {
        let resolved = &self.resolved;
        CodeTool::new(delegation, &resolved.cwd, Home(&resolved.home).logs())
            .max_iterations(max_iterations)
            .user_memory(resolved.user_memory(), resolved.user_home.clone())
    }

    /// The sub-agents (the discovered ones and the host's `agents`), teams and skills of
    /// the project and the user; sub-agents get at most the `base` tools.
    #[cfg(feature = "delegation")]
    fn delegates(
        &mut self,
        base: &ToolRegistry,
        delegation: Delegation,
        agents: Vec<keel_agents::AgentDefinition>,
        #[cfg(feature = "tasks")] tasks: Option<(crate::background::TaskLauncher, Vec<String>)>,
    ) -> Delegates {
        let resolved = &self.resolved;
        Delegates::discover(
            &resolved.root,
            &resolved.home,
            resolved.claude_home.as_deref(),
            base,
            delegation,
            resolved.skills,
            self.grants.clone(),
            #[cfg(feature = "tasks")]
            tasks,
            agents,
            &mut self.warnings,
        )
    }

    /// The background tasks as `options` says, with delegation only; a store that cannot be
    /// opened leaves them off, with a warning.
    #[cfg(feature = "tasks")]
    fn open_tasks(
        &mut self,
        options: Option<&BackgroundTasks>,
    ) -> Option<(crate::background::TaskLauncher, Vec<String>)> {
        let options = options.filter(|_| self.resolved.delegation)?;
        let store = crate::background::OpeningTaskStore::new(&self.resolved.home);
        let resolved = &self.resolved;
        open_tasks(
            options,
            Arc::new(store),
            &resolved.cwd,
            &resolved.home,
            &self.policies,
        )
        .map_err(|err| {
            self.warnings
                .push(format!("background tasks are off: {err}"));
        })
        .ok()
    }

    /// Every rule and hook matcher must name a tool there is: a misspelt one (`Bsah(rm:*)`)
    /// would silently forbid nothing. MCP tools (`mcp__…`) come and go with their servers:
    /// any passes; so do keel's own tools this agent leaves out (`--no-delegation`). Rules
    /// naming Claude Code's tools keel lacks are warnings.
    fn check_rules(&mut self, tools: &ToolRegistry) -> Result<(), BuildError> {
        let mut known = tools.names();
        known.extend(keel_agents::KEEL_TOOLS);
        self.policies.permissions().validate(&known)?;
        for config in &self.hook_configs {
            config.check_tools(&known)?;
        }
        self.warnings
            .extend(inert_rule_warnings(self.policies.permissions()));
        Ok(())
    }

    /// The last phase: the engine's agent (the model and its compaction, the system prompt
    /// and tools, the policies after the host's local hooks, the session store, the
    /// snapshots, the background tasks' notifier), and the built agent around it.
    fn finish(
        self,
        engine: EngineSettings,
        system_prompt: String,
        tools: ToolRegistry,
        delegates: Option<Arc<Delegates>>,
        memory: MemoryReport,
    ) -> Result<CodingAgent, BuildError> {
        let Self {
            provider,
            resolved,
            policies,
            warnings,
            #[cfg(feature = "snapshots")]
            snapshots,
            ..
        } = self;
        // The first request's fixed part: system prompt and tools (the prompt's is added per
        // request, in CodingAgent::first_request_tokens).
        let base_tokens = keel_engine::compaction::estimate_tokens(
            Some(&system_prompt),
            &tools.definitions(),
            &[],
            None,
        );
        let store: Arc<dyn SessionStore> = match engine.session_store {
            Some(store) => store,
            None => Arc::new(JsonlSessionStore::new(Home(&resolved.home).sessions())),
        };
        // The agent's own hooks: the host's local ones first, then the policies'.
        let mut agent_hooks = engine.local_hooks;
        agent_hooks.extend(policies.hooks());
        let mut builder = Agent::builder(provider)
            .model(&resolved.model)
            .catalog(resolved.catalog)
            .compaction(CompactionPolicy {
                // A window the host or the server stated (the catalog's the engine knows
                // itself).
                context_window: resolved
                    .window
                    .filter(|window| window.origin != WindowOrigin::Catalog)
                    .map(|window| window.tokens),
                summary_model: resolved.summary_model,
                ..CompactionPolicy::default()
            })
            .system_prompt(system_prompt)
            .tools(tools)
            .max_iterations(engine.max_iterations)
            .approver(policies.approver().clone())
            .permissions(policies.permissions().clone())
            .hooks(agent_hooks)
            .session_store(store);
        if let Some(budget_usd) = engine.cost_budget_usd {
            builder = builder.cost_budget_usd(budget_usd);
        }
        if let Some(model) = engine.fallback_model {
            builder = builder.fallback_model(model);
        }
        #[cfg(feature = "snapshots")]
        if let Some(snapshots) = &snapshots {
            builder = builder.snapshots(snapshots.clone());
        }
        #[cfg(feature = "tasks")]
        if let Some(launcher) = delegates.as_ref().and_then(|d| d.tasks()) {
            builder = builder.notifier(Arc::new(crate::background::TaskNotifier::new(
                launcher.store().clone(),
            )));
        }
        Ok(CodingAgent::new(crate::agent::Parts {
            agent: builder.build()?,
            cwd: resolved.cwd,
            home: resolved.home,
            model: resolved.model,
            policies,
            paths: resolved.paths,
            delegates,
            warnings,
            memory,
            #[cfg(feature = "snapshots")]
            snapshots,
            tool_profile: resolved.tool_profile,
            profile_choice: resolved.profile_choice,
            window: resolved.window,
            base_tokens,
        }))
    }
}

impl PromptSettings {
    /// The system prompt: keel's for the `profile`, from the project's `context`, with the
    /// skills' index when there is one; or the host's replacement; then the host's addition.
    fn system_prompt(
        self,
        context: &ProjectContext,
        profile: ToolProfile,
        skills_section: Option<String>,
    ) -> String {
        let mut prompt = match self.system_prompt {
            Some(replacement) => replacement,
            None => {
                let mut prompt = match profile {
                    ToolProfile::Lean => lean_system_prompt(context),
                    _ => system_prompt(context),
                };
                if let Some(section) = skills_section {
                    prompt.push_str("\n\n");
                    prompt.push_str(&section);
                }
                prompt
            }
        };
        if let Some(text) = self.append_system_prompt.filter(|text| !text.is_empty()) {
            if !prompt.is_empty() {
                prompt.push_str("\n\n");
            }
            prompt.push_str(&text);
        }
        prompt
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
) -> Result<(crate::background::TaskLauncher, Vec<String>), String> {
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
