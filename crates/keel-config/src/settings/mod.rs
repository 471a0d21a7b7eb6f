//! From flags, environment and config files to one [`Settings`] value: the provider, the
//! model, approvals, the sandbox policy, MCP servers, trust; then the agent and its session.
//!
//! Precedence: the host's [`Overrides`] (keel's flags), then the environment (`KEEL_PROVIDER`,
//! `KEEL_MODEL`, base URLs), then the project's config, then the user's, then defaults.

mod agent;
mod mcp;
mod paths;
mod provider;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel::engine::JsonlSessionStore;
use keel::mcp::{McpError, McpServer, McpServerConfig};
use keel::provider::{ModelCatalog, Provider, ProviderKind, ServedContext};
use keel::sandbox::{SandboxMode, SandboxPolicy};
use keel::tasks::{TaskApprovals, TaskSettings};

use crate::Error;
use crate::files::{self, ClaudeFiles, Config};
use crate::modes::{ApprovalMode, LiveMode};
use crate::tiers::Tiers;
pub use provider::ProviderOrigin;

pub use agent::{Extras, inline_agents};
pub use mcp::mcp_configs;
pub use paths::{existing_dir, given_dir, keel_home, session_store};
pub use provider::named_provider;
use provider::{provider, unconfigured};

/// Which front end the settings are for: they differ in the default approvals, and in what a
/// missing provider means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// A person at a terminal (the REPL): gated calls are asked about by default.
    Interactive,
    /// A headless run (`keel exec`, the SDKs, ACP, an MCP host): gated calls are refused by
    /// default, and a background task's own run takes the task's settings.
    Headless,
    /// A listing (`keel agents|teams|skills`): headless, needing no provider; without one
    /// configured the agent gets a stand-in whose every call fails saying so.
    Listing,
}

/// Which session to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionChoice {
    /// A new one.
    New,
    /// The saved session with this id.
    Resume(String),
    /// The newest saved session of the working directory.
    Latest,
}

/// What the host's user said on its command line: the values of keel's flags, each `None`
/// (or empty, or `false`) when not given. Only the user's own choices belong here: nothing a
/// repository carries.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Overrides {
    /// The working directory (`-C`); the current one when `None`.
    pub cwd: Option<PathBuf>,
    /// The provider's name (`--provider`).
    pub provider: Option<String>,
    /// The model (`--model`).
    pub model: Option<String>,
    /// Where the provider is served (`--base-url`).
    pub base_url: Option<String>,
    /// The iteration limit (`--max-iterations`).
    pub max_iterations: Option<u32>,
    /// Paths the file tools may also read (`--allow-read`).
    pub allow_read: Vec<PathBuf>,
    /// Who approves gated calls (`--approvals`).
    pub approvals: Option<ApprovalMode>,
    /// Every call runs without a question (`--yes`: approvals `allow`).
    pub yes: bool,
    /// What commands may do (`--sandbox`).
    pub sandbox: Option<SandboxMode>,
    /// Whether commands may reach the network (`--network`).
    pub network: bool,
    /// More directories commands and the write tools may change (`--add-dir`).
    pub add_dir: Vec<PathBuf>,
    /// MCP server configurations: files or JSON text in `.mcp.json`'s shape (`--mcp-config`).
    pub mcp_config: Vec<String>,
    /// Trust the project without asking (`--trust-project`).
    pub trust_project: bool,
    /// No delegation tools (`--no-delegation`).
    pub no_delegation: bool,
    /// The tool set's name (`--tools`): `lean` or `full`; an empty name is refused.
    pub tools: Option<String>,
    /// Which of Claude Code's settings files are read (`--setting-sources`, `--settings`).
    pub claude_files: ClaudeFiles,
}

