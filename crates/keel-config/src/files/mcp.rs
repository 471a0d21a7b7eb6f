//! MCP servers in the configuration: `[mcp_servers.NAME]` tables in keel's TOML (Codex's
//! shape), the project's `.mcp.json` and `--mcp-config` files or inline JSON (Claude Code's
//! shape), turned into [`McpServerConfig`]s.
//!
//! A project's servers (its `.mcp.json`, its `[mcp_servers]`) start programs or send its
//! headers, so they apply only when the user trusts the project; otherwise they are named in
//! the project's one-line notice and left out.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use keel::mcp::{HttpServer, McpServerConfig, McpTransport, StdioServer};
use serde::Deserialize;

/// A `[mcp_servers.NAME]` table: a program (`command`, `args`, `env`, `env_vars`, `cwd`) or
/// a streamable HTTP endpoint (`url`, `headers`/`http_headers`, `env_http_headers`,
/// `bearer_token_env_var`), with its time limits.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerToml {
    /// The program to start.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set for it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of keel's environment passed to it by name.
    #[serde(default)]
    pub env_vars: Vec<String>,
    /// Where it runs (absolute, or `~/`).
    pub cwd: Option<String>,
    /// A streamable HTTP endpoint.
    pub url: Option<String>,
    /// Headers sent to it.
    #[serde(default, alias = "http_headers")]
    pub headers: BTreeMap<String, String>,
    /// Headers whose values come from environment variables: header name → variable name.
    #[serde(default)]
    pub env_http_headers: BTreeMap<String, String>,
    /// The variable holding a bearer token for it.
    pub bearer_token_env_var: Option<String>,
    /// Seconds it may take to start (default 10).
    pub startup_timeout_sec: Option<f64>,
    /// Seconds one of its tool calls may take (default: keel's tool timeout).
    pub tool_timeout_sec: Option<f64>,
    /// `false` leaves it out.
    pub enabled: Option<bool>,
}

impl McpServerToml {
    /// Checks what serde cannot: one of `command` and `url`, usable timeouts, a valid name.
    pub fn check(&self, name: &str) -> Result<(), String> {
        let key = format!("mcp_servers.{name}");
        match (&self.command, &self.url) {
            (None, None) => {
                return Err(format!(
                    "`{key}` needs `command` (a program keel starts) or `url` (a streamable \
                     HTTP server)"
                ));
            }
            (Some(_), Some(_)) => {
                return Err(format!("`{key}` has both `command` and `url`: keep one"));
            }
            (Some(command), None) if command.trim().is_empty() => {
                return Err(format!("`{key}.command` is empty"));
            }
            (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                return Err(format!("`{key}.url` must start with http:// or https://"));
            }
            _ => {}
        }
        for (field, value) in [
            ("startup_timeout_sec", self.startup_timeout_sec),
            ("tool_timeout_sec", self.tool_timeout_sec),
        ] {
            if let Some(value) = value
                && !(value.is_finite() && value > 0.0 && value <= 86_400.0)
            {
                return Err(format!(
                    "`{key}.{field}` must be a number of seconds above 0 (at most a day)"
                ));
            }
        }
        if let Some(cwd) = &self.cwd
            && !(cwd.starts_with('/') || cwd.starts_with("~/"))
        {
            return Err(format!("`{key}.cwd` must be absolute (/path or ~/path)"));
        }
        McpServerConfig::check_name(name).map_err(|err| format!("`{key}`: {err}"))
    }

    /// The commands it would run, for the project's trust hash and protected scripts.
    pub fn command_line(&self) -> Option<String> {
        let command = self.command.as_ref()?;
        let mut line = command.clone();
        for arg in &self.args {
            line.push(' ');
            line.push_str(arg);
        }
        Some(line)
    }

