//! `keel exec` run as a process against wiremock, in temporary git repositories.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::*;
use keel_test_support::git::TempRepo;
use serde_json::{Value, json};

#[tokio::test]
async fn text_output_prints_the_answer_and_one_progress_line_per_call() {
    let repo = TempRepo::new();
    repo.write("notes.txt", "alpha\nbeta\n");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "read_file", json!({"path": "notes.txt"})),
        text("The notes say alpha and beta."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "What do the notes say?"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "The notes say alpha and beta.\n");
    let progress = redact(&stderr(&output), &[]);
    insta::assert_snapshot!(progress, @"✓ read_file(notes.txt) · 2 lines · [time]");
}

#[tokio::test]
async fn a_failed_command_s_progress_line_says_its_exit_code_and_its_last_lines_follow() {
    let repo = TempRepo::new();
    repo.write(
        "fail.sh",
        "echo first\necho second\necho 'Error: the last words'\nexit 2\n",
    );
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "run_command", json!({"command": "true"})),
        tool_call("toolu_2", "run_command", json!({"command": "sh fail.sh"})),
        text("It failed."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "-y", "run it"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let progress = redact(&stderr(&output), &[]);
    insta::assert_snapshot!(progress, @r"
    ✓ run_command(true) · no output · [time]
    ✗ run_command(sh fail.sh) · exit code 2 · 3 lines · [time]
        first
        second
        Error: the last words
    ");
}

/// The output lines as JSON values, with volatile fields replaced.
fn json_lines(output: &str, repo: &std::path::Path) -> Vec<Value> {
    let repo = std::fs::canonicalize(repo).unwrap();
    redact(output, &[(&repo, "[repo]")])
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The model reads notes.txt and answers; keel runs with `args` (after `exec`) over the wire
/// format `openai` names. Returns the output lines as JSON, the exit code, stderr and the
/// request bodies.
async fn notes_run(openai: bool, args: &[&str]) -> (Vec<Value>, Option<i32>, String, Vec<Value>) {
    let repo = TempRepo::new();
    repo.write("notes.txt", "alpha\n");
    let home = Home::new();
    let replies = [
        tool_call("toolu_1", "read_file", json!({"path": "notes.txt"})),
        text("It says alpha."),
    ];
    let (server, mut command) = if openai {
        let server = openai_server(&replies).await;
        let command = home.keel_openai(&server);
        (server, command)
    } else {
        let server = anthropic_server(&replies).await;
        let command = home.keel_anthropic(&server);
        (server, command)
    };
    command
        .current_dir(repo.path())
        .arg("exec")
        .args(args)
        .arg("What do the notes say?");
    let output = run(command).await;
    let lines = json_lines(&stdout(&output), &repo.path());
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    (lines, output.status.code(), stderr(&output), bodies)
}

#[tokio::test]
async fn json_output_is_one_result_object_in_claude_codes_shape() {
    let (lines, code, stderr, _) = notes_run(false, &["--output-format", "json"]).await;
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert_eq!(stderr, "", "json mode prints nothing else");
    assert_eq!(lines.len(), 1, "exactly one object: {lines:?}");
    insta::assert_json_snapshot!("json_result", lines[0]);
}

#[tokio::test]
async fn stream_json_prints_init_each_message_and_the_result() {
    let (lines, code, stderr, _) = notes_run(false, &["--output-format", "stream-json"]).await;
    assert_eq!(code, Some(0), "stderr: {stderr}");
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        ["system", "assistant", "user", "assistant", "result"]
    );
    insta::assert_json_snapshot!("stream_json", lines);
}

#[tokio::test]
async fn the_openai_back_end_gives_the_same_json_result() {
    let (lines, code, stderr, bodies) =
        notes_run(true, &["--model", "qwen3:8b", "--output-format", "json"]).await;
    assert_eq!(code, Some(0), "stderr: {stderr}");
    let result = &lines[0];
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["result"], "It says alpha.");
    assert_eq!(result["num_turns"], 2);
    // A local model has no known price: the cost is null, never guessed.
    assert_eq!(result["total_cost_usd"], Value::Null);
    assert_eq!(bodies[0]["model"], "qwen3:8b");
}

#[tokio::test]
async fn the_prompt_can_come_from_stdin() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("Read you.")]).await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let output = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = command.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"Do you read me\nover two lines?")
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "Read you.\n");
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    assert_eq!(
        bodies[0]["messages"][0]["content"][0]["text"],
        "Do you read me\nover two lines?"
    );
}

