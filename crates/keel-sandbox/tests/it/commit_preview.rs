//! `commit_preview` lists exactly what `git_commit` then commits, untracked files marked, and
//! writes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::tools::GitCommit;
use keel_sandbox::{PathSandbox, StagedChange, commit_preview};
use keel_test_support::git::TempRepo;
use keel_tool::{ToolContext, ToolRegistry};
use serde_json::json;

/// The paths the last commit changed, sorted.
fn committed_paths(repo: &TempRepo) -> Vec<String> {
    let git = repo.repo();
    let head = git.head().unwrap().peel_to_commit().unwrap();
    let parent = head.parent(0).ok().map(|p| p.tree().unwrap());
    let diff = git
        .diff_tree_to_tree(parent.as_ref(), Some(&head.tree().unwrap()), None)
        .unwrap();
    let mut paths: Vec<String> = diff
        .deltas()
        .map(|d| {
            let file = if d.status() == git2::Delta::Deleted {
                d.old_file()
            } else {
                d.new_file()
            };
            file.path().unwrap().to_string_lossy().into_owned()
        })
        .collect();
    paths.sort();
    paths
}

#[tokio::test]
async fn the_preview_is_what_git_commit_commits_and_writes_nothing() {
    let repo = TempRepo::with_every_change();
    repo.write("dist/d", "built\n");
    let index_before = repo.index_bytes();
    let objects = || walk(&repo.path().join(".git/objects"));
    let objects_before = objects();
    let preview = commit_preview(&repo.path()).unwrap();
    assert_eq!(
        repo.index_bytes(),
        index_before,
        "the preview wrote the index"
    );
    assert_eq!(objects(), objects_before, "the preview wrote objects");
    assert!(
        preview
            .files
            .contains(&("dist/d".to_owned(), StagedChange::Untracked)),
        "{preview:?}"
    );
    assert!(
        !preview.files.iter().any(|(p, _)| p == "build.log"),
        "{preview:?}"
    );

    let sandbox = Arc::new(PathSandbox::new(repo.path()).unwrap());
    let registry = ToolRegistry::new().with(GitCommit::new(sandbox)).unwrap();
    let input = json!({"message": "everything"});
    let output = registry
        .dispatch(
            ToolCall {
                id: "c",
                name: "git_commit",
                input: ToolInput::Valid(&input),
            },
            &ToolContext::new(repo.path(), "s"),
        )
        .await;
    assert!(!output.is_error, "{output:?}");
    let mut previewed: Vec<String> = preview.files.iter().map(|(p, _)| p.clone()).collect();
    previewed.sort();
    assert_eq!(previewed, committed_paths(&repo));
    // Nothing left to commit: the preview is empty.
    assert!(commit_preview(&repo.path()).unwrap().files.is_empty());
}

/// Every file under `dir`, sorted.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}
