//! What an editor sees of `keel acp` and what it offers it, over the raw protocol: its files
//! behind the file tools (and never a path the sandbox refuses), permission answers that last
//! the session, keel's slash commands, thinking, attached context, command output and modes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use crate::support::acp::{converse, converse_answering, open, prompt, reply as reply_to, updates};
use crate::support::*;
use keel::provider::{ContentBlock, StopReason};
use keel_test_support::git::TempRepo;
use keel_test_support::images::TINY_PNG;
use keel_test_support::scripted::reply;
use serde_json::{Value, json};

/// The updates that ended a call, in order: a `tool_call_update`, or for a call refused
/// before it ran without a question, the `tool_call` that showed it already ended.
fn finished(messages: &[Value]) -> Vec<Value> {
    updates(messages)
        .into_iter()
        .filter(|u| matches!(u["status"].as_str(), Some("completed" | "failed")))
        .collect()
}

/// The text of a finished call's first content block.
fn output(update: &Value) -> String {
    update["content"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_editor_s_buffers_back_the_file_tools_and_refused_paths_never_reach_it() {
    let repo = TempRepo::new();
    repo.write("src/lib.rs", "pub fn answer() -> u32 { 41 }\n");
    repo.commit("start");
    // A symlink in the repository that leads out of it, to a file the editor would give.
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("private.txt"), "PRIVATE-CONTENT\n").unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("private.txt"),
        repo.path().join("link.txt"),
    )
    .unwrap();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "t1",
            "read_file",
            json!({"path": "src/lib.rs", "start_line": 1}),
        ),
        tool_call("t2", "read_file", json!({"path": "link.txt"})),
        tool_call(
            "t3",
            "patch_file",
            json!({"path": "src/lib.rs", "old_string": "41", "new_string": "42"}),
        ),
        text("done"),
    ])
    .await;
    let lib = repo.path().canonicalize().unwrap().join("src/lib.rs");
    let buffer = "// unsaved\npub fn answer() -> u32 { 41 }\n";
    let asked: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = asked.clone();
    let buffered = lib.clone();
    let mut requests = open(
        repo.path(),
        json!({"fs": {"readTextFile": true, "writeTextFile": true}}),
    );
    requests.push(prompt(2, "fix answer()"));
    let messages = converse_answering(home.keel_anthropic(&server), requests, move |request| {
        log.lock().unwrap().push(request.clone());
        match request["method"].as_str().unwrap() {
            "fs/read_text_file" => {
                if request["params"]["path"] == json!(buffered) {
                    json!({"result": {"content": buffer}})
                } else {
                    json!({"result": {"content": "PRIVATE-CONTENT from the editor\n"}})
                }
            }
            "fs/write_text_file" => json!({"result": {}}),
            "session/request_permission" => {
                json!({"result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}})
            }
            other => panic!("unexpected request {other}"),
        }
    })
    .await;
    let first = updates(&messages)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(first["kind"], "read");
    assert_eq!(first["locations"][0]["line"], 1, "{first}");
    let ends = finished(&messages);
    assert_eq!(ends.len(), 3, "{messages:#?}");
    assert!(
        output(&ends[0]).contains("1\t// unsaved"),
        "{}",
        output(&ends[0])
    );
    assert_eq!(ends[1]["status"], "failed", "{}", ends[1]);
    assert!(
        !output(&ends[1]).contains("PRIVATE-CONTENT"),
        "{}",
        output(&ends[1])
    );
    assert_eq!(ends[2]["status"], "completed", "{}", ends[2]);
    let asked = asked.lock().unwrap();
    let fs: Vec<(String, String)> = asked
        .iter()
        .filter(|r| r["method"].as_str().unwrap().starts_with("fs/"))
        .map(|r| {
            (
                r["method"].as_str().unwrap().to_owned(),
                r["params"]["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let lib = lib.display().to_string();
    assert_eq!(
        fs,
        [
            ("fs/read_text_file".to_owned(), lib.clone()),
            ("fs/read_text_file".to_owned(), lib.clone()),
            ("fs/write_text_file".to_owned(), lib),
        ],
        "the link out of the repository never reached the editor"
    );
    let write = asked
        .iter()
        .find(|r| r["method"] == "fs/write_text_file")
        .unwrap();
    assert_eq!(
        write["params"]["content"],
        "// unsaved\npub fn answer() -> u32 { 42 }\n"
    );
    // The editor writes the file when it saves: keel did not write it behind its back.
    assert_eq!(
        std::fs::read_to_string(repo.path().join("src/lib.rs")).unwrap(),
        "pub fn answer() -> u32 { 41 }\n"
    );
    assert_eq!(reply_to(&messages, 2)["result"]["stopReason"], "end_turn");
}

#[tokio::test]
async fn rejecting_always_covers_the_rest_of_the_session_without_asking_again() {
    let repo = TempRepo::new();
    repo.write("a.txt", "keep\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "run_command", json!({"command": "rm a.txt"})),
        tool_call("t2", "run_command", json!({"command": "rm  a.txt"})),
        text("I could not."),
    ])
    .await;
    let mut requests = open(repo.path(), json!({}));
    requests.push(prompt(2, "remove a.txt"));
    let messages = converse_answering(home.keel_anthropic(&server), requests, |request| {
        assert_eq!(request["method"], "session/request_permission");
        json!({"result": {"outcome": {"outcome": "selected", "optionId": "reject_always"}}})
    })
    .await;
    let questions: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect();
    assert_eq!(questions.len(), 1, "{messages:#?}");
    // The client sees the call, pending, before it is asked about it; once.
    let shown = messages
        .iter()
        .position(|m| {
            m["params"]["update"]["sessionUpdate"] == "tool_call"
                && m["params"]["update"]["toolCallId"] == "t1"
        })
        .unwrap_or_else(|| panic!("{messages:#?}"));
    let asked = messages
        .iter()
        .position(|m| m["method"] == "session/request_permission")
        .unwrap();
    assert!(shown < asked, "{messages:#?}");
    // Pending is the default status, which the SDK leaves out.
    let status = &messages[shown]["params"]["update"]["status"];
    assert!(status.is_null() || status == "pending", "{status}");
    assert_eq!(messages[shown]["params"]["update"]["kind"], "execute");
    let announced = updates(&messages)
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call" && u["toolCallId"] == "t1")
        .count();
    assert_eq!(announced, 1, "{messages:#?}");
    let options: Vec<(&str, &str)> = questions[0]["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| (o["kind"].as_str().unwrap(), o["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        options,
        [
            ("allow_once", "Allow once"),
            (
                "allow_always",
                "Always allow `rm a.txt` (this exact command) in this session"
            ),
            ("reject_once", "Reject"),
            (
                "reject_always",
                "Always reject `rm a.txt` (this exact command) in this session"
            ),
        ]
    );
    let ends = finished(&messages);
    assert_eq!(ends.len(), 2, "{messages:#?}");
    assert!(ends.iter().all(|u| u["status"] == "failed"), "{ends:#?}");
    assert!(
        output(&ends[1])
            .contains("rejected `rm a.txt` (this exact command) for the rest of this session"),
        "{}",
        output(&ends[1])
    );
    assert!(repo.path().join("a.txt").exists());
}

#[tokio::test]
async fn a_protected_path_offers_no_always_allow() {
    let repo = TempRepo::new();
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "t1",
            "write_file",
            json!({"path": ".mcp.json", "content": "{\"mcpServers\": {}}"}),
        ),
        text("ok"),
    ])
    .await;
    let mut requests = open(repo.path(), json!({}));
    // Accepting edits does not cover a file that grants powers: it is asked about.
    requests.push(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/set_mode",
                         "params": {"sessionId": "SESSION", "modeId": "accept-edits"}}),
    );
    requests.push(prompt(3, "configure"));
    let messages = converse_answering(
        home.keel_anthropic(&server),
        requests,
        |_| json!({"result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}}}),
    )
    .await;
    let question = messages
        .iter()
        .find(|m| m["method"] == "session/request_permission")
        .unwrap_or_else(|| panic!("not asked: {messages:#?}"));
    let kinds: Vec<&str> = question["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allow_once", "reject_once", "reject_always"]);
    assert!(!repo.path().join(".mcp.json").exists());
}

