//! `keel acp`: keel as an Agent Client Protocol agent over stdio (Zed, JetBrains, Neovim,
//! Emacs, acpx), on the official SDK `agent-client-protocol`. stdout carries only protocol
//! messages.
//!
//! A session is the agent `keel exec` would build in the session's `cwd` (its config, trust,
//! sandbox and rules); its events become `session/update`s: text as `agent_message_chunk`,
//! each tool call as `tool_call` (kind, locations, raw input; a diff for a file edit) and
//! `tool_call_update` (completed or failed, with its output). Gated calls ask the client
//! with `session/request_permission`; `session/cancel` ends the turn with `cancelled`. The
//! MCP servers a client passes in `session/new` (stdio or HTTP) start with the session. The
//! session's modes are keel's approval modes (`ask`, `accept-edits`, `read-only`, `allow`),
//! switched with `session/set_mode`. `session/load` resumes a keel session (ids are keel's)
//! and replays its history as updates.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, ContentChunk, Diff, InitializeRequest,
    InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer,
    NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind, PromptRequest,
    PromptResponse, RequestPermissionOutcome, RequestPermissionRequest, SessionMode,
    SessionModeState, SessionNotification, SessionUpdate, SetSessionModeRequest,
    SetSessionModeResponse, StopReason, TextContent, ToolCall, ToolCallContent, ToolCallLocation,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use agent_client_protocol::{Agent, Client, Stdio};
use futures::StreamExt;
use keel::CodingAgent;
use keel::mcp::{HttpServer, McpServerConfig, McpTransport, StdioServer};
use keel_engine::{
    AgentEvent, ApprovalRequest, Approver, CancelHandle, Decision, Hooks, Session, Stop,
};
use keel_provider::{Message, Role};
use serde_json::Value;

use crate::approve::{LiveMode, ModeApprover, ModeSwitch};
use crate::cli::Options;
use crate::exec::progress;
use crate::setup::{CliError, Mode, SessionChoice, Setup};

type Connection = ConnectionTo<Client>;

/// One ACP session: keel's agent and session, how to cancel its turn, and its approval mode.
struct AcpSession {
    /// Kept alive for the session's tools, delegates and MCP servers.
    _coding: CodingAgent,
    session: Arc<tokio::sync::Mutex<Session>>,
    cancel: CancelHandle,
    mode: ModeSwitch,
}

/// The session modes a client may choose (`session/set_mode`): keel's approval modes.
const MODES: [LiveMode; 4] = [
    LiveMode::Ask,
    LiveMode::AcceptEdits,
    LiveMode::ReadOnly,
    LiveMode::Allow,
];

/// The modes and the current one, as `session/new` reports them.
fn mode_state(current: LiveMode) -> SessionModeState {
    SessionModeState::new(
        current.name(),
        MODES
            .iter()
            .map(|mode| SessionMode::new(mode.name(), mode.name()).description(mode.meaning()))
            .collect::<Vec<_>>(),
    )
}

type Sessions = Arc<Mutex<HashMap<String, AcpSession>>>;

/// Asks the client about gated calls (`session/request_permission`).
struct ClientApprover {
    connection: Connection,
    session_id: Arc<Mutex<String>>,
}

#[async_trait::async_trait]
impl Approver for ClientApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let session_id = self
            .session_id
            .lock()
            .map(|id| id.clone())
            .unwrap_or_default();
        let fields = ToolCallUpdateFields::new()
            .title(title(&request.tool, &request.input))
            .kind(kind(&request.tool))
            .raw_input(request.input.clone());
        let options = vec![
            PermissionOption::new("allow_once", "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                "allow_always",
                format!("Always allow {}", request.scope.describe()),
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new("reject_once", "Reject", PermissionOptionKind::RejectOnce),
        ];
        let asked = RequestPermissionRequest::new(
            session_id,
            ToolCallUpdate::new(request.call_id.clone(), fields),
            options,
        );
        match self.connection.send_request(asked).block_task().await {
            Ok(response) => match response.outcome {
                RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                    "allow_once" => Decision::Allow,
                    "allow_always" => Decision::AllowAlways,
                    _ => Decision::Deny("the user rejected this call".to_owned()),
                },
                _ => Decision::Cancel,
            },
            Err(err) => Decision::Deny(format!("the client could not be asked: {err}")),
        }
    }
}

