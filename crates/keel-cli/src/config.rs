//! The configuration files: `$KEEL_HOME/config.toml`, then `.keel/config.toml` in the project.
//!
//! Scalars in the project file win over the user's file; permission rules and hooks of both
//! apply (the user's first). Flags and environment variables win over both (see `setup`).
//! A file that cannot be used is one error naming the file, the line, the key and what is
//! allowed.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use keel_engine::{HookConfig, Hooks, PermissionRules};
use keel_sandbox::SandboxMode;
use serde::Deserialize;

/// Who approves destructive tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalMode {
    /// Ask on the terminal.
    Ask,
    /// Refuse them; the model is told why.
    Deny,
    /// Allow everything.
    Allow,
}

impl ApprovalMode {
    /// The name as written in flags and files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Deny => "deny",
            Self::Allow => "allow",
        }
    }
}

/// The wire format of a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Anthropic's Messages API.
    Anthropic,
    /// OpenAI's Chat Completions API, or any server that speaks it.
    Openai,
}

impl ProviderKind {
    /// The built-in provider of this name, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "anthropic" => Some(Self::Anthropic),
            "openai" => Some(Self::Openai),
            _ => None,
        }
    }
}

/// A `[providers.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Which wire format it speaks.
    pub kind: ProviderKind,
    /// Where it is served.
    pub base_url: Option<String>,
    /// The environment variable holding its key.
    pub api_key_env: Option<String>,
}

/// The `[permissions]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsConfig {
    /// Calls that run without asking, e.g. `run_command(cargo test*)`.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Calls that never run.
    #[serde(default)]
    pub deny: Vec<String>,
}

/// The `[tools]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// The longest timeout a `run_command` call may ask for.
    pub run_command_max_timeout_secs: Option<u64>,
}

/// A `[tasks.runners.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerConfig {
    /// The program and its arguments; `{task}` becomes the task's text (one argument, no
    /// shell), `{workdir}` its directory.
    pub command: Vec<String>,
}

/// The `[tasks]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksConfig {
    /// Tasks running at once beyond which `start_task` refuses (default 8).
    pub max_running: Option<usize>,
    /// A task's timeout in seconds (default 3600).
    pub timeout_secs: Option<u64>,
    /// Sub-agents that may start tasks (the main agent always may).
    #[serde(default)]
    pub allowed_agents: Vec<String>,
    /// External runners, by name.
    #[serde(default)]
    pub runners: BTreeMap<String, RunnerConfig>,
}

/// One file as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    provider: Option<String>,
    model: Option<String>,
    small_model: Option<String>,
    max_iterations: Option<u32>,
    approvals: Option<ApprovalMode>,
    sandbox: Option<SandboxMode>,
    #[serde(default)]
    providers: BTreeMap<String, ProviderConfig>,
    #[serde(default)]
    permissions: PermissionsConfig,
    #[serde(default)]
    hooks: Vec<HookConfig>,
    #[serde(default)]
    tools: ToolsConfig,
    #[serde(default)]
    tasks: TasksConfig,
}

/// The configuration of both files, merged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Config {
    /// The provider: `anthropic`, `openai` or a `[providers.NAME]` name.
    pub provider: Option<String>,
    /// The model.
    pub model: Option<String>,
    /// The cheap model for small jobs.
    pub small_model: Option<String>,
    /// The most model calls in one run.
    pub max_iterations: Option<u32>,
    /// Who approves destructive calls.
    pub approvals: Option<ApprovalMode>,
    /// Where commands may write.
    pub sandbox: Option<SandboxMode>,
    /// Named providers.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Allow and deny rules of both files.
    pub permissions: PermissionsConfig,
    /// Hooks of both files.
    pub hooks: Vec<HookConfig>,
    /// Tool settings.
    pub tools: ToolsConfig,
    /// Background tasks.
    pub tasks: TasksConfig,
    /// The files read, in order.
    pub files: Vec<PathBuf>,
}

