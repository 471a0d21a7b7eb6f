//! Background tasks through the `keel` binary: detached supervisors (`keel task-run`), the
//! keel runner against wiremock, notifications after the wait and after a resume, a killed
//! supervisor found at the next start, and 20 tasks at once.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::support::*;
use keel::provider::{ContentBlock, StopReason};
use keel::tasks::{SqliteTaskStore, TaskRecord, TaskStatus, TaskStore};
use keel_test_support::git::TempRepo;
use keel_test_support::mock::{request_bodies, sse_response};
use keel_test_support::render::anthropic_sse;
use keel_test_support::scripted::{REPLY_USAGE, reply};
use serde_json::{Value, json};
use wiremock::{Mock, MockServer, Request};

/// Matches the requests of task runners: a conversation of one message starting `TASK:`.
struct RunnerRequest;

impl wiremock::Match for RunnerRequest {
    fn matches(&self, request: &Request) -> bool {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return false;
        };
        let messages = body["messages"].as_array();
        messages.is_some_and(|m| {
            m.len() == 1
                && m[0]["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("TASK:"))
        })
    }
}

/// A server answering the launching session with `parent` in order, and every task runner
/// with `runner_says`.
async fn server(parent: &[keel::provider::ToolUseResponse], runner_says: &str) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(RunnerRequest)
        .respond_with(sse_response(anthropic_sse(&text(runner_says))))
        .with_priority(1)
        .mount(&server)
        .await;
    for reply in parent {
        Mock::given(wiremock::matchers::method("POST"))
            .respond_with(sse_response(anthropic_sse(reply)))
            .up_to_n_times(1)
            .mount(&server)
            .await;
    }
    server
}

/// The launching session's requests (not the runners').
async fn parent_bodies(server: &MockServer) -> Vec<Value> {
    request_bodies(server)
        .await
        .into_iter()
        .filter(|b| {
            !(b["messages"].as_array().unwrap().len() == 1
                && b["messages"][0]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("TASK:"))
        })
        .collect()
}

fn notifications(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .filter(|t| t.starts_with("[notification] "))
        .collect()
}

fn store(home: &Home) -> SqliteTaskStore {
    SqliteTaskStore::open(&home.keel_home().join("tasks.db")).unwrap()
}

