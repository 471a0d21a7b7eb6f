//! `/diff`: the work tree compared with what it was when the session started.
//!
//! At the start the engine records a checkpoint of a dirty work tree (see
//! [`keel_sandbox::GitSession::checkpoint`]); the session's first checkpoint is then where it
//! started. Without one the tree was clean, so `HEAD` was.

use std::path::Path;

use git2::{DiffFormat, DiffOptions, Oid, Repository};
use keel_sandbox::GitSession;

use super::diff::patch_lines;
use super::view::Style;

/// The most lines `/diff` prints.
const MAX_LINES: usize = 2000;

/// Where a session started: the tree to compare the work tree with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    /// The tree; `None` when the branch had no commit and the tree no file.
    tree: Option<Oid>,
    /// What it is, for the user: `HEAD 1a2b3c4` or `checkpoint <id>`.
    pub label: String,
}

/// Where session `session_id` started in the repository holding `cwd`. The error, one line,
/// says why there is none (not a repository, or libgit2 failed).
pub fn baseline(cwd: &Path, session_id: &str) -> Result<Baseline, String> {
    let repo = Repository::discover(cwd).map_err(|_| {
        format!(
            "{} is not in a git repository, so there is nothing to compare with",
            cwd.display()
        )
    })?;
    let checkpoints = GitSession::new(cwd, session_id)
        .and_then(|git| git.checkpoints())
        .map_err(|err| format!("cannot read this session's checkpoints: {err}"))?;
    if let Some(first) = checkpoints.first() {
        let tree = Oid::from_str(&first.tree)
            .map_err(|err| format!("checkpoint {}: {}", first.id, err.message()))?;
        return Ok(Baseline {
            tree: Some(tree),
            label: format!("checkpoint {}", first.id),
        });
    }
    match repo.head() {
        Ok(head) => {
            let commit = head
                .peel_to_commit()
                .map_err(|err| format!("reading HEAD: {}", err.message()))?;
            let short = commit
                .as_object()
                .short_id()
                .ok()
                .and_then(|buf| buf.as_str().map(str::to_owned).ok())
                .unwrap_or_else(|| commit.id().to_string());
            Ok(Baseline {
                tree: Some(commit.tree_id()),
                label: format!("HEAD {short}"),
            })
        }
        Err(err) if err.code() == git2::ErrorCode::UnbornBranch => Ok(Baseline {
            tree: None,
            label: "an empty repository".to_owned(),
        }),
        Err(err) => Err(format!("reading HEAD: {}", err.message())),
    }
}

/// The patch from `baseline` to the work tree (untracked files included), as coloured lines;
/// empty when nothing changed.
pub fn diff_lines(style: Style, cwd: &Path, baseline: &Baseline) -> Result<Vec<String>, String> {
    let repo = Repository::discover(cwd).map_err(|err| {
        format!(
            "cannot open the git repository at {}: {}",
            cwd.display(),
            err.message()
        )
    })?;
    let tree = match baseline.tree {
        Some(id) => Some(
            repo.find_tree(id)
                .map_err(|err| format!("{}: {}", baseline.label, err.message()))?,
        ),
        None => None,
    };
    let mut options = DiffOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true)
        .include_typechange(true);
    let diff = repo
        .diff_tree_to_workdir_with_index(tree.as_ref(), Some(&mut options))
        .map_err(|err| format!("comparing the work tree: {}", err.message()))?;
    let mut lines = Vec::new();
    let mut hidden = 0usize;
    diff.print(DiffFormat::Patch, |_delta, _hunk, line| {
        let content = String::from_utf8_lossy(line.content());
        for painted in patch_lines(style, line.origin(), &content) {
            if lines.len() < MAX_LINES {
                lines.push(painted);
            } else {
                hidden += 1;
            }
        }
        true
    })
    .map_err(|err| format!("printing the diff: {}", err.message()))?;
    if hidden > 0 {
        lines.push(style.dim(&format!("… {hidden} more lines not shown")));
    }
    Ok(lines)
}
