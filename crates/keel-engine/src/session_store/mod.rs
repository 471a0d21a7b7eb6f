//! Persistent sessions: every message, model call and outcome of a run, appended to a
//! JSON Lines file so a run can be listed, inspected and resumed.
//!
//! # Format
//!
//! One file per session, `<dir>/<id>.jsonl`, append-only, one JSON object per line, tagged
//! by `"type"` (see [`SessionRecord`]). The first line is always a
//! [`SessionRecord::Header`]. Replaying the file gives the history: `message` records are
//! appended (a user message right after another is merged into it), `tool_result` records
//! join the results of their reply, a `compacted` record replaces the history so far, a
//! `rewound` record cuts it; the result is put in canonical form
//! ([`history::canonicalize`](crate::history::canonicalize)).
//!
//! # Write-ahead
//!
//! Records are written as they happen, each with one `write(2)`: a reply with its tool calls
//! is in the file before the first call runs, each result as soon as its call ends. A kill at
//! any point leaves a file that replays to a valid history: calls without a result get
//! [`STOPPED`](crate::history::STOPPED) and are never run again.
//!
//! # Damage
//!
//! Reading never panics and never throws away more than the damaged line:
//!
//! - an incomplete or corrupt **last** line (a crash mid-write) is skipped with a warning;
//! - a corrupt line in the **middle** is skipped too, with a warning naming its line number,
//!   and every later line is still read;
//! - a record type this version does not know (written by a newer keel) is skipped with a
//!   warning;
//! - only a file whose first line is not a valid header is refused, as
//!   [`SessionError::Corrupt`].
//!
//! Warnings are returned in [`LoadedSession::warnings`] and logged with `tracing::warn!`.
//! Resuming a session whose last line was cut off starts the next record on a new line, so
//! the fragment stays a single skipped line and nothing is glued onto it.
//!
//! # Secrets
//!
//! The store writes exactly what it is given. [`SessionMeta`] and [`SessionRecord`] have no
//! field for credentials, on purpose: the engine must never put API keys in messages, tool
//! results or outcomes, because session files outlive the process and are meant to be read.
//! Files are created with mode `0600` inside a `0700` directory all the same.

mod id;
mod jsonl;
mod memory;
mod replay;
pub(crate) use replay::shorten;

use std::path::{Path, PathBuf};

use keel_provider::{ContentBlock, Message, Usage};
use serde::{Deserialize, Serialize};

pub use id::validate_id;

/// A fresh UUID version 7 (time-ordered, random otherwise), in its lowercase hyphenated form:
/// the form of session ids, for other things that want UUIDs (the `uuid` of each
/// `stream-json` line).
pub fn new_uuid() -> String {
    id::uuid_v7(jiff::Timestamp::now())
}
pub use jsonl::JsonlSessionStore;
pub use memory::MemorySessionStore;

/// The first line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The session's id, also the file's name without `.jsonl`: a UUID v7, sortable by
    /// creation time, e.g. `019aa1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b` (sessions made before keel
    /// used UUIDs keep their `20261122T062604-3f9a1c` ids).
    pub id: String,
    /// The working directory the session ran in.
    pub cwd: PathBuf,
    /// The model's id, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// The provider's name, e.g. `anthropic`.
    pub provider: String,
    /// When the session started, RFC 3339 in UTC, e.g. `2026-11-22T06:26:04.123Z`.
    pub started_at: String,
    /// The version of keel that started the session.
    pub keel_version: String,
}

impl SessionMeta {
    /// A header for a new session started now, with a fresh id.
    ///
    /// The id is a UUID version 7 (`019aa1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b`, as Claude Code's
    /// session ids are UUIDs): the start time in milliseconds then random bits, so ids sort
    /// by creation time and two sessions started in the same millisecond still get different
    /// ids (a collision is refused by [`SessionStore::create`], never silently merged).
    pub fn new(cwd: impl Into<PathBuf>, provider: &str, model: &str) -> Self {
        let now = jiff::Timestamp::now();
        Self {
            id: id::new_id(now),
            cwd: cwd.into(),
            model: model.to_owned(),
            provider: provider.to_owned(),
            started_at: now.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string(),
            keel_version: env!("CARGO_PKG_VERSION").to_owned(),
        }
    }
}

