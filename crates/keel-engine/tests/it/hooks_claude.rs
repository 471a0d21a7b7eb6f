//! Hooks written for Claude Code, run by keel as they are: real scripts reading Claude Code's
//! stdin (tool names such as `Bash` and `Edit`, absolute `file_path`s, Claude's result
//! shapes), every event Claude Code 2.1 has that keel can fire, and the answers Claude Code
//! reads (`updatedInput`, `continue: false`, `systemMessage`, `additionalContext`).

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use keel_engine::{
    AgentBuilder, AgentEvent, AllowAll, CompactionPolicy, HookConfig, HookEvent, Hooks,
    JsonlSessionStore, PermissionRules, Session, SessionEndReason, Stop,
};
use keel_provider::Role;
use keel_sandbox::{PathSandbox, SandboxPolicy, default_tools};
use keel_test_support::scripted::{ScriptedProvider, tool_results};
use serde_json::{Value, json};
use tempfile::TempDir;

/// Claude Code's hook inputs, recorded (see the fixture's README).
const CLAUDE_INPUTS: &str = include_str!("../fixtures/claude-code-2.1.328/hook-inputs.json");

/// Fields Claude Code sends that keel does not (it has no prompt ids, no per-call duration
/// for hooks, no background task list or cron jobs in the Stop input).
const NOT_SENT_BY_KEEL: [&str; 4] = [
    "prompt_id",
    "duration_ms",
    "background_tasks",
    "session_crons",
];

fn hook(event: HookEvent, matcher: Option<&str>, command: &str) -> HookConfig {
    HookConfig {
        event,
        matcher: matcher.map(str::to_owned),
        command: command.to_owned(),
        timeout_secs: Some(20),
    }
}

/// Writes the executable script `name` into `dir`; returns its absolute path, the command.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn builder(provider: Arc<ScriptedProvider>, dir: &Path, hooks: &[HookConfig]) -> AgentBuilder {
    keel_engine::Agent::builder(provider)
        .model("m")
        .tools(default_tools(&PathSandbox::new(dir).unwrap(), &SandboxPolicy::default()).unwrap())
        .hooks(Hooks::from_config(hooks, runner()).unwrap())
}

fn session(provider: Arc<ScriptedProvider>, dir: &Path, hooks: &[HookConfig]) -> Session {
    builder(provider, dir, hooks)
        .build()
        .unwrap()
        .session(dir)
        .unwrap()
}

fn runner() -> Arc<dyn keel_tool::ProcessRunner> {
    Arc::new(keel_sandbox::ProcessGroupRunner)
}

/// Anthropic's `bash_command_validator_example.py`, as Claude Code users copy it into
/// `.claude/hooks/`, with its rules changed to forbid `rm`.
const BASH_VALIDATOR: &str = r#"#!/usr/bin/env python3
import json
import re
import sys

_VALIDATION_RULES = [
    (r"\brm\b", "Do not delete files with rm; move them to trash/ instead"),
    (r"^grep\b(?!.*\|)", "Use 'rg' (ripgrep) instead of 'grep'"),
]


def _validate_command(command: str) -> list[str]:
    issues = []
    for pattern, message in _VALIDATION_RULES:
        if re.search(pattern, command):
            issues.append(message)
    return issues


def main():
    try:
        input_data = json.load(sys.stdin)
    except json.JSONDecodeError as e:
        print(f"Error: Invalid JSON input: {e}", file=sys.stderr)
        sys.exit(1)

    tool_name = input_data.get("tool_name", "")
    if tool_name != "Bash":
        sys.exit(0)

    tool_input = input_data.get("tool_input", {})
    command = tool_input.get("command", "")
    if not command:
        sys.exit(0)

    issues = _validate_command(command)
    if issues:
        for message in issues:
            print(f"• {message}", file=sys.stderr)
        # Exit code 2 blocks tool call and shows stderr to Claude
        sys.exit(2)


if __name__ == "__main__":
    main()
"#;

