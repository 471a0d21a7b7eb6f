//! The session git helpers: checkpoints and undoing this session's last commit, on real
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

#[test]
fn checkpoints_record_uncommitted_work_without_touching_anything() {
    let repo = TempRepo::with_every_change();
    let head = repo.head();
    let files = |repo: &TempRepo| {
        let mut found = Vec::new();
        for entry in std::fs::read_dir(repo.path())
            .unwrap()
            .chain(std::fs::read_dir(repo.path().join("src")).unwrap())
        {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_file() {
                let meta = entry.metadata().unwrap();
                found.push((
                    entry.path(),
                    std::fs::read(entry.path()).unwrap(),
                    meta.modified().unwrap(),
                ));
            }
        }
        found.sort();
        found
    };
    let status = repo.status();
    let index_entries = repo.index_entries();
    let index_bytes = repo.index_bytes();
    let on_disk = files(&repo);

    let session = GitSession::new(repo.path(), SESSION).unwrap();
    let checkpoint = session.checkpoint().unwrap();

    assert_eq!(repo.status(), status);
    assert_eq!(repo.index_entries(), index_entries);
    assert_eq!(repo.index_bytes(), index_bytes);
    assert_eq!(files(&repo), on_disk);
    assert_eq!(repo.head(), head);

    assert_eq!(checkpoint.id, "session-1/1");
    assert_eq!(checkpoint.reference, "refs/keel/checkpoints/session-1/1");
    assert_eq!(checkpoint.parent, Some(head.to_string()));
    let git = repo.repo();
    let commit = git
        .find_reference(&checkpoint.reference)
        .unwrap()
        .peel_to_commit()
        .unwrap();
    assert_eq!(commit.id().to_string(), checkpoint.commit);
    assert_eq!(commit.tree_id().to_string(), checkpoint.tree);
    assert_eq!(commit.parent_ids().collect::<Vec<_>>(), [head]);
    assert_eq!(
        repo.tree_files(commit.id()),
        [
            (".gitignore".into(), "target/\n*.log\n".into()),
            ("README.md".into(), "# test\n".into()),
            ("added.txt".into(), "new\n".into()),
            ("docs/guide.md".into(), "guide\n".into()),
            ("new_name.txt".into(), "renamed content\n".into()),
            ("notes.md".into(), "todo\n".into()),
            (
                "src/lib.rs".into(),
                "pub fn one() -> u32 {\n    2\n}\n".into()
            ),
            ("src/main.rs".into(), "fn main() {}\n".into()),
            ("staged_then_edited.txt".into(), "v3\n".into()),
        ]
    );

    // The next one is numbered on; both are listed.
    repo.write("notes.md", "done\n");
    let second = session.checkpoint().unwrap();
    assert_eq!(second.id, "session-1/2");
    assert!(
        repo.tree_files(second.commit.parse().unwrap())
            .contains(&("notes.md".into(), "done\n".into()))
    );
    let listed = session.checkpoints().unwrap();
    assert_eq!(listed, [checkpoint, second]);
    // Another session's are its own.
    let other = GitSession::new(repo.path(), "session-2").unwrap();
    assert_eq!(other.checkpoints().unwrap(), []);
    assert_eq!(other.checkpoint().unwrap().id, "session-2/1");
}

#[test]
fn a_checkpoint_on_an_unborn_branch_has_no_parent() {
    let repo = TempRepo::empty();
    repo.write("a.txt", "a\n");
    repo.write("staged.txt", "s\n");
    repo.stage("staged.txt");
    let index_bytes = repo.index_bytes();
    let checkpoint = GitSession::new(repo.path(), SESSION)
        .unwrap()
        .checkpoint()
        .unwrap();
    assert_eq!(checkpoint.parent, None);
    assert_eq!(
        repo.tree_files(checkpoint.commit.parse().unwrap()),
        [
            ("a.txt".into(), "a\n".into()),
            ("staged.txt".into(), "s\n".into())
        ]
    );
    assert_eq!(repo.index_bytes(), index_bytes);
    assert!(repo.repo().head().is_err(), "the branch is still unborn");
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

    let checkpoint = GitSession::new(repo.path(), SESSION)
        .unwrap()
        .checkpoint()
        .unwrap();
    assert_eq!(checkpoint.left_out, ["vendor/dep/"]);
    assert_eq!(
        repo.tree_files(checkpoint.commit.parse().unwrap()),
        [
            ("README.md".into(), "# test\n".into()),
            ("vendor/notes.txt".into(), "n\n".into())
        ]
    );

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
