//! `keel -p`: Claude Code's print-mode flags on the top-level command, as scripts call
//! `claude -p` — piped input, output formats, system prompts, tool rules in Claude's syntax,
//! permission modes, session ids and model aliases; flags keel cannot honour refused in one
//! line, before the model is asked anything.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::process::Stdio;

use crate::support::*;
use keel_test_support::git::TempRepo;
use keel_test_support::mock::request_bodies;
use serde_json::{Value, json};

/// Runs `keel ARGS` in `repo` against `server`, with `input` on stdin; the output.
async fn keel(
    home: &Home,
    server: &wiremock::MockServer,
    repo: &TempRepo,
    args: &[&str],
    input: Option<&str>,
) -> std::process::Output {
    let mut command = home.keel_anthropic(server);
    command.current_dir(repo.path()).args(args);
    let input = input.map(str::to_owned);
    command.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().unwrap();
        if let Some(input) = input {
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input.as_bytes()).unwrap();
        }
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

/// The text of the first user message of request `body`.
fn first_prompt(body: &Value) -> String {
    let content = &body["messages"][0]["content"];
    content
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| content[0]["text"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn what_is_piped_comes_before_the_prompt_for_keel_p_and_keel_exec() {
    for args in [&["-p", "review this"][..], &["exec", "review this"][..]] {
        let repo = TempRepo::new();
        let home = Home::new();
        let server = anthropic_server(&[text("Looks fine.")]).await;
        let output = keel(
            &home,
            &server,
            &repo,
            args,
            Some("diff --git a/x b/x\n+added\n"),
        )
        .await;
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        assert_eq!(stdout(&output), "Looks fine.\n");
        let bodies = request_bodies(&server).await;
        assert_eq!(
            first_prompt(&bodies[0]),
            "diff --git a/x b/x\n+added\n\nreview this",
            "{args:?}"
        );
    }
}

#[tokio::test]
async fn json_output_system_prompts_and_model_aliases() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("Short answer.")]).await;
    let output = keel(
        &home,
        &server,
        &repo,
        &[
            "-p",
            "--output-format",
            "json",
            "--model",
            "haiku",
            "--system-prompt",
            "You are terse.",
            "--append-system-prompt",
            "Answer in English.",
            "--max-turns",
            "3",
            "what is this?",
        ],
        None,
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let result: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["result"], "Short answer.");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies[0]["model"], "claude-haiku-5-5");
    let system = bodies[0]["system"].to_string();
    assert!(
        system.contains("You are terse.\\n\\nAnswer in English."),
        "{system}"
    );
    assert!(
        !system.contains("AGENTS.md"),
        "keel's prompt was replaced: {system}"
    );
}

#[tokio::test]
async fn a_session_id_names_the_session_and_a_bad_one_is_refused() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("ok")]).await;
    let id = "0193b3c8-7d2e-7c11-9a4e-3f5a6b7c8d9e";
    let output = keel(
        &home,
        &server,
        &repo,
        &["-p", "--output-format", "json", "--session-id", id, "hi"],
        None,
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let result: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(result["session_id"], id);
    // The same id again, and ids that could name a path: refused before the model is asked.
    for bad in [id, "../../etc/passwd", "a/b"] {
        let output = keel(
            &home,
            &server,
            &repo,
            &["-p", "--session-id", bad, "hi"],
            None,
        )
        .await;
        assert!(!output.status.success(), "{bad}");
        let err = stderr(&output);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(stdout(&output).is_empty());
    }
    assert_eq!(request_bodies(&server).await.len(), 1);
}

#[tokio::test]
async fn flags_keel_cannot_honour_are_refused_in_one_line_before_anything_runs() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("never")]).await;
    for (args, says) in [
        (
            &["-p", "--max-budget-usd", "lots", "x"][..],
            "--max-budget-usd",
        ),
        (
            &[
                "-p",
                "--model",
                "my-local-model",
                "--max-budget-usd",
                "1",
                "x",
            ][..],
            "no price for my-local-model",
        ),
        (
            &["-p", "--settings", "missing.json", "x"][..],
            "--settings: missing.json: no such file",
        ),
        (
            &[
                "-p",
                "--settings",
                r#"{"permissions": {"defaultMode": "yolo"}}"#,
                "x",
            ][..],
            "--settings: `permissions.defaultMode`: no mode \"yolo\"",
        ),
        (
            &["-p", "--setting-sources", "project,team", "x"][..],
            "--setting-sources: no setting source \"team\"",
        ),
        (&["-p", "--tools", "Bash", "x"][..], "--tools:"),
        (&["-p", "--fork-session", "x"][..], "--fork-session:"),
        (
            &["-p", "--agents", "not json", "x"][..],
            "--agents: not valid JSON",
        ),
        (
            &["-p", "--permission-prompt-tool", "mcp__auth__ask", "x"][..],
            "--permission-prompt-tool:",
        ),
        (
            &["-p", "--include-partial-messages", "x"][..],
            "--include-partial-messages:",
        ),
        (
            &["-p", "--input-format", "stream-json", "x"][..],
            "--input-format stream-json:",
        ),
        (&["-p", "--permission-mode", "yolo", "x"][..], "yolo"),
    ] {
        let output = keel(&home, &server, &repo, args, None).await;
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        let err = stderr(&output);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(stdout(&output).is_empty(), "{args:?}");
    }
    assert!(request_bodies(&server).await.is_empty());
}

