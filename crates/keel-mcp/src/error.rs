//! What can go wrong connecting to, or serving, an MCP peer.

/// An MCP server could not be started, connected or served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A server's configuration is unusable (no command or URL, a bad header, a missing
    /// variable it names).
    #[error("MCP server {server}: {reason}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A server did not start or did not complete the MCP handshake.
    #[error("MCP server {server} did not start: {reason}")]
    Start {
        /// The server's name.
        server: String,
        /// Why.
        reason: String,
    },
    /// A request to a running server failed.
    #[error("MCP server {server}: {reason}")]
    Request {
        /// The server's name.
        server: String,
        /// Why.
        reason: String,
    },
    /// Serving keel's tools to an MCP host failed.
    #[error("MCP server: {0}")]
    Serve(String),
}
