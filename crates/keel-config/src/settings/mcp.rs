//! The MCP servers a session starts: the config's, a trusted project's and `--mcp-config`'s,
//! with a project's server that would pass on a credential left out.

use keel::mcp::{McpServerConfig, McpTransport};

use super::Overrides;
use crate::files::{self, Config};

/// The MCP servers the configuration and `--mcp-config` name, in that order; a later server of
/// the same name replaces an earlier one. One line naming the place of an unusable one. A
/// project's server that would pass on a credential of keel's environment (its value in an
/// argument, a variable or a header, or its name in `env_vars`) is left out, with a line in
/// `notices`: only the user's own config and flags may hand credentials to a program.
pub fn mcp_configs(
    config: &Config,
    overrides: &Overrides,
    hidden: &[String],
    notices: &mut Vec<String>,
) -> Result<Vec<McpServerConfig>, String> {
    let lookup = |name: &str| std::env::var(name).ok();
    let files = || {
        config
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    // Each server with the project file it came from, if it came from the project.
    let mut found: Vec<(McpServerConfig, Option<String>)> = Vec::new();
    for (name, table) in &config.mcp_servers {
        if let Some(server) = table
            .to_config(name, &lookup)
            .map_err(|err| format!("{}: {err}", files()))?
        {
            let origin = config
                .project_mcp_names
                .contains(name)
                .then(|| "the project's .keel/config.toml".to_owned());
            found.push((server, origin));
        }
    }
    if let Some(json) = &config.project_mcp_json {
        let text = std::fs::read_to_string(json)
            .map_err(|err| format!("{}: cannot read it: {err}", json.display()))?;
        let origin = json.display().to_string();
        for server in
            keel::mcp::parse_mcp_json(&text, &origin, &lookup).map_err(|e| e.to_string())?
        {
            found.push((server, Some(origin.clone())));
        }
    }
    for given in &overrides.mcp_config {
        for server in files::mcp::read_claude_json(given, &lookup)? {
            found.push((server, None));
        }
    }
    let mut servers: Vec<McpServerConfig> = Vec::new();
    for (server, origin) in found {
        if let Some(origin) = origin
            && let Some(variable) = passed_credential(&server, hidden)
        {
            notices.push(format!(
                "{origin}: MCP server {} left out: it would pass on {variable} from your \
                 environment; only your own config (or --mcp-config) may give a program \
                 credentials",
                server.name()
            ));
            continue;
        }
        servers.retain(|s| s.name() != server.name());
        servers.push(server);
    }
    Ok(servers)
}

/// The credential-like variable of keel's environment whose value `server`'s configuration
/// holds (or whose name it passes through `env_vars`), if any.
fn passed_credential(server: &McpServerConfig, hidden: &[String]) -> Option<String> {
    let secrets: Vec<(String, String)> = std::env::vars()
        .filter(|(name, value)| value.len() >= 8 && keel::sandbox::is_hidden_var(name, hidden))
        .collect();
    let holds = |text: &str| {
        secrets
            .iter()
            .find(|(_, value)| text.contains(value.as_str()))
            .map(|(name, _)| name.clone())
    };
    match &server.transport {
        McpTransport::Stdio(stdio) => stdio
            .env_vars
            .iter()
            .find(|name| keel::sandbox::is_hidden_var(name.as_str(), hidden))
            .cloned()
            .or_else(|| {
                std::iter::once(&stdio.command)
                    .chain(&stdio.args)
                    .chain(stdio.env.values())
                    .find_map(|text| holds(text))
            }),
        McpTransport::Http(http) => std::iter::once(&http.url)
            .chain(http.headers.values())
            .chain(&http.bearer_token)
            .find_map(|text| holds(text)),
        _ => None,
    }
}
