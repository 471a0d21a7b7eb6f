//! keel's tools served to any MCP host: a [`ToolServer`] answers `tools/list` from a
//! [`ToolRegistry`]'s definitions and runs `tools/call` through its dispatch, over stdio
//! ([`ToolServer::serve_stdio`], any byte stream with [`ToolServer::serve`]) or streamable
//! HTTP behind a bearer token ([`ToolServer::serve_http`]).
//!
//! - **Calls.** Each call runs with a [`ToolContext`](keel_tool::ToolContext) whose
//!   cancellation is the request's (`notifications/cancelled`), whose progress lines become
//!   `notifications/progress` when the request carries a progress token (with a heartbeat
//!   while a long call runs), and whose session id is the connection's, so background tasks
//!   started through it are recorded under it. Results are one text block with `isError`.
//! - **Roots.** The directories a tool's arguments name ([`ToolServerBuilder::confine`]:
//!   `cwd` of `code`, `workdir` of `start_task`) must lie inside the server's roots
//!   narrowed by the client's (`roots/list`, fetched again after
//!   `notifications/roots/list_changed`): a host can narrow where keel works, never widen
//!   it. Outside, relative paths leading out, symlinks pointing out: an error result, and
//!   nothing runs.
//! - **Host application.** [`ToolServer::clients`] lists the connected clients, to send
//!   them logging messages (a background task ended); [`current_client`] is the client of
//!   the call running now, to ask its user through elicitation ([`ClientHandle::confirm`]).
//!
//! ```
//! use keel_mcp::server::ToolServer;
//! use keel_tool::ToolRegistry;
//!
//! let dir = tempfile::tempdir()?;
//! let server = ToolServer::builder(ToolRegistry::new(), dir.path())
//!     .read_only(["list_tasks"])
//!     .confine("code", "cwd")
//!     .build()?;
//! assert_eq!(server.roots().dirs(), [dir.path().canonicalize()?]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use keel_tool::ToolRegistry;
use rmcp::ServiceExt as _;
use rmcp::model::Implementation;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::McpError;

mod client;
mod handler;
mod http;
mod roots;

pub use client::{ClientHandle, Clients, Confirmation, LogLevel, current_client};
pub use http::{BearerToken, HttpServer, MCP_PATH};
pub use roots::{AllowedRoots, root_path};

use handler::Connection;

/// How often a call that reports nothing sends a progress heartbeat (when asked for
/// progress).
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(10);

/// What every connection of a server shares.
pub(crate) struct Shared {
    pub(crate) registry: ToolRegistry,
    pub(crate) cwd: PathBuf,
    pub(crate) roots: AllowedRoots,
    pub(crate) read_only: HashSet<String>,
    pub(crate) confined: Vec<(String, String)>,
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    pub(crate) heartbeat: Duration,
    pub(crate) clients: Clients,
    session_prefix: String,
    sessions: AtomicU64,
}

impl Shared {
    /// A fresh session id: `<prefix>-<pid>-<n>`.
    pub(crate) fn next_session_id(&self) -> String {
        let n = self.sessions.fetch_add(1, Ordering::Relaxed) + 1;
        format!("{}-{}-{n}", self.session_prefix, std::process::id())
    }
}

/// Serves a [`ToolRegistry`] to MCP hosts. Cheap to clone; clones serve the same tools and
/// share the list of clients.
#[derive(Clone)]
pub struct ToolServer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ToolServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolServer")
            .field("tools", &self.shared.registry.names())
            .field("roots", &self.shared.roots)
            .finish_non_exhaustive()
    }
}

/// Builds a [`ToolServer`].
#[derive(Debug)]
pub struct ToolServerBuilder {
    registry: ToolRegistry,
    cwd: PathBuf,
    roots: Vec<PathBuf>,
    read_only: HashSet<String>,
    confined: Vec<(String, String)>,
    name: String,
    version: String,
    instructions: Option<String>,
    heartbeat: Duration,
    session_prefix: String,
}

impl ToolServerBuilder {
    /// The directories calls may work in (default: the working directory). Each must exist.
    #[must_use]
    pub fn roots(mut self, dirs: impl IntoIterator<Item = impl Into<PathBuf>>) -> Self {
        self.roots = dirs.into_iter().map(Into::into).collect();
        self
    }