#[tokio::test]
async fn the_iteration_limit_is_error_max_turns_and_exit_1() {
    let repo = TempRepo::new();
    repo.write("a.txt", "a\n");
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("toolu_1", "read_file", json!({"path": "a.txt"})),
        tool_call("toolu_2", "read_file", json!({"path": "a.txt"})),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args([
        "exec",
        "--max-iterations",
        "2",
        "--output-format",
        "json",
        "Loop",
    ]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(1));
    let result = &json_lines(&stdout(&output), &repo.path())[0];
    assert_eq!(result["subtype"], "error_max_turns");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["num_turns"], 2);
}

#[tokio::test]
async fn a_recorded_refusal_is_an_error_and_exit_1() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = keel_test_support::mock::serve_sse(
        "/v1/messages",
        keel_test_support::wire::wire_bytes("anthropic/refusal_response.sse"),
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "Do something bad"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "", "no answer on stdout");
    let err = stderr(&output);
    assert!(err.starts_with("keel: the run ended (refused): "), "{err}");
}

#[tokio::test]
async fn a_provider_failure_is_error_during_execution_and_exit_1() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(keel_test_support::mock::error_response(
            401,
            "authentication_error",
            "invalid x-api-key",
        ))
        .mount(&server)
        .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "--output-format", "json", "Hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(1));
    let result = &json_lines(&stdout(&output), &repo.path())[0];
    assert_eq!(result["subtype"], "error_during_execution");
    assert!(
        result["result"]
            .as_str()
            .unwrap()
            .contains("invalid x-api-key")
    );
    assert!(!stdout(&output).contains(FAKE_KEY) && !stderr(&output).contains(FAKE_KEY));
}

#[tokio::test]
async fn no_provider_is_one_line_and_exit_2() {
    let repo = TempRepo::new();
    let home = Home::new();
    let mut command = home.keel();
    command.current_dir(repo.path()).args(["exec", "Hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        "keel: no model provider configured: set ANTHROPIC_API_KEY, or OPENAI_BASE_URL for a \
         local server (see keel --help)\n"
    );
}

#[tokio::test]
async fn usage_and_config_errors_are_one_line_and_exit_2() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("unused")]).await;
    let keel_home = home.keel_home();
    let cases: Vec<(Vec<&str>, Option<&str>, String)> = vec![
        (
            vec!["exec", "Hi"],
            Some("[providers.local]\nkind = \"openai\"\nbase_uri = \"http://x\"\n"),
            format!(
                "keel: {}:3: unknown key `base_uri` in `providers.local`; allowed keys: kind, \
                 base_url, api_key_env, env_key, headers",
                keel_home.join("config.toml").display()
            ),
        ),
        (
            vec!["exec", "Hi"],
            Some("approvals = \"sometimes\"\n"),
            format!(
                "keel: {}:1: bad value `sometimes` for `approvals`; allowed values: ask, deny, \
                 allow",
                keel_home.join("config.toml").display()
            ),
        ),
        (
            vec!["exec", "--provider", "mistral", "Hi"],
            None,
            "keel: unknown provider `mistral`: use one of anthropic, openai, openai-responses, or define \
             [providers.mistral] in the config"
                .into(),
        ),
        (
            vec!["exec", "-C", "/no/such/dir", "Hi"],
            None,
            "keel: working directory /no/such/dir: No such file or directory (os error 2); pass \
             an existing directory with -C"
                .into(),
        ),
        (
            vec!["exec", "--resume", "20990101T000000-abcdef", "Hi"],
            None,
            "keel: cannot resume: no session \"20990101T000000-abcdef\"; `keel sessions` lists \
             the existing ones"
                .into(),
        ),
        (
            vec!["exec", "--allow-read", "/no/such/path", "Hi"],
            None,
            "keel: --allow-read /no/such/path: No such file or directory (os error 2); name an \
             existing file or directory"
                .into(),
        ),
        (
            vec!["exec", "   "],
            None,
            "keel: the prompt is empty: say what keel should do".into(),
        ),
    ];
    for (args, config, expected) in cases {
        match config {
            Some(text) => home.write_config(text),
            None => {
                let _ = std::fs::remove_file(keel_home.join("config.toml"));
            }
        }
        let mut command = home.keel_anthropic(&server);
        command.current_dir(repo.path()).args(&args);
        let output = run(command).await;
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert_eq!(stderr(&output), format!("{expected}\n"), "{args:?}");
    }
    // Flag errors come from the parser: exit 2 too, naming the flag.
    let mut command = home.keel_anthropic(&server);
    command.args(["exec", "--approvals", "maybe", "Hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("invalid value 'maybe' for '--approvals <MODE>'"));
    assert!(
        keel_test_support::mock::request_bodies(&server)
            .await
            .is_empty(),
        "no model call on a usage error"
    );
}

#[tokio::test]
async fn approvals_deny_refuses_git_commit_and_yes_lets_it_run() {
    for (flags, commits) in [(&["--approvals", "deny"][..], false), (&["-y"][..], true)] {
        let repo = TempRepo::new();
        repo.write("a.txt", "changed\n");
        let head = repo.head();
        let home = Home::new();
        let server = anthropic_server(&[
            tool_call(
                "toolu_1",
                "git_commit",
                json!({"message": "Commit it", "all": true}),
            ),
            text("Done."),
        ])
        .await;
        let mut command = home.keel_anthropic(&server);
        command
            .current_dir(repo.path())
            .arg("exec")
            .args(flags)
            .arg("Commit the change");
        let output = run(command).await;
        assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
        let bodies = keel_test_support::mock::request_bodies(&server).await;
        let result = &bodies[1]["messages"][2]["content"][0];
        assert_eq!(result["type"], "tool_result");
        if commits {
            assert_ne!(repo.head(), head, "{flags:?}: the commit was made");
            assert!(repo.head_message().starts_with("Commit it"));
            assert!(stderr(&output).contains("✓ git_commit(Commit it)"));
        } else {
            assert_eq!(repo.head(), head, "{flags:?}: no commit was made");
            assert_eq!(result["is_error"], true);
            let content = result["content"].as_str().unwrap();
            assert!(content.contains("denied"), "{result}");
            assert!(stderr(&output).contains("✗ git_commit(Commit it)"));
        }
    }
}

#[tokio::test]
async fn allow_read_opens_one_outside_directory_to_the_file_tools() {
    let repo = TempRepo::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("spec.md"), "the spec\n").unwrap();
    let spec = outside.path().join("spec.md").display().to_string();
    let home = Home::new();
    let replies = [
        tool_call("toolu_1", "read_file", json!({"path": spec})),
        text("Done."),
    ];
    for (flag, expect_error) in [(true, false), (false, true)] {
        let server = anthropic_server(&replies).await;
        let mut command = home.keel_anthropic(&server);
        command.current_dir(repo.path()).arg("exec");
        if flag {
            command.arg("--allow-read").arg(outside.path());
        }
        command.arg("Read the spec");
        let output = run(command).await;
        assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
        let bodies = keel_test_support::mock::request_bodies(&server).await;
        let result = &bodies[1]["messages"][2]["content"][0];
        let is_error = result["is_error"].as_bool().unwrap_or(false);
        assert_eq!(is_error, expect_error, "flag {flag}: {result}");
        if flag {
            assert!(result["content"].as_str().unwrap().contains("the spec"));
        }
    }
}

