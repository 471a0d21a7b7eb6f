//! Background tasks run in-process with real runner processes and a real SQLite store:
//! summaries, exit codes, timeouts that kill the whole group, cancellation, limits,
//! notifications, and which agents may start tasks.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel_agents::tasks::{
    NewTask, Runners, Spawner, SqliteTaskStore, TaskLauncher, TaskLimits, TaskNotifier, TaskRecord,
    TaskStatus, TaskStore, start_time,
};
use keel_engine::Notifier;
use tempfile::TempDir;

struct Fixture {
    dir: TempDir,
    launcher: TaskLauncher,
    store: Arc<SqliteTaskStore>,
}

/// A launcher running supervisors in this process, with `runners` (`sh -c SCRIPT {task}`).
fn fixture(runners: &[(&str, &str)], limits: TaskLimits) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteTaskStore::open(&dir.path().join("tasks.db")).unwrap());
    let mut all = Runners::new(Path::new("/bin/false"));
    for (name, script) in runners {
        all = all
            .with(
                name,
                vec!["sh".into(), "-c".into(), (*script).into(), "{task}".into()],
            )
            .unwrap();
    }
    let launcher = TaskLauncher::new(
        store.clone(),
        all,
        dir.path().join("logs"),
        Spawner::InProcess,
    )
    .limits(limits);
    Fixture {
        dir,
        launcher,
        store,
    }
}

fn task(fixture: &Fixture, runner: &str, prompt: &str, timeout_secs: u64) -> NewTask {
    NewTask {
        parent_session: Some("session-1".into()),
        agent: "main".into(),
        runner: runner.into(),
        task_prompt: prompt.into(),
        workdir: fixture.dir.path().to_path_buf(),
        timeout_secs,
    }
}

