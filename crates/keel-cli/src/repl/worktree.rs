//! `/diff`: the work tree compared with what it was when the session started.
//!
//! keel snapshots the workspace before every call that may change files (see
//! [`keel::snapshot::ShadowSnapshots`]); the session's first snapshot is then where it started,
//! and the diff is made in the snapshot store (so it works outside git repositories too).
//! Before the session changed anything, `HEAD` is the baseline.

use std::path::Path;

use git2::{DiffFormat, DiffOptions, Oid, Repository};
use keel::snapshot::{ShadowSnapshots, Snapshots};

use super::diff::patch_lines;
use super::view::Style;

/// The most lines `/diff` prints.
const MAX_LINES: usize = 2000;

/// Where a session started: the tree to compare the work tree with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Baseline {
    /// The tree; `None` when the branch had no commit and the tree no file.
    tree: Option<Oid>,
    /// What it is, for the user: `HEAD 1a2b3c4` or `snapshot <id>`.
    pub label: String,
    /// Whether the tree is in the snapshot store (else in the user's repository).
    in_snapshots: bool,
}

/// The first snapshot session `session_id` took, if it took one.
pub(super) fn first_snapshot(
    snapshots: &ShadowSnapshots,
    session_id: &str,
) -> Result<Option<Baseline>, String> {
    let listed = snapshots
        .list()
        .map_err(|err| format!("cannot read the snapshots: {err}"))?;
    let Some(first) = listed.iter().find(|s| s.point.session_id == session_id) else {
        return Ok(None);
    };
    let tree = snapshots
        .files_tree(&first.id.0)
        .map_err(|err| format!("cannot read snapshot {}: {err}", first.id))?;
    Ok(Some(Baseline {
        tree: Some(tree),
        label: format!(
            "snapshot {}",
            first.id.0.chars().take(12).collect::<String>()
        ),
        in_snapshots: true,
    }))
}

/// `HEAD` of the repository holding `cwd`: where a session that changed nothing yet started.
/// The error, one line, says why there is none (not a repository, or libgit2 failed).
pub(super) fn baseline(cwd: &Path) -> Result<Baseline, String> {
    let repo = Repository::discover(cwd).map_err(|_| {
        format!(
            "{} is not in a git repository and this session changed nothing yet, so there is \
             nothing to compare with",
            cwd.display()
        )
    })?;
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
                in_snapshots: false,
            })
        }
        Err(err) if err.code() == git2::ErrorCode::UnbornBranch => Ok(Baseline {
            tree: None,
            label: "an empty repository".to_owned(),
            in_snapshots: false,
        }),
        Err(err) => Err(format!("reading HEAD: {}", err.message())),
    }
}

/// The patch from `baseline` to the work tree (untracked files included), as coloured lines;
/// empty when nothing changed.
pub(super) fn diff_lines(
    style: Style,
    cwd: &Path,
    baseline: &Baseline,
    snapshots: Option<&ShadowSnapshots>,
) -> Result<Vec<String>, String> {
    let repo = match (baseline.in_snapshots, snapshots) {
        (true, Some(snapshots)) => snapshots
            .repository()
            .map_err(|err| format!("cannot open the snapshot store: {err}"))?,
        _ => Repository::discover(cwd).map_err(|err| {
            format!(
                "cannot open the git repository at {}: {}",
                cwd.display(),
                err.message()
            )
        })?,
    };
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
    // The snapshot store has no index to stage through: the tree against the files.
    let diff = if baseline.in_snapshots {
        repo.diff_tree_to_workdir(tree.as_ref(), Some(&mut options))
    } else {
        repo.diff_tree_to_workdir_with_index(tree.as_ref(), Some(&mut options))
    };
    let diff = diff.map_err(|err| format!("comparing the work tree: {}", err.message()))?;
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
