//! The turn loop: a run from its prompt to its stop, one model call after another, with
//! compaction, notices, `Stop` hooks and retries of replies cut off mid-stream.

use futures::StreamExt;
use keel_provider::{
    CompletionRequest, ContentBlock, Message, ProviderError, ResponseAssembler, Role, StopReason,
    StreamEvent, ToolDefinition, ToolUseResponse,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::outcome::{RunState, final_text};
use super::{OwnedCall, Session, Sink, emit};
use crate::compaction::{Compaction, CompactionError, compact, estimate_tokens, needs_compaction};
use crate::events::{AgentEvent, Compacted, RunOutcome, Stop};
use crate::failure::{FailureKind, RunFailure};
use crate::history::{INTERRUPTED, insert_result, prompt_boundary, unique_ids_from};
use crate::hooks::{CompactTrigger, HookEvent, HookInput, HookOutcome};
use crate::session_store::SessionRecord;

/// How many replies cut off at the output limit in a row are answered before the run fails.
const MAX_CUT_REPLIES: u32 = 3;
/// How many times `Stop` hooks may send the model back to work in one run.
const MAX_STOP_BLOCKS: u32 = 3;
/// The wait before asking again for a reply cut off mid-stream; doubled each time, capped.
const STREAM_RETRY_BACKOFF: std::time::Duration = std::time::Duration::from_millis(250);
const STREAM_RETRY_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(4);

/// How a model call went.
pub(super) enum ModelTurn {
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

impl Session {
    pub(super) async fn run_with(&mut self, prompt: Vec<ContentBlock>, sink: Sink) -> RunOutcome {
        let span = tracing::info_span!("run", session = %self.id, model = %self.config.model());
        async move {
            let cancel = self.start_run();
            // A stop asked for in an earlier run that ended first is stale.
            self.take_stop_request();
            let mut content = prompt;
            let refused = self.before_prompt(&mut content, &sink).await;
            self.canonicalize_history();
            let mut state = RunState {
                cost_usd: Some(0.0),
                ..RunState::default()
            };
            let stop = match refused {
                Some(stop) => stop,
                None => {
                    self.run_start = prompt_boundary(&self.history);
                    // After a run that stopped with results, notices or a prompt left
                    // unanswered, the prompt joins that user message: never two user
                    // messages in a row.
                    self.append(Message::new(Role::User, content));
                    // The prompt is in the file (one write) but not synced before the
                    // request: a crashed process loses nothing written, and the `fdatasync`
                    // after the first round of tool results (or at the end) covers it, off
                    // the path to the first request.
                    self.iterate(&cancel, &sink, &mut state).await
                }
            };
            // Whatever happened, the history keeps its invariants for the next prompt.
            self.canonicalize_history();
            let outcome = RunOutcome {
                text: final_text(&stop, &state, self.config.max_tokens()),
                stop,
                iterations: state.iterations,
                usage: state.usage,
                cost_usd: state.cost_usd,
                cost_by_provider: state.by_provider.clone(),
                repaired_calls: state.repaired_calls,
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

    /// The hooks before a prompt is sent: `SessionStart` (before the session's first) and
    /// `UserPromptSubmit`, neither in a sub-agent's session. What they print is context added
    /// to `content`; `Some(stop)` when one of them stops the run or blocks the prompt, which
    /// is then not sent.
    async fn before_prompt(
        &mut self,
        content: &mut Vec<ContentBlock>,
        sink: &Sink,
    ) -> Option<Stop> {
        let first = !std::mem::replace(&mut self.started, true);
        if self.subagent.is_some() {
            return None;
        }
        let prompt = Message::new(Role::User, content.clone()).text();
        if first {
            let input = HookInput::session_start(&self.id, &self.cwd, self.start_source);
            let report = self.hooks(input, sink).await;
            if let HookOutcome::Stop { reason } = report.outcome {
                return Some(Stop::HookStopped { reason });
            }
            content.extend(report.messages.into_iter().map(ContentBlock::text));
        }
        let input = HookInput::user_prompt_submit(&self.id, &self.cwd, prompt);
        let report = self.hooks(input, sink).await;
        match report.outcome {
            HookOutcome::Block { reason } | HookOutcome::Stop { reason } => {
                Some(Stop::PromptBlocked { reason })
            }
            _ => {
                content.extend(report.messages.into_iter().map(ContentBlock::text));
                None
            }
        }
    }

    /// The turns of a run, one model call each, until a phase ends the run: the
    /// [limits](Self::check_limits), the [turn's request](Self::start_turn), the
    /// [model turn](Self::model_turn), the [reply accepted](Self::accept_reply), then the
    /// [final reply](Self::final_reply) when it makes no calls, else its
    /// [calls answered](Self::answer_calls).
    pub(super) async fn iterate(
        &mut self,
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
    ) -> Stop {
        let limit = self.config.max_iterations();
        loop {
            if let Some(stop) = self.check_limits(cancel, sink, state, limit).await {
                return stop;
            }
            let mut request = match self.start_turn(cancel, sink, state, limit).await {
                Ok(request) => request,
                Err(stop) => return stop,
            };
            let turn_span = tracing::info_span!("turn", iteration = state.iterations);
            let response = match self
                .model_turn(&mut request, &turn_span, cancel, sink, state, limit)
                .await
            {
                Ok(response) => response,
                Err(stop) => return stop,
            };
            let (calls, stop_reason) =
                match self.accept_reply(response, &request.tools, sink, state) {
                    Ok(accepted) => accepted,
                    Err(stop) => return stop,
                };
            let stop = if calls.is_empty() {
                if stop_reason == StopReason::PauseTurn {
                    continue;
                }
                self.final_reply(&stop_reason, sink, state).await
            } else {
                self.answer_calls(&calls, &stop_reason, turn_span, cancel, sink, state)
                    .await
            };
            if let Some(stop) = stop {
                return stop;
            }
        }
    }

    /// The checks before a model call: cancellation, the iteration limit, the output-token
    /// and cost budgets, and once four fifths of the iterations are used, the warning, after
    /// which the approver may end the run. `Some(stop)` ends the run.
    async fn check_limits(
        &self,
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
        limit: u32,
    ) -> Option<Stop> {
        if cancel.is_cancelled() {
            return Some(Stop::Cancelled);
        }
        if state.iterations >= limit {
            return Some(Stop::MaxIterations);
        }
        if let Some(budget) = self.config.output_token_budget()
            && state.usage.output_tokens >= budget
        {
            return Some(Stop::TokenBudget {
                used: state.usage.output_tokens,
                budget,
            });
        }
        // Calls whose price is not known count for nothing: hosts check that the model
        // has a price before they set a budget.
        if let Some(budget_usd) = self.config.cost_budget_usd()
            && state.spent_usd >= budget_usd
        {
            return Some(Stop::CostBudget {
                spent_usd: state.spent_usd,
                budget_usd,
            });
        }
        let warn_at = (limit * 4).div_ceil(5);
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
                .config
                .approver()
                .continue_after_warning(state.iterations, limit)
                .await
            {
                return Some(Stop::MaxIterations);
            }
        }
        None
    }

    /// The start of a turn: counts and announces it, brings the history, the notices and
    /// the tools up to date, and builds its request, compacting the history first when the
    /// request would fill the model's window. `Err(stop)` ends the run (a hook stopped it, or
    /// it was cancelled, while compacting).
    async fn start_turn(
        &mut self,
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
        limit: u32,
    ) -> Result<CompletionRequest, Stop> {
        state.iterations += 1;
        emit(
            sink,
            AgentEvent::TurnStarted {
                iteration: state.iterations,
            },
        );
        self.canonicalize_history();
        self.take_notices(sink).await;
        // Tools that change while the agent runs (an MCP server's) are brought up to
        // date before the request that offers them.
        self.config.tools().refresh_sources().await;
        let request = self.turn_request(state, limit);
        let estimate = estimate_tokens(
            request.system.as_deref(),
            &request.tools,
            &request.messages,
            self.last_report,
        );
        if !needs_compaction(
            estimate,
            self.config.model(),
            self.config.catalog(),
            self.config.compaction(),
        ) {
            return Ok(request);
        }
        if let Some(stop) = self.compact(cancel, sink, state).await {
            return Err(stop);
        }
        Ok(self.turn_request(state, limit))
    }

    /// The model turn: `request` sent and its reply streamed
    /// ([`call_model_recovering`](Self::call_model_recovering): with its retries), then
    /// counted (usage, cost) and reported. `request` is left as last sent. `Err(stop)` ends
    /// the run: cancelled (what was streamed of the reply stays in the history) or failed.
    async fn model_turn(
        &mut self,
        request: &mut CompletionRequest,
        turn_span: &tracing::Span,
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
        limit: u32,
    ) -> Result<ToolUseResponse, Stop> {
        let call_started = std::time::Instant::now();
        let turn = self
            .call_model_recovering(request, turn_span, cancel, sink, state, limit)
            .await?;
        let prompt_messages = request.messages.len();
        let response = match turn {
            ModelTurn::Reply(response) => response,
            ModelTurn::Cancelled { partial_text } => {
                // What the user saw stays in the history.
                if !partial_text.is_empty() {
                    self.add_message(Message::assistant(partial_text), sink);
                }
                return Err(Stop::Cancelled);
            }
            ModelTurn::Failed(error) | ModelTurn::CutOff(error) => {
                return Err(Stop::Failed(RunFailure::from(error)));
            }
        };
        self.account(&response, sink, state);
        emit(
            sink,
            AgentEvent::ReplyFinished {
                stop_reason: response.stop_reason.clone(),
                duration: call_started.elapsed(),
            },
        );
        self.last_report = Some((response.usage, prompt_messages));
        Ok(response)
    }

    /// [`Session::call_model_retrying`] on `request` (in `turn_span`), and when that fails,
    /// once more: after a compaction when the request was too long for the model, then on
    /// the fallback model when the model is overloaded or failing. `request` is rebuilt for
    /// each new try. `Err(stop)` ends the run (a hook stopped it, or it was cancelled, while
    /// compacting).
    async fn call_model_recovering(
        &mut self,
        request: &mut CompletionRequest,
        turn_span: &tracing::Span,
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
        limit: u32,
    ) -> Result<ModelTurn, Stop> {
        let mut turn = self
            .call_model_retrying(request, cancel, sink)
            .instrument(turn_span.clone())
            .await;
        if let ModelTurn::Failed(ProviderError::ContextLengthExceeded { .. }) = &turn {
            // Too long for the model: compact, then try once more.
            if let Some(stop) = self.compact(cancel, sink, state).await {
                return Err(stop);
            }
            *request = self.turn_request(state, limit);
            turn = self.call_model_retrying(request, cancel, sink).await;
        }
        if let ModelTurn::Failed(error) = &turn
            && error.is_retryable()
            && let Some(fallback) = self.config.fallback_model()
            && fallback != self.config.model()
        {
            // The model is overloaded or failing past the provider's retries: the
            // session goes on with the fallback model (Claude Code's --fallback-model).
            let fallback = fallback.to_owned();
            emit(
                sink,
                AgentEvent::Warning {
                    message: format!(
                        "{} failed ({error}); going on with the fallback model {fallback}",
                        self.config.model()
                    ),
                },
            );
            self.set_model(fallback);
            *request = self.turn_request(state, limit);
            turn = self.call_model_retrying(request, cancel, sink).await;
        }
        Ok(turn)
    }

    /// Accepts the model's reply: mends the calls it got almost right (offered `tools`),
    /// keeps its text as the run's last, gives its calls unique ids and records it —
    /// write-ahead: the reply and its calls are in the session file before the first call
    /// runs. Returns its calls and why it ended; `Err(stop)` when the model refused.
    fn accept_reply(
        &mut self,
        mut response: ToolUseResponse,
        tools: &[ToolDefinition],
        sink: &Sink,
        state: &mut RunState,
    ) -> Result<(Vec<OwnedCall>, StopReason), Stop> {
        // Calls the model got almost right are mended, and said to be, before anything
        // runs or is saved.
        let mut repairs = if response.stop_reason == StopReason::MaxTokens {
            Vec::new()
        } else {
            crate::repair::repair_reply(&mut response.content, tools)
        };
        if !repairs.is_empty() && response.stop_reason != StopReason::ToolUse {
            response.stop_reason = StopReason::ToolUse;
        }
        let text = response.text();
        let call_in_text = repairs.iter().any(|repair| {
            repair
                .kinds
                .contains(&crate::repair::RepairKind::CallFromText)
        });
        if !text.trim().is_empty() && !call_in_text {
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
            for mut repair in repairs.drain(..) {
                if let Some(ContentBlock::ToolUse { id, .. }) = response.content.get(repair.block) {
                    repair.call_id.clone_from(id);
                }
                state.repaired_calls += 1;
                tracing::info!(tool = %repair.tool, "repaired a tool call: {}", repair.describe());
                emit(sink, AgentEvent::ToolCallRepaired { repair });
            }
            // Write-ahead: the reply and its calls are in the session file before the
            // first call runs.
            self.add_message(response.to_message(), sink);
        }
        if response.stop_reason == StopReason::Refusal {
            return Err(Stop::Refused {
                reason: if text.trim().is_empty() {
                    "the model declined to answer".into()
                } else {
                    text
                },
            });
        }
        let calls = response
            .tool_calls()
            .into_iter()
            .map(OwnedCall::from)
            .collect();
        Ok((calls, response.stop_reason))
    }

    /// The final reply, one that makes no calls (and did not pause the turn): whether it was
    /// cut off at the output limit, and the `Stop` hooks (`SubagentStop` in a sub-agent's
    /// session), which may send the model back to work with their reason (up to
    /// [`MAX_STOP_BLOCKS`] times a run) or stop the run. `None` when a hook sent the model
    /// back to work; else how the run ends.
    async fn final_reply(
        &mut self,
        stop_reason: &StopReason,
        sink: &Sink,
        state: &mut RunState,
    ) -> Option<Stop> {
        state.cut_at_end = *stop_reason == StopReason::MaxTokens;
        let event = if self.subagent.is_some() {
            HookEvent::SubagentStop
        } else {
            HookEvent::Stop
        };
        if state.stop_blocks >= MAX_STOP_BLOCKS || !self.config.hooks().handles(event) {
            return Some(Stop::Completed);
        }
        let active = state.stop_blocks > 0;
        let last = state.last_text.clone();
        let input = match event {
            HookEvent::SubagentStop => HookInput::subagent_stop(&self.id, &self.cwd, active, last),
            _ => HookInput::stop(&self.id, &self.cwd, active, last),
        };
        match self.hooks(input, sink).await.outcome {
            HookOutcome::Block { reason } => {
                // A Stop hook sends the model back to work with its reason.
                state.stop_blocks += 1;
                self.add_message(Message::user(reason), sink);
                None
            }
            HookOutcome::Stop { reason } => Some(Stop::HookStopped { reason }),
            _ => Some(Stop::Completed),
        }
    }

    /// Answers the reply's calls: [counts](Self::count_cut_reply) a reply cut off at the
    /// output limit, runs the calls (in `turn_span`), puts their results in the history —
    /// each is in the session file already, written as its call ended — and syncs the file.
    /// `Some(stop)` ends the run: replies cut off too often, cancelled, or a hook's stop.
    async fn answer_calls(
        &mut self,
        calls: &[OwnedCall],
        stop_reason: &StopReason,
        turn_span: tracing::Span,
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
    ) -> Option<Stop> {
        if let Some(stop) = self.count_cut_reply(calls, stop_reason, sink, state) {
            return Some(stop);
        }
        let results = self
            .run_tools(calls, cancel, sink, state)
            .instrument(turn_span)
            .await;
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
            return Some(Stop::Cancelled);
        }
        self.take_stop_request()
            .map(|reason| Stop::HookStopped { reason })
    }

    /// Counts the replies with calls cut off at the output limit in a row: past
    /// [`MAX_CUT_REPLIES`], `calls` are answered as interrupted and the run fails
    /// (`Some(stop)`); a reply that was not cut off starts the count again.
    fn count_cut_reply(
        &mut self,
        calls: &[OwnedCall],
        stop_reason: &StopReason,
        sink: &Sink,
        state: &mut RunState,
    ) -> Option<Stop> {
        if *stop_reason != StopReason::MaxTokens {
            state.cut_replies = 0;
            return None;
        }
        state.cut_replies += 1;
        if state.cut_replies <= MAX_CUT_REPLIES {
            return None;
        }
        let results = calls
            .iter()
            .map(|c| ContentBlock::tool_result(&c.id, INTERRUPTED, true))
            .collect();
        self.add_message(Message::new(Role::User, results), sink);
        Some(Stop::Failed(RunFailure::new(
            FailureKind::OutputLimit,
            format!(
                "the model's replies were cut off at the output limit ({} tokens) {} times in a row",
                self.config.max_tokens(),
                state.cut_replies
            ),
        )))
    }

    /// Replaces older turns with a summary. `Some(stop)` ends the run (cancelled while
    /// compacting); a compaction that cannot happen or fails is a warning, and the run goes on.
    pub(super) async fn compact(
        &mut self,
        cancel: &CancellationToken,
        sink: &Sink,
        state: &mut RunState,
    ) -> Option<Stop> {
        if let Some(reason) = self.pre_compact(CompactTrigger::Auto, sink).await {
            return Some(Stop::HookStopped { reason });
        }
        match self.summarize(cancel, sink).await {
            Err(CompactionError::Cancelled) => return Some(Stop::Cancelled),
            Ok((compaction, model)) => {
                let done = self.apply_compaction(compaction, &model);
                state.charge(&done.usage, done.cost_usd, &done.cost_by_provider);
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

    /// Asks for a compacted history, unless `cancel` fires first: from the policy's summary
    /// model, else the session's; when the summary model fails (a local server that is down,
    /// a window too small for the transcript), from the session's model, with a warning.
    /// Returns the compaction and the model that wrote it.
    pub(super) async fn summarize(
        &self,
        cancel: &CancellationToken,
        sink: &Sink,
    ) -> Result<(Compaction, String), CompactionError> {
        let own = self.config.model();
        let summary_model = self
            .config
            .compaction()
            .summary_model
            .as_deref()
            .map(str::trim)
            .filter(|model| !model.is_empty())
            .unwrap_or(own);
        match self.summarize_with(summary_model, cancel).await {
            Err(CompactionError::Provider(error)) if summary_model != own => {
                let message = format!(
                    "the compaction summary on {summary_model} failed ({error}); {own} writes it"
                );
                tracing::warn!("{message}");
                emit(sink, AgentEvent::Warning { message });
                self.summarize_with(own, cancel).await
            }
            result => result,
        }
    }

    /// [`Session::summarize`] by `model` alone.
    async fn summarize_with(
        &self,
        model: &str,
        cancel: &CancellationToken,
    ) -> Result<(Compaction, String), CompactionError> {
        let request = self.request();
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(CompactionError::Cancelled),
            result = compact(
                self.config.provider(),
                model,
                request.system.as_deref(),
                &request.tools,
                &self.history,
                self.config.compaction(),
            ) => result.map(|compaction| (compaction, model.to_owned())),
        }
    }

    /// Puts `compaction`'s history, written by `model`, in place and logs it; returns what it
    /// did.
    pub(super) fn apply_compaction(&mut self, compaction: Compaction, model: &str) -> Compacted {
        self.usage.add(&compaction.usage);
        let (cost_usd, cost_by_provider) = self.price(model, &compaction.usage);
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
            cost_by_provider,
        }
    }

    /// Adds the notices waiting for this session, if any, as one user message (merged into
    /// the tool results before it, if any).
    /// Not before a new session's first request (see `notices_due`).
    pub(super) async fn take_notices(&mut self, sink: &Sink) {
        if !std::mem::replace(&mut self.notices_due, true) {
            return;
        }
        let Some(notifier) = self.config.notifier().cloned() else {
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

    /// The request of a turn of the loop: [`Session::request`], and once the iteration
    /// warning has been given, a note at the end of its last user message telling the model
    /// how many model calls it has left, so that it can wrap up. The note is in the request
    /// only, never in the history or the session file.
    fn turn_request(&self, state: &RunState, limit: u32) -> CompletionRequest {
        let mut request = self.request();
        if state.warned
            && let Some(last) = request.messages.last_mut()
            && last.role == Role::User
        {
            last.content
                .push(ContentBlock::text(iteration_note(state.iterations, limit)));
        }
        request
    }

    pub(super) fn request(&self) -> CompletionRequest {
        let mut request = CompletionRequest::new(self.config.model().to_owned());
        request.system = self.config.system_prompt().map(str::to_owned);
        request.messages = self.history.clone();
        request.tools = self.config.tools().definitions();
        request.max_tokens = self.config.max_tokens();
        request
    }

    /// [`Session::call_model`], asking again (up to the agent's `stream_retries`, after a
    /// short backoff) when the reply is cut off mid-stream: the partial reply is dropped —
    /// nothing of it is in the history or the session file — and
    /// [`AgentEvent::ReplyDiscarded`] tells listeners to drop what they showed of it.
    pub(super) async fn call_model_retrying(
        &self,
        request: &CompletionRequest,
        cancel: &CancellationToken,
        sink: &Sink,
    ) -> ModelTurn {
        let max_attempts = self.config.stream_retries();
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

    pub(super) async fn call_model(
        &self,
        request: &CompletionRequest,
        cancel: &CancellationToken,
        sink: &Sink,
    ) -> ModelTurn {
        let mut stream = self.config.provider().stream(request);
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
                        StreamEvent::MessageStart { id, model } => emit(
                            sink,
                            AgentEvent::ReplyStarted {
                                id: id.clone(),
                                model: model.clone(),
                            },
                        ),
                        StreamEvent::TextDelta { text, .. } => {
                            partial_text.push_str(text);
                            emit(sink, AgentEvent::TextDelta { text: text.clone() });
                        }
                        StreamEvent::ThinkingDelta { thinking, .. } => emit(
                            sink,
                            AgentEvent::ThinkingDelta {
                                text: thinking.clone(),
                            },
                        ),
                        StreamEvent::Retrying {
                            attempt,
                            max_attempts,
                            wait,
                            error,
                        } => emit(
                            sink,
                            AgentEvent::Retrying {
                                attempt: *attempt,
                                max_attempts: *max_attempts,
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
}

/// The note the model reads once the iteration warning was given: which model call this is
/// and how many are left after it.
fn iteration_note(call: u32, limit: u32) -> String {
    let left = limit.saturating_sub(call);
    format!(
        "[note from keel: this is model call {call} of {limit} in this run; {left} left after \
         this one. Wrap up: finish the task, or say what is done and what remains.]"
    )
}