#[tokio::test]
async fn permission_modes_and_tool_rules_in_claude_s_syntax_decide_the_calls() {
    // plan: nothing changes, whatever the model tries.
    let repo = TempRepo::new();
    repo.write("notes.txt", "keep\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "t1",
            "write_file",
            json!({"path": "notes.txt", "content": "x\n"}),
        ),
        text("I only looked."),
    ])
    .await;
    let output = keel(
        &home,
        &server,
        &repo,
        &["-p", "--permission-mode", "plan", "edit"],
        None,
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_to_string(repo.path().join("notes.txt")).unwrap(),
        "keep\n"
    );
    assert!(
        request_bodies(&server).await[1]
            .to_string()
            .contains("read-only")
    );

    // A command keel's headless default refuses runs when Claude's rule allows it, and a
    // Claude-named tool denied is refused.
    let repo = TempRepo::new();
    repo.write("old.txt", "x\n");
    repo.write("secret.txt", "s\n");
    repo.commit("start");
    let server = anthropic_server(&[
        tool_call("t1", "run_command", json!({"command": "rm old.txt"})),
        tool_call("t2", "read_file", json!({"path": "secret.txt"})),
        text("done"),
    ])
    .await;
    let output = keel(
        &home,
        &server,
        &repo,
        &[
            "-p",
            "--allowedTools",
            "Bash(rm:*)",
            "--disallowedTools",
            "Read(secret.txt)",
            "clean up",
        ],
        None,
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(!repo.path().join("old.txt").exists());
    let last = request_bodies(&server).await[2].to_string();
    assert!(last.contains("Read(secret.txt) forbids"), "{last}");
}

#[tokio::test]
async fn a_spending_limit_ends_the_run_before_the_next_model_call() {
    let repo = TempRepo::new();
    repo.write("a.txt", "a\n");
    repo.commit("start");
    let home = Home::new();
    // Each scripted reply costs about $0.0001 on claude-sonnet-4-5 (10 tokens in, 5 out).
    let server = anthropic_server(&[
        tool_call("t1", "read_file", json!({"path": "a.txt"})),
        text("never asked"),
    ])
    .await;
    let output = keel(
        &home,
        &server,
        &repo,
        &[
            "-p",
            "--output-format",
            "json",
            "--model",
            "claude-sonnet-4-5",
            "--max-budget-usd",
            "0.0001",
            "read a",
        ],
        None,
    )
    .await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let result: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(result["subtype"], "error_max_budget_usd", "{result}");
    assert_eq!(result["is_error"], true);
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("spending limit of $0.0001"),
        "{result}"
    );
    assert_eq!(request_bodies(&server).await.len(), 1);
}

#[tokio::test]
async fn fork_session_goes_on_from_a_session_without_changing_it() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        text("The first answer."),
        text("The fork's answer."),
        text("The original goes on."),
    ])
    .await;
    let json = |output: &std::process::Output| -> Value {
        assert!(output.status.success(), "{}", stderr(output));
        serde_json::from_str(&stdout(output)).unwrap()
    };
    let first = json(
        &keel(
            &home,
            &server,
            &repo,
            &["-p", "--output-format", "json", "first"],
            None,
        )
        .await,
    );
    let original = first["session_id"].as_str().unwrap().to_owned();
    let fork = json(
        &keel(
            &home,
            &server,
            &repo,
            &[
                "-p",
                "--output-format",
                "json",
                "-r",
                &original,
                "--fork-session",
                "fork",
            ],
            None,
        )
        .await,
    );
    assert_ne!(fork["session_id"], first["session_id"]);
    let again = json(
        &keel(
            &home,
            &server,
            &repo,
            &["-p", "--output-format", "json", "-r", &original, "again"],
            None,
        )
        .await,
    );
    assert_eq!(again["session_id"], first["session_id"]);
    let bodies = request_bodies(&server).await;
    // The fork saw the first conversation; the original never saw the fork's prompt.
    let forked = bodies[1].to_string();
    assert!(
        forked.contains("The first answer.") && forked.contains("fork"),
        "{forked}"
    );
    let resumed = bodies[2].to_string();
    assert!(resumed.contains("The first answer."), "{resumed}");
    assert!(!resumed.contains("The fork's answer."), "{resumed}");
}

