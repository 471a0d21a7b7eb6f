//! The MCP client: a connected server ([`McpServer`]) whose tools are keel tools.
//!
//! A server is started (or connected, for HTTP) with [`McpServer::connect`], or several at
//! once, in parallel, with [`start_servers`]. Each is a [`ToolSource`]: added to a
//! [`ToolRegistry`](keel_tool::ToolRegistry) with `add_source`, its tools are offered as
//! `mcp__<server>__<tool>` and brought up to date before each model request when the server
//! says its list changed. A server that dies is started again at the next call of one of its
//! tools.

mod connect;
mod content;
mod handler;
mod tool;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use rmcp::service::{Peer, RoleClient};

use keel_tool::{DynTool, ToolSource};

use crate::McpError;
use crate::config::McpServerConfig;
use connect::Connection;
use handler::Shared;

pub use tool::offered_name;

/// How long [`ToolSource::refresh`] waits for a changed tool list before offering the old one.
const REFRESH_TIMEOUT: Duration = Duration::from_secs(5);

/// Where and how servers are started: the working directory of stdio servers (unless their
/// configuration names one) and the extra variables to keep from them.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The working directory of stdio servers that name none.
    pub cwd: PathBuf,
    /// Variables removed from stdio servers' environments besides every credential and
    /// session socket (keel's own API key variable, say), unless the configuration passes
    /// them.
    pub hidden_env: Vec<String>,
}

impl ClientOptions {
    /// Servers started in `cwd`, with no extra hidden variables.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        Self {
            cwd: cwd.into(),
            hidden_env: Vec::new(),
        }
    }
}

/// Whether a server is connected now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// Connected; its tools may be called.
    Connected,
    /// Its connection ended (the reason); the next call of one of its tools starts it again.
    Stopped(String),
}

/// A connected MCP server and its tools.
///
/// Cheap to clone (one shared connection). Dropping the last clone ends the connection and,
/// for a stdio server, kills its process group.
#[derive(Clone)]
pub struct McpServer {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.inner.config.name())
            .field("tools", &self.tool_names())
            .finish_non_exhaustive()
    }
}

pub(crate) struct Inner {
    config: McpServerConfig,
    options: ClientOptions,
    shared: Arc<Shared>,
    /// The live connection, if any; `generation` tells connections apart.
    connection: tokio::sync::Mutex<Option<Connection>>,
    generation: AtomicU64,
    tools: RwLock<Vec<Arc<dyn DynTool>>>,
    warnings: Mutex<Vec<String>>,
    state: Mutex<ServerState>,
}

impl McpServer {
    /// Starts (or connects to) the server `config` describes, completes the MCP handshake
    /// and reads its tools, all within its start-up timeout.
    pub async fn connect(
        config: McpServerConfig,
        options: ClientOptions,
    ) -> Result<Self, McpError> {
        let inner = Arc::new(Inner {
            config,
            options,
            shared: Arc::new(Shared::default()),
            connection: tokio::sync::Mutex::new(None),
            generation: AtomicU64::new(0),
            tools: RwLock::new(Vec::new()),
            warnings: Mutex::new(Vec::new()),
            state: Mutex::new(ServerState::Stopped("not started".to_owned())),
        });
        let mut slot = inner.connection.lock().await;
        let connection = Inner::start(&inner).await?;
        *slot = Some(connection);
        drop(slot);
        Ok(Self { inner })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        self.inner.config.name()
    }

    /// Its configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.inner.config
    }

    /// Whether it is connected now.
    pub fn state(&self) -> ServerState {
        self.inner
            .state
            .lock()
            .map(|state| state.clone())
            .unwrap_or_else(|_| ServerState::Stopped("unknown".to_owned()))
    }

    /// Its tools as keel tools, named `mcp__<server>__<tool>`.
    pub fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.inner
            .tools
            .read()
            .map(|tools| tools.clone())
            .unwrap_or_default()
    }

    /// The names its tools are offered under.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools()
            .iter()
            .map(|tool| tool.name().to_owned())
            .collect()
    }

    /// What was left out of its tool list and why (a schema that cannot be made valid, a
    /// name that does not fit), one line each.
    pub fn warnings(&self) -> Vec<String> {
        self.inner
            .warnings
            .lock()
            .map(|warnings| warnings.clone())
            .unwrap_or_default()
    }
}

