//! `keel mcp list [--tools]` and the REPL's `/mcp`: the configured MCP servers, whether each
//! is connected (or why not) and its tools.

use keel::mcp::{McpError, McpServer, McpServerConfig, McpTransport, ServerState};

use crate::cli::{McpAction, Options};
use crate::exec::{print_line, progress};
use crate::setup::{CliError, Mode, SessionChoice, Setup};
use crate::terminal::printable;

/// What `keel mcp list` and `/mcp` say when no server is configured.
pub(crate) const NONE: &str = "no MCP servers: add [mcp_servers.NAME] to ~/.keel/config.toml, a \
                               .mcp.json to a trusted project, or pass --mcp-config FILE";

/// `/mcp` in a session: each started server with its tools, then each that did not start;
/// [`NONE`] when there are none.
pub(crate) fn session_lines(setup: &crate::setup::Setup) -> Vec<String> {
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
pub(crate) fn server_lines(server: &McpServer, tools: bool) -> Vec<String> {
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
fn failed_line(config: &McpServerConfig, reason: &str) -> String {
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

/// `keel mcp ...`.
pub(crate) async fn run(action: McpAction, options: &Options) -> Result<u8, CliError> {
    match action {
        McpAction::List { .. } => {
            // `--tools` here asks for each server's tools: it names no tool set.
            let tools = options.tools.is_some();
            let options = &Options {
                tools: None,
                ..options.clone()
            };
            // No provider needed: nothing is asked of a model.
            let mut setup = Setup::resolve(options, Mode::Listing, &SessionChoice::New)?;
            let mut notices = std::mem::take(&mut setup.notices);
            setup.mcp = crate::setup::mcp_configs(
                &setup.config,
                options,
                &setup.policy.hidden_env,
                &mut notices,
            )
            .map_err(CliError::Usage)?;
            for notice in &notices {
                progress(&format!("keel: {notice}"));
            }
            if setup.mcp.is_empty() {
                print_line(NONE);
                return Ok(0);
            }
            let configs = setup.mcp.clone();
            setup.start_mcp_servers().await;
            for config in &configs {
                if let Some(server) = setup.mcp_servers.iter().find(|s| s.name() == config.name()) {
                    for line in server_lines(server, tools) {
                        print_line(&line);
                    }
                } else {
                    let reason = setup
                        .mcp_failed
                        .iter()
                        .find_map(|failure| match failure {
                            McpError::Start { server, reason } if server == config.name() => {
                                Some(reason.as_str())
                            }
                            _ => None,
                        })
                        .unwrap_or("did not start");
                    print_line(&failed_line(config, reason));
                }
            }
            Ok(0)
        }
    }
}
