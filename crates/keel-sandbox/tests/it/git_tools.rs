//! The git tools and session helpers, on real temporary repositories.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use git2::Status;
use keel_provider::{ToolCall, ToolInput};
use keel_sandbox::PathSandbox;
use keel_sandbox::git::{GitError, GitSession};
use keel_sandbox::tools::{GitCommit, GitCommitArgs, GitDiff, GitStatus};
use keel_test_support::git::{TempRepo, isolate_config};
use keel_test_support::temp::temp_dir;
use keel_tool::{
    CancellationToken, Effect, Tool, ToolContext, ToolError, ToolOutput, ToolRegistry,
};
use serde_json::{Value, json};

const SESSION: &str = "session-1";

fn registry(root: &std::path::Path) -> ToolRegistry {
    let sandbox = Arc::new(PathSandbox::new(root).unwrap());
    ToolRegistry::new()
        .with(GitStatus::new(Arc::clone(&sandbox)))
        .unwrap()
        .with(GitDiff::new(Arc::clone(&sandbox)))
        .unwrap()
        .with(GitCommit::new(sandbox))
        .unwrap()
}

async fn run_in(root: &std::path::Path, session: &str, name: &str, input: Value) -> ToolOutput {
    let ctx = ToolContext::new(root, session);
    let call = ToolCall {
        id: "call_1",
        name,
        input: ToolInput::Valid(&input),
    };
    registry(root).dispatch(call, &ctx).await
}

async fn run(repo: &TempRepo, name: &str, input: Value) -> ToolOutput {
    run_in(&repo.path(), SESSION, name, input).await
}

#[test]
fn tool_definitions() {
    let dir = temp_dir();
    for definition in registry(dir.path()).definitions() {
        keel_tool::validate_definition(&definition).unwrap();
        insta::assert_json_snapshot!(format!("definition_{}", definition.name), definition);
    }
}

#[test]
fn effects() {
    let dir = temp_dir();
    let registry = registry(dir.path());
    let effect = |name: &str, input: Value| {
        registry.effect(ToolCall {
            id: "c",
            name,
            input: ToolInput::Valid(&input),
        })
    };
    assert_eq!(effect("git_status", json!({})), Effect::ReadOnly);
    assert_eq!(
        effect("git_diff", json!({"staged": true, "path": "src"})),
        Effect::ReadOnly
    );
    assert_eq!(
        effect(
            "git_commit",
            json!({"message": "Fix the parser\n\nDetails."})
        ),
        Effect::destructive(
            "stages every change in the work tree (git add -A) and commits it: \"Fix the parser\""
        )
    );
}

// ---------------------------------------------------------------------------------------------
// git_status

#[tokio::test]
async fn status_clean() {
    let repo = TempRepo::new();
    let output = run(&repo, "git_status", json!({})).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(
        output.content,
        "On branch main (no upstream branch)\n\
         clean: nothing to commit (no staged, unstaged or untracked changes)"
    );
    assert_eq!(output.metadata["clean"], true);
    // Ignored files do not make it dirty.
    repo.write(".gitignore", "*.log\n");
    repo.commit("ignore logs");
    repo.write("debug.log", "noise\n");
    let output = run(&repo, "git_status", json!({})).await;
    assert!(
        output.content.contains("clean: nothing to commit"),
        "{}",
        output.content
    );
}

#[tokio::test]
async fn status_lists_staged_unstaged_and_untracked() {
    let repo = TempRepo::with_every_change();
    let output = run(&repo, "git_status", json!({})).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(output.metadata["clean"], false);
    assert_eq!(output.metadata["staged"], 3);
    assert_eq!(output.metadata["unstaged"], 3);
    assert_eq!(output.metadata["untracked"], 2);
    insta::assert_snapshot!("status_dirty", output.content);
}

#[tokio::test]
async fn status_untracked_only_and_staged_only() {
    let repo = TempRepo::new();
    repo.write("new.txt", "x\n");
    let output = run(&repo, "git_status", json!({})).await;
    assert_eq!(
        output.content,
        "On branch main (no upstream branch)\nUntracked (1):\n  new.txt"
    );
    repo.stage("new.txt");
    let output = run(&repo, "git_status", json!({})).await;
    assert_eq!(
        output.content,
        "On branch main (no upstream branch)\nStaged (1):\n  new file: new.txt"
    );
}

