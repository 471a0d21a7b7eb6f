//! # keel-mcp
//!
//! The Model Context Protocol both ways, on the official Rust SDK (`rmcp`).
//!
//! **Client.** [`McpServer::connect`] starts a server (a program spoken to over stdio, in a
//! process group of its own with keel's credentials removed from its environment) or
//! connects to one (streamable HTTP), and reads its tools; [`start_servers`] starts several
//! in parallel. A server is a [`ToolSource`](keel_tool::ToolSource): added to a
//! [`ToolRegistry`](keel_tool::ToolRegistry), its tools are offered to the model as
//! `mcp__<server>__<tool>` with provider-safe schemas and effects from their annotations,
//! and its list is read again before the next request when the server says it changed.
//! Calls never fail the loop: a server that dies mid-call gives an error result and is
//! started again at the next call; a call cancelled or timed out is cancelled on the server
//! (`notifications/cancelled`); progress notifications become tool progress lines.
//!
//! **Server.** [`server`]: any [`keel_tool::ToolRegistry`] served to MCP hosts over
//! stdio or streamable HTTP (behind a bearer token), with the request's cancellation and
//! progress passed to the tools, the directories calls work in confined to the server's
//! roots narrowed by the client's, logging messages to the clients, and elicitation for the
//! host application to ask the client's user. `keel mcp-server` is this with keel's `code`
//! and task tools.
//!
//! Configurations come from keel's TOML (mapped by the host), or from a Claude Code
//! `.mcp.json` ([`parse_mcp_json`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use keel_mcp::{ClientOptions, McpServer, McpServerConfig, McpTransport, StdioServer};
//! use keel_tool::ToolRegistry;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = McpServerConfig::new(
//!     "everything",
//!     McpTransport::Stdio(StdioServer {
//!         command: "npx".into(),
//!         args: vec!["-y".into(), "@modelcontextprotocol/server-everything".into()],
//!         env: Default::default(),
//!         env_vars: Vec::new(),
//!         cwd: None,
//!     }),
//! )?;
//! let server = McpServer::connect(config, ClientOptions::new(".")).await?;
//! let mut registry = ToolRegistry::new();
//! registry.add_source(Arc::new(server));
//! assert!(registry.get("mcp__everything__echo").is_some());
//! # Ok(())
//! # }
//! ```

mod client;
mod config;
mod error;

pub use client::{
    ClientOptions, McpServer, ServerState, StartedServers, offered_name, start_servers,
};
pub use config::{
    ChannelServer, DEFAULT_STARTUP_TIMEOUT, HttpServer, McpChannel, McpServerConfig, McpTransport,
    StdioServer, parse_mcp_json,
};
pub mod server;
pub use error::McpError;
