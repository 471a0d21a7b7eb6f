//! The slash commands: what they are called, and what each does.

use keel::engine::{CompactionError, SessionEndReason, SessionStartSource};
use keel::sandbox::GitSession;

use super::view::printable;
use super::worktree;
use super::{Flow, Repl};
use crate::sessions;
use keel::Delegates;
use keel_config::LiveMode;
use keel_config::SessionChoice;
use keel_host::report::delegates::{Listings, report_lines};
use keel_host::rewind::{self, Rewound};
use tokio_util::sync::CancellationToken;

/// How many sessions `/sessions` lists.
const SESSIONS_SHOWN: usize = 20;

/// A slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Command {
    /// `/help`.
    Help,
    /// `/undo`.
    Undo,
    /// `/rewind [N]`.
    Rewind(Option<String>),
    /// `/diff`.
    Diff,
    /// `/cost`.
    Cost,
    /// `/last`.
    Last,
    /// `/compact`.
    Compact,
    /// `/clear`.
    Clear,
    /// `/model [NAME]`.
    Model(Option<String>),
    /// `/context`.
    Context,
    /// `/mode [MODE]`.
    Mode(Option<String>),
    /// `/sessions`.
    Sessions,
    /// `/resume [N|ID]`.
    Resume(Option<String>),
    /// `/agents`.
    Agents,
    /// `/agent NAME TASK`.
    Agent(Option<String>),
    /// `/teams`.
    Teams,
    /// `/team NAME TASK`.
    Team(Option<String>),
    /// `/skills [NAME]`.
    Skills(Option<String>),
    /// `/tasks`.
    Tasks,
    /// `/mcp`.
    Mcp,
    /// `/memory`.
    Memory,
    /// `/exit` or `/quit`.
    Exit,
    /// Anything else that starts with `/`: the word as typed.
    Unknown(String),
}

/// The commands and what they do, for `/help`.
pub(super) const HELP: &[(&str, &str)] = &[
    ("/help", "this list"),
    (
        "/undo",
        "undo the last commit keel made in this session (its changes stay, staged)",
    ),
    (
        "/rewind [N]",
        "list this workspace's snapshots, or put the files back as they were at snapshot N",
    ),
    (
        "/diff",
        "what changed in the work tree since the session started",
    ),
    ("/cost", "tokens used and what they cost so far"),
    ("/last", "the last tool call's whole output, in a pager"),
    (
        "/compact",
        "summarize the older turns to free room in the context",
    ),
    ("/clear", "start a new session (same model)"),
    (
        "/model [NAME]",
        "show the model, or switch to NAME (checked against the catalog and the provider's list; a doubtful name is used with a warning)",
    ),
    (
        "/context",
        "what fills the context window: system prompt, tools, messages, tool results",
    ),
    (
        "/mode [MODE]",
        "show the approval mode, or set it: ask, accept-edits, read-only (Shift-Tab cycles them)",
    ),
    ("/sessions", "list recent sessions"),
    (
        "/resume [N|ID]",
        "list this directory's sessions, or resume one (its transcript replayed)",
    ),
    ("/agents", "list the sub-agents"),
    ("/agent NAME TASK", "run sub-agent NAME on TASK"),
    ("/teams", "list the teams"),
    ("/team NAME TASK", "run team NAME's pipeline on TASK"),
    (
        "/skills [NAME]",
        "list the skills, or show skill NAME's instructions",
    ),
    ("/tasks", "list the background tasks"),
    ("/mcp", "the MCP servers: connected or not, their tools"),
    (
        "/memory",
        "the memory files read (AGENTS.md, CLAUDE.md, imports) and those left out, and why",
    ),
    ("/exit, /quit", "leave keel (or Ctrl-D)"),
];

