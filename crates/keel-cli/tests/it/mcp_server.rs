//! `keel mcp-server` driven by the official MCP Python SDK as the host (tests/mcp/client.py),
//! with the model served from loopback by wiremock: the tool list, `code` fixing a file and
//! returning its log, directories outside the roots (the host's or the model's) refused
//! with nothing run, a background task's end told as a logging message, and HTTP behind a
//! bearer token.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead as _, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::{request_bodies, sse_response};
use keel_test_support::render::anthropic_sse;
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request};

/// The Python that has the `mcp` SDK; `None` skips the test (never under CI=true).
fn python() -> Option<PathBuf> {
    keel_test_support::peers::mcp_python()
}

fn client_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py")
}

/// The environment `keel mcp-server` gets from the host (the SDK passes only a few
/// variables of its own): this home, the mock model.
fn server_env(home: &Home, model: &MockServer) -> Value {
    json!({
        "HOME": home.path(),
        "KEEL_HOME": home.keel_home(),
        "ANTHROPIC_API_KEY": FAKE_KEY,
        "ANTHROPIC_BASE_URL": model.uri(),
        "GIT_CONFIG_NOSYSTEM": "1",
        "NO_COLOR": "1",
    })
}

/// Runs the Python host on `spec` (keel's command filled in for stdio) and returns what it
/// printed.
async fn host(python: &Path, mut spec: Value) -> Value {
    if spec.get("url").is_none() {
        spec["command"] = json!(env!("CARGO_BIN_EXE_keel"));
    }
    let python = python.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(python)
            .arg(client_script())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(spec.to_string().as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "the host failed: {}\n{}",
        stdout(&output),
        stderr(&output)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A `code` step.
fn code(task: &str, cwd: impl serde::Serialize) -> Value {
    json!({"op": "call", "name": "code", "arguments": {"task": task, "cwd": cwd, "model": "default"}})
}

#[tokio::test]
async fn the_host_lists_keel_s_tools() {
    let Some(python) = python() else { return };
    let repo = TempRepo::new();
    let home = Home::new();
    let model = anthropic_server(&[]).await;
    let out = host(
        &python,
        json!({
            "args": ["mcp-server"], "cwd": repo.path(), "env": server_env(&home, &model),
            "steps": [{"op": "list"}],
        }),
    )
    .await;
    insta::assert_json_snapshot!("tools", out["steps"][0]);
}

#[tokio::test]
async fn code_fixes_a_file_in_the_repository_and_returns_its_log() {
    let Some(python) = python() else { return };
    let repo = TempRepo::new();
    repo.write("greeting.txt", "helo world\n");
    let home = Home::new();
    let model = anthropic_server(&[
        tool_call(
            "toolu_1",
            "patch_file",
            json!({"path": "greeting.txt", "old_string": "helo", "new_string": "hello"}),
        ),
        text("Fixed the typo in greeting.txt."),
    ])
    .await;
    let out = host(
        &python,
        json!({
            "args": ["mcp-server"], "cwd": repo.path(), "env": server_env(&home, &model),
            "steps": [code("Fix the typo in greeting.txt", repo.path())],
        }),
    )
    .await;
    let result = &out["steps"][0];
    assert_eq!(result["is_error"], false, "{result}");
    let text = result["text"].as_str().unwrap();
    assert!(
        text.starts_with("Fixed the typo in greeting.txt.\n\nLog: "),
        "{text}"
    );
    let log = PathBuf::from(text.rsplit("Log: ").next().unwrap().trim());
    assert!(
        log.starts_with(home.keel_home().join("logs")),
        "{}",
        log.display()
    );
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("- outcome: completed"), "{log_text}");
    assert!(log_text.contains("- patch_file "), "{log_text}");
    assert_eq!(repo.read("greeting.txt"), "hello world\n");
    // Each call of the session was a progress notification while it ran.
    let progress = result["progress"].as_array().unwrap();
    assert_eq!(progress.len(), 1, "{progress:?}");
    let line = progress[0].as_str().unwrap();
    assert!(
        line.starts_with(r#"patch_file {"path":"greeting.txt","#) && line.contains(" — ok, "),
        "{line}"
    );
    // The code session's request: the task, from the repository.
    let bodies = request_bodies(&model).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(
        bodies[0]["messages"][0]["content"][0]["text"],
        "Fix the typo in greeting.txt"
    );
}

#[tokio::test]
async fn code_works_in_every_root_though_it_lies_outside_the_working_directory() {
    let Some(python) = python() else { return };
    let here = TempRepo::new();
    let there = TempRepo::new();
    there.write("greeting.txt", "helo\n");
    let home = Home::new();
    let model = anthropic_server(&[
        tool_call(
            "toolu_1",
            "patch_file",
            json!({"path": "greeting.txt", "old_string": "helo", "new_string": "hello"}),
        ),
        text("Fixed."),
    ])
    .await;
    let out = host(
        &python,
        json!({
            "args": ["mcp-server", "--root", here.path(), "--root", there.path()],
            "cwd": here.path(), "env": server_env(&home, &model),
            "steps": [code("Fix the typo", there.path())],
        }),
    )
    .await;
    assert_eq!(out["steps"][0]["is_error"], false, "{}", out["steps"][0]);
    assert_eq!(there.read("greeting.txt"), "hello\n");
}

#[tokio::test]
async fn directories_outside_the_roots_are_refused_and_nothing_runs() {
    let Some(python) = python() else { return };
    let repo = TempRepo::new();
    let outside = tempfile::tempdir().unwrap();
    let outside_path = outside.path().canonicalize().unwrap();
    std::os::unix::fs::symlink(&outside_path, repo.path().join("escape")).unwrap();
    std::fs::create_dir_all(repo.path().join("sub")).unwrap();
    let home = Home::new();
    let model = anthropic_server(&[]).await;
    let hostile = [
        json!(outside_path),
        json!(format!("{}/..", repo.path().display())),
        json!("../"),
        json!("escape"),
        json!(repo.path().join("escape")),
        json!("/"),
    ];
    let mut steps: Vec<Value> = hostile
        .iter()
        .map(|dir| code("Write a file here", dir.clone()))
        .collect();
    steps.extend(hostile.iter().map(|dir| {
        json!({"op": "call", "name": "start_task",
               "arguments": {"task": "Write a file here", "workdir": dir}})
    }));
    let out = host(
        &python,
        json!({
            "args": ["mcp-server"], "cwd": repo.path(), "env": server_env(&home, &model),
            "steps": steps,
        }),
    )
    .await;
    for (step, result) in out["steps"].as_array().unwrap().iter().enumerate() {
        assert_eq!(result["is_error"], true, "step {step}: {result}");
        assert!(
            result["text"]
                .as_str()
                .unwrap()
                .contains("is outside the allowed roots"),
            "step {step}: {result}"
        );
    }
    // Nothing ran: no model call, no log, no task, nothing written outside.
    assert!(request_bodies(&model).await.is_empty());
    assert!(!home.keel_home().join("logs").exists());
    assert_eq!(std::fs::read_dir(&outside_path).unwrap().count(), 0);
    let tasks = home.keel_home().join("tasks.db");
    if tasks.exists() {
        let store = keel::tasks::SqliteTaskStore::open(&tasks).unwrap();
        assert!(keel::tasks::TaskStore::list(&store, 10).unwrap().is_empty());
    }

    // --root narrows: the repository itself is outside `--root sub`; the host's roots narrow
    // further and cannot widen (its `outside` root is not keel's to give).
    let out = host(
        &python,
        json!({
            "args": ["mcp-server", "--root", "sub"], "cwd": repo.path(),
            "env": server_env(&home, &model),
            "roots": [format!("file://{}", outside_path.display()), format!("file://{}", repo.path().display())],
            "steps": [code("x", repo.path()), code("x", outside_path.clone())],
        }),
    )
    .await;
    for result in out["steps"].as_array().unwrap() {
        assert_eq!(result["is_error"], true, "{result}");
        assert!(
            result["text"].as_str().unwrap().contains(&format!(
                "allowed roots ({})",
                repo.path().join("sub").display()
            )),
            "{result}"
        );
    }
    assert!(request_bodies(&model).await.is_empty());
}

#[tokio::test]
async fn a_model_inside_code_cannot_write_outside_the_directory() {
    let Some(python) = python() else { return };
    let repo = TempRepo::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().canonicalize().unwrap().join("pwned.txt");
    std::os::unix::fs::symlink(outside.path(), repo.path().join("escape")).unwrap();
    let home = Home::new();
    let model = anthropic_server(&[
        tool_call(
            "toolu_1",
            "write_file",
            json!({"path": target, "content": "x"}),
        ),
        tool_call(
            "toolu_2",
            "write_file",
            json!({"path": "escape/pwned.txt", "content": "x"}),
        ),
        tool_call(
            "toolu_3",
            "write_file",
            json!({"path": "../pwned.txt", "content": "x"}),
        ),
        text("Could not."),
    ])
    .await;
    let out = host(
        &python,
        json!({
            "args": ["mcp-server"], "cwd": repo.path(), "env": server_env(&home, &model),
            "steps": [code("Write pwned.txt outside", repo.path())],
        }),
    )
    .await;
    assert_eq!(out["steps"][0]["is_error"], false, "{}", out["steps"][0]);
    assert!(!target.exists());
    assert!(!repo.path().parent().unwrap().join("pwned.txt").exists());
    let bodies = request_bodies(&model).await;
    assert_eq!(bodies.len(), 4);
    for (n, body) in bodies[1..].iter().enumerate() {
        let messages = body["messages"].as_array().unwrap();
        let result = &messages[messages.len() - 1]["content"][0];
        assert_eq!(result["is_error"], true, "call {n}: {result}");
    }
}

/// Answers the runner of a background task (a conversation whose one message starts
/// `TASK:`).
struct RunnerRequest;

impl wiremock::Match for RunnerRequest {
    fn matches(&self, request: &Request) -> bool {
        serde_json::from_slice::<Value>(&request.body).is_ok_and(|body| {
            body["messages"].as_array().is_some_and(|m| {
                m.len() == 1
                    && m[0]["content"][0]["text"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("TASK:"))
            })
        })
    }
}

#[tokio::test]
async fn start_task_returns_at_once_and_its_end_is_sent_as_a_logging_message() {
    let Some(python) = python() else { return };
    let repo = TempRepo::new();
    let home = Home::new();
    let model = MockServer::start().await;
    Mock::given(RunnerRequest)
        .respond_with(sse_response(anthropic_sse(&text("hi from the task"))))
        .mount(&model)
        .await;
    let out = host(
        &python,
        json!({
            "args": ["mcp-server"], "cwd": repo.path(), "env": server_env(&home, &model),
            "steps": [{"op": "start_and_wait", "arguments": {"task": "TASK: say hi"}, "timeout": 90}],
        }),
    )
    .await;
    let result = &out["steps"][0];
    let id = result["id"].as_str().unwrap();
    assert!(
        result["start"].as_str().unwrap().starts_with(&format!(
            "Task {id} started (keel, {}",
            repo.path().display()
        )),
        "{result}"
    );
    let log = &result["log"];
    assert_eq!(log["level"], "info", "{result}");
    assert_eq!(log["logger"], "keel.tasks");
    assert_eq!(log["data"]["task"], id);
    assert_eq!(log["data"]["status"], "completed");
    assert_eq!(log["data"]["summary"], "hi from the task");
    assert!(
        log["data"]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Task {id} completed (exit 0)")),
        "{log}"
    );
    assert!(
        result["wait"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Task {id} completed (exit 0)")),
        "{result}"
    );
    assert!(
        result["status"]
            .as_str()
            .unwrap()
            .contains("status: completed")
    );
    // Told once.
    let told: Vec<&Value> = out["logs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["data"]["task"] == id)
        .collect();
    assert_eq!(told.len(), 1, "{}", out["logs"]);
}

#[tokio::test]
async fn the_task_tools_see_only_the_tasks_inside_the_roots() {
    let Some(python) = python() else { return };
    let repo = TempRepo::new();
    let other = tempfile::tempdir().unwrap();
    let home = Home::new();
    let store = keel::tasks::SqliteTaskStore::open(&home.keel_home().join("tasks.db")).unwrap();
    let record = |dir: &Path, prompt: &str| {
        let task = keel::tasks::NewTask {
            parent_session: Some("elsewhere".into()),
            agent: "main".into(),
            runner: "keel".into(),
            task_prompt: prompt.into(),
            workdir: dir.canonicalize().unwrap(),
            timeout_secs: 60,
        };
        let settings = keel::tasks::TaskSettings::new(dir, keel::sandbox::SandboxPolicy::default());
        keel::tasks::TaskStore::create(
            &store,
            &task,
            &settings,
            &home.keel_home().join("task-logs"),
        )
        .unwrap()
        .id
    };
    let inside = record(&repo.path(), "a task in the repository");
    let outside = record(other.path(), "a task of another project");
    let model = anthropic_server(&[]).await;
    let call =
        |name: &str, arguments: Value| json!({"op": "call", "name": name, "arguments": arguments});
    let out = host(
        &python,
        json!({
            "args": ["mcp-server"], "cwd": repo.path(), "env": server_env(&home, &model),
            "steps": [
                call("list_tasks", json!({})),
                call("task_status", json!({"id": outside})),
                call("wait_task", json!({"id": outside, "timeout_secs": 1})),
                call("cancel_task", json!({"id": outside})),
                call("task_status", json!({"id": inside})),
                call("cancel_task", json!({"id": inside})),
            ],
        }),
    )
    .await;
    let steps = out["steps"].as_array().unwrap();
    let listed = steps[0]["text"].as_str().unwrap();
    assert!(
        listed.contains(&inside) && !listed.contains(&outside),
        "{listed}"
    );
    for step in &steps[1..4] {
        assert_eq!(step["is_error"], true, "{step}");
        assert_eq!(
            step["text"],
            format!("no task {outside:?}; `keel tasks` lists them"),
            "{step}"
        );
    }
    assert_eq!(steps[4]["is_error"], false, "{}", steps[4]);
    assert_eq!(steps[5]["text"], format!("Task {inside} cancelled."));
    let status = |id: &str| {
        keel::tasks::TaskStore::get(&store, id)
            .unwrap()
            .unwrap()
            .status
    };
    assert_eq!(status(&outside), keel::tasks::TaskStatus::Queued);
    assert_eq!(status(&inside), keel::tasks::TaskStatus::Cancelled);
}

/// `keel mcp-server --listen 127.0.0.1:0` with `token` in KEEL_MCP_TOKEN; the child and the
/// URL it serves.
fn listen(home: &Home, model: &MockServer, dir: &Path, token: &str) -> (Child, String) {
    let mut command = home.keel_anthropic(model);
    command
        .current_dir(dir)
        .env("KEEL_MCP_TOKEN", token)
        .args(["mcp-server", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("keel: MCP server at ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    (child, url)
}

/// The status code of a raw `initialize` POST to `url` with `authorization`.
fn status_of(url: &str, authorization: Option<&str>) -> u16 {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    let mut request = format!(
        "POST /{path} HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if let Some(auth) = authorization {
        request.push_str(&format!("Authorization: {auth}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

#[tokio::test]
async fn over_http_only_the_bearer_token_gets_in() {
    let Some(python) = python() else { return };
    let repo = TempRepo::new();
    let home = Home::new();
    let model = MockServer::start().await;
    Mock::given(RunnerRequest)
        .respond_with(sse_response(anthropic_sse(&text("hi over http"))))
        .mount(&model)
        .await;

    // No token, no server.
    let mut command = home.keel_anthropic(&model);
    command
        .current_dir(repo.path())
        .args(["mcp-server", "--listen", "127.0.0.1:0"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("KEEL_MCP_TOKEN"),
        "{}",
        stderr(&output)
    );

    let token = "mcp-test-token-5f0c9a1b2d3e4f";
    let (mut child, url) = listen(&home, &model, &repo.path(), token);
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );
    let (no, wrong, right) = tokio::task::spawn_blocking({
        let url = url.clone();
        move || {
            (
                status_of(&url, None),
                status_of(&url, Some("Bearer not-the-token")),
                status_of(&url, Some(&format!("Bearer {token}"))),
            )
        }
    })
    .await
    .unwrap();
    assert_eq!((no, wrong, right), (401, 401, 200));

    let out = host(
        &python,
        json!({
            "url": url, "token": token,
            "steps": [
                {"op": "list"},
                code("x", "/"),
                {"op": "start_and_wait", "arguments": {"task": "TASK: say hi"}, "timeout": 90},
            ],
        }),
    )
    .await;
    assert_eq!(out["steps"][0].as_array().unwrap().len(), 6);
    assert_eq!(out["steps"][1]["is_error"], true);
    // A task's end reaches an HTTP client too (on its stream of server messages).
    let task = &out["steps"][2];
    assert_eq!(task["log"]["data"]["status"], "completed", "{task}");
    assert_eq!(task["log"]["data"]["summary"], "hi over http", "{task}");
    child.kill().unwrap();
    child.wait().unwrap();
    // Only the task's runner asked the model: the refused `code` ran nothing.
    assert_eq!(request_bodies(&model).await.len(), 1);
}

#[tokio::test]
async fn a_gated_call_asks_the_host_s_user_through_elicitation_unless_the_flags_decide() {
    let Some(python) = python() else { return };
    // (flags, how the host's user answers (None: the host cannot ask), asked, committed)
    let cases: [(&[&str], Option<&str>, bool, bool); 5] = [
        (&[], Some("accept"), true, true),
        (&[], Some("decline"), true, false),
        (&[], None, false, false),
        (&["--approvals", "deny"], Some("accept"), false, false),
        (&["--approvals", "allow"], Some("decline"), false, true),
    ];
    for (flags, answer, asked, committed) in cases {
        let case = format!("{flags:?} {answer:?}");
        let repo = TempRepo::new();
        repo.write("notes.txt", "notes\n");
        let before = repo.head();
        let home = Home::new();
        let model = anthropic_server(&[
            tool_call("toolu_1", "git_commit", json!({"message": "Add notes"})),
            text("Done."),
        ])
        .await;
        let mut args = vec!["mcp-server"];
        args.extend(flags);
        let out = host(
            &python,
            json!({
                "args": args, "cwd": repo.path(), "env": server_env(&home, &model),
                "elicit": answer,
                "steps": [code("Commit the notes", repo.path())],
            }),
        )
        .await;
        assert_eq!(out["steps"][0]["is_error"], false, "{case}: {out}");
        let elicited = out["elicited"].as_array().unwrap();
        assert_eq!(elicited.len(), usize::from(asked), "{case}: {out}");
        if asked {
            let message = elicited[0]["message"].as_str().unwrap();
            assert!(message.starts_with("Allow git_commit"), "{case}: {message}");
            assert!(!message.contains("[y/N"), "{case}: {message}");
        }
        assert_eq!(repo.head() != before, committed, "{case}");
        // The model read the refusal (or the commit) in the call's result.
        let bodies = request_bodies(&model).await;
        let messages = bodies[1]["messages"].as_array().unwrap();
        let result = &messages[messages.len() - 1]["content"][0];
        assert_eq!(
            result["is_error"].as_bool().unwrap_or(false),
            !committed,
            "{case}: {result}"
        );
    }
}

#[tokio::test]
async fn sigterm_stops_the_stdio_server_though_the_host_keeps_stdin_open() {
    let repo = TempRepo::new();
    let home = Home::new();
    let model = anthropic_server(&[]).await;
    let mut command = home.keel_anthropic(&model);
    command
        .current_dir(repo.path())
        .arg("mcp-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#;
    writeln!(stdin, "{initialize}").unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["result"]["serverInfo"]["name"], "keel", "{line}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let exited = (0..100).find_map(|_| {
        std::thread::sleep(Duration::from_millis(50));
        child.try_wait().unwrap()
    });
    if exited.is_none() {
        child.kill().unwrap();
    }
    assert_eq!(exited.and_then(|status| status.code()), Some(0));
    drop(stdin);
}
