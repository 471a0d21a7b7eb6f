//! Faults a long task must survive: a reply cut mid-stream is asked for again (the task still
//! ends with exit 0, nothing runs twice), and keel killed with SIGKILL at any moment leaves a
//! session that resumes into a valid conversation.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::time::Duration;

use crate::support::*;
use keel::provider::{ContentBlock, StopReason};
use keel_test_support::git::TempRepo;
use keel_test_support::raw_http::{Ending, RawHttpServer, RawResponse};
use keel_test_support::render::anthropic_sse;
use keel_test_support::rng::Rng;
use keel_test_support::scripted::reply;
use serde_json::{Value, json};

/// A reply that says something, then calls `run_command` with `command`.
fn talk_then_run(id: &str, command: &str) -> keel::provider::ToolUseResponse {
    reply(
        vec![
            ContentBlock::text("I will record that I ran."),
            ContentBlock::tool_use(id, "run_command", json!({ "command": command })),
        ],
        StopReason::ToolUse,
    )
}

#[tokio::test]
async fn a_stream_cut_mid_tool_call_is_asked_again_and_the_task_completes() {
    let repo = TempRepo::new();
    let home = Home::new();
    let call = talk_then_run("toolu_1", "echo ran >> count.txt");
    let whole = anthropic_sse(&call).into_bytes();
    // Cut inside the tool call's arguments, after the text has been streamed.
    let cut_at = find(&whole, b"input_json_delta") + 40;
    let server = RawHttpServer::start(vec![
        RawResponse::sse(vec![whole[..cut_at].to_vec()], Ending::Cut),
        RawResponse::sse(vec![whole.clone()], Ending::Complete),
        RawResponse::sse(
            vec![anthropic_sse(&text("Counted once.")).into_bytes()],
            Ending::Complete,
        ),
    ])
    .await;
    let mut command = home.keel();
    command
        .env("ANTHROPIC_API_KEY", FAKE_KEY)
        .env("ANTHROPIC_BASE_URL", server.url())
        .current_dir(repo.path())
        .args(["exec", "-y", "--output-format", "stream-json", "count"]);
    let output = run(command).await;
    assert_eq!(
        output.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(&output),
        stderr(&output)
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("count.txt")).unwrap(),
        "ran\n",
        "the cut call never ran, the retried one ran once"
    );
    assert_eq!(server.requests(), 3);
    let out = stdout(&output);
    let events: Vec<Value> = out
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        events
            .iter()
            .any(|event| event["type"] == "system" && event["subtype"] == "reply_discarded"),
        "UIs are told to drop the partial reply: {out}"
    );
    let last = events.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["result"], "Counted once.");
    // One assistant line per content block: the texts are the replies kept.
    let assistant_texts = events
        .iter()
        .filter(|event| {
            event["type"] == "assistant" && event["message"]["content"][0]["type"] == "text"
        })
        .count();
    assert_eq!(
        assistant_texts, 2,
        "the partial reply is not among the messages: {out}"
    );
}

fn find(haystack: &[u8], needle: &[u8]) -> usize {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
        .expect("the needle is in the stream")
}

/// The messages of a request to the Anthropic Messages API form a valid conversation: user
/// first, roles alternate, each `tool_use` is answered once in the next message, ids are unique
/// and not empty.
fn check_conversation(body: &Value) -> Result<(), String> {
    let messages = body["messages"]
        .as_array()
        .ok_or("the request has no messages")?;
    let mut seen = HashSet::new();
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"].as_str().unwrap_or("");
        let expected = if index % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            return Err(format!("message {index} is {role}, expected {expected}"));
        }
        let blocks = message["content"].as_array().cloned().unwrap_or_default();
        let calls: Vec<String> = blocks
            .iter()
            .filter(|block| block["type"] == "tool_use")
            .map(|block| block["id"].as_str().unwrap_or("").to_owned())
            .collect();
        for id in &calls {
            if id.is_empty() || !seen.insert(id.clone()) {
                return Err(format!("tool id {id:?} is empty or used twice"));
            }
        }
        if calls.is_empty() {
            continue;
        }
        let next = messages
            .get(index + 1)
            .ok_or(format!("the calls of message {index} are never answered"))?;
        let answered: Vec<String> = next["content"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .filter(|block| block["type"] == "tool_result")
            .map(|block| block["tool_use_id"].as_str().unwrap_or("").to_owned())
            .collect();
        let mut wanted = calls.clone();
        wanted.sort();
        let mut got = answered.clone();
        got.sort();
        if wanted != got {
            return Err(format!(
                "message {index} calls {calls:?}, the next answers {answered:?}"
            ));
        }
    }
    Ok(())
}

