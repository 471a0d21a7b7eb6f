//! The slash commands: what they are called, and what each does.

use keel_engine::CompactionError;
use keel_sandbox::GitSession;

use super::worktree;
use super::{Flow, Repl};
use crate::sessions;
use crate::setup::SessionChoice;

/// How many sessions `/sessions` lists.
const SESSIONS_SHOWN: usize = 20;

/// A slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/help`.
    Help,
    /// `/undo`.
    Undo,
    /// `/diff`.
    Diff,
    /// `/cost`.
    Cost,
    /// `/compact`.
    Compact,
    /// `/clear`.
    Clear,
    /// `/model [NAME]`.
    Model(Option<String>),
    /// `/sessions`.
    Sessions,
    /// `/exit` or `/quit`.
    Exit,
    /// Anything else that starts with `/`: the word as typed.
    Unknown(String),
}

/// The commands and what they do, for `/help`.
pub const HELP: &[(&str, &str)] = &[
    ("/help", "this list"),
    (
        "/undo",
        "undo the last commit keel made in this session (its changes stay, staged)",
    ),
    (
        "/diff",
        "what changed in the work tree since the session started",
    ),
    ("/cost", "tokens used and what they cost so far"),
    (
        "/compact",
        "summarize the older turns to free room in the context",
    ),
    ("/clear", "start a new session (same model)"),
    ("/model [NAME]", "show the model, or switch to NAME"),
    ("/sessions", "list recent sessions"),
    ("/exit, /quit", "leave keel (or Ctrl-D)"),
];

/// The command `line` holds, or `None` when it is a prompt (it does not start with `/`).
pub fn parse(line: &str) -> Option<Command> {
    let rest = line.trim().strip_prefix('/')?;
    let mut words = rest.split_whitespace();
    let name = words.next().unwrap_or_default();
    let argument = words.collect::<Vec<_>>().join(" ");
    let argument = (!argument.is_empty()).then_some(argument);
    Some(match name {
        "help" | "?" => Command::Help,
        "undo" => Command::Undo,
        "diff" => Command::Diff,
        "cost" => Command::Cost,
        "compact" => Command::Compact,
        "clear" => Command::Clear,
        "model" => Command::Model(argument),
        "sessions" => Command::Sessions,
        "exit" | "quit" => Command::Exit,
        other => Command::Unknown(format!("/{other}")),
    })
}

impl Repl {
    /// Does `command`.
    pub(super) async fn command(&mut self, command: Command) -> Flow {
        match command {
            Command::Help => self.help(),
            Command::Undo => self.undo(),
            Command::Diff => self.diff(),
            Command::Cost => self.view.line(&self.totals.summary()),
            Command::Compact => self.compact().await,
            Command::Clear => self.clear(),
            Command::Model(None) => self.view.line(&format!("model: {}", self.session.model())),
            Command::Model(Some(name)) => {
                self.session.set_model(name.clone());
                self.view
                    .notice(&format!("model: {name} (from the next request on)"));
            }
            Command::Sessions => self.sessions(),
            Command::Exit => return Flow::Exit,
            Command::Unknown(name) => self
                .view
                .error(&format!("unknown command {name}; /help lists the commands")),
        }
        Flow::Continue
    }

    /// `/help`: the commands and what they do.
    fn help(&self) {
        let style = self.view.style();
        let width = HELP.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        let mut lines: Vec<String> = HELP
            .iter()
            .map(|(name, what)| format!("{}  {what}", style.bold(&format!("{name:width$}"))))
            .collect();
        lines.push(style.dim(
            "Anything else is a prompt for the model. Ctrl-C cancels a running turn; Ctrl-D \
             exits.",
        ));
        self.view.lines(&lines);
    }

    /// `/undo`: the last commit of this session off the branch, its changes staged.
    fn undo(&self) {
        let undone = GitSession::new(&self.setup.cwd, self.session.id())
            .and_then(|git| git.undo_last_commit());
        match undone {
            Ok(undone) => self.view.line(&format!(
                "undid commit {} \"{}\"; its changes are staged in the work tree",
                undone.short_id, undone.summary
            )),
            Err(err) => self.view.error(&format!("cannot undo: {err}")),
        }
    }

    /// `/diff`: the work tree against where the session started.
    fn diff(&self) {
        let baseline = match &self.baseline {
            Ok(baseline) => baseline,
            Err(why) => {
                self.view.error(&format!("no diff: {why}"));
                return;
            }
        };
        match worktree::diff_lines(self.view.style(), &self.setup.cwd, baseline) {
            Ok(lines) if lines.is_empty() => self.view.notice(&format!(
                "no changes since the session started ({})",
                baseline.label
            )),
            Ok(lines) => {
                self.view.notice(&format!(
                    "changes since the session started ({}):",
                    baseline.label
                ));
                self.view.lines(&lines);
            }
            Err(err) => self.view.error(&format!("no diff: {err}")),
        }
    }

    /// `/compact`: older turns summarized now; Ctrl-C cancels it.
    async fn compact(&mut self) {
        self.view.spin("compacting…");
        let cancel = self.session.cancel_handle();
        let result = {
            let compaction = self.session.compact_now();
            futures::pin_mut!(compaction);
            tokio::select! {
                result = &mut compaction => result,
                signal = tokio::signal::ctrl_c() => {
                    if signal.is_ok() {
                        cancel.cancel();
                    }
                    compaction.await
                }
            }
        };
        self.view.stop_spinner();
        match result {
            Ok(done) => {
                self.totals.add(&done.usage, done.cost_usd);
                self.view.notice(&format!(
                    "compacted the conversation: ~{} → ~{} tokens",
                    done.before_tokens, done.after_tokens
                ));
            }
            Err(CompactionError::Cancelled) => self.view.warning("compaction cancelled"),
            Err(err) => self.view.error(&format!("cannot compact: {err}")),
        }
    }

    /// `/clear`: a new session of the same agent, with the current model.
    fn clear(&mut self) {
        let model = self.session.model().to_owned();
        match self.setup.session(&self.agent, &SessionChoice::New) {
            Ok(mut session) => {
                session.set_model(model);
                self.session = session;
                self.snapshots.clear();
                self.persistence_warned = false;
                self.baseline = worktree::baseline(&self.setup.cwd, self.session.id());
                self.view
                    .notice(&format!("new session {}", self.session.id()));
            }
            Err(err) => self.view.error(&err.to_string()),
        }
    }

    /// `/sessions`: the recent sessions, as `keel sessions` lists them.
    fn sessions(&self) {
        let mut listing = Vec::new();
        match sessions::list(SESSIONS_SHOWN, &mut listing) {
            Ok(()) => {
                let text = String::from_utf8_lossy(&listing);
                let lines: Vec<String> = text.lines().map(str::to_owned).collect();
                self.view.lines(&lines);
            }
            Err(err) => self.view.error(&err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_parsed_with_their_argument() {
        assert_eq!(parse("hello"), None);
        assert_eq!(parse("/help"), Some(Command::Help));
        assert_eq!(parse("  /quit "), Some(Command::Exit));
        assert_eq!(parse("/model"), Some(Command::Model(None)));
        assert_eq!(
            parse("/model  claude-haiku-4-5 "),
            Some(Command::Model(Some("claude-haiku-4-5".into())))
        );
        assert_eq!(parse("/frob x"), Some(Command::Unknown("/frob".into())));
        assert_eq!(parse("/"), Some(Command::Unknown("/".into())));
    }
}
