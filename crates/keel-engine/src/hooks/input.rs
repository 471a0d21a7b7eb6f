//! What a hook receives: [`HookInput`], the session's fields every event has
//! ([`HookSessionInfo`]) and the event's own ([`HookEventInput`]), serialized as Claude Code
//! 2.1 sends them.

use std::path::{Path, PathBuf};

use keel_tool::ToolOutput;
use serde::Serialize;
use serde_json::{Value, json};

use super::{CompactTrigger, HookEvent, SessionEndReason, SessionStartSource};

/// What a hook receives: the session it runs in ([`HookSessionInfo`]) and the event it runs
/// for, with that event's own fields ([`HookEventInput`]).
///
/// A Rust hook reads keel's view through its methods: [`tool_name`](Self::tool_name) is
/// keel's tool name (`run_command`), [`tool_input`](Self::tool_input) keel's arguments
/// (relative `path`), [`tool_response`](Self::tool_response) keel's result `{"content":
/// "...", "is_error": false}` (plus `"images": [{"media_type", "bytes"}]` when it carries
/// images; their data is not passed); Claude Code's through the `claude_` ones
/// ([`claude_tool_name`](Self::claude_tool_name), …).
///
/// Serialized — the JSON on a command hook's stdin, and what a Rust hook forwards to a Claude
/// Agent SDK program — it is Claude Code's view, field for field as Claude Code 2.1 sends
/// it: `tool_name` is Claude's name for a tool that has one (`Bash`, `Edit`, see
/// [`keel_tool::claude`]), `tool_input` and `tool_response` are in that tool's Claude shape
/// ([`keel_tool::claude::tool_input`], [`keel_tool::claude::tool_response`]: absolute
/// `file_path`, `structuredPatch`, `stdout`…); keel's tools without a twin keep keel's name
/// and shapes. Fields come in Claude Code's order: the session's (`session_id`,
/// `transcript_path`, `cwd`, `permission_mode`, and in a sub-agent's session `agent_id` and
/// `agent_type`), `hook_event_name`, then the event's own; absent ones are left out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookInput {
    /// The fields every event has: which session, where.
    #[serde(flatten)]
    pub session: HookSessionInfo,
    /// The event, with its own fields.
    #[serde(flatten)]
    pub event: HookEventInput,
}

/// What every hook input says about the session it comes from; the session fills in all
/// but the id and the directory as it runs the hooks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookSessionInfo {
    /// The session's id.
    pub session_id: String,
    /// The session's file (JSON Lines), when the session is saved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<PathBuf>,
    /// The session's working directory; command hooks run there.
    pub cwd: PathBuf,
    /// Claude Code's name of the approval mode: `default`, `acceptEdits`, `plan`,
    /// `bypassPermissions` ([`Session::set_permission_mode`](crate::Session::set_permission_mode));
    /// the session gives it at every event but `SessionStart`, as Claude Code does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission_mode: Option<String>,
    /// The sub-agent whose session this is
    /// ([`Session::set_subagent`](crate::Session::set_subagent)), if it is one.
    #[serde(flatten)]
    pub subagent: Option<HookSubagent>,
}

/// The sub-agent a hook's session belongs to: `agent_id` and `agent_type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookSubagent {
    /// Its id: its session's.
    pub agent_id: String,
    /// Its name (`reviewer`).
    pub agent_type: String,
}

