//! The in-memory store: same format and semantics as the file store, nothing persisted.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    LoadedSession, SessionError, SessionLog, SessionMeta, SessionRecord, SessionStore,
    SessionSummary, encode_line, id::validate_id, newest_for_cwd, newest_key, replay,
};

type Sessions = BTreeMap<String, Vec<u8>>;

/// Sessions kept in memory as JSON Lines, for tests and embedders that do not persist.
///
/// It stores the very bytes the file store would write and reads them back with the same
/// code, so behaviour (ids, replay, damage handling, ordering) is identical. Clones share
/// the same sessions. Appends are visible at once; `flush` has nothing to do.
#[derive(Debug, Clone, Default)]
pub struct MemorySessionStore {
    sessions: Arc<Mutex<Sessions>>,
}

impl MemorySessionStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// The raw JSONL bytes of session `id`, as a file store would hold them.
    pub fn raw(&self, id: &str) -> Option<Vec<u8>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// Replaces (or adds) session `id` with raw JSONL bytes, e.g. a file imported from disk
    /// or, in tests, a damaged one.
    pub fn insert_raw(&self, id: &str, data: impl Into<Vec<u8>>) -> Result<(), SessionError> {
        validate_id(id)?;
        lock(&self.sessions).insert(id.to_owned(), data.into());
        Ok(())
    }

    fn read(&self, id: &str) -> Result<Vec<u8>, SessionError> {
        validate_id(id)?;
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(|| SessionError::NotFound { id: id.to_owned() })
    }
}

/// Locks the sessions; a panic elsewhere while holding the lock leaves whole lines behind
/// (every append is a single `extend`), so a poisoned lock is still usable.
fn lock(sessions: &Mutex<Sessions>) -> MutexGuard<'_, Sessions> {
    sessions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SessionStore for MemorySessionStore {
    fn create(&self, meta: &SessionMeta) -> Result<Box<dyn SessionLog>, SessionError> {
        validate_id(&meta.id)?;
        let header = encode_line(&meta.id, &SessionRecord::Header(meta.clone()))?;
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(&meta.id) {
            return Err(SessionError::AlreadyExists {
                id: meta.id.clone(),
            });
        }
        sessions.insert(meta.id.clone(), header);
        Ok(Box::new(MemorySessionLog {
            id: meta.id.clone(),
            sessions: Arc::clone(&self.sessions),
        }))
    }

    fn load(&self, id: &str) -> Result<LoadedSession, SessionError> {
        replay::replay(id, &self.read(id)?)
    }

    fn open(&self, id: &str) -> Result<(LoadedSession, Box<dyn SessionLog>), SessionError> {
        let loaded = self.load(id)?;
        let log = MemorySessionLog {
            id: id.to_owned(),
            sessions: Arc::clone(&self.sessions),
        };
        Ok((loaded, Box::new(log)))
    }

    fn latest_for_cwd(&self, cwd: &Path) -> Result<Option<SessionMeta>, SessionError> {
        let snapshot = lock(&self.sessions).clone();
        let headers = snapshot
            .iter()
            .map(|(id, data)| (id.clone(), replay::header_only(id, data)));
        Ok(newest_for_cwd(headers, cwd))
    }

    fn list(&self, limit: usize) -> Result<Vec<SessionSummary>, SessionError> {
        let snapshot = lock(&self.sessions).clone();
        let mut summaries = Vec::new();
        for (id, data) in &snapshot {
            match replay::summarize(id, data) {
                Ok(summary) => summaries.push(summary),
                Err(err) => tracing::warn!(session = %id, "skipped an unreadable session: {err}"),
            }
        }
        summaries.sort_by(|a, b| newest_key(&b.meta).cmp(&newest_key(&a.meta)));
        summaries.truncate(limit);
        Ok(summaries)
    }
}

/// Appends to one in-memory session.
struct MemorySessionLog {
    id: String,
    sessions: Arc<Mutex<Sessions>>,
}

impl SessionLog for MemorySessionLog {
    fn append(&mut self, record: &SessionRecord) -> Result<(), SessionError> {
        let line = encode_line(&self.id, record)?;
        let mut sessions = lock(&self.sessions);
        let data = sessions
            .get_mut(&self.id)
            .ok_or_else(|| SessionError::NotFound {
                id: self.id.clone(),
            })?;
        // A cut-off last line: start the next record on a line of its own.
        if !data.is_empty() && !data.ends_with(b"\n") {
            data.push(b'\n');
        }
        data.extend_from_slice(&line);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SessionError> {
        Ok(())
    }

    fn id(&self) -> &str {
        &self.id
    }
}
