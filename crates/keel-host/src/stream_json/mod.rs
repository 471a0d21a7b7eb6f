//! Events as Claude Code's stream-json lines: the JSON lines `keel exec` prints, in the shapes Claude Code 2.1 prints for
//! `--output-format json` and `stream-json` (as the Claude Agent SDKs' parsers and
//! `sdk.d.ts` type them), so tools written for `claude -p` read keel's too.
//!
//! [`ClaudeStream`] is one output stream: it numbers results, keeps the running totals, and
//! turns each engine event into the lines it makes, whatever way the prompts arrive.
//!
//! Lines: `system`/`init`; one `assistant` line per content block of a model reply (the full
//! API message with that one block, all sharing the reply's message id); one `user` line per
//! tool result (with `tool_use_result`); `stream_event` lines with partial messages;
//! `system`/`compact_boundary`; `system`/`task_notification`; `result`. keel's own
//! `system` lines (`reply_discarded`, `iteration_warning`, `snapshot`) are read by the SDKs
//! as plain system messages. Every line has `uuid` and `session_id`.
//!
//! Left out on purpose (Claude Code's own state, nothing keel has): in `init`
//! `terminal_slash_commands` (absent when empty, as Claude Code does), `plugins` entries,
//! `analytics_disabled`, `product_feedback_disabled`, `memory_paths`, `messaging_socket_path`,
//! `fast_mode_*`, `per_turn_effort_active`, `ultrathink_*`; in messages `tool_result_meta`;
//! in `result` `fast_mode_*`, `subagent_stats`, `safety_stops`, `ttft_*`,
//! `time_to_request_ms`, `first_content_frame_ms`, `queued_turn_count` (no command queue in
//! `keel exec`); in `usage` `service_tier`, `cache_creation`, `inference_geo`, `iterations`,
//! `speed`, `fallback_credit`, `output_tokens_details` (the providers do not say).

mod partial;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use keel::engine::history::INTERRUPTED;
use keel::engine::{AgentEvent, CostByProvider, FailureKind, RunOutcome, Stop};
use keel::provider::{ContentBlock, Message, ProviderError, Role, StopReason, Usage};
use serde_json::{Value, json};

use partial::{PartialReply, Streamed};

/// `success`, `error_max_turns` or `error_during_execution`.
pub fn result_subtype(stop: &Stop) -> &'static str {
    match stop {
        Stop::Completed => "success",
        Stop::MaxIterations => "error_max_turns",
        Stop::CostBudget { .. } => "error_max_budget_usd",
        _ => "error_during_execution",
    }
}

/// Usage as the Messages API writes it.
fn api_usage(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": usage.output_tokens,
    })
}

/// Usage and cost by provider, each in `modelUsage`'s words: `{"anthropic": {"inputTokens":
/// …, "outputTokens": …, "cacheReadInputTokens": …, "cacheCreationInputTokens": …,
/// "webSearchRequests": 0, "costUSD": … or null}}`.
pub fn cost_by_provider_json(costs: &CostByProvider) -> Value {
    let providers: serde_json::Map<String, Value> = costs
        .iter()
        .map(|(name, cost)| {
            (
                name.to_owned(),
                model_usage_entry(&cost.usage, cost.cost_usd),
            )
        })
        .collect();
    Value::Object(providers)
}

/// Usage and its cost in `modelUsage`'s words (`inputTokens`, `outputTokens`,
/// `cacheReadInputTokens`, `cacheCreationInputTokens`, `webSearchRequests` (keel makes none),
/// `costUSD`), in Claude Code's order.
fn model_usage_entry(usage: &Usage, cost: Option<f64>) -> Value {
    json!({
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cacheReadInputTokens": usage.cache_read_input_tokens,
        "cacheCreationInputTokens": usage.cache_creation_input_tokens,
        "webSearchRequests": 0,
        "costUSD": cost,
    })
}

/// The API's name for a stop reason (`end_turn`, `tool_use`, ...).
fn stop_reason_name(reason: &StopReason) -> String {
    match reason {
        StopReason::Other(name) => name.clone(),
        known => serde_json::to_value(known)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    }
}

