//! Hooks: code that runs at fixed points of a session, with Claude Code's contract, so that
//! hooks written for Claude Code (`.claude/settings.json`) run unchanged.
//!
//! # Events
//!
//! [`HookEvent`], with Claude Code's names:
//!
//! | event | fires | may |
//! |---|---|---|
//! | `SessionStart` | before the session's first prompt (`source`: `startup`, `resume`, `clear`, `compact`) | add context |
//! | `UserPromptSubmit` | before each prompt is sent (`prompt`) | add context; block the prompt ([`Stop::PromptBlocked`](crate::Stop::PromptBlocked)) |
//! | `PreToolUse` | before a call is decided | block it, decide its permission, change its input |
//! | `PostToolUse` | after a call that succeeded (`tool_response`) | add feedback to the result |
//! | `PostToolUseFailure` | after a call that failed, instead of `PostToolUse` (`error`) | add feedback to the result |
//! | `Notification` | when the approver is asked about a call (`message`, `notification_type`) | — |
//! | `Stop` | when the model ends its turn (`stop_hook_active`, `last_assistant_message`) | send it back to work |
//! | `SubagentStop` | the same, in a sub-agent's session, instead of `Stop` | the same |
//! | `PreCompact` | before a compaction (`trigger`: `manual`, `auto`; `custom_instructions`) | — |
//! | `SessionEnd` | when the host calls [`Session::end`](crate::Session::end) (`reason`) | — |
//!
//! A sub-agent's session ([`Session::set_subagent`](crate::Session::set_subagent)) fires no
//! `SessionStart`, `UserPromptSubmit` or `SessionEnd`, and `SubagentStop` instead of `Stop`.
//!
//! # Hooks
//!
//! A hook is either a Rust callback ([`Hook`]) or an external command configured in TOML
//! ([`HookConfig`]):
//!
//! ```toml
//! [[hooks]]
//! event = "PreToolUse"
//! matcher = "Bash|Edit|Write"
//! command = "./check.sh"
//! timeout_secs = 60
//! ```
//!
//! A matcher (tool events only) is a regex matching the whole tool name, tried on keel's name
//! and on each of Claude Code's names for the tool ([`keel_tool::claude`]): `Bash` matches
//! `run_command`, `Edit|Write` matches `patch_file` and `write_file`, `Edit|MultiEdit|Write`,
//! `run_command` and `mcp__github__.*` work as written; empty, `*` or none matches every tool,
//! `mcp__github__*` every tool of that server.
//!
//! # Input
//!
//! A command runs as `bash -c <command>` in the session's directory, with an environment
//! that holds no credentials: variables with credential-like names (`*_API_KEY`, `*_TOKEN`,
//! `*_SECRET`, `*_PASSWORD`, …), agent and desktop sockets (`SSH_AUTH_SOCK`, `TMUX`,
//! `DBUS_SESSION_BUS_ADDRESS`, …) and the variables named by [`Hooks::hide_env`] are removed;
//! `CLAUDE_PROJECT_DIR`, `KEEL_PROJECT_DIR` and `KEEL_SESSION_ID` are set. It reads the
//! [`HookInput`] as JSON on its stdin, as Claude Code 2.1 writes it: `session_id`,
//! `transcript_path` (the session's file, when it is saved), `cwd`, `permission_mode`
//! ([`Session::set_permission_mode`](crate::Session::set_permission_mode); not at
//! `SessionStart`), `agent_id` and `agent_type` (in a sub-agent's session),
//! `hook_event_name`, then the event's own fields ([`HookEventInput`]). Tool events carry
//! Claude's tool name (`Bash`, `Read`, `Write`, `Edit`, `Grep`, `Glob`, `LS`, `Agent`; keel's
//! for a tool without a twin) and Claude's shapes of `tool_input` and `tool_response`
//! (absolute `file_path`, `structuredPatch`, `stdout`…; see [`keel_tool::claude::tool_input`]
//! and [`keel_tool::claude::tool_response`]). A Rust hook reads keel's own view through
//! [`HookInput`]'s methods (keel's name and arguments: [`HookInput::tool_name`], …) and
//! Claude's through its `claude_` ones, or matches on [`HookInput::event`].
//!
//! # Output
//!
//! A command answers through its exit code and stdout:
//!
//! - exit 0 with empty or plain-text stdout: [`HookOutcome::Continue`]; for `SessionStart`
//!   and `UserPromptSubmit`, the text is context for the model ([`HookReport::messages`]);
//! - exit 0 with a JSON object on stdout, read as Claude Code does:
//!   - `hookSpecificOutput.permissionDecision` (`allow`, `deny` or `ask`, with
//!     `permissionDecisionReason`): [`HookOutcome::Permission`] (`PreToolUse` only);
//!   - `hookSpecificOutput.updatedInput` (`PreToolUse` only): the call's new input, in
//!     Claude's shape; it replaces the model's before the permission rules, the approver and
//!     the sandbox judge the call, which judge the new input as they would the model's
//!     ([`HookReport::updated_input`]);
//!   - `"decision": "block"` with `"reason"`: [`HookOutcome::Block`];
//!     `"decision": "approve"` (the older form of `allow`): a permission `Allow`
//!     (`PreToolUse` only);
//!   - `"continue": false` with `"stopReason"`: [`HookOutcome::Stop`]: the run stops
//!     ([`Stop::HookStopped`](crate::Stop::HookStopped)), whatever the event;
//!   - `hookSpecificOutput.additionalContext`: context for the model
//!     ([`HookReport::messages`]): with the prompt (`SessionStart`, `UserPromptSubmit`), with
//!     the call's result (`PostToolUse`, `PostToolUseFailure`);
//!   - `systemMessage`: a message for the person ([`HookReport::system_messages`], reported
//!     as [`AgentEvent::HookMessage`](crate::AgentEvent::HookMessage));
//!   - `suppressOutput`: kept in [`HookReport::suppress_output`] for the host;
//!
//!   when one output says several of these, the most decisive wins;
//! - exit 2: [`HookOutcome::Block`] with the trimmed stderr as the reason;
//! - any other exit, a timeout (60 s unless configured; the command's whole process group is
//!   killed), a spawn error, or stdout that starts with `{` but is not valid JSON: a failure in
//!   [`HookReport::failures`], and the hook counts as [`HookOutcome::Continue`].
//!
//! What an outcome does depends on the event (see [`HookOutcome`]); `Notification`,
//! `PreCompact` and `SessionEnd` hooks cannot change what happens, only stop the run
//! (`Notification`, `PreCompact` in a run) or report.
//!
//! Stdout and stderr are each kept up to 64 KiB (the rest is read and dropped). Once the
//! shell has exited, its output pipes get one second to close: a process the hook left running
//! in the background may hold them open, and is left alone.
//!
//! Hook failures are reported, never fatal: [`Hooks::run`] cannot fail.