#[tokio::test]
async fn agents_defined_inline_are_offered_and_run_with_their_own_prompt_and_tools() {
    let repo = TempRepo::new();
    repo.write("a.rs", "fn main() {}\n");
    repo.commit("start");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "t1",
            "spawn_agent",
            json!({"agent": "reviewer", "task": "review a.rs"}),
        ),
        text("No bugs."),
        text("Reviewed: no bugs."),
    ])
    .await;
    let agents = json!({"reviewer": {
        "description": "Reviews code for bugs.",
        "prompt": "You review code and report bugs.",
        "tools": ["Read", "Grep"],
        "model": "inherit",
    }})
    .to_string();
    let output = keel(
        &home,
        &server,
        &repo,
        &["-p", "--agents", &agents, "review the code"],
        None,
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Reviewed: no bugs.\n");
    let bodies = request_bodies(&server).await;
    let spawn = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == "spawn_agent")
        .unwrap_or_else(|| panic!("no spawn_agent: {}", bodies[0]["tools"]));
    assert!(
        spawn["description"]
            .as_str()
            .unwrap()
            .contains("Reviews code for bugs."),
        "{spawn}"
    );
    // The sub-agent's own request: its prompt, and only its tools.
    let sub = &bodies[1];
    assert!(
        sub["system"]
            .to_string()
            .contains("You review code and report bugs."),
        "{}",
        sub["system"]
    );
    let mut tools: Vec<&str> = sub["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    tools.sort_unstable();
    assert_eq!(tools, ["grep", "read_file"]);
}

#[tokio::test]
async fn a_model_that_keeps_failing_gives_way_to_the_fallback_model() {
    use keel_test_support::mock::{error_response, sse_response};
    use keel_test_support::render::anthropic_sse;
    use wiremock::matchers::{body_string_contains, method, path};
    let repo = TempRepo::new();
    let home = Home::new();
    let server = wiremock::MockServer::start().await;
    // The main model is overloaded on every try (the provider retries at once, as told).
    wiremock::Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(body_string_contains("\"model\":\"claude-sonnet-5-5\""))
        .respond_with(
            error_response(529, "overloaded_error", "Overloaded")
                .insert_header("retry-after-ms", "1"),
        )
        .mount(&server)
        .await;
    wiremock::Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .and(body_string_contains("\"model\":\"claude-haiku-5-5\""))
        .respond_with(sse_response(anthropic_sse(
            &keel_test_support::scripted::text_reply("From the fallback."),
        )))
        .mount(&server)
        .await;
    let output = keel(
        &home,
        &server,
        &repo,
        &[
            "-p",
            "--output-format",
            "json",
            "--model",
            "sonnet",
            "--fallback-model",
            "haiku",
            "hi",
        ],
        None,
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let result: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(result["result"], "From the fallback.", "{result}");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.first().unwrap()["model"], "claude-sonnet-5-5");
    assert_eq!(bodies.last().unwrap()["model"], "claude-haiku-5-5");
    // Without a fallback the run fails as before.
    let output = keel(
        &home,
        &server,
        &repo,
        &["-p", "--model", "sonnet", "hi"],
        None,
    )
    .await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
}

#[tokio::test]
async fn strict_mcp_config_starts_only_the_servers_the_flag_names() {
    let repo = TempRepo::new();
    let home = Home::new();
    home.write_config("[mcp_servers.configured]\ncommand = \"/nonexistent/mcp-server\"\n");
    let server = anthropic_server(&[text("one"), text("two")]).await;
    let loose = keel(&home, &server, &repo, &["-p", "hi"], None).await;
    assert!(loose.status.success(), "{}", stderr(&loose));
    assert!(stderr(&loose).contains("configured"), "{}", stderr(&loose));
    let strict = keel(
        &home,
        &server,
        &repo,
        &["-p", "--strict-mcp-config", "hi"],
        None,
    )
    .await;
    assert!(strict.status.success(), "{}", stderr(&strict));
    assert!(
        !stderr(&strict).contains("configured"),
        "{}",
        stderr(&strict)
    );
}

#[tokio::test]
async fn claude_code_s_model_variables_choose_the_models_below_flags_and_keel_s_own() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("one"), text("two"), text("three")]).await;
    let with = |vars: &[(&str, &str)], args: &[&str]| {
        let mut command = home.keel_anthropic(&server);
        command.current_dir(repo.path()).args(args);
        for (name, value) in vars {
            command.env(name, value);
        }
        command
    };
    let runs = [
        with(&[("ANTHROPIC_MODEL", "haiku")], &["-p", "hi"]),
        with(
            &[
                ("ANTHROPIC_MODEL", "haiku"),
                ("KEEL_MODEL", "claude-opus-4-5"),
            ],
            &["-p", "hi"],
        ),
        with(
            &[("ANTHROPIC_MODEL", "haiku")],
            &["-p", "--model", "claude-sonnet-4-5", "hi"],
        ),
    ];
    for command in runs {
        let output = run(command).await;
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let models: Vec<Value> = request_bodies(&server)
        .await
        .iter()
        .map(|body| body["model"].clone())
        .collect();
    assert_eq!(
        models,
        ["claude-haiku-5-5", "claude-opus-4-5", "claude-sonnet-4-5"]
    );
}
