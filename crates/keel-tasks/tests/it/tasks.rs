//! Background tasks run in-process with real runner processes and a real SQLite store:
//! summaries, exit codes, timeouts that kill the whole group, cancellation, limits,
//! notifications, and which agents may start tasks.

// Tests report failures by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_engine::Notifier;
use keel_sandbox::SandboxPolicy;
use keel_tasks::{
    NewTask, Runners, Spawner, SqliteTaskStore, TaskLauncher, TaskLimits, TaskNotifier, TaskRecord,
    TaskSettings, TaskStatus, TaskStore, start_time,
};
use serde_json::json;
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
        TaskSettings::new(dir.path(), SandboxPolicy::default()),
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
    let notice = keel_tasks::notice(&record);
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
    assert!(keel_tasks::notice(&record).contains("timed out (after 1 s)"));
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
            fixture.launcher.settings(),
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
            fixture.launcher.settings(),
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
    use keel_tasks::SubAgentTasks;
    let fixture = fixture(&[], TaskLimits::default());
    let define = |name: &str| AgentDefinition {
        name: name.into(),
        description: "d".into(),
        system_prompt: "p".into(),
        path: format!("{name}.md").into(),
        ..AgentDefinition::default()
    };
    let definitions = Arc::new(AgentDefinitions::from_definitions(vec![
        define("worker"),
        define("helper"),
    ]));
    let model = Arc::new(keel_test_support::scripted::ScriptedProvider::new());
    let runner = SubAgentRunner::new(
        Delegation::new(
            model,
            Models::new("m", "m"),
            keel_agents::Policies::new(keel_sandbox::SandboxPolicy::default()),
        ),
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

/// Calls `start_task` as the model would, from a session working in `cwd`.
async fn start_task(
    fixture: &Fixture,
    cwd: &Path,
    input: serde_json::Value,
) -> keel_tool::ToolOutput {
    let tools = keel_tasks::task_tools(&fixture.launcher, "main").unwrap();
    let call = keel_provider::ToolCall {
        id: "call_1",
        name: "start_task",
        input: keel_provider::ToolInput::Valid(&input),
    };
    tools
        .dispatch(call, &keel_tool::ToolContext::new(cwd, "session-1"))
        .await
}

#[tokio::test]
async fn start_task_refuses_a_workdir_outside_the_roots() {
    let fixture = fixture(&[("quick", "echo hi")], TaskLimits::default());
    let root = fixture.dir.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let outside_dir = outside.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside_dir, root.join("out")).unwrap();
    let parent = root.parent().unwrap().to_path_buf();
    let cases = [
        // (workdir as given, as the message shows it, what it resolves to if different)
        (outside_dir.display().to_string(), outside_dir.clone(), None),
        ("/".to_owned(), PathBuf::from("/"), None),
        ("..".to_owned(), root.join(".."), Some(parent.clone())),
        ("sub/../..".to_owned(), root.join("sub/../.."), Some(parent)),
        (
            "out".to_owned(),
            root.join("out"),
            Some(outside_dir.clone()),
        ),
    ];
    for (given, shown, resolves_to) in cases {
        let output = start_task(
            &fixture,
            &root,
            json!({"task": "x", "workdir": given, "runner": "quick"}),
        )
        .await;
        assert!(output.is_error, "{given}: {}", output.content);
        // The message is the code tool's, with `workdir` (its whole text is checked there).
        let head = match resolves_to {
            Some(to) => format!(
                "workdir {} (it resolves to {})",
                shown.display(),
                to.display()
            ),
            None => format!("workdir {}", shown.display()),
        };
        let roots = format!(" is outside this session's roots: {};", root.display());
        assert!(
            output.content.starts_with(&format!("{head}{roots}")),
            "{given}: {}",
            output.content
        );
    }
    // Hosts calling the launcher directly are held to the same rule.
    let mut outside_task = task(&fixture, "quick", "x", 60);
    outside_task.workdir = outside_dir;
    let err = fixture.launcher.start(outside_task).unwrap_err();
    assert!(
        err.to_string().contains("is outside this session's roots"),
        "{err}"
    );
    assert!(
        fixture.store.list(10).unwrap().is_empty(),
        "nothing recorded"
    );

    // Inside, it starts, recorded with its directory resolved.
    let output = start_task(
        &fixture,
        &root,
        json!({"task": "x", "workdir": "sub/.", "runner": "quick"}),
    )
    .await;
    assert!(!output.is_error, "{}", output.content);
    let records = fixture.store.list(10).unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].workdir, root.join("sub"));
}

/// Records a task for `runner` (a name) whose settings hold `argv`, in `workdir`.
fn record(fixture: &Fixture, runner: &str, argv: &[&str], workdir: &Path) -> TaskRecord {
    let mut settings = fixture.launcher.settings().clone();
    settings.runner = argv.iter().map(|a| (*a).to_owned()).collect();
    let mut new = task(fixture, runner, "the task", 60);
    new.workdir = workdir.to_path_buf();
    fixture
        .store
        .create(&new, &settings, &fixture.dir.path().join("logs"))
        .unwrap()
}