mod command;
mod input;

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt as _;
use keel_tool::ProcessRunner;
use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use command::CommandHook;
pub use input::{
    HookEventInput, HookInput, HookSessionInfo, HookSubagent, HookToolCall, HookToolResponse,
};

/// The timeout of a command hook whose configuration sets none.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// The point of a session at which hooks run; serialized with Claude Code's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HookEvent {
    /// The session starts (or resumes), before its first prompt; not in a sub-agent's
    /// session.
    SessionStart,
    /// A prompt of the person is about to be sent; hooks may block it or add context. Not in
    /// a sub-agent's session.
    UserPromptSubmit,
    /// A tool call is about to run; hooks may block it, decide its permission or change its
    /// input.
    PreToolUse,
    /// A tool call has run and succeeded; hooks may add feedback for the model.
    PostToolUse,
    /// A tool call has run and failed (its result is an error); hooks may add feedback for
    /// the model. `PostToolUse` does not fire for that call.
    PostToolUseFailure,
    /// The engine asks the approver about a call (Claude Code's permission prompt).
    Notification,
    /// The model has finished its turn; hooks may send it back to work.
    Stop,
    /// The model of a sub-agent's session ([`Session::set_subagent`](crate::Session::set_subagent))
    /// has finished its turn; fires there instead of `Stop`, with the same powers.
    SubagentStop,
    /// The history is about to be compacted (by the session as it fills up, or asked for).
    PreCompact,
    /// The host ends the session ([`Session::end`](crate::Session::end)).
    SessionEnd,
}