/// A `stream-json` timestamp: now, ISO 8601 in UTC to the millisecond.
fn timestamp() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

fn new_uuid() -> String {
    keel::engine::session_store::new_uuid()
}

/// An MCP server named in the configuration, and whether it started.
pub struct McpStatus {
    /// Its name.
    pub name: String,
    /// `connected` or `failed`.
    pub status: &'static str,
}

/// What the `system`/`init` line says about the run.
pub struct InitInfo<'a> {
    /// The working directory.
    pub cwd: &'a std::path::Path,
    /// The provider's name (keel's own field).
    pub provider: &'a str,
    /// The tools' names.
    pub tools: Vec<String>,
    /// The MCP servers configured.
    pub mcp_servers: Vec<McpStatus>,
    /// `ask`, `deny` or `allow`.
    pub approvals: &'a str,
    /// `workspace-write`, `read-only` or `full-access` (keel's own field).
    pub sandbox: &'a str,
    /// Where the API key came from, in Claude Code's words: `ANTHROPIC_API_KEY` when it is
    /// that variable, else `none` ("no Anthropic API key in use").
    pub api_key_source: &'static str,
    /// The sub-agents `spawn_agent` can start.
    pub agents: Vec<String>,
    /// The skills `use_skill` can load.
    pub skills: Vec<String>,
    /// Directories readable besides the workspace (`--allow-read`).
    pub additional_directories: Vec<std::path::PathBuf>,
}

impl<'a> InitInfo<'a> {
    /// What `settings` and the agent they built (`coding`) say of the run.
    pub fn of(settings: &'a keel_config::Settings, coding: &keel::CodingAgent) -> Self {
        let mcp_servers = settings
            .mcp_status()
            .into_iter()
            .map(|(name, status)| McpStatus {
                name: name.to_owned(),
                status,
            })
            .collect();
        let (agents, skills) = coding
            .delegates()
            .map_or_else(Default::default, |delegates| {
                (
                    delegates
                        .runner()
                        .definitions()
                        .all()
                        .iter()
                        .map(|agent| agent.name.clone())
                        .collect(),
                    delegates.skills().names().map(str::to_owned).collect(),
                )
            });
        Self {
            cwd: &settings.cwd,
            provider: &settings.provider_name,
            tools: coding
                .agent()
                .tools()
                .definitions()
                .into_iter()
                .map(|definition| definition.name)
                .collect(),
            mcp_servers,
            approvals: settings.approvals.name(),
            sandbox: sandbox_name(settings.policy.mode),
            api_key_source: if settings.origin.key_var == "ANTHROPIC_API_KEY" {
                "ANTHROPIC_API_KEY"
            } else {
                "none"
            },
            agents,
            skills,
            additional_directories: settings.allow_read.clone(),
        }
    }
}

/// The name `--sandbox` takes for `mode`.
pub fn sandbox_name(mode: keel::sandbox::SandboxMode) -> &'static str {
    match mode {
        keel::sandbox::SandboxMode::ReadOnly => "read-only",
        keel::sandbox::SandboxMode::FullAccess => "full-access",
        _ => "workspace-write",
    }
}

/// Claude Code's permission mode for keel's `--approvals`: `allow` runs everything
/// (`bypassPermissions`), `deny` refuses what is not allowed by a rule without asking
/// (`dontAsk`), `ask` asks (`default`).
fn permission_mode(approvals: &str) -> &'static str {
    match approvals {
        "allow" => "bypassPermissions",
        "deny" => "dontAsk",
        _ => "default",
    }
}

/// The model's limits as `modelUsage` reports them; `None` for a model keel's catalog does
/// not know (written as `null`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelLimits {
    /// Its context window, in tokens.
    pub context_window: Option<u64>,
    /// The most tokens it writes in one reply.
    pub max_output_tokens: Option<u64>,
}

