//! `SqliteTaskStore` on real SQLite files: the life of a task, who wins a race, exactly-once
//! notifications, the schema version, and many processes (here: threads with their own
//! connections) sharing one file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;

use keel_sandbox::SandboxPolicy;
use keel_tasks::{
    NewTask, SqliteTaskStore, TaskEnd, TaskError, TaskRecord, TaskSettings, TaskStatus, TaskStore,
};
use tempfile::TempDir;

fn new_task(session: Option<&str>, prompt: &str) -> NewTask {
    NewTask {
        parent_session: session.map(str::to_owned),
        agent: "main".into(),
        runner: "keel".into(),
        task_prompt: prompt.into(),
        workdir: PathBuf::from("/work/project"),
        timeout_secs: 600,
    }
}

/// The settings the tasks of these tests are recorded with.
fn settings() -> TaskSettings {
    TaskSettings::new(Path::new("/work/project"), SandboxPolicy::default())
}

fn completed(summary: &str) -> TaskEnd {
    TaskEnd {
        status: TaskStatus::Completed,
        exit_code: Some(0),
        output_tail: format!("line 1\n{summary}\n"),
        error_tail: "warning: something\n".into(),
        result_summary: Some(summary.into()),
        note: None,
    }
}

struct Fixture {
    dir: TempDir,
    store: SqliteTaskStore,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteTaskStore::open(&dir.path().join("tasks.db")).unwrap();
        Self { dir, store }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("tasks.db")
    }

    fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    fn create(&self, session: Option<&str>, prompt: &str) -> TaskRecord {
        self.store
            .create(&new_task(session, prompt), &settings(), &self.logs())
            .unwrap()
    }

    /// A task of `session` that ran and completed.
    fn ended(&self, session: &str, prompt: &str) -> TaskRecord {
        let task = self.create(Some(session), prompt);
        assert!(self.store.mark_running(&task.id, 100, 200).unwrap());
        assert!(self.store.finish(&task.id, &completed(prompt)).unwrap());
        task
    }

    fn status(&self, id: &str) -> TaskStatus {
        self.store.get(id).unwrap().unwrap().status
    }
}

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

fn is_rfc3339_utc(text: &str) -> bool {
    text.ends_with('Z') && text.parse::<jiff::Timestamp>().is_ok()
}

#[test]
fn the_doc_example_holds() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteTaskStore::open(&dir.path().join("tasks.db")).unwrap();
    let task = NewTask {
        parent_session: Some("session-1".into()),
        agent: "main".into(),
        runner: "keel".into(),
        task_prompt: "Fix the flaky test".into(),
        workdir: dir.path().to_path_buf(),
        timeout_secs: 600,
    };
    let record = store
        .create(&task, &settings(), &dir.path().join("logs"))
        .unwrap();
    assert_eq!(record.status, TaskStatus::Queued);
    assert_eq!(record.id.len(), 8);
    assert_eq!(
        record.output_path,
        dir.path().join("logs").join(format!("{}.log", record.id))
    );
}

#[test]
fn create_records_a_queued_task_that_get_returns() {
    let f = Fixture::new();
    let task = new_task(Some("s1"), "Fix the flaky test");
    let record = f.store.create(&task, &settings(), &f.logs()).unwrap();

    assert_eq!(record.id.len(), 8);
    assert!(
        record
            .id
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()),
        "{}",
        record.id
    );
    assert_eq!(record.parent_session.as_deref(), Some("s1"));
    assert_eq!(record.agent, "main");
    assert_eq!(record.runner, "keel");
    assert_eq!(record.task_prompt, "Fix the flaky test");
    assert_eq!(record.workdir, PathBuf::from("/work/project"));
    assert_eq!(record.status, TaskStatus::Queued);
    assert_eq!(record.pid, None);
    assert_eq!(record.process_start, None);
    assert!(is_rfc3339_utc(&record.created_at), "{}", record.created_at);
    assert_eq!(record.started_at, None);
    assert_eq!(record.completed_at, None);
    assert_eq!(record.exit_code, None);
    assert_eq!(
        record.output_path,
        f.logs().join(format!("{}.log", record.id))
    );
    assert_eq!(record.output_tail, "");
    assert_eq!(record.error_tail, "");
    assert_eq!(record.result_summary, None);
    assert_eq!(record.notified_at, None);
    assert_eq!(record.timeout_secs, 600);
    assert_eq!(record.note, None);

    assert_eq!(f.store.get(&record.id).unwrap(), Some(record));
    assert_eq!(f.store.get("nosuchid").unwrap(), None);
    assert_eq!(f.store.count_active().unwrap(), 1);
}