#[tokio::test]
async fn slash_commands_are_offered_and_run_without_the_model() {
    let repo = TempRepo::new();
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[text("It is a hosts file.")]).await;
    let mut requests = open(repo.path(), json!({}));
    requests.push(prompt(2, "/cost"));
    requests.push(prompt(3, "/context"));
    requests.push(prompt(4, "/skills no-such-skill"));
    // Not a command: a prompt that starts with a path goes to the model.
    requests.push(prompt(5, "/etc/hosts: what is it?"));
    let messages = converse(home.keel_anthropic(&server), requests).await;
    let offered = updates(&messages)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "available_commands_update")
        .unwrap_or_else(|| panic!("no commands offered: {messages:#?}"));
    let names: Vec<&str> = offered["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "compact", "context", "cost", "rewind", "mcp", "agents", "skills", "tasks"
        ]
    );
    // What each prompt answered: the message chunks between its request and its reply.
    let answer = |id: u64| -> String {
        let end = messages
            .iter()
            .position(|m| m["id"] == id && m.get("method").is_none())
            .unwrap();
        let start = messages[..end]
            .iter()
            .rposition(|m| m.get("method").is_none())
            .unwrap();
        messages[start..end]
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
            .collect()
    };
    assert_eq!(answer(2), "tokens: 0 input, 0 output · cost: $0.0000");
    assert!(answer(3).contains("system prompt"), "{}", answer(3));
    assert!(answer(4).contains("no-such-skill"), "{}", answer(4));
    assert_eq!(answer(5), "It is a hosts file.");
    for id in 2..=5 {
        assert_eq!(reply_to(&messages, id)["result"]["stopReason"], "end_turn");
    }
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    assert_eq!(bodies.len(), 1, "only the last prompt asked the model");
}

