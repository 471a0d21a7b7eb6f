//! Starting, cancelling, waiting for and recovering tasks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::process::is_alive;
use crate::runner::Runners;
use crate::settings::TaskSettings;
use crate::supervise::supervise;
use crate::{NewTask, TaskError, TaskRecord, TaskStatus, TaskStore};

/// How a task's supervisor is started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spawner {
    /// As a detached process, `program args... <id>` (the CLI: `keel task-run <id>`), which
    /// survives the launching process.
    Detached {
        /// The program.
        program: PathBuf,
        /// Its arguments before the task's id.
        args: Vec<String>,
    },
    /// As a tokio task in this process: for library hosts without the `keel` binary. Same
    /// store, notifications and timeouts, but the task does not survive the host's exit (a
    /// later start marks it interrupted).
    InProcess,
}

/// Limits on tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    /// Tasks running at once beyond which `start` refuses (default 8).
    pub max_running: usize,
    /// Tasks running at once beyond which `start` warns (default 2).
    pub warn_above: usize,
    /// A task's timeout when it names none, in seconds (default 3600).
    pub timeout_secs: u64,
}

impl Default for TaskLimits {
    fn default() -> Self {
        Self {
            max_running: 8,
            warn_above: 2,
            timeout_secs: 3600,
        }
    }
}

/// A started task, and a warning for the model when many run at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The task as recorded.
    pub record: TaskRecord,
    /// Set when more than [`TaskLimits::warn_above`] tasks now run.
    pub warning: Option<String>,
}

/// Starts tasks and looks after them; cheap to clone.
///
/// Built with the launching session's [`TaskSettings`]: every task it starts must work inside
/// their roots and is recorded with them (and its runner's argument template), so a task can
/// never do what its session may not.
#[derive(Debug, Clone)]
pub struct TaskLauncher {
    store: Arc<dyn TaskStore>,
    runners: Arc<Runners>,
    logs_dir: PathBuf,
    spawner: Spawner,
    limits: TaskLimits,
    settings: Arc<TaskSettings>,
}

impl TaskLauncher {
    /// A launcher recording in `store`, logging to `<logs_dir>/<id>.log`, starting tasks
    /// with the session's `settings` (their `runner` is filled in for each task).
    pub fn new(
        store: Arc<dyn TaskStore>,
        runners: Runners,
        logs_dir: impl Into<PathBuf>,
        spawner: Spawner,
        settings: TaskSettings,
    ) -> Self {
        Self {
            store,
            runners: Arc::new(runners),
            logs_dir: logs_dir.into(),
            spawner,
            limits: TaskLimits::default(),
            settings: Arc::new(settings),
        }
    }

    /// Other limits.
    pub fn limits(mut self, limits: TaskLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.store
    }

    /// The runners.
    pub fn runners(&self) -> &Runners {
        &self.runners
    }

    /// The settings tasks are started with.
    pub fn settings(&self) -> &TaskSettings {
        &self.settings
    }

    /// The default timeout in seconds.
    pub fn default_timeout_secs(&self) -> u64 {
        self.limits.timeout_secs
    }

    /// Records `task` and starts its supervisor; returns at once. Refused when there is no
    /// such runner, or its directory is not a directory inside the settings' roots
    /// (resolved: symlinks and `..` cannot lead out); it is recorded with its directory
    /// resolved.
    pub fn start(&self, mut task: NewTask) -> Result<Started, TaskError> {
        if !self.runners.has(&task.runner) {
            return Err(TaskError::Refused(format!(
                "no runner `{}`; known: {}",
                task.runner,
                self.runners.names().join(", ")
            )));
        }
        task.workdir = self.settings.check_workdir(&task.workdir)?;
        let settings = TaskSettings {
            runner: self.runners.template(&task.runner)?.to_vec(),
            ..(*self.settings).clone()
        };
        let running = self.store.count_active()?;
        if running >= self.limits.max_running {
            return Err(TaskError::Refused(format!(
                "{running} tasks are running, the most allowed ([tasks] max_running = {}); wait \
                 for one (wait_task) or cancel one (cancel_task) first",
                self.limits.max_running
            )));
        }
        let record = self.store.create(&task, &settings, &self.logs_dir)?;
        if let Err(err) = self.spawn(&record.id) {
            let end = crate::TaskEnd {
                status: TaskStatus::Failed,
                exit_code: None,
                output_tail: String::new(),
                error_tail: err.to_string(),
                result_summary: None,
                note: Some(format!("its supervisor could not start: {err}")),
            };
            self.store.finish(&record.id, &end)?;
            return Err(err);
        }
        let now = running + 1;
        let warning = (now > self.limits.warn_above).then(|| {
            format!(
                "Note: {now} tasks are running at once; each one uses this machine and the \
                 model's quota."
            )
        });
        Ok(Started { record, warning })
    }

