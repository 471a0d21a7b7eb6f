//! The interactive session: read a line, run it (or a slash command), print what happens,
//! again, until Ctrl-D, `/exit` or two Ctrl-C in a row at the prompt.
//!
//! The parts: [`input`] reads lines (the prompt with its history, and approval questions);
//! [`turn`] runs one prompt, printing its events, Ctrl-C cancelling it; [`commands`] holds the
//! slash commands; [`view`] prints, with colours and the spinner, and [`diff`] paints diffs;
//! [`snapshot`] keeps files' contents from before a write, for its diff; [`worktree`] is
//! `/diff`, [`totals`] is `/cost` and [`pager`] is `/last`. [`complete`] is Tab completion,
//! [`mention`] attaches `@path` files, [`shell`] runs `!cmd`, [`typeahead`] queues what is
//! typed while a turn runs, [`resume`] is `/resume` and the `keel resume <id>` line at exit.
//! [`status`] is the banner's powers line, the line after each turn and `/context`;
//! [`commit`] lists what a `git_commit` would stage.

mod commands;
use self::commands::Command;
mod commit;
mod complete;
mod diff;
mod input;
mod mention;
mod model;
mod pager;
mod resume;
mod shell;
mod snapshot;
pub(crate) mod status;
mod turn;
mod typeahead;
mod view;
mod worktree;

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use keel::Delegates;
use keel::engine::{HookEvent, Hooks, RunOutcome, SessionEndReason};
use keel_config::files::Trust;
use keel_config::{SessionChoice, Settings, Surface, trust};
use keel_host::{ConfiguredSessions, LiveSession, Opening, Ownership, SessionHost, Subscription};

use self::input::{Input, Line};
use self::snapshot::{SnapshotHook, Snapshots, WRITE_TOOLS};
use self::view::{Style, View, printable};
use self::worktree::Baseline;
use crate::approve::{Answer, PreviewFn, TerminalApprover};
use crate::cli::Options;
use crate::error::CliError;
use crate::signals;

/// The prompt.
const PROMPT: &str = "keel> ";

/// The prompt of the turn keel starts when background tasks ended.
const TASKS_ENDED_PROMPT: &str = "Background tasks you started have ended; their notifications \
are above. Check their results and tell me what they did.";

/// Whether the loop goes on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Read the next line.
    Continue,
    /// Leave.
    Exit,
}

/// Everything the loop works with.
struct Repl {
    settings: Arc<Settings>,
    /// The process's session host (a browser attached later shares it).
    host: SessionHost,
    /// The live session: the agent (its delegates, snapshots and tasks), its engine session,
    /// approval mode and cost meter.
    live: LiveSession,
    /// The REPL's own subscription to the live session: what it prints.
    owner: Subscription,
    input: Input,
    view: View,
    snapshots: Snapshots,
    /// Where the session started, for `/diff`; or why there is no such place.
    baseline: Result<Baseline, String>,
    /// Whether the session store's failure has been shown.
    persistence_warned: bool,
    /// Sub-agents, teams and skills (`None` with `--no-delegation`).
    delegates: Option<Arc<Delegates>>,
    /// Blocks for the next prompt sent (`!!cmd` output).
    attachments: Vec<String>,
    /// The text the next prompt starts with (type-ahead, or a line that was not sent).
    next_line: String,
    /// The provider's model list, once `/model` has read it.
    listed_models: Option<keel::provider::ModelList>,
    /// Custom slash commands (`.claude/commands/`, `$KEEL_HOME/commands/`).
    custom_commands: keel::agents::commands::SlashCommands,
}