impl Inner {
    /// A new connection: started, handshaken, its tools read; the state and tool list set.
    async fn start(this: &Arc<Self>) -> Result<Connection, McpError> {
        let started = tokio::time::timeout(
            this.config.startup_timeout,
            connect::connect(&this.config, &this.options, this.shared.clone()),
        )
        .await;
        let failure = |reason: String| McpError::Start {
            server: this.config.name().to_owned(),
            reason,
        };
        let (connection, listed) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(reason)) => return Err(failure(reason)),
            Err(_) => {
                return Err(failure(format!(
                    "no answer within {}s (startup_timeout_sec raises the limit)",
                    this.config.startup_timeout.as_secs_f64()
                )));
            }
        };
        this.shared.take_stale();
        this.set_tools(listed);
        this.generation.fetch_add(1, Ordering::AcqRel);
        this.set_state(ServerState::Connected);
        Ok(connection)
    }

    fn set_state(&self, state: ServerState) {
        if let Ok(mut slot) = self.state.lock() {
            *slot = state;
        }
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Replaces the tool list with `listed`, keeping the warnings of what was left out.
    fn set_tools(self: &Arc<Self>, listed: Vec<rmcp::model::Tool>) {
        let (tools, warnings) = tool::keel_tools(self, listed);
        for warning in &warnings {
            tracing::warn!(server = self.config.name(), "{warning}");
        }
        if let Ok(mut slot) = self.tools.write() {
            *slot = tools;
        }
        if let Ok(mut slot) = self.warnings.lock() {
            *slot = warnings;
        }
    }

    /// The live connection's peer and generation, starting the server again when its last
    /// connection ended.
    async fn peer(this: &Arc<Self>) -> Result<(Peer<RoleClient>, u64), McpError> {
        let mut slot = this.connection.lock().await;
        if let Some(connection) = slot.as_ref()
            && !connection.is_closed()
        {
            return Ok((connection.peer(), this.generation()));
        }
        if let Some(connection) = slot.take() {
            this.set_state(ServerState::Stopped(connection.why_closed()));
        }
        tracing::info!(server = this.config.name(), "starting the MCP server again");
        let connection = Self::start(this).await?;
        let peer = connection.peer();
        *slot = Some(connection);
        Ok((peer, this.generation()))
    }

    /// Marks connection `generation` as ended (a call saw it close); returns why, as far as
    /// can be told (the exit status and last lines of stderr of a stdio server).
    async fn ended(&self, generation: u64) -> String {
        let mut slot = self.connection.lock().await;
        if self.generation() != generation {
            return "its connection ended".to_owned();
        }
        let Some(mut connection) = slot.take() else {
            return "its connection ended".to_owned();
        };
        let why = connection.reap().await;
        self.set_state(ServerState::Stopped(why.clone()));
        why
    }

    /// Reads the tool list again if the server said it changed.
    async fn refresh(this: &Arc<Self>) {
        if !this.shared.take_stale() {
            return;
        }
        let peer = {
            let slot = this.connection.lock().await;
            match slot.as_ref() {
                Some(connection) if !connection.is_closed() => connection.peer(),
                _ => return,
            }
        };
        match tokio::time::timeout(REFRESH_TIMEOUT, peer.list_all_tools()).await {
            Ok(Ok(listed)) => this.set_tools(listed),
            Ok(Err(err)) => {
                tracing::warn!(server = this.config.name(), %err, "could not read the changed tool list");
            }
            Err(_) => {
                tracing::warn!(
                    server = this.config.name(),
                    "the changed tool list took too long"
                );
                this.shared.mark_stale();
            }
        }
    }
}

#[async_trait::async_trait]
impl ToolSource for McpServer {
    fn name(&self) -> &str {
        self.inner.config.name()
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        McpServer::tools(self)
    }

    async fn refresh(&self) {
        Inner::refresh(&self.inner).await;
    }
}

/// What [`start_servers`] made of a list of servers: those connected, and one error per
/// server that did not start (its name and why).
#[derive(Debug, Default)]
pub struct StartedServers {
    /// The servers that started, in the order given.
    pub servers: Vec<McpServer>,
    /// The servers that did not.
    pub failures: Vec<McpError>,
}

/// Starts every server of `configs` at once, each within its own start-up timeout; a
/// server that fails is in [`StartedServers::failures`] and the others are unaffected.
pub async fn start_servers(
    configs: Vec<McpServerConfig>,
    options: &ClientOptions,
) -> StartedServers {
    let results = futures::future::join_all(
        configs
            .into_iter()
            .map(|config| McpServer::connect(config, options.clone())),
    )
    .await;
    let mut started = StartedServers::default();
    for result in results {
        match result {
            Ok(server) => started.servers.push(server),
            Err(err) => started.failures.push(err),
        }
    }
    started
}
