//! `keel acp`: keel as an Agent Client Protocol agent over stdio (Zed, JetBrains, Neovim,
//! Emacs, acpx), on the official SDK `agent-client-protocol`. stdout carries only protocol
//! messages.
//!
//! A session is the agent `keel exec` would build in the session's `cwd` (its config, trust,
//! sandbox and rules); its events become `session/update`s ([`updates`]): text as
//! `agent_message_chunk`, thinking as `agent_thought_chunk`, each tool call as `tool_call`
//! (kind, locations, raw input; a diff for a file edit) and `tool_call_update` (progress while
//! it runs; completed or failed, with its output). Gated calls ask the client with
//! `session/request_permission` ([`client`]); `session/cancel` ends the turn with
//! `cancelled`. Where the client offers `fs/read_text_file` / `fs/write_text_file`, the file
//! tools read and write through it, after their own path checks. The MCP servers a client
//! passes in `session/new` (stdio or HTTP) start with the session. The session's modes are
//! keel's approval modes (`ask`, `accept-edits`, `read-only`, `allow`), switched with
//! `session/set_mode`. keel's slash commands ([`commands`]) are offered with
//! `available_commands_update`. `session/load` resumes a keel session (ids are keel's) and
//! replays its history as updates.

mod client;
mod commands;
mod updates;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CurrentModeUpdate, Implementation, InitializeRequest,
    InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    SessionMode, SessionModeState, SessionUpdate, SetSessionModeRequest, SetSessionModeResponse,
    StopReason,
};
use agent_client_protocol::{Agent, Client, Stdio};
use futures::StreamExt;
use keel::CodingAgent;
use keel::mcp::{HttpServer, McpServerConfig, McpTransport, StdioServer};
use keel_engine::{CancelHandle, Hooks, Session};

use crate::approve::{LiveMode, ModeApprover, ModeSwitch};
use crate::cli::Options;
use crate::exec::progress;
use crate::repl::totals::Totals;
use crate::setup::{CliError, Mode, SessionChoice, Setup};
use client::{ClientApprover, ClientFiles};
use updates::{Announced, TurnUpdates, Updates, prompt_content, stop_reason};

type Connection = ConnectionTo<Client>;

/// One ACP session: keel's agent and session, how to cancel its turn, its approval mode and
/// what it has spent.
struct AcpSession {
    /// The agent: its tools, delegates, snapshots and MCP servers live with it.
    coding: CodingAgent,
    /// How the session was set up (its MCP servers, for `/mcp`).
    setup: Setup,
    session: tokio::sync::Mutex<Session>,
    cancel: CancelHandle,
    mode: ModeSwitch,
    totals: Mutex<Totals>,
    /// The calls shown to the client before a permission question.
    announced: Announced,
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

type Sessions = Arc<Mutex<HashMap<String, Arc<AcpSession>>>>;

/// What the client said it offers in `initialize`: reading and writing its files.
#[derive(Debug, Clone, Copy, Default)]
struct ClientOffers {
    reads: bool,
    writes: bool,
}

/// The answer to `initialize`: the version asked for (keel speaks v1, the SDK's), keel's
/// name and version, and what it takes: `session/load`, text, images and embedded text
/// resources in prompts (no audio), MCP servers over stdio and HTTP. Both of keel's providers
/// take images in prompts (Anthropic as image blocks, Chat Completions as `image_url` parts).
fn initialize_response(initialize: &InitializeRequest) -> InitializeResponse {
    InitializeResponse::new(initialize.protocol_version)
        .agent_info(Implementation::new("keel", env!("CARGO_PKG_VERSION")).title("keel"))
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
                .mcp_capabilities(McpCapabilities::new().http(true)),
        )
}

