//! The official Claude Agent SDKs — Python (`claude-agent-sdk`) and TypeScript
//! (`@anthropic-ai/claude-agent-sdk`) — driving the built keel binary as their `cli_path` /
//! `pathToClaudeCodeExecutable`, against the scripted model server: their message parsers
//! take every line keel prints, and the control protocol works (initialize, can_use_tool,
//! interrupt, hook callbacks, in-process MCP servers). Each test runs through both SDKs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::peers;
use serde_json::{Value, json};

const PYTHON_DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/claude_sdk/driver.py");
const TS_DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/claude_sdk/driver.mjs");

/// Which official SDK drives keel.
#[derive(Debug, Clone, Copy)]
enum Sdk {
    Python,
    TypeScript,
}

const SDKS: [Sdk; 2] = [Sdk::Python, Sdk::TypeScript];

/// What the drivers print, made alike: a result message is `cls` `ResultMessage` from both.
fn normalized(mut line: Value) -> Value {
    let class = match (line["kind"].as_str(), line["type"].as_str()) {
        (Some("message"), Some("result")) => Some("ResultMessage"),
        (Some("message"), Some("assistant")) => Some("AssistantMessage"),
        (Some("message"), Some("system")) => Some("SystemMessage"),
        (Some("message"), Some("user")) => Some("UserMessage"),
        _ => None,
    };
    if let Some(class) = class {
        line["cls"] = json!(class);
        // The TypeScript driver shows the API's blocks: a tool call's name is in them as in
        // the Python driver's.
    }
    line
}

/// Runs `sdk`'s driver `scenario` with `prompts` in `repo`; every line it printed, and
/// whether it exited 0. `None` when that SDK is not installed (outside CI).
async fn sdk(
    which: Sdk,
    home: &Home,
    server: &wiremock::MockServer,
    repo: &TempRepo,
    scenario: &str,
    prompts: &[&str],
    env: &[(&str, &str)],
) -> Option<(bool, Vec<Value>, String)> {
    // keel's own environment reaches keel through the SDK, which passes its environment on.
    let keel = home.keel_anthropic(server);
    let mut command = match which {
        Sdk::Python => {
            let mut command = std::process::Command::new(peers::claude_sdk_python()?);
            command.arg(PYTHON_DRIVER);
            command
        }
        Sdk::TypeScript => {
            let (node, package) = peers::claude_sdk_ts()?;
            let mut command = std::process::Command::new(node);
            command.arg(TS_DRIVER).arg(package);
            command
        }
    };
    command.arg(scenario);
    for (name, value) in keel.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    command
        .env("KEEL_BIN", keel.get_program())
        .env("REPO", repo.path())
        .env("PROMPTS", json!(prompts).to_string())
        .stdin(std::process::Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let output = run(command).await;
    let lines = stdout(&output)
        .lines()
        .map(|line| {
            normalized(
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not a line of the driver ({e}): {line}")),
            )
        })
        .collect();
    Some((output.status.success(), lines, stderr(&output)))
}

/// The messages of `class` among `lines`.
fn of<'a>(lines: &'a [Value], class: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["kind"] == "message" && l["cls"] == class)
        .collect()
}

#[tokio::test]
async fn query_runs_a_read_edit_test_answer_session_and_every_message_parses() {
    for which in SDKS {
        query_runs_a_read_edit_test_answer_session_and_every_message_parses_through(which).await;
    }
}

async fn query_runs_a_read_edit_test_answer_session_and_every_message_parses_through(which: Sdk) {
    let repo = TempRepo::new();
    repo.write("calc.py", "def add(a, b):\n    return a - b\n");
    repo.write(
        "test_calc.py",
        "from calc import add\nassert add(2, 3) == 5\nprint('ok')\n",
    );
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "read_file", json!({"path": "calc.py"})),
        tool_call(
            "t2",
            "patch_file",
            json!({"path": "calc.py", "old_string": "a - b", "new_string": "a + b"}),
        ),
        tool_call(
            "t3",
            "run_command",
            json!({"command": "python3 test_calc.py"}),
        ),
        text("Fixed: add subtracted. Tests pass."),
    ])
    .await;
    let Some((ok, lines, err)) =
        sdk(which, &home, &server, &repo, "query", &["fix add"], &[]).await
    else {
        return;
    };
    assert!(ok, "{which:?}: {lines:#?}\nstderr: {err}");
    let results = of(&lines, "ResultMessage");
    assert_eq!(results.len(), 1, "{lines:#?}");
    assert_eq!(results[0]["result"], "Fixed: add subtracted. Tests pass.");
    assert_eq!(results[0]["subtype"], "success");
    assert_eq!(results[0]["is_error"], false);
    let init = of(&lines, "SystemMessage");
    assert!(init.iter().any(|m| m["subtype"] == "init"), "{lines:#?}");
    let tools: Vec<&str> = of(&lines, "AssistantMessage")
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap())
        .filter_map(|b| b["name"].as_str())
        .collect();
    assert_eq!(tools, ["read_file", "patch_file", "run_command"]);
    assert_eq!(
        std::fs::read_to_string(repo.path().join("calc.py")).unwrap(),
        "def add(a, b):\n    return a + b\n"
    );
}

