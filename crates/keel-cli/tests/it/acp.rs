//! `keel acp` driven by the real ACP client `acpx` against a scripted model: the streamed
//! text, tool calls with their kinds and diffs, and permission requests answered by
//! `--approve-all` / `--deny-all`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::acp::{converse, updates};
use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::peers;
use serde_json::{Value, json};

/// Runs `acpx ... exec PROMPT` with `keel acp` as the agent; its exit code and every
/// JSON-RPC message it printed.
async fn acpx(
    home: &Home,
    server: &wiremock::MockServer,
    repo: &TempRepo,
    approval: &str,
    prompt: &str,
) -> Option<(Option<i32>, Vec<Value>, String)> {
    let (node, script) = peers::acpx()?;
    let agent = format!("{} acp", env!("CARGO_BIN_EXE_keel"));
    // acpx starts the agent itself: keel's environment goes through it.
    let mut command = std::process::Command::new(node);
    command
        .arg(script)
        .args(["--agent", &agent, "--cwd"])
        .arg(repo.path())
        .args([
            "--format",
            "json",
            approval,
            "--timeout",
            "60",
            "exec",
            prompt,
        ])
        .env("HOME", home.path())
        .env("KEEL_HOME", home.keel_home())
        .env("ANTHROPIC_API_KEY", FAKE_KEY)
        .env("ANTHROPIC_BASE_URL", server.uri())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("OPENAI_API_KEY")
        .stdin(std::process::Stdio::null());
    let output = run(command).await;
    let messages = stdout(&output)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    Some((output.status.code(), messages, stderr(&output)))
}

fn stop_reason(messages: &[Value]) -> Option<String> {
    messages
        .iter()
        .find_map(|m| m["result"]["stopReason"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn acpx_streams_the_answer_and_shows_reads_and_edits_as_tool_calls() {
    let repo = TempRepo::new();
    repo.write("src/lib.rs", "pub fn answer() -> u32 { 41 }\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "read_file", json!({"path": "src/lib.rs"})),
        tool_call(
            "t2",
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "41", "new_string": "42"}),
        ),
        text("Fixed: answer() now returns 42."),
    ])
    .await;
    let Some((code, messages, err)) =
        acpx(&home, &server, &repo, "--approve-all", "fix answer()").await
    else {
        return;
    };
    assert_eq!(code, Some(0), "stderr: {err}\n{messages:#?}");
    let updates = updates(&messages);
    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    assert_eq!(text, "Fixed: answer() now returns 42.");
    let calls: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect();
    assert_eq!(calls.len(), 2, "{updates:#?}");
    assert_eq!(calls[0]["kind"], "read");
    assert_eq!(calls[1]["kind"], "edit");
    let diff = &calls[1]["content"][0];
    assert_eq!(diff["type"], "diff", "{diff}");
    assert_eq!(diff["oldText"], "41");
    assert_eq!(diff["newText"], "42");
    assert!(
        diff["path"].as_str().unwrap().ends_with("src/lib.rs"),
        "{diff}"
    );
    let finished: Vec<&str> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update")
        .filter_map(|u| u["status"].as_str())
        .collect();
    assert_eq!(finished, ["completed", "completed"]);
    assert_eq!(stop_reason(&messages).as_deref(), Some("end_turn"));
    assert_eq!(
        std::fs::read_to_string(repo.path().join("src/lib.rs")).unwrap(),
        "pub fn answer() -> u32 { 42 }\n"
    );
}

/// A session whose model wants to delete a file (a destructive call, so it is asked about).
/// acpx exits 5 (its PERMISSION_DENIED) when every permission request was rejected, though
/// the turn ended normally.
async fn deletion(approval: &str, exit_code: i32) -> Option<(TempRepo, Vec<Value>)> {
    let repo = TempRepo::new();
    repo.write("notes.txt", "keep me\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "run_command", json!({"command": "rm notes.txt"})),
        text("Done."),
    ])
    .await;
    let (code, messages, err) = acpx(&home, &server, &repo, approval, "delete the notes").await?;
    assert_eq!(code, Some(exit_code), "stderr: {err}\n{messages:#?}");
    assert!(
        messages
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "no permission request: {messages:#?}"
    );
    assert_eq!(stop_reason(&messages).as_deref(), Some("end_turn"));
    Some((repo, messages))
}