impl HookEvent {
    /// Every event, in the order of a session's life.
    pub const ALL: [Self; 10] = [
        Self::SessionStart,
        Self::UserPromptSubmit,
        Self::PreToolUse,
        Self::PostToolUse,
        Self::PostToolUseFailure,
        Self::Notification,
        Self::Stop,
        Self::SubagentStop,
        Self::PreCompact,
        Self::SessionEnd,
    ];

    /// Claude Code's name of the event, e.g. `"PreToolUse"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::SessionStart => "SessionStart",
            Self::UserPromptSubmit => "UserPromptSubmit",
            Self::PreToolUse => "PreToolUse",
            Self::PostToolUse => "PostToolUse",
            Self::PostToolUseFailure => "PostToolUseFailure",
            Self::Notification => "Notification",
            Self::Stop => "Stop",
            Self::SubagentStop => "SubagentStop",
            Self::PreCompact => "PreCompact",
            Self::SessionEnd => "SessionEnd",
        }
    }

    /// Whether the event concerns a tool call (only those use matchers).
    pub fn is_tool_event(self) -> bool {
        matches!(
            self,
            Self::PreToolUse | Self::PostToolUse | Self::PostToolUseFailure
        )
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a session starts: `SessionStart`'s `source`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionStartSource {
    /// A new session (`startup`).
    Startup,
    /// A saved session reopened or forked (`resume`).
    Resume,
    /// A new session after the person cleared the last one (`clear`).
    Clear,
    /// The session goes on after a compaction (`compact`).
    Compact,
}

/// Why a session ends: `SessionEnd`'s `reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionEndReason {
    /// The person cleared the session (`clear`).
    Clear,
    /// The person logged out (`logout`).
    Logout,
    /// The person left the prompt (end of input, `/exit`: `prompt_input_exit`).
    PromptInputExit,
    /// Anything else, e.g. a one-shot run that finished (`other`).
    Other,
}

/// What started a compaction: `PreCompact`'s `trigger`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactTrigger {
    /// Asked for ([`Session::compact_now`](crate::Session::compact_now), `/compact`).
    Manual,
    /// The session's history reached the compaction threshold, or the model refused a request
    /// as too long.
    Auto,
}

/// A permission decision given by a `PreToolUse` hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PermissionDecision {
    /// Run the call without asking.
    Allow,
    /// Refuse the call; the reason is the tool result the model sees.
    Deny,
    /// Ask the user.
    Ask,
}

/// A hook's verdict.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub enum HookOutcome {
    /// Nothing to say; go on.
    #[default]
    Continue,
    /// Block (exit code 2, or `"decision": "block"`): `PreToolUse` → the call is not run and
    /// `reason` (stderr) is the tool result the model sees; `PostToolUse`,
    /// `PostToolUseFailure` → `reason` is added to the result for the model; `Stop`,
    /// `SubagentStop` → the run does not stop, `reason` is sent to the model as feedback (the
    /// engine bounds this); `UserPromptSubmit` → the prompt is not sent and the run ends with
    /// [`Stop::PromptBlocked`](crate::Stop::PromptBlocked); other events ignore it.
    Block {
        /// Why; shown to the model.
        reason: String,
    },
    /// A permission decision from JSON stdout (`hookSpecificOutput.permissionDecision` =
    /// allow|deny|ask, with `permissionDecisionReason`; `PreToolUse` only).
    Permission {
        /// The decision.
        decision: PermissionDecision,
        /// The hook's reason, if it gave one.
        reason: Option<String>,
    },
    /// `"continue": false` (with `stopReason`): the run stops, whatever the event — the
    /// session ends the run with [`Stop::HookStopped`](crate::Stop::HookStopped) (a prompt
    /// it was about to send: [`Stop::PromptBlocked`](crate::Stop::PromptBlocked)); at
    /// `PreToolUse` the call is not run either. The most decisive outcome of all.
    Stop {
        /// Why (`stopReason`); shown to the person, not the model.
        reason: String,
    },
}

