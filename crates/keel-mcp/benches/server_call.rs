//! What serving a tool over MCP adds to one call: a trivial tool (`echo`) called directly
//! through the registry's dispatch, and through a [`ToolServer`] from rmcp's client over an
//! in-memory byte stream (newline-delimited JSON-RPC both ways, as on stdio: the request
//! and the result serialized, framed, parsed and routed on each side). The difference is
//! the overhead of one MCP tool call beyond the tool's own time.
//!
//! `cargo bench -p keel-mcp --bench server_call`

// A benchmark stops on any failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_mcp::server::ToolServer;
use keel_tool::{
    Effect, Tool, ToolCall, ToolContext, ToolError, ToolInput, ToolOutput, ToolRegistry,
};
use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    /// What to say back.
    text: String,
}

struct Echo;

impl Tool for Echo {
    type Args = EchoArgs;
    const NAME: &'static str = "echo";
    fn description(&self) -> &str {
        "Says the text back."
    }
    fn effect(&self, _args: &EchoArgs) -> Effect {
        Effect::ReadOnly
    }
    async fn call(&self, args: EchoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(args.text))
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let registry = ToolRegistry::new().with(Echo).unwrap();
    let input = json!({"text": "hello"});

    let ctx = ToolContext::new(dir.path(), "bench");
    c.bench_function("echo: registry dispatch", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let call = ToolCall {
                    id: "c1",
                    name: "echo",
                    input: ToolInput::Valid(&input),
                };
                black_box(registry.dispatch(call, &ctx).await)
            })
        });
    });

    let server = ToolServer::builder(registry.clone(), dir.path())
        .build()
        .unwrap();
    let client = runtime.block_on(async {
        let (server_side, client_side) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_side);
        tokio::spawn(async move { server.serve(read, write).await });
        let (read, write) = tokio::io::split(client_side);
        ().serve((read, write)).await.unwrap()
    });
    let arguments = input.as_object().unwrap().clone();
    c.bench_function("echo: MCP tools/call over a byte stream", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let params = CallToolRequestParams::new("echo").with_arguments(arguments.clone());
                black_box(client.call_tool(params).await.unwrap())
            })
        });
    });
    runtime.block_on(async { client.cancel().await.unwrap() });

    // The server alone: a client that writes the request line and reads the response line.
    let server = ToolServer::builder(registry, dir.path()).build().unwrap();
    let (mut lines, mut writer) = runtime.block_on(async {
        let (server_side, client_side) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server_side);
        tokio::spawn(async move { server.serve(read, write).await });
        let (read, mut writer) = tokio::io::split(client_side);
        let mut lines = BufReader::new(read).lines();
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"}}});
        writer
            .write_all(format!("{initialize}\n").as_bytes())
            .await
            .unwrap();
        lines.next_line().await.unwrap().unwrap();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        writer
            .write_all(format!("{initialized}\n").as_bytes())
            .await
            .unwrap();
        (lines, writer)
    });
    let mut id = 0u64;
    c.bench_function(
        "echo: tools/call line in, result line out (server alone)",
        |b| {
            b.iter(|| {
                runtime.block_on(async {
                    id += 1;
                    let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "hello"}}});
                    writer
                        .write_all(format!("{request}\n").as_bytes())
                        .await
                        .unwrap();
                    black_box(lines.next_line().await.unwrap().unwrap())
                })
            });
        },
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