/// A model that takes a moment to answer and calls a command each turn, then ends.
async fn slow_script(calls: usize) -> wiremock::MockServer {
    use keel_test_support::mock::sse_response;
    use wiremock::matchers::{method, path};
    let server = wiremock::MockServer::start().await;
    for n in 0..=calls {
        let reply = if n < calls {
            talk_then_run(
                &format!("toolu_{n}"),
                &format!("sleep 0.0{n}; echo toolu_{n} >> ran.log"),
            )
        } else {
            text("All recorded.")
        };
        wiremock::Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(sse_response(anthropic_sse(&reply)).set_delay(Duration::from_millis(40)))
            .up_to_n_times(1)
            .mount(&server)
            .await;
    }
    server
}

/// Whether a session file in `dir` holds at least its first record, whole: what `--continue`
/// can resume.
fn holds_a_session(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|entry| {
            std::fs::read_to_string(entry.path()).is_ok_and(|text| text.contains('\n'))
        })
    })
}

/// keel killed with SIGKILL at random moments of a run of several calls, then continued: the
/// request after the resume is a valid conversation, no command ran twice, and the continued
/// run ends well.
#[tokio::test]
async fn a_session_killed_at_any_moment_resumes_into_a_valid_conversation() {
    let mut rng = Rng(0x6b65_656c);
    let runs = 40;
    for run_index in 0..runs {
        let repo = TempRepo::new();
        let home = Home::new();
        let server = slow_script(4).await;
        let mut command = home.keel_anthropic(&server);
        command
            .current_dir(repo.path())
            .args(["exec", "-y", "record four times"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut child = command.spawn().unwrap();
        let delay = Duration::from_millis(rng.below(700));
        tokio::time::sleep(delay).await;
        let _ = child.kill();
        let _ = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap();
        // A command keel had started may finish just after keel died (SIGKILL leaves keel no
        // time to kill it); the longest one here sleeps 30 ms.
        tokio::time::sleep(Duration::from_millis(300)).await;

        let ran = std::fs::read_to_string(repo.path().join("ran.log")).unwrap_or_default();
        if !holds_a_session(&home.keel_home().join("sessions")) {
            // Killed before the session's first record was written (also between creating its
            // file and writing its header): there is nothing to resume.
            continue;
        }
        let resumed = anthropic_server(&[text("Picked up where I was.")]).await;
        let mut command = home.keel_anthropic(&resumed);
        command
            .current_dir(repo.path())
            .args(["exec", "-y", "--continue", "go on"]);
        let output = run(command).await;
        let context = format!(
            "run {run_index}, killed after {delay:?}; stderr: {}",
            stderr(&output)
        );
        assert_eq!(output.status.code(), Some(0), "{context}");
        let requests = resumed.received_requests().await.unwrap();
        assert_eq!(requests.len(), 1, "{context}");
        let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
        if let Err(problem) = check_conversation(&body) {
            panic!("{context}: {problem}\n{body:#}");
        }
        let after = std::fs::read_to_string(repo.path().join("ran.log")).unwrap_or_default();
        assert_eq!(after, ran, "{context}: the resume ran nothing again");
        let mut lines = HashSet::new();
        for line in after.lines() {
            assert!(lines.insert(line), "{context}: {line} ran twice");
        }
    }
}
