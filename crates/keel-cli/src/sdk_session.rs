//! The Claude Agent SDKs' stream-json protocol (`--input-format stream-json
//! --output-format stream-json`): user messages as JSON lines on stdin, one turn each, in one
//! session; control requests both ways beside them.
//!
//! From the program: `initialize` (answered at once; the SDK sends nothing before the
//! answer), `interrupt` (the running turn ends, cancelled, with its `result` line),
//! `set_permission_mode`, `set_model` (from the next turn on), `mcp_status`; any other
//! subtype gets an error answer naming it. To the program: `can_use_tool` for each gated
//! call when it asked for them (`--permission-prompt-tool stdio`). stdout carries only
//! protocol lines; the session ends when stdin closes.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use keel::mcp::{ChannelServer, McpChannel, McpServerConfig, McpTransport};
use keel_engine::{
    ApprovalRequest, Approver, CancelHandle, Decision, Hook, HookAnswer, HookEvent, HookInput,
    HookOutcome, Hooks, Stop, answer_from_json,
};
use keel_provider::{ContentBlock, ImageData};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, oneshot};

use crate::approve::{LiveMode, ModeApprover, ModeSwitch};
use crate::claude_cli::PermissionMode;
use crate::cli::{Options, OutputFormat};
use crate::exec::{Headless, init_info, print_json, progress, session_choice, stream_run};
use crate::output::ClaudeStream;
use crate::setup::{CliError, Mode, Setup};

/// The requests keel sent the program, waiting for its answer, by request id.
type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Result<Value, String>>>>>;

/// Sends control requests to the program and routes its answers back.
#[derive(Clone, Default)]
struct Control {
    pending: Pending,
    next: Arc<AtomicU64>,
}

