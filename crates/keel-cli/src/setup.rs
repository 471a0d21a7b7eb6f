//! From flags, environment and config files to a provider, an agent and a session.
//!
//! Precedence: flags, then environment (`KEEL_PROVIDER`, `KEEL_MODEL`, base URLs), then the
//! project's config, then the user's, then defaults.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_engine::{
    Agent, Approver, Hooks, JsonlSessionStore, PermissionRules, Session, SessionStore,
    system_prompt,
};
use keel_provider::{AnthropicProvider, ApiKey, OpenAiProvider, Provider};
use keel_sandbox::{PathSandbox, SandboxMode, SandboxPolicy, default_tools};
use keel_snapshot::ShadowSnapshots;

use keel_agents::tasks::{TaskApprovals, TaskNotifier, TaskSettings, load_settings};
use keel_agents::{Delegation, Models};

use crate::cli::Options;
use crate::config::{self, ApprovalMode, Config, ProviderKind};
use crate::delegates::Delegates;

/// The default model of each provider kind.
pub fn default_model(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Anthropic => "claude-sonnet-4-5",
        ProviderKind::Openai => "gpt-4.1",
    }
}

/// Why keel stopped before or during a run; the exit code depends on which.
#[derive(Debug)]
pub enum CliError {
    /// A bad flag, config or environment: exit 2.
    Usage(String),
    /// The run could not be done: exit 1.
    Run(String),
}

impl CliError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
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
pub enum Mode {
    /// The REPL.
    Interactive,
    /// `keel exec`.
    Exec,
}

/// Which session to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChoice {
    /// A new one.
    New,
    /// Session ID.
    Resume(String),
    /// The newest in the working directory.
    Latest,
}

/// An agent and, with delegation on, what it can delegate to.
pub struct Wired {
    /// The agent.
    pub agent: Agent,
    /// Sub-agents, teams and skills (`None` with `--no-delegation`).
    pub delegates: Option<Arc<Delegates>>,
}

/// Everything resolved, before the agent is built.
pub struct Setup {
    /// The working directory (canonical).
    pub cwd: PathBuf,
    /// `$KEEL_HOME`.
    pub keel_home: PathBuf,
    /// The merged config files.
    pub config: Config,
    /// The provider's name as chosen (`anthropic`, `openai` or a config name).
    pub provider_name: String,
    /// The provider.
    pub provider: Arc<dyn Provider>,
    /// The model.
    pub model: String,
    /// Approvals.
    pub approvals: ApprovalMode,
    /// The iteration limit.
    pub max_iterations: u32,
    /// The session store.
    pub store: Arc<JsonlSessionStore>,
    /// Paths the file tools may also read.
    pub allow_read: Vec<PathBuf>,
    /// Whether the agent gets the delegation tools.
    pub delegation: bool,
    /// What commands may do: the mode, the network, the writable roots (`--add-dir`, then the
    /// config's, canonical), the protected paths and the provider's key variable hidden from
    /// commands and hooks; a task's own run takes the policy recorded with the task. Worked
    /// out once, here.
    pub policy: SandboxPolicy,
    /// Lines for stderr about the configuration (keys an untrusted project may not set).
    pub notices: Vec<String>,
    /// When this is a background task's own run (`KEEL_TASK_ID`): the settings recorded when
    /// it was started, which replace the sandbox, approvals, allow-read paths, rules and hooks
    /// the flags and config files would give.
    pub task: Option<TaskSettings>,
    /// The workspace's snapshot store (`$KEEL_HOME/snapshots`), unless `[snapshots] enabled =
    /// false` or it cannot be opened (then a notice says why).
    pub snapshots: Option<Arc<ShadowSnapshots>>,
}

/// `$KEEL_HOME`, else `~/.keel`.
pub fn keel_home() -> Result<PathBuf, CliError> {
    if let Some(home) = std::env::var_os("KEEL_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(home));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".keel")),
        None => Err(CliError::Usage(
            "neither KEEL_HOME nor HOME is set: set KEEL_HOME to a directory for keel's config \
             and sessions"
                .into(),
        )),
    }
}

