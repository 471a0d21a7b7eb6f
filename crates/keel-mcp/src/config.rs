//! What an MCP server is and how to reach it: [`McpServerConfig`], built by hand, from keel's
//! TOML (the CLI maps `[mcp_servers.NAME]`), or from a Claude Code `.mcp.json`
//! ([`parse_mcp_json`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::McpError;

/// How long a server may take to start and answer the handshake and `tools/list`
/// (Codex's default).
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest server name: `mcp__<server>__<tool>` must fit in a tool name's 64 characters.
const MAX_SERVER_NAME: usize = 40;

/// One MCP server: its name (the `<server>` of `mcp__<server>__<tool>`), how to reach it,
/// and its time limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServerConfig {
    name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// How long starting (spawn or connect, handshake, `tools/list`) may take.
    pub startup_timeout: Duration,
    /// How long one tool call may take; `None` for the tool registry's default.
    pub tool_timeout: Option<Duration>,
}

impl McpServerConfig {
    /// A server called `name` (letters, digits, `-` and `_`; at most 40 characters, so that
    /// its tools' names fit), reached through `transport`, with the default time limits.
    pub fn new(name: impl Into<String>, transport: McpTransport) -> Result<Self, McpError> {
        let name = name.into();
        Self::check_name(&name)?;
        Ok(Self {
            name,
            transport,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: None,
        })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether `name` may name a server (what [`new`](Self::new) checks), for a host that
    /// checks a configuration before it builds one.
    pub fn check_name(name: &str) -> Result<(), McpError> {
        // No `__`: `mcp__a__b__c` must say which server it is (a rule for server `a` must not
        // cover a server `a__b`).
        let valid = !name.is_empty()
            && name.len() <= MAX_SERVER_NAME
            && !name.contains("__")
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if valid {
            Ok(())
        } else {
            Err(McpError::Config {
                server: name.to_owned(),
                reason: format!(
                    "the name must be 1 to {MAX_SERVER_NAME} letters, digits, '-' or '_', without \
                     \"__\" (its tools are offered as mcp__<name>__<tool>)"
                ),
            })
        }
    }
}

/// How to reach an MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A program keel starts, spoken to over its stdin and stdout.
    Stdio(StdioServer),
    /// A server at a URL, spoken to over streamable HTTP.
    Http(HttpServer),
    /// A server the host reaches itself (one living in the host's own process, like the
    /// Claude Agent SDKs' in-process servers): keel hands it each JSON-RPC message.
    Channel(ChannelServer),
}

/// The way to a server the host reaches itself: each JSON-RPC message keel sends goes
/// through [`McpChannel::exchange`], whose reply (to a request) comes back as the server's.
#[derive(Clone)]
pub struct ChannelServer {
    /// The channel.
    pub channel: std::sync::Arc<dyn McpChannel>,
}

impl std::fmt::Debug for ChannelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelServer").finish_non_exhaustive()
    }
}

impl PartialEq for ChannelServer {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.channel, &other.channel)
    }
}

impl Eq for ChannelServer {}

/// Carries keel's JSON-RPC messages to a server the host reaches itself, and its replies back.
#[async_trait::async_trait]
pub trait McpChannel: Send + Sync {
    /// Sends `message` (a request or a notification) to the server; for a request, the
    /// server's response. An `Err` is a one-line reason the message could not be carried.
    async fn exchange(
        &self,
        message: serde_json::Value,
    ) -> Result<Option<serde_json::Value>, String>;
}

/// A server keel starts as one of the user's own programs. Its environment is keel's with
/// every credential and session socket removed (as for commands), plus `env` and the
/// variables `env_vars` names, which the configuration passes on purpose.
#[derive(Clone, PartialEq, Eq)]
pub struct StdioServer {
    /// The program (looked up on `PATH` when it has no `/`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it.
    pub env: BTreeMap<String, String>,
    /// Variables of keel's environment passed on by name, credentials included (Codex's
    /// `env_vars`).
    pub env_vars: Vec<String>,
    /// Where it runs (default: the session's working directory).
    pub cwd: Option<PathBuf>,
}

