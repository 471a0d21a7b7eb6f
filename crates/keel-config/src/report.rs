//! `keel config`'s report: every effective setting and where it came from — a flag, a
//! variable, one of keel's or Claude Code's files, or keel's default.

use std::path::Path;

use crate::files::{Config, Origin};
use crate::settings::{Overrides, Settings};

/// One printed setting: its key, its value and where it came from.
struct Line {
    key: String,
    value: String,
    from: String,
}

/// The lines `keel config` prints for `setup`, resolved from `overrides` (the flags).
pub fn report(overrides: &Overrides, setup: &Settings) -> Vec<String> {
    let config = &setup.config;
    let mut out = Vec::new();
    out.push("Files read, in order (later ones win):".to_owned());
    if config.files.is_empty() {
        out.push("  (none)".to_owned());
    }
    for file in &config.files {
        out.push(format!("  {}", file.display()));
    }
    if let Some(project) = &config.project {
        let trust = if project.trust.grants() {
            "trusted"
        } else {
            "not trusted: it may only tighten"
        };
        out.push(format!("Project: {} ({trust})", project.dir.display()));
        if let Some(notice) = project.notice() {
            out.push(format!("  {notice}"));
        }
    }
    out.push(String::new());
    let mut lines = vec![
        Line {
            key: "provider".into(),
            value: setup.provider_name.clone(),
            from: overrides
                .provider
                .as_ref()
                .map(|_| "--provider".to_owned())
                .or_else(|| env_origin("KEEL_PROVIDER"))
                .or_else(|| scalar_origin(config, "provider"))
                .unwrap_or_else(|| "default".into()),
        },
        Line {
            key: "model".into(),
            value: setup.model.clone(),
            from: model_origin(overrides, config),
        },
        match mode_origin(overrides, config) {
            Some(from) => Line {
                key: "approval mode".into(),
                value: setup.live_mode.name().to_owned(),
                from,
            },
            None => Line {
                key: "approval mode".into(),
                value: "ask (interactive), deny (exec, -p)".into(),
                from: "default".into(),
            },
        },
        Line {
            key: "sandbox".into(),
            value: serde_json::to_value(setup.policy.mode)
                .ok()
                .and_then(|mode| mode.as_str().map(str::to_owned))
                .unwrap_or_default(),
            from: if overrides.sandbox.is_some() {
                "--sandbox".into()
            } else {
                scalar_origin(config, "sandbox").unwrap_or_else(|| "default".into())
            },
        },
        tools_line(overrides, setup),
    ];
    // The main model's window and the summary model, then each `[models.NAME]` table, as
    // each file set them (a later file wins key by key).
    for key in ["context_window", "compaction_model"] {
        if let Some(origin) = config.last_origin(key) {
            lines.push(line_of(origin));
        }
    }
    for origin in config
        .origins
        .iter()
        .filter(|origin| origin.key.starts_with("models."))
    {
        lines.push(line_of(origin));
    }
    for root in &setup.policy.writable_roots {
        lines.push(Line {
            key: "writable root".into(),
            value: root.display().to_string(),
            from: list_origin(
                config,
                &[
                    "permissions.additionalDirectories",
                    "sandbox.writable_roots",
                ],
                root,
            )
            .unwrap_or_else(|| "--add-dir".into()),
        });
    }
    for key in ["permissions.allow", "permissions.ask", "permissions.deny"] {
        for origin in config.origins.iter().filter(|origin| origin.key == key) {
            lines.push(line_of(origin));
        }
    }
    for origin in config
        .origins
        .iter()
        .filter(|origin| origin.key.starts_with("hooks.") || origin.key.starts_with("env."))
    {
        lines.push(line_of(origin));
    }
    let width = lines.iter().map(|line| line.key.len()).max().unwrap_or(0);
    for line in lines {
        out.push(format!(
            "{:width$}  {}  ({})",
            line.key, line.value, line.from
        ));
    }
    out
}

/// The tool set and what chose it: `--tools`, a config file, or keel's choice by the model's
/// window (which `keel config` does not ask the server about).
fn tools_line(overrides: &Overrides, setup: &Settings) -> Line {
    let (value, from) = match setup.tool_profile {
        Some(profile) if overrides.tools.is_some() => (profile.name().to_owned(), "--tools".into()),
        Some(profile) => (
            profile.name().to_owned(),
            scalar_origin(&setup.config, "tools.profile").unwrap_or_else(|| "default".into()),
        ),
        None => (
            format!(
                "full, or lean for a model whose context window is {} tokens or less",
                thousands(keel::SMALL_CONTEXT_WINDOW)
            ),
            "default".into(),
        ),
    };
    Line {
        key: "tools".into(),
        value,
        from,
    }
}

fn line_of(origin: &Origin) -> Line {
    Line {
        key: origin.key.clone(),
        value: origin.value.clone(),
        from: origin.file.display().to_string(),
    }
}

/// The file that set `key` last, if one did.
fn scalar_origin(config: &Config, key: &str) -> Option<String> {
    config
        .last_origin(key)
        .map(|origin| origin.file.display().to_string())
}

/// The file whose `keys` entry names `path`.
fn list_origin(config: &Config, keys: &[&str], path: &Path) -> Option<String> {
    config
        .origins
        .iter()
        .find(|origin| {
            keys.contains(&origin.key.as_str())
                && (Path::new(&origin.value) == path
                    || path.ends_with(
                        origin
                            .value
                            .trim_start_matches("~/")
                            .trim_start_matches("./"),
                    ))
        })
        .map(|origin| origin.file.display().to_string())
}

fn env_origin(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
        .map(|_| format!("environment variable {name}"))
}

fn model_origin(overrides: &Overrides, config: &Config) -> String {
    if overrides.model.is_some() {
        return "--model".into();
    }
    env_origin("KEEL_MODEL")
        .or_else(|| env_origin("ANTHROPIC_MODEL"))
        .or_else(|| scalar_origin(config, "model"))
        .unwrap_or_else(|| "the provider's default".into())
}

/// What chose the approval mode, `None` for keel's default.
fn mode_origin(overrides: &Overrides, config: &Config) -> Option<String> {
    if overrides.yes {
        return Some("--yes".into());
    }
    if overrides.approvals.is_some() {
        return Some("--approvals".into());
    }
    if config.approvals.is_some() {
        return scalar_origin(config, "approvals");
    }
    config
        .default_mode
        .and_then(|_| scalar_origin(config, "permissions.defaultMode"))
}

/// `n` with a comma between thousands: `32,768` (every front end writes counts so).
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
