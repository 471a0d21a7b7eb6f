//! `run_command` for real: exit codes and signals, output order and size, stdin, environment,
//! working directory, timeouts, cancellation, and that nothing it starts outlives the call.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::{Duration, Instant};

use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::tools::{RunCommand, RunCommandArgs};
use keel_sandbox::{SandboxMode, SandboxPolicy};
use keel_test_support::temp::temp_dir;
use keel_tool::{CancellationToken, Effect, Tool, ToolContext, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

/// Workspace-write; built without the `confine` feature, which cannot confine, full access
/// (what is tested here, process groups, output and environment, is the same, and full access
/// adds no note to the output).
fn policy() -> SandboxPolicy {
    SandboxPolicy::with_mode(if cfg!(feature = "confine") {
        SandboxMode::WorkspaceWrite
    } else {
        SandboxMode::FullAccess
    })
}

fn args(command: &str, timeout_secs: Option<u64>) -> RunCommandArgs {
    RunCommandArgs {
        command: command.to_owned(),
        timeout_secs,
    }
}

async fn run_in(
    root: &Path,
    policy: SandboxPolicy,
    command: &str,
    timeout: Option<u64>,
) -> ToolOutput {
    let tool = RunCommand::new(root, policy);
    let ctx = ToolContext::new(root, "test");
    tool.call(args(command, timeout), &ctx).await.unwrap()
}

async fn run(command: &str) -> ToolOutput {
    let dir = temp_dir();
    run_in(dir.path(), policy(), command, None).await
}

/// How many live processes have `needle` in their command line (zombies are dead).
fn alive(needle: &str) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|entry| {
            let path = entry.path();
            let Ok(cmdline) = std::fs::read(path.join("cmdline")) else {
                return false;
            };
            if !String::from_utf8_lossy(&cmdline).contains(needle) {
                return false;
            }
            let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next());
            state.is_some_and(|state| state != "Z")
        })
        .count()
}

