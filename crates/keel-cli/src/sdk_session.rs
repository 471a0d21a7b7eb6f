//! The Claude Agent SDKs' stream-json protocol (`--input-format stream-json
//! --output-format stream-json`): user messages as JSON lines on stdin, one turn each, in one
//! session; control requests both ways beside them.
//!
//! From the program: `initialize` (answered at once; the SDK sends nothing before the
//! answer), `interrupt` (the running turn ends, cancelled, with its `result` line),
//! `set_permission_mode`, `set_model` (from the next turn on), `mcp_status`; any other
//! subtype gets an error answer naming it. To the program: `can_use_tool` for each gated
//! call when it asked for them (`--permission-prompt-tool stdio`). stdout carries only
//! protocol lines; the session ends when stdin closes. What each line means is keel-host's
//! [`sdk`](keel_host::sdk) module; here are stdin, stdout and the session host.

use std::sync::{Arc, Mutex, OnceLock};

use keel::engine::{Approver, CancelHandle, Hooks, Stop};
use keel::mcp::{ChannelServer, McpServerConfig, McpTransport};
use keel::provider::ContentBlock;
use keel_config::{LiveMode, Settings, Surface};
use keel_host::sdk::{
    Changes, Control, LineWriter, ProgramApprover, ProgramMcp, Responder, control_answer,
    program_hooks, user_content,
};
use keel_host::stream_json::{ClaudeStream, InitInfo};
use keel_host::{ConfiguredSessions, ModeSwitch, Opening, Ownership, SessionHost, TaskWait};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

use crate::cli::{Options, OutputFormat};
use crate::context_notes::print_context_notes;
use crate::error::CliError;
use crate::exec::{Headless, end_session};
use crate::headless::stream_turn;
use crate::print::{print_json, progress};

/// stdin, line by line.
type Lines = tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>;

