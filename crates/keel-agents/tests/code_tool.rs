//! The `code` tool as a model sees it: called through a registry's dispatch, running a fresh
//! agent against scripted Anthropic replies served from wiremock on loopback, in real
//! temporary git repositories. No network, no keys.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_agents::{CodeTool, Delegation, Models};
use keel_provider::{AnthropicProvider, ApiKey, Provider, RetryPolicy, ToolCall, ToolInput};
use keel_test_support::git::TempRepo;
use keel_test_support::mock::{
    error_response, request_bodies, serve_anthropic_replies as anthropic_server, sse_response,
};
use keel_test_support::render::anthropic_sse;
use keel_test_support::scripted::{text_reply as text, tool_reply as tool_call};
use keel_tool::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::{Value, json};
use tempfile::TempDir;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer};

const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
const SMALL_MODEL: &str = "claude-haiku-4-5";

fn provider(server: &MockServer) -> Arc<dyn Provider> {
    Arc::new(
        AnthropicProvider::new(ApiKey::new("sk-ant-test"))
            .unwrap()
            .with_base_url(&server.uri())
            .unwrap()
            .with_retry_policy(RetryPolicy::none()),
    )
}

/// A registry holding only the `code` tool, delegating to `server`, logging under `logs`.
fn registry(server: &MockServer, logs: &Path) -> ToolRegistry {
    let delegation = Delegation::new(provider(server), Models::new(DEFAULT_MODEL, SMALL_MODEL));
    ToolRegistry::new()
        .with(CodeTool::new(delegation, logs))
        .unwrap()
}

/// Calls `code` through `registry` as a model would, from a parent working in `parent_cwd`.
async fn call_code(registry: &ToolRegistry, parent_cwd: &Path, input: Value) -> ToolOutput {
    call_code_with(
        registry,
        &ToolContext::new(parent_cwd, "parent-session"),
        input,
    )
    .await
}

async fn call_code_with(registry: &ToolRegistry, ctx: &ToolContext, input: Value) -> ToolOutput {
    let call = ToolCall {
        id: "call_code",
        name: "code",
        input: ToolInput::Valid(&input),
    };
    registry.dispatch(call, ctx).await
}

/// A repository whose `add` subtracts.
fn buggy_repo() -> TempRepo {
    let repo = TempRepo::new();
    repo.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a - b\n}\n",
    );
    repo.commit("Add add()");
    repo
}

/// The log path at the end of a result (`...\n\nLog: <path>`).
fn log_path(output: &ToolOutput) -> PathBuf {
    let (_, path) = output
        .content
        .rsplit_once("\n\nLog: ")
        .unwrap_or_else(|| panic!("no log line in {:?}", output.content));
    PathBuf::from(path)
}

