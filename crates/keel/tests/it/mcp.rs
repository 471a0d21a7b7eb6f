//! A host hands the builder connected MCP servers: their tools are offered to the model beside
//! keel's and called through the agent's gate like any other.

#![cfg(feature = "mcp")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use keel::mcp::{ClientOptions, McpServer, McpServerConfig, McpTransport, StdioServer};
use keel::prelude::*;
use keel_provider::ContentBlock;
use keel_test_support::git::TempRepo;
use keel_test_support::peers;
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

/// The reference `everything` server, connected in `repo`; `None` when it is not installed.
async fn everything(repo: &TempRepo) -> Option<McpServer> {
    let script = peers::mcp_server("server-everything")?;
    let config = McpServerConfig::new(
        "everything",
        McpTransport::Stdio(StdioServer {
            command: "node".into(),
            args: vec![script.display().to_string(), "stdio".into()],
            env: BTreeMap::new(),
            env_vars: Vec::new(),
            cwd: None,
        }),
    )
    .unwrap();
    Some(
        McpServer::connect(config, ClientOptions::new(repo.path()))
            .await
            .unwrap(),
    )
}

#[tokio::test]
async fn an_mcp_server_s_tools_are_the_agent_s() {
    let repo = TempRepo::new();
    let Some(server) = everything(&repo).await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "mcp__everything__get-sum", json!({"a": 40, "b": 2}))
            .then_text("42"),
    );
    let agent = CodingAgent::builder(provider.clone())
        .cwd(repo.path())
        .home(home.path())
        .mcp_servers([server])
        .build()
        .unwrap();
    let mut session = agent.session().unwrap();
    let outcome = session.run("add").await;
    assert_eq!(outcome.text, "42");
    let requests = provider.requests();
    let tools: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(tools.contains(&"mcp__everything__get-sum"), "{tools:?}");
    assert!(tools.contains(&"read_file"), "{tools:?}");
    let result = requests[1]
        .messages
        .iter()
        .flat_map(|m| m.content.iter())
        .find_map(|b| match b {
            ContentBlock::ToolResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .unwrap();
    assert!(!result.1 && result.0.contains("42"), "{result:?}");
}

#[tokio::test]
async fn the_lean_tool_profile_keeps_the_servers_tools() {
    let repo = TempRepo::new();
    let Some(server) = everything(&repo).await else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let provider = Arc::new(ScriptedProvider::new().then_text("ok"));
    let agent = CodingAgent::builder(provider.clone())
        .cwd(repo.path())
        .home(home.path())
        .tool_profile(keel::ToolProfile::Lean)
        .mcp_servers([server])
        .build()
        .unwrap();
    agent.session().unwrap().run("add").await;
    let requests = provider.requests();
    let tools: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(tools.contains(&"mcp__everything__get-sum"), "{tools:?}");
    assert!(!tools.contains(&"spawn_agent"), "{tools:?}");
}