/// Runs the interactive session; returns the exit code.
pub(crate) async fn run(options: &Options, choice: SessionChoice) -> Result<u8, CliError> {
    let setup = options.settings(Surface::Interactive, &choice)?;
    // From here on Ctrl-C never kills keel: it cancels a run, or is read at the prompt (where
    // the terminal is in raw mode and Ctrl-C is a key).
    let _ = tokio::signal::ctrl_c().now_or_never();
    let view = View::new(Style::detect());
    let mut input = Input::open(&setup.keel_home.join("history"), &view)?;
    let mut setup = ask_trust(setup, options, &choice, &input, &view).await?;
    for notice in &setup.notices {
        view.warning(&format!("keel: {notice}"));
    }
    for line in setup.start_mcp_servers().await {
        view.warning(&format!("keel: {line}"));
    }
    let snapshots = Snapshots::default();
    let mut hooks = Hooks::new();
    hooks
        .add(
            HookEvent::PreToolUse,
            Some(WRITE_TOOLS),
            Arc::new(SnapshotHook::new(snapshots.clone())),
        )
        .map_err(|err| CliError::Run(format!("the diff hook: {err}")))?;
    let preview: PreviewFn = {
        let (style, cwd) = (view.style(), setup.cwd.clone());
        Arc::new(move |request| match request.tool.as_str() {
            "git_commit" => {
                commit::preview_lines(style, &cwd, &request.input, crate::wrap::terminal_width())
            }
            _ => turn::proposed_change(style, &cwd, &request.tool, &request.input),
        })
    };
    let ask = input.ask_fn(view.clone());
    setup.ask_served_context().await;
    let settings = Arc::new(setup);
    let sessions = ConfiguredSessions::new(settings.clone()).local_hooks(hooks);
    let host = SessionHost::default();
    let opened = host
        .open(&sessions, &Opening::of(&choice), Ownership::default())
        .await?;
    let (live, owner) = (opened.session, opened.owner);
    live.answer_with(&owner, Arc::new(TerminalApprover::new(ask, Some(preview))))?;
    let delegates = live.coding().delegates().cloned();
    let baseline = worktree::baseline(&settings.cwd);
    let (custom_commands, command_warnings) = crate::slash_commands::load(&settings);
    input.set_completion(complete::PromptHelper::for_session(
        &settings,
        live.coding(),
        &custom_commands,
    ));
    let mut repl = Repl {
        settings,
        host,
        live,
        owner,
        input,
        view,
        snapshots,
        baseline,
        persistence_warned: false,
        delegates,
        attachments: Vec::new(),
        next_line: String::new(),
        listed_models: None,
        custom_commands,
    };
    repl.banner(choice != SessionChoice::New).await;
    for warning in repl
        .live
        .coding()
        .warnings()
        .iter()
        .chain(&command_warnings)
    {
        repl.view.warning(&format!("warning: {warning}"));
    }
    if let Some(note) = keel_host::report::notes::profile_note(repl.live.coding()) {
        repl.view.warning(&note);
    }
    if let Some(warning) = keel_host::report::notes::overflow_warning(repl.live.coding(), "") {
        repl.view.warning(&format!("warning: {warning}"));
    }
    repl.read_loop().await
}

/// The first time an untrusted project's configuration sets keys only a trusted project may
/// set, asks whether to trust it, records the answer (pinned to the files as they are) and, on
/// yes, resolves the setup again with the project's config applied.
async fn ask_trust(
    setup: Settings,
    options: &Options,
    choice: &SessionChoice,
    input: &Input,
    view: &View,
) -> Result<Settings, CliError> {
    let Some(project) = setup.config.project.clone() else {
        return Ok(setup);
    };
    let undecided = matches!(project.trust, Trust::Untrusted | Trust::Changed);
    if !undecided || project.needs_trust.is_empty() || !std::io::stdin().is_terminal() {
        return Ok(setup);
    }
    let question = trust::question(
        &project.file,
        &project.needs_trust,
        project.trust == Trust::Changed,
    );
    let ask = input.ask_fn(view.clone());
    let answer = tokio::task::spawn_blocking(move || ask(&question))
        .await
        .unwrap_or(Answer::Closed);
    if answer == Answer::Interrupted {
        // No answer: nothing recorded, the project stays untrusted and is asked about again.
        return Ok(setup);
    }
    let yes = matches!(answer.word().as_deref(), Some("y" | "yes"));
    if let Err(err) = trust::record(&setup.keel_home, &project.dir, &project.hash, yes) {
        view.warning(&format!("keel: cannot record the answer: {err}"));
    }
    if !yes {
        return Ok(setup);
    }
    options.settings(Surface::Interactive, choice)
}

