//! Reaching a server: a stdio program started in a process group of its own with a scrubbed
//! environment, or a streamable HTTP endpoint; then the MCP handshake and `tools/list`.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderName, HeaderValue};
use rmcp::ServiceExt;
use rmcp::service::{Peer, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::AsyncReadExt;

use keel_sandbox::{GroupChild, scrub_env, spawn_in_group};
use keel_tool::HeadTail;

use super::ClientOptions;
use super::handler::{Handler, Shared};
use crate::config::{ChannelServer, HttpServer, McpServerConfig, McpTransport, StdioServer};

/// How much of a stdio server's stderr is kept, for saying why it stopped.
const STDERR_TAIL: usize = 4096;

/// One live connection to a server.
pub(crate) struct Connection {
    service: RunningService<RoleClient, Handler>,
    /// A stdio server's process (its group killed when this is dropped) and stderr tail.
    process: Option<Process>,
}

struct Process {
    child: GroupChild,
    stderr: Arc<Mutex<HeadTail>>,
    /// The task reading stderr; awaited (briefly) after an exit so its last words are kept.
    reader: Option<tokio::task::JoinHandle<()>>,
}

impl Process {
    /// Why it ended, as far as can be told: its exit status (killed if it has not exited
    /// within `grace`) and the last line of its stderr; empty when neither is known.
    async fn why_ended(&mut self, grace: Duration) -> String {
        let status = match tokio::time::timeout(grace, self.child.child.wait()).await {
            Ok(Ok(status)) => Some(describe_status(status)),
            _ => {
                self.child.group.kill();
                None
            }
        };
        self.drain_stderr().await;
        match (status, stderr_tail(&self.stderr)) {
            (Some(status), Some(tail)) => format!("{status}: {tail}"),
            (Some(status), None) => status,
            (None, Some(tail)) => tail,
            (None, None) => String::new(),
        }
    }

    /// Waits a moment for the stderr reader to reach the end of the pipe.
    async fn drain_stderr(&mut self) {
        if let Some(reader) = self.reader.take() {
            let _ = tokio::time::timeout(Duration::from_millis(200), reader).await;
        }
    }
}

impl Connection {
    pub(crate) fn peer(&self) -> Peer<RoleClient> {
        self.service.peer().clone()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.service.is_closed()
            || self
                .process
                .as_ref()
                .is_some_and(|process| process.child.child.id().is_none())
    }

    /// Why the connection ended, without waiting.
    pub(crate) fn why_closed(&self) -> String {
        match &self.process {
            Some(process) => stderr_tail(&process.stderr).map_or_else(
                || "it stopped".to_owned(),
                |tail| format!("it stopped: {tail}"),
            ),
            None => "its connection ended".to_owned(),
        }
    }

    /// Ends the connection and says why it ended: a stdio server's exit status (it is
    /// killed if it still runs) and the last line of its stderr.
    pub(crate) async fn reap(&mut self) -> String {
        let why = match self.process.as_mut() {
            Some(process) => process.why_ended(Duration::from_millis(200)).await,
            None => String::new(),
        };
        if why.is_empty() {
            "its connection ended".to_owned()
        } else {
            why
        }
    }
}

/// The last non-empty line of a server's stderr, if it wrote any.
fn stderr_tail(stderr: &Mutex<HeadTail>) -> Option<String> {
    let tail = stderr.lock().ok()?.last_lines(1);
    let line = tail.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

fn describe_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("it exited with status {code}"),
        (None, Some(signal)) => format!("it was killed by signal {signal}"),
        _ => "it exited".to_owned(),
    }
}

/// Connects to the server of `config`: the connection and the tools it lists. Errors are
/// one-line reasons.
pub(crate) async fn connect(
    config: &McpServerConfig,
    options: &ClientOptions,
    shared: Arc<Shared>,
) -> Result<(Connection, Vec<rmcp::model::Tool>), String> {
    let handler = Handler {
        server: config.name().to_owned(),
        shared,
    };
    let connection = match &config.transport {
        McpTransport::Stdio(stdio) => connect_stdio(stdio, options, handler).await?,
        McpTransport::Http(http) => connect_http(http, handler).await?,
        McpTransport::Channel(channel) => connect_channel(channel, handler).await?,
    };
    let listed = match connection.service.peer().list_all_tools().await {
        Ok(tools) => tools,
        Err(err) => {
            return Err(format!("tools/list failed: {err}"));
        }
    };
    Ok((connection, listed))
}