    /// The server's configuration, reading the variables it names through `lookup`.
    pub fn to_config(
        &self,
        name: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<McpServerConfig>, String> {
        if self.enabled == Some(false) {
            return Ok(None);
        }
        let key = format!("mcp_servers.{name}");
        let transport = if let Some(command) = &self.command {
            McpTransport::Stdio(StdioServer {
                command: command.clone(),
                args: self.args.clone(),
                env: self.env.clone(),
                env_vars: self.env_vars.clone(),
                cwd: self.cwd.as_deref().map(home_path),
            })
        } else {
            let mut headers = self.headers.clone();
            for (header, variable) in &self.env_http_headers {
                let value = lookup(variable).ok_or_else(|| {
                    format!("`{key}.env_http_headers.{header}`: the variable {variable} is not set")
                })?;
                headers.insert(header.clone(), value);
            }
            let bearer_token = match &self.bearer_token_env_var {
                Some(variable) => Some(lookup(variable).ok_or_else(|| {
                    format!("`{key}.bearer_token_env_var`: the variable {variable} is not set")
                })?),
                None => None,
            };
            McpTransport::Http(HttpServer {
                url: self.url.clone().unwrap_or_default(),
                headers,
                bearer_token,
            })
        };
        let mut config =
            McpServerConfig::new(name, transport).map_err(|err| format!("`{key}`: {err}"))?;
        if let Some(secs) = self.startup_timeout_sec {
            config.startup_timeout = Duration::from_secs_f64(secs);
        }
        config.tool_timeout = self.tool_timeout_sec.map(Duration::from_secs_f64);
        Ok(Some(config))
    }
}

/// `~/x` under the home directory; anything else as written.
fn home_path(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// The project's `.mcp.json` in `dir`, if there is one.
pub fn project_mcp_json(dir: &Path) -> Option<PathBuf> {
    let path = dir.join(".mcp.json");
    path.is_file().then_some(path)
}

/// The command lines of the servers in a `.mcp.json` (for the trust hash): best effort, never
/// an error.
pub fn commands_in_mcp_json(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    let Some(servers) = value
        .get("mcpServers")
        .and_then(serde_json::Value::as_object)
    else {
        return Vec::new();
    };
    servers
        .values()
        .filter_map(|server| {
            let command = server.get("command")?.as_str()?;
            let args = server
                .get("args")
                .and_then(serde_json::Value::as_array)
                .map(|args| {
                    args.iter()
                        .filter_map(serde_json::Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            Some(format!("{command} {args}").trim_end().to_owned())
        })
        .collect()
}

/// The servers of a Claude Code `.mcp.json` file or of inline JSON (`--mcp-config` takes
/// either, as `claude` does); errors are one line naming the file.
pub fn read_claude_json(
    given: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<McpServerConfig>, String> {
    let trimmed = given.trim_start();
    let (text, origin) = if trimmed.starts_with('{') {
        (given.to_owned(), "--mcp-config".to_owned())
    } else {
        let text = std::fs::read_to_string(given)
            .map_err(|err| format!("--mcp-config {given}: cannot read it: {err}"))?;
        (text, given.to_owned())
    };
    keel::mcp::parse_mcp_json(&text, &origin, lookup).map_err(|err| err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> McpServerToml {
        toml::from_str(text).unwrap()
    }

    fn vars(name: &str) -> Option<String> {
        match name {
            "GH_TOKEN" => Some("ghp_secret".into()),
            "TEAM" => Some("core".into()),
            _ => None,
        }
    }

    #[test]
    fn a_program_and_an_endpoint_become_configurations() {
        let program = table(
            "command = \"npx\"\nargs = [\"-y\", \"server\"]\nenv = { A = \"1\" }\n\
             env_vars = [\"GH_TOKEN\"]\nstartup_timeout_sec = 2.5\ntool_timeout_sec = 30",
        );
        program.check("github").unwrap();
        let config = program.to_config("github", &vars).unwrap().unwrap();
        assert_eq!(config.name(), "github");
        assert_eq!(config.startup_timeout, Duration::from_millis(2500));
        assert_eq!(config.tool_timeout, Some(Duration::from_secs(30)));
        let McpTransport::Stdio(stdio) = &config.transport else {
            panic!("{config:?}")
        };
        assert_eq!(stdio.args, ["-y", "server"]);
        assert_eq!(stdio.env_vars, ["GH_TOKEN"]);

        let endpoint = table(
            "url = \"https://mcp.example.com/mcp\"\nhttp_headers = { X-Org = \"keel\" }\n\
             env_http_headers = { X-Team = \"TEAM\" }\nbearer_token_env_var = \"GH_TOKEN\"",
        );
        endpoint.check("remote").unwrap();
        let config = endpoint.to_config("remote", &vars).unwrap().unwrap();
        let McpTransport::Http(http) = &config.transport else {
            panic!("{config:?}")
        };
        assert_eq!(http.headers["X-Org"], "keel");
        assert_eq!(http.headers["X-Team"], "core");
        assert_eq!(http.bearer_token.as_deref(), Some("ghp_secret"));
        assert!(!format!("{config:?}").contains("ghp_secret"));
    }

    #[test]
    fn unusable_tables_are_one_line_naming_the_key() {
        let cases = [
            ("args = []", "needs `command`"),
            (
                "command = \"a\"\nurl = \"http://x\"",
                "both `command` and `url`",
            ),
            ("url = \"ftp://x\"", "must start with http://"),
            (
                "command = \"a\"\nstartup_timeout_sec = 0",
                "startup_timeout_sec",
            ),
            ("command = \"a\"\ncwd = \"rel\"", "must be absolute"),
        ];
        for (text, expected) in cases {
            let err = table(text).check("srv").unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
            assert!(err.contains("mcp_servers.srv"), "{err}");
        }
        assert!(table("command = \"a\"").check("bad name").is_err());
        let missing = table("url = \"http://x\"\nbearer_token_env_var = \"NOPE\"")
            .to_config("srv", &vars)
            .unwrap_err();
        assert!(missing.contains("NOPE is not set"), "{missing}");
        let off = table("command = \"a\"\nenabled = false");
        assert_eq!(off.to_config("srv", &vars).unwrap(), None);
    }
}