/// Everything resolved, before the agent is built.
pub struct Settings {
    /// The working directory (canonical).
    pub cwd: PathBuf,
    /// `$KEEL_HOME`.
    pub keel_home: PathBuf,
    /// The merged config files.
    pub config: Config,
    /// The provider's name as chosen (`anthropic`, `openai` or a config name).
    pub provider_name: String,
    /// The provider: the main one, with the models `[models.NAME]` tables route elsewhere
    /// sent to their own provider (see [`Tiers`]).
    pub provider: Arc<dyn Provider>,
    /// Prices, windows and limits: the built-in catalog with the config's over it.
    pub catalog: ModelCatalog,
    /// The small tier's model a `[models.small]` (or `fast`) table sets.
    pub small_tier: Option<String>,
    /// The strong tier's model a `[models.strong]` table sets.
    pub strong_tier: Option<String>,
    /// The provider's wire format and the base URL its requests go to, for a banner.
    pub provider_endpoint: (ProviderKind, String),
    /// Where its key and base URL came from, for the hint after a failed call.
    pub origin: ProviderOrigin,
    /// The variables the providers' secrets come from (keys, headers): a host's log scrubs
    /// their values, and commands never see them.
    pub secret_vars: Vec<String>,
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
    /// The window the server says it serves the model with ([`Settings::ask_served_context`]).
    pub served: Option<ServedContext>,
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
    /// The MCP servers started by [`Settings::start_mcp_servers`], for the agent.
    pub mcp_servers: Vec<McpServer>,
    /// One line for each server that did not start.
    pub mcp_failed: Vec<McpError>,
    /// When this is a background task's own run (`KEEL_TASK_ID`): the settings recorded when
    /// it was started, which replace the sandbox, approvals, allow-read paths, rules and hooks
    /// the flags and config files would give.
    pub task: Option<TaskSettings>,
    /// What the caller adds to the configured agent (Claude Code's headless flags).
    pub extras: Extras,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("cwd", &self.cwd)
            .field("provider", &self.provider_name)
            .field("model", &self.model)
            .field("approvals", &self.approvals)
            .field("project_trusted", &self.project_trusted)
            .finish_non_exhaustive()
    }
}

/// The configuration files of `cwd`'s project and the user's, as `overrides` say to read them.
pub fn load_config(overrides: &Overrides, keel_home: &Path, cwd: &Path) -> Result<Config, Error> {
    let claude_home = keel::agents::claude_user_dir();
    Config::load(&files::Sources {
        keel_home: Some(keel_home),
        claude_home: claude_home.as_deref(),
        cwd,
        trust_project: overrides.trust_project,
        claude_files: overrides.claude_files.sources,
        settings: overrides.claude_files.settings.as_deref(),
    })
    .map_err(|err| Error::Invalid(err.to_string()))
}

/// The variable `name`, when set to something other than blanks.
pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// What commands may do, and where the agent may read, before a task's recorded settings
/// replace them.
struct Powers {
    approvals: ApprovalMode,
    policy: SandboxPolicy,
    allow_read: Vec<PathBuf>,
}

impl Settings {
    /// Resolves `overrides`, the environment and the config files for `surface`. `session`
    /// decides the working directory when resuming (a session goes on where it started).
    pub fn resolve(
        overrides: &Overrides,
        surface: Surface,
        session: &SessionChoice,
    ) -> Result<Self, Error> {
        let keel_home = keel_home()?;
        paths::check_writable_home(&keel_home)?;
        check_model_name(overrides.model.as_deref())?;
        let store = session_store(&keel_home);
        let cwd = paths::working_dir(overrides, session, &store)?;
        let config = load_config(overrides, &keel_home, &cwd)?;
        let chosen = match provider(overrides, &config) {
            Ok(chosen) => chosen,
            Err(Error::Invalid(message)) if surface == Surface::Listing => unconfigured(message),
            Err(err) => return Err(err),
        };
        let model = model(overrides, &config, chosen.kind);
        let tiers = Tiers::resolve(
            &config,
            &chosen.name,
            chosen.provider.clone(),
            &model,
            surface == Surface::Listing,
        )?;
        let task = match (surface, env("KEEL_TASK_ID")) {
            (Surface::Headless, Some(id)) => Some(task_settings(&keel_home, &id)?),
            _ => None,
        };
        let secret_vars: Vec<String> = [
            &[chosen.key_var.clone()][..],
            &chosen.secret_vars,
            &tiers.secret_vars,
        ]
        .concat();
        let powers = match &task {
            Some(task) => task_powers(task),
            None => powers(overrides, surface, &config, &cwd, &secret_vars)?,
        };
        let live_mode = live_mode(overrides, &config, task.is_some(), powers.approvals);
        let project_trusted = project_trusted(overrides, &config, &cwd);
        let mut notices: Vec<String> = config
            .project
            .as_ref()
            .and_then(files::Project::notice)
            .into_iter()
            .collect();
        let mcp = match surface {
            Surface::Listing => Vec::new(),
            _ => mcp_configs(&config, overrides, &powers.policy.hidden_env, &mut notices)
                .map_err(Error::Invalid)?,
        };
        let tool_profile = tool_profile(overrides, &config)?;
        let max_iterations = overrides
            .max_iterations
            .or(config.max_iterations)
            .unwrap_or(keel::engine::DEFAULT_MAX_ITERATIONS);
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
            secret_vars,
            model,
            approvals: powers.approvals,
            live_mode,
            project_trusted,
            max_iterations,
            store,
            allow_read: powers.allow_read,
            delegation: !overrides.no_delegation,
            tool_profile,
            served: None,
            policy: powers.policy,
            notices,
            mcp,
            mcp_servers: Vec::new(),
            mcp_failed: Vec::new(),
            task,
            extras: Extras::default(),
        })
    }
}

