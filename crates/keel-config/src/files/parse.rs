//! One configuration file as written, parsed and checked; errors name the file, the line, the
//! key and what is allowed.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use keel::engine::{HookConfig, Hooks, PermissionRules};
use keel::sandbox::SandboxMode;
use serde::{Deserialize, Deserializer};

use super::mcp::McpServerToml;
use super::models::{self, ModelTable};
use super::{
    ApprovalMode, PermissionsConfig, ProviderConfig, SnapshotsConfig, TasksConfig, ToolsConfig,
};

/// The `[sandbox]` table (or, as before, `sandbox = "MODE"`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SandboxConfig {
    /// Where commands may write.
    pub mode: Option<SandboxMode>,
    /// Whether commands may use the network.
    pub network: Option<bool>,
    /// More directories commands may write in (`~/` is the home directory).
    #[serde(default)]
    pub writable_roots: Vec<String>,
}

/// A table that may also be written as one string, its main key: `sandbox = "read-only"` for
/// `[sandbox] mode = "read-only"`, `provider = "local"` for `[provider] name = "local"`.
/// `from_str` makes the table from the string.
trait StringOrTable: for<'de> Deserialize<'de> + Sized {
    /// What the value may be, for errors.
    const EXPECTING: &'static str;
    /// The table the short string form stands for.
    fn from_str<E: serde::de::Error>(value: &str) -> Result<Self, E>;
}

fn string_or_table<'de, D: Deserializer<'de>, T: StringOrTable>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    struct Visitor<T>(std::marker::PhantomData<T>);
    impl<'de, T: StringOrTable> serde::de::Visitor<'de> for Visitor<T> {
        type Value = T;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(T::EXPECTING)
        }
        fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<T, E> {
            T::from_str(value)
        }
        fn visit_map<M: serde::de::MapAccess<'de>>(self, map: M) -> Result<T, M::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    deserializer
        .deserialize_any(Visitor(std::marker::PhantomData))
        .map(Some)
}

impl StringOrTable for SandboxConfig {
    const EXPECTING: &'static str = "a sandbox mode or a [sandbox] table";
    fn from_str<E: serde::de::Error>(value: &str) -> Result<Self, E> {
        let mode = SandboxMode::deserialize(serde::de::value::StrDeserializer::<E>::new(value))?;
        Ok(SandboxConfig {
            mode: Some(mode),
            ..SandboxConfig::default()
        })
    }
}

/// The `[provider]` table (or, as before, `provider = "NAME"`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProviderSetting {
    /// The provider: `anthropic`, `openai` or a `[providers.NAME]` name.
    pub name: Option<String>,
    /// The longest wait for the next piece of a streamed reply.
    pub idle_timeout_secs: Option<u64>,
    /// The longest a whole request may take, reply included.
    pub request_timeout_secs: Option<u64>,
}

impl StringOrTable for ProviderSetting {
    const EXPECTING: &'static str = "a provider name or a [provider] table";
    fn from_str<E: serde::de::Error>(value: &str) -> Result<Self, E> {
        Ok(ProviderSetting {
            name: Some(value.to_owned()),
            ..ProviderSetting::default()
        })
    }
}

/// A `[projects."PATH"]` table: the user's trust decision for the project in PATH, pinned to
/// the hash of its configuration files. Read from the user's file only.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectTrust {
    /// Whether the project's configuration may grant powers.
    pub trusted: bool,
    /// The hash of the configuration files the decision was made on (`sha256:...`).
    pub config_hash: String,
}

