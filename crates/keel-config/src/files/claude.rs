//! Claude Code's settings files, read beside keel's own: `~/.claude/settings.json` (the
//! user's, trusted), `.claude/settings.json` and `.claude/settings.local.json` in the project
//! (the repository's, untrusted until the user trusts the project), and the file or JSON text
//! of `--settings` (the user's flag, trusted).
//!
//! The keys keel honours are `permissions` (`allow`, `deny`, `ask`, `additionalDirectories`,
//! `defaultMode`), `hooks`, `env` (variables for commands) and `model`. Other keys of Claude
//! Code's (`statusLine`, `apiKeyHelper`, `outputStyle`, …) are left alone: keel does nothing
//! they ask, so none of them can widen what it does.
//!
//! Hooks are written as Claude Code writes them:
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "Bash",
//!   "hooks": [{"type": "command", "command": "./check.sh", "timeout": 30}]}]}}
//! ```
//!
//! A hook of any type but `command`, an event keel does not know, or a value of the wrong
//! kind is an error naming the file, the line and the key: a guard the user relies on is never
//! dropped without a word.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keel::engine::{HookConfig, HookEvent, PermissionRule};
use serde::Deserialize;
use serde_json::Value;

use super::parse::ConfigError;
use crate::modes::{LiveMode, PermissionMode};

/// One Claude Code settings file, as far as keel reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaudeSettings {
    /// `permissions.allow`: rules in Claude Code's syntax (`Bash(npm test:*)`).
    pub allow: Vec<String>,
    /// `permissions.deny`.
    pub deny: Vec<String>,
    /// `permissions.ask`: calls always asked about.
    pub ask: Vec<String>,
    /// `permissions.additionalDirectories`, as written (absolute, `~/` or relative to the
    /// directory the file's project is in).
    pub additional_directories: Vec<String>,
    /// `permissions.defaultMode`, in keel's words.
    pub default_mode: Option<LiveMode>,
    /// `hooks`, as keel's hook configurations.
    pub hooks: Vec<HookConfig>,
    /// `env`: variables set for commands.
    pub env: Vec<(String, String)>,
    /// `model`.
    pub model: Option<String>,
}

/// The file as written; unknown keys are Claude Code's business.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SettingsFile {
    #[serde(default)]
    permissions: PermissionsSection,
    #[serde(default)]
    hooks: BTreeMap<String, Vec<MatcherGroup>>,
    #[serde(default)]
    env: BTreeMap<String, Value>,
    model: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PermissionsSection {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    ask: Vec<String>,
    #[serde(default)]
    additional_directories: Vec<String>,
    default_mode: Option<String>,
}

#[derive(Debug, Deserialize)]
struct MatcherGroup {
    #[serde(default)]
    matcher: Option<String>,
    hooks: Vec<HookEntry>,
}

#[derive(Debug, Deserialize)]
struct HookEntry {
    #[serde(rename = "type")]
    kind: String,
    command: Option<String>,
    /// Seconds.
    timeout: Option<u64>,
}

/// Reads the settings file at `path`; `None` when there is none.
pub fn read(path: &Path) -> Result<Option<ClaudeSettings>, ConfigError> {
    super::parse::read_text(path)?
        .map(|text| parse(path, &text))
        .transpose()
}

/// `--settings`: a file, or JSON text when the argument starts with `{`.
pub fn from_flag(given: &str) -> Result<ClaudeSettings, ConfigError> {
    if given.trim_start().starts_with('{') {
        return parse(Path::new("--settings"), given);
    }
    let path = Path::new(given);
    read(path)?.ok_or_else(|| ConfigError {
        file: PathBuf::from("--settings"),
        line: None,
        message: format!("{given}: no such file; name a settings file or give JSON text"),
    })
}

/// Parses one settings file's text.
pub fn parse(path: &Path, text: &str) -> Result<ClaudeSettings, ConfigError> {
    let error = |line: Option<usize>, message: String| ConfigError {
        file: path.to_path_buf(),
        line,
        message,
    };
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let file: SettingsFile =
        serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
            let key = err.path().to_string();
            let inner = err.into_inner();
            let line = (inner.line() > 0).then_some(inner.line());
            let place = if key.is_empty() || key == "." {
                String::new()
            } else {
                format!("`{key}`: ")
            };
            error(line, format!("{place}{inner}"))
        })?;
    convert(file).map_err(|message| error(None, message))
}