/// The event a hook runs for, with the fields Claude Code gives for it; serialized as
/// `hook_event_name` (Claude Code's name of the event, as [`HookEvent::name`]) followed by
/// those fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "hook_event_name")]
pub enum HookEventInput {
    /// The session starts (or resumes), before its first prompt.
    SessionStart {
        /// Why the session starts.
        source: SessionStartSource,
    },
    /// A prompt of the person is about to be sent.
    UserPromptSubmit {
        /// The prompt's text.
        prompt: String,
    },
    /// A tool call is about to run.
    PreToolUse {
        /// The call.
        #[serde(flatten)]
        call: HookToolCall,
        /// The call's id, as the model gave it.
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
    },
    /// A tool call has run and succeeded.
    PostToolUse {
        /// The call.
        #[serde(flatten)]
        call: HookToolCall,
        /// Its result.
        #[serde(flatten)]
        response: HookToolResponse,
        /// The call's id, as the model gave it.
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
    },
    /// A tool call has run and failed.
    PostToolUseFailure {
        /// The call.
        #[serde(flatten)]
        call: HookToolCall,
        /// The call's id, as the model gave it.
        #[serde(skip_serializing_if = "Option::is_none")]
        tool_use_id: Option<String>,
        /// The failed call's result text.
        error: String,
    },
    /// The engine asks the approver about a call.
    Notification {
        /// What the person is told.
        message: String,
        /// Its kind (`permission_prompt`).
        notification_type: String,
    },
    /// The model has finished its turn.
    Stop {
        /// Whether the model is already working on because a stop hook blocked, so that a
        /// hook can avoid sending it back forever.
        stop_hook_active: bool,
        /// The text of the model's last reply.
        last_assistant_message: String,
    },
    /// The model of a sub-agent's session has finished its turn (instead of `Stop`).
    SubagentStop {
        /// As `Stop`'s.
        stop_hook_active: bool,
        /// As `Stop`'s.
        last_assistant_message: String,
    },
    /// The history is about to be compacted.
    PreCompact {
        /// What started the compaction.
        trigger: CompactTrigger,
        /// The person's instructions for the summary (empty when none).
        custom_instructions: String,
    },
    /// The host ends the session.
    SessionEnd {
        /// Why the session ends.
        reason: SessionEndReason,
    },
}

impl HookEventInput {
    /// The event, e.g. [`HookEvent::PreToolUse`].
    pub fn hook_event_name(&self) -> HookEvent {
        match self {
            Self::SessionStart { .. } => HookEvent::SessionStart,
            Self::UserPromptSubmit { .. } => HookEvent::UserPromptSubmit,
            Self::PreToolUse { .. } => HookEvent::PreToolUse,
            Self::PostToolUse { .. } => HookEvent::PostToolUse,
            Self::PostToolUseFailure { .. } => HookEvent::PostToolUseFailure,
            Self::Notification { .. } => HookEvent::Notification,
            Self::Stop { .. } => HookEvent::Stop,
            Self::SubagentStop { .. } => HookEvent::SubagentStop,
            Self::PreCompact { .. } => HookEvent::PreCompact,
            Self::SessionEnd { .. } => HookEvent::SessionEnd,
        }
    }

    /// The tool call of a tool event; `None` for the others.
    pub fn tool_call(&self) -> Option<&HookToolCall> {
        match self {
            Self::PreToolUse { call, .. }
            | Self::PostToolUse { call, .. }
            | Self::PostToolUseFailure { call, .. } => Some(call),
            _ => None,
        }
    }

    /// The tool call's id of a tool event, when it was given.
    pub fn tool_use_id(&self) -> Option<&str> {
        match self {
            Self::PreToolUse { tool_use_id, .. }
            | Self::PostToolUse { tool_use_id, .. }
            | Self::PostToolUseFailure { tool_use_id, .. } => tool_use_id.as_deref(),
            _ => None,
        }
    }
}

/// A tool call as hooks see it: keel's tool name and arguments, for Rust hooks, and Claude
/// Code's, serialized as `tool_name` and `tool_input`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookToolCall {
    /// keel's name of the tool.
    #[serde(skip)]
    name: String,
    /// keel's arguments.
    #[serde(skip)]
    input: Value,
    /// Claude Code's name of the tool, or keel's for a tool without a twin.
    #[serde(rename = "tool_name")]
    claude_name: String,
    /// The arguments in the Claude shape of the tool.
    #[serde(rename = "tool_input")]
    claude_input: Value,
}

