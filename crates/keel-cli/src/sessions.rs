//! `keel sessions`: the recent sessions, one line each.

use std::io::Write;
use std::path::Path;

use keel::engine::{SessionStore, SessionSummary};

use crate::error::CliError;
use keel_config::{keel_home, session_store};

/// One line of the listing: id, start time, directory, outcome, first prompt.
pub(crate) fn session_line(summary: &SessionSummary) -> String {
    let meta = &summary.meta;
    let started = meta
        .started_at
        .get(..16)
        .unwrap_or(&meta.started_at)
        .replace('T', " ");
    format!(
        "{}  {}  {}  {}  {}",
        meta.id,
        started,
        meta.cwd.display(),
        summary.outcome.as_deref().unwrap_or("-"),
        summary.first_prompt.as_deref().unwrap_or("(no prompt)")
    )
}

/// Prints up to `limit` sessions, newest first.
pub(crate) fn list(limit: usize, out: &mut impl Write) -> Result<(), CliError> {
    let store = session_store(&keel_home()?);
    let sessions = store
        .list(limit)
        .map_err(|err| CliError::Run(format!("cannot list sessions: {err}")))?;
    let write = |out: &mut dyn Write, line: &str| {
        writeln!(out, "{line}").map_err(|err| CliError::Run(format!("stdout: {err}")))
    };
    if sessions.is_empty() {
        return write(
            out,
            &format!(
                "no sessions yet in {}; `keel` or `keel exec` starts one",
                store.dir().display()
            ),
        );
    }
    for summary in &sessions {
        write(out, &session_line(summary))?;
    }
    Ok(())
}

/// How many sessions are read to find a directory's (each listed session is read whole).
const SCANNED: usize = 500;

/// Up to `limit` sessions of `cwd` in `store`, newest first.
pub(crate) fn of_dir(
    store: &dyn SessionStore,
    cwd: &Path,
    limit: usize,
) -> Result<Vec<SessionSummary>, CliError> {
    let sessions = store
        .list(SCANNED)
        .map_err(|err| CliError::Run(format!("cannot list sessions: {err}")))?;
    Ok(sessions
        .into_iter()
        .filter(|summary| summary.meta.cwd == cwd)
        .take(limit)
        .collect())
}
