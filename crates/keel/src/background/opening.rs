//! The task store opened at its first use: SQLite and the recovery of dead supervisors' tasks
//! take a millisecond or two, which a start that never touches the store (most `keel exec`
//! runs until their end, every new session until its first model reply) never pays. Opening
//! on a thread beside the build was tried: on two cores it competed with the first request
//! (and with the server answering it) and cost more than it hid.

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use keel_tasks::{NewTask, TaskEnd, TaskError, TaskRecord, TaskSettings, TaskStore};

/// What opening gives: the store, or why it could not be opened.
type Opened = Result<Arc<dyn TaskStore>, String>;

/// The opening, not run yet.
type Pending = Box<dyn FnOnce() -> Opened + Send>;

/// A [`TaskStore`] opened ([`super::open_task_store`]) by its first call, on the caller's
/// thread; later calls use it. A store that could not be opened makes every call an error
/// saying so, so the task tools tell the model background tasks are off and `keel tasks`
/// stays the place to see why.
pub(crate) struct OpeningTaskStore {
    pending: Mutex<Option<Pending>>,
    opened: OnceLock<Opened>,
}

impl OpeningTaskStore {
    /// The task store under `keel_home`, opened by its first call.
    pub(crate) fn new(keel_home: &Path) -> Self {
        let home = keel_home.to_path_buf();
        Self {
            pending: Mutex::new(Some(Box::new(move || {
                super::open_task_store(&home).map_err(|err| err.to_string())
            }))),
            opened: OnceLock::new(),
        }
    }

    /// The open store, opened now if this is the first call.
    fn store(&self) -> Result<&Arc<dyn TaskStore>, TaskError> {
        let opened = self.opened.get_or_init(|| {
            let pending = self
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let opened = match pending {
                Some(open) => open(),
                // Only `get_or_init` takes it, and only once.
                None => Err("the task store was never opened".to_owned()),
            };
            if let Err(err) = &opened {
                tracing::warn!("background tasks are off: {err}");
            }
            opened
        });
        opened.as_ref().map_err(|err| {
            TaskError::Refused(format!(
                "background tasks are off: the task store could not be opened: {err}"
            ))
        })
    }
}

impl std::fmt::Debug for OpeningTaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.opened.get() {
            Some(Ok(store)) => store.fmt(f),
            Some(Err(err)) => write!(f, "OpeningTaskStore(failed: {err})"),
            None => f.write_str("OpeningTaskStore(opening)"),
        }
    }
}

impl TaskStore for OpeningTaskStore {
    fn create(
        &self,
        task: &NewTask,
        settings: &TaskSettings,
        logs_dir: &Path,
    ) -> Result<TaskRecord, TaskError> {
        self.store()?.create(task, settings, logs_dir)
    }

    fn get(&self, id: &str) -> Result<Option<TaskRecord>, TaskError> {
        self.store()?.get(id)
    }

    fn list(&self, limit: usize) -> Result<Vec<TaskRecord>, TaskError> {
        self.store()?.list(limit)
    }

    fn active(&self) -> Result<Vec<TaskRecord>, TaskError> {
        self.store()?.active()
    }

    fn count_active(&self) -> Result<usize, TaskError> {
        self.store()?.count_active()
    }

    fn mark_running(&self, id: &str, pid: u32, process_start: u64) -> Result<bool, TaskError> {
        self.store()?.mark_running(id, pid, process_start)
    }

    fn finish(&self, id: &str, end: &TaskEnd) -> Result<bool, TaskError> {
        self.store()?.finish(id, end)
    }

    fn cancel(&self, id: &str) -> Result<Option<TaskRecord>, TaskError> {
        self.store()?.cancel(id)
    }

    fn mark_interrupted(&self, id: &str, note: &str) -> Result<bool, TaskError> {
        self.store()?.mark_interrupted(id, note)
    }

    fn has_unnotified(&self, parent_session: &str) -> Result<bool, TaskError> {
        self.store()?.has_unnotified(parent_session)
    }

    fn take_unnotified(&self, parent_session: &str) -> Result<Vec<TaskRecord>, TaskError> {
        self.store()?.take_unnotified(parent_session)
    }

    fn active_for_session(&self, parent_session: &str) -> Result<Vec<TaskRecord>, TaskError> {
        self.store()?.active_for_session(parent_session)
    }
}
