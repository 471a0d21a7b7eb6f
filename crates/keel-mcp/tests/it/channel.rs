//! A server the host reaches itself (`McpTransport::Channel`): keel's client speaks MCP
//! through the host's channel, one JSON-RPC message at a time, and offers its tools like any
//! other server's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use keel_mcp::{
    ChannelServer, ClientOptions, McpChannel, McpServer, McpServerConfig, McpTransport,
};
use keel_tool::{ToolCall, ToolContext, ToolInput, ToolRegistry};
use serde_json::{Value, json};

/// A server living in the test: answers the handshake, lists `add`, and adds; refuses to
/// carry calls of `broken`. It records the methods it was sent.
#[derive(Default)]
struct InProcess {
    methods: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl McpChannel for InProcess {
    async fn exchange(&self, message: Value) -> Result<Option<Value>, String> {
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        self.methods.lock().unwrap().push(method.clone());
        let Some(id) = message.get("id").cloned() else {
            return Ok(None);
        };
        let result = match method.as_str() {
            "initialize" => json!({
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "in-process", "version": "1.0.0"},
            }),
            "tools/list" => json!({"tools": [
                {"name": "add", "description": "Adds two numbers.",
                 "inputSchema": {"type": "object",
                                 "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                                 "required": ["a", "b"]}},
                {"name": "broken", "description": "Cannot be reached.",
                 "inputSchema": {"type": "object", "properties": {}}},
            ]}),
            "tools/call" if message["params"]["name"] == "add" => {
                let args = &message["params"]["arguments"];
                let sum = args["a"].as_f64().unwrap() + args["b"].as_f64().unwrap();
                json!({"content": [{"type": "text", "text": format!("{sum}")}]})
            }
            "tools/call" => return Err("the host could not reach the server".to_owned()),
            other => return Err(format!("unexpected {other}")),
        };
        Ok(Some(json!({"jsonrpc": "2.0", "id": id, "result": result})))
    }
}

async fn call(registry: &ToolRegistry, name: &str, input: Value) -> keel_tool::ToolOutput {
    let call = ToolCall {
        id: "call_1",
        name,
        input: ToolInput::Valid(&input),
    };
    registry
        .dispatch(call, &ToolContext::new(".", "test"))
        .await
}

#[tokio::test]
async fn a_server_behind_the_host_s_channel_offers_its_tools_and_answers_calls() {
    let channel = Arc::new(InProcess::default());
    let config = McpServerConfig::new(
        "vault",
        McpTransport::Channel(ChannelServer {
            channel: channel.clone(),
        }),
    )
    .unwrap();
    let server = McpServer::connect(config, ClientOptions::new(std::env::temp_dir()))
        .await
        .unwrap();
    let mut registry = ToolRegistry::new();
    registry.add_source(Arc::new(server.clone()));
    let names: Vec<String> = registry.definitions().into_iter().map(|d| d.name).collect();
    assert_eq!(names, ["mcp__vault__add", "mcp__vault__broken"]);
    let output = call(&registry, "mcp__vault__add", json!({"a": 2, "b": 3})).await;
    assert!(!output.is_error, "{}", output.content);
    assert_eq!(output.content, "5");
    // A message the host cannot carry is the call's error, not a hang.
    let output = call(&registry, "mcp__vault__broken", json!({})).await;
    assert!(output.is_error);
    assert!(
        output
            .content
            .contains("the host could not reach the server"),
        "{}",
        output.content
    );
    let methods = channel.methods.lock().unwrap().clone();
    assert_eq!(
        &methods[..3],
        ["initialize", "notifications/initialized", "tools/list"]
    );
}