impl HookOutcome {
    /// How decisive the outcome is: Stop > Block > Deny > Ask > Allow > Continue.
    fn rank(&self) -> u8 {
        match self {
            Self::Stop { .. } => 5,
            Self::Continue => 0,
            Self::Permission {
                decision: PermissionDecision::Allow,
                ..
            } => 1,
            Self::Permission {
                decision: PermissionDecision::Ask,
                ..
            } => 2,
            Self::Permission {
                decision: PermissionDecision::Deny,
                ..
            } => 3,
            Self::Block { .. } => 4,
        }
    }

    /// Combines two outcomes: the more decisive wins, the earlier on a tie, except that the
    /// reasons of several blocks are joined (one per line) so the model sees them all.
    fn merge(self, other: Self) -> Self {
        match (self, other) {
            (Self::Block { reason: first }, Self::Block { reason: second }) => Self::Block {
                reason: format!("{first}\n{second}"),
            },
            (current, other) if other.rank() > current.rank() => other,
            (current, _) => current,
        }
    }
}

/// What a hook's answer in Claude Code's JSON form means for `event` — the form command
/// hooks print and the Claude Agent SDKs' hook callbacks return: `{"decision": "block",
/// "reason": …}`, `{"hookSpecificOutput": {"permissionDecision": "deny", …}}`,
/// `{"continue": false, "stopReason": …}`. For a Rust hook that forwards to such a callback;
/// `additionalContext` is not kept (a Rust hook's outcome carries none; [`answer_from_json`] keeps it). An unknown decision
/// is an error naming it.
pub fn outcome_from_json(event: HookEvent, answer: &Value) -> Result<HookOutcome, String> {
    command::parse_json(event, answer).map(|result| result.outcome)
}

/// A hook's whole answer in Claude Code's JSON form, for `event`: what
/// [`outcome_from_json`] reads, and the context, `systemMessage`, `suppressOutput` and
/// `updatedInput` beside it.
pub fn answer_from_json(event: HookEvent, answer: &Value) -> Result<HookAnswer, String> {
    command::parse_json(event, answer)
}

/// A Rust hook. It reads keel's view of the input through [`HookInput`]'s methods (keel's
/// tool names and arguments: [`HookInput::tool_name`], …), Claude Code's through its
/// `claude_` ones ([`HookInput::claude_tool_name`], …) or by serializing it (what a command
/// hook reads).
#[async_trait]
pub trait Hook: Send + Sync {
    /// Runs the hook. An `Err` is a failure: it is reported in [`HookReport::failures`] and the
    /// hook counts as [`HookOutcome::Continue`]. A panic is caught and reported the same way.
    async fn run(&self, input: &HookInput) -> Result<HookOutcome, String>;

    /// The hook's whole answer: by default [`run`](Self::run)'s outcome alone. A hook that
    /// answers as Claude Code's hooks do (a program's hook callback) gives its context,
    /// `systemMessage` and `updatedInput` too ([`answer_from_json`]).
    async fn answer(&self, input: &HookInput) -> Result<HookAnswer, String> {
        self.run(input).await.map(HookAnswer::from)
    }

    /// The hook's name, used in failure reports.
    fn name(&self) -> &str {
        "Rust hook"
    }
}

/// A command hook as configured:
/// `[[hooks]] event = "PreToolUse"  matcher = "run_command|write_file"  command = "./check.sh"
/// timeout_secs = 60`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// The event the hook runs for.
    pub event: HookEvent,
    /// A regex on the tool name, anchored at both ends, tried on keel's name and on Claude
    /// Code's names for the tool (`Bash`, `Edit|Write`); absent, empty or `*` matches every
    /// tool. Only tool events (`PreToolUse`, `PostToolUse`, `PostToolUseFailure`) use it;
    /// other events ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The command, run as `bash -c <command>` in the session's directory.
    pub command: String,
    /// Seconds before the command is killed and the hook reported as failed; 60 if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