impl HookToolCall {
    /// The call of keel's tool `name` with keel's `input`, in a session whose directory is
    /// `cwd` (Claude's paths are absolute).
    fn new(name: impl Into<String>, input: Value, cwd: &Path) -> Self {
        let name = name.into();
        let claude_name = keel_tool::claude::claude_name(&name)
            .unwrap_or(&name)
            .to_owned();
        let claude_input = keel_tool::claude::tool_input(&name, &input, cwd);
        Self {
            name,
            input,
            claude_name,
            claude_input,
        }
    }

    /// keel's name of the tool (`run_command`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// keel's arguments (relative `path`).
    pub fn input(&self) -> &Value {
        &self.input
    }

    /// Claude Code's name of the tool (`Bash` for `run_command`), or keel's for a tool
    /// without a Claude twin.
    pub fn claude_name(&self) -> &str {
        &self.claude_name
    }

    /// The arguments in Claude Code's shape ([`keel_tool::claude::tool_input`]).
    pub fn claude_input(&self) -> &Value {
        &self.claude_input
    }
}

/// A call's result as `PostToolUse` hooks see it: keel's shape, for Rust hooks, and Claude
/// Code's, serialized as `tool_response`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookToolResponse {
    /// keel's shape.
    #[serde(skip)]
    response: Value,
    /// The tool's Claude shape.
    #[serde(rename = "tool_response")]
    claude_response: Value,
}

impl HookToolResponse {
    /// The result `output` of `call`, in a session whose directory is `cwd`.
    fn new(call: &HookToolCall, output: &ToolOutput, cwd: &Path) -> Self {
        let mut response = json!({"content": output.content, "is_error": output.is_error});
        if !output.images.is_empty() {
            response["images"] = output
                .images
                .iter()
                .map(
                    |image| json!({"media_type": image.media_type(), "bytes": image.decoded_len()}),
                )
                .collect();
        }
        // Claude's shape is made from the result without its images, which it never lists.
        let without_images;
        let shown = if output.images.is_empty() {
            output
        } else {
            without_images = ToolOutput {
                content: output.content.clone(),
                is_error: output.is_error,
                metadata: output.metadata.clone(),
                images: Vec::new(),
                delegated: keel_provider::CostByProvider::default(),
            };
            &without_images
        };
        let claude_response = keel_tool::claude::tool_response(&call.name, &call.input, shown, cwd);
        Self {
            response,
            claude_response,
        }
    }

    /// keel's shape: `{"content", "is_error"}`, and `images` (type and size) when the result
    /// carries images.
    pub fn response(&self) -> &Value {
        &self.response
    }

    /// The tool's Claude shape ([`keel_tool::claude::tool_response`]).
    pub fn claude_response(&self) -> &Value {
        &self.claude_response
    }
}

impl HookInput {
    fn new(session_id: impl Into<String>, cwd: impl Into<PathBuf>, event: HookEventInput) -> Self {
        Self {
            session: HookSessionInfo {
                session_id: session_id.into(),
                transcript_path: None,
                cwd: cwd.into(),
                permission_mode: None,
                subagent: None,
            },
            event,
        }
    }

    /// The same input, for the tool call `id`; an input of another event is left as it is.
    #[must_use]
    pub fn with_tool_use_id(mut self, id: impl Into<String>) -> Self {
        if let HookEventInput::PreToolUse { tool_use_id, .. }
        | HookEventInput::PostToolUse { tool_use_id, .. }
        | HookEventInput::PostToolUseFailure { tool_use_id, .. } = &mut self.event
        {
            *tool_use_id = Some(id.into());
        }
        self
    }

    /// The input of a `SessionStart` hook.
    pub fn session_start(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        source: SessionStartSource,
    ) -> Self {
        Self::new(session_id, cwd, HookEventInput::SessionStart { source })
    }

    /// The input of a `UserPromptSubmit` hook.
    pub fn user_prompt_submit(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        prompt: impl Into<String>,
    ) -> Self {
        let prompt = prompt.into();
        Self::new(session_id, cwd, HookEventInput::UserPromptSubmit { prompt })
    }

