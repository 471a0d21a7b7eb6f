//! `keel acp` driven by a client on the official ACP TypeScript SDK
//! (`@agentclientprotocol/sdk`, `tests/acp/sdk_client.mjs`) against a scripted model: the
//! exact `session/update`s of a turn, `session/load`'s replay, `session/cancel`, permission
//! requests and the client's MCP servers. The client checks every message keel sends against
//! the SDK's schemas for ACP v1; any that breaks them fails the test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::peers;
use serde_json::{Value, json};

const CLIENT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/acp/sdk_client.mjs");

/// Runs the SDK client on `scenario` (its `agent` is set to `keel acp`, with `keel`'s
/// environment): every event it printed, in order. `None` when the SDK is not installed.
async fn sdk_client(keel: std::process::Command, mut scenario: Value) -> Option<Vec<Value>> {
    let (node, sdk) = peers::acp_sdk()?;
    scenario["agent"] = json!([keel.get_program().to_str().unwrap(), "acp"]);
    let mut command = std::process::Command::new(node);
    command
        .arg(CLIENT)
        .arg(sdk)
        .arg(scenario.to_string())
        .stdin(std::process::Stdio::null());
    // keel's environment (its home, the fake key, the mock server) reaches keel through the
    // client, which starts it.
    for (name, value) in keel.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    let output = run(command).await;
    let err = stderr(&output);
    assert!(output.status.success(), "client failed: {err}");
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not an event ({e}): {line}\nstderr: {err}"))
        })
        .collect();
    well_formed(&events, &err);
    Some(events)
}

/// What every conversation must show: no message against the schema, nothing the SDK dropped
/// or complained of, no step the SDK failed, keel exiting 0 when its stdin closed, and every
/// `session/update` on the wire accepted by the SDK's own handler.
fn well_formed(events: &[Value], stderr: &str) {
    let bad: Vec<&Value> = events
        .iter()
        .filter(|e| {
            ["schema_error", "sdk_error", "rejected", "timeout"]
                .contains(&e["event"].as_str().unwrap())
        })
        .collect();
    assert!(bad.is_empty(), "{bad:#?}\nstderr: {stderr}");
    let exit = events.iter().find(|e| e["event"] == "exit").unwrap();
    assert_eq!(exit["code"], 0, "{exit}\nstderr: {stderr}");
    let summary = events.iter().find(|e| e["event"] == "summary").unwrap();
    assert_eq!(summary["updates"], summary["updatesHandled"], "{summary}");
}

fn initialize() -> Value {
    json!({"op": "initialize", "clientCapabilities":
        {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}})
}

fn new_session(cwd: impl AsRef<Path>) -> Value {
    let cwd = cwd.as_ref();
    json!({"op": "new", "cwd": cwd, "mcpServers": []})
}

fn prompt(text: &str) -> Value {
    json!({"op": "prompt", "text": text})
}

/// The `session/update` payloads among `events`, in order, but for the slash commands a
/// session offers when it starts or loads (`available_commands_update`; see
/// [`offered_commands`]).
fn updates(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["event"] == "update")
        .map(|e| &e["update"])
        .filter(|u| u["sessionUpdate"] != "available_commands_update")
        .collect()
}

/// The names of the slash commands offered in `events`' `available_commands_update`s.
fn offered_commands(events: &[Value]) -> Vec<Vec<&str>> {
    events
        .iter()
        .filter(|e| e["event"] == "update")
        .map(|e| &e["update"])
        .filter(|u| u["sessionUpdate"] == "available_commands_update")
        .map(|u| {
            u["availableCommands"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap())
                .collect()
        })
        .collect()
}

/// The replies to `method`, in order.
fn replies<'a>(events: &'a [Value], method: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event"] == "response" && e["method"] == method)
        .collect()
}

/// The agent text of `updates`, joined.
fn agent_text(updates: &[&Value]) -> String {
    updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect()
}

/// The kinds of `updates`, consecutive chunks of text counted once.
fn kinds(updates: &[&Value]) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for update in updates {
        let kind = update["sessionUpdate"].as_str().unwrap().to_owned();
        if kind.ends_with("_chunk") && kinds.last() == Some(&kind) {
            continue;
        }
        kinds.push(kind);
    }
    kinds
}

