//! A headless turn's output: a live session's events printed as `keel exec` prints them —
//! progress lines on stderr (text), or Claude Code's stream-json lines on stdout.

use keel::RunEvent;
use keel::engine::{AgentEvent, RunOutcome};
use keel::provider::ContentBlock;
use keel_host::render::{CallInputs, failure_tail, finished_line, restored_note};
use keel_host::stream_json::ClaudeStream;
use keel_host::trouble::retry_status;
use keel_host::{HostEvent, LiveSession, Subscription, TaskWait};

use crate::cli::OutputFormat;
use crate::print::{print_json, print_lines, progress};
use crate::signals;

/// Runs `prompt` in `live` (and, when it leaves background tasks running and `wait` says so,
/// the turn after they end), printing the events `owner` receives as `format` says (`stream`
/// makes the JSON lines); the outcome. A signal while waiting for the tasks stops the wait
/// (the tasks go on without keel).
pub(crate) async fn stream_turn(
    live: &LiveSession,
    owner: &mut Subscription,
    prompt: Vec<ContentBlock>,
    format: OutputFormat,
    stream: &mut ClaudeStream,
    wait: TaskWait,
) -> Option<RunOutcome> {
    // A run stopped by a signal waits for no task: the tasks go on without keel (their
    // supervisors are detached).
    let wait = if signals::terminating() {
        TaskWait::Leave
    } else {
        wait
    };
    let turn = match live.start_turn(prompt, wait) {
        Ok(turn) => turn.number,
        Err(err) => {
            progress(&format!("keel: {err}"));
            return None;
        }
    };
    let mut printer = TurnPrinter {
        live,
        format,
        stream,
        calls: CallInputs::default(),
        waited: Vec::new(),
        outcome: None,
    };
    let mut waiting = false;
    loop {
        let event = tokio::select! {
            event = owner.next() => event,
            () = signals::terminated(), if waiting => {
                live.cancel();
                waiting = false;
                continue;
            }
        };
        match event? {
            HostEvent::TurnEnded {
                turn: ended,
                outcome,
            } if ended == turn => return printer.outcome.or(outcome),
            HostEvent::Run(RunEvent::WaitingForTasks { ids }) => {
                waiting = true;
                printer.waiting(ids);
            }
            HostEvent::Run(RunEvent::TasksEnded) => {
                waiting = false;
                printer.tasks_ended();
            }
            HostEvent::Run(RunEvent::Done(done)) => printer.outcome = Some(done),
            HostEvent::Run(RunEvent::Agent(event)) => printer.event(event),
            _ => {}
        }
    }
}

/// Prints one turn's events.
struct TurnPrinter<'a> {
    live: &'a LiveSession,
    format: OutputFormat,
    stream: &'a mut ClaudeStream,
    /// Each call's input, by id.
    calls: CallInputs,
    /// The background tasks waited for.
    waited: Vec<String>,
    /// The outcome of the whole request, once known.
    outcome: Option<RunOutcome>,
}

impl TurnPrinter<'_> {
    /// The run completed with background tasks still running.
    fn waiting(&mut self, ids: Vec<String>) {
        if self.format == OutputFormat::Text {
            progress(&format!(
                "waiting for {} background task(s): {} (--no-wait-tasks skips this)",
                ids.len(),
                ids.join(", ")
            ));
        }
        self.waited = ids;
    }

    /// The tasks waited for ended: their notifications, as stream-json lines.
    fn tasks_ended(&mut self) {
        if self.format != OutputFormat::StreamJson {
            return;
        }
        let Some(tasks) = self.live.coding().tasks() else {
            return;
        };
        for id in self.waited.drain(..) {
            if let Ok(Some(task)) = tasks.store().get(&id) {
                print_json(&self.stream.task_notification(&task));
            }
        }
    }

    /// Prints what `event` shows: its stream-json lines, or a progress line for text.
    fn event(&mut self, event: AgentEvent) {
        self.calls.observe(&event);
        let lines = self.stream.event(&event);
        if self.format == OutputFormat::StreamJson {
            print_lines(&lines);
        }
        let text = self.format == OutputFormat::Text;
        match event {
            AgentEvent::ToolCallFinished {
                id,
                name,
                output,
                images,
                is_error,
                duration,
            } if text => {
                let input = self.calls.take(&id);
                progress(&finished_line(
                    &name, &input, &output, &images, is_error, duration,
                ));
                for line in failure_tail(&name, &output, is_error) {
                    progress(&format!("    {line}"));
                }
                if let Some(note) = restored_note(&output) {
                    progress(&format!("keel: {note}"));
                }
            }
            AgentEvent::ReplyDiscarded {
                attempt,
                max_attempts,
                error,
            } if self.format != OutputFormat::StreamJson => progress(&format!(
                "the reply was cut off ({error}); asking again ({attempt}/{max_attempts})"
            )),
            AgentEvent::IterationWarning { used, limit } if text => {
                progress(&iteration_warning_line(used, limit));
            }
            AgentEvent::Warning { message } if text => progress(&format!("warning: {message}")),
            AgentEvent::HookMessage { event, message } if text => {
                progress(&format!("{event} hook: {message}"));
            }
            AgentEvent::ToolCallRepaired { repair } if text => {
                progress(&format!(
                    "keel: repaired a tool call: {}",
                    repair.describe()
                ));
            }
            AgentEvent::Retrying {
                attempt,
                max_attempts,
                wait,
                error,
            } if text => progress(&format!(
                "keel: {}",
                retry_status(attempt, max_attempts, wait, &error)
            )),
            // A run's own end: the whole request's comes with Done (kept in case the wait
            // for tasks is cut short).
            AgentEvent::Finished(done) if self.outcome.is_none() => self.outcome = Some(done),
            _ => {}
        }
    }
}

/// The stderr line of a text run at 80 % of its iteration limit.
fn iteration_warning_line(used: u32, limit: u32) -> String {
    format!(
        "keel: warning: {used} of {limit} model calls used (--max-iterations); the model is told \
         to wrap up"
    )
}
