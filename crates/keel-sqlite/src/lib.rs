//! # keel-sqlite
//!
//! The SQLite databases keel keeps under its home: [`Database::open`] makes the file (and its
//! directory), switches it to WAL mode with a busy timeout — so several keel processes share
//! one file, a writer waiting for another rather than failing — and brings its schema up to
//! date with numbered migrations (`PRAGMA user_version`) in one `BEGIN IMMEDIATE`
//! transaction, so two processes opening a new database at once do not both migrate it. A
//! database whose version is newer than the migrations this code knows was written by a newer
//! keel: it is refused before anything in it changes.
//!
//! ```
//! use keel_sqlite::Database;
//!
//! const MIGRATIONS: &[&str] = &[
//!     "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT NOT NULL);",
//!     "ALTER TABLE notes ADD COLUMN tags TEXT NOT NULL DEFAULT '';",
//! ];
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("notes.db");
//! let notes = Database::new("the note store", MIGRATIONS);
//! let conn = notes.open(&path)?;
//! conn.execute("INSERT INTO notes (text, tags) VALUES ('hello', 'greeting')", [])?;
//! // Opening an up-to-date database again changes nothing.
//! drop(notes.open(&path)?);
//! // An older keel, which knows only the first migration, refuses the file.
//! let older = Database::new("the note store", &MIGRATIONS[..1]);
//! let err = older.open(&path).unwrap_err();
//! assert!(err.to_string().contains("written by a newer keel"), "{err}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![cfg_attr(test, allow(clippy::too_many_lines))]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, TransactionBehavior};

/// How long a connection waits for another process's lock before failing.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a database could not be opened or brought up to date.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SqliteError {
    /// The database failed; the message says what was being done.
    #[error("{what} {}: {message}", .path.display())]
    Database {
        /// What the database is (`the task store`).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
    /// Its directory could not be made.
    #[error("creating the directory of {what} {}: {source}", .path.display())]
    Directory {
        /// What the database is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A kind of database keel keeps: what it is, for messages, and its schema's migrations.
#[derive(Debug, Clone, Copy)]
pub struct Database {
    what: &'static str,
    migrations: &'static [&'static str],
}

impl Database {
    /// A database called `what` in messages (`"the task store"`), whose migration `i` takes
    /// the schema from `user_version` `i` to `i + 1`. Never edit one that was released; add
    /// another.
    pub const fn new(what: &'static str, migrations: &'static [&'static str]) -> Self {
        Self { what, migrations }
    }

    /// The newest schema version this code knows.
    pub fn version(&self) -> i64 {
        i64::try_from(self.migrations.len()).unwrap_or(i64::MAX)
    }

    /// Opens the database at `path`, creating it and its parent directories if needed,
    /// switching it to WAL mode and bringing its schema up to date.
    ///
    /// # Errors
    ///
    /// [`SqliteError::Directory`] if the parent directory cannot be made;
    /// [`SqliteError::Database`] if the file cannot be opened as a SQLite database, cannot use
    /// WAL mode, was written by a newer keel, or cannot be migrated.
    pub fn open(&self, path: &Path) -> Result<Connection, SqliteError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| SqliteError::Directory {
                what: self.what,
                path: path.to_path_buf(),
                source,
            })?;
        }
        let fail = |doing: &str, err: rusqlite::Error| self.error(path, format!("{doing}: {err}"));
        let mut conn = Connection::open(path).map_err(|e| fail("opening the database", e))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| fail("setting the busy timeout", e))?;
        // Refuse a newer database before changing anything in it.
        let version = schema_version(&conn).map_err(|e| fail("reading the schema version", e))?;
        self.check_version(path, version)?;
        let mode = switch_to_wal(&conn).map_err(|e| fail("switching to WAL mode", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(self.error(
                path,
                format!("switching to WAL mode: the journal mode stayed {mode:?}"),
            ));
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| fail("setting synchronous=NORMAL", e))?;
        if version < self.version() {
            self.migrate(path, &mut conn)?;
        }
        Ok(conn)
    }

    /// A [`SqliteError::Database`] for `path` with `message`.
    pub fn error(&self, path: &Path, message: String) -> SqliteError {
        SqliteError::Database {
            what: self.what,
            path: path.to_path_buf(),
            message,
        }
    }

    /// Refuses a schema version this code does not know.
    fn check_version(&self, path: &Path, version: i64) -> Result<(), SqliteError> {
        let known = self.version();
        if (0..=known).contains(&version) {
            return Ok(());
        }
        Err(self.error(
            path,
            format!(
                "its schema version is {version}, but this keel only knows versions up to \
                 {known}: it was written by a newer keel; use that one, or move the file away"
            ),
        ))
    }

    /// Brings the schema up to date in one `BEGIN IMMEDIATE` transaction (so two processes
    /// opening a new database at once do not both migrate it).
    fn migrate(&self, path: &Path, conn: &mut Connection) -> Result<(), SqliteError> {
        let fail = |doing: &str, err: rusqlite::Error| self.error(path, format!("{doing}: {err}"));
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| fail("starting the schema migration", e))?;
        let version = schema_version(&tx).map_err(|e| fail("reading the schema version", e))?;
        self.check_version(path, version)?;
        for (index, sql) in self.migrations.iter().enumerate() {
            let target = i64::try_from(index + 1).unwrap_or(i64::MAX);
            if target <= version {
                continue;
            }
            tx.execute_batch(sql)
                .map_err(|e| fail(&format!("migrating the schema to version {target}"), e))?;
        }
        tx.pragma_update(None, "user_version", self.version())
            .map_err(|e| fail("recording the schema version", e))?;
        tx.commit()
            .map_err(|e| fail("committing the schema migration", e))
    }
}

