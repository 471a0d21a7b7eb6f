//! The MCP client against real servers: the reference server-everything (npm) over stdio and
//! streamable HTTP, server-filesystem, a server written with the official Python SDK, and
//! servers that fail at start, hang, or die mid-call.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_mcp::{
    ClientOptions, HttpServer, McpError, McpServer, McpServerConfig, McpTransport, ServerState,
    StdioServer, start_servers,
};
use keel_test_support::peers;
use keel_tool::{Effect, ToolCall, ToolContext, ToolInput, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

fn stdio(command: impl Into<String>, args: &[&str]) -> StdioServer {
    StdioServer {
        command: command.into(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: BTreeMap::new(),
        env_vars: Vec::new(),
        cwd: None,
    }
}

fn config(name: &str, server: StdioServer) -> McpServerConfig {
    McpServerConfig::new(name, McpTransport::Stdio(server)).unwrap()
}

/// server-everything over stdio, if installed.
fn everything() -> Option<McpServerConfig> {
    let script = peers::mcp_server("server-everything")?;
    Some(config(
        "everything",
        stdio("node", &[script.to_str().unwrap(), "stdio"]),
    ))
}

/// The Python test server (`tests/servers/changing.py`), if the SDK is installed; its marks
/// go to `marks`.
fn changing(marks: &Path) -> Option<McpServerConfig> {
    let python = peers::mcp_python()?;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/servers/changing.py");
    let mut server = stdio(python.to_str().unwrap(), &[script.to_str().unwrap()]);
    server
        .env
        .insert("MARKS_DIR".into(), marks.display().to_string());
    Some(config("changing", server))
}

fn options() -> ClientOptions {
    ClientOptions::new(std::env::temp_dir())
}

fn registry_of(server: &McpServer) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.add_source(Arc::new(server.clone()));
    registry
}

async fn call(registry: &ToolRegistry, name: &str, input: Value) -> ToolOutput {
    call_in(registry, name, input, &ToolContext::new(".", "test")).await
}

async fn call_in(
    registry: &ToolRegistry,
    name: &str,
    input: Value,
    ctx: &ToolContext,
) -> ToolOutput {
    let call = ToolCall {
        id: "call_1",
        name,
        input: ToolInput::Valid(&input),
    };
    registry.dispatch(call, ctx).await
}

#[tokio::test]
async fn server_everything_s_tools_are_offered_under_claude_code_s_names() {
    let Some(config) = everything() else { return };
    let server = McpServer::connect(config, options()).await.unwrap();
    assert_eq!(server.state(), ServerState::Connected);
    let registry = registry_of(&server);
    let definitions = registry.definitions();
    let names: Vec<&str> = definitions.iter().map(|d| d.name.as_str()).collect();
    for expected in [
        "mcp__everything__echo",
        "mcp__everything__get-sum",
        "mcp__everything__get-tiny-image",
        "mcp__everything__trigger-long-running-operation",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    // Schemas are normalized like keel's own: no $schema, objects closed.
    let echo = definitions
        .iter()
        .find(|d| d.name == "mcp__everything__echo")
        .unwrap();
    insta::assert_json_snapshot!("everything_echo_definition", echo);
    assert!(
        definitions
            .iter()
            .all(|d| d.input_schema.get("$schema").is_none())
    );
}

#[tokio::test]
async fn calls_return_text_sums_errors_and_structured_content() {
    let Some(config) = everything() else { return };
    let server = McpServer::connect(config, options()).await.unwrap();
    let registry = registry_of(&server);

    let echo = call(&registry, "mcp__everything__echo", json!({"message": "hi"})).await;
    assert!(!echo.is_error, "{echo:?}");
    assert_eq!(echo.content, "Echo: hi");

    let sum = call(
        &registry,
        "mcp__everything__get-sum",
        json!({"a": 2, "b": 3}),
    )
    .await;
    assert!(sum.content.contains('5'), "{sum:?}");

    // A tool that fails: the server's error text, as an error result.
    let failed = call(
        &registry,
        "mcp__everything__get-resource-reference",
        json!({"resourceType": "Text", "resourceId": 0}),
    )
    .await;
    assert!(failed.is_error, "{failed:?}");
    assert!(failed.content.contains("resourceId"), "{failed:?}");

    let structured = call(
        &registry,
        "mcp__everything__get-structured-content",
        json!({"location": "New York"}),
    )
    .await;
    assert!(!structured.is_error, "{structured:?}");
    assert!(
        structured.metadata["structured_content"].is_object(),
        "{structured:?}"
    );

    let links = call(
        &registry,
        "mcp__everything__get-resource-links",
        json!({"count": 2}),
    )
    .await;
    assert!(
        links.content.matches("Resource link: ").count() == 2,
        "{links:?}"
    );
}

#[tokio::test]
async fn an_image_result_is_an_image_beside_the_text() {
    let Some(config) = everything() else { return };
    let server = McpServer::connect(config, options()).await.unwrap();
    let registry = registry_of(&server);
    let output = call(&registry, "mcp__everything__get-tiny-image", json!({})).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(output.images.len(), 1, "{output:?}");
    assert_eq!(output.images[0].media_type(), "image/png");
    // The text blocks around it stay text; no base64 in the text.
    assert!(!output.content.is_empty());
    assert!(
        !output.content.contains(output.images[0].data()),
        "{}",
        output.content
    );
}

#[tokio::test]
async fn effects_follow_the_annotations() {
    let Some(config) = everything() else { return };
    let marks = tempfile::tempdir().unwrap();
    let Some(changing) = changing(marks.path()) else {
        return;
    };
    let started = start_servers(vec![config, changing], &options()).await;
    assert!(started.failures.is_empty(), "{:?}", started.failures);
    let mut registry = ToolRegistry::new();
    for server in &started.servers {
        registry.add_source(Arc::new(server.clone()));
    }
    let effect = |name: &str| {
        let input = json!({});
        registry.effect(ToolCall {
            id: "x",
            name,
            input: ToolInput::Valid(&input),
        })
    };
    assert_eq!(effect("mcp__everything__echo"), Effect::ReadOnly);
    assert!(matches!(
        effect("mcp__changing__wipe"),
        Effect::Destructive { .. }
    ));
    assert_eq!(effect("mcp__changing__pid"), Effect::Mutating);
    // A schema that cannot be made valid (a recursive type needs $ref): left out, with a
    // warning naming it.
    let changing = &started.servers[1];
    assert!(
        !changing
            .tool_names()
            .contains(&"mcp__changing__tree".to_owned())
    );
    let warnings = changing.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("MCP server changing: tool \"tree\" is left out")
            && warnings[0].contains("$ref"),
        "{warnings:?}"
    );
}

#[tokio::test]
async fn progress_notifications_become_progress_lines() {
    let Some(config) = everything() else { return };
    let server = McpServer::connect(config, options()).await.unwrap();
    let registry = registry_of(&server);
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let ctx = ToolContext::new(".", "test").with_progress(sender);
    let output = call_in(
        &registry,
        "mcp__everything__trigger-long-running-operation",
        json!({"duration": 0.4, "steps": 4}),
        &ctx,
    )
    .await;
    assert!(output.content.contains("completed"), "{output:?}");
    let mut lines = Vec::new();
    while let Ok(progress) = receiver.try_recv() {
        assert_eq!(
            progress.tool,
            "mcp__everything__trigger-long-running-operation"
        );
        lines.push(progress.line);
    }
    assert_eq!(lines, ["1/4", "2/4", "3/4", "4/4"]);
}

#[tokio::test]
async fn a_cancelled_call_is_cancelled_on_the_server_and_the_server_goes_on() {
    let marks = tempfile::tempdir().unwrap();
    let Some(config) = changing(marks.path()) else {
        return;
    };
    let server = McpServer::connect(config, options()).await.unwrap();
    let registry = registry_of(&server);
    let cancel = keel_tool::CancellationToken::new();
    let ctx = ToolContext::new(".", "test").with_cancel(cancel.clone());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        cancel.cancel();
    });
    let output = call_in(
        &registry,
        "mcp__changing__slow",
        json!({"seconds": 30}),
        &ctx,
    )
    .await;
    canceller.await.unwrap();
    assert!(
        output.is_error && output.content.contains("interrupted"),
        "{output:?}"
    );
    // The server got notifications/cancelled and stopped the call.
    let cancelled = marks.path().join("cancelled");
    for _ in 0..50 {
        if cancelled.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cancelled.exists(), "the server never saw the cancellation");
    assert!(!marks.path().join("finished").exists());
    let pid = call(&registry, "mcp__changing__pid", json!({})).await;
    assert!(!pid.is_error, "{pid:?}");
}

