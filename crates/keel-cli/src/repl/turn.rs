//! One prompt, run to its end: the run's events printed as they come (answer text, tool
//! lines, diffs of written files, the spinner), and Ctrl-C turned into a cancellation.

use std::path::Path;

use keel::RunEvent;
use keel::engine::{AgentEvent, RunOutcome, Stop};
use keel::provider::ContentBlock;
use keel_host::render::{CallInputs, describe_call, failure_tail, finished_line, restored_note};
use keel_host::trouble::retry_status;
use keel_host::{HostEvent, LiveSession, Subscription, TaskWait};
use serde_json::Value;

use super::diff::file_diff;
use super::snapshot::{Snapshots, target};
use super::view::{Style, View, printable};
use crate::signals;

/// The tools whose calls may take long: without a spinner (no colours), a line says when
/// one starts.
const SLOW_TOOLS: &[&str] = &[
    "run_command",
    "code",
    "spawn_agent",
    "run_team",
    "wait_task",
];

/// What the spinner says while the model is being waited for.
const THINKING: &str = "thinking…";

/// Runs `prompt` in `live`, printing the events `owner` receives as they come; `None` if the
/// run ended without an outcome (it never should). Ctrl-C cancels the run, which then ends as
/// soon as the model call or tool running stops; the session stays usable.
pub(super) async fn run(
    live: &LiveSession,
    owner: &mut Subscription,
    prompt: &str,
    view: &View,
    snapshots: &Snapshots,
) -> Option<RunOutcome> {
    let cwd = live.cwd().to_path_buf();
    let mut printer = Printer {
        view,
        snapshots,
        cwd: &cwd,
        calls: CallInputs::default(),
        streamed: false,
    };
    let turn = match live.start_turn(vec![ContentBlock::text(prompt)], TaskWait::Leave) {
        Ok(turn) => turn.number,
        Err(err) => {
            view.error(&err.to_string());
            return None;
        }
    };
    let mut outcome = None;
    let interrupt = signals::interrupted();
    futures::pin_mut!(interrupt);
    let mut can_interrupt = true;
    let mut cancelling = false;
    loop {
        tokio::select! {
            event = owner.next() => match event {
                Some(HostEvent::Run(RunEvent::Agent(AgentEvent::Finished(done)))) => {
                    outcome = Some(done);
                }
                Some(HostEvent::Run(RunEvent::Agent(event))) => printer.event(event),
                Some(HostEvent::TurnEnded { turn: ended, outcome: last }) if ended == turn => {
                    outcome = outcome.or(last);
                    break;
                }
                Some(_) => {}
                None => break,
            },
            signal = &mut interrupt, if can_interrupt => {
                live.cancel();
                if !cancelling {
                    cancelling = true;
                    view.warning("cancelling…");
                }
                if signal == signals::Interrupt::Terminate {
                    // Resolves at once from now on: stop listening.
                    can_interrupt = false;
                } else {
                    interrupt.set(signals::interrupted());
                }
            }
        }
    }
    view.stop_spinner();
    view.end_line();
    snapshots.clear();
    if let Some(done) = &outcome {
        printer.outcome(done);
    }
    outcome
}

/// Prints one run's events.
struct Printer<'a> {
    view: &'a View,
    snapshots: &'a Snapshots,
    cwd: &'a Path,
    /// Each call's input, by id.
    calls: CallInputs,
    /// Whether any answer text was printed.
    streamed: bool,
}

