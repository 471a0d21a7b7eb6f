//! The project a session works in: its root and the context its system prompt tells the
//! model (instruction files, date and, with the `git` feature, the repository's git state,
//! read with libgit2, never by running `git`).

use std::path::{Path, PathBuf};

#[cfg(feature = "git")]
use git2::{ErrorCode, Repository, RepositoryOpenFlags, Status, StatusOptions};
use keel_engine::GitSummary;
#[cfg(feature = "git")]
use keel_engine::prompt::RECENT_COMMITS;
use keel_engine::{MemorySources, ProjectContext, gather_context_from};

/// The project a session working in `cwd` belongs to: the nearest directory at or above
/// `cwd` holding a `.git` entry (a repository's work tree; a worktree's or submodule's `.git`
/// file counts), else `cwd` itself. The same directory keel-sandbox protects `.git` in
/// ([`keel_sandbox::repository_root`]). This is the `root` [`project_context`] takes.
pub fn project_root(cwd: &Path) -> PathBuf {
    keel_sandbox::repository_root(cwd).unwrap_or_else(|| cwd.to_path_buf())
}

/// [`project_context_from`] the project's own memory files ([`MemorySources::new`]: no
/// user-level files, no extra readable roots).
pub fn project_context(root: &Path, cwd: &Path) -> ProjectContext {
    project_context_from(&MemorySources::new(root, cwd))
}

/// The engine's [`gather_context_from`] (memory files, date) with the git state of the
/// repository containing `sources.root` (branch, HEAD, status counts, the last
/// `RECENT_COMMITS` subjects), `None` outside one. Without the `git` feature the state is not
/// read: a repository is said to be one whose state is unknown. Never fails: what cannot be
/// read is left out (the memory files skipped are in
/// [`ProjectContext::skipped_instructions`]).
pub fn project_context_from(sources: &MemorySources) -> ProjectContext {
    let root = sources.root.as_path();
    #[cfg(feature = "git")]
    let git = git_summary(root, RECENT_COMMITS);
    #[cfg(not(feature = "git"))]
    let git = keel_sandbox::repository_root(root).map(|_| GitSummary {
        status: UNREAD_STATE.to_owned(),
        ..GitSummary::default()
    });
    ProjectContext {
        git,
        ..gather_context_from(sources)
    }
}

/// The state of a repository keel was built without reading (no `git` feature).
#[cfg(not(feature = "git"))]
const UNREAD_STATE: &str = "state not read (keel was built without its `git` feature)";

#[cfg(feature = "git")]
/// The state of the repository containing `root` (branch, HEAD, status counts, the subjects
/// of the last `recent` commits), or `None` outside one. Never fails otherwise: what cannot
/// be read is left out and logged with `tracing::debug`.
fn git_summary(root: &Path, recent: usize) -> Option<GitSummary> {
    // `root` is usually where [`project_root`] found the `.git` entry: opened there first,
    // without a search upwards from it (a walk of stats on every start); any other directory is
    // searched from.
    let opened = Repository::open_ext(root, RepositoryOpenFlags::NO_SEARCH, [] as [&Path; 0])
        .or_else(|_| Repository::discover(root));
    let repo = match opened {
        Ok(repo) => repo,
        Err(error) => {
            tracing::debug!(root = %root.display(), %error, "not in a git repository");
            return None;
        }
    };
    let (branch, head) = match repo.head() {
        Ok(reference) => {
            let branch = if repo.head_detached().unwrap_or(false) {
                None
            } else {
                reference.shorthand().ok().map(str::to_owned)
            };
            let head = reference
                .peel_to_commit()
                .ok()
                .and_then(|commit| short_id(&repo, commit.id()));
            (branch, head)
        }
        Err(error) if error.code() == ErrorCode::UnbornBranch => (unborn_branch(&repo), None),
        Err(error) => {
            tracing::debug!(%error, "cannot read HEAD");
            (None, None)
        }
    };
    Some(GitSummary {
        branch,
        head: head.clone(),
        status: match tracked_files(&repo) {
            Some(tracked) if tracked > STATUS_MAX_TRACKED => {
                format!("status not read at start ({tracked} tracked files; git_status reads it)")
            }
            _ => status_summary(&repo),
        },
        recent_commits: if head.is_some() {
            recent_commits(&repo, recent)
        } else {
            Vec::new()
        },
    })
}