#[tokio::test]
async fn a_call_over_its_timeout_is_stopped_and_cancelled() {
    let marks = tempfile::tempdir().unwrap();
    let Some(mut config) = changing(marks.path()) else {
        return;
    };
    config.tool_timeout = Some(Duration::from_millis(500));
    let server = McpServer::connect(config, options()).await.unwrap();
    let registry = registry_of(&server);
    let output = call(&registry, "mcp__changing__slow", json!({"seconds": 30})).await;
    assert!(
        output.is_error && output.content.contains("timed out"),
        "{output:?}"
    );
    let cancelled = marks.path().join("cancelled");
    for _ in 0..50 {
        if cancelled.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(cancelled.exists(), "the server never saw the cancellation");
}

#[tokio::test]
async fn a_changed_tool_list_is_offered_before_the_next_request() {
    let marks = tempfile::tempdir().unwrap();
    let Some(config) = changing(marks.path()) else {
        return;
    };
    let server = McpServer::connect(config, options()).await.unwrap();
    let registry = registry_of(&server);
    let names = |registry: &ToolRegistry| -> Vec<String> {
        registry.definitions().into_iter().map(|d| d.name).collect()
    };
    assert!(!names(&registry).contains(&"mcp__changing__grown".to_owned()));
    let grew = call(&registry, "mcp__changing__grow", json!({})).await;
    assert_eq!(grew.content, "grew");
    // The notification came with the call; the engine refreshes before each request.
    registry.refresh_sources().await;
    assert!(
        names(&registry).contains(&"mcp__changing__grown".to_owned()),
        "{:?}",
        names(&registry)
    );
    let grown = call(&registry, "mcp__changing__grown", json!({})).await;
    assert_eq!(grown.content, "grown here");
}

#[tokio::test]
async fn a_server_killed_mid_call_gives_an_error_result_and_is_started_again() {
    let marks = tempfile::tempdir().unwrap();
    let Some(config) = changing(marks.path()) else {
        return;
    };
    let server = McpServer::connect(config, options()).await.unwrap();
    let registry = registry_of(&server);
    let first_pid: i32 = call(&registry, "mcp__changing__pid", json!({}))
        .await
        .content
        .parse()
        .unwrap();
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        rustix::process::kill_process(
            rustix::process::Pid::from_raw(first_pid).unwrap(),
            rustix::process::Signal::KILL,
        )
        .unwrap();
    });
    let output = call(&registry, "mcp__changing__slow", json!({"seconds": 30})).await;
    killer.await.unwrap();
    assert!(output.is_error, "{output:?}");
    assert!(
        output.content.contains("stopped during the call") && output.content.contains("signal 9"),
        "{output:?}"
    );
    assert!(matches!(server.state(), ServerState::Stopped(_)));
    // The next call starts it again.
    let second = call(&registry, "mcp__changing__pid", json!({})).await;
    assert!(!second.is_error, "{second:?}");
    let second_pid: i32 = second.content.parse().unwrap();
    assert_ne!(second_pid, first_pid);
    assert_eq!(server.state(), ServerState::Connected);
}