#[tokio::test]
async fn status_ahead_and_behind_upstream() {
    let repo = TempRepo::new();
    let git = repo.repo();
    let base = git.find_commit(repo.head()).unwrap();
    git.branch("base", &base, false).unwrap();
    git.find_branch("main", git2::BranchType::Local)
        .unwrap()
        .set_upstream(Some("base"))
        .unwrap();
    let output = run(&repo, "git_status", json!({})).await;
    assert!(
        output
            .content
            .starts_with("On branch main (up to date with base)\n"),
        "{}",
        output.content
    );
    repo.write("a.txt", "a\n");
    repo.commit("a");
    repo.write("b.txt", "b\n");
    repo.commit("b");
    let output = run(&repo, "git_status", json!({})).await;
    assert!(
        output
            .content
            .starts_with("On branch main (ahead of base by 2 commits)\n"),
        "{}",
        output.content
    );
    assert_eq!(output.metadata["ahead"], 2);
    assert_eq!(output.metadata["behind"], 0);
    // A commit on base that main lacks.
    let signature = git2::Signature::now("Other", "other@example.com").unwrap();
    let tree = base.tree().unwrap();
    git.commit(
        Some("refs/heads/base"),
        &signature,
        &signature,
        "on base",
        &tree,
        &[&base],
    )
    .unwrap();
    let output = run(&repo, "git_status", json!({})).await;
    assert!(
        output
            .content
            .starts_with("On branch main (diverged from base: 2 ahead, 1 behind)\n"),
        "{}",
        output.content
    );
    assert_eq!(output.metadata["behind"], 1);
}

#[tokio::test]
async fn status_on_an_unborn_branch_and_detached_head() {
    let repo = TempRepo::empty();
    repo.write("first.txt", "1\n");
    let output = run(&repo, "git_status", json!({})).await;
    assert_eq!(
        output.content,
        "On branch main (no commits yet)\nUntracked (1):\n  first.txt"
    );
    let repo = TempRepo::new();
    let head = repo.head();
    repo.repo().set_head_detached(head).unwrap();
    let output = run(&repo, "git_status", json!({})).await;
    assert_eq!(
        repo.redact_commits(&output.content),
        "HEAD detached at <short> (not on a branch)\n\
         clean: nothing to commit (no staged, unstaged or untracked changes)"
    );
}

#[tokio::test]
async fn paths_are_relative_to_the_workspace_root() {
    let repo = TempRepo::new();
    repo.write("app/Cargo.toml", "[package]\n");
    repo.commit("app");
    repo.write("app/src/x.rs", "x\n");
    repo.write("other.txt", "o\n");
    let root = repo.path().join("app");
    let output = run_in(&root, SESSION, "git_status", json!({})).await;
    assert_eq!(
        output.content,
        "On branch main (no upstream branch)\nUntracked (2):\n  src/\n  ../other.txt"
    );
    repo.commit("more");
    repo.write("app/src/x.rs", "y\n");
    let output = run_in(&root, SESSION, "git_diff", json!({"path": "src"})).await;
    assert!(output.content.contains("+y\n"), "{}", output.content);
    let output = run_in(&root, SESSION, "git_diff", json!({"path": "../other.txt"})).await;
    assert!(output.is_error, "{output:?}");
    assert_eq!(
        output.content,
        "not allowed: ../other.txt: outside the workspace (and not in a directory allowed for \
         reading)"
    );
}

// ---------------------------------------------------------------------------------------------
// git_diff

#[tokio::test]
async fn diff_unstaged_and_staged() {
    let repo = TempRepo::with_every_change();
    let output = run(&repo, "git_diff", json!({})).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(output.metadata["truncated"], false);
    insta::assert_snapshot!("diff_unstaged", output.content);
    let output = run(&repo, "git_diff", json!({"staged": true})).await;
    assert!(!output.is_error, "{output:?}");
    insta::assert_snapshot!("diff_staged", output.content);
}