#[cfg(feature = "git")]
/// The branch an unborn HEAD names (`main` before the first commit).
fn unborn_branch(repo: &Repository) -> Option<String> {
    let head = repo.find_reference("HEAD").ok()?;
    let target = head.symbolic_target().ok()??;
    Some(
        target
            .strip_prefix("refs/heads/")
            .unwrap_or(target)
            .to_owned(),
    )
}

#[cfg(feature = "git")]
fn short_id(repo: &Repository, oid: git2::Oid) -> Option<String> {
    let object = repo.find_object(oid, None).ok()?;
    let short = object.short_id().ok()?;
    short.as_str().ok().map(str::to_owned)
}

#[cfg(feature = "git")]
/// `2 staged, 3 modified, 1 untracked, 1 conflicted` (zero counts left out), `clean`, or
/// `unknown` when the status cannot be read (a bare repository).
fn status_summary(repo: &Repository) -> String {
    let mut options = StatusOptions::new();
    options
        .include_untracked(true)
        // An untracked directory counts once, as `git status` shows it: nothing below it is
        // walked (an unignored node_modules would be walked whole).
        .recurse_untracked_dirs(false)
        .include_ignored(false)
        .exclude_submodules(true);
    let statuses = match repo.statuses(Some(&mut options)) {
        Ok(statuses) => statuses,
        Err(error) => {
            tracing::debug!(%error, "cannot read git status");
            return "unknown".to_owned();
        }
    };
    let staged_flags = Status::INDEX_NEW
        | Status::INDEX_MODIFIED
        | Status::INDEX_DELETED
        | Status::INDEX_RENAMED
        | Status::INDEX_TYPECHANGE;
    let modified_flags =
        Status::WT_MODIFIED | Status::WT_DELETED | Status::WT_RENAMED | Status::WT_TYPECHANGE;
    let (mut staged, mut modified, mut untracked, mut conflicted) = (0, 0, 0, 0);
    for entry in statuses.iter() {
        let status = entry.status();
        if status.contains(Status::CONFLICTED) {
            conflicted += 1;
            continue;
        }
        if status.intersects(staged_flags) {
            staged += 1;
        }
        if status.intersects(modified_flags) {
            modified += 1;
        }
        if status.contains(Status::WT_NEW) {
            untracked += 1;
        }
    }
    let parts: Vec<String> = [
        (staged, "staged"),
        (modified, "modified"),
        (untracked, "untracked"),
        (conflicted, "conflicted"),
    ]
    .into_iter()
    .filter(|(count, _)| *count > 0)
    .map(|(count, label)| format!("{count} {label}"))
    .collect();
    if parts.is_empty() {
        "clean".to_owned()
    } else {
        parts.join(", ")
    }
}

/// The most tracked files whose status a start reads. Reading it stats every tracked file and
/// diffs the index against HEAD: about 60 ms for 20,000 files here, while the rest of a start
/// takes about 4 ms. Above it the prompt says the status was not read, and the model asks
/// `git_status` when it needs it.
#[cfg(feature = "git")]
pub const STATUS_MAX_TRACKED: u32 = 2_000;

/// How many files the index tracks, from its header (`DIRC`, version, entry count), without
/// reading the rest; `None` when there is no index or it cannot be read.
#[cfg(feature = "git")]
fn tracked_files(repo: &Repository) -> Option<u32> {
    use std::io::Read;
    let mut header = [0u8; 12];
    std::fs::File::open(repo.path().join("index"))
        .and_then(|mut file| file.read_exact(&mut header))
        .ok()?;
    let count: [u8; 4] = header[8..12].try_into().ok()?;
    (header.starts_with(b"DIRC")).then(|| u32::from_be_bytes(count))
}

#[cfg(feature = "git")]
/// The subjects of the last `recent` commits reachable from HEAD, newest first.
fn recent_commits(repo: &Repository, recent: usize) -> Vec<String> {
    let mut walk = match repo.revwalk() {
        Ok(walk) => walk,
        Err(error) => {
            tracing::debug!(%error, "cannot walk the history");
            return Vec::new();
        }
    };
    if let Err(error) = walk.push_head() {
        tracing::debug!(%error, "cannot walk the history from HEAD");
        return Vec::new();
    }
    walk.filter_map(Result::ok)
        .filter_map(|oid| repo.find_commit(oid).ok())
        .map(|commit| commit.summary().ok().flatten().unwrap_or("").to_owned())
        .take(recent)
        .collect()
}
