//! Hooks and permission rules inside the loop, with real hook scripts.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use keel_engine::{
    Agent, AgentEvent, HookConfig, HookEvent, Hooks, PermissionRules, Session, Stop,
};
use keel_provider::Role;
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::ScriptedProvider;
use keel_test_support::scripted::tool_results;
use serde_json::json;

fn hook(event: HookEvent, matcher: Option<&str>, command: &str) -> HookConfig {
    HookConfig {
        event,
        matcher: matcher.map(str::to_owned),
        command: command.to_owned(),
        timeout_secs: Some(10),
    }
}

fn session(
    provider: Arc<ScriptedProvider>,
    dir: &Path,
    hooks: Vec<HookConfig>,
    rules: PermissionRules,
) -> Session {
    Agent::builder(provider)
        .model("m")
        .tools(default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default()).unwrap())
        .hooks(Hooks::from_config(&hooks, runner()).unwrap())
        .permissions(rules)
        .build()
        .unwrap()
        .session(dir)
        .unwrap()
}

fn results(session: &Session) -> Vec<(String, bool)> {
    tool_results(session.history())
}

#[tokio::test]
async fn a_pre_tool_use_hook_exiting_2_blocks_the_call_and_the_model_reads_why() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "run_command", json!({"command": "touch made.txt"}))
            .then_text("ok, I will not"),
    );
    let block = hook(
        HookEvent::PreToolUse,
        Some("run_command"),
        "echo 'commands are frozen during the release' >&2; exit 2",
    );
    let mut session = session(
        provider,
        dir.path(),
        vec![block],
        PermissionRules::default(),
    );
    let outcome = session.run("make a file").await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert!(!dir.path().join("made.txt").exists());
    assert_eq!(
        results(&session),
        [("commands are frozen during the release".to_owned(), true)]
    );
}

#[tokio::test]
async fn permission_rules_deny_before_and_allow_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("build")).unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "run_command", json!({"command": "touch a.txt"}))
            .then_tool_call("t2", "run_command", json!({"command": "rm -rf build"}))
            .then_text("done"),
    );
    let rules = PermissionRules::parse(
        &["run_command(rm -rf build)".to_owned()],
        &["run_command(touch*)".to_owned()],
    )
    .unwrap();
    // The default approver (DenyGated) would refuse `rm -rf`; the allow rule lets it run.
    let mut session = session(provider, dir.path(), Vec::new(), rules);
    session.run("go").await;
    let results = results(&session);
    assert!(
        results[0].0.contains("run_command(touch*)") && results[0].1,
        "{results:?}"
    );
    assert!(!dir.path().join("a.txt").exists());
    assert!(!results[1].1, "{results:?}");
    assert!(!dir.path().join("build").exists());
}

#[tokio::test]
async fn a_stop_hook_sends_the_model_back_once() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_text("done (untested)")
            .then_text("done, and the tests pass"),
    );
    // Blocks the first stop only: the second input has stop_hook_active = true.
    let gate = hook(
        HookEvent::Stop,
        None,
        "grep -q '\"stop_hook_active\":true' && exit 0; echo 'run the tests first' >&2; exit 2",
    );
    let mut session = session(
        provider.clone(),
        dir.path(),
        vec![gate],
        PermissionRules::default(),
    );
    let outcome = session.run("fix it").await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(outcome.text, "done, and the tests pass");
    assert_eq!(outcome.iterations, 2);
    let second = &provider.requests()[1];
    let last = second.messages.last().unwrap();
    assert_eq!(
        (last.role, last.text()),
        (Role::User, "run the tests first".to_owned())
    );
}

#[tokio::test]
async fn post_tool_use_feedback_and_session_start_context_reach_the_model() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "read_file", json!({"path": "a.txt"}))
            .then_text("ok"),
    );
    let hooks = vec![
        hook(
            HookEvent::SessionStart,
            None,
            "echo 'The CI is red on main.'",
        ),
        hook(
            HookEvent::PostToolUse,
            Some("read_file"),
            "echo 'remember: a.txt is generated' >&2; exit 2",
        ),
    ];
    let mut session = session(
        provider.clone(),
        dir.path(),
        hooks,
        PermissionRules::default(),
    );
    session.run("look").await;
    let first = &provider.requests()[0].messages[0];
    assert_eq!(first.content.len(), 2);
    assert!(first.text().contains("The CI is red on main."), "{first:?}");
    let (content, is_error) = &results(&session)[0];
    assert!(!is_error);
    assert!(
        content.ends_with("[hook] remember: a.txt is generated"),
        "{content}"
    );
}

#[tokio::test]
async fn a_failing_hook_is_reported_and_never_fatal() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "read_file", json!({"path": "a.txt"}))
            .then_text("ok"),
    );
    let broken = hook(HookEvent::PreToolUse, None, "exit 7");
    let mut session = session(
        provider,
        dir.path(),
        vec![broken],
        PermissionRules::default(),
    );
    let events: Vec<AgentEvent> = session.run_streaming("look").collect().await;
    assert!(
        events.iter().any(
            |e| matches!(e, AgentEvent::Warning { message } if message.contains("hook failed"))
        )
    );
    let AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!()
    };
    assert_eq!(outcome.stop, Stop::Completed);
    assert!(!results(&session)[0].1);
}

/// The process runner command hooks run through: keel-sandbox's.
fn runner() -> std::sync::Arc<dyn keel_tool::ProcessRunner> {
    std::sync::Arc::new(keel_sandbox::ProcessGroupRunner)
}
