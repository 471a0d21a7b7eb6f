//! The Claude Agent SDKs' control protocol (`--input-format stream-json --output-format
//! stream-json`), keel's side of it: the requests keel sends the program and the answers
//! routed back ([`Control`]), the program's answers to gated calls ([`ProgramApprover`]), the
//! hooks it registers ([`program_hooks`]), its in-process MCP servers ([`ProgramMcp`]), and
//! the answers to its own control requests ([`Responder`]). A front end reads the program's
//! lines and writes keel's; what a line says is decided here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use keel::engine::{
    ApprovalRequest, Approver, CancelHandle, Decision, Hook, HookAnswer, HookEvent, HookInput,
    HookOutcome, Hooks, answer_from_json,
};
use keel::mcp::McpChannel;
use keel::provider::{ContentBlock, ImageData, ModelCatalog};
use keel_config::PermissionMode;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::approver::ModeSwitch;

/// Writes one protocol line (a JSON value) to the program.
pub type LineWriter = Arc<dyn Fn(&Value) + Send + Sync>;

/// The requests keel sent the program, waiting for its answer, by request id.
type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, String>>>>>;

/// Sends control requests to the program and routes its answers back.
#[derive(Clone)]
pub struct Control {
    pending: Pending,
    next: Arc<AtomicU64>,
    write: LineWriter,
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control").finish_non_exhaustive()
    }
}

impl Control {
    /// Control requests written with `write`.
    pub fn new(write: LineWriter) -> Self {
        Self {
            pending: Pending::default(),
            next: Arc::new(AtomicU64::new(0)),
            write,
        }
    }

    /// Sends `request` (a control request's `request` object) and waits for the answer's
    /// `response`, or the error the program gave.
    pub async fn ask(&self, request: Value) -> Result<Value, String> {
        let id = format!("keel-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (sender, receiver) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id.clone(), sender);
        }
        (self.write)(&json!({"type": "control_request", "request_id": id, "request": request}));
        receiver
            .await
            .unwrap_or_else(|_| Err("the program closed stdin before answering".to_owned()))
    }

    /// Hands the program's answer `response` (a control response's `response` object) to
    /// whoever asked.
    pub fn answered(&self, response: &Value) {
        let Some(id) = response["request_id"].as_str() else {
            return;
        };
        let sender = self.pending.lock().ok().and_then(|mut p| p.remove(id));
        if let Some(sender) = sender {
            let answer = if response["subtype"] == "error" {
                Err(response["error"]
                    .as_str()
                    .unwrap_or("the program answered with an error")
                    .to_owned())
            } else {
                Ok(response["response"].clone())
            };
            let _ = sender.send(answer);
        }
    }

    /// Fails every question still open (stdin closed).
    pub fn close(&self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.clear();
        }
    }
}

/// Asks the program about gated calls (`can_use_tool`).
pub struct ProgramApprover {
    /// Where the questions go.
    pub control: Control,
}

#[async_trait::async_trait]
impl Approver for ProgramApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let asked = self
            .control
            .ask(json!({
                "subtype": "can_use_tool",
                "tool_name": request.tool,
                "input": request.input,
                "tool_use_id": request.call_id,
                "permission_suggestions": [],
                "decision_reason": request.reason,
            }))
            .await;
        match asked {
            Ok(answer) if answer["behavior"] == "allow" => {
                // keel runs the call as the model made it: a changed input is refused
                // rather than run unseen by the model.
                match answer.get("updatedInput") {
                    Some(updated) if !updated.is_null() && *updated != request.input => {
                        Decision::Deny(
                            "the program allowed this call only with a changed input, which \
                             keel does not run"
                                .to_owned(),
                        )
                    }
                    _ => Decision::Allow,
                }
            }
            Ok(answer) if answer["interrupt"] == true => Decision::Cancel,
            Ok(answer) => Decision::Deny(
                answer["message"]
                    .as_str()
                    .filter(|m| !m.is_empty())
                    .unwrap_or("the program denied this call")
                    .to_owned(),
            ),
            Err(err) => Decision::Deny(format!("the program could not be asked: {err}")),
        }
    }
}

