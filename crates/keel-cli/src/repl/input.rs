//! Reading from the person: the line editor (rustyline) with its history file, used for the
//! prompt and, through an [`AskFn`], for approval questions.
//!
//! At the prompt, Alt-Enter, Ctrl-J and `\`+Enter insert a newline (terminals that send
//! Shift-Enter as ESC CR or LF give it too; bracketed paste keeps pasted newlines), Tab
//! completes ([`super::complete`]), and a line may start with the text typed while the last
//! turn ran ([`super::typeahead`]).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustyline::error::ReadlineError;
use rustyline::history::{DefaultHistory, History};
use rustyline::{
    Cmd, CompletionType, ConditionalEventHandler, Config, Editor, Event, EventContext,
    EventHandler, KeyCode, KeyEvent, Modifiers, Movement, RepeatCount,
};

use super::complete::PromptHelper;
use super::typeahead::TypeAhead;
use super::view::{View, printable};
use crate::approve::{Answer, AskFn};
use crate::error::CliError;

/// Wakes a line read in progress as if Ctrl-C was pressed, so the REPL can react to
/// something that happened meanwhile (a background task ended). Cheap to clone.
#[derive(Clone, Default)]
pub(super) struct Waker {
    /// The thread reading a line, while one is read.
    reader: Arc<Mutex<Option<nix::sys::pthread::Pthread>>>,
}

impl Waker {
    /// Interrupts the line being read, if one is; returns whether it sent the wake-up.
    pub(super) fn wake(&self) -> bool {
        let reader = self.reader.lock().unwrap_or_else(PoisonError::into_inner);
        reader.is_some_and(|thread| {
            nix::sys::pthread::pthread_kill(thread, nix::sys::signal::Signal::SIGINT).is_ok()
        })
    }
}

/// How many lines the history keeps.
const HISTORY_SIZE: usize = 1000;

/// What the person did at a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Line {
    /// Typed a line and pressed Enter.
    Text(String),
    /// Pressed Ctrl-C on an empty line (on a line with text, Ctrl-C clears it).
    Interrupted,
    /// Pressed Ctrl-D on an empty line (or stdin ended).
    Eof,
    /// Pressed Shift-Tab (cycle the approval mode), with this text on the line.
    ShiftTab(String),
}

/// The prompt's history, and where it is saved while that works. Its lock is held while any
/// line is read, so that one editor at a time reads the terminal.
struct Lines {
    history: DefaultHistory,
    file: Option<PathBuf>,
}

/// The line editor's settings and the prompt's history.
///
/// A line editor exists only while a line is read: rustyline sets its own `SIGINT` handler
/// for as long as an editor lives, which would keep Ctrl-C from cancelling a run. Between
/// lines the handler keel installed is back.
pub(super) struct Input {
    config: Config,
    lines: Arc<Mutex<Lines>>,
    waker: Waker,
    /// What Tab completes at the prompt.
    helper: PromptHelper,
    /// What is typed while a turn runs.
    type_ahead: TypeAhead,
}

impl Input {
    /// The prompt's editor settings, with the history in `history` (created, readable only by
    /// its owner, if missing). A history that cannot be read or written is a warning on
    /// `view`, not an error: the session goes on without it.
    pub(super) fn open(history: &Path, view: &View) -> Result<Self, CliError> {
        let config = Config::builder()
            .max_history_size(HISTORY_SIZE)
            .and_then(|builder| builder.history_ignore_dups(true))
            .map(|builder| {
                builder
                    .history_ignore_space(true)
                    .auto_add_history(false)
                    .completion_type(CompletionType::List)
                    .completion_show_all_if_ambiguous(true)
            })
            .map_err(|err| CliError::Run(format!("the line editor: {err}")))?
            .build();
        let mut lines = DefaultHistory::with_config(&config);
        let usable = match prepare_history(history) {
            Ok(()) => match lines.load(history) {
                Ok(()) => true,
                Err(err) => {
                    view.warning(&format!(
                        "cannot read the history {}: {err}; this session's lines are not saved",
                        history.display()
                    ));
                    false
                }
            },
            Err(err) => {
                view.warning(&format!(
                    "cannot create the history {}: {err}; this session's lines are not saved",
                    history.display()
                ));
                false
            }
        };
        Ok(Self {
            config,
            lines: Arc::new(Mutex::new(Lines {
                history: lines,
                file: usable.then(|| history.to_path_buf()),
            })),
            waker: Waker::default(),
            helper: PromptHelper::empty(),
            type_ahead: TypeAhead::default(),
        })
    }