impl ModelLimits {
    /// The limits `catalog` gives `model`.
    pub fn of(catalog: &keel::provider::ModelCatalog, model: &str) -> Self {
        catalog.get(model).map_or_else(Self::default, |info| Self {
            context_window: info.context_window,
            max_output_tokens: info.max_output_tokens,
        })
    }
}

/// The model reply being streamed.
struct Reply {
    id: String,
    model: String,
    usage: Option<Usage>,
    stop_reason: Option<String>,
    partial: PartialReply,
    /// Whether it ended (`ReplyFinished` came).
    finished: bool,
}

/// One `stream-json` (or `json`) output stream in Claude Code's shapes; see the module's
/// documentation for the lines.
pub struct ClaudeStream {
    session_id: String,
    model: String,
    partial_messages: bool,
    limits: ModelLimits,
    /// Where the limits come from.
    catalog: keel::provider::ModelCatalog,
    reply: Option<Reply>,
    /// Calls that ran (a `ToolCallStarted` came): a call that ends without one was refused.
    started: HashSet<String>,
    /// Each call's tool and input, from the replies.
    calls: HashMap<String, (String, Value)>,
    // Per result.
    api_time: Duration,
    denials: Vec<Value>,
    last_stop_reason: Option<String>,
    // Over the stream.
    results: u64,
    total_usage: Usage,
    total_cost: Option<f64>,
    total_by_provider: CostByProvider,
}

impl ClaudeStream {
    /// A stream for session `session_id` run on `model`; `partial_messages` adds the
    /// `stream_event` lines.
    pub fn new(session_id: &str, model: &str, partial_messages: bool) -> Self {
        Self {
            session_id: session_id.to_owned(),
            model: model.to_owned(),
            partial_messages,
            limits: ModelLimits::of(&keel::provider::ModelCatalog::built_in(), model),
            catalog: keel::provider::ModelCatalog::built_in(),
            reply: None,
            started: HashSet::new(),
            calls: HashMap::new(),
            api_time: Duration::ZERO,
            denials: Vec::new(),
            last_stop_reason: None,
            results: 0,
            total_usage: Usage::default(),
            total_cost: Some(0.0),
            total_by_provider: CostByProvider::default(),
        }
    }

    /// Takes the limits `modelUsage` reports from `catalog` (by default the built-in
    /// catalog; the config's `[models.NAME]` tables add to it).
    pub fn with_catalog(mut self, catalog: keel::provider::ModelCatalog) -> Self {
        self.limits = ModelLimits::of(&catalog, &self.model);
        self.catalog = catalog;
        self
    }

    /// Goes on with `model` (the program switched models between turns): later lines name
    /// it, and `modelUsage` gives its limits.
    pub fn set_model(&mut self, model: &str) {
        model.clone_into(&mut self.model);
        self.limits = ModelLimits::of(&self.catalog, model);
    }

    /// A `system` line of `subtype` with `fields`, and `uuid` and `session_id`.
    fn system(&self, subtype: &str, fields: Value) -> Value {
        let mut line = json!({"type": "system", "subtype": subtype});
        if let (Some(line), Value::Object(fields)) = (line.as_object_mut(), fields) {
            line.extend(fields);
        }
        line["uuid"] = json!(new_uuid());
        line["session_id"] = json!(self.session_id);
        line
    }

    /// The `system`/`init` line. `claude_code_version` is keel's own version: the field
    /// says which program is running, and keel does not pretend to be a Claude Code
    /// release. The Python SDK only checks that it reads as `X.Y.Z` (a missing one logs a
    /// warning that the CLI is too old); a check against a Claude Code version (e.g.
    /// `verbatim_prompts`, 2.1.248) rightly finds keel lacks that feature. `capabilities` is
    /// empty: keel implements none of the control-protocol capabilities listed there.
    pub fn init(&self, info: &InitInfo<'_>) -> Value {
        let servers: Vec<Value> = info
            .mcp_servers
            .iter()
            .map(|server| json!({"name": server.name, "status": server.status}))
            .collect();
        self.system(
            "init",
            json!({
                "cwd": info.cwd,
                "tools": info.tools,
                "mcp_servers": servers,
                "model": self.model,
                "permissionMode": permission_mode(info.approvals),
                "slash_commands": [],
                "apiKeySource": info.api_key_source,
                "claude_code_version": env!("CARGO_PKG_VERSION"),
                "output_style": "default",
                "agents": info.agents,
                "skills": info.skills,
                "plugins": [],
                "capabilities": [],
                "original_cwd": info.cwd,
                "additional_directories": info.additional_directories,
                "view_mode": "default",
                "provider": info.provider,
                "approvals": info.approvals,
                "sandbox": info.sandbox,
                "keel_version": env!("CARGO_PKG_VERSION"),
            }),
        )
    }