/// The model: `--model`, else `KEEL_MODEL`, else (for Anthropic's API) `ANTHROPIC_MODEL`,
/// else the config's, else the provider's default; an alias (`sonnet`, `opus`, `haiku`,
/// `gpt`, `codex`) expanded to the model it names.
fn model(overrides: &Overrides, config: &Config, kind: ProviderKind) -> String {
    let model = overrides
        .model
        .clone()
        .or_else(|| env("KEEL_MODEL"))
        // Claude Code's variable, for a provider speaking Anthropic's API.
        .or_else(|| {
            (kind == ProviderKind::Anthropic)
                .then(|| env("ANTHROPIC_MODEL"))
                .flatten()
        })
        .or_else(|| config.model.clone())
        .unwrap_or_else(|| kind.default_model().to_owned());
    ModelCatalog::expand_alias(&model).to_owned()
}

/// A background task's own run: the approvals, policy and allow-read paths recorded with it.
fn task_powers(task: &TaskSettings) -> Powers {
    Powers {
        approvals: match task.approvals {
            TaskApprovals::Allow => ApprovalMode::Allow,
            TaskApprovals::Deny => ApprovalMode::Deny,
        },
        policy: task.policy.clone(),
        allow_read: task.allow_read.clone(),
    }
}

/// The approvals, sandbox policy and allow-read paths the overrides and config give.
fn powers(
    overrides: &Overrides,
    surface: Surface,
    config: &Config,
    cwd: &Path,
    secret_vars: &[String],
) -> Result<Powers, Error> {
    let approvals = if overrides.yes {
        ApprovalMode::Allow
    } else {
        overrides
            .approvals
            .or(config.approvals)
            .unwrap_or(match surface {
                Surface::Interactive => ApprovalMode::Ask,
                Surface::Headless | Surface::Listing => ApprovalMode::Deny,
            })
    };
    let sandbox = overrides.sandbox.or(config.sandbox).unwrap_or_default();
    let mut allow_read = Vec::new();
    for path in &overrides.allow_read {
        let full = std::fs::canonicalize(path).map_err(|err| {
            Error::Invalid(format!(
                "--allow-read {}: {err}; name an existing file or directory",
                path.display()
            ))
        })?;
        allow_read.push(full);
    }
    let mut policy = SandboxPolicy::with_mode(sandbox);
    if let Some(secs) = config.tools.run_command_max_timeout_secs {
        policy.max_command_timeout = Duration::from_secs(secs);
    }
    policy.network = overrides.network || config.network.unwrap_or(false);
    policy.protected_paths = project_scripts(config, cwd);
    policy.writable_roots = writable_roots(overrides, config)?;
    policy.hidden_env = secret_vars.to_vec();
    policy.env = config.command_env.clone();
    Ok(Powers {
        approvals,
        policy,
        allow_read,
    })
}