/// The events of one exchange: those after the reply before the `nth` (0-based) reply to
/// `method`, up to and with that reply.
fn turn<'a>(events: &'a [Value], method: &str, nth: usize) -> &'a [Value] {
    let ends: Vec<usize> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["event"] == "response" && e["method"] == method)
        .map(|(i, _)| i)
        .collect();
    let end = ends[nth];
    let start = events[..end]
        .iter()
        .rposition(|e| e["event"] == "response" || e["event"] == "error")
        .map_or(0, |i| i + 1);
    &events[start..=end]
}

#[tokio::test]
async fn a_fix_session_streams_exactly_the_read_the_edit_and_the_answer() {
    let repo = TempRepo::new();
    repo.write("src/lib.rs", "pub fn answer() -> u32 { 41 }\n");
    repo.commit("start");
    let home = Home::new();
    let answer = "Fixed: answer() now returns 42, as the tests expect.";
    let server = anthropic_server(&[
        tool_call("t1", "read_file", json!({"path": "src/lib.rs"})),
        tool_call(
            "t2",
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "41", "new_string": "42"}),
        ),
        text(answer),
    ])
    .await;
    let Some(events) = sdk_client(
        home.keel_anthropic(&server),
        json!({"permissions": ["allow_once"], "steps": [
            initialize(), new_session(repo.path()), prompt("fix answer()")]}),
    )
    .await
    else {
        return;
    };
    let init = &replies(&events, "initialize")[0]["result"];
    assert_eq!(init["protocolVersion"], 1, "{init}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    assert_eq!(
        init["agentCapabilities"]["mcpCapabilities"]["http"], true,
        "{init}"
    );
    let session_id = replies(&events, "session/new")[0]["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();

    let updates = updates(&events);
    assert!(
        events
            .iter()
            .filter(|e| e["event"] == "update")
            .all(|e| e["sessionId"] == session_id.as_str()),
        "{events:#?}"
    );
    assert_eq!(
        kinds(&updates),
        [
            "tool_call",
            "tool_call_update",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ],
        "{updates:#?}"
    );
    // The session offered its slash commands once, right after it started.
    let offered = offered_commands(&events);
    assert_eq!(offered.len(), 1, "{events:#?}");
    assert!(
        offered[0].contains(&"compact") && offered[0].contains(&"cost"),
        "{offered:?}"
    );
    let file = repo.path().join("src/lib.rs");
    let (read, read_done, edit, edit_done) = (updates[0], updates[1], updates[2], updates[3]);
    assert_eq!(read["toolCallId"], "t1", "{read}");
    assert_eq!(read["kind"], "read", "{read}");
    assert_eq!(read["status"], "in_progress", "{read}");
    assert_eq!(read["title"], "read_file src/lib.rs", "{read}");
    assert_eq!(read["rawInput"], json!({"path": "src/lib.rs"}), "{read}");
    assert_eq!(
        read["locations"][0]["path"],
        file.to_str().unwrap(),
        "{read}"
    );

    assert_eq!(read_done["toolCallId"], "t1", "{read_done}");
    assert_eq!(read_done["status"], "completed", "{read_done}");
    let output = read_done["content"][0]["content"]["text"].as_str().unwrap();
    assert!(output.contains("41"), "{read_done}");

    assert_eq!(edit["toolCallId"], "t2", "{edit}");
    assert_eq!(edit["kind"], "edit", "{edit}");
    assert_eq!(edit["title"], "patch_file src/lib.rs", "{edit}");
    let diff = &edit["content"][0];
    assert_eq!(diff["type"], "diff", "{edit}");
    assert_eq!(diff["path"], file.to_str().unwrap(), "{edit}");
    assert_eq!(diff["oldText"], "41", "{edit}");
    assert_eq!(diff["newText"], "42", "{edit}");

    assert_eq!(edit_done["toolCallId"], "t2", "{edit_done}");
    assert_eq!(edit_done["status"], "completed", "{edit_done}");
    assert_eq!(agent_text(&updates), answer);

    let stop = &replies(&events, "session/prompt")[0]["result"];
    assert_eq!(stop["stopReason"], "end_turn", "{stop}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "pub fn answer() -> u32 { 42 }\n"
    );
}