#[tokio::test]
async fn resume_continues_a_saved_session_with_its_history() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("My name is keel."), text("You asked my name.")]).await;
    let mut first = home.keel_anthropic(&server);
    first
        .current_dir(repo.path())
        .args(["exec", "--output-format", "json", "What is your name?"]);
    let output = run(first).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    let id = result["session_id"].as_str().unwrap().to_owned();

    // From another directory: a resumed session goes on where it started.
    let mut second = home.keel_anthropic(&server);
    second.current_dir(home.path()).args([
        "exec",
        "--resume",
        &id,
        "--output-format",
        "json",
        "What did I ask?",
    ]);
    let output = run(second).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["session_id"], id.as_str());
    assert_eq!(result["result"], "You asked my name.");
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    let texts: Vec<&str> = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["What is your name?", "My name is keel.", "What did I ask?"]
    );

    // --continue picks the newest session of the directory.
    let server = anthropic_server(&[text("Third.")]).await;
    let mut third = home.keel_anthropic(&server);
    third.current_dir(repo.path()).args([
        "exec",
        "--continue",
        "--output-format",
        "json",
        "And now?",
    ]);
    let output = run(third).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["session_id"], id.as_str());

    // `keel sessions` lists it, and no file under KEEL_HOME holds the key.
    let mut list = home.keel();
    list.arg("sessions");
    let output = run(list).await;
    assert_eq!(output.status.code(), Some(0));
    let listing = stdout(&output);
    assert_eq!(listing.lines().count(), 1, "{listing}");
    assert!(listing.starts_with(&id));
    assert!(listing.contains("What is your name?"));
    assert!(listing.contains("completed"));
    for entry in std::fs::read_dir(home.keel_home().join("sessions")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!text.contains(FAKE_KEY));
    }
}