/// The command `line` holds, or `None` when it is a prompt (it does not start with `/`).
pub(super) fn parse(line: &str) -> Option<Command> {
    let rest = line.trim().strip_prefix('/')?;
    let mut words = rest.split_whitespace();
    let name = words.next().unwrap_or_default();
    let argument = words.collect::<Vec<_>>().join(" ");
    let argument = (!argument.is_empty()).then_some(argument);
    Some(match name {
        "help" | "?" => Command::Help,
        "undo" => Command::Undo,
        "rewind" => Command::Rewind(argument),
        "diff" => Command::Diff,
        "cost" => Command::Cost,
        "last" => Command::Last,
        "compact" => Command::Compact,
        "clear" => Command::Clear,
        "model" => Command::Model(argument),
        "context" => Command::Context,
        "mode" => Command::Mode(argument),
        "sessions" => Command::Sessions,
        "resume" => Command::Resume(argument),
        "agents" => Command::Agents,
        "agent" => Command::Agent(argument),
        "teams" => Command::Teams,
        "team" => Command::Team(argument),
        "skills" => Command::Skills(argument),
        "tasks" => Command::Tasks,
        "mcp" => Command::Mcp,
        "memory" => Command::Memory,
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
            Command::Rewind(argument) => self.rewind(argument).await,
            Command::Diff => self.diff(),
            Command::Cost => self.view.line(&self.live.totals().summary()),
            Command::Last => super::pager::show_last(&self.view).await,
            Command::Compact => self.compact().await,
            Command::Clear => self.clear().await,
            Command::Model(None) => {
                let model = self.live.session().await.model().to_owned();
                self.view.line(&format!("model: {model}"));
            }
            Command::Model(Some(name)) => self.switch_model(name).await,
            Command::Context => {
                let tools = self.live.coding().agent().tools().definitions();
                let lines = super::status::context_lines(&*self.live.session().await, &tools);
                self.view.lines(&lines);
            }
            Command::Mode(argument) => self.set_mode(argument.as_deref()),
            Command::Sessions => self.sessions(),
            Command::Resume(argument) => self.resume(argument).await,
            Command::Agents => self.list(Delegates::agent_lines),
            Command::Teams => self.list(Delegates::team_lines),
            Command::Skills(None) => self.list(Delegates::skill_lines),
            Command::Skills(Some(name)) => self.show_skill(&name),
            Command::Tasks => self.list(Delegates::task_lines),
            Command::Mcp => self.mcp(),
            Command::Memory => {
                let report = self.live.coding().memory().to_string();
                let lines: Vec<String> = report.lines().map(printable).collect();
                self.view.lines(&lines);
            }
            Command::Agent(argument) => self.delegate(false, argument).await,
            Command::Team(argument) => self.delegate(true, argument).await,
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
        for command in self.custom_commands.list() {
            let name = match &command.argument_hint {
                Some(hint) => format!("/{} {hint}", command.name),
                None => format!("/{}", command.name),
            };
            let what = if command.description.is_empty() {
                format!("custom command ({})", command.path.display())
            } else {
                command.description.clone()
            };
            lines.push(printable(&format!(
                "{}  {what}",
                style.bold(&format!("{name:width$}"))
            )));
        }
        lines.push(style.dim(
            "Anything else is a prompt for the model. Ctrl-C cancels a running turn; Ctrl-D \
             exits.",
        ));
        self.view.lines(&lines);
    }

    /// `/rewind`: this workspace's snapshots, newest last; `/rewind N`: the files put back as
    /// they were at snapshot N.
    async fn rewind(&mut self, argument: Option<String>) {
        let info = match self.host.rewind(&self.live.id(), argument).await {
            Ok(Rewound::Listed(infos)) if infos.is_empty() => {
                return self.view.notice(rewind::NO_SNAPSHOTS);
            }
            Ok(Rewound::Listed(infos)) => {
                return self.view.lines(&rewind::list_lines(&infos));
            }
            Ok(Rewound::Restored(restored)) => {
                let (info, report) = *restored;
                self.view.lines(&rewind::report_lines(&info, &report));
                info
            }
            Err(err) => return self.view.error(&err.to_string()),
        };
        // The conversation too, when the snapshot was taken in this session.
        if info.point.session_id != self.live.id() {
            return;
        }
        let ask = self.input.ask_fn(self.view.clone());
        let question = format!(
            "Rewind the conversation too, to before that call's turn ({} messages)? [y/N] ",
            info.point.history_len
        );
        let answer = tokio::task::spawn_blocking(move || ask(&question)).await;
        let yes =
            matches!(&answer, Ok(answer) if matches!(answer.word().as_deref(), Some("y" | "yes")));
        if !yes {
            return;
        }
        let rewound = self.live.session().await.rewind_to(info.point.history_len);
        match rewound {
            Ok(()) => self.view.notice(&format!(
                "the conversation is back to its first {} messages",
                info.point.history_len
            )),
            Err(err) => self
                .view
                .error(&format!("cannot rewind the conversation: {err}")),
        }
    }

    /// `/undo`: the last commit of this session off the branch, its changes staged.
    fn undo(&self) {
        let undone = GitSession::new(&self.settings.cwd, self.live.id())
            .and_then(|git| git.undo_last_commit());
        match undone {
            Ok(undone) => self.view.line(&format!(
                "undid commit {} \"{}\"; its changes are staged in the work tree",
                undone.short_id, undone.summary
            )),
            Err(err) => self.view.error(&format!("cannot undo: {err}")),
        }
    }

    /// `/diff`: the work tree against where the session started: its first snapshot, else
    /// `HEAD` as it was when the session began.
    fn diff(&self) {
        let snapshots = self.live.coding().snapshots().map(|s| s.as_ref());
        let session = self.live.id();
        let first = match snapshots.map(|s| worktree::first_snapshot(s, &session)) {
            Some(Ok(first)) => first,
            Some(Err(err)) => {
                self.view.error(&format!("no diff: {err}"));
                return;
            }
            None => None,
        };
        let baseline = match (&first, &self.baseline) {
            (Some(first), _) => first,
            (None, Ok(baseline)) => baseline,
            (None, Err(why)) => {
                self.view.error(&format!("no diff: {why}"));
                return;
            }
        };
        match worktree::diff_lines(self.view.style(), &self.settings.cwd, baseline, snapshots) {
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
        let live = self.live.clone();
        let mut engine = self.live.session().await;
        let result = {
            let compaction = engine.compact_now();
            futures::pin_mut!(compaction);
            tokio::select! {
                result = &mut compaction => result,
                _ = crate::signals::interrupted() => {
                    live.cancel();
                    compaction.await
                }
            }
        };
        drop(engine);
        self.view.stop_spinner();
        match result {
            Ok(done) => {
                self.live
                    .add_spent(&done.usage, done.cost_usd, &done.cost_by_provider);
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
    async fn clear(&mut self) {
        let model = self.live.session().await.model().to_owned();
        match self
            .settings
            .session(self.live.coding().agent(), &SessionChoice::New)
        {
            Ok(mut session) => {
                self.end_session(SessionEndReason::Clear).await;
                session.set_model(model);
                session.set_start_source(SessionStartSource::Clear);
                if let Err(err) = self.host.switch(&self.live, session).await {
                    return self.view.error(&err.to_string());
                }
                self.snapshots.clear();
                self.persistence_warned = false;
                self.baseline = worktree::baseline(&self.settings.cwd);
                self.view.notice(&format!("new session {}", self.live.id()));
            }
            Err(err) => self.view.error(&err.to_string()),
        }
    }

    /// `/mode`: the approval mode; `/mode MODE`: the mode from the next call on (Shift-Tab at
    /// the prompt cycles ask → accept-edits → read-only).
    pub(super) fn set_mode(&mut self, argument: Option<&str>) {
        let mode = match argument {
            None => self.live.mode(),
            Some(name) => match LiveMode::named(name.trim()) {
                Some(mode) => {
                    self.live.set_mode(mode);
                    mode
                }
                None => {
                    self.view.error(&format!(
                        "unknown mode {name}; use one of {}",
                        LiveMode::CYCLE.map(LiveMode::name).join(", ")
                    ));
                    return;
                }
            },
        };
        self.view.notice(&super::status::mode_line(mode));
    }

    /// `/skills NAME`: the skill's description, file and instructions.
    fn show_skill(&self, name: &str) {
        match &self.delegates {
            Some(delegates) => match delegates.skill_detail_lines(name) {
                Ok(lines) => self.view.lines(&lines),
                Err(err) => self.view.error(&err),
            },
            None => self.view.error("delegation is off (--no-delegation)"),
        }
    }

    /// `/agents`, `/teams`, `/skills`: the lines `lines` makes.
    /// `/mcp`: each MCP server, its state and tools; those that did not start.
    fn mcp(&self) {
        self.view
            .lines(&keel_host::report::mcp::session_lines(&self.settings));
    }

    fn list(&self, lines: fn(&Delegates) -> Vec<String>) {
        match &self.delegates {
            Some(delegates) => self.view.lines(&lines(delegates)),
            None => self.view.error("delegation is off (--no-delegation)"),
        }
    }

    /// `/agent NAME TASK` and `/team NAME TASK`: a sub-agent or a team run now, its calls and
    /// answer printed; Ctrl-C cancels it.
    async fn delegate(&mut self, team: bool, argument: Option<String>) {
        let usage = if team {
            "/team NAME TASK"
        } else {
            "/agent NAME TASK"
        };
        let Some(delegates) = self.delegates.clone() else {
            self.view.error("delegation is off (--no-delegation)");
            return;
        };
        let Some((name, task)) = argument
            .as_deref()
            .and_then(|a| a.split_once(' '))
            .map(|(n, t)| (n.to_owned(), t.trim().to_owned()))
            .filter(|(_, t)| !t.is_empty())
        else {
            self.view.error(&format!("usage: {usage}"));
            return;
        };
        let cancel = CancellationToken::new();
        let style = self.view.style();
        self.view.spin(&format!("{name} working…"));
        let cwd = self.settings.cwd.clone();
        let run = async {
            if team {
                match delegates.teams().get(&name) {
                    Some(definition) => {
                        let report = delegates
                            .runner()
                            .run_team(definition, &task, &cwd, &cancel)
                            .await;
                        let mut lines: Vec<String> = Vec::new();
                        let count = report.steps.len();
                        for (index, step) in report.steps.iter().enumerate() {
                            lines.push(style.bold(&format!(
                                "── {} (step {} of {count}) ──",
                                step.agent,
                                index + 1
                            )));
                            match &step.result {
                                Ok(run) => {
                                    lines.extend(report_lines(&step.agent, run));
                                    lines.push(printable(&run.output));
                                    self.live.add_spent(
                                        &run.usage,
                                        run.cost_usd,
                                        &run.cost_by_provider,
                                    );
                                }
                                Err(error) => lines.push(format!("✗ {}: {error}", step.agent)),
                            }
                        }
                        if report.output().is_none() {
                            lines.push("(no agent produced output)".to_owned());
                        }
                        Ok(lines)
                    }
                    None => Err(format!("no team named `{name}`; /teams lists them")),
                }
            } else {
                match delegates.runner().run(&name, &task, &cwd, &cancel).await {
                    Ok(run) => {
                        self.live
                            .add_spent(&run.usage, run.cost_usd, &run.cost_by_provider);
                        let mut lines = report_lines(&name, &run);
                        lines.push(printable(&run.output));
                        Ok(lines)
                    }
                    Err(err) => Err(err.to_string()),
                }
            }
        };
        futures::pin_mut!(run);
        let result = tokio::select! {
            result = &mut run => result,
            _ = crate::signals::interrupted() => {
                cancel.cancel();
                self.view.warning("cancelling…");
                run.await
            }
        };
        self.view.stop_spinner();
        match result {
            Ok(lines) => self.view.lines(&lines),
            Err(error) => self.view.error(&error),
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
        assert_eq!(parse("/last"), Some(Command::Last));
        assert_eq!(parse("  /quit "), Some(Command::Exit));
        assert_eq!(parse("/model"), Some(Command::Model(None)));
        assert_eq!(
            parse("/model  claude-haiku-4-5 "),
            Some(Command::Model(Some("claude-haiku-4-5".into())))
        );
        assert_eq!(parse("/rewind"), Some(Command::Rewind(None)));
        assert_eq!(parse("/context"), Some(Command::Context));
        assert_eq!(parse("/mcp"), Some(Command::Mcp));
        assert_eq!(
            parse("/mode read-only"),
            Some(Command::Mode(Some("read-only".into())))
        );
        assert_eq!(parse("/rewind 3"), Some(Command::Rewind(Some("3".into()))));
        assert_eq!(parse("/frob x"), Some(Command::Unknown("/frob".into())));
        assert_eq!(parse("/"), Some(Command::Unknown("/".into())));
    }
}
