//! Background tasks through the facade: when the task store opens, and what opening it does.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use keel::{BackgroundTasks, CodingAgent};
use keel_tasks::{NewTask, TaskStatus, start_time};
use keel_test_support::git::TempRepo;
use keel_test_support::scripted::ScriptedProvider;

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
