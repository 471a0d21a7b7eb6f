//! A delegated run is never freer than its parent: a deny rule, a blocking hook and a denying
//! approver set on the host's builder hold inside `code`, a sub-agent, a team step, and a
//! background task (whose recorded settings its own process runs by).

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::{Arc, Mutex};

use keel::prelude::*;
use keel::{BackgroundTasks, CodingAgent};
use keel_engine::HookEvent;
use keel_test_support::git::TempRepo;
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

/// Refuses every gated call, and remembers what it was asked.
#[derive(Default)]
struct HostSaysNo {
    asked: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl Approver for HostSaysNo {
    async fn approve(&self, request: &ApprovalRequest) -> Decision {
        let mut asked = self.asked.lock().unwrap();
        asked.push(format!("{} {}", request.tool, request.input));
        Decision::Deny("the host says no".into())
    }
}

/// The three calls a delegated run makes, each of which one policy must stop: a command the
/// deny rule names, a file write the hook blocks, and a deletion (gated) the approver refuses.
fn forbidden_calls(provider: ScriptedProvider, tag: &str) -> ScriptedProvider {
    provider
        .then_tool_call(
            &format!("{tag}_1"),
            "run_command",
            json!({"command": format!("touch ruled-out-{tag}")}),
        )
        .then_tool_call(
            &format!("{tag}_2"),
            "write_file",
            json!({"path": format!("hooked-{tag}.txt"), "content": "x"}),
        )
        .then_tool_call(
            &format!("{tag}_3"),
            "run_command",
            json!({"command": "rm -f keep.txt"}),
        )
        .then_text(&format!("{tag} done"))
}

/// A repository with a sub-agent, a team of it, and a file the deletions aim at.
fn repo() -> TempRepo {
    let repo = TempRepo::new();
    let dir = repo.path();
    std::fs::create_dir_all(dir.join(".keel/agents")).unwrap();
    std::fs::create_dir_all(dir.join(".keel/teams")).unwrap();
    std::fs::write(
        dir.join(".keel/agents/fixer.md"),
        "---\ndescription: Fixes things\n---\nYou fix things.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join(".keel/teams/crew.yaml"),
        "name: crew\ndescription: One fixer\nagents: [fixer]\n",
    )
    .unwrap();
    std::fs::write(dir.join("keep.txt"), "kept\n").unwrap();
    repo
}

/// The host's builder: a deny rule, a blocking hook, a denying approver.
fn builder(
    provider: Arc<ScriptedProvider>,
    dir: &Path,
    home: &Path,
    approver: Arc<HostSaysNo>,
) -> keel::CodingAgentBuilder {
    let hook: HookConfig = serde_json::from_value(json!({
        "event": "PreToolUse",
        "matcher": "write_file",
        "command": "echo 'the hook blocks writes' >&2; exit 2",
    }))
    .unwrap();
    CodingAgent::builder(provider)
        .cwd(dir)
        .home(home)
        .permissions(PermissionRules::parse(&[], &["run_command(touch *)".into()]).unwrap())
        .hook_configs(vec![hook])
        .approver(approver)
        .snapshots(None)
}

/// The error results of the calls tagged `tag`, in order.
fn results_of(requests: &[keel_provider::CompletionRequest], tag: &str) -> Vec<String> {
    let mut out = Vec::new();
    for request in requests {
        for message in &request.messages {
            for block in &message.content {
                if let keel_provider::ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                    ..
                } = block
                    && tool_use_id.starts_with(&format!("{tag}_"))
                    && !out
                        .iter()
                        .any(|(id, _): &(String, String)| id == tool_use_id)
                {
                    assert!(is_error, "{tool_use_id} ran: {content}");
                    out.push((tool_use_id.clone(), content.clone()));
                }
            }
        }
    }
    out.sort();
    out.into_iter().map(|(_, text)| text).collect()
}

fn assert_held(requests: &[keel_provider::CompletionRequest], dir: &Path, tag: &str) {
    let results = results_of(requests, tag);
    assert_eq!(results.len(), 3, "{tag}: {results:#?}");
    assert!(
        results[0].contains("run_command(touch *)"),
        "{tag}: {}",
        results[0]
    );
    assert!(
        results[1].contains("the hook blocks writes"),
        "{tag}: {}",
        results[1]
    );
    assert!(
        results[2].contains("the host says no"),
        "{tag}: {}",
        results[2]
    );
    assert!(!dir.join(format!("ruled-out-{tag}")).exists());
    assert!(!dir.join(format!("hooked-{tag}.txt")).exists());
    assert!(dir.join("keep.txt").exists());
}