/// A configuration file that cannot be used; displayed as one line.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// The 1-based line, when known.
    pub line: Option<usize>,
    /// What is wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads `$KEEL_HOME/config.toml` (`keel_home`) and the project's `.keel/config.toml`
    /// (the nearest one from `cwd` up to the repository root), either of which may be absent.
    pub fn load(keel_home: Option<&Path>, cwd: &Path) -> Result<Self, ConfigError> {
        let user = keel_home.map(|home| home.join("config.toml"));
        let project = project_file(cwd).filter(|project| {
            // A project inside $HOME without a repository could reach ~/.keel itself.
            user.as_ref().is_none_or(|user| !same_file(user, project))
        });
        let mut config = Config::default();
        for path in user.into_iter().chain(project) {
            let text = match std::fs::read_to_string(&path) {
                Ok(text) => text,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
                Err(err) => {
                    return Err(ConfigError {
                        file: path,
                        line: None,
                        message: format!("cannot read it: {err}"),
                    });
                }
            };
            let file = parse(&path, &text)?;
            config.merge(file);
            config.files.push(path);
        }
        Ok(config)
    }

    fn merge(&mut self, file: ConfigFile) {
        let ConfigFile {
            provider,
            model,
            small_model,
            max_iterations,
            approvals,
            sandbox,
            providers,
            permissions,
            hooks,
            tools,
            tasks,
        } = file;
        self.provider = provider.or(self.provider.take());
        self.model = model.or(self.model.take());
        self.small_model = small_model.or(self.small_model.take());
        self.max_iterations = max_iterations.or(self.max_iterations);
        self.approvals = approvals.or(self.approvals);
        self.sandbox = sandbox.or(self.sandbox);
        self.providers.extend(providers);
        self.permissions.allow.extend(permissions.allow);
        self.permissions.deny.extend(permissions.deny);
        self.hooks.extend(hooks);
        self.tools.run_command_max_timeout_secs = tools
            .run_command_max_timeout_secs
            .or(self.tools.run_command_max_timeout_secs);
        self.tasks.max_running = tasks.max_running.or(self.tasks.max_running);
        self.tasks.timeout_secs = tasks.timeout_secs.or(self.tasks.timeout_secs);
        self.tasks.allowed_agents.extend(tasks.allowed_agents);
        self.tasks.runners.extend(tasks.runners);
    }

    /// The permission rules of both files.
    pub fn permission_rules(&self) -> Result<PermissionRules, String> {
        PermissionRules::parse(&self.permissions.allow, &self.permissions.deny)
            .map_err(|err| format!("[permissions]: {err}"))
    }

    /// The hooks of both files.
    pub fn hooks(&self) -> Result<Hooks, String> {
        Hooks::from_config(&self.hooks).map_err(|err| format!("[[hooks]]: {err}"))
    }
}

/// The nearest `.keel/config.toml` from `cwd` upwards, stopping at the repository root.
fn project_file(cwd: &Path) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let candidate = dir.join(".keel").join("config.toml");
        if candidate.is_file() {
            return Some(candidate);
        }
        if dir.join(".git").exists() {
            return None;
        }
    }
    None
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Parses and checks one file.
fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
    let error = |line: Option<usize>, message: String| ConfigError {
        file: path.to_path_buf(),
        line,
        message,
    };
    let deserializer = toml::Deserializer::parse(text)
        .map_err(|err| error(line_of(text, err.span()), err.message().to_owned()))?;
    let file: ConfigFile = serde_path_to_error::deserialize(deserializer).map_err(|err| {
        let key = err.path().to_string();
        let line = line_of(text, err.inner().span());
        error(line, explain(&key, err.inner().message()))
    })?;
    check(&file).map_err(|message| error(None, message))?;
    Ok(file)
}