    /// The input of a `PreToolUse` hook: keel's tool name and arguments.
    pub fn pre_tool_use(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        tool_name: impl Into<String>,
        tool_input: Value,
    ) -> Self {
        let cwd = cwd.into();
        let call = HookToolCall::new(tool_name, tool_input, &cwd);
        let event = HookEventInput::PreToolUse {
            call,
            tool_use_id: None,
        };
        Self::new(session_id, cwd, event)
    }

    /// The input of a `PostToolUse` hook: keel's tool name and arguments, and the call's
    /// result.
    pub fn post_tool_use(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        tool_name: impl Into<String>,
        tool_input: Value,
        output: &ToolOutput,
    ) -> Self {
        let cwd = cwd.into();
        let call = HookToolCall::new(tool_name, tool_input, &cwd);
        let response = HookToolResponse::new(&call, output, &cwd);
        let event = HookEventInput::PostToolUse {
            call,
            response,
            tool_use_id: None,
        };
        Self::new(session_id, cwd, event)
    }

    /// The input of a `PostToolUseFailure` hook: keel's tool name and arguments, and the
    /// failed call's result text.
    pub fn post_tool_use_failure(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        tool_name: impl Into<String>,
        tool_input: Value,
        error: impl Into<String>,
    ) -> Self {
        let cwd = cwd.into();
        let call = HookToolCall::new(tool_name, tool_input, &cwd);
        let event = HookEventInput::PostToolUseFailure {
            call,
            tool_use_id: None,
            error: error.into(),
        };
        Self::new(session_id, cwd, event)
    }

    /// The input of a `Notification` hook.
    pub fn notification(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        message: impl Into<String>,
        notification_type: impl Into<String>,
    ) -> Self {
        let event = HookEventInput::Notification {
            message: message.into(),
            notification_type: notification_type.into(),
        };
        Self::new(session_id, cwd, event)
    }

    /// The input of a `Stop` hook; `stop_hook_active` says whether the model is already
    /// working on because a `Stop` hook blocked, `last_assistant_message` is the text of its
    /// last reply.
    pub fn stop(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        stop_hook_active: bool,
        last_assistant_message: impl Into<String>,
    ) -> Self {
        let event = HookEventInput::Stop {
            stop_hook_active,
            last_assistant_message: last_assistant_message.into(),
        };
        Self::new(session_id, cwd, event)
    }

    /// The input of a `SubagentStop` hook: as [`HookInput::stop`], for a sub-agent's session.
    pub fn subagent_stop(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        stop_hook_active: bool,
        last_assistant_message: impl Into<String>,
    ) -> Self {
        let event = HookEventInput::SubagentStop {
            stop_hook_active,
            last_assistant_message: last_assistant_message.into(),
        };
        Self::new(session_id, cwd, event)
    }

    /// The input of a `PreCompact` hook.
    pub fn pre_compact(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        trigger: CompactTrigger,
        custom_instructions: impl Into<String>,
    ) -> Self {
        let event = HookEventInput::PreCompact {
            trigger,
            custom_instructions: custom_instructions.into(),
        };
        Self::new(session_id, cwd, event)
    }

    /// The input of a `SessionEnd` hook.
    pub fn session_end(
        session_id: impl Into<String>,
        cwd: impl Into<PathBuf>,
        reason: SessionEndReason,
    ) -> Self {
        Self::new(session_id, cwd, HookEventInput::SessionEnd { reason })
    }

    /// The event the hooks run for.
    pub fn hook_event_name(&self) -> HookEvent {
        self.event.hook_event_name()
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.session.session_id
    }

    /// The session's working directory.
    pub fn cwd(&self) -> &Path {
        &self.session.cwd
    }

    /// The tool call's id (tool events), as the model gave it.
    pub fn tool_use_id(&self) -> Option<&str> {
        self.event.tool_use_id()
    }

    /// keel's name of the tool (tool events).
    pub fn tool_name(&self) -> Option<&str> {
        self.event.tool_call().map(HookToolCall::name)
    }

    /// keel's arguments of the tool call (tool events).
    pub fn tool_input(&self) -> Option<&Value> {
        self.event.tool_call().map(HookToolCall::input)
    }

