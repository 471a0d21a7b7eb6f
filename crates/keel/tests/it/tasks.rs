//! Background tasks through the facade: when the task store opens, what opening it does, and
//! the runs that wait for the tasks they start or do not.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::StreamExt as _;
use keel::prelude::*;
use keel::{BackgroundTasks, TASKS_ENDED_PROMPT};
use keel_tasks::{NewTask, TaskStatus, start_time};
use keel_test_support::git::TempRepo;
use keel_test_support::scripted::ScriptedProvider;
use serde_json::json;

fn agent(repo: &TempRepo, home: &std::path::Path) -> CodingAgent {
    CodingAgent::builder(Arc::new(ScriptedProvider::new()))
        .cwd(repo.path())
        .home(home)
        .snapshots(None)
        .background_tasks(Some(BackgroundTasks::in_process("/bin/true")))
        .build()
        .unwrap()
}

#[test]
fn the_store_opens_at_its_first_use_and_marks_tasks_whose_supervisor_died_interrupted() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let db = home.path().join("tasks.db");
    // A task left running by a keel that was killed: its supervisor's pid is gone.
    let first = agent(&repo, home.path());
    // Building opened nothing: a start that never uses the store never pays for it.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(!db.exists(), "the build opened the task store");
    let launcher = first.tasks().unwrap();
    let record = launcher
        .store()
        .create(
            &NewTask {
                parent_session: Some("s1".into()),
                agent: "main".into(),
                runner: "keel".into(),
                task_prompt: "fix it".into(),
                workdir: repo.path().canonicalize().unwrap(),
                timeout_secs: 60,
            },
            launcher.settings(),
            &home.path().join("task-logs"),
        )
        .unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    let started = start_time(pid).unwrap_or(1);
    child.wait().unwrap();
    assert!(
        launcher
            .store()
            .mark_running(&record.id, pid, started)
            .unwrap()
    );
    assert!(db.exists());
    drop(first);

    // The next agent built on this home finds it at its first use.
    let second = agent(&repo, home.path());
    let found = second
        .tasks()
        .unwrap()
        .store()
        .get(&record.id)
        .unwrap()
        .unwrap();
    assert_eq!(found.status, TaskStatus::Interrupted, "{found:?}");
}

#[test]
fn a_task_store_that_cannot_be_opened_turns_tasks_off_when_they_are_used() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    // Not a database: SQLite cannot open a directory.
    std::fs::create_dir(home.path().join("tasks.db")).unwrap();
    // The store opens at its first use: the build itself does not fail on it.
    let agent = agent(&repo, home.path());
    let store = agent.tasks().unwrap().store();
    for _ in 0..2 {
        let err = store.list(10).unwrap_err().to_string();
        assert!(
            err.starts_with("background tasks are off: the task store could not be opened: "),
            "{err}"
        );
        assert!(err.contains("tasks.db"), "{err}");
    }
}

/// A stand-in for the `keel` binary the `keel` runner starts: a script that takes a second
/// (so the run that started the task ends first) and succeeds.
fn slow_runner(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join("slow-keel");
    std::fs::write(&path, "#!/bin/sh\nsleep 1\necho done\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// An agent on `model` whose tasks run `runner`, allowed to start them.
fn agent_with_tasks(
    repo: &TempRepo,
    home: &Path,
    model: Arc<ScriptedProvider>,
    runner: PathBuf,
) -> CodingAgent {
    CodingAgent::builder(model)
        .cwd(repo.path())
        .home(home)
        .snapshots(None)
        .approver(AllowAll)
        .background_tasks(Some(BackgroundTasks::in_process(runner)))
        .build()
        .unwrap()
}

/// The model starts a task, then says `Started.`.
fn starts_a_task() -> ScriptedProvider {
    ScriptedProvider::new()
        .then_tool_call("toolu_1", "start_task", json!({"task": "Say hi"}))
        .then_text("Started.")
}

#[tokio::test(flavor = "multi_thread")]
async fn run_waits_for_the_tasks_it_started_then_has_the_model_check_them() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let model = Arc::new(starts_a_task().then_text("The task said done."));
    let agent = agent_with_tasks(&repo, home.path(), model.clone(), slow_runner(home.path()));
    let mut session = agent.session().unwrap();
    let events: Vec<RunEvent> = agent.run(&mut session, "Start a task").collect().await;

    let waiting: Vec<&Vec<String>> = events
        .iter()
        .filter_map(|event| match event {
            RunEvent::WaitingForTasks { ids } => Some(ids),
            _ => None,
        })
        .collect();
    assert_eq!(waiting.len(), 1, "{events:?}");
    assert_eq!(waiting[0].len(), 1, "{events:?}");
    assert!(events.iter().any(|e| matches!(e, RunEvent::TasksEnded)));
    let Some(RunEvent::Done(outcome)) = events.last() else {
        panic!("the last event is not Done: {events:?}");
    };
    assert_eq!(outcome.stop, Stop::Completed);
    assert_eq!(outcome.text, "The task said done.");
    // Both runs' calls: the start, `Started.`, and the check after the task ended.
    assert_eq!(outcome.iterations, 3);
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    let last = requests[2].messages.last().unwrap();
    assert!(
        format!("{last:?}").contains(TASKS_ENDED_PROMPT),
        "the third request is not the check: {last:?}"
    );
    let task = agent
        .tasks()
        .unwrap()
        .store()
        .get(&waiting[0][0])
        .unwrap()
        .unwrap();
    assert_eq!(task.status, TaskStatus::Completed, "{task:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn run_without_waiting_ends_with_the_first_run_and_leaves_the_task_running() {
    let repo = TempRepo::new();
    let home = tempfile::tempdir().unwrap();
    let model = Arc::new(starts_a_task());
    let agent = agent_with_tasks(&repo, home.path(), model.clone(), slow_runner(home.path()));
    let mut session = agent.session().unwrap();
    let events: Vec<RunEvent> = agent
        .run_without_waiting(&mut session, "Start a task")
        .collect()
        .await;

    assert!(
        !events
            .iter()
            .any(|e| matches!(e, RunEvent::WaitingForTasks { .. } | RunEvent::TasksEnded)),
        "{events:?}"
    );
    let Some(RunEvent::Done(outcome)) = events.last() else {
        panic!("the last event is not Done: {events:?}");
    };
    assert_eq!(outcome.text, "Started.");
    assert_eq!(outcome.iterations, 2);
    assert_eq!(model.requests().len(), 2);
    // The task goes on: its notification is for the session's next run.
    let active = agent
        .tasks()
        .unwrap()
        .store()
        .active_for_session(session.id())
        .unwrap();
    assert_eq!(active.len(), 1, "{active:?}");
}
