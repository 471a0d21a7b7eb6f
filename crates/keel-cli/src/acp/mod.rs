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

mod commands;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, CurrentModeUpdate, Implementation, InitializeRequest,
    InitializeResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer,
    NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest, PromptResponse,
    SessionMode, SessionModeState, SessionNotification, SessionUpdate, SetSessionModeRequest,
    SetSessionModeResponse, StopReason,
};
use agent_client_protocol::{Agent, Stdio};
use keel::RunEvent;
use keel::mcp::{HttpServer, McpServerConfig, McpTransport, StdioServer};
use keel_config::{LiveMode, SessionChoice, Settings, Surface};
use keel_host::acp::{Announced, TurnUpdates, prompt_content, stop_reason};
use keel_host::{
    ConfiguredSessions, HostEvent, LiveSession, Opening, Ownership, SessionHost, Subscription,
    TaskWait,
};

use crate::cli::Options;
use crate::error::CliError;
use crate::print::progress;
use keel_host::acp::{ClientApprover, ClientFiles};

use keel_host::acp::Connection;

/// One ACP session: the host's live session, the owner's subscription (its events become
/// the client's updates), the settings it was built from, and the calls shown to the client
/// before a permission question.
struct AcpSession {
    /// The host of the connection's sessions (a rewind checks the others).
    host: SessionHost,
    live: LiveSession,
    owner: tokio::sync::Mutex<Subscription>,
    settings: Arc<Settings>,
    announced: Announced,
}

/// Sends `session/update`s for one session.
struct Updates<'a> {
    connection: &'a Connection,
    session_id: &'a str,
}

impl<'a> Updates<'a> {
    /// Updates of session `session_id`.
    fn new(connection: &'a Connection, session_id: &'a str) -> Self {
        Self {
            connection,
            session_id,
        }
    }