fn convert(file: SettingsFile) -> Result<ClaudeSettings, String> {
    let SettingsFile {
        permissions,
        hooks,
        env,
        model,
    } = file;
    let default_mode = match permissions.default_mode.as_deref() {
        None => None,
        Some(name) => Some(
            PermissionMode::named(name)
                .map(PermissionMode::live)
                .ok_or_else(|| {
                    format!(
                        "`permissions.defaultMode`: no mode {name:?}; the modes are default, \
                     acceptEdits, plan, bypassPermissions and dontAsk"
                    )
                })?,
        ),
    };
    let mut configs = Vec::new();
    for (event_name, groups) in hooks {
        let event = event_named(&event_name)?;
        for (g, group) in groups.into_iter().enumerate() {
            for (h, hook) in group.hooks.into_iter().enumerate() {
                let key = format!("hooks.{event_name}[{g}].hooks[{h}]");
                if hook.kind != "command" {
                    return Err(format!(
                        "`{key}`: keel runs hooks of type \"command\" only, not {:?}; remove \
                         it or write it as a command",
                        hook.kind
                    ));
                }
                let command = hook
                    .command
                    .filter(|command| !command.trim().is_empty())
                    .ok_or_else(|| format!("`{key}.command` is missing or empty"))?;
                configs.push(HookConfig {
                    event,
                    matcher: group.matcher.clone().filter(|m| !m.is_empty()),
                    command,
                    timeout_secs: hook.timeout,
                });
            }
        }
    }
    let mut variables = Vec::new();
    for (name, value) in env {
        let text = match value {
            Value::String(text) => text,
            Value::Number(number) => number.to_string(),
            Value::Bool(flag) => flag.to_string(),
            other => {
                return Err(format!(
                    "`env.{name}`: {other} is not a string; write the value in quotes"
                ));
            }
        };
        if name.is_empty() || name.contains('=') || name.contains('\0') || text.contains('\0') {
            return Err(format!("`env.{name}`: not a valid environment variable"));
        }
        variables.push((name, text));
    }
    for (key, rules) in [
        ("allow", &permissions.allow),
        ("ask", &permissions.ask),
        ("deny", &permissions.deny),
    ] {
        for (index, rule) in rules.iter().enumerate() {
            PermissionRule::parse(rule)
                .map_err(|err| format!("`permissions.{key}[{index}]`: {err}"))?;
        }
    }
    if model.as_deref().is_some_and(|m| m.trim().is_empty()) {
        return Err("`model` is empty: name one or leave the key out".into());
    }
    Ok(ClaudeSettings {
        allow: permissions.allow,
        deny: permissions.deny,
        ask: permissions.ask,
        additional_directories: permissions.additional_directories,
        default_mode,
        hooks: configs,
        env: variables,
        model,
    })
}

/// The hook event Claude Code names `name`.
fn event_named(name: &str) -> Result<HookEvent, String> {
    HookEvent::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(name))
        .map_err(|_| {
            format!(
                "`hooks.{name}`: keel has no hook event {name:?}; its events are {}",
                HookEvent::ALL.map(HookEvent::name).join(", ")
            )
        })
}

/// The command lines of the hooks in the settings file at `path`, read leniently (a file that
/// does not parse names none; it is refused when loaded anyway).
pub fn commands_in(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(value) = serde_json::from_str::<Value>(&text) else {
        return Vec::new();
    };
    let groups = value
        .get("hooks")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|events| events.values())
        .filter_map(Value::as_array)
        .flatten();
    groups
        .filter_map(|group| group.get("hooks")?.as_array())
        .flatten()
        .filter_map(|hook| hook.get("command")?.as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<ClaudeSettings, String> {
        parse(Path::new("/p/.claude/settings.json"), text).map_err(|err| err.to_string())
    }

    #[test]
    fn the_documented_keys_are_read() {
        let settings = parsed(
            r#"{
  "model": "claude-sonnet-4-5",
  "env": {"FOO": "bar", "N": 3},
  "statusLine": {"type": "command", "command": "echo hi"},
  "permissions": {
    "allow": ["Bash(npm test:*)"],
    "deny": ["Bash(rm:*)", "Read(./.env)"],
    "ask": ["Bash(git push:*)"],
    "additionalDirectories": ["../docs"],
    "defaultMode": "acceptEdits"
  },
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./v.sh", "timeout": 5}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "echo done"}]}]
  }
}"#,
        )
        .unwrap();
        assert_eq!(settings.model.as_deref(), Some("claude-sonnet-4-5"));
        assert_eq!(
            settings.env,
            [("FOO".into(), "bar".into()), ("N".into(), "3".into())]
        );
        assert_eq!(settings.deny, ["Bash(rm:*)", "Read(./.env)"]);
        assert_eq!(settings.ask, ["Bash(git push:*)"]);
        assert_eq!(settings.default_mode, Some(LiveMode::AcceptEdits));
        assert_eq!(settings.hooks.len(), 2);
        let pre = settings
            .hooks
            .iter()
            .find(|hook| hook.event == HookEvent::PreToolUse)
            .unwrap();
        assert_eq!(pre.matcher.as_deref(), Some("Bash"));
        assert_eq!(pre.command, "./v.sh");
        assert_eq!(pre.timeout_secs, Some(5));
    }

    #[test]
    fn what_keel_cannot_honour_is_an_error_naming_it() {
        let prompt = parsed(
            r#"{"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "prompt", "prompt": "is it safe?"}]}]}}"#,
        )
        .unwrap_err();
        assert!(prompt.contains("hooks.PreToolUse[0].hooks[0]"), "{prompt}");
        assert!(prompt.contains("\"prompt\""), "{prompt}");
        let event = parsed(r#"{"hooks": {"BeforeLunch": []}}"#).unwrap_err();
        assert!(
            event.contains("BeforeLunch") && event.contains("PreToolUse"),
            "{event}"
        );
        let mode = parsed(r#"{"permissions": {"defaultMode": "yolo"}}"#).unwrap_err();
        assert!(
            mode.contains("yolo") && mode.contains("acceptEdits"),
            "{mode}"
        );
        let kind = parsed(r#"{"permissions": {"deny": "Bash(rm:*)"}}"#).unwrap_err();
        assert!(kind.contains("permissions.deny"), "{kind}");
        assert!(kind.starts_with("/p/.claude/settings.json:1:"), "{kind}");
        let env = parsed(r#"{"env": {"A": ["x"]}}"#).unwrap_err();
        assert!(env.contains("env.A"), "{env}");
    }

    #[test]
    fn hook_commands_are_listed_for_the_trust_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("settings.json");
        std::fs::write(
            &path,
            r#"{"hooks": {"PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "python3 .claude/hooks/fmt.py"}]}]}}"#,
        )
        .unwrap();
        assert_eq!(commands_in(&path), ["python3 .claude/hooks/fmt.py"]);
        std::fs::write(&path, "{not json").unwrap();
        assert!(commands_in(&path).is_empty());
    }
}