/// One file as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    #[serde(default, deserialize_with = "string_or_table")]
    pub provider: Option<ProviderSetting>,
    pub model: Option<String>,
    pub small_model: Option<String>,
    pub max_iterations: Option<u32>,
    pub approvals: Option<ApprovalMode>,
    #[serde(default, deserialize_with = "string_or_table")]
    pub sandbox: Option<SandboxConfig>,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    #[serde(default)]
    pub permissions: PermissionsConfig,
    #[serde(default)]
    pub hooks: Vec<HookConfig>,
    #[serde(default)]
    pub tools: ToolsConfig,
    #[serde(default)]
    pub tasks: TasksConfig,
    pub snapshots: Option<SnapshotsConfig>,
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, McpServerToml>,
    #[serde(default)]
    pub projects: BTreeMap<String, ProjectTrust>,
    /// The main model's context window, for compaction.
    #[serde(default, deserialize_with = "models::tokens")]
    pub context_window: Option<u64>,
    /// The model (a tier or an id) that writes compaction summaries.
    pub compaction_model: Option<String>,
    /// `[models.NAME]`: tiers and what is known of models.
    #[serde(default)]
    pub models: BTreeMap<String, ModelTable>,
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

/// Reads and parses `path`; `None` when it does not exist.
pub(super) fn read(path: &Path) -> Result<Option<ConfigFile>, ConfigError> {
    read_text(path)?.map(|text| parse(path, &text)).transpose()
}

/// The text of the config file at `path`, `None` when there is none.
pub(super) fn read_text(path: &Path) -> Result<Option<String>, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(ConfigError {
            file: path.to_path_buf(),
            line: None,
            message: format!("cannot read it: {err}"),
        }),
    }
}

/// Parses and checks one file.
pub(super) fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
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
    models::check(&file.models, file.compaction_model.as_deref())
        .map_err(|problem| error(models::line_of_key(text, &problem.path), problem.message))?;
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
    if let Some(snapshots) = &file.snapshots {
        for (key, value) in [
            ("max_size_mb", snapshots.max_size_mb),
            ("max_file_mb", snapshots.max_file_mb),
        ] {
            if value == Some(0) {
                return Err(format!(
                    "`snapshots.{key}` must be at least 1 (`enabled = false` turns snapshots off)"
                ));
            }
        }
    }
    if file.tools.run_command_max_timeout_secs == Some(0) {
        return Err("`tools.run_command_max_timeout_secs` must be at least 1".into());
    }
    let provider = file.provider.clone().unwrap_or_default();
    for (key, value) in [
        ("idle_timeout_secs", provider.idle_timeout_secs),
        ("request_timeout_secs", provider.request_timeout_secs),
    ] {
        if value == Some(0) {
            return Err(format!("`provider.{key}` must be at least 1"));
        }
    }
    for (key, value) in [
        ("provider", &provider.name),
        ("model", &file.model),
        ("small_model", &file.small_model),
    ] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            return Err(format!("`{key}` is empty: name one or leave the key out"));
        }
    }
    if let Some(sandbox) = &file.sandbox
        && let Some(root) = sandbox
            .writable_roots
            .iter()
            .find(|root| !(root.starts_with('/') || root.starts_with("~/")))
    {
        return Err(format!(
            "`sandbox.writable_roots`: `{root}` is not an absolute path; write it as /path or \
             ~/path"
        ));
    }
    for (path, trust) in &file.projects {
        if !path.starts_with('/') {
            return Err(format!(
                "`projects.\"{path}\"`: not an absolute path; `keel trust DIR` writes these"
            ));
        }
        if !trust.config_hash.starts_with("sha256:") {
            return Err(format!(
                "`projects.\"{path}\".config_hash` is not a sha256 hash; run `keel trust {path}` \
                 again"
            ));
        }
    }
    for (name, server) in &file.mcp_servers {
        server.check(name)?;
    }
    PermissionRules::from_texts(&file.permissions.texts())
        .map_err(|err| format!("[permissions]: {err}"))?;
    Hooks::from_config(
        &file.hooks,
        std::sync::Arc::new(keel::sandbox::ProcessGroupRunner),
    )
    .map_err(|err| format!("[[hooks]]: {err}"))?;
    Ok(())
}

/// serde's wording, in the words of a config file.
fn explain(key: &str, message: &str) -> String {
    let allowed = |rest: &str| {
        rest.replace("` or `", "`, `")
            .split(", ")
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
pub(super) fn line_of(text: &str, span: Option<std::ops::Range<usize>>) -> Option<usize> {
    let start = span?.start.min(text.len());
    Some(
        text.as_bytes()[..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1,
    )
}