/// Waits (up to 5 s: a SIGKILLed process takes a moment to die) until no process matches.
async fn assert_gone(needle: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    while alive(needle) > 0 {
        assert!(
            Instant::now() < until,
            "{} processes with {needle:?} survived",
            alive(needle)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The result with its run-dependent parts (duration, Landlock ABI) replaced.
fn normalized(output: &ToolOutput) -> Value {
    let mut value = serde_json::to_value(output).unwrap();
    value["metadata"]["duration_ms"] = json!("[duration]");
    if !value["metadata"]["landlock_abi"].is_null() {
        value["metadata"]["landlock_abi"] = json!("[abi]");
    }
    // Whether this machine has user namespaces.
    value["metadata"]["namespaces"] = json!("[namespaces]");
    value
}

#[test]
fn definition() {
    let dir = temp_dir();
    let registry = ToolRegistry::new()
        .with(RunCommand::new(
            dir.path(),
            SandboxPolicy::with_mode(SandboxMode::WorkspaceWrite),
        ))
        .unwrap();
    insta::assert_json_snapshot!("definition", registry.definitions());
    let no_network = SandboxPolicy {
        network: false,
        ..SandboxPolicy::with_mode(SandboxMode::ReadOnly)
    };
    let tool = RunCommand::new(dir.path(), no_network);
    let description = Tool::description(&tool);
    assert!(description.contains("read-only"), "{description}");
    assert!(
        description.contains("Network access is blocked"),
        "{description}"
    );
}

#[test]
fn effect_is_the_classification_of_the_command() {
    let dir = temp_dir();
    let tool = RunCommand::new(dir.path(), policy());
    assert_eq!(tool.effect(&args("git status", None)), Effect::ReadOnly);
    assert_eq!(tool.effect(&args("touch x", None)), Effect::Mutating);
    assert_eq!(
        tool.effect(&args("rm -rf /", None)),
        Effect::destructive("rm -rf deletes files recursively")
    );
    // The registry's own timeout leaves room for the tool's.
    assert!(Tool::timeout(&tool).unwrap() > policy().max_command_timeout);
}

#[tokio::test]
async fn exit_codes_and_interleaved_output() {
    let output = run("echo out1; echo err1 >&2; echo out2; printf err2 >&2; exit 3").await;
    assert_eq!(output.content, "out1\nerr1\nout2\nerr2\n[exit code 3]\n");
    assert!(output.is_error);
    assert_eq!(output.metadata["exit_code"], 3);
    assert_eq!(output.metadata["signal"], Value::Null);
    // The metadata says how the command was confined: the snapshot is of a confining build.
    if cfg!(feature = "confine") {
        insta::assert_json_snapshot!("exit_code", normalized(&output));
    }

    let output = run("true").await;
    assert_eq!(output.content, "(no output)\n[exit code 0]\n");
    assert!(!output.is_error);
    assert_eq!(output.metadata["confined"], cfg!(feature = "confine"));
}

#[tokio::test]
async fn a_command_killed_by_a_signal_says_which() {
    let output = run("echo about to go; kill -TERM $$").await;
    assert_eq!(
        output.content,
        "about to go\n[killed by signal 15 (SIGTERM)]\n"
    );
    assert!(output.is_error);
    assert_eq!(output.metadata["signal"], 15);
    assert_eq!(output.metadata["exit_code"], Value::Null);
}

#[tokio::test]
async fn stdin_is_empty() {
    let started = Instant::now();
    let output = run("cat; read line; echo \"read: $?\"").await;
    assert_eq!(output.content, "read: 1\n[exit code 0]\n");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn runs_in_the_root() {
    let dir = temp_dir();
    std::fs::write(dir.path().join("marker.txt"), "here").unwrap();
    let output = run_in(dir.path(), policy(), "pwd; cat marker.txt", None).await;
    let root = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        output.content,
        format!("{}\nhere\n[exit code 0]\n", root.display())
    );
}

#[test]
fn credentials_and_session_sockets_are_not_passed_on() {
    // Environment variables are set on a child test process, not on this one (setting them
    // here would race with the other tests).
    if std::env::var_os("KEEL_TEST_CREDENTIALS_CHILD").is_some() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let dir = temp_dir();
        let hidden = SandboxPolicy {
            hidden_env: vec!["MY_LLM_KEY_VAR".to_owned()],
            ..policy()
        };
        let output = runtime.block_on(run_in(dir.path(), hidden, "env", None));
        assert!(!output.is_error, "{}", output.content);
        for secret in [
            "sk-ant-secret",
            "sk-openai-secret",
            "ghp-secret",
            "custom-secret",
            "aws-id-secret",
            "pat-secret",
            "/tmp/tmux-0/default",
            "agent.sock",
            "pg-secret",
        ] {
            assert!(
                !output.content.contains(secret),
                "{secret} leaked:\n{}",
                output.content
            );
        }
        assert!(
            output.content.contains("KEEL_TEST_VISIBLE=yes"),
            "{}",
            output.content
        );
        assert!(
            output.content.contains("KEEL_RUN_ID="),
            "{}",
            output.content
        );
        return;
    }
    keel_test_support::rerun::run(
        keel_test_support::rerun::command(
            module_path!(),
            "credentials_and_session_sockets_are_not_passed_on",
        )
        .env("KEEL_TEST_CREDENTIALS_CHILD", "1")
        .env("ANTHROPIC_API_KEY", "sk-ant-secret")
        .env("OPENAI_API_KEY", "sk-openai-secret")
        .env("GITHUB_TOKEN", "ghp-secret")
        .env("PGPASSWORD", "pg-secret")
        .env("MY_LLM_KEY_VAR", "custom-secret")
        .env("AWS_ACCESS_KEY_ID", "aws-id-secret")
        .env("GITHUB_PAT", "pat-secret")
        .env("TMUX", "/tmp/tmux-0/default,1,0")
        .env("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.sock")
        .env("KEEL_TEST_VISIBLE", "yes"),
    );
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let dir = temp_dir();
    let started = Instant::now();
    let output = run_in(
        dir.path(),
        policy(),
        "echo started; sleep 300.101 & sleep 300.101 & wait",
        Some(1),
    )
    .await;
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert!(
        output
            .content
            .starts_with("started\n[killed by signal 9 (timed out after 1s)]\n[note: the command did not finish within 1s"),
        "{}",
        output.content
    );
    assert!(output.is_error);
    assert_eq!(output.metadata["timed_out"], true);
    assert_eq!(output.metadata["signal"], 9);
    assert_gone("300.101").await;
    // The metadata says how the command was confined: the snapshot is of a confining build.
    if cfg!(feature = "confine") {
        insta::assert_json_snapshot!("timed_out", normalized(&output));
    }
}

#[tokio::test]
async fn processes_that_leave_the_group_are_killed_too() {
    let dir = temp_dir();
    // Still holding the output pipe after bash exits.
    let started = Instant::now();
    let output = run_in(
        dir.path(),
        policy(),
        "setsid sleep 300.102 & echo left",
        None,
    )
    .await;
    assert_eq!(output.content, "left\n[exit code 0]\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_gone("300.102").await;

    // Detached from the pipe too, found by the call's environment marker on a timeout.
    let output = run_in(
        dir.path(),
        policy(),
        "setsid sleep 300.103 > /dev/null 2>&1 < /dev/null & sleep 300.104",
        Some(1),
    )
    .await;
    assert_eq!(output.metadata["timed_out"], true);
    assert_gone("300.103").await;
    assert_gone("300.104").await;
}

#[tokio::test]
async fn background_jobs_end_with_the_command() {
    let started = Instant::now();
    let output = run("sleep 300.105 & echo done").await;
    assert_eq!(output.content, "done\n[exit code 0]\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_gone("300.105").await;
}

#[tokio::test]
async fn huge_output_is_capped_head_and_tail() {
    let started = Instant::now();
    let output = run("head -c 10000000 /dev/zero | tr '\\0' 'a'").await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(output.content.len() < 30_000, "{}", output.content.len());
    assert!(
        output.content.contains("bytes omitted (10000000 in total)"),
        "{}",
        &output.content[13_900..14_300]
    );
    assert!(output.content.ends_with("a\n[exit code 0]\n"));
    assert_eq!(output.metadata["output_bytes"], 10_000_000);

    let output = run("seq 1 1000000").await;
    assert!(output.content.starts_with("1\n2\n3\n"));
    assert!(output.content.ends_with("999999\n1000000\n[exit code 0]\n"));
    assert!(output.content.len() < 30_000, "{}", output.content.len());
    let omitted = output.metadata["omitted_bytes"].as_u64().unwrap();
    assert!(omitted > 6_800_000, "{omitted}");
}

#[tokio::test]
async fn timeouts_default_and_are_clamped() {
    let dir = temp_dir();
    let short = SandboxPolicy {
        default_command_timeout: Duration::from_secs(1),
        max_command_timeout: Duration::from_secs(2),
        ..policy()
    };
    let started = Instant::now();
    let output = run_in(dir.path(), short.clone(), "sleep 300.106", None).await;
    assert!(
        output.content.contains("timed out after 1s"),
        "{}",
        output.content
    );
    assert!(started.elapsed() < Duration::from_secs(10));

    let started = Instant::now();
    let output = run_in(dir.path(), short.clone(), "sleep 300.107", Some(500)).await;
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(1900), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert!(
        output.content.contains(
            "[note: timeout_secs 500 is more than the maximum of 2s, so the command ran with 2s]"
        ),
        "{}",
        output.content
    );
    assert_eq!(output.metadata["timeout_secs"], 2);

    let tool = RunCommand::new(dir.path(), short);
    let ctx = ToolContext::new(dir.path(), "test");
    let err = tool.call(args("true", Some(0)), &ctx).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid arguments: timeout_secs must be at least 1"
    );
    let err = tool.call(args("  ", None), &ctx).await.unwrap_err();
    assert!(err.to_string().contains("command is empty"), "{err}");
    assert_gone("300.106").await;
    assert_gone("300.107").await;
}

#[tokio::test]
async fn cancellation_kills_the_group() {
    let dir = temp_dir();
    let token = CancellationToken::new();
    let ctx = ToolContext::new(dir.path(), "test").with_cancel(token.clone());
    let tool = RunCommand::new(dir.path(), policy());
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel();
    });
    let started = Instant::now();
    let output = tool
        .call(args("sleep 300.108 & sleep 300.108 & wait", Some(60)), &ctx)
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    canceller.await.unwrap();
    assert_eq!(
        output.content,
        "(no output)\n[killed by signal 9 (interrupted by the user)]\n"
    );
    assert_eq!(output.metadata["cancelled"], true);
    assert_gone("300.108").await;
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let dir = temp_dir();
    let tool = RunCommand::new(dir.path(), policy());
    let ctx = ToolContext::new(dir.path(), "test");
    let call = tool.call(args("sleep 300.109 & sleep 300.109 & wait", Some(60)), &ctx);
    let cut = tokio::time::timeout(Duration::from_millis(500), call).await;
    assert!(cut.is_err(), "the command should still have been running");
    assert_gone("300.109").await;

    // The registry drops the call's future when the run is cancelled.
    let token = CancellationToken::new();
    let ctx = ToolContext::new(dir.path(), "test").with_cancel(token.clone());
    let registry = ToolRegistry::new()
        .with(RunCommand::new(dir.path(), policy()))
        .unwrap();
    let input = json!({"command": "sleep 300.110 & sleep 300.110 & wait"});
    let call = ToolCall {
        id: "call_1",
        name: "run_command",
        input: ToolInput::Valid(&input),
    };
    let dispatch = registry.dispatch(call, &ctx);
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel();
    };
    let (output, ()) = tokio::join!(dispatch, cancel);
    assert_eq!(output.content, "interrupted by the user");
    assert_gone("300.110").await;
}