/// What kind of tool `name` is, for the client's icons.
fn kind(name: &str) -> ToolKind {
    match name {
        "read_file" | "list_directory" => ToolKind::Read,
        "write_file" | "patch_file" => ToolKind::Edit,
        "grep" | "glob" => ToolKind::Search,
        "run_command" | "git_commit" => ToolKind::Execute,
        "git_status" | "git_diff" => ToolKind::Read,
        _ => ToolKind::Other,
    }
}

/// A call's title: the tool and its primary argument.
fn title(name: &str, input: &Value) -> String {
    let argument = ["path", "command", "pattern", "task"]
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str));
    match argument {
        Some(argument) => format!("{name} {argument}"),
        None => name.to_owned(),
    }
}

/// The file a call names, resolved against `cwd`.
fn location(input: &Value, cwd: &std::path::Path) -> Option<PathBuf> {
    let path = input.get("path").and_then(Value::as_str)?;
    Some(cwd.join(path))
}

/// The diff a file edit makes, from its input.
fn diff(name: &str, input: &Value, cwd: &std::path::Path) -> Option<ToolCallContent> {
    let path = location(input, cwd)?;
    let text = |key: &str| input.get(key).and_then(Value::as_str).map(str::to_owned);
    let diff = match name {
        "patch_file" => Diff::new(path, text("new_string")?).old_text(text("old_string")),
        "write_file" => Diff::new(path, text("content")?),
        _ => return None,
    };
    Some(ToolCallContent::Diff(diff))
}

fn send(connection: &Connection, session_id: &str, update: SessionUpdate) {
    if let Err(err) =
        connection.send_notification(SessionNotification::new(session_id.to_owned(), update))
    {
        tracing::warn!("session/update not sent: {err}");
    }
}

/// Runs `prompt` in the session, streaming its events; the turn's stop reason.
async fn prompt_turn(
    connection: &Connection,
    session_id: &str,
    session: &mut Session,
    prompt: &str,
) -> StopReason {
    let cwd = session.cwd().to_path_buf();
    let events = session.run_streaming(prompt);
    futures::pin_mut!(events);
    let mut stop = StopReason::EndTurn;
    while let Some(event) = events.next().await {
        match event {
            AgentEvent::TextDelta { text } => send(
                connection,
                session_id,
                SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(
                    TextContent::new(text),
                ))),
            ),
            AgentEvent::ToolCallStarted { id, name, input } => {
                let mut call = ToolCall::new(id, title(&name, &input))
                    .kind(kind(&name))
                    .status(ToolCallStatus::InProgress)
                    .raw_input(input.clone());
                if let Some(path) = location(&input, &cwd) {
                    call = call.locations(vec![ToolCallLocation::new(path)]);
                }
                if let Some(diff) = diff(&name, &input, &cwd) {
                    call = call.content(vec![diff]);
                }
                send(connection, session_id, SessionUpdate::ToolCall(call));
            }
            AgentEvent::ToolCallFinished {
                id,
                output,
                is_error,
                ..
            } => {
                let status = if is_error {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                let fields = ToolCallUpdateFields::new().status(status).content(vec![
                    ToolCallContent::from(ContentBlock::Text(TextContent::new(output))),
                ]);
                send(
                    connection,
                    session_id,
                    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, fields)),
                );
            }
            AgentEvent::Finished(outcome) => {
                stop = match outcome.stop {
                    Stop::Cancelled => StopReason::Cancelled,
                    Stop::MaxIterations => StopReason::MaxTurnRequests,
                    Stop::TokenBudget { .. } => StopReason::MaxTokens,
                    Stop::Refused { .. } => StopReason::Refusal,
                    _ => StopReason::EndTurn,
                };
            }
            _ => {}
        }
    }
    stop
}