/// A hook the program registered in `initialize`: runs as a `hook_callback` request, its
/// answer read as a command hook's JSON.
struct ProgramHook {
    control: Control,
    callback_id: String,
    name: String,
    /// The session's approval mode, given as Claude's `permission_mode`.
    mode: ModeSwitch,
    /// Where session files are, for Claude's `transcript_path`.
    sessions: PathBuf,
}

#[async_trait::async_trait]
impl Hook for ProgramHook {
    async fn run(&self, input: &HookInput) -> Result<HookOutcome, String> {
        self.answer(input).await.map(|answer| answer.outcome)
    }

    /// The program's whole answer: its decision, context, `systemMessage` and
    /// `updatedInput`.
    async fn answer(&self, input: &HookInput) -> Result<HookAnswer, String> {
        let mut input_json = serde_json::to_value(input).map_err(|err| err.to_string())?;
        // The mode as it is now (the program may have switched it during the turn).
        input_json["permission_mode"] = json!(self.mode.get().claude_name());
        if input_json.get("transcript_path").is_none() {
            input_json["transcript_path"] =
                json!(self.sessions.join(format!("{}.jsonl", input.session_id())));
        }
        let answer = self
            .control
            .ask(json!({
                "subtype": "hook_callback",
                "callback_id": self.callback_id,
                "input": input_json,
                "tool_use_id": input.tool_use_id(),
            }))
            .await?;
        answer_from_json(input.hook_event_name(), &answer)
    }

    fn name(&self) -> &str {
        &self.name
    }
}

/// The hooks `initialize` registers (`hooks.<Event>[] = {matcher, hookCallbackIds}`), with
/// matchers on keel's tool names; an event keel does not have is an error naming it.
pub fn program_hooks(
    registered: &Value,
    control: &Control,
    mode: &ModeSwitch,
    sessions: &Path,
) -> Result<Hooks, String> {
    let mut hooks = Hooks::new();
    let Some(events) = registered.as_object() else {
        return Ok(hooks);
    };
    for (event_name, matchers) in events {
        let event: HookEvent = serde_json::from_value(json!(event_name)).map_err(|_| {
            format!(
                "keel has no {event_name} hooks; its hook events are {}",
                HookEvent::ALL.map(HookEvent::name).join(", ")
            )
        })?;
        for matcher in matchers.as_array().into_iter().flatten() {
            // Matchers name Claude Code's tools (`Bash`) or keel's; the hooks match both.
            let on = matcher["matcher"].as_str();
            let ids = matcher["hookCallbackIds"].as_array().into_iter().flatten();
            for id in ids.filter_map(Value::as_str) {
                let hook = ProgramHook {
                    control: control.clone(),
                    callback_id: id.to_owned(),
                    name: format!("the program's {event_name} hook {id}"),
                    mode: mode.clone(),
                    sessions: sessions.to_path_buf(),
                };
                hooks
                    .add(event, on, Arc::new(hook))
                    .map_err(|err| err.to_string())?;
            }
        }
    }
    Ok(hooks)
}

/// An in-process server of the program (`{"type": "sdk"}` in `--mcp-config`): each JSON-RPC
/// message goes to the program as an `mcp_message` request, and its `mcp_response` comes back.
pub struct ProgramMcp {
    /// Where the messages go.
    pub control: Control,
    /// The server's name, as the program registered it.
    pub server: String,
}

#[async_trait::async_trait]
impl McpChannel for ProgramMcp {
    async fn exchange(&self, message: Value) -> Result<Option<Value>, String> {
        let is_request = message.get("id").is_some();
        let answer = self
            .control
            .ask(json!({"subtype": "mcp_message", "server_name": self.server, "message": message}))
            .await?;
        // A notification's acknowledgement is not a JSON-RPC reply.
        Ok(is_request.then(|| answer["mcp_response"].clone()))
    }
}

/// What the program changes between turns.
#[derive(Default)]
pub struct Changes {
    /// The model for the next turn, when the program set one.
    pub model: Option<String>,
}