#[tokio::test]
async fn thinking_streams_as_thought_chunks_and_attached_files_and_images_reach_the_model() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        reply(
            vec![
                ContentBlock::Thinking {
                    thinking: "The notes say 42, so answer that.".into(),
                    signature: "c2lnbmF0dXJl".into(),
                },
                ContentBlock::text("42."),
            ],
            StopReason::EndTurn,
        ),
        text("A single pixel."),
    ])
    .await;
    let mut requests = open(repo.path(), json!({}));
    requests.push(json!({"jsonrpc": "2.0", "id": 2, "method": "session/prompt",
        "params": {"sessionId": "SESSION", "prompt": [
            {"type": "text", "text": "What do these say?"},
            {"type": "resource_link", "name": "spec.md", "uri": "file:///work/spec.md"},
            {"type": "resource", "resource": {"uri": "file:///work/notes.md", "text": "the answer is 42"}}
        ]}}));
    // A screenshot, then an "image" that is a web page: the page is refused by name.
    requests.push(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": {"sessionId": "SESSION", "prompt": [
            {"type": "text", "text": "and this?"},
            {"type": "image", "mimeType": "image/png", "data": TINY_PNG}
        ]}}),
    );
    requests.push(
        json!({"jsonrpc": "2.0", "id": 4, "method": "session/prompt",
        "params": {"sessionId": "SESSION", "prompt": [
            {"type": "image", "mimeType": "text/html", "data": "PGh0bWw+"}
        ]}}),
    );
    let messages = converse(home.keel_anthropic(&server), requests).await;
    let init = &reply_to(&messages, 0)["result"];
    assert_eq!(init["agentInfo"]["name"], "keel", "{init}");
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    let text_of = |kind: &str| -> String {
        updates(&messages)
            .iter()
            .filter(|u| u["sessionUpdate"] == kind)
            .filter_map(|u| u["content"]["text"].as_str())
            .collect()
    };
    assert_eq!(
        text_of("agent_thought_chunk"),
        "The notes say 42, so answer that."
    );
    assert_eq!(text_of("agent_message_chunk"), "42.A single pixel.");
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    let sent = bodies[0]["messages"][0].to_string();
    assert!(
        sent.contains("What do these say?\\n[@spec.md](file:///work/spec.md)"),
        "{sent}"
    );
    assert!(
        sent.contains(
            "<context ref=\\\"file:///work/notes.md\\\">\\nthe answer is 42\\n</context>"
        ),
        "{sent}"
    );
    let last = bodies[1]["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"][0]["text"], "and this?", "{last}");
    assert_eq!(last["content"][1]["type"], "image", "{last}");
    assert_eq!(last["content"][1]["source"]["data"], TINY_PNG, "{last}");
    let page = reply_to(&messages, 4);
    assert!(
        page["error"].to_string().contains("unsupported media type"),
        "{page}"
    );
    assert_eq!(
        bodies.len(),
        2,
        "the refused prompt never reached the model"
    );
}

#[tokio::test]
async fn command_output_is_fenced_and_a_mode_change_is_announced() {
    let repo = TempRepo::new();
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "t1",
            "run_command",
            json!({"command": "printf 'one\\ntwo\\n'"}),
        ),
        text("printed"),
    ])
    .await;
    let mut requests = open(repo.path(), json!({}));
    requests.push(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/set_mode",
                         "params": {"sessionId": "SESSION", "modeId": "allow"}}),
    );
    requests.push(prompt(3, "print"));
    let messages = converse(home.keel_anthropic(&server), requests).await;
    let mode = updates(&messages)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "current_mode_update")
        .unwrap_or_else(|| panic!("{messages:#?}"));
    assert_eq!(mode["currentModeId"], "allow");
    let call = updates(&messages)
        .into_iter()
        .find(|u| u["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(call["kind"], "execute");
    assert_eq!(call["title"], "run_command printf 'one\\ntwo\\n'");
    let ends = finished(&messages);
    assert_eq!(ends[0]["status"], "completed", "{ends:#?}");
    let shown = output(&ends[0]);
    assert!(shown.starts_with("```console\n"), "{shown}");
    assert!(shown.contains("one\ntwo"), "{shown}");
    assert!(shown.ends_with("\n```"), "{shown}");
}