/// Values serde cannot check.
fn check(file: &ConfigFile) -> Result<(), String> {
    if file.max_iterations == Some(0) {
        return Err("`max_iterations` must be at least 1".into());
    }
    if file.tasks.max_running == Some(0) {
        return Err("`tasks.max_running` must be at least 1".into());
    }
    if file.tasks.timeout_secs == Some(0) {
        return Err("`tasks.timeout_secs` must be at least 1".into());
    }
    for (name, runner) in &file.tasks.runners {
        if runner.command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(format!(
                "`tasks.runners.{name}.command` is empty: give the program and its arguments"
            ));
        }
        if !runner.command.iter().any(|a| a.contains("{task}")) {
            return Err(format!(
                "`tasks.runners.{name}.command` never passes the task: put \"{{task}}\" where \
                 the task's text goes"
            ));
        }
    }
    if file.tools.run_command_max_timeout_secs == Some(0) {
        return Err("`tools.run_command_max_timeout_secs` must be at least 1".into());
    }
    for (key, value) in [
        ("provider", &file.provider),
        ("model", &file.model),
        ("small_model", &file.small_model),
    ] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(format!("`{key}` is empty: name one or leave the key out"));
        }
    }
    PermissionRules::parse(&file.permissions.allow, &file.permissions.deny)
        .map_err(|err| format!("[permissions]: {err}"))?;
    Hooks::from_config(&file.hooks).map_err(|err| format!("[[hooks]]: {err}"))?;
    Ok(())
}

/// serde's wording, in the words of a config file.
fn explain(key: &str, message: &str) -> String {
    let allowed = |rest: &str| {
        rest.split(", ")
            .map(|item| item.trim_matches('`'))
            .filter(|item| !item.is_empty())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let place_of = |key: &str| {
        if key.is_empty() || key == "." {
            "at the top level".to_owned()
        } else {
            format!("in `{key}`")
        }
    };
    let place = place_of(key);
    // "unknown field `x`, expected one of `a`, `b`" -> ("`x`", "a, b").
    let name_and_allowed = |rest: &'_ str| {
        let (name, expected) = rest.split_once(", expected").unwrap_or((rest, ""));
        let expected = expected
            .trim_start_matches(" one of ")
            .trim_start_matches(' ');
        (name.to_owned(), allowed(expected))
    };
    if let Some(rest) = message.strip_prefix("unknown field ") {
        // The path ends with the unknown key itself.
        let place = place_of(key.rsplit_once('.').map_or("", |(parent, _)| parent));
        let (name, allowed) = name_and_allowed(rest);
        return format!("unknown key {name} {place}; allowed keys: {allowed}");
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (name, allowed) = name_and_allowed(rest);
        return format!("bad value {name} for `{key}`; allowed values: {allowed}");
    }
    if let Some(field) = message.strip_prefix("missing field ") {
        return format!("missing key {field} {place}");
    }
    if key.is_empty() || key == "." {
        message.to_owned()
    } else {
        format!("bad value for `{key}`: {message}")
    }
}