impl Repl {
    /// The first lines: version, model, provider (kind and host), directory, session; the
    /// approval mode, sandbox and network; then what to do.
    async fn banner(&self, resumed: bool) {
        let style = self.view.style();
        let engine = self.live.session().await;
        let mut session = format!("session {}", engine.id());
        if resumed {
            let messages = engine.history().len();
            session.push_str(&format!(
                " (resumed, {messages} message{})",
                if messages == 1 { "" } else { "s" }
            ));
        }
        let (kind, base_url) = &self.settings.provider_endpoint;
        // Wrapped between its parts: a path or a mode cut mid-word is hard to read.
        let width = crate::wrap::terminal_width();
        let banner = [
            style.bold(&format!("keel {}", env!("CARGO_PKG_VERSION"))),
            engine.model().to_owned(),
            status::provider_label(&self.settings.provider_name, *kind, base_url),
            self.settings.cwd.display().to_string(),
            session,
        ];
        self.view.lines(&status::join_fitting(&banner, width));
        self.view.lines(&status::join_fitting(
            &status::powers(self.live.mode(), &self.settings.policy),
            width,
        ));
        let hint = crate::wrap::wrap_words(
            "Type a request, or /help for commands. Ctrl-C cancels a running turn; Ctrl-D exits.",
            width,
            "  ",
        );
        for line in hint {
            self.view.notice(&line);
        }
    }

    /// Reads and runs lines until the person leaves.
    async fn read_loop(&mut self) -> Result<u8, CliError> {
        let mut interrupts = 0u32;
        loop {
            // SIGTERM or SIGHUP: the turn (if any) was cancelled and saved; leave.
            if signals::terminating() {
                break;
            }
            // Tasks of this session that ended while the model worked: say so, and let the
            // model react at once.
            if self.tasks_ended() {
                self.prompt(TASKS_ENDED_PROMPT).await;
                continue;
            }
            self.view.before_prompt();
            let woken = Arc::new(AtomicBool::new(false));
            let watcher = self.watch_tasks(woken.clone());
            let terminate = self.watch_termination();
            let initial = std::mem::take(&mut self.next_line);
            let line = self
                .input
                .read_line(&status::prompt(PROMPT, self.live.mode()), &initial)
                .await;
            terminate.abort();
            if let Some(watcher) = watcher {
                watcher.abort();
            }
            let text = match line.map_err(CliError::Run)? {
                Line::Text(text) => text,
                Line::Eof => break,
                // Shift-Tab: the next approval mode; what was typed stays on the line.
                Line::ShiftTab(typed) => {
                    let mode = self.live.mode().next();
                    self.live.set_mode(mode);
                    self.view.notice(&status::mode_line(mode));
                    self.next_line = typed;
                    continue;
                }
                // A task ended while the prompt waited, or keel is terminating: the loop's
                // top reacts to it.
                Line::Interrupted if woken.load(Ordering::SeqCst) || signals::terminating() => {
                    continue;
                }
                Line::Interrupted => {
                    interrupts += 1;
                    if interrupts >= 2 {
                        break;
                    }
                    self.view
                        .notice("(press Ctrl-C again or Ctrl-D to exit; /help lists commands)");
                    continue;
                }
            };
            interrupts = 0;
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            if let Some(problem) = self.input.remember(text) {
                self.view.warning(&problem);
            }
            if let Some((command, attach)) = shell::parse(text) {
                self.shell(command, attach).await;
                continue;
            }
            match commands::parse(text) {
                // A custom command's text is the prompt.
                Some(Command::Unknown(_))
                    if crate::slash_commands::expand(&self.custom_commands, text).is_some() =>
                {
                    let prompt = crate::slash_commands::expand(&self.custom_commands, text)
                        .unwrap_or_default();
                    self.send(&prompt).await;
                }
                Some(command) => {
                    if self.command(command).await == Flow::Exit {
                        break;
                    }
                }
                None => self.send(text).await,
            }
        }
        self.view.end_line();
        self.end_session(SessionEndReason::PromptInputExit).await;
        self.leave_hint();
        Ok(0)
    }

