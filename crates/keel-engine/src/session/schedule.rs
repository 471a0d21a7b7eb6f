//! Scheduling: every call of a reply planned in order, then run — consecutive read-only calls
//! together, any other call alone, after a snapshot — each result written as it ends.

use std::ops::Range;
use std::time::Instant;

use keel_provider::{ContentBlock, ImageData};
use keel_snapshot::SnapshotPoint;
use keel_tool::{ToolContext, ToolOutput};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::gate::Plan;
use super::journal::result_block;
use super::outcome::RunState;
use super::{OwnedCall, Session, Sink, emit};
use crate::events::AgentEvent;
use crate::history::INTERRUPTED;
use crate::hooks::{HookEvent, HookInput, HookOutcome};

/// The result of a call not run because a hook stopped the run (`"continue": false`).
const NOT_RUN_STOPPED: &str = "not run: a hook stopped the run";

/// The longest summary of a call in a snapshot, in characters.
const SNAPSHOT_SUMMARY_CHARS: usize = 200;

/// One step of running a reply's calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// These consecutive read-only calls run together.
    Together(Range<usize>),
    /// This call, which may change something, runs alone (after a snapshot).
    Alone(usize),
}

/// Which calls run together, in the model's order: each run of consecutive read-only calls
/// is one step, every other call to run is a step of its own; answered calls are skipped.
/// No I/O.
pub(super) fn steps(plans: &[Plan]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut i = 0;
    while i < plans.len() {
        match &plans[i] {
            Plan::Answer(_) => i += 1,
            Plan::Run { read_only: true } => {
                let end = (i..plans.len())
                    .find(|&j| !matches!(plans[j], Plan::Run { read_only: true }))
                    .unwrap_or(plans.len());
                steps.push(Step::Together(i..end));
                i = end;
            }
            Plan::Run { read_only: false } => {
                steps.push(Step::Alone(i));
                i += 1;
            }
        }
    }
    steps
}

impl Session {
    /// Decides, runs and answers every call, in the model's order: one result per call, each
    /// written to the session log as soon as it is known.
    pub(super) async fn run_tools(
        &mut self,
        calls: &[OwnedCall],
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
    ) -> Vec<ContentBlock> {
        let mut ctx = ToolContext::new(&self.cwd, &self.id).with_cancel(cancel.clone());
        if let Some(editor) = &self.editor {
            ctx = ctx.with_editor_files(editor.clone());
        }
        // A PreToolUse hook may change a call's input: the calls as they will run.
        let mut calls = calls.to_vec();
        let mut plans = Vec::with_capacity(calls.len());
        for call in &mut calls {
            let plan = if self.stop_requested() {
                self.answer(call, ToolOutput::error(NOT_RUN_STOPPED), sink)
            } else {
                self.plan(call, cancel, sink).await
            };
            plans.push(plan);
        }
        let calls = calls.as_slice();
        let mut outputs: Vec<Option<ToolOutput>> = vec![None; calls.len()];
        let mut log_errors = Vec::new();
        for (i, plan) in plans.iter().enumerate() {
            if let Plan::Answer(output) = plan {
                log_errors.extend(self.write_result(&calls[i], output));
                outputs[i] = Some(output.clone());
            }
        }
        for step in steps(&plans) {
            match step {
                Step::Together(range) => {
                    let start = range.start;
                    let batch = calls[range].iter().map(|call| async {
                        let output = if cancel.is_cancelled() {
                            self.interrupted(call, sink)
                        } else if self.stop_requested() {
                            self.not_run(call, sink)
                        } else {
                            self.dispatch(call, &ctx, sink).await
                        };
                        let error = self.write_result(call, &output);
                        (output, error)
                    });
                    for (offset, (output, error)) in futures::future::join_all(batch)
                        .await
                        .into_iter()
                        .enumerate()
                    {
                        log_errors.extend(error);
                        outputs[start + offset] = Some(output);
                    }
                }
                Step::Alone(i) => {
                    let call = &calls[i];
                    let output = if cancel.is_cancelled() {
                        self.interrupted(call, sink)
                    } else if self.stop_requested() {
                        self.not_run(call, sink)
                    } else {
                        self.snapshot(call, sink).await;
                        self.dispatch(call, &ctx, sink).await
                    };
                    log_errors.extend(self.write_result(call, &output));
                    outputs[i] = Some(output);
                }
            }
        }
        for error in log_errors {
            self.note_persist_error(error);
        }
        let mut results = Vec::with_capacity(calls.len());
        for (call, output) in calls.iter().zip(outputs) {
            let output = output.unwrap_or_else(|| ToolOutput::error(INTERRUPTED));
            if output.is_error {
                let first_line = output.content.lines().next().unwrap_or_default();
                state
                    .failed_tools
                    .push(format!("{}: {first_line}", call.name));
            }
            if !output.delegated.is_empty() {
                self.charge_delegated(&output.delegated, sink, state);
            }
            results.push(result_block(call, &output));
        }
        results
    }

    /// Snapshots the workspace before `call`, if the agent has a snapshot store; reports
    /// the snapshot, or a warning when it failed (the call runs all the same).
    pub(super) async fn snapshot(&self, call: &OwnedCall, sink: &Sink) {
        let Some(snapshots) = self.config.snapshots().cloned() else {
            return;
        };
        let point = SnapshotPoint {
            session_id: self.id.clone(),
            call_id: call.id.clone(),
            tool: call.name.clone(),
            summary: call_summary(&call.input),
            history_len: self.run_start,
        };
        let taken = tokio::task::spawn_blocking(move || snapshots.take(&point)).await;
        let error = match taken {
            Ok(Ok(id)) => {
                tracing::debug!(call = %call.id, snapshot = %id, "snapshot taken");
                emit(
                    sink,
                    AgentEvent::SnapshotTaken {
                        call_id: call.id.clone(),
                        id,
                    },
                );
                return;
            }
            Ok(Err(err)) => err.to_string(),
            Err(err) => format!("the snapshot task failed: {err}"),
        };
        tracing::warn!(call = %call.id, "no snapshot before the call: {error}");
        emit(
            sink,
            AgentEvent::Warning {
                message: format!(
                    "no snapshot before {} {}: {error}; the call runs without one",
                    call.name, call.id
                ),
            },
        );
    }