#[tokio::test]
async fn the_host_s_policies_hold_inside_code_a_sub_agent_and_a_team_step() {
    let repo = repo();
    let home = tempfile::tempdir().unwrap();
    let dir = repo.path().canonicalize().unwrap();
    let mut script = ScriptedProvider::new().then_tool_call(
        "main_code",
        "code",
        json!({"task": "make the change", "cwd": dir, "model": "default"}),
    );
    script = forbidden_calls(script, "code");
    script = script.then_tool_call(
        "main_spawn",
        "spawn_agent",
        json!({"agent": "fixer", "task": "fix it"}),
    );
    script = forbidden_calls(script, "spawn");
    script = script.then_tool_call(
        "main_team",
        "run_team",
        json!({"team": "crew", "task": "fix it together"}),
    );
    script = forbidden_calls(script, "team");
    let provider = Arc::new(script.then_text("all delegated"));
    let approver = Arc::new(HostSaysNo::default());
    let agent = builder(provider.clone(), &dir, home.path(), approver.clone())
        .build()
        .unwrap();
    let mut session = agent.session().unwrap();
    let outcome = session.run("delegate everything").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    let requests = provider.requests();
    for tag in ["code", "spawn", "team"] {
        assert_held(&requests, &dir, tag);
    }
    // The approver was asked once per delegated run, for the deletion alone (the rule and
    // the hook stopped the others first).
    let asked = approver.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 3, "{asked:#?}");
    assert!(asked.iter().all(|call| call.contains("rm -f keep.txt")));
}

#[tokio::test]
async fn a_task_records_the_host_s_policies_for_its_own_run() {
    let repo = repo();
    let home = tempfile::tempdir().unwrap();
    let dir = repo.path().canonicalize().unwrap();
    let provider = Arc::new(
        ScriptedProvider::new()
            .then_tool_call("main_task", "start_task", json!({"task": "run the fixer"}))
            .then_text("started"),
    );
    // `true` stands in for the keel binary: the task ends at once; what matters is what was
    // recorded for it, which a task's own `keel exec` runs by (keel-cli's tests/tasks.rs).
    let agent = builder(
        provider.clone(),
        &dir,
        home.path(),
        Arc::new(HostSaysNo::default()),
    )
    .background_tasks(Some(BackgroundTasks::in_process("/bin/true")))
    .build()
    .unwrap();
    assert!(agent.warnings().is_empty(), "{:?}", agent.warnings());
    let mut session = agent.session().unwrap();
    let outcome = session.run("start a task").await;
    assert_eq!(outcome.stop, Stop::Completed, "{}", outcome.text);
    let launcher = agent.tasks().unwrap();
    let records = launcher.store().list(10).unwrap();
    assert_eq!(records.len(), 1);
    let settings = keel_tasks::load_settings(launcher.store().as_ref(), &records[0].id).unwrap();
    assert_eq!(settings.deny_rules, ["run_command(touch *)"]);
    assert_eq!(settings.hooks.len(), 1);
    assert_eq!(settings.hooks[0].event, HookEvent::PreToolUse);
    assert_eq!(settings.approvals, keel_tasks::TaskApprovals::Deny);
    assert_eq!(&settings.policy, agent.policies().sandbox());
}

#[tokio::test]
async fn in_process_hooks_turn_tasks_off_rather_than_lose_them() {
    let repo = repo();
    let home = tempfile::tempdir().unwrap();
    let mut hooks = Hooks::new();
    hooks
        .add(HookEvent::PreToolUse, None, Arc::new(BlockAll))
        .unwrap();
    let agent = CodingAgent::builder(Arc::new(ScriptedProvider::new()))
        .cwd(repo.path())
        .home(home.path())
        .hooks(hooks)
        .snapshots(None)
        .background_tasks(Some(BackgroundTasks::in_process("/bin/true")))
        .build()
        .unwrap();
    assert!(agent.tasks().is_none());
    assert!(
        agent
            .warnings()
            .iter()
            .any(|w| w.starts_with("background tasks are off: the agent has in-process hooks")),
        "{:?}",
        agent.warnings()
    );
    assert!(!agent.agent().tools().names().contains(&"start_task"));
}

/// A Rust hook that blocks every call.
struct BlockAll;

#[async_trait::async_trait]
impl keel_engine::Hook for BlockAll {
    fn name(&self) -> &str {
        "block-all"
    }

    async fn run(
        &self,
        _input: &keel_engine::HookInput,
    ) -> Result<keel_engine::HookOutcome, String> {
        Ok(keel_engine::HookOutcome::Block {
            reason: "blocked".into(),
        })
    }
}