/// The directories commands and the write tools may change beside the workspace: `--add-dir`'s
/// (each must exist), then the config's `writable_roots` (`~/` is the home directory; a
/// missing one is skipped, as the sandbox skips it).
fn writable_roots(overrides: &Overrides, config: &Config) -> Result<Vec<PathBuf>, Error> {
    let mut roots = Vec::new();
    for dir in &overrides.add_dir {
        roots.push(existing_dir(dir, "--add-dir ")?);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for root in &config.writable_roots {
        let path = match (root.strip_prefix("~/"), &home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(root),
        };
        if let Ok(full) = std::fs::canonicalize(&path) {
            roots.push(full);
        }
    }
    Ok(roots)
}

/// The mode sessions start in: Claude Code's `defaultMode` when neither an override, keel's
/// `approvals` key nor a task chooses; else the approvals' own.
fn live_mode(
    overrides: &Overrides,
    config: &Config,
    is_task: bool,
    approvals: ApprovalMode,
) -> LiveMode {
    let chosen_elsewhere =
        overrides.yes || overrides.approvals.is_some() || config.approvals.is_some() || is_task;
    match config.default_mode {
        Some(default) if !chosen_elsewhere => default,
        _ => LiveMode::of(approvals),
    }
}

/// Whether the user trusts `cwd`'s project: `--trust-project`, or a recorded decision pinned
/// to the project's files as they are (a project with no config file too).
fn project_trusted(overrides: &Overrides, config: &Config, cwd: &Path) -> bool {
    overrides.trust_project
        || match &config.project {
            Some(project) => project.trust.grants(),
            None => {
                let dir = files::project::locate(cwd);
                let hash = files::project::config_hash(&dir);
                files::Trust::of(&dir, &hash, &config.projects).grants()
            }
        }
}

/// The tool profile `--tools` names, else the config's `[tools] profile`; `None` when neither
/// chooses. A name that is no profile is a one-line usage error.
pub fn tool_profile(
    overrides: &Overrides,
    config: &Config,
) -> Result<Option<keel::ToolProfile>, Error> {
    match &overrides.tools {
        Some(name) => keel::ToolProfile::from_name(name).map(Some).ok_or_else(|| {
            let given = if name.is_empty() {
                "--tools needs a tool set".to_owned()
            } else {
                format!("--tools {name}: no such tool set")
            };
            Error::Invalid(format!(
                "{given}; use lean (six tools, for small models) or full (every tool)"
            ))
        }),
        None => Ok(config.tools.profile.map(files::ToolsProfile::profile)),
    }
}

/// The scripts a trusted project's hooks and runners run: commands and the write tools may
/// not change them without the person's approval (keel adds its own protected paths: its
/// config, the home directory's start-up files, the `PATH` directories).
fn project_scripts(config: &Config, cwd: &Path) -> Vec<PathBuf> {
    match &config.project {
        Some(project) if project.trust.grants() => {
            files::project::referenced_files(&project.dir, &[cwd, &project.dir], &project.commands)
        }
        _ => Vec::new(),
    }
}

/// The settings recorded with background task `id`, for its own run.
fn task_settings(keel_home: &Path, id: &str) -> Result<TaskSettings, Error> {
    let store = paths::open_task_store(keel_home)?;
    keel::tasks::load_settings(store.as_ref(), id).map_err(|err| {
        Error::Failed(format!(
            "KEEL_TASK_ID={id}: {err}; a task's run takes its settings from the task"
        ))
    })
}

/// `--model` with nothing in it.
pub fn check_model_name(model: Option<&str>) -> Result<(), Error> {
    match model {
        Some(name) if name.trim().is_empty() => Err(Error::Invalid(
            "--model needs a model name, e.g. --model claude-sonnet-4-5".into(),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_model_name_is_named_as_such() {
        let err = check_model_name(Some("  ")).expect_err("an empty name is refused");
        assert_eq!(
            err.to_string(),
            "--model needs a model name, e.g. --model claude-sonnet-4-5"
        );
        assert!(check_model_name(Some("gpt-4.1")).is_ok());
        assert!(check_model_name(None).is_ok());
    }
}