#[test]
fn ids_are_unique_and_list_is_newest_first() {
    let f = Fixture::new();
    let created: Vec<TaskRecord> = (0..30)
        .map(|i| f.create(None, &format!("task {i}")))
        .collect();

    let mut ids: Vec<&str> = created.iter().map(|t| t.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 30);

    let listed = f.store.list(100).unwrap();
    assert_eq!(listed.len(), 30);
    let prompts: Vec<&str> = listed.iter().map(|t| t.task_prompt.as_str()).collect();
    let expected: Vec<String> = (0..30).rev().map(|i| format!("task {i}")).collect();
    assert_eq!(prompts, expected);
    // Timestamps have a fixed width, so text order is time order.
    assert!(
        listed
            .windows(2)
            .all(|w| w[0].created_at.len() == w[1].created_at.len()
                && w[0].created_at >= w[1].created_at)
    );

    let top = f.store.list(3).unwrap();
    assert_eq!(top, listed[..3]);
    assert!(f.store.list(0).unwrap().is_empty());
    assert_eq!(f.store.list(usize::MAX).unwrap().len(), 30);
}

#[test]
fn a_task_lives_from_queued_to_completed() {
    let f = Fixture::new();
    let task = f.create(Some("s1"), "Fix it");
    assert_eq!(f.store.active().unwrap(), std::slice::from_ref(&task));
    assert_eq!(
        f.store.active_for_session("s1").unwrap(),
        std::slice::from_ref(&task)
    );
    assert!(f.store.active_for_session("s2").unwrap().is_empty());

    assert!(f.store.mark_running(&task.id, 4242, 987_654_321).unwrap());
    let running = f.store.get(&task.id).unwrap().unwrap();
    assert_eq!(running.status, TaskStatus::Running);
    assert_eq!(running.pid, Some(4242));
    assert_eq!(running.process_start, Some(987_654_321));
    assert!(is_rfc3339_utc(running.started_at.as_deref().unwrap()));
    assert!(running.started_at.as_deref().unwrap() >= running.created_at.as_str());
    assert_eq!(f.store.count_active().unwrap(), 1);
    // Only from queued.
    assert!(!f.store.mark_running(&task.id, 1, 1).unwrap());
    assert_eq!(f.store.get(&task.id).unwrap().unwrap().pid, Some(4242));

    let end = TaskEnd {
        status: TaskStatus::Completed,
        exit_code: Some(0),
        output_tail: "compiling\nall tests pass\n".into(),
        error_tail: "warning: unused variable\n".into(),
        result_summary: Some("Fixed the flaky test.".into()),
        note: Some("ran in 3 s".into()),
    };
    assert!(f.store.finish(&task.id, &end).unwrap());
    let done = f.store.get(&task.id).unwrap().unwrap();
    assert_eq!(done.status, TaskStatus::Completed);
    assert_eq!(done.exit_code, Some(0));
    assert_eq!(done.output_tail, end.output_tail);
    assert_eq!(done.error_tail, end.error_tail);
    assert_eq!(done.result_summary, end.result_summary);
    assert_eq!(done.note, end.note);
    assert_eq!(done.pid, Some(4242));
    assert!(is_rfc3339_utc(done.completed_at.as_deref().unwrap()));
    assert!(done.completed_at >= done.started_at);
    assert_eq!(done.notified_at, None);

    assert!(f.store.active().unwrap().is_empty());
    assert!(f.store.active_for_session("s1").unwrap().is_empty());
    assert_eq!(f.store.count_active().unwrap(), 0);
    // An ended task stays as it ended.
    let failed = TaskEnd {
        status: TaskStatus::Failed,
        exit_code: Some(1),
        ..end.clone()
    };
    assert!(!f.store.finish(&task.id, &failed).unwrap());
    assert_eq!(f.store.cancel(&task.id).unwrap(), None);
    assert!(!f.store.mark_interrupted(&task.id, "gone").unwrap());
    assert_eq!(f.store.get(&task.id).unwrap().unwrap(), done);
}

