//! Git helpers for the CLI: undoing the last commit keel made in a session. (Snapshots of the
//! work tree before each change live in keel-snapshot, outside the user's repository.)
//!
//! # Which commits are keel's
//!
//! The [`git_commit`](crate::tools::GitCommit) tool ends every message with a trailer naming
//! the session that made it, `Keel-Session: <session id>` (a trailer of that name in the
//! model's own message is removed first, so one session cannot pass its commit off as
//! another's). [`GitSession::undo_last_commit`] resets only a `HEAD` carrying its own
//! session's trailer. Nothing is kept in memory: the rule holds across restarts of the
//! process, a resumed session can still undo, and the trailer shows in `git log` which
//! commits an agent made.
//!
//! Everything here blocks on the file system: from async code, call it in
//! `tokio::task::spawn_blocking`.

use std::path::{Path, PathBuf};

use git2::{
    ErrorCode, Index, IndexAddOption, Oid, Repository, RepositoryState, ResetType, Signature,
};

/// The trailer naming the keel session that made a commit.
pub const SESSION_TRAILER: &str = "Keel-Session";

/// The identity commits are made with when the repository configures none.
pub const FALLBACK_NAME: &str = "keel";
/// The e-mail of the fallback identity.
pub const FALLBACK_EMAIL: &str = "keel@localhost";

/// Why a git helper failed. Every message says what happened and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// Neither the root nor any directory above it is a git repository.
    #[error(
        "not a git repository: {} (nor any of its parent directories); run `git init` there \
         first, or work without the git tools",
        .root.display()
    )]
    NotARepository {
        /// The directory searched from.
        root: PathBuf,
    },
    /// The repository has no work tree.
    #[error(
        "{} is a bare repository: it has no work tree to show or commit; open a checkout of it \
         instead",
        .path.display()
    )]
    Bare {
        /// The repository's git directory.
        path: PathBuf,
    },
    /// A session id that cannot name a git reference or a trailer.
    #[error("invalid session id {id:?}: {reason}")]
    InvalidSessionId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The branch has no commits yet.
    #[error("the branch has no commits yet, so there is no commit to undo")]
    NoCommits,
    /// `HEAD` was not made by this session's `git_commit`.
    #[error("refusing to undo {commit} ({summary:?}): {reason}; undo it yourself if you mean to")]
    NotThisSession {
        /// The short id of `HEAD`.
        commit: String,
        /// Its summary line.
        summary: String,
        /// Whose commit it is instead.
        reason: String,
    },
    /// `HEAD` is the first commit of its history.
    #[error(
        "refusing to undo {commit} ({summary:?}): it is the first commit of the repository, so \
         there is no parent commit to move back to"
    )]
    RootCommit {
        /// The short id of `HEAD`.
        commit: String,
        /// Its summary line.
        summary: String,
    },
    /// A merge, rebase or similar operation is under way.
    #[error(
        "a {state} is in progress in this repository; finish it (`git {state} --continue`) or \
         abort it (`git {state} --abort`) from the shell first"
    )]
    InProgress {
        /// Which operation: `merge`, `rebase`, `cherry-pick`, `revert` or `am`.
        state: &'static str,
    },
    /// libgit2 failed.
    #[error("{action}: {source}")]
    Git {
        /// What was being done, e.g. `reading the index`.
        action: String,
        /// The libgit2 error.
        #[source]
        source: git2::Error,
    },
}

impl GitError {
    pub(crate) fn git(action: impl Into<String>, source: git2::Error) -> Self {
        Self::Git {
            action: action.into(),
            source,
        }
    }
}

impl From<GitError> for keel_tool::ToolError {
    fn from(err: GitError) -> Self {
        keel_tool::ToolError::Failed(err.to_string())
    }
}

/// Adds `action` to a libgit2 error.
pub(crate) trait Context<T> {
    fn context(self, action: &str) -> Result<T, GitError>;
}

