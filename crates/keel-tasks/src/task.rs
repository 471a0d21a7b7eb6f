//! A task's record: its status, what is recorded when it is created and when it ends, and
//! the [`TaskStore`] trait where records live.

use std::path::PathBuf;

use crate::{TaskError, TaskSettings};

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// Recorded, its process not started yet.
    Queued,
    /// Its runner is running.
    Running,
    /// The runner exited with status 0.
    Completed,
    /// The runner exited with another status, or could not start.
    Failed,
    /// Cancelled: its process group was killed.
    Cancelled,
    /// Its timeout passed: its process group was killed.
    TimedOut,
    /// Its supervisor died (the machine restarted, it was killed): found on a later start.
    Interrupted,
}

impl TaskStatus {
    /// Every status.
    pub const ALL: [TaskStatus; 7] = [
        Self::Queued,
        Self::Running,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
        Self::TimedOut,
        Self::Interrupted,
    ];

    /// The name stored and shown: `queued`, `running`, `completed`, `failed`, `cancelled`,
    /// `timed_out`, `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timed_out",
            Self::Interrupted => "interrupted",
        }
    }

    /// The status named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the task is over (nothing will change it any more).
    pub fn is_terminal(self) -> bool {
        !matches!(self, Self::Queued | Self::Running)
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A task to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    /// The session that started it (it is notified), if any.
    pub parent_session: Option<String>,
    /// Who started it: `main` or a sub-agent's name.
    pub agent: String,
    /// The runner's name: `keel` or a configured one.
    pub runner: String,
    /// What the task is.
    pub task_prompt: String,
    /// Where it runs.
    pub workdir: PathBuf,
    /// Seconds before its process group is killed.
    pub timeout_secs: u64,
}

/// A task as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    /// Its short unique id.
    pub id: String,
    /// The session that started it.
    pub parent_session: Option<String>,
    /// Who started it.
    pub agent: String,
    /// The runner's name.
    pub runner: String,
    /// What the task is.
    pub task_prompt: String,
    /// Where it runs.
    pub workdir: PathBuf,
    /// Where it is in its life.
    pub status: TaskStatus,
    /// The supervisor's process id, once running.
    pub pid: Option<u32>,
    /// The supervisor's start time (clock ticks since boot, from `/proc/<pid>/stat`), so a
    /// reused pid is not mistaken for the task's.
    pub process_start: Option<u64>,
    /// When it was recorded (RFC 3339, UTC).
    pub created_at: String,
    /// When its runner started.
    pub started_at: Option<String>,
    /// When it ended.
    pub completed_at: Option<String>,
    /// The runner's exit code, when it exited (none when killed by a signal).
    pub exit_code: Option<i32>,
    /// Its whole log.
    pub output_path: PathBuf,
    /// The last 100 lines of its output.
    pub output_tail: String,
    /// The last lines of its errors (stderr, or why it failed).
    pub error_tail: String,
    /// What it did, in short: the runner's JSON `result`, else the end of its output.
    pub result_summary: Option<String>,
    /// When its session was told it ended.
    pub notified_at: Option<String>,
    /// Seconds before its process group is killed.
    pub timeout_secs: u64,
    /// A note on how it ended (e.g. why it was marked interrupted).
    pub note: Option<String>,
    /// The settings it runs with; `None` for a task recorded by an older keel (or whose
    /// settings cannot be read), which is refused rather than run.
    pub settings: Option<TaskSettings>,
}

/// How a task ended, as its supervisor records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnd {
    /// `completed`, `failed`, `timed_out` (or `cancelled`).
    pub status: TaskStatus,
    /// The runner's exit code, if it exited.
    pub exit_code: Option<i32>,
    /// The last 100 lines of its output.
    pub output_tail: String,
    /// The last lines of its errors.
    pub error_tail: String,
    /// What it did, in short.
    pub result_summary: Option<String>,
    /// A note on how it ended.
    pub note: Option<String>,
}

/// Where tasks are recorded. Every write is one transaction; several processes share one
/// store (the launcher, each task's supervisor, `keel tasks`).
pub trait TaskStore: Send + Sync + std::fmt::Debug {
    /// Records `task`, to run with `settings`, as `queued` with a fresh short id; its log is
    /// `<logs_dir>/<id>.log`.
    fn create(
        &self,
        task: &NewTask,
        settings: &TaskSettings,
        logs_dir: &std::path::Path,
    ) -> Result<TaskRecord, TaskError>;
    /// The task `id`, if there is one.
    fn get(&self, id: &str) -> Result<Option<TaskRecord>, TaskError>;
    /// Up to `limit` tasks, newest first.
    fn list(&self, limit: usize) -> Result<Vec<TaskRecord>, TaskError>;
    /// The tasks that are `queued` or `running`.
    fn active(&self) -> Result<Vec<TaskRecord>, TaskError>;
    /// How many tasks are `running` (or `queued`: about to run).
    fn count_active(&self) -> Result<usize, TaskError>;
    /// `queued` → `running`, with the supervisor's pid and start time. False if the task was
    /// no longer queued (e.g. cancelled first).
    fn mark_running(&self, id: &str, pid: u32, process_start: u64) -> Result<bool, TaskError>;
    /// Records how the task ended, unless it already ended (a cancel won): returns whether
    /// this end was recorded. A cancelled task still gets the tails and summary of this end,
    /// once; its status stays `cancelled`.
    fn finish(&self, id: &str, end: &TaskEnd) -> Result<bool, TaskError>;
    /// `queued`/`running` → `cancelled`; returns the record as it was before, if it was
    /// active.
    fn cancel(&self, id: &str) -> Result<Option<TaskRecord>, TaskError>;
    /// `running` → `interrupted` with `note`, unless it already ended; returns whether it
    /// changed.
    fn mark_interrupted(&self, id: &str, note: &str) -> Result<bool, TaskError>;
    /// Whether `parent_session` has ended tasks it was not told of yet (what
    /// [`TaskStore::take_unnotified`] would take), without taking them.
    fn has_unnotified(&self, parent_session: &str) -> Result<bool, TaskError>;
    /// The ended tasks of `parent_session` whose session was not told yet; they are marked
    /// told (`notified_at`) in the same transaction, so each is returned once.
    fn take_unnotified(&self, parent_session: &str) -> Result<Vec<TaskRecord>, TaskError>;
    /// The tasks of `parent_session` that are still active.
    fn active_for_session(&self, parent_session: &str) -> Result<Vec<TaskRecord>, TaskError>;
}
