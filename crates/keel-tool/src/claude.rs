//! Claude Code's names for tools, and which of keel's tools each one stands for.
//!
//! Claude Code's configuration names tools its own way: permission rules (`Bash(npm test:*)`),
//! hook matchers (`Edit|Write`), sub-agents' `tools` lists, `--allowedTools`. This table is
//! the one place keel translates those names, so that every reader of a Claude file means the
//! same tools by them.
//!
//! ```
//! use keel_tool::claude::{ClaudeName, claude_name, resolve};
//!
//! assert_eq!(resolve("Bash"), Some(ClaudeName::Keel(&["run_command"])));
//! assert_eq!(resolve("WebSearch"), Some(ClaudeName::NotInKeel));
//! assert_eq!(resolve("Bsah"), None);
//! assert_eq!(claude_name("patch_file"), Some("Edit"));
//! ```

mod shapes;

pub use shapes::{keel_input, tool_input, tool_response};

/// What one of Claude Code's tool names means in keel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaudeName {
    /// keel's tools that do what the Claude tool does (the first is its closest twin).
    Keel(&'static [&'static str]),
    /// A tool of Claude Code's that keel does not have: rules and lists may name it (it is
    /// understood), but it never matches a call.
    NotInKeel,
}

/// Claude Code's tools that keel has, and keel's tools for each; the first row naming a keel
/// tool gives that tool's Claude name ([`claude_name`]).
const KEEL_TWINS: &[(&str, &[&str])] = &[
    ("Bash", &["run_command"]),
    ("Read", &["read_file"]),
    ("Write", &["write_file"]),
    ("Edit", &["patch_file"]),
    ("MultiEdit", &["patch_file"]),
    ("Glob", &["glob"]),
    ("Grep", &["grep"]),
    ("LS", &["list_directory"]),
    ("Agent", &["spawn_agent"]),
    ("Task", &["spawn_agent"]),
    ("Skill", &["use_skill"]),
    ("TaskOutput", &["task_status", "wait_task"]),
    ("BashOutput", &["task_status", "wait_task"]),
    ("TaskStop", &["cancel_task"]),
    ("KillShell", &["cancel_task"]),
    ("KillBash", &["cancel_task"]),
];

/// Claude Code's tools (2.x and the names older settings files still carry) that keel does
/// not have.
const NOT_IN_KEEL: &[&str] = &[
    "WebFetch",
    "WebSearch",
    "NotebookEdit",
    "NotebookRead",
    "TodoWrite",
    "TodoRead",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskUpdate",
    "ExitPlanMode",
    "EnterPlanMode",
    "AskUserQuestion",
    "SlashCommand",
    "ToolSearch",
    "ListMcpResourcesTool",
    "ReadMcpResourceTool",
    "ListAgents",
    "LSP",
    "ScheduleWakeup",
    "ReportFindings",
    "Workflow",
];

/// What Claude Code's tool `name` means in keel, or `None` if it is not one of Claude Code's
/// tool names (MCP tools, `mcp__server__tool`, are named alike in both and are not in this
/// table).
pub fn resolve(name: &str) -> Option<ClaudeName> {
    if let Some((_, keel)) = KEEL_TWINS.iter().find(|(claude, _)| *claude == name) {
        return Some(ClaudeName::Keel(keel));
    }
    NOT_IN_KEEL.contains(&name).then_some(ClaudeName::NotInKeel)
}

/// keel's tools that Claude Code's tool `name` stands for: empty for a Claude tool keel does
/// not have and for a name that is not Claude's.
pub fn keel_tools(name: &str) -> &'static [&'static str] {
    match resolve(name) {
        Some(ClaudeName::Keel(tools)) => tools,
        _ => &[],
    }
}