#[tokio::test]
async fn anthropics_bash_validator_blocks_rm_by_its_claude_name() {
    let dir = TempDir::new().unwrap();
    let scripts = TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("build")).unwrap();
    let validator = script(scripts.path(), "bash_command_validator.py", BASH_VALIDATOR);
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "run_command", json!({"command": "rm -rf build"}))
            .then_tool_call("t2", "run_command", json!({"command": "echo kept"}))
            .then_tool_call("t3", "read_file", json!({"path": "build/../x"}))
            .then_text("done"),
    );
    let hooks = [hook(HookEvent::PreToolUse, Some("Bash"), &validator)];
    let mut session = builder(provider, dir.path(), &hooks)
        .approver(AllowAll)
        .build()
        .unwrap()
        .session(dir.path())
        .unwrap();
    let outcome = session.run("clean up").await;
    assert_eq!(outcome.stop, Stop::Completed);
    assert!(dir.path().join("build").is_dir(), "rm ran");
    let results = tool_results(session.history());
    assert_eq!(
        results[0],
        (
            "• Do not delete files with rm; move them to trash/ instead".to_owned(),
            true
        )
    );
    assert!(results[1].0.starts_with("kept\n"), "{results:?}");
}

/// An `Edit|Write` PostToolUse hook in bash and sed, as one is written for Claude Code: it
/// reads `.tool_input.file_path` and `.tool_response.filePath`, refuses a relative path,
/// logs both and answers with `additionalContext`.
const EDIT_LOGGER: &str = r#"#!/usr/bin/env bash
input=$(cat)
tool=$(printf '%s' "$input" | sed -n 's/.*"tool_name":"\([^"]*\)".*/\1/p')
file=$(printf '%s' "$input" | sed -n 's/.*"tool_input":{"file_path":"\([^"]*\)".*/\1/p')
response=$(printf '%s' "$input" | sed -n 's/.*"tool_response":{.*"filePath":"\([^"]*\)".*/\1/p')
case "$file" in
  /*) ;;
  *) echo "file_path is not absolute: '$file'" >&2; exit 2 ;;
esac
echo "$tool $file $response" >> "$LOG"
printf '{"hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"formatted %s"}}\n' "$file"
"#;

#[tokio::test]
async fn an_edit_or_write_hook_reads_absolute_paths_and_claudes_responses() {
    let dir = TempDir::new().unwrap();
    let scripts = TempDir::new().unwrap();
    let log = scripts.path().join("edits.log");
    let logger = script(scripts.path(), "log_edits.sh", EDIT_LOGGER);
    let command = format!("LOG='{}' {logger}", log.display());
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call(
                "t1",
                "write_file",
                json!({"path": "src/a.py", "content": "x = 1\n"}),
            )
            .then_tool_call(
                "t2",
                "patch_file",
                json!({"path": "src/a.py", "old_string": "x = 1", "new_string": "x = 2"}),
            )
            .then_tool_call("t3", "read_file", json!({"path": "src/a.py"}))
            .then_text("done"),
    );
    let hooks = [hook(HookEvent::PostToolUse, Some("Edit|Write"), &command)];
    let mut session = session(provider, dir.path(), &hooks);
    session.run("make a.py").await;
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/a.py")).unwrap(),
        "x = 2\n"
    );
    let file = dir.path().join("src/a.py").display().to_string();
    // The read is not matched; the write and the edit are, by their Claude names.
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!("Write {file} {file}\nEdit {file} {file}\n")
    );
    let results = tool_results(session.history());
    assert!(
        results[1].0.ends_with(&format!("[hook] formatted {file}")),
        "{results:?}"
    );
    assert!(!results[2].0.contains("[hook]"), "{results:?}");
}

#[tokio::test]
async fn user_prompt_submit_adds_context_to_the_prompt_or_blocks_it() {
    let dir = TempDir::new().unwrap();
    let provider = Arc::new(ScriptedProvider::new().then_text("ok").then_text("ok"));
    let hooks = [
        // Plain stdout is context, as in Claude Code.
        hook(
            HookEvent::UserPromptSubmit,
            None,
            "echo 'Current sprint: 42'",
        ),
        // So is additionalContext.
        hook(
            HookEvent::UserPromptSubmit,
            None,
            r#"echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"The CI is green."}}'"#,
        ),
        // A prompt holding a password is not sent.
        hook(
            HookEvent::UserPromptSubmit,
            None,
            r#"if grep -q '"prompt":"[^"]*password'; then echo '{"decision":"block","reason":"Prompts may not hold passwords"}'; fi"#,
        ),
    ];
    let mut session = session(provider.clone(), dir.path(), &hooks);
    let outcome = session.run("my password is hunter2, log in").await;
    assert_eq!(
        outcome.stop,
        Stop::PromptBlocked {
            reason: "Prompts may not hold passwords".to_owned()
        }
    );
    assert!(outcome.text.contains("Prompts may not hold passwords"));
    assert!(provider.requests().is_empty());
    assert!(session.history().is_empty());

    let outcome = session.run("what is the sprint?").await;
    assert_eq!(outcome.stop, Stop::Completed);
    let request = &provider.requests()[0];
    assert_eq!(request.messages.len(), 1);
    let prompt = &request.messages[0];
    assert_eq!(prompt.role, Role::User);
    assert_eq!(
        prompt.text(),
        "what is the sprint?Current sprint: 42The CI is green."
    );
}

#[tokio::test]
async fn post_tool_use_failure_fires_instead_of_post_tool_use_for_a_failed_call() {
    let dir = TempDir::new().unwrap();
    let out = TempDir::new().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "read_file", json!({"path": "missing.txt"}))
            .then_tool_call("t2", "read_file", json!({"path": "a.txt"}))
            .then_text("done"),
    );
    let log = |name: &str| {
        format!(
            "cat >> '{}'; echo >> '{0}'",
            out.path().join(name).display()
        )
    };
    let hooks = [
        hook(HookEvent::PostToolUse, Some("Read"), &log("post.jsonl")),
        hook(
            HookEvent::PostToolUseFailure,
            Some("Read"),
            &log("failure.jsonl"),
        ),
        hook(
            HookEvent::PostToolUseFailure,
            None,
            "echo 'list the directory first' >&2; exit 2",
        ),
    ];
    let mut session = session(provider, dir.path(), &hooks);
    session.run("read").await;
    let lines = |name: &str| -> Vec<Value> {
        std::fs::read_to_string(out.path().join(name))
            .unwrap_or_default()
            .lines()
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    };
    let (post, failure) = (lines("post.jsonl"), lines("failure.jsonl"));
    assert_eq!(post.len(), 1, "{post:?}");
    assert_eq!(post[0]["tool_use_id"], "t2");
    assert_eq!(failure.len(), 1, "{failure:?}");
    assert_eq!(failure[0]["tool_use_id"], "t1");
    assert_eq!(failure[0]["hook_event_name"], "PostToolUseFailure");
    assert!(
        failure[0]["error"]
            .as_str()
            .unwrap()
            .contains("missing.txt"),
        "{failure:?}"
    );
    assert!(failure[0].get("tool_response").is_none());
    // A failure hook's exit 2 is feedback for the model, with the failed result.
    let results = tool_results(session.history());
    assert!(results[0].1);
    assert!(
        results[0].0.ends_with("[hook] list the directory first"),
        "{results:?}"
    );
}

#[tokio::test]
async fn updated_input_changes_the_call_and_still_meets_the_rules() {
    let dir = TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("build")).unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call(
                "t1",
                "run_command",
                json!({"command": "echo unsafe > out.txt"}),
            )
            .then_tool_call("t2", "run_command", json!({"command": "echo hi"}))
            .then_text("done"),
    );
    // Rewrites the first command; turns the second into one the rules deny.
    let rewrite = r#"input=$(cat)
case "$input" in
  *unsafe*) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"echo safe > out.txt","description":"write safely"}}}' ;;
  *) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"rm -rf build"}}}' ;;
esac"#;
    let hooks = [hook(HookEvent::PreToolUse, Some("Bash"), rewrite)];
    let rules = PermissionRules::parse(&[], &["run_command(rm *)".to_owned()]).unwrap();
    let mut session = builder(provider, dir.path(), &hooks)
        .permissions(rules)
        .approver(AllowAll)
        .build()
        .unwrap()
        .session(dir.path())
        .unwrap();
    let events: Vec<AgentEvent> = session.run_streaming("go").collect().await;
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "safe\n"
    );
    // The call as it ran is reported.
    assert!(events.iter().any(|event| matches!(
        event,
        AgentEvent::ToolCallStarted { input, .. } if *input == json!({"command": "echo safe > out.txt"})
    )));
    // The changed second call is denied by the rule, though the hook allowed it.
    assert!(dir.path().join("build").is_dir());
    let results = tool_results(session.history());
    assert!(results[1].1, "{results:?}");
    assert!(results[1].0.contains("run_command(rm *)"), "{results:?}");
}

#[tokio::test]
async fn continue_false_stops_the_run_and_system_messages_reach_the_host() {
    let dir = TempDir::new().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("t1", "read_file", json!({"path": "a.txt"}))
            .then_text("never asked for"),
    );
    let hooks = [hook(
        HookEvent::PostToolUse,
        None,
        r#"echo '{"continue":false,"stopReason":"budget for today is spent","systemMessage":"keel stopped by policy"}'"#,
    )];
    let mut session = session(provider.clone(), dir.path(), &hooks);
    let events: Vec<AgentEvent> = session.run_streaming("go").collect().await;
    let AgentEvent::Finished(outcome) = events.last().unwrap() else {
        panic!("{events:?}")
    };
    assert_eq!(
        outcome.stop,
        Stop::HookStopped {
            reason: "budget for today is spent".to_owned()
        }
    );
    assert_eq!(provider.requests().len(), 1);
    // The call was answered: the history stays well-formed.
    keel_engine::history::check_pairing(session.history()).unwrap();
    assert!(events.iter().any(|event| matches!(
        event,
        AgentEvent::HookMessage { event: HookEvent::PostToolUse, message } if message == "keel stopped by policy"
    )));
}

#[tokio::test]
async fn a_sub_agents_session_fires_subagent_stop_not_stop() {
    let dir = TempDir::new().unwrap();
    let out = TempDir::new().unwrap();
    let log = |name: &str| format!("cat > '{}'", out.path().join(name).display());
    let hooks = [
        hook(HookEvent::Stop, None, &log("stop.json")),
        hook(HookEvent::SubagentStop, None, &log("subagent-stop.json")),
        hook(HookEvent::SessionStart, None, &log("session-start.json")),
    ];
    let provider = Arc::new(ScriptedProvider::new().then_text("reviewed: fine"));
    let mut session = session(provider, dir.path(), &hooks);
    session.set_subagent("reviewer");
    session.run("review").await;
    assert!(!out.path().join("stop.json").exists());
    assert!(!out.path().join("session-start.json").exists());
    let input: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("subagent-stop.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(input["hook_event_name"], "SubagentStop");
    assert_eq!(input["agent_type"], "reviewer");
    assert_eq!(input["agent_id"], session.id());
    assert_eq!(input["last_assistant_message"], "reviewed: fine");
    assert_eq!(input["stop_hook_active"], false);
}

#[tokio::test]
async fn pre_compact_fires_before_automatic_and_asked_for_compactions() {
    let dir = TempDir::new().unwrap();
    let out = TempDir::new().unwrap();
    let log = out.path().join("pre-compact.jsonl");
    let hooks = [hook(
        HookEvent::PreCompact,
        None,
        &format!("cat >> '{}'; echo >> '{0}'", log.display()),
    )];
    // A window so small that the loop compacts before its first request.
    let provider = Arc::new(ScriptedProvider::new().then_text("ok"));
    let mut session = builder(provider, dir.path(), &hooks)
        .compaction(CompactionPolicy {
            context_window: Some(10),
            ..CompactionPolicy::default()
        })
        .build()
        .unwrap()
        .session(dir.path())
        .unwrap();
    session.run("hello").await;
    let _ = session.compact_now().await;
    let triggers: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let input: Value = serde_json::from_str(line).unwrap();
            assert_eq!(input["hook_event_name"], "PreCompact");
            assert_eq!(input["custom_instructions"], "");
            input["trigger"].clone()
        })
        .collect();
    assert_eq!(triggers.first(), Some(&json!("auto")));
    assert_eq!(triggers.last(), Some(&json!("manual")));
}

#[tokio::test]
async fn session_end_runs_with_its_reason_and_its_output_changes_nothing() {
    let dir = TempDir::new().unwrap();
    let out = TempDir::new().unwrap();
    let file = out.path().join("end.json");
    let hooks = [hook(
        HookEvent::SessionEnd,
        None,
        &format!(
            r#"cat > '{}'; echo '{{"continue":false,"systemMessage":"bye"}}'"#,
            file.display()
        ),
    )];
    let provider = Arc::new(ScriptedProvider::new().then_text("ok"));
    let mut session = session(provider, dir.path(), &hooks);
    session.run("hi").await;
    // A host's own notice goes to Notification hooks (none here): nothing happens.
    assert_eq!(
        session
            .notify("keel is waiting for your input", "idle_prompt")
            .await,
        keel_engine::HookReport::default()
    );
    let report = session.end(SessionEndReason::PromptInputExit).await;
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    assert_eq!(report.system_messages, ["bye"]);
    let input: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(input["hook_event_name"], "SessionEnd");
    assert_eq!(input["reason"], "prompt_input_exit");
}

/// Every event keel fires, through one session as Claude Code's recorded one went (read
/// calc.py, fix it with an edit, run a command, answer), plus a failed call, a call that
/// needs approval, a compaction, the end of the session, and a sub-agent's stop: what each
/// hook read on stdin is snapshotted (paths and ids redacted), and the events Claude Code's
/// recording has are compared with it, field by field and in order.
#[tokio::test]
async fn every_events_stdin_has_claude_codes_fields_in_claude_codes_order() {
    let dir = TempDir::new().unwrap();
    let sessions = TempDir::new().unwrap();
    let out = TempDir::new().unwrap();
    std::fs::write(
        dir.path().join("calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("build")).unwrap();
    let hooks: Vec<HookConfig> = HookEvent::ALL
        .iter()
        .map(|event| {
            let file = out.path().join(format!("{event}.jsonl"));
            hook(
                *event,
                None,
                &format!("cat >> '{}'; echo >> '{0}'", file.display()),
            )
        })
        .collect();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("toolu_0001_0", "read_file", json!({"path": "calc.py"}))
            .then_tool_call(
                "toolu_0002_0",
                "patch_file",
                json!({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b", "replace_all": false}),
            )
            .then_tool_call(
                "toolu_0003_0",
                "run_command",
                json!({"command": "printf ok"}),
            )
            .then_tool_call("toolu_0004_0", "read_file", json!({"path": "missing.py"}))
            .then_tool_call("toolu_0005_0", "run_command", json!({"command": "rm -rf build"}))
            .then_text("Fixed: add subtracted. Tests pass.")
            .then_text("The user fixed calc.py.")
            .then_text("reviewed"),
    );
    let agent = builder(provider, dir.path(), &hooks)
        .approver(AllowAll)
        .session_store(Arc::new(JsonlSessionStore::new(sessions.path())))
        .build()
        .unwrap();
    let mut session = agent.session(dir.path()).unwrap();
    session.set_permission_mode("bypassPermissions");
    session.run("Fix calc.py so the tests pass.").await;
    let _ = session.compact_now().await;
    session.end(SessionEndReason::Other).await;
    let mut sub = agent.session(dir.path()).unwrap();
    sub.set_subagent("reviewer");
    sub.run("review calc.py").await;

    // Every input, per event, paths and ids redacted.
    let root = dir.path().display().to_string();
    let store = sessions.path().display().to_string();
    let mut all = serde_json::Map::new();
    for event in HookEvent::ALL {
        let text = std::fs::read_to_string(out.path().join(format!("{event}.jsonl")))
            .unwrap_or_else(|_| panic!("no {event} hook ran"))
            .replace(&store, "<SESSIONS>")
            .replace(&root, "<ROOT>")
            .replace(session.id(), "<SESSION-ID>")
            .replace(sub.id(), "<SUBAGENT-SESSION-ID>");
        let inputs: Vec<Value> = text
            .lines()
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        all.insert(event.name().to_owned(), Value::Array(inputs));
    }
    insta::assert_json_snapshot!("every_event_stdin", all);

    // The events Claude Code's recording has: keel sends the same fields, in the same order
    // (less those it does not have), and for Read the same argument and result shapes.
    let claude: Value = serde_json::from_str(CLAUDE_INPUTS).unwrap();
    for (event, recorded) in claude.as_object().unwrap() {
        let keel = &all[event.as_str()][0];
        let keys = |value: &Value| -> Vec<String> {
            value
                .as_object()
                .unwrap()
                .keys()
                .filter(|key| !NOT_SENT_BY_KEEL.contains(&key.as_str()))
                .cloned()
                .collect()
        };
        assert_eq!(keys(keel), keys(recorded), "{event}");
        if let Some(tool_input) = recorded.get("tool_input") {
            assert_eq!(keel["tool_name"], recorded["tool_name"], "{event}");
            assert_eq!(keel["tool_input"], *tool_input, "{event}");
        }
        if let Some(response) = recorded.get("tool_response") {
            assert_eq!(keys(&keel["tool_response"]), keys(response));
            assert_eq!(
                keys(&keel["tool_response"]["file"]),
                keys(&response["file"])
            );
            assert_eq!(
                keel["tool_response"]["file"]["content"],
                response["file"]["content"]
            );
        }
    }
    // The transcript is the session's file.
    assert_eq!(
        all["Stop"][0]["transcript_path"],
        "<SESSIONS>/<SESSION-ID>.jsonl"
    );
}

#[tokio::test]
async fn continue_false_before_a_call_stops_the_run_and_later_calls_do_not_run() {
    let dir = TempDir::new().unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then(keel_test_support::scripted::Turn::Reply(
                keel_test_support::scripted::reply(
                    vec![
                        keel_provider::ContentBlock::tool_use(
                            "t1",
                            "run_command",
                            json!({"command": "touch one"}),
                        ),
                        keel_provider::ContentBlock::tool_use(
                            "t2",
                            "write_file",
                            json!({"path": "two", "content": ""}),
                        ),
                    ],
                    keel_provider::StopReason::ToolUse,
                ),
            ))
            .then_text("never asked for"),
    );
    let hooks = [hook(
        HookEvent::PreToolUse,
        Some("Bash"),
        r#"echo '{"continue":false,"stopReason":"maintenance window"}'"#,
    )];
    let mut session = session(provider.clone(), dir.path(), &hooks);
    let outcome = session.run("go").await;
    assert_eq!(
        outcome.stop,
        Stop::HookStopped {
            reason: "maintenance window".to_owned()
        }
    );
    assert!(!dir.path().join("one").exists());
    assert!(!dir.path().join("two").exists());
    assert_eq!(provider.requests().len(), 1);
    let results = tool_results(session.history());
    assert_eq!(
        results,
        [
            (
                "not run: a hook stopped the run: maintenance window".to_owned(),
                true
            ),
            ("not run: a hook stopped the run".to_owned(), true),
        ]
    );
}
