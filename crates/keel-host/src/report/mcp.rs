//! The MCP servers of a session, as lines: each started one (connected or not, where it comes
//! from, its tools and warnings), then each that did not start (`keel mcp list`, `/mcp`).

use keel::mcp::{McpServer, McpServerConfig, McpTransport, ServerState};
use keel_config::Settings;

use crate::render::printable;

/// What `keel mcp list` and `/mcp` say when no server is configured.
pub const NONE: &str = "no MCP servers: add [mcp_servers.NAME] to ~/.keel/config.toml, a \
                               .mcp.json to a trusted project, or pass --mcp-config FILE";

/// `/mcp` in a session: each started server with its tools, then each that did not start;
/// [`NONE`] when there are none.
pub fn session_lines(setup: &Settings) -> Vec<String> {
    let mut lines: Vec<String> = setup
        .mcp_servers
        .iter()
        .flat_map(|server| server_lines(server, true))
        .collect();
    lines.extend(setup.mcp_failed.iter().map(ToString::to_string));
    if lines.is_empty() {
        lines.push(NONE.to_owned());
    }
    lines
}

/// One server's line (and, with `tools`, one line per tool under it).
pub fn server_lines(server: &McpServer, tools: bool) -> Vec<String> {
    let mut names = server.tool_names();
    names.sort();
    let state = match server.state() {
        ServerState::Connected => "connected".to_owned(),
        ServerState::Stopped(why) => format!("stopped ({why}; started again at its next call)"),
        _ => "unknown".to_owned(),
    };
    let count = match names.len() {
        1 => "1 tool".to_owned(),
        n => format!("{n} tools"),
    };
    let mut lines = vec![printable(&format!(
        "{}  {state}  {count}  {}",
        server.name(),
        source(server.config())
    ))];
    if tools {
        lines.extend(names.iter().map(|name| printable(&format!("  {name}"))));
    }
    lines.extend(
        server
            .warnings()
            .iter()
            .map(|w| printable(&format!("  {w}"))),
    );
    lines
}

/// A failed server's line.
pub fn failed_line(config: &McpServerConfig, reason: &str) -> String {
    printable(&format!(
        "{}  failed  {}  {}",
        config.name(),
        source(config),
        reason
    ))
}

/// How the server is reached: `stdio: npx -y server` or `http: https://…/mcp`.
fn source(config: &McpServerConfig) -> String {
    match &config.transport {
        McpTransport::Stdio(stdio) => {
            let mut line = format!("stdio: {}", stdio.command);
            for arg in &stdio.args {
                line.push(' ');
                line.push_str(arg);
            }
            line
        }
        McpTransport::Http(http) => format!("http: {}", http.url),
        _ => "unknown transport".to_owned(),
    }
}