    /// The tool's result in keel's shape (`PostToolUse`).
    pub fn tool_response(&self) -> Option<&Value> {
        match &self.event {
            HookEventInput::PostToolUse { response, .. } => Some(response.response()),
            _ => None,
        }
    }

    /// Claude Code's name of the tool (`Bash` for `run_command`), or keel's for a tool
    /// without a Claude twin; `None` outside tool events.
    pub fn claude_tool_name(&self) -> Option<&str> {
        self.event.tool_call().map(HookToolCall::claude_name)
    }

    /// The tool call's arguments in Claude Code's shape ([`keel_tool::claude::tool_input`]).
    pub fn claude_tool_input(&self) -> Option<&Value> {
        self.event.tool_call().map(HookToolCall::claude_input)
    }

    /// The tool's result in Claude Code's shape ([`keel_tool::claude::tool_response`]);
    /// `PostToolUse` only.
    pub fn claude_tool_response(&self) -> Option<&Value> {
        match &self.event {
            HookEventInput::PostToolUse { response, .. } => Some(response.claude_response()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One input of `event`, as a session gives it to its hooks: the session's file and,
    /// but at `SessionStart`, its approval mode; a tool call with its id.
    fn input_of(event: HookEvent, cwd: &Path) -> HookInput {
        let call = json!({"path": "a.txt", "content": "hi"});
        let mut input = match event {
            HookEvent::SessionStart => {
                HookInput::session_start("s", cwd, SessionStartSource::Startup)
            }
            HookEvent::UserPromptSubmit => HookInput::user_prompt_submit("s", cwd, "go"),
            HookEvent::PreToolUse => HookInput::pre_tool_use("s", cwd, "write_file", call),
            HookEvent::PostToolUse => {
                HookInput::post_tool_use("s", cwd, "write_file", call, &ToolOutput::text("wrote"))
            }
            HookEvent::PostToolUseFailure => {
                HookInput::post_tool_use_failure("s", cwd, "write_file", call, "denied")
            }
            HookEvent::Notification => {
                HookInput::notification("s", cwd, "keel needs you", "permission_prompt")
            }
            HookEvent::Stop => HookInput::stop("s", cwd, false, "done"),
            HookEvent::SubagentStop => HookInput::subagent_stop("s", cwd, false, "done"),
            HookEvent::PreCompact => HookInput::pre_compact("s", cwd, CompactTrigger::Auto, ""),
            HookEvent::SessionEnd => HookInput::session_end("s", cwd, SessionEndReason::Other),
        }
        .with_tool_use_id("toolu_1");
        input.session.transcript_path = Some(cwd.join("s.jsonl"));
        if event != HookEvent::SessionStart {
            input.session.permission_mode = Some("default".to_owned());
        }
        input
    }

    fn keys(input: &HookInput) -> Vec<String> {
        match serde_json::to_value(input) {
            Ok(Value::Object(map)) => map.keys().cloned().collect(),
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn each_event_serializes_with_the_keys_claude_code_sends_in_its_order() {
        let cwd = Path::new("/work");
        let session = ["session_id", "transcript_path", "cwd", "permission_mode"];
        let tool = ["tool_name", "tool_input"];
        for event in HookEvent::ALL {
            let own: Vec<&str> = match event {
                HookEvent::SessionStart => vec!["source"],
                HookEvent::UserPromptSubmit => vec!["prompt"],
                HookEvent::PreToolUse => [&tool[..], &["tool_use_id"]].concat(),
                HookEvent::PostToolUse => [&tool[..], &["tool_response", "tool_use_id"]].concat(),
                HookEvent::PostToolUseFailure => [&tool[..], &["tool_use_id", "error"]].concat(),
                HookEvent::Notification => vec!["message", "notification_type"],
                HookEvent::Stop | HookEvent::SubagentStop => {
                    vec!["stop_hook_active", "last_assistant_message"]
                }
                HookEvent::PreCompact => vec!["trigger", "custom_instructions"],
                HookEvent::SessionEnd => vec!["reason"],
            };
            // Claude Code does not tell SessionStart hooks the mode.
            let session = match event {
                HookEvent::SessionStart => &session[..3],
                _ => &session[..],
            };
            let expected: Vec<&str> = [session, &["hook_event_name"], &own].concat();
            let input = input_of(event, cwd);
            assert_eq!(keys(&input), expected, "{event}");
            let json = serde_json::to_value(&input).unwrap_or_default();
            assert_eq!(json["hook_event_name"], event.name(), "{event}");
            assert_eq!(input.hook_event_name(), event);
        }
    }

    #[test]
    fn a_sub_agents_session_adds_its_id_and_name_before_the_event() {
        let mut input = input_of(HookEvent::SubagentStop, Path::new("/work"));
        input.session.subagent = Some(HookSubagent {
            agent_id: "s".to_owned(),
            agent_type: "reviewer".to_owned(),
        });
        assert_eq!(
            keys(&input),
            [
                "session_id",
                "transcript_path",
                "cwd",
                "permission_mode",
                "agent_id",
                "agent_type",
                "hook_event_name",
                "stop_hook_active",
                "last_assistant_message",
            ]
        );
    }

    #[test]
    fn rust_hooks_read_keels_view_and_the_json_is_claudes() {
        let cwd = Path::new("/work");
        let post = HookInput::post_tool_use(
            "s",
            cwd,
            "patch_file",
            json!({"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"}),
            &ToolOutput::text("edited a.py")
                .with_metadata(json!({"path": "a.py", "original": "x = 1\n"})),
        )
        .with_tool_use_id("toolu_1");
        assert_eq!(post.tool_name(), Some("patch_file"));
        assert_eq!(
            post.tool_input().map(|input| &input["path"]),
            Some(&json!("a.py"))
        );
        assert_eq!(
            post.tool_response(),
            Some(&json!({"content": "edited a.py", "is_error": false}))
        );
        assert_eq!(post.tool_use_id(), Some("toolu_1"));
        let json = serde_json::to_value(&post).unwrap_or_default();
        assert_eq!(json["tool_name"], "Edit");
        assert_eq!(json["tool_input"]["file_path"], "/work/a.py");
        assert_eq!(json["tool_response"]["filePath"], "/work/a.py");
        assert_eq!(json["tool_response"]["originalFile"], "x = 1\n");
        assert_eq!(
            Some(&json["tool_name"]),
            post.claude_tool_name().map(Value::from).as_ref()
        );
        assert_eq!(Some(&json["tool_input"]), post.claude_tool_input());
        assert_eq!(Some(&json["tool_response"]), post.claude_tool_response());
        assert_eq!(json["tool_use_id"], "toolu_1");
    }

    #[test]
    fn images_are_listed_in_keels_view_only_and_never_passed() {
        const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
        let output = ToolOutput::text("a pixel").with_image_base64("image/png", PIXEL);
        assert_eq!(output.images.len(), 1, "{}", output.content);
        let post = HookInput::post_tool_use("s", "/work", "screenshot", json!({}), &output);
        assert_eq!(
            post.tool_response(),
            Some(&json!({
                "content": "a pixel",
                "is_error": false,
                "images": [{"media_type": "image/png", "bytes": 70}],
            }))
        );
        assert_eq!(
            post.claude_tool_response(),
            Some(&json!({"content": "a pixel", "is_error": false}))
        );
    }

    #[test]
    fn events_without_a_tool_call_have_no_tool_fields() {
        let stop = HookInput::stop("s", "/work", false, "done").with_tool_use_id("toolu_1");
        assert_eq!(stop.tool_use_id(), None);
        assert_eq!(stop.tool_name(), None);
        assert_eq!(stop.claude_tool_input(), None);
        assert_eq!(stop.tool_response(), None);
        let json = serde_json::to_value(&stop).unwrap_or_default();
        assert!(json.get("tool_use_id").is_none(), "{json}");
    }
}