/// Runs a prompt in `acp`'s session: a slash command, or a turn streamed as updates.
async fn prompt(
    connection: &Connection,
    session_id: &str,
    acp: &AcpSession,
    text: String,
    images: Vec<keel_provider::ContentBlock>,
) -> StopReason {
    let mut session = acp.session.lock().await;
    session.set_permission_mode(acp.mode.claude_name());
    let cwd = session.cwd().to_path_buf();
    let updates = Updates::new(connection, session_id, &cwd);
    if let Some((name, argument)) = commands::parse(&text) {
        let shown = commands::run(acp, &mut session, name, argument).await;
        updates.message(shown);
        return StopReason::EndTurn;
    }
    let mut turn = TurnUpdates::new(updates, &acp.announced);
    {
        let mut content = Vec::with_capacity(1 + images.len());
        if !text.is_empty() {
            content.push(keel_provider::ContentBlock::text(text));
        }
        content.extend(images);
        let events = session.run_streaming_content(content);
        futures::pin_mut!(events);
        while let Some(event) = events.next().await {
            turn.event(event);
        }
    }
    match turn.outcome {
        Some(outcome) => {
            if let Ok(mut totals) = acp.totals.lock() {
                totals.add(&outcome.usage, outcome.cost_usd, &outcome.cost_by_provider);
            }
            stop_reason(&outcome.stop)
        }
        None => StopReason::EndTurn,
    }
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
/// the same name; one that does not start is logged on stderr), and the client's files behind
/// the file tools where it offers them.
async fn new_session(
    options: &Options,
    cwd: PathBuf,
    mcp_servers: Vec<McpServer>,
    choice: SessionChoice,
    connection: Connection,
    offers: ClientOffers,
) -> Result<(String, AcpSession), CliError> {
    let mut options = options.clone();
    options.cwd = Some(cwd);
    let mut setup = Setup::resolve(&options, Mode::Exec, &choice)?;
    for server in client_mcp_servers(mcp_servers)? {
        setup.add_mcp_server(server);
    }
    for line in setup.start_mcp_servers().await {
        progress(&format!("keel: {line}"));
    }
    let id = Arc::new(Mutex::new(String::new()));
    let announced = Announced::default();
    let asker = ClientApprover::new(
        connection.clone(),
        id.clone(),
        setup.cwd.clone(),
        announced.clone(),
    );
    // Gated calls ask the client, in the mode the client picks (ask by default).
    let approver = ModeApprover::asking(LiveMode::Ask, Arc::new(asker));
    let mode = approver.switch();
    setup.ask_served_context().await;
    let coding = setup.agent(approver, Hooks::new())?;
    crate::exec::print_context_notes(&coding, "");
    let mut session = setup.session(coding.agent(), &choice)?;
    let session_id = session.id().to_owned();
    if let Ok(mut slot) = id.lock() {
        slot.clone_from(&session_id);
    }
    if let Some(files) =
        ClientFiles::offered(connection, session_id.clone(), offers.reads, offers.writes)
    {
        session.set_editor_files(Arc::new(files));
    }
    let cancel = session.cancel_handle();
    Ok((
        session_id,
        AcpSession {
            coding,
            setup,
            session: tokio::sync::Mutex::new(session),
            cancel,
            mode,
            totals: Mutex::default(),
            announced,
        },
    ))
}

/// The session `id`, or the error reply naming it.
fn find(sessions: &Sessions, id: &str) -> Result<Arc<AcpSession>, agent_client_protocol::Error> {
    sessions
        .lock()
        .ok()
        .and_then(|map| map.get(id).cloned())
        .ok_or_else(|| {
            agent_client_protocol::Error::invalid_params().data(format!("no session {id}"))
        })
}

fn invalid(err: impl std::fmt::Display) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(err.to_string())
}

