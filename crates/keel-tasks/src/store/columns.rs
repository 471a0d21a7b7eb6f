//! Rows and columns: [`TaskRecord`]s, statuses, paths and unsigned numbers as SQLite
//! stores them.

use std::path::{Path, PathBuf};

use rusqlite::Row;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};

use crate::{TaskRecord, TaskSettings, TaskStatus};

/// Every column, in the order of [`TaskRecord`].
pub(super) const COLUMNS: &str = "id, parent_session, agent, runner, task_prompt, workdir, \
    status, pid, process_start, created_at, started_at, completed_at, exit_code, output_path, \
    output_tail, error_tail, result_summary, notified_at, timeout_secs, note, settings";

/// A row of [`COLUMNS`].
pub(super) fn record(row: &Row<'_>) -> rusqlite::Result<TaskRecord> {
    Ok(TaskRecord {
        id: row.get("id")?,
        parent_session: row.get("parent_session")?,
        agent: row.get("agent")?,
        runner: row.get("runner")?,
        task_prompt: row.get("task_prompt")?,
        workdir: row.get::<_, PathColumn>("workdir")?.0,
        status: row.get::<_, StatusColumn>("status")?.0,
        pid: row.get("pid")?,
        process_start: row
            .get::<_, Option<i64>>("process_start")?
            .map(|n| to_unsigned(row, "process_start", n))
            .transpose()?,
        created_at: row.get("created_at")?,
        started_at: row.get("started_at")?,
        completed_at: row.get("completed_at")?,
        exit_code: row.get("exit_code")?,
        output_path: row.get::<_, PathColumn>("output_path")?.0,
        output_tail: row.get("output_tail")?,
        error_tail: row.get("error_tail")?,
        result_summary: row.get("result_summary")?,
        notified_at: row.get("notified_at")?,
        timeout_secs: to_unsigned(row, "timeout_secs", row.get("timeout_secs")?)?,
        note: row.get("note")?,
        settings: settings(row.get("settings")?),
    })
}

/// The settings stored as `json`: `None` when there are none (a task of an older keel) or
/// they cannot be read, so the task is refused, never run without them.
fn settings(json: Option<String>) -> Option<TaskSettings> {
    let json = json?;
    match serde_json::from_str(&json) {
        Ok(settings) => Some(settings),
        Err(err) => {
            tracing::warn!("a task's settings cannot be read ({err}): it will not run");
            None
        }
    }
}

/// `settings` as stored: JSON text.
pub(super) fn settings_json(settings: &TaskSettings) -> rusqlite::Result<String> {
    serde_json::to_string(settings)
        .map_err(|err| rusqlite::Error::ToSqlConversionFailure(Box::new(err)))
}

/// `n` as an SQLite integer (which is signed).
pub(super) fn to_integer(n: u64) -> rusqlite::Result<i64> {
    i64::try_from(n).map_err(|err| rusqlite::Error::ToSqlConversionFailure(Box::new(err)))
}

/// Column `name` of `row`, `n`, as the unsigned number it was stored from.
fn to_unsigned(row: &Row<'_>, name: &str, n: i64) -> rusqlite::Result<u64> {
    u64::try_from(n).map_err(|err| {
        let index = row.as_ref().column_index(name).unwrap_or(0);
        rusqlite::Error::FromSqlConversionFailure(
            index,
            rusqlite::types::Type::Integer,
            Box::new(err),
        )
    })
}

/// A [`TaskStatus`] read from the `status` column.
pub(super) struct StatusColumn(pub(super) TaskStatus);

impl FromSql for StatusColumn {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let name = value.as_str()?;
        TaskStatus::parse(name)
            .map(Self)
            .ok_or_else(|| FromSqlError::Other(format!("unknown task status {name:?}").into()))
    }
}

/// A path read from a column: text, or (a path that is not UTF-8) its bytes.
pub(super) struct PathColumn(pub(super) PathBuf);

impl FromSql for PathColumn {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        match value {
            ValueRef::Text(bytes) | ValueRef::Blob(bytes) => Ok(Self(path_from_bytes(bytes))),
            _ => Err(FromSqlError::InvalidType),
        }
    }
}

/// A path to store: text when it is UTF-8, else its bytes (so it comes back the same).
pub(super) struct PathParam<'a>(pub(super) &'a Path);

impl ToSql for PathParam<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0.to_str() {
            Some(text) => ToSqlOutput::from(text),
            None => non_utf8_path(self.0),
        })
    }
}

#[cfg(unix)]
fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

#[cfg(unix)]
fn non_utf8_path(path: &Path) -> ToSqlOutput<'_> {
    use std::os::unix::ffi::OsStrExt;
    ToSqlOutput::Borrowed(ValueRef::Blob(path.as_os_str().as_bytes()))
}

#[cfg(not(unix))]
fn non_utf8_path(path: &Path) -> ToSqlOutput<'_> {
    ToSqlOutput::Owned(rusqlite::types::Value::Text(
        path.to_string_lossy().into_owned(),
    ))
}