/// Waits (up to 60 s) until `check` holds for the store's tasks.
async fn until(home: &Home, check: impl Fn(&[TaskRecord]) -> bool) -> Vec<TaskRecord> {
    for _ in 0..600 {
        let records = store(home).list(100).unwrap();
        if check(&records) {
            return records;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the tasks never got there: {:#?}",
        store(home).list(100).unwrap()
    );
}

/// Has the model start a task with runner `name` (`sh -c 'echo $$ > PIDFILE; SCRIPT'`),
/// keel exiting at once (--no-wait-tasks); returns the running task and its runner's pid.
async fn start_long_task(
    home: &Home,
    repo: &TempRepo,
    name: &str,
    script: &str,
    task: &str,
) -> (TaskRecord, u32) {
    let pid_file = repo.path().join("runner.pid");
    home.write_config(&format!(
        "[tasks.runners.{name}]\ncommand = [\"sh\", \"-c\", \"echo $$ > {}; {script}\", \"{{task}}\"]\n",
        pid_file.display()
    ));
    let server = server(
        &[
            tool_call(
                "toolu_1",
                "start_task",
                json!({"task": task, "runner": name}),
            ),
            text("Started."),
        ],
        "unused",
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "--no-wait-tasks", "Start it"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let records = until(home, |r| r.len() == 1 && r[0].status == TaskStatus::Running).await;
    for _ in 0..100 {
        if std::fs::read_to_string(&pid_file).is_ok_and(|p| !p.trim().is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let runner = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (records[0].clone(), runner)
}

#[tokio::test]
async fn exec_waits_for_a_keel_task_and_the_next_request_has_its_notification_once() {
    let repo = TempRepo::new();
    let home = Home::new();
    let server = server(
        &[
            tool_call("toolu_1", "start_task", json!({"task": "TASK: say hi"})),
            text("Started it."),
            text("The task said hi."),
        ],
        "hi from the task",
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "Start a task"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "The task said hi.\n");
    assert!(stderr(&output).contains("waiting for 1 background task(s): "));
    let records = store(&home).list(10).unwrap();
    assert_eq!(records.len(), 1);
    let task = &records[0];
    assert_eq!(task.status, TaskStatus::Completed, "{task:#?}");
    assert_eq!(task.exit_code, Some(0));
    assert_eq!(task.result_summary.as_deref(), Some("hi from the task"));
    assert!(task.notified_at.is_some());
    let bodies = parent_bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    let started = bodies[1]["messages"][2]["content"][0]["content"]
        .as_str()
        .unwrap();
    assert!(
        started.starts_with(&format!("Task {} started (keel, ", task.id)),
        "{started}"
    );
    assert!(started.ends_with("You will be notified when it completes."));
    assert!(notifications(&bodies[1]).is_empty());
    let notes = notifications(&bodies[2]);
    assert_eq!(notes.len(), 1, "exactly once: {notes:?}");
    assert!(
        notes[0].starts_with(&format!(
            "[notification] Task {} completed (exit 0) in ",
            task.id
        )),
        "{}",
        notes[0]
    );
    assert!(
        notes[0].contains("Summary: hi from the task Log: "),
        "{}",
        notes[0]
    );
    let log = std::fs::read_to_string(&task.output_path).unwrap();
    assert!(log.contains("\"result\":\"hi from the task\""), "{log}");
}

#[tokio::test]
async fn a_task_outlives_its_launcher_and_is_notified_after_resume() {
    let repo = TempRepo::new();
    let home = Home::new();
    home.write_config(
        "[tasks.runners.late]\ncommand = [\"sh\", \"-c\", \"sleep 1; echo '{\\\"result\\\": \\\"late result\\\"}'\", \"{task}\"]\n",
    );
    let server = server(
        &[
            tool_call(
                "toolu_1",
                "start_task",
                json!({"task": "TASK: slow", "runner": "late"}),
            ),
            text("Started."),
            text("The late task finished."),
        ],
        "unused",
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command.current_dir(repo.path()).args([
        "exec",
        "--no-wait-tasks",
        "--output-format",
        "json",
        "Start it",
    ]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let result: Value = serde_json::from_slice(&output.stdout).unwrap();
    let session = result["session_id"].as_str().unwrap().to_owned();
    // The launcher is gone; the task goes on and ends.
    let records = until(&home, |r| r.len() == 1 && r[0].status.is_terminal()).await;
    assert_eq!(records[0].status, TaskStatus::Completed);
    assert!(records[0].notified_at.is_none());
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "--resume", &session, "Any news?"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let bodies = parent_bodies(&server).await;
    let notes = notifications(bodies.last().unwrap());
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("Summary: late result"), "{}", notes[0]);
}

#[tokio::test]
async fn a_killed_supervisor_is_found_interrupted_at_the_next_start() {
    let repo = TempRepo::new();
    let home = Home::new();
    let (task, runner) =
        start_long_task(&home, &repo, "forever", "sleep 300", "TASK: forever").await;
    let supervisor = task.pid.unwrap();
    let runner = runner.to_string();
    std::process::Command::new("kill")
        .args(["-9", &supervisor.to_string()])
        .status()
        .unwrap();
    for _ in 0..50 {
        if keel::tasks::start_time(supervisor).is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Any keel start looks: here `keel tasks`.
    let mut command = home.keel();
    command.arg("tasks");
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(
        stdout(&output).contains(" interrupted "),
        "{}",
        stdout(&output)
    );
    let record = store(&home).get(&task.id).unwrap().unwrap();
    assert_eq!(record.status, TaskStatus::Interrupted);
    assert!(
        record
            .note
            .unwrap()
            .contains(&format!("(pid {supervisor}) is gone"))
    );
    // The orphaned runner is cleaned up by the test.
    std::process::Command::new("kill")
        .args(["-9", &runner])
        .status()
        .unwrap();
}

#[tokio::test]
async fn twenty_tasks_at_once_all_end_with_their_results_and_nothing_is_lost() {
    let repo = TempRepo::new();
    let home = Home::new();
    home.write_config("[tasks]\nmax_running = 20\n");
    let starts: Vec<ContentBlock> = (0..20)
        .map(|n| {
            ContentBlock::tool_use(
                format!("toolu_{n}"),
                "start_task",
                json!({"task": format!("TASK: number {n}")}),
            )
        })
        .collect();
    let mut starting = reply(starts, StopReason::ToolUse);
    starting.usage = REPLY_USAGE;
    let server = server(
        &[
            starting,
            text("Started twenty."),
            text("All twenty are done."),
        ],
        "done",
    )
    .await;
    let mut command = home.keel_anthropic(&server);
    command
        .current_dir(repo.path())
        .args(["exec", "Start twenty"]);
    let output = run(command).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), "All twenty are done.\n");
    let records = store(&home).list(100).unwrap();
    assert_eq!(records.len(), 20);
    for record in &records {
        assert_eq!(record.status, TaskStatus::Completed, "{record:#?}");
        assert_eq!(record.result_summary.as_deref(), Some("done"));
        assert!(record.notified_at.is_some());
    }
    let mut prompts: Vec<String> = records.iter().map(|r| r.task_prompt.clone()).collect();
    prompts.sort();
    let mut expected: Vec<String> = (0..20).map(|n| format!("TASK: number {n}")).collect();
    expected.sort();
    assert_eq!(prompts, expected, "no record lost");
    let bodies = parent_bodies(&server).await;
    let notes = notifications(bodies.last().unwrap());
    assert_eq!(notes.len(), 20, "each task notified once");
    let db = rusqlite::Connection::open(home.keel_home().join("tasks.db")).unwrap();
    let integrity: String = db
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
}

#[tokio::test]
async fn keel_tasks_lists_shows_cancels_and_prints_logs() {
    let repo = TempRepo::new();
    let home = Home::new();
    let (task, runner) = start_long_task(
        &home,
        &repo,
        "chatty",
        "echo 'first line of work'; sleep 300",
        "TASK: chat\nsecond line",
    )
    .await;
    let id = task.id.clone();
    for _ in 0..100 {
        if std::fs::read_to_string(&task.output_path).is_ok_and(|l| l.contains("first line")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let keel = |args: &[&str]| {
        let mut command = home.keel();
        command.args(args);
        command
    };
    let output = run(keel(&["tasks"])).await;
    let listing = stdout(&output);
    assert!(listing.starts_with(&format!("{id}  running ")), "{listing}");
    assert!(listing.contains("chatty"), "{listing}");
    assert!(
        listing.trim_end().ends_with("TASK: chat"),
        "first line only: {listing}"
    );
    let output = run(keel(&["tasks", "logs", &id])).await;
    assert_eq!(stdout(&output), "first line of work\n");
    let output = run(keel(&["tasks", "cancel", &id])).await;
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert_eq!(stdout(&output), format!("task {id} cancelled\n"));
    let mut gone = false;
    for _ in 0..50 {
        if keel::tasks::start_time(runner).is_none() {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gone, "the runner survived the cancel");
    let output = run(keel(&["tasks", "show", &id])).await;
    let shown = stdout(&output);
    assert!(shown.contains("status: cancelled"), "{shown}");
    assert!(
        shown.contains("--- output (last lines) ---\nfirst line of work"),
        "{shown}"
    );
    let output = run(keel(&["tasks", "cancel", &id])).await;
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        format!("keel: task {id} already ended (cancelled)\n")
    );
    let output = run(keel(&["tasks", "show", "nope"])).await;
    assert_eq!(output.status.code(), Some(2));
}