/// keel's tools that a permission rule naming Claude Code's tool `name` covers: wider than
/// [`keel_tools`] where Claude Code's rules are: `Edit` (and the legacy `MultiEdit`) rules
/// apply to every tool that edits files (`patch_file`, `write_file`), `Read` rules to every
/// tool that reads them (`read_file`, `grep`, `glob`, `list_directory`). Empty for a Claude
/// tool keel does not have and for a name that is not Claude's.
///
/// ```
/// use keel_tool::claude::rule_tools;
///
/// assert_eq!(rule_tools("Edit"), &["patch_file", "write_file"]);
/// assert_eq!(rule_tools("Bash"), &["run_command"]);
/// assert!(rule_tools("WebFetch").is_empty());
/// ```
pub fn rule_tools(name: &str) -> &'static [&'static str] {
    match name {
        "Edit" | "MultiEdit" => &["patch_file", "write_file"],
        "Read" => &["read_file", "grep", "glob", "list_directory"],
        _ => keel_tools(name),
    }
}

/// Every keel tool this table names (`run_command`, `read_file`, …), once each, in the
/// table's order: keel's built-in tools that have a Claude Code twin.
pub fn keel_names() -> impl Iterator<Item = &'static str> {
    KEEL_TWINS
        .iter()
        .enumerate()
        .flat_map(|(row, (_, keel))| keel.iter().map(move |tool| (row, *tool)))
        .filter(|(row, tool)| {
            !KEEL_TWINS[..*row]
                .iter()
                .any(|(_, earlier)| earlier.contains(tool))
        })
        .map(|(_, tool)| tool)
}

/// Claude Code's name for keel's tool `keel_tool` (`run_command` → `Bash`), or `None` for a
/// tool Claude Code has no twin of (`git_commit`, an MCP tool).
pub fn claude_name(keel_tool: &str) -> Option<&'static str> {
    KEEL_TWINS
        .iter()
        .find(|(_, keel)| keel.contains(&keel_tool))
        .map(|(claude, _)| *claude)
}

/// Every Claude Code name that stands for keel's tool `keel_tool` (`patch_file` → `Edit`,
/// `MultiEdit`), in the table's order: what a hook matcher written for Claude Code may name
/// it by. Empty for a tool Claude Code has no twin of.
pub fn claude_names(keel_tool: &str) -> Vec<&'static str> {
    KEEL_TWINS
        .iter()
        .filter(|(_, keel)| keel.contains(&keel_tool))
        .map(|(claude, _)| *claude)
        .collect()
}

/// Every tool name of Claude Code's that keel understands, for messages that list them.
pub fn known_names() -> impl Iterator<Item = &'static str> {
    KEEL_TWINS
        .iter()
        .map(|(claude, _)| *claude)
        .chain(NOT_IN_KEEL.iter().copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_twin_maps_back_to_a_claude_name() {
        for (_, keel) in KEEL_TWINS {
            for tool in *keel {
                let claude = claude_name(tool);
                assert!(claude.is_some(), "{tool}");
                assert!(keel_tools(claude.unwrap_or_default()).contains(tool));
            }
        }
    }

    #[test]
    fn the_tables_do_not_overlap() {
        for (claude, _) in KEEL_TWINS {
            assert!(!NOT_IN_KEEL.contains(claude), "{claude}");
        }
        assert_eq!(claude_name("git_commit"), None);
        assert_eq!(keel_tools("WebFetch"), &[] as &[&str]);
        assert_eq!(resolve("read_file"), None);
    }

    #[test]
    fn rule_tools_widen_edit_and_read_and_keel_names_are_unique() {
        for (claude, _) in KEEL_TWINS {
            for tool in keel_tools(claude) {
                assert!(rule_tools(claude).contains(tool), "{claude}: {tool}");
            }
        }
        assert!(rule_tools("Read").contains(&"grep"));
        let names: Vec<&str> = keel_names().collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(names.len(), unique.len(), "{names:?}");
        assert!(names.contains(&"run_command") && names.contains(&"cancel_task"));
    }
}