    fn spawn(&self, id: &str) -> Result<(), TaskError> {
        match &self.spawner {
            Spawner::Detached { program, args } => {
                let mut command = std::process::Command::new(program);
                command
                    .args(args)
                    .arg(id)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null());
                // Registered as it starts as a child to leave running when keel sweeps its
                // descendants (at a command's end, at exit): it outlives keel on purpose.
                let (mut child, survivor) = keel_sandbox::reaper::spawn_std(&mut command, true)
                    .map_err(|source| TaskError::Io {
                        context: format!("starting {}", program.display()),
                        source,
                    })?;
                // Reaped when it exits, so it never lingers as a zombie of a long-lived host.
                std::thread::spawn(move || {
                    let _survivor = survivor;
                    child.wait()
                });
                Ok(())
            }
            Spawner::InProcess => {
                let store = self.store.clone();
                let id = id.to_owned();
                tokio::spawn(async move {
                    if let Err(err) = supervise(store.as_ref(), &id, std::process::id()).await {
                        tracing::warn!(task = %id, "task supervisor failed: {err}");
                    }
                });
                Ok(())
            }
        }
    }

    /// Cancels task `id`; see [`cancel`].
    pub fn cancel(&self, id: &str) -> Result<TaskRecord, TaskError> {
        cancel(self.store.as_ref(), id)
    }

    /// Waits until task `id` ends or `timeout` passes; returns the record as it then is.
    pub async fn wait(&self, id: &str, timeout: Duration) -> Result<TaskRecord, TaskError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let record = self
                .store
                .get(id)?
                .ok_or_else(|| TaskError::NotFound { id: id.to_owned() })?;
            if record.status.is_terminal() || tokio::time::Instant::now() >= deadline {
                return Ok(record);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Marks interrupted the tasks recorded as running whose supervisor is gone; see
    /// [`recover`].
    pub fn recover(&self) -> Result<Vec<TaskRecord>, TaskError> {
        recover(self.store.as_ref())
    }
}

/// Cancels task `id` in `store`: it is marked cancelled now, and its supervisor kills its
/// process group within a moment. Returns the cancelled record; refused when the task
/// already ended.
pub fn cancel(store: &dyn TaskStore, id: &str) -> Result<TaskRecord, TaskError> {
    match store.cancel(id)? {
        Some(_) => store
            .get(id)?
            .ok_or_else(|| TaskError::NotFound { id: id.to_owned() }),
        None => match store.get(id)? {
            Some(record) => Err(TaskError::Refused(format!(
                "task {id} already ended ({})",
                record.status
            ))),
            None => Err(TaskError::NotFound { id: id.to_owned() }),
        },
    }
}

/// Marks interrupted the tasks `store` records as running whose supervisor is gone (checked
/// by pid and start time, so a reused pid does not count). Run on every start. Returns what
/// it marked.
pub fn recover(store: &dyn TaskStore) -> Result<Vec<TaskRecord>, TaskError> {
    let mut marked = Vec::new();
    for record in store.active()? {
        let gone = match (record.status, record.pid, record.process_start) {
            (TaskStatus::Running, Some(pid), Some(started)) => !is_alive(pid, started),
            (TaskStatus::Running, _, _) => true,
            _ => false,
        };
        if !gone {
            continue;
        }
        let note = format!(
            "interrupted: its supervisor (pid {}) is gone — the machine restarted or the \
             process was killed",
            record
                .pid
                .map_or_else(|| "unknown".to_owned(), |p| p.to_string())
        );
        if store.mark_interrupted(&record.id, &note)?
            && let Some(now) = store.get(&record.id)?
        {
            marked.push(now);
        }
    }
    Ok(marked)
}
