//! `keel mcp list [--tools]`: the configured MCP servers, whether each is connected (or why
//! not) and its tools (the lines are keel-host's [`keel_host::report::mcp`]).

use keel::mcp::McpError;
use keel_config::{SessionChoice, Surface};
use keel_host::report::mcp::{NONE, failed_line, server_lines};

use crate::cli::{McpAction, Options};
use crate::error::CliError;
use crate::print::{print_line, progress};

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
            let mut setup = options.settings(Surface::Listing, &SessionChoice::New)?;
            let mut notices = std::mem::take(&mut setup.notices);
            setup.mcp = keel_config::mcp_configs(
                &setup.config,
                &options.overrides(),
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