/// A resumed session's history as `session/update`s: the user's text, the agent's text, each
/// tool call and how it ended.
fn replay(connection: &Connection, session_id: &str, history: &[Message], cwd: &std::path::Path) {
    for message in history {
        for block in &message.content {
            let update = match (message.role, block) {
                (Role::User, keel_provider::ContentBlock::Text { text }) => {
                    SessionUpdate::UserMessageChunk(ContentChunk::new(ContentBlock::Text(
                        TextContent::new(text.clone()),
                    )))
                }
                (Role::Assistant, keel_provider::ContentBlock::Text { text }) => {
                    SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(
                        TextContent::new(text.clone()),
                    )))
                }
                (
                    _,
                    keel_provider::ContentBlock::ToolUse {
                        id, name, input, ..
                    },
                ) => {
                    let mut call = ToolCall::new(id.clone(), title(name, input))
                        .kind(kind(name))
                        .raw_input(input.clone());
                    if let Some(path) = location(input, cwd) {
                        call = call.locations(vec![ToolCallLocation::new(path)]);
                    }
                    SessionUpdate::ToolCall(call)
                }
                (
                    _,
                    keel_provider::ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                        ..
                    },
                ) => {
                    let status = if *is_error {
                        ToolCallStatus::Failed
                    } else {
                        ToolCallStatus::Completed
                    };
                    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        tool_use_id.clone(),
                        ToolCallUpdateFields::new().status(status).content(vec![
                            ToolCallContent::from(ContentBlock::Text(TextContent::new(
                                content.clone(),
                            ))),
                        ]),
                    ))
                }
                _ => continue,
            };
            send(connection, session_id, update);
        }
    }
}

