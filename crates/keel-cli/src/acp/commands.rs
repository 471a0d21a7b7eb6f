//! keel's slash commands over ACP: offered to the client in `available_commands_update`,
//! run when a prompt starts with one (`/compact`), their answer sent as the agent's message.
//! The commands that need the terminal (`/last`'s pager, `/resume`'s list, `/exit`) or that
//! ACP does through its own methods (`/mode`: `session/set_mode`; `/clear`: a new session)
//! are not offered.

use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, AvailableCommandsUpdate, SessionUpdate,
    UnstructuredCommandInput,
};
use keel::engine::CompactionError;
use keel_host::rewind::{self, Rewound};

use super::AcpSession;
use keel_host::report::delegates::Listings;

/// The commands offered: name, what it does, and the hint for its argument if it takes one.
const COMMANDS: &[(&str, &str, Option<&str>)] = &[
    (
        "compact",
        "Summarize the older turns to free room in the context",
        None,
    ),
    (
        "context",
        "What fills the context window: system prompt, tools, messages, tool results",
        None,
    ),
    (
        "cost",
        "Tokens used and what they cost in this session",
        None,
    ),
    (
        "rewind",
        "List this workspace's snapshots, or put the files back as they were at snapshot N",
        Some("N: the snapshot to restore; none to list them"),
    ),
    (
        "mcp",
        "The MCP servers: connected or not, their tools",
        None,
    ),
    ("agents", "List the sub-agents", None),
    (
        "skills",
        "List the skills, or show skill NAME's instructions",
        Some("NAME: the skill to show"),
    ),
    ("tasks", "List the background tasks", None),
];

/// The `available_commands_update` a session sends when it starts.
pub(super) fn available() -> SessionUpdate {
    let commands = COMMANDS
        .iter()
        .map(|(name, description, hint)| {
            let command = AvailableCommand::new(*name, *description);
            match hint {
                Some(hint) => command.input(AvailableCommandInput::Unstructured(
                    UnstructuredCommandInput::new(*hint),
                )),
                None => command,
            }
        })
        .collect();
    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands))
}

/// The command `prompt` holds and its argument: `None` when it is not one of [`COMMANDS`]
/// (a prompt that merely starts with `/`, like a path, goes to the model).
pub(super) fn parse(prompt: &str) -> Option<(&'static str, Option<String>)> {
    let rest = prompt.trim().strip_prefix('/')?;
    let (word, argument) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(word, argument)| (word, argument.trim()));
    let (name, ..) = COMMANDS.iter().find(|(name, ..)| *name == word)?;
    Some((name, (!argument.is_empty()).then(|| argument.to_owned())))
}

/// Runs command `name` in `acp`'s session; the text to show.
pub(super) async fn run(acp: &AcpSession, name: &str, argument: Option<String>) -> String {
    let lines = match name {
        "compact" => vec![compact(acp).await],
        "context" => {
            let tools = acp.live.coding().agent().tools().definitions();
            keel_host::report::status::context_lines(&*acp.live.session().await, &tools)
        }
        "cost" => vec![acp.live.totals().summary()],
        "rewind" => rewind(acp, argument).await,
        "mcp" => keel_host::report::mcp::session_lines(&acp.settings),
        "agents" | "skills" | "tasks" => match acp.live.coding().delegates() {
            None => vec!["delegation is off (--no-delegation)".to_owned()],
            Some(delegates) => match (name, argument) {
                ("agents", _) => delegates.agent_lines(),
                ("skills", None) => delegates.skill_lines(),
                ("skills", Some(skill)) => delegates
                    .skill_detail_lines(&skill)
                    .unwrap_or_else(|err| vec![err]),
                _ => delegates.task_lines(),
            },
        },
        _ => vec![format!("unknown command /{name}")],
    };
    lines.join("\n")
}

/// `/compact`.
async fn compact(acp: &AcpSession) -> String {
    let compacted = acp.live.session().await.compact_now().await;
    match compacted {
        Ok(done) => {
            acp.live
                .add_spent(&done.usage, done.cost_usd, &done.cost_by_provider);
            format!(
                "compacted the conversation: ~{} → ~{} tokens",
                done.before_tokens, done.after_tokens
            )
        }
        Err(CompactionError::Cancelled) => "compaction cancelled".to_owned(),
        Err(err) => format!("cannot compact: {err}"),
    }
}

/// `/rewind [N]`: the snapshots, or the files put back as they were at snapshot N (the
/// conversation stays as it is).
async fn rewind(acp: &AcpSession, argument: Option<String>) -> Vec<String> {
    match acp.host.rewind(&acp.live.id(), argument).await {
        Ok(Rewound::Listed(infos)) if infos.is_empty() => vec![rewind::NO_SNAPSHOTS.to_owned()],
        Ok(Rewound::Listed(infos)) => rewind::list_lines(&infos),
        Ok(Rewound::Restored(restored)) => rewind::report_lines(&restored.0, &restored.1),
        Err(err) => vec![err.to_string()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_commands_are_commands() {
        assert_eq!(parse("/compact"), Some(("compact", None)));
        assert_eq!(
            parse("  /rewind 2 "),
            Some(("rewind", Some("2".to_owned())))
        );
        assert_eq!(parse("/etc/hosts: what is in it?"), None);
        assert_eq!(parse("/exit"), None);
        assert_eq!(parse("compact"), None);
    }
}
