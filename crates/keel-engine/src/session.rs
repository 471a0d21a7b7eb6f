//! A session: one conversation in one directory, and the loop that runs each prompt.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures::{Stream, StreamExt};
use keel_provider::{
    CompletionRequest, ContentBlock, InvalidToolInput, Message, ProviderError, ResponseAssembler,
    Role, StopReason, StreamEvent, ToolCall, ToolInput, ToolUseResponse, Usage,
};
use keel_snapshot::SnapshotPoint;
use keel_tool::{Effect, ToolContext, ToolOutput};
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::agent::Agent;
use crate::approval::{ApprovalRequest, ApprovalScope, Decision};
use crate::compaction::{Compaction, CompactionError, compact, estimate_tokens, needs_compaction};
use crate::events::{AgentEvent, Compacted, RunOutcome, Stop};
use crate::failure::{FailureKind, RunFailure};
use crate::history::{
    INTERRUPTED, canonicalize, check_rewind, insert_result, prompt_boundary, unique_ids_from,
};
use crate::hooks::{HookEvent, HookInput, HookOutcome, HookReport, PermissionDecision};
use crate::permissions::Verdict;
use crate::session_store::{SessionError, SessionLog, SessionRecord};

/// How many replies cut off at the output limit in a row are answered before the run fails.
const MAX_CUT_REPLIES: u32 = 3;
/// How many times `Stop` hooks may send the model back to work in one run.
const MAX_STOP_BLOCKS: u32 = 3;
/// The wait before asking again for a reply cut off mid-stream; doubled each time, capped.
const STREAM_RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(250);
const STREAM_RETRY_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(4);
/// The longest summary of a call in a snapshot, in characters.
const SNAPSHOT_SUMMARY_CHARS: usize = 200;

/// Cancels the run in progress of a session; cheap to clone and send to another task.
#[derive(Debug, Clone)]
pub struct CancelHandle {
    current: Arc<Mutex<CancellationToken>>,
}

impl CancelHandle {
    /// Cancels the run in progress: the model call or tool running now is stopped promptly,
    /// and the run ends with [`Stop::Cancelled`]. The next prompt starts afresh.
    pub fn cancel(&self) {
        if let Ok(token) = self.current.lock() {
            token.cancel();
        }
    }
}

/// A conversation: its history, its usage and the tools' approvals so far.
pub struct Session {
    agent: Agent,
    id: String,
    cwd: PathBuf,
    history: Vec<Message>,
    usage: Usage,
    /// The scopes the person answered "always" for.
    always_allowed: HashSet<ApprovalScope>,
    cancel: Arc<Mutex<CancellationToken>>,
    /// In a mutex so that `Session` is `Sync` and results of parallel calls can be written
    /// as each ends.
    log: Option<Mutex<Box<dyn SessionLog>>>,
    /// Where the current (or last) run's prompt starts, as a length to rewind to.
    run_start: usize,
    persist_error: Option<String>,
    /// Whether `SessionStart` hooks have run.
    started: bool,
    /// The last model call's usage and how many messages its prompt held.
    last_report: Option<(Usage, usize)>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("cwd", &self.cwd)
            .field("messages", &self.history.len())
            .field("usage", &self.usage)
            .finish_non_exhaustive()
    }
}

/// A tool call taken out of a reply.
#[derive(Debug, Clone)]
struct OwnedCall {
    id: String,
    name: String,
    input: Value,
    invalid: Option<InvalidToolInput>,
}

impl From<ToolCall<'_>> for OwnedCall {
    fn from(call: ToolCall<'_>) -> Self {
        let (input, invalid) = match call.input {
            ToolInput::Valid(input) => (input.clone(), None),
            ToolInput::Invalid(bad) => (Value::Object(serde_json::Map::new()), Some(bad.clone())),
        };
        Self {
            id: call.id.to_owned(),
            name: call.name.to_owned(),
            input,
            invalid,
        }
    }
}

impl OwnedCall {
    fn as_call(&self) -> ToolCall<'_> {
        ToolCall {
            id: &self.id,
            name: &self.name,
            input: match &self.invalid {
                Some(bad) => ToolInput::Invalid(bad),
                None => ToolInput::Valid(&self.input),
            },
        }
    }
}

/// What to do with one call.
enum Plan {
    Run { read_only: bool },
    Answer(ToolOutput),
}

/// How a model call went.
enum ModelTurn {
    Reply(ToolUseResponse),
    Cancelled {
        partial_text: String,
    },
    Failed(ProviderError),
    /// The reply began and was then cut off by a fault a new request may not meet (see
    /// [`ProviderError::is_cut_mid_reply`]); only [`Session::call_model`] makes it, and
    /// [`Session::call_model_retrying`] turns it into a retry or a failure.
    CutOff(ProviderError),
}