#[tokio::test]
async fn a_client_session_with_two_prompts_carries_the_first_answer_into_the_second() {
    for which in SDKS {
        a_client_session_with_two_prompts_carries_the_first_answer_into_the_second_through(which)
            .await;
    }
}

async fn a_client_session_with_two_prompts_carries_the_first_answer_into_the_second_through(
    which: Sdk,
) {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("The first answer."), text("The second answer.")]).await;
    let Some((ok, lines, err)) = sdk(
        which,
        &home,
        &server,
        &repo,
        "client",
        &["first question", "second question"],
        &[],
    )
    .await
    else {
        return;
    };
    assert!(ok, "{which:?}: {lines:#?}\nstderr: {err}");
    let results: Vec<&str> = of(&lines, "ResultMessage")
        .iter()
        .map(|m| m["result"].as_str().unwrap())
        .collect();
    assert_eq!(results, ["The first answer.", "The second answer."]);
    // One session: both results name it.
    let ids: Vec<&Value> = of(&lines, "ResultMessage")
        .iter()
        .map(|m| &m["session_id"])
        .collect();
    assert_eq!(ids[0], ids[1]);
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    let second = bodies[1].to_string();
    assert!(
        second.contains("first question")
            && second.contains("The first answer.")
            && second.contains("second question"),
        "{second}"
    );
}

#[tokio::test]
async fn a_can_use_tool_callback_that_denies_a_write_leaves_the_file_and_tells_the_model() {
    for which in SDKS {
        a_can_use_tool_callback_that_denies_a_write_leaves_the_file_and_tells_the_model_through(
            which,
        )
        .await;
    }
}

async fn a_can_use_tool_callback_that_denies_a_write_leaves_the_file_and_tells_the_model_through(
    which: Sdk,
) {
    let repo = TempRepo::new();
    repo.write("notes.txt", "keep\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "t1",
            "write_file",
            json!({"path": "notes.txt", "content": "overwritten\n"}),
        ),
        text("I was not allowed to write."),
    ])
    .await;
    let Some((ok, lines, err)) = sdk(
        which,
        &home,
        &server,
        &repo,
        "deny",
        &["rewrite the notes"],
        &[],
    )
    .await
    else {
        return;
    };
    assert!(ok, "{which:?}: {lines:#?}\nstderr: {err}");
    let asked: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "asked").collect();
    assert_eq!(asked.len(), 1, "{lines:#?}");
    assert_eq!(asked[0]["tool"], "write_file");
    assert_eq!(asked[0]["input"]["path"], "notes.txt");
    assert_eq!(
        std::fs::read_to_string(repo.path().join("notes.txt")).unwrap(),
        "keep\n"
    );
    // The model read the program's reason.
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    assert!(
        bodies[1]
            .to_string()
            .contains("the program does not allow writes"),
        "{}",
        bodies[1]
    );
    let results = of(&lines, "ResultMessage");
    assert_eq!(results[0]["result"], "I was not allowed to write.");
}

#[tokio::test]
async fn interrupt_during_a_slow_reply_ends_the_turn_and_the_next_prompt_works() {
    for which in SDKS {
        interrupt_during_a_slow_reply_ends_the_turn_and_the_next_prompt_works_through(which).await;
    }
}

async fn interrupt_during_a_slow_reply_ends_the_turn_and_the_next_prompt_works_through(which: Sdk) {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = slow_then(
        &keel_test_support::scripted::text_reply("too late"),
        std::time::Duration::from_secs(30),
        &keel_test_support::scripted::text_reply("Back again."),
    )
    .await;
    let started = std::time::Instant::now();
    let Some((ok, lines, err)) = sdk(
        which,
        &home,
        &server,
        &repo,
        "interrupt",
        &["think slowly", "and now?"],
        &[("INTERRUPT_AFTER", "1.5")],
    )
    .await
    else {
        return;
    };
    assert!(ok, "{which:?}: {lines:#?}\nstderr: {err}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(25),
        "the interrupt did not end the slow turn: {lines:#?}"
    );
    let results = of(&lines, "ResultMessage");
    assert_eq!(results.len(), 2, "{lines:#?}");
    assert_ne!(results[0]["result"], "too late");
    assert_eq!(results[1]["result"], "Back again.");
}