#[test]
fn a_task_that_cannot_start_fails_from_queued() {
    let f = Fixture::new();
    let task = f.create(None, "x");
    let end = TaskEnd {
        status: TaskStatus::Failed,
        exit_code: None,
        output_tail: String::new(),
        error_tail: "cannot start runner `claude`: not found".into(),
        result_summary: None,
        note: None,
    };
    assert!(f.store.finish(&task.id, &end).unwrap());
    let failed = f.store.get(&task.id).unwrap().unwrap();
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.started_at, None);
    assert_eq!(failed.exit_code, None);
    assert_eq!(failed.error_tail, end.error_tail);
}

#[test]
fn finish_refuses_a_status_that_is_not_an_end() {
    let f = Fixture::new();
    let task = f.create(None, "x");
    for status in [TaskStatus::Queued, TaskStatus::Running] {
        let end = TaskEnd {
            status,
            ..completed("x")
        };
        let err = f.store.finish(&task.id, &end).unwrap_err();
        assert!(matches!(err, TaskError::Refused(_)), "{err:?}");
    }
    assert_eq!(f.status(&task.id), TaskStatus::Queued);
}

#[test]
fn a_cancel_wins_over_a_later_finish() {
    let f = Fixture::new();
    let task = f.create(Some("s1"), "x");
    assert!(f.store.mark_running(&task.id, 7, 8).unwrap());

    let before = f.store.cancel(&task.id).unwrap().unwrap();
    assert_eq!(before.status, TaskStatus::Running);
    assert_eq!(before.pid, Some(7));
    let cancelled = f.store.get(&task.id).unwrap().unwrap();
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert!(is_rfc3339_utc(cancelled.completed_at.as_deref().unwrap()));

    // The supervisor, seeing its runner killed, records its end: too late for the status,
    // but what the runner printed is kept.
    let end = TaskEnd {
        status: TaskStatus::Failed,
        exit_code: Some(9),
        ..completed("killed")
    };
    assert!(!f.store.finish(&task.id, &end).unwrap());
    let after = f.store.get(&task.id).unwrap().unwrap();
    assert_eq!(after.status, TaskStatus::Cancelled);
    assert_eq!(after.completed_at, cancelled.completed_at);
    assert_eq!(after.exit_code, None);
    assert_eq!(after.output_tail, end.output_tail);
    assert_eq!(after.error_tail, end.error_tail);
    assert_eq!(after.result_summary, end.result_summary);
    // Only once: a second end changes nothing.
    let later = TaskEnd {
        output_tail: "other".into(),
        ..end.clone()
    };
    assert!(!f.store.finish(&task.id, &later).unwrap());
    assert_eq!(f.store.get(&task.id).unwrap().unwrap(), after);
    // Cancelling again changes nothing.
    assert_eq!(f.store.cancel(&task.id).unwrap(), None);
    assert_eq!(f.store.get(&task.id).unwrap().unwrap(), after);
}

#[test]
fn a_cancelled_queued_task_is_never_marked_running() {
    let f = Fixture::new();
    let task = f.create(None, "x");
    let before = f.store.cancel(&task.id).unwrap().unwrap();
    assert_eq!(before, task);
    assert!(!f.store.mark_running(&task.id, 1, 2).unwrap());
    let after = f.store.get(&task.id).unwrap().unwrap();
    assert_eq!(after.status, TaskStatus::Cancelled);
    assert_eq!(after.pid, None);
    assert_eq!(after.started_at, None);
}

#[test]
fn mark_interrupted_only_from_running() {
    let f = Fixture::new();
    let task = f.create(None, "x");
    assert!(!f.store.mark_interrupted(&task.id, "gone").unwrap());
    assert_eq!(f.status(&task.id), TaskStatus::Queued);

    assert!(f.store.mark_running(&task.id, 1, 2).unwrap());
    assert!(
        f.store
            .mark_interrupted(&task.id, "supervisor gone")
            .unwrap()
    );
    let interrupted = f.store.get(&task.id).unwrap().unwrap();
    assert_eq!(interrupted.status, TaskStatus::Interrupted);
    assert_eq!(interrupted.note.as_deref(), Some("supervisor gone"));
    assert!(interrupted.completed_at.is_some());
    assert!(!f.store.mark_interrupted(&task.id, "again").unwrap());
    assert!(!f.store.finish(&task.id, &completed("late")).unwrap());
    assert_eq!(f.store.get(&task.id).unwrap().unwrap(), interrupted);

    let done = f.ended("s", "y");
    assert!(!f.store.mark_interrupted(&done.id, "gone").unwrap());
    assert_eq!(f.status(&done.id), TaskStatus::Completed);
}