impl HookConfig {
    /// Checks that every plain tool name the matcher lists (`Bash|Edit|run_command`) names a
    /// tool: one of `known` (the agent's tools), one of Claude Code's tool names, or an MCP
    /// tool (`mcp__…`). Alternatives that are patterns (`mcp__github__.*`, `.*`) are not
    /// checked. A misspelt name (`Bsh`) would otherwise never match, and a guard the user
    /// relies on would never run.
    ///
    /// ```
    /// use keel_engine::{HookConfig, HookEvent};
    ///
    /// let hook = |matcher: &str| HookConfig {
    ///     event: HookEvent::PreToolUse,
    ///     matcher: Some(matcher.to_owned()),
    ///     command: "./check.sh".to_owned(),
    ///     timeout_secs: None,
    /// };
    /// assert!(hook("Bash|Edit|run_command|mcp__gh__.*").check_tools(&["run_command"]).is_ok());
    /// let error = hook("Bsh|Write").check_tools(&["run_command"]).unwrap_err();
    /// assert!(error.to_string().contains("`Bsh`"));
    /// ```
    pub fn check_tools(&self, known: &[&str]) -> Result<(), HookConfigError> {
        let Some(matcher) = self
            .matcher
            .as_deref()
            .filter(|_| self.event.is_tool_event())
        else {
            return Ok(());
        };
        let unknown: Vec<String> = matcher
            .split('|')
            .map(str::trim)
            .filter(|name| {
                !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                    && !known.contains(name)
                    && keel_tool::claude::resolve(name).is_none()
                    && !name.starts_with("mcp__")
            })
            .map(str::to_owned)
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        Err(HookConfigError::UnknownTool {
            hook: format!("{} hook `{}`", self.event, self.command),
            matcher: matcher.to_owned(),
            names: unknown,
        })
    }
}

/// A hook configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HookConfigError {
    /// The matcher names a tool that does not exist.
    #[error(
        "{hook}: its matcher `{matcher}` names {}, which is neither one of the agent's tools, \
         one of Claude Code's tool names (Bash, Read, Edit, Write, …) nor an MCP tool \
         (mcp__<server>__<tool>); correct the name",
        names.iter().map(|name| format!("`{name}`")).collect::<Vec<_>>().join(", ")
    )]
    UnknownTool {
        /// Which hook.
        hook: String,
        /// The matcher as written.
        matcher: String,
        /// The names no tool has.
        names: Vec<String>,
    },
    /// The matcher is not a valid regex.
    #[error("{hook}: invalid matcher regex `{matcher}`: {source}")]
    InvalidMatcher {
        /// Which hook.
        hook: String,
        /// The matcher as written.
        matcher: String,
        /// The regex problem.
        #[source]
        source: Box<regex::Error>,
    },
    /// `timeout_secs` is 0.
    #[error("{hook}: timeout_secs must be at least 1")]
    ZeroTimeout {
        /// Which hook.
        hook: String,
    },
    /// The command is empty.
    #[error("{hook}: the command is empty")]
    EmptyCommand {
        /// Which hook.
        hook: String,
    },
}

/// Which tools a hook applies to: all (`*` or nothing), the tools whose name starts with a
/// prefix (a plain name ending in `*`, as written for MCP servers' tools: `mcp__github__*`),
/// or a regex matching the whole name (`run_command|write_file`, `mcp__github__.*`).
#[derive(Debug, Clone)]
enum Matcher {
    All,
    Prefix(String),
    Regex(Regex),
}

impl Matcher {
    fn parse(
        matcher: Option<&str>,
        hook: impl FnOnce() -> String,
    ) -> Result<Self, HookConfigError> {
        match matcher.map(str::trim) {
            None | Some("" | "*") => Ok(Self::All),
            Some(pattern)
                if pattern
                    .strip_suffix('*')
                    .is_some_and(keel_tool::is_valid_tool_name) =>
            {
                Ok(Self::Prefix(pattern.trim_end_matches('*').to_owned()))
            }
            Some(pattern) => Regex::new(&format!("^(?:{pattern})$"))
                .map(Self::Regex)
                .map_err(|source| HookConfigError::InvalidMatcher {
                    hook: hook(),
                    matcher: pattern.to_owned(),
                    source: Box::new(source),
                }),
        }
    }

