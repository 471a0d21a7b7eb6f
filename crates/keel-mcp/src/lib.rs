//! # keel-mcp
//!
//! The Model Context Protocol both ways, on the official Rust SDK (`rmcp`).
//!
//! Work in progress: see issue \[mcp\].
//!
//! The server side, [`server`]: any [`keel_tool::ToolRegistry`] served to MCP hosts over
//! stdio or streamable HTTP (behind a bearer token), with the request's cancellation and
//! progress passed to the tools, the directories calls work in confined to the server's
//! roots narrowed by the client's, logging messages to the clients, and elicitation for the
//! host application to ask the client's user. `keel mcp-server` is this with keel's `code`
//! and task tools.

mod error;

pub mod server;

pub use error::McpError;