    /// A `stream_event` line.
    fn stream_event(&self, event: Value) -> Value {
        json!({
            "type": "stream_event",
            "event": event,
            "parent_tool_use_id": null,
            "session_id": self.session_id,
            "uuid": new_uuid(),
        })
    }

    fn stream_events(&self, events: Vec<Value>) -> Vec<Value> {
        if !self.partial_messages {
            return Vec::new();
        }
        events.into_iter().map(|e| self.stream_event(e)).collect()
    }

    /// Begins a reply (its `message_start`) unless one is in flight.
    fn begin_reply(&mut self, id: Option<String>, model: Option<String>) -> Vec<Value> {
        if self.reply.is_some() {
            return Vec::new();
        }
        let model = model.unwrap_or_else(|| self.model.clone());
        let id = id.unwrap_or_else(|| format!("msg_{}", new_uuid().replace('-', "")));
        let lines = self.stream_events(vec![partial::message_start(&id, &model)]);
        self.reply = Some(Reply {
            id,
            model,
            usage: None,
            stop_reason: None,
            partial: PartialReply::default(),
            finished: false,
        });
        lines
    }

    /// The lines `event` makes (none for most events; all of them are still read, for the
    /// result's figures).
    pub fn event(&mut self, event: &AgentEvent) -> Vec<Value> {
        match event {
            AgentEvent::ReplyStarted { id, model } => {
                self.reply = None;
                self.begin_reply(id.clone(), model.clone())
            }
            AgentEvent::TextDelta { text } => self.delta(Streamed::Text, text),
            AgentEvent::ThinkingDelta { text } => self.delta(Streamed::Thinking, text),
            AgentEvent::Usage { call, .. } => {
                if let Some(reply) = self.reply.as_mut() {
                    reply.usage = Some(*call);
                }
                Vec::new()
            }
            AgentEvent::ReplyFinished {
                stop_reason,
                duration,
            } => {
                self.api_time += *duration;
                let name = stop_reason_name(stop_reason);
                self.last_stop_reason = Some(name.clone());
                if let Some(reply) = self.reply.as_mut() {
                    reply.stop_reason = Some(name);
                    reply.finished = true;
                }
                Vec::new()
            }
            AgentEvent::MessageAdded { message } => match message.role {
                Role::Assistant => self.assistant(message),
                _ => self.user(message),
            },
            AgentEvent::ToolCallStarted { id, .. } => {
                self.started.insert(id.clone());
                Vec::new()
            }
            AgentEvent::ToolCallFinished {
                id,
                name,
                output,
                is_error,
                ..
            } => {
                // Answered without running, and not because the run was stopped: refused (by
                // a rule, a hook, the approver or a read-only mode).
                if *is_error && !self.started.contains(id) && output != INTERRUPTED {
                    let input = self
                        .calls
                        .get(id)
                        .map_or_else(|| json!({}), |(_, input)| input.clone());
                    self.denials.push(json!({
                        "tool_name": name,
                        "tool_use_id": id,
                        "tool_input": input,
                    }));
                }
                Vec::new()
            }
            AgentEvent::Compacted {
                before_tokens,
                after_tokens,
            } => vec![self.system(
                "compact_boundary",
                json!({"compact_metadata": {
                    "trigger": "auto",
                    "pre_tokens": before_tokens,
                    "post_tokens": after_tokens,
                }}),
            )],
            AgentEvent::ReplyDiscarded {
                attempt,
                max_attempts,
                error,
            } => {
                self.reply = None;
                vec![self.system(
                    "reply_discarded",
                    json!({"attempt": attempt, "max_attempts": max_attempts, "error": error}),
                )]
            }
            AgentEvent::IterationWarning { used, limit } => vec![self.system(
                "iteration_warning",
                json!({"used": used, "limit": limit, "remaining": limit.saturating_sub(*used)}),
            )],
            AgentEvent::SnapshotTaken { call_id, id } => vec![self.system(
                "snapshot",
                json!({"tool_use_id": call_id, "snapshot_id": id.0}),
            )],
            _ => Vec::new(),
        }
    }