#[tokio::test]
async fn the_launcher_records_the_runner_s_command_line() {
    let fixture = fixture(&[("script", "echo $0")], TaskLimits::default());
    let record = run(&fixture, "script", "x", 60).await;
    let settings = record.settings.unwrap();
    assert_eq!(settings.runner, ["sh", "-c", "echo $0", "{task}"]);
    assert_eq!(settings.roots, [fixture.dir.path().canonicalize().unwrap()]);
}

#[tokio::test]
async fn the_supervisor_runs_the_recorded_command_line_and_nothing_else() {
    // The launcher knows no runner `elsewhere`: only the record says what to run.
    let fixture = fixture(&[], TaskLimits::default());
    let workdir = fixture.dir.path().canonicalize().unwrap();
    let id = record(
        &fixture,
        "elsewhere",
        &[
            "sh",
            "-c",
            "echo \"recorded: $0 in $PWD, task $KEEL_TASK_ID\"",
            "{task} at {workdir}",
        ],
        &workdir,
    )
    .id;
    let ended = keel_tasks::supervise(fixture.store.as_ref(), &id, std::process::id())
        .await
        .unwrap();
    assert_eq!(ended.status, TaskStatus::Completed, "{ended:#?}");
    assert_eq!(
        ended.output_tail,
        format!(
            "recorded: the task at {} in {}, task {id}",
            workdir.display(),
            workdir.display()
        )
    );
}

#[tokio::test]
async fn a_task_recorded_without_settings_is_refused_not_run() {
    let fixture = fixture(&[], TaskLimits::default());
    let marker = fixture.dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let id = record(&fixture, "keel", &["sh", "-c", &script], fixture.dir.path()).id;
    // As an older keel left it: no settings.
    rusqlite::Connection::open(fixture.dir.path().join("tasks.db"))
        .unwrap()
        .execute("UPDATE tasks SET settings = NULL WHERE id = ?1", [&id])
        .unwrap();
    let ended = keel_tasks::supervise(fixture.store.as_ref(), &id, std::process::id())
        .await
        .unwrap();
    assert_eq!(ended.status, TaskStatus::Failed);
    assert_eq!(ended.exit_code, None);
    assert_eq!(
        ended.note.as_deref(),
        Some(
            format!(
                "task {id} was recorded without the settings it must run with (by an older \
                 keel, or they are unreadable), so it was not run; start it again"
            )
            .as_str()
        )
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!marker.exists(), "the runner ran");
}

#[tokio::test]
async fn a_workdir_swapped_for_a_link_out_is_refused_when_the_task_runs() {
    let fixture = fixture(&[], TaskLimits::default());
    let sub = fixture.dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let marker = fixture.dir.path().join("ran");
    let script = format!("touch {}", marker.display());
    let id = record(&fixture, "script", &["sh", "-c", &script], &sub).id;
    let outside = tempfile::tempdir().unwrap();
    std::fs::remove_dir(&sub).unwrap();
    std::os::unix::fs::symlink(outside.path(), &sub).unwrap();
    let ended = keel_tasks::supervise(fixture.store.as_ref(), &id, std::process::id())
        .await
        .unwrap();
    assert_eq!(ended.status, TaskStatus::Failed);
    let note = ended.note.unwrap();
    assert!(
        note.starts_with(&format!("workdir {} (it resolves to ", sub.display())),
        "{note}"
    );
    assert!(note.contains("is outside this session's roots"), "{note}");
    assert!(!marker.exists(), "the runner ran");
}

#[tokio::test]
async fn other_runners_lose_hidden_variables_and_keel_s_own_keeps_them() {
    let fixture = fixture(&[], TaskLimits::default());
    let mut settings = fixture.launcher.settings().clone();
    settings.policy.hidden_env = vec!["HOME".into()];
    let script = "echo \"home=${HOME-unset} task=$KEEL_TASK_ID\"";
    settings.runner = vec!["sh".into(), "-c".into(), script.into()];
    let mut ids = Vec::new();
    for runner in ["claude", "keel"] {
        let record = fixture
            .store
            .create(
                &task(&fixture, runner, "x", 60),
                &settings,
                &fixture.dir.path().join("logs"),
            )
            .unwrap();
        keel_tasks::supervise(fixture.store.as_ref(), &record.id, std::process::id())
            .await
            .unwrap();
        ids.push(record.id);
    }
    let tail = |id: &str| fixture.store.get(id).unwrap().unwrap().output_tail;
    assert_eq!(tail(&ids[0]), format!("home=unset task={}", ids[0]));
    let home = std::env::var("HOME").unwrap();
    assert_eq!(tail(&ids[1]), format!("home={home} task={}", ids[1]));
}