    /// Whether the matcher matches keel's tool `tool_name` by keel's name or by any of
    /// Claude Code's names for it (`Bash` matches `run_command`; `Edit` and `MultiEdit`
    /// match `patch_file`).
    fn matches(&self, tool_name: Option<&str>) -> bool {
        let Some(name) = tool_name else {
            return matches!(self, Self::All);
        };
        std::iter::once(name)
            .chain(keel_tool::claude::claude_names(name))
            .any(|name| self.matches_name(name))
    }

    fn matches_name(&self, name: &str) -> bool {
        match self {
            Self::All => true,
            Self::Prefix(prefix) => name.starts_with(prefix.as_str()),
            Self::Regex(regex) => regex.is_match(name),
        }
    }
}

/// What runs when a hook fires.
#[derive(Clone)]
enum Action {
    Command(CommandHook),
    Rust(Arc<dyn Hook>),
}

#[derive(Clone)]
struct Entry {
    event: HookEvent,
    matcher: Matcher,
    action: Action,
}

impl Entry {
    fn applies_to(&self, input: &HookInput) -> bool {
        self.event == input.hook_event_name()
            && (!self.event.is_tool_event() || self.matcher.matches(input.tool_name()))
    }
}

/// The hooks of a session, in the order they were added, and the environment variables
/// their commands never see.
#[derive(Default, Clone)]
pub struct Hooks {
    entries: Vec<Entry>,
    /// Variables removed from command hooks' environment besides the usual credential names.
    hidden_env: Vec<String>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for entry in &self.entries {
            let what = match &entry.action {
                Action::Command(command) => format!("command `{}`", command.config.command),
                Action::Rust(hook) => format!("Rust hook `{}`", hook.name()),
            };
            list.entry(&format_args!(
                "{} {what} ({:?})",
                entry.event, entry.matcher
            ));
        }
        list.finish()
    }
}

/// The result of running the hooks of one event.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HookReport {
    /// The most decisive outcome: Stop > Block > Permission Deny > Ask > Allow > Continue (the
    /// reasons of several blocks are joined, one per line).
    pub outcome: HookOutcome,
    /// The hooks that failed (non-zero exit other than 2, timeout, spawn error, bad JSON, a
    /// Rust hook's error or panic), each saying which hook and why. Failures never block.
    pub failures: Vec<String>,
    /// Context for the model from successful hooks: `additionalContext` from JSON stdout, and
    /// for `SessionStart` and `UserPromptSubmit`, plain-text stdout.
    pub messages: Vec<String>,
    /// Messages for the person (`systemMessage`), in order; the session reports each as an
    /// [`AgentEvent::HookMessage`](crate::AgentEvent::HookMessage).
    pub system_messages: Vec<String>,
    /// Whether a hook asked that its output be kept out of the transcript shown to the person
    /// (`suppressOutput`); for the host to honour.
    pub suppress_output: bool,
    /// `PreToolUse`: the tool input a hook gave in place of the model's
    /// (`hookSpecificOutput.updatedInput`), in Claude Code's shape; the last hook's wins. The
    /// session turns it into keel's arguments ([`keel_tool::claude::keel_input`]) and checks
    /// the changed call against the permission rules, the approver and the sandbox as any
    /// other.
    pub updated_input: Option<Value>,
}

