//! The default [`TaskStore`]: one SQLite file shared by every process that starts, runs or
//! shows tasks.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::{NewTask, TaskEnd, TaskError, TaskRecord, TaskSettings, TaskStatus, TaskStore};

mod columns;
mod schema;

use columns::{COLUMNS, PathParam, StatusColumn, record, settings_json, to_integer};
use schema::{MIGRATIONS, TASK_DB};

/// The SQL condition of an active (`queued` or `running`) task.
const ACTIVE: &str = "status IN ('queued', 'running')";

/// The SQL condition of a task whose session should be told it ended.
const UNNOTIFIED: &str =
    "parent_session = ?1 AND notified_at IS NULL AND status NOT IN ('queued', 'running')";

/// How many characters a task id has (lowercase base 36).
const ID_LEN: usize = 8;

/// How many fresh ids [`SqliteTaskStore::create`] tries before giving up.
const ID_ATTEMPTS: usize = 16;

/// The default [`TaskStore`]: a SQLite database (bundled SQLite) in WAL mode.
///
/// Every process that deals with tasks (the launcher, each task's supervisor, `keel tasks`)
/// opens its own store on the same file; every method is one transaction, and the
/// read-modify-write ones take the write lock first (`BEGIN IMMEDIATE`), so when two
/// processes race (a cancel and a finish, two sessions taking their notifications) exactly
/// one wins. A process waits up to 10 seconds for another's write.
///
/// Timestamps are RFC 3339 UTC strings with microseconds (`2025-01-02T03:04:05.678901Z`),
/// so they sort as text. [`list`](TaskStore::list) is newest first (by `created_at`, then
/// id); [`active`](TaskStore::active) and
/// [`active_for_session`](TaskStore::active_for_session) are oldest first;
/// [`take_unnotified`](TaskStore::take_unnotified) is in the order the tasks ended, and its
/// records carry the `notified_at` it just wrote.
///
/// The methods that change one task ([`mark_running`](TaskStore::mark_running),
/// [`finish`](TaskStore::finish), [`cancel`](TaskStore::cancel),
/// [`mark_interrupted`](TaskStore::mark_interrupted)) fail with [`TaskError::NotFound`] when
/// there is no task with that id; `false` / `None` means the task exists but was not in a
/// state that allows the change.
///
/// Each task's [`TaskSettings`] are stored as JSON in its `settings` column; a database of
/// an older keel gets the column when opened, its tasks none (they read as `None`).
///
/// ```
/// use keel_tasks::{NewTask, SqliteTaskStore, TaskSettings, TaskStatus, TaskStore};
/// use keel_sandbox::SandboxPolicy;
///
/// let dir = tempfile::tempdir()?;
/// let store = SqliteTaskStore::open(&dir.path().join("tasks.db"))?;
/// let task = NewTask {
///     parent_session: Some("session-1".into()),
///     agent: "main".into(),
///     runner: "keel".into(),
///     task_prompt: "Fix the flaky test".into(),
///     workdir: dir.path().to_path_buf(),
///     timeout_secs: 600,
/// };
/// let settings = TaskSettings::new(dir.path(), SandboxPolicy::default());
/// let record = store.create(&task, &settings, &dir.path().join("logs"))?;
/// assert_eq!(record.status, TaskStatus::Queued);
/// assert_eq!(record.settings, Some(settings));
/// assert_eq!(record.id.len(), 8);
/// assert_eq!(record.output_path, dir.path().join("logs").join(format!("{}.log", record.id)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SqliteTaskStore {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// Why a store operation failed, before it is turned into a [`TaskError`].
enum Fail {
    /// SQLite failed.
    Db(rusqlite::Error),
    /// Something else, already a task error.
    Task(TaskError),
}

impl From<rusqlite::Error> for Fail {
    fn from(err: rusqlite::Error) -> Self {
        Self::Db(err)
    }
}

impl SqliteTaskStore {
    /// The newest schema version (`PRAGMA user_version`) this code knows. A database with a
    /// newer one is refused.
    pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

