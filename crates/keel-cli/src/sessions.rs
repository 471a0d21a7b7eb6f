//! `keel sessions`: the recent sessions, one line each.

use std::io::Write;

use keel_engine::{SessionStore, SessionSummary};

use crate::setup::{CliError, keel_home, session_store};

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
