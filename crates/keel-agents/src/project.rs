//! The project a session works in: its root and the context its system prompt tells the
//! model (instruction files, date and the repository's git state, read with libgit2).

use std::path::{Path, PathBuf};

use keel_engine::prompt::RECENT_COMMITS;
use keel_engine::{GitSummary, ProjectContext, gather_context};

/// The project a session working in `cwd` belongs to: the work tree of the git repository
/// containing `cwd`, else `cwd` itself. This is the `root` [`project_context`] takes.
pub fn project_root(cwd: &Path) -> PathBuf {
    keel_sandbox::work_tree_root(cwd).unwrap_or_else(|| cwd.to_path_buf())
}

/// The engine's [`gather_context`] (instruction files, date) with the git state of the
/// repository containing `root` (branch, HEAD, status counts, the last
/// [`RECENT_COMMITS`] subjects), `None` outside one. Never fails: what cannot be read is left
/// out.
pub fn project_context(root: &Path, cwd: &Path) -> ProjectContext {
    ProjectContext {
        git: keel_sandbox::git_summary(root, RECENT_COMMITS).map(|git| GitSummary {
            branch: git.branch,
            head: git.head,
            status: git.status,
            recent_commits: git.recent_commits,
        }),
        ..gather_context(root, cwd)
    }
}
