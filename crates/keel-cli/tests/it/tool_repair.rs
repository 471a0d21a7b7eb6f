//! A small local model that writes its tool call as JSON in its text, with an argument
//! misspelt, still gets the call run through `keel exec` on the OpenAI-compatible back end;
//! keel says it repaired the call and counts it in the JSON result.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::*;
use keel_test_support::git::TempRepo;
use serde_json::Value;

const CALL_AS_TEXT: &str =
    "```json\n{\"name\": \"read_file\", \"arguments\": {\"Path\": \"notes.txt\"}}\n```";

#[tokio::test]
async fn a_call_written_as_text_runs_and_is_reported() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "alpha\nbeta\n");
    let home = Home::new();
    let server = openai_server(&[text(CALL_AS_TEXT), text("The notes say alpha and beta.")]).await;
    let mut command = home.keel_openai(&server);
    command.current_dir(repo.path()).args([
        "exec",
        "--model",
        "qwen3:8b",
        "What do the notes say?",
    ]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "The notes say alpha and beta.\n");
    let progress = stderr(&output);
    assert!(
        progress.contains(
            "keel: repaired a tool call: read a call of read_file from the reply's text; \
             read_file's arguments read \"Path\" as \"path\""
        ),
        "{progress}"
    );
    // The file's text went back to the model as the call's result.
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let messages = bodies[1]["messages"].as_array().unwrap();
    let call = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    let calls = call["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["function"]["name"], "read_file");
    let arguments: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments["path"], "notes.txt");
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(result["tool_call_id"], calls[0]["id"]);
    assert!(result["content"].as_str().unwrap().contains("alpha"));
}

#[tokio::test]
async fn the_json_result_counts_repaired_calls() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "alpha\n");
    let home = Home::new();
    let server = openai_server(&[text(CALL_AS_TEXT), text("alpha")]).await;
    let mut command = home.keel_openai(&server);
    command.current_dir(repo.path()).args([
        "-p",
        "--output-format",
        "json",
        "--model",
        "qwen3:8b",
        "What do the notes say?",
    ]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let result: Value = serde_json::from_str(stdout(&output).trim()).unwrap();
    assert_eq!(result["result"], "alpha");
    assert_eq!(result["keel_repaired_tool_calls"], 1);
}