#[tokio::test]
async fn diff_limited_to_a_path() {
    let repo = TempRepo::with_every_change();
    let output = run(&repo, "git_diff", json!({"path": "src/lib.rs"})).await;
    assert!(
        output
            .content
            .starts_with("1 file changed, 1 insertion(+), 1 deletion(-)\n")
    );
    assert!(
        output
            .content
            .contains("diff --git a/src/lib.rs b/src/lib.rs")
    );
    assert!(!output.content.contains("gone.txt"), "{}", output.content);
    // A directory covers the files under it, and only them.
    repo.write("src/main.rs", "fn main() { run() }\n");
    let output = run(&repo, "git_diff", json!({"path": "src"})).await;
    assert!(
        output.content.starts_with("2 files changed"),
        "{}",
        output.content
    );
    assert!(!output.content.contains("gone.txt"), "{}", output.content);
    // A deleted file can still be named.
    let output = run(&repo, "git_diff", json!({"path": "gone.txt"})).await;
    assert!(
        output.content.contains("-about to be deleted"),
        "{}",
        output.content
    );
    // A path prefix of another name is not a directory of it.
    let output = run(&repo, "git_diff", json!({"path": "src/lib"})).await;
    assert!(
        output.content.starts_with("no changes in src/lib"),
        "{}",
        output.content
    );
    // Staged, limited.
    let output = run(
        &repo,
        "git_diff",
        json!({"staged": true, "path": "added.txt"}),
    )
    .await;
    assert!(
        output
            .content
            .starts_with("1 file changed, 1 insertion(+), 0 deletions(-)\n")
    );
    // Outside the workspace.
    let output = run(&repo, "git_diff", json!({"path": "/etc/passwd"})).await;
    assert!(output.is_error);
    assert!(
        output.content.contains("outside the workspace"),
        "{}",
        output.content
    );
}

#[tokio::test]
async fn diff_without_changes() {
    let repo = TempRepo::new();
    repo.write("untracked.txt", "u\n");
    let output = run(&repo, "git_diff", json!({})).await;
    assert!(!output.is_error);
    assert_eq!(
        output.content,
        "no changes: the work tree matches the index (for staged changes use staged: true; \
         untracked files are listed by git_status)"
    );
    let output = run(&repo, "git_diff", json!({"staged": true})).await;
    assert_eq!(
        output.content,
        "no changes: nothing is staged (the index matches HEAD)"
    );
    let output = run(&repo, "git_diff", json!({"path": "README.md"})).await;
    assert!(output.content.starts_with("no changes in README.md: "));
}

#[tokio::test]
async fn staged_diff_on_an_unborn_branch_is_against_the_empty_tree() {
    let repo = TempRepo::empty();
    repo.write("first.txt", "line one\nline two\n");
    repo.stage("first.txt");
    let output = run(&repo, "git_diff", json!({"staged": true})).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(
        output.content,
        "1 file changed, 2 insertions(+), 0 deletions(-)\n\n\
         diff --git a/first.txt b/first.txt\n\
         new file mode 100644\n\
         index 0000000..e5c5c55\n\
         --- /dev/null\n\
         +++ b/first.txt\n\
         @@ -0,0 +1,2 @@\n\
         +line one\n\
         +line two\n"
    );
}

#[tokio::test]
async fn long_diffs_are_cut_with_a_note() {
    let repo = TempRepo::new();
    for name in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        repo.write(name, "original\n");
    }
    repo.commit("files");
    let big: String = (0..2000).map(|i| format!("changed line {i}\n")).collect();
    for name in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        repo.write(name, &big);
    }
    let output = run(&repo, "git_diff", json!({})).await;
    assert!(!output.is_error);
    assert_eq!(output.metadata["truncated"], true);
    assert!(
        output.content.chars().count() < 21_000,
        "{}",
        output.content.len()
    );
    assert!(
        output
            .content
            .starts_with("4 files changed, 8000 insertions(+), 4 deletions(-)\n")
    );
    let note = output.content.lines().last().unwrap();
    assert_eq!(
        note,
        "[diff cut at 20000 characters: 1 of 4 files shown (the last perhaps in part); not \
         shown: b.txt, c.txt, d.txt. Pass path to see one file or directory at a time.]"
    );
    // Cut between lines.
    let body = output.content.lines().rev().nth(2).unwrap();
    assert!(body.starts_with("+changed line "), "{body}");
}

// ---------------------------------------------------------------------------------------------
// git_commit