#[test]
fn changing_a_task_that_does_not_exist_is_not_found() {
    let f = Fixture::new();
    let not_found = |result: Result<(), TaskError>| {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, TaskError::NotFound { id } if id == "nosuchid"),
            "{err:?}"
        );
    };
    not_found(f.store.mark_running("nosuchid", 1, 2).map(drop));
    not_found(f.store.finish("nosuchid", &completed("x")).map(drop));
    not_found(f.store.cancel("nosuchid").map(drop));
    not_found(f.store.mark_interrupted("nosuchid", "x").map(drop));
}

#[test]
fn take_unnotified_returns_each_ended_task_of_the_session_once() {
    let f = Fixture::new();
    let first = f.ended("s1", "first");
    let queued = f.create(Some("s1"), "queued");
    let running = f.create(Some("s1"), "running");
    assert!(f.store.mark_running(&running.id, 1, 2).unwrap());
    let other = f.ended("s2", "other session");
    let orphan = f.create(None, "no session");
    f.store.cancel(&orphan.id).unwrap();
    let second = f.create(Some("s1"), "second");
    f.store.cancel(&second.id).unwrap();

    let taken = f.store.take_unnotified("s1").unwrap();
    let ids: Vec<&str> = taken.iter().map(|t| t.id.as_str()).collect();
    // In the order they ended.
    assert_eq!(ids, [first.id.as_str(), second.id.as_str()]);
    assert_eq!(taken[0].status, TaskStatus::Completed);
    assert_eq!(taken[0].result_summary.as_deref(), Some("first"));
    assert_eq!(taken[1].status, TaskStatus::Cancelled);
    for task in &taken {
        let notified = task.notified_at.as_deref().unwrap();
        assert!(is_rfc3339_utc(notified));
        assert_eq!(f.store.get(&task.id).unwrap().unwrap(), *task);
    }

    // Once.
    assert!(f.store.take_unnotified("s1").unwrap().is_empty());
    // Active tasks are told when they end.
    let end = TaskEnd {
        status: TaskStatus::TimedOut,
        exit_code: None,
        ..completed("too slow")
    };
    assert!(f.store.finish(&running.id, &end).unwrap());
    let taken = f.store.take_unnotified("s1").unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, running.id);
    assert_eq!(taken[0].status, TaskStatus::TimedOut);
    assert!(f.store.take_unnotified("s1").unwrap().is_empty());
    assert_eq!(f.store.get(&queued.id).unwrap().unwrap().notified_at, None);

    // The other session's task is still waiting for it; the one without a session is never
    // taken.
    let taken = f.store.take_unnotified("s2").unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].id, other.id);
    assert!(f.store.take_unnotified("").unwrap().is_empty());
    assert_eq!(f.store.get(&orphan.id).unwrap().unwrap().notified_at, None);
    assert!(f.store.take_unnotified("nosession").unwrap().is_empty());
}

#[test]
fn the_database_is_in_wal_mode_at_the_current_schema_version() {
    let f = Fixture::new();
    let conn = raw(&f.db());
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SqliteTaskStore::SCHEMA_VERSION);
    assert_eq!(version, 2);

    let mut indexes: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'tasks'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    indexes.sort();
    assert!(indexes.contains(&"tasks_status".to_owned()), "{indexes:?}");
    assert!(
        indexes.contains(&"tasks_session_notified".to_owned()),
        "{indexes:?}"
    );
}

#[test]
fn the_status_column_takes_exactly_the_known_statuses() {
    let f = Fixture::new();
    let task = f.create(None, "x");
    let conn = raw(&f.db());
    for status in TaskStatus::ALL {
        conn.execute(
            "UPDATE tasks SET status = ?1 WHERE id = ?2",
            [status.as_str(), &task.id],
        )
        .unwrap();
        assert_eq!(f.status(&task.id), status);
    }
    let err = conn
        .execute(
            "UPDATE tasks SET status = 'paused' WHERE id = ?1",
            [&task.id],
        )
        .unwrap_err();
    assert!(err.to_string().contains("CHECK"), "{err}");
}