impl Control {
    /// Sends `request` (a control request's `request` object) and waits for the answer's
    /// `response`, or the error the program gave.
    async fn ask(&self, request: Value) -> Result<Value, String> {
        let id = format!("keel-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (sender, receiver) = oneshot::channel();
        if let Ok(mut pending) = self.pending.lock() {
            pending.insert(id.clone(), sender);
        }
        print_json(&json!({"type": "control_request", "request_id": id, "request": request}));
        receiver
            .await
            .unwrap_or_else(|_| Err("the program closed stdin before answering".to_owned()))
    }

    /// Hands the program's answer `response` (a control response's `response` object) to
    /// whoever asked.
    fn answered(&self, response: &Value) {
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
    fn close(&self) {
        if let Ok(mut pending) = self.pending.lock() {
            pending.clear();
        }
    }
}

/// Asks the program about gated calls (`can_use_tool`).
struct ProgramApprover {
    control: Control,
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
        input_json["permission_mode"] = json!(PermissionMode::claude_name(self.mode.get()));
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
fn program_hooks(
    registered: &Value,
    control: &Control,
    mode: &ModeSwitch,
    sessions: &std::path::Path,
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
struct ProgramMcp {
    control: Control,
    server: String,
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
struct Changes {
    model: Option<String>,
}

/// A user message's content as keel's prompt blocks: a string, or its text and image blocks
/// (`{"type": "image", "source": {"type": "base64", "media_type": …, "data": …}}`). A block
/// of another kind, or an image keel refuses (not PNG, JPEG, GIF or WebP by its bytes), is
/// named on stderr and left out; `None` when nothing is left.
fn user_content(message: &Value) -> Option<Vec<ContentBlock>> {
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
                    Err(err) => progress(&format!(
                        "keel: an image in a user message is left out: {err}"
                    )),
                }
            }
            other => progress(&format!(
                "keel: a user message's {} block is left out (keel takes text and base64 \
                 images)",
                other.unwrap_or("untyped")
            )),
        }
    }
    (!blocks.is_empty()).then_some(blocks)
}

/// The answer to the program's control request `request_id`.
fn control_answer(request_id: &Value, answer: Result<Value, String>) -> Value {
    match answer {
        Ok(response) => json!({"type": "control_response", "response": {
            "subtype": "success", "request_id": request_id, "response": response}}),
        Err(error) => json!({"type": "control_response", "response": {
            "subtype": "error", "request_id": request_id, "error": error}}),
    }
}

/// What keel answers `initialize` with: its slash commands are not offered over the SDK, the
/// output style is the default one, and the model is the session's.
fn initialize_answer(model: &str) -> Value {
    json!({
        "commands": [],
        "output_style": "default",
        "available_output_styles": ["default"],
        "models": [{"value": model, "displayName": model, "description": "the session's model"}],
        "account": {},
    })
}

/// Everything one control request needs to be answered.
struct Responder {
    /// The session's, once it exists (an interrupt before has no turn to end).
    cancel: Arc<OnceLock<CancelHandle>>,
    mode: ModeSwitch,
    changes: Arc<Mutex<Changes>>,
    model: String,
    /// Each MCP server and whether it is connected, once they have started.
    mcp_status: Arc<OnceLock<Value>>,
}

impl Responder {
    /// The answer to control request `request`.
    fn answer(&self, request: &Value) -> Result<Value, String> {
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
                    .map(|model| keel_provider::ModelCatalog::expand_alias(model).to_owned());
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

/// Reads stdin until it closes: user messages go to `prompts`; control requests are
/// answered at once (an interrupt cancels the running turn); answers to keel's own requests
/// go to whoever asked.
async fn read_stdin(
    mut lines: Lines,
    responder: Responder,
    control: Control,
    prompts: mpsc::UnboundedSender<Vec<ContentBlock>>,
) {
    loop {
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(err) => {
                progress(&format!("keel: reading stdin: {err}"));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let message: Value = match serde_json::from_str(&line) {
            Ok(message) => message,
            Err(err) => {
                progress(&format!(
                    "keel: a line on stdin is not JSON ({err}); it is skipped"
                ));
                continue;
            }
        };
        match message["type"].as_str().unwrap_or_default() {
            "user" => match user_content(&message) {
                Some(text) => {
                    let _ = prompts.send(text);
                }
                None => progress("keel: a user message without content is skipped"),
            },
            "control_request" => {
                let answer = responder.answer(&message["request"]);
                print_json(&control_answer(&message["request_id"], answer));
            }
            "control_response" => control.answered(&message["response"]),
            // Cancelling one of keel's own questions: nothing is waiting on the program's side.
            "control_cancel_request" => {}
            other => progress(&format!(
                "keel: a message of type {other:?} on stdin is skipped"
            )),
        }
    }
    control.close();
}

/// stdin, line by line.
type Lines = tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>;

/// How the program opened the session: its `initialize` request (id and request), or its
/// first prompt when it sent a user message first (no control protocol).
enum Opening {
    Initialize(Value, Value),
    Prompt(Vec<ContentBlock>),
    Closed,
}

/// Reads stdin up to the program's first `initialize` request or user message.
async fn opening(lines: &mut Lines) -> Opening {
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match message["type"].as_str() {
            Some("control_request") if message["request"]["subtype"] == "initialize" => {
                return Opening::Initialize(
                    message["request_id"].clone(),
                    message["request"].clone(),
                );
            }
            Some("user") => {
                if let Some(text) = user_content(&message) {
                    return Opening::Prompt(text);
                }
            }
            _ => progress("keel: a line before initialize is skipped"),
        }
    }
    Opening::Closed
}

/// Runs the SDK's session: one turn per user message, until stdin closes; the exit code.
pub(crate) async fn run(
    options: &Options,
    headless: Headless,
    asks_program: bool,
    program_servers: Vec<String>,
) -> Result<u8, CliError> {
    let choice = session_choice(options);
    let mut setup = Setup::resolve(options, Mode::Exec, &choice)?;
    setup.add(headless.extras, options)?;
    for notice in &setup.notices {
        progress(&format!("keel: {notice}"));
    }
    let control = Control::default();
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    // The SDKs send `initialize` first, with the hooks the program registers, and wait for
    // its answer; it is answered once the hooks are known to be ones keel runs.
    let (initialize, first_prompt) = match opening(&mut lines).await {
        Opening::Initialize(id, request) => (Some((id, request)), None),
        Opening::Prompt(prompt) => (None, Some(prompt)),
        Opening::Closed => return Ok(0),
    };
    // The program's sub-agents (the SDKs' `agents` option), beside --agents'.
    if let Some((id, request)) = &initialize
        && request["agents"].is_object()
    {
        match crate::setup::inline_agents(&request["agents"], "the program's agents") {
            Ok(agents) => setup.extras.agents.extend(agents),
            Err(err) => {
                print_json(&control_answer(id, Err(err.to_string())));
                return Err(err);
            }
        }
    }
    let asker = asks_program.then(|| {
        Arc::new(ProgramApprover {
            control: control.clone(),
        }) as Arc<dyn Approver>
    });
    // Claude Code's default mode asks the program when it answers questions.
    let start = headless.mode.unwrap_or(if asks_program {
        LiveMode::Ask
    } else {
        setup.live_mode
    });
    let mut approver = ModeApprover::starting(start, asker);
    if asks_program {
        // The program answers as Claude Code's permission modes ask: about every change.
        approver = approver.asking_about_changes();
    }
    let hooks = match &initialize {
        Some((id, request)) => match program_hooks(
            &request["hooks"],
            &control,
            &approver.switch(),
            setup.store.dir(),
        ) {
            Ok(hooks) => hooks,
            Err(err) => {
                print_json(&control_answer(id, Err(err.clone())));
                return Err(CliError::Usage(err));
            }
        },
        None => Hooks::new(),
    };
    let mut program_servers = program_servers;
    if let Some((_, request)) = &initialize {
        // The TypeScript SDK names its in-process servers here rather than in --mcp-config.
        for name in request["sdkMcpServers"].as_array().into_iter().flatten() {
            if let Some(name) = name.as_str()
                && !program_servers.iter().any(|known| known == name)
            {
                program_servers.push(name.to_owned());
            }
        }
        // …and the system prompt: an empty one (the SDKs' default) keeps keel's.
        let prompt: Vec<&str> = request["systemPrompt"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let prompt = prompt.join("\n\n");
        if !prompt.trim().is_empty() {
            setup.extras.system_prompt = Some(prompt);
        }
    }
    let changes: Arc<Mutex<Changes>> = Arc::default();
    let cancel: Arc<OnceLock<CancelHandle>> = Arc::default();
    let mcp_status: Arc<OnceLock<Value>> = Arc::default();
    let mode = approver.switch();
    let responder = Responder {
        cancel: cancel.clone(),
        mode: mode.clone(),
        changes: changes.clone(),
        model: setup.model.clone(),
        mcp_status: mcp_status.clone(),
    };
    if let Some((id, request)) = &initialize {
        print_json(&control_answer(id, responder.answer(request)));
    }
    let (prompts, mut next) = mpsc::unbounded_channel();
    if let Some(prompt) = first_prompt {
        let _ = prompts.send(prompt);
    }
    // From here on stdin is read beside the work: the program's servers answer through it.
    let reader = tokio::spawn(read_stdin(lines, responder, control.clone(), prompts));
    for server in program_servers {
        let channel = ProgramMcp {
            control: control.clone(),
            server: server.clone(),
        };
        let transport = McpTransport::Channel(ChannelServer {
            channel: Arc::new(channel),
        });
        let config = McpServerConfig::new(&server, transport)
            .map_err(|err| CliError::Usage(format!("--mcp-config: {err}")))?;
        setup.add_mcp_server(config);
    }
    for line in setup.start_mcp_servers().await {
        progress(&format!("keel: {line}"));
    }
    let status: Vec<Value> = setup
        .mcp_status()
        .into_iter()
        .map(|(name, status)| json!({"name": name, "status": status}))
        .collect();
    let _ = mcp_status.set(Value::Array(status));
    setup.ask_served_context().await;
    let coding = setup.agent(approver, hooks)?;
    for warning in coding.warnings() {
        progress(&format!("keel: warning: {warning}"));
    }
    crate::exec::print_context_notes(&coding, "");
    let mut session = setup.session(coding.agent(), &choice)?;
    let _ = cancel.set(session.cancel_handle());
    let mut failed = false;
    // One stream for the session: its results are numbered, and their totals run, across
    // the turns.
    let mut stream = ClaudeStream::new(session.id(), session.model(), headless.partial)
        .with_catalog(session.catalog().clone());
    while let Some(prompt) = next.recv().await {
        if let Some(model) = changes.lock().ok().and_then(|mut c| c.model.take()) {
            stream.set_model(&model);
            session.set_model(model);
        }
        print_json(&stream.init(&init_info(&setup, &coding)));
        let started = std::time::Instant::now();
        session.set_permission_mode(mode.claude_name());
        let outcome = stream_run(
            &coding,
            &mut session,
            prompt,
            OutputFormat::StreamJson,
            &mut stream,
            true,
        )
        .await;
        let Some(outcome) = outcome else {
            return Err(CliError::Run("the run ended without an outcome".into()));
        };
        failed = outcome.stop != Stop::Completed && outcome.stop != Stop::Cancelled;
        print_json(&stream.result(&outcome, started.elapsed()));
    }
    reader.abort();
    let ended = session.end(keel_engine::SessionEndReason::Other).await;
    for failure in &ended.failures {
        progress(&format!("keel: warning: {failure}"));
    }
    if let Some(error) = session.persistence_error() {
        progress(&format!(
            "keel: warning: the session was not fully saved: {error}"
        ));
    }
    Ok(u8::from(failed))
}