    fn delta(&mut self, kind: Streamed, text: &str) -> Vec<Value> {
        if !self.partial_messages {
            return Vec::new();
        }
        let mut lines = self.begin_reply(None, None);
        let events = match self.reply.as_mut() {
            Some(reply) => reply.partial.delta(kind, text),
            None => Vec::new(),
        };
        lines.extend(self.stream_events(events));
        lines
    }

    /// An assistant message: one line per block (after the `stream_event`s that complete
    /// it), then the reply's `message_delta` and `message_stop`.
    fn assistant(&mut self, message: &Message) -> Vec<Value> {
        let mut lines = self.begin_reply(None, None);
        let Some(mut reply) = self.reply.take() else {
            return lines;
        };
        let blocks = shown_blocks(message);
        for (index, (block, original)) in blocks.into_iter().zip(&message.content).enumerate() {
            if let ContentBlock::ToolUse {
                id, name, input, ..
            } = original
            {
                self.calls.insert(id.clone(), (name.clone(), input.clone()));
            }
            let events = reply.partial.finish_block(index, &block, original);
            lines.extend(self.stream_events(events));
            lines.push(json!({
                "type": "assistant",
                "message": {
                    "id": reply.id,
                    "type": "message",
                    "role": "assistant",
                    "model": reply.model,
                    "content": [block],
                    "stop_reason": reply.stop_reason,
                    "stop_sequence": null,
                    "usage": reply.usage.as_ref().map_or_else(|| api_usage(&Usage::default()), api_usage),
                    "context_management": null,
                },
                "parent_tool_use_id": null,
                "session_id": self.session_id,
                "uuid": new_uuid(),
                "timestamp": timestamp(),
            }));
        }
        let mut end = reply.partial.close().into_iter().collect::<Vec<_>>();
        end.extend(partial::message_end(
            reply.stop_reason.as_deref(),
            reply.usage.as_ref(),
        ));
        lines.extend(self.stream_events(end));
        lines
    }

    /// A user message: one line per tool result, with its `tool_use_result`; other blocks
    /// (a `Stop` hook's reason, notices) in one line of their own.
    fn user(&mut self, message: &Message) -> Vec<Value> {
        let blocks = shown_blocks(message);
        let mut lines = Vec::new();
        let mut others = Vec::new();
        for (block, original) in blocks.into_iter().zip(&message.content) {
            if let ContentBlock::ToolResult { .. } = original {
                let result = tool_use_result(&block);
                lines.push(self.user_line(vec![block], Some(result)));
            } else {
                others.push(block);
            }
        }
        if !others.is_empty() {
            lines.push(self.user_line(others, None));
        }
        lines
    }

    fn user_line(&self, content: Vec<Value>, tool_use_result: Option<Value>) -> Value {
        let mut line = json!({
            "type": "user",
            "message": {"role": "user", "content": content},
            "parent_tool_use_id": null,
            "session_id": self.session_id,
            "uuid": new_uuid(),
            "timestamp": timestamp(),
        });
        if let Some(result) = tool_use_result {
            line["tool_use_result"] = result;
        }
        line
    }