/// The program's content of a user message, with what was left out named on stderr.
fn content_of(message: &Value) -> Option<Vec<ContentBlock>> {
    let mut notes = Vec::new();
    let content = user_content(message, &mut notes);
    for note in notes {
        progress(&format!("keel: {note}"));
    }
    content
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
            "user" => match content_of(&message) {
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

/// How the program opened the session: its `initialize` request (id and request), or its
/// first prompt when it sent a user message first (no control protocol).
enum Start {
    Initialize(Value, Value),
    Prompt(Vec<ContentBlock>),
    Closed,
}

/// Reads stdin up to the program's first `initialize` request or user message.
async fn start(lines: &mut Lines) -> Start {
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match message["type"].as_str() {
            Some("control_request") if message["request"]["subtype"] == "initialize" => {
                return Start::Initialize(
                    message["request_id"].clone(),
                    message["request"].clone(),
                );
            }
            Some("user") => {
                if let Some(text) = content_of(&message) {
                    return Start::Prompt(text);
                }
            }
            _ => progress("keel: a line before initialize is skipped"),
        }
    }
    Start::Closed
}

/// What the program's `initialize` adds to the settings: its sub-agents (the SDKs' `agents`,
/// beside `--agents'`), its in-process MCP servers' names (the TypeScript SDK names them here
/// rather than in `--mcp-config`), and its system prompt (an empty one, the SDKs' default,
/// keeps keel's). A bad `agents` is answered as an error.
fn take_initialize(
    settings: &mut Settings,
    id: &Value,
    request: &Value,
    program_servers: &mut Vec<String>,
) -> Result<(), CliError> {
    if request["agents"].is_object() {
        match keel_config::inline_agents(&request["agents"], "the program's agents") {
            Ok(agents) => settings.extras.agents.extend(agents),
            Err(err) => {
                print_json(&control_answer(id, Err(err.to_string())));
                return Err(err.into());
            }
        }
    }
    for name in request["sdkMcpServers"].as_array().into_iter().flatten() {
        if let Some(name) = name.as_str()
            && !program_servers.iter().any(|known| known == name)
        {
            program_servers.push(name.to_owned());
        }
    }
    let prompt: Vec<&str> = request["systemPrompt"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let prompt = prompt.join("\n\n");
    if !prompt.trim().is_empty() {
        settings.extras.system_prompt = Some(prompt);
    }
    Ok(())
}

/// Starts the configured MCP servers beside the program's in-process ones (each reached
/// through `control`); what `mcp_status` answers.
async fn start_servers(
    settings: &mut Settings,
    control: &Control,
    program_servers: Vec<String>,
) -> Result<Value, CliError> {
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
        settings.add_mcp_server(config);
    }
    for line in settings.start_mcp_servers().await {
        progress(&format!("keel: {line}"));
    }
    let status: Vec<Value> = settings
        .mcp_status()
        .into_iter()
        .map(|(name, status)| serde_json::json!({"name": name, "status": status}))
        .collect();
    Ok(Value::Array(status))
}

/// Runs the SDK's session: one turn per user message, until stdin closes; the exit code.
pub(crate) async fn run(
    options: &Options,
    headless: Headless,
    asks_program: bool,
    program_servers: Vec<String>,
) -> Result<u8, CliError> {
    let choice = options.session_choice();
    let mut settings = options.settings(Surface::Headless, &choice)?;
    settings.add(headless.extras.clone(), &options.mcp_config)?;
    for notice in &settings.notices {
        progress(&format!("keel: {notice}"));
    }
    let write: LineWriter = Arc::new(print_json);
    let control = Control::new(write);
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    // The SDKs send `initialize` first, with the hooks the program registers, and wait for
    // its answer; it is answered once the hooks are known to be ones keel runs.
    let (initialize, first_prompt) = match start(&mut lines).await {
        Start::Initialize(id, request) => (Some((id, request)), None),
        Start::Prompt(prompt) => (None, Some(prompt)),
        Start::Closed => return Ok(0),
    };
    let mut program_servers = program_servers;
    if let Some((id, request)) = &initialize {
        take_initialize(&mut settings, id, request, &mut program_servers)?;
    }
    // Claude Code's default mode asks the program when it answers questions.
    let start_mode = headless.mode.unwrap_or(if asks_program {
        LiveMode::Ask
    } else {
        settings.live_mode
    });
    // The mode is shared: the program's hooks read it, `set_permission_mode` changes it.
    let mode = ModeSwitch::new(start_mode);
    let hooks = match &initialize {
        Some((id, request)) => {
            match program_hooks(&request["hooks"], &control, &mode, settings.store.dir()) {
                Ok(hooks) => hooks,
                Err(err) => {
                    print_json(&control_answer(id, Err(err.clone())));
                    return Err(CliError::Usage(err));
                }
            }
        }
        None => Hooks::new(),
    };
    let link = ProgramLink {
        control,
        mode,
        changes: Arc::default(),
        cancel: Arc::default(),
        mcp_status: Arc::default(),
    };
    let responder = link.responder(&settings.model);
    if let Some((id, request)) = &initialize {
        print_json(&control_answer(id, responder.answer(request)));
    }
    let (prompts, next) = mpsc::unbounded_channel();
    if let Some(prompt) = first_prompt {
        let _ = prompts.send(prompt);
    }
    // From here on stdin is read beside the work: the program's servers answer through it.
    let reader = tokio::spawn(read_stdin(lines, responder, link.control.clone(), prompts));
    let status = start_servers(&mut settings, &link.control, program_servers).await?;
    let _ = link.mcp_status.set(status);
    settings.ask_served_context().await;
    let sessions = Sessions {
        settings: Arc::new(settings),
        hooks,
        asks_program,
    };
    let failed = serve(options, &sessions, &link, &headless, next).await;
    reader.abort();
    failed.map(u8::from)
}

/// What the session shares with the program's side of the protocol.
struct ProgramLink {
    control: Control,
    mode: ModeSwitch,
    changes: Arc<Mutex<Changes>>,
    /// The session's, once it exists (an interrupt before has no turn to end).
    cancel: Arc<OnceLock<CancelHandle>>,
    /// Each MCP server and whether it is connected, once they have started.
    mcp_status: Arc<OnceLock<Value>>,
}

impl ProgramLink {
    /// What answers the program's control requests.
    fn responder(&self, model: &str) -> Responder {
        Responder {
            cancel: self.cancel.clone(),
            mode: self.mode.clone(),
            changes: self.changes.clone(),
            model: model.to_owned(),
            mcp_status: self.mcp_status.clone(),
        }
    }
}

/// How the program's session is built.
struct Sessions {
    settings: Arc<Settings>,
    hooks: Hooks,
    asks_program: bool,
}

/// Opens the session and runs one turn per prompt until stdin closes; whether the last turn
/// failed.
async fn serve(
    options: &Options,
    sessions: &Sessions,
    link: &ProgramLink,
    headless: &Headless,
    mut next: mpsc::UnboundedReceiver<Vec<ContentBlock>>,
) -> Result<bool, CliError> {
    let settings = &sessions.settings;
    let mut factory = ConfiguredSessions::new(settings.clone())
        .mode_switch(link.mode.clone())
        .local_hooks(sessions.hooks.clone());
    if sessions.asks_program {
        // The program answers as Claude Code's permission modes ask: about every change.
        factory = factory.asking_about_changes();
    }
    let host = SessionHost::default();
    let choice = options.session_choice();
    let opened = host
        .open(&factory, &Opening::of(&choice), Ownership::default())
        .await?;
    let (live, mut owner) = (opened.session, opened.owner);
    if sessions.asks_program {
        let asker = Arc::new(ProgramApprover {
            control: link.control.clone(),
        }) as Arc<dyn Approver>;
        live.answer_with(&owner, asker)?;
    }
    for warning in live.coding().warnings() {
        progress(&format!("keel: warning: {warning}"));
    }
    print_context_notes(live.coding(), "");
    let mut stream = {
        let session = live.session().await;
        let _ = link.cancel.set(session.cancel_handle());
        // One stream for the session: its results are numbered, and their totals run, across
        // the turns.
        ClaudeStream::new(session.id(), session.model(), headless.partial)
            .with_catalog(session.catalog().clone())
    };
    let mut failed = false;
    while let Some(prompt) = next.recv().await {
        let model = link.changes.lock().ok().and_then(|mut c| c.model.take());
        if let Some(model) = model {
            stream.set_model(&model);
            live.session().await.set_model(model);
        }
        print_json(&stream.init(&InitInfo::of(settings, live.coding())));
        let started = std::time::Instant::now();
        let outcome = stream_turn(
            &live,
            &mut owner,
            prompt,
            OutputFormat::StreamJson,
            &mut stream,
            TaskWait::Wait,
        )
        .await;
        let Some(outcome) = outcome else {
            return Err(CliError::Run("the run ended without an outcome".into()));
        };
        failed = outcome.stop != Stop::Completed && outcome.stop != Stop::Cancelled;
        print_json(&stream.result(&outcome, started.elapsed()));
    }
    end_session(&host, &live).await;
    Ok(failed)
}