#[tokio::test]
async fn a_pre_tool_use_hook_callback_of_the_program_blocks_a_command() {
    for which in SDKS {
        a_pre_tool_use_hook_callback_of_the_program_blocks_a_command_through(which).await;
    }
}

async fn a_pre_tool_use_hook_callback_of_the_program_blocks_a_command_through(which: Sdk) {
    let repo = TempRepo::new();
    repo.write("notes.txt", "keep\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "run_command", json!({"command": "rm notes.txt"})),
        tool_call("t2", "read_file", json!({"path": "notes.txt"})),
        tool_call("t3", "run_command", json!({"command": "echo hi"})),
        text("The notes stay."),
    ])
    .await;
    let Some((ok, lines, err)) =
        sdk(which, &home, &server, &repo, "hook", &["clean up"], &[]).await
    else {
        return;
    };
    assert!(ok, "{which:?}: {lines:#?}\nstderr: {err}");
    // The hook ran for the command (Claude's `Bash` matcher is keel's run_command, and the
    // program reads it as Bash), not for the read.
    let calls: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "hook").collect();
    assert_eq!(calls.len(), 2, "{lines:#?}");
    assert_eq!(calls[0]["event"], "PreToolUse");
    assert_eq!(calls[0]["tool"], "Bash");
    assert_eq!(calls[0]["input"]["command"], "rm notes.txt");
    assert_eq!(calls[0]["tool_use_id"], "t1", "{which:?}: {}", calls[0]);
    assert_eq!(
        calls[0]["input_tool_use_id"], "t1",
        "{which:?}: {}",
        calls[0]
    );
    assert_eq!(calls[0]["permission_mode"], "bypassPermissions");
    let transcript = calls[0]["transcript_path"].as_str().unwrap();
    assert!(
        std::path::Path::new(transcript).exists(),
        "{which:?}: the session file {transcript}"
    );
    assert!(repo.path().join("notes.txt").exists());
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    assert!(
        bodies[1].to_string().contains("the program forbids rm"),
        "{}",
        bodies[1]
    );
    // The program's updatedInput replaced the command the model gave.
    assert_eq!(calls[1]["input"]["command"], "echo hi");
    assert!(
        bodies[3].to_string().contains("rewritten by the program"),
        "{which:?}: {}",
        bodies[3]
    );
    assert_eq!(of(&lines, "ResultMessage")[0]["result"], "The notes stay.");
}

#[tokio::test]
async fn an_in_process_sdk_mcp_tool_of_the_program_is_called_by_the_model() {
    for which in SDKS {
        an_in_process_sdk_mcp_tool_of_the_program_is_called_by_the_model_through(which).await;
    }
}

async fn an_in_process_sdk_mcp_tool_of_the_program_is_called_by_the_model_through(which: Sdk) {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "mcp__calc__add", json!({"a": 2, "b": 3})),
        text("The sum is 5."),
    ])
    .await;
    let Some((ok, lines, err)) =
        sdk(which, &home, &server, &repo, "mcp", &["add 2 and 3"], &[]).await
    else {
        return;
    };
    assert!(ok, "{which:?}: {lines:#?}\nstderr: {err}");
    // The program's own function ran, with the model's arguments.
    let ran: Vec<&Value> = lines.iter().filter(|l| l["kind"] == "tool_ran").collect();
    assert_eq!(ran.len(), 1, "{lines:#?}");
    assert_eq!(ran[0]["args"], json!({"a": 2, "b": 3}));
    // Its result reached the model.
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    assert!(
        bodies[0].to_string().contains("mcp__calc__add"),
        "the tool was offered: {}",
        bodies[0]
    );
    assert!(bodies[1].to_string().contains("sum: 5"), "{}", bodies[1]);
    assert_eq!(of(&lines, "ResultMessage")[0]["result"], "The sum is 5.");
}

#[tokio::test]
async fn an_image_in_a_user_message_reaches_the_model() {
    for which in SDKS {
        an_image_in_a_user_message_reaches_the_model_through(which).await;
    }
}

async fn an_image_in_a_user_message_reaches_the_model_through(which: Sdk) {
    use keel_test_support::images::TINY_PNG;
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("A single pixel.")]).await;
    let Some((ok, lines, err)) = sdk(
        which,
        &home,
        &server,
        &repo,
        "image",
        &["what is this?"],
        &[("IMAGE_PNG", TINY_PNG)],
    )
    .await
    else {
        return;
    };
    assert!(ok, "{which:?}: {lines:#?}\nstderr: {err}");
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    let content = &bodies[0]["messages"][0]["content"];
    assert_eq!(content[0]["text"], "what is this?", "{content}");
    assert_eq!(content[1]["type"], "image", "{content}");
    assert_eq!(content[1]["source"]["data"], TINY_PNG, "{content}");
    assert_eq!(of(&lines, "ResultMessage")[0]["result"], "A single pixel.");
}