/// One line of a session file (JSON Lines, tagged by `"type"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionRecord {
    /// The session's header; always the first line, and only there.
    Header(SessionMeta),
    /// A message appended to the history (user prompt, assistant reply, tool results).
    Message {
        /// The message, exactly as sent to or received from the model.
        message: Message,
    },
    /// Usage of one model call.
    Usage {
        /// The tokens of the call.
        usage: Usage,
        /// What the call cost, when the model's pricing is known.
        cost_usd: Option<f64>,
    },
    /// The history was compacted: from now on the history is `messages`.
    Compacted {
        /// The whole history after compaction.
        messages: Vec<Message>,
        /// The estimated size of the history before, in tokens.
        before_tokens: u64,
        /// The estimated size of the history after, in tokens.
        after_tokens: u64,
    },
    /// The result of one tool call, written as soon as the call ends (write-ahead: a crash
    /// loses no result that was already there). Replay adds it to the user message after the
    /// calls, in call order ([`history::insert_result`](crate::history::insert_result)).
    ToolResult {
        /// The `tool_result` block.
        result: ContentBlock,
    },
    /// The conversation was rewound: from now on the history is its first `history_len`
    /// messages (counted in the canonical history replayed so far).
    Rewound {
        /// How many messages were kept.
        history_len: usize,
    },
    /// How a run ended.
    Outcome {
        /// Why it stopped, e.g. `end_turn`, `max_iterations`, `cancelled`.
        stop: String,
        /// The final text shown to the user.
        text: String,
        /// How many model calls the run made.
        iterations: u32,
        /// The run's total usage (already counted by its `Usage` records).
        usage: Usage,
        /// The run's total cost, when known.
        cost_usd: Option<f64>,
    },
}

impl SessionRecord {
    /// The `"type"` tag of every record this version knows.
    pub const KNOWN_TYPES: [&'static str; 7] = [
        "header",
        "message",
        "usage",
        "compacted",
        "tool_result",
        "rewound",
        "outcome",
    ];

    /// A `Message` record.
    pub fn message(message: Message) -> Self {
        Self::Message { message }
    }

    /// A `Usage` record.
    pub fn usage(usage: Usage, cost_usd: Option<f64>) -> Self {
        Self::Usage { usage, cost_usd }
    }
}

/// A session read back.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedSession {
    /// The header.
    pub meta: SessionMeta,
    /// The history after replaying `Message`, `ToolResult`, `Compacted` and `Rewound`
    /// records, put in canonical form ([`history::canonicalize`](crate::history::canonicalize):
    /// calls a crash left unanswered get a result, no two user messages in a row, unique
    /// ids), ready to resume.
    pub messages: Vec<Message>,
    /// The sum of every `Usage` record (`Outcome` totals are not added again).
    pub usage: Usage,
    /// The sum of every `Usage` record's cost; `None` if any call's cost was unknown.
    /// `Some(0.0)` for a session without model calls.
    pub cost_usd: Option<f64>,
    /// The last `Outcome`'s stop reason and text, if a run finished.
    pub last_outcome: Option<(String, String)>,
    /// What was skipped while reading (damaged lines, unknown record types), each naming its
    /// line number.
    pub warnings: Vec<String>,
}

/// One line of `keel sessions`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The header.
    pub meta: SessionMeta,
    /// The text of the first user message that has text, on one line and shortened to
    /// [`SessionSummary::PROMPT_CHARS`] characters.
    pub first_prompt: Option<String>,
    /// The last `Outcome`'s stop reason.
    pub outcome: Option<String>,
}

impl SessionSummary {
    /// The longest `first_prompt`, in characters (an ellipsis included).
    pub const PROMPT_CHARS: usize = 80;
}

/// Appends records to one session.
pub trait SessionLog: Send {
    /// Appends one record as one line. A file store has written it (`write(2)`, no buffering
    /// in the process) when this returns, so a crash of keel right after loses nothing;
    /// [`SessionLog::flush`] makes it durable against a crash of the machine.
    fn append(&mut self, record: &SessionRecord) -> Result<(), SessionError>;
    /// Writes out everything appended and makes it durable (fsync for files).
    fn flush(&mut self) -> Result<(), SessionError>;
    /// The session's id.
    fn id(&self) -> &str;
    /// The file the records go to, if the log is a file (a `SessionStart`… hook's
    /// `transcript_path`); `None` by default.
    fn path(&self) -> Option<&Path> {
        None
    }
}

/// Where sessions live.
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// Creates a session and writes its header. Refuses an id that already exists.
    fn create(&self, meta: &SessionMeta) -> Result<Box<dyn SessionLog>, SessionError>;
    /// Reads a session back.
    fn load(&self, id: &str) -> Result<LoadedSession, SessionError>;
    /// Reads a session back and opens it to append more records (to resume it).
    fn open(&self, id: &str) -> Result<(LoadedSession, Box<dyn SessionLog>), SessionError>;
    /// The header of the newest session started in `cwd` (compared canonicalized when both
    /// paths exist), if any.
    fn latest_for_cwd(&self, cwd: &Path) -> Result<Option<SessionMeta>, SessionError>;
    /// Up to `limit` sessions, newest first (by `started_at`, then id). Sessions that cannot
    /// be read are left out with a warning; pass `usize::MAX` for all.
    fn list(&self, limit: usize) -> Result<Vec<SessionSummary>, SessionError>;

    /// Rewinds the conversation of session `id` (not open elsewhere) to its first
    /// `history_len` messages, as [`Session::rewind_to`](crate::Session::rewind_to) does for
    /// an open one: appends a [`SessionRecord::Rewound`], so resuming it continues from there.
    /// Refused ([`SessionError::InvalidRewind`]) when `history_len` is past the end or would
    /// split a call from its result.
    fn rewind(&self, id: &str, history_len: usize) -> Result<(), SessionError> {
        let (loaded, mut log) = self.open(id)?;
        crate::history::check_rewind(&loaded.messages, history_len).map_err(|reason| {
            SessionError::InvalidRewind {
                id: id.to_owned(),
                history_len,
                reason,
            }
        })?;
        log.append(&SessionRecord::Rewound { history_len })?;
        log.flush()
    }
}

