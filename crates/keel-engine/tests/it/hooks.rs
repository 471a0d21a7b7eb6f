//! Hooks with Claude Code's contract, driven through real bash scripts in temporary
//! directories, and Rust callbacks.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use keel_engine::{
    Hook, HookConfig, HookConfigError, HookEvent, HookInput, HookOutcome, Hooks,
    PermissionDecision, SessionStartSource,
};
use keel_tool::ToolOutput;
use serde_json::{Value, json};
use tempfile::TempDir;

/// Writes an executable script `name` into `dir`.
fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/usr/bin/env bash\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn config(event: HookEvent, matcher: Option<&str>, command: &str) -> HookConfig {
    HookConfig {
        event,
        matcher: matcher.map(str::to_owned),
        command: command.to_owned(),
        timeout_secs: None,
    }
}

fn hooks(configs: &[HookConfig]) -> Hooks {
    Hooks::from_config(configs, runner()).unwrap()
}

fn pre(dir: &Path, tool: &str) -> HookInput {
    HookInput::pre_tool_use(
        "session-1",
        dir,
        tool,
        json!({"command": "cargo test", "timeout_secs": 30}),
    )
}

fn block(reason: &str) -> HookOutcome {
    HookOutcome::Block {
        reason: reason.to_owned(),
    }
}

#[tokio::test]
async fn exit_2_blocks_with_stderr_as_the_reason() {
    let dir = TempDir::new().unwrap();
    script(
        dir.path(),
        "check.sh",
        "echo 'ignored stdout'\necho '  rm -rf is not allowed here  ' >&2\nexit 2",
    );
    let report = hooks(&[config(HookEvent::PreToolUse, None, "./check.sh")])
        .run(&pre(dir.path(), "run_command"))
        .await;
    assert_eq!(report.outcome, block("rm -rf is not allowed here"));
    assert!(report.failures.is_empty(), "{:?}", report.failures);
}

#[tokio::test]
async fn exit_2_with_empty_stderr_blocks_with_a_default_reason() {
    let dir = TempDir::new().unwrap();
    let report = hooks(&[config(HookEvent::PreToolUse, None, "exit 2")])
        .run(&pre(dir.path(), "run_command"))
        .await;
    assert_eq!(report.outcome, block("blocked by hook `exit 2`"));
}

#[tokio::test]
async fn json_permission_decisions_allow_deny_and_ask() {
    let dir = TempDir::new().unwrap();
    for (word, decision) in [
        ("allow", PermissionDecision::Allow),
        ("deny", PermissionDecision::Deny),
        ("ask", PermissionDecision::Ask),
    ] {
        let output = json!({
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": word,
                "permissionDecisionReason": format!("policy says {word}"),
            }
        });
        script(dir.path(), "decide.sh", &format!("echo '{output}'"));
        let report = hooks(&[config(HookEvent::PreToolUse, None, "./decide.sh")])
            .run(&pre(dir.path(), "write_file"))
            .await;
        assert_eq!(
            report.outcome,
            HookOutcome::Permission {
                decision,
                reason: Some(format!("policy says {word}")),
            }
        );
        assert!(report.failures.is_empty(), "{:?}", report.failures);
    }
}