    /// Completes with `helper` from now on.
    pub(super) fn set_completion(&mut self, helper: PromptHelper) {
        self.helper = helper;
    }

    /// The type-ahead of the terminal.
    pub(super) fn type_ahead(&self) -> TypeAhead {
        self.type_ahead.clone()
    }

    /// Reads one line after `prompt`, starting with `initial` (the cursor after it), with the
    /// history, on a blocking thread. An error is one line saying what failed.
    pub(super) async fn read_line(&self, prompt: &str, initial: &str) -> Result<Line, String> {
        let config = self.config.clone();
        let lines = self.lines.clone();
        let waker = self.waker.clone();
        let helper = self.helper.clone();
        let prompt = prompt.to_owned();
        let initial = initial.to_owned();
        let read = tokio::task::spawn_blocking(move || {
            let mut lines = lines.lock().unwrap_or_else(PoisonError::into_inner);
            let history =
                std::mem::replace(&mut lines.history, DefaultHistory::with_config(&config));
            let mut editor = Editor::<PromptHelper, _>::with_history(config.clone(), history)?;
            editor.set_helper(Some(helper));
            editor.bind_sequence(
                KeyEvent::ctrl('C'),
                EventHandler::Conditional(Box::new(CtrlCClearsTheLine)),
            );
            let shift_tab = ShiftTabEndsTheRead::default();
            let pressed = shift_tab.0.clone();
            editor.bind_sequence(
                KeyEvent(KeyCode::BackTab, Modifiers::NONE),
                EventHandler::Conditional(Box::new(shift_tab)),
            );
            for key in [
                KeyEvent(KeyCode::Enter, Modifiers::ALT),
                KeyEvent::ctrl('J'),
            ] {
                editor.bind_sequence(key, EventHandler::Simple(Cmd::Newline));
            }
            editor.bind_sequence(
                KeyEvent(KeyCode::Enter, Modifiers::NONE),
                EventHandler::Conditional(Box::new(BackslashEnterIsANewline)),
            );
            // While the line is read (and the editor's SIGINT handler is in place), a
            // SIGINT sent to this thread ends it as Ctrl-C would.
            let set_reader = |thread| {
                *waker.reader.lock().unwrap_or_else(PoisonError::into_inner) = thread;
            };
            set_reader(Some(nix::sys::pthread::pthread_self()));
            let line = if initial.is_empty() {
                editor.readline(&prompt)
            } else {
                editor.readline_with_initial(&prompt, (&initial, ""))
            };
            set_reader(None);
            lines.history =
                std::mem::replace(editor.history_mut(), DefaultHistory::with_config(&config));
            match pressed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
            {
                Some(text) => Ok(Line::ShiftTab(text)),
                None => line.map(|line| Line::Text(without_continuations(&line))),
            }
        })
        .await
        .map_err(|err| format!("the line editor stopped: {err}"))?;
        match read {
            Ok(line) => Ok(line),
            Err(ReadlineError::Interrupted) => Ok(Line::Interrupted),
            Err(ReadlineError::Eof) => Ok(Line::Eof),
            Err(err) => Err(format!("cannot read the terminal: {err}")),
        }
    }

    /// What wakes the line being read.
    pub(super) fn waker(&self) -> Waker {
        self.waker.clone()
    }

    /// Adds `line` to the history and saves the file; a failure to save is returned once, as
    /// a line to show, and the file is left alone from then on.
    pub(super) fn remember(&self, line: &str) -> Option<String> {
        let mut lines = self.lines.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.history.add(line).is_err() {
            return None;
        }
        let path = lines.file.clone()?;
        match lines.history.save(&path) {
            Ok(()) => None,
            Err(err) => {
                lines.file = None;
                Some(format!(
                    "cannot save the history {}: {err}; lines are no longer saved",
                    path.display()
                ))
            }
        }
    }