#[test]
fn a_database_from_a_newer_keel_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    drop(SqliteTaskStore::open(&path).unwrap());
    raw(&path)
        .pragma_update(None, "user_version", SqliteTaskStore::SCHEMA_VERSION + 1)
        .unwrap();

    let err = SqliteTaskStore::open(&path).unwrap_err();
    match &err {
        TaskError::Store { path: p, message } => {
            assert_eq!(p, &path);
            assert!(message.contains("newer"), "{message}");
            assert!(message.contains("schema version is 3"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains(&path.display().to_string()));
    // Nothing was changed.
    let version: u32 = raw(&path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SqliteTaskStore::SCHEMA_VERSION + 1);
}

#[test]
fn a_file_that_is_not_a_database_is_a_store_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    std::fs::write(
        &path,
        "this is not a database, just some text that is long enough",
    )
    .unwrap();
    let err = SqliteTaskStore::open(&path).unwrap_err();
    assert!(matches!(&err, TaskError::Store { .. }), "{err:?}");
}

#[test]
fn reopening_keeps_the_rows_and_creates_parent_directories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keel-home").join("nested").join("tasks.db");
    let logs = dir.path().join("logs");
    let store = SqliteTaskStore::open(&path).unwrap();
    assert_eq!(store.path(), path);
    assert!(format!("{store:?}").contains(&path.display().to_string()));
    let task = store
        .create(&new_task(Some("s"), "keep me"), &settings(), &logs)
        .unwrap();
    assert!(store.mark_running(&task.id, 3, 4).unwrap());
    let kept = store.get(&task.id).unwrap().unwrap();
    drop(store);

    let again = SqliteTaskStore::open(&path).unwrap();
    let also = SqliteTaskStore::open(&path).unwrap();
    assert_eq!(again.get(&task.id).unwrap(), Some(kept.clone()));
    assert_eq!(also.list(10).unwrap(), [kept]);
    let version: u32 = raw(&path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SqliteTaskStore::SCHEMA_VERSION);
}

#[test]
fn stores_on_one_file_see_each_others_writes() {
    let f = Fixture::new();
    let other = SqliteTaskStore::open(&f.db()).unwrap();
    let task = f.create(Some("s"), "x");
    assert!(other.mark_running(&task.id, 1, 2).unwrap());
    assert_eq!(f.status(&task.id), TaskStatus::Running);
    assert!(f.store.cancel(&task.id).unwrap().is_some());
    assert!(!other.finish(&task.id, &completed("x")).unwrap());
    assert_eq!(other.take_unnotified("s").unwrap().len(), 1);
    assert!(f.store.take_unnotified("s").unwrap().is_empty());
}

#[test]
fn big_timeouts_and_odd_paths_round_trip() {
    let f = Fixture::new();
    let mut task = new_task(Some("s"), "x");
    task.timeout_secs = u64::MAX;
    task.workdir = PathBuf::from("/tmp/with space/ünïcode/'quote\"");
    let record = f.store.create(&task, &settings(), &f.logs()).unwrap();
    assert_eq!(record.timeout_secs, i64::MAX as u64);
    assert_eq!(record.workdir, task.workdir);

    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let mut task = new_task(None, "y");
        task.workdir = PathBuf::from(std::ffi::OsStr::from_bytes(b"/tmp/not-utf8-\xff\xfe"));
        let logs = PathBuf::from(std::ffi::OsStr::from_bytes(b"/tmp/logs-\xff"));
        let record = f.store.create(&task, &settings(), &logs).unwrap();
        let read = f.store.get(&record.id).unwrap().unwrap();
        assert_eq!(read.workdir, task.workdir);
        assert_eq!(read.output_path, logs.join(format!("{}.log", record.id)));
    }
}