/// The text of a prompt's blocks.
fn prompt_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The client's MCP servers as keel's configurations (stdio and HTTP; SSE, which keel does
/// not offer, is an error naming the server).
fn client_mcp_servers(servers: Vec<McpServer>) -> Result<Vec<McpServerConfig>, CliError> {
    let mut configs = Vec::new();
    for server in servers {
        let (name, transport) = match server {
            McpServer::Stdio(stdio) => (
                stdio.name,
                McpTransport::Stdio(StdioServer {
                    command: stdio.command.display().to_string(),
                    args: stdio.args,
                    env: stdio.env.into_iter().map(|v| (v.name, v.value)).collect(),
                    env_vars: Vec::new(),
                    cwd: None,
                }),
            ),
            McpServer::Http(http) => (
                http.name,
                McpTransport::Http(HttpServer {
                    url: http.url,
                    headers: http
                        .headers
                        .into_iter()
                        .map(|h| (h.name, h.value))
                        .collect(),
                    bearer_token: None,
                }),
            ),
            McpServer::Sse(sse) => {
                return Err(CliError::Usage(format!(
                    "MCP server {}: SSE is not supported; give it as stdio or http",
                    sse.name
                )));
            }
            _ => {
                return Err(CliError::Usage(
                    "an MCP server of a transport keel does not know".to_owned(),
                ));
            }
        };
        configs.push(
            McpServerConfig::new(name, transport).map_err(|e| CliError::Usage(e.to_string()))?,
        );
    }
    Ok(configs)
}

/// A new keel session in `cwd`, as `keel exec` would make it there, with the client's MCP
/// servers started beside the configured ones (a client's server replaces a configured one of
/// the same name; one that does not start is logged on stderr).
async fn new_session(
    options: &Options,
    cwd: PathBuf,
    mcp_servers: Vec<McpServer>,
    choice: SessionChoice,
    connection: Connection,
) -> Result<(String, AcpSession), CliError> {
    let mut options = options.clone();
    options.cwd = Some(cwd);
    let mut setup = Setup::resolve(&options, Mode::Exec, &choice)?;
    for server in client_mcp_servers(mcp_servers)? {
        setup.mcp.retain(|s| s.name() != server.name());
        setup.mcp.push(server);
    }
    for line in setup.start_mcp_servers().await {
        progress(&format!("keel: {line}"));
    }
    let id = Arc::new(Mutex::new(String::new()));
    let asker = ClientApprover {
        connection,
        session_id: id.clone(),
    };
    // Gated calls ask the client, in the mode the client picks (ask by default).
    let approver = ModeApprover::asking(LiveMode::Ask, Arc::new(asker));
    let mode = approver.switch();
    let coding = setup.agent(approver, Hooks::new())?;
    let session = setup.session(coding.agent(), &choice)?;
    let session_id = session.id().to_owned();
    if let Ok(mut slot) = id.lock() {
        slot.clone_from(&session_id);
    }
    let cancel = session.cancel_handle();
    Ok((
        session_id,
        AcpSession {
            _coding: coding,
            session: Arc::new(tokio::sync::Mutex::new(session)),
            cancel,
            mode,
        },
    ))
}

/// Runs `keel acp` until the client closes stdin; returns the exit code.
pub(crate) async fn run(options: &Options) -> Result<u8, CliError> {
    let sessions: Sessions = Arc::default();
    let (for_new, for_prompt, for_cancel, for_mode, for_load) = (
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
        sessions,
    );
    let options = options.clone();
    let load_options = options.clone();
    let served = Agent
        .v1()
        .name("keel")
        .on_receive_request(
            async move |initialize: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(initialize.protocol_version).agent_capabilities(
                        AgentCapabilities::new()
                            .load_session(true)
                            .mcp_capabilities(McpCapabilities::new().http(true)),
                    ),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| match new_session(
                &options,
                request.cwd,
                request.mcp_servers,
                SessionChoice::New,
                cx.clone(),
            )
            .await
            {
                Ok((id, session)) => {
                    if let Ok(mut map) = for_new.lock() {
                        map.insert(id.clone(), session);
                    }
                    responder.respond(NewSessionResponse::new(id).modes(mode_state(LiveMode::Ask)))
                }
                Err(err) => responder.respond_with_error(
                    agent_client_protocol::Error::invalid_params().data(err.to_string()),
                ),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                let session_id = request.session_id.0.to_string();
                let session = for_prompt
                    .lock()
                    .ok()
                    .and_then(|map| map.get(&session_id).map(|s| s.session.clone()));
                let Some(session) = session else {
                    return responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params()
                            .data(format!("no session {session_id}")),
                    );
                };
                let text = prompt_text(&request.prompt);
                let connection = cx.clone();
                cx.spawn(async move {
                    let mut session = session.lock().await;
                    let stop = prompt_turn(&connection, &session_id, &mut session, &text).await;
                    responder.respond(PromptResponse::new(stop))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                let id = request.session_id.0.to_string();
                match new_session(
                    &load_options,
                    request.cwd,
                    request.mcp_servers,
                    SessionChoice::Resume(id),
                    cx.clone(),
                )
                .await
                {
                    Ok((id, session)) => {
                        {
                            let history = session.session.lock().await;
                            replay(&cx, &id, history.history(), history.cwd());
                        }
                        if let Ok(mut map) = for_load.lock() {
                            map.insert(id, session);
                        }
                        responder
                            .respond(LoadSessionResponse::new().modes(mode_state(LiveMode::Ask)))
                    }
                    Err(err) => responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params().data(err.to_string()),
                    ),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, _cx| {
                let id = request.session_id.0.to_string();
                let mode = LiveMode::named(&request.mode_id.0).filter(|mode| MODES.contains(mode));
                let switch = for_mode
                    .lock()
                    .ok()
                    .and_then(|map| map.get(&id).map(|s| s.mode.clone()));
                match (switch, mode) {
                    (Some(switch), Some(mode)) => {
                        switch.set(mode);
                        responder.respond(SetSessionModeResponse::new())
                    }
                    (None, _) => responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params()
                            .data(format!("no session {id}")),
                    ),
                    (_, None) => responder.respond_with_error(
                        agent_client_protocol::Error::invalid_params().data(format!(
                            "no mode {:?}; the modes are {}",
                            &*request.mode_id.0,
                            MODES.map(LiveMode::name).join(", ")
                        )),
                    ),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                let id = notification.session_id.0.to_string();
                if let Ok(map) = for_cancel.lock()
                    && let Some(session) = map.get(&id)
                {
                    session.cancel.cancel();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await;
    served.map_err(|err| CliError::Run(format!("ACP: {err}")))?;
    Ok(0)
}