impl std::fmt::Debug for StdioServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioServer")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("env_vars", &self.env_vars)
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// A server reached over streamable HTTP. Header values are secrets as far as keel is
/// concerned: never logged, never in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpServer {
    /// The endpoint, `http://` or `https://`.
    pub url: String,
    /// Headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// A bearer token, sent as `Authorization: Bearer <token>` (from the variable the
    /// configuration names, read when the server is configured).
    pub bearer_token: Option<String>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

/// Parses a Claude Code `.mcp.json` (`{"mcpServers": {"NAME": {"command", "args", "env"} |
/// {"type": "http", "url", "headers"}}}`), expanding `${VAR}` and `${VAR:-default}` in
/// commands, arguments, environment values, URLs and headers through `lookup`, as Claude
/// Code does. `origin` names the file in errors. Servers of other types (`sse`, `sdk`) are
/// an error naming them.
pub fn parse_mcp_json(
    text: &str,
    origin: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<McpServerConfig>, McpError> {
    let file_error = |reason: String| McpError::Config {
        server: format!("(in {origin})"),
        reason,
    };
    let root: Value =
        serde_json::from_str(text).map_err(|err| file_error(format!("not valid JSON: {err}")))?;
    let Some(servers) = root.get("mcpServers") else {
        return Ok(Vec::new());
    };
    let Some(servers) = servers.as_object() else {
        return Err(file_error("\"mcpServers\" must be an object".to_owned()));
    };
    let mut configs = Vec::new();
    for (name, entry) in servers {
        let error = |reason: String| McpError::Config {
            server: name.clone(),
            reason: format!("{reason} (in {origin})"),
        };
        let Some(entry) = entry.as_object() else {
            return Err(error("each server must be an object".to_owned()));
        };
        let text = |key: &str| -> Result<Option<String>, McpError> {
            match entry.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(value)) => expand(value, lookup).map(Some).map_err(error),
                Some(_) => Err(error(format!("\"{key}\" must be a string"))),
            }
        };
        let map = |key: &str| -> Result<BTreeMap<String, String>, McpError> {
            let mut out = BTreeMap::new();
            match entry.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Object(pairs)) => {
                    for (k, v) in pairs {
                        let Some(v) = v.as_str() else {
                            return Err(error(format!("\"{key}.{k}\" must be a string")));
                        };
                        out.insert(k.clone(), expand(v, lookup).map_err(error)?);
                    }
                }
                Some(_) => return Err(error(format!("\"{key}\" must be an object of strings"))),
            }
            Ok(out)
        };
        let kind = text("type")?;
        let transport = match kind.as_deref() {
            None | Some("stdio") => {
                let Some(command) = text("command")? else {
                    return Err(error(
                        "a stdio server needs \"command\" (or \"type\": \"http\" with \"url\")"
                            .to_owned(),
                    ));
                };
                let args = match entry.get("args") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items
                        .iter()
                        .map(|item| match item.as_str() {
                            Some(arg) => expand(arg, lookup).map_err(error),
                            None => Err(error("\"args\" must be a list of strings".to_owned())),
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err(error("\"args\" must be a list of strings".to_owned())),
                };
                McpTransport::Stdio(StdioServer {
                    command,
                    args,
                    env: map("env")?,
                    env_vars: Vec::new(),
                    cwd: None,
                })
            }
            Some("http" | "streamable-http" | "streamableHttp") => {
                let Some(url) = text("url")? else {
                    return Err(error("an http server needs \"url\"".to_owned()));
                };
                McpTransport::Http(HttpServer {
                    url,
                    headers: map("headers")?,
                    bearer_token: None,
                })
            }
            Some(other) => {
                return Err(error(format!(
                    "server type \"{other}\" is not supported (use \"stdio\" or \"http\")"
                )));
            }
        };
        configs.push(McpServerConfig::new(name.clone(), transport)?);
    }
    Ok(configs)
}