#[tokio::test]
async fn a_server_that_exits_at_once_is_reported_with_its_status_and_stderr() {
    let config = config(
        "broken",
        stdio("sh", &["-c", "echo 'cannot find config.yaml' >&2; exit 3"]),
    );
    let err = McpServer::connect(config, options()).await.unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, McpError::Start { .. }), "{err:?}");
    assert!(
        text.starts_with("MCP server broken did not start"),
        "{text}"
    );
    assert!(text.contains("status 3"), "{text}");
    assert!(text.contains("cannot find config.yaml"), "{text}");
}

#[tokio::test]
async fn a_program_that_does_not_exist_is_reported() {
    let config = config("ghost", stdio("/nonexistent/mcp-server", &[]));
    let err = McpServer::connect(config, options()).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot run /nonexistent/mcp-server"),
        "{err}"
    );
}

#[tokio::test]
async fn a_server_that_hangs_at_start_times_out_and_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let script = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let mut config = config("sleepy", stdio("sh", &["-c", &script]));
    config.startup_timeout = Duration::from_millis(700);
    let err = McpServer::connect(config, options()).await.unwrap_err();
    assert!(err.to_string().contains("no answer within 0.7s"), "{err}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Its process group was killed with it.
    let mut gone = false;
    for _ in 0..50 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // Gone, or a zombie waiting for the reaper.
        if status.is_empty() || status.split_whitespace().nth(2) == Some("Z") {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the hanging server {pid} still runs");
}

#[tokio::test]
async fn servers_start_in_parallel_and_one_failure_leaves_the_others() {
    let Some(everything) = everything() else {
        return;
    };
    let mut slow = config("slow", stdio("sleep", &["60"]));
    slow.startup_timeout = Duration::from_secs(2);
    let failing = config("failing", stdio("false", &[]));
    let started = std::time::Instant::now();
    let result = start_servers(vec![slow, everything, failing], &options()).await;
    // In parallel: the slow one's 2 s, not 2 s plus everything's start.
    assert!(started.elapsed() < Duration::from_secs(6));
    let names: Vec<&str> = result.servers.iter().map(McpServer::name).collect();
    assert_eq!(names, ["everything"]);
    let failures: Vec<String> = result.failures.iter().map(ToString::to_string).collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(failures[0].starts_with("MCP server slow did not start: no answer within 2s"));
    assert!(failures[1].starts_with("MCP server failing did not start"));
}

#[tokio::test]
async fn credentials_are_kept_from_stdio_servers_unless_the_config_passes_them() {
    let Some(mut config) = everything() else {
        return;
    };
    if let McpTransport::Stdio(server) = &mut config.transport {
        server
            .env
            .insert("PASSED_API_KEY".into(), "given-on-purpose".into());
    }
    // HOME stands for a variable the host hides besides the credentials (keel hides the key
    // variable it uses).
    let mut options = options();
    options.hidden_env = vec!["HOME".into()];
    let server = McpServer::connect(config, options).await.unwrap();
    let registry = registry_of(&server);
    let env = call(&registry, "mcp__everything__get-env", json!({})).await;
    assert!(!env.is_error, "{env:?}");
    assert!(env.content.contains("given-on-purpose"), "{}", env.content);
    assert!(!env.content.contains("\"HOME\""), "{}", env.content);
    assert!(env.content.contains("\"PATH\""), "{}", env.content);
}

#[tokio::test]
async fn server_filesystem_reads_files_under_its_root() {
    let Some(script) = peers::mcp_server("server-filesystem") else {
        return;
    };
    let repo = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(repo.path()).unwrap();
    std::fs::write(root.join("notes.txt"), "the answer is 42\n").unwrap();
    let config = config(
        "fs",
        stdio("node", &[script.to_str().unwrap(), root.to_str().unwrap()]),
    );
    let server = McpServer::connect(config, options()).await.unwrap();
    let registry = registry_of(&server);
    let read = call(
        &registry,
        "mcp__fs__read_text_file",
        json!({"path": root.join("notes.txt")}),
    )
    .await;
    assert!(!read.is_error, "{read:?}");
    assert!(read.content.contains("the answer is 42"), "{read:?}");
    // Outside its root: the server's own refusal, as an error result.
    let outside = call(
        &registry,
        "mcp__fs__read_text_file",
        json!({"path": "/etc/passwd"}),
    )
    .await;
    assert!(outside.is_error, "{outside:?}");
}

#[tokio::test]
async fn server_everything_over_streamable_http_with_a_bearer_token_and_headers() {
    let Some(script) = peers::mcp_server("server-everything") else {
        return;
    };
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut child = tokio::process::Command::new("node")
        .arg(&script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Wait for it to listen.
    let mut up = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "server-everything did not listen on {port}");
    let config = McpServerConfig::new(
        "remote",
        McpTransport::Http(HttpServer {
            url: format!("http://127.0.0.1:{port}/mcp"),
            headers: BTreeMap::from([("X-Team".to_owned(), "keel".to_owned())]),
            bearer_token: Some("secret-token".to_owned()),
        }),
    )
    .unwrap();
    // Secrets stay out of Debug output.
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("secret-token") && !debug.contains("\"keel\""),
        "{debug}"
    );
    let server = McpServer::connect(config, options()).await.unwrap();
    let registry = registry_of(&server);
    let echo = call(
        &registry,
        "mcp__remote__echo",
        json!({"message": "over http"}),
    )
    .await;
    assert_eq!(echo.content, "Echo: over http");
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let ctx = ToolContext::new(".", "test").with_progress(sender);
    let output = call_in(
        &registry,
        "mcp__remote__trigger-long-running-operation",
        json!({"duration": 0.2, "steps": 2}),
        &ctx,
    )
    .await;
    assert!(output.content.contains("completed"), "{output:?}");
    let mut lines = Vec::new();
    while let Ok(progress) = receiver.try_recv() {
        lines.push(progress.line);
    }
    assert_eq!(lines, ["1/2", "2/2"]);
    child.kill().await.unwrap();
}