#[tokio::test]
async fn legacy_decision_block_and_continue_false() {
    let dir = TempDir::new().unwrap();
    let run = |command: &str, event: HookEvent| {
        let hooks = hooks(&[config(event, None, command)]);
        let input = match event {
            HookEvent::Stop => HookInput::stop("s", dir.path(), false, "done"),
            _ => pre(dir.path(), "run_command"),
        };
        async move { hooks.run(&input).await }
    };
    let report = run(
        r#"echo '{"decision": "block", "reason": "tests fail"}'"#,
        HookEvent::PreToolUse,
    )
    .await;
    assert_eq!(report.outcome, block("tests fail"));
    // A Stop hook that blocks keeps the model working.
    let report = run(
        r#"echo '{"decision": "block", "reason": "tests fail"}'"#,
        HookEvent::Stop,
    )
    .await;
    assert_eq!(report.outcome, block("tests fail"));
    let report = run(
        r#"echo '{"continue": false, "stopReason": "frozen"}'"#,
        HookEvent::PreToolUse,
    )
    .await;
    let stop = HookOutcome::Stop {
        reason: "frozen".to_owned(),
    };
    assert_eq!(report.outcome, stop);
    // At Stop too, `continue: false` stops the run.
    let report = run(
        r#"echo '{"continue": false, "stopReason": "frozen"}'"#,
        HookEvent::Stop,
    )
    .await;
    assert_eq!(report.outcome, stop);
    let report = run(r#"echo '{"decision": "approve"}'"#, HookEvent::PreToolUse).await;
    assert_eq!(
        report.outcome,
        HookOutcome::Permission {
            decision: PermissionDecision::Allow,
            reason: None
        }
    );
}

/// Runs a hook that saves its stdin, and returns it with the temporary path redacted.
async fn captured_stdin(dir: &Path, input: &HookInput) -> Value {
    let hooks = hooks(&[config(input.hook_event_name(), None, "cat > stdin.json")]);
    let report = hooks.run(input).await;
    assert_eq!(report.outcome, HookOutcome::Continue);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let text = std::fs::read_to_string(dir.join("stdin.json")).unwrap();
    // The directory, and the absolute paths in it (Claude's `file_path`).
    serde_json::from_str(&text.replace(&dir.display().to_string(), "[CWD]")).unwrap()
}

#[tokio::test]
async fn the_stdin_json_has_claude_codes_field_names() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let pre = captured_stdin(d, &pre(d, "run_command")).await;
    assert_eq!(
        pre,
        json!({
            "session_id": "session-1",
            "cwd": "[CWD]",
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": "cargo test", "timeout": 30000},
        })
    );
    let post = HookInput::post_tool_use(
        "session-1",
        d,
        "write_file",
        json!({"path": "a.txt", "content": "hi"}),
        &ToolOutput::text("wrote 2 bytes to a.txt (new file)")
            .with_metadata(json!({"path": "a.txt", "created": true})),
    );
    let session_start = HookInput::session_start("session-1", d, SessionStartSource::Startup);
    let stop = HookInput::stop("session-1", d, true, "All done.");
    let all = json!({
        "PreToolUse": pre,
        "PostToolUse": captured_stdin(d, &post).await,
        "SessionStart": captured_stdin(d, &session_start).await,
        "Stop": captured_stdin(d, &stop).await,
    });
    insta::assert_json_snapshot!("stdin_json", all);
}

#[tokio::test]
async fn the_matcher_is_an_anchored_regex_on_the_tool_name() {
    let dir = TempDir::new().unwrap();
    let hooks = hooks(&[config(
        HookEvent::PreToolUse,
        Some("run_command|write_.*"),
        "echo ran >> ran.txt; exit 2",
    )]);
    for (tool, runs) in [
        ("run_command", true),
        ("write_file", true),
        ("read_file", false),
        ("run_command_now", false),
        ("my_run_command", false),
    ] {
        let report = hooks.run(&pre(dir.path(), tool)).await;
        let expected = if runs {
            block("blocked by hook `echo ran >> ran.txt; exit 2`")
        } else {
            HookOutcome::Continue
        };
        assert_eq!(report.outcome, expected, "tool {tool}");
    }
    let lines = std::fs::read_to_string(dir.path().join("ran.txt")).unwrap();
    assert_eq!(lines.lines().count(), 2, "{lines}");
}

#[tokio::test]
async fn a_non_matching_hook_is_not_run() {
    let dir = TempDir::new().unwrap();
    let hooks = hooks(&[
        config(HookEvent::PreToolUse, Some("write_file"), "touch pre-ran"),
        config(HookEvent::PostToolUse, None, "touch post-ran"),
    ]);
    let report = hooks.run(&pre(dir.path(), "read_file")).await;
    assert_eq!(report.outcome, HookOutcome::Continue);
    assert!(report.failures.is_empty());
    assert!(!dir.path().join("pre-ran").exists());
    // Hooks of another event do not run either.
    assert!(!dir.path().join("post-ran").exists());
}