/// The 1-based line at the start of `span`.
fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> Option<usize> {
    let start = span?.start.min(text.len());
    Some(
        text.as_bytes()[..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str) -> Result<ConfigFile, String> {
        parse(Path::new("/home/me/.keel/config.toml"), text).map_err(|err| err.to_string())
    }

    #[test]
    fn every_key_parses() {
        let file = parse_text(
            r#"
provider = "local"
model = "qwen3:8b"
small_model = "qwen3:1.7b"
max_iterations = 40
approvals = "allow"
sandbox = "read-only"

[providers.local]
kind = "openai"
base_url = "http://localhost:11434/v1"
api_key_env = "LOCAL_KEY"

[permissions]
allow = ["run_command(cargo test*)"]
deny = ["run_command(rm *)"]

[[hooks]]
event = "PreToolUse"
matcher = "run_command"
command = "./check.sh"

[tools]
run_command_max_timeout_secs = 600

[tasks]
max_running = 3
allowed_agents = ["worker"]

[tasks.runners.claude]
command = ["claude", "-p", "{task}", "--output-format", "json"]
"#,
        )
        .unwrap();
        assert_eq!(file.provider.as_deref(), Some("local"));
        assert_eq!(file.max_iterations, Some(40));
        assert_eq!(file.approvals, Some(ApprovalMode::Allow));
        assert_eq!(file.sandbox, Some(SandboxMode::ReadOnly));
        assert_eq!(file.providers["local"].kind, ProviderKind::Openai);
        assert_eq!(file.permissions.deny, vec!["run_command(rm *)"]);
        assert_eq!(file.hooks.len(), 1);
        assert_eq!(file.tools.run_command_max_timeout_secs, Some(600));
        assert_eq!(file.tasks.max_running, Some(3));
        assert_eq!(file.tasks.allowed_agents, ["worker"]);
        assert_eq!(file.tasks.runners["claude"].command[2], "{task}");
    }

    #[test]
    fn errors_name_the_file_line_key_and_what_is_allowed() {
        let cases = [
            (
                "modle = \"x\"\n",
                "/home/me/.keel/config.toml:1: unknown key `modle` at the top level; allowed keys: provider, model, small_model, max_iterations, approvals, sandbox, providers, permissions, hooks, tools",
            ),
            (
                "approvals = \"maybe\"\n",
                "/home/me/.keel/config.toml:1: bad value `maybe` for `approvals`; allowed values: ask, deny, allow",
            ),
            (
                "\n\nsandbox = \"none\"\n",
                "/home/me/.keel/config.toml:3: bad value `none` for `sandbox`; allowed values: workspace-write, read-only, full-access",
            ),
            (
                "[providers.local]\nkind = \"openai\"\nurl = \"x\"\n",
                "/home/me/.keel/config.toml:3: unknown key `url` in `providers.local`; allowed keys: kind, base_url, api_key_env",
            ),
            (
                "[providers.local]\nbase_url = \"x\"\n",
                "/home/me/.keel/config.toml:1: missing key `kind` in `providers.local`",
            ),
            (
                "max_iterations = \"many\"\n",
                "/home/me/.keel/config.toml:1: bad value for `max_iterations`: invalid type: string \"many\", expected u32",
            ),
            (
                "max_iterations = 0\n",
                "/home/me/.keel/config.toml: `max_iterations` must be at least 1",
            ),
            (
                "[permissions]\nallow = [\"run_command(\"]\n",
                "/home/me/.keel/config.toml: [permissions]: ",
            ),
            ("model = [\n", "/home/me/.keel/config.toml:1: "),
        ];
        for (text, expected) in cases {
            let message = parse_text(text).unwrap_err();
            assert!(
                message.starts_with(expected),
                "for {text:?}:\n  got      {message}\n  expected {expected}"
            );
            assert!(!message.contains('\n'), "one line: {message:?}");
        }
    }

    #[test]
    fn the_project_file_wins_and_lists_add_up() {
        let home = tempfile::tempdir().unwrap();
        let project = tempfile::tempdir().unwrap();
        std::fs::create_dir(project.path().join(".git")).unwrap();
        std::fs::create_dir(project.path().join(".keel")).unwrap();
        let sub = project.path().join("src");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            "model = \"a\"\nsmall_model = \"s\"\n[permissions]\nallow = [\"grep\"]\n",
        )
        .unwrap();
        std::fs::write(
            project.path().join(".keel/config.toml"),
            "model = \"b\"\n[permissions]\nallow = [\"glob\"]\n",
        )
        .unwrap();
        let config = Config::load(Some(home.path()), &sub).unwrap();
        assert_eq!(config.model.as_deref(), Some("b"));
        assert_eq!(config.small_model.as_deref(), Some("s"));
        assert_eq!(config.permissions.allow, vec!["grep", "glob"]);
        assert_eq!(config.files.len(), 2);
    }

    #[test]
    fn missing_files_are_an_empty_config() {
        let home = tempfile::tempdir().unwrap();
        let config = Config::load(Some(&home.path().join("nowhere")), home.path()).unwrap();
        assert_eq!(config, Config::default());
    }
}