#[tokio::test]
async fn deny_all_leaves_the_files_and_the_turn_ends_normally() {
    let Some((repo, messages)) = deletion("--deny-all", 5).await else {
        return;
    };
    assert!(repo.path().join("notes.txt").exists());
    let failed = updates(&messages)
        .iter()
        .any(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed");
    assert!(failed, "{messages:#?}");
}

#[tokio::test]
async fn approve_all_runs_the_gated_call() {
    let Some((repo, _)) = deletion("--approve-all", 0).await else {
        return;
    };
    assert!(!repo.path().join("notes.txt").exists());
}

#[tokio::test]
async fn mcp_servers_the_client_passes_are_the_session_s_tools() {
    let Some(script) = peers::mcp_server("server-everything") else {
        return;
    };
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "t1",
            "mcp__everything__echo",
            json!({"message": "from the editor"}),
        ),
        text("done"),
    ])
    .await;
    let messages = converse(
        home.keel_anthropic(&server),
        vec![
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                   "params": {"cwd": repo.path(), "mcpServers": [
                       {"name": "everything", "command": "node",
                        "args": [script, "stdio"], "env": []}]}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                   "params": {"sessionId": "SESSION",
                              "prompt": [{"type": "text", "text": "echo"}]}}),
        ],
    )
    .await;
    assert_eq!(
        messages[0]["result"]["agentCapabilities"]["mcpCapabilities"]["http"], true,
        "{messages:#?}"
    );
    let update = messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .find(|u| u["sessionUpdate"] == "tool_call_update")
        .unwrap_or_else(|| panic!("no tool_call_update: {messages:#?}"));
    assert_eq!(update["status"], "completed", "{update}");
    assert_eq!(
        update["content"][0]["content"]["text"],
        "Echo: from the editor"
    );
    let stop = messages.last().unwrap();
    assert_eq!(stop["result"]["stopReason"], "end_turn", "{stop}");
}

#[tokio::test]
async fn a_client_s_bad_directory_or_unknown_session_is_an_error_reply_not_a_crash() {
    let home = Home::new();
    let server = anthropic_server(&[text("never asked")]).await;
    let replies = converse(
        home.keel_anthropic(&server),
        vec![
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                   "params": {"cwd": "/nonexistent/project", "mcpServers": []}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                   "params": {"sessionId": "no-such-session",
                              "prompt": [{"type": "text", "text": "hi"}]}}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "session/load",
                   "params": {"sessionId": "../../etc/passwd", "cwd": "/tmp", "mcpServers": []}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/new",
                   "params": {"cwd": "/tmp", "mcpServers": [
                       {"type": "sse", "name": "old", "url": "http://127.0.0.1:1/sse", "headers": []}]}}),
        ],
    )
    .await;
    let reply = |id: u64| replies.iter().find(|r| r["id"] == id).cloned().unwrap();
    assert!(reply(0)["result"]["protocolVersion"] == 1, "{replies:#?}");
    let new = reply(1);
    assert!(new["error"].is_object(), "{new}");
    assert!(new.to_string().contains("/nonexistent/project"), "{new}");
    let prompt = reply(2);
    assert!(prompt["error"].is_object(), "{prompt}");
    assert!(prompt.to_string().contains("no-such-session"), "{prompt}");
    let sse = reply(3);
    assert!(sse.to_string().contains("SSE is not supported"), "{sse}");
    let load = reply(4);
    assert!(load["error"].is_object(), "{load}");
    // The model was never asked.
    assert!(
        keel_test_support::mock::request_bodies(&server)
            .await
            .is_empty()
    );
}