    /// Sends `update`; a client gone away is logged, not an error of the turn.
    fn send(&self, update: SessionUpdate) {
        let notification = SessionNotification::new(self.session_id.to_owned(), update);
        if let Err(err) = self.connection.send_notification(notification) {
            tracing::warn!("session/update not sent: {err}");
        }
    }
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
    images: Vec<keel::provider::ContentBlock>,
) -> StopReason {
    let updates = Updates::new(connection, session_id);
    if let Some((name, argument)) = commands::parse(&text) {
        let shown = commands::run(acp, name, argument).await;
        updates.send(keel_host::acp::message(shown));
        return StopReason::EndTurn;
    }
    let mut content = Vec::with_capacity(1 + images.len());
    if !text.is_empty() {
        content.push(keel::provider::ContentBlock::text(text));
    }
    content.extend(images);
    let mut owner = acp.owner.lock().await;
    let turn = match acp.live.start_turn(content, TaskWait::Leave) {
        Ok(turn) => turn.number,
        Err(err) => {
            updates.send(keel_host::acp::message(err.to_string()));
            return StopReason::EndTurn;
        }
    };
    let mut turn_updates = TurnUpdates::new(acp.live.cwd(), acp.announced.clone());
    while let Some(event) = owner.next().await {
        match event {
            HostEvent::Run(RunEvent::Agent(event)) => {
                if let Some(update) = turn_updates.event(event) {
                    updates.send(update);
                }
            }
            HostEvent::TurnEnded { turn: ended, .. } if ended == turn => break,
            _ => {}
        }
    }
    match turn_updates.outcome {
        Some(outcome) => stop_reason(&outcome.stop),
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
/// the file tools where it offers them. Gated calls ask the client, in the mode the client
/// picks (ask by default).
async fn new_session(
    host: &SessionHost,
    options: &Options,
    cwd: PathBuf,
    mcp_servers: Vec<McpServer>,
    choice: SessionChoice,
    connection: Connection,
    offers: ClientOffers,
) -> Result<(String, AcpSession), CliError> {
    let mut options = options.clone();
    options.cwd = Some(cwd);
    let mut settings = options.settings(Surface::Headless, &choice)?;
    for server in client_mcp_servers(mcp_servers)? {
        settings.add_mcp_server(server);
    }
    for line in settings.start_mcp_servers().await {
        progress(&format!("keel: {line}"));
    }
    settings.ask_served_context().await;
    let settings = Arc::new(settings);
    let sessions = ConfiguredSessions::new(settings.clone()).mode(LiveMode::Ask);
    let opened = host
        .open(&sessions, &Opening::of(&choice), Ownership::default())
        .await?;
    let (live, owner) = (opened.session, opened.owner);
    let session_id = live.id().to_owned();
    let announced = Announced::default();
    let asker = ClientApprover::new(
        connection.clone(),
        session_id.clone(),
        live.cwd().to_path_buf(),
        announced.clone(),
    );
    live.answer_with(&owner, Arc::new(asker))?;
    crate::context_notes::print_context_notes(live.coding(), "");
    if let Some(files) =
        ClientFiles::offered(connection, session_id.clone(), offers.reads, offers.writes)
    {
        live.session().await.set_editor_files(Arc::new(files));
    }
    Ok((
        session_id,
        AcpSession {
            host: host.clone(),
            live,
            owner: tokio::sync::Mutex::new(owner),
            settings,
            announced,
        },
    ))
}

fn invalid(err: impl std::fmt::Display) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(err.to_string())
}

/// keel's side of one ACP connection: its sessions in one session host, and what the client
/// said it offers.
struct AcpAgent {
    host: SessionHost,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
    offers: Mutex<ClientOffers>,
    options: Options,
}

impl AcpAgent {
    /// The session `id`, or the error reply naming it.
    fn find(&self, id: &str) -> Result<Arc<AcpSession>, agent_client_protocol::Error> {
        self.sessions
            .lock()
            .ok()
            .and_then(|map| map.get(id).cloned())
            .ok_or_else(|| {
                agent_client_protocol::Error::invalid_params().data(format!("no session {id}"))
            })
    }

    /// Opens the session `choice` names in `cwd` and keeps it.
    async fn open(
        &self,
        cwd: PathBuf,
        mcp_servers: Vec<McpServer>,
        choice: SessionChoice,
        connection: &Connection,
    ) -> Result<Arc<AcpSession>, CliError> {
        let offers = self.offers.lock().map(|o| *o).unwrap_or_default();
        let (id, session) = new_session(
            &self.host,
            &self.options,
            cwd,
            mcp_servers,
            choice,
            connection.clone(),
            offers,
        )
        .await?;
        let session = Arc::new(session);
        if let Ok(mut map) = self.sessions.lock() {
            map.insert(id, session.clone());
        }
        Ok(session)
    }

    /// `initialize`: what the client offers is kept; keel's answer.
    fn initialize(&self, initialize: &InitializeRequest) -> InitializeResponse {
        let fs = &initialize.client_capabilities.fs;
        if let Ok(mut offers) = self.offers.lock() {
            *offers = ClientOffers {
                reads: fs.read_text_file,
                writes: fs.write_text_file,
            };
        }
        initialize_response(initialize)
    }

    /// `session/set_mode`: the session's approval mode, and the client told.
    fn set_mode(
        &self,
        request: &SetSessionModeRequest,
        connection: &Connection,
    ) -> Result<SetSessionModeResponse, agent_client_protocol::Error> {
        let id = request.session_id.0.to_string();
        let session = self.find(&id)?;
        let Some(mode) = LiveMode::named(&request.mode_id.0).filter(|mode| MODES.contains(mode))
        else {
            return Err(invalid(format!(
                "no mode {:?}; the modes are {}",
                &*request.mode_id.0,
                MODES.map(LiveMode::name).join(", ")
            )));
        };
        session.live.set_mode(mode);
        Updates::new(connection, &id).send(SessionUpdate::CurrentModeUpdate(
            CurrentModeUpdate::new(mode.name()),
        ));
        Ok(SetSessionModeResponse::new())
    }
}

/// Runs `keel acp` until the client closes stdin; returns the exit code.
pub(crate) async fn run(options: &Options) -> Result<u8, CliError> {
    let agent = Arc::new(AcpAgent {
        host: SessionHost::default(),
        sessions: Mutex::default(),
        offers: Mutex::default(),
        options: options.clone(),
    });
    let (for_init, for_new, for_prompt, for_load, for_mode, for_cancel) = (
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent,
    );
    let served = Agent
        .v1()
        .name("keel")
        .on_receive_request(
            async move |initialize: InitializeRequest, responder, _cx| {
                responder.respond(for_init.initialize(&initialize))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                let opened = for_new
                    .open(request.cwd, request.mcp_servers, SessionChoice::New, &cx)
                    .await;
                match opened {
                    Ok(session) => {
                        let id = session.live.id().to_owned();
                        let reply = responder.respond(
                            NewSessionResponse::new(id.clone()).modes(mode_state(LiveMode::Ask)),
                        );
                        Updates::new(&cx, &id).send(commands::available());
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
                let session = match for_prompt.find(&session_id) {
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
                let id = request.session_id.0.to_string();
                let opened = for_load
                    .open(
                        request.cwd,
                        request.mcp_servers,
                        SessionChoice::Resume(id),
                        &cx,
                    )
                    .await;
                match opened {
                    Ok(session) => {
                        let id = session.live.id();
                        let updates = Updates::new(&cx, &id);
                        let history = session.live.session().await.history().to_vec();
                        for update in keel_host::acp::replay(&history, session.live.cwd()) {
                            updates.send(update);
                        }
                        updates.send(commands::available());
                        responder
                            .respond(LoadSessionResponse::new().modes(mode_state(LiveMode::Ask)))
                    }
                    Err(err) => responder.respond_with_error(invalid(err)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, cx| match for_mode
                .set_mode(&request, &cx)
            {
                Ok(reply) => responder.respond(reply),
                Err(err) => responder.respond_with_error(err),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: CancelNotification, _cx| {
                let id = notification.session_id.0.to_string();
                if let Ok(session) = for_cancel.find(&id) {
                    session.live.cancel();
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
