//! A session: one conversation in one directory, and the loop that runs each prompt.
//!
//! One file per job: `turn` (the loop: model calls, compaction, notices, stop hooks),
//! `gate` (whether a call runs: rules, hooks, remembered answers, the approver; its decision
//! a pure function), `schedule` (which calls run together, snapshots, dispatch),
//! `journal` (write-ahead persistence), `outcome` (usage, cost, the stop and its text).

mod gate;
mod journal;
mod outcome;
mod schedule;
mod turn;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::Stream;
use keel_provider::{
    ContentBlock, InvalidToolInput, Message, ModelCatalog, ToolCall, ToolInput, Usage,
};
use keel_tool::EditorFiles;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentConfig;
use crate::approval::ApprovalScope;
use crate::compaction::CompactionError;
use crate::events::{AgentEvent, Compacted, RunOutcome};
use crate::history::check_rewind;
use crate::hooks::{
    CompactTrigger, HookEvent, HookInput, HookOutcome, HookReport, HookSubagent, SessionEndReason,
    SessionStartSource,
};
use crate::session_store::{SessionError, SessionLog, SessionRecord};

/// Cancels the run in progress of a session; cheap to clone and send to another task.
#[derive(Debug, Clone)]
pub struct CancelHandle {
    current: Arc<Mutex<CancellationToken>>,
}

impl CancelHandle {
    /// Cancels the run in progress: the model call or tool running now is stopped promptly,
    /// and the run ends with [`Stop::Cancelled`](crate::Stop::Cancelled). The next prompt starts afresh.
    pub fn cancel(&self) {
        if let Ok(token) = self.current.lock() {
            token.cancel();
        }
    }
}