#[tokio::test]
async fn session_load_in_a_new_process_replays_the_history_then_the_conversation_goes_on() {
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
    let Some(first) = sdk_client(
        home.keel_anthropic(&server),
        json!({"steps": [initialize(), new_session(repo.path()),
                         prompt("what do the notes say?")]}),
    )
    .await
    else {
        return;
    };
    let id = replies(&first, "session/new")[0]["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = sdk_client(
        home.keel_anthropic(&server),
        json!({"steps": [
            initialize(),
            {"op": "load", "sessionId": id, "cwd": repo.path(), "mcpServers": []},
            prompt("and now?")]}),
    )
    .await
    .unwrap();
    let loaded = turn(&second, "session/load", 0);
    let replayed = updates(loaded);
    assert!(
        loaded
            .iter()
            .all(|e| e["event"] != "update" || e["sessionId"] == id.as_str()),
        "{loaded:#?}"
    );
    assert_eq!(
        kinds(&replayed),
        [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ],
        "{second:#?}"
    );
    assert_eq!(
        replayed[0]["content"]["text"], "what do the notes say?",
        "{replayed:#?}"
    );
    assert_eq!(replayed[1]["toolCallId"], "t1");
    assert_eq!(replayed[1]["kind"], "read");
    assert_eq!(replayed[1]["rawInput"], json!({"path": "notes.txt"}));
    assert_eq!(replayed[2]["toolCallId"], "t1");
    assert_eq!(replayed[2]["status"], "completed");
    assert_eq!(agent_text(&replayed), "It says 42.");
    // The replay matches what the first process streamed.
    let streamed = updates(&first);
    assert_eq!(replayed[1]["title"], streamed[0]["title"]);
    assert_eq!(
        replayed[2]["content"], streamed[1]["content"],
        "{replayed:#?}"
    );

    let next = turn(&second, "session/prompt", 0);
    assert_eq!(agent_text(&updates(next)), "Still 42.", "{second:#?}");
    assert_eq!(next.last().unwrap()["result"]["stopReason"], "end_turn");
    // The model saw the whole conversation on the next turn.
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    let last = bodies.last().unwrap().to_string();
    assert!(
        last.contains("what do the notes say?") && last.contains("It says 42."),
        "{last}"
    );
}

/// A model that calls `read_file` on `notes.txt` at once, then takes `delay` to answer; any
/// request that holds `next` (the prompt after the cancelled one) it answers `answer` at once,
/// whether or not the cancelled turn got as far as asking it again.
async fn slow_after_a_read(delay: Duration, next: &str, answer: &str) -> wiremock::MockServer {
    use keel_test_support::mock::sse_response;
    use keel_test_support::render::anthropic_sse;
    use wiremock::matchers::{body_string_contains, method, path};
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(body_string_contains(next))
        .respond_with(sse_response(anthropic_sse(&text(answer))))
        .with_priority(1)
        .mount(&server)
        .await;
    let read = tool_call("t1", "read_file", json!({"path": "notes.txt"}));
    let slow = text("Too late: this reply was cancelled.");
    for (reply, wait) in [(read, Duration::ZERO), (slow, delay)] {
        wiremock::Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(sse_response(anthropic_sse(&reply)).set_delay(wait))
            .up_to_n_times(1)
            .mount(&server)
            .await;
    }
    server
}

#[tokio::test]
async fn session_cancel_during_a_slow_reply_ends_the_turn_cancelled_and_the_session_goes_on() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "the answer is 42\n");
    repo.commit("start");
    let home = Home::new();
    let delay = Duration::from_secs(30);
    let server = slow_after_a_read(delay, "still there?", "Back again.").await;
    // The client cancels once the read is done, while the model thinks about its answer.
    let Some(events) = sdk_client(
        home.keel_anthropic(&server),
        json!({"steps": [
            initialize(),
            new_session(repo.path()),
            {"op": "prompt", "text": "read the notes",
             "cancel": {"afterUpdate": "tool_call_update"}},
            prompt("still there?")]}),
    )
    .await
    else {
        return;
    };
    assert!(
        events.iter().any(|e| e["event"] == "cancel_sent"),
        "{events:#?}"
    );
    let cancelled = turn(&events, "session/prompt", 0);
    let reply = cancelled.last().unwrap();
    assert_eq!(reply["result"]["stopReason"], "cancelled", "{events:#?}");
    // Long before the model's answer would have come.
    assert!(
        reply["elapsedMs"].as_u64().unwrap() < delay.as_millis() as u64 / 2,
        "{reply}"
    );
    assert_eq!(agent_text(&updates(cancelled)), "", "{cancelled:#?}");

    let next = turn(&events, "session/prompt", 1);
    assert_eq!(agent_text(&updates(next)), "Back again.", "{events:#?}");
    assert_eq!(next.last().unwrap()["result"]["stopReason"], "end_turn");
    assert!(
        !events.iter().any(|e| e.to_string().contains("Too late")),
        "{events:#?}"
    );
}

