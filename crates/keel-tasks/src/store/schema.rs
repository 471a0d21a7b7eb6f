//! The schema and its migrations (`PRAGMA user_version`).

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::{SqliteTaskStore, store_error, store_message};
use crate::TaskError;

/// The schema, one migration per version: migration `i` takes the database from
/// `user_version` `i` to `i + 1`. Never edit one that was released; add another.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: the tasks table.
    "CREATE TABLE tasks (
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
    CREATE INDEX tasks_created ON tasks (created_at, id);",
    // 2: the settings each task runs with (JSON); NULL for the tasks of older keels, which
    // are refused rather than run.
    "ALTER TABLE tasks ADD COLUMN settings TEXT;",
];

/// The database's `PRAGMA user_version`.
pub(super) fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Refuses a schema version this code does not know.
pub(super) fn check_version(path: &Path, version: i64) -> Result<(), TaskError> {
    let known = SqliteTaskStore::SCHEMA_VERSION;
    if (0..=i64::from(known)).contains(&version) {
        return Ok(());
    }
    Err(store_message(
        path,
        format!(
            "its schema version is {version}, but this keel only knows versions up to \
             {known}: it was written by a newer keel; use that one, or move the file away"
        ),
    ))
}

/// Brings the schema up to date in one `BEGIN IMMEDIATE` transaction (so two processes
/// opening a new database at once do not both migrate it).
pub(super) fn migrate(path: &Path, conn: &mut Connection) -> Result<(), TaskError> {
    let fail = |doing: &str, err: rusqlite::Error| store_error(path, doing, err);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(|e| fail("starting the schema migration", e))?;
    let version = schema_version(&tx).map_err(|e| fail("reading the schema version", e))?;
    check_version(path, version)?;
    for (index, sql) in MIGRATIONS.iter().enumerate() {
        let target = index + 1;
        if i64::try_from(target).unwrap_or(i64::MAX) <= version {
            continue;
        }
        tx.execute_batch(sql)
            .map_err(|e| fail(&format!("migrating the schema to version {target}"), e))?;
    }
    tx.pragma_update(None, "user_version", SqliteTaskStore::SCHEMA_VERSION)
        .map_err(|e| fail("recording the schema version", e))?;
    tx.commit()
        .map_err(|e| fail("committing the schema migration", e))
}