impl<T> Context<T> for Result<T, git2::Error> {
    fn context(self, action: &str) -> Result<T, GitError> {
        self.map_err(|source| GitError::git(action, source))
    }
}

/// Opens the repository containing `root` (or above it), refusing bare ones.
pub(crate) fn open_repo(root: &Path) -> Result<Repository, GitError> {
    let repo = Repository::discover(root).map_err(|err| match err.code() {
        ErrorCode::NotFound => GitError::NotARepository {
            root: root.to_path_buf(),
        },
        _ => GitError::git(format!("opening the repository at {}", root.display()), err),
    })?;
    if repo.is_bare() {
        return Err(GitError::Bare {
            path: repo.path().to_path_buf(),
        });
    }
    Ok(repo)
}

/// The work tree of `repo`, with symlinks resolved (as [`crate::PathSandbox`] resolves its
/// root).
pub(crate) fn workdir(repo: &Repository) -> Result<PathBuf, GitError> {
    let Some(dir) = repo.workdir() else {
        return Err(GitError::Bare {
            path: repo.path().to_path_buf(),
        });
    };
    Ok(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()))
}

/// Refuses to go on while a merge, rebase, cherry-pick, revert or `git am` is under way.
pub(crate) fn ensure_idle(repo: &Repository) -> Result<(), GitError> {
    let state = match repo.state() {
        RepositoryState::Clean | RepositoryState::Bisect => return Ok(()),
        RepositoryState::Merge => "merge",
        RepositoryState::Revert | RepositoryState::RevertSequence => "revert",
        RepositoryState::CherryPick | RepositoryState::CherryPickSequence => "cherry-pick",
        RepositoryState::Rebase
        | RepositoryState::RebaseInteractive
        | RepositoryState::RebaseMerge => "rebase",
        RepositoryState::ApplyMailbox | RepositoryState::ApplyMailboxOrRebase => "am",
    };
    Err(GitError::InProgress { state })
}

/// Stages everything in `index` the way `git add -A` does: modified and new files (ignored
/// ones left out), and deletions. Writes blobs, never the index file. Untracked git
/// repositories inside the work tree are left out (libgit2 cannot add them, and `git add -A`
/// would only record a link to their commit); their paths are returned.
pub(crate) fn stage_all(index: &mut Index) -> Result<Vec<String>, GitError> {
    // Every path. (With no pathspec at all libgit2 hands the callback a null pattern.)
    let everything = || ["*"];
    let mut embedded = Vec::new();
    let mut skip_repositories = |path: &Path, _pattern: &[u8]| -> i32 {
        // Untracked directories are walked into; one reported whole is a repository.
        let path = path.to_string_lossy();
        if path.ends_with('/') {
            embedded.push(path.into_owned());
            1
        } else {
            0
        }
    };
    index
        .add_all(
            everything(),
            IndexAddOption::DEFAULT,
            Some(&mut skip_repositories),
        )
        .context("staging new and modified files")?;
    index
        .update_all(everything(), None)
        .context("staging deleted files")?;
    if !embedded.is_empty() {
        tracing::warn!(?embedded, "left out git repositories inside the work tree");
    }
    Ok(embedded)
}

/// What a `git_commit` would do to one file, were it made now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StagedChange {
    /// A file git does not track yet: `git add -A` sweeps it in.
    Untracked,
    /// A new file already staged.
    Added,
    /// A tracked file whose content, mode or type changed.
    Modified,
    /// A tracked file that is gone from the work tree (or staged for deletion).
    Deleted,
}

/// What a `git_commit` would stage and commit now: the work tree (ignored files left out)
/// against `HEAD`, as `git_commit` stages it (`git add -A`). Read-only: nothing is hashed
/// into the object database and the index is not written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommitPreview {
    /// Each file, by its path in the work tree ('/'-separated), in git's order.
    pub files: Vec<(String, StagedChange)>,
    /// Untracked git repositories inside the work tree, which the commit leaves out.
    pub left_out: Vec<String>,
}