#[tokio::test]
async fn session_modes_are_keel_s_approval_modes_and_read_only_refuses_edits() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "keep\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "t1",
            "patch_file",
            json!({"path": "notes.txt", "old_string": "keep", "new_string": "changed"}),
        ),
        text("could not"),
    ])
    .await;
    let messages = converse(
        home.keel_anthropic(&server),
        vec![
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                   "params": {"cwd": repo.path(), "mcpServers": []}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/set_mode",
                   "params": {"sessionId": "SESSION", "modeId": "yolo"}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/set_mode",
                   "params": {"sessionId": "SESSION", "modeId": "read-only"}}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
                   "params": {"sessionId": "SESSION",
                              "prompt": [{"type": "text", "text": "edit the notes"}]}}),
        ],
    )
    .await;
    let reply = |id: u64| {
        messages
            .iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .cloned()
            .unwrap()
    };
    let modes = &reply(1)["result"]["modes"];
    assert_eq!(modes["currentModeId"], "ask", "{modes}");
    let ids: Vec<&str> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["ask", "accept-edits", "read-only", "allow"]);
    assert!(
        reply(2).to_string().contains("no mode \\\"yolo\\\""),
        "{}",
        reply(2)
    );
    assert!(reply(3)["result"].is_object(), "{}", reply(3));
    // Read-only: the edit is refused without a question, and the file stays.
    assert!(
        !messages
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "{messages:#?}"
    );
    // Refused before it ran and without a question: the client meets the call once, as a
    // tool_call that has already failed, saying why.
    let calls: Vec<&Value> = messages
        .iter()
        .map(|m| &m["params"]["update"])
        .filter(|u| u["toolCallId"] == "t1")
        .collect();
    assert_eq!(calls.len(), 1, "{messages:#?}");
    assert_eq!(calls[0]["sessionUpdate"], "tool_call", "{}", calls[0]);
    assert_eq!(calls[0]["status"], "failed", "{}", calls[0]);
    assert_eq!(calls[0]["kind"], "edit", "{}", calls[0]);
    assert!(
        calls[0]["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("read-only"),
        "{}",
        calls[0]
    );
    assert_eq!(reply(4)["result"]["stopReason"], "end_turn");
    assert_eq!(
        std::fs::read_to_string(repo.path().join("notes.txt")).unwrap(),
        "keep\n"
    );
}

#[tokio::test]
async fn session_load_resumes_a_keel_session_and_replays_it() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "the answer is 42\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "read_file", json!({"path": "notes.txt"})),
        text("It says 42."),
        text("Still 42."),
    ])
    .await;
    let first = converse(
        home.keel_anthropic(&server),
        vec![
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/new",
                   "params": {"cwd": repo.path(), "mcpServers": []}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                   "params": {"sessionId": "SESSION",
                              "prompt": [{"type": "text", "text": "what do the notes say?"}]}}),
        ],
    )
    .await;
    assert_eq!(first[0]["result"]["agentCapabilities"]["loadSession"], true);
    let id = first[1]["result"]["sessionId"].as_str().unwrap().to_owned();
    // Another process, as an editor restarted: load it, then go on.
    let second = converse(
        home.keel_anthropic(&server),
        vec![
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "session/load",
                   "params": {"sessionId": id, "cwd": repo.path(), "mcpServers": []}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
                   "params": {"sessionId": id,
                              "prompt": [{"type": "text", "text": "and now?"}]}}),
        ],
    )
    .await;
    let load_reply = second
        .iter()
        .position(|m| m["id"] == 1 && m.get("method").is_none())
        .unwrap();
    assert!(second[load_reply]["result"].is_object(), "{second:#?}");
    let replayed: Vec<String> = second[..load_reply]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| {
            let update = &m["params"]["update"];
            format!(
                "{} {}",
                update["sessionUpdate"].as_str().unwrap(),
                update["content"]["text"]
                    .as_str()
                    .or(update["kind"].as_str())
                    .or(update["status"].as_str())
                    .unwrap_or_default()
            )
        })
        .collect();
    assert_eq!(
        replayed,
        [
            "user_message_chunk what do the notes say?",
            "tool_call read",
            "tool_call_update completed",
            "agent_message_chunk It says 42.",
            "available_commands_update ",
        ],
        "{second:#?}"
    );
    let answer: String = second[load_reply..]
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(answer, "Still 42.");
    // The model saw the whole conversation on the next turn.
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    let last = bodies.last().unwrap().to_string();
    assert!(
        last.contains("what do the notes say?") && last.contains("It says 42."),
        "{last}"
    );
}

#[tokio::test]
async fn a_client_asking_for_a_newer_protocol_is_answered_with_the_one_keel_speaks() {
    let home = Home::new();
    let server = anthropic_server(&[text("never asked")]).await;
    let replies = converse(
        home.keel_anthropic(&server),
        vec![json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                   "params": {"protocolVersion": 9, "clientCapabilities": {}}})],
    )
    .await;
    assert_eq!(replies[0]["result"]["protocolVersion"], 1, "{replies:#?}");
    assert_eq!(replies[0]["result"]["agentInfo"]["name"], "keel");
}
