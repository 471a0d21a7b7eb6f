//! The session git helpers: undoing this session's last commit, on real
//! temporary repositories. Commits are made through the `git_commit` tool, as in a session.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use git2::Status;
use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::PathSandbox;
use keel_sandbox::git::{GitError, GitSession};
use keel_sandbox::tools::GitCommit;
use keel_test_support::git::{TempRepo, isolate_config};
use keel_tool::{ToolContext, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

const SESSION: &str = "session-1";

/// Calls `name` (`git_commit`) in `root` as session `session`, through a registry.
async fn run_in(root: &std::path::Path, session: &str, name: &str, input: Value) -> ToolOutput {
    let sandbox = Arc::new(PathSandbox::new(root).unwrap());
    let registry = ToolRegistry::new().with(GitCommit::new(sandbox)).unwrap();
    let ctx = ToolContext::new(root, session);
    let call = ToolCall {
        id: "call_1",
        name,
        input: ToolInput::Valid(&input),
    };
    registry.dispatch(call, &ctx).await
}

async fn run(repo: &TempRepo, name: &str, input: Value) -> ToolOutput {
    run_in(&repo.path(), SESSION, name, input).await
}

#[tokio::test]
async fn undo_takes_back_this_sessions_commit_and_keeps_it_staged() {
    let repo = TempRepo::new();
    let before = repo.head();
    repo.write("a.txt", "a\n");
    repo.write("README.md", "# changed\n");
    let output = run(&repo, "git_commit", json!({"message": "Change things"})).await;
    assert!(!output.is_error, "{output:?}");
    let made = repo.head();
    assert_ne!(made, before);

    let undone = GitSession::new(repo.path(), SESSION)
        .unwrap()
        .undo_last_commit()
        .unwrap();
    assert_eq!(undone.commit, made.to_string());
    assert_eq!(undone.summary, "Change things");
    assert_eq!(undone.head, before.to_string());
    assert_eq!(repo.head(), before);
    assert_eq!(
        repo.status(),
        [
            ("README.md".to_owned(), Status::INDEX_MODIFIED),
            ("a.txt".to_owned(), Status::INDEX_NEW)
        ]
    );
    assert_eq!(repo.read("README.md"), "# changed\n");

    // The commit before is not keel's: refused.
    let err = GitSession::new(repo.path(), SESSION)
        .unwrap()
        .undo_last_commit()
        .unwrap_err();
    assert!(matches!(err, GitError::NotThisSession { .. }), "{err:?}");
    assert_eq!(
        repo.redact_commits(&err.to_string()),
        "refusing to undo <short> (\"initial commit\"): it was not made by keel (it has no \
         Keel-Session trailer); undo it yourself if you mean to"
    );
    assert_eq!(repo.head(), before);
}

#[tokio::test]
async fn undo_refuses_another_sessions_commit() {
    let repo = TempRepo::new();
    repo.write("a.txt", "a\n");
    let output = run_in(
        &repo.path(),
        "session-2",
        "git_commit",
        json!({"message": "Theirs"}),
    )
    .await;
    assert!(!output.is_error, "{output:?}");
    let head = repo.head();
    let err = GitSession::new(repo.path(), SESSION)
        .unwrap()
        .undo_last_commit()
        .unwrap_err();
    assert_eq!(
        repo.redact_commits(&err.to_string()),
        "refusing to undo <short> (\"Theirs\"): it was made by another keel session \
         (session-2), not this one (session-1); undo it yourself if you mean to"
    );
    assert_eq!(repo.head(), head);
    // A commit made by hand on top of keel's is refused too.
    repo.write("b.txt", "b\n");
    repo.commit("by hand");
    let session2 = GitSession::new(repo.path(), "session-2").unwrap();
    assert!(matches!(
        session2.undo_last_commit(),
        Err(GitError::NotThisSession { .. })
    ));
}

#[tokio::test]
async fn undo_refuses_the_first_commit_and_an_empty_branch() {
    let repo = TempRepo::empty();
    let session = GitSession::new(repo.path(), SESSION).unwrap();
    let err = session.undo_last_commit().unwrap_err();
    assert!(matches!(err, GitError::NoCommits), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the branch has no commits yet, so there is no commit to undo"
    );
    repo.write("a.txt", "a\n");
    let output = run(&repo, "git_commit", json!({"message": "First"})).await;
    assert!(!output.is_error, "{output:?}");
    let head = repo.head();
    let err = session.undo_last_commit().unwrap_err();
    assert_eq!(
        repo.redact_commits(&err.to_string()),
        "refusing to undo <short> (\"First\"): it is the first commit of the repository, so \
         there is no parent commit to move back to"
    );
    assert_eq!(repo.head(), head);
}

#[test]
fn session_ids_must_fit_in_a_reference() {
    isolate_config();
    for (id, reason) in [
        ("", "it is empty"),
        ("a/b", "it contains '/'"),
        ("a b", "it contains whitespace or control characters"),
        ("a\nb", "it contains whitespace or control characters"),
        ("a..b", "it cannot be part of a git reference name"),
        ("x.lock", "it cannot be part of a git reference name"),
    ] {
        let err = GitSession::new("/tmp", id).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("invalid session id {id:?}: {reason}")
        );
    }
    let session = GitSession::new("/tmp", "2024-05-01T10:00:00Z_abc").unwrap_err();
    assert!(matches!(session, GitError::InvalidSessionId { .. }));
    assert!(GitSession::new("/tmp", "01HX3Z-abc_9").is_ok());
}

#[tokio::test]
async fn git_repositories_inside_the_work_tree_are_left_out() {
    let repo = TempRepo::new();
    let nested = repo.path().join("vendor/dep");
    std::fs::create_dir_all(&nested).unwrap();
    git2::Repository::init(&nested).unwrap();
    std::fs::write(nested.join("f.txt"), "f\n").unwrap();
    repo.write("vendor/notes.txt", "n\n");

    let output = run(&repo, "git_commit", json!({"message": "Add notes"})).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(
        repo.redact_commits(&output.content),
        "committed <short> on branch main: Add notes\n\
         1 file changed, 1 insertion(+), 0 deletions(-)\n  \
         new file: vendor/notes.txt\n\
         left out (git repositories of their own; add them as submodules from the shell if you \
         mean to): vendor/dep/"
    );
    let output = run(&repo, "git_commit", json!({"message": "Again"})).await;
    assert!(output.is_error);
    assert!(
        output.content.ends_with("check git_status\nleft out (git repositories of their own; add them as submodules from the shell if you mean to): vendor/dep/"),
        "{}",
        output.content
    );
}