    /// Opens the database at `path` (the CLI uses `$KEEL_HOME/tasks.db`), creating it and its
    /// parent directories if needed, switching it to WAL mode and bringing its schema up to
    /// date. Opening an up-to-date database again changes nothing.
    ///
    /// # Errors
    ///
    /// [`TaskError::Io`] if the parent directory cannot be created; [`TaskError::Store`] if
    /// the file cannot be opened as a SQLite database, cannot use WAL mode, was written by a
    /// newer keel (its schema version is higher than [`Self::SCHEMA_VERSION`]) or cannot be
    /// migrated.
    pub fn open(path: &Path) -> Result<Self, TaskError> {
        let conn = TASK_DB.open(path).map_err(|err| match err {
            keel_sqlite::SqliteError::Directory { source, .. } => TaskError::Io {
                context: format!(
                    "creating the directory of the task store {}",
                    path.display()
                ),
                source,
            },
            err => store_message(path, store_detail(&err)),
        })?;
        Ok(Self {
            path: path.to_path_buf(),
            conn: Mutex::new(conn),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection. A panic while it was held cannot leave it mid-transaction (an
    /// unfinished transaction is rolled back when dropped), so a poisoned lock is taken over.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A [`TaskError::Store`] for this database.
    fn error(&self, doing: &str, err: impl fmt::Display) -> TaskError {
        store_error(&self.path, doing, err)
    }

    /// Runs `read` on the connection (a single statement is its own transaction).
    fn read<T>(
        &self,
        doing: impl FnOnce() -> String,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, TaskError> {
        let conn = self.conn();
        read(&conn).map_err(|e| self.error(&doing(), e))
    }

    /// Runs `write` in one `BEGIN IMMEDIATE` transaction, committed if it succeeds and rolled
    /// back if it fails.
    fn write<T>(
        &self,
        doing: impl FnOnce() -> String,
        write: impl FnOnce(&Transaction<'_>) -> Result<T, Fail>,
    ) -> Result<T, TaskError> {
        let mut conn = self.conn();
        let result = (|| {
            if !conn.is_autocommit() {
                // A transaction left open (its rollback failed): end it before the next.
                conn.execute_batch("ROLLBACK")?;
            }
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let value = write(&tx)?;
            tx.commit()?;
            Ok(value)
        })();
        result.map_err(|fail| match fail {
            Fail::Db(e) => self.error(&doing(), e),
            Fail::Task(e) => e,
        })
    }

    /// The records `sql` (which selects [`COLUMNS`]) returns for `params`.
    fn query(
        conn: &Connection,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> rusqlite::Result<Vec<TaskRecord>> {
        let mut statement = conn.prepare_cached(sql)?;
        let rows = statement.query_map(params, record)?;
        rows.collect()
    }
}

impl fmt::Debug for SqliteTaskStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteTaskStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl TaskStore for SqliteTaskStore {
    fn create(
        &self,
        task: &NewTask,
        settings: &TaskSettings,
        logs_dir: &Path,
    ) -> Result<TaskRecord, TaskError> {
        self.write(
            || "recording a new task".to_owned(),
            |tx| {
                let created_at = now();
                let settings = settings_json(settings)?;
                // `u64::MAX` ("never") does not fit an SQLite integer: the longest that does.
                let timeout_secs = i64::try_from(task.timeout_secs).unwrap_or(i64::MAX);
                for _ in 0..ID_ATTEMPTS {
                    let id = new_id();
                    let output_path = logs_dir.join(format!("{id}.log"));
                    let inserted = tx.execute(
                        "INSERT INTO tasks (id, parent_session, agent, runner, task_prompt, \
                         workdir, status, created_at, output_path, timeout_secs, settings) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
                         ON CONFLICT (id) DO NOTHING",
                        params![
                            id,
                            task.parent_session,
                            task.agent,
                            task.runner,
                            task.task_prompt,
                            PathParam(&task.workdir),
                            TaskStatus::Queued.as_str(),
                            created_at,
                            PathParam(&output_path),
                            timeout_secs,
                            settings,
                        ],
                    )?;
                    if inserted == 1 {
                        return select(tx, &id)?.ok_or_else(|| {
                            Fail::Task(self.error(
                                "recording a new task",
                                format!("task {id} was not found right after it was inserted"),
                            ))
                        });
                    }
                }
                Err(Fail::Task(self.error(
                    "recording a new task",
                    format!("no free task id after {ID_ATTEMPTS} attempts"),
                )))
            },
        )
    }

    fn get(&self, id: &str) -> Result<Option<TaskRecord>, TaskError> {
        self.read(|| format!("reading task {id}"), |conn| select(conn, id))
    }

    fn list(&self, limit: usize) -> Result<Vec<TaskRecord>, TaskError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(
            || "listing tasks".to_owned(),
            |conn| {
                Self::query(
                    conn,
                    &format!(
                        "SELECT {COLUMNS} FROM tasks ORDER BY created_at DESC, id DESC LIMIT ?1"
                    ),
                    [limit],
                )
            },
        )
    }

    fn active(&self) -> Result<Vec<TaskRecord>, TaskError> {
        self.read(
            || "listing the active tasks".to_owned(),
            |conn| {
                Self::query(
                    conn,
                    &format!("SELECT {COLUMNS} FROM tasks WHERE {ACTIVE} ORDER BY created_at, id"),
                    [],
                )
            },
        )
    }

    fn count_active(&self) -> Result<usize, TaskError> {
        self.read(
            || "counting the active tasks".to_owned(),
            |conn| {
                let count: i64 = conn
                    .prepare_cached(&format!("SELECT COUNT(*) FROM tasks WHERE {ACTIVE}"))?
                    .query_row([], |row| row.get(0))?;
                Ok(usize::try_from(count).unwrap_or(usize::MAX))
            },
        )
    }

    fn mark_running(&self, id: &str, pid: u32, process_start: u64) -> Result<bool, TaskError> {
        self.write(
            || format!("marking task {id} running"),
            |tx| {
                if status_of(tx, id)? != TaskStatus::Queued {
                    return Ok(false);
                }
                tx.execute(
                    "UPDATE tasks SET status = ?2, pid = ?3, process_start = ?4, \
                     started_at = ?5 WHERE id = ?1",
                    params![
                        id,
                        TaskStatus::Running.as_str(),
                        pid,
                        to_integer(process_start)?,
                        now()
                    ],
                )?;
                Ok(true)
            },
        )
    }

    fn finish(&self, id: &str, end: &TaskEnd) -> Result<bool, TaskError> {
        if !end.status.is_terminal() {
            return Err(TaskError::Refused(format!(
                "task {id} cannot end as {}: that is not an end",
                end.status
            )));
        }
        self.write(
            || format!("recording the end of task {id}"),
            |tx| {
                let current = status_of(tx, id)?;
                if current.is_terminal() {
                    if current == TaskStatus::Cancelled {
                        // The cancel won; what the runner printed until it was killed is
                        // still kept (once), its status and end time stay the cancel's.
                        tx.execute(
                            "UPDATE tasks SET output_tail = ?2, error_tail = ?3, \
                             result_summary = COALESCE(result_summary, ?4) \
                             WHERE id = ?1 AND output_tail = '' AND error_tail = ''",
                            params![id, end.output_tail, end.error_tail, end.result_summary],
                        )?;
                    }
                    return Ok(false);
                }
                tx.execute(
                    "UPDATE tasks SET status = ?2, completed_at = ?3, exit_code = ?4, \
                     output_tail = ?5, error_tail = ?6, result_summary = ?7, note = ?8 \
                     WHERE id = ?1",
                    params![
                        id,
                        end.status.as_str(),
                        now(),
                        end.exit_code,
                        end.output_tail,
                        end.error_tail,
                        end.result_summary,
                        end.note,
                    ],
                )?;
                Ok(true)
            },
        )
    }

    fn cancel(&self, id: &str) -> Result<Option<TaskRecord>, TaskError> {
        self.write(
            || format!("cancelling task {id}"),
            |tx| {
                let Some(before) = select(tx, id)? else {
                    return Err(not_found(id));
                };
                if before.status.is_terminal() {
                    return Ok(None);
                }
                tx.execute(
                    "UPDATE tasks SET status = ?2, completed_at = ?3 WHERE id = ?1",
                    params![id, TaskStatus::Cancelled.as_str(), now()],
                )?;
                Ok(Some(before))
            },
        )
    }

    fn mark_interrupted(&self, id: &str, note: &str) -> Result<bool, TaskError> {
        self.write(
            || format!("marking task {id} interrupted"),
            |tx| {
                if status_of(tx, id)? != TaskStatus::Running {
                    return Ok(false);
                }
                tx.execute(
                    "UPDATE tasks SET status = ?2, completed_at = ?3, note = ?4 WHERE id = ?1",
                    params![id, TaskStatus::Interrupted.as_str(), now(), note],
                )?;
                Ok(true)
            },
        )
    }

    fn has_unnotified(&self, parent_session: &str) -> Result<bool, TaskError> {
        self.read(
            || format!("looking for ended tasks of session {parent_session}"),
            |conn| {
                conn.prepare_cached(&format!(
                    "SELECT EXISTS (SELECT 1 FROM tasks WHERE {UNNOTIFIED})"
                ))?
                .query_row([parent_session], |row| row.get::<_, bool>(0))
            },
        )
    }

    fn take_unnotified(&self, parent_session: &str) -> Result<Vec<TaskRecord>, TaskError> {
        let doing = || format!("taking the ended tasks of session {parent_session}");
        // Called before every model request: most of the time there is nothing to take, and
        // looking needs no write lock. What is found is taken (again) under the lock.
        if !self.has_unnotified(parent_session)? {
            return Ok(Vec::new());
        }
        self.write(doing, |tx| {
            let mut taken = Self::query(
                tx,
                &format!(
                    "SELECT {COLUMNS} FROM tasks WHERE {UNNOTIFIED} \
                     ORDER BY completed_at, created_at, id"
                ),
                [parent_session],
            )?;
            if taken.is_empty() {
                return Ok(taken);
            }
            let notified_at = now();
            tx.execute(
                &format!("UPDATE tasks SET notified_at = ?2 WHERE {UNNOTIFIED}"),
                params![parent_session, notified_at],
            )?;
            for task in &mut taken {
                task.notified_at = Some(notified_at.clone());
            }
            Ok(taken)
        })
    }

    fn active_for_session(&self, parent_session: &str) -> Result<Vec<TaskRecord>, TaskError> {
        self.read(
            || format!("listing the active tasks of session {parent_session}"),
            |conn| {
                Self::query(
                    conn,
                    &format!(
                        "SELECT {COLUMNS} FROM tasks WHERE parent_session = ?1 AND {ACTIVE} \
                         ORDER BY created_at, id"
                    ),
                    [parent_session],
                )
            },
        )
    }
}

/// The task `id`, if there is one.
fn select(conn: &Connection, id: &str) -> rusqlite::Result<Option<TaskRecord>> {
    conn.prepare_cached(&format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1"))?
        .query_row([id], record)
        .optional()
}

/// The status of task `id`; [`TaskError::NotFound`] if there is none.
fn status_of(conn: &Connection, id: &str) -> Result<TaskStatus, Fail> {
    conn.prepare_cached("SELECT status FROM tasks WHERE id = ?1")?
        .query_row([id], |row| row.get::<_, StatusColumn>(0))
        .optional()?
        .map(|status| status.0)
        .ok_or_else(|| not_found(id))
}

/// No task `id`.
fn not_found(id: &str) -> Fail {
    Fail::Task(TaskError::NotFound { id: id.to_owned() })
}
/// Now, as stored: RFC 3339 in UTC with exactly six fractional digits, so that text order is
/// time order.
fn now() -> String {
    format!("{:.6}", jiff::Timestamp::now())
}

/// A fresh random task id: [`ID_LEN`] lowercase base-36 characters.
fn new_id() -> String {
    (0..ID_LEN)
        .map(|_| char::from_digit(fastrand::u32(..36), 36).unwrap_or('0'))
        .collect()
}

/// What a [`keel_sqlite::SqliteError::Database`] says failed, without the file (which
/// [`TaskError::Store`] names itself).
fn store_detail(err: &keel_sqlite::SqliteError) -> String {
    match err {
        keel_sqlite::SqliteError::Database { message, .. } => message.clone(),
        err => err.to_string(),
    }
}

/// A [`TaskError::Store`] saying what was being done.
fn store_error(path: &Path, doing: &str, err: impl fmt::Display) -> TaskError {
    store_message(path, format!("{doing}: {err}"))
}

/// A [`TaskError::Store`] with `message`.
fn store_message(path: &Path, message: String) -> TaskError {
    TaskError::Store {
        path: path.to_path_buf(),
        message,
    }
}