#[tokio::test]
async fn a_gated_call_asks_with_the_call_and_its_options_and_the_answer_decides() {
    let repo = TempRepo::new();
    repo.write("kept.txt", "keep me\n");
    repo.write("gone.txt", "delete me\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "run_command", json!({"command": "rm kept.txt"})),
        text("You said no."),
        tool_call("t2", "run_command", json!({"command": "rm gone.txt"})),
        text("Deleted."),
    ])
    .await;
    let Some(events) = sdk_client(
        home.keel_anthropic(&server),
        json!({"permissions": ["reject_once", "allow_once"], "steps": [
            initialize(), new_session(repo.path()),
            prompt("delete kept.txt"), prompt("delete gone.txt")]}),
    )
    .await
    else {
        return;
    };
    let session_id = replies(&events, "session/new")[0]["result"]["sessionId"].clone();
    let asked: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "permission_request")
        .map(|e| &e["params"])
        .collect();
    assert_eq!(asked.len(), 2, "{events:#?}");
    for (request, (id, command)) in asked
        .iter()
        .zip([("t1", "rm kept.txt"), ("t2", "rm gone.txt")])
    {
        assert_eq!(request["sessionId"], session_id, "{request}");
        let call = &request["toolCall"];
        assert_eq!(call["toolCallId"], id, "{request}");
        assert_eq!(call["title"], format!("run_command {command}"), "{request}");
        assert_eq!(call["kind"], "execute", "{request}");
        assert_eq!(call["rawInput"], json!({"command": command}), "{request}");
        let options = request["options"].as_array().unwrap();
        for option in options {
            for field in ["optionId", "name", "kind"] {
                assert!(
                    option[field].as_str().is_some_and(|s| !s.is_empty()),
                    "{option}"
                );
            }
        }
        let kinds: Vec<&str> = options
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        for kind in ["allow_once", "allow_always", "reject_once"] {
            assert!(kinds.contains(&kind), "{kinds:?}");
        }
        let mut ids: Vec<&str> = options
            .iter()
            .map(|o| o["optionId"].as_str().unwrap())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), options.len(), "{options:?}");
    }
    let finished: Vec<(&str, &str)> = updates(&events)
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] != "in_progress")
        .map(|u| {
            (
                u["toolCallId"].as_str().unwrap(),
                u["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(finished, [("t1", "failed"), ("t2", "completed")]);
    for reply in replies(&events, "session/prompt") {
        assert_eq!(reply["result"]["stopReason"], "end_turn", "{reply}");
    }
    assert!(repo.path().join("kept.txt").exists());
    assert!(!repo.path().join("gone.txt").exists());
}

#[tokio::test]
async fn mcp_servers_given_in_session_new_are_the_session_s_tools() {
    let Some(script) = peers::mcp_server("server-everything") else {
        return;
    };
    let Some((node, _)) = peers::acp_sdk() else {
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
    let events = sdk_client(
        home.keel_anthropic(&server),
        json!({"steps": [
            initialize(),
            {"op": "new", "cwd": repo.path(), "mcpServers": [
                {"name": "everything", "command": node, "args": [script, "stdio"], "env": []}]},
            prompt("echo")]}),
    )
    .await
    .unwrap();
    let updates = updates(&events);
    assert_eq!(
        kinds(&updates),
        ["tool_call", "tool_call_update", "agent_message_chunk"],
        "{updates:#?}"
    );
    assert_eq!(updates[0]["toolCallId"], "t1");
    assert_eq!(
        updates[0]["title"], "mcp__everything__echo",
        "{}",
        updates[0]
    );
    assert_eq!(updates[1]["status"], "completed", "{}", updates[1]);
    assert_eq!(
        updates[1]["content"][0]["content"]["text"], "Echo: from the editor",
        "{}",
        updates[1]
    );
    let stop = &replies(&events, "session/prompt")[0]["result"];
    assert_eq!(stop["stopReason"], "end_turn", "{stop}");
}

#[tokio::test]
async fn set_mode_switches_the_approval_mode_and_allow_runs_a_gated_call_without_asking() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "old notes\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "run_command", json!({"command": "rm notes.txt"})),
        text("Deleted."),
    ])
    .await;
    // Were keel to ask, the client would cancel, and the call would not run.
    let Some(events) = sdk_client(
        home.keel_anthropic(&server),
        json!({"permissions": ["cancelled"], "steps": [
            initialize(), new_session(repo.path()),
            {"op": "setMode", "modeId": "allow"},
            prompt("delete the notes")]}),
    )
    .await
    else {
        return;
    };
    let modes = &replies(&events, "session/new")[0]["result"]["modes"];
    assert_eq!(modes["currentModeId"], "ask", "{modes}");
    let ids: Vec<&str> = modes["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["ask", "accept-edits", "read-only", "allow"]);
    assert_eq!(replies(&events, "session/set_mode").len(), 1, "{events:#?}");
    assert!(
        !events.iter().any(|e| e["event"] == "permission_request"),
        "{events:#?}"
    );
    let updates = updates(&events);
    assert_eq!(
        kinds(&updates),
        [
            "current_mode_update",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk"
        ],
        "{updates:#?}"
    );
    assert_eq!(updates[0]["currentModeId"], "allow", "{}", updates[0]);
    assert_eq!(updates[2]["status"], "completed", "{}", updates[2]);
    assert!(!repo.path().join("notes.txt").exists());
}

/// ACP's order for a call: a `tool_call` announces it (and a permission request refers to
/// it), then `tool_call_update`s change it. keel announces a call only once it runs (the
/// engine's `ToolCallStarted` comes after approval), so a gated call is asked about before any
/// `tool_call`, and a denied or refused one gets a `tool_call_update` for an id no `tool_call`
/// announced.
#[tokio::test]
async fn every_call_is_announced_by_a_tool_call_before_it_is_asked_about_or_updated() {
    let repo = TempRepo::new();
    repo.write("kept.txt", "keep me\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "run_command", json!({"command": "rm kept.txt"})),
        text("You said no."),
    ])
    .await;
    let Some(events) = sdk_client(
        home.keel_anthropic(&server),
        json!({"permissions": ["reject_once"], "steps": [
            initialize(), new_session(repo.path()), prompt("delete kept.txt")]}),
    )
    .await
    else {
        return;
    };
    let mut announced: Vec<&str> = Vec::new();
    for event in &events {
        let (call, id) = match event["event"].as_str().unwrap() {
            "update" => (&event["update"], &event["update"]["toolCallId"]),
            "permission_request" => (&event["params"], &event["params"]["toolCall"]["toolCallId"]),
            _ => continue,
        };
        let Some(id) = id.as_str() else { continue };
        if call["sessionUpdate"] == "tool_call" {
            announced.push(id);
        } else {
            assert!(announced.contains(&id), "{id} not announced: {events:#?}");
        }
    }
    assert_eq!(announced, ["t1"], "{events:#?}");
}

#[tokio::test]
async fn an_editor_offering_its_files_gets_the_reads_and_the_edit_through_the_sdk() {
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
        text("Fixed."),
    ])
    .await;
    let file = repo.path().canonicalize().unwrap().join("src/lib.rs");
    let buffer = "// not saved yet\npub fn answer() -> u32 { 41 }\n";
    let Some(events) = sdk_client(
        home.keel_anthropic(&server),
        json!({"permissions": ["allow_once"], "files": {file.to_str().unwrap(): buffer},
               "steps": [
            {"op": "initialize", "clientCapabilities":
                {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": false}},
            new_session(repo.path()), prompt("fix answer()")]}),
    )
    .await
    else {
        return;
    };
    let files: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["event"] == "fs_read" || e["event"] == "fs_write")
        .map(|e| (e["event"].as_str().unwrap(), e["path"].as_str().unwrap()))
        .collect();
    let path = file.to_str().unwrap();
    assert_eq!(
        files,
        [("fs_read", path), ("fs_read", path), ("fs_write", path)],
        "{events:#?}"
    );
    let written = events.iter().find(|e| e["event"] == "fs_write").unwrap();
    assert_eq!(
        written["content"],
        "// not saved yet\npub fn answer() -> u32 { 42 }\n"
    );
    let read = updates(&events)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == "t1")
        .unwrap();
    assert!(
        read["content"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("1\t// not saved yet"),
        "{read}"
    );
    // The editor saves when it will: the disk is as it was.
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "pub fn answer() -> u32 { 41 }\n"
    );
    let stop = &replies(&events, "session/prompt")[0]["result"];
    assert_eq!(stop["stopReason"], "end_turn", "{stop}");
}