    /// A `system`/`task_notification` line for a background task that ended: `status` is
    /// Claude Code's (`completed`, `failed` for a failure or a timeout or an interruption,
    /// `stopped` for a cancellation), `output_file` the task's log, `summary` what it did.
    pub fn task_notification(&self, task: &keel::tasks::TaskRecord) -> Value {
        use keel::tasks::TaskStatus;
        let status = match task.status {
            TaskStatus::Completed => "completed",
            TaskStatus::Cancelled => "stopped",
            _ => "failed",
        };
        let summary = task
            .result_summary
            .clone()
            .unwrap_or_else(|| format!("task {} {}", task.id, task.status));
        self.system(
            "task_notification",
            json!({
                "task_id": task.id,
                "status": status,
                "output_file": task.output_path,
                "summary": summary,
            }),
        )
    }

    /// The `result` line for `outcome`, which took `duration`.
    ///
    /// `usage` is this result's; `modelUsage` and `total_cost_usd` are running totals over
    /// the stream, as Claude Code's are. Where the model's price is unknown,
    /// `total_cost_usd` and `costUSD` are `null` rather than a guessed figure: the Python
    /// SDK reads them with `.get` and accepts `null`; `sdk.d.ts` types them `number`, but
    /// the TypeScript SDK does not check messages at run time. `contextWindow` and
    /// `maxOutputTokens` are `null` likewise for a model the catalog does not know.
    /// `duration_api_ms` is the time spent in model calls that returned a reply.
    /// `keel_cost_by_provider` (keel's own) is the running total's usage and cost by the
    /// provider that served each call (the config's names: `local` for a tier on a local
    /// server), `costUSD` `null` for one that served a model without a known price.
    pub fn result(&mut self, outcome: &RunOutcome, duration: Duration) -> Value {
        self.total_usage.add(&outcome.usage);
        self.total_cost = self.total_cost.zip(outcome.cost_usd).map(|(a, b)| a + b);
        self.total_by_provider.merge(&outcome.cost_by_provider);
        // Keyed by the model keel asked for (and priced), as Claude Code's is.
        let model = self.model.clone();
        let model_usage = |usage: &Usage, cost: Option<f64>| {
            let mut entry = model_usage_entry(usage, cost);
            entry["contextWindow"] = json!(self.limits.context_window);
            entry["maxOutputTokens"] = json!(self.limits.max_output_tokens);
            json!({&model: entry})
        };
        let mut usage = api_usage(&outcome.usage);
        usage["server_tool_use"] = json!({"web_search_requests": 0, "web_fetch_requests": 0});
        let is_error = outcome.stop != Stop::Completed;
        let mut line = json!({
            "type": "result",
            "subtype": result_subtype(&outcome.stop),
            "is_error": is_error,
            "duration_ms": millis(duration),
            "duration_api_ms": millis(self.api_time),
            "num_turns": outcome.iterations,
            "result": outcome.text,
            "stop_reason": self.last_stop_reason,
            "session_id": self.session_id,
            "total_cost_usd": self.total_cost,
            "usage": usage,
            "modelUsage": model_usage(&self.total_usage, self.total_cost),
            "permission_denials": std::mem::take(&mut self.denials),
            "api_error_status": api_error_status(&outcome.stop),
            "result_index": self.results,
            "model_usage_since_last_result": model_usage(&outcome.usage, outcome.cost_usd),
            "uuid": new_uuid(),
        });
        line["keel_cost_by_provider"] = cost_by_provider_json(&self.total_by_provider);
        if let Some(reason) = self.terminal_reason(&outcome.stop) {
            line["terminal_reason"] = json!(reason);
        }
        if is_error {
            line["errors"] = json!([outcome.text]);
        }
        if outcome.repaired_calls > 0 {
            // keel's own: calls it mended (a call written as text, a misspelt argument).
            line["keel_repaired_tool_calls"] = json!(outcome.repaired_calls);
        }
        self.results += 1;
        self.api_time = Duration::ZERO;
        self.last_stop_reason = None;
        self.started.clear();
        self.calls.clear();
        self.reply = None;
        line
    }

