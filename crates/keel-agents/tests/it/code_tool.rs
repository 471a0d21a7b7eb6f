//! The `code` tool as a model sees it: called through a registry's dispatch, running a fresh
//! agent against scripted Anthropic replies served from wiremock on loopback, in real
//! temporary git repositories. No network, no keys.

// Tests report failures by panicking.
#![cfg(feature = "delegation")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_agents::{CodeTool, Delegation, Models, Policies};
use keel_provider::{AnthropicProvider, ApiKey, Provider, RetryPolicy, ToolCall, ToolInput};
use keel_sandbox::SandboxPolicy;
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

/// A registry holding only the `code` tool for `workspace`, delegating to `server`, logging
/// under `logs`.
fn registry(server: &MockServer, workspace: &Path, logs: &Path) -> ToolRegistry {
    ToolRegistry::new()
        .with(code_tool(server, workspace, logs))
        .unwrap()
}

fn code_tool(server: &MockServer, workspace: &Path, logs: &Path) -> CodeTool {
    code_tool_under(
        server,
        workspace,
        logs,
        Policies::new(SandboxPolicy::default()),
    )
}

/// A `code` tool whose parent has `policies`.
fn code_tool_under(
    server: &MockServer,
    workspace: &Path,
    logs: &Path,
    policies: Policies,
) -> CodeTool {
    let models = Models::new(DEFAULT_MODEL, SMALL_MODEL);
    CodeTool::new(
        Delegation::new(provider(server), models, policies),
        workspace,
        logs,
    )
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
    let registry = registry(&server, &repo.path(), &logs);
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
    let registry = registry(&server, dir.path(), &logs);
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
    let registry = registry(&server, &repo.path(), &logs);
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
    let registry = registry(&server, &repo.path(), &logs);
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
    let registry = registry(&server, &repo.path(), &logs);
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
    let registry = registry(&server, &repo.path(), &logs);
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

/// Calls `tool` as the only tool of a parent working in `repo`, with `cwd`.
async fn code_in(tool: CodeTool, repo: &TempRepo, cwd: &Path) -> ToolOutput {
    let registry = ToolRegistry::new().with(tool).unwrap();
    call_code(
        &registry,
        &repo.path(),
        json!({"task": "look around", "cwd": cwd, "model": "default"}),
    )
    .await
}

#[tokio::test]
async fn cwd_outside_the_workspace_is_refused_naming_the_roots() {
    let repo = buggy_repo();
    let outside = tempfile::tempdir().unwrap();
    let outside_dir = outside.path().canonicalize().unwrap();
    std::fs::create_dir(repo.path().join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside_dir, repo.path().join("out")).unwrap();
    let server = anthropic_server(&[text("unreachable")]).await;
    let (_dir, logs) = logs_dir();
    let root = repo.path().canonicalize().unwrap();
    let cases = [
        // Another directory, the filesystem root, `..` out of a subdirectory, and a symlink
        // inside the workspace leading out.
        (outside_dir.clone(), None),
        (PathBuf::from("/"), None),
        (
            repo.path().join("sub/../.."),
            root.parent().map(Path::to_path_buf),
        ),
        (repo.path().join("out"), Some(outside_dir.clone())),
    ];
    for (cwd, resolves_to) in cases {
        let output = code_in(code_tool(&server, &repo.path(), &logs), &repo, &cwd).await;
        assert!(output.is_error, "{cwd:?}: {}", output.content);
        let resolves = resolves_to
            .map(|to| format!(" (it resolves to {})", to.display()))
            .unwrap_or_default();
        assert_eq!(
            output.content,
            format!(
                "cwd {}{resolves} is outside this session's roots: {}; delegated work stays \
                 inside them, so give a directory inside one",
                cwd.display(),
                root.display()
            ),
            "{cwd:?}"
        );
    }
    assert!(
        request_bodies(&server).await.is_empty(),
        "no session started"
    );
    assert!(!logs.exists(), "no log written");
}

#[tokio::test]
async fn cwd_may_be_inside_the_workspace_or_a_writable_root() {
    let repo = buggy_repo();
    std::fs::create_dir(repo.path().join("sub")).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let server = anthropic_server(&[text("in sub"), text("in the cache")]).await;
    let (_dir, logs) = logs_dir();
    let tool = code_tool_under(
        &server,
        &repo.path(),
        &logs,
        Policies::new(SandboxPolicy::default().allow_write(cache.path())),
    );
    assert_eq!(
        tool.roots(),
        [
            repo.path().canonicalize().unwrap(),
            cache.path().canonicalize().unwrap()
        ]
    );
    let sub = code_in(tool.clone(), &repo, &repo.path().join("sub")).await;
    assert!(
        sub.content.starts_with("in sub\n\nLog: "),
        "{}",
        sub.content
    );
    let cached = code_in(tool, &repo, cache.path()).await;
    assert!(
        cached.content.starts_with("in the cache\n\nLog: "),
        "{}",
        cached.content
    );
    // Without the writable root, the cache is outside.
    let refused = code_in(code_tool(&server, &repo.path(), &logs), &repo, cache.path()).await;
    assert!(refused.is_error);
    assert!(
        refused.content.contains("is outside this session's roots"),
        "{}",
        refused.content
    );
    assert_eq!(request_bodies(&server).await.len(), 2);
}

#[tokio::test]
async fn the_session_gets_the_parent_s_policy_and_allow_read_paths() {
    let repo = buggy_repo();
    let notes = tempfile::tempdir().unwrap();
    let note = notes.path().canonicalize().unwrap().join("note.txt");
    std::fs::write(&note, "the note says 42\n").unwrap();
    let read = || tool_call("call_read", "read_file", json!({"path": note}));
    let server = anthropic_server(&[read(), text("first"), read(), text("second")]).await;
    let (_dir, logs) = logs_dir();
    let read_only = keel_sandbox::SandboxPolicy::with_mode(keel_sandbox::SandboxMode::ReadOnly);
    // With the parent's allow-read path and read-only policy...
    let tool = code_tool_under(
        &server,
        &repo.path(),
        &logs,
        Policies::new(read_only).with_allow_read([notes.path()]),
    );
    let output = code_in(tool, &repo, &repo.path()).await;
    assert!(!output.is_error, "{}", output.content);
    // ...and without.
    let output = code_in(code_tool(&server, &repo.path(), &logs), &repo, &repo.path()).await;
    assert!(!output.is_error, "{}", output.content);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 4);
    let writes = |body: &Value| {
        body["tools"]
            .to_string()
            .contains("\"name\":\"write_file\"")
    };
    let result = |body: &Value| body["messages"][2]["content"][0].to_string();
    assert!(!writes(&bodies[0]), "read-only: no write_file");
    assert!(
        result(&bodies[1]).contains("the note says 42"),
        "{}",
        result(&bodies[1])
    );
    assert!(writes(&bodies[2]));
    assert!(
        !result(&bodies[3]).contains("the note says 42"),
        "{}",
        result(&bodies[3])
    );
    assert!(
        result(&bodies[3]).contains("\"is_error\":true"),
        "{}",
        result(&bodies[3])
    );
}