    /// Sends what the person typed: the files it mentions attached (or, when a mention is
    /// refused, nothing sent and the line put back at the prompt), and what `!!` kept.
    async fn send(&mut self, text: &str) {
        let mut prompt = match mention::attach(text, self.live.coding().path_sandbox()) {
            Ok(attached) => {
                for note in &attached.notes {
                    self.view.notice(&printable(note));
                }
                attached.prompt
            }
            Err(refused) => {
                for line in &refused {
                    self.view.error(&printable(line));
                }
                self.view.notice(
                    "nothing was sent (@ attaches files of the workspace and of directories \
                     allowed for reading only); the line is back at the prompt",
                );
                text.clone_into(&mut self.next_line);
                return;
            }
        };
        for block in self.attachments.drain(..) {
            prompt.push_str(&block);
        }
        self.prompt(&prompt).await;
    }

    /// While the prompt waits: watches this session's tasks and wakes the prompt when one
    /// ends, setting `woken`.
    fn watch_tasks(&self, woken: Arc<AtomicBool>) -> Option<tokio::task::JoinHandle<()>> {
        let store = self.live.coding().tasks()?.store().clone();
        let session = self.live.id();
        let waker = self.input.waker();
        Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                if store.has_unnotified(&session).unwrap_or(false) {
                    woken.store(true, Ordering::SeqCst);
                    // Sent again until the prompt is gone: the first may come before the
                    // editor listens.
                    waker.wake();
                }
            }
        }))
    }

    /// While the prompt waits: wakes it when SIGTERM or SIGHUP arrives.
    fn watch_termination(&self) -> tokio::task::JoinHandle<()> {
        let waker = self.input.waker();
        tokio::spawn(async move {
            signals::terminated().await;
            loop {
                // Sent again until the prompt is gone: the first may come before the editor
                // listens.
                waker.wake();
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
    }

    /// Whether tasks of this session ended that the model has not been told of (the turn
    /// that tells it prints their notices).
    fn tasks_ended(&self) -> bool {
        let Some(launcher) = self.live.coding().tasks() else {
            return false;
        };
        launcher
            .store()
            .has_unnotified(&self.live.id())
            .unwrap_or(false)
    }

    /// Ends the session for `SessionEnd` hooks, showing what they report.
    async fn end_session(&mut self, reason: SessionEndReason) {
        let report = self.live.session().await.end(reason).await;
        for message in &report.system_messages {
            self.view.notice(&printable(message));
        }
        for failure in &report.failures {
            self.view.warning(&printable(failure));
        }
    }

    /// Runs a prompt; what is typed meanwhile is queued for the next one.
    async fn prompt(&mut self, text: &str) {
        let started = std::time::Instant::now();
        let type_ahead = self.input.type_ahead();
        let outcome = {
            let _capturing = type_ahead.start(&self.view);
            turn::run(
                &self.live,
                &mut self.owner,
                text,
                &self.view,
                &self.snapshots,
            )
            .await
        };
        let queued = type_ahead.take();
        if !queued.is_empty() {
            self.next_line = queued;
        }
        match outcome {
            Some(outcome) => self.turn_line(&outcome, started).await,
            None => self.view.error("the run ended without an outcome"),
        }
        let engine = self.live.session().await;
        if let Some(error) = engine.persistence_error()
            && !self.persistence_warned
        {
            self.persistence_warned = true;
            self.view.warning(&format!(
                "warning: the session was not fully saved: {error}"
            ));
        }
    }

    /// After a turn: what to check when the provider failed, and the turn's line (time,
    /// tokens, cost, context).
    async fn turn_line(&self, outcome: &RunOutcome, started: std::time::Instant) {
        if let Some(hint) = keel_host::trouble::failure_hint(&outcome.stop, &self.settings.origin) {
            self.view.error(&hint);
        }
        let engine = self.live.session().await;
        let mut line = status::turn_line(
            started.elapsed(),
            &outcome.usage,
            outcome.cost_usd,
            engine.prompt_estimate(),
            engine.context_window(),
        );
        // Several providers served the turn (a summary on a local tier): each one's.
        if outcome.cost_by_provider.len() > 1 {
            line.push_str(" · ");
            line.push_str(&keel_host::totals::by_provider_text(
                &outcome.cost_by_provider,
            ));
        }
        self.view.notice(&line);
    }
}