#[tokio::test]
async fn progress_reports_output_lines() {
    let dir = temp_dir();
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
    let ctx = ToolContext::new(dir.path(), "test").with_progress(sender);
    let registry = ToolRegistry::new()
        .with(RunCommand::new(dir.path(), policy()))
        .unwrap();
    let input = json!({"command": "echo first; sleep 0.4; echo second"});
    let call = ToolCall {
        id: "call_7",
        name: "run_command",
        input: ToolInput::Valid(&input),
    };
    let output = registry.dispatch(call, &ctx).await;
    assert_eq!(output.content, "first\nsecond\n[exit code 0]\n");
    let mut lines = Vec::new();
    while let Ok(progress) = receiver.try_recv() {
        assert_eq!(progress.call_id, "call_7");
        assert_eq!(progress.tool, "run_command");
        lines.push(progress.line);
    }
    // One line per read at most every 250 ms: both, unless a slow machine read them at once.
    assert_eq!(
        lines.last().map(String::as_str),
        Some("second"),
        "{lines:?}"
    );
    assert!(
        lines.iter().all(|line| line == "first" || line == "second"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn a_missing_root_is_reported() {
    let dir = temp_dir();
    let gone = dir.path().join("gone");
    let tool = RunCommand::new(&gone, policy());
    let ctx = ToolContext::new(dir.path(), "test");
    let err = tool.call(args("true", None), &ctx).await.unwrap_err();
    assert!(err.to_string().contains("is not a directory"), "{err}");
}