impl Hooks {
    /// No hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Command hooks from their configuration, run by `runner` (keel-sandbox's
    /// `ProcessGroupRunner`: each in a process group of its own, with a scrubbed
    /// environment). A bad matcher regex, an empty command or a zero timeout is an error naming
    /// the hook (`hooks[i]`, its event and command).
    pub fn from_config(
        configs: &[HookConfig],
        runner: Arc<dyn ProcessRunner>,
    ) -> Result<Self, HookConfigError> {
        let mut hooks = Self::new();
        for (index, config) in configs.iter().enumerate() {
            let name = || format!("hooks[{index}] ({} `{}`)", config.event, config.command);
            if config.command.trim().is_empty() {
                return Err(HookConfigError::EmptyCommand { hook: name() });
            }
            let timeout = match config.timeout_secs {
                Some(0) => return Err(HookConfigError::ZeroTimeout { hook: name() }),
                Some(secs) => Duration::from_secs(secs),
                None => DEFAULT_HOOK_TIMEOUT,
            };
            let matcher = Matcher::parse(config.matcher.as_deref(), name)?;
            hooks.entries.push(Entry {
                event: config.event,
                matcher,
                action: Action::Command(CommandHook {
                    config: config.clone(),
                    timeout,
                    runner: runner.clone(),
                }),
            });
        }
        Ok(hooks)
    }

    /// The configurations of the command hooks, in order (with those of hooks [`extend`]ed
    /// in), e.g. to carry them to another process, where [`Hooks::from_config`] builds the
    /// same hooks again. Rust hooks are not among them: see
    /// [`has_in_process_hooks`](Self::has_in_process_hooks).
    ///
    /// [`extend`]: Self::extend
    pub fn command_configs(&self) -> Vec<HookConfig> {
        self.entries
            .iter()
            .filter_map(|entry| match &entry.action {
                Action::Command(command) => Some(command.config.clone()),
                Action::Rust(_) => None,
            })
            .collect()
    }

    /// Whether any hook is a Rust hook ([`Hooks::add`]), which cannot be carried to another
    /// process.
    pub fn has_in_process_hooks(&self) -> bool {
        self.entries
            .iter()
            .any(|entry| matches!(entry.action, Action::Rust(_)))
    }

    /// Adds a Rust hook for `event`; `matcher` is as in [`HookConfig::matcher`].
    pub fn add(
        &mut self,
        event: HookEvent,
        matcher: Option<&str>,
        hook: Arc<dyn Hook>,
    ) -> Result<(), HookConfigError> {
        let matcher = Matcher::parse(matcher, || format!("Rust hook `{}` ({event})", hook.name()))?;
        self.entries.push(Entry {
            event,
            matcher,
            action: Action::Rust(hook),
        });
        Ok(())
    }

    /// Hides the environment variables `names` from command hooks, besides those every hook
    /// command is denied (credential-like names such as `*_API_KEY`, `*_TOKEN`, `*_SECRET`,
    /// and agent sockets such as `SSH_AUTH_SOCK` and `TMUX`). A host passes the variables
    /// holding the keys it uses (a provider's `api_key_env`) and its sandbox policy's
    /// `hidden_env`.
    ///
    /// ```
    /// use keel_engine::Hooks;
    ///
    /// let hooks = Hooks::new().hide_env(["MY_PROVIDER_CREDS"]);
    /// assert_eq!(hooks.hidden_env(), ["MY_PROVIDER_CREDS"]);
    /// ```
    #[must_use]
    pub fn hide_env<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for name in names {
            self.hide(name.into());
        }
        self
    }

    fn hide(&mut self, name: String) {
        if !name.is_empty() && !self.hidden_env.contains(&name) {
            self.hidden_env.push(name);
        }
    }

    /// The variables hidden from command hooks by [`hide_env`](Self::hide_env).
    pub fn hidden_env(&self) -> &[String] {
        &self.hidden_env
    }

    /// Appends the hooks of `other`, after these; the variables either hides are hidden.
    pub fn extend(&mut self, other: Hooks) {
        self.entries.extend(other.entries);
        for name in other.hidden_env {
            self.hide(name);
        }
    }

    /// Whether there are no hooks at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether any hook is registered for `event` (whatever its matcher), so a caller can skip
    /// building the input.
    pub fn handles(&self, event: HookEvent) -> bool {
        self.entries.iter().any(|entry| entry.event == event)
    }

    /// Runs every hook for the input's event whose matcher matches its tool name, in order,
    /// one after the other; never fails.
    pub async fn run(&self, input: &HookInput) -> HookReport {
        let mut report = HookReport::default();
        for entry in self.entries.iter().filter(|entry| entry.applies_to(input)) {
            let result = match &entry.action {
                Action::Command(command) => command.run(input, &self.hidden_env).await,
                Action::Rust(hook) => run_rust(hook.as_ref(), input).await,
            };
            match result {
                Ok(result) => {
                    report.outcome = std::mem::take(&mut report.outcome).merge(result.outcome);
                    report.messages.extend(result.messages);
                    report.system_messages.extend(result.system_messages);
                    report.suppress_output |= result.suppress_output;
                    if result.updated_input.is_some() {
                        report.updated_input = result.updated_input;
                    }
                }
                Err(failure) => {
                    tracing::warn!(event = %input.hook_event_name(), %failure, "hook failed");
                    report.failures.push(failure);
                }
            }
        }
        tracing::debug!(
            event = %input.hook_event_name(),
            outcome = ?report.outcome,
            failures = report.failures.len(),
            "hooks ran"
        );
        report
    }
}