/// Why a session could not be created, read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// No session has this id.
    #[error("no session {id:?}; `keel sessions` lists the existing ones")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// A session with this id already exists.
    #[error("a session {id:?} already exists; start a new one with a fresh id")]
    AlreadyExists {
        /// The id asked for.
        id: String,
    },
    /// The session cannot be read at all (its header is missing or damaged).
    #[error("session {id:?} is corrupt at line {line}: {reason}")]
    Corrupt {
        /// The session's id.
        id: String,
        /// The 1-based line number of the problem.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The id is not a valid session id.
    #[error(
        "{id:?} is not a valid session id: use 1 to {max} ASCII letters, digits, `-`, `_` or \
         `.`, not starting with `.` nor containing `..`",
        max = id::MAX_ID_LEN
    )]
    InvalidId {
        /// The id as given (shortened if very long).
        id: String,
    },
    /// Reading or writing a file failed.
    #[error("session file {}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The conversation cannot be rewound to that point.
    #[error("session {id:?}: cannot rewind to message {history_len}: {reason}")]
    InvalidRewind {
        /// The session's id.
        id: String,
        /// The length asked for.
        history_len: usize,
        /// Why not.
        reason: String,
    },
    /// A record could not be turned into JSON.
    #[error("session {id:?}: cannot serialize a record: {source}")]
    Serialize {
        /// The session's id.
        id: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

impl SessionError {
    fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

/// Serializes `record` as one JSONL line, newline included.
fn encode_line(id: &str, record: &SessionRecord) -> Result<Vec<u8>, SessionError> {
    let mut line = serde_json::to_vec(record).map_err(|source| SessionError::Serialize {
        id: id.to_owned(),
        source,
    })?;
    line.push(b'\n');
    Ok(line)
}

/// Whether two working directories are the same, canonicalized when possible.
/// The newest of `headers` started in `cwd`; unreadable sessions are skipped with a warning.
fn newest_for_cwd(
    headers: impl Iterator<Item = (String, Result<SessionMeta, SessionError>)>,
    cwd: &Path,
) -> Option<SessionMeta> {
    let mut best: Option<SessionMeta> = None;
    for (id, header) in headers {
        let meta = match header {
            Ok(meta) => meta,
            Err(err) => {
                tracing::warn!(session = %id, "skipped an unreadable session: {err}");
                continue;
            }
        };
        if same_dir(&meta.cwd, cwd)
            && best
                .as_ref()
                .is_none_or(|b| newest_key(&meta) > newest_key(b))
        {
            best = Some(meta);
        }
    }
    best
}

fn same_dir(a: &Path, b: &Path) -> bool {
    if a == b {
        return true;
    }
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Sort key for newest-first ordering: the parsed start time (unparsable ones oldest), then
/// the raw strings.
fn newest_key(meta: &SessionMeta) -> (Option<jiff::Timestamp>, &str, &str) {
    (
        meta.started_at.parse::<jiff::Timestamp>().ok(),
        meta.started_at.as_str(),
        meta.id.as_str(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_meta_has_a_valid_sortable_id_and_utc_start() {
        let meta = SessionMeta::new("/tmp/x", "anthropic", "m");
        assert!(validate_id(&meta.id).is_ok(), "{}", meta.id);
        assert_eq!(meta.id.len(), 36, "{}", meta.id);
        assert_eq!(&meta.id[14..15], "7", "a UUID v7: {}", meta.id);
        assert!(meta.started_at.ends_with('Z'), "{}", meta.started_at);
        let started = meta.started_at.parse::<jiff::Timestamp>().unwrap();
        // The id's time is the start time, to the millisecond.
        let hex: String = meta.id[..13].chars().filter(|c| *c != '-').collect();
        let millis = i64::from_str_radix(&hex, 16).unwrap();
        assert_eq!(millis, started.as_millisecond());
        assert_eq!(meta.keel_version, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn ids_are_unique() {
        let ids: std::collections::HashSet<String> = (0..200)
            .map(|_| SessionMeta::new("/", "p", "m").id)
            .collect();
        assert_eq!(ids.len(), 200);
    }

    #[test]
    fn newest_key_orders_by_time_not_by_text() {
        let mut a = SessionMeta::new("/", "p", "m");
        let mut b = a.clone();
        a.started_at = "2026-01-01T00:00:05Z".into();
        b.started_at = "2026-01-01T00:00:04.900Z".into();
        assert!(newest_key(&a) > newest_key(&b));
    }
}