    /// Tools that only read, marked `readOnlyHint: true` in `tools/list` (the others
    /// `false`).
    #[must_use]
    pub fn read_only<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.read_only.extend(names.into_iter().map(Into::into));
        self
    }

    /// Argument `arg` of tool `tool` names a directory the call works in: before the call
    /// runs it must be an existing directory inside the allowed roots (relative paths are
    /// read from the working directory; absent, the working directory itself must be
    /// allowed), and the tool gets it resolved.
    #[must_use]
    pub fn confine(mut self, tool: impl Into<String>, arg: impl Into<String>) -> Self {
        self.confined.push((tool.into(), arg.into()));
        self
    }

    /// The name and version the server gives in `initialize` (default `keel` and this
    /// crate's version).
    #[must_use]
    pub fn server_info(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.name = name.into();
        self.version = version.into();
        self
    }

    /// Instructions for the host's model, sent in `initialize`.
    #[must_use]
    pub fn instructions(mut self, text: impl Into<String>) -> Self {
        self.instructions = Some(text.into());
        self
    }

    /// How often a long call sends a progress heartbeat (default [`DEFAULT_HEARTBEAT`]; at
    /// least 10 ms).
    #[must_use]
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.heartbeat = every.max(Duration::from_millis(10));
        self
    }

    /// The start of each connection's session id (default `mcp`).
    #[must_use]
    pub fn session_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.session_prefix = prefix.into();
        self
    }

    /// The server; fails when the working directory or a root is not an existing directory.
    pub fn build(self) -> Result<ToolServer, McpError> {
        let cwd = std::fs::canonicalize(&self.cwd)
            .ok()
            .filter(|dir| dir.is_dir())
            .ok_or_else(|| {
                McpError::Serve(format!(
                    "working directory {}: not an existing directory",
                    self.cwd.display()
                ))
            })?;
        let dirs = if self.roots.is_empty() {
            vec![cwd.clone()]
        } else {
            self.roots
        };
        let roots = AllowedRoots::new(&dirs).map_err(McpError::Serve)?;
        let mut info = Implementation::new(self.name, self.version);
        info.title = Some("keel".to_owned());
        Ok(ToolServer {
            shared: Arc::new(Shared {
                registry: self.registry,
                cwd,
                roots,
                read_only: self.read_only,
                confined: self.confined,
                info,
                instructions: self.instructions,
                heartbeat: self.heartbeat,
                clients: Clients::default(),
                session_prefix: self.session_prefix,
                sessions: AtomicU64::new(0),
            }),
        })
    }
}

impl ToolServer {
    /// A builder for a server of `registry`'s tools, working in `cwd` (the directory
    /// relative paths are read from, and the default root).
    pub fn builder(registry: ToolRegistry, cwd: impl Into<PathBuf>) -> ToolServerBuilder {
        ToolServerBuilder {
            registry,
            cwd: cwd.into(),
            roots: Vec::new(),
            read_only: HashSet::new(),
            confined: Vec::new(),
            name: "keel".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            instructions: None,
            heartbeat: DEFAULT_HEARTBEAT,
            session_prefix: "mcp".to_owned(),
        }
    }

    /// The clients connected now.
    pub fn clients(&self) -> &Clients {
        &self.shared.clients
    }

    /// The server's own roots (before any client narrows them).
    pub fn roots(&self) -> &AllowedRoots {
        &self.shared.roots
    }

    /// The working directory.
    pub fn cwd(&self) -> &Path {
        &self.shared.cwd
    }

    /// Serves one client on stdin and stdout until it disconnects. Nothing else may write
    /// to stdout meanwhile.
    ///
    /// Stdin is read on a thread of its own, not the runtime's blocking pool: a read that
    /// never returns (the host keeps stdin open) then cannot keep the runtime from shutting
    /// down when the host application stops serving (on a signal, say).
    pub async fn serve_stdio(&self) -> Result<(), McpError> {
        self.serve(stdin_reader()?, tokio::io::stdout()).await
    }

    /// Serves one client on a byte stream (newline-delimited JSON-RPC) until it disconnects.
    pub async fn serve<R, W>(&self, reader: R, writer: W) -> Result<(), McpError>
    where
        R: AsyncRead + Send + Unpin + 'static,
        W: AsyncWrite + Send + Unpin + 'static,
    {
        let connection = Connection::new(self.shared.clone());
        let running = connection
            .serve((reader, writer))
            .await
            .map_err(|err| McpError::Serve(format!("the client's handshake failed: {err}")))?;
        let reason = running
            .waiting()
            .await
            .map_err(|err| McpError::Serve(format!("the connection failed: {err}")))?;
        tracing::info!(?reason, "MCP client disconnected");
        Ok(())
    }

    pub(crate) fn connection(&self) -> Connection {
        Connection::new(self.shared.clone())
    }
}

/// Stdin as an async reader fed by a thread of its own; EOF (or a read error) ends it.
fn stdin_reader() -> Result<tokio::io::DuplexStream, McpError> {
    use std::io::Read as _;
    use tokio::io::AsyncWriteExt as _;
    let runtime = tokio::runtime::Handle::current();
    let (reader, mut feeder) = tokio::io::duplex(64 * 1024);
    std::thread::Builder::new()
        .name("keel-mcp-stdin".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buffer = vec![0u8; 16 * 1024];
            loop {
                let n = match stdin.read(&mut buffer) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(err) => {
                        tracing::warn!("reading stdin: {err}");
                        break;
                    }
                };
                let chunk = buffer.get(..n).unwrap_or_default();
                if runtime.block_on(feeder.write_all(chunk)).is_err() {
                    break;
                }
            }
        })
        .map_err(|err| McpError::Serve(format!("cannot start reading stdin: {err}")))?;
    Ok(reader)
}
