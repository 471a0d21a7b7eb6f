//! # keel-mcp
//!
//! The Model Context Protocol both ways, on the official Rust SDK (`rmcp`).
//!
//! Work in progress: see issue [mcp].

mod error;

pub use error::McpError;