/// `${VAR}` and `${VAR:-default}` replaced through `lookup`; a variable that is not set and
/// has no default is an error naming it.
fn expand(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("unclosed \"${{\" in {text:?}"));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (lookup(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "the environment variable {name} is not set (used as ${{{name}}}); set it \
                     or give a default as ${{{name}:-value}}"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn vars(name: &str) -> Option<String> {
        (name == "HOME_DIR").then(|| "/home/u".to_owned())
    }

    #[test]
    fn variables_expand_with_defaults_and_unset_ones_are_named() {
        assert_eq!(expand("${HOME_DIR}/x", &vars).unwrap(), "/home/u/x");
        assert_eq!(expand("${NOPE:-d}", &vars).unwrap(), "d");
        assert_eq!(expand("plain $ and }", &vars).unwrap(), "plain $ and }");
        let err = expand("a ${NOPE} b", &vars).unwrap_err();
        assert!(err.contains("NOPE is not set"), "{err}");
        assert!(expand("${OPEN", &vars).unwrap_err().contains("unclosed"));
    }

    #[test]
    fn claude_code_s_mcp_json_is_read_with_its_variables() {
        let text = r#"{"mcpServers": {
            "local": {"command": "${HOME_DIR}/bin/srv", "args": ["--root", "${NOPE:-.}"],
                      "env": {"TOKEN": "${HOME_DIR}"}},
            "remote": {"type": "http", "url": "https://x/mcp",
                       "headers": {"Authorization": "Bearer ${HOME_DIR}"}}
        }}"#;
        let servers = parse_mcp_json(text, ".mcp.json", &vars).unwrap();
        assert_eq!(servers.len(), 2);
        let McpTransport::Stdio(local) = &servers[0].transport else {
            panic!("{servers:?}")
        };
        assert_eq!(local.command, "/home/u/bin/srv");
        assert_eq!(local.args, ["--root", "."]);
        assert_eq!(local.env["TOKEN"], "/home/u");
        let McpTransport::Http(remote) = &servers[1].transport else {
            panic!("{servers:?}")
        };
        assert_eq!(remote.headers["Authorization"], "Bearer /home/u");
        assert!(!format!("{remote:?}").contains("/home/u"));
        for (bad, says) in [
            ("[1]", "\"mcpServers\""),
            (r#"{"mcpServers": []}"#, "must be an object"),
            (
                r#"{"mcpServers": {"a": {"args": []}}}"#,
                "needs \"command\"",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "http"}}}"#,
                "needs \"url\"",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "sdk", "name": "a"}}}"#,
                "\"sdk\" is not supported",
            ),
            (
                r#"{"mcpServers": {"a": {"command": 3}}}"#,
                "must be a string",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "args": [1]}}}"#,
                "list of strings",
            ),
            ("{", "not valid JSON"),
        ] {
            match parse_mcp_json(bad, ".mcp.json", &vars) {
                Ok(servers) if bad == "[1]" => assert!(servers.is_empty()),
                Ok(servers) => panic!("{bad}: {servers:?}"),
                Err(err) => assert!(err.to_string().contains(says), "{bad}: {err}"),
            }
        }
    }

    #[test]
    fn server_names_are_checked() {
        let stdio = || {
            McpTransport::Stdio(StdioServer {
                command: "x".into(),
                args: vec![],
                env: BTreeMap::new(),
                env_vars: vec![],
                cwd: None,
            })
        };
        assert!(McpServerConfig::new("github", stdio()).is_ok());
        assert!(McpServerConfig::new("my-server_2", stdio()).is_ok());
        for bad in ["", "a b", "a.b", "ä", "a__b", &"x".repeat(41)] {
            assert!(McpServerConfig::new(bad, stdio()).is_err(), "{bad:?}");
        }
    }
}