/// What `git_commit` would stage in the repository holding `root`, were it called now.
pub fn commit_preview(root: &Path) -> Result<CommitPreview, GitError> {
    let repo = open_repo(root)?;
    let head_tree = match head_commit(&repo)? {
        Some(commit) => Some(commit.tree().context("reading the HEAD tree")?),
        None => None,
    };
    let mut options = git2::DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_typechange(true);
    let diff = repo
        .diff_tree_to_workdir_with_index(head_tree.as_ref(), Some(&mut options))
        .context("comparing the work tree with HEAD")?;
    let mut preview = CommitPreview::default();
    for delta in diff.deltas() {
        let file = match delta.status() {
            git2::Delta::Deleted => delta.old_file(),
            _ => delta.new_file(),
        };
        let Some(path) = file.path() else { continue };
        let path = path.to_string_lossy().into_owned();
        let change = match delta.status() {
            git2::Delta::Untracked if path.ends_with('/') => {
                preview.left_out.push(path);
                continue;
            }
            git2::Delta::Untracked => StagedChange::Untracked,
            git2::Delta::Added => StagedChange::Added,
            git2::Delta::Deleted => StagedChange::Deleted,
            git2::Delta::Unmodified | git2::Delta::Ignored => continue,
            _ => StagedChange::Modified,
        };
        preview.files.push((path, change));
    }
    Ok(preview)
}

/// The identity to commit as: the repository's configured one, else keel's. The flag says
/// whether the fallback was used.
pub(crate) fn signature(repo: &Repository) -> Result<(Signature<'static>, bool), GitError> {
    match repo.signature() {
        Ok(signature) => Ok((signature, false)),
        Err(err) => {
            tracing::debug!(error = %err, "no usable git identity; committing as keel");
            let signature = Signature::now(FALLBACK_NAME, FALLBACK_EMAIL)
                .context("making the fallback identity")?;
            Ok((signature, true))
        }
    }
}

/// Why `id` cannot be a session id, if it cannot.
pub(crate) fn session_id_problem(id: &str) -> Option<String> {
    if id.is_empty() {
        return Some("it is empty".to_owned());
    }
    if id.contains('/') {
        return Some("it contains '/'".to_owned());
    }
    if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("it contains whitespace or control characters".to_owned());
    }
    if !git2::Reference::is_valid_name(&format!("refs/keel/{id}/1")) {
        return Some("it cannot be part of a git reference name".to_owned());
    }
    None
}

/// The session named by the last `Keel-Session` trailer of `message`.
pub(crate) fn message_session(message: &str) -> Option<String> {
    let trailers = git2::message_trailers_strs(message).ok()?;
    trailers
        .iter()
        .filter(|(key, _)| key.eq_ignore_ascii_case(SESSION_TRAILER))
        .map(|(_, value)| value.trim().to_owned())
        .next_back()
}