    /// A call answered `interrupted` without running it.
    pub(super) fn interrupted(&self, call: &OwnedCall, sink: &Sink) -> ToolOutput {
        let output = ToolOutput::error(INTERRUPTED);
        finished(sink, call, &output, std::time::Duration::ZERO);
        output
    }

    /// A call answered without running it because a hook stopped the run.
    fn not_run(&self, call: &OwnedCall, sink: &Sink) -> ToolOutput {
        let output = ToolOutput::error(NOT_RUN_STOPPED);
        finished(sink, call, &output, std::time::Duration::ZERO);
        output
    }

    pub(super) async fn dispatch(
        &self,
        call: &OwnedCall,
        ctx: &ToolContext,
        sink: &Sink,
    ) -> ToolOutput {
        emit(
            sink,
            AgentEvent::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            },
        );
        let started = Instant::now();
        let mut output = match sink {
            Some(events) => with_progress(self.config.tools(), call, ctx, events).await,
            None => self.config.tools().dispatch(call.as_call(), ctx).await,
        };
        // As in Claude Code, a call that failed fires PostToolUseFailure, not PostToolUse.
        let event = if output.is_error {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        if self.config.hooks().handles(event) {
            let input = if output.is_error {
                HookInput::post_tool_use_failure(
                    &self.id,
                    &self.cwd,
                    &call.name,
                    call.input.clone(),
                    output.content.clone(),
                )
            } else {
                HookInput::post_tool_use(
                    &self.id,
                    &self.cwd,
                    &call.name,
                    call.input.clone(),
                    &output,
                )
            }
            .with_tool_use_id(&call.id);
            let report = self.hooks(input, sink).await;
            // Feedback from PostToolUse hooks goes to the model with the result.
            let feedback: Vec<String> = match report.outcome {
                HookOutcome::Block { reason } => vec![reason],
                HookOutcome::Stop { reason } => {
                    self.request_stop(reason);
                    Vec::new()
                }
                _ => Vec::new(),
            }
            .into_iter()
            .chain(report.messages)
            .collect();
            if !feedback.is_empty() {
                output.content = format!(
                    "{}\n\n[hook] {}",
                    output.content,
                    feedback.join("\n[hook] ")
                );
            }
        }
        finished(sink, call, &output, started.elapsed());
        output
    }
}

/// One line for a person saying what a call does: a command's `command`, a file tool's
/// `path`, else its input as compact JSON; at most [`SNAPSHOT_SUMMARY_CHARS`] characters.
pub(super) fn call_summary(input: &Value) -> String {
    let text = ["command", "path"]
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str))
        .map_or_else(|| input.to_string(), str::to_owned);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::session_store::shorten(&line, SNAPSHOT_SUMMARY_CHARS)
}

/// Reports that `call` has its result.
pub(super) fn finished(
    sink: &Sink,
    call: &OwnedCall,
    output: &ToolOutput,
    duration: std::time::Duration,
) {
    emit(
        sink,
        AgentEvent::ToolCallFinished {
            id: call.id.clone(),
            name: call.name.clone(),
            output: output.content.clone(),
            images: output.images.iter().map(ImageData::describe).collect(),
            is_error: output.is_error,
            duration,
        },
    );
}

/// Dispatches `call` with a progress channel whose lines become [`AgentEvent::ToolProgress`]
/// events, all of them sent before the call's result is known (no task: the lines are
/// forwarded while the call runs, the rest drained after it).
async fn with_progress(
    tools: &keel_tool::ToolRegistry,
    call: &OwnedCall,
    ctx: &ToolContext,
    events: &tokio::sync::mpsc::UnboundedSender<AgentEvent>,
) -> ToolOutput {
    let (sender, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let ctx = ctx.clone().with_progress(sender);
    let running = tools.dispatch(call.as_call(), &ctx);
    tokio::pin!(running);
    let forward = |progress: keel_tool::Progress| {
        let _ = events.send(AgentEvent::ToolProgress {
            id: call.id.clone(),
            name: call.name.clone(),
            line: progress.line,
        });
    };
    let output = loop {
        tokio::select! {
            biased;
            Some(progress) = lines.recv() => forward(progress),
            output = &mut running => break output,
        }
    };
    while let Ok(progress) = lines.try_recv() {
        forward(progress);
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read() -> Plan {
        Plan::Run { read_only: true }
    }

    fn write() -> Plan {
        Plan::Run { read_only: false }
    }

    fn answered() -> Plan {
        Plan::Answer(ToolOutput::error("denied"))
    }

    #[test]
    fn consecutive_read_only_calls_run_together_and_others_alone() {
        use Step::{Alone, Together};
        let cases: Vec<(Vec<Plan>, Vec<Step>)> = vec![
            (vec![], vec![]),
            (vec![read(), read(), read()], vec![Together(0..3)]),
            (vec![write(), write()], vec![Alone(0), Alone(1)]),
            (
                vec![read(), read(), write(), read(), answered(), read()],
                vec![Together(0..2), Alone(2), Together(3..4), Together(5..6)],
            ),
            (vec![answered(), write(), answered()], vec![Alone(1)]),
        ];
        for (plans, expected) in cases {
            assert_eq!(steps(&plans), expected);
        }
    }
}