/// What one hook said: its outcome, and what Claude Code's JSON answer may add to it.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct HookAnswer {
    /// Whether the call (or turn) goes on, and its permission.
    pub outcome: HookOutcome,
    /// Context for the model (`additionalContext`, a SessionStart's or UserPromptSubmit's
    /// plain text).
    pub messages: Vec<String>,
    /// Messages for the user (`systemMessage`).
    pub system_messages: Vec<String>,
    /// `suppressOutput`.
    pub suppress_output: bool,
    /// A PreToolUse hook's `updatedInput`, in Claude Code's shape for the tool.
    pub updated_input: Option<Value>,
}

impl From<HookOutcome> for HookAnswer {
    fn from(outcome: HookOutcome) -> Self {
        Self {
            outcome,
            ..Self::default()
        }
    }
}

async fn run_rust(hook: &dyn Hook, input: &HookInput) -> Result<HookAnswer, String> {
    let name = hook.name();
    let event = input.hook_event_name();
    match AssertUnwindSafe(hook.answer(input)).catch_unwind().await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => Err(format!("Rust hook `{name}` ({event}) failed: {error}")),
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            Err(format!("Rust hook `{name}` ({event}) panicked: {message}"))
        }
    }
}

#[cfg(test)]
mod matcher_tests {
    use super::Matcher;

    fn matches(pattern: &str, tool: &str) -> bool {
        Matcher::parse(Some(pattern), || "test".to_owned())
            .map(|m| m.matches(Some(tool)))
            .unwrap_or(false)
    }

    #[test]
    fn mcp_tools_are_matched_as_claude_code_users_write_it() {
        assert!(matches("mcp__github__*", "mcp__github__create_issue"));
        assert!(matches("mcp__github__.*", "mcp__github__create_issue"));
        assert!(!matches("mcp__github__*", "mcp__gitlab__create_issue"));
        assert!(!matches("mcp__github__.*", "mcp__githubx__create_issue"));
        assert!(matches("*", "anything"));
        // Other patterns are regexes matching the whole name, as before.
        assert!(matches("run_command|write_file", "write_file"));
        assert!(!matches("run_command", "run_command_x"));
        assert!(matches("run_.*", "run_command"));
    }

    #[test]
    fn claude_codes_tool_names_match_keels_tools() {
        assert!(matches("Bash", "run_command"));
        assert!(matches("Edit|Write", "patch_file"));
        assert!(matches("Edit|Write", "write_file"));
        assert!(matches("Edit|MultiEdit|Write", "patch_file"));
        assert!(matches("MultiEdit", "patch_file"));
        assert!(matches("Read", "read_file"));
        assert!(matches(".*", "git_commit"));
        assert!(matches("", "git_commit"));
        assert!(!matches("Bash", "read_file"));
        assert!(!matches("Edit", "write_file"));
        assert!(!matches("WebFetch", "run_command"));
        // A word that names no tool is a regex all the same, matching nothing here.
        assert!(!matches("Bsah", "run_command"));
    }
}