#[tokio::test]
async fn commit_stages_new_modified_and_deleted_files_but_not_ignored_ones() {
    let repo = TempRepo::with_every_change();
    let before = repo.head();
    let output = run(
        &repo,
        "git_commit",
        json!({"message": "Rework the sources\n\nAnd tidy up."}),
    )
    .await;
    assert!(!output.is_error, "{output:?}");
    insta::assert_snapshot!("commit_output", repo.redact_commits(&output.content));
    // Everything is committed; ignored files stay out and stay on disk.
    assert_eq!(repo.status(), Vec::<(String, Status)>::new());
    let git = repo.repo();
    let head = git.find_commit(repo.head()).unwrap();
    assert_eq!(head.parent_id(0).unwrap(), before);
    assert_eq!(head.author().name().ok(), Some("Test User"));
    assert_eq!(head.author().email().ok(), Some("test@example.com"));
    assert_eq!(
        repo.head_message(),
        "Rework the sources\n\nAnd tidy up.\n\nKeel-Session: session-1\n"
    );
    let files: Vec<String> = repo
        .tree_files(head.id())
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    assert_eq!(
        files,
        [
            ".gitignore",
            "README.md",
            "added.txt",
            "docs/guide.md",
            "new_name.txt",
            "notes.md",
            "src/lib.rs",
            "src/main.rs",
            "staged_then_edited.txt",
        ]
    );
    assert!(
        repo.tree_files(head.id())
            .contains(&("staged_then_edited.txt".into(), "v3\n".into()))
    );
    assert_eq!(repo.read("build.log"), "ignored\n");
    assert_eq!(output.metadata["files"], 7);
    assert_eq!(output.metadata["fallback_identity"], false);
}

#[tokio::test]
async fn commit_refuses_an_empty_message() {
    let repo = TempRepo::new();
    repo.write("a.txt", "a\n");
    for message in ["", "  \n\n ", "Keel-Session: someone-else"] {
        let output = run(&repo, "git_commit", json!({"message": message})).await;
        assert!(output.is_error, "{message:?}: {output:?}");
        assert_eq!(
            output.content,
            "invalid arguments: the commit message is empty; give a short summary of the change \
             (a line of up to about 70 characters, then details after a blank line if useful)"
        );
    }
    // Nothing was staged by the refused calls.
    assert_eq!(repo.status(), [("a.txt".to_owned(), Status::WT_NEW)]);
}

#[tokio::test]
async fn commit_with_nothing_to_commit() {
    let repo = TempRepo::new();
    repo.write(".gitignore", "*.log\n");
    repo.commit("ignore logs");
    repo.write("debug.log", "ignored\n");
    let index_before = repo.index_bytes();
    let output = run(&repo, "git_commit", json!({"message": "Nothing"})).await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "nothing to commit: the work tree matches HEAD (ignored files are never committed); make \
         changes first, or check git_status"
    );
    assert_eq!(repo.index_bytes(), index_before);
    // On an unborn branch with no files either.
    let repo = TempRepo::empty();
    let output = run(&repo, "git_commit", json!({"message": "Nothing"})).await;
    assert!(
        output.content.starts_with("nothing to commit"),
        "{output:?}"
    );
}

#[tokio::test]
async fn commit_replaces_a_forged_session_trailer() {
    let repo = TempRepo::new();
    repo.write("a.txt", "a\n");
    let output = run(
        &repo,
        "git_commit",
        json!({"message": "Add a\n\nKeel-Session: someone-else\n"}),
    )
    .await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(repo.head_message(), "Add a\n\nKeel-Session: session-1\n");
}

#[tokio::test]
async fn commit_falls_back_to_the_keel_identity() {
    let repo = TempRepo::without_identity();
    repo.write("a.txt", "a\n");
    let output = run(&repo, "git_commit", json!({"message": "Add a"})).await;
    assert!(!output.is_error, "{output:?}");
    assert_eq!(
        repo.redact_commits(&output.content),
        "committed <short> on branch main: Add a\n\
         1 file changed, 1 insertion(+), 0 deletions(-)\n  \
         new file: a.txt\n\
         author: keel <keel@localhost> (the repository configures no user.name/user.email)"
    );
    let git = repo.repo();
    let head = git.find_commit(repo.head()).unwrap();
    assert_eq!(head.author().name().ok(), Some("keel"));
    assert_eq!(head.committer().email().ok(), Some("keel@localhost"));
    assert_eq!(output.metadata["fallback_identity"], true);
}

