//! What a run reports while it happens, and how it ended.

use std::time::Duration;

use keel_provider::{Message, ProviderError, StopReason, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::failure::RunFailure;
use crate::hooks::HookEvent;
use keel_provider::CostByProvider;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Stop {
    /// The model finished its turn.
    Completed,
    /// The iteration limit was reached, or the approver declined to go on at the warning.
    MaxIterations,
    /// The run was cancelled.
    Cancelled,
    /// The run's output-token budget ([`AgentBuilder::output_token_budget`](crate::AgentBuilder::output_token_budget))
    /// was used up; checked before each model call.
    TokenBudget {
        /// Output tokens written by the run.
        used: u64,
        /// The budget.
        budget: u64,
    },
    /// The run's spending limit ([`AgentBuilder::cost_budget_usd`](crate::AgentBuilder::cost_budget_usd))
    /// was reached; checked before each model call.
    CostBudget {
        /// What the run's model calls cost, in USD.
        spent_usd: f64,
        /// The limit.
        budget_usd: f64,
    },
    /// The model declined the request.
    Refused {
        /// What the model said, or why the provider refused.
        reason: String,
    },
    /// A `UserPromptSubmit` hook blocked the prompt (exit 2, `"decision": "block"` or
    /// `"continue": false`): it was not sent, nor kept in the history.
    PromptBlocked {
        /// The hook's reason, for the person.
        reason: String,
    },
    /// A hook answered `"continue": false`: the run stopped there (the calls of the reply
    /// being answered are answered first).
    HookStopped {
        /// The hook's `stopReason`, for the person.
        reason: String,
    },
    /// A fatal error ended the run; the session is saved and can go on with the next prompt.
    /// Serialized as `{"kind": "failed", "failure": <kind>, "error": <message>}`.
    Failed(RunFailure),
}

impl Stop {
    /// A short name: `completed`, `max_iterations`, `cancelled`, `token_budget`,
    /// `cost_budget`, `refused`, `prompt_blocked`, `hook_stopped`, `failed`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::MaxIterations => "max_iterations",
            Self::Cancelled => "cancelled",
            Self::TokenBudget { .. } => "token_budget",
            Self::CostBudget { .. } => "cost_budget",
            Self::Refused { .. } => "refused",
            Self::PromptBlocked { .. } => "prompt_blocked",
            Self::HookStopped { .. } => "hook_stopped",
            Self::Failed(_) => "failed",
        }
    }
}

/// The result of one run (one prompt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunOutcome {
    /// The final text: the model's last words, or a fallback saying what happened. Never
    /// empty.
    pub text: String,
    /// How the run ended.
    pub stop: Stop,
    /// Model calls made.
    pub iterations: u32,
    /// Tokens used by this run.
    pub usage: Usage,
    /// What this run cost in USD; `None` when the model's price is unknown.
    pub cost_usd: Option<f64>,
    /// This run's usage and cost by provider: with models on several providers (a compaction
    /// summary on a local server's model), what each served.
    #[serde(default)]
    pub cost_by_provider: CostByProvider,
    /// Tool calls keel mended in this run (see [`repair`](crate::repair)): each was also
    /// reported as [`AgentEvent::ToolCallRepaired`] and noted in the reply.
    #[serde(default)]
    pub repaired_calls: u32,
}

/// What [`Session::compact_now`](crate::Session::compact_now) did.
#[derive(Debug, Clone, PartialEq)]
pub struct Compacted {
    /// Estimated prompt tokens before.
    pub before_tokens: u64,
    /// Estimated prompt tokens after.
    pub after_tokens: u64,
    /// Tokens used by the summary call.
    pub usage: Usage,
    /// What the summary call cost in USD; `None` when the model's price is unknown.
    pub cost_usd: Option<f64>,
    /// The summary call's usage and cost under the name of the provider that served it.
    pub cost_by_provider: CostByProvider,
}

