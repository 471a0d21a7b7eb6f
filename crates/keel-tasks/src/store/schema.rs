//! The schema and its migrations (`PRAGMA user_version`).

use keel_sqlite::Database;

/// The task store's database: what it is called in messages, and its migrations.
pub(super) const TASK_DB: Database = Database::new("task store", MIGRATIONS);

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