impl Printer<'_> {
    /// Prints what `event` says, if anything.
    fn event(&mut self, event: AgentEvent) {
        let view = self.view;
        self.calls.observe(&event);
        match event {
            AgentEvent::TurnStarted { .. } => view.spin(THINKING),
            AgentEvent::TextDelta { text } if !text.is_empty() => {
                self.streamed = true;
                view.text(&text);
            }
            // Notices (a background task ended) reach the model before its next request;
            // the person sees them too.
            AgentEvent::MessageAdded { message } if message.role == keel::provider::Role::User => {
                for block in &message.content {
                    if let keel::provider::ContentBlock::Text { text } = block
                        && let Some(notice) = text.strip_prefix("[notification] ")
                    {
                        view.stop_spinner();
                        view.end_line();
                        view.notice(notice);
                    }
                }
            }
            AgentEvent::ToolCallStarted { name, input, .. } => {
                view.spin(&describe_call(&name, &input));
                // No spinner without colours: a plain line says what may take long.
                if !view.style().enabled() && SLOW_TOOLS.contains(&name.as_str()) {
                    view.notice(&format!("running: {}…", describe_call(&name, &input)));
                }
            }
            AgentEvent::ToolCallFinished {
                id,
                name,
                output,
                images,
                is_error,
                duration,
            } => {
                let input = self.calls.take(&id);
                view.tool_line(
                    &finished_line(&name, &input, &output, &images, is_error, duration),
                    &failure_tail(&name, &output, is_error),
                    is_error,
                );
                if let Some(note) = restored_note(&output) {
                    view.warning(&format!("keel: {note}"));
                }
                if !is_error && (name == "write_file" || name == "patch_file") {
                    self.show_change(&input);
                }
                view.keep_last_output(describe_call(&name, &input), output);
            }
            AgentEvent::ApprovalRequested { .. } | AgentEvent::IterationWarning { .. } => {
                // The question itself is asked, and says it (with the change an edit would
                // make), through the approver.
                view.stop_spinner();
            }
            AgentEvent::Compacted {
                before_tokens,
                after_tokens,
            } => view.notice(&format!(
                "compacted the conversation: ~{before_tokens} → ~{after_tokens} tokens"
            )),
            // One status line, replaced by each retry and gone when the call goes through
            // (or, with no spinner to show it in, one line per retry).
            AgentEvent::Retrying {
                attempt,
                max_attempts,
                wait,
                error,
            } => {
                let status = retry_status(attempt, max_attempts, wait, &error);
                if view.style().enabled() {
                    view.spin(&status);
                } else {
                    view.warning(&status);
                }
            }
            AgentEvent::ReplyDiscarded {
                attempt,
                max_attempts,
                error,
            } => {
                // What was shown of the cut reply stays on screen; the line says it is void.
                view.stop_spinner();
                view.end_line();
                self.streamed = false;
                view.warning(&format!(
                    "the reply above was cut off ({error}) and is discarded; asking again \
                     ({attempt}/{max_attempts})"
                ));
            }
            AgentEvent::Warning { message } => view.warning(&format!("warning: {message}")),
            AgentEvent::ToolCallRepaired { repair } => {
                view.notice(&printable(&format!(
                    "repaired a tool call: {}",
                    repair.describe()
                )));
            }
            AgentEvent::HookMessage { event, message } => {
                view.notice(&printable(&format!("{event} hook: {message}")));
            }
            _ => {}
        }
    }

    /// The diff of the file a write tool changed.
    fn show_change(&self, input: &Value) {
        let Some(path) = target(self.cwd, input) else {
            return;
        };
        let Some(change) = self.snapshots.change(&path) else {
            return;
        };
        let shown = path
            .strip_prefix(self.cwd)
            .unwrap_or(&path)
            .display()
            .to_string();
        let lines = file_diff(
            self.view.style(),
            &shown,
            change.old.as_deref(),
            &change.new,
        );
        self.view.lines(&lines);
    }

    /// How the run ended, when the streamed text has not said it.
    fn outcome(&self, outcome: &RunOutcome) {
        let view = self.view;
        match &outcome.stop {
            Stop::Completed if !self.streamed => {
                view.text(&outcome.text);
                view.end_line();
            }
            Stop::Completed => {}
            Stop::Cancelled | Stop::MaxIterations => view.warning(&one_line(&outcome.text)),
            Stop::Refused { .. } | Stop::Failed { .. } => view.error(&one_line(&outcome.text)),
            _ => view.warning(&one_line(&outcome.text)),
        }
    }
}

/// The diff a write tool asks to make, shown before the question about it: `write_file`'s
/// content over the file as it is, or `patch_file`'s replacement applied to it; nothing for
/// other tools.
pub(super) fn proposed_change(style: Style, cwd: &Path, name: &str, input: &Value) -> Vec<String> {
    let Some(path) = target(cwd, input) else {
        return Vec::new();
    };
    let old = std::fs::read_to_string(&path).ok();
    let text = |key: &str| input.get(key).and_then(Value::as_str);
    let new = match name {
        "write_file" => text("content").map(str::to_owned),
        "patch_file" => match (&old, text("old_string"), text("new_string")) {
            (Some(old), Some(from), Some(to)) if !from.is_empty() => {
                let all = input.get("replace_all").and_then(Value::as_bool) == Some(true);
                Some(if all {
                    old.replace(from, to)
                } else {
                    old.replacen(from, to, 1)
                })
            }
            _ => None,
        },
        _ => None,
    };
    let Some(new) = new else {
        return Vec::new();
    };
    let shown = path
        .strip_prefix(cwd)
        .unwrap_or(&path)
        .display()
        .to_string();
    file_diff(style, &shown, old.as_deref(), &new)
}

/// `text` on one line.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