#[tokio::test]
async fn star_empty_and_absent_matchers_match_every_tool() {
    let dir = TempDir::new().unwrap();
    for (index, matcher) in [Some("*"), Some(""), None].into_iter().enumerate() {
        let hooks = hooks(&[config(
            HookEvent::PostToolUse,
            matcher,
            &format!("touch ran-{index}"),
        )]);
        let input = HookInput::post_tool_use(
            "s",
            dir.path(),
            "anything",
            json!({}),
            &ToolOutput::text("ok"),
        );
        let report = hooks.run(&input).await;
        assert!(report.failures.is_empty(), "{:?}", report.failures);
    }
    let ran = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(ran, 3);
}

#[tokio::test]
async fn non_tool_events_ignore_the_matcher() {
    let dir = TempDir::new().unwrap();
    let hooks = hooks(&[config(HookEvent::Stop, Some("nothing_matches"), "exit 2")]);
    let report = hooks
        .run(&HookInput::stop("s", dir.path(), false, "done"))
        .await;
    assert_eq!(report.outcome, block("blocked by hook `exit 2`"));
}

#[tokio::test]
async fn another_exit_code_is_a_reported_failure_that_does_not_block() {
    let dir = TempDir::new().unwrap();
    script(dir.path(), "lint.sh", "echo 'linter crashed' >&2\nexit 3");
    let report = hooks(&[config(HookEvent::PreToolUse, None, "./lint.sh")])
        .run(&pre(dir.path(), "run_command"))
        .await;
    assert_eq!(report.outcome, HookOutcome::Continue);
    assert_eq!(
        report.failures,
        vec!["command hook `./lint.sh` (PreToolUse) exited with code 3: linter crashed".to_owned()]
    );
}

/// The pids of the live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let entries = std::fs::read_dir("/proc").unwrap().flatten();
    entries
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