/// A conversation: its history, its usage and the tools' approvals so far.
pub struct Session {
    config: Arc<AgentConfig>,
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
    /// Whether the notifier is asked before the next request: not before a new session's
    /// first, as nothing the session started can have ended before it asked anything (and
    /// a notifier may be slow to ask the first time: a task store still opening).
    notices_due: bool,
    /// The editor the file tools read and write through, if the host is one.
    editor: Option<Arc<dyn EditorFiles>>,
    /// The session's file, for hooks' `transcript_path`.
    transcript_path: Option<PathBuf>,
    /// Claude Code's name of the approval mode, for hooks' `permission_mode`.
    permission_mode: String,
    /// Why the session starts, for `SessionStart` hooks' `source`.
    start_source: SessionStartSource,
    /// The sub-agent's name, when this is a sub-agent's session.
    subagent: Option<String>,
    /// A hook's `"continue": false` reason, waiting for the loop to stop the run; set where
    /// calls are planned and run (possibly several at once), taken by the loop.
    hook_stop: Mutex<Option<String>>,
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

/// Where a session comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Started now, with an empty history.
    New,
    /// Reopened from the session store.
    Resumed,
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
        config: Arc<AgentConfig>,
        cwd: PathBuf,
        id: String,
        history: Vec<Message>,
        log: Option<Box<dyn SessionLog>>,
        origin: Origin,
    ) -> Self {
        let transcript_path = log
            .as_ref()
            .and_then(|log| log.path().map(Path::to_path_buf));
        Self {
            config,
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
            notices_due: origin == Origin::Resumed,
            editor: None,
            transcript_path,
            permission_mode: "default".to_owned(),
            start_source: match origin {
                Origin::New => SessionStartSource::Startup,
                Origin::Resumed => SessionStartSource::Resume,
            },
            subagent: None,
            hook_stop: Mutex::new(None),
        }
    }

    /// The first error the session store reported, if any: the run went on, but the session
    /// file may be missing what came after.
    pub fn persistence_error(&self) -> Option<&str> {
        self.persist_error.as_deref()
    }

    /// Rewinds the conversation to its first `history_len` messages, e.g. the
    /// [`SnapshotPoint::history_len`](keel_snapshot::SnapshotPoint::history_len) of a snapshot being restored: the history is cut there
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

    /// Has the file tools of this session's calls read and write through an editor's
    /// buffers (an ACP client's files), after their own path checks: the model then reads
    /// unsaved changes, and the editor shows each edit.
    pub fn set_editor_files(&mut self, editor: Arc<dyn EditorFiles>) {
        self.editor = Some(editor);
    }

    /// The session's file as hooks are told it (`transcript_path`): the session store's file
    /// for this session (a [`JsonlSessionStore`](crate::JsonlSessionStore)'s
    /// `<dir>/<id>.jsonl`), or what [`set_transcript_path`](Self::set_transcript_path) set.
    pub fn transcript_path(&self) -> Option<&Path> {
        self.transcript_path.as_deref()
    }

    /// Sets the path hooks are given as `transcript_path`, for a host whose session file is
    /// not the store's.
    pub fn set_transcript_path(&mut self, path: impl Into<PathBuf>) {
        self.transcript_path = Some(path.into());
    }

    /// Sets the approval mode hooks are told (`permission_mode`), in Claude Code's names:
    /// `default` (the default), `acceptEdits`, `plan`, `bypassPermissions`. The host calls it
    /// when the mode changes; it changes nothing but what hooks read.
    pub fn set_permission_mode(&mut self, mode: impl Into<String>) {
        self.permission_mode = mode.into();
    }

    /// Sets why the session starts, as its `SessionStart` hooks are told (`source`):
    /// [`Startup`](SessionStartSource::Startup) for a new session and
    /// [`Resume`](SessionStartSource::Resume) for a resumed or forked one unless set here
    /// (e.g. [`Clear`](SessionStartSource::Clear) for the session a host starts after
    /// `/clear`). Only meaningful before the first prompt.
    pub fn set_start_source(&mut self, source: SessionStartSource) {
        self.start_source = source;
    }

    /// Marks this as the session of sub-agent `agent_type` (e.g. keel-agents' `spawn_agent`
    /// runs): its model's stops fire `SubagentStop` hooks instead of `Stop`, it fires no
    /// `SessionStart`, `UserPromptSubmit` or `SessionEnd` hooks, and every hook input names
    /// it (`agent_id`: the session's id, `agent_type`).
    pub fn set_subagent(&mut self, agent_type: impl Into<String>) {
        self.subagent = Some(agent_type.into());
    }

    /// The sub-agent's name, if this is a sub-agent's session
    /// ([`set_subagent`](Self::set_subagent)).
    pub fn subagent(&self) -> Option<&str> {
        self.subagent.as_deref()
    }

    /// Ends the session for its hooks: runs the `SessionEnd` hooks with `reason` (not in a
    /// sub-agent's session) and returns what they said; their outcome changes nothing (the
    /// session ends anyway), their failures are in the report. The session stays usable.
    pub async fn end(&mut self, reason: SessionEndReason) -> HookReport {
        if self.subagent.is_some() {
            return HookReport::default();
        }
        let input = HookInput::session_end(&self.id, &self.cwd, reason);
        self.hooks(input, &None).await
    }

    /// Runs the `Notification` hooks with `message` and `notification_type` (Claude Code's:
    /// `idle_prompt` when the session waits for the person's next prompt, `auth_success`, …),
    /// for notices the host gives; the session itself fires them with `permission_prompt` when
    /// it asks the approver about a call. Returns what the hooks said (their outcome changes
    /// nothing).
    pub async fn notify(
        &self,
        message: impl Into<String>,
        notification_type: impl Into<String>,
    ) -> HookReport {
        let input = HookInput::notification(&self.id, &self.cwd, message, notification_type);
        self.hooks(input, &None).await
    }

    /// A handle that cancels the run in progress.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle {
            current: self.cancel.clone(),
        }
    }

    /// The model this session calls.
    pub fn model(&self) -> &str {
        self.config.model()
    }

    /// The system prompt every request of this session starts with.
    pub fn system_prompt(&self) -> Option<&str> {
        self.config.system_prompt()
    }

    /// The model catalog the session prices calls and sizes context windows with.
    pub fn catalog(&self) -> &ModelCatalog {
        self.config.catalog()
    }

    /// The context window the session compacts against, in tokens: the compaction policy's
    /// window, else the catalog's for the current model; `None` when neither knows it.
    pub fn context_window(&self) -> Option<u64> {
        self.config
            .compaction()
            .context_window
            .or_else(|| self.config.catalog().context_window(self.config.model()))
    }

    /// The estimated size of the next request's prompt in tokens, as the loop estimates it
    /// before each request ([`estimate_tokens`](crate::compaction::estimate_tokens)): the
    /// last call's reported input tokens plus about one token per 4 bytes of what was added
    /// since, or everything estimated when no call has reported yet.
    pub fn prompt_estimate(&self) -> u64 {
        crate::compaction::estimate_tokens(
            self.config.system_prompt(),
            &self.config.tools().definitions(),
            &self.history,
            self.last_report,
        )
    }

    /// Calls `model` from the next request on (the history is kept).
    pub fn set_model(&mut self, model: impl Into<String>) {
        Arc::make_mut(&mut self.config).set_model(model.into());
        // The last usage report was another model's count.
        self.last_report = None;
    }

    /// Compacts the history now, whatever its size (`/compact`): older turns become a summary
    /// written by the model, the original request and the latest turns stay. Returns the
    /// estimated tokens before and after, and the usage of the summary call.
    ///
    /// `PreCompact` hooks run first, with the trigger `manual`.
    pub async fn compact_now(&mut self) -> Result<Compacted, CompactionError> {
        let cancel = self.start_run();
        // Asked for outside a run: there is no run for a hook to stop.
        let _ = self.pre_compact(CompactTrigger::Manual, &None).await;
        let (compaction, model) = self.summarize(&cancel, &None).await?;
        Ok(self.apply_compaction(compaction, &model))
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
        self.run_with(vec![ContentBlock::text(prompt)], None).await
    }

    /// Runs `prompt`, streaming what happens; the last event is [`AgentEvent::Finished`].
    pub fn run_streaming<'a>(
        &'a mut self,
        prompt: &'a str,
    ) -> impl Stream<Item = AgentEvent> + Send + 'a {
        self.run_streaming_content(vec![ContentBlock::text(prompt)])
    }

    /// Runs a prompt of several blocks — text and [images](ContentBlock::image) the person
    /// attached — streaming what happens, as [`run_streaming`](Self::run_streaming) does.
    pub fn run_streaming_content(
        &mut self,
        prompt: Vec<ContentBlock>,
    ) -> impl Stream<Item = AgentEvent> + Send + '_ {
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

    /// Runs the hooks for `input`, with the session's own fields filled in
    /// (`transcript_path`, `permission_mode`, the sub-agent); failures become warnings, never
    /// errors, and `systemMessage`s [`AgentEvent::HookMessage`]s.
    async fn hooks(&self, mut input: HookInput, sink: &Sink) -> HookReport {
        let event = input.hook_event_name();
        if !self.config.hooks().handles(event) {
            return HookReport::default();
        }
        let session = &mut input.session;
        session.transcript_path.clone_from(&self.transcript_path);
        // Claude Code does not tell SessionStart hooks the mode.
        if event != HookEvent::SessionStart {
            session.permission_mode = Some(self.permission_mode.clone());
        }
        if let Some(agent_type) = &self.subagent {
            session.subagent = Some(HookSubagent {
                agent_id: self.id.clone(),
                agent_type: agent_type.clone(),
            });
        }
        let report = self.config.hooks().run(&input).await;
        for failure in &report.failures {
            tracing::warn!(session = %self.id, "hook failed: {failure}");
            emit(
                sink,
                AgentEvent::Warning {
                    message: format!("hook failed: {failure}"),
                },
            );
        }
        for message in &report.system_messages {
            emit(
                sink,
                AgentEvent::HookMessage {
                    event,
                    message: message.clone(),
                },
            );
        }
        if let HookOutcome::Stop { reason } = &report.outcome {
            tracing::info!(session = %self.id, %event, reason, "a hook asked to stop");
        }
        report
    }

    /// Runs the `PreCompact` hooks: a block does not stop the compaction; `Some(reason)` when
    /// one asks to stop the run (`"continue": false`).
    async fn pre_compact(&self, trigger: CompactTrigger, sink: &Sink) -> Option<String> {
        let input = HookInput::pre_compact(&self.id, &self.cwd, trigger, "");
        match self.hooks(input, sink).await.outcome {
            HookOutcome::Stop { reason } => Some(reason),
            _ => None,
        }
    }

    /// Asks the loop to stop the run once the calls being answered are answered: a hook's
    /// `"continue": false`. The first reason is kept.
    fn request_stop(&self, reason: String) {
        let mut pending = self
            .hook_stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        pending.get_or_insert(reason);
    }

    /// Whether a hook asked to stop the run: the calls not yet run are then not run.
    fn stop_requested(&self) -> bool {
        self.hook_stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some()
    }

    /// The reason of a stop a hook asked for, if any; clears it.
    fn take_stop_request(&self) -> Option<String> {
        self.hook_stop
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}