/// The running totals of one run.
#[derive(Default)]
struct RunState {
    stop_blocks: u32,
    /// The final reply was cut off at the output limit.
    cut_at_end: bool,
    iterations: u32,
    usage: Usage,
    cost_usd: Option<f64>,
    warned: bool,
    cut_replies: u32,
    last_text: String,
    failed_tools: Vec<String>,
}

type Sink = Option<UnboundedSender<AgentEvent>>;

fn emit(sink: &Sink, event: AgentEvent) {
    if let Some(sender) = sink {
        // A listener that went away does not stop the run.
        let _ = sender.send(event);
    }
}

impl Session {
    /// A session that continues `history`, logging to `log` (whose records already hold
    /// `history`).
    pub(crate) fn with_history(
        agent: Agent,
        cwd: PathBuf,
        id: String,
        history: Vec<Message>,
        log: Option<Box<dyn SessionLog>>,
    ) -> Self {
        Self {
            agent,
            id,
            cwd,
            run_start: history.len(),
            history,
            usage: Usage::default(),
            always_allowed: HashSet::new(),
            cancel: Arc::new(Mutex::new(CancellationToken::new())),
            log: log.map(Mutex::new),
            persist_error: None,
            started: false,
            last_report: None,
        }
    }

    /// The first error the session store reported, if any: the run went on, but the session
    /// file may be missing what came after.
    pub fn persistence_error(&self) -> Option<&str> {
        self.persist_error.as_deref()
    }

    /// Writes `record` to the session log, if any.
    fn write_record(&self, record: &SessionRecord) -> Result<(), SessionError> {
        let Some(log) = &self.log else {
            return Ok(());
        };
        let mut log = log
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        log.append(record)
    }

    fn log_record(&mut self, record: &SessionRecord) {
        if let Err(err) = self.write_record(record) {
            self.note_persist_error(err.to_string());
        }
    }

    fn note_persist_error(&mut self, error: String) {
        tracing::warn!(session = %self.id, "session not saved: {error}");
        if self.persist_error.is_none() {
            self.persist_error = Some(error);
        }
    }

    /// Makes what was written durable (the end of a turn).
    fn sync(&mut self) {
        let result = match self.log.as_mut() {
            Some(log) => log
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .flush(),
            None => return,
        };
        if let Err(err) = result {
            self.note_persist_error(err.to_string());
        }
    }

    /// Puts the history in canonical form; a change (none is expected in a live session) is
    /// written as the whole history, so the file replays to exactly what is in memory.
    fn canonicalize_history(&mut self) {
        let fixes = canonicalize(&mut self.history);
        if fixes > 0 {
            tracing::warn!(session = %self.id, fixes, "the history needed repairs");
            if self.log.is_some() {
                let record = SessionRecord::Compacted {
                    messages: self.history.clone(),
                    before_tokens: 0,
                    after_tokens: 0,
                };
                self.log_record(&record);
            }
        }
    }

    /// Writes `message` to the log, then adds it to the history: a user message right after
    /// another is merged into it (replay merges the same way), so roles always alternate.
    fn append(&mut self, message: Message) {
        self.log_record(&SessionRecord::message(message.clone()));
        match self.history.last_mut() {
            Some(last) if last.role == Role::User && message.role == Role::User => {
                last.content.extend(message.content);
            }
            _ => self.history.push(message),
        }
    }

