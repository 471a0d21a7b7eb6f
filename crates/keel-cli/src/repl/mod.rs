//! The interactive session: read a line, run it (or a slash command), print what happens,
//! again, until Ctrl-D, `/exit` or two Ctrl-C in a row at the prompt.
//!
//! The parts: [`input`] reads lines (the prompt with its history, and approval questions);
//! [`turn`] runs one prompt, printing its events, Ctrl-C cancelling it; [`commands`] holds the
//! slash commands; [`view`] prints, with colours and the spinner, and [`diff`] paints diffs;
//! [`snapshot`] keeps files' contents from before a write, for its diff; [`worktree`] is
//! `/diff`, [`totals`] is `/cost` and [`pager`] is `/last`.

mod commands;
mod diff;
mod input;
mod pager;
mod snapshot;
mod totals;
mod turn;
mod view;
mod worktree;

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::FutureExt;
use keel::{CodingAgent, Delegates};
use keel_engine::{HookEvent, Hooks, Session};

use self::input::{Input, Line};
use self::snapshot::{SnapshotHook, Snapshots, WRITE_TOOLS};
use self::totals::Totals;
use self::view::{Style, View};
use self::worktree::Baseline;
use crate::approve::{Answer, ModeApprover, PreviewFn};
use crate::cli::Options;
use crate::config::Trust;
use crate::setup::{CliError, Mode, SessionChoice, Setup};
use crate::signals;
use crate::trust;

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
    setup: Setup,
    /// The agent, its delegates, snapshots and tasks.
    coding: CodingAgent,
    session: Session,
    input: Input,
    view: View,
    snapshots: Snapshots,
    totals: Totals,
    /// Where the session started, for `/diff`; or why there is no such place.
    baseline: Result<Baseline, String>,
    /// Whether the session store's failure has been shown.
    persistence_warned: bool,
    /// Sub-agents, teams and skills (`None` with `--no-delegation`).
    delegates: Option<Arc<Delegates>>,
}

/// Runs the interactive session; returns the exit code.
pub(crate) async fn run(options: &Options, choice: SessionChoice) -> Result<u8, CliError> {
    let setup = Setup::resolve(options, Mode::Interactive, &choice)?;
    // From here on Ctrl-C never kills keel: it cancels a run, or is read at the prompt (where
    // the terminal is in raw mode and Ctrl-C is a key).
    let _ = tokio::signal::ctrl_c().now_or_never();
    let view = View::new(Style::detect());
    let input = Input::open(&setup.keel_home.join("history"), &view)?;
    let setup = ask_trust(setup, options, &choice, &input, &view).await?;
    for notice in &setup.notices {
        view.warning(&format!("keel: {notice}"));
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
        Arc::new(move |request| turn::proposed_change(style, &cwd, &request.tool, &request.input))
    };
    let approver = ModeApprover::new(
        setup.approvals,
        Some(input.ask_fn(view.clone())),
        Some(preview),
    );
    let coding = setup.agent(approver, hooks)?;
    let session = setup.session(coding.agent(), &choice)?;
    let delegates = coding.delegates().cloned();
    let baseline = worktree::baseline(&setup.cwd);
    let mut repl = Repl {
        setup,
        coding,
        session,
        input,
        view,
        snapshots,
        totals: Totals::default(),
        baseline,
        persistence_warned: false,
        delegates,
    };
    repl.banner(choice != SessionChoice::New);
    for warning in repl.coding.warnings() {
        repl.view.warning(&format!("warning: {warning}"));
    }
    repl.read_loop().await
}

/// The first time an untrusted project's configuration sets keys only a trusted project may
/// set, asks whether to trust it, records the answer (pinned to the files as they are) and, on
/// yes, resolves the setup again with the project's config applied.
async fn ask_trust(
    setup: Setup,
    options: &Options,
    choice: &SessionChoice,
    input: &Input,
    view: &View,
) -> Result<Setup, CliError> {
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
    Setup::resolve(options, Mode::Interactive, choice)
}

impl Repl {
    /// The first lines: version, model, provider, directory, session; then what to do.
    fn banner(&self, resumed: bool) {
        let style = self.view.style();
        let mut session = format!("session {}", self.session.id());
        if resumed {
            let messages = self.session.history().len();
            session.push_str(&format!(
                " (resumed, {messages} message{})",
                if messages == 1 { "" } else { "s" }
            ));
        }
        let banner = format!(
            "{} · {} · {} · {} · {session}",
            style.bold(&format!("keel {}", env!("CARGO_PKG_VERSION"))),
            self.session.model(),
            self.setup.provider_name,
            self.setup.cwd.display(),
        );
        self.view.line(&banner);
        self.view.notice(
            "Type a request, or /help for commands. Ctrl-C cancels a running turn; Ctrl-D exits.",
        );
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
            let line = self.input.read_line(PROMPT).await;
            terminate.abort();
            if let Some(watcher) = watcher {
                watcher.abort();
            }
            let text = match line.map_err(CliError::Run)? {
                Line::Text(text) => text,
                Line::Eof => break,
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
            match commands::parse(text) {
                Some(command) => {
                    if self.command(command).await == Flow::Exit {
                        break;
                    }
                }
                None => self.prompt(text).await,
            }
        }
        self.view.end_line();
        Ok(0)
    }

    /// While the prompt waits: watches this session's tasks and wakes the prompt when one
    /// ends, setting `woken`.
    fn watch_tasks(&self, woken: Arc<AtomicBool>) -> Option<tokio::task::JoinHandle<()>> {
        let store = self.coding.tasks()?.store().clone();
        let session = self.session.id().to_owned();
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
        let Some(launcher) = self.coding.tasks() else {
            return false;
        };
        launcher
            .store()
            .has_unnotified(self.session.id())
            .unwrap_or(false)
    }

    /// Runs a prompt.
    async fn prompt(&mut self, text: &str) {
        let outcome = turn::run(&mut self.session, text, &self.view, &self.snapshots).await;
        match outcome {
            Some(outcome) => self.totals.add(&outcome.usage, outcome.cost_usd),
            None => self.view.error("the run ended without an outcome"),
        }
        if let Some(error) = self.session.persistence_error()
            && !self.persistence_warned
        {
            self.persistence_warned = true;
            self.view.warning(&format!(
                "warning: the session was not fully saved: {error}"
            ));
        }
    }
}
