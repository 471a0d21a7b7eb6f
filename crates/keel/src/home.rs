//! keel's home directory: config, sessions, snapshots, background tasks, logs.

use std::path::{Path, PathBuf};

use crate::BuildError;

/// keel's home: `$KEEL_HOME`, else `~/.keel`. The one place keel reads `KEEL_HOME`.
///
/// ```
/// let home = keel::home_dir_from(Some("/srv/keel".as_ref()), Some("/home/ana".as_ref()));
/// assert_eq!(home.unwrap(), std::path::Path::new("/srv/keel"));
/// let home = keel::home_dir_from(None, Some("/home/ana".as_ref()));
/// assert_eq!(home.unwrap(), std::path::Path::new("/home/ana/.keel"));
/// ```
pub fn home_dir() -> Result<PathBuf, BuildError> {
    home_dir_from(
        std::env::var_os("KEEL_HOME").as_deref().map(Path::new),
        std::env::var_os("HOME").as_deref().map(Path::new),
    )
}

/// [`home_dir`] from the values of `KEEL_HOME` and `HOME` (empty ones count as unset).
pub fn home_dir_from(keel_home: Option<&Path>, home: Option<&Path>) -> Result<PathBuf, BuildError> {
    fn set(value: Option<&Path>) -> Option<&Path> {
        value.filter(|v| !v.as_os_str().is_empty())
    }
    if let Some(dir) = set(keel_home) {
        return Ok(dir.to_path_buf());
    }
    set(home)
        .map(|home| home.join(".keel"))
        .ok_or(BuildError::NoHome)
}

/// Where keel keeps the parts of its home (`Home(&home_dir()?)`): the one layout the builder
/// and the `keel` commands share.
#[derive(Debug, Clone, Copy)]
pub struct Home<'a>(pub &'a Path);

impl Home<'_> {
    /// Saved sessions (`sessions/`).
    pub fn sessions(&self) -> PathBuf {
        self.0.join("sessions")
    }
    /// `code` sessions' logs (`logs/`).
    pub fn logs(&self) -> PathBuf {
        self.0.join("logs")
    }
    /// The user's skills (`skills/`).
    pub fn skills(&self) -> PathBuf {
        self.0.join("skills")
    }
    /// The workspaces' snapshot stores (`snapshots/`).
    pub fn snapshots(&self) -> PathBuf {
        self.0.join("snapshots")
    }
    /// The background-task store (`tasks.db`).
    pub fn tasks_db(&self) -> PathBuf {
        self.0.join("tasks.db")
    }
    /// The user's own memory file for every project (`AGENTS.md`), loaded into the system
    /// prompt after `~/.claude/CLAUDE.md` ([`user_memory_files`]).
    pub fn memory(&self) -> PathBuf {
        self.0.join("AGENTS.md")
    }
    /// The background tasks' logs (`tasks/`).
    pub fn task_logs(&self) -> PathBuf {
        self.0.join("tasks")
    }
}

/// The user-level memory files, loaded before the project's, in this order:
/// `<user_home>/.claude/CLAUDE.md` (Claude Code's, when the home is known) and
/// `<keel_home>/AGENTS.md`.
///
/// ```
/// use std::path::Path;
/// let files = keel::user_memory_files(Path::new("/home/ana/.keel"), Some(Path::new("/home/ana")));
/// assert_eq!(files, [Path::new("/home/ana/.claude/CLAUDE.md"), Path::new("/home/ana/.keel/AGENTS.md")]);
/// ```
pub fn user_memory_files(keel_home: &Path, user_home: Option<&Path>) -> Vec<PathBuf> {
    user_home
        .map(|home| home.join(".claude").join("CLAUDE.md"))
        .into_iter()
        .chain([Home(keel_home).memory()])
        .collect()
}

/// The user's home directory: `$HOME` when set and not empty.
pub fn user_home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from)
}