#[tokio::test]
async fn a_named_provider_from_the_config_and_read_only_sandbox() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = openai_server(&[text("Hello from the local model.")]).await;
    home.write_config(&format!(
        "provider = \"local\"\nmodel = \"llama3\"\nsandbox = \"read-only\"\n\n\
         [providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\napi_key_env = \"LOCAL_KEY\"\n",
        server.uri()
    ));
    let mut command = home.keel();
    command
        .current_dir(repo.path())
        .env("LOCAL_KEY", "local-secret-key")
        .args(["exec", "--output-format", "stream-json", "Hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let lines = json_lines(&stdout(&output), &repo.path());
    assert_eq!(lines[0]["provider"], "local");
    assert_eq!(lines[0]["model"], "llama3");
    assert_eq!(lines[0]["sandbox"], "read-only");
    let tools: Vec<&str> = lines[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(
        !tools.contains(&"write_file") && tools.contains(&"read_file"),
        "{tools:?}"
    );
    let requests = server.received_requests().await.unwrap();
    assert_eq!(
        requests[0].headers.get("authorization").unwrap(),
        "Bearer local-secret-key"
    );
    // Flags beat the config: --model wins.
    let server2 = openai_server(&[text("ok")]).await;
    home.write_config(&format!(
        "provider = \"local\"\nmodel = \"llama3\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\n",
        server2.uri()
    ));
    let mut command = home.keel();
    command
        .current_dir(repo.path())
        .args(["exec", "--model", "other", "Hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let bodies = keel_test_support::mock::request_bodies(&server2).await;
    assert_eq!(bodies[0]["model"], "other");
}

#[tokio::test]
async fn version_and_help() {
    let home = Home::new();
    let mut command = home.keel();
    command.arg("--version");
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        stdout(&output),
        format!("keel {}\n", env!("CARGO_PKG_VERSION"))
    );
    let mut command = home.keel();
    command.arg("--help");
    let output = run(command).await;
    insta::assert_snapshot!("help", stdout(&output));
    let mut command = home.keel();
    command.args(["exec", "--help"]);
    let output = run(command).await;
    insta::assert_snapshot!("exec_help", stdout(&output));
}

#[tokio::test]
async fn permission_rules_and_hooks_from_a_trusted_project_config_apply() {
    let repo = TempRepo::new();
    repo.write("a.txt", "changed\n");
    let head = repo.head();
    // The project allows git_commit even though exec denies gated calls, and a hook blocks
    // every write_file with exit 2 and a reason the model reads.
    repo.write(
        ".keel/config.toml",
        "[permissions]\nallow = [\"git_commit\"]\n\n[[hooks]]\nevent = \"PreToolUse\"\n\
         matcher = \"write_file\"\ncommand = \"echo 'no writes today' >&2; exit 2\"\n",
    );
    let home = Home::new();
    // The user trusts the project as it is.
    let mut trust = home.keel();
    trust.current_dir(repo.path()).arg("trust");
    let trusted = run(trust).await;
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    assert!(
        stdout(&trusted).starts_with("trusted "),
        "{}",
        stdout(&trusted)
    );
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "write_file",
            json!({"path": "b.txt", "content": "new\n"}),
        ),
        tool_call(
            "toolu_2",
            "git_commit",
            json!({"message": "Commit it", "all": true}),
        ),
        text("Done."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "Write and commit"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(
        !stderr(&output).contains("ignored"),
        "a trusted project's keys apply: {}",
        stderr(&output)
    );
    assert!(
        !repo.path().join("b.txt").exists(),
        "the hook blocked the write"
    );
    assert_ne!(repo.head(), head, "the allow rule let the commit run");
    let bodies = keel_test_support::mock::request_bodies(&server).await;
    let blocked = &bodies[1]["messages"][2]["content"][0];
    assert_eq!(blocked["is_error"], true);
    assert!(
        blocked["content"]
            .as_str()
            .unwrap()
            .contains("no writes today"),
        "{blocked}"
    );
}

#[tokio::test]
async fn an_untrusted_project_config_grants_nothing_and_says_so_in_one_line() {
    let repo = TempRepo::new();
    repo.write("a.txt", "changed\n");
    let head = repo.head();
    repo.write(
        ".keel/config.toml",
        "approvals = \"allow\"\n[permissions]\nallow = [\"git_commit\"]\n",
    );
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "git_commit",
            json!({"message": "Commit it", "all": true}),
        ),
        text("Done."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args(["exec", "Commit"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(repo.head(), head, "the project could not allow the commit");
    let err = stderr(&output);
    let notice: Vec<&str> = err.lines().filter(|l| l.contains("ignored")).collect();
    assert_eq!(notice.len(), 1, "{err}");
    assert!(
        notice[0].contains("approvals, permissions.allow") && notice[0].contains("keel trust"),
        "{}",
        notice[0]
    );
}

#[tokio::test]
async fn keel_untrust_takes_the_trust_back() {
    let repo = TempRepo::new();
    repo.write(".keel/config.toml", "approvals = \"allow\"\n");
    let home = Home::new();
    let keel_in_repo = |args: &[&str]| {
        let mut command = home.keel();
        command.current_dir(repo.path()).args(args);
        command
    };
    let trusted = run(keel_in_repo(&["trust"])).await;
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    let untrusted = run(keel_in_repo(&["untrust"])).await;
    assert_eq!(untrusted.status.code(), Some(0), "{}", stderr(&untrusted));
    assert!(
        stdout(&untrusted).contains("is no longer trusted"),
        "{}",
        stdout(&untrusted)
    );
    let again = run(keel_in_repo(&["untrust"])).await;
    assert!(
        stdout(&again).contains("was not trusted"),
        "{}",
        stdout(&again)
    );
    let server = anthropic_server(&[text("Hi.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args(["exec", "hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("ignored approvals"),
        "{}",
        stderr(&output)
    );
    // A bad directory is one line and exit 2.
    let bad = run(keel_in_repo(&["trust", "/nonexistent/keel-dir"])).await;
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(stderr(&bad).lines().count(), 1, "{}", stderr(&bad));
}

#[tokio::test]
async fn trust_and_untrust_take_their_directory_from_dash_c() {
    let repo = TempRepo::new();
    repo.write(".keel/config.toml", "approvals = \"allow\"\n");
    let elsewhere = tempfile::tempdir().unwrap();
    let home = Home::new();
    let keel_elsewhere = |args: &[&str]| {
        let mut command = home.keel();
        command.current_dir(elsewhere.path()).args(args);
        command
    };
    let path = repo.path();
    let canonical = std::fs::canonicalize(&path).unwrap();
    let repo_dir = path.to_str().unwrap();

    // No DIR: -C's directory, not the one keel was started in.
    let trusted = run(keel_elsewhere(&["-C", repo_dir, "trust"])).await;
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    assert!(
        stdout(&trusted).starts_with(&format!("trusted {}:", canonical.display())),
        "{}",
        stdout(&trusted)
    );
    let untrusted = run(keel_elsewhere(&["untrust", "-C", repo_dir])).await;
    assert!(
        stdout(&untrusted).contains(&format!("{} is no longer trusted", canonical.display())),
        "{}",
        stdout(&untrusted)
    );

    // A relative DIR is read from -C's directory.
    let parent = path.parent().unwrap().to_str().unwrap();
    let name = path.file_name().unwrap().to_str().unwrap();
    let relative = run(keel_elsewhere(&["-C", parent, "trust", name])).await;
    assert!(
        stdout(&relative).starts_with(&format!("trusted {}:", canonical.display())),
        "{}",
        stdout(&relative)
    );
    // The trust holds for a run in the repository: its approvals are not ignored.
    let server = anthropic_server(&[text("Hi.")]).await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args(["exec", "hi"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(!stderr(&output).contains("ignored"), "{}", stderr(&output));
}

#[tokio::test]
async fn a_restored_protected_path_is_told_to_the_person_too() {
    let repo = TempRepo::new();
    let config_before = std::fs::read_to_string(repo.path().join(".git/config")).unwrap();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call(
            "toolu_1",
            "run_command",
            json!({"command": "git config core.fsmonitor 'touch /tmp/keel-planted'"}),
        ),
        text("Done."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        // The detect-and-restore path (without namespaces the write lands, then is undone).
        .env("KEEL_SANDBOX_NO_NAMESPACES", "1")
        .args(["exec", "configure git"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        std::fs::read_to_string(repo.path().join(".git/config")).unwrap(),
        config_before
    );
    let err = stderr(&output);
    assert!(
        err.lines().any(|line| line
            .starts_with("keel: the command changed protected paths, which were restored: ")
            && line.contains(".git/config")),
        "{err}"
    );
}

/// Claude Code 2.1.328's own `stream-json` and `json` output for a read–edit–test–answer
/// session (see `fixtures/claude-code-2.1.328/README.md`).
const CLAUDE_STREAM: &str = include_str!("../fixtures/claude-code-2.1.328/fix4.stream.jsonl");
const CLAUDE_JSON: &str = include_str!("../fixtures/claude-code-2.1.328/fix4.json");

/// Keys of Claude Code's lines that keel leaves out on purpose (with what is under them):
/// (line kind, key path, why).
const LEFT_OUT: &[(&str, &str, &str)] = &[
    (
        "system/init",
        "terminal_slash_commands",
        "absent when empty, as Claude Code does",
    ),
    (
        "system/init",
        "plugins[]",
        "keel has no plugins: the list is empty",
    ),
    (
        "system/init",
        "analytics_disabled",
        "Claude Code's telemetry setting",
    ),
    (
        "system/init",
        "product_feedback_disabled",
        "Claude Code's feedback setting",
    ),
    (
        "system/init",
        "memory_paths",
        "Claude Code's auto-memory directory",
    ),
    (
        "system/init",
        "messaging_socket_path",
        "Claude Code's local messaging socket",
    ),
    ("system/init", "fast_mode_state", "Claude Code's fast mode"),
    (
        "system/init",
        "fast_mode_disabled_reason",
        "Claude Code's fast mode",
    ),
    (
        "system/init",
        "per_turn_effort_active",
        "Claude Code's effort setting",
    ),
    (
        "system/init",
        "ultrathink_available",
        "Claude Code's ultrathink keyword",
    ),
    (
        "system/init",
        "ultrathink_typed_raises",
        "Claude Code's ultrathink keyword",
    ),
    (
        "user",
        "tool_result_meta",
        "Claude Code's permission bookkeeping, not in sdk.d.ts",
    ),
    ("result", "fast_mode_state", "Claude Code's fast mode"),
    (
        "result",
        "fast_mode_disabled_reason",
        "Claude Code's fast mode",
    ),
    (
        "result",
        "subagent_stats",
        "Claude Code's sub-agent counters",
    ),
    ("result", "safety_stops", "Claude Code's safety counters"),
    ("result", "ttft_ms", "Claude Code's latency probes"),
    ("result", "ttft_stream_ms", "Claude Code's latency probes"),
    (
        "result",
        "time_to_request_ms",
        "Claude Code's latency probes",
    ),
    (
        "result",
        "first_content_frame_ms",
        "Claude Code's latency probes",
    ),
    (
        "result",
        "queued_turn_count",
        "keel exec has no command queue",
    ),
    (
        "result",
        "usage.output_tokens_details",
        "the providers do not report thinking apart",
    ),
    ("result", "usage.service_tier", "not known to keel"),
    (
        "result",
        "usage.cache_creation",
        "cache lifetimes are not reported to keel",
    ),
    ("result", "usage.inference_geo", "not known to keel"),
    ("result", "usage.iterations", "not known to keel"),
    ("result", "usage.speed", "Claude Code's fast mode"),
    ("result", "usage.fallback_credit", "Claude's billing"),
    ("result", "*.thinkingTokens", "not reported apart"),
    (
        "result",
        "*.cacheCreationEphemeral5mInputTokens",
        "cache lifetimes: not reported",
    ),
    (
        "result",
        "*.cacheCreationEphemeral1hInputTokens",
        "cache lifetimes: not reported",
    ),
    ("result", "*.canonicalModel", "Claude Code's price table"),
    ("result", "*.provider", "Claude Code's provider names"),
    ("result", "*.costBasis", "Claude Code's price table"),
];

/// Whether `key` is `path` or under it.
fn under(key: &str, path: &str) -> bool {
    key == path || key.starts_with(&format!("{path}.")) || key.starts_with(&format!("{path}[]"))
}

/// keel's own lines, not Claude Code's: `system/snapshot` says where `keel rewind` can put
/// the workspace back before a call that changes it.
const KEEL_ONLY_LINES: &[&str] = &["system/snapshot"];

/// keel's own keys, not in Claude Code's lines: (line kind, key path).
const KEEL_ONLY: &[(&str, &str)] = &[
    ("system/init", "provider"),
    ("system/init", "approvals"),
    ("system/init", "sandbox"),
    ("system/init", "keel_version"),
    ("result", "keel_cost_by_provider"),
];

/// `system/init`, `assistant`, ...: a line's kind.
fn line_kind(line: &Value) -> String {
    match line["type"].as_str().unwrap() {
        "system" => format!("system/{}", line["subtype"].as_str().unwrap()),
        other => other.to_owned(),
    }
}

/// Every key path of `value`: `a.b` for nested objects, `a[].b` in arrays of objects;
/// `modelUsage` and `model_usage_since_last_result` are maps by model, `keel_cost_by_provider`
/// by provider (`*.key`); content
/// blocks and `tool_use_result` (per tool) are compared apart.
fn key_paths(value: &Value, prefix: &str, out: &mut std::collections::BTreeSet<String>) {
    match value {
        Value::Object(fields) => {
            for (key, inner) in fields {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                out.insert(path.clone());
                match path.as_str() {
                    "message.content" | "tool_use_result" => {}
                    "modelUsage" | "model_usage_since_last_result" | "keel_cost_by_provider" => {
                        for model in inner.as_object().unwrap().values() {
                            key_paths(model, "*", out);
                        }
                    }
                    _ => key_paths(inner, &path, out),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                key_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

fn keys_of(line: &Value) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    key_paths(line, "", &mut out);
    out
}

/// Checks keel's `line` has the keys of Claude Code's `reference` line of the same kind,
/// but for those [`LEFT_OUT`], and no others but [`KEEL_ONLY`]'s.
fn assert_same_keys(kind: &str, reference: &Value, line: &Value) {
    let theirs = keys_of(reference);
    let ours = keys_of(line);
    let missing: Vec<&String> = theirs
        .difference(&ours)
        .filter(|key| {
            !LEFT_OUT
                .iter()
                .any(|(k, path, _)| *k == kind && under(key, path))
        })
        .collect();
    let extra: Vec<&String> = ours
        .difference(&theirs)
        .filter(|key| !KEEL_ONLY.iter().any(|(k, path)| *k == kind && path == key))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{kind}: keel lacks {missing:?} and adds {extra:?}\nkeel's line: {line}"
    );
    // What is left out is really left out (the list stays true).
    for (_, path, _) in LEFT_OUT.iter().filter(|(k, ..)| *k == kind) {
        assert!(
            !ours.iter().any(|key| under(key, path)),
            "{kind}: {path} is listed as left out"
        );
    }
}

/// The keys of content blocks of `kind` in `lines`' messages.
fn block_keys(lines: &[Value], kind: &str) -> std::collections::BTreeSet<String> {
    lines
        .iter()
        .filter(|line| line.get("message").is_some())
        .flat_map(|line| {
            line["message"]["content"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|block| block["type"] == kind)
        .flat_map(|block| {
            block
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
        })
        .collect()
}

/// keel runs the reference's session with its own tools: says a word and reads `calc.py`,
/// fixes `add` with an edit, runs the test, answers. Returns the output lines.
async fn calc_run(args: &[&str]) -> Vec<Value> {
    let repo = TempRepo::new();
    repo.write("calc.py", "def add(a, b):\n    return a - b\n");
    repo.write("test_calc.sh", "grep -q 'a + b' calc.py && echo ok\n");
    let home = Home::new();
    let mut first = tool_call("toolu_0001_0", "read_file", json!({"path": "calc.py"}));
    first
        .content
        .insert(0, keel::provider::ContentBlock::text("Let me look."));
    let server = anthropic_server(&[
        first,
        tool_call(
            "toolu_0002_0",
            "patch_file",
            json!({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}),
        ),
        tool_call(
            "toolu_0003_0",
            "run_command",
            json!({"command": "sh test_calc.sh"}),
        ),
        text("Fixed: add subtracted. Tests pass."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "-y"])
        .args(args)
        .arg("Fix add in calc.py and run the tests");
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(
        repo.read("calc.py").contains("a + b"),
        "the edit was made: {}",
        stderr(&output)
    );
    json_lines(&stdout(&output), &repo.path())
}

#[tokio::test]
async fn stream_json_has_claude_codes_lines_and_keys() {
    let reference: Vec<Value> = CLAUDE_STREAM
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let lines: Vec<Value> = calc_run(&["--output-format", "stream-json"])
        .await
        .into_iter()
        .filter(|line| !KEEL_ONLY_LINES.contains(&line_kind(line).as_str()))
        .collect();
    // The same lines, in the same order.
    let kinds = |lines: &[Value]| lines.iter().map(line_kind).collect::<Vec<_>>();
    assert_eq!(kinds(&lines), kinds(&reference));
    // Each line has the reference line's keys.
    for (theirs, ours) in reference.iter().zip(&lines) {
        assert_same_keys(&line_kind(theirs), theirs, ours);
    }
    // Content blocks have the Messages API's keys.
    for kind in ["text", "tool_use", "tool_result"] {
        let (theirs, ours) = (block_keys(&reference, kind), block_keys(&lines, kind));
        assert!(
            !ours.is_empty() && ours.is_subset(&theirs),
            "{kind}: {ours:?} vs {theirs:?}"
        );
    }
    // One reply's blocks share its message id (the provider's); every line has a uuid and the session id.
    assert_eq!(lines[1]["message"]["id"], lines[2]["message"]["id"]);
    for line in &lines {
        assert_eq!(line["uuid"], "[uuid]", "{line}");
        assert_eq!(line["session_id"], "[session-id]", "{line}");
    }
    // Each tool result's `tool_use_result` says what the model read.
    for line in lines.iter().filter(|l| l["type"] == "user") {
        let block = &line["message"]["content"][0];
        assert_eq!(
            line["tool_use_result"],
            json!({"content": block["content"], "is_error": false}),
            "{line}"
        );
    }
    assert!(
        lines[7]["tool_use_result"]["content"]
            .as_str()
            .unwrap()
            .starts_with("ok\n")
    );
}

#[tokio::test]
async fn json_is_claude_codes_result_object() {
    let reference: Value = serde_json::from_str(CLAUDE_JSON).unwrap();
    let lines = calc_run(&["--output-format", "json"]).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_same_keys("result", &reference, &lines[0]);
    assert_eq!(lines[0]["num_turns"], 4);
    assert_eq!(lines[0]["stop_reason"], "end_turn");
}

#[tokio::test]
async fn partial_messages_stream_each_reply_as_the_messages_api_does() {
    let lines = calc_run(&[
        "--output-format",
        "stream-json",
        "--include-partial-messages",
    ])
    .await;
    let events: Vec<String> = lines
        .iter()
        .map(|line| match line["type"].as_str().unwrap() {
            "stream_event" => line["event"]["type"].as_str().unwrap().to_owned(),
            _ => line_kind(line),
        })
        .collect();
    let first_reply = [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "assistant",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "assistant",
        "message_delta",
        "message_stop",
        "user",
    ];
    assert_eq!(events[0], "system/init");
    assert_eq!(events[1..13], first_reply, "{events:?}");
    assert_eq!(events.last().unwrap(), "result");
    let stream: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "stream_event")
        .collect();
    for line in &stream {
        assert_eq!(line["uuid"], "[uuid]");
        assert_eq!(line["session_id"], "[session-id]");
        assert!(line["parent_tool_use_id"].is_null());
    }
    let start = &stream[0]["event"]["message"];
    assert_eq!(start["id"], lines[5]["message"]["id"]);
    assert_eq!(
        stream[2]["event"]["delta"],
        json!({"type": "text_delta", "text": "Let me look."})
    );
    assert_eq!(stream[4]["event"]["index"], 1);
    assert_eq!(stream[4]["event"]["content_block"]["type"], "tool_use");
    assert_eq!(
        stream[5]["event"]["delta"],
        json!({"type": "input_json_delta", "partial_json": r#"{"path":"calc.py"}"#})
    );
    assert_eq!(
        stream[7]["event"]["delta"],
        json!({"stop_reason": "tool_use", "stop_sequence": null})
    );
}

#[tokio::test]
async fn a_refused_call_is_a_permission_denial_in_the_result() {
    let repo = TempRepo::new();
    repo.write("a.txt", "changed\n");
    let home = Home::new();
    let input = json!({"message": "Commit it", "all": true});
    let server = anthropic_server(&[
        tool_call("toolu_1", "git_commit", input.clone()),
        text("Done."),
    ])
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args([
        "exec",
        "--approvals",
        "deny",
        "--output-format",
        "json",
        "Commit the change",
    ]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let lines = json_lines(&stdout(&output), &repo.path());
    assert_eq!(
        lines[0]["permission_denials"],
        json!([{"tool_name": "git_commit", "tool_use_id": "toolu_1", "tool_input": input}])
    );
}

#[tokio::test]
async fn a_gateway_s_token_and_headers_reach_the_provider_and_never_a_command() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[
        tool_call("t1", "run_command", json!({"command": "env"})),
        text("Done."),
    ])
    .await;
    home.write_config(&format!(
        "provider = \"gateway\"\n[providers.gateway]\nkind = \"anthropic\"\nbase_url = \"{}\"\n\
         env_key = \"GATEWAY_TOKEN\"\n[providers.gateway.headers]\n\"X-Org\" = \"${{ORG_ROUTE}}\"\n",
        server.uri()
    ));
    let mut command = home.keel();
    command
        .current_dir(repo.path())
        .env("GATEWAY_TOKEN", "gw-token-0123456789")
        .env("ORG_ROUTE", "org-secret-987654")
        .args(["exec", "-y", "show the environment"]);
    let output = run(command).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let received = server.received_requests().await.unwrap();
    assert_eq!(
        received[0].headers.get("x-org").unwrap(),
        "org-secret-987654"
    );
    assert_eq!(
        received[0].headers.get("x-api-key").unwrap(),
        "gw-token-0123456789"
    );
    // The command's environment held neither the key nor the header's variable.
    let body = String::from_utf8_lossy(&received[1].body).into_owned();
    assert!(body.contains("PATH="), "{body}");
    assert!(!body.contains("gw-token-0123456789"));
    assert!(!body.contains("org-secret-987654"));
}

#[tokio::test]
async fn claude_code_s_auth_token_is_a_bearer_token() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = anthropic_server(&[text("Hello.")]).await;
    let mut command = home.keel();
    command
        .current_dir(repo.path())
        .env("ANTHROPIC_AUTH_TOKEN", "gw-token-0123456789")
        .env("ANTHROPIC_BASE_URL", server.uri())
        .env("ANTHROPIC_CUSTOM_HEADERS", "X-Team: platform")
        .args(["exec", "hi"]);
    let output = run(command).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let received = server.received_requests().await.unwrap();
    assert_eq!(
        received[0].headers.get("authorization").unwrap(),
        "Bearer gw-token-0123456789"
    );
    assert_eq!(received[0].headers.get("x-team").unwrap(), "platform");
}