/// A user message's content as keel's prompt blocks: a string, or its text and image blocks
/// (`{"type": "image", "source": {"type": "base64", "media_type": …, "data": …}}`). A block
/// of another kind, or an image keel refuses (not PNG, JPEG, GIF or WebP by its bytes), is
/// named in `notes` and left out; `None` when nothing is left.
pub fn user_content(message: &Value, notes: &mut Vec<String>) -> Option<Vec<ContentBlock>> {
    let content = &message["message"]["content"];
    if let Some(text) = content.as_str() {
        return Some(vec![ContentBlock::text(text)]);
    }
    let mut blocks = Vec::new();
    for block in content.as_array()? {
        match block["type"].as_str() {
            Some("text") => {
                if let Some(text) = block["text"].as_str() {
                    blocks.push(ContentBlock::text(text));
                }
            }
            Some("image") if block["source"]["type"] == "base64" => {
                let source = &block["source"];
                match ImageData::new(
                    source["media_type"].as_str().unwrap_or_default(),
                    source["data"].as_str().unwrap_or_default(),
                ) {
                    Ok(image) => blocks.push(ContentBlock::image(image)),
                    Err(err) => {
                        notes.push(format!("an image in a user message is left out: {err}"));
                    }
                }
            }
            other => notes.push(format!(
                "a user message's {} block is left out (keel takes text and base64 images)",
                other.unwrap_or("untyped")
            )),
        }
    }
    (!blocks.is_empty()).then_some(blocks)
}

/// The answer to the program's control request `request_id`.
pub fn control_answer(request_id: &Value, answer: Result<Value, String>) -> Value {
    match answer {
        Ok(response) => json!({"type": "control_response", "response": {
            "subtype": "success", "request_id": request_id, "response": response}}),
        Err(error) => json!({"type": "control_response", "response": {
            "subtype": "error", "request_id": request_id, "error": error}}),
    }
}

/// What keel answers `initialize` with: its slash commands are not offered over the SDK, the
/// output style is the default one, and the model is the session's.
pub fn initialize_answer(model: &str) -> Value {
    json!({
        "commands": [],
        "output_style": "default",
        "available_output_styles": ["default"],
        "models": [{"value": model, "displayName": model, "description": "the session's model"}],
        "account": {},
    })
}

/// Everything one control request needs to be answered.
pub struct Responder {
    /// The session's, once it exists (an interrupt before has no turn to end).
    pub cancel: Arc<OnceLock<CancelHandle>>,
    /// The session's approval mode.
    pub mode: ModeSwitch,
    /// What the program changes between turns.
    pub changes: Arc<Mutex<Changes>>,
    /// The session's model.
    pub model: String,
    /// Each MCP server and whether it is connected, once they have started.
    pub mcp_status: Arc<OnceLock<Value>>,
}

impl Responder {
    /// The answer to control request `request`.
    pub fn answer(&self, request: &Value) -> Result<Value, String> {
        match request["subtype"].as_str().unwrap_or_default() {
            "initialize" => Ok(initialize_answer(&self.model)),
            "interrupt" => {
                if let Some(cancel) = self.cancel.get() {
                    cancel.cancel();
                }
                Ok(json!({}))
            }
            "set_permission_mode" => {
                let name = request["mode"].as_str().unwrap_or_default();
                let mode = PermissionMode::named(name).ok_or_else(|| {
                    format!(
                        "no permission mode {name:?}; the modes are default, acceptEdits, \
                         plan, bypassPermissions and dontAsk"
                    )
                })?;
                self.mode.set(mode.live());
                Ok(json!({}))
            }
            "set_model" => {
                let model = request["model"]
                    .as_str()
                    .map(|model| ModelCatalog::expand_alias(model).to_owned());
                if let Ok(mut changes) = self.changes.lock() {
                    changes.model = model;
                }
                Ok(json!({}))
            }
            "mcp_status" => {
                Ok(json!({"mcpServers": self.mcp_status.get().cloned().unwrap_or(json!([]))}))
            }
            other => Err(format!(
                "keel does not support the control request {other:?}"
            )),
        }
    }
}