async fn connect_stdio(
    server: &StdioServer,
    options: &ClientOptions,
    handler: Handler,
) -> Result<Connection, String> {
    let mut command = tokio::process::Command::new(&server.command);
    command
        .args(&server.args)
        .current_dir(server.cwd.as_ref().unwrap_or(&options.cwd))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Like every process keel starts: no credentials, no session sockets; then what the
    // configuration passes on purpose.
    scrub_env(&mut command, &options.hidden_env);
    for name in &server.env_vars {
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(&server.env);
    let mut child = spawn_in_group(&mut command)
        .map_err(|err| format!("cannot run {}: {err}", server.command))?;
    let (Some(stdout), Some(stdin), Some(mut stderr)) = (
        child.child.stdout.take(),
        child.child.stdin.take(),
        child.child.stderr.take(),
    ) else {
        return Err("its pipes could not be set up".to_owned());
    };
    let tail = Arc::new(Mutex::new(HeadTail::new(0, STDERR_TAIL)));
    let sink = tail.clone();
    let reader = tokio::spawn(async move {
        let mut buffer = vec![0_u8; 4096];
        while let Ok(read) = stderr.read(&mut buffer).await {
            if read == 0 {
                break;
            }
            if let (Ok(mut tail), Some(bytes)) = (sink.lock(), buffer.get(..read)) {
                tail.push(bytes);
            }
        }
    });
    let mut process = Process {
        child,
        stderr: tail,
        reader: Some(reader),
    };
    match handler.serve((stdout, stdin)).await {
        Ok(service) => Ok(Connection {
            service,
            process: Some(process),
        }),
        Err(err) => {
            let mut ended = process.why_ended(Duration::from_millis(500)).await;
            if ended.is_empty() {
                ended = err.to_string();
            }
            Err(format!("the MCP handshake failed ({ended})"))
        }
    }
}

/// A server the host reaches itself: each message keel sends is carried by the host's
/// channel (concurrently, so a long call does not hold up a cancellation), and each reply
/// comes back into the client.
async fn connect_channel(server: &ChannelServer, handler: Handler) -> Result<Connection, String> {
    use futures::{SinkExt, StreamExt};
    type Outgoing = rmcp::service::TxJsonRpcMessage<RoleClient>;
    type Incoming = rmcp::service::RxJsonRpcMessage<RoleClient>;
    let (to_server, mut outgoing) = futures::channel::mpsc::unbounded::<Outgoing>();
    let (replies, incoming) = futures::channel::mpsc::unbounded::<Incoming>();
    let channel = server.channel.clone();
    tokio::spawn(async move {
        while let Some(message) = outgoing.next().await {
            let channel = channel.clone();
            let mut replies = replies.clone();
            tokio::spawn(async move {
                let Ok(message) = serde_json::to_value(&message) else {
                    return;
                };
                let id = message.get("id").cloned();
                let reply = match channel.exchange(message).await {
                    Ok(reply) => reply,
                    // A request that could not be carried is answered with the reason, so
                    // its caller does not wait for a reply that will never come.
                    Err(reason) => id.map(|id| {
                        serde_json::json!({"jsonrpc": "2.0", "id": id,
                                           "error": {"code": -32603, "message": reason}})
                    }),
                };
                if let Some(reply) = reply {
                    match serde_json::from_value::<Incoming>(reply) {
                        Ok(reply) => {
                            let _ = replies.send(reply).await;
                        }
                        Err(err) => tracing::warn!("an MCP reply that is not JSON-RPC: {err}"),
                    }
                }
            });
        }
    });
    let service = handler
        .serve((to_server, incoming))
        .await
        .map_err(|err| format!("the MCP handshake failed: {err}"))?;
    Ok(Connection {
        service,
        process: None,
    })
}

async fn connect_http(server: &HttpServer, handler: Handler) -> Result<Connection, String> {
    let mut headers = HashMap::new();
    for (name, value) in &server.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("the header name {name:?} is not valid"))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header {name} is not a valid header value"))?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(server.url.as_str()).custom_headers(headers);
    if let Some(token) = &server.bearer_token {
        config = config.auth_header(token.clone());
    }
    let client = reqwest::Client::builder()
        .user_agent(concat!("keel/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| format!("cannot make an HTTP client: {err}"))?;
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let service = handler
        .serve(transport)
        .await
        .map_err(|err| format!("the MCP handshake with {} failed: {err}", server.url))?;
    Ok(Connection {
        service,
        process: None,
    })
}