/// Twenty "processes" (threads, each with its own store on the file) each record a task, run
/// it and finish it, while four more take notifications the whole time: every task ends with
/// its result, and is handed out exactly once.
#[test]
fn many_stores_on_one_file_race_safely() {
    const WORKERS: usize = 20;
    const TAKERS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let path = Arc::new(dir.path().join("tasks.db"));
    let logs = Arc::new(dir.path().join("logs"));
    // Everyone starts at once, on a file that does not exist yet.
    let start = Arc::new(Barrier::new(WORKERS + TAKERS));
    let workers_done = Arc::new(AtomicBool::new(false));
    let taken: Arc<Mutex<HashMap<String, usize>>> = Arc::default();

    let takers: Vec<_> = (0..TAKERS)
        .map(|_| {
            let (path, start, done, taken) = (
                path.clone(),
                start.clone(),
                workers_done.clone(),
                taken.clone(),
            );
            thread::spawn(move || {
                start.wait();
                let store = SqliteTaskStore::open(&path).unwrap();
                loop {
                    // Read the flag first, so a last take after it was set sees every end.
                    let last = done.load(Ordering::SeqCst);
                    for task in store.take_unnotified("race").unwrap() {
                        assert!(task.status.is_terminal());
                        assert!(task.notified_at.is_some());
                        *taken.lock().unwrap().entry(task.id).or_default() += 1;
                    }
                    if last {
                        break;
                    }
                    thread::yield_now();
                }
            })
        })
        .collect();

    let workers: Vec<_> = (0..WORKERS)
        .map(|i| {
            let (path, logs, start) = (path.clone(), logs.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let store = SqliteTaskStore::open(&path).unwrap();
                let task = store
                    .create(
                        &new_task(Some("race"), &format!("task {i}")),
                        &settings(),
                        &logs,
                    )
                    .unwrap();
                assert!(
                    store
                        .mark_running(&task.id, 1000 + i as u32, i as u64)
                        .unwrap()
                );
                let end = TaskEnd {
                    status: if i % 2 == 0 {
                        TaskStatus::Completed
                    } else {
                        TaskStatus::Failed
                    },
                    exit_code: Some(i32::from(i % 2 != 0)),
                    output_tail: format!("output of {i}"),
                    error_tail: format!("errors of {i}"),
                    result_summary: Some(format!("result {i}")),
                    note: None,
                };
                assert!(store.finish(&task.id, &end).unwrap());
                (i, task.id)
            })
        })
        .collect();

    let ids: Vec<(usize, String)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    workers_done.store(true, Ordering::SeqCst);
    for taker in takers {
        taker.join().unwrap();
    }

    let store = SqliteTaskStore::open(&path).unwrap();
    let all = store.list(100).unwrap();
    assert_eq!(all.len(), WORKERS);
    for (i, id) in &ids {
        let task = store.get(id).unwrap().unwrap();
        let expected = if i % 2 == 0 {
            TaskStatus::Completed
        } else {
            TaskStatus::Failed
        };
        assert_eq!(task.status, expected);
        assert_eq!(task.task_prompt, format!("task {i}"));
        assert_eq!(task.pid, Some(1000 + *i as u32));
        assert_eq!(task.output_tail, format!("output of {i}"));
        assert_eq!(task.error_tail, format!("errors of {i}"));
        assert_eq!(task.result_summary, Some(format!("result {i}")));
        assert!(task.notified_at.is_some());
    }
    let taken = taken.lock().unwrap();
    assert_eq!(taken.len(), WORKERS, "{taken:?}");
    assert!(taken.values().all(|&n| n == 1), "{taken:?}");
    for (_, id) in &ids {
        assert_eq!(taken.get(id), Some(&1));
    }
    assert!(store.take_unnotified("race").unwrap().is_empty());
    assert_eq!(store.count_active().unwrap(), 0);

    let check: String = raw(&path)
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

/// The schema of the first keel with tasks (version 1), as it shipped.
const SCHEMA_V1: &str = "CREATE TABLE tasks (
    id             TEXT PRIMARY KEY NOT NULL,
    parent_session TEXT,
    agent          TEXT NOT NULL,
    runner         TEXT NOT NULL,
    task_prompt    TEXT NOT NULL,
    workdir        TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed',
                       'failed', 'cancelled', 'timed_out', 'interrupted')),
    pid            INTEGER,
    process_start  INTEGER,
    created_at     TEXT NOT NULL,
    started_at     TEXT,
    completed_at   TEXT,
    exit_code      INTEGER,
    output_path    TEXT NOT NULL,
    output_tail    TEXT NOT NULL DEFAULT '',
    error_tail     TEXT NOT NULL DEFAULT '',
    result_summary TEXT,
    notified_at    TEXT,
    timeout_secs   INTEGER NOT NULL,
    note           TEXT
);
CREATE INDEX tasks_status ON tasks (status);
CREATE INDEX tasks_session_notified ON tasks (parent_session, notified_at);
CREATE INDEX tasks_created ON tasks (created_at, id);
PRAGMA user_version = 1;";

