//! What keel adds to an MCP tool call, and to a session's start with MCP servers.
//!
//! `cargo bench -p keel-mcp --bench client_call` (needs `.ci/peers`):
//! - `call/raw_rmcp_echo`: server-everything's `echo` called with the bare rmcp client over
//!   stdio: the server's own time plus the SDK's, the floor.
//! - `call/keel_dispatch_echo`: the same call as the model's tool call through keel
//!   (`ToolRegistry::dispatch` → the server's `ToolSource` → `McpTool`): the difference is
//!   keel's overhead (target ≤ 1 ms).
//! - `start/1_server`, `start/3_servers`: `start_servers` of one and of three
//!   server-everything processes (spawn, handshake, `tools/list`); three start in parallel.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_mcp::{
    ClientOptions, McpServer, McpServerConfig, McpTransport, StdioServer, start_servers,
};
use keel_provider::{ToolCall, ToolInput};
use keel_tool::{ToolContext, ToolRegistry};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

fn config(name: &str, script: &std::path::Path) -> McpServerConfig {
    McpServerConfig::new(
        name,
        McpTransport::Stdio(StdioServer {
            command: "node".into(),
            args: vec![script.display().to_string(), "stdio".into()],
            env: BTreeMap::new(),
            env_vars: Vec::new(),
            cwd: None,
        }),
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let Some(script) = keel_test_support::peers::mcp_server("server-everything") else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let options = ClientOptions::new(std::env::temp_dir());

    let mut group = c.benchmark_group("call");
    // The floor: rmcp alone.
    let raw = runtime.block_on(async {
        let mut child = tokio::process::Command::new("node")
            .arg(&script)
            .arg("stdio")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let service = ().serve(io).await.unwrap();
        (service, child)
    });
    let arguments = json!({"message": "hello"}).as_object().unwrap().clone();
    group.bench_function("raw_rmcp_echo", |b| {
        b.iter(|| {
            runtime.block_on(async {
                raw.0
                    .peer()
                    .call_tool(CallToolRequestParams::new("echo").with_arguments(arguments.clone()))
                    .await
                    .unwrap()
            })
        })
    });
    let server = runtime
        .block_on(McpServer::connect(
            config("everything", &script),
            options.clone(),
        ))
        .unwrap();
    let mut registry = ToolRegistry::new();
    registry.add_source(Arc::new(server));
    let ctx = ToolContext::new(".", "bench");
    let input = json!({"message": "hello"});
    group.bench_function("keel_dispatch_echo", |b| {
        b.iter(|| {
            let call = ToolCall {
                id: "toolu_bench",
                name: "mcp__everything__echo",
                input: ToolInput::Valid(&input),
            };
            let output = runtime.block_on(registry.dispatch(call, &ctx));
            assert_eq!(output.content, "Echo: hello");
        })
    });
    group.finish();

    let mut group = c.benchmark_group("start");
    group.sample_size(10);
    for n in [1, 3] {
        group.bench_function(
            format!("{n}_server{}", if n == 1 { "" } else { "s" }),
            |b| {
                b.iter(|| {
                    let configs = (0..n).map(|i| config(&format!("s{i}"), &script)).collect();
                    let started = runtime.block_on(start_servers(configs, &options));
                    assert_eq!(started.servers.len(), n);
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
