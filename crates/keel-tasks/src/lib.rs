//! # keel-tasks
//!
//! Background tasks for keel agents: start a coding task now, be told when it is done.
//!
//! A task is a row in a [`TaskStore`] (SQLite by default, [`SqliteTaskStore`]) and a runner
//! process: keel's own agent loop (`keel exec` in the task's directory) or an external
//! command from the config (`claude -p {task}`, `codex exec {task}`), see [`Runners`]. A
//! supervisor ([`supervise`]) records the runner's start, its real exit status and its
//! result, keeps its whole log and the tails of its output, enforces the timeout by killing
//! the runner's process group (keel-sandbox's process-group runner), and leaves a cancelled
//! task cancelled. The session that started a task is told when it finishes, exactly once,
//! before its next model request ([`TaskNotifier`], a `keel_engine::Notifier`).
//!
//! - [`TaskLauncher`]: starts tasks (detached supervisor processes, or tokio tasks in this
//!   process: [`Spawner`]), cancels, waits, [`recover`]s tasks whose supervisor died.
//! - [`task_tools`]: the model's tools `start_task`, `task_status`, `wait_task`,
//!   `cancel_task` and `list_tasks`; [`task_tools_for`] hands them to the sub-agents allowed
//!   to start tasks (through keel-agents' [`SubAgentRunner::with_extra_tools`]).
//! - [`TaskSettings`]: what a task runs with, recorded with it.
//!
//! A task is never freer than the session that started it: its directory must lie inside the
//! session's roots, and it records the session's [`TaskSettings`] (sandbox policy, roots,
//! allow-read paths, approvals, rules, hooks, the runner's command line), which is all its
//! supervisor and its runner go by.
//!
//! This crate is the only one of keel's that links SQLite: a host that wants delegation
//! without background tasks depends on keel-agents alone.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use keel_engine::Notifier;
//! use keel_sandbox::SandboxPolicy;
//! use keel_tasks::{
//!     NewTask, Runners, Spawner, SqliteTaskStore, TaskLauncher, TaskNotifier, TaskSettings,
//!     TaskStatus,
//! };
//!
//! # tokio::runtime::Runtime::new()?.block_on(async {
//! let dir = tempfile::tempdir()?;
//! let store = Arc::new(SqliteTaskStore::open(&dir.path().join("tasks.db"))?);
//! // A runner besides keel's own: the task's text is always one argument, never a shell's.
//! let runners = Runners::new("keel".as_ref())
//!     .with("echo", vec!["sh".into(), "-c".into(), "echo \"did: $1\"".into(), "sh".into(),
//!                        "{task}".into()])?;
//! let launcher = TaskLauncher::new(
//!     store.clone(),
//!     runners,
//!     dir.path().join("logs"),
//!     Spawner::InProcess, // supervised by a tokio task of this process
//!     TaskSettings::new(dir.path(), SandboxPolicy::default()),
//! );
//! let started = launcher.start(NewTask {
//!     parent_session: Some("session-1".into()),
//!     agent: "main".into(),
//!     runner: "echo".into(),
//!     task_prompt: "tidy the docs".into(),
//!     workdir: dir.path().to_path_buf(),
//!     timeout_secs: 60,
//! })?;
//! let ended = launcher.wait(&started.record.id, Duration::from_secs(30)).await?;
//! assert_eq!(ended.status, TaskStatus::Completed);
//! assert_eq!(ended.result_summary.as_deref(), Some("did: tidy the docs"));
//! // The session that started it is told once, before its next model request.
//! let notifier = TaskNotifier::new(store);
//! let notices = notifier.take("session-1").await;
//! assert!(notices[0].starts_with(&format!("Task {} completed (exit 0)", ended.id)));
//! assert!(notifier.take("session-1").await.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`SubAgentRunner::with_extra_tools`]: keel_agents::SubAgentRunner::with_extra_tools

// Unit tests may run long (a scenario and its checks); library functions stay within 120 lines.
#![cfg_attr(test, allow(clippy::too_many_lines))]

// Modules, one concept each.
mod agents;
mod error;
mod launch;
mod notify;
mod process;
mod runner;
mod settings;
mod store;
mod supervise;
mod task;
mod tools;

pub use agents::{SubAgentTasks, task_tools_for};
pub use error::TaskError;
/// Kills a task's process group: keel-sandbox's, re-exported where it always was.
pub use keel_sandbox::kill_group;
pub use launch::{Spawner, Started, TaskLauncher, TaskLimits, cancel, recover};
pub use notify::{TaskNotifier, notice};
pub use process::{detach, is_alive, start_time};
pub use runner::{DEFAULT_RUNNER, Runners};
pub use settings::{TaskApprovals, TaskSettings, load_settings};
pub use store::SqliteTaskStore;
pub use supervise::{summarize, supervise};
pub use task::{NewTask, TaskEnd, TaskRecord, TaskStatus, TaskStore};
pub use tools::{
    CancelTaskTool, ListTasksArgs, ListTasksTool, MAX_WAIT_SECS, StartTaskArgs, StartTaskTool,
    TaskIdArgs, TaskStatusTool, WaitTaskArgs, WaitTaskTool, describe, task_tools,
};

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