/// A database as the first keel with tasks left it, with one queued task `old00001`.
fn old_database(path: &Path) {
    let conn = raw(path);
    conn.execute_batch(SCHEMA_V1).unwrap();
    conn.execute(
        "INSERT INTO tasks (id, agent, runner, task_prompt, workdir, status, created_at, \
         output_path, timeout_secs) VALUES ('old00001', 'main', 'keel', 'old task', \
         '/work/project', 'queued', '2025-01-02T03:04:05.000000Z', '/logs/old00001.log', 60)",
        [],
    )
    .unwrap();
}

#[test]
fn settings_round_trip_through_the_store() {
    let f = Fixture::new();
    let workspace = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut policy =
        SandboxPolicy::with_mode(keel_sandbox::SandboxMode::ReadOnly).allow_write(cache.path());
    policy.network = false;
    policy.protected_paths = vec![PathBuf::from("/work/project/scripts")];
    policy.hidden_env = vec!["MY_LLM_KEY".into()];
    let hook: keel_engine::HookConfig = serde_json::from_value(serde_json::json!({
        "event": "PreToolUse",
        "matcher": "run_command",
        "command": "./check.sh",
        "timeout_secs": 5
    }))
    .unwrap();
    let mut settings = TaskSettings::new(workspace.path(), policy)
        .with_allow_read(vec![PathBuf::from("/opt/docs")])
        .with_approvals(keel_tasks::TaskApprovals::Allow)
        .with_rules(
            vec!["run_command(cargo test*)".into()],
            vec!["run_command(rm *)".into()],
        )
        .with_hooks(vec![hook]);
    settings.runner = vec!["claude".into(), "-p".into(), "{task}".into()];
    assert_eq!(
        settings.roots,
        [
            workspace.path().canonicalize().unwrap(),
            cache.path().canonicalize().unwrap()
        ]
    );
    let record = f
        .store
        .create(&new_task(Some("s"), "with settings"), &settings, &f.logs())
        .unwrap();
    assert_eq!(record.settings.as_ref(), Some(&settings));
    let again = SqliteTaskStore::open(&f.db()).unwrap();
    let read = again.get(&record.id).unwrap().unwrap();
    assert_eq!(read.settings.as_ref(), Some(&settings));
    assert_eq!(
        keel_tasks::load_settings(&again, &record.id).unwrap(),
        settings
    );
    // Stored as JSON a person can read.
    let json: String = raw(&f.db())
        .query_row(
            "SELECT settings FROM tasks WHERE id = ?1",
            [&record.id],
            |r| r.get(0),
        )
        .unwrap();
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["approvals"], "allow");
    assert_eq!(value["policy"]["mode"], "read-only");
    assert_eq!(value["deny_rules"][0], "run_command(rm *)");
    assert_eq!(value["runner"][0], "claude");
    assert!(matches!(
        keel_tasks::load_settings(&again, "nosuchid"),
        Err(TaskError::NotFound { .. })
    ));
}

#[test]
fn an_old_database_is_migrated_and_its_tasks_have_no_settings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.db");
    old_database(&path);
    let store = SqliteTaskStore::open(&path).unwrap();
    let version: u32 = raw(&path)
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version, SqliteTaskStore::SCHEMA_VERSION);
    let old = store.get("old00001").unwrap().unwrap();
    assert_eq!(old.task_prompt, "old task");
    assert_eq!(old.status, TaskStatus::Queued);
    assert_eq!(old.settings, None);
    let err = keel_tasks::load_settings(&store, "old00001").unwrap_err();
    assert_eq!(
        err.to_string(),
        "task old00001 was recorded without the settings it must run with (by an older \
         keel, or they are unreadable), so it was not run; start it again"
    );
    // New tasks in the migrated database get theirs; the old one is still listed.
    let new = store
        .create(
            &new_task(None, "new task"),
            &settings(),
            &dir.path().join("logs"),
        )
        .unwrap();
    assert_eq!(new.settings, Some(settings()));
    assert_eq!(store.list(10).unwrap().len(), 2);
    // Opening it again changes nothing.
    drop(store);
    let again = SqliteTaskStore::open(&path).unwrap();
    assert_eq!(again.get("old00001").unwrap().unwrap().settings, None);
}

#[test]
fn unreadable_settings_read_as_none() {
    let f = Fixture::new();
    let task = f.create(None, "x");
    raw(&f.db())
        .execute(
            "UPDATE tasks SET settings = '{not json' WHERE id = ?1",
            [&task.id],
        )
        .unwrap();
    let read = f.store.get(&task.id).unwrap().unwrap();
    assert_eq!(read.settings, None);
    assert_eq!(read.task_prompt, "x");
}
