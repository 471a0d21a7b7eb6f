//! Tool lists as Claude Code's files write them (`tools: Read, Grep, Glob, Bash`,
//! `disallowedTools: [Write]`, `allowed-tools: Bash(git add:*)`), read as keel's tool names
//! through the one table of Claude's names, [`keel_tool::claude`]. A name that is neither
//! Claude's, keel's nor an MCP tool's (`mcp__<server>__<tool>`) is a warning, never dropped
//! without a word.

use keel_tool::claude::{self, ClaudeName};

/// keel's own tools, as its crates name them, whatever a build's features or an agent's
/// options leave out: a list, rule or hook matcher naming one of these names a tool keel has.
pub const KEEL_TOOLS: &[&str] = &[
    "read_file",
    "write_file",
    "patch_file",
    "grep",
    "glob",
    "list_directory",
    "run_command",
    "git_status",
    "git_diff",
    "git_commit",
    "code",
    "spawn_agent",
    "run_team",
    "use_skill",
    "start_task",
    "task_status",
    "wait_task",
    "cancel_task",
    "list_tasks",
];

/// What a list does with the tools it names.
#[cfg_attr(not(feature = "delegation"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    /// The tools offered (`tools`, `allowed-tools`).
    Allowed,
    /// The tools taken away (`disallowedTools`).
    Disallowed,
}

/// A list written as a YAML list or, as Claude Code writes them, `Read, Grep, Glob`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(untagged)]
pub(crate) enum NameList {
    /// `[Read, Grep]` or one name per `- ` line.
    List(Vec<String>),
    /// `Read, Grep`.
    Text(String),
}

impl NameList {
    /// The names, trimmed, empty ones left out. A comma-separated text is split at commas
    /// outside parentheses (`Bash(git add:*), Read`), and, when it has no comma, at spaces
    /// outside parentheses, as Claude Code's `allowed-tools: Bash(git add:*) Bash(git status:*)`.
    pub(crate) fn names(&self) -> Vec<String> {
        match self {
            Self::List(names) => names
                .iter()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
                .collect(),
            Self::Text(text) => {
                let separator = if has_top_level(text, ',') { ',' } else { ' ' };
                split_top_level(text, separator)
            }
        }
    }
}

/// Whether `text` has `separator` outside parentheses.
fn has_top_level(text: &str, separator: char) -> bool {
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            c if c == separator && depth == 0 => return true,
            _ => {}
        }
    }
    false
}

/// `text` split at `separator` outside parentheses, pieces trimmed, empty ones left out.
fn split_top_level(text: &str, separator: char) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if c == separator && depth == 0 {
            pieces.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    pieces.push(current);
    pieces
        .into_iter()
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

#[cfg_attr(not(feature = "delegation"), allow(dead_code))]
/// keel's tool names for the `entries` of a list of `kind` (Claude's names, keel's, MCP
/// tools'), without repeats. `subject` (`agent \`reviewer\``) starts each warning pushed to
/// `warnings`: a Claude tool keel lacks, a permission pattern where a whole tool is meant, a
/// name nobody knows (kept: the host may define a tool of that name).
pub(crate) fn keel_names(
    entries: &[String],
    kind: ListKind,
    subject: &str,
    warnings: &mut Vec<String>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |name: &str| {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
    };
    for entry in entries {
        let entry = entry.trim();
        if entry.is_empty() {
            continue;
        }
        // `Bash(git diff:*)`: a permission rule's pattern; agent lists name whole tools.
        let name = match entry.split_once('(') {
            Some((base, rest)) if rest.ends_with(')') && !base.trim().is_empty() => {
                let base = base.trim();
                warnings.push(match kind {
                    ListKind::Allowed => format!(
                        "{subject}: `{entry}`: a tool list names whole tools, so the pattern is \
                         not kept; the agent is offered all of {base}, each call still approved \
                         as its parent's would be"
                    ),
                    ListKind::Disallowed => format!(
                        "{subject}: `{entry}`: a tool list names whole tools, so all of {base} \
                         is taken away"
                    ),
                });
                base
            }
            _ => entry,
        };
        if name.starts_with("mcp__") || KEEL_TOOLS.contains(&name) {
            push(name);
            continue;
        }
        match claude::resolve(name) {
            Some(ClaudeName::Keel(tools)) => tools.iter().for_each(|tool| push(tool)),
            Some(ClaudeName::NotInKeel) => {
                if kind == ListKind::Allowed {
                    warnings.push(format!(
                        "{subject}: keel has no {name}; the agent runs without it"
                    ));
                }
            }
            None => {
                let hint = claude::known_names()
                    .chain(KEEL_TOOLS.iter().copied())
                    .find(|known| known.eq_ignore_ascii_case(name))
                    .map(|known| format!(" (did you mean `{known}`?)"))
                    .unwrap_or_default();
                warnings.push(format!(
                    "{subject}: unknown tool `{name}`{hint}: it is neither one of Claude Code's \
                     tools, nor keel's, nor an MCP tool (`mcp__<server>__<tool>`); {}",
                    match kind {
                        ListKind::Allowed =>
                            "the agent gets it only if the host defines a tool of that name",
                        ListKind::Disallowed => "nothing of that name is taken away",
                    }
                ));
                push(name);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Vec<String> {
        NameList::Text(s.into()).names()
    }

    #[test]
    fn lists_split_as_claude_writes_them() {
        assert_eq!(
            text("Read, Grep,Glob , Bash"),
            ["Read", "Grep", "Glob", "Bash"]
        );
        assert_eq!(
            text("Bash(git add:*), Bash(git status:*)"),
            ["Bash(git add:*)", "Bash(git status:*)"]
        );
        assert_eq!(
            text("Bash(git add:*) Bash(git commit -m:*)"),
            ["Bash(git add:*)", "Bash(git commit -m:*)"]
        );
        assert_eq!(text(""), Vec::<String>::new());
        assert_eq!(text("(((,"), ["(((,"]);
    }

    #[test]
    fn names_translate_and_unknown_ones_warn() {
        let mut warnings = Vec::new();
        let names = keel_names(
            &text("Read, Edit, WebFetch, mcp__gh__issue, git_diff, Bsah, bash, Bash(ls:*)"),
            ListKind::Allowed,
            "agent `x`",
            &mut warnings,
        );
        assert_eq!(
            names,
            [
                "read_file",
                "patch_file",
                "mcp__gh__issue",
                "git_diff",
                "Bsah",
                "bash",
                "run_command"
            ]
        );
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert_eq!(
            warnings[0],
            "agent `x`: keel has no WebFetch; the agent runs without it"
        );
        assert!(warnings[1].starts_with("agent `x`: unknown tool `Bsah`:"));
        assert!(
            warnings[2].contains("(did you mean `Bash`?)"),
            "{}",
            warnings[2]
        );
        assert!(warnings[3].contains("`Bash(ls:*)`"));
    }
}