async fn run(fixture: &Fixture, runner: &str, prompt: &str, timeout_secs: u64) -> TaskRecord {
    let started = fixture
        .launcher
        .start(task(fixture, runner, prompt, timeout_secs))
        .unwrap();
    let record = fixture
        .launcher
        .wait(&started.record.id, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(record.status.is_terminal(), "{record:?}");
    record
}

#[tokio::test]
async fn an_external_runner_s_json_result_is_the_summary_and_the_log_is_whole() {
    let fixture = fixture(
        &[(
            "script",
            r#"echo "working on: $0"; echo 'warning: slow' >&2; printf '{"type":"result","result":"did %s"}\n' "$0""#,
        )],
        TaskLimits::default(),
    );
    let record = run(&fixture, "script", "the thing; rm -rf / # not a shell", 60).await;
    assert_eq!(record.status, TaskStatus::Completed);
    assert_eq!(record.exit_code, Some(0));
    assert_eq!(
        record.result_summary.as_deref(),
        Some("did the thing; rm -rf / # not a shell")
    );
    assert!(
        record
            .output_tail
            .starts_with("working on: the thing; rm -rf /")
    );
    assert_eq!(record.error_tail, "warning: slow");
    let log = std::fs::read_to_string(&record.output_path).unwrap();
    assert!(log.contains("working on: the thing"), "{log}");
    assert!(log.contains("[stderr] warning: slow"), "{log}");
    assert!(record.started_at.is_some() && record.completed_at.is_some());
    assert_eq!(record.pid, Some(std::process::id()));
}

#[tokio::test]
async fn a_failing_runner_records_its_real_exit_code() {
    let fixture = fixture(
        &[("failing", "echo 'it broke' >&2; exit 3")],
        TaskLimits::default(),
    );
    let record = run(&fixture, "failing", "x", 60).await;
    assert_eq!(record.status, TaskStatus::Failed);
    assert_eq!(record.exit_code, Some(3));
    assert_eq!(record.error_tail, "it broke");
    let notice = keel_agents::tasks::notice(&record);
    assert!(
        notice.starts_with(&format!("Task {} failed (exit 3) in ", record.id)),
        "{notice}"
    );
    assert!(notice.contains("Errors: it broke"), "{notice}");
}

/// Waits (up to 5 s) until process `pid` is gone.
async fn gone(pid: u32) -> bool {
    for _ in 0..50 {
        if start_time(pid).is_none() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn the_timeout_kills_the_whole_group() {
    let fixture = fixture(
        &[(
            "slow",
            // A child and a grandchild in the runner's group, both sleeping long.
            "sleep 300 & echo $! > pids; sh -c 'sleep 300 & echo $! >> pids; wait' & sleep 300",
        )],
        TaskLimits::default(),
    );
    let record = run(&fixture, "slow", "x", 1).await;
    assert_eq!(record.status, TaskStatus::TimedOut);
    assert_eq!(record.exit_code, None);
    let pids = std::fs::read_to_string(fixture.dir.path().join("pids")).unwrap();
    let pids: Vec<u32> = pids.lines().map(|p| p.trim().parse().unwrap()).collect();
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(gone(pid).await, "process {pid} survived the timeout");
    }
    assert!(keel_agents::tasks::notice(&record).contains("timed out (after 1 s)"));
}

#[tokio::test]
async fn cancel_kills_the_group_and_stays_cancelled() {
    let fixture = fixture(
        &[("slow", "echo $$ > pid; sleep 300")],
        TaskLimits::default(),
    );
    let started = fixture
        .launcher
        .start(task(&fixture, "slow", "x", 600))
        .unwrap();
    let id = started.record.id.clone();
    let pid_file = fixture.dir.path().join("pid");
    for _ in 0..100 {
        if std::fs::read_to_string(&pid_file).is_ok_and(|p| !p.trim().is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let cancelled = fixture.launcher.cancel(&id).unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert!(gone(pid).await, "the runner survived the cancel");
    // The supervisor's own end does not overwrite the cancel.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let record = fixture.store.get(&id).unwrap().unwrap();
    assert_eq!(record.status, TaskStatus::Cancelled);
    let again = fixture.launcher.cancel(&id).unwrap_err().to_string();
    assert_eq!(again, format!("task {id} already ended (cancelled)"));
}

#[tokio::test]
async fn the_limit_refuses_more_tasks_and_many_running_warn() {
    let limits = TaskLimits {
        max_running: 3,
        warn_above: 2,
        ..TaskLimits::default()
    };
    let fixture = fixture(&[("slow", "sleep 300")], limits);
    let mut ids = Vec::new();
    for n in 0..3 {
        let started = fixture
            .launcher
            .start(task(&fixture, "slow", "x", 600))
            .unwrap();
        assert_eq!(started.warning.is_some(), n == 2, "task {n}");
        ids.push(started.record.id);
    }
    let refused = fixture
        .launcher
        .start(task(&fixture, "slow", "x", 600))
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "3 tasks are running, the most allowed ([tasks] max_running = 3); wait for one \
         (wait_task) or cancel one (cancel_task) first"
    );
    let unknown = fixture
        .launcher
        .start(task(&fixture, "nope", "x", 600))
        .unwrap_err();
    assert_eq!(unknown.to_string(), "no runner `nope`; known: keel, slow");
    for id in ids {
        fixture.launcher.cancel(&id).unwrap();
    }
}

#[tokio::test]
async fn the_session_is_notified_once_and_only_of_its_own_tasks() {
    let fixture = fixture(
        &[("quick", "echo '{\"result\": \"all good\"}'")],
        TaskLimits::default(),
    );
    let mine = run(&fixture, "quick", "x", 60).await;
    let mut other = task(&fixture, "quick", "y", 60);
    other.parent_session = Some("session-2".into());
    let started = fixture.launcher.start(other).unwrap();
    fixture
        .launcher
        .wait(&started.record.id, Duration::from_secs(30))
        .await
        .unwrap();
    let notifier = TaskNotifier::new(fixture.store.clone());
    let notices = notifier.take("session-1").await;
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].starts_with(&format!("Task {} completed (exit 0) in ", mine.id)),
        "{}",
        notices[0]
    );
    assert!(
        notices[0].contains(". Summary: all good Log: "),
        "{}",
        notices[0]
    );
    assert!(notices[0].ends_with(&format!("{}.log", mine.id)));
    assert!(notifier.take("session-1").await.is_empty(), "exactly once");
    assert_eq!(notifier.take("session-2").await.len(), 1);
}

#[tokio::test]
async fn a_running_task_whose_supervisor_is_gone_is_interrupted_on_recovery() {
    let fixture = fixture(&[], TaskLimits::default());
    let record = fixture
        .store
        .create(
            &task(&fixture, "keel", "x", 60),
            &fixture.dir.path().join("logs"),
        )
        .unwrap();
    // A process that has exited: its pid and start time no longer match anything.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let started = start_time(pid).unwrap_or(1);
    child.wait().unwrap();
    assert!(
        fixture
            .store
            .mark_running(&record.id, pid, started)
            .unwrap()
    );
    // And one whose supervisor is alive (this process) is left alone.
    let alive = fixture
        .store
        .create(
            &task(&fixture, "keel", "y", 60),
            &fixture.dir.path().join("logs"),
        )
        .unwrap();
    let me = std::process::id();
    assert!(
        fixture
            .store
            .mark_running(&alive.id, me, start_time(me).unwrap())
            .unwrap()
    );
    let marked = fixture.launcher.recover().unwrap();
    assert_eq!(marked.len(), 1);
    assert_eq!(marked[0].id, record.id);
    assert_eq!(marked[0].status, TaskStatus::Interrupted);
    assert!(
        marked[0]
            .note
            .as_deref()
            .unwrap()
            .starts_with(&format!("interrupted: its supervisor (pid {pid}) is gone"))
    );
    assert_eq!(
        fixture.store.get(&alive.id).unwrap().unwrap().status,
        TaskStatus::Running
    );
    assert!(fixture.launcher.recover().unwrap().is_empty());
}

#[test]
fn sub_agents_may_start_tasks_only_when_allowed() {
    use keel_agents::{
        AgentDefinition, AgentDefinitions, Delegation, Models, SubAgentLimits, SubAgentRunner,
    };
    let fixture = fixture(&[], TaskLimits::default());
    let define = |name: &str| AgentDefinition {
        name: name.into(),
        description: "d".into(),
        tools: None,
        model: None,
        max_steps: None,
        system_prompt: "p".into(),
        path: format!("{name}.md").into(),
    };
    let definitions = Arc::new(AgentDefinitions::from_definitions(vec![
        define("worker"),
        define("helper"),
    ]));
    let model = Arc::new(keel_test_support::scripted::ScriptedProvider::new());
    let runner = SubAgentRunner::new(
        Delegation::new(model, Models::new("m", "m")),
        definitions.clone(),
        keel_tool::ToolRegistry::new(),
        SubAgentLimits::default(),
    );
    let names = |runner: &SubAgentRunner, agent: &str| -> Vec<String> {
        let tools = runner.tools_for(definitions.get(agent).unwrap()).unwrap();
        tools.names().iter().map(|n| n.to_string()).collect()
    };
    // By default no sub-agent gets them, even with a launcher.
    let runner = runner.with_tasks(fixture.launcher.clone(), Vec::new());
    assert!(!names(&runner, "worker").contains(&"start_task".to_owned()));
    let runner = runner.with_tasks(fixture.launcher.clone(), vec!["worker".into()]);
    let worker = names(&runner, "worker");
    for tool in [
        "start_task",
        "task_status",
        "wait_task",
        "cancel_task",
        "list_tasks",
    ] {
        assert!(
            worker.contains(&tool.to_owned()),
            "{tool} missing: {worker:?}"
        );
    }
    assert!(!names(&runner, "helper").contains(&"start_task".to_owned()));
}