/// The only log written under `logs`.
fn only_log(logs: &Path) -> PathBuf {
    let entries: Vec<PathBuf> = std::fs::read_dir(logs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries.into_iter().next().unwrap()
}

/// `log` with what changes from run to run replaced: the paths, the timestamp, durations.
fn redact(log: &str, paths: &[(&Path, &str)]) -> String {
    let mut out = log.to_owned();
    for (path, name) in paths {
        out = out.replace(&path.display().to_string(), name);
    }
    out.lines()
        .map(|line| {
            if line.starts_with("# Code Session ") {
                "# Code Session [timestamp]".to_owned()
            } else if line.starts_with("- ")
                && (line.contains(" — ok, ") || line.contains(" — error, "))
            {
                let (call, _duration) = line.rsplit_once(", ").unwrap();
                format!("{call}, [duration]")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn logs_dir() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    (dir, logs)
}

#[tokio::test]
async fn the_code_tool_fixes_a_bug_and_logs_the_session() {
    let repo = buggy_repo();
    let server = anthropic_server(&[
        tool_call("call_read", "read_file", json!({"path": "src/lib.rs"})),
        tool_call(
            "call_patch",
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "    a - b", "new_string": "    a + b"}),
        ),
        text("Fixed `add` in src/lib.rs: it subtracted instead of adding."),
    ])
    .await;
    let (_dir, logs) = logs_dir();
    let registry = registry(&server, &logs);
    let task = "add() in src/lib.rs returns the wrong result; fix it.";
    let output = call_code(
        &registry,
        &repo.path(),
        json!({"task": task, "cwd": repo.path(), "model": "default"}),
    )
    .await;

    assert!(!output.is_error, "{}", output.content);
    assert_eq!(
        repo.read("src/lib.rs"),
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
    );
    let log = log_path(&output);
    assert_eq!(
        output.content,
        format!(
            "Fixed `add` in src/lib.rs: it subtracted instead of adding.\n\nLog: {}",
            log.display()
        )
    );
    assert_eq!(log.parent(), Some(logs.as_path()));
    let name = log.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("code-") && name.ends_with("Z.md") && !name.contains(':'),
        "{name}"
    );
    assert_eq!(only_log(&logs), log);

    let contents = std::fs::read_to_string(&log).unwrap();
    insta::assert_snapshot!(
        "fix_log",
        redact(&contents, &[(&repo.path(), "[repo]"), (&logs, "[logs]")])
    );
    assert_eq!(request_bodies(&server).await.len(), 3);
}

#[tokio::test]
async fn a_missing_directory_is_an_error_and_nothing_is_sent() {
    let server = anthropic_server(&[text("unreachable")]).await;
    let (dir, logs) = logs_dir();
    let registry = registry(&server, &logs);
    let output = call_code(
        &registry,
        dir.path(),
        json!({"task": "anything", "cwd": "/no/such/dir", "model": "default"}),
    )
    .await;
    assert!(output.is_error);
    assert_eq!(output.content, "directory not found: /no/such/dir");
    assert!(request_bodies(&server).await.is_empty());
    assert!(!logs.exists());

    // A file is not a directory either.
    let file = dir.path().join("file.txt");
    std::fs::write(&file, "not a directory").unwrap();
    let output = call_code(
        &registry,
        dir.path(),
        json!({"task": "anything", "cwd": file, "model": "small"}),
    )
    .await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        format!("directory not found: {}", file.display())
    );
    assert!(request_bodies(&server).await.is_empty());
}

#[tokio::test]
async fn a_provider_error_is_an_error_result_and_is_logged() {
    let repo = buggy_repo();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(error_response(
            400,
            "invalid_request_error",
            "max_tokens: too large",
        ))
        .mount(&server)
        .await;
    let (_dir, logs) = logs_dir();
    let registry = registry(&server, &logs);
    let output = call_code(
        &registry,
        &repo.path(),
        json!({"task": "fix add()", "cwd": repo.path(), "model": "default"}),
    )
    .await;

    assert!(output.is_error, "{}", output.content);
    assert!(
        output
            .content
            .starts_with("The code session did not complete: "),
        "{}",
        output.content
    );
    assert!(
        output.content.contains("max_tokens: too large"),
        "{}",
        output.content
    );
    let log = log_path(&output);
    assert_eq!(only_log(&logs), log);
    let contents = std::fs::read_to_string(&log).unwrap();
    assert!(contents.contains("- outcome: failed\n"), "{contents}");
    assert!(contents.contains("\n## Error\n\n"), "{contents}");
    let error = contents
        .split("\n## Error\n\n")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    assert!(error.contains("max_tokens: too large"), "{contents}");
    assert!(contents.contains("\n## Tool calls\n\nnone\n"), "{contents}");
    assert!(contents.contains("\n## Usage\n\n"), "{contents}");
    assert_eq!(request_bodies(&server).await.len(), 1);
}