/// The session store under `$KEEL_HOME/sessions`.
pub fn session_store(keel_home: &Path) -> Arc<JsonlSessionStore> {
    Arc::new(JsonlSessionStore::new(keel_home.join("sessions")))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Setup {
    /// Resolves flags, environment and config. `session` decides the working directory when
    /// resuming (a session goes on where it started).
    pub fn resolve(
        options: &Options,
        mode: Mode,
        session: &SessionChoice,
    ) -> Result<Self, CliError> {
        let keel_home = keel_home()?;
        crate::usage::check_writable_home(&keel_home)?;
        crate::usage::check_model_name(options.model.as_deref())?;
        let store = session_store(&keel_home);
        let cwd = working_dir(options, session, &store)?;
        let config = Config::load(Some(&keel_home), &cwd, options.trust_project)
            .map_err(|err| CliError::Usage(err.to_string()))?;
        let chosen = provider(options, &config)?;
        let model = options
            .model
            .clone()
            .or_else(|| env("KEEL_MODEL"))
            .or_else(|| config.model.clone())
            .unwrap_or_else(|| default_model(chosen.kind).to_owned());
        let approvals = if options.yes {
            ApprovalMode::Allow
        } else {
            options
                .approvals
                .or(config.approvals)
                .unwrap_or(match mode {
                    Mode::Interactive => ApprovalMode::Ask,
                    Mode::Exec => ApprovalMode::Deny,
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
                policy.protected_paths =
                    protected_paths(&config, &cwd, &keel_home, &writable_roots);
                policy.writable_roots = writable_roots;
                policy.hidden_env = vec![chosen.key_var.clone()];
                (approvals, policy, allow_read)
            }
        };
        let mut notices: Vec<String> = config
            .project
            .as_ref()
            .and_then(config::Project::notice)
            .into_iter()
            .collect();
        let home_real = std::fs::canonicalize(&keel_home).unwrap_or_else(|_| keel_home.clone());
        if std::iter::once(&cwd)
            .chain(&policy.writable_roots)
            .any(|root| home_real.starts_with(root))
        {
            notices.push(format!(
                "warning: KEEL_HOME ({}) lies where commands may write: they could change \
                 keel's sessions and task records (only its config.toml is protected); set \
                 KEEL_HOME to a directory outside the workspace",
                keel_home.display()
            ));
        }
        let snapshots = if config.snapshots.enabled() {
            match crate::rewind::open(&keel_home, &cwd, &config.snapshots) {
                Ok(snapshots) => Some(Arc::new(snapshots)),
                Err(err) => {
                    notices.push(format!(
                        "warning: no snapshots, so changes cannot be rewound: {err}"
                    ));
                    None
                }
            }
        } else {
            None
        };
        Ok(Self {
            cwd,
            keel_home,
            config,
            provider_name: chosen.name,
            provider: chosen.provider,
            model,
            approvals,
            max_iterations,
            store,
            allow_read,
            delegation: !options.no_delegation,
            policy,
            notices,
            task,
            snapshots,
        })
    }

    /// The agent: the built-in tools in the working directory, the system prompt with the
    /// project's context, the config's rules and hooks (after `extra_hooks`), `approver`;
    /// with delegation on, also `code`, `spawn_agent`, `run_team`, `use_skill` and the skills
    /// index in the system prompt.
    pub fn agent(
        &self,
        approver: impl Approver + 'static,
        extra_hooks: Hooks,
    ) -> Result<Wired, CliError> {
        let usage = |message: String| CliError::Usage(message);
        let mut sandbox = PathSandbox::new(&self.cwd)
            .map_err(|err| usage(format!("{}: {err}", self.cwd.display())))?;
        for path in self.allow_read.iter().chain(&self.policy.writable_roots) {
            sandbox = sandbox
                .allow_read(path)
                .map_err(|err| usage(format!("--allow-read {}: {err}", path.display())))?;
        }
        // The user's skills may point at files beside them.
        let user_skills = self.keel_home.join("skills");
        if self.delegation && user_skills.is_dir() {
            sandbox = sandbox
                .allow_read(&user_skills)
                .map_err(|err| CliError::Run(format!("{}: {err}", user_skills.display())))?;
        }
        let base = default_tools(&sandbox, &self.policy)
            .map_err(|err| CliError::Run(format!("the built-in tools: {err}")))?;
        let config_file = || {
            self.config
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (rules, config_hooks) = match &self.task {
            Some(task) => (
                PermissionRules::parse(&task.allow_rules, &task.deny_rules)
                    .map_err(|err| CliError::Run(format!("the task's rules: {err}")))?,
                Hooks::from_config(&task.hooks, Arc::new(keel_sandbox::ProcessGroupRunner))
                    .map_err(|err| CliError::Run(format!("the task's hooks: {err}")))?,
            ),
            None => (
                self.config
                    .permission_rules()
                    .map_err(|err| usage(format!("{}: {err}", config_file())))?,
                self.config
                    .hooks()
                    .map_err(|err| usage(format!("{}: {err}", config_file())))?,
            ),
        };
        let mut hooks = extra_hooks;
        hooks.extend(config_hooks);
        // Hook commands never see the provider's key variable (nor any credential).
        let hooks = hooks.hide_env(self.policy.hidden_env.clone());
        let root = keel_agents::project_root(&self.cwd);
        let mut prompt = system_prompt(&keel_agents::project_context(&root, &self.cwd));
        let approver: Arc<dyn Approver> = Arc::new(approver);
        let (tools, delegates) = if self.delegation {
            let mut delegation = Delegation::new(self.provider.clone(), self.models())
                .approver(approver.clone())
                .permissions(rules.clone())
                .hooks(hooks.clone());
            if let Some(snapshots) = &self.snapshots {
                delegation = delegation.snapshots(snapshots.clone());
            }
            let delegates = Delegates::discover(self, &root, &base, delegation);
            let tools = delegates
                .register(base, self)
                .map_err(|err| CliError::Run(format!("the delegation tools: {err}")))?;
            if let Some(section) = delegates.skills.prompt_section() {
                prompt.push_str("\n\n");
                prompt.push_str(&section);
            }
            (tools, Some(Arc::new(delegates)))
        } else {
            (base, None)
        };
        let mut builder = Agent::builder(self.provider.clone())
            .model(&self.model)
            .system_prompt(prompt)
            .tools(tools)
            .max_iterations(self.max_iterations)
            .approver(approver)
            .permissions(rules)
            .hooks(hooks)
            .session_store(self.store.clone());
        if let Some(snapshots) = &self.snapshots {
            builder = builder.snapshots(snapshots.clone());
        }
        if let Some(launcher) = delegates.as_ref().and_then(|d| d.tasks.as_ref()) {
            builder = builder.notifier(Arc::new(TaskNotifier::new(launcher.store().clone())));
        }
        let agent = builder.build().map_err(|err| usage(err.to_string()))?;
        Ok(Wired { agent, delegates })
    }

    /// The models delegation chooses from: the model, and `small_model` (or a cheap one of
    /// the same provider).
    pub fn models(&self) -> Models {
        let small = self
            .config
            .small_model
            .clone()
            .unwrap_or_else(|| Models::small_for(&self.model));
        Models::new(self.model.clone(), small)
    }

    /// Opens the session `choice` names.
    pub fn session(&self, agent: &Agent, choice: &SessionChoice) -> Result<Session, CliError> {
        let result = match choice {
            SessionChoice::New => agent.session(&self.cwd),
            SessionChoice::Resume(id) => agent.resume(id),
            SessionChoice::Latest => agent.resume_latest(&self.cwd),
        };
        result.map_err(|err| match choice {
            SessionChoice::New => CliError::Run(format!("cannot start a session: {err}")),
            _ => CliError::Usage(format!("cannot resume: {err}")),
        })
    }
}

/// `dir` resolved, if it is an existing directory; else a usage error naming it after
/// `what` (a flag, or nothing).
pub fn existing_dir(dir: &Path, what: &str) -> Result<PathBuf, CliError> {
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

/// Paths commands and the write tools may not change without the person's approval,
/// besides the sandbox's own (`.git`, the project's config files): the scripts a trusted
/// project's hooks and runners run, and — where a writable root holds them — keel's own
/// config, the start-up files and user-level programs of the home directory (also those
/// not created yet), and the `PATH` directories.
fn protected_paths(
    config: &Config,
    cwd: &Path,
    keel_home: &Path,
    writable_roots: &[PathBuf],
) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let Some(project) = &config.project
        && project.trust.grants()
    {
        paths.extend(config::project::referenced_files(
            &project.dir,
            &[cwd, &project.dir],
            &project.commands,
        ));
    }
    let roots: Vec<&Path> = std::iter::once(cwd)
        .chain(writable_roots.iter().map(PathBuf::as_path))
        .collect();
    // Strictly inside a root: a root itself (the workspace) is never made read-only.
    let writable = |path: &Path| {
        roots
            .iter()
            .any(|root| path.starts_with(root) && path != *root)
    };
    let canonical = |path: PathBuf| std::fs::canonicalize(&path).unwrap_or(path);
    // keel's own config; the rest of its home (sessions, the task store, which keel itself
    // writes while commands run) cannot be restored around a command, hence the warning
    // `resolve` gives when it is writable.
    let mut candidates = vec![canonical(keel_home.to_path_buf()).join("config.toml")];
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        let home = canonical(home);
        candidates.extend(HOME_STARTUP.iter().map(|name| home.join(name)));
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(
            std::env::split_paths(&path)
                .filter(|dir| dir.is_absolute())
                .map(canonical),
        );
    }
    for path in candidates {
        if writable(&path) && !paths.contains(&path) {
            paths.push(path);
        }
    }
    paths
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
pub fn given_dir(options: &Options) -> Result<PathBuf, CliError> {
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

/// Files and directories in the home directory that run later outside the sandbox (a shell's
/// start-up files, user-level programs and toolchains, git's and ssh's config): each is
/// protected, existing or not, when the workspace or a writable root holds it.
const HOME_STARTUP: [&str; 28] = [
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".inputrc",
    ".vimrc",
    ".gitconfig",
    ".config/git",
    ".config/fish",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".ssh",
    ".gnupg",
    "bin",
    ".local/bin",
    ".cargo/bin",
    ".cargo/env",
    ".cargo/config.toml",
    ".rustup",
    ".npmrc",
    ".pypirc",
];

const NO_PROVIDER: &str = "no model provider configured: set ANTHROPIC_API_KEY, or \
                           OPENAI_BASE_URL for a local server (see keel --help)";

/// The provider chosen, and the variable holding its key.
struct Chosen {
    name: String,
    kind: ProviderKind,
    provider: Arc<dyn Provider>,
    key_var: String,
}

/// How long a model call may wait for the next piece of its reply, and take in all.
struct Timeouts {
    idle: std::time::Duration,
    request: std::time::Duration,
}

impl Timeouts {
    /// `[provider] idle_timeout_secs` and `request_timeout_secs`, else the provider's defaults.
    fn of(config: &Config) -> Self {
        let secs = std::time::Duration::from_secs;
        Self {
            idle: config
                .idle_timeout_secs
                .map_or(keel_provider::DEFAULT_IDLE_TIMEOUT, secs),
            request: config
                .request_timeout_secs
                .map_or(keel_provider::DEFAULT_REQUEST_DEADLINE, secs),
        }
    }
}

/// The provider the flags, environment and config name.
///
/// A built-in name (`anthropic`, `openai`) is never redirected by a project: the config only
/// holds the user's tables for them (see `Config::load`), and its base URL comes from
/// `--base-url`, else the environment, else the user's config. A name defined in a config
/// takes its base URL from `--base-url`, else its table, else the environment.
fn provider(options: &Options, config: &Config) -> Result<Chosen, CliError> {
    let usage = |message: String| CliError::Usage(message);
    let named = options
        .provider
        .clone()
        .or_else(|| env("KEEL_PROVIDER"))
        .or_else(|| config.provider.clone());
    let (name, kind, table) = match named {
        Some(name) => match (ProviderKind::from_name(&name), config.providers.get(&name)) {
            (Some(kind), table) => (name, table.map_or(kind, |t| t.kind), table),
            (None, Some(table)) => (name.clone(), table.kind, Some(table)),
            (None, None) => {
                let mut known = vec!["anthropic".to_owned(), "openai".to_owned()];
                known.extend(config.providers.keys().cloned());
                return Err(usage(format!(
                    "unknown provider `{name}`: use one of {}, or define [providers.{name}] in \
                     the config",
                    known.join(", ")
                )));
            }
        },
        None => {
            if env("ANTHROPIC_API_KEY").is_some() {
                ("anthropic".to_owned(), ProviderKind::Anthropic, None)
            } else if env("OPENAI_BASE_URL").is_some() || env("OPENAI_API_KEY").is_some() {
                ("openai".to_owned(), ProviderKind::Openai, None)
            } else {
                return Err(usage(NO_PROVIDER.into()));
            }
        }
    };
    let key_var = table
        .and_then(|t| t.api_key_env.clone())
        .unwrap_or_else(|| match kind {
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY".into(),
            ProviderKind::Openai => "OPENAI_API_KEY".into(),
        });
    let key = ApiKey::from_env(&key_var);
    let env_url = || {
        env(match kind {
            ProviderKind::Anthropic => "ANTHROPIC_BASE_URL",
            ProviderKind::Openai => "OPENAI_BASE_URL",
        })
    };
    let table_url = || table.and_then(|t| t.base_url.clone());
    let base_url = if ProviderKind::from_name(&name).is_some() {
        options.base_url.clone().or_else(env_url).or_else(table_url)
    } else {
        options.base_url.clone().or_else(table_url).or_else(env_url)
    };
    let timeouts = Timeouts::of(config);
    let bad_url = |url: &str, err: keel_provider::ProviderError| {
        usage(format!(
            "bad base URL `{url}` for provider `{name}`: {err}; give one like https://host/v1"
        ))
    };
    let provider: Arc<dyn Provider> = match kind {
        ProviderKind::Anthropic => {
            let key = key.ok_or_else(|| {
                usage(format!(
                    "provider `{name}` needs an API key: set {key_var} (see keel --help)"
                ))
            })?;
            let mut provider = AnthropicProvider::new(key)
                .map_err(|err| usage(err.to_string()))?
                .with_idle_timeout(timeouts.idle)
                .with_request_deadline(timeouts.request);
            if let Some(url) = &base_url {
                provider = provider
                    .with_base_url(url)
                    .map_err(|err| bad_url(url, err))?;
            }
            Arc::new(provider)
        }
        ProviderKind::Openai => {
            let url = base_url.unwrap_or_else(|| "https://api.openai.com/v1".into());
            if key.is_none() && url.contains("api.openai.com") {
                return Err(usage(format!(
                    "provider `{name}` needs an API key for api.openai.com: set {key_var}, or \
                     OPENAI_BASE_URL for a local server"
                )));
            }
            Arc::new(
                OpenAiProvider::new(&url, key)
                    .map_err(|err| bad_url(&url, err))?
                    .with_idle_timeout(timeouts.idle)
                    .with_request_deadline(timeouts.request),
            )
        }
    };
    Ok(Chosen {
        name,
        kind,
        provider,
        key_var,
    })
}