#[tokio::test]
async fn a_timeout_kills_the_process_group_and_is_reported() {
    let dir = TempDir::new().unwrap();
    // A unique duration marks this test's sleeps; one runs in the background of the shell.
    let marker = format!("30.{}", std::process::id());
    let command = format!("sleep {marker} & sleep {marker}; wait");
    let hooks = hooks(&[HookConfig {
        timeout_secs: Some(1),
        ..config(HookEvent::PreToolUse, None, &command)
    }]);
    let started = Instant::now();
    let report = hooks.run(&pre(dir.path(), "run_command")).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(report.outcome, HookOutcome::Continue);
    assert_eq!(
        report.failures,
        vec![format!(
            "command hook `{command}` (PreToolUse) timed out after 1 s and was killed"
        )]
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(&format!("sleep\0{marker}")).is_empty() {
        assert!(
            Instant::now() < deadline,
            "a hook's sleep survived the timeout"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_background_process_holding_the_output_does_not_hold_the_hook() {
    let dir = TempDir::new().unwrap();
    let marker = format!("20.{}", std::process::id());
    let hooks = hooks(&[HookConfig {
        timeout_secs: Some(15),
        ..config(
            HookEvent::SessionStart,
            None,
            &format!("sleep {marker} & echo 'server started'; echo 'context' >&2; exit 2"),
        )
    }]);
    let started = Instant::now();
    let report = hooks
        .run(&HookInput::session_start(
            "s",
            dir.path(),
            SessionStartSource::Startup,
        ))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.outcome, block("context"));
    // The background process is the hook's business: it is left running.
    let pids = processes_with(&format!("sleep\0{marker}"));
    assert_eq!(pids.len(), 1, "{pids:?}");
    let killed = std::process::Command::new("kill")
        .args(&pids)
        .status()
        .unwrap();
    assert!(killed.success());
}

#[tokio::test]
async fn a_missing_command_or_directory_is_a_failure() {
    let dir = TempDir::new().unwrap();
    let hooks = hooks(&[config(HookEvent::PreToolUse, None, "./no-such-script.sh")]);
    let report = hooks.run(&pre(dir.path(), "run_command")).await;
    assert_eq!(report.outcome, HookOutcome::Continue);
    let [failure] = report.failures.as_slice() else {
        panic!("{:?}", report.failures)
    };
    assert!(
        failure
            .starts_with("command hook `./no-such-script.sh` (PreToolUse) exited with code 127: ")
            && failure.contains("No such file or directory"),
        "{failure}"
    );

    let gone = dir.path().join("gone");
    let report = hooks.run(&pre(&gone, "run_command")).await;
    assert_eq!(report.outcome, HookOutcome::Continue);
    let [failure] = report.failures.as_slice() else {
        panic!("{:?}", report.failures)
    };
    assert!(
        failure.starts_with(&format!(
            "command hook `./no-such-script.sh` (PreToolUse) could not be started in {}: ",
            gone.display()
        )),
        "{failure}"
    );
}

#[tokio::test]
async fn bad_json_is_a_failure_and_plain_text_is_not() {
    let dir = TempDir::new().unwrap();
    let report = hooks(&[config(
        HookEvent::PreToolUse,
        None,
        "echo '{\"decision\": '",
    )])
    .run(&pre(dir.path(), "run_command"))
    .await;
    assert_eq!(report.outcome, HookOutcome::Continue);
    let [failure] = report.failures.as_slice() else {
        panic!("{:?}", report.failures)
    };
    assert!(
        failure.starts_with(
            "command hook `echo '{\"decision\": '` (PreToolUse) printed invalid JSON on stdout: "
        ),
        "{failure}"
    );

    let report = hooks(&[config(HookEvent::PreToolUse, None, "echo 'all good'")])
        .run(&pre(dir.path(), "run_command"))
        .await;
    assert_eq!(report.outcome, HookOutcome::Continue);
    assert!(report.failures.is_empty());
    assert!(report.messages.is_empty());
}

#[tokio::test]
async fn session_start_text_and_additional_context_become_messages() {
    let dir = TempDir::new().unwrap();
    let hooks = hooks(&[
        config(HookEvent::SessionStart, None, "echo 'branch: main'"),
        config(
            HookEvent::SessionStart,
            None,
            r#"echo '{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "3 open issues"}}'"#,
        ),
    ]);
    let report = hooks
        .run(&HookInput::session_start(
            "s",
            dir.path(),
            SessionStartSource::Startup,
        ))
        .await;
    assert_eq!(report.outcome, HookOutcome::Continue);
    assert_eq!(report.messages, vec!["branch: main", "3 open issues"]);
}

#[tokio::test]
async fn several_hooks_give_the_most_decisive_outcome() {
    let dir = TempDir::new().unwrap();
    let decide = |word: &str| {
        config(
            HookEvent::PreToolUse,
            None,
            &format!(r#"echo '{{"hookSpecificOutput": {{"permissionDecision": "{word}"}}}}'"#),
        )
    };
    let permission = |decision| HookOutcome::Permission {
        decision,
        reason: None,
    };
    let input = pre(dir.path(), "run_command");
    let allow_ask_failing = hooks(&[
        decide("allow"),
        decide("ask"),
        config(HookEvent::PreToolUse, None, "exit 1"),
        decide("allow"),
    ]);
    let report = allow_ask_failing.run(&input).await;
    assert_eq!(report.outcome, permission(PermissionDecision::Ask));
    assert_eq!(report.failures.len(), 1);

    let report = hooks(&[decide("deny"), decide("ask"), decide("allow")])
        .run(&input)
        .await;
    assert_eq!(report.outcome, permission(PermissionDecision::Deny));

    let two_blocks = hooks(&[
        config(HookEvent::PreToolUse, None, "echo first >&2; exit 2"),
        decide("deny"),
        config(HookEvent::PreToolUse, None, "echo second >&2; exit 2"),
    ]);
    assert_eq!(two_blocks.run(&input).await.outcome, block("first\nsecond"));
}

struct Counting {
    calls: AtomicUsize,
    answer: Result<HookOutcome, String>,
}

#[async_trait]
impl Hook for Counting {
    async fn run(&self, input: &HookInput) -> Result<HookOutcome, String> {
        assert_eq!(input.hook_event_name(), HookEvent::PostToolUse);
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.answer.clone()
    }

    fn name(&self) -> &str {
        "counting"
    }
}

struct Panicking;

#[async_trait]
impl Hook for Panicking {
    async fn run(&self, _input: &HookInput) -> Result<HookOutcome, String> {
        panic!("hook bug")
    }
}

#[tokio::test]
async fn rust_callback_hooks() {
    let dir = TempDir::new().unwrap();
    let blocking = Arc::new(Counting {
        calls: AtomicUsize::new(0),
        answer: Ok(block("formatting is off")),
    });
    let failing = Arc::new(Counting {
        calls: AtomicUsize::new(0),
        answer: Err("database locked".to_owned()),
    });
    let mut hooks = Hooks::new();
    assert!(hooks.is_empty());
    hooks
        .add(HookEvent::PostToolUse, Some("write_file"), blocking.clone())
        .unwrap();
    hooks
        .add(HookEvent::PostToolUse, None, failing.clone())
        .unwrap();
    hooks
        .add(HookEvent::PostToolUse, Some("*"), Arc::new(Panicking))
        .unwrap();
    assert!(!hooks.is_empty());
    assert!(hooks.handles(HookEvent::PostToolUse));
    assert!(!hooks.handles(HookEvent::Stop));

    let input = |tool: &str| {
        HookInput::post_tool_use("s", dir.path(), tool, json!({}), &ToolOutput::text(""))
    };
    let report = hooks.run(&input("write_file")).await;
    assert_eq!(report.outcome, block("formatting is off"));
    assert_eq!(
        report.failures,
        vec![
            "Rust hook `counting` (PostToolUse) failed: database locked".to_owned(),
            "Rust hook `Rust hook` (PostToolUse) panicked: hook bug".to_owned(),
        ]
    );
    let report = hooks.run(&input("read_file")).await;
    assert_eq!(report.outcome, HookOutcome::Continue);
    assert_eq!(blocking.calls.load(Ordering::SeqCst), 1);
    assert_eq!(failing.calls.load(Ordering::SeqCst), 2);

    let error = hooks
        .add(
            HookEvent::PreToolUse,
            Some("(unclosed"),
            Arc::new(Panicking),
        )
        .unwrap_err();
    assert!(matches!(error, HookConfigError::InvalidMatcher { .. }));
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    hooks: Vec<HookConfig>,
}

#[test]
fn command_configs_give_back_what_the_hooks_were_built_from() {
    let first = vec![
        config(HookEvent::PreToolUse, Some("run_command"), "./check.sh"),
        HookConfig {
            timeout_secs: Some(5),
            ..config(HookEvent::Stop, None, "cargo test -q")
        },
    ];
    let second = vec![config(HookEvent::SessionStart, None, "echo hi")];
    let mut hooks = Hooks::from_config(&first, runner()).unwrap();
    assert!(!hooks.has_in_process_hooks());
    hooks
        .add(
            HookEvent::PostToolUse,
            None,
            Arc::new(Counting {
                calls: AtomicUsize::new(0),
                answer: Ok(HookOutcome::Continue),
            }),
        )
        .unwrap();
    hooks.extend(Hooks::from_config(&second, runner()).unwrap());
    // In order, the Rust hook left out (it cannot be carried to another process) and said.
    let mut expected = first.clone();
    expected.extend(second);
    assert_eq!(hooks.command_configs(), expected);
    assert!(hooks.has_in_process_hooks());
    // Built again from them, the hooks are the same commands.
    let again = Hooks::from_config(&hooks.command_configs(), runner()).unwrap();
    assert_eq!(again.command_configs(), expected);
    assert!(Hooks::new().command_configs().is_empty());
}

#[test]
fn from_config_parses_toml() {
    let settings: Settings = toml::from_str(
        r#"
        [[hooks]]
        event = "PreToolUse"
        matcher = "run_command|write_file"
        command = "./check.sh"
        timeout_secs = 60

        [[hooks]]
        event = "Stop"
        command = "cargo test -q"
        "#,
    )
    .unwrap();
    assert_eq!(
        settings.hooks,
        vec![
            HookConfig {
                timeout_secs: Some(60),
                ..config(
                    HookEvent::PreToolUse,
                    Some("run_command|write_file"),
                    "./check.sh"
                )
            },
            config(HookEvent::Stop, None, "cargo test -q"),
        ]
    );
    let hooks = Hooks::from_config(&settings.hooks, runner()).unwrap();
    assert!(hooks.handles(HookEvent::PreToolUse) && hooks.handles(HookEvent::Stop));
    assert!(!hooks.handles(HookEvent::SessionStart));

    let unknown = toml::from_str::<Settings>(
        "[[hooks]]\nevent = \"Stop\"\ncommand = \"true\"\ntimeout = 5\n",
    )
    .unwrap_err();
    assert!(
        unknown.to_string().contains("unknown field `timeout`"),
        "{unknown}"
    );
    let bad_event = toml::from_str::<Settings>("[[hooks]]\nevent = \"stop\"\ncommand = \"true\"\n")
        .unwrap_err();
    assert!(
        bad_event.to_string().contains("unknown variant `stop`"),
        "{bad_event}"
    );
}

#[test]
fn config_errors_name_the_hook_and_the_problem() {
    let error = Hooks::from_config(
        &[
            config(HookEvent::Stop, None, "true"),
            config(HookEvent::PreToolUse, Some("write_file|(run"), "./check.sh"),
        ],
        runner(),
    )
    .unwrap_err();
    let text = error.to_string();
    assert!(
        text.starts_with(
            "hooks[1] (PreToolUse `./check.sh`): invalid matcher regex `write_file|(run`: "
        ) && text.contains("unclosed group"),
        "{text}"
    );
    let error = Hooks::from_config(
        &[HookConfig {
            timeout_secs: Some(0),
            ..config(HookEvent::Stop, None, "true")
        }],
        runner(),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "hooks[0] (Stop `true`): timeout_secs must be at least 1"
    );
    let error = Hooks::from_config(&[config(HookEvent::Stop, None, "  ")], runner()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "hooks[0] (Stop `  `): the command is empty"
    );
}

#[tokio::test]
async fn the_environment_names_the_session_and_the_project() {
    let dir = TempDir::new().unwrap();
    let hooks = hooks(&[config(
        HookEvent::SessionStart,
        None,
        r#"printf '%s\n%s\n%s\n%s\n' "$KEEL_SESSION_ID" "$KEEL_PROJECT_DIR" "$CLAUDE_PROJECT_DIR" "$PWD" > env.txt"#,
    )]);
    let report = hooks
        .run(&HookInput::session_start(
            "abc-123",
            dir.path(),
            SessionStartSource::Startup,
        ))
        .await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let text = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
    let project = dir.path().display().to_string();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        vec![
            "abc-123",
            project.as_str(),
            project.as_str(),
            project.as_str()
        ]
    );
}

#[tokio::test]
async fn large_output_and_unread_input_do_not_stall_a_hook() {
    let dir = TempDir::new().unwrap();
    // 1 MB of stdout and stderr, and an input far larger than a pipe that the hook never reads.
    let hooks = hooks(&[HookConfig {
        timeout_secs: Some(20),
        ..config(
            HookEvent::PreToolUse,
            None,
            "head -c 1000000 /dev/zero | tr '\\0' x; head -c 1000000 /dev/zero | tr '\\0' y >&2; exit 2",
        )
    }]);
    let input = HookInput::pre_tool_use(
        "s",
        dir.path(),
        "write_file",
        json!({"content": "z".repeat(1_000_000)}),
    );
    let report = hooks.run(&input).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    let HookOutcome::Block { reason } = report.outcome else {
        panic!("{:?}", report.outcome)
    };
    assert_eq!(reason.len(), 64 * 1024);
    assert!(reason.bytes().all(|byte| byte == b'y'));
}

/// The process runner command hooks run through: keel-sandbox's.
fn runner() -> std::sync::Arc<dyn keel_tool::ProcessRunner> {
    std::sync::Arc::new(keel_sandbox::ProcessGroupRunner)
}