/// The database's `PRAGMA user_version`.
pub fn schema_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
}

/// Puts the database in WAL mode (a setting kept in the file) and returns the mode it is in.
/// A database already in WAL mode is left as it is. Switching needs the file to itself for a
/// moment, and SQLite answers "database is locked" at once, without waiting, when other
/// connections are reading it (several keel processes opening a new database together): the
/// switch is tried again until it goes through or [`BUSY_TIMEOUT`] has passed.
fn switch_to_wal(conn: &Connection) -> Result<String, rusqlite::Error> {
    let current: String = conn.pragma_query_value(None, "journal_mode", |row| row.get(0))?;
    if current.eq_ignore_ascii_case("wal") {
        return Ok(current);
    }
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)) {
            Err(rusqlite::Error::SqliteFailure(err, _))
                if matches!(
                    err.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO: &[&str] = &[
        "CREATE TABLE t (id INTEGER PRIMARY KEY);",
        "ALTER TABLE t ADD COLUMN x TEXT;",
    ];

    #[test]
    fn a_new_database_is_migrated_in_wal_mode_and_reopened_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("deep/dir/t.db");
        let db = Database::new("the test store", TWO);
        let conn = db.open(&path).unwrap();
        assert_eq!(schema_version(&conn).unwrap(), 2);
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |row| row.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        conn.execute("INSERT INTO t (x) VALUES ('a')", []).unwrap();
        drop(conn);
        let again = db.open(&path).unwrap();
        let rows: i64 = again
            .query_row("SELECT count(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 1);
    }

    #[test]
    fn garbage_and_a_newer_schema_are_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.db");
        std::fs::write(&junk, "this is not a database, it is only text".repeat(200)).unwrap();
        let err = Database::new("the test store", TWO)
            .open(&junk)
            .unwrap_err();
        assert!(err.to_string().contains("junk.db"), "{err}");
        let newer = dir.path().join("newer.db");
        drop(Database::new("the test store", TWO).open(&newer).unwrap());
        let err = Database::new("the test store", &TWO[..1])
            .open(&newer)
            .unwrap_err();
        assert!(err.to_string().contains("written by a newer keel"), "{err}");
    }
}

/// The crate README's example, compiled as a doctest so it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctest;
