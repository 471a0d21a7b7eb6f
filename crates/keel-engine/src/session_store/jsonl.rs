//! The file store: one JSON Lines file per session in a directory.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::{
    LoadedSession, SessionError, SessionLog, SessionMeta, SessionRecord, SessionStore,
    SessionSummary, encode_line, id::validate_id, newest_for_cwd, newest_key, replay,
};

/// Sessions stored as `<dir>/<id>.jsonl` files.
///
/// Files are created with mode `0600`, the directory (when missing) with `0700`. See the
/// [module documentation](super) for the format and how damage is handled.
#[derive(Debug, Clone)]
pub struct JsonlSessionStore {
    dir: PathBuf,
}

impl JsonlSessionStore {
    /// A store keeping its files in `dir` (created on the first [`SessionStore::create`]).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory holding the session files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of session `id`, after checking the id (see [`validate_id`]).
    pub fn path_of(&self, id: &str) -> Result<PathBuf, SessionError> {
        validate_id(id)?;
        Ok(self.dir.join(format!("{id}.jsonl")))
    }

    /// Reads a session file whole, mapping a missing file to `NotFound`.
    fn read(&self, id: &str) -> Result<(PathBuf, Vec<u8>), SessionError> {
        let path = self.path_of(id)?;
        match fs::read(&path) {
            Ok(data) => Ok((path, data)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                Err(SessionError::NotFound { id: id.to_owned() })
            }
            Err(err) => Err(SessionError::io(path, err)),
        }
    }

    /// The ids of every `*.jsonl` file with a valid id; none if the directory is missing.
    fn ids(&self) -> Result<Vec<String>, SessionError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(SessionError::io(&self.dir, err)),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|err| SessionError::io(&self.dir, err))?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                continue;
            };
            if validate_id(id).is_ok() && entry.file_type().is_ok_and(|t| t.is_file()) {
                ids.push(id.to_owned());
            }
        }
        Ok(ids)
    }

    /// The header of session `id`, reading only its first line.
    fn read_header(&self, id: &str) -> Result<SessionMeta, SessionError> {
        let path = self.path_of(id)?;
        let file = File::open(&path).map_err(|err| SessionError::io(&path, err))?;
        let mut first = Vec::new();
        BufReader::new(file)
            .read_until(b'\n', &mut first)
            .map_err(|err| SessionError::io(&path, err))?;
        replay::header_only(id, &first)
    }
}

impl SessionStore for JsonlSessionStore {
    fn create(&self, meta: &SessionMeta) -> Result<Box<dyn SessionLog>, SessionError> {
        let path = self.path_of(&meta.id)?;
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|err| SessionError::io(&self.dir, err))?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|err| match err.kind() {
                io::ErrorKind::AlreadyExists => SessionError::AlreadyExists {
                    id: meta.id.clone(),
                },
                _ => SessionError::io(&path, err),
            })?;
        let mut log = JsonlSessionLog::new(meta.id.clone(), path, file, false);
        // Not synced here: the first record worth keeping (the prompt, before any request)
        // is synced with it, so a new session costs one `fdatasync`, not two.
        log.append(&SessionRecord::Header(meta.clone()))?;
        Ok(Box::new(log))
    }

    fn load(&self, id: &str) -> Result<LoadedSession, SessionError> {
        let (_, data) = self.read(id)?;
        replay::replay(id, &data)
    }

    fn open(&self, id: &str) -> Result<(LoadedSession, Box<dyn SessionLog>), SessionError> {
        let (path, data) = self.read(id)?;
        let loaded = replay::replay(id, &data)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|err| SessionError::io(&path, err))?;
        // A cut-off last line: start the next record on a line of its own.
        let needs_newline = !data.is_empty() && !data.ends_with(b"\n");
        let log = JsonlSessionLog::new(id.to_owned(), path, file, needs_newline);
        Ok((loaded, Box::new(log)))
    }

    fn latest_for_cwd(&self, cwd: &Path) -> Result<Option<SessionMeta>, SessionError> {
        let headers = self.ids()?.into_iter().map(|id| {
            let header = self.read_header(&id);
            (id, header)
        });
        Ok(newest_for_cwd(headers, cwd))
    }

    fn list(&self, limit: usize) -> Result<Vec<SessionSummary>, SessionError> {
        let mut summaries = Vec::new();
        for id in self.ids()? {
            let summary = self
                .read(&id)
                .and_then(|(_, data)| replay::summarize(&id, &data));
            match summary {
                Ok(summary) => summaries.push(summary),
                Err(err) => tracing::warn!(session = %id, "skipped an unreadable session: {err}"),
            }
        }
        summaries.sort_by(|a, b| newest_key(&b.meta).cmp(&newest_key(&a.meta)));
        summaries.truncate(limit);
        Ok(summaries)
    }
}

/// Appends to one session file: each record with one `write(2)`, nothing buffered in the
/// process; `flush` (and drop) call `fdatasync`.
struct JsonlSessionLog {
    id: String,
    path: PathBuf,
    file: File,
    /// The file may end in a partial line (cut off before, or a failed write): write a
    /// newline before the next record.
    needs_newline: bool,
}

impl JsonlSessionLog {
    fn new(id: String, path: PathBuf, file: File, needs_newline: bool) -> Self {
        Self {
            id,
            path,
            file,
            needs_newline,
        }
    }
}

impl SessionLog for JsonlSessionLog {
    fn append(&mut self, record: &SessionRecord) -> Result<(), SessionError> {
        let line = encode_line(&self.id, record)?;
        let bytes = if self.needs_newline {
            let mut bytes = Vec::with_capacity(line.len() + 1);
            bytes.push(b'\n');
            bytes.extend_from_slice(&line);
            bytes
        } else {
            line
        };
        // One buffer, one write: the line reaches the file whole or (killed mid-way) as a
        // cut-off last line that replay skips.
        self.file.write_all(&bytes).map_err(|err| {
            self.needs_newline = true;
            SessionError::io(&self.path, err)
        })?;
        self.needs_newline = false;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), SessionError> {
        self.file
            .sync_data()
            .map_err(|err| SessionError::io(&self.path, err))
    }

    fn id(&self) -> &str {
        &self.id
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

impl Drop for JsonlSessionLog {
    fn drop(&mut self) {
        if let Err(err) = self.flush() {
            tracing::warn!(session = %self.id, "could not sync the session on close: {err}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_of_stays_in_the_directory() {
        let store = JsonlSessionStore::new("/s");
        assert_eq!(
            store.path_of("abc").ok(),
            Some(PathBuf::from("/s/abc.jsonl"))
        );
        assert!(store.path_of("../../etc/passwd").is_err());
    }
}