/// What happens during a run, in order.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// A model call begins.
    TurnStarted {
        /// Which (1-based).
        iteration: u32,
    },
    /// The model's reply began streaming (the provider's `message_start`): once per reply,
    /// before its deltas, and again for a reply asked for anew after
    /// [`AgentEvent::ReplyDiscarded`]. Lets a front end that mirrors the provider's stream
    /// (`keel exec --output-format stream-json`) name the reply.
    ReplyStarted {
        /// The provider's id for the reply (`msg_…`), if it sent one.
        id: Option<String>,
        /// The model that answers, as the provider reported it.
        model: Option<String>,
    },
    /// The model's reply is complete: comes after its [`AgentEvent::Usage`] and before the
    /// [`AgentEvent::MessageAdded`] that holds it. Not sent for a reply that failed or was
    /// cancelled.
    ReplyFinished {
        /// Why the model stopped.
        stop_reason: StopReason,
        /// How long the model call took, from sending the request to the reply's end
        /// (retries, a discarded reply and a compaction forced by a too-long request
        /// included).
        duration: Duration,
    },
    /// More of the model's text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// More of the model's thinking (reasoning it streams before or between its text, e.g.
    /// Anthropic's extended thinking or a reasoning model's `reasoning_content`). Kept in
    /// the history as the provider requires, never shown as the answer.
    ThinkingDelta {
        /// The new thinking text.
        text: String,
    },
    /// A tool call is about to run (after any approval).
    ToolCallStarted {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments.
        input: Value,
    },
    /// A running tool call reported progress (a line of a command's output, an MCP server's
    /// progress notification); always between its `ToolCallStarted` and `ToolCallFinished`.
    ToolProgress {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// The progress, one line.
        line: String,
    },
    /// A tool call finished (or was refused, denied or interrupted).
    ToolCallFinished {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// What the model will read.
        output: String,
        /// One short description per image the result carries besides `output`, e.g.
        /// `image/png, 12 KB` ([`ImageData::describe`](keel_provider::ImageData::describe));
        /// the images themselves are in the message [`AgentEvent::MessageAdded`] reports.
        images: Vec<String>,
        /// Whether it failed.
        is_error: bool,
        /// How long it took.
        duration: Duration,
    },
    /// A call needs approval; the approver is being asked.
    ApprovalRequested {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments.
        input: Value,
        /// Why it needs approval.
        reason: String,
    },
    /// The run has used most of its iterations.
    IterationWarning {
        /// Iterations used.
        used: u32,
        /// The limit.
        limit: u32,
    },
    /// Tokens used by the latest model call, and the run's total so far.
    Usage {
        /// This call.
        call: Usage,
        /// The run so far.
        total: Usage,
        /// The run's cost so far in USD, if the model's price is known.
        cost_usd: Option<f64>,
    },
    /// The history was compacted.
    Compacted {
        /// Estimated tokens before.
        before_tokens: u64,
        /// Estimated tokens after.
        after_tokens: u64,
    },
    /// The provider is retrying a failed request.
    Retrying {
        /// Which retry (1 for the first).
        attempt: u32,
        /// The most retries the provider makes for this call.
        max_attempts: u32,
        /// How long it waits first.
        wait: Duration,
        /// What failed.
        error: ProviderError,
    },
    /// The reply being streamed was cut off mid-stream (the connection dropped or stalled
    /// after the reply began) and is discarded: nothing of it is kept in the history. A UI
    /// drops what it showed of it (its text deltas); the same request is sent again after a
    /// short wait, at most `max_attempts` times, then the run fails with the error.
    ReplyDiscarded {
        /// Which retry this is (1-based).
        attempt: u32,
        /// The most retries ([`AgentBuilder::stream_retries`](crate::AgentBuilder::stream_retries)).
        max_attempts: u32,
        /// What cut the reply off.
        error: String,
    },
    /// The workspace was snapshotted before a tool call that may change it
    /// ([`AgentBuilder::snapshots`](crate::AgentBuilder::snapshots)); comes before that
    /// call's [`AgentEvent::ToolCallStarted`]. A snapshot that failed is a
    /// [`AgentEvent::Warning`] instead, and the call runs all the same.
    SnapshotTaken {
        /// The call's id.
        call_id: String,
        /// The snapshot, to restore with [`Snapshots::restore`](keel_snapshot::Snapshots::restore).
        id: keel_snapshot::SnapshotId,
    },
    /// A hook's message for the person (`systemMessage` in its JSON output), not for the
    /// model.
    HookMessage {
        /// The event the hook ran for.
        event: HookEvent,
        /// The message.
        message: String,
    },
    /// keel mended a call the model got almost right (see [`repair`](crate::repair)) before
    /// running it: a call written in the reply's text, or a tool or argument name off by case
    /// or separators. The reply in the history carries a note saying the same.
    ToolCallRepaired {
        /// What was mended, with the call's id.
        repair: crate::repair::ToolCallRepair,
    },
    /// Something went wrong that does not stop the run (a hook failed, the session file
    /// could not be written, no snapshot could be taken before a call).
    Warning {
        /// What happened.
        message: String,
    },
    /// A message was added to the history: a reply of the model (also one cut short by a
    /// cancellation), the results of its tool calls, a `Stop` hook's reason, or notices from
    /// the [`Notifier`](crate::Notifier). The prompt itself is not reported. A user message
    /// that follows another (notices after tool results) is reported as it was added,
    /// though the history holds it merged into the one before.
    MessageAdded {
        /// The message as it is now in the history.
        message: Message,
    },
    /// The run ended. Always the last event.
    Finished(RunOutcome),
}