    /// Rewinds the conversation to its first `history_len` messages, e.g. the
    /// [`SnapshotPoint::history_len`] of a snapshot being restored: the history is cut there
    /// and a [`SessionRecord::Rewound`] is written, so a resumed session continues from the
    /// same point. Refused ([`SessionError::InvalidRewind`]) when `history_len` is past the
    /// end or would split a call from its result; a log that cannot be written is an error
    /// and the history is left as it was. A compaction since the point counts messages
    /// anew.
    pub fn rewind_to(&mut self, history_len: usize) -> Result<(), SessionError> {
        check_rewind(&self.history, history_len).map_err(|reason| SessionError::InvalidRewind {
            id: self.id.clone(),
            history_len,
            reason,
        })?;
        if let Some(log) = self.log.as_mut() {
            let log = log
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            log.append(&SessionRecord::Rewound { history_len })?;
            log.flush()?;
        }
        self.history.truncate(history_len);
        self.run_start = self.run_start.min(history_len);
        self.last_report = None;
        Ok(())
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The working directory.
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The conversation so far.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// Tokens used by every run of this session.
    pub fn usage(&self) -> Usage {
        self.usage
    }

    /// A handle that cancels the run in progress.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            current: self.cancel.clone(),
        }
    }

    /// The model this session calls.
    pub fn model(&self) -> &str {
        &self.agent.model
    }

    /// Calls `model` from the next request on (the history is kept).
    pub fn set_model(&mut self, model: impl Into<String>) {
        self.agent.model = model.into();
        // The last usage report was another model's count.
        self.last_report = None;
    }

    /// Compacts the history now, whatever its size (`/compact`): older turns become a summary
    /// written by the model, the original request and the latest turns stay. Returns the
    /// estimated tokens before and after, and the usage of the summary call.
    pub async fn compact_now(&mut self) -> Result<Compacted, CompactionError> {
        let cancel = self.start_run();
        let compaction = self.summarize(&cancel).await?;
        Ok(self.apply_compaction(compaction))
    }

    /// Asks the model for a compacted history, unless `cancel` fires first.
    async fn summarize(&self, cancel: &CancellationToken) -> Result<Compaction, CompactionError> {
        let request = self.request();
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(CompactionError::Cancelled),
            result = compact(
                self.agent.provider.as_ref(),
                &self.agent.model,
                request.system.as_deref(),
                &request.tools,
                &self.history,
                &self.agent.compaction,
            ) => result,
        }
    }

    /// Puts `compaction`'s history in place and logs it; returns what it did.
    fn apply_compaction(&mut self, compaction: Compaction) -> Compacted {
        self.usage.add(&compaction.usage);
        let cost_usd = self
            .agent
            .catalog
            .cost(&self.agent.model, &compaction.usage);
        self.log_record(&SessionRecord::usage(compaction.usage, cost_usd));
        self.history = compaction.messages;
        self.last_report = None;
        self.log_record(&SessionRecord::Compacted {
            messages: self.history.clone(),
            before_tokens: compaction.before_tokens,
            after_tokens: compaction.after_tokens,
        });
        self.sync();
        Compacted {
            before_tokens: compaction.before_tokens,
            after_tokens: compaction.after_tokens,
            usage: compaction.usage,
            cost_usd,
        }
    }

    /// Adds the notices waiting for this session, if any, as one user message (merged into
    /// the tool results before it, if any).
    async fn take_notices(&mut self, sink: &Sink) {
        let Some(notifier) = self.agent.notifier.clone() else {
            return;
        };
        let notices = notifier.take(&self.id).await;
        if notices.is_empty() {
            return;
        }
        let blocks = notices
            .into_iter()
            .map(|notice| ContentBlock::text(format!("[notification] {notice}")))
            .collect();
        self.add_message(Message::new(Role::User, blocks), sink);
    }

    /// Appends (and logs) a message the model or the tools produced, and reports it.
    fn add_message(&mut self, message: Message, sink: &Sink) {
        if sink.is_some() {
            emit(
                sink,
                AgentEvent::MessageAdded {
                    message: message.clone(),
                },
            );
        }
        self.append(message);
    }

    /// Runs `prompt` to its end.
    pub async fn run(&mut self, prompt: &str) -> RunOutcome {
        self.run_with(prompt, None).await
    }

    /// Runs `prompt`, streaming what happens; the last event is [`AgentEvent::Finished`].
    pub fn run_streaming<'a>(
        &'a mut self,
        prompt: &'a str,
    ) -> impl Stream<Item = AgentEvent> + Send + 'a {
        async_stream::stream! {
            let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
            let run = self.run_with(prompt, Some(sender));
            tokio::pin!(run);
            let mut running = true;
            loop {
                tokio::select! {
                    biased;
                    event = receiver.recv() => match event {
                        Some(event) => yield event,
                        None => break,
                    },
                    _ = &mut run, if running => running = false,
                }
            }
        }
    }

    /// A fresh token for a new run, unless one is live.
    fn start_run(&self) -> CancellationToken {
        match self.cancel.lock() {
            Ok(mut current) => {
                if current.is_cancelled() {
                    *current = CancellationToken::new();
                }
                current.clone()
            }
            Err(_) => CancellationToken::new(),
        }
    }

    async fn run_with(&mut self, prompt: &str, sink: Sink) -> RunOutcome {
        let span = tracing::info_span!("run", session = %self.id, model = %self.agent.model);
        async move {
            let cancel = self.start_run();
            let mut content = vec![ContentBlock::text(prompt)];
            if !self.started {
                self.started = true;
                let report = self
                    .hooks(HookInput::session_start(&self.id, &self.cwd), &sink)
                    .await;
                // What SessionStart hooks print is context for the model.
                content.extend(report.messages.into_iter().map(ContentBlock::text));
            }
            self.canonicalize_history();
            self.run_start = prompt_boundary(&self.history);
            // After a run that stopped with results, notices or a prompt left unanswered, the
            // prompt joins that user message: never two user messages in a row.
            self.append(Message::new(Role::User, content));
            let mut state = RunState {
                cost_usd: Some(0.0),
                ..RunState::default()
            };
            self.sync();
            let stop = self.iterate(&cancel, &sink, &mut state).await;
            // Whatever happened, the history keeps its invariants for the next prompt.
            self.canonicalize_history();
            let outcome = RunOutcome {
                text: final_text(&stop, &state, self.agent.max_tokens),
                stop,
                iterations: state.iterations,
                usage: state.usage,
                cost_usd: state.cost_usd,
            };
            self.log_record(&SessionRecord::Outcome {
                stop: outcome.stop.name().to_owned(),
                text: outcome.text.clone(),
                iterations: outcome.iterations,
                usage: outcome.usage,
                cost_usd: outcome.cost_usd,
            });
            self.sync();
            emit(&sink, AgentEvent::Finished(outcome.clone()));
            outcome
        }
        .instrument(span)
        .await
    }

    async fn iterate(
        &mut self,
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
    ) -> Stop {
        let limit = self.agent.max_iterations;
        let warn_at = (limit * 4).div_ceil(5);
        loop {
            if cancel.is_cancelled() {
                return Stop::Cancelled;
            }
            if state.iterations >= limit {
                return Stop::MaxIterations;
            }
            if let Some(budget) = self.agent.output_token_budget
                && state.usage.output_tokens >= budget
            {
                return Stop::TokenBudget {
                    used: state.usage.output_tokens,
                    budget,
                };
            }
            if !state.warned && limit > 1 && state.iterations >= warn_at {
                state.warned = true;
                emit(
                    sink,
                    AgentEvent::IterationWarning {
                        used: state.iterations,
                        limit,
                    },
                );
                if !self
                    .agent
                    .approver
                    .continue_after_warning(state.iterations, limit)
                    .await
                {
                    return Stop::MaxIterations;
                }
            }
            state.iterations += 1;
            emit(
                sink,
                AgentEvent::TurnStarted {
                    iteration: state.iterations,
                },
            );
            self.canonicalize_history();
            self.take_notices(sink).await;
            let mut request = self.request();
            let estimate = estimate_tokens(
                request.system.as_deref(),
                &request.tools,
                &request.messages,
                self.last_report,
            );
            if needs_compaction(
                estimate,
                &self.agent.model,
                &self.agent.catalog,
                &self.agent.compaction,
            ) {
                if let Some(stop) = self.compact(cancel, sink, state).await {
                    return stop;
                }
                request = self.request();
            }
            let turn_span = tracing::info_span!("turn", iteration = state.iterations);
            let mut turn = self
                .call_model_retrying(&request, cancel, sink)
                .instrument(turn_span.clone())
                .await;
            if let ModelTurn::Failed(ProviderError::ContextLengthExceeded { .. }) = &turn {
                // Too long for the model: compact, then try once more.
                if let Some(stop) = self.compact(cancel, sink, state).await {
                    return stop;
                }
                request = self.request();
                turn = self.call_model_retrying(&request, cancel, sink).await;
            }
            let prompt_messages = request.messages.len();
            let mut response = match turn {
                ModelTurn::Reply(response) => response,
                ModelTurn::Cancelled { partial_text } => {
                    // What the user saw stays in the history.
                    if !partial_text.is_empty() {
                        self.add_message(Message::assistant(partial_text), sink);
                    }
                    return Stop::Cancelled;
                }
                ModelTurn::Failed(error) | ModelTurn::CutOff(error) => {
                    return Stop::Failed(RunFailure::from(error));
                }
            };
            self.account(&response, sink, state);
            self.last_report = Some((response.usage, prompt_messages));
            let text = response.text();
            if !text.trim().is_empty() {
                state.last_text = text.clone();
            }
            if !response.content.is_empty() {
                // Missing or reused call ids are replaced before anything runs or is saved.
                let start = self.history.len();
                self.history.push(Message::new(
                    Role::Assistant,
                    std::mem::take(&mut response.content),
                ));
                unique_ids_from(&mut self.history, start);
                if let Some(reply) = self.history.pop() {
                    response.content = reply.content;
                }
                // Write-ahead: the reply and its calls are in the session file before the
                // first call runs.
                self.add_message(response.to_message(), sink);
            }
            if response.stop_reason == StopReason::Refusal {
                return Stop::Refused {
                    reason: if text.trim().is_empty() {
                        "the model declined to answer".into()
                    } else {
                        text
                    },
                };
            }
            let calls: Vec<OwnedCall> = response
                .tool_calls()
                .into_iter()
                .map(OwnedCall::from)
                .collect();
            if calls.is_empty() {
                if response.stop_reason == StopReason::PauseTurn {
                    continue;
                }
                state.cut_at_end = response.stop_reason == StopReason::MaxTokens;
                if state.stop_blocks < MAX_STOP_BLOCKS && self.agent.hooks.handles(HookEvent::Stop)
                {
                    let input = HookInput::stop(&self.id, &self.cwd, state.stop_blocks > 0);
                    if let HookOutcome::Block { reason } = self.hooks(input, sink).await.outcome {
                        // A Stop hook sends the model back to work with its reason.
                        state.stop_blocks += 1;
                        self.add_message(Message::user(reason), sink);
                        continue;
                    }
                }
                return Stop::Completed;
            }
            if response.stop_reason == StopReason::MaxTokens {
                state.cut_replies += 1;
                if state.cut_replies > MAX_CUT_REPLIES {
                    let results = calls
                        .iter()
                        .map(|c| ContentBlock::tool_result(&c.id, INTERRUPTED, true))
                        .collect();
                    self.add_message(Message::new(Role::User, results), sink);
                    return Stop::Failed(RunFailure::new(
                        FailureKind::OutputLimit,
                        format!(
                            "the model's replies were cut off at the output limit ({} tokens) {} times in a row",
                            self.agent.max_tokens, state.cut_replies
                        ),
                    ));
                }
            } else {
                state.cut_replies = 0;
            }
            let results = self
                .run_tools(&calls, cancel, sink, state)
                .instrument(turn_span)
                .await;
            // Each result is in the session file already, written as its call ended.
            for result in results {
                insert_result(&mut self.history, result);
            }
            if sink.is_some()
                && let Some(message) = self.history.last()
            {
                emit(
                    sink,
                    AgentEvent::MessageAdded {
                        message: message.clone(),
                    },
                );
            }
            self.sync();
            if cancel.is_cancelled() {
                return Stop::Cancelled;
            }
        }
    }

    /// Replaces older turns with a summary. `Some(stop)` ends the run (cancelled while
    /// compacting); a compaction that cannot happen or fails is a warning, and the run goes on.
    async fn compact(
        &mut self,
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
    ) -> Option<Stop> {
        match self.summarize(cancel).await {
            Err(CompactionError::Cancelled) => return Some(Stop::Cancelled),
            Ok(compaction) => {
                let done = self.apply_compaction(compaction);
                state.usage.add(&done.usage);
                state.cost_usd = state.cost_usd.zip(done.cost_usd).map(|(a, b)| a + b);
                emit(
                    sink,
                    AgentEvent::Compacted {
                        before_tokens: done.before_tokens,
                        after_tokens: done.after_tokens,
                    },
                );
            }
            Err(CompactionError::NothingToCompact) => {
                tracing::debug!("the history is too short to compact");
            }
            Err(err) => {
                tracing::warn!("compaction failed: {err}");
                emit(
                    sink,
                    AgentEvent::Warning {
                        message: format!("compaction failed: {err}"),
                    },
                );
            }
        }
        None
    }

    fn request(&self) -> CompletionRequest {
        let mut request = CompletionRequest::new(self.agent.model.clone());
        request.system = self.agent.system_prompt.clone();
        request.messages = self.history.clone();
        request.tools = self.agent.tools.definitions();
        request.max_tokens = self.agent.max_tokens;
        request
    }

    fn account(&mut self, response: &ToolUseResponse, sink: &Sink, state: &mut RunState) {
        state.usage.add(&response.usage);
        self.usage.add(&response.usage);
        let cost = self.agent.catalog.cost(&self.agent.model, &response.usage);
        self.log_record(&SessionRecord::usage(response.usage, cost));
        state.cost_usd = match (state.cost_usd, cost) {
            (Some(total), Some(cost)) => Some(total + cost),
            _ => None,
        };
        emit(
            sink,
            AgentEvent::Usage {
                call: response.usage,
                total: state.usage,
                cost_usd: state.cost_usd,
            },
        );
    }

    /// [`Session::call_model`], asking again (up to the agent's `stream_retries`, after a
    /// short backoff) when the reply is cut off mid-stream: the partial reply is dropped —
    /// nothing of it is in the history or the session file — and
    /// [`AgentEvent::ReplyDiscarded`] tells listeners to drop what they showed of it.
    async fn call_model_retrying(
        &self,
        request: &CompletionRequest,
        cancel: &CancellationToken,
        sink: &Sink,
    ) -> ModelTurn {
        let max_attempts = self.agent.stream_retries;
        let mut attempt = 0;
        let mut wait = STREAM_RETRY_BACKOFF;
        loop {
            let error = match self.call_model(request, cancel, sink).await {
                ModelTurn::CutOff(error) if attempt < max_attempts => error,
                ModelTurn::CutOff(error) => return ModelTurn::Failed(error),
                turn => return turn,
            };
            attempt += 1;
            tracing::warn!(attempt, max_attempts, %error, "reply cut off mid-stream; asking again");
            emit(
                sink,
                AgentEvent::ReplyDiscarded {
                    attempt,
                    max_attempts,
                    error: error.to_string(),
                },
            );
            tokio::select! {
                biased;
                () = cancel.cancelled() => {
                    return ModelTurn::Cancelled { partial_text: String::new() };
                }
                () = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(STREAM_RETRY_BACKOFF_MAX);
        }
    }

    async fn call_model(
        &self,
        request: &CompletionRequest,
        cancel: &CancellationToken,
        sink: &Sink,
    ) -> ModelTurn {
        let mut stream = self.agent.provider.stream(request);
        let mut assembler = ResponseAssembler::new();
        let mut partial_text = String::new();
        // Whether any of the reply has arrived: a fault after that is the loop's to retry
        // (the provider retries only before it).
        let mut began = false;
        loop {
            let next = tokio::select! {
                biased;
                () = cancel.cancelled() => return ModelTurn::Cancelled { partial_text },
                next = stream.next() => next,
            };
            match next {
                None => break,
                Some(Err(error)) if began && error.is_cut_mid_reply() => {
                    return ModelTurn::CutOff(error);
                }
                Some(Err(error)) => return ModelTurn::Failed(error),
                Some(Ok(event)) => {
                    began |= !matches!(
                        event,
                        StreamEvent::Retrying { .. } | StreamEvent::MessageStart { .. }
                    );
                    match &event {
                        StreamEvent::TextDelta { text, .. } => {
                            partial_text.push_str(text);
                            emit(sink, AgentEvent::TextDelta { text: text.clone() });
                        }
                        StreamEvent::Retrying {
                            attempt,
                            wait,
                            error,
                        } => emit(
                            sink,
                            AgentEvent::Retrying {
                                attempt: *attempt,
                                wait: *wait,
                                error: error.clone(),
                            },
                        ),
                        _ => {}
                    }
                    assembler.push(event);
                }
            }
        }
        match assembler.finish() {
            Ok(response) => ModelTurn::Reply(response),
            Err(error) if began && error.is_cut_mid_reply() => ModelTurn::CutOff(error),
            Err(error) => ModelTurn::Failed(error),
        }
    }

    /// Decides, runs and answers every call, in the model's order: one result per call, each
    /// written to the session log as soon as it is known.
    async fn run_tools(
        &mut self,
        calls: &[OwnedCall],
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
    ) -> Vec<ContentBlock> {
        let ctx = ToolContext::new(&self.cwd, &self.id).with_cancel(cancel.clone());
        let mut plans = Vec::with_capacity(calls.len());
        for call in calls {
            plans.push(self.plan(call, cancel, sink).await);
        }
        let mut outputs: Vec<Option<ToolOutput>> = vec![None; calls.len()];
        let mut log_errors = Vec::new();
        for (i, plan) in plans.iter().enumerate() {
            if let Plan::Answer(output) = plan {
                log_errors.extend(self.write_result(&calls[i], output));
                outputs[i] = Some(output.clone());
            }
        }
        let mut i = 0;
        while i < calls.len() {
            match &plans[i] {
                Plan::Answer(_) => i += 1,
                Plan::Run { read_only: true } => {
                    // Consecutive read-only calls run together.
                    let end = (i..calls.len())
                        .find(|&j| !matches!(plans[j], Plan::Run { read_only: true }))
                        .unwrap_or(calls.len());
                    let batch = calls[i..end].iter().map(|call| async {
                        let output = if cancel.is_cancelled() {
                            self.interrupted(call, sink)
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
                        outputs[i + offset] = Some(output);
                    }
                    i = end;
                }
                Plan::Run { read_only: false } => {
                    let call = &calls[i];
                    let output = if cancel.is_cancelled() {
                        self.interrupted(call, sink)
                    } else {
                        self.snapshot(call, sink).await;
                        self.dispatch(call, &ctx, sink).await
                    };
                    log_errors.extend(self.write_result(call, &output));
                    outputs[i] = Some(output);
                    i += 1;
                }
            }
        }
        for error in log_errors {
            self.note_persist_error(error);
        }
        calls
            .iter()
            .zip(outputs)
            .map(|(call, output)| {
                let output = output.unwrap_or_else(|| ToolOutput::error(INTERRUPTED));
                if output.is_error {
                    let first_line = output.content.lines().next().unwrap_or_default();
                    state
                        .failed_tools
                        .push(format!("{}: {first_line}", call.name));
                }
                result_block(call, &output)
            })
            .collect()
    }

    /// Writes `call`'s result to the session log; the error, if any, as text.
    fn write_result(&self, call: &OwnedCall, output: &ToolOutput) -> Option<String> {
        let record = SessionRecord::ToolResult {
            result: result_block(call, output),
        };
        self.write_record(&record).err().map(|err| err.to_string())
    }

    /// Snapshots the workspace before `call`, if the agent has a snapshot store; reports
    /// the snapshot, or a warning when it failed (the call runs all the same).
    async fn snapshot(&self, call: &OwnedCall, sink: &Sink) {
        let Some(snapshots) = self.agent.snapshots.clone() else {
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

    /// Whether a call runs, asking the approver for gated ones.
    ///
    /// Deny rules and hooks that block or deny refuse any call. A protected call
    /// ([`Effect::Protected`]) always reaches the approver: allow rules, hooks answering
    /// `allow` and earlier "always" answers never skip the question, and "always" is not
    /// remembered for it. [`Decision::Cancel`] cancels the run.
    async fn plan(&mut self, call: &OwnedCall, cancel: &CancellationToken, sink: &Sink) -> Plan {
        if cancel.is_cancelled() {
            return self.answer(call, ToolOutput::error(INTERRUPTED), sink);
        }
        let effect = self.agent.tools.effect(call.as_call());
        let read_only = effect.is_read_only();
        let protected = matches!(effect, Effect::Protected { .. });
        let verdict = self.agent.permissions.check(&call.name, &call.input);
        if let Verdict::Deny { rule } = &verdict {
            let text = format!("denied: the permission rule {rule} forbids this call");
            return self.answer(call, ToolOutput::error(text), sink);
        }
        let mut must_ask = false;
        if call.invalid.is_none() && self.agent.hooks.handles(HookEvent::PreToolUse) {
            let input =
                HookInput::pre_tool_use(&self.id, &self.cwd, &call.name, call.input.clone());
            match self.hooks(input, sink).await.outcome {
                HookOutcome::Block { reason } => {
                    return self.answer(call, ToolOutput::error(reason), sink);
                }
                HookOutcome::Permission {
                    decision: PermissionDecision::Deny,
                    reason,
                } => {
                    let text = format!(
                        "denied by a hook: {}",
                        reason.unwrap_or_else(|| "no reason given".into())
                    );
                    return self.answer(call, ToolOutput::error(text), sink);
                }
                HookOutcome::Permission {
                    decision: PermissionDecision::Allow,
                    ..
                } if !protected => return Plan::Run { read_only },
                HookOutcome::Permission {
                    decision: PermissionDecision::Ask,
                    ..
                } => must_ask = true,
                _ => {}
            }
        }
        if matches!(verdict, Verdict::Allow { .. }) && !must_ask && !protected {
            return Plan::Run { read_only };
        }
        let reason = match &effect {
            Effect::Destructive { reason } | Effect::Protected { reason } => reason.clone(),
            _ if must_ask => "a hook asks for approval".to_owned(),
            _ => return Plan::Run { read_only },
        };
        let scope = ApprovalScope::of(&call.name, &call.input);
        if !protected && self.always_allowed.contains(&scope) {
            return Plan::Run { read_only: false };
        }
        emit(
            sink,
            AgentEvent::ApprovalRequested {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
                reason: reason.clone(),
            },
        );
        let request = ApprovalRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            input: call.input.clone(),
            effect: effect.clone(),
            reason: reason.clone(),
            scope,
        };
        let decision = tokio::select! {
            biased;
            () = cancel.cancelled() => Decision::Cancel,
            decision = self.agent.approver.approve(&request) => decision,
        };
        match decision {
            Decision::Allow => Plan::Run { read_only: false },
            Decision::AllowAlways => {
                // A protected call is asked every time.
                if !protected {
                    self.always_allowed.insert(request.scope);
                }
                Plan::Run { read_only: false }
            }
            Decision::Cancel => {
                // The person stopped: the whole run ends, as if its cancel handle had fired.
                cancel.cancel();
                self.answer(call, ToolOutput::error(INTERRUPTED), sink)
            }
            Decision::Deny(reason) if reason == INTERRUPTED => {
                self.answer(call, ToolOutput::error(INTERRUPTED), sink)
            }
            Decision::Deny(reason) => {
                self.answer(call, ToolOutput::error(format!("denied: {reason}")), sink)
            }
        }
    }

    /// Runs the hooks for `input`; failures become warnings, never errors.
    async fn hooks(&self, input: HookInput, sink: &Sink) -> HookReport {
        if !self.agent.hooks.handles(input.hook_event_name) {
            return HookReport::default();
        }
        let report = self.agent.hooks.run(&input).await;
        for failure in &report.failures {
            tracing::warn!(session = %self.id, "hook failed: {failure}");
            emit(
                sink,
                AgentEvent::Warning {
                    message: format!("hook failed: {failure}"),
                },
            );
        }
        report
    }

    /// A call answered `interrupted` without running it.
    fn interrupted(&self, call: &OwnedCall, sink: &Sink) -> ToolOutput {
        let output = ToolOutput::error(INTERRUPTED);
        finished(sink, call, &output, std::time::Duration::ZERO);
        output
    }

    /// A call answered without running it.
    fn answer(&self, call: &OwnedCall, output: ToolOutput, sink: &Sink) -> Plan {
        finished(sink, call, &output, std::time::Duration::ZERO);
        Plan::Answer(output)
    }

    async fn dispatch(&self, call: &OwnedCall, ctx: &ToolContext, sink: &Sink) -> ToolOutput {
        emit(
            sink,
            AgentEvent::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            },
        );
        let started = Instant::now();
        let mut output = self.agent.tools.dispatch(call.as_call(), ctx).await;
        if self.agent.hooks.handles(HookEvent::PostToolUse) {
            let response =
                serde_json::json!({"content": output.content, "is_error": output.is_error});
            let input = HookInput::post_tool_use(
                &self.id,
                &self.cwd,
                &call.name,
                call.input.clone(),
                response,
            );
            let report = self.hooks(input, sink).await;
            // Feedback from PostToolUse hooks goes to the model with the result.
            let feedback: Vec<String> = match report.outcome {
                HookOutcome::Block { reason } => vec![reason],
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

/// The `tool_result` block answering `call`.
fn result_block(call: &OwnedCall, output: &ToolOutput) -> ContentBlock {
    ContentBlock::tool_result(&call.id, output.content.clone(), output.is_error)
}

/// One line for a person saying what a call does: a command's `command`, a file tool's
/// `path`, else its input as compact JSON; at most [`SNAPSHOT_SUMMARY_CHARS`] characters.
fn call_summary(input: &Value) -> String {
    let text = ["command", "path"]
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str))
        .map_or_else(|| input.to_string(), str::to_owned);
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::session_store::shorten(&line, SNAPSHOT_SUMMARY_CHARS)
}

/// Reports that `call` has its result.
fn finished(sink: &Sink, call: &OwnedCall, output: &ToolOutput, duration: std::time::Duration) {
    emit(
        sink,
        AgentEvent::ToolCallFinished {
            id: call.id.clone(),
            name: call.name.clone(),
            output: output.content.clone(),
            is_error: output.is_error,
            duration,
        },
    );
}

/// ` Its last message: ...` when the model said something, for a run that stopped early.
fn last_message(state: &RunState) -> String {
    if state.last_text.trim().is_empty() {
        String::new()
    } else {
        format!(" Its last message: {}", state.last_text.trim())
    }
}

/// The outcome's text: never empty, never silent about what happened.
fn final_text(stop: &Stop, state: &RunState, max_tokens: u32) -> String {
    let failures = if state.failed_tools.is_empty() {
        String::new()
    } else {
        format!(
            " Tool calls that failed: {}.",
            state.failed_tools.join("; ")
        )
    };
    match stop {
        Stop::Completed if state.cut_at_end => format!(
            "{}\n\n[the reply was cut off at the output limit ({} tokens)]",
            state.last_text.trim_end(),
            max_tokens
        ),
        Stop::Completed if !state.last_text.trim().is_empty() => state.last_text.clone(),
        Stop::Completed => format!(
            "The model ended its turn without a message after {} model call(s).{failures}",
            state.iterations
        ),
        Stop::MaxIterations => {
            let last = last_message(state);
            format!(
                "Stopped after {} model calls, the iteration limit; the task may be unfinished \
                 — send another prompt to go on.{failures}{last}",
                state.iterations
            )
        }
        Stop::Cancelled => format!(
            "Cancelled after {} model call(s); the session can go on with the next prompt.{failures}",
            state.iterations
        ),
        Stop::TokenBudget { used, budget } => {
            let last = last_message(state);
            format!(
                "Stopped after {} model call(s): the output-token budget of {budget} was used up \
                 ({used} written); the task may be unfinished.{failures}{last}",
                state.iterations
            )
        }
        Stop::Refused { reason } => reason.clone(),
        Stop::Failed(failure) => format!(
            "The run failed: {}. The session is saved; send another prompt to go on.{failures}",
            failure.message
        ),
    }
}
