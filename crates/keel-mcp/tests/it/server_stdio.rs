//! The tool server over a byte stream, driven by rmcp's own client: tools/list, tools/call,
//! the roots check (the server's and the client's), progress, cancellation, logging and
//! elicitation.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, deprecated)]

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::server_support::*;
use keel_mcp::server::LogLevel;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, CancelledNotificationParam, ClientRequest,
    ElicitationAction, NumberOrString, ProgressToken, RequestMetaObject,
};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

struct Fixture {
    _dir: tempfile::TempDir,
    base: PathBuf,
    work: PathBuf,
    outside: PathBuf,
    cancelled: Arc<Mutex<bool>>,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        let work = base.join("work");
        let outside = base.join("outside");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        Self {
            _dir: dir,
            base,
            work,
            outside,
            cancelled: Arc::default(),
        }
    }

    fn server(&self) -> keel_mcp::server::ToolServer {
        server(&self.work, &[], self.cancelled.clone())
    }
}

fn args(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

async fn call(
    client: &RunningService<RoleClient, TestClient>,
    name: &'static str,
    arguments: Value,
) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
        .await
        .unwrap()
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn touched(dir: &Path) -> bool {
    dir.join("touched").exists()
}

#[tokio::test]
async fn tools_list_gives_the_registry_s_definitions_with_read_only_hints() {
    let fx = Fixture::new();
    let client = connect(&fx.server(), TestClient::new(None, None)).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["ask", "echo", "slow", "touch"]);
    let echo = &tools[1];
    assert_eq!(echo.description.as_deref(), Some("Says the text back."));
    assert_eq!(
        echo.annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(true)
    );
    assert_eq!(
        tools[3].annotations.as_ref().and_then(|a| a.read_only_hint),
        Some(false)
    );
    assert_eq!(
        Value::Object((*echo.input_schema).clone())["properties"]["text"]["type"],
        "string"
    );
    let result = call(&client, "echo", json!({"text": "hi"})).await;
    assert_eq!(text(&result), "hi");
    assert_eq!(result.is_error, Some(false));
    // A mistake is an error result, not a protocol error.
    let result = call(&client, "echo", json!({})).await;
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("missing field `text`"), "{result:?}");
    let result = call(&client, "nope", json!({})).await;
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).starts_with("unknown tool \"nope\""),
        "{result:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_directory_inside_the_roots_runs_resolved_and_one_outside_runs_nothing() {
    let fx = Fixture::new();
    let client = connect(&fx.server(), TestClient::new(None, None)).await;

    // Inside, relative paths read from the working directory, given resolved to the tool.
    let result = call(&client, "touch", json!({"cwd": "sub/../sub"})).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(
        text(&result),
        format!("touched {}", fx.work.join("sub").display())
    );
    assert!(touched(&fx.work.join("sub")));

    // Outside: absolute, relative leading out, a symlink pointing out, a sibling whose name
    // starts like the root, something else than a string.
    std::os::unix::fs::symlink(&fx.outside, fx.work.join("link")).unwrap();
    std::fs::create_dir_all(fx.base.join("work2")).unwrap();
    for hostile in [
        json!(fx.outside.display().to_string()),
        json!("../outside"),
        json!("link"),
        json!(fx.work.join("link").display().to_string()),
        json!(fx.base.join("work2").display().to_string()),
        json!("/"),
    ] {
        let result = call(&client, "touch", json!({"cwd": hostile})).await;
        assert_eq!(result.is_error, Some(true), "{hostile}: {result:?}");
        assert!(
            text(&result).contains("is outside the allowed roots"),
            "{hostile}: {result:?}"
        );
    }
    let result = call(&client, "touch", json!({"cwd": ["/"]})).await;
    assert_eq!(result.is_error, Some(true));
    assert!(
        text(&result).contains("must be a directory path"),
        "{result:?}"
    );
    let result = call(&client, "touch", json!({"cwd": "missing"})).await;
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("directory not found"), "{result:?}");
    assert!(!touched(&fx.outside));
    assert!(!touched(&fx.base.join("work2")));
    assert!(!touched(&fx.base));
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_client_s_roots_narrow_the_server_s_and_never_widen_them() {
    let fx = Fixture::new();
    let sub = fx.work.join("sub");
    let tc = TestClient::new(Some(vec![uri(&sub), uri(&fx.outside)]), None);
    let roots = tc.roots.clone();
    let seen = tc.seen.clone();
    let client = connect(&fx.server(), tc).await;

    // The client's `outside` is not the server's to give; its `sub` narrows `work`.
    let result = call(&client, "touch", json!({"cwd": fx.outside})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let result = call(&client, "touch", json!({"cwd": fx.work})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(
        text(&result).contains(&format!("({})", sub.display())),
        "{result:?}"
    );
    let result = call(&client, "touch", json!({"cwd": sub})).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert!(!touched(&fx.outside) && !touched(&fx.work) && touched(&sub));
    assert_eq!(seen.lock().unwrap().roots_asked, 1, "the roots are kept");

    // The client's roots change: asked again. A root holding the server's leaves it whole.
    *roots.lock().unwrap() = Some(vec![uri(&fx.base)]);
    client.notify_roots_list_changed().await.unwrap();
    let mut result = None;
    for _ in 0..50 {
        let now = call(&client, "touch", json!({"cwd": fx.work})).await;
        if now.is_error == Some(false) {
            result = Some(now);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(result.is_some(), "the new roots were not used");
    assert!(touched(&fx.work));
    assert_eq!(seen.lock().unwrap().roots_asked, 2);

    // Roots naming nothing local allow nothing.
    *roots.lock().unwrap() = Some(vec!["https://example.com/repo".into()]);
    client.notify_roots_list_changed().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let result = call(&client, "touch", json!({"cwd": sub})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(text(&result).contains("allowed roots (none)"), "{result:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn server_roots_default_to_the_working_directory_and_may_be_several() {
    let fx = Fixture::new();
    let server = server(
        &fx.work,
        &[fx.outside.clone(), fx.work.join("sub")],
        fx.cancelled.clone(),
    );
    let client = connect(&server, TestClient::new(None, None)).await;
    // The working directory is not a root now: a call without a cwd may not work there.
    let result = call(&client, "touch", json!({"cwd": fx.work})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    for dir in [&fx.outside, &fx.work.join("sub")] {
        let result = call(&client, "touch", json!({"cwd": dir})).await;
        assert_eq!(result.is_error, Some(false), "{result:?}");
        assert!(touched(dir));
    }
    assert!(!touched(&fx.work));
    client.cancel().await.unwrap();
    assert!(
        keel_mcp::server::ToolServer::builder(keel_tool::ToolRegistry::new(), &fx.work)
            .roots([fx.base.join("missing")])
            .build()
            .is_err()
    );
}

#[tokio::test]
async fn progress_lines_and_heartbeats_reach_a_client_that_asked_and_cancel_stops_the_call() {
    let fx = Fixture::new();
    let tc = TestClient::new(None, None);
    let seen = tc.seen.clone();
    let client = connect(&fx.server(), tc).await;
    let mut meta = RequestMetaObject::new();
    meta.set_progress_token(ProgressToken(NumberOrString::String("tok-1".into())));
    let mut params = CallToolRequestParams::new("slow").with_arguments(args(json!({"lines": 2})));
    params.meta = Some(meta);
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(rmcp::model::Request::new(params)),
            Default::default(),
        )
        .await
        .unwrap();
    // Two lines, then heartbeats every 50 ms.
    for _ in 0..100 {
        if seen.lock().unwrap().progress.len() >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    {
        let seen = seen.lock().unwrap();
        let messages: Vec<&str> = seen
            .progress
            .iter()
            .map(|p| p.message.as_deref().unwrap_or_default())
            .collect();
        assert!(messages.len() >= 4, "{messages:?}");
        assert_eq!(&messages[..2], ["step 1", "step 2"]);
        assert!(messages[2].starts_with("slow running for"), "{messages:?}");
        let steps: Vec<f64> = seen.progress.iter().map(|p| p.progress).collect();
        assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
        // (rmcp's client may put its own token in place of ours: one token throughout.)
        let token = &seen.progress[0].progress_token;
        assert!(seen.progress.iter().all(|p| &p.progress_token == token));
    }
    assert!(!*fx.cancelled.lock().unwrap());
    client
        .notify_cancelled(CancelledNotificationParam::new(
            Some(handle.id.clone()),
            Some("stop".into()),
        ))
        .await
        .unwrap();
    for _ in 0..100 {
        if *fx.cancelled.lock().unwrap() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(*fx.cancelled.lock().unwrap(), "the tool was not cancelled");
    client.cancel().await.unwrap();

    // Without a progress token, nothing is sent.
    let tc = TestClient::new(None, None);
    let seen = tc.seen.clone();
    let client = connect(&fx.server(), tc).await;
    let result = call(&client, "echo", json!({"text": "x"})).await;
    assert_eq!(text(&result), "x");
    assert!(seen.lock().unwrap().progress.is_empty());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_host_application_logs_to_its_clients_and_asks_their_users() {
    let fx = Fixture::new();
    let server = fx.server();
    let yes = TestClient::new(None, Some(ElicitationAction::Accept));
    let seen = yes.seen.clone();
    let client = connect(&server, yes).await;
    assert_eq!(text(&call(&client, "ask", json!({})).await), "accepted");

    let clients = server.clients().list();
    assert_eq!(clients.len(), 1);
    assert!(clients[0].session_id().starts_with("mcp-"));
    assert!(clients[0].can_confirm());
    clients[0]
        .log(
            LogLevel::Info,
            "keel.tasks",
            json!({"task": "t1", "status": "completed"}),
        )
        .await
        .unwrap();
    for _ in 0..100 {
        if !seen.lock().unwrap().logs.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.logs.len(), 1);
        assert_eq!(seen.logs[0].logger.as_deref(), Some("keel.tasks"));
        assert_eq!(seen.logs[0].data["status"], "completed");
    }
    // Below the level the client sets, nothing is sent.
    client
        .set_level(rmcp::model::SetLevelRequestParams::new(
            rmcp::model::LoggingLevel::Warning,
        ))
        .await
        .unwrap();
    clients[0]
        .log(LogLevel::Info, "keel.tasks", json!({"status": "completed"}))
        .await
        .unwrap();
    clients[0]
        .log(LogLevel::Warning, "keel.tasks", json!({"status": "failed"}))
        .await
        .unwrap();
    for _ in 0..100 {
        if seen.lock().unwrap().logs.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.logs.len(), 2, "{:?}", seen.logs);
        assert_eq!(seen.logs[1].data["status"], "failed");
    }

    let no = connect(
        &server,
        TestClient::new(None, Some(ElicitationAction::Decline)),
    )
    .await;
    assert_eq!(text(&call(&no, "ask", json!({})).await), "declined");
    let cannot = connect(&server, TestClient::new(None, None)).await;
    assert_eq!(text(&call(&cannot, "ask", json!({})).await), "unavailable");
    assert_eq!(server.clients().list().len(), 3);
    let ids: Vec<String> = server
        .clients()
        .list()
        .iter()
        .map(|c| c.session_id().to_owned())
        .collect();
    assert_eq!(
        ids.iter().collect::<std::collections::HashSet<_>>().len(),
        3
    );
    // The session id is the tool's: background tasks started through it are recorded so.
    let result = call(&cannot, "touch", json!({"cwd": fx.work})).await;
    assert_eq!(result.is_error, Some(false));
    let session = std::fs::read_to_string(fx.work.join("touched")).unwrap();
    assert!(server.clients().get(&session).is_some(), "{session}");
    for c in [client, no, cannot] {
        c.cancel().await.unwrap();
    }
    for _ in 0..100 {
        if server.clients().list().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        server.clients().list().is_empty(),
        "closed clients stay listed"
    );
}