/// Runs `keel acp` until the client closes stdin; returns the exit code.
pub(crate) async fn run(options: &Options) -> Result<u8, CliError> {
    let sessions: Sessions = Arc::default();
    let offers: Arc<Mutex<ClientOffers>> = Arc::default();
    let (for_new, for_prompt, for_cancel, for_mode, for_load) = (
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
        sessions,
    );
    let (offers_init, offers_new, offers_load) = (offers.clone(), offers.clone(), offers);
    let options = options.clone();
    let load_options = options.clone();
    let served = Agent
        .v1()
        .name("keel")
        .on_receive_request(
            async move |initialize: InitializeRequest, responder, _cx| {
                let fs = &initialize.client_capabilities.fs;
                if let Ok(mut offers) = offers_init.lock() {
                    *offers = ClientOffers {
                        reads: fs.read_text_file,
                        writes: fs.write_text_file,
                    };
                }
                responder.respond(initialize_response(&initialize))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                let offers = offers_new.lock().map(|o| *o).unwrap_or_default();
                match new_session(
                    &options,
                    request.cwd,
                    request.mcp_servers,
                    SessionChoice::New,
                    cx.clone(),
                    offers,
                )
                .await
                {
                    Ok((id, session)) => {
                        let cwd = session.setup.cwd.clone();
                        if let Ok(mut map) = for_new.lock() {
                            map.insert(id.clone(), Arc::new(session));
                        }
                        let reply = responder.respond(
                            NewSessionResponse::new(id.clone()).modes(mode_state(LiveMode::Ask)),
                        );
                        Updates::new(&cx, &id, &cwd).send(commands::available());
                        reply
                    }
                    Err(err) => responder.respond_with_error(invalid(err)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: PromptRequest, responder, cx| {
                let session_id = request.session_id.0.to_string();
                let session = match find(&for_prompt, &session_id) {
                    Ok(session) => session,
                    Err(err) => return responder.respond_with_error(err),
                };
                let (text, images) = match prompt_content(&request.prompt) {
                    Ok(content) => content,
                    Err(err) => return responder.respond_with_error(invalid(err)),
                };
                let connection = cx.clone();
                cx.spawn(async move {
                    let stop = prompt(&connection, &session_id, &session, text, images).await;
                    responder.respond(PromptResponse::new(stop))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: LoadSessionRequest, responder, cx| {
                let offers = offers_load.lock().map(|o| *o).unwrap_or_default();
                let id = request.session_id.0.to_string();
                match new_session(
                    &load_options,
                    request.cwd,
                    request.mcp_servers,
                    SessionChoice::Resume(id),
                    cx.clone(),
                    offers,
                )
                .await
                {
                    Ok((id, session)) => {
                        {
                            let history = session.session.lock().await;
                            let updates = Updates::new(&cx, &id, history.cwd());
                            updates.replay(history.history());
                            updates.send(commands::available());
                        }
                        if let Ok(mut map) = for_load.lock() {
                            map.insert(id, Arc::new(session));
                        }
                        responder
                            .respond(LoadSessionResponse::new().modes(mode_state(LiveMode::Ask)))
                    }
                    Err(err) => responder.respond_with_error(invalid(err)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, cx| {
                let id = request.session_id.0.to_string();
                let session = match find(&for_mode, &id) {
                    Ok(session) => session,
                    Err(err) => return responder.respond_with_error(err),
                };
                let Some(mode) =
                    LiveMode::named(&request.mode_id.0).filter(|mode| MODES.contains(mode))
                else {
                    return responder.respond_with_error(invalid(format!(
                        "no mode {:?}; the modes are {}",
                        &*request.mode_id.0,
                        MODES.map(LiveMode::name).join(", ")
                    )));
                };
                session.mode.set(mode);
                let reply = responder.respond(SetSessionModeResponse::new());
                Updates::new(&cx, &id, &session.setup.cwd).send(SessionUpdate::CurrentModeUpdate(
                    CurrentModeUpdate::new(mode.name()),
                ));
                reply
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                let id = notification.session_id.0.to_string();
                if let Ok(session) = find(&for_cancel, &id) {
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