    /// Asks approval questions with a line editor like the prompt's (without its history):
    /// the spinner is cleared, the line ended and what was typed before the question thrown
    /// away first (the type-ahead capture paused, its queue emptied and said so, the
    /// terminal's input flushed; the capture resumes after the answer); Ctrl-C answers
    /// [`Answer::Interrupted`] (the turn stops), Ctrl-D [`Answer::Closed`] (no).
    pub(super) fn ask_fn(&self, view: View) -> AskFn {
        let config = self.config.clone();
        let lines = self.lines.clone();
        let type_ahead = self.type_ahead.clone();
        Arc::new(move |question: &str| {
            // Held while asking, so that the prompt cannot be read at the same time even if
            // the run stopped waiting for this answer.
            let _terminal = lines.lock().unwrap_or_else(PoisonError::into_inner);
            let capturing = type_ahead.pause();
            let _resume = Resume(capturing.then_some((&type_ahead, &view)));
            view.before_prompt();
            let typed = type_ahead.take();
            if !typed.is_empty() {
                view.notice(&format!(
                    "(typed before the question, not an answer, thrown away: {})",
                    printable(&typed.replace('\n', " / "))
                ));
            }
            discard_type_ahead();
            let Ok(mut editor) = Editor::<(), DefaultHistory>::with_config(config.clone()) else {
                return Answer::Closed;
            };
            // Lines before the last are shown first (what the call would change); the last is
            // the prompt.
            let prompt = match question.rsplit_once('\n') {
                Some((before, prompt)) => {
                    let lines: Vec<String> = before.lines().map(str::to_owned).collect();
                    view.lines(&lines);
                    prompt
                }
                None => question,
            };
            match editor.readline(prompt) {
                Ok(line) => Answer::Line(line),
                Err(ReadlineError::Interrupted) => Answer::Interrupted,
                Err(_) => Answer::Closed,
            }
        })
    }
}

/// Throws away what was typed before a question appeared (keys pressed while the model was
/// working), so that only an answer typed after the question is read can answer it.
fn discard_type_ahead() {
    let stdin = std::io::stdin();
    if let Err(err) = nix::sys::termios::tcflush(&stdin, nix::sys::termios::FlushArg::TCIFLUSH) {
        tracing::debug!("cannot discard typed-ahead input: {err}");
    }
}

/// Shift-Tab at the prompt: ends the read, keeping the line's text, so the REPL cycles the
/// approval mode and shows it.
#[derive(Default)]
struct ShiftTabEndsTheRead(Arc<Mutex<Option<String>>>);

impl ConditionalEventHandler for ShiftTabEndsTheRead {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext<'_>) -> Option<Cmd> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(ctx.line().to_owned());
        Some(Cmd::Interrupt)
    }
}

/// Resumes a paused type-ahead capture when dropped (after the answer, however it ended).
struct Resume<'a>(Option<(&'a TypeAhead, &'a View)>);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        if let Some((type_ahead, view)) = self.0 {
            type_ahead.resume(view);
        }
    }
}

/// Enter after a `\`: a newline instead of the line being sent (the backslash before it is
/// dropped when the line is: [`without_continuations`]).
struct BackslashEnterIsANewline;

impl ConditionalEventHandler for BackslashEnterIsANewline {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext<'_>) -> Option<Cmd> {
        ctx.line()[..ctx.pos()]
            .ends_with('\\')
            .then_some(Cmd::Newline)
    }
}

/// `line` without the backslashes that made newlines (`\` then Enter).
fn without_continuations(line: &str) -> String {
    line.replace("\\\n", "\n")
}

/// Ctrl-C at the prompt: clears the line when there is text, else is Ctrl-C.
struct CtrlCClearsTheLine;

impl ConditionalEventHandler for CtrlCClearsTheLine {
    fn handle(&self, _: &Event, _: RepeatCount, _: bool, ctx: &EventContext<'_>) -> Option<Cmd> {
        (!ctx.line().is_empty()).then_some(Cmd::Kill(Movement::WholeLine))
    }
}

/// Creates the history file, and its directory, when missing; only its owner may read it
/// (the prompts may hold secrets).
fn prepare_history(path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(err),
    }
}