#[tokio::test]
async fn a_cancelled_commit_commits_nothing() {
    let repo = TempRepo::new();
    let head = repo.head();
    repo.write("a.txt", "a\n");
    let index_before = repo.index_bytes();
    let sandbox = Arc::new(PathSandbox::new(repo.path()).unwrap());
    let cancel = CancellationToken::new();
    cancel.cancel();
    let ctx = ToolContext::new(repo.path(), SESSION).with_cancel(cancel);
    let args = GitCommitArgs {
        message: "Add a".into(),
    };
    let err = GitCommit::new(sandbox).call(args, &ctx).await.unwrap_err();
    assert!(matches!(err, ToolError::Cancelled), "{err:?}");
    assert_eq!(repo.head(), head);
    assert_eq!(repo.index_bytes(), index_before);
}

#[tokio::test]
async fn the_first_commit_on_an_unborn_branch() {
    let repo = TempRepo::empty();
    repo.write("src/a.rs", "a\n");
    let output = run(&repo, "git_commit", json!({"message": "Start"})).await;
    assert!(!output.is_error, "{output:?}");
    assert!(output.content.starts_with("committed "));
    assert_eq!(
        repo.repo().find_commit(repo.head()).unwrap().parent_count(),
        0
    );
    assert_eq!(
        repo.tree_files(repo.head()),
        [("src/a.rs".into(), "a\n".into())]
    );
}

#[tokio::test]
async fn a_conflicted_merge_is_shown_and_blocks_commit_and_undo() {
    let repo = TempRepo::new();
    let git = repo.repo();
    let base = git.find_commit(repo.head()).unwrap();
    git.branch("other", &base, false).unwrap();
    repo.write("README.md", "# main\n");
    repo.commit("main change");
    let signature = git2::Signature::now("Other", "other@example.com").unwrap();
    let blob = git.blob(b"# other\n").unwrap();
    let mut builder = git.treebuilder(Some(&base.tree().unwrap())).unwrap();
    builder.insert("README.md", blob, 0o100_644).unwrap();
    let tree = git.find_tree(builder.write().unwrap()).unwrap();
    git.commit(
        Some("refs/heads/other"),
        &signature,
        &signature,
        "other change",
        &tree,
        &[&base],
    )
    .unwrap();
    let other = git.find_reference("refs/heads/other").unwrap();
    let other = git.reference_to_annotated_commit(&other).unwrap();
    git.merge(&[&other], None, None).unwrap();
    let head = repo.head();

    let output = run(&repo, "git_status", json!({})).await;
    assert_eq!(
        output.content,
        "On branch main (no upstream branch)\n\
         A merge is in progress: finish it (`git merge --continue`) or abort it (`git merge \
         --abort`) from the shell; git_commit refuses until then.\n\
         Conflicted (1):\n  \
         README.md"
    );
    assert_eq!(output.metadata["conflicted"], 1);
    let output = run(&repo, "git_commit", json!({"message": "Merge"})).await;
    assert!(output.is_error);
    assert_eq!(
        output.content,
        "a merge is in progress in this repository; finish it (`git merge --continue`) or abort \
         it (`git merge --abort`) from the shell first"
    );
    let err = GitSession::new(repo.path(), SESSION)
        .unwrap()
        .undo_last_commit()
        .unwrap_err();
    assert!(
        matches!(err, GitError::InProgress { state: "merge" }),
        "{err:?}"
    );
    assert_eq!(repo.head(), head);
}

#[tokio::test]
async fn every_tool_says_when_there_is_no_repository() {
    isolate_config();
    let dir = temp_dir();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let expected = format!(
        "not a git repository: {} (nor any of its parent directories); run `git init` there \
         first, or work without the git tools",
        root.display()
    );
    for (name, input) in [
        ("git_status", json!({})),
        ("git_diff", json!({"staged": true})),
        ("git_commit", json!({"message": "x"})),
    ] {
        let output = run_in(&root, SESSION, name, input).await;
        assert!(output.is_error, "{name}");
        assert_eq!(output.content, expected, "{name}");
    }
    let session = GitSession::new(&root, SESSION).unwrap();
    assert_eq!(
        session.undo_last_commit().unwrap_err().to_string(),
        expected
    );
}