/// `message` without any line that looks like a session trailer.
pub(crate) fn strip_session_trailers(message: &str) -> String {
    message
        .lines()
        .filter(|line| {
            let lower = line.trim_start().to_ascii_lowercase();
            !lower.starts_with(&format!("{}:", SESSION_TRAILER.to_ascii_lowercase()))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first seven hex digits of `oid`, or as many as make it unique.
pub(crate) fn short_id(repo: &Repository, oid: Oid) -> String {
    repo.find_object(oid, None)
        .and_then(|object| object.short_id())
        .ok()
        .and_then(|buf| buf.as_str().ok().map(str::to_owned))
        .unwrap_or_else(|| oid.to_string().chars().take(7).collect())
}

/// What [`GitSession::undo_last_commit`] undid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoneCommit {
    /// The commit taken off the branch (hex). It stays in the object database and the reflog.
    pub commit: String,
    /// Its short id.
    pub short_id: String,
    /// Its summary line.
    pub summary: String,
    /// The new `HEAD`: the commit's parent (hex).
    pub head: String,
}

/// The git side of one keel session in one workspace: undoing the commits this session
/// made. Cheap to create; each call opens the repository afresh (found from the
/// root upwards), so it may be used from any thread.
///
/// ```
/// use keel_sandbox::git::{GitError, GitSession};
///
/// let dir = tempfile::tempdir()?;
/// let session = GitSession::new(dir.path(), "s-1")?;
/// let err = session.undo_last_commit().unwrap_err();
/// assert!(matches!(err, GitError::NotARepository { .. }));
/// assert!(err.to_string().starts_with("not a git repository: "));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct GitSession {
    root: PathBuf,
    session_id: String,
}

impl GitSession {
    /// The session `session_id` working in `root` (the workspace root, or any directory inside
    /// the repository). The id names references and trailers, so it must be non-empty, without
    /// `/`, whitespace or control characters, and valid in a git reference name.
    pub fn new(root: impl Into<PathBuf>, session_id: impl Into<String>) -> Result<Self, GitError> {
        let session_id = session_id.into();
        if let Some(reason) = session_id_problem(&session_id) {
            return Err(GitError::InvalidSessionId {
                id: session_id,
                reason,
            });
        }
        Ok(Self {
            root: root.into(),
            session_id,
        })
    }

    /// The directory the repository is found from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Moves the current branch back by one commit, keeping that commit's changes staged
    /// (`git reset --soft HEAD~1`), but only if `HEAD` was made by this session's
    /// `git_commit` (it carries this session's `Keel-Session` trailer). Refuses, saying why,
    /// when `HEAD` was made by someone else or another session, when it has no parent, when the
    /// branch has no commits, and while a merge or rebase is in progress.
    pub fn undo_last_commit(&self) -> Result<UndoneCommit, GitError> {
        let repo = open_repo(&self.root)?;
        ensure_idle(&repo)?;
        let Some(commit) = head_commit(&repo)? else {
            return Err(GitError::NoCommits);
        };
        let short = short_id(&repo, commit.id());
        let summary =
            String::from_utf8_lossy(commit.summary_bytes().unwrap_or_default()).into_owned();
        let message = String::from_utf8_lossy(commit.message_bytes()).into_owned();
        match message_session(&message) {
            Some(session) if session == self.session_id => {}
            Some(session) => {
                return Err(GitError::NotThisSession {
                    commit: short,
                    summary,
                    reason: format!(
                        "it was made by another keel session ({session}), not this one ({})",
                        self.session_id
                    ),
                });
            }
            None => {
                return Err(GitError::NotThisSession {
                    commit: short,
                    summary,
                    reason: "it was not made by keel (it has no Keel-Session trailer)".to_owned(),
                });
            }
        }
        let Ok(parent) = commit.parent(0) else {
            return Err(GitError::RootCommit {
                commit: short,
                summary,
            });
        };
        repo.reset(parent.as_object(), ResetType::Soft, None)
            .context("moving HEAD back to the parent commit")?;
        tracing::info!(commit = %commit.id(), head = %parent.id(), "undid the last keel commit");
        Ok(UndoneCommit {
            commit: commit.id().to_string(),
            short_id: short,
            summary,
            head: parent.id().to_string(),
        })
    }
}

/// The commit `HEAD` points at; `None` on an unborn branch.
pub(crate) fn head_commit(repo: &Repository) -> Result<Option<git2::Commit<'_>>, GitError> {
    match repo.head() {
        Ok(head) => head
            .peel_to_commit()
            .map(Some)
            .context("reading the HEAD commit"),
        Err(err) if matches!(err.code(), ErrorCode::UnbornBranch | ErrorCode::NotFound) => Ok(None),
        Err(err) => Err(GitError::git("reading HEAD", err)),
    }
}