    /// Claude Code's `terminal_reason` for `stop`; `None` where it has no equivalent (a
    /// refusal, a failure not of the provider).
    fn terminal_reason(&self, stop: &Stop) -> Option<&'static str> {
        Some(match stop {
            Stop::Completed => "completed",
            Stop::MaxIterations => "max_turns",
            Stop::TokenBudget { .. } | Stop::CostBudget { .. } => "budget_exhausted",
            Stop::Cancelled if self.reply.as_ref().is_some_and(|r| !r.finished) => {
                "aborted_streaming"
            }
            Stop::Cancelled => "aborted_tools",
            Stop::Failed(failure) => match failure.kind {
                FailureKind::ContextTooLong => "prompt_too_long",
                FailureKind::Config | FailureKind::Internal | FailureKind::OutputLimit => {
                    return None;
                }
                _ if failure.provider.is_some() => "api_error",
                _ => return None,
            },
            _ => return None,
        })
    }
}

/// The HTTP status of the provider error that ended the run, when keel knows it.
fn api_error_status(stop: &Stop) -> Option<u16> {
    let Stop::Failed(failure) = stop else {
        return None;
    };
    match failure.provider.as_deref()? {
        ProviderError::Server { status, .. } => Some(*status),
        ProviderError::RateLimited { .. } => Some(429),
        ProviderError::Overloaded { .. } => Some(529),
        _ => None,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// keel's tools have shapes of their own (`sdk.d.ts` keys `tool_use_result` by tool name and
/// leaves it open for tools that are not Claude Code's): what the model read and whether
/// it failed, and the images by type and size — what keel's `PostToolUse` hooks get as
/// `tool_response`.
fn tool_use_result(block: &Value) -> Value {
    let mut result = json!({
        "content": block["content"],
        "is_error": block["is_error"],
    });
    if let Some(images) = block.get("images") {
        result["images"] = images.clone();
    }
    result
}

/// A message's blocks as the lines show them: an image a tool result carries is shown as
/// its media type and size (`{"media_type": "image/png", "bytes": 12345}`), never its
/// base64 data.
fn shown_blocks(message: &Message) -> Vec<Value> {
    message
        .content
        .iter()
        .map(|original| {
            // OpenAI's reasoning reads as Claude's thinking (its summary); the encrypted part
            // is for the model alone.
            if let ContentBlock::Reasoning { summary, .. } = original {
                return json!({"type": "thinking", "thinking": summary.join("\n\n"), "signature": ""});
            }
            let mut block = serde_json::to_value(original).unwrap_or(Value::Null);
            if let ContentBlock::ToolResult { images, .. } = original
                && !images.is_empty()
                && let Some(object) = block.as_object_mut()
            {
                let described = images
                    .iter()
                    .map(|image| {
                        json!({"media_type": image.media_type(), "bytes": image.decoded_len()})
                    })
                    .collect();
                object.insert("images".to_owned(), Value::Array(described));
            }
            block
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_test_support::images::{TINY_PNG, png_base64_of_len, result_with_png};

    #[test]
    fn stream_json_shows_images_by_type_and_size_only() {
        let big = keel::provider::ImageData::new("image/png", png_base64_of_len(16_384)).unwrap();
        let message = Message::new(
            Role::User,
            vec![
                result_with_png("t1", "shot"),
                ContentBlock::tool_result_with_images("t2", "", false, vec![big]),
                ContentBlock::tool_result("t3", "plain", false),
            ],
        );
        let lines = ClaudeStream::new("s", "m", false).user(&message);
        let text = serde_json::to_string(&lines).unwrap();
        assert!(
            !text.contains(TINY_PNG) && !text.contains("AAAAAAAA"),
            "{text}"
        );
        let content: Vec<&Value> = lines.iter().map(|l| &l["message"]["content"][0]).collect();
        assert_eq!(lines[0]["tool_use_result"]["images"], content[0]["images"]);
        assert_eq!(
            content[0]["images"],
            json!([{"media_type": "image/png", "bytes": 69}])
        );
        assert_eq!(content[0]["content"], "shot");
        assert_eq!(
            content[1]["images"],
            json!([{"media_type": "image/png", "bytes": 12_288}])
        );
        assert!(content[2].get("images").is_none());
    }
}