#[tokio::test]
async fn small_and_default_resolve_to_their_models() {
    let repo = buggy_repo();
    let server = anthropic_server(&[text("Done quickly."), text("Done properly.")]).await;
    let (_dir, logs) = logs_dir();
    let registry = registry(&server, &logs);
    // The model picks a tier from an enum; all three arguments are required.
    let schema = &registry.definitions()[0].input_schema;
    assert_eq!(
        schema["properties"]["model"]["enum"],
        json!(["default", "small"])
    );
    assert_eq!(schema["required"], json!(["task", "cwd", "model"]));

    let small = call_code(
        &registry,
        &repo.path(),
        json!({"task": "a small job", "cwd": repo.path(), "model": "small"}),
    )
    .await;
    assert!(!small.is_error, "{}", small.content);
    let default = call_code(
        &registry,
        &repo.path(),
        json!({"task": "a real job", "cwd": repo.path(), "model": "default"}),
    )
    .await;
    assert!(!default.is_error, "{}", default.content);

    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(bodies[0]["model"], SMALL_MODEL);
    assert_eq!(bodies[1]["model"], DEFAULT_MODEL);
    let small_log = std::fs::read_to_string(log_path(&small)).unwrap();
    assert!(
        small_log.contains(&format!("- model: {SMALL_MODEL}\n")),
        "{small_log}"
    );
    let default_log = std::fs::read_to_string(log_path(&default)).unwrap();
    assert!(
        default_log.contains(&format!("- model: {DEFAULT_MODEL}\n")),
        "{default_log}"
    );
    assert_ne!(log_path(&small), log_path(&default));

    // Anything else is refused before a request is made.
    let other = call_code(
        &registry,
        &repo.path(),
        json!({"task": "a job", "cwd": repo.path(), "model": "huge"}),
    )
    .await;
    assert!(other.is_error);
    assert!(
        other
            .content
            .starts_with("invalid arguments for code: model: "),
        "{}",
        other.content
    );
    assert_eq!(request_bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn calls_share_no_state() {
    let repo = buggy_repo();
    let server = anthropic_server(&[
        tool_call("call_read", "read_file", json!({"path": "src/lib.rs"})),
        text("It subtracts."),
        text("It is a Rust library."),
    ])
    .await;
    let (_dir, logs) = logs_dir();
    let registry = registry(&server, &logs);
    let first_task = "What does add() in src/lib.rs do?";
    let second_task = "What kind of project is this?";

    let first = call_code(
        &registry,
        &repo.path(),
        json!({"task": first_task, "cwd": repo.path(), "model": "default"}),
    )
    .await;
    assert!(
        first.content.starts_with("It subtracts.\n\nLog: "),
        "{}",
        first.content
    );
    let second = call_code(
        &registry,
        &repo.path(),
        json!({"task": second_task, "cwd": repo.path(), "model": "default"}),
    )
    .await;
    assert!(
        second.content.starts_with("It is a Rust library.\n\nLog: "),
        "{}",
        second.content
    );

    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    // The first session's second request carried its history...
    assert_eq!(bodies[1]["messages"].as_array().unwrap().len(), 3);
    // ...the second session's only request holds its own task and nothing else.
    let messages = bodies[2]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["role"], "user");
    let sent = messages[0].to_string();
    assert!(sent.contains(second_task), "{sent}");
    assert!(!sent.contains(first_task), "{sent}");
    assert!(!sent.contains("It subtracts"), "{sent}");
    assert_ne!(log_path(&first), log_path(&second));
}

#[tokio::test]
async fn a_cancelled_call_still_leaves_a_log() {
    let repo = buggy_repo();
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            sse_response(anthropic_sse(&text("too late"))).set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
    let (_dir, logs) = logs_dir();
    let registry = registry(&server, &logs);
    let ctx = ToolContext::new(repo.path(), "parent-session");
    let cancel = ctx.cancel().clone();
    let canceller = async {
        // Cancel once the request is on its way.
        while server.received_requests().await.unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cancel.cancel();
    };
    let (output, ()) = tokio::join!(
        call_code_with(
            &registry,
            &ctx,
            json!({"task": "a long job", "cwd": repo.path(), "model": "default"}),
        ),
        canceller
    );
    assert!(output.is_error);
    assert_eq!(output.content, "interrupted by the user");
    let contents = std::fs::read_to_string(only_log(&logs)).unwrap();
    assert!(contents.contains("- task: a long job\n"), "{contents}");
    assert!(
        contents.contains("\n## Error\n\nthe call was stopped (cancelled or timed out)"),
        "{contents}"
    );
}
