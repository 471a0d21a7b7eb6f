//! The project context keel-agents builds for the system prompt: the engine's instruction
//! files and date, with the repository's git state read with libgit2.
#![cfg(feature = "git")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use keel_agents::{project_context, project_root};
use keel_engine::{GitSummary, system_prompt};
use keel_test_support::git::{TempRepo, isolate_config};

#[test]
fn the_project_root_is_the_work_tree() {
    let repo = TempRepo::new();
    repo.write("crates/app/keep.txt", "");
    let root = project_root(&repo.path().join("crates/app"));
    assert_eq!(
        std::fs::canonicalize(root).unwrap(),
        std::fs::canonicalize(repo.path()).unwrap()
    );
    isolate_config();
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(project_root(dir.path()), dir.path());
}

#[test]
fn instructions_come_with_the_git_state() {
    let repo = TempRepo::new();
    repo.write("AGENTS.md", "rules\n");
    let context = project_context(&repo.path(), &repo.path());
    assert_eq!(context.instructions.len(), 1);
    assert!(context.date.is_some());
    assert!(context.git.is_some());
}

#[test]
fn a_root_below_the_work_tree_still_finds_its_repository() {
    // The repository is opened where `root` is and, failing that, searched for upwards.
    let repo = TempRepo::new();
    repo.write("crates/app/keep.txt", "");
    repo.commit("first");
    let below = repo.path().join("crates/app");
    let git = project_context(&below, &below).git.unwrap();
    assert_eq!(git.branch.as_deref(), Some("main"));
    assert_eq!(
        git.recent_commits.first().map(String::as_str),
        Some("first")
    );
}

#[test]
fn git_branch_head_and_recent_commits() {
    let repo = TempRepo::new();
    for subject in ["two", "three", "four", "five", "six"] {
        repo.write("churn.txt", subject);
        repo.commit(subject);
    }
    let git = project_context(&repo.path(), &repo.path()).git.unwrap();
    assert_eq!(git.branch.as_deref(), Some("main"));
    let head = repo.head().to_string();
    let short = git.head.clone().unwrap();
    assert!(
        short.len() >= 7 && head.starts_with(&short),
        "{short} vs {head}"
    );
    assert_eq!(git.recent_commits, ["six", "five", "four", "three", "two"]);
    assert_eq!(git.status, "clean");
}

#[test]
fn git_status_counts_every_kind_of_change_but_ignored() {
    let repo = TempRepo::with_every_change();
    let git = project_context(&repo.path(), &repo.path()).git.unwrap();
    // staged: added.txt, old_name.txt (deleted), new_name.txt (added), staged_then_edited.txt;
    // modified: src/lib.rs, staged_then_edited.txt, gone.txt; untracked: notes.md,
    // docs/guide.md; the ignored target/ and build.log are not counted.
    assert_eq!(git.status, "4 staged, 3 modified, 2 untracked");
}

#[test]
fn a_large_repository_s_status_is_left_to_git_status_and_untracked_dirs_count_once() {
    let repo = TempRepo::new();
    let files = keel_agents::STATUS_MAX_TRACKED as usize + 1;
    for n in 0..files {
        repo.write(&format!("src/f{n}.txt"), "x\n");
    }
    repo.commit("many files");
    // Changes that a status would count: it is not read.
    repo.write("src/f0.txt", "changed\n");
    let git = project_context(&repo.path(), &repo.path()).git.unwrap();
    let tracked = files + 1; // and the README every TempRepo starts with
    assert_eq!(
        git.status,
        format!("status not read at start ({tracked} tracked files; git_status reads it)")
    );
    assert_eq!(
        git.recent_commits.first().map(String::as_str),
        Some("many files")
    );

    // At the limit or below, it is read; a directory of untracked files counts once.
    let small = TempRepo::new();
    for n in 0..50 {
        small.write(&format!("node_modules/pkg{n}/index.js"), "x\n");
    }
    let git = project_context(&small.path(), &small.path()).git.unwrap();
    assert_eq!(git.status, "1 untracked");
}

#[test]
fn git_status_counts_conflicts() {
    let repo = TempRepo::new();
    repo.write("a.txt", "base\n");
    repo.stage("a.txt");
    let git2_repo = repo.repo();
    let mut index = git2_repo.index().unwrap();
    let entry = index.get_path(std::path::Path::new("a.txt"), 0).unwrap();
    index.remove_path(std::path::Path::new("a.txt")).unwrap();
    for stage in 1..=3u16 {
        let conflicted = git2::IndexEntry {
            ctime: entry.ctime,
            mtime: entry.mtime,
            dev: entry.dev,
            ino: entry.ino,
            mode: entry.mode,
            uid: entry.uid,
            gid: entry.gid,
            file_size: entry.file_size,
            id: entry.id,
            flags: (entry.flags & !0x3000) | (stage << 12),
            flags_extended: entry.flags_extended,
            path: entry.path.clone(),
        };
        index.add(&conflicted).unwrap();
    }
    index.write().unwrap();
    let git = project_context(&repo.path(), &repo.path()).git.unwrap();
    assert_eq!(git.status, "1 conflicted");
}

#[test]
fn a_clean_repository() {
    let repo = TempRepo::new();
    let git = project_context(&repo.path(), &repo.path()).git.unwrap();
    assert_eq!(git.status, "clean");
    assert_eq!(git.recent_commits, ["initial commit"]);
}

#[test]
fn a_detached_head_names_the_commit() {
    let repo = TempRepo::new();
    let head = repo.head();
    repo.repo().set_head_detached(head).unwrap();
    let context = project_context(&repo.path(), &repo.path());
    let git = context.git.clone().unwrap();
    assert_eq!(git.branch, None);
    let short = git.head.unwrap();
    assert!(head.to_string().starts_with(&short));
    assert!(system_prompt(&context).contains(&format!("- Git: detached HEAD at {short}; clean")));
}

#[test]
fn an_unborn_branch_has_no_commits() {
    let repo = TempRepo::empty();
    repo.write("new.rs", "fn main() {}\n");
    let context = project_context(&repo.path(), &repo.path());
    let git = context.git.clone().unwrap();
    assert_eq!(
        git,
        GitSummary {
            branch: Some("main".into()),
            head: None,
            status: "1 untracked".into(),
            recent_commits: Vec::new(),
        }
    );
    assert!(system_prompt(&context).contains("- Git: branch main (no commits yet); 1 untracked"));
}

#[test]
fn outside_a_repository_there_is_no_git() {
    isolate_config();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "rules\n").unwrap();
    let context = project_context(dir.path(), dir.path());
    assert_eq!(context.git, None);
    assert_eq!(context.instructions.len(), 1);
    assert!(system_prompt(&context).contains("- Git: not a git repository\n"));
}
